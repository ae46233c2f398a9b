//! The write loop of BaseWritesBench and TxWritesBench (Java `BaseWritesBench.Writes`): each
//! iteration sends one record to topic1 and one to topic2, then waits for both deliveries;
//! with a transactional id it is wrapped in begin_transaction … commit_transaction (the commit
//! before the waits, as in Java). The recorded latency is the whole iteration.

use std::time::{Duration, Instant};

use anyhow::Result;
use tokio::runtime::Handle;

use super::clients::BenchProducer;
use super::config::{value, BenchConfig, TOPIC1, TOPIC2};
use super::runner::Worker;

pub struct Writes {
    producer: BenchProducer,
    fixed: Option<Vec<u8>>,
}

impl Writes {
    /// `transactional_id`: `None` for BaseWritesBench.
    pub fn open(cfg: &BenchConfig, transactional_id: Option<&str>, runtime: Handle) -> Result<Self> {
        Ok(Self {
            producer: BenchProducer::open(cfg, transactional_id, runtime)?,
            fixed: cfg.fixed_payload(),
        })
    }
}

impl Worker for Writes {
    fn iteration(&mut self, i: u64) -> Result<Duration> {
        let value = value(self.fixed.as_deref(), i);
        let p = &self.producer;
        let start = Instant::now();
        p.begin()?;
        let first = p.send(TOPIC1, None, &value)?;
        let second = p.send(TOPIC2, None, &value)?;
        p.commit()?;
        p.delivered(first)?;
        p.delivered(second)?;
        Ok(start.elapsed())
    }
}
