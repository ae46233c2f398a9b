"""Share-group (KIP-932, Kafka's queues) driver for confluent-kafka-python's ShareConsumer.

Client id confluent-kafka-python-share: confluent-kafka 2.16.1's ShareConsumer, the preview share
consumer of librdkafka 2.16.0, on the seven share scenarios of java-4.4.0-share (Queues.java,
ShareFaults.java), each checked as exactly as there where the client's API can express it; set-up
in confluent_share_kit.py, the share-group admin requests the preview lacks in share_wire.py.

What the preview cannot do, and what the scenarios do instead:
- No acquisition lock timeout (KafkaShareConsumer.acquisitionLockTimeoutMs()): share_lock_expiry
  checks the 15 s lock by when the records come back only.
- No share.acquire.mode=record_limit (KIP-1206): max.poll.records is a soft bound, sent as the
  ShareFetch's MaxRecords, and a broker acquiring whole record batches may hand out more. So
  share_member_kill and share_leader_kill produce their records in batches of their record limit
  (batch.num.messages), which keeps an acquisition near that size; the checks do not depend on it.
- No share-group admin (describe, offsets): share_wire sends ShareGroupDescribe and
  DescribeShareGroupOffsets itself, as the Java driver's Admin does.

Usage: confluent_share_driver.py (the scenarios; environment as compat_common), or
confluent_share_driver.py --member TOPIC GROUP MAX (share_member_kill's child, ShareMember.java).
"""

import os
import subprocess
import sys
import threading
import time

from confluent_kafka import KafkaError

import compat_common as c
import confluent_share_kit as k
from confluent_share_kit import ACCEPT, REJECT, RELEASE

# How long a scenario waits for records it expects (Queues.WAIT).
WAIT_S = 40.0


def names(scenario):
    topic = c.name(k.CLIENT, scenario)
    return topic, topic + "-g"


def s_share_consume_implicit():
    """30 records on three partitions; one implicit-mode consumer (the default) reads each
    exactly once, delivery count 1; a further poll round (whose first poll accepts the last batch
    implicitly) gets nothing; commit_sync reports no failed partition; the group's offsets show
    every record acknowledged (Queues.consumeImplicit)."""
    topic, group = names("share_consume_implicit")
    partitions = 3
    values = k.numbered("si", 30)
    k.group_configs(group, ("share.auto.offset.reset", "earliest"))
    k.create_topic(topic, partitions, values)
    seen, not_first, more, polls = {}, [], [], 0
    ledger = k.Ledger()
    sc = k.consumer(group, "implicit", topic)
    try:
        deadline = time.monotonic() + WAIT_S
        while len(seen) < len(values):
            c.expect(time.monotonic() < deadline, "read %d of %d records in %d s" % (len(seen), len(values), WAIT_S))
            for m in k.poll(sc, ledger):
                v = m.value().decode()
                seen[v] = seen.get(v, 0) + 1
                if m.delivery_count() != 1:
                    not_first.append("%s dc %d" % (v, m.delivery_count()))
            polls += 1
        # The second round: its first poll accepts the last batch implicitly.
        quiet = time.monotonic() + k.QUIET_S
        while time.monotonic() < quiet:
            more += [m.value().decode() for m in k.poll(sc, ledger)]
        commit = sc.commit_sync(k.COMMIT_S)
    finally:
        sc.close()
    c.expect(not ledger.errors, "poll returned error events: %s" % ledger.errors[:3])
    dups = ["%s x%d" % (v, n) for v, n in sorted(seen.items()) if n > 1]
    c.expect(not dups, "delivered more than once: %s" % dups)
    c.expect_eq(sorted(seen), sorted(values), "records delivered")
    c.expect(not not_first, "first deliveries with a delivery count other than 1: %s" % not_first)
    c.expect(not more, "the second poll round got %d more records: %s" % (len(more), k.sample(more)))
    failed = {"%s-%d" % (tp.topic, tp.partition): k.describe(e) for tp, e in commit.items() if e is not None}
    c.expect(not failed, "commit_sync failed for %s" % failed)
    offsets = k.check_all_acknowledged(group, topic, partitions, 15)
    return ("%d records on %d partitions delivered once each (delivery count 1) in %d polls, none in a further "
            "%d s; offsets %s" % (len(values), partitions, polls, k.QUIET_S, offsets))


def plan(i):
    """share_explicit_ack's plan: record i is accepted, released or rejected by i mod 3."""
    return (ACCEPT, RELEASE, REJECT)[i % 3]


def index(value):
    return int(value.lstrip("abcdefghijklmnopqrstuvwxyz"))


def s_share_explicit_ack():
    """Explicit mode on one partition of 12 records: on first delivery record i is accepted,
    released or rejected by i mod 3, commit_sync after every poll. The released come back exactly
    once more with delivery count 2 and are accepted then; the accepted and the rejected never
    come back. Every commit_sync names the partition with no error; the acknowledgement commit
    callback reports every acknowledged offset (the released ones twice) with no exception; the
    group's offsets show all 12 acknowledged (Queues.explicitAck)."""
    topic, group = names("share_explicit_ack")
    values = k.numbered("ea", 12)
    k.group_configs(group, ("share.auto.offset.reset", "earliest"))
    k.create_topic(topic, 1, values)
    ledger = k.Ledger()
    callback_errors, callback_offsets, callbacks = [], {}, [0]

    def on_commit(offsets, error):
        callbacks[0] += 1
        if error is not None:
            callback_errors.append(k.describe(error))
        for offs in offsets.values():
            for o in offs:
                callback_offsets[o] = callback_offsets.get(o, 0) + 1

    def decide(m):
        v = m.value().decode()
        return plan(index(v)) if len(ledger.of(v)) == 1 else ACCEPT

    sc = k.consumer(group, "explicit", topic)
    try:
        sc.set_acknowledgement_commit_callback(on_commit)
        deadline = time.monotonic() + WAIT_S
        while not explicit_done(ledger, values):
            c.expect(time.monotonic() < deadline, "within %d s: %d records delivered, %d deliveries: %s" % (
                WAIT_S, ledger.distinct(), ledger.total(), ledger.deliveries))
            k.poll_ack(sc, ledger, decide)
        quiet = time.monotonic() + k.QUIET_S
        while time.monotonic() < quiet:
            k.poll_ack(sc, ledger, lambda m: ACCEPT)
    finally:
        sc.close()
    c.expect(not ledger.errors, "poll returned error events: %s" % ledger.errors[:3])
    c.expect(not ledger.failed, "acknowledgements failed: %s" % ledger.failed)
    c.expect(not ledger.after_final, "delivered again after an accept or reject: %s" % ledger.after_final)
    want_offsets = {}
    for i, v in enumerate(values):
        t = plan(i)
        want = [1, 2] if t == RELEASE else [1]
        c.expect(ledger.of(v) == want, "%s (%s) delivered with delivery counts %s, expected %s" % (
            v, k.type_name(t), ledger.of(v), want))
        c.expect(ledger.confirmed_count(v, t) == 1, "%s: its %s not confirmed once" % (v, k.type_name(t)))
        if t == RELEASE:
            c.expect(ledger.confirmed_count(v, ACCEPT) == 1, "%s: its accept after the release not confirmed" % v)
        want_offsets[i] = 2 if t == RELEASE else 1
    c.expect(not callback_errors, "the acknowledgement commit callback reported %s" % callback_errors)
    c.expect(callback_offsets == want_offsets, "the acknowledgement commit callback reported offsets (offset=times) "
             "%s, expected %s" % (dict(sorted(callback_offsets.items())), want_offsets))
    offsets = k.check_all_acknowledged(group, topic, 1, 15)
    return ("4 accepted, 4 released (back once with delivery count 2, then accepted), 4 rejected (never back); "
            "every commit_sync without error, %d callbacks with every offset, none in a further %d s; offsets %s" % (
                callbacks[0], k.QUIET_S, offsets))


def explicit_done(ledger, values):
    for i, v in enumerate(values):
        want = 2 if plan(i) == RELEASE else 1
        if len(ledger.of(v)) < want:
            return False
        if plan(i) == RELEASE and ledger.confirmed_count(v, ACCEPT) == 0:
            return False
    return True


def refused_config(group, key, value):
    """The group config key=value must be refused with INVALID_CONFIG (or INVALID_REQUEST)."""
    refused = k.rejected_group_config(group, key, value)
    c.expect(refused.code() in (KafkaError.INVALID_CONFIG, KafkaError.INVALID_REQUEST),
             "%s=%s refused with %s" % (key, value, k.describe(refused)))
    return refused


def s_share_reject_archive():
    """share.delivery.count.limit=1 must be refused (Kafka's minimum is 2); with 3, a record
    released on every delivery arrives exactly 3 times (delivery counts 1, 2, 3) and never again,
    a rejected one once, an accepted one once, and a record produced afterwards still arrives
    (count 1); the group's offsets show every record done (Queues.rejectArchive)."""
    topic, group = names("share_reject_archive")
    limit = 3
    refused = refused_config(group, "share.delivery.count.limit", "1")
    k.group_configs(group, ("share.auto.offset.reset", "earliest"), ("share.delivery.count.limit", str(limit)))
    k.create_topic(topic, 1, ["ra-release", "ra-reject", "ra-accept"])
    ledger = k.Ledger()

    def decide(m):
        v = m.value().decode()
        return RELEASE if v.endswith("release") else REJECT if v.endswith("reject") else ACCEPT

    sc = k.consumer(group, "explicit", topic)
    try:
        deadline = time.monotonic() + WAIT_S
        while len(ledger.of("ra-release")) < limit or not ledger.of("ra-reject") or not ledger.of("ra-accept"):
            c.expect(time.monotonic() < deadline, "within %d s: deliveries %s" % (WAIT_S, ledger.deliveries))
            k.poll_ack(sc, ledger, decide)
        quiet = time.monotonic() + k.QUIET_S
        while time.monotonic() < quiet:
            k.poll_ack(sc, ledger, decide)
        k.produce(topic, ["ra-after"])
        deadline = time.monotonic() + WAIT_S
        while not ledger.of("ra-after"):
            c.expect(time.monotonic() < deadline, "the record produced after the archived ones did not arrive in "
                     "%d s; deliveries %s" % (WAIT_S, ledger.deliveries))
            k.poll_ack(sc, ledger, decide)
    finally:
        sc.close()
    c.expect(not ledger.errors, "poll returned error events: %s" % ledger.errors[:3])
    c.expect(not ledger.failed, "acknowledgements failed: %s" % ledger.failed)
    counts = list(range(1, limit + 1))
    c.expect(ledger.of("ra-release") == counts, "the released record arrived with delivery counts %s, expected %s "
             "(share.delivery.count.limit=%d)" % (ledger.of("ra-release"), counts, limit))
    c.expect(ledger.confirmed_count("ra-release", RELEASE) == limit, "its %d releases not all confirmed" % limit)
    c.expect(ledger.of("ra-reject") == [1], "the rejected record: delivery counts %s" % ledger.of("ra-reject"))
    c.expect(ledger.confirmed_count("ra-reject", REJECT) == 1, "the reject not confirmed")
    c.expect(ledger.of("ra-accept") == [1], "the accepted record: delivery counts %s" % ledger.of("ra-accept"))
    c.expect(ledger.of("ra-after") == [1], "the later record: delivery counts %s" % ledger.of("ra-after"))
    offsets = k.check_all_acknowledged(group, topic, 1, 15)
    return ("delivery limit 1 refused (%s); limit %d: the released record arrived %d times (%s) then never, the "
            "rejected once, the accepted once, a later record once; offsets %s" % (
                refused.name(), limit, limit, counts, offsets))


def s_share_lock_expiry():
    """share.record.lock.duration.ms at Kafka 4.4's minimum, 15000 (14999 must be refused). A
    consumer (explicit mode) acquires the 5 records in one poll, then stops polling but stays
    alive (librdkafka heartbeats on its own thread): nothing renews the locks. A second consumer
    must get none of them until 15 s after the first one's poll began, then every one with
    delivery count 2 (any the first did not get, with 1). While the second holds its first batch
    unacknowledged, the first's late ACCEPT must fail for the partition with INVALID_RECORD_STATE;
    the second then accepts everything, every accept confirmed (Queues.lockExpiry). The preview
    has no acquisitionLockTimeoutMs(), so the lock is measured by the records' return only."""
    topic, group = names("share_lock_expiry")
    refused = refused_config(group, "share.record.lock.duration.ms", str(k.MIN_LOCK_MS - 1))
    k.group_configs(group, ("share.auto.offset.reset", "earliest"), ("share.record.lock.duration.ms", str(k.MIN_LOCK_MS)))
    values = k.numbered("le", 5)
    k.create_topic(topic, 1, values)
    first_ledger, second = k.Ledger(), k.Ledger()
    held, arrived = [], {}
    a = k.consumer(group, "explicit", topic)
    b = None
    try:
        deadline = time.monotonic() + WAIT_S
        while not held:
            c.expect(time.monotonic() < deadline, "the first consumer acquired nothing in %d s" % WAIT_S)
            acquired = time.monotonic()
            held = k.poll(a, first_ledger)
        bad = ["%s dc %d" % (m.value().decode(), m.delivery_count()) for m in held if m.delivery_count() != 1]
        c.expect(not bad, "the first consumer's records arrived with delivery counts other than 1: %s" % bad)
        held_values = sorted(m.value().decode() for m in held)
        b = k.consumer(group, "explicit", topic)
        deadline = acquired + k.MIN_LOCK_MS / 1000 + WAIT_S
        first = []
        while not first:
            c.expect(time.monotonic() < deadline, "the second consumer got nothing within %d s of the locks' expiry" % WAIT_S)
            first = k.poll(b, second)
            for m in first:
                arrived.setdefault(m.value().decode(), time.monotonic())
        # The first consumer accepts what it held long ago, while the second holds some of it.
        for m in held:
            a.acknowledge(m, ACCEPT)
        late = a.commit_sync(k.COMMIT_S)
        k.ack_all(b, second, first, lambda m: ACCEPT)
        while len(arrived) < len(values):
            c.expect(time.monotonic() < deadline, "the second consumer got %s within %d s of the locks' expiry" % (
                sorted(arrived), WAIT_S))
            for m in k.poll_ack(b, second, lambda m: ACCEPT):
                arrived.setdefault(m.value().decode(), time.monotonic())
        quiet = time.monotonic() + k.QUIET_S
        while time.monotonic() < quiet:
            k.poll_ack(b, second, lambda m: ACCEPT)
    finally:
        if b is not None:
            b.close()
        a.close()
    c.expect(not first_ledger.errors and not second.errors, "poll returned error events: %s" % (
        first_ledger.errors + second.errors)[:3])
    c.expect(not second.failed, "the second consumer's accepts failed: %s" % second.failed)
    c.expect(not second.after_final, "delivered again after an accept: %s" % second.after_final)
    earliest_ms = check_back_after_lock(values, held_values, second, {v: t - acquired for v, t in arrived.items()})
    c.expect(len(late) == 1, "the first consumer's late commit_sync gave results %s" % late)
    late_error = list(late.values())[0]
    c.log("share_lock_expiry: held %s, back at the second consumer after %s ms; the holder's late accept: %s" % (
        held_values, earliest_ms, late_error and k.describe(late_error)))
    c.expect(late_error is not None and k.error_code(late_error) == KafkaError.INVALID_RECORD_STATE,
             "the first consumer's late accept of records the second holds must fail with INVALID_RECORD_STATE; "
             "got %s" % (k.describe(late_error) if late_error is not None else "no error"))
    offsets = k.check_all_acknowledged(group, topic, 1, 15)
    return ("lock 14999 ms refused (%s); lock %d ms (not readable from this client: no acquisitionLockTimeoutMs): "
            "the %d held reached the second consumer with delivery count 2, the first %d ms after the holder's poll "
            "began; the holder's late accept failed with %s; offsets %s" % (
                refused.name(), k.MIN_LOCK_MS, len(held_values), earliest_ms, k.error_name(late_error), offsets))


def check_back_after_lock(values, held_values, second, after_s):
    """share_lock_expiry's check of the second consumer's deliveries: each record once, accepted,
    the held ones with delivery count 2 and not before the lock ran out (after_s: seconds from the
    holder's poll to the record's arrival). Answers the earliest return of a held one, in ms."""
    earliest_ms = None
    for v in values:
        want = [2 if v in held_values else 1]
        c.expect(second.of(v) == want, "%s reached the second consumer with delivery counts %s, expected %s%s" % (
            v, second.of(v), want, " (held by the first)" if v in held_values else ""))
        c.expect(second.confirmed_count(v, ACCEPT) == 1, "%s: the second consumer's accept not confirmed" % v)
        if v not in held_values:
            continue
        after_ms = int(after_s[v] * 1000)
        earliest_ms = after_ms if earliest_ms is None else min(earliest_ms, after_ms)
        # The lock starts at the acquisition, after the poll began: it cannot run out before.
        c.expect(after_ms >= k.MIN_LOCK_MS - 250, "%s reached the second consumer %d ms after the first consumer's "
                 "poll began, before its %d ms lock ran out" % (v, after_ms, k.MIN_LOCK_MS))
    return earliest_ms


def s_share_two_consumers():
    """Two explicit-mode consumers of one group on a four-partition topic: once ShareGroupDescribe
    shows both as members with assignments covering every partition, 200 records are produced;
    between them they read each exactly once (delivery count 1), every accept confirmed, nothing
    more in a further poll round; each must have read some (Queues.twoConsumers)."""
    topic, group = names("share_two_consumers")
    partitions = 4
    k.group_configs(group, ("share.auto.offset.reset", "earliest"))
    k.create_topic(topic, partitions)
    values = k.numbered("tc", 200)
    ledger, counts = k.Ledger(), {}
    both = []
    try:
        both = [k.consumer(group, "explicit", topic), k.consumer(group, "explicit", topic)]
        deadline = time.monotonic() + WAIT_S
        while True:
            for sc in both:
                c.expect(not k.poll_ack(sc, ledger, lambda m: ACCEPT), "a record arrived before any was produced")
            state, members = k.wire.describe_share_group(group)
            owned = [set(p for p in assignment.get(topic, [])) for _id, _client, assignment in members]
            assignment = "%s %s" % (state, " ".join(sorted(str(sorted(o)) for o in owned)))
            if len(members) == 2 and all(owned) and set().union(*owned) == set(range(partitions)):
                break
            c.expect(time.monotonic() < deadline, "the group did not settle in %d s: %s" % (WAIT_S, assignment))
        k.produce(topic, values)
        deadline = time.monotonic() + WAIT_S
        while ledger.distinct() < len(values):
            c.expect(time.monotonic() < deadline, "read %d of %d in %d s" % (ledger.distinct(), len(values), WAIT_S))
            for i, sc in enumerate(both):
                got = k.poll_ack(sc, ledger, lambda m: ACCEPT)
                if got:
                    counts["c%d" % (i + 1)] = counts.get("c%d" % (i + 1), 0) + len(got)
        quiet = time.monotonic() + k.QUIET_S
        while time.monotonic() < quiet:
            for sc in both:
                k.poll_ack(sc, ledger, lambda m: ACCEPT)
    finally:
        for sc in both:
            sc.close()
    c.expect(not ledger.errors, "poll returned error events: %s" % ledger.errors[:3])
    c.expect(not ledger.failed, "accepts failed: %s" % ledger.failed)
    wrong = ["%s %s" % (v, ledger.of(v)) for v in values
             if ledger.of(v) != [1] or ledger.confirmed_count(v, ACCEPT) != 1]
    c.expect(not wrong, "not delivered exactly once with delivery count 1 and accepted: %s" % k.sample(wrong))
    c.expect_eq(ledger.distinct(), len(values), "distinct records delivered")
    c.expect(len(counts) == 2, "one consumer read every record (%s); assignment %s" % (counts, assignment))
    offsets = k.check_all_acknowledged(group, topic, partitions, 15)
    return "%d records read exactly once between the two %s, assignment %s; offsets %s" % (
        len(values), dict(sorted(counts.items())), assignment, offsets)


# share_member_kill's child: at most MEMBER_MAX records, produced in batches of that size.
MEMBER_MAX = 5


def member_main(topic, group, max_records):
    """The share consumer share_member_kill kill -9s (ShareMember.java): joins the group in
    explicit mode with max.poll.records=max_records, takes the first poll that returns records,
    prints them and holds them: it never acknowledges and never polls again, but stays alive
    (librdkafka's own threads heartbeat) until it is killed. stdout, one line each:
    "record PARTITION OFFSET DELIVERY_COUNT VALUE" per record, then "held N"; "error TEXT" and
    exit 1 on a failure."""
    try:
        sc = k.consumer(group, "explicit", topic, max_poll_records=max_records)
        deadline = time.monotonic() + 60
        got = []
        while not got:
            if time.monotonic() > deadline:
                raise RuntimeError("no record in 60 s")
            got = [m for m in sc.poll(k.POLL_S) if m.error() is None]
        for m in got:
            print("record %d %d %d %s" % (m.partition(), m.offset(), m.delivery_count(), m.value().decode()), flush=True)
        print("held %d" % len(got), flush=True)
        while True:  # holds them: no acknowledgement, no poll, no close, until the kill -9
            time.sleep(60)
    except Exception as e:  # noqa: BLE001 - reported to the parent
        print("error %s: %s" % (type(e).__name__, str(e).replace("\n", " ")), flush=True)
        sys.exit(1)


def start_member(topic, group):
    """share_member_kill's child process; answers (process, {value: delivery count} it holds)."""
    child = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--member", topic, group, str(MEMBER_MAX)],
                             stdout=subprocess.PIPE, stderr=sys.stderr, text=True)
    held, lines = {}, []

    def read():
        for line in child.stdout:
            lines.append(line.strip())
        lines.append("eof")

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + WAIT_S
    try:
        seen = 0
        while True:
            c.expect(time.monotonic() < deadline, "the child consumer acquired nothing in %d s" % WAIT_S)
            if seen == len(lines):
                time.sleep(0.05)
                continue
            line, seen = lines[seen], seen + 1
            c.log("share_member_kill: child: " + line)
            f = line.split(" ")
            if f[0] == "record":
                held[f[4]] = int(f[3])
            elif f[0] == "held":
                return child, held
            else:
                raise AssertionError("the child consumer: " + line)
    except BaseException:
        child.kill()
        child.wait(10)
        raise


def s_share_member_kill():
    """20 records on one partition; a share consumer in a child process (explicit mode, at most
    5 records a poll) acquires some and holds them, then is killed -9. A consumer started after
    the kill must get every record: the held ones again with delivery count >= 2, the rest with 1
    (or 2 if the child's client had acquired them ahead), each accepted exactly once, nothing more
    in a further poll round, and the group's offsets show every record acknowledged. The lock is
    15 s so a broker that frees the records only when it runs out still passes in time; the detail
    says how long it took (ShareFaults.memberKill)."""
    topic, group = names("share_member_kill")
    k.group_configs(group, ("share.auto.offset.reset", "earliest"), ("share.record.lock.duration.ms", str(k.MIN_LOCK_MS)))
    values = k.numbered("mk", 20)
    # librdkafka has no record_limit acquire mode: batches of MEMBER_MAX keep an acquisition small.
    k.create_topic(topic, 1, values, batch_num_messages=MEMBER_MAX)
    child, held = start_member(topic, group)
    child.kill()  # SIGKILL
    child.wait(10)
    killed_at = time.monotonic()
    c.expect(held, "the child consumer held nothing")
    bad = ["%s dc %d" % (v, dc) for v, dc in sorted(held.items()) if dc != 1]
    c.expect(not bad, "the child got records with delivery counts other than 1: %s" % bad)
    ledger = k.Ledger()
    first_held_back = first_any = None
    sc = k.consumer(group, "explicit", topic)
    try:
        deadline = killed_at + k.MIN_LOCK_MS / 1000 + WAIT_S
        while not all(ledger.confirmed_count(v, ACCEPT) for v in values):
            c.expect(time.monotonic() < deadline, "after the kill the other consumer got %d of %d (held by the killed "
                     "one: %s; deliveries %s)" % (ledger.distinct(), len(values), sorted(held), ledger.deliveries))
            for m in k.poll_ack(sc, ledger, lambda m: ACCEPT):
                first_any = first_any or time.monotonic()
                if first_held_back is None and m.value().decode() in held:
                    first_held_back = time.monotonic()
        quiet = time.monotonic() + k.QUIET_S
        while time.monotonic() < quiet:
            k.poll_ack(sc, ledger, lambda m: ACCEPT)
    finally:
        sc.close()
    c.expect(not ledger.errors, "poll returned error events: %s" % ledger.errors[:3])
    c.expect(not ledger.failed, "accepts failed: %s" % ledger.failed)
    c.expect(not ledger.after_final, "delivered again after an accept: %s" % ledger.after_final)
    wrong, held_counts, prefetched = [], {}, 0
    for v in values:
        d = ledger.of(v)
        # A record the child's client fetched ahead (acquired, never handed to the child) comes
        # back with count 2 too. Never above 2.
        ok = len(d) == 1 and ledger.confirmed_count(v, ACCEPT) == 1 and (d[0] >= 2 if v in held else d[0] in (1, 2))
        if not ok:
            wrong.append("%s%s %s" % (v, " (held)" if v in held else "", d))
        if v in held and d:
            held_counts[d[0]] = held_counts.get(d[0], 0) + 1
        if v not in held and d == [2]:
            prefetched += 1
    c.expect(not wrong, "not delivered once more and accepted as expected (held ones: delivery count >= 2, the rest "
             "1, or 2 if the child's client had fetched them ahead): %s" % wrong)
    offsets = k.check_all_acknowledged(group, topic, 1, 15)
    back_ms, any_ms = int((first_held_back - killed_at) * 1000), int((first_any - killed_at) * 1000)
    c.log("share_member_kill: held %s, back after %d ms (the other consumer's first record after %d ms) with delivery "
          "counts %s" % (sorted(held), back_ms, any_ms, held_counts))
    return ("the killed child held %d of %d; the other consumer (started after the kill) got them back %d ms after "
            "the kill -9 (its first record of any after %d ms; lock %d ms) with delivery counts (count=records) %s, the "
            "other %d with 1 and %d fetched ahead by the child with 2; each accepted exactly once; offsets %s" % (
                len(held), len(values), back_ms, any_ms, k.MIN_LOCK_MS, held_counts,
                len(values) - len(held) - prefetched, prefetched, offsets))


# share_leader_kill: records a poll (max.poll.records, and the size of the produced batches).
KILL_POLL_RECORDS = 10


class KillRun:
    """share_leader_kill's shared state between the consumer thread (the only one that touches
    the consumer: librdkafka's share consumer is not thread-safe) and the scenario."""

    def __init__(self):
        self.fast, self.stop, self.hold_next, self.killed = (threading.Event() for _ in range(4))
        self.holding, self.release = threading.Event(), threading.Event()
        self.held_across_kill = []
        self.crash = None
        self.last_delivery = time.monotonic()
        self.p0_after_kill = 0


def kill_consumer_loop(run, ledger, group, topic):
    """share_leader_kill's consumer: explicit mode, KILL_POLL_RECORDS a poll, commit_sync after
    each poll, slowed until the kill returns; holds its first batch with a record of partition 0
    after run.hold_next is set, unacknowledged, until the kill -9 took effect."""
    try:
        sc = k.consumer(group, "explicit", topic, max_poll_records=KILL_POLL_RECORDS)
        try:
            while not run.stop.is_set():
                got = k.poll(sc, ledger)
                if got:
                    run.last_delivery = time.monotonic()
                after_kill = run.killed.is_set()
                if any(m.partition() == 0 for m in got) and run.hold_next.is_set():
                    run.hold_next.clear()
                    # Held, acquired and unacknowledged, across the kill -9.
                    run.held_across_kill += ["%s@p%d" % (m.value().decode(), m.partition()) for m in got]
                    run.holding.set()
                    run.release.wait()
                k.ack_all(sc, ledger, got, lambda m: ACCEPT, 20)
                if after_kill:
                    run.p0_after_kill += sum(1 for m in got if m.partition() == 0
                                             and ledger.confirmed_count(m.value().decode(), ACCEPT) > 0)
                if not run.fast.is_set() and got:
                    time.sleep(0.15)
        finally:
            sc.close()
    except BaseException as e:  # noqa: BLE001 - the scenario reports it
        c.log("share_leader_kill: the consumer failed: %r" % e)
        run.crash = e


def accepted_count(ledger):
    with ledger.lock:
        return sum(1 for got in ledger.confirmed.values() if got.get(ACCEPT, 0) > 0)


def s_share_leader_kill():
    """1500 records on three partitions, produced first; one explicit-mode consumer accepts them
    (about 10 a poll, commit_sync after each poll), slowly until the kill command returns.
    COMPAT_KILL_LEADER kills -9 the broker mid-run and restarts it (on Kafka the leader of
    partition 0). The kill lands while the consumer holds a batch with records of partition 0
    acquired and unacknowledged: it accepts that batch once the kill -9 has taken effect (the kill
    command's "killed" line). Every record must be delivered; no accept confirmed twice and no
    record delivered after its accept was confirmed; a record whose accept failed must come back
    and be accepted, unless the broker applied it (then the group's offsets show it acknowledged);
    the offsets must show every record acknowledged, and records of partition 0 must be accepted
    after the kill (ShareFaults.leaderKill)."""
    topic, group = names("share_leader_kill")
    partitions = 3
    k.group_configs(group, ("share.auto.offset.reset", "earliest"))
    values = k.numbered("lk", 1500)
    # librdkafka has no record_limit acquire mode: batches of KILL_POLL_RECORDS keep a poll small.
    k.create_topic(topic, partitions, values, batch_num_messages=KILL_POLL_RECORDS)
    ledger, run = k.Ledger(), KillRun()
    consumer = threading.Thread(target=kill_consumer_loop, args=(run, ledger, group, topic), daemon=True)
    consumer.start()
    try:
        deadline = time.monotonic() + WAIT_S
        while accepted_count(ledger) < 100:
            c.expect(run.crash is None, "the consumer failed before the kill: %r" % run.crash)
            c.expect(time.monotonic() < deadline, "only %d records accepted in %d s before the kill" % (
                accepted_count(ledger), WAIT_S))
            time.sleep(0.05)
        run.hold_next.set()
        c.expect(run.holding.wait(30) or run.crash is not None, "no batch with a record of partition 0 within 30 s")
        c.expect(run.crash is None, "the consumer failed before the kill: %r" % run.crash)
        accepted_before = accepted_count(ledger)
        kill_start = time.monotonic()

        def killed():
            run.killed.set()
            run.release.set()

        # "killed": kill-kafka.sh's "node N killed after", cluster.sh's "killed with SIGKILL".
        marked = k.fault(c.KILL_LEADER, "killed", killed)
        held_ms, kill_ms = int((marked - kill_start) * 1000), int((time.monotonic() - kill_start) * 1000)
        run.fast.set()
        # Until every record is accepted, or nothing has arrived for 20 s (some accept was applied
        # although reported failed: checked below).
        deadline = time.monotonic() + 90
        while (any(ledger.confirmed_count(v, ACCEPT) == 0 for v in values)
               and time.monotonic() - run.last_delivery < 20):
            c.expect(run.crash is None, "the consumer failed: %r" % run.crash)
            c.expect(time.monotonic() < deadline, "after the kill: %d of %d delivered within 90 s" % (
                ledger.distinct(), len(values)))
            time.sleep(0.1)
        time.sleep(k.QUIET_S)  # the further poll round: nothing more may arrive
    finally:
        run.release.set()
        run.stop.set()
        consumer.join(60)
    c.expect(run.crash is None, "the consumer failed: %r" % run.crash)
    return leader_kill_verdict(ledger, run, values, group, topic, partitions, accepted_before, held_ms, kill_ms)


def leader_kill_verdict(ledger, run, values, group, topic, partitions, accepted_before, held_ms, kill_ms):
    """share_leader_kill's checks on what the consumer saw; answers the detail."""
    lost, twice, unconfirmed, silent, redelivered, errors = [], [], [], [], {}, {}
    max_count = 0
    with ledger.lock:
        for v in values:
            d = ledger.of(v)
            if not d:
                lost.append(v)
            if len(d) > 1:
                redelivered[str(d)] = redelivered.get(str(d), 0) + 1
            max_count = max([max_count] + d)
            accepts = ledger.confirmed_count(v, ACCEPT)
            if accepts > 1:
                twice.append(v)
            if accepts == 0 and d:
                (unconfirmed if v in ledger.failed else silent).append("%s %s" % (v, d))
        for es in ledger.failed.values():
            for e in es:
                key = e.replace("ACCEPT: ", "", 1).split(":")[0]
                errors[key] = errors.get(key, 0) + 1
    n_redelivered = sum(redelivered.values())
    c.log("share_leader_kill: held across the kill -9 %s; %d records redelivered, by delivery counts %s; %d records "
          "with a failed accept: %s; error events %s" % (run.held_across_kill, n_redelivered, redelivered,
                                                          len(ledger.failed), errors, ledger.errors))
    for v, es in ledger.failed.items():
        c.log("share_leader_kill: failed accept %s %s deliveries %s: %s" % (v, ledger.where.get(v), ledger.of(v), es))
    c.expect(not lost, "never delivered: %s" % k.sample(lost))
    c.expect(not twice, "accepted (confirmed) more than once: %s" % k.sample(twice))
    c.expect(not ledger.after_final, "delivered again after its accept was confirmed: %s" % k.sample(ledger.after_final))
    c.expect(not silent, "delivered, never accepted and no failure reported: %s" % k.sample(silent))
    # Kafka's default share.delivery.count.limit: a record delivered that often may have been archived.
    c.expect(max_count < 5, "a record was delivered %d times (the default delivery limit is 5: archived?)" % max_count)
    offsets = k.check_all_acknowledged(group, topic, partitions, 30)
    c.expect(run.p0_after_kill > 0, "no record of partition 0 was accepted after the kill")
    return ("%d records each accepted once, none lost: %d before the kill, %d held unacknowledged across it (accepted "
            "%d ms after the kill began), %d of partition 0 after it; kill+restart %d ms; %d redelivered (delivery "
            "counts %s), %d accepts reported failed %s%s%s; offsets %s" % (
                len(values), accepted_before, len(run.held_across_kill), held_ms, run.p0_after_kill, kill_ms,
                n_redelivered, redelivered, len(ledger.failed), errors,
                ", %d of them applied anyway (not redelivered)" % len(unconfirmed) if unconfirmed else "",
                "; error events %s" % sorted(set(ledger.errors)) if ledger.errors else "", offsets))


# The scenarios that wait for a 15 s lock or a broker's kill and restart get more room (ShareDriver).
BUDGETS_S = {
    "share_lock_expiry": max(c.TIMEOUT_S, 90),
    "share_member_kill": max(c.TIMEOUT_S, 90),
    "share_leader_kill": max(c.TIMEOUT_S, 180),
}

if __name__ == "__main__":
    if sys.argv[1:2] == ["--member"]:
        member_main(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    c.run_all(k.CLIENT, k.VERSION, {s: globals()["s_" + s] for s in c.SHARE_SCENARIOS},
              scenarios=c.SHARE_SCENARIOS, budgets_s=BUDGETS_S)
