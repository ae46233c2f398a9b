#!/usr/bin/env python3
"""Which broker of a scripts/kafka-reference.sh cluster a compat scenario's kill must hit.

Used by kill-kafka.sh (COMPAT_KILL_LEADER of `scripts/compat.sh --kafka`). Standard library
only: Metadata v4, FindCoordinator v1 and ListTransactions v0 over a plain socket, so an answer
takes milliseconds (a Kafka tool's JVM takes seconds, longer than the one second
txn_leader_kill holds its transaction open before committing).

    kafka_probe.py target          prints "NODE KEY WHAT": the broker to kill, txn:ID or
                                   topic:NAME (what it was found for) and why
    kafka_probe.py moved NODE      prints the target's node; exits 0 once it is not NODE
                                   (kill-kafka.sh passes KEY back as COMPAT_KILL_TXN_ID or
                                   COMPAT_KILL_TOPIC, so the same role is followed)

The target, for the running driver (its names start with COMPAT_PREFIX):
- an Ongoing transaction of that prefix (txn_leader_kill holds one open across the kill): its
  transaction coordinator, the broker whose ListTransactions lists it (each broker lists only
  the transactional ids it coordinates). On Kafka that is the leader of the id's
  __transaction_state partition, chosen apart from the transaction's own partitions (with
  three of them on three brokers it also leads one). With COMPAT_KILL_TXN_ID: that id's
  coordinator (FindCoordinator).
- else the leader of partition 0 of the prefix's topic named *leader_kill / *leader-kill
  (COMPAT_KILL_TOPIC names it directly), which the leader_kill drivers produce to and
  share_leader_kill's share group consumes (`<prefix>-share-leader-kill`: on Kafka the share
  partition's state lives on that partition's leader), or *-kill-leader-in, Kafka Streams'
  streams_kill_leader input (when the kill falls between two of its transactions).
Bootstrap: COMPAT_BOOTSTRAP (comma-separated host:port).
"""

import os
import socket
import struct
import sys
import time

BOOTSTRAP = [hp.rsplit(":", 1) for hp in os.environ.get("COMPAT_BOOTSTRAP", "127.0.0.1:29092").split(",") if hp]
PREFIX = os.environ.get("COMPAT_PREFIX", "")


def i16(v):
    return struct.pack(">h", v)


def i32(v):
    return struct.pack(">i", v)


def string(s):
    b = s.encode()
    return i16(len(b)) + b


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return v

    def i8(self):
        return self.take(">b")

    def i16(self):
        return self.take(">h")

    def i32(self):
        return self.take(">i")

    def string(self):
        n = self.i16()
        if n < 0:
            return None
        s = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return s

    def array(self, item):
        n = self.i32()
        return [item() for _ in range(max(n, 0))]


def call(host, port, api_key, version, body):
    """One request (header v1) on a fresh connection; the response body after the correlation id."""
    header = i16(api_key) + i16(version) + i32(1) + string("compat-kill-probe")
    frame = header + body
    with socket.create_connection((host, int(port)), timeout=2.0) as s:
        s.sendall(i32(len(frame)) + frame)
        size = struct.unpack(">i", recv_exact(s, 4))[0]
        data = recv_exact(s, size)
    return Reader(data[4:])


def recv_exact(s, n):
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("connection closed")
        out += chunk
    return out


def any_broker(api_key, version, body):
    """Asks the bootstrap brokers in turn (some may be dead) until one answers."""
    errors = []
    for host, port in BOOTSTRAP:
        try:
            return call(host, port, api_key, version, body)
        except OSError as e:
            errors.append("%s:%s %s" % (host, port, e))
    raise ConnectionError("no bootstrap broker answered: " + "; ".join(errors))


def uvarint(v):
    out = b""
    while v >= 0x80:
        out += bytes([(v & 0x7F) | 0x80])
        v >>= 7
    return out + bytes([v])


def compact_string(s):
    b = s.encode()
    return uvarint(len(b) + 1) + b


def read_uvarint(r):
    shift = value = 0
    while True:
        b = r.take(">B")
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value
        shift += 7


def read_compact_string(r):
    n = read_uvarint(r) - 1
    s = r.data[r.pos:r.pos + n].decode() if n >= 0 else None
    r.pos += max(n, 0)
    return s


def skip_tags(r):
    for _ in range(read_uvarint(r)):
        read_uvarint(r)
        r.pos += read_uvarint(r)


def ongoing_transactions():
    """ListTransactions v0 (flexible: request header v2) to every broker, StatesFilter Ongoing:
    [(node, transactional id)], each id listed by its coordinator. Brokers that do not answer
    (a dead one) are skipped."""
    out = []
    for node, (host, port) in brokers().items():
        body = uvarint(2) + compact_string("Ongoing") + uvarint(1) + b"\x00"
        frame = i16(66) + i16(0) + i32(1) + string("compat-kill-probe") + b"\x00" + body
        try:
            with socket.create_connection((host, int(port)), timeout=2.0) as s:
                s.sendall(i32(len(frame)) + frame)
                size = struct.unpack(">i", recv_exact(s, 4))[0]
                r = Reader(recv_exact(s, size)[4:])
        except OSError:
            continue
        skip_tags(r)  # response header v1
        r.i32()
        if r.i16() != 0:
            continue
        for _ in range(read_uvarint(r) - 1):
            read_compact_string(r)
        for _ in range(read_uvarint(r) - 1):
            txn_id = read_compact_string(r)
            r.take(">q")
            read_compact_string(r)
            skip_tags(r)
            out.append((node, txn_id))
    return out


def brokers():
    """{node: (host, port)} from Metadata v4 (no topics)."""
    r = any_broker(3, 4, i32(0) + b"\x00")
    r.i32()
    return {node: (host, port) for node, host, port, _rack in r.array(lambda: (r.i32(), r.string(), r.i32(), r.string()))}


def metadata():
    """Metadata v4 for every topic: {topic: {partition: leader}}."""
    r = any_broker(3, 4, i32(-1) + b"\x00")
    r.i32()  # throttle
    r.array(lambda: (r.i32(), r.string(), r.i32(), r.string()))  # brokers
    r.string()  # cluster id
    r.i32()  # controller
    topics = {}

    def partition():
        r.i16()
        index, leader = r.i32(), r.i32()
        r.array(r.i32)
        r.array(r.i32)
        return index, leader

    def topic():
        r.i16()
        name = r.string()
        r.i8()
        topics[name] = dict(r.array(partition))

    r.array(topic)
    return topics


def coordinator(txn_id):
    """FindCoordinator v1, key type 1 (transaction): the coordinator's node id, or None."""
    r = any_broker(10, 1, string(txn_id) + b"\x01")
    r.i32()
    error = r.i16()
    r.string()
    node = r.i32()
    return node if error == 0 else None


def target():
    """(node, key, what) for the running scenario, or raises."""
    txn_id = os.environ.get("COMPAT_KILL_TXN_ID", "")
    topic = os.environ.get("COMPAT_KILL_TOPIC", "")
    if txn_id:
        node = coordinator(txn_id)
        if node is None:
            raise LookupError("no transaction coordinator for %r" % txn_id)
        return node, "txn:" + txn_id, "transaction coordinator of %s (FindCoordinator)" % txn_id
    topics = metadata()
    if not topic:
        ongoing = sorted((("leader" not in t), t, n) for n, t in ongoing_transactions() if t.startswith(PREFIX))
        if ongoing:
            _, txn_id, node = ongoing[0]
            leaders = sorted((p, l) for t, parts in topics.items() if t.startswith(PREFIX) and
                             ("txn" in t and "leader" in t and "kill" in t) for p, l in parts.items())
            return node, "txn:" + txn_id, "transaction coordinator of %s, which lists it Ongoing (its topic's leaders: %s)" % (
                txn_id, ", ".join("partition %d node %d" % pl for pl in leaders) or "?")
        mine = sorted(t for t in topics if t.startswith(PREFIX))
        # Kafka Streams' streams_kill_leader names its input `<prefix>-streams-kill-leader-in`.
        plain = [t for t in mine if (t.endswith(("leader_kill", "leader-kill")) or t.endswith("-kill-leader-in"))
                 and "txn" not in t[len(PREFIX):]]
        if not plain:
            raise LookupError("no Ongoing transaction and no *leader_kill topic with prefix %r among %s" % (PREFIX, mine))
        topic = plain[-1]
    leader = topics.get(topic, {}).get(0, -1)
    if leader < 0:
        raise LookupError("no leader for %s partition 0" % topic)
    return leader, "topic:" + topic, "leader of %s partition 0" % topic


def main():
    if sys.argv[1:] == ["target"]:
        print(*target())
    elif len(sys.argv) == 3 and sys.argv[1] == "moved":
        old = int(sys.argv[2])
        node = target()[0]
        print(node)
        sys.exit(0 if node not in (old, -1) else 1)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    started = time.monotonic()
    try:
        main()
    except (LookupError, ConnectionError, OSError, struct.error) as e:
        print("kafka_probe: %s (%.2f s)" % (e, time.monotonic() - started), file=sys.stderr)
        sys.exit(1)
