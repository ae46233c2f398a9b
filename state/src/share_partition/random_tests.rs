//! A seeded robustness run: a few hundred random sequences of acquisitions (with stale,
//! overlapping and gapped reads of a log with aborted batches), acknowledgements, member
//! releases, lock expiries and log start moves by three members, the window's invariants
//! checked after every step. A failure names the seed and the step; rerun one seed by
//! narrowing `SEEDS`.

use std::ops::Range;

use super::*;

const SEEDS: Range<u64> = 1..301;
const STEPS: usize = 200;
const MEMBERS: [&str; 3] = ["m0", "m1", "m2"];

/// Marsaglia's xorshift64: enough randomness for a test, and the same on every machine.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> i64 {
        i64::try_from(self.next() % n).unwrap()
    }

    fn chance(&mut self, one_in: u64) -> bool {
        self.below(one_in) == 0
    }

    fn member(&mut self) -> &'static str {
        MEMBERS[usize::try_from(self.below(3)).unwrap()]
    }
}

struct Run {
    rng: XorShift,
    sp: SharePartition,
    limits: Limits,
    log: Vec<LogBatch>,
    high_watermark: i64,
    /// The log start the partition was last told of, to be applied by the next fetch.
    log_start: i64,
    /// The log start the partition applied: records below it may vanish unfinished.
    log_start_applied: i64,
    now: i64,
    at: String,
}

#[test]
fn random_operations_keep_the_window_sound() {
    for seed in SEEDS {
        let mut run = Run::new(seed);
        for step in 0..STEPS {
            run.at = format!("seed {seed} step {step}");
            let before = run.sp.clone();
            run.step();
            run.check(&before);
        }
    }
}

impl Run {
    fn new(seed: u64) -> Run {
        let mut rng = XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let limits = Limits {
            delivery_count_limit: 2 + i16::try_from(rng.below(5)).unwrap(),
            max_in_flight_records: 5 + i32::try_from(rng.below(56)).unwrap(),
            renew_enabled: rng.chance(2),
        };
        let (mut log, mut first) = (Vec::new(), 0);
        while first < 2_000 {
            let last = first + rng.below(6);
            log.push(LogBatch { first_offset: first, last_offset: last, aborted: rng.chance(8) });
            first = last + 1;
        }
        let sp = SharePartition::new(rng.below(4));
        Run {
            rng,
            sp,
            limits,
            log,
            high_watermark: 0,
            log_start: 0,
            log_start_applied: 0,
            now: 0,
            at: String::new(),
        }
    }

    fn step(&mut self) {
        match self.rng.below(12) {
            0..=4 => self.fetch(),
            5..=8 => self.acknowledge(),
            9 => {
                let member = self.rng.member();
                let held = held_count(&self.sp, |r| r.member_id == member);
                assert_eq!(self.sp.release_member(member, &self.limits) as i64, held, "{}", self.at);
            }
            10 => {
                self.now += self.rng.below(300);
                let due = held_count(&self.sp, |r| r.deadline_ms <= self.now);
                assert_eq!(self.sp.expire(self.now, &self.limits) as i64, due, "{}", self.at);
            }
            _ => {
                self.log_start = self.log_start.max(self.sp.start_offset) + self.rng.below(6);
                if self.rng.chance(2) {
                    self.sp.log_start_moved(self.log_start);
                    self.log_start_applied = self.log_start;
                }
            }
        }
    }

    /// A fetch from a read that may start below `next_offset` or skip a batch.
    fn fetch(&mut self) {
        self.high_watermark += self.rng.below(12);
        let from = self.sp.next_offset - self.rng.below(8);
        let mut batches: Vec<LogBatch> = self.log.iter().copied().filter(|b| b.last_offset >= from).collect();
        batches.retain(|b| b.last_offset < self.high_watermark);
        if self.rng.chance(10) && !batches.is_empty() {
            batches.remove(0);
        }
        let member = self.rng.member();
        let input = AcquireInput {
            member_id: member,
            max_records: 1 + i32::try_from(self.rng.below(20)).unwrap(),
            batch_size: 1 + i32::try_from(self.rng.below(10)).unwrap(),
            record_limit_mode: self.rng.chance(3),
            deadline_ms: self.now + 50 + self.rng.below(400),
            batches: &batches,
            log_start_offset: self.log_start,
        };
        let before = self.sp.clone();
        self.log_start_applied = self.log_start;
        for got in self.sp.acquire(&input, &self.limits) {
            for offset in got.first_offset..=got.last_offset {
                let was = state_at(&before, offset).map(|r| r.state);
                assert!(
                    was.is_none() || was == Some(RecordState::Available),
                    "{}: {offset} taken twice",
                    self.at
                );
                let now = state_at(&self.sp, offset).unwrap();
                assert_eq!(
                    (now.state, now.member_id.as_str()),
                    (RecordState::Acquired, member),
                    "{}",
                    self.at
                );
                assert_eq!(now.delivery_count, got.delivery_count, "{}: {offset}", self.at);
            }
        }
    }

    /// Mostly a member acknowledging part of what it holds; sometimes a range it does not.
    fn acknowledge(&mut self) {
        let member = self.rng.member();
        let held = self.sp.held_by(member);
        let (first, last) = if !held.is_empty() && !self.rng.chance(4) {
            let (a, z) = held[usize::try_from(self.rng.below(held.len() as u64)).unwrap()];
            let first = a + self.rng.below((z - a + 1) as u64);
            (first, first + self.rng.below((z - first + 1) as u64))
        } else {
            let first = self.sp.start_offset - 2 + self.rng.below(self.sp.in_flight_count() as u64 + 4);
            (first, first + self.rng.below(4))
        };
        let types = if self.rng.chance(2) {
            vec![ack_type(&mut self.rng)]
        } else {
            (first..=last).map(|_| ack_type(&mut self.rng)).collect()
        };
        let batch = AckBatch { first_offset: first, last_offset: last, types };
        let before = self.sp.clone();
        match self.sp.acknowledge(member, &[batch], self.now, 1 + self.rng.below(300), &self.limits) {
            Err(_) => assert_eq!(self.sp, before, "{}: a failed ack changed the partition", self.at),
            Ok(()) => {
                for offset in first.max(before.start_offset)..=last {
                    let was = state_at(&before, offset).unwrap();
                    assert_eq!(
                        (was.state, was.member_id.as_str()),
                        (RecordState::Acquired, member),
                        "{}",
                        self.at
                    );
                }
            }
        }
    }

    /// The invariants, between the partition `before` a step and after it.
    fn check(&self, before: &SharePartition) {
        let (sp, at) = (&self.sp, &self.at);
        assert!(sp.start_offset >= before.start_offset && sp.next_offset >= before.next_offset, "{at}");
        let mut expected = sp.start_offset;
        for (&first, r) in &sp.records {
            assert_eq!(first, expected, "{at}: ranges contiguous from the start offset");
            assert!(
                first <= r.last_offset
                    && r.batch_first_offset <= first
                    && r.last_offset <= r.batch_last_offset,
                "{at}"
            );
            assert_eq!(
                r.state == RecordState::Acquired,
                !r.member_id.is_empty(),
                "{at}: holder iff acquired"
            );
            assert!(r.state == RecordState::Acquired || r.deadline_ms == 0, "{at}");
            assert!((0..=self.limits.delivery_count_limit).contains(&r.delivery_count), "{at}: {r:?}");
            expected = r.last_offset + 1;
        }
        assert_eq!(expected, sp.next_offset, "{at}: ranges end right before next_offset");
        for (&first, r) in before.records.iter().filter(|(_, r)| r.state.is_terminal()) {
            for offset in first.max(sp.start_offset)..=r.last_offset {
                assert_eq!(
                    state_at(sp, offset).map(|now| now.state),
                    Some(r.state),
                    "{at}: {offset} finished"
                );
            }
        }
        for (&first, r) in &before.records {
            for offset in first.max(sp.start_offset)..=r.last_offset {
                assert!(state_at(sp, offset).unwrap().delivery_count >= r.delivery_count, "{at}: {offset}");
            }
            // Available records have no way out but delivery, or the log start passing them.
            let vanished = first..=r.last_offset.min(sp.start_offset - 1);
            let lost = r.state == RecordState::Available && !vanished.is_empty();
            assert!(!lost || *vanished.end() < self.log_start_applied, "{at}: {vanished:?} lost undelivered");
        }
    }
}

/// An acknowledge type, mostly Accept, now and then an unknown one.
fn ack_type(rng: &mut XorShift) -> u8 {
    match rng.below(100) {
        0..=1 => 7,
        2..=11 => 4,
        12..=21 => 0,
        22..=36 => 3,
        37..=56 => 2,
        _ => 1,
    }
}

fn state_at(sp: &SharePartition, offset: i64) -> Option<&InFlight> {
    sp.records.range(..=offset).next_back().map(|(_, r)| r).filter(|r| r.last_offset >= offset)
}

/// Acquired records whose range matches `which`.
fn held_count(sp: &SharePartition, which: impl Fn(&InFlight) -> bool) -> i64 {
    let held = sp.records.iter().filter(|(_, r)| r.state == RecordState::Acquired && which(r));
    held.map(|(first, r)| r.last_offset - first + 1).sum()
}
