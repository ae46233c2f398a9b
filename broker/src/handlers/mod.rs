//! One file per Kafka API, and the one registry that drives both the request pipeline
//! (`pipeline`) and ApiVersions.
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
pub mod alter_share_group_offsets;
pub mod alter_user_scram_credentials;
pub mod api_versions;
mod authorized;
mod consumer_group_classic;
pub mod consumer_group_describe;
pub mod consumer_group_heartbeat;
mod consumer_group_view;
pub mod create_acls;
pub mod create_delegation_token;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_acls;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_share_group_offsets;
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
pub mod describe_share_group_offsets;
pub mod describe_topic_partitions;
pub mod describe_transactions;
pub mod describe_user_scram_credentials;
pub mod elect_leaders;
pub mod end_txn;
pub mod expire_delegation_token;
pub mod fetch;
pub mod find_coordinator;
pub mod get_telemetry_subscriptions;
mod group_kind;
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
mod partition_leaders;
pub mod policy;
pub mod produce;
pub mod push_telemetry;
pub mod remove_raft_voter;
pub mod renew_delegation_token;
pub mod sasl_authenticate;
pub mod sasl_handshake;
pub mod share_acknowledge;
mod share_acknowledgements;
mod share_common;
pub mod share_fetch;
pub mod share_group_describe;
pub mod share_group_heartbeat;
mod share_read;
pub mod streams_group_codec;
pub mod streams_group_describe;
pub mod streams_group_heartbeat;
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

pub use policy::{Access, Checked, Forwarded, Hooks, Route, NEVER};
pub use share_common::connection_closed as share_connection_closed;

use crate::ctx::SharedCtx;
use crate::metrics::error_codes::{self, Codes};
use crate::security::authz::op;

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

/// A registered API: its versions, its handler, and its policy (`policy`).
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
    pub access: Access,
    pub route: Route,
    pub hooks: Hooks,
}

/// One registry row: `api!(Kind, module, run, access, route, waits_from, throttle, quota)`.
/// - `Kind` names the API in `ApiKey`, `RequestKind` and `ResponseKind`, and `module` its
///   handler (`KEY`, `VERSIONS`, `ACCEPTED_MIN_VERSION`, `handle` or `submit`, and
///   `refused` / `checked_name` where the pipeline checks access) and its error-code walker
///   in `metrics::error_codes`;
/// - run: `concurrent`, `ordered`, or `hidden` (concurrent, not advertised);
/// - access: `cluster(OP)`, `group(OP)`, `txn_id(OP)`, `per_item("what")`, `open("why")`;
/// - route: `any_node` or `leader(FORWARDED)`;
/// - waits_from: the version from which the client waits out throttling itself, or `NEVER`;
/// - throttle: `field` (the response has `throttle_time_ms`) or `no_field`;
/// - quota: `metered` or `exempt` (from the request quota).
macro_rules! api {
    ($kind:ident, $module:ident, $run:ident, $access:ident($($a:tt)*), $route:ident$(($r:expr))?,
     $waits:expr, $field:ident, $quota:ident) => {
        Handler {
            key: $module::KEY,
            min_version: $module::VERSIONS.0,
            max_version: $module::VERSIONS.1,
            accepted_min_version: $module::ACCEPTED_MIN_VERSION,
            advertised: api!(@advertised $run),
            run: api!(@run $run $module),
            access: api!(@access $module $access($($a)*)),
            route: api!(@route $route$(($r))?),
            hooks: Hooks {
                throttle: api!(@throttle $field $kind),
                client_waits_from: $waits,
                request_quota: api!(@quota $quota),
                errors: |body, codes| match body {
                    ResponseKind::$kind(r) => {
                        error_codes::$module(r, &mut Codes(codes));
                        true
                    }
                    _ => false,
                },
                empty: || ResponseKind::$kind(Default::default()),
                empty_request: || kafka_protocol::messages::RequestKind::$kind(Default::default()),
            },
        }
    };
    (@advertised hidden) => { false };
    (@advertised $run:ident) => { true };
    (@run ordered $module:ident) => { Run::Ordered(|ctx, req| Box::pin($module::submit(ctx, req))) };
    (@run $run:ident $module:ident) => { Run::Concurrent(|ctx, req| Box::pin($module::handle(ctx, req))) };
    (@access $module:ident cluster($op:expr)) => { Access::Cluster(&[$op], api!(@checked $module |_| None)) };
    (@access $module:ident cluster_any($($op:expr),+)) => {
        Access::Cluster(&[$($op),+], api!(@checked $module |_| None))
    };
    (@access $module:ident group($op:expr)) => { Access::Group($op, api!(@checked $module $module::checked_name)) };
    (@access $module:ident txn_id($op:expr)) => {
        Access::TransactionalId($op, api!(@checked $module $module::checked_name))
    };
    (@access $module:ident per_item($what:expr)) => { Access::PerItem($what) };
    (@access $module:ident open($why:expr)) => { Access::Open($why) };
    (@checked $module:ident $name:expr) => { Checked { name: $name, refused: $module::refused } };
    (@route any_node) => { Route::AnyNode };
    (@route leader($forwarded:expr)) => { Route::Leader($forwarded) };
    (@throttle no_field $kind:ident) => { None };
    (@throttle field $kind:ident) => {
        Some(policy::ThrottleField {
            raise: |body, ms| match body {
                ResponseKind::$kind(r) => {
                    r.throttle_time_ms = r.throttle_time_ms.max(ms);
                    true
                }
                _ => false,
            },
            of: |body| match body {
                ResponseKind::$kind(r) => r.throttle_time_ms,
                _ => 0,
            },
        })
    };
    (@quota metered) => { true };
    (@quota exempt) => { false };
}

/// Every API onelog serves, and what the broker knows about each (see `api!`). Access is
/// Kafka's `KafkaApis` check for the API; waits_from is Kafka's `shouldClientThrottle`.
#[rustfmt::skip]
pub static HANDLERS: &[Handler] = &[
    api!(Produce, produce, ordered, per_item("WRITE on the transactional id first, then WRITE on each topic"), any_node, 6, field, metered),
    api!(Fetch, fetch, concurrent, per_item("READ on each topic"), any_node, 8, field, metered),
    api!(ListOffsets, list_offsets, concurrent, per_item("DESCRIBE on each topic"), any_node, 3, field, metered),
    api!(Metadata, metadata, concurrent, per_item("DESCRIBE on each topic; CREATE on the cluster or topic to auto-create"), any_node, 6, field, metered),
    api!(ApiVersions, api_versions, concurrent, open("every client learns the versions first, before it authenticates"), any_node, 2, field, exempt),
    api!(CreateTopics, create_topics, concurrent, per_item("CREATE on the cluster, else on each topic"), leader(create_topics::FORWARDED), 3, field, metered),
    api!(DeleteTopics, delete_topics, concurrent, per_item("DELETE on each topic"), leader(delete_topics::FORWARDED), 2, field, metered),
    api!(DescribeConfigs, describe_configs, concurrent, per_item("DESCRIBE_CONFIGS on each resource"), leader(describe_configs::FORWARDED), 2, field, metered),
    api!(CreatePartitions, create_partitions, concurrent, per_item("ALTER on each topic"), leader(create_partitions::FORWARDED), 1, field, metered),
    api!(DescribeCluster, describe_cluster, concurrent, open("Kafka authorizes nothing; the KIP-430 bit set is computed per principal"), any_node, NEVER, field, metered),
    api!(OffsetForLeaderEpoch, offset_for_leader_epoch, concurrent, per_item("DESCRIBE on each topic"), any_node, NEVER, field, metered),
    api!(InitProducerId, init_producer_id, concurrent, per_item("WRITE on the transactional id; without one IDEMPOTENT_WRITE on the cluster or WRITE on some topic"), leader(init_producer_id::FORWARDED), 1, field, metered),
    api!(FindCoordinator, find_coordinator, concurrent, per_item("DESCRIBE on each group or transactional id asked for"), any_node, 2, field, metered),
    api!(OffsetCommit, offset_commit, ordered, per_item("READ on the group, then READ on each topic"), any_node, 4, field, metered),
    api!(OffsetFetch, offset_fetch, concurrent, per_item("DESCRIBE on each group, then DESCRIBE on each topic"), any_node, 4, field, metered),
    api!(ListGroups, list_groups, concurrent, per_item("DESCRIBE on the cluster, else each group listed needs DESCRIBE"), any_node, 2, field, metered),
    api!(JoinGroup, join_group, concurrent, group(op::READ), any_node, 3, field, metered),
    api!(SyncGroup, sync_group, concurrent, group(op::READ), any_node, 2, field, metered),
    api!(Heartbeat, heartbeat, concurrent, group(op::READ), any_node, 2, field, metered),
    api!(LeaveGroup, leave_group, concurrent, group(op::READ), any_node, 2, field, metered),
    api!(DescribeGroups, describe_groups, concurrent, per_item("DESCRIBE on each group"), any_node, 2, field, metered),
    api!(AddPartitionsToTxn, add_partitions_to_txn, concurrent, per_item("WRITE on each transactional id, then WRITE on each topic"), any_node, 1, field, metered),
    api!(AddOffsetsToTxn, add_offsets_to_txn, concurrent, per_item("WRITE on the transactional id, then READ on the group"), any_node, 1, field, metered),
    api!(EndTxn, end_txn, concurrent, txn_id(op::WRITE), any_node, 1, field, metered),
    api!(TxnOffsetCommit, txn_offset_commit, concurrent, per_item("WRITE on the transactional id, READ on the group, READ on each topic"), any_node, 1, field, metered),
    api!(DeleteGroups, delete_groups, concurrent, per_item("DELETE on each group"), any_node, 1, field, metered),
    api!(OffsetDelete, offset_delete, concurrent, per_item("DELETE on the group, then READ on each topic"), any_node, 0, field, metered),
    api!(ConsumerGroupHeartbeat, consumer_group_heartbeat, concurrent, group(op::READ), any_node, NEVER, field, metered),
    api!(ConsumerGroupDescribe, consumer_group_describe, concurrent, per_item("DESCRIBE on each group"), any_node, NEVER, field, metered),
    api!(StreamsGroupHeartbeat, streams_group_heartbeat, concurrent, group(op::READ), any_node, NEVER, field, metered),
    api!(StreamsGroupDescribe, streams_group_describe, concurrent, per_item("DESCRIBE on each group"), any_node, NEVER, field, metered),
    api!(ShareGroupHeartbeat, share_group_heartbeat, concurrent, group(op::READ), any_node, NEVER, field, metered),
    api!(ShareGroupDescribe, share_group_describe, concurrent, per_item("DESCRIBE on each group"), any_node, NEVER, field, metered),
    api!(ShareFetch, share_fetch, concurrent, per_item("READ on the group (a null group id is INVALID_REQUEST first), then READ on each topic"), any_node, NEVER, field, metered),
    api!(DescribeShareGroupOffsets, describe_share_group_offsets, concurrent, per_item("DESCRIBE on each group, then DESCRIBE on each topic"), any_node, NEVER, field, metered),
    api!(AlterShareGroupOffsets, alter_share_group_offsets, concurrent, per_item("READ on the group, then READ on each topic"), any_node, NEVER, field, metered),
    api!(DeleteShareGroupOffsets, delete_share_group_offsets, concurrent, per_item("DELETE on the group, then READ on each topic"), any_node, NEVER, field, metered),
    api!(ShareAcknowledge, share_acknowledge, concurrent, per_item("READ on the group (a null group id is INVALID_REQUEST first), then READ on each topic"), any_node, NEVER, field, metered),
    api!(DescribeQuorum, describe_quorum, concurrent, cluster(op::DESCRIBE), leader(describe_quorum::FORWARDED), NEVER, no_field, metered),
    api!(DescribeLogDirs, describe_log_dirs, concurrent, cluster(op::DESCRIBE), any_node, 1, field, metered),
    api!(DescribeTopicPartitions, describe_topic_partitions, concurrent, per_item("DESCRIBE on each topic"), any_node, 0, field, metered),
    api!(ElectLeaders, elect_leaders, concurrent, cluster(op::ALTER), any_node, 0, field, metered),
    api!(DescribeAcls, describe_acls, concurrent, cluster(op::DESCRIBE), any_node, 1, field, metered),
    api!(CreateAcls, create_acls, concurrent, cluster(op::ALTER), leader(create_acls::FORWARDED), 1, field, metered),
    api!(DeleteAcls, delete_acls, concurrent, cluster(op::ALTER), leader(delete_acls::FORWARDED), 1, field, metered),
    api!(DescribeUserScramCredentials, describe_user_scram_credentials, concurrent, cluster(op::DESCRIBE), any_node, 0, field, metered),
    api!(AlterUserScramCredentials, alter_user_scram_credentials, concurrent, cluster(op::ALTER), leader(alter_user_scram_credentials::FORWARDED), 0, field, metered),
    api!(GetTelemetrySubscriptions, get_telemetry_subscriptions, concurrent, open("any client may ask for its telemetry subscription, as in Kafka"), any_node, NEVER, field, metered),
    api!(PushTelemetry, push_telemetry, concurrent, open("any client may push telemetry, as in Kafka"), any_node, NEVER, field, metered),
    api!(CreateDelegationToken, create_delegation_token, concurrent, open("delegation tokens are disabled: answered DELEGATION_TOKEN_AUTH_DISABLED, as Kafka without a token secret"), any_node, 1, field, metered),
    api!(RenewDelegationToken, renew_delegation_token, concurrent, open("delegation tokens are disabled: answered DELEGATION_TOKEN_AUTH_DISABLED"), any_node, 1, field, metered),
    api!(ExpireDelegationToken, expire_delegation_token, concurrent, open("delegation tokens are disabled: answered DELEGATION_TOKEN_AUTH_DISABLED"), any_node, 1, field, metered),
    api!(DescribeDelegationToken, describe_delegation_token, concurrent, open("delegation tokens are disabled: answered DELEGATION_TOKEN_AUTH_DISABLED"), any_node, 1, field, metered),
    api!(UpdateFeatures, update_features, concurrent, cluster(op::ALTER), leader(update_features::FORWARDED), NEVER, field, metered),
    api!(UnregisterBroker, unregister_broker, concurrent, cluster(op::ALTER), any_node, 0, field, metered),
    api!(AddRaftVoter, add_raft_voter, concurrent, cluster(op::ALTER), any_node, NEVER, field, metered),
    api!(RemoveRaftVoter, remove_raft_voter, concurrent, cluster(op::ALTER), any_node, NEVER, field, metered),
    api!(ListPartitionReassignments, list_partition_reassignments, concurrent, cluster(op::DESCRIBE), any_node, 0, field, metered),
    api!(AlterPartitionReassignments, alter_partition_reassignments, concurrent, cluster(op::ALTER), any_node, 0, field, metered),
    api!(AlterReplicaLogDirs, alter_replica_log_dirs, concurrent, cluster(op::ALTER), any_node, 1, field, metered),
    api!(ListConfigResources, list_config_resources, concurrent, cluster(op::DESCRIBE_CONFIGS), any_node, NEVER, field, metered),
    api!(DescribeProducers, describe_producers, concurrent, per_item("READ on each topic"), any_node, NEVER, field, metered),
    api!(DescribeTransactions, describe_transactions, concurrent, per_item("DESCRIBE on each transactional id"), any_node, NEVER, field, metered),
    api!(ListTransactions, list_transactions, concurrent, per_item("each transaction listed needs DESCRIBE on its transactional id"), any_node, NEVER, field, metered),
    api!(WriteTxnMarkers, write_txn_markers, concurrent, cluster_any(op::ALTER, op::CLUSTER_ACTION), any_node, NEVER, no_field, metered),
    api!(DescribeClientQuotas, describe_client_quotas, concurrent, cluster(op::DESCRIBE_CONFIGS), any_node, NEVER, field, metered),
    api!(AlterClientQuotas, alter_client_quotas, concurrent, cluster(op::ALTER_CONFIGS), leader(alter_client_quotas::FORWARDED), NEVER, field, metered),
    api!(AlterConfigs, alter_configs, concurrent, per_item("ALTER_CONFIGS on each resource"), leader(alter_configs::FORWARDED), 1, field, metered),
    api!(IncrementalAlterConfigs, incremental_alter_configs, concurrent, per_item("ALTER_CONFIGS on each resource"), leader(incremental_alter_configs::FORWARDED), 0, field, metered),
    api!(DeleteRecords, delete_records, concurrent, per_item("DELETE on each topic"), any_node, 1, field, metered),
    api!(SaslHandshake, sasl_handshake, concurrent, open("authentication itself"), any_node, NEVER, no_field, exempt),
    api!(SaslAuthenticate, sasl_authenticate, concurrent, open("authentication itself"), any_node, NEVER, no_field, exempt),
];

pub fn lookup(api_key: i16) -> Option<&'static Handler> {
    HANDLERS.iter().find(|h| h.key as i16 == api_key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_compat::codec::encode_response;
    use kafka_protocol::messages::{MetadataRequest, RequestKind};

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

    /// Each API is registered once: the pipeline's lookup would find only the first row.
    #[test]
    fn each_api_has_one_row() {
        for (i, h) in HANDLERS.iter().enumerate() {
            assert!(HANDLERS[..i].iter().all(|other| other.key != h.key), "{:?} twice", h.key);
        }
    }

    /// Every API declares who may call it, in terms the pipeline acts on: a checked resource
    /// comes with a refusal of the API's own type (a response another API's variant would not
    /// encode as this key), and an unchecked one says why.
    #[test]
    fn every_api_declares_access_and_route() {
        let not_this_api = RequestKind::Metadata(MetadataRequest::default());
        for h in HANDLERS {
            match h.access {
                Access::Cluster(_, checked)
                | Access::Group(_, checked)
                | Access::TransactionalId(_, checked) => {
                    let refused = (checked.refused)(
                        &not_this_api,
                        kafka_compat::error_code::CLUSTER_AUTHORIZATION_FAILED,
                    );
                    assert!(
                        encode_response(h.key, h.max_version, 0, &refused).is_ok(),
                        "{:?}: refusal",
                        h.key
                    );
                    assert!(
                        (h.hooks.errors)(&refused, &mut Vec::new()),
                        "{:?}: refusal of another API",
                        h.key
                    );
                }
                Access::PerItem(what) => assert!(!what.is_empty(), "{:?}", h.key),
                Access::Open(why) => assert!(why.len() > 10, "{:?}: say why it is open", h.key),
            }
            if let Route::Leader(_) = h.route {
                // The leader's side of forwarding serves concurrent handlers only.
                assert!(matches!(h.run, Run::Concurrent(_)), "{:?}: an ordered API is not forwarded", h.key);
            }
        }
    }

    /// Every API's response is throttled through its own `throttle_time_ms` (or declared to
    /// have none) and its error codes are counted by a walker of its own type.
    #[test]
    fn every_response_is_throttled_and_counted() {
        let without_field = [
            ApiKey::DescribeQuorum,
            ApiKey::WriteTxnMarkers,
            ApiKey::SaslHandshake,
            ApiKey::SaslAuthenticate,
        ];
        for h in HANDLERS {
            let mut body = (h.hooks.empty)();
            assert!(encode_response(h.key, h.max_version, 0, &body).is_ok(), "{:?}: empty response", h.key);
            assert!((h.hooks.errors)(&body, &mut Vec::new()), "{:?}: no error walker of its own", h.key);
            let others = HANDLERS.iter().filter(|o| o.key != h.key);
            assert!(others.clone().all(|o| !(o.hooks.errors)(&body, &mut Vec::new())), "{:?}", h.key);
            match h.hooks.throttle {
                Some(field) => {
                    assert!((field.raise)(&mut body, 7), "{:?}: throttle of another API", h.key);
                    assert_eq!(h.hooks.throttle_ms(&body), 7, "{:?}", h.key);
                    h.hooks.raise_throttle(&mut body, 3);
                    assert_eq!(h.hooks.throttle_ms(&body), 7, "{:?}: the larger throttle wins", h.key);
                }
                None => assert!(without_field.contains(&h.key), "{:?} has throttle_time_ms", h.key),
            }
            let waits = h.hooks.client_waits_from;
            assert!(waits == NEVER || (0..=h.max_version).contains(&waits), "{:?}", h.key);
        }
    }
}
