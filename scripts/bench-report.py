#!/usr/bin/env python3
"""Writes DIR/report.md and DIR/*.png from the results of scripts/bench-compare.sh.

    scripts/bench-report.py DIR

Reads DIR/meta.json and DIR/raw/<system>/...: <client>/<bench>.json and .txt (the main
benches: JSON summary and sorted latencies in ns), sweep/<bench>-p<N>.json (concurrency) and
payload/<bench>-b<bytes>.json, raw-throughput/producer-p<N>.json and consumer.json (Kafka's
ProducerPerformance and ConsumerPerformance), and catchup/ (the consumer catch-up,
bench_catchup_report.py). Sections not run (meta.json's "sections", from
BENCH_SECTIONS) are left out. The plots need matplotlib (bench-compare.sh installs it into
.venv-bench); without it the report is written without them.
"""
import json
import os
import sys

from bench_catchup_report import catchup_table

SYSTEMS = {
    "onelog": "onelog (3 nodes)",
    "kafka-flush1": "Kafka {kafka}, fsync per message",
    "kafka-default": "Kafka {kafka}, default flush",
}
# The reference Kafka's version: meta.json's kafka_version; runs from before that field were all
# against 4.1.1, kafka-reference.sh's default then.
KAFKA = "4.1.1"
SHORT = {"onelog": "onelog", "kafka-flush1": "Kafka fsync/msg", "kafka-default": "Kafka default flush"}
KAFKAS = ["kafka-flush1", "kafka-default"]
CLIENTS = {"4.x": "4.1.1 (tx v2)", "2.x": "2.8.2 (tx v1)", "rust": "librdkafka 2.12.1 (Rust port)"}
CLIENT_STYLES = {"4.x": "-", "2.x": "--", "rust": ":"}
BENCHES = ["BaseWritesBench", "TxWritesBench", "BaseStreamingBench", "TxStreamingBench"]
COLORS = {"onelog": "tab:blue", "kafka-flush1": "tab:red", "kafka-default": "tab:orange"}


def load_json(path):
    try:
        with open(path) as f:
            return json.loads(f.read().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        return None


def fmt_ms(v):
    return "–" if v is None else (f"{v:.2f}" if v < 100 else f"{v:.0f}")


def fmt_tps(v):
    return "–" if v is None else (f"{v:,.0f}" if v >= 10 else f"{v:.1f}")


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def fmt_ratio(r):
    return "–" if r is None else f"{r:.2f}×"


def field(d, k):
    return None if d is None else d.get(k)


def table(header, rows, align=None):
    align = align or ["---"] + ["---:"] * (len(header) - 1)
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "."
    raw = os.path.join(d, "raw")
    try:
        with open(os.path.join(d, "meta.json")) as f:
            meta = json.load(f)
    except (OSError, ValueError):
        meta = {}
    global KAFKA
    KAFKA = meta.get("kafka_version", KAFKA)
    for k, v in SYSTEMS.items():
        SYSTEMS[k] = v.format(kafka=KAFKA)
    systems = [s for s in meta.get("systems", list(SYSTEMS)) if os.path.isdir(os.path.join(raw, s))]

    # The client variants run: older results have no Rust port rows.
    clients = [c for c in CLIENTS if any(os.path.isdir(os.path.join(raw, s, c)) for s in systems)]
    main_runs = {}  # (system, client, bench) -> summary
    for s in systems:
        for c in clients:
            for b in BENCHES:
                main_runs[s, c, b] = load_json(os.path.join(raw, s, c, b + ".json"))

    def runs_by_number(s, kind, sep):
        """raw/<system>/<kind>/<bench><sep><N>.json as {(bench, N): summary} (sweep: -p, payload: -b)."""
        out = {}
        p = os.path.join(raw, s, kind)
        for name in sorted(os.listdir(p)) if os.path.isdir(p) else []:
            if name.endswith(".json"):
                bench, n = name[:-5].rsplit(sep, 1)
                out[bench, int(n)] = load_json(os.path.join(p, name))
        return out

    sweeps = {s: runs_by_number(s, "sweep", "-p") for s in systems}
    payloads = {s: runs_by_number(s, "payload", "-b") for s in systems}
    settings = meta.get("settings", {})
    quick = meta.get("mode") == "quick"
    sections = meta.get("sections", ["main", "sweep", "payload", "raw"])

    md = []
    title = "onelog against Apache Kafka: transaction benchmarks"
    md.append(f"# {title}{' (QUICK smoke run: too few iterations to quote)' if quick else ''}\n")
    md.append(
        f"{meta.get('date_utc', '?')}; {meta.get('nproc', '?')} cores ({meta.get('cpu', '?')}), "
        f"{meta.get('memory_gib', '?')} GiB, {meta.get('kernel', '?')}; {meta.get('java', '?')}; onelog "
        f"{meta.get('onelog_commit', '?')}. Load average at the end {meta.get('load_avg_at_end', '?')} "
        "(the machine is shared: other work runs beside the benches).\n")
    md.append("```sh\n" + meta.get("command", "scripts/bench-compare.sh") + "\n```\n")
    md.append(
        "Each system runs as three nodes on 127.0.0.1, started fresh (empty data) before its runs and "
        "stopped and wiped after; topic1 and topic2 have 1 partition, replication factor 3 and "
        "max.message.bytes=2097152 (for the 1 MiB payload), min.insync.replicas=2 on Kafka. Producers: "
        "acks=all, linger.ms=0. Systems:\n")
    for s in systems:
        desc = {
            "onelog": "onelog, `scripts/cluster.sh up 3` (release build): every entry fsynced by the Raft log before it is acknowledged",
            "kafka-flush1": f"Apache Kafka {KAFKA} KRaft, `scripts/kafka-reference.sh up`: `log.flush.interval.messages=1`, an fsync per append as onelog",
            "kafka-default": f"Apache Kafka {KAFKA} KRaft, `scripts/kafka-reference.sh up --flush-default`: **Kafka's default flush settings** (no fsync per append; durability from replication alone)",
        }[s]
        md.append(f"- **{SYSTEMS[s]}** — {desc}")
    md.append("")
    if "main" in sections:
        main_intro(md, settings, clients)

    failures = meta.get("failures", [])
    if failures:
        md.append("## Failures\n")
        md += [f"- {f}" for f in failures]
        md.append("")

    if "main" in sections:
        main_sections(md, systems, clients, main_runs, sweeps, payloads)

    if any(sweeps.values()):
        md.append("## Concurrency: TPS against producers\n")
        md.append(f"kafka-clients 4.1.1; PRODUCERS concurrent producers in one JVM, each with its own transactional id, "
                  f"running its iterations one after another; SWEEP_TXES={settings.get('SWEEP_TXES')} recorded "
                  f"iterations split over the producers (at least {settings.get('SWEEP_MIN_TXES')} each). "
                  "p50/p99 over all producers' iterations.\n")
        counts = sorted({n for s in systems for (_, n) in sweeps[s]})
        rows = []
        for s in systems:
            for n in counts:
                row = [SYSTEMS[s], n]
                for b in ("TxWritesBench", "BaseWritesBench"):
                    r = sweeps[s].get((b, n))
                    row += [fmt_tps(field(r, "tps")),
                            "failed" if r is None else f"{fmt_ms(r['p50_ms'])} / {fmt_ms(r['p99_ms'])}"]
                tx = sweeps[s].get(("TxWritesBench", n)) or {}
                cpu = tx.get("cpu_us_per_tx_per_node")
                row.append("–" if not cpu else " / ".join(f"{v:,}" for v in cpu))
                rows.append(row)
        md.append(table(["system", "producers", "TxWrites TPS", "TxWrites p50 / p99 ms", "BaseWrites TPS",
                         "BaseWrites p50 / p99 ms", "TxWrites broker CPU µs per tx, nodes 1 / 2 / 3"], rows))
        md.append("")
        md.append("Broker CPU: utime + stime of each node from /proc over the whole run (client start, "
                  "warm-up and measured transactions) divided by every transaction of the run, "
                  "so an upper bound; 10 ms clock ticks.\n")
        md.append("")
        if "onelog" in systems:
            rows = []
            for n in counts:
                row = [n]
                for k in KAFKAS:
                    if k in systems:
                        for b in ("TxWritesBench", "BaseWritesBench"):
                            row.append(fmt_ratio(ratio(field(sweeps["onelog"].get((b, n)), "tps"),
                                                       field(sweeps[k].get((b, n)), "tps"))))
                rows.append(row)
            header = ["producers"] + [f"{b[:-5]} TPS onelog / {SHORT[k]}" for k in KAFKAS if k in systems
                                      for b in ("TxWritesBench", "BaseWritesBench")]
            md.append(table(header, rows))
            md.append("")

    if any(payloads.values()):
        md.append("## Payload size\n")
        md.append(f"kafka-clients 4.1.1, one producer; each iteration writes two records of the size given "
                  f"(MB/s counts both); {settings.get('PAYLOAD_TXES')} iterations "
                  f"({settings.get('PAYLOAD_MIB_TXES')} for 1 MiB).\n")
        sizes = sorted({n for s in systems for (_, n) in payloads[s]})
        rows = []
        for s in systems:
            for n in sizes:
                row = [SYSTEMS[s], human_bytes(n)]
                for b in ("TxWritesBench", "BaseWritesBench"):
                    r = payloads[s].get((b, n))
                    row += ["failed" if r is None else f"{fmt_ms(r['p50_ms'])} / {fmt_ms(r['p99_ms'])}",
                            fmt_tps(field(r, "tps")),
                            "–" if r is None else f"{r['tps'] * 2 * n / 1e6:.2f}"]
                rows.append(row)
        md.append(table(["system", "record", "TxWrites p50 / p99 ms", "TxWrites TPS", "TxWrites MB/s",
                         "BaseWrites p50 / p99 ms", "BaseWrites TPS", "BaseWrites MB/s"], rows))
        md.append("")

    if "raw" in sections:
        raw_table(md, raw, systems, settings)
    if "catchup" in sections:
        catchup_table(md, raw, systems, settings, SYSTEMS, table, load_json)

    pngs = plots(d, raw, systems, clients, sweeps)
    if pngs:
        md.append("## Plots\n")
        md += [f"![{alt}]({name})\n" for name, alt in pngs]
    elif pngs is None:
        md.append("(No plots: matplotlib is not installed.)\n")

    md.append("## Run\n")
    secs = meta.get("seconds", {})
    per = ", ".join(f"{k} {v} s" for k, v in secs.get("per_system", {}).items())
    md.append(f"Build {secs.get('build', '?')} s, runs {secs.get('runs', '?')} s ({per}). Raw data: `raw/<system>/` "
              "(per client variant `<bench>.json` summaries and `<bench>.txt` sorted latencies in ns; `sweep/`, "
              f"`payload/`; `logs/`). Settings: `{json.dumps(settings)}`. Binary `{meta.get('onelog_bin', '?')}`.\n")

    with open(os.path.join(d, "report.md"), "w") as f:
        f.write("\n".join(md))
    print(os.path.join(d, "report.md"))


def raw_table(md, raw, systems, settings):
    """Kafka's ProducerPerformance and ConsumerPerformance against each system, side by side."""
    runs = {}  # system -> {producers: summary or None}
    consumers = {}
    for s in systems:
        p = os.path.join(raw, s, "raw-throughput")
        if not os.path.isdir(p):
            continue
        names = os.listdir(p)
        counts = {int(n[len("producer-p"):].split("-")[0].split(".")[0]) for n in names if n.startswith("producer-p")}
        runs[s] = {n: load_json(os.path.join(p, f"producer-p{n}.json")) for n in counts}
        consumers[s] = load_json(os.path.join(p, "consumer.json"))
    if not runs:
        return
    shown = [s for s in systems if s in runs]
    counts = sorted({n for s in shown for n in runs[s]} or
                    {int(x) for x in str(settings.get("RAW_PRODUCERS", "1,8")).split(",")})
    md.append("## Raw throughput\n")
    md.append(f"Kafka {KAFKA}'s own `ProducerPerformance` (kafka-producer-perf-test) and `ConsumerPerformance` "
              f"(kafka-consumer-perf-test) against each system: {settings.get('RAW_RECORDS', '?')} records of 1 KiB "
              f"per producer run, `--throughput -1`, acks=all, enable.idempotence=true, the tool's other producer "
              f"defaults (batch.size 16384, linger.ms 5), into one topic of {settings.get('RAW_PARTITIONS', '?')} "
              "partition(s) with replication factor 3. N producers are N processes started together, each with "
              "its share of the records; MB/s is the sum of their own rates (MB = 10^6 bytes; the tools print "
              "MiB). Latency is the tool's, send to acknowledgement per record in whole ms, so under "
              "`--throughput -1` mostly the wait in the producer's buffer; for several producers the table "
              "shows the worst producer's value of each percentile (the printed percentiles cannot be merged). "
              "Then one consumer reads the whole topic (every run's records); MB/s over its whole run with the "
              "group join, and over fetching alone.\n")
    md.append("Disk writes: the sum over the three broker processes of `write_bytes` in /proc/PID/io across the "
              "producer run, divided by the bytes produced (records × 1024), broker logs included, the file "
              "system's journal not. The kernel counts it when a page-cache folio is dirtied, the whole folio "
              "each time a clean one is dirtied again: after an fsync, a 1 KiB append into a file pre-written in "
              "1 MiB writes (onelog's Raft log segments) counts 1 MiB on kernel 6.18 with ext4's large folios, "
              "while the disk gets about 4 KiB; so it is an upper bound, far above the device's writes for a "
              "system that fsyncs small appends into pre-written files. Bytes of write calls: `wchar` of /proc/PID/io "
              "over the run, per node, divided by the bytes produced; it counts the JVM's socket writes too "
              "(Kafka's replication and answers go through write calls), not onelog's (sent with send). Disk space: "
              "the growth of the allocated blocks of the three data directories over the run (onelog's Raft "
              "log segments are allocated whole, 64 MiB each, with fallocate). CPU: utime + stime of the three broker "
              "processes across the producer run (JVM start of the tools included), per MB produced.\n")

    def cell(s, fn):
        return fn(runs[s]) if s in runs else "–"

    def prod(n, fn):
        def f(rs):
            r = rs.get(n, "missing")
            if r == "missing":
                return "not run"
            return "failed" if r is None else fn(r)
        return f

    rows = []
    for n in counts:
        who = "1 producer" if n == 1 else f"{n} producers"
        rows.append([f"{who}: MB/s" + (" (sum)" if n > 1 else "")] +
                    [cell(s, prod(n, lambda r: f"{r['mb_per_s']:.1f}")) for s in shown])
        rows.append([f"{who}: p50 / p99 / p99.9 ms" + (" (worst producer)" if n > 1 else "")] +
                    [cell(s, prod(n, lambda r: f"{r['p50_ms']} / {r['p99_ms']} / {r['p999_ms']}")) for s in shown])
    con = []
    for s in shown:
        c = consumers.get(s)
        con.append("failed" if c is None else f"{c['mb_per_s']:.1f} ({c['fetch_mb_per_s']:.1f} fetching)")
    rows.append(["consumer: MB/s"] + con)
    label = " / ".join(str(n) for n in counts)
    rows.append([f"disk bytes written (write_bytes) per byte produced ({label} producers)"] +
                [cell(s, lambda rs: " / ".join("failed" if rs.get(n) is None else f"{rs[n]['disk_bytes_per_byte']:.2f}"
                                               for n in counts)) for s in shown])
    rows.append([f"bytes of write calls (wchar) per byte produced, per node ({label} producers)"] +
                [cell(s, lambda rs: " / ".join("failed" if rs.get(n) is None else
                                               f"{sum(rs[n]['write_call_bytes_per_node']) / 3 / (rs[n]['records'] * 1024):.2f}"
                                               for n in counts)) for s in shown])
    rows.append([f"disk space taken per byte produced ({label} producers)"] +
                [cell(s, lambda rs: " / ".join("failed" if rs.get(n) is None else f"{rs[n]['stored_bytes_per_byte']:.2f}"
                                               for n in counts)) for s in shown])
    rows.append([f"broker CPU s per MB produced ({label} producers)"] +
                [cell(s, lambda rs: " / ".join("failed" if rs.get(n) is None else f"{rs[n]['cpu_s_per_mb']:.3f}"
                                               for n in counts)) for s in shown])
    md.append(table(["metric"] + [SYSTEMS[s] for s in shown], rows))
    md.append("")
    md.append("Raw outputs and summaries: `raw/<system>/raw-throughput/` (`producer-p<N>-<i>.txt` each producer's "
              "output, `producer-p<N>.json` with per-node disk writes, stored bytes and CPU, `consumer.txt`, "
              "`consumer.json`).\n")


def main_intro(md, settings, clients):
    """The paragraph on the main benches' settings."""
    md.append(
        f"Main benches: WARMUP={settings.get('WARMUP')} then TXES={settings.get('TXES')} iterations, one producer, "
        f"run one after another, with kafka-clients 4.1.1 (transactions v2 against Kafka {KAFKA}) and 2.8.2 "
        "(transactions v1)" + (", and with the Rust port of the benches (`txbench`: librdkafka through rdkafka, "
                               "no JVM)" if "rust" in clients else "") + ". Latency of one iteration in ms; TPS = iterations per second of the measured part. "
        "No compensation for coordinated omission (as in kafka-tx-performance).\n")


def main_sections(md, systems, clients, main_runs, sweeps, payloads):
    """The main benches' tables: per bench, onelog / Kafka, the DRMQ table, transaction overhead."""
    md.append("## Latency and throughput per bench\n")
    for b in BENCHES:
        md.append(f"### {b}\n")
        rows = []
        for s in systems:
            for c in clients:
                r = main_runs[s, c, b]
                if r is None:
                    rows.append([SYSTEMS[s], CLIENTS[c]] + ["failed"] + ["–"] * 5)
                    continue
                rows.append([SYSTEMS[s], CLIENTS[c]] + [fmt_ms(r[k]) for k in
                            ("p50_ms", "p95_ms", "p99_ms", "p999_ms", "max_ms")] + [fmt_tps(r["tps"])])
        md.append(table(["system", "client", "p50 ms", "p95 ms", "p99 ms", "p99.9 ms", "max ms", "TPS"], rows,
                        ["---", "---"] + ["---:"] * 6))
        md.append("")

    if "onelog" in systems and any(k in systems for k in KAFKAS):
        md.append("## onelog / Kafka\n")
        md.append("Below 1× for latency (above 1× for TPS) means onelog is faster.\n")
        header = ["bench", "client"]
        for k in KAFKAS:
            if k in systems:
                header += [f"p50 vs {SHORT[k]}", f"p99 vs {SHORT[k]}", f"TPS vs {SHORT[k]}"]
        rows = []
        for b in BENCHES:
            for c in clients:
                o = main_runs["onelog", c, b]
                row = [b, CLIENTS[c]]
                for k in KAFKAS:
                    if k in systems:
                        q = main_runs[k, c, b]
                        row += [fmt_ratio(ratio(field(o, "p50_ms"), field(q, "p50_ms"))),
                                fmt_ratio(ratio(field(o, "p99_ms"), field(q, "p99_ms"))),
                                fmt_ratio(ratio(field(o, "tps"), field(q, "tps")))]
                rows.append(row)
        md.append(table(header, rows, ["---", "---"] + ["---:"] * (len(header) - 2)))
        md.append("")

    drmq_table(md, systems, main_runs, sweeps, payloads)

    md.append("## Transaction overhead (transactional / baseline)\n")
    md.append("TxWritesBench / BaseWritesBench and TxStreamingBench / BaseStreamingBench, same system and client "
              "(the seed measured 30–50× and 40–120× on Kafka 2.7).\n")
    rows = []
    for s in systems:
        for c in clients:
            row = [SYSTEMS[s], CLIENTS[c]]
            for tx, base in (("TxWritesBench", "BaseWritesBench"), ("TxStreamingBench", "BaseStreamingBench")):
                t, bb = main_runs[s, c, tx], main_runs[s, c, base]
                row += [fmt_ratio(ratio(field(t, "p50_ms"), field(bb, "p50_ms"))),
                        fmt_ratio(ratio(field(t, "p99_ms"), field(bb, "p99_ms"))),
                        fmt_ratio(ratio(field(bb, "tps"), field(t, "tps")))]
            rows.append(row)
    md.append(table(["system", "client", "writes p50", "writes p99", "writes TPS base/tx",
                     "streaming p50", "streaming p99", "streaming TPS base/tx"], rows,
                    ["---", "---"] + ["---:"] * 6))
    md.append("")


# The DRMQ article's table (seeds/drmq-single-raft-transactions.txt: Kafka's transactional
# producer against DRMQ, 3 nodes, RF 3, on their machine), for context beside ours.
DRMQ_ROWS = [
    ("Commit latency p50 (ms)", "main", "p50_ms", "55", "8"),
    ("Commit latency p95 (ms)", "main", "p95_ms", "93", "11"),
    ("Commit latency p99 (ms)", "main", "p99_ms", "129", "16"),
    ("Tail latency p99.9 (ms)", "main", "p999_ms", "198", "23"),
    ("Serial producer TPS", ("sweep", 1), "tps", "19", "127"),
    ("10 concurrent producers TPS", ("sweep", 10), "tps", "181", "1,621"),
    ("1 MiB payload TPS", ("payload", 1 << 20), "tps", "—", "4,878 (batched)"),
]


def drmq_table(md, systems, main_runs, sweeps, payloads):
    """The rows of the DRMQ article's comparison table, measured here with TxWritesBench."""
    if not systems:
        return
    md.append("## The DRMQ table, measured here\n")
    md.append("The rows of the comparison table in the single-Raft article (DRMQ against Kafka's transactional "
              "producer), from this run's TxWritesBench with kafka-clients 4.1.1: commit latency from the main "
              "run, TPS from the concurrency sweep (1 and 10 producers) and the 1 MiB payload run (one "
              "transaction of two 1 MiB records per iteration). The article's own figures, from its machine, "
              "are in the last two columns for context only.\n")
    rows = []
    for label, where, key, kafka_pub, drmq_pub in DRMQ_ROWS:
        row = [label]
        values = {}
        for s in systems:
            if where == "main":
                r = main_runs.get((s, "4.x", "TxWritesBench"))
            elif where[0] == "sweep":
                r = sweeps[s].get(("TxWritesBench", where[1]))
            else:
                r = payloads[s].get(("TxWritesBench", where[1]))
            values[s] = field(r, key)
            row.append(fmt_tps(values[s]) if key == "tps" else fmt_ms(values[s]))
        if "onelog" in systems and "kafka-flush1" in systems:
            o, k = values["onelog"], values["kafka-flush1"]
            r = ratio(k, o) if key != "tps" else ratio(o, k)
            row.append("–" if r is None else (f"{r:.1f}× lower" if key != "tps" else f"{r:.1f}× more"))
        row += [kafka_pub, drmq_pub]
        rows.append(row)
    header = ["metric"] + [SYSTEMS[s] for s in systems]
    if "onelog" in systems and "kafka-flush1" in systems:
        header.append("onelog vs Kafka fsync/msg")
    header += ["article: Kafka", "article: DRMQ"]
    md.append(table(header, rows))
    md.append("")


def human_bytes(n):
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20} MiB"
    if n >= 1024 and n % 1024 == 0:
        return f"{n >> 10} KiB"
    return f"{n} B"


def read_latencies_ms(path):
    try:
        with open(path) as f:
            return [int(line) / 1e6 for line in f if line.strip()]
    except (OSError, ValueError):
        return []


def plots(d, raw, systems, clients, sweeps):
    """The PNGs written, as (file name, alt text); None without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker  # noqa: F401
    except ImportError:
        return None
    written = []
    for b in BENCHES:
        fig, ax = plt.subplots(figsize=(7, 4.2))
        drawn = False
        for s in systems:
            for c in clients:
                style = CLIENT_STYLES[c]
                lat = read_latencies_ms(os.path.join(raw, s, c, b + ".txt"))
                if not lat:
                    continue
                lat.sort()
                n = len(lat)
                ax.plot(lat, [(i + 1) / n for i in range(n)], style, color=COLORS[s],
                        label=f"{SYSTEMS[s]}, clients {CLIENTS[c]}", linewidth=1.3)
                drawn = True
        if not drawn:
            plt.close(fig)
            continue
        ax.set_xscale("log")
        ax.set_xlabel("latency of one iteration (ms, log scale)")
        ax.set_ylabel("fraction of iterations ≤ x")
        ax.set_ylim(0, 1.001)
        ax.grid(True, which="both", alpha=0.3)
        ax.set_title(f"{b}: latency CDF")
        ax.legend(fontsize=7, loc="lower right")
        fig.tight_layout()
        name = f"cdf-{b}.png"
        fig.savefig(os.path.join(d, name), dpi=110)
        plt.close(fig)
        written.append((name, f"{b} latency CDF"))
    if any(sweeps.values()):
        fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
        for ax, b in zip(axes, ("TxWritesBench", "BaseWritesBench")):
            for s in systems:
                pts = sorted((n, r["tps"]) for (bb, n), r in sweeps[s].items() if bb == b and r)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", color=COLORS[s], label=SYSTEMS[s])
            ax.set_xscale("log")
            ax.set_yscale("log")
            counts = sorted({n for s in systems for (bb, n) in sweeps[s] if bb == b})
            ax.set_xticks(counts)
            ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            ax.set_xlabel("concurrent producers")
            ax.set_ylabel("iterations per second")
            ax.set_title(b)
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(d, "tps-vs-producers.png"), dpi=110)
        plt.close(fig)
        written.append(("tps-vs-producers.png", "TPS against concurrent producers"))
    return written


if __name__ == "__main__":
    main()
