//! The two demo programs against a real three-node cluster whose leader is killed with
//! SIGKILL while both run, and restarted (issue 16): the checkout demo (both writers: atomic
//! multi-topic produce and transactions) and the exactly-once pipeline must carry on and
//! their checks pass, as they must in `docker compose up` and `scripts/demo.sh`.

use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use harness::demo::checkout::{self, CheckoutConfig, Mode};
use harness::demo::fresh_run_id;
use harness::demo::pipeline::{self, PipelineConfig};
use harness::{Cluster, ClusterOptions};

/// Each checkout writer's orders and pace: 10 s of orders, so the kill lands in the middle.
const ORDERS: u64 = 500;
const ORDERS_PER_SECOND: f64 = 50.0;
/// The pipeline's feeding time.
const FEED_FOR: Duration = Duration::from_secs(10);
/// When the leader is killed, after both demos started.
const KILL_AFTER: Duration = Duration::from_secs(4);

#[test]
fn both_demos_pass_their_checks_through_a_leader_kill() {
    let mut cluster = Cluster::start_with(
        ClusterOptions::new(3)
            .config("log.segment.bytes", 1 << 20)
            // As in docker-compose.yml: the pipeline's group forms at once.
            .config("group.initial.rebalance.delay.ms", 0),
    )
    .expect("starting cluster");
    let result = scenario(&mut cluster);
    cluster.unwrap_or_dump(result);
}

fn scenario(cluster: &mut Cluster) -> Result<()> {
    cluster.wait_for_leader(Duration::from_secs(30))?;
    let bootstrap = cluster.bootstrap();
    let run_id = fresh_run_id();
    let checkout_config = CheckoutConfig {
        bootstrap: bootstrap.clone(),
        mode: Mode::Both,
        orders: ORDERS,
        per_second: ORDERS_PER_SECOND,
        abort_one_in: 10,
        partitions: 3,
        run_id: run_id.clone(),
    };
    let pipeline_config = PipelineConfig { run_id, ..PipelineConfig::new(&bootstrap, FEED_FOR) };
    let checkout = std::thread::spawn(move || checkout::run(&checkout_config));
    let pipeline = std::thread::spawn(move || pipeline::run(&pipeline_config));

    std::thread::sleep(KILL_AFTER);
    let leader = cluster.leader()?;
    cluster.kill9(leader)?;
    let killed_at = Instant::now();
    let (new_leader, took) = cluster.wait_for_leader(Duration::from_secs(30))?;
    println!("killed leader {leader}; node {new_leader} leads after {took:?}");
    cluster.start_node(leader)?;
    cluster.wait_serving(leader)?;

    let checkout = checkout.join().map_err(|_| anyhow::anyhow!("checkout panicked"))?.context("checkout")?;
    let pipeline = pipeline.join().map_err(|_| anyhow::anyhow!("pipeline panicked"))?.context("pipeline")?;
    println!("{}\n{}", checkout.summary(), pipeline.summary());

    ensure!(checkout.passed(), "checkout check failed: {:?}", checkout.violations);
    ensure!(pipeline.passed(), "pipeline check failed: {:?}", pipeline.violations);
    // The kill must have landed while both were writing, or it tested nothing.
    let checkout_ended = checkout.writing_ended().context("no checkout writer")?;
    ensure!(killed_at < checkout_ended, "the checkout writers had finished before the kill");
    ensure!(killed_at < pipeline.feeding_ended, "the pipeline's feeder had stopped before the kill");
    for w in &checkout.writers {
        ensure!(w.placed == ORDERS, "{}: {} of {ORDERS} orders placed", w.writer.name(), w.placed);
        // Most orders get through: a writer that only failed would pass the check vacuously.
        ensure!(w.counts.committed as u64 >= ORDERS * 8 / 10, "{}: {:?}", w.writer.name(), w.counts);
    }
    let transactional = checkout.writers.iter().find(|w| w.writer == checkout::Writer::Transactional);
    let aborted_on_purpose = transactional.context("no transactional writer")?.counts.aborted_on_purpose;
    ensure!(aborted_on_purpose >= (ORDERS / 10) as usize, "only {aborted_on_purpose} deliberate aborts");
    ensure!(checkout.seen.matched >= checkout.writers.iter().map(|w| w.counts.committed).sum::<usize>());
    // Not vacuous, whatever the machine's speed: inputs were acknowledged across the kill, and
    // every one of them came out (the check pairs each with its output); no throughput floor.
    let acknowledged = pipeline.copier.input_acknowledged;
    ensure!(
        acknowledged > 0 && pipeline.output_records >= acknowledged,
        "the pipeline put out {} records for {acknowledged} acknowledged inputs",
        pipeline.output_records
    );
    ensure!(pipeline.txns.aborted_on_purpose > 0, "no deliberate abort in the pipeline: {:?}", pipeline.txns);
    cluster.assert_digests_equal()?;
    Ok(())
}
