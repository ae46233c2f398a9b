//! The messages between Raft groups' leaders for transactions across groups
//! (docs/SCALING.md §3): a participant's leader asks the coordinator's to join a transaction
//! and to register it (JoinTxn, RegisterParticipant), or what became of an instance nobody
//! decided for it (the pull); the coordinator's leader hands participants its decisions.
//!
//! They ride the node's Raft connections (`peers`), mutually authenticated with the cluster
//! secret, as node-wide frames of their own kind: the request names the groups. The server
//! hands them to the broker (`coord::xgroup`) through the forward slot, which is filled once
//! the node serves Kafka requests; before that the answer is "not the leader", which the
//! asking leader retries like a leader change.

use std::time::Duration;

use onelog_state::consumer_group::TopicId;
use onelog_state::txns::{ProducerIdEpoch, TxnError};
use onelog_state::xgroup::coordinator::{Joined, Resolution};
use onelog_state::xgroup::participant::Applied;
use onelog_state::xgroup::{Decision, GroupId, Instance};
use serde::{Deserialize, Serialize};

use super::codec::{self, Kind};
use super::envelope::ForwardSlot;
use super::peers::Peers;
use crate::limits;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct XRequest {
    /// The asking node, which the connection authenticated (`guard`).
    pub from: u64,
    pub message: XMessage,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum XMessage {
    /// To the coordinator's leader: the participant has transactional data of `producer` to
    /// write (§3.1 step 1).
    Join(JoinTxn),
    /// To the coordinator's leader: put the participant in the instance's list (§3.1 step 2).
    Register { coordinator: GroupId, participant: GroupId, instance: Instance },
    /// To the coordinator's leader: what became of an instance the participant holds open
    /// (§3.3); registers the participant when the instance is still open.
    Resolve { coordinator: GroupId, participant: GroupId, instance: Instance },
    /// To a participant's leader: apply the coordinator's decisions (§3.2 step 3).
    Decisions { participant: GroupId, coordinator: GroupId, decisions: Vec<Decision> },
    /// To the leader of `group`: change what share group `group_id` holds of the partitions
    /// that group stores (§2: a share partition lives with its topic), for the share group's
    /// coordinator serving AlterShareGroupOffsets, DeleteShareGroupOffsets or DeleteGroups.
    ShareState { group: GroupId, group_id: String, change: ShareStateChange },
    /// To the coordinator's leader (`onelog.version` 9): which of these producer ids, of which
    /// the participant holds nothing open, it no longer knows (so the participant may forget
    /// them, `XOp::Forget`).
    Gone { coordinator: GroupId, participant: GroupId, producer_ids: Vec<i64> },
    /// To the coordinator's leader (`onelog.version` 9): an operator's abort marker reached a
    /// participant holding `producer`'s transaction open; abort it if it still is.
    AdminAbort { coordinator: GroupId, producer: ProducerIdEpoch },
}

/// A change of a share group's share partitions in one Raft group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ShareStateChange {
    /// Start these partitions over at these offsets (topic id, partition, offset).
    Reset(Vec<(TopicId, i32, i64)>),
    /// Forget the group's state of these topics.
    Delete(Vec<TopicId>),
    /// Forget all the group's state (the group was deleted).
    DeleteAll,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JoinTxn {
    pub coordinator: GroupId,
    pub participant: GroupId,
    pub producer: ProducerIdEpoch,
    /// The producer's instance the participant holds open, if any.
    pub open_here: Option<Instance>,
    pub writes: Joining,
}

/// What the participant writes for the transaction.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Joining {
    /// Batches to these partitions; `implicit_add`: Produce v12+ adds them (KIP-890 part 2),
    /// else AddPartitionsToTxn must have (part 1).
    Partitions { partitions: Vec<(String, i32)>, implicit_add: bool },
    /// TxnOffsetCommit of this consumer group.
    Offsets { group_id: String },
}

/// The coordinator's answer to JoinTxn: the instance, the decision to apply ahead of the
/// write, and whether the participant is registered for the instance already.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinAnswer {
    pub joined: Joined,
    pub registered: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum XAnswer {
    Joined(JoinAnswer),
    Registered,
    Resolved(Resolution),
    Applied(Vec<Applied>),
    /// A share-state change made; for a `Delete`, per topic whether there was any state.
    ShareState(Vec<bool>),
    /// The producer ids asked about that the coordinator no longer knows.
    Gone(Vec<i64>),
    /// An admin abort's outcome: the partition's Kafka error code.
    Aborted(i16),
}

/// Why a message was not served.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum XRefusal {
    /// The node does not lead the group the message is for (any more): ask its leader.
    #[error("not the leader of the group")]
    NotLeader,
    /// The coordinator refused, as it refuses the write's AddPartitionsToTxn.
    #[error("transaction refused: {0:?}")]
    Txn(TxnError),
    /// A transactions-v1 write to a partition the transaction did not add.
    #[error("{partition} was not added to transaction '{transactional_id}'")]
    NotAdded { transactional_id: String, partition: String },
    /// Nobody answered in time.
    #[error("{0}")]
    Unavailable(String),
    /// The group's log refused a share-state change with this Kafka error code.
    #[error("refused with error code {code}: {message:?}")]
    Refused { code: i16, message: Option<String> },
}

pub type XResponse = Result<XAnswer, XRefusal>;

pub type XFuture = std::pin::Pin<Box<dyn std::future::Future<Output = XResponse> + Send>>;

/// Peer side: hands the message to the broker.
pub async fn on_request(slot: &ForwardSlot, request: XRequest) -> XResponse {
    let Some(handler) = slot.get() else { return Err(XRefusal::NotLeader) };
    handler.cross_group(request.message).await
}

/// Sends `message` to node `target` at its Raft address and waits at most `ttl`.
pub async fn send(peers: &Peers, (target, addr): (u64, &str), message: XMessage, ttl: Duration) -> XResponse {
    let peer = peers.get(target, addr);
    let request_id = peer.next_request_id();
    let request = XRequest { from: peers.identity().node_id, message };
    let unavailable = |e: String| XRefusal::Unavailable(format!("node {target}: {e}"));
    let frame = codec::encode(Kind::CrossGroup, request_id, &request, limits::RAFT_FRAME_BYTES_MAX)
        .map_err(|e| unavailable(e.to_string()))?;
    let response = peer.call(request_id, frame, ttl).await.map_err(|e| unavailable(format!("{e:?}")))?;
    response.decode_body::<XResponse>().map_err(|e| unavailable(e.to_string()))?
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raft::transport::auth::Identity;
    use crate::raft::transport::tests::{raft_config, start_node_with_secret};

    /// Before the node serves Kafka requests its forward slot is empty: the message crosses
    /// the transport (frame kind 11, guard, decode) and comes back "not the leader", which the
    /// asking leader retries.
    #[tokio::test]
    async fn a_node_not_serving_yet_answers_not_the_leader_over_the_transport() -> anyhow::Result<()> {
        let node = start_node_with_secret(1, raft_config(|_| {}), None).await?;
        let peers = Peers::new(Identity::new(2, None));
        let instance = Instance { producer_id: 2 << 48, epoch: 0, n: 0 };
        let message = XMessage::Register { coordinator: 2, participant: 1, instance };
        let answer = send(&peers, (1, &node.addr.raft), message, Duration::from_secs(5)).await;
        assert_eq!(answer, Err(XRefusal::NotLeader));
        Ok(())
    }
}
