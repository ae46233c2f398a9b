//! Seeded random heartbeats, fences and topic changes against share groups (a tiny xorshift,
//! no dependency): nothing panics, the leader's dry run agrees with the apply, a refusal
//! leaves the groups equal, a member's assigned partitions exist and are subscribed after its
//! heartbeat, and once every member has heartbeated past the assignment every subscribed
//! partition has a member and a further round changes nothing. A failure prints its seed.

use std::collections::BTreeMap;

use super::testkit::{beat, check_coverage, check_epochs, check_invariants, check_member, join, topic};
use super::{Heartbeat, HeartbeatAnswer, ShareGroups, ShareSettings, LEAVE_GROUP_MEMBER_EPOCH};
use crate::consumer_group::Refusal;
use crate::Topic;

const RUNS: u64 = 300;
const STEPS: usize = 60;
const NAMES: [&str; 4] = ["a", "b", "c", "d"];
const MEMBERS: [&str; 6] = ["m0", "m1", "m2", "m3", "m4", "m5"];
const GROUPS: [&str; 2] = ["g1", "g2"];

struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> Self {
        XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len())]
    }
}

struct Run {
    rng: XorShift,
    groups: ShareGroups,
    topics: BTreeMap<String, Topic>,
    settings: ShareSettings,
    now_ms: i64,
    next_topic_id: u8,
    answers: Vec<Result<HeartbeatAnswer, Refusal>>,
}

impl Run {
    fn new(seed: u64) -> Self {
        let mut rng = XorShift::new(seed);
        let settings = ShareSettings {
            max_size: 3 + rng.below(5) as i32,
            assignment_interval_ms: [0, 50][rng.below(2)],
            ..ShareSettings::default()
        };
        let topics =
            [("a", 2, 1), ("b", 3, 2)].iter().map(|(n, p, id)| (n.to_string(), topic(*id, *p))).collect();
        Run {
            rng,
            groups: ShareGroups::default(),
            topics,
            settings,
            now_ms: 1,
            next_topic_id: 10,
            answers: Vec::new(),
        }
    }

    fn step(&mut self) {
        self.now_ms += self.rng.below(40) as i64;
        match self.rng.below(12) {
            0 => self.change_topics(),
            1 => {
                let (group, member) = (self.rng.pick(&GROUPS), self.rng.pick(&MEMBERS));
                self.groups.fence(group, member);
            }
            _ => {
                let hb = self.random_heartbeat();
                self.heartbeat(&hb);
            }
        }
        check_epochs(&self.groups);
    }

    /// Creates a topic, grows one, or deletes one (a recreated name gets a new id).
    fn change_topics(&mut self) {
        let name = self.rng.pick(&NAMES).to_string();
        match (self.topics.get_mut(&name), self.rng.below(2)) {
            (None, _) => {
                let partitions = 1 + self.rng.below(4);
                self.topics.insert(name, topic(self.next_topic_id, partitions));
                self.next_topic_id += 1;
            }
            (Some(t), 0) => t.partitions.push(crate::PartitionState::new()),
            (Some(_), _) => {
                self.topics.remove(&name);
            }
        }
    }

    fn random_heartbeat(&mut self) -> Heartbeat {
        let (group, member) = (self.rng.pick(&GROUPS), self.rng.pick(&MEMBERS));
        let known = self.groups.groups.get(group).and_then(|g| g.members.get(member));
        let epoch = match (self.rng.below(10), known) {
            (0..=4, Some(m)) => m.member_epoch,
            (5, _) | (0..=4, None) => 0,
            (6, _) => LEAVE_GROUP_MEMBER_EPOCH,
            (7, Some(m)) => m.previous_member_epoch,
            _ => self.rng.below(12) as i32 - 3,
        };
        let names: Vec<&str> = NAMES.iter().copied().filter(|_| self.rng.below(3) != 0).collect();
        let mut hb = if epoch == 0 || self.rng.below(3) == 0 {
            join(group, member, &names)
        } else {
            beat(group, member, 0)
        };
        hb.member_epoch = epoch;
        hb.rack_id = match self.rng.below(10) {
            0 => Some(String::new()),
            1..=3 => Some("r1".to_string()),
            _ => None,
        };
        if self.rng.below(50) == 0 {
            hb.member_id.clear();
        }
        hb
    }

    /// As the broker does it: a dry run on a copy, then the apply, then liveness.
    fn heartbeat(&mut self, hb: &Heartbeat) {
        let (topics, settings, now_ms) = (&self.topics, &self.settings, self.now_ms);
        let before = self.groups.clone();
        let (dry, changed) = before.trial(&hb.group_id, |copy| copy.heartbeat(topics, hb, settings, now_ms));
        let answer = self.groups.heartbeat(topics, hb, settings, now_ms);
        assert_eq!(dry, answer, "{hb:?}");
        assert_eq!(changed, self.groups != before, "{hb:?}");
        match &answer {
            Err(_) => assert_eq!(self.groups, before, "a refusal changed the groups: {hb:?}"),
            Ok(a) if a.member_epoch != LEAVE_GROUP_MEMBER_EPOCH => {
                check_member(&self.groups, topics, &hb.group_id, &hb.member_id);
                self.groups.seen(&hb.group_id, &hb.member_id, now_ms);
            }
            Ok(_) => {}
        }
        self.answers.push(answer);
    }

    /// Every member heartbeats once past the interval (the first computes what is owed);
    /// then every subscribed partition has a member, and a second round changes nothing.
    fn settle(&mut self) {
        self.now_ms += 1_000;
        for round in 0..2 {
            let before = self.groups.clone();
            for (group_id, group) in &before.groups {
                for member_id in group.members.keys() {
                    let epoch = self.groups.groups[group_id].members[member_id].member_epoch;
                    let hb = beat(group_id, member_id, epoch);
                    self.groups.heartbeat(&self.topics, &hb, &self.settings, self.now_ms).expect("settle");
                }
            }
            check_invariants(&self.groups, &self.topics);
            check_coverage(&self.groups, &self.topics);
            if round == 1 {
                assert_eq!(self.groups, before, "a steady round changed the groups");
            }
        }
    }
}

fn random_run(seed: u64) -> Run {
    let mut run = Run::new(seed);
    for _ in 0..STEPS {
        run.step();
    }
    run.settle();
    run
}

#[test]
fn random_heartbeats_keep_the_groups_consistent() {
    for seed in 0..RUNS {
        let outcome = std::panic::catch_unwind(|| random_run(seed));
        assert!(
            outcome.is_ok(),
            "seed {seed} failed: cargo test -p onelog-state share_group::random (RUNS from {seed})"
        );
    }
}

#[test]
fn the_same_seed_gives_the_same_groups_and_answers() {
    for seed in [3, 17, 42] {
        let (one, two) = (random_run(seed), random_run(seed));
        assert_eq!(one.groups, two.groups, "seed {seed}");
        assert_eq!(one.answers, two.answers, "seed {seed}");
    }
}
