//! Acknowledgements of share-group records, as ShareAcknowledge carries them and ShareFetch
//! piggybacks them, in the Raft group of each partition's topic: Kafka 4.4's checks of each partition's batches (`KafkaApis.
//! validateAcknowledgementBatches`: INVALID_REQUEST for the partition), its topic checks
//! (UNKNOWN_TOPIC_OR_PARTITION, TOPIC_AUTHORIZATION_FAILED), then one `ShareAcknowledge` op for
//! the rest, answered once it is applied: an acknowledged record is durable before the client
//! hears so.

use std::collections::BTreeMap;

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use onelog_state::command::{AcknowledgePartition, ShareAcknowledgeOp};
use onelog_state::consumer_group::TopicId;
use onelog_state::share_partition::AckBatch;

use super::share_common::{data_group, led};
use super::util::group_op_failed;
use crate::clock::wall_clock_ms;
use crate::ctx::{Ctx, Lane};
use crate::security::authz::{op, rt, Subject};

/// KIP-932's acknowledge types: 0 Gap, 1 Accept, 2 Release, 3 Reject; 4 Renew (KIP-1222,
/// ShareFetch/ShareAcknowledge v2 with IsRenewAck).
const ACCEPT_MAX: u8 = 3;
const RENEW: u8 = 4;

/// Per partition: (error code, message).
pub type Outcomes = BTreeMap<(TopicId, i32), (i16, Option<String>)>;

/// One request's acknowledgements: per partition, its batches (first, last, types).
pub type Requested = BTreeMap<(TopicId, i32), Vec<AckBatch>>;

/// Acknowledges `requested` in the Raft group of each partition's topic, where its share state
/// lives: one op per group this node leads, NOT_LEADER_OR_FOLLOWER for a partition of a group it
/// does not.
pub async fn acknowledge_by_group(
    ctx: &Ctx,
    req: &Request,
    ids: (&str, &str),
    renew: bool,
    requested: Requested,
) -> Outcomes {
    let mut by_group: BTreeMap<u32, Requested> = BTreeMap::new();
    for (key, batches) in requested {
        by_group.entry(data_group(ctx, &key.0)).or_default().insert(key, batches);
    }
    let mut outcomes = Outcomes::new();
    for (group, requested) in by_group {
        match led(ctx, group) {
            Some(lane) => outcomes.extend(acknowledge(ctx, lane, req, ids, renew, requested).await),
            None => {
                let not_leader = (error_code::NOT_LEADER_OR_FOLLOWER, None);
                outcomes.extend(requested.into_keys().map(|k| (k, not_leader.clone())));
            }
        }
    }
    outcomes
}

/// Checks, proposes and answers every partition of `requested`, acknowledged by `member_id`
/// of `group_id` in a request of `req`'s version with IsRenewAck `renew`.
pub async fn acknowledge(
    ctx: &Ctx,
    lane: Lane<'_>,
    req: &Request,
    (group_id, member_id): (&str, &str),
    renew: bool,
    requested: Requested,
) -> Outcomes {
    let group = ctx.share_group_settings(group_id);
    let who = Subject::of(req);
    let mut outcomes = Outcomes::new();
    let mut partitions = Vec::new();
    for ((topic_id, partition), batches) in requested {
        let refused = invalid(&batches, req.api_version >= 2, renew)
            .map(|()| error_code::INVALID_REQUEST)
            .or_else(|| topic_problem(ctx, &who, &topic_id, partition));
        match refused {
            Some(code) => {
                outcomes.insert((topic_id, partition), (code, None));
            }
            None if batches.is_empty() => {
                outcomes.insert((topic_id, partition), (error_code::NONE, None));
            }
            None => partitions.push(AcknowledgePartition { topic_id, partition, batches }),
        }
    }
    if partitions.is_empty() {
        return outcomes;
    }
    let keys: Vec<(TopicId, i32)> = partitions.iter().map(|p| (p.topic_id, p.partition)).collect();
    let op = ShareAcknowledgeOp {
        group_id: group_id.to_string(),
        member_id: member_id.to_string(),
        now_ms: wall_clock_ms(),
        lock_ms: group.lock_ms,
        limits: group.limits,
        partitions,
    };
    match lane.proposer.propose(Box::new(op)).await {
        Ok(results) => {
            for (key, result) in keys.into_iter().zip(results) {
                let outcome =
                    result.map_or_else(|e| (e.code, Some(e.message)), |()| (error_code::NONE, None));
                outcomes.insert(key, outcome);
            }
        }
        Err(e) => {
            let code = group_op_failed(&e);
            outcomes.extend(keys.into_iter().map(|k| (k, (code, None))));
        }
    }
    outcomes
}

/// Kafka's batch rules: first ≤ last, ascending (a batch may not start before the previous
/// one's last offset), types present and one per offset when more than one, each type in
/// range, RENEW only in a renew request.
fn invalid(batches: &[AckBatch], renew_supported: bool, renew: bool) -> Option<()> {
    let max = if renew_supported { RENEW } else { ACCEPT_MAX };
    let mut previous_last = -1i64;
    for b in batches {
        let span = b.last_offset.checked_sub(b.first_offset);
        let bad = b.first_offset > b.last_offset
            || b.first_offset < previous_last
            || b.types.is_empty()
            || (b.types.len() > 1 && i64::try_from(b.types.len() - 1).ok() != span)
            || b.types.iter().any(|t| *t > max)
            || (b.types.contains(&RENEW) && !renew);
        if bad {
            return Some(());
        }
        previous_last = b.last_offset;
    }
    None
}

/// UNKNOWN_TOPIC_OR_PARTITION for a topic id or partition that does not exist,
/// TOPIC_AUTHORIZATION_FAILED without READ on the topic.
pub fn topic_problem(ctx: &Ctx, who: &Subject, topic_id: &TopicId, partition: i32) -> Option<i16> {
    let name = ctx.applied.state(|s| {
        let (name, topic) = s.topic_by_id(topic_id)?;
        usize::try_from(partition).ok().filter(|p| *p < topic.partitions.len()).map(|_| name.clone())
    });
    let Some(name) = name else { return Some(error_code::UNKNOWN_TOPIC_OR_PARTITION) };
    (!ctx.authorizer.allowed(who, rt::TOPIC, &name, op::READ))
        .then_some(error_code::TOPIC_AUTHORIZATION_FAILED)
}

/// The request's acknowledge types as unsigned values (a negative one is out of range: it
/// becomes 255, refused by `invalid`).
pub fn types(raw: &[i8]) -> Vec<u8> {
    raw.iter().map(|t| u8::try_from(*t).unwrap_or(u8::MAX)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(first: i64, last: i64, types: &[u8]) -> AckBatch {
        AckBatch { first_offset: first, last_offset: last, types: types.to_vec() }
    }

    #[test]
    fn kafkas_batch_rules() {
        assert!(invalid(&[batch(0, 4, &[1]), batch(5, 6, &[1, 2])], false, false).is_none());
        assert!(invalid(&[batch(4, 0, &[1])], false, false).is_some(), "first after last");
        assert!(invalid(&[batch(0, 4, &[1]), batch(2, 6, &[1])], false, false).is_some(), "overlap");
        assert!(invalid(&[batch(0, 4, &[])], false, false).is_some(), "no types");
        assert!(invalid(&[batch(0, 4, &[1, 1])], false, false).is_some(), "types per offset");
        assert!(invalid(&[batch(0, 0, &[5])], true, false).is_some(), "type out of range");
        assert!(invalid(&[batch(0, 0, &[4])], false, false).is_some(), "renew before v2");
        assert!(invalid(&[batch(0, 0, &[4])], true, false).is_some(), "renew outside a renew request");
        assert!(invalid(&[batch(0, 0, &[4])], true, true).is_none());
        assert_eq!(types(&[-1, 1]), vec![255, 1]);
    }
}
