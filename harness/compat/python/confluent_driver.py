"""Compatibility-matrix driver for confluent-kafka (Python over librdkafka).

Runs every scenario of compat_common.SCENARIOS against COMPAT_BOOTSTRAP and prints one JSON line
per scenario. librdkafka's consumer reads committed by default and its producer surfaces fencing
as a fatal error, so the transactional scenarios check `fatal()` and the error code.
"""

import os
import shlex
import subprocess
import sys
import threading
import time

import confluent_kafka
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

import compat_common as c

CLIENT = c.client_id("confluent-kafka-python")
# version() answers a (str, int) tuple in older releases and the plain string in 2.16 (whose first
# character the report showed as the version, "2").
_version = confluent_kafka.version()
VERSION = "%s (librdkafka %s)" % (_version[0] if isinstance(_version, tuple) else _version,
                                  confluent_kafka.libversion()[0])
BASE = dict({"bootstrap.servers": c.BOOTSTRAP}, **c.librdkafka_security())
admin = AdminClient(dict(BASE))


def topic(scenario, partitions=1, suffix=""):
    name = c.name(CLIENT, scenario, suffix)
    fs = admin.create_topics([NewTopic(name, partitions, 3, config=dict(c.TOPIC_CONFIGS))], operation_timeout=30)
    fs[name].result(30)
    wait_metadata(name, partitions)
    return name


def wait_metadata(name, partitions):
    deadline = time.monotonic() + 20
    while True:
        md = admin.list_topics(name, timeout=10).topics.get(name)
        if md is not None and md.error is None and len(md.partitions) == partitions:
            return
        if time.monotonic() > deadline:
            raise AssertionError("topic %s not in metadata with %d partitions: %s" % (name, partitions, md))
        time.sleep(0.2)


def producer(**extra):
    conf = dict(BASE, **{"linger.ms": 5})
    conf.update(extra)
    return Producer(conf)


def consumer(group=None, **extra):
    conf = dict(BASE, **{"group.id": group or c.name(CLIENT, "assign"), "enable.auto.commit": False})
    conf.update(extra)
    return Consumer(c.librdkafka_group_conf(conf))


def produce(p, name, recs, partition=0, **kw):
    errors = []

    def report(err, _msg):
        if err is not None:
            errors.append(err)

    for key, value, headers in recs:
        p.produce(name, value=value, key=key, headers=headers, partition=partition, on_delivery=report, **kw)
    left = p.flush(30)
    c.expect_eq(left, 0, "records still unflushed")
    c.expect(not errors, "delivery errors: %s" % errors[:3])


def read(cons, n, extra_s=1.0):
    """Reads n messages (failing on an error), then polls extra_s more to see there are no others."""
    out = []
    deadline = time.monotonic() + c.TIMEOUT_S / 3
    quiet_until = None
    while time.monotonic() < deadline:
        msg = cons.poll(0.2)
        if msg is None:
            if quiet_until is not None and time.monotonic() > quiet_until:
                return out
            continue
        if msg.error():
            raise KafkaException(msg.error())
        out.append(msg)
        if len(out) >= n and quiet_until is None:
            quiet_until = time.monotonic() + extra_s
    raise AssertionError("read %d of %d messages: %s" % (len(out), n, c.short([m.value() for m in out])))


def assigned(name, partition=0, offset=confluent_kafka.OFFSET_BEGINNING, **extra):
    cons = consumer(**extra)
    cons.assign([TopicPartition(name, partition, offset)])
    return cons


def triple(msg):
    headers = [(k, v if v is not None else b"") for k, v in (msg.headers() or [])]
    return (msg.key(), msg.value(), headers)


def s_create_topic():
    name = topic("create_topic", 3)
    md = admin.list_topics(name, timeout=10).topics[name]
    c.expect_eq(sorted(md.partitions), [0, 1, 2], "partition ids")
    c.expect(all(len(p.replicas) == 3 for p in md.partitions.values()), "replication factor 3")
    return "3 partitions, 3 replicas each"


def s_produce_consume():
    name = topic("produce_consume")
    recs = c.records(20)
    produce(producer(), name, recs)
    got = [triple(m) for m in read(assigned(name), 20)]
    c.expect_eq(got, recs, "records read back")
    return "20 records with keys and 2 headers exact"


def s_compression():
    covered = []
    for codec in ["gzip", "snappy", "lz4", "zstd"]:
        name = topic("compression", suffix="-" + codec)
        recs = c.records(50, codec)
        produce(producer(**{"compression.type": codec}), name, recs)
        c.expect_eq([triple(m) for m in read(assigned(name), 50)], recs, codec + " records")
        covered.append(codec)
    return "codecs: " + ",".join(covered)


def subscribed(name, group, reset, **extra):
    cons = consumer(group, **{"auto.offset.reset": reset}, **extra)
    cons.subscribe([name])
    return cons


def wait_assignment(conses, want_total, deadline_s=None):
    """Polls every consumer until their assignments add up to want_total partitions, each non-empty."""
    deadline = time.monotonic() + (deadline_s or c.TIMEOUT_S)
    while time.monotonic() < deadline:
        for cons in conses:
            msg = cons.poll(0.1)
            if msg is not None and not msg.error():
                raise AssertionError("unexpected message while waiting for assignment: %s" % triple(msg)[1])
        sizes = [len(cons.assignment()) for cons in conses]
        if sum(sizes) == want_total and all(sizes):
            return sizes
    raise AssertionError("assignments never settled: %s" % [len(x.assignment()) for x in conses])


def check_group_type(group, members):
    """Under the consumer protocol: the group must be described (DescribeGroups or
    ConsumerGroupDescribe, as librdkafka picks) as a consumer-protocol group of `members`
    members. Answers its partition assignor; checks nothing under the classic protocol."""
    if not c.CONSUMER_PROTOCOL:
        return None
    desc = admin.describe_consumer_groups([group], request_timeout=10)[group].result(15)
    c.expect_eq(str(desc.type), str(confluent_kafka.ConsumerGroupType.CONSUMER), "group %s type" % group)
    c.expect_eq(len(desc.members), members, "members of %s" % group)
    return desc.partition_assignor


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
    # librdkafka reports no position before the first record; give the reset (ListOffsets
    # latest) time to happen before producing, and make sure no old record arrives meanwhile.
    settle = time.monotonic() + 3
    while time.monotonic() < settle:
        c.expect(cons.poll(0.2) is None, "read an old record")
    new = c.records(5, "new")
    produce(producer(), name, new)
    c.expect_eq([triple(m) for m in read(cons, 5)], new, "records after joining")
    cons.close()
    return "only the 5 records produced after joining"


def s_seek_timestamp():
    name = topic("seek_timestamp")
    base = int(time.time() * 1000) - 60_000
    p = producer()
    for i, (k, v, h) in enumerate(c.records(5)):
        p.produce(name, value=v, key=k, headers=h, partition=0, timestamp=base + i * 1000)
    c.expect_eq(p.flush(30), 0, "unflushed")
    cons = consumer()
    found = cons.offsets_for_times([TopicPartition(name, 0, base + 2500)], timeout=10)[0]
    c.expect_eq(found.offset, 3, "offset for timestamp base+2.5s")
    cons.assign([found])
    msg = read(cons, 1, extra_s=0)[0]
    c.expect_eq((msg.value(), msg.timestamp()[1]), (b"v-r-3", base + 3000), "record at that offset")
    return "offsets_for_times -> 3, read v-r-3"


def consume_some(conses, n):
    """Round-robin polls; commits each message synchronously; answers the values processed."""
    seen = []
    deadline = time.monotonic() + c.TIMEOUT_S
    while len(seen) < n:
        c.expect(time.monotonic() < deadline, "consumed %d of %d" % (len(seen), n))
        for cons in conses:
            msg = cons.poll(0.1)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            cons.commit(message=msg, asynchronous=False)
            seen.append(msg.value())
    return seen


def s_group_rebalance():
    name = topic("group_rebalance", 3)
    group = c.name(CLIENT, "group_rebalance")
    a = subscribed(name, group, "earliest")
    wait_assignment([a], 3)
    b = subscribed(name, group, "earliest")
    sizes = wait_assignment([a, b], 3)
    check_group_type(group, 2)
    all_values = []
    p = producer()
    for part in range(3):
        recs = c.records(10, "p%d" % part)
        produce(p, name, recs, partition=part)
        all_values += [v for _, v, _ in recs]
    first = consume_some([a, b], 15)
    a.close()
    b.close()
    resumed = subscribed(name, group, "earliest")
    rest = [m.value() for m in read(resumed, 30 - len(first), extra_s=2.0)]
    resumed.close()
    c.expect_eq(sorted(first + rest), sorted(all_values), "records before and after the resume")
    return "assignment %s, %d committed then %d resumed, none lost or re-read" % (sizes, len(first), len(rest))


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
    check_group_type(group, 2)
    a.close()
    rejoined.close()
    return "after leave 3/3, after rejoin %s" % sizes


def s_idempotent_produce():
    name = topic("idempotent_produce")
    recs = c.records(200)
    produce(producer(**{"enable.idempotence": True, "acks": "all", "max.in.flight": 5}), name, recs)
    got = [triple(m) for m in read(assigned(name), 200)]
    c.expect_eq(got, recs, "idempotent records")
    return "200 records once, in order"


def txn_producer(txn_id, **extra):
    p = producer(**{"transactional.id": txn_id, "transaction.timeout.ms": 60000}, **extra)
    p.init_transactions(30)
    return p


def s_txn_commit_abort():
    name = topic("txn_commit_abort")
    p = txn_producer(c.name(CLIENT, "txn_commit_abort"))
    for tag, n, commit in [("c1", 5, True), ("a", 3, False), ("c2", 5, True)]:
        p.begin_transaction()
        for k, v, h in c.records(n, tag):
            p.produce(name, value=v, key=k, headers=h, partition=0)
        # abort_transaction purges records not yet sent: flush so that the 3 aborted ones exist.
        c.expect_eq(p.flush(30), 0, "unflushed")
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
    committed = [m.value() for m in read(assigned(name, **{"isolation.level": "read_committed"}), 10)]
    c.expect_eq(committed, c.values(5, "c1") + c.values(5, "c2"), "read_committed")
    everything = [m.value() for m in read(assigned(name, **{"isolation.level": "read_uncommitted"}), 13)]
    c.expect_eq(everything, c.values(5, "c1") + c.values(3, "a") + c.values(5, "c2"), "read_uncommitted")
    return "read_committed 10, read_uncommitted 13"


def s_consume_process_produce():
    src = topic("consume_process_produce", suffix="-in")
    dst = topic("consume_process_produce", suffix="-out")
    group = c.name(CLIENT, "consume_process_produce")
    produce(producer(), src, c.records(10))
    cons = subscribed(src, group, "earliest", **{"isolation.level": "read_committed"})
    inputs = read(cons, 10)
    p = txn_producer(c.name(CLIENT, "consume_process_produce"))
    p.begin_transaction()
    for m in inputs:
        p.produce(dst, key=m.key(), value=b"out-" + m.value(), partition=0)
    p.send_offsets_to_transaction(cons.position(cons.assignment()), cons.consumer_group_metadata(), 30)
    p.commit_transaction(30)
    out = [m.value() for m in read(assigned(dst, **{"isolation.level": "read_committed"}), 10)]
    c.expect_eq(out, [b"out-" + v for v in c.values(10, "r")], "output")
    committed = cons.committed([TopicPartition(src, 0)], timeout=10)[0].offset
    c.expect_eq(committed, 10, "group offset committed by the transaction")
    cons.close()
    return "10 outputs exact, committed offset 10"


def fenced_pair(scenario):
    """p1 opens a transaction, p2 with the same id fences it; answers (name, p1, p2, p1's error)."""
    name = topic(scenario)
    txn_id = c.name(CLIENT, scenario)
    p1 = txn_producer(txn_id)
    p1.begin_transaction()
    p1.produce(name, value=b"from-p1", partition=0)
    c.expect_eq(p1.flush(30), 0, "p1 unflushed")
    p2 = txn_producer(txn_id)
    try:
        p1.produce(name, value=b"p1-after-fence", partition=0)
        p1.flush(10)
        p1.commit_transaction(30)
    except KafkaException as e:
        return name, p1, p2, e.args[0]
    raise AssertionError("the fenced producer committed")


FENCED = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}


def s_txn_fencing():
    name, _p1, p2, err = fenced_pair("txn_fencing")
    c.expect(err.code() in FENCED, "fencing error, got %s" % err)
    p2.begin_transaction()
    p2.produce(name, value=b"from-p2", partition=0)
    p2.commit_transaction(30)
    got = [m.value() for m in read(assigned(name, **{"isolation.level": "read_committed"}), 1)]
    c.expect_eq(got, [b"from-p2"], "read_committed after fencing")
    return "p1 got %s; p2 committed" % err.name()


def s_err_fenced_producer():
    _name, p1, _p2, err = fenced_pair("err_fenced_producer")
    c.expect(err.code() in FENCED, "fencing error, got %s" % err)
    c.expect(err.fatal(), "fencing error is fatal")
    try:
        p1.begin_transaction()
        p1.commit_transaction(10)
    except KafkaException as again:
        return "%s (fatal); next transaction refused: %s" % (err.name(), again.args[0].name())
    raise AssertionError("the fenced producer started and committed another transaction")


def s_alter_config():
    name = topic("alter_config")
    res = ConfigResource(
        ResourceType.TOPIC,
        name,
        incremental_configs=[ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)],
    )
    for f in admin.incremental_alter_configs([res]).values():
        f.result(30)
    desc = admin.describe_configs([ConfigResource(ResourceType.TOPIC, name)])
    entries = list(desc.values())[0].result(30)
    c.expect_eq(entries["retention.ms"].value, "3600000", "retention.ms read back")
    return "retention.ms=3600000 read back"


def s_delete_records():
    name = topic("delete_records")
    produce(producer(), name, c.records(10))
    fs = admin.delete_records([TopicPartition(name, 0, 5)], operation_timeout=30)
    for f in fs.values():
        f.result(30)
    cons = consumer()
    low, high = cons.get_watermark_offsets(TopicPartition(name, 0), timeout=10)
    c.expect_eq((low, high), (5, 10), "watermarks")
    first = read(assigned(name), 5)
    c.expect_eq([m.offset() for m in first], list(range(5, 10)), "offsets read from earliest")
    return "low watermark 5, earliest read starts at 5"


def s_leader_kill():
    name = topic("leader_kill")
    acked, errors, stop = [], [], threading.Event()
    p = producer(**{"acks": "all", "enable.idempotence": True, "message.timeout.ms": 60000})

    def report(err, msg):
        (errors if err else acked).append(err or msg.value())

    def run():
        i = 0
        while not stop.is_set():
            p.produce(name, value=b"lk-%d" % i, partition=0, on_delivery=report)
            p.poll(0.01)
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
    got = set(m.value() for m in read(assigned(name), len(acked), extra_s=2.0))
    lost = [v for v in acked if v not in got]
    c.expect(not lost, "%d acknowledged records lost, e.g. %s" % (len(lost), lost[:3]))
    return "%d acked, all read back (%d delivery errors)" % (len(acked), len(errors))


def s_txn_leader_kill():
    name = topic("txn_leader_kill", c.TXN_PARTITIONS)
    p = txn_producer(c.name(CLIENT, "txn_leader_kill"), **{"message.timeout.ms": 60000})

    def one_txn(seq, run):
        began = time.monotonic()
        p.begin_transaction()
        run.step("send")
        for part in range(c.TXN_PARTITIONS):
            p.produce(name, key=c.txn_value(seq, part), value=c.txn_value(seq, part), partition=part)
        c.expect_eq(p.flush(c.TXN_CALL_S), 0, "records unflushed after %d s" % c.TXN_CALL_S)
        run.hold(seq)
        commit_started = time.monotonic()
        run.step("commit")
        try:
            p.commit_transaction(c.TXN_CALL_S)
        except KafkaException as e:
            err = e.args[0]
            raise AssertionError("commit after %d ms: %s (requires abort: %s, retriable: %s, fatal: %s)" % (
                (time.monotonic() - commit_started) * 1000, err, err.txn_requires_abort(), err.retriable(), err.fatal()))
        run.record(seq, began, commit_started)

    run = c.txn_loop_across_kill(one_txn)
    run.check()
    cons = consumer(c.name(CLIENT, "txn_leader_kill", "-read"), **{"isolation.level": "read_committed"})
    cons.assign([TopicPartition(name, part, confluent_kafka.OFFSET_BEGINNING) for part in range(c.TXN_PARTITIONS)])
    by_partition = {}
    for m in read(cons, run.total()):
        by_partition.setdefault(m.partition(), []).append(m.value())
    cons.close()
    return run.check_read(by_partition)


def s_err_unknown_topic():
    p = producer(**{"message.timeout.ms": 5000})
    errs = []
    p.produce(c.name(CLIENT, "err_unknown_topic", "-missing"), value=b"x", on_delivery=lambda e, m: errs.append(e))
    p.flush(20)
    c.expect(errs and errs[0] is not None, "no delivery error")
    codes = {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC, KafkaError._MSG_TIMED_OUT}
    c.expect(errs[0].code() in codes, "unexpected error %s" % errs[0])
    return "delivery error %s" % errs[0].name()


def s_err_offset_out_of_range():
    name = topic("err_offset_out_of_range")
    produce(producer(), name, c.records(5))
    cons = assigned(name, offset=100, **{"auto.offset.reset": "error"})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        msg = cons.poll(0.5)
        if msg is None:
            continue
        err = msg.error()
        c.expect(err is not None, "read a record at offset %s" % msg.offset())
        c.expect(err.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE), "error %s" % err)
        c.expect("out of range" in err.str().lower() or "OFFSET_OUT_OF_RANGE" in err.str(), "reason %s" % err)
        return "%s: %s" % (err.name(), err.str())
    raise AssertionError("no error for offset 100 of 5")


def s_err_stale_generation():
    """A member the group dropped commits: a stops polling, so librdkafka leaves the group when
    max.poll.interval.ms runs out (classic: its generation is stale; consumer protocol: its
    member epoch is fenced), b takes both partitions; a's commit must fail with a group error and
    the group must not hold a's offset."""
    name = topic("err_stale_generation", 2)
    group = c.name(CLIENT, "err_stale_generation")
    # librdkafka heartbeats in the background; exceeding max.poll.interval.ms makes it leave.
    # (session.timeout.ms is the classic protocol's; librdkafka_group_conf drops it otherwise.)
    a = subscribed(name, group, "earliest", **{"session.timeout.ms": 6000, "max.poll.interval.ms": 6000})
    wait_assignment([a], 2)
    b = subscribed(name, group, "earliest")
    time.sleep(8)
    wait_assignment([b], 2)
    try:
        a.commit(offsets=[TopicPartition(name, 0, 1)], asynchronous=False)
    except KafkaException as e:
        err = e.args[0]
        ok = {KafkaError.ILLEGAL_GENERATION, KafkaError.UNKNOWN_MEMBER_ID, KafkaError.REBALANCE_IN_PROGRESS}
        ok |= {KafkaError._MAX_POLL_EXCEEDED}
        if c.CONSUMER_PROTOCOL:
            ok |= {KafkaError.STALE_MEMBER_EPOCH, KafkaError.FENCED_MEMBER_EPOCH}
        c.expect(err.code() in ok, "unexpected commit error %s" % err)
        stored = b.committed([TopicPartition(name, 0)], timeout=10)[0].offset
        c.expect(stored != 1, "the dropped member's offset 1 was stored")
        a.close()
        b.close()
        return "commit after being kicked out (%s protocol): %s; nothing stored" % (c.GROUP_PROTOCOL, err.name())
    raise AssertionError("a member kicked out of the group committed")


# The Java half of mixed_group: harness/compat/java/run.sh java-4.4.0-member (GroupMember), or
# COMPAT_JAVA_MEMBER (a command line; the topic and group are appended).
JAVA_MEMBER = os.environ.get("COMPAT_JAVA_MEMBER") or "%s java-4.4.0-member" % shlex.quote(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "java", "run.sh"))


class JavaMember:
    """A kafka-clients 4.4.0 consumer-protocol member in another JVM (GroupMember): its
    assignment and the records it read, from its stdout lines."""

    def __init__(self, name, group):
        env = dict(os.environ, COMPAT_GROUP_PROTOCOL="consumer")
        self.proc = subprocess.Popen(shlex.split(JAVA_MEMBER) + [name, group], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=sys.stderr, text=True, env=env)
        self.lock = threading.Lock()
        self._assigned = set()
        self.records = []  # (partition, offset, value)
        self.errors = []
        self.closed = False
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            word, _, rest = line.rstrip("\n").partition(" ")
            with self.lock:
                if word == "assigned":
                    self._assigned = {int(p) for p in rest.split(",") if p}
                elif word == "record":
                    part, offset, value = rest.split(" ", 2)
                    self.records.append((int(part), int(offset), value.encode()))
                elif word == "closed":
                    self.closed = True
                elif word == "error":
                    self.errors.append(rest)
                else:
                    c.log("java member: %s" % line.rstrip())

    def assigned(self):
        with self.lock:
            c.expect(not self.errors, "java member failed: %s" % self.errors)
            c.expect(self.proc.poll() is None or self.closed, "java member exited %s" % self.proc.poll())
            return set(self._assigned)

    def read(self):
        with self.lock:
            return list(self.records)

    def leave(self, timeout_s):
        self.proc.stdin.write("leave\n")
        self.proc.stdin.flush()
        rc = self.proc.wait(timeout_s)
        with self.lock:
            c.expect(rc == 0 and self.closed and not self.errors,
                     "java member left with exit %s, errors %s" % (rc, self.errors))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def s_mixed_group():
    """A Java (kafka-clients 4.4.0) and a librdkafka member of one consumer-protocol group share a
    4-partition topic: each partition owned by exactly one of them, every record read exactly
    once across the two (each commits what it read); then the Java member leaves and the
    librdkafka member gets all 4 partitions and reads exactly the records produced after that."""
    parts = 4
    name = topic("mixed_group", parts)
    group = c.name(CLIENT, "mixed_group")
    java = JavaMember(name, group)
    rd = None
    try:
        rd = subscribed(name, group, "earliest")
        deadline = time.monotonic() + c.TIMEOUT_S / 2
        while True:
            msg = rd.poll(0.1)
            c.expect(msg is None or msg.error() is not None, "a record before any was produced")
            mine = {tp.partition for tp in rd.assignment()}
            theirs = java.assigned()
            if mine and theirs and not mine & theirs and mine | theirs == set(range(parts)):
                break
            c.expect(time.monotonic() < deadline,
                     "the group never shared the partitions: librdkafka %s, java %s" % (sorted(mine), sorted(theirs)))
        assignor = check_group_type(group, 2)
        shares = "librdkafka %s, java %s (assignor %s)" % (sorted(mine), sorted(theirs), assignor)
        want = []
        p = producer()
        for part in range(parts):
            recs = c.records(10, "m%d" % part)
            produce(p, name, recs, partition=part)
            want += [v for _, v, _ in recs]
        got_rd = []  # (partition, offset, value)
        deadline = time.monotonic() + c.TIMEOUT_S / 3
        quiet_until = None
        while quiet_until is None or time.monotonic() < quiet_until:
            msg = rd.poll(0.1)
            if msg is not None:
                if msg.error():
                    raise KafkaException(msg.error())
                rd.commit(message=msg, asynchronous=False)
                got_rd.append((msg.partition(), msg.offset(), msg.value()))
            if quiet_until is None and len(got_rd) + len(java.read()) >= len(want):
                quiet_until = time.monotonic() + 1.5  # duplicates would show up meanwhile
            c.expect(time.monotonic() < deadline, "the group read %d + %d of %d records"
                     % (len(got_rd), len(java.read()), len(want)))
        got_java = java.read()
        c.expect_eq(({tp.partition for tp in rd.assignment()}, java.assigned()), (mine, theirs),
                    "assignments while consuming")
        c.expect({r[0] for r in got_rd} <= mine, "librdkafka read partitions %s it does not own" % {r[0] for r in got_rd})
        c.expect({r[0] for r in got_java} <= theirs, "java read partitions %s it does not own" % {r[0] for r in got_java})
        c.expect(got_rd and got_java, "a member read nothing: librdkafka %d, java %d" % (len(got_rd), len(got_java)))
        c.expect_eq(sorted(v for _, _, v in got_rd + got_java), sorted(want), "records read across the two")
        java.leave(c.TIMEOUT_S / 4)
        left = time.monotonic()
        deadline = left + c.TIMEOUT_S / 4
        while {tp.partition for tp in rd.assignment()} != set(range(parts)):
            msg = rd.poll(0.1)
            c.expect(msg is None or msg.error() is not None,
                     "re-read %s after the java member left" % (msg.value() if msg else None))
            c.expect(time.monotonic() < deadline, "librdkafka never got all partitions: %s"
                     % sorted(tp.partition for tp in rd.assignment()))
        takeover_ms = (time.monotonic() - left) * 1000
        later = []
        for part in range(parts):
            recs = c.records(2, "n%d" % part)
            produce(p, name, recs, partition=part)
            later += [v for _, v, _ in recs]
        after = [m.value() for m in read(rd, len(later), extra_s=1.5)]
        c.expect_eq(sorted(after), sorted(later), "records after the java member left")
        return ("shares %s; 40 records read once (librdkafka %d, java %d); after the java member left, "
                "librdkafka held all 4 in %.0f ms and read exactly the 8 later records"
                % (shares, len(got_rd), len(got_java), takeover_ms))
    finally:
        java.stop()
        if rd is not None:
            rd.close()


def group_type(group):
    """The group's type as DescribeGroups / ConsumerGroupDescribe report it (librdkafka picks)."""
    desc = admin.describe_consumer_groups([group], request_timeout=10)[group].result(15)
    return str(desc.type).rsplit(".", 1)[-1]


def read_committing(conses, want, what):
    """Polls every consumer, committing each record it reads, until `want` values came and 1.5 s
    more brought nothing: each value must have come exactly once."""
    got = []
    deadline = time.monotonic() + c.TIMEOUT_S / 3
    quiet_until = None
    while quiet_until is None or time.monotonic() < quiet_until:
        for cons in conses:
            msg = cons.poll(0.05)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            cons.commit(message=msg, asynchronous=False)
            got.append(msg.value())
        if quiet_until is None and len(got) >= len(want):
            quiet_until = time.monotonic() + 1.5
        c.expect(time.monotonic() < deadline, "%s: read %d of %d" % (what, len(got), len(want)))
    c.expect_eq(sorted(got), sorted(want), what)


def s_online_migration():
    """Online migration (KIP-848): a running classic group of two librdkafka members
    (cooperative-sticky) upgrades to a consumer group when a consumer-protocol librdkafka member
    joins, its classic members served inside it, and downgrades back to a classic group when
    that member leaves. Each phase: the members own every partition between them, the group has
    the right type, and records produced then are read exactly once (each commits what it reads)."""
    parts = 4
    name = topic("online_migration", parts)
    group = c.name(CLIENT, "online_migration")
    classic_conf = dict(BASE, **{"group.id": group, "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                 "group.protocol": "classic", "partition.assignment.strategy": "cooperative-sticky",
                                 "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    members = []
    p = producer()

    def phase(label, conses, want_type):
        started = time.monotonic()
        wait_assignment(conses, parts)
        owned = [{tp.partition for tp in m.assignment()} for m in conses]
        c.expect(set().union(*owned) == set(range(parts)) and sum(map(len, owned)) == parts,
                 "%s: partitions %s" % (label, owned))
        c.expect_eq(group_type(group), want_type, "%s: group type" % label)
        settled = time.monotonic() - started
        want = []
        for part in range(parts):
            recs = c.records(5, "%s%d" % (label, part))
            produce(p, name, recs, partition=part)
            want += [v for _, v, _ in recs]
        read_committing(conses, want, label)
        return "%s %s in %.1f s" % (label, [sorted(o) for o in owned], settled)

    try:
        for _ in range(2):
            cons = Consumer(classic_conf)
            cons.subscribe([name])
            members.append(cons)
        steps = [phase("classic", members, "CLASSIC")]
        members.append(subscribed(name, group, "earliest"))
        steps.append(phase("upgraded", members, "CONSUMER"))
        members.pop().close()
        steps.append(phase("downgraded", members, "CLASSIC"))
        return "; ".join(steps) + "; 60 records each read once"
    finally:
        for m in members:
            m.close()


# --- the security suite (COMPAT_SUITE=security) ---


def sec_read(tag, isolation):
    """The values of SEC_TOPIC starting with tag, read from the beginning to the high watermark."""
    tp = TopicPartition(c.SEC_TOPIC, 0)
    cons = assigned(c.SEC_TOPIC, **{"isolation.level": isolation})
    try:
        _lo, hi = cons.get_watermark_offsets(tp, timeout=10)
        out, deadline = [], time.monotonic() + c.TIMEOUT_S / 3
        while cons.position([tp])[0].offset < hi:
            c.expect(time.monotonic() < deadline, "reading %s did not reach offset %d" % (c.SEC_TOPIC, hi))
            msg = cons.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            if msg.value().decode().startswith(tag):
                out.append(msg.value().decode())
        return out
    finally:
        cons.close()


def s_sec_produce_consume():
    tag = c.PREFIX + "-pc-"
    want = ["%s%d" % (tag, i) for i in range(5)]
    produce(producer(), c.SEC_TOPIC, [(None, v.encode(), None) for v in want])
    group = c.name(CLIENT, "g")
    cons = subscribed(c.SEC_TOPIC, group, "earliest")
    try:
        got, deadline = [], time.monotonic() + c.TIMEOUT_S / 3
        while len(got) < len(want):
            c.expect(time.monotonic() < deadline, "group consumer read %s" % got)
            msg = cons.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            if msg.value().decode().startswith(tag):
                got.append(msg.value().decode())
        c.expect_eq(got, want, "records read through the group")
        cons.commit(asynchronous=False)
    finally:
        cons.close()
    return "5 records produced and read back through group %s, offsets committed" % group


def s_sec_txn_allowed():
    tag = c.PREFIX + "-txa-"
    want = ["%s%d" % (tag, i) for i in range(3)]
    p = txn_producer(c.SEC_TXN_ALLOWED)
    p.begin_transaction()
    for v in want:
        p.produce(c.SEC_TOPIC, value=v.encode(), partition=0)
    p.commit_transaction(30)
    c.expect_eq(sec_read(tag, "read_committed"), want, "read_committed")
    return "transaction with %s committed; read_committed reads its 3 records" % c.SEC_TXN_ALLOWED


def s_sec_txn_denied():
    tag = c.PREFIX + "-txb-"
    try:
        p = txn_producer(c.SEC_TXN_DENIED)
        p.begin_transaction()
        p.produce(c.SEC_TOPIC, value=(tag + "0").encode(), partition=0)
        p.commit_transaction(30)
        raise AssertionError("the transaction with %s committed" % c.SEC_TXN_DENIED)
    except KafkaException as e:
        err = e.args[0]
        c.expect(err.code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                 "want TRANSACTIONAL_ID_AUTHORIZATION_FAILED, got %s" % err)
        got = sec_read(tag, "read_uncommitted")
        c.expect_eq(got, [], "records of the denied transaction under read_uncommitted")
        return "init_transactions with %s: %s; read_uncommitted sees none of it" % (c.SEC_TXN_DENIED, err.name())


def s_sec_bad_credentials():
    if c.SASL:
        conf, what = dict(BASE, **c.librdkafka_security(password="not-the-password")), "a wrong SASL password"
    elif c.TLS:
        conf = {k: v for k, v in BASE.items() if k not in ("ssl.certificate.location", "ssl.key.location")}
        what = "no client certificate"
    else:
        raise c.NotExpressible("PLAINTEXT has no credentials")
    errors = []
    conf["error_cb"] = errors.append
    bad = AdminClient(conf)
    try:
        bad.list_topics(timeout=10)
        raise AssertionError("list_topics with %s succeeded" % what)
    except KafkaException as e:
        errors.append(e.args[0])
    # list_topics only says _TRANSPORT; the cause reaches error_cb, which poll() serves.
    # librdkafka names a failed SASL exchange _AUTHENTICATION and a refused TLS handshake _SSL
    # (or a transport error carrying the alert).
    wanted = {KafkaError._AUTHENTICATION, KafkaError._SSL, KafkaError.SASL_AUTHENTICATION_FAILED}

    def hits():
        return [e for e in errors if e.code() in wanted or "certificate" in e.str().lower()]

    deadline = time.monotonic() + 10
    while not hits() and time.monotonic() < deadline:
        bad.poll(0.2)
    hit = hits()
    c.expect(hit, "want an authentication or TLS error, got %s" % c.short([str(e) for e in errors]))
    return "%s: %s (%s)" % (what, hit[0].name(), c.short(hit[0].str(), 120))


IMPLS = c.scenario_functions(globals(), extra=["mixed_group", "online_migration"])

if __name__ == "__main__":
    c.run_all(CLIENT, VERSION, IMPLS)
