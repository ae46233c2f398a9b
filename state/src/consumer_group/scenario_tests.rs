//! Scenario: three members join one by one a group on a 6-partition topic. It reads as the
//! protocol runs: epochs as Kafka's (a new group's first assignment is epoch 2), every
//! partition revoked before it is assigned elsewhere, a lost response retried at the previous
//! epoch, and a steady heartbeat that leaves the state equal. Then seeded random membership
//! changes, checked for the same safety and for convergence.

use std::collections::BTreeMap;

use kafka_compat::error_code;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::describe::GroupState;
use super::model::{Assignment, MemberState};
use super::request::{Heartbeat, HeartbeatAnswer, Refusal, RevocationTimer, LEAVE_GROUP_MEMBER_EPOCH};
use super::testkit::{beat, join, parts, Sim};

#[test]
fn three_members_join_and_partitions_move_only_once_released() {
    let mut sim = Sim::new(&[("t", 6, 1)]);
    let all = parts(&[(1, &[0, 1, 2, 3, 4, 5])]);

    // A joins a new group (epoch 1): its subscription bumps it to 2 and A gets everything.
    let a = sim.send(join("g", "A", &["t"])).unwrap();
    assert_eq!((a.member_epoch, a.assignment.clone()), (2, Some(all.clone())));
    assert_eq!(sim.group("g").state(), GroupState::Stable);

    // B joins: epoch 3. Its target (3, 4, 5) is still A's, so B gets nothing yet.
    let b = sim.send(join("g", "B", &["t"])).unwrap();
    assert_eq!((b.member_epoch, b.assignment), (3, Some(parts(&[]))));
    assert_eq!(sim.group("g").members["B"].state, MemberState::UnreleasedPartitions);
    assert_eq!(sim.group("g").state(), GroupState::Reconciling);

    // A, still owning all six, is asked to give up 3, 4, 5 and stays at epoch 2 meanwhile.
    let a = sim.send(beat("g", "A", 2, &all)).unwrap();
    assert_eq!((a.member_epoch, a.assignment), (2, Some(parts(&[(1, &[0, 1, 2])]))));
    assert!(matches!(a.revocation_timer, RevocationTimer::Arm(d) if d.member_epoch == 2));
    assert_eq!(sim.group("g").members["A"].state, MemberState::UnrevokedPartitions);

    // B asks again: A has not reported the revocation, so B still gets nothing.
    let b = sim.send(beat("g", "B", 3, &parts(&[]))).unwrap();
    assert_eq!((b.member_epoch, b.assignment), (3, None));
    assert!(sim.group("g").members["B"].assigned.is_empty());

    // A reports 3, 4, 5 gone: it moves to epoch 3 (its assignment is unchanged: not sent).
    let a = sim.send(beat("g", "A", 2, &parts(&[(1, &[0, 1, 2])]))).unwrap();
    assert_eq!((a.member_epoch, a.assignment, a.revocation_timer), (3, None, RevocationTimer::Cancel));

    // That response is lost: A retries at epoch 2 owning a subset of its assignment: accepted.
    let a = sim.send(beat("g", "A", 2, &parts(&[(1, &[0, 1, 2])]))).unwrap();
    assert_eq!(a.member_epoch, 3);
    // Not while it claims to own partitions it was not assigned.
    let refused = sim.send(beat("g", "A", 2, &all)).unwrap_err();
    assert_eq!(refused.code, error_code::FENCED_MEMBER_EPOCH);
    // Nor from the future.
    assert_eq!(sim.send(beat("g", "A", 9, &all)).unwrap_err().code, error_code::FENCED_MEMBER_EPOCH);

    // Now B gets 3, 4, 5.
    let b = sim.send(beat("g", "B", 3, &parts(&[]))).unwrap();
    assert_eq!((b.member_epoch, b.assignment), (3, Some(parts(&[(1, &[3, 4, 5])]))));
    assert_eq!(sim.group("g").state(), GroupState::Stable);

    third_member_joins(&mut sim);
}

/// C joins the stable group of A (0, 1, 2) and B (3, 4, 5): each gives up one partition.
fn third_member_joins(sim: &mut Sim) {
    let c = sim.send(join("g", "C", &["t"])).unwrap();
    assert_eq!((c.member_epoch, c.assignment), (4, Some(parts(&[]))));
    assert_eq!(sim.group("g").targets["C"], parts(&[(1, &[2, 5])]));

    let a = sim.send(beat("g", "A", 3, &parts(&[(1, &[0, 1, 2])]))).unwrap();
    assert_eq!((a.member_epoch, a.assignment), (3, Some(parts(&[(1, &[0, 1])]))));
    let b = sim.send(beat("g", "B", 3, &parts(&[(1, &[3, 4, 5])]))).unwrap();
    assert_eq!((b.member_epoch, b.assignment), (3, Some(parts(&[(1, &[3, 4])]))));

    // A released 2: C gets it, but 5 is still B's.
    sim.send(beat("g", "A", 3, &parts(&[(1, &[0, 1])]))).unwrap();
    let c = sim.send(beat("g", "C", 4, &parts(&[]))).unwrap();
    assert_eq!((c.member_epoch, c.assignment), (4, Some(parts(&[(1, &[2])]))));
    assert_eq!(sim.group("g").members["C"].state, MemberState::UnreleasedPartitions);

    // B released 5: C gets it and the group is stable at epoch 4.
    let b = sim.send(beat("g", "B", 3, &parts(&[(1, &[3, 4])]))).unwrap();
    assert_eq!(b.member_epoch, 4);
    let c = sim.send(beat("g", "C", 4, &parts(&[(1, &[2])]))).unwrap();
    assert_eq!((c.member_epoch, c.assignment), (4, Some(parts(&[(1, &[2, 5])]))));
    assert_eq!(sim.group("g").state(), GroupState::Stable);
    assert_eq!(sim.group("g").group_epoch, 4);

    // A steady heartbeat changes nothing: the broker writes no entry for it.
    let before = sim.groups.clone();
    let a = sim.send(beat("g", "A", 4, &parts(&[(1, &[0, 1])]))).unwrap();
    assert_eq!((a.member_epoch, a.assignment, a.revocation_timer), (4, None, RevocationTimer::Keep));
    assert_eq!(sim.groups, before);
}

/// A consumer as the Java client behaves: it adopts every assignment it is sent (revoking
/// at once), and rejoins with its id at epoch 0 after being fenced or forgotten.
struct Client {
    names: Vec<&'static str>,
    epoch: i32,
    owned: Assignment,
}

impl Client {
    fn request(&self, id: &str) -> Heartbeat {
        if self.epoch == 0 {
            join("g", id, &self.names)
        } else {
            beat("g", id, self.epoch, &self.owned)
        }
    }

    fn take(&mut self, answer: Result<HeartbeatAnswer, Refusal>) {
        match answer {
            Ok(answer) => {
                self.epoch = answer.member_epoch;
                if let Some(assignment) = answer.assignment {
                    self.owned = assignment;
                }
            }
            Err(_) => {
                self.epoch = 0;
                self.owned = Assignment::new();
            }
        }
    }
}

/// Seeded random joins, leaves, fences and heartbeats: no partition is ever held twice
/// (`Sim` checks after each step), and once everyone keeps heartbeating the group is stable
/// with every member owning exactly its target.
#[test]
fn random_membership_changes_always_converge() {
    let subscriptions: [&[&str]; 3] = [&["t"], &["t", "u"], &["u"]];
    for seed in 0..40 {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut sim = Sim::new(&[("t", 7, 1), ("u", 3, 2)]);
        let mut clients: BTreeMap<String, Client> = BTreeMap::new();
        for step in 0..150 {
            let ids: Vec<String> = clients.keys().cloned().collect();
            let pick = (!ids.is_empty()).then(|| ids[rng.gen_range(0..ids.len())].clone());
            match (rng.gen_range(0..10), pick) {
                (0, _) | (_, None) => {
                    let names = subscriptions[rng.gen_range(0..3)].to_vec();
                    clients.insert(format!("m{step}"), Client { names, epoch: 0, owned: Assignment::new() });
                }
                (1, Some(id)) => {
                    let leave = Heartbeat {
                        member_epoch: LEAVE_GROUP_MEMBER_EPOCH,
                        ..beat("g", &id, 1, &parts(&[]))
                    };
                    let _ = sim.send(leave);
                    clients.remove(&id);
                }
                (2, Some(id)) => {
                    sim.groups.fence(&sim.topics, "g", &id, None);
                }
                (_, Some(_)) => {}
            }
            let ids: Vec<String> = clients.keys().cloned().collect();
            if let Some(id) = ids.get(rng.gen_range(0..ids.len().max(1))) {
                let answer = sim.send(clients[id].request(id));
                if let Some(client) = clients.get_mut(id) {
                    client.take(answer);
                }
            }
        }
        for _ in 0..6 {
            for (id, client) in clients.iter_mut() {
                let answer = sim.send(client.request(id));
                client.take(answer);
            }
        }
        let Some(group) = sim.groups.groups.get("g") else { continue };
        let expected = if clients.is_empty() { GroupState::Empty } else { GroupState::Stable };
        assert_eq!(group.state(), expected, "seed {seed}");
        for (id, client) in &clients {
            assert_eq!(client.owned, group.targets.get(id).cloned().unwrap_or_default(), "seed {seed}: {id}");
        }
    }
}
