//! Share sessions (KIP-932's ShareFetch sessions), in the leader's memory as Kafka keeps them in
//! its `ShareSessionCache`: per (group, member) the session epoch the next request must carry,
//! the partitions the member fetches, and the connection that opened it. A session is opened
//! by epoch 0, advanced by every ShareFetch and ShareAcknowledge, closed by epoch -1 or when
//! its connection closes; what the member holds in the session's partitions is then released
//! (through the log). A new leader starts with none: clients open new ones.

use std::collections::{BTreeMap, BTreeSet};

use kafka_compat::error_code;
use onelog_state::consumer_group::TopicId;

use crate::coord::liveness::MemberKey;

/// The share-session epochs of KIP-932 (`ShareRequestMetadata`).
pub const INITIAL_EPOCH: i32 = 0;
pub const FINAL_EPOCH: i32 = -1;

pub type SharePartitionKey = (TopicId, i32);

#[derive(Debug, Clone)]
pub struct ShareSession {
    /// The epoch the next request must carry.
    pub epoch: i32,
    pub partitions: BTreeSet<SharePartitionKey>,
    pub connection: u64,
}

/// What one ShareFetch works on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Context {
    /// A new session (epoch 0): the partitions of the request.
    Opened(Vec<SharePartitionKey>),
    /// The next request of a session: every partition it now holds.
    Next(Vec<SharePartitionKey>),
    /// Epoch -1: acknowledgements only, then the session closes.
    Final,
}

#[derive(Default)]
pub struct Sessions {
    by_member: BTreeMap<MemberKey, ShareSession>,
}

impl Sessions {
    /// Kafka's `SharePartitionManager.newContext`: the context of one ShareFetch, or its
    /// top-level error code. An open replaces the member's old session (whose records the
    /// caller releases: returned as the second value).
    pub fn fetch(
        &mut self,
        key: &MemberKey,
        epoch: i32,
        (add, forget): (&[SharePartitionKey], &[SharePartitionKey]),
        acknowledging: bool,
        (connection, max_sessions): (u64, usize),
    ) -> Result<(Context, Option<ShareSession>), i16> {
        match epoch {
            FINAL_EPOCH => self
                .by_member
                .get(key)
                .map(|_| (Context::Final, None))
                .ok_or(error_code::SHARE_SESSION_NOT_FOUND),
            INITIAL_EPOCH if acknowledging => Err(error_code::INVALID_REQUEST),
            INITIAL_EPOCH => {
                let old = self.by_member.remove(key);
                if self.by_member.len() >= max_sessions {
                    return Err(error_code::SHARE_SESSION_LIMIT_REACHED);
                }
                let partitions: BTreeSet<_> = add.iter().copied().collect();
                self.by_member
                    .insert(key.clone(), ShareSession { epoch: next_epoch(0), partitions, connection });
                Ok((Context::Opened(add.to_vec()), old))
            }
            _ => {
                let session = self.advance(key, epoch)?;
                session.partitions.extend(add.iter().copied());
                forget.iter().for_each(|p| {
                    session.partitions.remove(p);
                });
                Ok((Context::Next(session.partitions.iter().copied().collect()), None))
            }
        }
    }

    /// Kafka's `acknowledgeSessionUpdate`: ShareAcknowledge's session check.
    pub fn acknowledge(&mut self, key: &MemberKey, epoch: i32) -> Result<(), i16> {
        match epoch {
            INITIAL_EPOCH => Err(error_code::INVALID_SHARE_SESSION_EPOCH),
            FINAL_EPOCH => self.by_member.get(key).map(|_| ()).ok_or(error_code::SHARE_SESSION_NOT_FOUND),
            _ => self.advance(key, epoch).map(|_| ()),
        }
    }

    fn advance(&mut self, key: &MemberKey, epoch: i32) -> Result<&mut ShareSession, i16> {
        let session = self.by_member.get_mut(key).ok_or(error_code::SHARE_SESSION_NOT_FOUND)?;
        if session.epoch != epoch {
            return Err(error_code::INVALID_SHARE_SESSION_EPOCH);
        }
        session.epoch = next_epoch(session.epoch);
        Ok(session)
    }

    pub fn close(&mut self, key: &MemberKey) -> Option<ShareSession> {
        self.by_member.remove(key)
    }

    /// The sessions a closed connection opened.
    pub fn disconnected(&mut self, connection: u64) -> Vec<(MemberKey, ShareSession)> {
        let keys: Vec<MemberKey> = self
            .by_member
            .iter()
            .filter(|(_, s)| s.connection == connection)
            .map(|(k, _)| k.clone())
            .collect();
        keys.into_iter().filter_map(|k| self.by_member.remove(&k).map(|s| (k, s))).collect()
    }

    pub fn len(&self) -> usize {
        self.by_member.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_member.is_empty()
    }
}

/// Kafka's `ShareRequestMetadata.nextEpoch`: wraps to 1, never to 0 or -1.
fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> MemberKey {
        ("g".to_string(), "m".to_string())
    }

    const P: SharePartitionKey = ([1; 16], 0);
    const Q: SharePartitionKey = ([1; 16], 1);

    #[test]
    fn a_session_opens_advances_and_forgets() {
        let mut s = Sessions::default();
        let (ctx, old) = s.fetch(&key(), 0, (&[P], &[]), false, (7, 10)).unwrap();
        assert_eq!((ctx, old.is_none()), (Context::Opened(vec![P]), true));
        let (ctx, _) = s.fetch(&key(), 1, (&[Q], &[P]), true, (7, 10)).unwrap();
        assert_eq!(ctx, Context::Next(vec![Q]));
        assert_eq!(
            s.fetch(&key(), 1, (&[], &[]), false, (7, 10)).unwrap_err(),
            error_code::INVALID_SHARE_SESSION_EPOCH
        );
        assert_eq!(s.acknowledge(&key(), 2), Ok(()));
        assert_eq!(s.acknowledge(&key(), 0), Err(error_code::INVALID_SHARE_SESSION_EPOCH));
        assert_eq!(s.fetch(&key(), -1, (&[], &[]), true, (7, 10)).unwrap().0, Context::Final);
    }

    #[test]
    fn kafkas_refusals() {
        let mut s = Sessions::default();
        assert_eq!(
            s.fetch(&key(), 3, (&[], &[]), false, (7, 10)).unwrap_err(),
            error_code::SHARE_SESSION_NOT_FOUND
        );
        assert_eq!(
            s.fetch(&key(), -1, (&[], &[]), false, (7, 10)).unwrap_err(),
            error_code::SHARE_SESSION_NOT_FOUND
        );
        assert_eq!(s.fetch(&key(), 0, (&[P], &[]), true, (7, 10)).unwrap_err(), error_code::INVALID_REQUEST);
        assert_eq!(s.acknowledge(&key(), 1), Err(error_code::SHARE_SESSION_NOT_FOUND));
        let other = ("g".to_string(), "n".to_string());
        s.fetch(&other, 0, (&[P], &[]), false, (7, 1)).unwrap();
        assert_eq!(
            s.fetch(&key(), 0, (&[P], &[]), false, (7, 1)).unwrap_err(),
            error_code::SHARE_SESSION_LIMIT_REACHED
        );
    }

    #[test]
    fn a_reopen_returns_the_old_session_and_a_closed_connection_its_sessions() {
        let mut s = Sessions::default();
        s.fetch(&key(), 0, (&[P], &[]), false, (7, 10)).unwrap();
        let (_, old) = s.fetch(&key(), 0, (&[Q], &[]), false, (8, 10)).unwrap();
        assert_eq!(old.map(|o| o.partitions.into_iter().collect::<Vec<_>>()), Some(vec![P]));
        assert!(s.disconnected(7).is_empty());
        assert_eq!(s.disconnected(8).len(), 1);
        assert_eq!(s.len(), 0);
    }
}
