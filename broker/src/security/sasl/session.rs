//! One SASL connection's authentication, run in its read loop so its frames are taken in the
//! order sent (Kafka's `SaslServerAuthenticator`). Before authentication only ApiVersions,
//! SaslHandshake (v0, v1) and SaslAuthenticate are served: any other request is answered
//! ILLEGAL_SASL_STATE where its response has a top-level error code, and the connection is
//! closed (Kafka closes it). After SaslHandshake v0 the tokens are raw length-prefixed frames
//! without a Kafka header (Kafka's legacy mode). A failed login is answered
//! SASL_AUTHENTICATION_FAILED and the connection closed after the response. KIP-152: with
//! `connections.max.reauth.ms` > 0 the session has a lifetime, the client may authenticate
//! again on the open connection (as the same principal), and a request after the session
//! expired closes the connection.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_compat::codec::{self, Request};
use kafka_compat::error_code::{ILLEGAL_SASL_STATE, SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM};
use kafka_compat::principal::KafkaPrincipal;
use kafka_protocol::messages::{
    ApiKey, DescribeAclsResponse, DescribeClusterResponse, FindCoordinatorResponse, HeartbeatResponse,
    InitProducerIdResponse, JoinGroupResponse, LeaveGroupResponse, ListGroupsResponse, RequestKind,
    ResponseKind, SaslAuthenticateResponse, SaslHandshakeResponse, SyncGroupResponse,
};
use kafka_protocol::protocol::StrBytes;
use tokio::time::Instant;

use super::{served_mechanisms, server_for, AuthFailure, SaslServer, SaslView, Step};
use crate::config::security::SaslSettings;
use crate::net::incidents::ADDRESS_STATS;

/// What the read loop does with a frame.
pub enum Verdict {
    /// An ordinary request of an authenticated connection (or ApiVersions): route it.
    Route,
    /// The exchange's answer; the connection goes on.
    Answer(Bytes),
    /// The answer, then the connection is closed once it is written.
    AnswerAndClose(Bytes),
    /// Close without an answer, for this reason (logged by the caller).
    Close(String),
}

enum Stage {
    /// Waiting for SaslHandshake (ApiVersions allowed).
    Handshake,
    /// A mechanism chosen; its tokens come in SaslAuthenticate (or raw frames, `legacy`).
    Authenticate { server: Box<dyn SaslServer>, legacy: bool },
    /// Authenticated.
    Done,
}

pub struct Session {
    settings: SaslSettings,
    /// The node's credentials and attempt throttle.
    view: SaslView,
    peer: SocketAddr,
    stage: Stage,
    principal: Option<Arc<KafkaPrincipal>>,
    expires: Option<Instant>,
}

impl Session {
    pub fn new(settings: SaslSettings, view: SaslView, peer: SocketAddr) -> Self {
        Session { settings, view, peer, stage: Stage::Handshake, principal: None, expires: None }
    }

    /// The authenticated principal (the latest, after a re-authentication).
    pub fn principal(&self) -> Option<Arc<KafkaPrincipal>> {
        self.principal.clone()
    }

    pub fn on_frame(&mut self, frame: &Bytes) -> Verdict {
        if let Stage::Authenticate { legacy: true, .. } = self.stage {
            return self.legacy_token(frame);
        }
        let Ok(prefix) = codec::peek_prefix(frame) else {
            return Verdict::Close("frame too short for a request header".into());
        };
        let key = ApiKey::try_from(prefix.api_key).ok();
        if matches!(self.stage, Stage::Done) {
            let expired = self.expires.is_some_and(|at| Instant::now() >= at);
            let reauth = key == Some(ApiKey::SaslHandshake) && self.settings.reauth_ms > 0;
            if reauth {
                return self.handshake(frame);
            }
            if expired {
                return Verdict::Close(
                    "the SASL session expired (connections.max.reauth.ms) without re-authentication".into(),
                );
            }
            return Verdict::Route;
        }
        match (key, &self.stage) {
            (Some(ApiKey::ApiVersions), _) => Verdict::Route,
            (Some(ApiKey::SaslHandshake), Stage::Handshake) => self.handshake(frame),
            (Some(ApiKey::SaslAuthenticate), Stage::Authenticate { .. }) => self.authenticate(frame),
            (key, _) => {
                let why = format!("Unexpected Kafka request of type {key:?} during SASL handshake.");
                match illegal_state_response(prefix.api_key, prefix.api_version, prefix.correlation_id, &why)
                {
                    Some(bytes) => Verdict::AnswerAndClose(bytes),
                    None => Verdict::Close(why),
                }
            }
        }
    }

    fn handshake(&mut self, frame: &Bytes) -> Verdict {
        let Some(request) = decode(frame) else { return Verdict::Close("malformed SaslHandshake".into()) };
        let RequestKind::SaslHandshake(body) = &request.body else {
            return Verdict::Close("not a SaslHandshake".into());
        };
        let mechanism = body.mechanism.as_str().to_string();
        let offered: Vec<StrBytes> =
            served_mechanisms(&self.settings).into_iter().map(StrBytes::from_string).collect();
        let mut response = SaslHandshakeResponse::default().with_mechanisms(offered);
        let server = server_for(&mechanism, &self.settings, &self.view.applied);
        let close = server.is_none();
        match server {
            Some(server) => self.stage = Stage::Authenticate { server, legacy: request.api_version == 0 },
            None => response = response.with_error_code(UNSUPPORTED_SASL_MECHANISM),
        }
        match respond(&request, ResponseKind::SaslHandshake(response)) {
            Some(bytes) if close => Verdict::AnswerAndClose(bytes),
            Some(bytes) => Verdict::Answer(bytes),
            None => Verdict::Close("SaslHandshake response does not encode".into()),
        }
    }

    fn authenticate(&mut self, frame: &Bytes) -> Verdict {
        let Some(request) = decode(frame) else { return Verdict::Close("malformed SaslAuthenticate".into()) };
        let RequestKind::SaslAuthenticate(body) = &request.body else {
            return Verdict::Close("not a SaslAuthenticate".into());
        };
        let outcome = self.evaluate(&body.auth_bytes);
        let mut response = SaslAuthenticateResponse::default();
        let close = match outcome {
            Ok(Some(challenge)) => {
                response = response.with_auth_bytes(Bytes::from(challenge));
                false
            }
            Ok(None) => {
                response = response.with_session_lifetime_ms(self.settings.reauth_ms);
                false
            }
            Err(message) => {
                response = response
                    .with_error_code(SASL_AUTHENTICATION_FAILED)
                    .with_error_message(Some(StrBytes::from_string(message)));
                true
            }
        };
        match respond(&request, ResponseKind::SaslAuthenticate(response)) {
            Some(bytes) if close => Verdict::AnswerAndClose(bytes),
            Some(bytes) => Verdict::Answer(bytes),
            None => Verdict::Close("SaslAuthenticate response does not encode".into()),
        }
    }

    /// A raw token after SaslHandshake v0: answered with a raw length-prefixed token; a
    /// failure closes the connection without an answer, as Kafka does in this mode.
    fn legacy_token(&mut self, token: &Bytes) -> Verdict {
        match self.evaluate(token) {
            Ok(answer) => {
                let answer = answer.unwrap_or_default();
                let mut framed = BytesMut::with_capacity(4 + answer.len());
                framed.put_u32(answer.len() as u32);
                framed.extend_from_slice(&answer);
                Verdict::Answer(framed.freeze())
            }
            Err(message) => Verdict::Close(message),
        }
    }

    /// One client token: Ok(Some(challenge)) to go on, Ok(None) once authenticated (the
    /// final server token is empty for every mechanism served), Err(message) when it failed.
    fn evaluate(&mut self, token: &[u8]) -> Result<Option<Vec<u8>>, String> {
        let Stage::Authenticate { server, .. } = &mut self.stage else {
            return Err("no SASL exchange in progress".into());
        };
        let mechanism = server.mechanism();
        if !self.view.throttle.allow(self.peer.ip()) {
            let failure = AuthFailure {
                message: "Authentication failed: too many authentication attempts from this address".into(),
                user: None,
            };
            return Err(self.failed(mechanism, failure));
        }
        match server.evaluate(token) {
            Ok(Step::Challenge(challenge)) => Ok(Some(challenge)),
            Ok(Step::Complete { response, user }) => {
                let principal = Arc::new(KafkaPrincipal::user(user));
                if let Some(before) = self.principal.as_ref().filter(|p| p.as_ref() != principal.as_ref()) {
                    let message = format!(
                        "Cannot change principals during re-authentication from {before}: {principal}"
                    );
                    return Err(
                        self.failed(mechanism, AuthFailure { message, user: Some(principal.name.clone()) })
                    );
                }
                tracing::debug!(peer = %self.peer, %principal, mechanism, "SASL authentication succeeded");
                self.principal = Some(principal);
                self.stage = Stage::Done;
                self.expires = (self.settings.reauth_ms > 0)
                    .then(|| Instant::now() + Duration::from_millis(self.settings.reauth_ms as u64));
                Ok((!response.is_empty()).then_some(response))
            }
            Err(failure) => Err(self.failed(mechanism, failure)),
        }
    }

    /// Logs a failed login (rate-limited per address) and gives the client's message.
    fn failed(&mut self, mechanism: &str, failure: AuthFailure) -> String {
        let peer = self.peer;
        let principal =
            failure.user.as_deref().map(|u| format!("User:{u}")).unwrap_or_else(|| "unknown".into());
        ADDRESS_STATS.sasl_failures.record(peer.ip(), |t| {
            tracing::warn!(%peer, %principal, mechanism, suppressed = t.suppressed, total = t.total, "SASL authentication failed: {}", failure.message);
        });
        self.stage = Stage::Handshake;
        failure.message
    }
}

fn decode(frame: &Bytes) -> Option<Request> {
    codec::decode_request(frame.clone()).ok()
}

fn respond(request: &Request, body: ResponseKind) -> Option<Bytes> {
    codec::encode_response(request.api_key, request.api_version, request.header.correlation_id, &body).ok()
}

/// ILLEGAL_SASL_STATE in the response of a request sent before authentication, for the APIs
/// whose response has a top-level error code; `None` for the others, and for a version that
/// does not encode (closed unanswered).
fn illegal_state_response(api_key: i16, version: i16, correlation_id: i32, why: &str) -> Option<Bytes> {
    let key = ApiKey::try_from(api_key).ok()?;
    let message = Some(StrBytes::from_string(why.to_string()));
    let code = ILLEGAL_SASL_STATE;
    let body = match key {
        ApiKey::ListGroups => ResponseKind::ListGroups(ListGroupsResponse::default().with_error_code(code)),
        ApiKey::FindCoordinator if version < 4 => ResponseKind::FindCoordinator(
            FindCoordinatorResponse::default().with_error_code(code).with_error_message(message),
        ),
        ApiKey::DescribeCluster => ResponseKind::DescribeCluster(
            DescribeClusterResponse::default().with_error_code(code).with_error_message(message),
        ),
        ApiKey::InitProducerId => {
            ResponseKind::InitProducerId(InitProducerIdResponse::default().with_error_code(code))
        }
        ApiKey::Heartbeat => ResponseKind::Heartbeat(HeartbeatResponse::default().with_error_code(code)),
        ApiKey::JoinGroup => ResponseKind::JoinGroup(JoinGroupResponse::default().with_error_code(code)),
        ApiKey::SyncGroup => ResponseKind::SyncGroup(SyncGroupResponse::default().with_error_code(code)),
        ApiKey::LeaveGroup => ResponseKind::LeaveGroup(LeaveGroupResponse::default().with_error_code(code)),
        ApiKey::DescribeAcls => ResponseKind::DescribeAcls(
            DescribeAclsResponse::default().with_error_code(code).with_error_message(message),
        ),
        ApiKey::SaslAuthenticate => ResponseKind::SaslAuthenticate(
            SaslAuthenticateResponse::default().with_error_code(code).with_error_message(message),
        ),
        _ => return None,
    };
    codec::encode_response(key, version, correlation_id, &body).ok()
}
