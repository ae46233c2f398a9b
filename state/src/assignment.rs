//! CreatePartitions with an explicit replica assignment: Kafka's rules for it
//! (`ReplicationControlManager.createPartitions` and `validateManualPartitionAssignment` in
//! KRaft), as one pure check shared by the controller (with the known broker ids, before
//! proposing, and for validate_only) and apply (without them, so every replica decides alike).

use std::collections::BTreeSet;

use crate::command::NewPartitions;

/// Why `req`'s assignments are not acceptable for a topic with `current` partitions and
/// `replication_factor` replicas each, or `None`. `brokers`: the registered broker ids, when
/// the caller knows them. Every problem is INVALID_REPLICA_ASSIGNMENT (39).
pub fn problem(
    req: &NewPartitions,
    current: usize,
    replication_factor: i16,
    brokers: Option<&BTreeSet<i32>>,
) -> Option<String> {
    if req.assignments.is_empty() {
        return None;
    }
    let additional = i64::from(req.count) - current as i64;
    if req.assignments.len() as i64 != additional {
        return Some(format!(
            "Attempted to add {additional} additional partition(s), but only {} assignment(s) were specified.",
            req.assignments.len()
        ));
    }
    req.assignments.iter().find_map(|replicas| replicas_problem(replicas, replication_factor, brokers))
}

fn replicas_problem(
    replicas: &[i32],
    replication_factor: i16,
    brokers: Option<&BTreeSet<i32>>,
) -> Option<String> {
    if replicas.is_empty() {
        return Some("The manual partition assignment includes an empty replica list.".to_string());
    }
    let mut seen = BTreeSet::new();
    if let Some(twice) = replicas.iter().find(|r| !seen.insert(**r)) {
        return Some(format!("The manual partition assignment includes the broker {twice} more than once."));
    }
    if let Some(unknown) = brokers.and_then(|b| replicas.iter().find(|r| !b.contains(r))) {
        return Some(format!(
            "The manual partition assignment includes broker {unknown}, but no such broker is registered."
        ));
    }
    if replicas.len() != replication_factor.max(0) as usize {
        return Some(format!(
            "The manual partition assignment includes a partition with {} replica(s), but this is not consistent with previous partitions, which have {replication_factor} replica(s).",
            replicas.len()
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(count: i32, assignments: &[&[i32]]) -> NewPartitions {
        NewPartitions {
            topic: "t".into(),
            count,
            assignments: assignments.iter().map(|a| a.to_vec()).collect(),
        }
    }

    /// Regression: explicit assignments were ignored. Kafka refuses a count that does not match
    /// the partitions added, an empty list, a broker named twice or not registered, and a
    /// replica count other than the topic's.
    #[test]
    fn explicit_assignments_follow_kafkas_rules() {
        let brokers: BTreeSet<i32> = [1, 2, 3].into();
        let known = Some(&brokers);
        assert_eq!(problem(&req(3, &[]), 1, 2, known), None, "no assignment: every voter");
        assert_eq!(problem(&req(3, &[&[1, 2], &[3, 1]]), 1, 2, known), None);
        let refused = |r: NewPartitions, needle: &str| {
            let why = problem(&r, 1, 2, known).expect("refused");
            assert!(why.contains(needle), "{why}");
        };
        refused(req(3, &[&[1, 2]]), "but only 1 assignment(s)");
        refused(req(2, &[&[]]), "empty replica list");
        refused(req(2, &[&[2, 2]]), "broker 2 more than once");
        refused(req(2, &[&[1, 9]]), "broker 9, but no such broker");
        refused(req(2, &[&[1, 2, 3]]), "with 3 replica(s)");
        assert_eq!(problem(&req(2, &[&[1, 9]]), 1, 2, None), None, "apply does not know the brokers");
    }
}
