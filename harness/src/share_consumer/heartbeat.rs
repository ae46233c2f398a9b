//! The share consumer's membership (KIP-932's ShareGroupHeartbeat, v1), on a task and a
//! connection of its own so that a ShareFetch waiting on the log never delays it: join with
//! epoch 0 under the member's own id, then heartbeat at the interval the broker answers with
//! the epoch it gave; take each new assignment; rejoin at epoch 0 when fenced or unknown; find
//! the coordinator again on NOT_COORDINATOR or a lost connection. A leave (epoch -1) is the
//! consumer's `close`.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, Result};
use kafka_compat::error_code::{FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID};
use kafka_protocol::messages::{GroupId, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse, TopicName};

use super::leader::{connect_coordinator, text, DISCOVERY_TIMEOUT};
use super::{Event, Events, ShareConsumerConfig};
use crate::raw_client::RawClient;

/// KIP-932's member epoch that leaves the group.
pub const LEAVE_EPOCH: i32 = -1;
/// Pause before asking again after a refused heartbeat or a lost connection.
const RETRY: Duration = Duration::from_millis(200);

/// The member as the last answers left it; shared with the consumer, which fetches the
/// assigned partitions.
#[derive(Debug, Default)]
pub struct Membership {
    /// 0 until the broker answered a join.
    pub epoch: i32,
    /// Assigned partitions of the consumer's topic.
    pub assignment: BTreeSet<i32>,
    /// The interval the broker asks for (ms), 0 before the first answer.
    pub interval_ms: i32,
    /// The consumer's topic's id (assignments name topics by id).
    pub topic_id: Option<uuid::Uuid>,
}

/// Heartbeats until the task is aborted.
pub(super) async fn run(config: ShareConsumerConfig, membership: Arc<Mutex<Membership>>, events: Events) {
    let mut client: Option<RawClient> = None;
    loop {
        if client.is_none() {
            match connect_coordinator(&config.bootstrap, &config.topic, &config.group).await {
                Ok((c, leader)) => {
                    membership.lock().expect("membership").topic_id = Some(leader.topic_id);
                    client = Some(c);
                }
                Err(_) => {
                    tokio::time::sleep(RETRY).await;
                    continue;
                }
            }
        }
        let c = client.as_mut().expect("connected above");
        let epoch = membership.lock().expect("membership").epoch;
        let sent = (config.clock)();
        match beat(c, &config, epoch).await {
            Ok(answer) if answer.error_code == 0 => {
                let interval = take(&membership, &answer);
                events.lock().expect("events").push(Event::Heartbeat { sent, received: (config.clock)() });
                tokio::time::sleep(interval).await;
            }
            Ok(answer) if [FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID].contains(&answer.error_code) => {
                // Fenced (its session passed) or forgotten: join again under the same id.
                let mut m = membership.lock().expect("membership");
                m.epoch = 0;
                m.assignment.clear();
            }
            Ok(_) | Err(_) => {
                client = None;
                tokio::time::sleep(RETRY).await;
            }
        }
    }
}

/// Takes a successful answer: epoch, interval, and the assignment when it carries one.
/// Returns how long to wait before the next heartbeat.
fn take(membership: &Mutex<Membership>, answer: &ShareGroupHeartbeatResponse) -> Duration {
    let mut m = membership.lock().expect("membership");
    m.epoch = answer.member_epoch;
    m.interval_ms = answer.heartbeat_interval_ms;
    if let Some(assignment) = &answer.assignment {
        let topic_id = m.topic_id;
        let ours = assignment.topic_partitions.iter().filter(|t| Some(t.topic_id) == topic_id);
        m.assignment = ours.flat_map(|t| t.partitions.iter().copied()).collect();
    }
    Duration::from_millis(u64::try_from(answer.heartbeat_interval_ms).unwrap_or(0).max(100))
}

/// One heartbeat at `epoch`, within the discovery timeout.
pub(super) async fn beat(
    client: &mut RawClient,
    config: &ShareConsumerConfig,
    epoch: i32,
) -> Result<ShareGroupHeartbeatResponse> {
    // Kafka's client sends its subscription when it joins (and when it changes); the broker
    // keeps it.
    let topics = (epoch == 0).then(|| vec![TopicName(text(&config.topic))]);
    let request = ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(text(&config.group)))
        .with_member_id(text(&config.member_id))
        .with_member_epoch(epoch)
        .with_subscribed_topic_names(topics);
    tokio::time::timeout(DISCOVERY_TIMEOUT, client.request(1, &request))
        .await
        .map_err(|_| anyhow!("ShareGroupHeartbeat: no answer in {DISCOVERY_TIMEOUT:?}"))?
}

/// Leaves the group (epoch -1), best effort: a member that cannot leave is fenced when its
/// session passes.
pub(super) async fn leave(config: &ShareConsumerConfig) {
    if let Ok((mut client, _)) = connect_coordinator(&config.bootstrap, &config.topic, &config.group).await {
        let _ = beat(&mut client, config, LEAVE_EPOCH).await;
    }
}
