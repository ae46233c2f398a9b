//! A transactions-v1 client ends a transaction that added a partition but wrote nothing yet,
//! right after a committed one: Kafka's coordinator had the transaction Ongoing from its
//! AddPartitionsToTxn, so both the abort and the commit succeed.
//!
//! onelog keeps AddPartitionsToTxn in leader memory (DESIGN §1), so the log still showed the
//! previous transaction CompleteCommit. The other decision was taken for a confused retry and
//! refused with INVALID_TXN_STATE, which is fatal for librdkafka and Java alike. A client gets
//! there by aborting while its first batch still lingers: librdkafka (and Java) register the
//! partition at once and send the batch only after `linger.ms`. Found while modelling the
//! coordinator's memory in the cross-group simulation (`state/tests/xgroup`, issue 32).

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use harness::kafka::create_topics;
use harness::txn::{read_values, transactional_config, READ_COMMITTED, TXN_CALL_TIMEOUT};
use harness::{Broker, BrokerOptions};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};

const TOPIC: &str = "added-only";

#[tokio::test(flavor = "multi_thread")]
async fn librdkafka_ends_a_transaction_that_added_a_partition_but_wrote_nothing() {
    let broker = Broker::start(BrokerOptions::default()).expect("starting onelog");
    let result = added_only(&broker).await;
    broker.unwrap_or_dump(result);
}

async fn added_only(broker: &Broker) -> Result<()> {
    let bootstrap = broker.bootstrap();
    create_topics(&bootstrap, &[(TOPIC, 1)]).await?;
    // The batch lingers for 20 s (under `message.timeout.ms`), long after the partition is
    // registered.
    let producer: FutureProducer =
        transactional_config(&bootstrap, "added-only-txn").set("linger.ms", "20000").create()?;
    producer.init_transactions(TXN_CALL_TIMEOUT).context("init_transactions")?;

    producer.begin_transaction()?;
    let committed = producer.send_result(FutureRecord::to(TOPIC).key("a").payload("committed-1"));
    committed.map_err(|(e, _)| anyhow::anyhow!("send: {e}"))?;
    producer.commit_transaction(TXN_CALL_TIMEOUT).context("the first commit")?;

    // Added, not written: the abort purges the lingering batch and ends the transaction.
    producer.begin_transaction()?;
    let lingering = producer.send_result(FutureRecord::to(TOPIC).key("b").payload("aborted-lingering"));
    lingering.map_err(|(e, _)| anyhow::anyhow!("send: {e}"))?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    producer.abort_transaction(TXN_CALL_TIMEOUT).context("aborting a transaction that wrote nothing")?;

    // The producer goes on: a transaction that writes, committed.
    producer.begin_transaction()?;
    let flushed = producer.send_result(FutureRecord::to(TOPIC).key("c").payload("committed-2"));
    flushed.map_err(|(e, _)| anyhow::anyhow!("send: {e}"))?;
    producer.commit_transaction(TXN_CALL_TIMEOUT).context("a commit after the abort")?;

    let values = read_values(&bootstrap, TOPIC, 1, READ_COMMITTED)?;
    ensure!(values == ["committed-1", "committed-2"], "read_committed saw {values:?}");
    Ok(())
}
