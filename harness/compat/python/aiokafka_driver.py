"""Compatibility-matrix driver for aiokafka 0.14 (asyncio client).

Runs compat_common.SCENARIOS against COMPAT_BOOTSTRAP and prints one JSON line per scenario.
aiokafka speaks old Produce/Fetch/ListOffsets versions (v1-v3 ListOffsets for resets and seeks)
and has transactions (KIP-98, KIP-447 through send_offsets_to_transaction with a group id).
Its admin client has AlterConfigs (not the incremental API) and DeleteRecords.
"""

import asyncio
import time

import aiokafka
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic, RecordsToDelete
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import (
    CommitFailedError,
    IllegalGenerationError,
    IllegalStateError,
    InvalidProducerEpoch,
    KafkaError,
    KafkaTimeoutError,
    OffsetOutOfRangeError,
    ProducerFenced,
    RebalanceInProgressError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
)

import compat_common as c

CLIENT = "aiokafka"
VERSION = aiokafka.__version__
BOOT = c.BOOTSTRAP
# Connection security from the environment (compat_common, issue #15).
SEC = c.aiokafka_security()


async def admin():
    a = AIOKafkaAdminClient(bootstrap_servers=BOOT, **SEC, request_timeout_ms=30000)
    await a.start()
    return a


async def topic(scenario, partitions=1, suffix=""):
    name = c.name(CLIENT, scenario, suffix)
    a = await admin()
    try:
        await a.create_topics([NewTopic(name, partitions, 3, topic_configs=dict(c.TOPIC_CONFIGS))])
    finally:
        await a.close()
    probe = AIOKafkaConsumer(bootstrap_servers=BOOT, **SEC)
    await probe.start()
    deadline = time.monotonic() + 20
    try:
        while True:
            await probe._client.force_metadata_update()
            if (probe.partitions_for_topic(name) or set()) == set(range(partitions)):
                return name
            c.expect(time.monotonic() < deadline, "topic %s not in metadata" % name)
            await asyncio.sleep(0.2)
    finally:
        await probe.stop()


async def producer(**extra):
    p = AIOKafkaProducer(bootstrap_servers=BOOT, **SEC, linger_ms=5, **extra)
    await p.start()
    return p


async def produce(name, recs, partition=0, **extra):
    p = await producer(**extra)
    try:
        futures = [await p.send(name, key=k, value=v, headers=h, partition=partition) for k, v, h in recs]
        return [await f for f in futures]
    finally:
        await p.stop()


async def consumer(*topics, **extra):
    extra.setdefault("enable_auto_commit", False)
    cons = AIOKafkaConsumer(*topics, bootstrap_servers=BOOT, **SEC, **extra)
    await cons.start()
    return cons


async def assigned(name, partition=0, offset=None, **extra):
    cons = await consumer(**extra)
    tp = TopicPartition(name, partition)
    cons.assign([tp])
    if offset is None:
        await cons.seek_to_beginning(tp)
    else:
        cons.seek(tp, offset)
    return cons


async def read(cons, n, extra_s=1.0, stop=True):
    out = []
    deadline = time.monotonic() + c.TIMEOUT_S / 3
    while len(out) < n and time.monotonic() < deadline:
        for batch in (await cons.getmany(timeout_ms=200)).values():
            out += batch
    c.expect(len(out) >= n, "read %d of %d: %s" % (len(out), n, c.short([m.value for m in out])))
    quiet = time.monotonic() + extra_s
    while time.monotonic() < quiet:
        for batch in (await cons.getmany(timeout_ms=200)).values():
            out += batch
    if stop:
        await cons.stop()
    return out


def triple(m):
    return (m.key, m.value, [(k, v if v is not None else b"") for k, v in m.headers])


async def s_create_topic():
    name = await topic("create_topic", 3)
    a = await admin()
    try:
        md = (await a.describe_topics([name]))[0]
    finally:
        await a.close()
    c.expect_eq(sorted(p["partition"] for p in md["partitions"]), [0, 1, 2], "partitions")
    c.expect(all(len(p["replicas"]) == 3 for p in md["partitions"]), "3 replicas each")
    return "3 partitions, 3 replicas each"


async def s_produce_consume():
    name = await topic("produce_consume")
    recs = c.records(20)
    await produce(name, recs)
    c.expect_eq([triple(m) for m in await read(await assigned(name), 20)], recs, "records")
    return "20 records with keys and 2 headers exact"


async def s_compression():
    covered = []
    for codec in ["gzip", "snappy", "lz4", "zstd"]:
        name = await topic("compression", suffix="-" + codec)
        recs = c.records(50, codec)
        await produce(name, recs, compression_type=codec)
        c.expect_eq([triple(m) for m in await read(await assigned(name), 50)], recs, codec)
        covered.append(codec)
    return "codecs: " + ",".join(covered)


async def subscribed(name, group, reset, **extra):
    return await consumer(name, group_id=group, auto_offset_reset=reset, **extra)


async def wait_assignment(conses, total):
    deadline = time.monotonic() + c.TIMEOUT_S / 2
    while time.monotonic() < deadline:
        for cons in conses:
            got = await cons.getmany(timeout_ms=100)
            c.expect(not any(got.values()), "a record arrived while waiting for the assignment")
        sizes = [len(x.assignment()) for x in conses]
        if sum(sizes) == total and all(sizes):
            return sizes
    raise AssertionError("assignments never settled: %s" % [len(x.assignment()) for x in conses])


async def s_consume_earliest():
    name = await topic("consume_earliest")
    recs = c.records(10)
    await produce(name, recs)
    cons = await subscribed(name, c.name(CLIENT, "consume_earliest"), "earliest")
    c.expect_eq([triple(m) for m in await read(cons, 10)], recs, "records")
    return "10 of 10 from a group without offsets"


async def s_consume_latest():
    name = await topic("consume_latest")
    await produce(name, c.records(5, "old"))
    cons = await subscribed(name, c.name(CLIENT, "consume_latest"), "latest")
    await wait_assignment([cons], 1)
    c.expect_eq(await cons.position(TopicPartition(name, 0)), 5, "position after the latest reset")
    new = c.records(5, "new")
    await produce(name, new)
    c.expect_eq([triple(m) for m in await read(cons, 5)], new, "records after joining")
    return "position 5, only the 5 new records"


async def s_seek_timestamp():
    name = await topic("seek_timestamp")
    base = int(time.time() * 1000) - 60_000
    p = await producer()
    for i, (k, v, h) in enumerate(c.records(5)):
        await p.send_and_wait(name, key=k, value=v, headers=h, partition=0, timestamp_ms=base + i * 1000)
    await p.stop()
    tp = TopicPartition(name, 0)
    cons = await consumer()
    found = (await cons.offsets_for_times({tp: base + 2500}))[tp]
    c.expect(found is not None, "no offset for the timestamp")
    c.expect_eq(found.offset, 3, "offset for base+2.5s")
    cons.assign([tp])
    cons.seek(tp, found.offset)
    m = (await read(cons, 1, extra_s=0))[0]
    c.expect_eq((m.value, m.timestamp), (b"v-r-3", base + 3000), "record")
    return "offsets_for_times -> 3, read v-r-3"


async def consume_some(conses, n):
    seen = []
    deadline = time.monotonic() + c.TIMEOUT_S / 2
    while len(seen) < n:
        c.expect(time.monotonic() < deadline, "consumed %d of %d" % (len(seen), n))
        for cons in conses:
            for tp, batch in (await cons.getmany(timeout_ms=100, max_records=1)).items():
                for m in batch:
                    await cons.commit({tp: m.offset + 1})
                    seen.append(m.value)
    return seen


async def s_group_rebalance():
    name = await topic("group_rebalance", 3)
    group = c.name(CLIENT, "group_rebalance")
    a = await subscribed(name, group, "earliest")
    await wait_assignment([a], 3)
    b = await subscribed(name, group, "earliest")
    sizes = await wait_assignment([a, b], 3)
    everything = []
    for part in range(3):
        recs = c.records(10, "p%d" % part)
        await produce(name, recs, partition=part)
        everything += [v for _, v, _ in recs]
    first = await consume_some([a, b], 15)
    await a.stop()
    await b.stop()
    resumed = await subscribed(name, group, "earliest")
    rest = [m.value for m in await read(resumed, 30 - len(first), extra_s=2.0)]
    c.expect_eq(sorted(first + rest), sorted(everything), "records before and after the resume")
    return "assignment %s, %d committed then %d resumed" % (sizes, len(first), len(rest))


async def s_member_leave_rejoin():
    name = await topic("member_leave_rejoin", 3)
    group = c.name(CLIENT, "member_leave_rejoin")
    a = await subscribed(name, group, "earliest")
    b = await subscribed(name, group, "earliest")
    await wait_assignment([a, b], 3)
    await b.stop()
    await wait_assignment([a], 3)
    rejoined = await subscribed(name, group, "earliest")
    sizes = await wait_assignment([a, rejoined], 3)
    await a.stop()
    await rejoined.stop()
    return "after leave 3/3, after rejoin %s" % sizes


async def s_idempotent_produce():
    name = await topic("idempotent_produce")
    recs = c.records(200)
    await produce(name, recs, enable_idempotence=True, acks="all")
    c.expect_eq([triple(m) for m in await read(await assigned(name), 200)], recs, "records")
    return "200 records once, in order"


async def txn_producer(txn_id):
    return await producer(transactional_id=txn_id, enable_idempotence=True, acks="all")


async def s_txn_commit_abort():
    name = await topic("txn_commit_abort")
    p = await txn_producer(c.name(CLIENT, "txn_commit_abort"))
    for tag, n, commit in [("c1", 5, True), ("a", 3, False), ("c2", 5, True)]:
        await p.begin_transaction()
        for k, v, h in c.records(n, tag):
            await p.send_and_wait(name, key=k, value=v, headers=h, partition=0)
        await (p.commit_transaction() if commit else p.abort_transaction())
    await p.stop()
    rc = [m.value for m in await read(await assigned(name, isolation_level="read_committed"), 10)]
    c.expect_eq(rc, c.values(5, "c1") + c.values(5, "c2"), "read_committed")
    ru = [m.value for m in await read(await assigned(name, isolation_level="read_uncommitted"), 13)]
    c.expect_eq(ru, c.values(5, "c1") + c.values(3, "a") + c.values(5, "c2"), "read_uncommitted")
    return "read_committed 10, read_uncommitted 13"


async def s_consume_process_produce():
    src = await topic("consume_process_produce", suffix="-in")
    dst = await topic("consume_process_produce", suffix="-out")
    group = c.name(CLIENT, "consume_process_produce")
    await produce(src, c.records(10))
    cons = await subscribed(src, group, "earliest", isolation_level="read_committed")
    inputs = await read(cons, 10, stop=False)
    p = await txn_producer(c.name(CLIENT, "consume_process_produce"))
    tp = TopicPartition(src, 0)
    async with p.transaction():
        for m in inputs:
            await p.send(dst, key=m.key, value=b"out-" + m.value, partition=0)
        await p.send_offsets_to_transaction({tp: await cons.position(tp)}, group)
    await p.stop()
    out = [m.value for m in await read(await assigned(dst, isolation_level="read_committed"), 10)]
    c.expect_eq(out, [b"out-" + v for v in c.values(10, "r")], "output")
    c.expect_eq(await cons.committed(tp), 10, "committed offset")
    await cons.stop()
    return "10 outputs exact, committed offset 10"


FENCED = (ProducerFenced, InvalidProducerEpoch)


async def fenced_pair(scenario):
    name = await topic(scenario)
    txn_id = c.name(CLIENT, scenario)
    p1 = await txn_producer(txn_id)
    await p1.begin_transaction()
    await p1.send_and_wait(name, value=b"from-p1", partition=0)
    p2 = await txn_producer(txn_id)
    try:
        await p1.commit_transaction()
    except KafkaError as e:
        return name, p1, p2, e
    raise AssertionError("the fenced producer committed")


async def s_txn_fencing():
    name, p1, p2, err = await fenced_pair("txn_fencing")
    c.expect(isinstance(err, FENCED), "fencing error, got %r" % err)
    async with p2.transaction():
        await p2.send_and_wait(name, value=b"from-p2", partition=0)
    got = [m.value for m in await read(await assigned(name, isolation_level="read_committed"), 1)]
    c.expect_eq(got, [b"from-p2"], "read_committed")
    await p2.stop()
    return "p1 got %s; p2 committed" % type(err).__name__


async def s_err_fenced_producer():
    name, p1, p2, err = await fenced_pair("err_fenced_producer")
    c.expect(isinstance(err, FENCED), "fencing error, got %r" % err)
    try:
        await p1.begin_transaction()
        await p1.send_and_wait(name, value=b"again", partition=0)
        await p1.commit_transaction()
    except (KafkaError, AssertionError) as again:
        # aiokafka refuses the next call from its FATAL_ERROR state with an AssertionError.
        return "%s; next transaction refused: %s" % (type(err).__name__, type(again).__name__)
    raise AssertionError("the fenced producer committed another transaction")


async def s_alter_config():
    name = await topic("alter_config")
    a = await admin()
    try:
        await a.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name, configs={"retention.ms": "3600000"})])
        desc = await a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])
    finally:
        await a.close()
    entries = {e[0]: e[1] for r in desc for res in r.resources for e in res[4]}
    c.expect_eq(entries.get("retention.ms"), "3600000", "retention.ms read back")
    return "AlterConfigs retention.ms=3600000 read back"


async def s_delete_records():
    name = await topic("delete_records")
    await produce(name, c.records(10))
    tp = TopicPartition(name, 0)
    a = await admin()
    try:
        await a.delete_records({tp: RecordsToDelete(before_offset=5)})
    finally:
        await a.close()
    cons = await consumer()
    c.expect_eq((await cons.beginning_offsets([tp]))[tp], 5, "beginning offset")
    await cons.stop()
    got = await read(await assigned(name), 5)
    c.expect_eq([m.offset for m in got], list(range(5, 10)), "offsets from earliest")
    return "beginning offset 5, earliest read starts at 5"


async def s_leader_kill():
    name = await topic("leader_kill")
    p = await producer(acks="all", enable_idempotence=True, request_timeout_ms=30000)
    acked, errors, stop = [], [], asyncio.Event()

    async def run():
        i = 0
        pending = []
        while not stop.is_set():
            v = b"lk-%d" % i
            pending.append((v, await p.send(name, value=v, partition=0)))
            await asyncio.sleep(0.005)
            i += 1
        for v, f in pending:
            try:
                await f
                acked.append(v)
            except KafkaError as e:
                errors.append(e)

    worker = asyncio.create_task(run())
    await asyncio.sleep(2)
    await asyncio.get_running_loop().run_in_executor(None, c.kill_leader)
    await asyncio.sleep(3)
    stop.set()
    await worker
    await p.stop()
    c.expect(acked, "nothing acknowledged")
    got = set(m.value for m in await read(await assigned(name), len(acked), extra_s=2.0))
    lost = [v for v in acked if v not in got]
    c.expect(not lost, "%d acknowledged records lost, e.g. %s" % (len(lost), lost[:3]))
    return "%d acked, all read back (%d errors)" % (len(acked), len(errors))


async def s_txn_leader_kill():
    name = await topic("txn_leader_kill", c.TXN_PARTITIONS)
    p = await producer(transactional_id=c.name(CLIENT, "txn_leader_kill"), enable_idempotence=True, acks="all",
                       transaction_timeout_ms=c.TXN_CALL_S * 1000, request_timeout_ms=30000)

    async def one_txn(seq, run):
        began = time.monotonic()
        await p.begin_transaction()
        run.step("send")
        futures = [await p.send(name, key=c.txn_value(seq, part), value=c.txn_value(seq, part), partition=part)
                   for part in range(c.TXN_PARTITIONS)]
        for f in futures:
            await asyncio.wait_for(f, c.TXN_CALL_S)
        await run.hold_async(seq)
        commit_started = time.monotonic()
        run.step("commit")
        try:
            await asyncio.wait_for(p.commit_transaction(), c.TXN_CALL_S)
        except KafkaError as e:
            raise AssertionError("commit after %d ms: %r (retriable: %s)" % (
                (time.monotonic() - commit_started) * 1000, e, getattr(e, "retriable", None)))
        run.record(seq, began, commit_started)

    try:
        run = await c.txn_loop_across_kill_async(one_txn)
    finally:
        await p.stop()
    run.check()
    cons = await consumer(isolation_level="read_committed")
    tps = [TopicPartition(name, part) for part in range(c.TXN_PARTITIONS)]
    cons.assign(tps)
    await cons.seek_to_beginning(*tps)
    by_partition = {}
    for m in await read(cons, run.total()):
        by_partition.setdefault(m.partition, []).append(m.value)
    return run.check_read(by_partition)


async def s_err_unknown_topic():
    p = await producer(request_timeout_ms=5000)
    try:
        await asyncio.wait_for(p.send_and_wait(c.name(CLIENT, "err_unknown_topic", "-missing"), b"x"), 20)
    except (UnknownTopicOrPartitionError, KafkaTimeoutError) as e:
        return "%s: %s" % (type(e).__name__, e)
    finally:
        await p.stop()
    raise AssertionError("produce to a missing topic succeeded")


async def s_err_offset_out_of_range():
    name = await topic("err_offset_out_of_range")
    await produce(name, c.records(5))
    cons = await assigned(name, offset=100, auto_offset_reset="none")
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline:
            try:
                got = await cons.getmany(timeout_ms=200)
            except OffsetOutOfRangeError as e:
                return "OffsetOutOfRangeError: %s" % e
            c.expect(not any(got.values()), "read a record past the end")
    finally:
        await cons.stop()
    raise AssertionError("no OffsetOutOfRangeError for offset 100 of 5")


async def s_err_stale_generation():
    name = await topic("err_stale_generation", 2)
    group = c.name(CLIENT, "err_stale_generation")
    a = await subscribed(name, group, "earliest", session_timeout_ms=6000, max_poll_interval_ms=6000)
    await wait_assignment([a], 2)
    b = await subscribed(name, group, "earliest")
    deadline = time.monotonic() + 30
    while len(b.assignment()) < 2:
        c.expect(time.monotonic() < deadline, "b never got both partitions")
        await b.getmany(timeout_ms=200)
    try:
        await a.commit({TopicPartition(name, 0): 1})
    except (IllegalGenerationError, UnknownMemberIdError, RebalanceInProgressError, CommitFailedError) as e:
        return "%s: %s" % (type(e).__name__, e)
    except IllegalStateError as e:
        # aiokafka refuses locally once the rejoin took the partition away (as against Kafka).
        return "refused by the client before sending: %s" % e
    finally:
        await b.stop()
    raise AssertionError("a member kicked out of the group committed")


IMPLS = c.scenario_functions(globals())

if __name__ == "__main__":
    c.run_all(CLIENT, VERSION, IMPLS)
