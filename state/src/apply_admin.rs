//! Apply of the administrative ops that change configs and log start offsets on a client's
//! request: AlterConfigs / IncrementalAlterConfigs and DeleteRecords. Pure, like `apply`.

use kafka_compat::error_code;

use super::command::{AlterConfigsOp, DeleteRecordsOp, ItemResult, LowWatermark, TrimLog};
use super::configs::{altered, ConfigResource, Overrides, ResourceAlteration};
use super::effect::Effect;
use super::BrokerState;

/// Each resource applies all-or-nothing, independently of the others (Kafka answers per
/// resource).
pub fn alter_configs(state: &mut BrokerState, op: &AlterConfigsOp) -> Vec<ItemResult> {
    op.resources.iter().map(|r| alter_resource(state, r)).collect()
}

fn alter_resource(state: &mut BrokerState, change: &ResourceAlteration) -> ItemResult {
    let result = match overrides_mut(state, &change.resource) {
        Some(current) => altered(current, change).map(|next| *current = next),
        None => Err((
            error_code::UNKNOWN_TOPIC_OR_PARTITION,
            format!("The topic '{}' does not exist.", resource_name(&change.resource)),
        )),
    };
    forget_empty(state);
    match result {
        Ok(()) => {
            state.configs.changes += 1;
            (error_code::NONE, None)
        }
        Err((code, message)) => (code, Some(message)),
    }
}

/// The stored overrides of a resource (created empty for everything but a missing topic).
pub fn overrides_mut<'a>(state: &'a mut BrokerState, resource: &ConfigResource) -> Option<&'a mut Overrides> {
    let configs = &mut state.configs;
    Some(match resource {
        ConfigResource::Topic(name) => return state.topics.get_mut(name).map(|t| &mut t.configs),
        ConfigResource::BrokerDefault => &mut configs.broker_default,
        ConfigResource::Broker(id) => configs.brokers.entry(*id).or_default(),
        ConfigResource::Group(name) => configs.groups.entry(name.clone()).or_default(),
        ConfigResource::ClientMetrics(name) => configs.client_metrics.entry(name.clone()).or_default(),
    })
}

fn resource_name(resource: &ConfigResource) -> String {
    match resource {
        ConfigResource::Topic(name) | ConfigResource::Group(name) | ConfigResource::ClientMetrics(name) => {
            name.clone()
        }
        ConfigResource::BrokerDefault => String::new(),
        ConfigResource::Broker(id) => id.to_string(),
    }
}

/// A resource without overrides is not kept, so the state does not grow with every name a
/// client described or cleared.
fn forget_empty(state: &mut BrokerState) {
    let configs = &mut state.configs;
    configs.brokers.retain(|_, o| !o.is_empty());
    configs.groups.retain(|_, o| !o.is_empty());
    configs.client_metrics.retain(|_, o| !o.is_empty());
}

/// KIP-107: -1 asks for the high watermark; anything above it, or below -1, is
/// OFFSET_OUT_OF_RANGE. An offset at or below the current log start changes nothing and
/// answers the current one. A batch straddling the new start stays in the log (Fetch
/// returns whole batches); the log start offset is exactly the requested one, as in Kafka.
/// Unlike Kafka, the log start stops at the last stable offset while a transaction is open
/// below the offset asked for (onelog's invariant `log_start <= lso`, as for retention: an
/// open transaction's data stays until its marker decides it); the answer is the low
/// watermark reached.
pub fn delete_records(
    state: &mut BrokerState,
    op: &DeleteRecordsOp,
    effects: &mut Vec<Effect>,
) -> Vec<LowWatermark> {
    op.partitions.iter().map(|p| delete_partition_records(state, p, effects)).collect()
}

fn delete_partition_records(
    state: &mut BrokerState,
    req: &TrimLog,
    effects: &mut Vec<Effect>,
) -> LowWatermark {
    let Some(topic) = state.topics.get_mut(&req.topic) else {
        return (error_code::UNKNOWN_TOPIC_OR_PARTITION, -1);
    };
    let topic_id = topic.topic_id;
    let Some(partition) = usize::try_from(req.partition).ok().and_then(|p| topic.partitions.get_mut(p))
    else {
        return (error_code::UNKNOWN_TOPIC_OR_PARTITION, -1);
    };
    let target = if req.log_start_offset == -1 { partition.high_watermark() } else { req.log_start_offset };
    if target < 0 || target > partition.high_watermark() {
        return (error_code::OFFSET_OUT_OF_RANGE, -1);
    }
    let target = target.min(partition.last_stable_offset());
    if target > partition.log_start_offset {
        partition.log_start_offset = target;
        partition.aborted_txns.retain(|a| a.last_offset >= target);
        effects.push(Effect::TrimLog { topic_id, partition: req.partition, log_start_offset: target });
        partition.assert_invariants(&req.topic, req.partition);
    }
    (error_code::NONE, partition.log_start_offset)
}
