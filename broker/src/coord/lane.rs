//! The coordinators of the consumer, Streams and share groups of one Raft group (issue 32,
//! docs/SCALING.md §2): the classic membership (`coord::group`), and the KIP-848, KIP-1071
//! and KIP-932 deadlines (`coord::consumer`, `coord::streams`, `coord::share`). A node keeps
//! one set for each group it runs, each serving the group ids placed in that group while the
//! node leads it, with its duties running on that group's leader. The groups' state is the
//! same ops applied in that group's log, so nothing else differs between groups.

use std::sync::Arc;

use super::consumer::ConsumerCoordinator;
use super::group::Coordinator as ClassicCoordinator;
use super::share::sessions::SessionCache;
use super::share::ShareCoordinator;
use super::streams::StreamsCoordinator;
use crate::leader::duties::DutyCtx;

#[derive(Clone)]
pub struct GroupCoordinators {
    /// Classic membership, served while this node leads the group's Raft group.
    pub classic: ClassicCoordinator,
    /// KIP-848 consumer groups' session and revocation deadlines.
    pub consumer: ConsumerCoordinator,
    /// KIP-1071 Streams groups' deadlines and due assignments.
    pub streams: StreamsCoordinator,
    /// KIP-932 share groups' sessions and deadlines.
    pub share: ShareCoordinator,
}

impl GroupCoordinators {
    /// The coordinators of the Raft group `duty` leads, with their duties started on it;
    /// `sessions`: the node's share sessions.
    pub fn start(duty: &Arc<DutyCtx>, sessions: &SessionCache) -> Self {
        let coordinators = GroupCoordinators {
            classic: ClassicCoordinator::new(duty.config.settings.group),
            consumer: Default::default(),
            streams: Default::default(),
            share: ShareCoordinator::new(sessions.clone()),
        };
        super::group::duties::start(duty.clone(), coordinators.classic.clone());
        super::consumer::duties::start(duty.clone(), coordinators.consumer.clone());
        super::streams::duties::start(duty.clone(), coordinators.streams.clone());
        super::share::duties::start(duty.clone(), coordinators.share.clone());
        coordinators
    }
}
