"""Share-group (KIP-932) set-up for confluent_share_driver.py, as ShareKit.java is for java-4.4.0-share.

librdkafka's ShareConsumer settings, the group's configs set with incremental_alter_configs on
a GROUP resource and read back, topic set-up with a producer, the group's share-group offsets
(DescribeShareGroupOffsets through share_wire: the librdkafka preview has no share-group admin
API), a ledger of every delivery and acknowledgement outcome, one poll-and-acknowledge step,
and a fault command run with a marker line (Compat.fault).
"""

import subprocess
import sys
import threading
import time

import confluent_kafka
from confluent_kafka import AcknowledgeType, KafkaException, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

import compat_common as c
from share_wire import ShareWire, WireError

CLIENT = "confluent-kafka-python-share"
_version = confluent_kafka.version()
VERSION = "%s (librdkafka %s)" % (_version[0] if isinstance(_version, tuple) else _version,
                                  confluent_kafka.libversion()[0])
BASE = dict({"bootstrap.servers": c.BOOTSTRAP}, **c.librdkafka_security())
# A poll's wait (Kit.POLL) and how long a consumer must then get nothing more (ShareKit.QUIET).
POLL_S = 0.2
QUIET_S = 3.0
# The group's record lock duration in the scenarios that wait for one: Kafka 4.4's minimum.
MIN_LOCK_MS = 15000
COMMIT_S = 15.0
ACCEPT, RELEASE, REJECT = AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT

admin = AdminClient(dict(BASE))
wire = ShareWire(c.BOOTSTRAP)


def type_name(ack_type):
    return {ACCEPT: "ACCEPT", RELEASE: "RELEASE", REJECT: "REJECT"}.get(ack_type, str(ack_type))


def numbered(prefix, n):
    """"prefix0".."prefix(n-1)" (Kit.numbered)."""
    return ["%s%d" % (prefix, i) for i in range(n)]


def consumer(group, mode, topic, **extra):
    """A share consumer of group with share.acknowledgement.mode `mode` (implicit or explicit),
    `extra` librdkafka properties (dots as underscores), subscribed to topic."""
    conf = dict(BASE, **{"group.id": group, "share.acknowledgement.mode": mode,
                         "client.id": "%s-%s-%d" % (group, mode, time.monotonic_ns() % 100000)})
    conf.update({k.replace("_", "."): v for k, v in extra.items()})
    sc = ShareConsumer(conf)
    sc.subscribe([topic])
    return sc


def _resource(group, pairs=None):
    if pairs is None:
        return ConfigResource(ResourceType.GROUP, group)
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in pairs]
    return ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)


def group_configs(group, *pairs):
    """Sets the share group's configs ((key, value) pairs) with incremental_alter_configs on a
    GROUP resource, before any member joins, and checks that describe_configs reads each one
    back (retried for 15 s: a broker may serve the old value for a moment)."""
    r = _resource(group, pairs)
    admin.incremental_alter_configs([r])[r].result(30)
    deadline = time.monotonic() + 15
    while True:
        got = admin.describe_configs([_resource(group)])
        got = list(got.values())[0].result(30)
        stale = ["%s reads back as %s, set %s" % (k, got[k].value if k in got else "missing", v)
                 for k, v in pairs if k not in got or got[k].value != v]
        if not stale:
            return
        c.expect(time.monotonic() < deadline, "group %s configs after 15 s: %s" % (group, stale))
        time.sleep(0.1)


def rejected_group_config(group, key, value):
    """Setting a group config out of its bounds must fail: answers the KafkaError."""
    r = _resource(group, [(key, value)])
    try:
        admin.incremental_alter_configs([r])[r].result(30)
    except KafkaException as e:
        return e.args[0]
    raise AssertionError("group config %s=%s was accepted (out of bounds)" % (key, value))


def create_topic(topic, partitions, values=(), **producer_conf):
    """Creates topic (replication 3, small segments) and produces values to it (Kit.createTopic)."""
    fs = admin.create_topics([NewTopic(topic, partitions, 3, config=dict(c.TOPIC_CONFIGS))], operation_timeout=30)
    fs[topic].result(30)
    deadline = time.monotonic() + 20
    while True:
        md = admin.list_topics(topic, timeout=10).topics.get(topic)
        if md is not None and md.error is None and len(md.partitions) == partitions:
            break
        c.expect(time.monotonic() < deadline, "topic %s not in metadata with %d partitions: %s" % (topic, partitions, md))
        time.sleep(0.2)
    if values:
        produce(topic, values, **producer_conf)


def produce(topic, values, **producer_conf):
    """Produces values with keys "k-" + value, acks=all, Java's partitioner (murmur2), every
    delivery confirmed. producer_conf: librdkafka properties, dots as underscores."""
    conf = dict(BASE, **{"acks": "all", "partitioner": "murmur2_random", "linger.ms": 5})
    conf.update({k.replace("_", "."): v for k, v in producer_conf.items()})
    p = Producer(conf)
    errors = []
    for v in values:
        p.produce(topic, key=("k-" + v).encode(), value=v.encode(),
                  on_delivery=lambda err, _m: errors.append(err) if err is not None else None)
        p.poll(0)
    c.expect_eq(p.flush(30), 0, "records still unflushed")
    c.expect(not errors, "delivery errors: %s" % errors[:3])


def end_offsets(topic, partitions, timeout_s=30):
    """{partition: log end offset}, asked again for timeout_s on an error (after a kill,
    librdkafka's admin client answers NOT_LEADER_FOR_PARTITION from stale metadata rather than
    refreshing it and retrying as Java's Admin does)."""
    request = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return {tp.partition: f.result(30).offset for tp, f in admin.list_offsets(request).items()}
        except KafkaException as e:
            if time.monotonic() > deadline:
                raise
            c.log("end offsets of %s: %s, asking again" % (topic, describe(e)))
            admin.list_topics(topic, timeout=10)
            time.sleep(0.5)


def check_all_acknowledged(group, topic, partitions, timeout_s):
    """Every record of every partition must be acknowledged or archived in the state the share
    coordinator holds, within timeout_s: DescribeShareGroupOffsets must answer a lag of 0 for
    each partition (KIP-1226), or, from a broker that answers no lag (v0), a start offset at the
    log end offset (ShareKit.checkAllAcknowledged). Answers "p0 start 0/9 lag 0, ..."."""
    end = end_offsets(topic, partitions)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            got = wire.share_group_offsets(group, topic, partitions)
        except (WireError, OSError) as e:  # a coordinator moving after a kill: asked again
            got, problem = {}, str(e)
        else:
            problem = ""
        shown, done = [], not problem
        for p, leo in sorted(end.items()):
            start, lag = got.get(p, (-1, None))
            done &= p in got and (lag == 0 if lag is not None else start == leo)
            shown.append("p%d start %d/%d%s" % (p, start, leo, " (no lag)" if lag is None else " lag %d" % lag))
        if done:
            return ", ".join(shown)
        c.expect(time.monotonic() < deadline, "the share group's offsets do not show every record acknowledged "
                 "within %d s: %s%s" % (timeout_s, ", ".join(shown), "; " + problem if problem else ""))
        time.sleep(0.25)


def sample(values):
    """"3 (e.g. a, b, c)" for a detail."""
    if not values:
        return "none"
    return "%d (e.g. %s)" % (len(values), ", ".join(sorted(values)[:3]))


class Ledger:
    """Every delivery of every record (by value) and every acknowledgement's outcome
    (ShareKit.Ledger); guarded by a lock, as a consumer thread and the scenario read it."""

    def __init__(self):
        self.lock = threading.RLock()
        self.deliveries = {}  # value -> the delivery counts it arrived with, in order
        self.confirmed = {}  # value -> {ack type: how many the broker confirmed}
        self.failed = {}  # value -> ["TYPE: error", ...] of the acknowledgements that failed
        self.after_final = []  # deliveries after a confirmed ACCEPT or REJECT: never allowed
        self.where = {}  # value -> "partition@offset"
        self.errors = []  # error events poll() returned instead of records

    def delivered(self, m):
        v = m.value().decode()
        dc = m.delivery_count()
        c.expect(dc is not None, "record %s-%d@%d has no delivery count" % (m.topic(), m.partition(), m.offset()))
        with self.lock:
            if self.finalized(v):
                self.after_final.append("%s (delivery count %d)" % (v, dc))
            self.deliveries.setdefault(v, []).append(dc)
            self.where[v] = "%d@%d" % (m.partition(), m.offset())

    def finalized(self, v):
        with self.lock:
            got = self.confirmed.get(v, {})
            return got.get(ACCEPT, 0) > 0 or got.get(REJECT, 0) > 0

    def outcome(self, v, ack_type, error):
        with self.lock:
            if error is not None:
                self.failed.setdefault(v, []).append("%s: %s" % (type_name(ack_type), describe(error)))
            else:
                counts = self.confirmed.setdefault(v, {})
                counts[ack_type] = counts.get(ack_type, 0) + 1

    def confirmed_count(self, v, ack_type):
        with self.lock:
            return self.confirmed.get(v, {}).get(ack_type, 0)

    def of(self, v):
        with self.lock:
            return list(self.deliveries.get(v, []))

    def distinct(self):
        with self.lock:
            return len(self.deliveries)

    def total(self):
        with self.lock:
            return sum(len(d) for d in self.deliveries.values())


def describe(error):
    """A KafkaException or KafkaError as "NAME: text"."""
    err = error.args[0] if isinstance(error, KafkaException) and error.args else error
    if isinstance(err, confluent_kafka.KafkaError):
        return "%s: %s" % (err.name(), err.str())
    return "%s: %s" % (type(error).__name__, error)


def error_name(error):
    """The KafkaError name of a KafkaException (or KafkaError), else its type's name."""
    err = error.args[0] if isinstance(error, KafkaException) and error.args else error
    return err.name() if isinstance(err, confluent_kafka.KafkaError) else type(error).__name__


def error_code(error):
    """The KafkaError code of a KafkaException (or KafkaError), else None."""
    err = error.args[0] if isinstance(error, KafkaException) and error.args else error
    return err.code() if isinstance(err, confluent_kafka.KafkaError) else None


def poll(sc, ledger, timeout_s=POLL_S):
    """One poll; every record goes into the ledger; an error event (a Message whose error() is
    set) goes to ledger.errors and is left out of the answer."""
    records = []
    for m in sc.poll(timeout_s):
        if m.error() is not None:
            c.log("share poll: error event %s (%s [%s] @%s)" % (m.error(), m.topic(), m.partition(), m.offset()))
            with ledger.lock:
                ledger.errors.append(describe(m.error()))
            continue
        records.append(m)
        ledger.delivered(m)
    return records


def ack_all(sc, ledger, records, decide, commit_s=COMMIT_S):
    """Acknowledges every record of the last poll as decide(record) says, then commit_sync;
    each record's outcome is its partition's result (a partition missing from the result is a
    failure). Answers commit_sync's result."""
    if not records:
        return {}
    types = []
    for m in records:
        t = decide(m)
        sc.acknowledge(m, t)
        types.append((m, t))
    results = sc.commit_sync(commit_s)
    by_partition = {(tp.topic, tp.partition): e for tp, e in results.items()}
    for m, t in types:
        key = (m.topic(), m.partition())
        if key in by_partition:
            error = by_partition[key]
        else:
            error = AssertionError("commit_sync gave no result for partition %d (results %s)" % (
                m.partition(), {"%s-%d" % k: v for k, v in by_partition.items()}))
        ledger.outcome(m.value().decode(), t, error)
    return results


def poll_ack(sc, ledger, decide, commit_s=COMMIT_S):
    """One poll of an explicit-mode consumer, every record acknowledged as decide says, then
    commit_sync (ShareKit.pollAck). Answers the batch."""
    records = poll(sc, ledger)
    ack_all(sc, ledger, records, decide, commit_s)
    return records


def fault(command, marker, on_marker):
    """Runs a fault command (COMPAT_KILL_LEADER) through sh and waits for it, at most
    COMPAT_TIMEOUT_S; its output goes to stderr line by line. on_marker runs once, as soon as a
    line containing marker appears (the fault took effect), or when the command ends if none
    does (Compat.fault). Raises if the command fails or does not return in time; answers the
    monotonic time of the marker (or of the start)."""
    c.expect(command, "COMPAT_KILL_LEADER is not set")
    started = time.monotonic()
    proc = subprocess.Popen(["sh", "-c", command], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    marked = []

    def copy():
        for line in proc.stdout:
            if marker in line and not marked:
                marked.append(time.monotonic())
                on_marker()
            sys.stderr.write(line)
        sys.stderr.flush()

    reader = threading.Thread(target=copy, daemon=True)
    reader.start()
    try:
        code = proc.wait(c.TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = None
    reader.join(5)
    if not marked:
        on_marker()
    c.expect(code is not None, "COMPAT_KILL_LEADER did not return in %d s" % c.TIMEOUT_S)
    c.expect_eq(code, 0, "COMPAT_KILL_LEADER exit code")
    return marked[0] if marked else started
