#!/usr/bin/env python3
"""bench-profile.sh's summary of one profiled run, from the files it leaves in OUT:
wire.pcap (tcpdump), node-N.syscalls (perf script) or node-N.strace, node-N.fds and
node-N.threads, node-N.log, node-N.status-*.json (onelog's admin API), clock-offset,
run-start/run-end/idle-start, bench.json, meta.env (see scripts/bench-profile.sh).

Usage: bench-profile-analyze.py OUT
"""
import collections
import json
import os
import re
import statistics
import struct
import sys
import time

out = sys.argv[1]
meta = {}
for line in open(os.path.join(out, "meta.env")):
    if "=" in line:
        k, v = line.rstrip("\n").split("=", 1)
        meta[k] = v
system, bench = meta["system"], meta["bench"]
W, N = int(meta["warmup"]), int(meta["txes"])
ports = [int(p) for p in meta["ports"].split()]
raft_ports = [int(p) for p in meta["raft_ports"].split()]
node_of_port = {p: i + 1 for i, p in enumerate(ports)}
raft_node_of_port = {p: i + 1 for i, p in enumerate(raft_ports)}
onelog = system == "onelog"


def read_float(name):
    with open(os.path.join(out, name)) as f:
        return float(f.read().strip())


def merge_spans(spans):
    """Sorted (start, end) spans merged where they overlap: [[start, end], ...]."""
    merged = []
    for s, e in spans:
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return merged


run_start, run_end = read_float("run-start"), read_float("run-end")
idle_start = read_float("idle-start")
mono_offset = read_float("clock-offset")

API = {0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit", 9: "OffsetFetch",
       10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat", 13: "LeaveGroup", 14: "SyncGroup",
       15: "DescribeGroups", 16: "ListGroups", 18: "ApiVersions", 19: "CreateTopics", 20: "DeleteTopics",
       22: "InitProducerId", 23: "OffsetForLeaderEpoch", 24: "AddPartitionsToTxn", 25: "AddOffsetsToTxn",
       26: "EndTxn", 27: "WriteTxnMarkers", 28: "TxnOffsetCommit", 32: "DescribeConfigs",
       44: "IncrementalAlterConfigs", 52: "Vote", 53: "BeginQuorumEpoch", 54: "EndQuorumEpoch",
       55: "DescribeQuorum", 56: "AlterPartition", 57: "UpdateFeatures", 59: "FetchSnapshot",
       60: "DescribeCluster", 61: "DescribeProducers", 62: "BrokerRegistration", 63: "BrokerHeartbeat",
       65: "DescribeTransactions", 66: "ListTransactions", 67: "AllocateProducerIds",
       68: "ConsumerGroupHeartbeat", 71: "GetTelemetrySubscriptions", 72: "PushTelemetry",
       75: "DescribeTopicPartitions"}
ERR = {3: "UNKNOWN_TOPIC_OR_PARTITION", 6: "NOT_LEADER_OR_FOLLOWER", 7: "REQUEST_TIMED_OUT",
       14: "COORDINATOR_LOAD_IN_PROGRESS", 15: "COORDINATOR_NOT_AVAILABLE", 16: "NOT_COORDINATOR",
       19: "NOT_ENOUGH_REPLICAS", 20: "NOT_ENOUGH_REPLICAS_AFTER_APPEND", 45: "OUT_OF_ORDER_SEQUENCE_NUMBER",
       47: "INVALID_PRODUCER_EPOCH", 48: "INVALID_TXN_STATE", 51: "CONCURRENT_TRANSACTIONS",
       59: "UNKNOWN_PRODUCER_ID", 90: "PRODUCER_FENCED", 118: "TRANSACTION_ABORTABLE"}
RAFT_KIND = {1: "Hello", 2: "AppendEntries", 3: "Vote", 4: "InstallSnapshot", 5: "TimeoutNow"}


def norm(name):
    """A client id or thread name with its numbers replaced, to group like with like."""
    return re.sub(r"\d+", "N", name)


def ms(seconds):
    return seconds * 1000.0


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def mean(xs):
    return statistics.fmean(xs) if xs else float("nan")


# ---------------------------------------------------------------------------------------------
# The wire: every Kafka request/response pair (and onelog's Raft RPCs) from the pcap.


def packets(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24:
        return
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        endian = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        endian = ">"
    else:
        raise SystemExit("not a pcap file: " + path)
    nano = magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
    link = struct.unpack(endian + "I", data[20:24])[0]
    pos = 24
    while pos + 16 <= len(data):
        sec, frac, incl, _ = struct.unpack(endian + "IIII", data[pos:pos + 16])
        pos += 16
        pkt = data[pos:pos + incl]
        pos += incl
        if link == 1:  # Ethernet (Linux loopback)
            if pkt[12:14] != b"\x08\x00":
                continue
            ip = pkt[14:]
        elif link == 113:  # Linux cooked
            if pkt[14:16] != b"\x08\x00":
                continue
            ip = pkt[16:]
        elif link == 0:  # BSD loopback
            ip = pkt[4:]
        else:
            raise SystemExit(f"unsupported pcap link type {link}")
        if len(ip) < 20 or ip[9] != 6:
            continue
        ihl = (ip[0] & 15) * 4
        total = struct.unpack(">H", ip[2:4])[0]
        tcp = ip[ihl:total]
        sport, dport, seq = struct.unpack(">HHI", tcp[:8])
        doff = (tcp[12] >> 4) * 4
        yield sec + frac / (1e9 if nano else 1e6), sport, dport, seq, tcp[13], tcp[doff:]


class Stream:
    """One direction of one TCP connection, cut into frames (Kafka: i32 BE size; Raft: u32 LE
    size + CRC). A stream whose SYN was not captured, or with a hole, is dropped."""

    def __init__(self, raft):
        self.raft = raft
        self.next = None
        self.buf = bytearray()
        self.t0 = None
        self.ok = False

    def feed(self, t, seq, flags, payload, on_frame):
        if flags & 0x02:
            self.next, self.buf, self.ok = (seq + 1) & 0xFFFFFFFF, bytearray(), True
            return
        if not self.ok or not payload:
            return
        if seq != self.next:
            ahead = (seq - self.next) & 0xFFFFFFFF
            if ahead < 0x80000000:
                self.ok = False  # bytes missing from the capture
                return
            behind = (self.next - seq) & 0xFFFFFFFF
            if behind >= len(payload):
                return
            payload = payload[behind:]
        if not self.buf:
            self.t0 = t
        self.buf += payload
        self.next = (self.next + len(payload)) & 0xFFFFFFFF
        head = 8 if self.raft else 4
        while len(self.buf) >= head:
            size = int.from_bytes(self.buf[:4], "little" if self.raft else "big")
            if len(self.buf) < head + size:
                break
            on_frame(self.t0, t, bytes(self.buf[head:head + min(size, 600)]), size)
            del self.buf[:head + size]
            self.t0 = t


requests = []  # dicts: conn, node, kind, api, client, corr, t0 (request's first byte), t1 (response's last)
pending = {}
pcap = os.path.join(out, "wire.pcap")
have_wire = os.path.exists(pcap) and os.path.getsize(pcap) > 24
if have_wire:
    streams = {}
    for t, sport, dport, seq, flags, payload in packets(pcap):
        if dport in node_of_port or dport in raft_node_of_port:
            server, client_port, to_server = dport, sport, True
        elif sport in node_of_port or sport in raft_node_of_port:
            server, client_port, to_server = sport, dport, False
        else:
            continue
        raft = onelog and server in raft_node_of_port
        key = (client_port, server, to_server)
        st = streams.get(key)
        if st is None or flags & 0x02:
            st = streams[key] = Stream(raft)
        conn = (client_port, server)

        def on_frame(t0, t1, body, size, conn=conn, to_server=to_server, raft=raft, server=server):
            if raft:
                if len(body) < 9:
                    return
                kind, rid = body[0], int.from_bytes(body[1:9], "little")
                if to_server and kind != 0x80:
                    r = {"conn": conn, "node": raft_node_of_port[server], "kind": "raft",
                         "api": "Raft " + RAFT_KIND.get(kind, str(kind)), "client": "raft peer",
                         "t0": t0, "t1": None, "size": size}
                    pending[(conn, rid, "raft")] = r
                    requests.append(r)
                elif not to_server and kind == 0x80:
                    r = pending.pop((conn, rid, "raft"), None)
                    if r:
                        r["t1"] = t1
                return
            if to_server:
                if len(body) < 8:
                    return
                api, ver, corr = struct.unpack(">hhi", body[:8])
                client = ""
                if len(body) >= 10:
                    n = struct.unpack(">h", body[8:10])[0]
                    if n > 0:
                        client = body[10:10 + n].decode("utf-8", "replace")
                node = node_of_port.get(server) or raft_node_of_port.get(server)
                r = {"conn": conn, "node": node, "kind": "kafka", "api": API.get(api, f"api{api}"),
                     "ver": ver, "client": client, "t0": t0, "t1": None, "size": size}
                pending[(conn, corr)] = r
                requests.append(r)
            else:
                if len(body) >= 4:
                    corr = struct.unpack(">i", body[:4])[0]
                    r = pending.pop((conn, corr), None)
                    if r:
                        r["t1"] = t1

        st.feed(t, seq, flags, payload, on_frame)
    requests = [r for r in requests if r["t1"] is not None]
    requests.sort(key=lambda r: r["t0"])

in_run = [r for r in requests if run_start <= r["t0"] <= run_end]
producer_ids = sorted({r["client"] for r in in_run if r["client"].startswith("producer-")})
consumer_ids = sorted({r["client"] for r in in_run if r["client"].startswith("consumer-")})
bench_clients = set(producer_ids) | set(consumer_ids)


def is_producer(r):
    return r["client"] in producer_ids


# ---------------------------------------------------------------------------------------------
# Transactions: the last TXES EndTxn round trips of the measured run's producer. Transaction i
# runs from the end of EndTxn i-1 to the end of EndTxn i.

end_txns = [r for r in in_run if is_producer(r) and r["api"] == "EndTxn"]
txns = []
if len(end_txns) >= N + 1:
    for i in range(len(end_txns) - N, len(end_txns)):
        txns.append((end_txns[i - 1]["t1"], end_txns[i]["t1"]))
window = (txns[0][0], txns[-1][1]) if txns else (run_start, run_end)

# ---------------------------------------------------------------------------------------------
# fsync-family system calls per node.


def load_pairs(node, suffix):
    """node-N.<suffix>: one "key value" pair a line (fd -> file, tid -> thread name)."""
    pairs = {}
    path = os.path.join(out, f"node-{node}.{suffix}")
    if os.path.exists(path):
        for line in open(path):
            parts = line.rstrip("\n").split(" ", 1)
            if len(parts) == 2:
                pairs[parts[0]] = parts[1]
    return pairs


def load_fds(node):
    return load_pairs(node, "fds")


def load_threads(node):
    return load_pairs(node, "threads")


def file_class(path):
    if not path:
        return "(file closed before the run ended)"
    m = re.search(r"/data/([^/]+)/([^/]+)$", path)  # Kafka log.dirs: <topic>-<partition>/<segment>
    if m and not onelog:
        ext = m.group(2).rsplit(".", 1)[-1] if "." in m.group(2) else m.group(2)
        return f"{m.group(1)} .{ext}"
    if "raft-log" in path:
        return "raft-log segment"
    if "/partitions/" in path:
        return "partition segment"
    if "checkpoint" in path:
        return "checkpoint"
    return re.sub(r"\d{6,}", "*", path.split("/")[-2] + "/" + path.split("/")[-1]) if "/" in path else path


SYSCALL_RE = re.compile(r"^\s*(.*?)\s+(\d+)\s+\[\d+\]\s+(\d+\.\d+):\s+syscalls:sys_(enter|exit)_(\w+):\s*(.*)$")
STRACE_RE = re.compile(r"^(\d+)\s+(\d+\.\d+)\s+(?:<\.\.\.\s+)?(\w+)(?:\((\d+))?")


def load_syncs(node):
    """[(t, thread, call, file, seconds or None)]"""
    fds, threads, events = load_fds(node), load_threads(node), []
    perf = os.path.join(out, f"node-{node}.syscalls")
    strace = os.path.join(out, f"node-{node}.strace")
    if os.path.exists(perf):
        open_calls = {}
        for line in open(perf):
            m = SYSCALL_RE.match(line)
            if not m:
                continue
            comm, tid, ts, what, call, rest = m.groups()
            t = float(ts) + mono_offset
            if what == "enter":
                fd = re.search(r"fd: (0x[0-9a-f]+)", rest)
                path = fds.get(str(int(fd.group(1), 16))) if fd else None
                ev = [t, comm, call, file_class(path) if fd else "mapped file (an index)", None]
                events.append(ev)
                open_calls[tid] = ev
            else:
                ev = open_calls.pop(tid, None)
                if ev:
                    ev[4] = t - ev[0]
    elif os.path.exists(strace):
        for line in open(strace):
            if "resumed>" in line:
                continue
            m = STRACE_RE.match(line)
            if not m:
                continue
            tid, ts, call, fd = m.groups()
            dur = re.search(r"<(\d+\.\d+)>\s*$", line)
            events.append([float(ts), threads.get(tid, tid), call,
                           file_class(fds.get(fd)) if fd else "mapped file (an index)",
                           float(dur.group(1)) if dur else None])
    return events


syncs = {node: load_syncs(node) for node in (1, 2, 3)}
have_syncs = any(os.path.exists(os.path.join(out, f"node-{n}.{ext}")) for n in (1, 2, 3)
                 for ext in ("syscalls", "strace"))


def in_window(t, w):
    return w[0] < t <= w[1]


# ---------------------------------------------------------------------------------------------
# Kafka's request log (kafka.request.logger at DEBUG): one JSON line per completed request.


def errors_in(obj, found):
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k.endswith("rrorCode") and isinstance(v, int) and v != 0:
                found.append(v)
            else:
                errors_in(v, found)
    elif isinstance(obj, list):
        for v in obj:
            errors_in(v, found)


reqlog = []
for node in (1, 2, 3):
    path = os.path.join(out, f"node-{node}.log")
    if onelog or not os.path.exists(path):
        continue
    for line in open(path, errors="replace"):
        if "Completed request:" not in line:
            continue
        m = re.match(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\]", line)
        if not m:
            continue
        t = time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")) + int(m.group(2)) / 1000.0
        body = line.split("Completed request:", 1)[1].rsplit(" (kafka.request.logger)", 1)[0]
        try:
            j = json.loads(body)
        except ValueError:
            continue
        h = j.get("requestHeader", {})
        errs = []
        errors_in(j.get("response"), errs)
        reqlog.append({"t": t, "node": node, "api": API.get(h.get("requestApiKey"), h.get("requestApiKeyName")),
                       "client": h.get("clientId", ""), "total": j.get("totalTimeMs", 0.0),
                       "queue": j.get("requestQueueTimeMs", 0.0), "local": j.get("localTimeMs", 0.0),
                       "remote": j.get("remoteTimeMs", 0.0), "respq": j.get("responseQueueTimeMs", 0.0),
                       "send": j.get("sendTimeMs", 0.0), "errors": errs})

# ---------------------------------------------------------------------------------------------
# The summary.

print(f"== {system} / {bench} / kafka-clients {meta['client']} / WARMUP={W} TXES={N}"
      + (f" / CLIENT_CONFIG={meta['client_config']}" if meta.get("client_config") else "")
      + (f" / broker extra: {meta['extra_broker_config']}" if meta.get("extra_broker_config") else "")
      + (f" / ApiVersions ping every {meta['ping_interval_ms']} ms" if meta.get("ping_interval_ms") else "")
      + (" / request log off" if meta.get("request_log") == "0" and not onelog else ""))
try:
    b = json.load(open(os.path.join(out, "bench.json")))
    print(f"bench: p50 {b['p50_ms']:.2f} ms, p95 {b['p95_ms']:.2f}, p99 {b['p99_ms']:.2f}, "
          f"max {b['max_ms']:.2f}, {b['tps']:.1f} per second ({b['count']} recorded)")
except (OSError, ValueError, KeyError):
    print("bench: no summary")
try:
    loads = [open(os.path.join(out, f)).read().split()[0] for f in ("loadavg-start", "loadavg-end")]
    print(f"load average (1 min) at the run's start {loads[0]}, end {loads[1]} (2 cores: other work shares them)")
except (OSError, IndexError):
    pass
print(f"measured run {run_end - run_start:.1f} s; fsync tracer {meta['tracer']}; "
      f"wire capture {'yes' if have_wire else 'no'}; Kafka request log "
      f"{'yes' if reqlog else 'no'}")

if txns:
    unit, count = "transaction", len(txns)
    durations = [ms(b - a) for a, b in txns]
    print(f"\nper transaction: the last {count} transactions on the wire (from the end of one EndTxn to "
          f"the end of the next): median {med(durations):.2f} ms, mean {mean(durations):.2f} ms")
else:
    unit, count = "iteration", W + N
    if have_wire and any(is_producer(r) for r in in_run):
        print(f"\nper iteration: no EndTxn; figures are the whole measured run (JVM start-up included) / {count}")
    else:
        print(f"\nper iteration: whole measured run / {count}")
    window = (run_start, run_end)

per_txn = []  # per transaction: counts by API, rounds, busy/idle
if txns and have_wire:
    prod = [r for r in in_run if is_producer(r)]
    j = 0
    for a, b in txns:
        mine = [r for r in prod if a < r["t0"] <= b]
        apis = collections.Counter(r["api"] for r in mine)
        spans = sorted((r["t0"], r["t1"]) for r in mine)
        merged = merge_spans(spans)
        busy = sum(min(e, b) - s for s, e in merged)
        # The transaction as alternating gaps (the client waits for nothing) and busy spans
        # (at least one request outstanding), each span named by its requests.
        shape, prev = [], a
        for s, e in merged:
            names = "+".join(sorted({r["api"] for r in mine if s <= r["t0"] <= e}))
            shape += [ms(s - prev), (names, ms(min(e, b) - s))]
            prev = min(e, b)
        shape.append(ms(b - prev))
        per_txn.append({"apis": apis, "rounds": len(merged), "busy": ms(busy), "idle": ms(b - a - busy),
                        "dur": ms(b - a), "window": (a, b), "shape": shape})

if have_wire:
    print(f"\nclient requests per {unit} (producer {', '.join(producer_ids) or '-'}"
          + (f"; consumer {', '.join(consumer_ids)}" if consumer_ids else "") + "):")
    print(f"  {'client':<10} {'API':<20} {'per ' + unit:>16} {'wire ms median':>15} {'mean':>8}")
    sel = [r for r in in_run if r["client"] in bench_clients and in_window(r["t0"], window)]
    by = collections.defaultdict(list)
    for r in sel:
        by[("producer" if is_producer(r) else "consumer", r["api"])].append(ms(r["t1"] - r["t0"]))
    for (who, api), xs in sorted(by.items(), key=lambda kv: (kv[0][0] != "producer", -len(kv[1]))):
        print(f"  {who:<10} {api:<20} {len(xs) / count:>16.2f} {med(xs):>15.2f} {mean(xs):>8.2f}")
    if not per_txn:
        # No transactions to cut at: the producer's busy and idle time over the whole run.
        prod = sorted((r["t0"], r["t1"]) for r in in_run if is_producer(r))
        merged = merge_spans(prod)
        if merged:
            spans = [ms(e0 - s0) for s0, e0 in merged]
            gaps = [ms(merged[i + 1][0] - merged[i][1]) for i in range(len(merged) - 1)]
            print(f"  producer round trips waited for: {len(merged) / count:.2f} per {unit}; each round trip "
                  f"median {med(spans[-N:]):.2f} ms, gap between round trips median {med(gaps[-N:]):.2f} ms "
                  f"(the last {N} of each)")
    if per_txn:
        rounds = [p["rounds"] for p in per_txn]
        print(f"  producer round trips waited for (disjoint spans with a request outstanding): median "
              f"{med(rounds):g}, mean {mean(rounds):.2f}; time with a request outstanding median "
              f"{med([p['busy'] for p in per_txn]):.2f} ms, with none (client work, backoff) median "
              f"{med([p['idle'] for p in per_txn]):.2f} ms, mean {mean([p['idle'] for p in per_txn]):.2f} ms")
        names = collections.Counter(tuple(x[0] for x in p["shape"][1::2]) for p in per_txn)
        common, n_common = names.most_common(1)[0]
        same = [p["shape"] for p in per_txn if tuple(x[0] for x in p["shape"][1::2]) == common]
        parts = []
        for i in range(len(same[0])):
            if i % 2 == 0:
                parts.append(f"gap {med([sh[i] for sh in same]):.2f}")
            else:
                parts.append(f"[{same[0][i][0]} {med([sh[i][1] for sh in same]):.2f}]")
        print(f"  the commonest sequence ({n_common} of {len(per_txn)} transactions), median ms of each gap "
              f"(no request outstanding) and [round trip]: " + " ".join(parts))
        seqs = collections.Counter(" ".join(f"{api}x{n}" for api, n in sorted(p["apis"].items())) for p in per_txn)
        print("  request mix per transaction (how many transactions had it):")
        for mix, n in seqs.most_common(6):
            print(f"    {n:>4}  {mix}")

    where = collections.defaultdict(collections.Counter)
    for r in in_run:
        if is_producer(r) and r["api"] in ("Produce", "EndTxn", "TxnOffsetCommit", "AddOffsetsToTxn"):
            where[r["api"]][r["node"]] += 1
    print("  sent to: " + "; ".join(f"{api} -> node {', '.join(str(n) for n in sorted(c))}"
                                   for api, c in sorted(where.items()))
          + ("" if onelog else " (Kafka places partition leaders and coordinators anew in every fresh cluster)"))

    print(f"\nbroker-to-broker requests per {unit} (wire, by sender's client id):")
    other = [r for r in requests if r["client"] not in bench_clients and in_window(r["t0"], window)]
    by = collections.defaultdict(list)
    for r in other:
        who = f"raft peer -> node {r['node']}" if r["kind"] == "raft" else norm(r["client"])
        by[(who, r["api"])].append(ms(r["t1"] - r["t0"]))
    if not by:
        print("  none")
    for (client, api), xs in sorted(by.items(), key=lambda kv: -len(kv[1])):
        print(f"  {client:<36} {api:<22} {len(xs) / count:>8.2f}   wire ms median {med(xs):7.2f} mean {mean(xs):7.2f}")

if per_txn and have_wire and not onelog:
    # The Produce the transaction waited for longest: how much of it was the broker's
    # AddPartitionsToTxn to the coordinator (transactions v2 verification: the partition leader
    # adds the partition, retrying CONCURRENT_TRANSACTIONS) and how much the append after it.
    verif_ms, after_ms, attempts, endtxn_ms = [], [], [], []
    for p in per_txn:
        a, b = p["window"]
        prods = [r for r in in_run if is_producer(r) and r["api"] == "Produce" and a < r["t0"] <= b]
        ends = [r for r in in_run if is_producer(r) and r["api"] == "EndTxn" and a < r["t0"] <= b]
        endtxn_ms += [ms(r["t1"] - r["t0"]) for r in ends]
        if not prods:
            continue
        crit = max(prods, key=lambda r: r["t1"])
        adds = [r for r in requests if r["api"] == "AddPartitionsToTxn" and r["client"].startswith("AddPartitionsManager")
                and r["client"].rsplit("-", 1)[-1] == str(crit["node"]) and crit["t0"] <= r["t0"] <= crit["t1"]]
        if adds:
            done = max(r["t1"] for r in adds)
            verif_ms.append(ms(done - crit["t0"]))
            after_ms.append(ms(crit["t1"] - done))
            attempts.append(len(adds))
    if verif_ms:
        print(f"\nthe Produce each transaction waited for longest, split at its leader's last AddPartitionsToTxn "
              f"to the coordinator (median over {len(verif_ms)}): {med(verif_ms):.2f} ms verifying "
              f"({med(attempts):g} AddPartitionsToTxn attempts, mean {mean(attempts):.2f}), then "
              f"{med(after_ms):.2f} ms append and replication; EndTxn median {med(endtxn_ms):.2f} ms")

if reqlog:
    print(f"\nKafka request log (broker side, ms; per {unit}; errors are response error codes):")
    print(f"  {'API':<20} {'client':<32} {'per ' + unit:>9} {'total':>7} {'queue':>6} {'local':>6} "
          f"{'remote':>7} {'respQ':>6}  errors")
    by = collections.defaultdict(list)
    for r in reqlog:
        if in_window(r["t"], window):
            by[(r["api"], norm(r["client"]))].append(r)
    for (api, client), rs in sorted(by.items(), key=lambda kv: -len(kv[1])):
        errs = collections.Counter(e for r in rs for e in r["errors"])
        es = ", ".join(f"{ERR.get(e, e)} x{n / count:.2f}" for e, n in errs.most_common())
        print(f"  {api:<20} {client[:32]:<32} {len(rs) / count:>9.2f} {mean([r['total'] for r in rs]):>7.2f} "
              f"{mean([r['queue'] for r in rs]):>6.2f} {mean([r['local'] for r in rs]):>6.2f} "
              f"{mean([r['remote'] for r in rs]):>7.2f} {mean([r['respq'] for r in rs]):>6.2f}  {es}")

if have_syncs:
    print(f"\nfsync-family calls per {unit}, per node (idle rate before the run in brackets):")
    idle = (idle_start, run_start)
    for node in (1, 2, 3):
        ev = [e for e in syncs[node] if in_window(e[0], window)]
        n_idle = len([e for e in syncs[node] if in_window(e[0], idle)])
        durs = [e[4] for e in ev if e[4] is not None]
        data_syncs = [e for e in ev if e[2] != "msync"]
        msyncs = len(ev) - len(data_syncs)
        durs = [e[4] for e in data_syncs if e[4] is not None]
        print(f"  node {node}: {len(data_syncs) / count:.2f} fsync/fdatasync per {unit}"
              + (f" (each {ms(med(durs)):.3f} ms median, {ms(mean(durs)):.3f} mean)" if durs else "")
              + (f", {msyncs / count:.2f} msync" if msyncs else "")
              + f" [idle before the run: {n_idle / (idle[1] - idle[0]):.1f} calls/s]")
        by = collections.Counter((norm(e[1]), e[2], e[3]) for e in ev)
        for (thread, call, f), n in by.most_common(8):
            print(f"      {n / count:6.2f}  {call:<10} {thread:<18} {f}")
        if per_txn:
            counts = [len([e for e in syncs[node] if e[2] != "msync" and in_window(e[0], p["window"])])
                      for p in per_txn]
            print(f"      fsync/fdatasync per transaction: median {med(counts):g}, min {min(counts)}, max {max(counts)}")

if onelog:
    def status(name):
        try:
            return json.load(open(os.path.join(out, name)))
        except (OSError, ValueError):
            return {}
    before = {n: status(f"node-{n}.status-before.json") for n in (1, 2, 3)}
    after = {n: status(f"node-{n}.status-after.json") for n in (1, 2, 3)}
    leader = next((n for n in (1, 2, 3) if after[n].get("role") == "leader"), None)
    if leader and before[leader].get("last_log_index") is not None:
        d = after[leader]["last_log_index"] - before[leader]["last_log_index"]
        print(f"\nRaft log: leader node {leader}; {d} entries appended during the measured run "
              f"({W + N} iterations, plus the JVM's InitProducerId and any broker duties): "
              f"{d / (W + N):.2f} per iteration")

if per_txn and have_wire:
    order = sorted(range(len(per_txn)), key=lambda i: per_txn[i]["dur"])
    p = per_txn[order[len(order) // 2]]
    a, b = p["window"]
    print(f"\none transaction of median length ({p['dur']:.2f} ms), as seen on the wire and by the tracer "
          f"(ms from its start to the request's first byte, then the request's round trip; Fetches and "
          f"msyncs left out):")
    rows = []
    for r in requests:
        if a < r["t0"] <= b and r["api"] not in ("Fetch", "BrokerHeartbeat", "ApiVersions"):
            who = "client" if is_producer(r) else r["client"]
            rows.append((ms(r["t0"] - a), f"{who:<30} -> node {r['node']} {r['api']:<22} "
                         f"{ms(r['t1'] - r['t0']):7.2f} ms"))
    for node in (1, 2, 3):
        for e in syncs[node]:
            if in_window(e[0], (a, b)) and e[2] != "msync":
                rows.append((ms(e[0] - a), f"{'node ' + str(node) + ' ' + e[2]:<30}    {norm(e[1]):<16} {e[3]}"
                             + (f" {ms(e[4]):.2f} ms" if e[4] is not None else "")))
    for t, text in sorted(rows)[:80]:
        print(f"  {t:8.2f}  {text}")
