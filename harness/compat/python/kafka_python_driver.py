"""Compatibility-matrix driver for kafka-python 3.0 (pure Python client).

Runs compat_common.SCENARIOS against COMPAT_BOOTSTRAP and prints one JSON line per scenario.
kafka-python 3.0 has an idempotent and transactional producer (KIP-98) and an admin client with
delete_records and incremental configs, so every scenario is expressible.
"""

import threading
import time

import kafka
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
from kafka.errors import (
    IllegalGenerationError,
    InvalidProducerEpochError,
    KafkaError,
    OffsetOutOfRangeError,
    ProducerFencedError,
    RebalanceInProgressError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
)

import compat_common as c

CLIENT = "kafka-python"
VERSION = kafka.__version__
BOOT = c.BOOTSTRAP.split(",")
# Connection security from the environment (compat_common, issue #15).
SEC = c.kafka_python_security()
admin = KafkaAdminClient(bootstrap_servers=BOOT, **SEC, request_timeout_ms=30000)


def topic(scenario, partitions=1, suffix=""):
    name = c.name(CLIENT, scenario, suffix)
    admin.create_topics([NewTopic(name, partitions, 3, topic_configs=dict(c.TOPIC_CONFIGS))], timeout_ms=30000)
    deadline = time.monotonic() + 20
    probe = KafkaConsumer(bootstrap_servers=BOOT, **SEC)
    while (probe.partitions_for_topic(name) or set()) != set(range(partitions)):
        c.expect(time.monotonic() < deadline, "topic %s not in metadata" % name)
        time.sleep(0.2)
    probe.close()
    return name


def producer(**extra):
    return KafkaProducer(bootstrap_servers=BOOT, **SEC, linger_ms=5, **extra)


def produce(p, name, recs, partition=0, **kw):
    futures = [p.send(name, key=k, value=v, headers=h, partition=partition, **kw) for k, v, h in recs]
    p.flush(30)
    return [f.get(30) for f in futures]


def consumer(**extra):
    extra.setdefault("enable_auto_commit", False)
    return KafkaConsumer(bootstrap_servers=BOOT, **SEC, **extra)


def assigned(name, partition=0, offset=None, **extra):
    cons = consumer(**extra)
    tp = TopicPartition(name, partition)
    cons.assign([tp])
    if offset is None:
        cons.seek_to_beginning(tp)
    else:
        cons.seek(tp, offset)
    return cons


def read(cons, n, extra_s=1.0):
    """Reads n records, then polls extra_s more to see there are no others."""
    out = []
    deadline = time.monotonic() + c.TIMEOUT_S / 3
    while len(out) < n and time.monotonic() < deadline:
        for batch in cons.poll(200).values():
            out += batch
    c.expect(len(out) >= n, "read %d of %d: %s" % (len(out), n, c.short([m.value for m in out])))
    quiet = time.monotonic() + extra_s
    while time.monotonic() < quiet:
        for batch in cons.poll(200).values():
            out += batch
    return out


def triple(m):
    return (m.key, m.value, [(k, v if v is not None else b"") for k, v in m.headers])


def s_create_topic():
    name = topic("create_topic", 3)
    md = admin.describe_topics([name])[0]
    c.expect_eq(sorted(p["partition_index"] for p in md["partitions"]), [0, 1, 2], "partitions")
    c.expect(all(len(p["replica_nodes"]) == 3 for p in md["partitions"]), "3 replicas each")
    return "3 partitions, 3 replicas each"


def s_produce_consume():
    name = topic("produce_consume")
    recs = c.records(20)
    produce(producer(), name, recs)
    c.expect_eq([triple(m) for m in read(assigned(name), 20)], recs, "records")
    return "20 records with keys and 2 headers exact"


def s_compression():
    covered = []
    for codec in ["gzip", "snappy", "lz4", "zstd"]:
        name = topic("compression", suffix="-" + codec)
        recs = c.records(50, codec)
        produce(producer(compression_type=codec), name, recs)
        c.expect_eq([triple(m) for m in read(assigned(name), 50)], recs, codec)
        covered.append(codec)
    return "codecs: " + ",".join(covered)


def subscribed(name, group, reset, **extra):
    cons = consumer(group_id=group, auto_offset_reset=reset, **extra)
    cons.subscribe([name])
    return cons


def wait_assignment(conses, total):
    """Polls every consumer, each from its own thread as an application would, until the
    group's assignment covers `total` partitions with every member holding some.

    One thread taking turns between consumers does not work with kafka-python 3.0.12: a
    JoinGroup/SyncGroup round that completes while another consumer is being polled is
    discarded (`ensure_active_group` starts a new join when its join task is already done),
    and the leader's fresh JoinGroup starts another rebalance, round after round."""
    deadline = time.monotonic() + c.TIMEOUT_S / 2
    stop = threading.Event()
    errors = []

    def keep_polling(cons):
        while not stop.is_set() and time.monotonic() < deadline:
            got = cons.poll(100)
            if any(got.values()):
                errors.append("a record arrived while waiting for the assignment")
                return

    threads = [threading.Thread(target=keep_polling, args=(x,), daemon=True) for x in conses]
    for t in threads:
        t.start()
    try:
        while time.monotonic() < deadline:
            c.expect(not errors, "; ".join(errors))
            sizes = [len(x.assignment()) for x in conses]
            if sum(sizes) == total and all(sizes):
                return sizes
            time.sleep(0.05)
    finally:
        stop.set()
        for t in threads:
            t.join()
    raise AssertionError("assignments never settled: %s" % [len(x.assignment()) for x in conses])


def s_consume_earliest():
    name = topic("consume_earliest")
    recs = c.records(10)
    produce(producer(), name, recs)
    cons = subscribed(name, c.name(CLIENT, "consume_earliest"), "earliest")
    c.expect_eq([triple(m) for m in read(cons, 10)], recs, "records")
    cons.close()
    return "10 of 10 from a group without offsets"


def s_consume_latest():
    name = topic("consume_latest")
    produce(producer(), name, c.records(5, "old"))
    cons = subscribed(name, c.name(CLIENT, "consume_latest"), "latest")
    wait_assignment([cons], 1)
    tp = TopicPartition(name, 0)
    c.expect_eq(cons.position(tp), 5, "position after the latest reset")
    new = c.records(5, "new")
    produce(producer(), name, new)
    c.expect_eq([triple(m) for m in read(cons, 5)], new, "records after joining")
    cons.close()
    return "position 5, only the 5 new records"


def s_seek_timestamp():
    name = topic("seek_timestamp")
    base = int(time.time() * 1000) - 60_000
    p = producer()
    for i, (k, v, h) in enumerate(c.records(5)):
        p.send(name, key=k, value=v, headers=h, partition=0, timestamp_ms=base + i * 1000)
    p.flush(30)
    tp = TopicPartition(name, 0)
    cons = consumer()
    found = cons.offsets_for_times({tp: base + 2500})[tp]
    c.expect(found is not None, "no offset for the timestamp")
    c.expect_eq(found.offset, 3, "offset for base+2.5s")
    cons.assign([tp])
    cons.seek(tp, found.offset)
    m = read(cons, 1, extra_s=0)[0]
    c.expect_eq((m.value, m.timestamp), (b"v-r-3", base + 3000), "record")
    return "offsets_for_times -> 3, read v-r-3"


def consume_some(conses, n):
    seen = []
    deadline = time.monotonic() + c.TIMEOUT_S / 2
    while len(seen) < n:
        c.expect(time.monotonic() < deadline, "consumed %d of %d" % (len(seen), n))
        for cons in conses:
            for tp, batch in cons.poll(100, max_records=1).items():
                for m in batch:
                    cons.commit({tp: kafka.OffsetAndMetadata(m.offset + 1, "", -1)})
                    seen.append(m.value)
    return seen


def s_group_rebalance():
    name = topic("group_rebalance", 3)
    group = c.name(CLIENT, "group_rebalance")
    a = subscribed(name, group, "earliest")
    wait_assignment([a], 3)
    b = subscribed(name, group, "earliest")
    sizes = wait_assignment([a, b], 3)
    everything = []
    p = producer()
    for part in range(3):
        recs = c.records(10, "p%d" % part)
        produce(p, name, recs, partition=part)
        everything += [v for _, v, _ in recs]
    first = consume_some([a, b], 15)
    a.close()
    b.close()
    resumed = subscribed(name, group, "earliest")
    rest = [m.value for m in read(resumed, 30 - len(first), extra_s=2.0)]
    resumed.close()
    c.expect_eq(sorted(first + rest), sorted(everything), "records before and after the resume")
    return "assignment %s, %d committed then %d resumed" % (sizes, len(first), len(rest))


def s_member_leave_rejoin():
    name = topic("member_leave_rejoin", 3)
    group = c.name(CLIENT, "member_leave_rejoin")
    a = subscribed(name, group, "earliest")
    b = subscribed(name, group, "earliest")
    wait_assignment([a, b], 3)
    b.close()
    wait_assignment([a], 3)
    rejoined = subscribed(name, group, "earliest")
    sizes = wait_assignment([a, rejoined], 3)
    a.close()
    rejoined.close()
    return "after leave 3/3, after rejoin %s" % sizes


def s_idempotent_produce():
    name = topic("idempotent_produce")
    recs = c.records(200)
    produce(producer(enable_idempotence=True, acks="all"), name, recs)
    c.expect_eq([triple(m) for m in read(assigned(name), 200)], recs, "records")
    return "200 records once, in order"


def txn_producer(txn_id):
    p = producer(transactional_id=txn_id, enable_idempotence=True, acks="all")
    p.init_transactions()
    return p


def s_txn_commit_abort():
    name = topic("txn_commit_abort")
    p = txn_producer(c.name(CLIENT, "txn_commit_abort"))
    for tag, n, commit in [("c1", 5, True), ("a", 3, False), ("c2", 5, True)]:
        p.begin_transaction()
        for k, v, h in c.records(n, tag):
            p.send(name, key=k, value=v, headers=h, partition=0)
        p.flush(30)
        (p.commit_transaction if commit else p.abort_transaction)()
    rc = [m.value for m in read(assigned(name, isolation_level="read_committed"), 10)]
    c.expect_eq(rc, c.values(5, "c1") + c.values(5, "c2"), "read_committed")
    ru = [m.value for m in read(assigned(name, isolation_level="read_uncommitted"), 13)]
    c.expect_eq(ru, c.values(5, "c1") + c.values(3, "a") + c.values(5, "c2"), "read_uncommitted")
    return "read_committed 10, read_uncommitted 13"


def s_consume_process_produce():
    src = topic("consume_process_produce", suffix="-in")
    dst = topic("consume_process_produce", suffix="-out")
    group = c.name(CLIENT, "consume_process_produce")
    produce(producer(), src, c.records(10))
    cons = subscribed(src, group, "earliest", isolation_level="read_committed")
    inputs = read(cons, 10)
    p = txn_producer(c.name(CLIENT, "consume_process_produce"))
    p.begin_transaction()
    for m in inputs:
        p.send(dst, key=m.key, value=b"out-" + m.value, partition=0)
    tp = TopicPartition(src, 0)
    p.send_offsets_to_transaction({tp: kafka.OffsetAndMetadata(cons.position(tp), "", -1)}, group)
    p.commit_transaction()
    out = [m.value for m in read(assigned(dst, isolation_level="read_committed"), 10)]
    c.expect_eq(out, [b"out-" + v for v in c.values(10, "r")], "output")
    c.expect_eq(cons.committed(tp), 10, "committed offset")
    cons.close()
    return "10 outputs exact, committed offset 10"


FENCED = (ProducerFencedError, InvalidProducerEpochError)


def fenced_pair(scenario):
    name = topic(scenario)
    txn_id = c.name(CLIENT, scenario)
    p1 = txn_producer(txn_id)
    p1.begin_transaction()
    p1.send(name, value=b"from-p1", partition=0).get(30)
    p2 = txn_producer(txn_id)
    try:
        p1.commit_transaction()
    except KafkaError as e:
        return name, p1, p2, e
    raise AssertionError("the fenced producer committed")


def s_txn_fencing():
    name, _p1, p2, err = fenced_pair("txn_fencing")
    c.expect(isinstance(err, FENCED), "fencing error, got %r" % err)
    p2.begin_transaction()
    p2.send(name, value=b"from-p2", partition=0)
    p2.commit_transaction()
    got = [m.value for m in read(assigned(name, isolation_level="read_committed"), 1)]
    c.expect_eq(got, [b"from-p2"], "read_committed")
    return "p1 got %s; p2 committed" % type(err).__name__


def s_err_fenced_producer():
    name, p1, _p2, err = fenced_pair("err_fenced_producer")
    c.expect(isinstance(err, FENCED), "fencing error, got %r" % err)
    try:
        p1.begin_transaction()
        p1.send(name, value=b"again", partition=0).get(10)
        p1.commit_transaction()
    except KafkaError as again:
        return "%s; next transaction refused: %s" % (type(err).__name__, type(again).__name__)
    raise AssertionError("the fenced producer committed another transaction")


def s_alter_config():
    name = topic("alter_config")
    res = ConfigResource(ConfigResourceType.TOPIC, name, configs={"retention.ms": "3600000"})
    admin.incremental_alter_configs([res]) if hasattr(admin, "incremental_alter_configs") else admin.alter_configs([res])
    desc = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])
    text = repr(desc)
    c.expect("'retention.ms', '3600000'" in text or "retention.ms" in text and "3600000" in text, "not read back")
    return "retention.ms=3600000 read back"


def s_delete_records():
    name = topic("delete_records")
    produce(producer(), name, c.records(10))
    tp = TopicPartition(name, 0)
    admin.delete_records({tp: 5})
    cons = consumer()
    c.expect_eq(cons.beginning_offsets([tp])[tp], 5, "beginning offset")
    got = read(assigned(name), 5)
    c.expect_eq([m.offset for m in got], list(range(5, 10)), "offsets from earliest")
    return "beginning offset 5, earliest read starts at 5"


def s_leader_kill():
    name = topic("leader_kill")
    acked, errors, stop = [], [], threading.Event()
    p = producer(acks="all", enable_idempotence=True, retries=100, delivery_timeout_ms=60000)

    def run():
        i = 0
        while not stop.is_set():
            v = b"lk-%d" % i
            f = p.send(name, value=v, partition=0)
            f.add_callback(lambda _md, v=v: acked.append(v))
            f.add_errback(errors.append)
            time.sleep(0.005)
            i += 1
        p.flush(60)

    worker = threading.Thread(target=run)
    worker.start()
    time.sleep(2)
    c.kill_leader()
    time.sleep(3)
    stop.set()
    worker.join(70)
    c.expect(acked, "nothing acknowledged")
    got = set(m.value for m in read(assigned(name), len(acked), extra_s=2.0))
    lost = [v for v in acked if v not in got]
    c.expect(not lost, "%d acknowledged records lost, e.g. %s" % (len(lost), lost[:3]))
    return "%d acked, all read back (%d errors)" % (len(acked), len(errors))


def s_txn_leader_kill():
    name = topic("txn_leader_kill", c.TXN_PARTITIONS)
    p = producer(transactional_id=c.name(CLIENT, "txn_leader_kill"), enable_idempotence=True, acks="all",
                 transaction_timeout_ms=c.TXN_CALL_S * 1000, delivery_timeout_ms=c.TXN_CALL_S * 1000,
                 max_block_ms=c.TXN_CALL_S * 1000)
    p.init_transactions()

    def one_txn(seq, run):
        began = time.monotonic()
        p.begin_transaction()
        run.step("send")
        futures = [p.send(name, key=c.txn_value(seq, part), value=c.txn_value(seq, part), partition=part)
                   for part in range(c.TXN_PARTITIONS)]
        for f in futures:
            f.get(c.TXN_CALL_S)
        run.hold(seq)
        commit_started = time.monotonic()
        run.step("commit")
        try:
            p.commit_transaction()
        except KafkaError as e:
            raise AssertionError("commit after %d ms: %r (retriable: %s)" % (
                (time.monotonic() - commit_started) * 1000, e, getattr(e, "retriable", None)))
        run.record(seq, began, commit_started)

    run = c.txn_loop_across_kill(one_txn)
    run.check()
    cons = consumer(isolation_level="read_committed")
    tps = [TopicPartition(name, part) for part in range(c.TXN_PARTITIONS)]
    cons.assign(tps)
    cons.seek_to_beginning(*tps)
    by_partition = {}
    for m in read(cons, run.total()):
        by_partition.setdefault(m.partition, []).append(m.value)
    cons.close()
    p.close()
    return run.check_read(by_partition)


def s_err_unknown_topic():
    p = producer(max_block_ms=5000)
    try:
        p.send(c.name(CLIENT, "err_unknown_topic", "-missing"), value=b"x").get(10)
    except (UnknownTopicOrPartitionError, kafka.errors.KafkaTimeoutError) as e:
        return "%s: %s" % (type(e).__name__, e)
    raise AssertionError("produce to a missing topic succeeded")


def s_err_offset_out_of_range():
    name = topic("err_offset_out_of_range")
    produce(producer(), name, c.records(5))
    cons = assigned(name, offset=100, auto_offset_reset="none")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            got = cons.poll(200)
        except OffsetOutOfRangeError as e:
            return "OffsetOutOfRangeError: %s" % e
        c.expect(not any(got.values()), "read a record past the end")
    raise AssertionError("no OffsetOutOfRangeError for offset 100 of 5")


def s_err_stale_generation():
    name = topic("err_stale_generation", 2)
    group = c.name(CLIENT, "err_stale_generation")
    a = subscribed(name, group, "earliest", session_timeout_ms=6000, max_poll_interval_ms=6000)
    wait_assignment([a], 2)
    b = subscribed(name, group, "earliest")
    # a stops polling: past max.poll.interval.ms the group rebalances without it.
    deadline = time.monotonic() + 30
    while len(b.assignment()) < 2:
        c.expect(time.monotonic() < deadline, "b never got both partitions")
        b.poll(200)
    try:
        a.commit({TopicPartition(name, 0): kafka.OffsetAndMetadata(1, "", -1)})
    except (IllegalGenerationError, UnknownMemberIdError, RebalanceInProgressError, kafka.errors.CommitFailedError) as e:
        return "%s: %s" % (type(e).__name__, e)
    raise AssertionError("a member kicked out of the group committed")


IMPLS = c.scenario_functions(globals())

if __name__ == "__main__":
    c.run_all(CLIENT, VERSION, IMPLS)
