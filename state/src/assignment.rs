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

/// A CreateTopics manual assignment (Kafka's `ReplicationControlManager.createTopic`): each
/// partition index once, 0-based and consecutive, each replica list as CreatePartitions checks
/// it, all as long as the first, whose length is the topic's replication factor.
pub fn new_topic_problem(assignments: &[(i32, Vec<i32>)], brokers: Option<&BTreeSet<i32>>) -> Option<String> {
    let mut seen = BTreeSet::new();
    let mut replication_factor = None;
    for (index, replicas) in assignments {
        if !seen.insert(*index) {
            return Some(format!("Found multiple manual partition assignments for partition {index}"));
        }
        let length = i16::try_from(replicas.len()).unwrap_or(i16::MAX);
        if let Some(problem) = replicas_problem(replicas, *replication_factor.get_or_insert(length), brokers)
        {
            return Some(problem);
        }
    }
    let consecutive = (0..seen.len()).all(|i| i32::try_from(i).is_ok_and(|i| seen.contains(&i)));
    (!consecutive).then(|| "partitions should be a consecutive 0-based integer sequence".to_string())
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

    /// Regression (issue 28): the replication factor of a topic created with a manual
    /// assignment came from `default.replication.factor`, so a later CreatePartitions with
    /// as many replicas as the assignment had was refused.
    #[test]
    fn a_new_topics_assignment_follows_kafkas_rules() {
        let brokers: BTreeSet<i32> = [1, 2, 3].into();
        let check = |a: &[(i32, &[i32])]| {
            let a: Vec<(i32, Vec<i32>)> = a.iter().map(|(i, r)| (*i, r.to_vec())).collect();
            new_topic_problem(&a, Some(&brokers))
        };
        assert_eq!(check(&[(0, &[1, 2, 3]), (1, &[2, 3, 1])]), None);
        assert_eq!(check(&[(1, &[1]), (0, &[2])]), None);
        assert!(check(&[(0, &[1, 2]), (1, &[1])])
            .unwrap()
            .contains("not consistent with previous partitions"));
        assert!(check(&[(0, &[1]), (0, &[2])]).unwrap().contains("multiple manual partition assignments"));
        assert!(check(&[(0, &[1]), (2, &[2])]).unwrap().contains("consecutive 0-based"));
        assert!(check(&[(0, &[4])]).unwrap().contains("no such broker"));
        assert!(check(&[(0, &[1, 1])]).unwrap().contains("more than once"));
    }

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
