//! What Produce's checks need from the applied state, read under one lock per request: the
//! principal's WRITE on each topic and on the transactional id, each topic's partition count
//! and configs, the disk reserve and the byte-rate quota. Validation (CRCs, inflation) then
//! runs with no lock held, and an entry applied meanwhile cannot make one check disagree with
//! another.

use std::collections::HashMap;

use kafka_protocol::messages::produce_request::TopicProduceData;
use onelog_state::entry::is_log_append_time;
use onelog_state::xgroup::placement::recorded_topic_group;
use onelog_state::BrokerState;

use crate::ctx::Ctx;
use crate::security::authz::{self, op, rt, Subject};
use crate::security::quotas::{Governing, QuotaKind, QuotaManager};

pub struct Snapshot {
    /// Whether the principal may WRITE the request's transactional id; checked before
    /// anything else when the request holds transactional records (a request without an id
    /// may not).
    pub transactional_id_writable: bool,
    /// Whether the principal may WRITE each topic of the request, in request order.
    pub writable: Vec<bool>,
    /// The request's topics that exist (in the Raft group holding them, too).
    pub topics: HashMap<String, TopicFacts>,
    /// This node's `log.dir.free.bytes.min` (dynamic, else the cluster default or static).
    pub disk_reserve: i64,
    /// The `producer_byte_rate` quota the request counts against, if one applies.
    pub byte_quota: Option<Governing>,
}

/// One topic's facts, as configured when the request arrived (dynamic configs take effect
/// from the next request).
pub struct TopicFacts {
    pub partitions: usize,
    pub max_message_bytes: i64,
    pub compacted: bool,
    /// The response carries the time the leader stamped (`message.timestamp.type`).
    pub log_append_time: bool,
    /// The Raft group holding the topic's data (issue 32; 0 with one group), and whether this
    /// node may propose in it now.
    pub group: u32,
    pub leads: bool,
    /// Its id in group 0, which the group's copy must match.
    topic_id: [u8; 16],
}

/// Whom the request is from and what it names.
pub struct Asked<'a> {
    pub who: &'a Subject,
    pub transactional_id: Option<&'a str>,
    pub client_id: Option<&'a str>,
    pub topics: &'a [TopicProduceData],
}

impl Snapshot {
    pub fn read(ctx: &Ctx, asked: &Asked) -> Snapshot {
        let mut snapshot = ctx.applied.state(|state| Snapshot::of(ctx, state, asked));
        snapshot.topics.retain(|name, facts| held_by_group(ctx, name, facts));
        snapshot
    }

    fn of(ctx: &Ctx, state: &BrokerState, asked: &Asked) -> Snapshot {
        let settings = &ctx.config.settings;
        let may_write = |name: &str| {
            authz::allowed_in(ctx.authorizer.settings(), state, asked.who, rt::TOPIC, name, op::WRITE)
        };
        let options = settings.entry_options(ctx.node_id);
        let facts = |name: &str| {
            let topic = state.topics.get(name)?;
            let config = &ctx.config;
            let policy = config.topic_str(state, name, "cleanup.policy");
            Some(TopicFacts {
                partitions: topic.partitions.len(),
                max_message_bytes: config.topic_int(
                    state,
                    name,
                    "max.message.bytes",
                    settings.message_max_bytes,
                ),
                compacted: policy.split(',').any(|p| p.trim() == "compact"),
                log_append_time: is_log_append_time(state, &options, name),
                group: recorded_topic_group(&topic.configs),
                leads: ctx.may_propose(),
                topic_id: topic.topic_id,
            })
        };
        let names = || asked.topics.iter().map(|t| t.name.0.as_str());
        let user = asked.who.principal.name.as_str();
        let client_id = asked.client_id.unwrap_or("");
        let tid_writable = |id: &str| {
            authz::allowed_in(
                ctx.authorizer.settings(),
                state,
                asked.who,
                rt::TRANSACTIONAL_ID,
                id,
                op::WRITE,
            )
        };
        Snapshot {
            transactional_id_writable: asked.transactional_id.is_some_and(tid_writable),
            writable: names().map(may_write).collect(),
            topics: names().filter_map(|n| Some((n.to_string(), facts(n)?))).collect(),
            disk_reserve: ctx.config.dynamic_int(
                state,
                "log.dir.free.bytes.min",
                settings.log_dir_free_bytes_min,
            ),
            byte_quota: QuotaManager::governing(&state.client_quotas, QuotaKind::Produce, user, client_id),
        }
    }
}

/// Whether the Raft group holding a topic placed outside group 0 holds it here: a topic its
/// leader has not put in the group's log yet (`leader::mirror`), or partitions it has not added
/// yet, are unknown to Produce, which clients retry. On a node that does not run the group, or
/// does not lead it, the topic stays, refused NOT_LEADER_OR_FOLLOWER by the checks.
fn held_by_group(ctx: &Ctx, name: &str, facts: &mut TopicFacts) -> bool {
    if facts.group == 0 {
        return true;
    }
    let Some(lane) = ctx.lane(facts.group) else {
        facts.leads = false;
        return true;
    };
    facts.leads = lane.leadership.may_propose();
    let held = lane
        .applied
        .state(|s| s.topics.get(name).filter(|t| t.topic_id == facts.topic_id).map(|t| t.partitions.len()));
    match held {
        Some(partitions) => {
            facts.partitions = facts.partitions.min(partitions);
            true
        }
        None => !facts.leads,
    }
}
