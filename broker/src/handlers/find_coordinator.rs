//! FindCoordinator (key 10), v0–v4: the group and transaction coordinator is a Raft leader.
//!
//! Every group's committed offsets are entries in the one log, so one node coordinates every
//! group and transactional id: the leader, wherever the request lands (followers answer from
//! their view of the leader). With several Raft groups at `onelog.version` 8 a transactional
//! id is coordinated by the leader of the group it is placed in (`Ctx::txn_group`; issue 32),
//! and in a cluster created with `onelog.group.placement` 1 so is a group id
//! (`Ctx::group_id_group`); elsewhere groups are group 0's. v4+ (KIP-699) batches keys in `coordinator_keys` and
//! answers one `Coordinator` each; librdkafka asks with v≤2, Java 4.x with v4+.
//!
//! Errors as Kafka's `KafkaApis.getCoordinator`: a key type other than GROUP or TRANSACTION
//! is INVALID_REQUEST; no known leader is COORDINATOR_NOT_AVAILABLE, which clients retry after
//! refreshing metadata. Kafka accepts an empty group id here (offset commits support it for
//! backwards compatibility), so onelog does too; a key above `GROUP_ID_BYTES_MAX` is refused
//! with INVALID_REQUEST, since no group or transactional id that long can be stored.

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{ApiKey, BrokerId, FindCoordinatorResponse, RequestKind, ResponseKind};
use kafka_protocol::protocol::StrBytes;

use super::util::str_bytes;
use super::HandlerResult;
use crate::ctx::{Ctx, SharedCtx};
use crate::leader::leadership::BrokerInfo;
use crate::limits;
use crate::security::authz::{code, op, rt, Subject};

pub const KEY: ApiKey = ApiKey::FindCoordinator;
pub const VERSIONS: (i16, i16) = (0, 4);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;

/// One key's answer: the coordinator, or an error code and message.
type Found = Result<BrokerInfo, (i16, String)>;

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let who = Subject::of(&req);
    let RequestKind::FindCoordinator(body) = req.body else { anyhow::bail!("not a FindCoordinator body") };
    let listener = req.listener.as_deref();
    let response = if req.api_version >= 4 {
        let coordinators = body
            .coordinator_keys
            .into_iter()
            .map(|key| {
                let found = authorized(&ctx, &who, body.key_type, &key)
                    .and_then(|()| find(&ctx, listener, body.key_type, &key));
                coordinator(key, found)
            })
            .collect();
        FindCoordinatorResponse::default().with_coordinators(coordinators)
    } else {
        let key = &body.key;
        match authorized(&ctx, &who, body.key_type, key)
            .and_then(|()| find(&ctx, listener, body.key_type, key))
        {
            Ok(broker) => FindCoordinatorResponse::default()
                .with_node_id(BrokerId(broker.node_id))
                .with_host(str_bytes(broker.host))
                .with_port(broker.port),
            Err((code, message)) => FindCoordinatorResponse::default()
                .with_error_code(code)
                .with_error_message((req.api_version >= 1).then(|| str_bytes(message)))
                .with_node_id(BrokerId(-1))
                .with_host(str_bytes(""))
                .with_port(-1),
        }
    };
    Ok(Some(ResponseKind::FindCoordinator(response)))
}

/// KafkaApis: DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED) or on the transactional id
/// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
fn authorized(ctx: &Ctx, who: &Subject, key_type: i8, key: &str) -> Result<(), (i16, String)> {
    let (resource_type, refused) = match key_type {
        KEY_TYPE_GROUP => (rt::GROUP, code::GROUP_AUTHORIZATION_FAILED),
        KEY_TYPE_TRANSACTION => (rt::TRANSACTIONAL_ID, code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
        _ => return Ok(()),
    };
    if ctx.authorizer.allowed(who, resource_type, key, op::DESCRIBE) {
        Ok(())
    } else {
        Err((refused, String::new()))
    }
}

/// The coordinator (the leader of the key's Raft group) at its address on `listener`, the one
/// the request came in on.
fn find(ctx: &Ctx, listener: Option<&str>, key_type: i8, key: &str) -> Found {
    if key_type != KEY_TYPE_GROUP && key_type != KEY_TYPE_TRANSACTION {
        return Err((error_code::INVALID_REQUEST, format!("Unknown coordinator type {key_type}")));
    }
    if key.len() > limits::GROUP_ID_BYTES_MAX {
        let message = format!("The key is longer than {} bytes", limits::GROUP_ID_BYTES_MAX);
        return Err((error_code::INVALID_REQUEST, message));
    }
    let unavailable = |why: &str| (error_code::COORDINATOR_NOT_AVAILABLE, why.to_string());
    let group = if key_type == KEY_TYPE_TRANSACTION { ctx.txn_group(key) } else { ctx.group_id_group(key) };
    let leader = ctx.group_leader_id(group).ok_or_else(|| unavailable("No Raft leader is known"))?;
    ctx.leadership
        .brokers_on(listener)
        .into_iter()
        .find(|b| b.node_id as u64 == leader)
        .ok_or_else(|| unavailable("The Raft leader's address is not known"))
}

fn coordinator(key: StrBytes, found: Found) -> Coordinator {
    match found {
        Ok(broker) => Coordinator::default()
            .with_key(key)
            .with_node_id(BrokerId(broker.node_id))
            .with_host(str_bytes(broker.host))
            .with_port(broker.port),
        Err((code, message)) => Coordinator::default()
            .with_key(key)
            .with_node_id(BrokerId(-1))
            .with_host(str_bytes(""))
            .with_port(-1)
            .with_error_code(code)
            .with_error_message(Some(str_bytes(message))),
    }
}
