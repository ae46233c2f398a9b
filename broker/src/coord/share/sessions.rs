//! Share sessions (KIP-932's ShareFetch sessions), in the node's memory as a Kafka broker keeps
//! them in its `ShareSessionCache`: per (group, member) the session epoch the next request must
//! carry, the partitions the member fetches, and the connection that opened it. A session is
//! opened by epoch 0, advanced by every ShareFetch and ShareAcknowledge, closed by epoch -1 or
//! when its connection closes; what the member holds in the session's partitions is then
//! released (through the log of each partition's Raft group).
//!
//! One cache per node, as one per Kafka broker: a session's partitions are those the client
//! found this node leading, whichever Raft groups hold them (a share group's records are
//! acquired in the log of their topic's group, docs/SCALING.md §2). A session remembers the
//! term of each Raft group it holds partitions of; once one of those terms moved on, the new
//! leader has released what the session's member held, and the session is gone: the next
//! request gets SHARE_SESSION_NOT_FOUND and the client opens a new one, where it learns the
//! partitions' leaders.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

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
    /// The term of each Raft group its partitions are in, when they were added.
    pub terms: Terms,
}

/// Raft group → term.
pub type Terms = BTreeMap<u32, u64>;

/// What a session step needs of the Raft groups: the terms of the request's partitions' groups
/// (recorded in the session), and whether a term a session recorded moved on.
pub struct Groups<'a> {
    pub terms: Terms,
    pub moved: &'a dyn Fn(u32, u64) -> bool,
}

impl Groups<'_> {
    fn stale(&self, session: &ShareSession) -> bool {
        session.terms.iter().any(|(group, term)| (self.moved)(*group, *term))
    }
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
        groups: &Groups,
    ) -> Result<(Context, Option<ShareSession>), i16> {
        if epoch != INITIAL_EPOCH {
            self.drop_stale(key, groups)?;
        }
        match epoch {
            FINAL_EPOCH => Ok((Context::Final, None)),
            INITIAL_EPOCH if acknowledging => Err(error_code::INVALID_REQUEST),
            INITIAL_EPOCH => {
                let old = self.by_member.remove(key);
                if self.by_member.len() >= max_sessions {
                    return Err(error_code::SHARE_SESSION_LIMIT_REACHED);
                }
                let partitions: BTreeSet<_> = add.iter().copied().collect();
                let session = ShareSession {
                    epoch: next_epoch(0),
                    partitions,
                    connection,
                    terms: groups.terms.clone(),
                };
                self.by_member.insert(key.clone(), session);
                Ok((Context::Opened(add.to_vec()), old))
            }
            _ => {
                let session = self.advance(key, epoch)?;
                session.partitions.extend(add.iter().copied());
                for (group, term) in &groups.terms {
                    session.terms.entry(*group).or_insert(*term);
                }
                forget.iter().for_each(|p| {
                    session.partitions.remove(p);
                });
                Ok((Context::Next(session.partitions.iter().copied().collect()), None))
            }
        }
    }

    /// Kafka's `acknowledgeSessionUpdate`: ShareAcknowledge's session check.
    pub fn acknowledge(&mut self, key: &MemberKey, epoch: i32, groups: &Groups) -> Result<(), i16> {
        if epoch == INITIAL_EPOCH {
            return Err(error_code::INVALID_SHARE_SESSION_EPOCH);
        }
        self.drop_stale(key, groups)?;
        match epoch {
            FINAL_EPOCH => Ok(()),
            _ => self.advance(key, epoch).map(|_| ()),
        }
    }

    /// SHARE_SESSION_NOT_FOUND if the member has no session, or had one of a Raft group's
    /// earlier term (forgotten now: that term's records were released).
    fn drop_stale(&mut self, key: &MemberKey, groups: &Groups) -> Result<(), i16> {
        let session = self.by_member.get(key).ok_or(error_code::SHARE_SESSION_NOT_FOUND)?;
        if groups.stale(session) {
            self.by_member.remove(key);
            return Err(error_code::SHARE_SESSION_NOT_FOUND);
        }
        Ok(())
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

/// The node's sessions, shared by the share handlers of every Raft group it leads.
#[derive(Clone, Default)]
pub struct SessionCache(Arc<Mutex<Sessions>>);

impl SessionCache {
    /// Runs `f` on the sessions (held for `f` only; nothing in them can be half-updated).
    pub fn with<T>(&self, f: impl FnOnce(&mut Sessions) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
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

    fn same() -> Groups<'static> {
        Groups { terms: Terms::from([(1, 5)]), moved: &|_, _| false }
    }

    const P: SharePartitionKey = ([1; 16], 0);
    const Q: SharePartitionKey = ([1; 16], 1);

    #[test]
    fn a_session_opens_advances_and_forgets() {
        let mut s = Sessions::default();
        let (ctx, old) = s.fetch(&key(), 0, (&[P], &[]), false, (7, 10), &same()).unwrap();
        assert_eq!((ctx, old.is_none()), (Context::Opened(vec![P]), true));
        let (ctx, _) = s.fetch(&key(), 1, (&[Q], &[P]), true, (7, 10), &same()).unwrap();
        assert_eq!(ctx, Context::Next(vec![Q]));
        assert_eq!(
            s.fetch(&key(), 1, (&[], &[]), false, (7, 10), &same()).unwrap_err(),
            error_code::INVALID_SHARE_SESSION_EPOCH
        );
        assert_eq!(s.acknowledge(&key(), 2, &same()), Ok(()));
        assert_eq!(s.acknowledge(&key(), 0, &same()), Err(error_code::INVALID_SHARE_SESSION_EPOCH));
        assert_eq!(s.fetch(&key(), -1, (&[], &[]), true, (7, 10), &same()).unwrap().0, Context::Final);
    }

    #[test]
    fn kafkas_refusals() {
        let mut s = Sessions::default();
        assert_eq!(
            s.fetch(&key(), 3, (&[], &[]), false, (7, 10), &same()).unwrap_err(),
            error_code::SHARE_SESSION_NOT_FOUND
        );
        assert_eq!(
            s.fetch(&key(), -1, (&[], &[]), false, (7, 10), &same()).unwrap_err(),
            error_code::SHARE_SESSION_NOT_FOUND
        );
        assert_eq!(
            s.fetch(&key(), 0, (&[P], &[]), true, (7, 10), &same()).unwrap_err(),
            error_code::INVALID_REQUEST
        );
        assert_eq!(s.acknowledge(&key(), 1, &same()), Err(error_code::SHARE_SESSION_NOT_FOUND));
        let other = ("g".to_string(), "n".to_string());
        s.fetch(&other, 0, (&[P], &[]), false, (7, 1), &same()).unwrap();
        assert_eq!(
            s.fetch(&key(), 0, (&[P], &[]), false, (7, 1), &same()).unwrap_err(),
            error_code::SHARE_SESSION_LIMIT_REACHED
        );
    }

    #[test]
    fn a_reopen_returns_the_old_session_and_a_closed_connection_its_sessions() {
        let mut s = Sessions::default();
        s.fetch(&key(), 0, (&[P], &[]), false, (7, 10), &same()).unwrap();
        let (_, old) = s.fetch(&key(), 0, (&[Q], &[]), false, (8, 10), &same()).unwrap();
        assert_eq!(old.map(|o| o.partitions.into_iter().collect::<Vec<_>>()), Some(vec![P]));
        assert!(s.disconnected(7).is_empty());
        assert_eq!(s.disconnected(8).len(), 1);
        assert_eq!(s.len(), 0);
    }

    #[test]
    fn a_session_of_an_earlier_term_is_not_found() {
        let mut s = Sessions::default();
        s.fetch(&key(), 0, (&[P], &[]), false, (7, 10), &same()).unwrap();
        let moved = Groups { terms: Terms::new(), moved: &|group, term| group == 1 && term < 6 };
        assert_eq!(s.acknowledge(&key(), 1, &moved), Err(error_code::SHARE_SESSION_NOT_FOUND));
        assert!(s.is_empty(), "the stale session is forgotten");
        s.fetch(&key(), 0, (&[P], &[]), false, (7, 10), &same()).unwrap();
        assert_eq!(
            s.fetch(&key(), -1, (&[], &[]), false, (7, 10), &moved).unwrap_err(),
            error_code::SHARE_SESSION_NOT_FOUND
        );
    }
}
