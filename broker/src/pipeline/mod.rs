//! The request pipeline, the one way a Kafka request reaches its handler: lookup in the
//! registry → version check → decode → principal → the declared access check → forward when
//! the route is `Leader` and this node cannot propose → run → throttle → count. Everything it
//! knows about an API comes from the API's row of `handlers::HANDLERS` (`handlers::policy`).
//!
//! The listener calls [`dispatch`] in the connection's read loop, in request order. An ordered
//! handler's first stage runs there, so that requests of one connection reach the log in the
//! order they were sent (Kafka appends a connection's produce requests in order; librdkafka
//! pipelines them); the rest of every request runs in its own task.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use kafka_compat::codec::{self, DecodeError, Request};
use kafka_compat::principal::KafkaPrincipal;
use kafka_protocol::messages::{ApiKey, ResponseKind};
use tokio::time::Instant;

pub mod forwarded;

use crate::ctx::{Ctx, SharedCtx};
use crate::handlers::policy::{Access, Checked};
use crate::handlers::{api_versions, lookup, Handler, HandlerFuture, HandlerResult, Route, Run};
use crate::metrics::{self, METRICS};
use crate::net::exchange::{Dispatched, Incoming, Pending, Refused, Reply};
use crate::net::forward;
use crate::security::authz::{code, rt, Subject, CLUSTER_NAME};
use crate::security::quotas::request_time::Timed;

/// The pipeline as the listeners call it (`net::exchange::Dispatch`).
pub fn dispatch(ctx: SharedCtx, incoming: Incoming) -> Dispatched {
    Box::pin(route(ctx, incoming))
}

async fn route(ctx: SharedCtx, incoming: Incoming) -> Result<Pending, Refused> {
    let received = Instant::now();
    let Incoming { frame, memory, sender } = incoming;
    let prefix = codec::peek_prefix(&frame).map_err(|e| Refused::Malformed(e.to_string()))?;
    let Some(handler) = lookup(prefix.api_key) else {
        return Err(Refused::Malformed(format!("unknown api key {}", prefix.api_key)));
    };
    if let Some(answer) = unserved_version(handler, &prefix, &frame)? {
        return Ok(tokio::spawn(async move {
            drop(memory);
            Ok(Reply::unthrottled(answer))
        }));
    }
    let mut request =
        codec::decode_request(frame).map_err(|e: DecodeError| Refused::Malformed(e.to_string()))?;
    request.client_address = Some(sender.ip);
    request.listener = Some(sender.listener);
    request.principal = sender.principal;
    request.connection_id = sender.connection;
    let (key, version, corr) = (request.api_key, request.api_version, request.header.correlation_id);
    let metered = RequestMeter::new(&ctx, &request);
    let response: HandlerFuture = match handler.run {
        Run::Ordered(submit) => match refusal(&ctx, handler, &request) {
            Some(refused) => Box::pin(std::future::ready(Ok(Some(refused)))),
            None => match Timed::new(submit(ctx.clone(), request), metered.busy.clone()).await {
                Ok(rest) => rest,
                Err(e) => return Err(Refused::Failed(format!("{key:?} v{version}: {e:#}"))),
            },
        },
        Run::Concurrent(_) => Box::pin(serve(ctx.clone(), handler, request)),
    };
    let response = Timed::new(response, metered.busy.clone());
    Ok(tokio::spawn(async move {
        let response = response.await?;
        drop(memory);
        let hooks = &handler.hooks;
        let errors = response.as_ref().map(|body| hooks.error_codes(body)).unwrap_or_default();
        METRICS.request_answered(metrics::recorded::api_name(key), version, received.elapsed(), &errors);
        let request_throttle_ms = if hooks.request_quota { metered.throttle_ms() } else { 0 };
        let Some(mut body) = response else {
            return Ok(Reply { throttle_ms: request_throttle_ms, ..Reply::unthrottled(None) });
        };
        hooks.raise_throttle(&mut body, request_throttle_ms);
        Ok(Reply {
            bytes: Some(codec::encode_response(key, version, corr, &body)?),
            throttle_ms: hooks.throttle_ms(&body).max(request_throttle_ms),
            hold_response: version < hooks.client_waits_from,
        })
    }))
}

/// The answer to a version the registry does not serve, when Kafka answers one instead of
/// closing the connection; `Err` when it closes it.
fn unserved_version(
    handler: &Handler,
    prefix: &codec::RequestPrefix,
    frame: &Bytes,
) -> Result<Option<Option<Bytes>>, Refused> {
    let version = prefix.api_version;
    let malformed = Refused::Malformed;
    if handler.key == ApiKey::ApiVersions && version > handler.max_version {
        // KIP-511: answer in v0 with UNSUPPORTED_VERSION and our ranges.
        let answer = codec::encode_api_versions_fallback(prefix.correlation_id, api_versions::keys());
        return answer.map(|bytes| Some(Some(bytes))).map_err(|e| malformed(format!("{e:#}")));
    }
    if handler.key == ApiKey::Produce && version < handler.accepted_min_version {
        // Advertised-only versions still get an answer (every partition UNSUPPORTED_VERSION),
        // never a closed connection; api_version_sweep is the regression test.
        return kafka_compat::legacy_produce::unsupported_version_response(frame)
            .map(Some)
            .map_err(malformed);
    }
    if version < handler.accepted_min_version || version > handler.max_version {
        return Err(malformed(format!(
            "{:?} v{version} is not served (accepted v{}..=v{})",
            handler.key, handler.accepted_min_version, handler.max_version
        )));
    }
    Ok(None)
}

/// A concurrent handler's request past decoding, on the node the client sent it to or on the
/// leader a follower forwarded it to: the declared access check, the forward to the leader
/// where the route asks for one, then the handler.
pub async fn serve(ctx: SharedCtx, handler: &'static Handler, request: Request) -> HandlerResult {
    if let Some(refused) = refusal(&ctx, handler, &request) {
        return Ok(Some(refused));
    }
    if let Some(answer) = forwarded_answer(&ctx, handler, &request).await {
        return Ok(Some(answer));
    }
    match handler.run {
        Run::Concurrent(run) => run(ctx, request).await,
        Run::Ordered(_) => anyhow::bail!("{:?} is served by its ordered stages, not here", handler.key),
    }
}

/// The declared access check (`Access`): the refusal when the principal may not call the API.
/// `PerItem` and `Open` APIs are left to their handler.
fn refusal(ctx: &Ctx, handler: &Handler, request: &Request) -> Option<ResponseKind> {
    let (resource_type, ops, checked, refused_code) = match &handler.access {
        Access::Cluster(ops, checked) => (rt::CLUSTER, *ops, checked, code::CLUSTER_AUTHORIZATION_FAILED),
        Access::Group(op, checked) => {
            (rt::GROUP, std::slice::from_ref(op), checked, code::GROUP_AUTHORIZATION_FAILED)
        }
        Access::TransactionalId(op, checked) => (
            rt::TRANSACTIONAL_ID,
            std::slice::from_ref(op),
            checked,
            code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        ),
        Access::PerItem(_) | Access::Open(_) => return None,
    };
    let Checked { name, refused } = *checked;
    let name =
        if resource_type == rt::CLUSTER { CLUSTER_NAME } else { name(&request.body).unwrap_or_default() };
    let who = Subject::of(request);
    let allowed = ops.iter().any(|op| ctx.authorizer.allowed(&who, resource_type, name, *op));
    (!allowed).then(|| refused(&request.body, refused_code))
}

/// The leader's answer when the API's route is `Leader`, this node cannot propose and the
/// request was not forwarded here already; `None` to serve it here (also when the leader
/// cannot be asked: the handler then answers as a follower).
async fn forwarded_answer(ctx: &Ctx, handler: &Handler, request: &Request) -> Option<ResponseKind> {
    let Route::Leader(route) = handler.route else { return None };
    if request.forwarded || ctx.may_propose() || !(route.when)(&request.body) {
        return None;
    }
    let origin = forward::Origin::of(request);
    let body = &request.body;
    let settled =
        |response: &ResponseKind, state: &onelog_state::BrokerState| (route.settled)(body, response, state);
    forward::relay(ctx, &origin, handler.key, request.api_version, body.clone(), settled).await
}

/// One request's thread time, metered against its principal's and client id's
/// `request_percentage` (`security::quotas::request_time`).
struct RequestMeter {
    ctx: SharedCtx,
    user: Arc<KafkaPrincipal>,
    client_id: Option<kafka_protocol::protocol::StrBytes>,
    busy: Arc<AtomicU64>,
}

impl RequestMeter {
    fn new(ctx: &SharedCtx, request: &Request) -> Self {
        RequestMeter {
            ctx: ctx.clone(),
            user: request.principal.clone(),
            client_id: request.header.client_id.clone(),
            busy: Arc::default(),
        }
    }

    /// The throttle the request's thread time earns (0 within quota, or with none set).
    fn throttle_ms(&self) -> i32 {
        let busy = self.busy.load(Ordering::Relaxed);
        let client_id = self.client_id.as_ref().map(|c| c.as_str());
        self.ctx.quotas.record_request_time(&self.ctx.applied, &self.user.name, client_id, busy)
    }
}
