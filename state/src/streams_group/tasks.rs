//! Task ids as the Streams protocol carries them: a subtopology id and a partition number
//! (Kafka's `TaskId`), grouped by subtopology, and the active/standby/warm-up triple a member
//! is assigned (Kafka's `TasksTuple`).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// Partition numbers by subtopology id. A subtopology with no task is absent, never empty.
pub type Tasks = BTreeMap<String, BTreeSet<i32>>;

/// What one member runs or is to run: active tasks (each owned by one member of the group),
/// standby replicas and warm-up tasks (never on a process that runs the task active).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct TasksTuple {
    pub active: Tasks,
    pub standby: Tasks,
    pub warmup: Tasks,
}

impl TasksTuple {
    pub fn is_empty(&self) -> bool {
        self.active.is_empty() && self.standby.is_empty() && self.warmup.is_empty()
    }
}

/// Adds one task; keeps the "absent, never empty" rule of [`Tasks`] trivially.
pub fn insert(tasks: &mut Tasks, subtopology: &str, partition: i32) {
    tasks.entry(subtopology.to_string()).or_default().insert(partition);
}

/// Whether the task is in the set.
pub fn contains(tasks: &Tasks, subtopology: &str, partition: i32) -> bool {
    tasks.get(subtopology).is_some_and(|ps| ps.contains(&partition))
}

/// Drops subtopologies left without a task.
pub fn compact(tasks: &mut Tasks) {
    tasks.retain(|_, ps| !ps.is_empty());
}
