//! One file per Kafka API, and the one registry that drives both dispatch and ApiVersions.
//!
//! Handlers are thin: take the decoded request, make one domain call, build the response.
//! Each partition carries its own error code; one failing partition never fails the request.

pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod add_raft_voter;
pub mod alter_client_quotas;
pub mod alter_configs;
pub mod alter_partition_reassignments;
pub mod alter_replica_log_dirs;
pub mod alter_user_scram_credentials;
pub mod api_versions;
mod authorized;
pub mod consumer_group_describe;
pub mod consumer_group_heartbeat;
pub mod create_acls;
pub mod create_delegation_token;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_acls;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_acls;
pub mod describe_client_quotas;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_delegation_token;
pub mod describe_groups;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod describe_quorum;
pub mod describe_topic_partitions;
pub mod describe_transactions;
pub mod describe_user_scram_credentials;
pub mod elect_leaders;
pub mod end_txn;
pub mod expire_delegation_token;
pub mod fetch;
pub mod find_coordinator;
pub mod forwarded;
pub mod get_telemetry_subscriptions;
pub mod heartbeat;
pub mod incremental_alter_configs;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_config_resources;
pub mod list_groups;
pub mod list_offsets;
pub mod list_partition_reassignments;
pub mod list_transactions;
pub mod metadata;
mod not_served;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod push_telemetry;
pub mod remove_raft_voter;
pub mod renew_delegation_token;
pub mod sasl_authenticate;
pub mod sasl_handshake;
pub mod sync_group;
pub mod txn_offset_commit;
pub mod unregister_broker;
pub mod update_features;
mod util;
pub mod write_txn_markers;

use std::future::Future;
use std::pin::Pin;

use kafka_compat::codec::Request;
use kafka_protocol::messages::{ApiKey, ResponseKind};

use crate::ctx::SharedCtx;

/// `Ok(None)`: the request wants no response (produce with acks=0).
pub type HandlerResult = anyhow::Result<Option<ResponseKind>>;
pub type HandlerFuture = Pin<Box<dyn Future<Output = HandlerResult> + Send>>;
/// The first stage of an ordered handler: returns the rest of the handler as a future.
pub type SubmitFuture = Pin<Box<dyn Future<Output = anyhow::Result<HandlerFuture>> + Send>>;

/// How a handler runs relative to other requests on its connection.
#[derive(Clone, Copy)]
pub enum Run {
    /// Spawned at once; responses are still written in request order.
    Concurrent(fn(SharedCtx, Request) -> HandlerFuture),
    /// Two stages (Redpanda's two-stage handlers): the first runs in the connection's read
    /// loop and submits to the log in request order; the second, spawned, awaits the commit.
    Ordered(fn(SharedCtx, Request) -> SubmitFuture),
}

/// A registered API: the versions advertised, the versions served, and the handler.
pub struct Handler {
    pub key: ApiKey,
    pub min_version: i16,
    pub max_version: i16,
    /// Lowest version actually served; below it, advertised-only (Produce v0–v2, DESIGN §6).
    pub accepted_min_version: i16,
    /// Listed in ApiVersions. An unadvertised API is answered (with an error) rather than
    /// having its connection closed: ConsumerGroupHeartbeat, which clients must not use here.
    pub advertised: bool,
    pub run: Run,
}

macro_rules! handler {
    ($module:ident) => {
        Handler {
            key: $module::KEY,
            min_version: $module::VERSIONS.0,
            max_version: $module::VERSIONS.1,
            accepted_min_version: $module::ACCEPTED_MIN_VERSION,
            advertised: true,
            run: Run::Concurrent(|ctx, req| Box::pin($module::handle(ctx, req))),
        }
    };
    (unadvertised $module:ident) => {
        Handler { advertised: false, ..handler!($module) }
    };
    (ordered $module:ident) => {
        Handler {
            key: $module::KEY,
            min_version: $module::VERSIONS.0,
            max_version: $module::VERSIONS.1,
            accepted_min_version: $module::ACCEPTED_MIN_VERSION,
            advertised: true,
            run: Run::Ordered(|ctx, req| Box::pin($module::submit(ctx, req))),
        }
    };
}

/// Every API onelog serves.
pub static HANDLERS: &[Handler] = &[
    handler!(ordered produce),
    handler!(fetch),
    handler!(list_offsets),
    handler!(metadata),
    handler!(api_versions),
    handler!(create_topics),
    handler!(delete_topics),
    handler!(describe_configs),
    handler!(create_partitions),
    handler!(describe_cluster),
    handler!(offset_for_leader_epoch),
    handler!(init_producer_id),
    handler!(find_coordinator),
    handler!(ordered offset_commit),
    handler!(offset_fetch),
    handler!(list_groups),
    handler!(join_group),
    handler!(sync_group),
    handler!(heartbeat),
    handler!(leave_group),
    handler!(describe_groups),
    handler!(add_partitions_to_txn),
    handler!(add_offsets_to_txn),
    handler!(end_txn),
    handler!(txn_offset_commit),
    handler!(delete_groups),
    handler!(offset_delete),
    handler!(unadvertised consumer_group_heartbeat),
    handler!(consumer_group_describe),
    handler!(describe_quorum),
    handler!(describe_log_dirs),
    handler!(describe_topic_partitions),
    handler!(elect_leaders),
    handler!(describe_acls),
    handler!(create_acls),
    handler!(delete_acls),
    handler!(describe_user_scram_credentials),
    handler!(alter_user_scram_credentials),
    handler!(get_telemetry_subscriptions),
    handler!(push_telemetry),
    handler!(create_delegation_token),
    handler!(renew_delegation_token),
    handler!(expire_delegation_token),
    handler!(describe_delegation_token),
    handler!(update_features),
    handler!(unregister_broker),
    handler!(add_raft_voter),
    handler!(remove_raft_voter),
    handler!(list_partition_reassignments),
    handler!(alter_partition_reassignments),
    handler!(alter_replica_log_dirs),
    handler!(list_config_resources),
    handler!(describe_producers),
    handler!(describe_transactions),
    handler!(list_transactions),
    handler!(write_txn_markers),
    handler!(describe_client_quotas),
    handler!(alter_client_quotas),
    handler!(alter_configs),
    handler!(incremental_alter_configs),
    handler!(delete_records),
    handler!(sasl_handshake),
    handler!(sasl_authenticate),
];

pub fn lookup(api_key: i16) -> Option<&'static Handler> {
    HANDLERS.iter().find(|h| h.key as i16 == api_key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_and_api_versions_agree() {
        let advertised = api_versions::keys();
        assert_eq!(advertised.len(), HANDLERS.iter().filter(|h| h.advertised).count());
        for h in HANDLERS {
            let listed = advertised.iter().find(|a| a.api_key == h.key as i16);
            assert_eq!(listed.is_some(), h.advertised, "{:?}", h.key);
            let Some(a) = listed else { continue };
            assert_eq!((a.min_version, a.max_version), (h.min_version, h.max_version), "{:?}", h.key);
            assert!(h.min_version <= h.accepted_min_version && h.accepted_min_version <= h.max_version);
            // Every served version must be decodable by the protocol crate.
            let lib = h.key.valid_versions();
            assert!(
                lib.min <= h.accepted_min_version && h.max_version <= lib.max,
                "{:?} beyond {lib:?}",
                h.key
            );
        }
    }
}
