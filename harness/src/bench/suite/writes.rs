//! The write loop of BaseWritesBench and TxWritesBench (Java `BaseWritesBench.Writes`): each
//! iteration sends one record to topic1 and one to topic2 (`TOPICS`), then waits for both deliveries;
//! with a transactional id it is wrapped in begin_transaction … commit_transaction (the commit
//! before the waits, as in Java). The recorded latency is the whole iteration.

use std::time::{Duration, Instant};

use anyhow::Result;
use tokio::runtime::Handle;

use super::clients::BenchProducer;
use super::config::{value, BenchConfig};
use super::runner::Worker;

pub struct Writes {
    producer: BenchProducer,
    fixed: Option<Vec<u8>>,
    topics: (String, String),
}

impl Writes {
    /// `transactional_id`: `None` for BaseWritesBench.
    pub fn open(cfg: &BenchConfig, transactional_id: Option<&str>, runtime: Handle) -> Result<Self> {
        Ok(Self {
            producer: BenchProducer::open(cfg, transactional_id, runtime)?,
            fixed: cfg.fixed_payload(),
            topics: (cfg.topic1.clone(), cfg.topic2.clone()),
        })
    }
}

impl Worker for Writes {
    fn iteration(&mut self, i: u64) -> Result<Duration> {
        let value = value(self.fixed.as_deref(), i);
        let p = &self.producer;
        let start = Instant::now();
        p.begin()?;
        let first = p.send(&self.topics.0, None, &value)?;
        let second = p.send(&self.topics.1, None, &value)?;
        p.commit()?;
        p.delivered(first)?;
        p.delivered(second)?;
        Ok(start.elapsed())
    }
}
