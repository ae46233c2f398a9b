//! The messages of the simulation and the network that carries them: each is delivered after
//! a random delay (so they reorder), and while faults are on some are lost, some arrive very
//! late, and some of the leaders' messages arrive twice (a resend racing the original).

use std::collections::BTreeMap;

use onelog_state::txns::{ProducerIdEpoch, TxnError};
use onelog_state::xgroup::coordinator::Joined;
use onelog_state::xgroup::{Decision, GroupId, Instance};
use rand::rngs::StdRng;
use rand::Rng;

pub(crate) type WriteId = u64;

/// A client's transactional write, as its Produce request carries it.
#[derive(Debug, Clone)]
pub(crate) struct Write {
    pub id: WriteId,
    pub client: usize,
    pub attempt: u64,
    pub producer: ProducerIdEpoch,
    pub topic: String,
    pub partition: i32,
    pub first_seq: i32,
    pub records: i32,
    /// Sent by a transactions-v2 client (Produce v12+): the write adds its partition.
    pub v2: bool,
    /// A TxnOffsetCommit of this consumer group instead of records: it commits the write's
    /// id as the offset of (topic, partition).
    pub offsets: Option<String>,
}

#[derive(Debug, Clone)]
pub(crate) enum Msg {
    /// Client → the partition's group.
    Produce(Write),
    /// Client → its coordinator group: a transactions-v1 client adds partitions before writing.
    AddPartitionsToTxn {
        client: usize,
        attempt: u64,
        producer: ProducerIdEpoch,
        partitions: Vec<(String, i32)>,
    },
    /// Client → its coordinator group: InitProducerId, naming itself (KIP-360) or not.
    InitProducerId { client: usize, attempt: u64, expected: Option<ProducerIdEpoch>, timeout_ms: i32 },
    /// Client → its coordinator group.
    EndTxn { client: usize, attempt: u64, producer: ProducerIdEpoch, commit: bool, v2: bool },
    /// P's leader → C: the instance of a write, and the decision of what P still holds open.
    JoinTxn { from: GroupId, write: Write, open_here: Option<Instance> },
    /// C → P: the answer, and whether P is registered for the instance already.
    Joined { write: Write, answer: Result<(Joined, bool), TxnError> },
    /// C → P: the registration of P for the instance applied (or was refused).
    Registered { instance: Instance, result: Result<(), TxnError> },
    /// C → P: decisions to apply.
    Decide { coordinator: GroupId, decisions: Vec<Decision> },
    /// P → C: decisions applied.
    Confirm { from: GroupId, instances: Vec<Instance> },
    /// P → C: what became of an instance P holds open (the pull).
    Resolve { from: GroupId, instance: Instance },
}

impl Msg {
    /// Whether the message goes between leaders (and may arrive twice), not from a client.
    fn between_leaders(&self) -> bool {
        !matches!(
            self,
            Msg::Produce(_)
                | Msg::AddPartitionsToTxn { .. }
                | Msg::InitProducerId { .. }
                | Msg::EndTxn { .. }
        )
    }
}

#[derive(Default)]
pub(crate) struct Net {
    /// (delivery step, sequence) → destination and message.
    queue: BTreeMap<(i64, u64), (GroupId, Msg)>,
    sent: u64,
    pub lost: u64,
    pub duplicated: u64,
}

/// Message delays, in steps.
const DELAY_MAX: i64 = 6;

impl Net {
    pub fn send(&mut self, rng: &mut StdRng, now: i64, faults: bool, to: GroupId, msg: Msg) {
        if faults && rng.gen_bool(0.03) {
            self.lost += 1;
            return;
        }
        let copies = if faults && msg.between_leaders() && rng.gen_bool(0.03) { 2 } else { 1 };
        self.duplicated += copies - 1;
        for _ in 0..copies {
            // A rare long delay: what makes a message arrive after the state it was about moved
            // on, a client's request after the client gave up on it and sent another. Not for a
            // transactions-v1 EndTxn: one applied after the client's retry was answered can end
            // the client's next transaction, a window this design shares with one group
            // (SCALING.md §8, findings); a v2 EndTxn names its transaction by its epoch.
            let v1_end = matches!(msg, Msg::EndTxn { v2: false, .. });
            let long = faults && !v1_end && rng.gen_bool(0.02);
            let delay = if long { rng.gen_range(20..150) } else { rng.gen_range(1..=DELAY_MAX) };
            self.sent += 1;
            self.queue.insert((now + delay, self.sent), (to, msg.clone()));
        }
    }

    /// Every message due by `now`, in delivery order.
    pub fn due(&mut self, now: i64) -> Vec<(GroupId, Msg)> {
        let later = self.queue.split_off(&(now + 1, 0));
        std::mem::replace(&mut self.queue, later).into_values().collect()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}
