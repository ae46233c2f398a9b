//! Produce's batches of a transaction another Raft group coordinates (docs/SCALING.md §3.1):
//! set apart from the group's own part of the request and written through the cross-group
//! protocol (`coord::xgroup::participant`), one proposal per producer.

use std::collections::BTreeMap;

use onelog_state::entry::UnstampedAppend;
use onelog_state::txns::ProducerIdEpoch;
use onelog_state::xgroup::producer_id_group;

use crate::coord::xgroup::participant::{self, ProducedFuture, Remote};
use crate::ctx::{Ctx, SharedCtx};

/// Appends and the slots they answer.
pub type Part = (Vec<UnstampedAppend>, Vec<usize>);

/// The producer of an append whose every batch is transactional and coordinated outside
/// `group` (its producer id names its coordinator group), in a cluster of several groups.
fn remote_producer(ctx: &Ctx, group: u32, append: &UnstampedAppend) -> Option<ProducerIdEpoch> {
    let header = &append.batches.first()?.header;
    let remote = |h: &kafka_compat::batch::BatchHeader| {
        h.is_transactional()
            && h.producer_id == header.producer_id
            && producer_id_group(h.producer_id) != group
    };
    let all_remote = !ctx.single_group() && append.batches.iter().all(|b| remote(&b.header));
    all_remote
        .then_some(ProducerIdEpoch { producer_id: header.producer_id, producer_epoch: header.producer_epoch })
}

/// One group's part of a request: what the group writes as its own, and the remote writes by
/// producer.
pub fn split(
    ctx: &Ctx,
    group: u32,
    appends: Vec<UnstampedAppend>,
    owners: Vec<usize>,
) -> (Part, Vec<(ProducerIdEpoch, Part)>) {
    let mut local: Part = (Vec::new(), Vec::new());
    let mut remote: BTreeMap<(i64, i16), Part> = BTreeMap::new();
    for (append, owner) in appends.into_iter().zip(owners) {
        let part = match remote_producer(ctx, group, &append) {
            Some(p) => remote.entry((p.producer_id, p.producer_epoch)).or_default(),
            None => &mut local,
        };
        part.0.push(append);
        part.1.push(owner);
    }
    let producer = |(producer_id, producer_epoch)| ProducerIdEpoch { producer_id, producer_epoch };
    (local, remote.into_iter().map(|(id, part)| (producer(id), part)).collect())
}

/// Joins the producer's transaction and queues its write in `group`.
pub async fn submit(
    ctx: &SharedCtx,
    (group, producer): (u32, ProducerIdEpoch),
    appends: Vec<UnstampedAppend>,
    add_and_version: (bool, i16),
) -> ProducedFuture {
    let coordinator = producer_id_group(producer.producer_id);
    let remote = Remote { participant: group, coordinator, producer };
    participant::submit_produce(ctx, remote, appends, add_and_version).await
}
