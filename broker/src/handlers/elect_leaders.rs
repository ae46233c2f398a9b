//! ElectLeaders (key 43), v0–v2: onelog has one leader for every partition, the Raft leader,
//! and Metadata lists the voters (ascending ids) as every partition's replicas. The mapping:
//!
//! - preferred election (type 0, the only one in v0): the preferred replica is the first one
//!   Metadata lists. If the Raft leader is it: ELECTION_NOT_NEEDED (84), as Kafka answers for
//!   a partition already led by its preferred replica. Otherwise PREFERRED_LEADER_NOT_AVAILABLE
//!   (80) with a message: moving the leader moves every partition's at once, so it is an
//!   operator's act on the admin API (`POST /leader/transfer`, `onelog admin transfer-leader`),
//!   not a per-partition election.
//! - unclean election (type 1): with a leader, ELECTION_NOT_NEEDED (Kafka elects uncleanly only
//!   a partition without a leader); without one, ELIGIBLE_LEADERS_NOT_AVAILABLE (83): Raft
//!   never elects a replica missing committed entries.
//! - an unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION; any other election type:
//!   INVALID_REQUEST (top level).
//!
//! A null partition list means every partition; as Kafka does, only the partitions where an
//! election was attempted or failed are listed then, so ELECTION_NOT_NEEDED ones are omitted.
//!
//! Access: CLUSTER ALTER, checked by the pipeline (`handlers::HANDLERS`).

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_compat::error_code::{
    ELECTION_NOT_NEEDED, ELIGIBLE_LEADERS_NOT_AVAILABLE, PREFERRED_LEADER_NOT_AVAILABLE,
};
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ApiKey, ElectLeadersResponse, RequestKind, ResponseKind};

use super::util::{str_bytes, topic_name};
use super::HandlerResult;
use crate::ctx::{Ctx, SharedCtx};

pub const KEY: ApiKey = ApiKey::ElectLeaders;
pub const VERSIONS: (i16, i16) = (0, 2);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

const PREFERRED: i8 = 0;
const UNCLEAN: i8 = 1;

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::ElectLeaders(body) = req.body else { anyhow::bail!("not an ElectLeaders body") };
    let election = if req.api_version >= 1 { body.election_type } else { PREFERRED };
    if election != PREFERRED && election != UNCLEAN {
        return Ok(Some(ResponseKind::ElectLeaders(
            ElectLeadersResponse::default().with_error_code(error_code::INVALID_REQUEST),
        )));
    }
    let outcome = outcome(&ctx, election);
    let results = match body.topic_partitions {
        Some(topics) => topics
            .into_iter()
            .map(|t| {
                let count = ctx
                    .applied
                    .state(|s| s.topics.get(t.topic.0.as_str()).map(|t| t.partitions.len() as i32));
                let partitions = t
                    .partitions
                    .into_iter()
                    .map(|p| match count {
                        Some(n) if (0..n).contains(&p) => result(p, outcome),
                        _ => result(p, (error_code::UNKNOWN_TOPIC_OR_PARTITION, None)),
                    })
                    .collect();
                ReplicaElectionResult::default().with_topic(t.topic).with_partition_result(partitions)
            })
            .collect(),
        None if outcome.0 == ELECTION_NOT_NEEDED => Vec::new(),
        None => ctx.applied.state(|s| {
            s.topics
                .iter()
                .map(|(name, t)| {
                    ReplicaElectionResult::default().with_topic(topic_name(name)).with_partition_result(
                        (0..t.partitions.len() as i32).map(|p| result(p, outcome)).collect(),
                    )
                })
                .collect()
        }),
    };
    Ok(Some(ResponseKind::ElectLeaders(
        ElectLeadersResponse::default().with_replica_election_results(results),
    )))
}

/// The one answer every existing partition gets: they share the Raft leader.
fn outcome(ctx: &Ctx, election: i8) -> (i16, Option<&'static str>) {
    let leader = ctx.leader_id().map(|l| l as i32);
    let preferred = ctx.leadership.voter_ids().first().copied();
    match (election, leader) {
        (UNCLEAN, Some(_)) => (ELECTION_NOT_NEEDED, None),
        (UNCLEAN, None) => {
            (ELIGIBLE_LEADERS_NOT_AVAILABLE, Some("no Raft leader; Raft elects only a replica holding every committed entry"))
        }
        (_, Some(l)) if Some(l) == preferred => (ELECTION_NOT_NEEDED, None),
        (_, Some(_)) => (
            PREFERRED_LEADER_NOT_AVAILABLE,
            Some("onelog has one leader for all partitions (the Raft leader); move it with the admin API's POST /leader/transfer (onelog admin transfer-leader)"),
        ),
        (_, None) => (PREFERRED_LEADER_NOT_AVAILABLE, Some("no Raft leader is elected yet")),
    }
}

fn result(partition: i32, (code, message): (i16, Option<&'static str>)) -> PartitionResult {
    PartitionResult::default()
        .with_partition_id(partition)
        .with_error_code(code)
        .with_error_message(message.map(str_bytes))
}

/// The whole request refused with `code`: at the top level (v1+) and on every partition it
/// names (v0 has only these), none when it names none (`ElectLeadersRequest.getErrorResponse`).
pub fn refused(body: &RequestKind, code: i16) -> ResponseKind {
    let RequestKind::ElectLeaders(body) = body else { return ResponseKind::ElectLeaders(Default::default()) };
    let results = body
        .topic_partitions
        .iter()
        .flatten()
        .map(|t| {
            let partitions = t.partitions.iter().map(|p| result(*p, (code, None))).collect();
            ReplicaElectionResult::default().with_topic(t.topic.clone()).with_partition_result(partitions)
        })
        .collect();
    ResponseKind::ElectLeaders(
        ElectLeadersResponse::default().with_error_code(code).with_replica_election_results(results),
    )
}
