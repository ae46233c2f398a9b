//! The current build loads the data directories onelog 0.1.0 wrote (issue 33): the golden
//! fixture `harness/fixtures/0.1.0/` (made by `scripts/upgrade-fixture.sh` from the release's
//! own binary) is unpacked into three node directories, and three nodes of this build start
//! on them with the fixture's ports and configs. No old binary is needed.
//!
//! - Everything the manifest lists reads back exactly (`upgrade::verify`): every record at its
//!   offset once, with its batch's codec and producer fields, under read_uncommitted and under
//!   read_committed (the committed transactions' records visible, the aborted one's not), log
//!   start offsets moved by DeleteRecords, the deleted topic absent, idempotent and
//!   transactional producer state, consumer-group offsets (one committed inside a
//!   transaction), SCRAM users, ACL bindings, client quotas, dynamic topic and broker configs;
//!   alice logs in with both SCRAM mechanisms and reads the secured topic, a wrong password and
//!   a mechanism without a credential are refused, the ACLs refuse bob the topic and alice a
//!   write to it. The replicas' digests agree.
//! - The data is live, not only readable: a record lands after the old ones, the transactional
//!   id of the committed transactions initializes again (a new epoch) and commits, and a member
//!   of the group resumes at the offsets 0.1.0 committed.
//!
//! The fixture's producer and transactional ids are idle since the day it was made, longer than
//! the longest expiry a broker accepts: the nodes run with the expiry checks at their longest
//! interval (`fixture::reader_configs`), so this test never depends on the calendar.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use harness::kafka::client_config;
use harness::txn::{send_sync, transactional_producer, TXN_CALL_TIMEOUT};
use harness::upgrade::fixture::{self, fixture_dir, reader_configs};
use harness::upgrade::make::unpack_into;
use harness::upgrade::manifest::{Manifest, MANIFEST_FILE};
use harness::upgrade::observe::{observe, Names, Target};
use harness::upgrade::populate::TXN_COMMITTED;
use harness::upgrade::verify::verify;
use harness::Cluster;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};

const RELEASE: &str = "0.1.0";

#[tokio::test(flavor = "multi_thread")]
async fn the_current_build_reads_what_0_1_0_wrote() {
    let dir = fixture_dir(RELEASE);
    let manifest = Manifest::read(&dir.join(MANIFEST_FILE)).expect("the fixture's manifest");
    let mut configs: Vec<(String, String)> = manifest.node_configs.clone().into_iter().collect();
    configs.extend(reader_configs());
    let mut cluster =
        Cluster::prepare(fixture::cluster_options(None, &configs)).expect("the fixture's ports");
    unpack_into(&cluster, &dir, &manifest).expect("unpacking the fixture");
    cluster.start_all().expect("three nodes of this build on 0.1.0's data directories");
    let result = scenario(&mut cluster, &manifest).await;
    cluster.unwrap_or_dump(result);
}

async fn scenario(cluster: &mut Cluster, manifest: &Manifest) -> Result<()> {
    verify(cluster, manifest).await.context("this build against the 0.1.0 manifest")?;
    cluster.assert_digests_equal()?;
    writes_after_loading(cluster).await
}

/// A plain record, a transaction of the fixture's transactional id, and the fixture's group
/// resuming where 0.1.0 left it.
async fn writes_after_loading(cluster: &mut Cluster) -> Result<()> {
    let bootstrap = cluster.bootstrap();
    let producer: FutureProducer = client_config(&bootstrap).set("acks", "all").create()?;
    let record = FutureRecord::to("fx-plain").partition(0).key("k").payload("after-upgrade");
    let offset = producer.send(record, TXN_CALL_TIMEOUT).await.map_err(|(e, _)| e)?.offset;
    ensure!(offset == 10, "a record after fx-plain/0's ten landed at {offset}");

    let txn =
        transactional_producer(&bootstrap, TXN_COMMITTED).context("init of 0.1.0's transactional id")?;
    txn.begin_transaction()?;
    send_sync(&txn, "fx-txn", Some(0), "k", "fx-txn-after-upgrade").await?;
    txn.commit_transaction(TXN_CALL_TIMEOUT)?;
    let names = Names { transactional_ids: vec![TXN_COMMITTED.to_string()], ..Names::default() };
    let state = observe(&Target::of(cluster)?, &names).await?;
    // 0.1.0 left it at producer id 1, epoch 0: the new instance fenced that one.
    let line = &state.transactions[TXN_COMMITTED];
    let epoch = line.strip_prefix("CompleteCommit pid 1 epoch ").and_then(|rest| rest.split(' ').next());
    ensure!(
        epoch.and_then(|e| e.parse::<i16>().ok()).is_some_and(|e| e >= 1),
        "{TXN_COMMITTED} after a new instance's commit: {line}"
    );
    let fx_txn = &state.topics["fx-txn"].partitions[&0].read_committed;
    ensure!(fx_txn.last().map(String::as_str) == Some("7 fx-txn-after-upgrade"), "fx-txn/0 reads {fx_txn:?}");

    let first = resume_group(&bootstrap)?;
    let expected = BTreeMap::from([(0, 10), (1, 6), (2, 3)]);
    ensure!(first == expected, "fx-group resumed at {first:?}, 0.1.0 committed {expected:?}");
    Ok(())
}

/// The first offset a new member of `fx-group` reads on each partition of `fx-plain`.
fn resume_group(bootstrap: &str) -> Result<BTreeMap<i32, i64>> {
    let consumer: BaseConsumer = client_config(bootstrap)
        .set("group.id", "fx-group")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "error")
        .create()?;
    consumer.subscribe(&["fx-plain"])?;
    let (mut first, deadline) = (BTreeMap::new(), Instant::now() + Duration::from_secs(60));
    while first.len() < 3 {
        ensure!(Instant::now() < deadline, "fx-group read only {first:?} in 60 s");
        if let Some(m) = consumer.poll(Duration::from_millis(200)) {
            let m = m.context("fx-group member")?;
            first.entry(m.partition()).or_insert(m.offset());
        }
    }
    Ok(first)
}
