#!/usr/bin/env python3
"""The parts of scripts/bench-compare.sh that read and write its results: one subcommand per
step, each taking its inputs as arguments (or, for `meta`, from the environment).

Usage: bench-compare-results.py SUBCOMMAND ARG...
  cpu PATH SECONDS CPU_BEFORE CPU_AFTER CLK_TCK
  producers DIR NAME SYSTEM N RECORDS SECONDS IO0 IO1 WCHAR0 WCHAR1 CPU0 CPU1 STORED0 STORED1
            CLK_TCK LIMIT
  consumer DIR SYSTEM MESSAGES RC SECONDS
  catchup DIR COLD PARTITIONS READ0 READ1 CPU0 CPU1 CLK_TCK SECONDS
  meta META_JSON FAILURES_TXT
"""
import json
import os
import platform
import re
import sys
import time


def cpu_per_tx(argv):
    """cpu PATH SECONDS CPU_BEFORE CPU_AFTER CLK_TCK: adds cpu_us_per_tx_per_node to a bench's summary
    (the nodes' CPU ticks over the whole run over every transaction it made: an upper bound) and
    prints the bench's one-line result."""
    path, seconds, before, after, hz = argv[1], int(argv[2]), argv[3], argv[4], int(argv[5])
    d = json.load(open(path))
    cpu = ""
    b, a = [int(x) for x in before.split()], [int(x) for x in after.split()]
    # count is every producer's recorded iterations; warmup is per producer.
    txs = d.get("count", 0) + d.get("warmup", 0) * max(1, d.get("producers", 1))
    if len(a) == len(b) == 3 and txs > 0:
        per_node = [(y - x) / hz * 1e6 / txs for x, y in zip(b, a)]
        d["cpu_us_per_tx_per_node"] = [round(v) for v in per_node]
        json.dump(d, open(path, "w"))
        cpu = "  cpu %.0f us/tx/node" % (sum(per_node) / 3)
    print("p50 %.2f ms  p99 %.2f ms  %.0f tps%s  (%ds)" % (d["p50_ms"], d["p99_ms"], d["tps"], cpu, seconds))


def raw_producers(argv):
    """producers DIR NAME SYSTEM N RECORDS SECONDS IO0 IO1 WCHAR0 WCHAR1 CPU0 CPU1 STORED0 STORED1 CLK_TCK
    LIMIT: reads the N ProducerPerformance runs DIR/NAME-I.txt and .exit, writes DIR/NAME.json
    (throughput, worst latencies over producers, disk and CPU per byte) and prints one line, or
    "FAILED ..." and exits 1."""
    (dirname, name, system, n, records, seconds, io0, io1, wc0, wc1, cpu0, cpu1, st0, st1, hz, limit) = argv[1:]
    n, records, seconds, hz = int(n), int(records), int(seconds), int(hz)
    ints = lambda v: [int(x) for x in v.split()]
    final = re.compile(r"(\d+) records sent, ([0-9.]+) records/sec \(([0-9.]+) MB/sec\), ([0-9.]+) ms avg latency, "
                       r"([0-9.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th")
    runs, errors = [], []
    for i in range(1, n + 1):
        base = os.path.join(dirname, f"{name}-{i}")
        rc, want, end = open(base + ".exit").read().split()
        text = open(base + ".txt", errors="replace").read()
        m = final.findall(text)
        if rc != "0" or not m or int(m[-1][0]) != int(want):
            first = next((l for l in text.splitlines() if re.search(r"Exception|Error|ERROR", l)), "")
            got = f"{m[-1][0]} of {want} records" if m else "no final line"
            errors.append(f"producer {i}: exit {rc}" + (" (timed out after %ss)" % limit if rc == "124" else "")
                          + f", {got}" + (f": {first[:200]}" if first else ""))
            continue
        v = m[-1]
        runs.append({"producer": i, "records": int(v[0]), "records_per_s": float(v[1]), "tool_mib_per_s": float(v[2]),
                     "avg_ms": float(v[3]), "max_ms": float(v[4]), "p50_ms": int(v[5]), "p95_ms": int(v[6]),
                     "p99_ms": int(v[7]), "p999_ms": int(v[8]), "end_unix_s": float(end)})
    if errors:
        print("FAILED (%ds): %s" % (seconds, "; ".join(errors)))
        sys.exit(1)
    produced = records * 1024
    io = [b - a for a, b in zip(ints(io0), ints(io1))]
    wchar = [b - a for a, b in zip(ints(wc0), ints(wc1))]
    cpu = [(b - a) / hz for a, b in zip(ints(cpu0), ints(cpu1))]
    stored = [b - a for a, b in zip(ints(st0), ints(st1))]
    # Each producer's own rate over its own sending time, summed; and the group's: all bytes over
    # the span from the first producer's start (its end less its own elapsed time) to the last end.
    start = min(r["end_unix_s"] - r["records"] / r["records_per_s"] for r in runs)
    span = max(r["end_unix_s"] for r in runs) - start
    d = {
        "system": system, "producers": n, "records": records, "record_bytes": 1024,
        "mb_per_s": round(sum(r["records_per_s"] for r in runs) * 1024 / 1e6, 2),
        "mb_per_s_span": round(produced / span / 1e6, 2),
        # ProducerPerformance prints whole-ms percentiles of its own records; over several
        # producers the worst of each is taken (they cannot be merged from the printed figures).
        "latency_over_producers": "max" if n > 1 else "single",
        **{k: max(r[k] for r in runs) for k in ("p50_ms", "p95_ms", "p99_ms", "p999_ms", "max_ms")},
        "disk_write_bytes_per_node": io,
        "disk_bytes_per_byte": round(sum(io) / produced, 3),
        "write_call_bytes_per_node": wchar,
        "stored_bytes_delta_per_node": stored,
        "stored_bytes_per_byte": round(sum(stored) / produced, 3),
        "cpu_s_per_node": [round(c, 2) for c in cpu],
        "cpu_s_per_mb": round(sum(cpu) / (produced / 1e6), 4),
        "seconds": seconds,
        "runs": runs,
    }
    json.dump(d, open(os.path.join(dirname, name + ".json"), "w"))
    print("%.1f MB/s  p50 %d  p99 %d  p99.9 %d ms%s  disk %.2f B/B  cpu %.3f s/MB  (%ds)" % (
        d["mb_per_s"], d["p50_ms"], d["p99_ms"], d["p999_ms"], " (max over producers)" if n > 1 else "",
        d["disk_bytes_per_byte"], d["cpu_s_per_mb"], seconds))


def raw_consumer(argv):
    """consumer DIR SYSTEM MESSAGES RC SECONDS: reads ConsumerPerformance's DIR/consumer.txt, writes
    DIR/consumer.json and prints one line, or "FAILED ..." and exits 1."""
    dirname, system, messages, rc, seconds = argv[1], argv[2], int(argv[3]), argv[4], int(argv[5])
    text = open(os.path.join(dirname, "consumer.txt"), errors="replace").read()
    lines = text.splitlines()
    head = next((i for i, l in enumerate(lines) if l.startswith("start.time")), None)
    cols = lines[head + 1].split(", ") if head is not None and head + 1 < len(lines) else []
    short = "Exiting before consuming the expected number" in text
    if rc != "0" or len(cols) < 10 or int(cols[4]) != messages or short:
        why = "timed out" if rc == "124" else ("consumed %s of %d" % (cols[4], messages) if len(cols) >= 10 else "no result line")
        print("FAILED (exit %s, %ds): %s%s" % (rc, seconds, why, "; the tool gave up before the expected count" if short else ""))
        sys.exit(1)
    # The tools' "MB" is MiB; reported here in MB (10^6 bytes) like the producer figures.
    mib = 1048576 / 1e6
    d = {"system": system, "messages": messages, "record_bytes": 1024,
         "mb_per_s": round(float(cols[3]) * mib, 2), "fetch_mb_per_s": round(float(cols[8]) * mib, 2),
         "rebalance_ms": int(cols[6]), "fetch_ms": int(cols[7]), "seconds": seconds, "tool_line": lines[head + 1]}
    json.dump(d, open(os.path.join(dirname, "consumer.json"), "w"))
    print("%.1f MB/s (%.1f MB/s fetching, %d ms joining the group)  (%ds)" % (d["mb_per_s"], d["fetch_mb_per_s"],
                                                                           d["rebalance_ms"], seconds))


def catchup(argv):
    """catchup DIR COLD PARTITIONS READ0 READ1 CPU0 CPU1 CLK_TCK SECONDS: adds to DIR/consumer.json what
    the consumer's catch-up read cost the brokers (bytes read from the device, read_bytes of
    /proc/PID/io, and CPU, per node and per MB consumed) and whether the page cache was cold."""
    dirname, cold, partitions, r0, r1, c0, c1, hz, seconds = argv[1:]
    ints = lambda v: [int(x) for x in v.split()]
    path = os.path.join(dirname, "consumer.json")
    d = json.load(open(path))
    consumed_mb = d["messages"] * d["record_bytes"] / 1e6
    read = [b - a for a, b in zip(ints(r0), ints(r1))]
    cpu = [(b - a) / int(hz) for a, b in zip(ints(c0), ints(c1))]
    d.update({"cold_page_cache": cold == "true", "partitions": int(partitions),
              "device_read_bytes_per_node": read, "device_read_mb": round(sum(read) / 1e6, 1),
              "cpu_s_per_node": [round(c, 2) for c in cpu], "cpu_s_per_mb": round(sum(cpu) / consumed_mb, 4),
              "catchup_seconds": int(seconds)})
    json.dump(d, open(path, "w"))
    print("    catch-up: %s cache, %.0f MB read from the device, broker cpu %.4f s/MB" % (
        "cold" if d["cold_page_cache"] else "WARM", d["device_read_mb"], d["cpu_s_per_mb"]))


def meta(argv):
    """meta META_JSON FAILURES_TXT: writes the run's meta.json (machine, settings, timings, failures)
    from the META_* and settings variables bench-compare.sh sets in the environment."""
    e = os.environ
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    mem_kib = next(int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemTotal"))
    keys = ["WARMUP", "TXES", "SWEEP_TXES", "SWEEP_WARMUP", "SWEEP_MIN_TXES", "SWEEP_PRODUCERS", "PAYLOADS",
            "PAYLOAD_TXES", "PAYLOAD_WARMUP", "PAYLOAD_MIB_TXES", "PAYLOAD_MIB_WARMUP", "SYSTEM_WARMUP",
            "RAW_RECORDS", "RAW_PRODUCERS", "RAW_WARMUP_RECORDS", "RAW_PARTITIONS", "RAW_JVM_OPTS",
            "CATCHUP_RECORDS", "CATCHUP_PARTITIONS", "CATCHUP_PRODUCERS", "CATCHUP_PRODUCER_PROPS"]
    json.dump({
        "mode": e["META_MODE"],
        "command": e["META_COMMAND"],
        "date_utc": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "memory_gib": round(mem_kib / 2**20, 1),
        "kernel": " ".join(platform.uname()[i] for i in (0, 2, 4)),
        "load_avg_at_end": [round(x, 2) for x in os.getloadavg()],
        "java": e["META_JAVA"],
        "onelog_commit": e["META_COMMIT"],
        "onelog_bin": e["META_BIN"],
        "kafka_version": e.get("META_KAFKA", "?"),
        "settings": {k: e[k] for k in keys},
        "systems": e["META_SYSTEMS"].split(","),
        "sections": e["BENCH_SECTIONS"].split(","),
        "seconds": {"build": int(e["META_BUILD"]), "runs": int(e["META_RUNS"]),
                    "per_system": {k: int(v) for k, v in (kv.split("=", 1) for kv in e["META_SECONDS"].split())}},
        "failures": [l for l in open(argv[2]).read().splitlines() if l],
    }, open(argv[1], "w"), indent=2)


SUBCOMMANDS = {"cpu": cpu_per_tx, "producers": raw_producers, "consumer": raw_consumer, "catchup": catchup,
               "meta": meta}


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in SUBCOMMANDS:
        sys.exit(__doc__)
    # Each step reads its arguments as argv[1:], as it did inline in bench-compare.sh.
    SUBCOMMANDS[sys.argv[1]](sys.argv[1:])
