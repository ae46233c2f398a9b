//! What a group subscribes to, resolved against the topics that exist now: per member the
//! topic ids of its names and of its regex, the partition count of every subscribed topic, the
//! group's fingerprint of them, and the preferred assignor (spec §3.6, §6.3, §6.5).
//!
//! Regexes resolve synchronously against the given topics, where Kafka resolves them in the
//! background: a topic created or deleted later changes the fingerprint, so the next
//! heartbeat of any member bumps the epoch, which is what Kafka's refresh converges to.
//! Kafka filters a regex's topics by the DESCRIBE ACLs of the member that triggered the
//! refresh (KAFKA-18813); this pure code does not see ACLs, so it does not: the broker's
//! handler does the DESCRIBE check on the names it is given.

use std::collections::{BTreeMap, BTreeSet};

use regex::{Regex, RegexBuilder};

use super::model::{Member, TopicId};
use super::request::{Assignor, GroupSettings};
use crate::{internal_topic, Topic};

/// Bounds a client's regex once compiled (the regex crate's own unit), so that a hostile
/// pattern cannot make a heartbeat allocate without limit.
const REGEX_COMPILED_BYTES_MAX: usize = 1 << 20;
/// Bounds the nesting depth a client's regex may have (parser recursion).
const REGEX_NEST_MAX: u32 = 100;

/// Compiles an RE2/J-style pattern for a full match of the topic name (Kafka uses
/// `Pattern.matches`). The raw pattern is checked first: anchoring `a)|(b` as
/// `^(?:a)|(b)$` would otherwise turn an invalid pattern into a different valid one.
pub(crate) fn compile(pattern: &str) -> Result<Regex, String> {
    let build = |p: &str| {
        RegexBuilder::new(p).size_limit(REGEX_COMPILED_BYTES_MAX).nest_limit(REGEX_NEST_MAX).build()
    };
    build(pattern).map_err(|e| describe_error(&e))?;
    build(&format!("^(?:{pattern})$")).map_err(|e| describe_error(&e))
}

/// The regex crate's message is several lines with a caret diagram; Kafka's is one phrase.
fn describe_error(error: &regex::Error) -> String {
    match error {
        regex::Error::Syntax(text) => {
            let last = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("syntax error");
            last.trim().trim_start_matches("error: ").to_string()
        }
        regex::Error::CompiledTooBig(_) => "the compiled pattern is too big".to_string(),
        _ => "unsupported pattern".to_string(),
    }
}

/// A group's subscriptions resolved against the current topics.
#[derive(Debug, Default)]
pub(crate) struct Subscriptions {
    /// Member id → ids of the existing topics it subscribes to (names ∪ regex matches).
    pub by_member: BTreeMap<String, BTreeSet<TopicId>>,
    /// Partition count of every topic some member subscribes to.
    pub partitions: BTreeMap<TopicId, i32>,
    pub fingerprint: u64,
}

impl Subscriptions {
    pub fn of(&self, member_id: &str) -> &BTreeSet<TopicId> {
        static NONE: BTreeSet<TopicId> = BTreeSet::new();
        self.by_member.get(member_id).unwrap_or(&NONE)
    }
}

/// Names resolve against the real topics and the virtual `__consumer_offsets`, as Kafka's
/// against every topic, internal ones included (`crate::internal_topic`).
pub(crate) fn resolve(members: &BTreeMap<String, Member>, topics: &BTreeMap<String, Topic>) -> Subscriptions {
    let matches = regex_matches(members, topics);
    let mut all_names: BTreeSet<&str> = BTreeSet::new();
    let mut subs = Subscriptions::default();
    for (member_id, member) in members {
        let mut names: BTreeSet<&str> = member.subscribed_topic_names.iter().map(String::as_str).collect();
        if let Some(regex) = &member.subscribed_topic_regex {
            names.extend(matches.get(regex.as_str()).into_iter().flatten().copied());
        }
        let ids = names.iter().filter_map(|n| internal_topic::lookup(topics, n)).map(|(id, _)| id).collect();
        subs.by_member.insert(member_id.clone(), ids);
        all_names.extend(names.into_iter().filter(|n| internal_topic::lookup(topics, n).is_some()));
    }
    let mut fingerprint = Fnv64::new();
    for name in all_names {
        let Some((id, count)) = internal_topic::lookup(topics, name) else { continue };
        subs.partitions.insert(id, count);
        fingerprint.topic(name, &id, count);
    }
    // Kafka's hash of no topics is 0; keep that so a new, empty group needs no bump.
    subs.fingerprint = if subs.partitions.is_empty() { 0 } else { fingerprint.finish() };
    subs
}

/// Each distinct regex of the group, compiled once, with the topic names it fully matches.
/// A stored regex always compiled when it was accepted; one that no longer does (a different
/// regex crate) matches nothing rather than failing every heartbeat.
pub(crate) fn regex_matches<'a>(
    members: &'a BTreeMap<String, Member>,
    topics: &'a BTreeMap<String, Topic>,
) -> BTreeMap<&'a str, Vec<&'a str>> {
    let regexes: BTreeSet<&str> =
        members.values().filter_map(|m| m.subscribed_topic_regex.as_deref()).collect();
    regexes
        .into_iter()
        .map(|pattern| {
            let names = match compile(pattern) {
                Ok(re) => internal_topic::names(topics).filter(|n| re.is_match(n)).collect(),
                Err(_) => Vec::new(),
            };
            (pattern, names)
        })
        .collect()
}

/// FNV-1a, 64 bits: deterministic on every replica and platform, no dependency. Each topic
/// contributes its name (length-prefixed, so names cannot run together), id and partition
/// count, in ascending name order.
/// FNV-1a, 64 bits: a stable fingerprint (no per-process seed) every replica computes alike.
pub(crate) struct Fnv64(u64);

impl Fnv64 {
    pub(crate) fn new() -> Self {
        Fnv64(0xcbf2_9ce4_8422_2325)
    }

    pub(crate) fn bytes(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    pub(crate) fn topic(&mut self, name: &str, id: &TopicId, partitions: i32) {
        self.bytes(&(name.len() as u64).to_be_bytes());
        self.bytes(name.as_bytes());
        self.bytes(id);
        self.bytes(&partitions.to_be_bytes());
    }

    pub(crate) fn finish(&self) -> u64 {
        self.0
    }
}

/// Spec §6.3: the assignor most members asked for (ties: the smallest name, where Kafka's
/// tie-break is a HashMap order); nobody asked, or the winner is no longer configured: the
/// default.
pub(crate) fn preferred_assignor<'a>(
    members: impl Iterator<Item = &'a Member>,
    settings: &GroupSettings,
) -> Assignor {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for name in members.filter_map(|m| m.server_assignor.as_deref()) {
        *counts.entry(name).or_default() += 1;
    }
    // Ascending names, so `max_by_key` (last maximum wins) is reversed to keep the first.
    let winner = counts.iter().rev().max_by_key(|(_, count)| **count).map(|(name, _)| *name);
    winner
        .and_then(Assignor::from_name)
        .filter(|a| settings.assignors.contains(a))
        .unwrap_or_else(|| settings.default_assignor())
}
