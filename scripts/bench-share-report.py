#!/usr/bin/env python3
"""bench-share.sh's report: from WORK/SYSTEM.jsonl (ShareBench's event lines) and
WORK/SYSTEM.meta (key=value lines the script wrote) for onelog and kafka, writes the Markdown
side-by-side table of share-group throughput, acknowledgement latency, redeliveries and broker
CPU to OUT and prints it. A system that was not run shows "-".

Usage: bench-share-report.py WORK OUT KAFKA_VERSION KAFKA_FLUSH COMMAND
"""
import datetime
import json
import os
import sys

SYSTEMS = ("onelog", "kafka")


def load(work, system):
    events, meta = [], {}
    path = os.path.join(work, system + ".jsonl")
    if os.path.exists(path):
        events = [json.loads(line) for line in open(path) if line.strip()]
    path = os.path.join(work, system + ".meta")
    if os.path.exists(path):
        for line in open(path):
            key, _, value = line.rstrip("\n").partition("=")
            meta[key] = value
    return events, meta


def per_node(values, divisor, fmt):
    """The cell "a / b / c (sum)": each node's value, and their sum, divided by divisor."""
    cells = [fmt % (v / divisor) for v in values]
    return "%s (%s)" % (" / ".join(cells), fmt % (sum(values) / divisor))


def rows_of(run):
    """The table's rows of one run: (label, cell)."""
    records, mb = run["records"], run["records"] * run["record_bytes"] / 1e6
    cpu = run["broker_cpu_s"]
    return [
        ("records/s", "{:,.0f}".format(run["records_per_s"])),
        ("MB/s", "%.1f" % run["mb_per_s"]),
        ("ack latency p50 / p99 / max ms", "%.2f / %.2f / %.2f" % (
            run["commit_ms_p50"], run["commit_ms_p99"], run["commit_ms_max"])),
        ("commitSync calls (records per call)", "{:,} ({:.0f})".format(run["commits"], run["records_per_commit"])),
        ("redeliveries / failed acks", "%d / %d" % (run["redeliveries"], run["ack_failures"])),
        ("broker CPU s per 1,000 records, node 1 / 2 / 3 (sum)", per_node(cpu, records / 1000, "%.4f") if cpu else "-"),
        ("broker CPU s per MB, node 1 / 2 / 3 (sum)", per_node(cpu, mb, "%.4f") if cpu else "-"),
        ("client JVM CPU s per 1,000 records", "%.4f" % (run["client_cpu_s"] / (records / 1000))),
        ("seconds", "%.2f" % run["seconds"]),
    ]


def table(data, columns):
    runs = {}  # consumer count -> system -> run event
    for system in SYSTEMS:
        for e in data[system][0]:
            if e["event"] == "run":
                runs.setdefault(e["consumers"], {})[system] = e
    lines = ["| consumers | | %s |" % " | ".join(columns), "|---|---|" + "---|" * len(columns)]
    for n, by_system in runs.items():
        cells = {system: dict(rows_of(run)) for system, run in by_system.items()}
        for label, _ in rows_of(next(iter(by_system.values()))):
            lines.append("| %d | %s | %s |" % (n, label, " | ".join(cells.get(s, {}).get(label, "-") for s in SYSTEMS)))
    return lines


def notes(data, columns):
    out = []
    for system, column in zip(SYSTEMS, columns):
        events, meta = data[system]
        if not events:
            continue
        setup = next((e for e in events if e["event"] == "setup"), {})
        warm = next((e for e in events if e["event"] == "warmup"), None)
        text = "- **%s** (%s): share.version %s finalized; partition leaders (node ids, partition order) %s; " \
               "%s records produced in %.1f s" % (
                   column, meta.get("version", "?"), setup.get("share_version", "?"), setup.get("leaders", "?"),
                   "{:,}".format(setup.get("records", 0)), setup.get("produce_s", 0))
        if warm:
            text += "; warm-up %s records in %.1f s" % ("{:,}".format(warm["records"]), warm["seconds"])
        if "leader_before" in meta:
            text += "; Raft leader node %s (after the runs: %s)" % (meta["leader_before"], meta.get("leader_after", "?"))
        out.append(text + "; load average before / after %s / %s." % (meta.get("load_before", "?"),
                                                                       meta.get("load_after", "?")))
        for r in (e for e in events if e["event"] == "run"):
            out.append("  - %d consumer%s: assignment %s when the clock started (settled %.1f s after the first "
                       "poll); records per member %s; share coordinator node %s; broker CPU s %s; client CPU s %s; "
                       "offsets after: %s." % (
                           r["consumers"], "" if r["consumers"] == 1 else "s", r["assignment"], r["settle_s"],
                           r["per_member"], r.get("coordinator", "?"), r["broker_cpu_s"], r["client_cpu_s"],
                           r["offsets"]))
    return out


def group_configs(data, columns):
    """The groups' share.* configs as read back: those equal on every system run, then the others."""
    seen = {}
    for system, column in zip(SYSTEMS, columns):
        for e in data[system][0]:
            if e["event"] == "run":
                seen.setdefault(column, {}).update(e["group_configs"])
    if not seen:
        return []
    keys = sorted(set().union(*seen.values()))
    same = [k for k in keys if len({c.get(k) for c in seen.values()}) == 1]
    other = [k for k in keys if k not in same]
    text = "Group configs as read back (describeConfigs on each GROUP): %s." % ", ".join(
        "%s=%s" % (k, next(iter(seen.values()))[k]) for k in same)
    if other:
        text += " Not the same: %s." % "; ".join(
            "%s %s" % (k, " / ".join("%s %s" % (c, v.get(k, "(none)")) for c, v in seen.items())) for k in other)
    return [text]


def main():
    work, out_path, kafka_version, kafka_flush, command = sys.argv[1:6]
    data = {s: load(work, s) for s in SYSTEMS}
    kafka_version = data["kafka"][1].get("version", kafka_version).replace("Apache Kafka ", "")
    kafka_column = "Apache Kafka %s%s" % (kafka_version, "" if kafka_flush == "per-message" else " (default flush)")
    columns = ["onelog", kafka_column]
    first = next((e for s in SYSTEMS for e in data[s][0] if e["event"] == "setup"), None)
    if first is None:
        sys.exit("bench-share-report: no setup event in %s" % work)
    flush = ("an fsync per message, log.flush.interval.messages=1" if kafka_flush == "per-message"
             else "Kafka's default flush settings: durability from replication alone")
    text = [
        "# Share groups: throughput and acknowledgement latency",
        "",
        "Written by `%s` on %s UTC, %d cores: onelog (three nodes, scripts/cluster.sh) and the reference "
        "Kafka (three KRaft nodes, scripts/kafka-reference.sh, %s), one after the other, each fresh." % (
            command, datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"), os.cpu_count(), flush),
        "%s records of %d bytes on %d partitions (replication factor 3), produced first; then for each consumer "
        "count a fresh share group consumes every record exactly once: KafkaShareConsumer %s members as threads "
        "of one JVM, explicit acknowledgement (ACCEPT each record, commitSync after every poll). Throughput: from "
        "the settled group's first poll to the commitSync confirming the last record. Ack latency: each "
        "commitSync call, from the call to its results. Broker CPU: utime + stime from /proc over the same window." % (
            "{:,}".format(first["records"]), first["record_bytes"], first["partitions"], first["kafka_clients"]),
        "",
    ] + table(data, columns) + [""] + group_configs(data, columns) + [""] + notes(data, columns) + [
        "", "raw: %s" % work]
    with open(out_path, "w") as f:
        f.write("\n".join(text) + "\n")
    print("\n".join(text))


if __name__ == "__main__":
    main()
