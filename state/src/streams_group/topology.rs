//! The topology a Streams group runs, as its members send it (subtopologies with their source,
//! repartition and changelog topics and co-partition groups), and how it meets the topics that
//! exist: [`configure`] works out each subtopology's task count, the internal topics that are
//! missing (for the broker to create), and the status a heartbeat reports when the group cannot
//! be assigned yet. Kafka 4.4.0's `InternalTopicManager`, `RepartitionTopics`,
//! `ChangelogTopics` and `CopartitionedTopicsEnforcer`, as pure functions of the topology and
//! the replicated topics, checked in Kafka's order: copartition indexes, missing source
//! topics, repartition counts, copartitioning, changelog counts, the internal topics as
//! configured, then the internal topics that exist.
//!
//! Where Kafka's coordinator throws something other than a topic configuration error (a
//! topology it cannot size, an index out of range), the heartbeat fails: [`configure`] says
//! so in `ConfiguredTopology::rejected`, with the error code Kafka's handler answers.
//! Kafka iterates hash maps in places; here every choice among equals is by name, so the
//! topic a message names first is the smallest one.
//!
//! Source topic regexes go beyond Kafka 4.4.0, which refuses them at the request
//! ("not supported yet"): each resolves against the existing topics, the topology's own
//! internal topics excluded, and its matches count as source topics.

use std::collections::{BTreeMap, BTreeSet};

use kafka_compat::error_code::{INVALID_TOPIC_EXCEPTION, STREAMS_INVALID_TOPOLOGY, UNKNOWN_SERVER_ERROR};
use kafka_compat::topic_name::TOPIC_NAME_LEN_MAX;
use regex::{Regex, RegexBuilder};
use serde::{Deserialize, Serialize};

use crate::consumer_group::Refusal;
use crate::{internal_topic, Topic};

/// A group's topology: what the first member to join sent (epoch and subtopologies).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Topology {
    pub epoch: i32,
    /// By subtopology id.
    pub subtopologies: BTreeMap<String, Subtopology>,
}

/// One subtopology: a connected part of the processing graph, run as one task per partition.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Subtopology {
    /// User topics it reads (sorted, as Kafka stores them).
    pub source_topics: Vec<String>,
    /// Regexes of user topics it reads (Java `Pattern` syntax).
    pub source_topic_regex: Vec<String>,
    /// State store changelogs: internal topics, one partition per task.
    pub state_changelog_topics: Vec<TopicInfo>,
    /// Repartition topics it writes to (another subtopology reads them).
    pub repartition_sink_topics: Vec<String>,
    /// Repartition topics it reads: internal topics.
    pub repartition_source_topics: Vec<TopicInfo>,
    /// Topics that must have equal partition counts; indexes into the lists above.
    pub copartition_groups: Vec<CopartitionGroup>,
}

/// An internal topic as the member describes it: `partitions` 0 = let the broker work it out;
/// `replication_factor` 0 = the broker's default.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct TopicInfo {
    pub name: String,
    pub partitions: i32,
    pub replication_factor: i16,
    /// Topic configs to create it with, in the member's order.
    pub topic_configs: Vec<(String, String)>,
}

/// Indexes into the subtopology's `source_topics`, `source_topic_regex` and
/// `repartition_source_topics`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct CopartitionGroup {
    pub source_topics: Vec<i16>,
    pub source_topic_regex: Vec<i16>,
    pub repartition_source_topics: Vec<i16>,
}

/// The heartbeat response's status codes (Kafka's `StreamsGroupHeartbeatResponse.Status`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub enum Status {
    StaleTopology = 0,
    MissingSourceTopics = 1,
    IncorrectlyPartitionedTopics = 2,
    MissingInternalTopics = 3,
    ShutdownApplication = 4,
    AssignmentDelayed = 5,
    MissingClientTags = 6,
}

impl Status {
    pub fn code(self) -> i8 {
        self as i8
    }
}

/// Why a topology cannot be assigned yet: the status and Kafka's detail message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicError {
    pub status: Status,
    pub message: String,
}

/// An internal topic the broker is to create (or that exists as configured).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InternalTopic {
    pub name: String,
    pub partitions: i32,
    /// `None`: the member sent 0, the broker's default. Streams clients send their
    /// `replication.factor`, -1 by default, which CreateTopics also reads as the default.
    pub replication_factor: Option<i16>,
    pub configs: BTreeMap<String, String>,
}

/// One subtopology with its task count settled.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfiguredSubtopology {
    pub num_tasks: i32,
    /// User source topics, regexes resolved against the topics that exist.
    pub source_topics: Vec<String>,
    pub repartition_source_topics: BTreeMap<String, InternalTopic>,
    pub state_changelog_topics: BTreeMap<String, InternalTopic>,
}

/// A topology against the topics that exist: derived, never stored (recomputed after a
/// replay from the topology and the topics).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfiguredTopology {
    pub topology_epoch: i32,
    /// `Some` when the group can be assigned: every subtopology's task count is known and
    /// every topic it needs exists with the right partition count.
    pub subtopologies: Option<BTreeMap<String, ConfiguredSubtopology>>,
    /// Internal topics that do not exist yet, for the broker to create.
    pub internal_topics_to_create: BTreeMap<String, InternalTopic>,
    /// Why `subtopologies` is `None`.
    pub error: Option<TopicError>,
    /// Kafka fails the heartbeat instead (STREAMS_INVALID_TOPOLOGY, INVALID_TOPIC_EXCEPTION,
    /// or UNKNOWN_SERVER_ERROR without a message where Kafka hits an unchecked exception);
    /// `subtopologies` and `error` are `None` then.
    pub rejected: Option<Refusal>,
}

impl ConfiguredTopology {
    pub fn is_ready(&self) -> bool {
        self.subtopologies.is_some()
    }
}

/// Bounds a member's regex once compiled, so that a hostile pattern cannot make a heartbeat
/// allocate without limit (the same bounds as consumer group regexes).
const REGEX_COMPILED_BYTES_MAX: usize = 1 << 20;
/// Bounds a member's regex nesting depth (parser recursion).
const REGEX_NEST_MAX: u32 = 100;
/// Kafka names at most this many topics in a status message, then counts the rest.
const TOPICS_SHOWN_MAX: usize = 3;

/// Configures `topology` against the topics that exist (`topics`, by name).
pub fn configure(topology: &Topology, topics: &BTreeMap<String, Topic>) -> ConfiguredTopology {
    let mut out = ConfiguredTopology { topology_epoch: topology.epoch, ..ConfiguredTopology::default() };
    match configure_checked(topology, topics) {
        Ok((subtopologies, missing)) if missing.is_empty() => out.subtopologies = Some(subtopologies),
        Ok((_, missing)) => {
            let message =
                format!("Internal topics are missing: {}", summarize(missing.keys().map(String::as_str)));
            out.error = Some(TopicError { status: Status::MissingInternalTopics, message });
            out.internal_topics_to_create = missing;
        }
        Err(Failure::Status(error)) => out.error = Some(error),
        Err(Failure::Refused(refusal)) => out.rejected = Some(refusal),
    }
    out
}

/// How configuring stops: a status the group waits out, or a heartbeat Kafka fails.
enum Failure {
    Status(TopicError),
    Refused(Refusal),
}

fn missing_source_topics(message: String) -> Failure {
    Failure::Status(TopicError { status: Status::MissingSourceTopics, message })
}

fn incorrectly_partitioned(message: String) -> Failure {
    Failure::Status(TopicError { status: Status::IncorrectlyPartitionedTopics, message })
}

fn invalid_topology(message: String) -> Failure {
    Failure::Refused(Refusal::new(STREAMS_INVALID_TOPOLOGY, message))
}

/// Kafka's unchecked exceptions (an index out of range, a count below one) reach its
/// handler, which answers UNKNOWN_SERVER_ERROR and no message.
fn internal_error() -> Failure {
    Failure::Refused(Refusal { code: UNKNOWN_SERVER_ERROR, message: None })
}

/// The configured subtopologies, and the internal topics still to create.
type Configured = (BTreeMap<String, ConfiguredSubtopology>, BTreeMap<String, InternalTopic>);

fn configure_checked(topology: &Topology, topics: &BTreeMap<String, Topic>) -> Result<Configured, Failure> {
    // Kafka's `StreamsTopology` refuses a negative epoch with an IllegalArgumentException.
    if topology.epoch < 0 {
        return Err(internal_error());
    }
    let mut config = Config { subs: resolve(topology, topics), topics, decided: BTreeMap::new() };
    let groups = copartition_groups(&config.subs)?;
    check_sources(&config.subs, topics)?;
    config.decided = repartition_counts(&config)?;
    enforce_copartitioning(&mut config, &groups)?;
    let changelogs = changelog_counts(&config)?;
    config.decided.extend(changelogs);
    let mut configured = BTreeMap::new();
    for sub in &config.subs {
        configured.insert(sub.id.to_string(), configure_subtopology(&config, sub)?);
    }
    let missing = missing_internal_topics(&config, &configured)?;
    Ok((configured, missing))
}

/// One subtopology with its regexes resolved.
struct Resolved<'a> {
    id: &'a str,
    sub: &'a Subtopology,
    /// Named source topics and regex matches, sorted, each once.
    sources: Vec<String>,
    /// The topics each of `sub.source_topic_regex` matches.
    regex_matches: Vec<Vec<String>>,
}

/// The topology being configured, and the partition counts decided so far for internal
/// topics (Kafka's `decidedPartitionCountsForInternalTopics`).
struct Config<'a> {
    subs: Vec<Resolved<'a>>,
    topics: &'a BTreeMap<String, Topic>,
    decided: BTreeMap<String, i32>,
}

impl Config<'_> {
    /// A topic that exists counts as it is, even an internal one whose count was decided
    /// otherwise: that mismatch is reported once the internal topics are checked.
    fn count(&self, topic: &str) -> Option<i32> {
        existing_count(self.topics, topic).or_else(|| self.decided.get(topic).copied())
    }

    fn count_or_fail(&self, topic: &str) -> Result<i32, Failure> {
        self.count(topic).ok_or_else(internal_error)
    }

    /// One task per partition of the widest input; `None` for a subtopology without any.
    fn task_count(&self, sub: &Resolved) -> Result<Option<i32>, Failure> {
        let repartition = sub.sub.repartition_source_topics.iter().map(|t| &t.name);
        let mut widest = None;
        for topic in sub.sources.iter().chain(repartition) {
            widest = widest.max(Some(self.count_or_fail(topic)?));
        }
        Ok(widest)
    }
}

/// The partition count of a topic that exists (`__consumer_offsets` included, as in Kafka's
/// metadata image).
fn existing_count(topics: &BTreeMap<String, Topic>, name: &str) -> Option<i32> {
    internal_topic::lookup(topics, name).map(|(_, partitions)| partitions)
}

fn resolve<'a>(topology: &'a Topology, topics: &BTreeMap<String, Topic>) -> Vec<Resolved<'a>> {
    // A regex such as `.*` would otherwise also read the topology's own internal topics once
    // they exist, and change its task counts.
    let internal = internal_names(topology);
    let candidates: Vec<&str> = topics.keys().map(String::as_str).filter(|n| !internal.contains(n)).collect();
    let resolve_one = |(id, sub): (&'a String, &'a Subtopology)| {
        let regex_matches: Vec<Vec<String>> =
            sub.source_topic_regex.iter().map(|p| matching(p, &candidates)).collect();
        let mut sources: BTreeSet<String> = sub.source_topics.iter().cloned().collect();
        sources.extend(regex_matches.iter().flatten().cloned());
        Resolved { id: id.as_str(), sub, sources: sources.into_iter().collect(), regex_matches }
    };
    topology.subtopologies.iter().map(resolve_one).collect()
}

fn internal_names(topology: &Topology) -> BTreeSet<&str> {
    let mut names = BTreeSet::new();
    for sub in topology.subtopologies.values() {
        names.extend(sub.repartition_sink_topics.iter().map(String::as_str));
        let infos = sub.repartition_source_topics.iter().chain(&sub.state_changelog_topics);
        names.extend(infos.map(|t| t.name.as_str()));
    }
    names
}

/// An invalid pattern matches nothing rather than failing the group.
fn matching(pattern: &str, candidates: &[&str]) -> Vec<String> {
    match compile(pattern) {
        Some(regex) => candidates.iter().filter(|n| regex.is_match(n)).map(|n| n.to_string()).collect(),
        None => Vec::new(),
    }
}

/// A full match of the topic name, as Java's `Pattern.matches`. The raw pattern is compiled
/// first: anchoring `a)|(b` would otherwise turn an invalid pattern into a valid one.
fn compile(pattern: &str) -> Option<Regex> {
    let build = |p: &str| {
        RegexBuilder::new(p).size_limit(REGEX_COMPILED_BYTES_MAX).nest_limit(REGEX_NEST_MAX).build().ok()
    };
    build(pattern)?;
    build(&format!("^(?:{pattern})$"))
}

/// Each copartition group as topic names. Kafka resolves them before anything else, so an
/// index out of range fails the heartbeat whatever else is wrong.
fn copartition_groups(subs: &[Resolved]) -> Result<Vec<BTreeSet<String>>, Failure> {
    let mut groups = Vec::new();
    for sub in subs {
        for group in &sub.sub.copartition_groups {
            let mut names = BTreeSet::new();
            for &i in &group.source_topics {
                names.insert(at(&sub.sub.source_topics, i)?.clone());
            }
            for &i in &group.source_topic_regex {
                names.extend(at(&sub.regex_matches, i)?.iter().cloned());
            }
            for &i in &group.repartition_source_topics {
                names.insert(at(&sub.sub.repartition_source_topics, i)?.name.clone());
            }
            groups.push(names);
        }
    }
    Ok(groups)
}

fn at<T>(list: &[T], index: i16) -> Result<&T, Failure> {
    usize::try_from(index).ok().and_then(|i| list.get(i)).ok_or_else(internal_error)
}

/// Named source topics must exist. A subtopology that reads only regexes, none of which
/// matches, has nothing to size its tasks by: its regexes are reported missing too.
fn check_sources(subs: &[Resolved], topics: &BTreeMap<String, Topic>) -> Result<(), Failure> {
    let named = subs.iter().flat_map(|s| &s.sub.source_topics);
    let missing: BTreeSet<&str> =
        named.filter(|t| existing_count(topics, t).is_none()).map(String::as_str).collect();
    if !missing.is_empty() {
        return Err(missing_source_topics(format!("Source topics {} are missing.", summarize(missing))));
    }
    let unread = subs.iter().filter(|s| s.sources.is_empty() && s.sub.repartition_source_topics.is_empty());
    let unmatched: BTreeSet<&str> =
        unread.flat_map(|s| &s.sub.source_topic_regex).map(String::as_str).collect();
    if !unmatched.is_empty() {
        let message = format!("Source topics matching {} are missing.", summarize(unmatched));
        return Err(missing_source_topics(message));
    }
    Ok(())
}

/// Kafka's list of topics in a status message: the first three, then how many more.
fn summarize<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let names: Vec<&str> = names.into_iter().collect();
    if names.is_empty() {
        return "<none>".to_string();
    }
    let shown = names.iter().take(TOPICS_SHOWN_MAX).copied().collect::<Vec<_>>().join(", ");
    match names.len().saturating_sub(TOPICS_SHOWN_MAX) {
        0 => shown,
        more => format!("{shown} and {more} additional topics"),
    }
}

const REPARTITION_LOOP: &str = "Failed to compute number of partitions for all repartition topics. \
    There may be loops in the topology that cannot be resolved.";
const REPARTITION_NEVER_WRITTEN: &str = "Failed to compute number of partitions for all repartition \
    topics, because a repartition source topic is never used as a sink topic.";

/// Repartition topic counts: the member's fixed ones, then each sink written by a
/// subtopology gets that subtopology's widest input, round after round until every sink is
/// settled. A round that settles nothing while some sink is still open means a loop.
fn repartition_counts(config: &Config) -> Result<BTreeMap<String, i32>, Failure> {
    let all = config.subs.iter().flat_map(|s| &s.sub.repartition_source_topics);
    let mut counts: BTreeMap<String, i32> =
        all.clone().filter(|t| t.partitions != 0).map(|t| (t.name.clone(), t.partitions)).collect();
    loop {
        let (mut open, mut settled) = (false, false);
        for sub in &config.subs {
            for sink in &sub.sub.repartition_sink_topics {
                if counts.contains_key(sink) {
                    continue;
                }
                match sink_count(config, sub, &counts) {
                    Some(n) => {
                        counts.insert(sink.clone(), n);
                        settled = true;
                    }
                    None => open = true,
                }
            }
        }
        if !open {
            break;
        }
        if !settled {
            return Err(invalid_topology(REPARTITION_LOOP.to_string()));
        }
    }
    if all.clone().any(|t| !counts.contains_key(&t.name)) {
        return Err(invalid_topology(REPARTITION_NEVER_WRITTEN.to_string()));
    }
    Ok(counts)
}

/// The writing subtopology's widest input known so far: the repartition topics it reads
/// whose count is settled, and its user source topics.
fn sink_count(config: &Config, sub: &Resolved, counts: &BTreeMap<String, i32>) -> Option<i32> {
    let repartition = sub.sub.repartition_source_topics.iter().filter_map(|t| counts.get(&t.name).copied());
    let user = sub.sources.iter().filter_map(|t| config.count(t));
    repartition.chain(user).max()
}

/// Each copartition group's repartition topics take the group's count, one group after the
/// other (a later group sees what an earlier one decided).
fn enforce_copartitioning(config: &mut Config, groups: &[BTreeSet<String>]) -> Result<(), Failure> {
    let all = config.subs.iter().flat_map(|s| &s.sub.repartition_source_topics);
    let fixed: BTreeSet<String> = all.clone().filter(|t| t.partitions != 0).map(|t| t.name.clone()).collect();
    let repartition: BTreeSet<String> = all.map(|t| t.name.clone()).collect();
    for group in groups {
        let decided = enforce_group(config, group, &repartition, &fixed)?;
        config.decided.extend(decided);
    }
    Ok(())
}

fn enforce_group(
    config: &Config,
    group: &BTreeSet<String>,
    repartition: &BTreeSet<String>,
    fixed: &BTreeSet<String>,
) -> Result<BTreeMap<String, i32>, Failure> {
    // An empty group (or one whose regexes match nothing) constrains nothing.
    if group.is_empty() {
        return Ok(BTreeMap::new());
    }
    let (mut internal, mut user) = (BTreeMap::new(), BTreeMap::new());
    for topic in group {
        let side = if repartition.contains(topic) { &mut internal } else { &mut user };
        side.insert(topic.clone(), config.count_or_fail(topic)?);
    }
    let count = if !user.is_empty() {
        same_count(&user)?
    } else if !fixed.is_empty() {
        same_fixed_count(config, fixed, &internal)?
    } else {
        widest(&internal)?
    };
    for (topic, &found) in &internal {
        if fixed.contains(topic) && found != count {
            return Err(incorrectly_partitioned(format!(
                "Number of partitions [{found}] of repartition topic [{topic}] doesn't match number of \
                 partitions [{count}] of the source topic."
            )));
        }
    }
    Ok(internal.into_keys().map(|topic| (topic, count)).collect())
}

/// User topics copartitioned must already agree: the broker does not repartition them.
fn same_count(user: &BTreeMap<String, i32>) -> Result<i32, Failure> {
    let mut counts = user.values().copied();
    let first = counts.next().ok_or_else(internal_error)?;
    if counts.any(|n| n != first) {
        return Err(not_same(user));
    }
    Ok(first)
}

/// A group of repartition topics only: Kafka checks that every fixed repartition topic of
/// the whole topology agrees (not only the group's) and uses their count.
fn same_fixed_count(
    config: &Config,
    fixed: &BTreeSet<String>,
    internal: &BTreeMap<String, i32>,
) -> Result<i32, Failure> {
    let mut counts = Vec::with_capacity(fixed.len());
    for topic in fixed {
        counts.push(config.count_or_fail(topic)?);
    }
    let first = counts.first().copied().ok_or_else(internal_error)?;
    if counts.iter().any(|&n| n != first) {
        return Err(not_same(internal));
    }
    Ok(first)
}

fn widest(internal: &BTreeMap<String, i32>) -> Result<i32, Failure> {
    let widest = internal.values().copied().fold(0, i32::max);
    if widest == 0 {
        let names = internal.keys().map(String::as_str).collect::<Vec<_>>().join(", ");
        return Err(invalid_topology(format!(
            "All topics in the copartition group had undefined partition number: [{names}]"
        )));
    }
    Ok(widest)
}

/// Kafka prints the topics as a Java sorted map inside brackets: `[{a=1, b=2}]`.
fn not_same(counts: &BTreeMap<String, i32>) -> Failure {
    let entries = counts.iter().map(|(t, n)| format!("{t}={n}")).collect::<Vec<_>>().join(", ");
    incorrectly_partitioned(format!(
        "Following topics do not have the same number of partitions: [{{{entries}}}]"
    ))
}

/// Every changelog topic gets one partition per task of its subtopology.
fn changelog_counts(config: &Config) -> Result<BTreeMap<String, i32>, Failure> {
    let mut counts = BTreeMap::new();
    for sub in &config.subs {
        let Some(tasks) = config.task_count(sub)? else {
            return Err(invalid_topology(format!("No source topics found for subtopology {}", sub.id)));
        };
        for topic in &sub.sub.state_changelog_topics {
            counts.insert(topic.name.clone(), tasks);
        }
    }
    Ok(counts)
}

fn configure_subtopology(config: &Config, sub: &Resolved) -> Result<ConfiguredSubtopology, Failure> {
    let num_tasks = config.task_count(sub)?.ok_or_else(internal_error)?;
    let repartition_source_topics = internal_topics(config, &sub.sub.repartition_source_topics)?;
    let state_changelog_topics = internal_topics(config, &sub.sub.state_changelog_topics)?;
    // Only reachable with a topic of no partitions, which Kafka cannot have.
    if num_tasks <= 0 {
        return Err(internal_error());
    }
    let source_topics = sub.sources.clone();
    Ok(ConfiguredSubtopology { num_tasks, source_topics, repartition_source_topics, state_changelog_topics })
}

fn internal_topics(config: &Config, infos: &[TopicInfo]) -> Result<BTreeMap<String, InternalTopic>, Failure> {
    infos.iter().map(|info| Ok((info.name.clone(), internal_topic(config, info)?))).collect()
}

/// A count the member fixed is kept as sent; otherwise the decided one (not the existing
/// topic's: a topic that exists with another count is reported as such).
fn internal_topic(config: &Config, info: &TopicInfo) -> Result<InternalTopic, Failure> {
    let partitions = match info.partitions {
        0 => config.decided.get(&info.name).copied().ok_or_else(internal_error)?,
        fixed => fixed,
    };
    if let Some(reason) = invalid_topic_name(&info.name) {
        let message = format!("Topic name is invalid: {reason}");
        return Err(Failure::Refused(Refusal::new(INVALID_TOPIC_EXCEPTION, message)));
    }
    if partitions < 1 {
        return Err(internal_error());
    }
    Ok(InternalTopic {
        name: info.name.clone(),
        partitions,
        replication_factor: (info.replication_factor != 0).then_some(info.replication_factor),
        configs: info.topic_configs.iter().cloned().collect(),
    })
}

/// Kafka's `Topic.validate` reasons; Java measures the length in UTF-16 units.
fn invalid_topic_name(name: &str) -> Option<String> {
    let legal = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty() {
        Some("the empty string is not allowed".to_string())
    } else if name == "." || name == ".." {
        Some(format!("'{name}' is not allowed"))
    } else if name.encode_utf16().count() > TOPIC_NAME_LEN_MAX {
        Some(format!("the length of '{name}' is longer than the max allowed length {TOPIC_NAME_LEN_MAX}"))
    } else if !name.chars().all(legal) {
        Some(format!(
            "'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
        ))
    } else {
        None
    }
}

/// The configured internal topics that do not exist yet. One that exists with another
/// partition count fails the whole configuration, missing ones or not.
fn missing_internal_topics(
    config: &Config,
    configured: &BTreeMap<String, ConfiguredSubtopology>,
) -> Result<BTreeMap<String, InternalTopic>, Failure> {
    let mut to_create = BTreeMap::new();
    for sub in configured.values() {
        for topic in sub.repartition_source_topics.values().chain(sub.state_changelog_topics.values()) {
            to_create.insert(topic.name.clone(), topic.clone());
        }
    }
    for topic in required_topics(config) {
        let Some(found) = existing_count(config.topics, topic) else { continue };
        let Some(expected) = to_create.remove(topic) else { continue };
        if expected.partitions != found {
            let expected = expected.partitions;
            return Err(incorrectly_partitioned(format!(
                "Existing topic {topic} has different number of partitions: expected {expected}, \
                 found {found}"
            )));
        }
    }
    Ok(to_create)
}

/// Every topic the topology reads or keeps state in.
fn required_topics<'a>(config: &'a Config) -> BTreeSet<&'a str> {
    let mut names = BTreeSet::new();
    for sub in &config.subs {
        names.extend(sub.sources.iter().map(String::as_str));
        let infos = sub.sub.repartition_source_topics.iter().chain(&sub.sub.state_changelog_topics);
        names.extend(infos.map(|t| t.name.as_str()));
    }
    names
}

#[cfg(test)]
#[path = "topology_tests.rs"]
mod tests;
