#!/usr/bin/env python3
"""bench-tls.sh's report: from WORK/measured.BENCH.PROTO.txt (latencies in ns, one a line)
and .seconds, per bench and protocol (PLAINTEXT, SASL_SSL), writes the Markdown table of p50
and p99 with their differences to OUT and prints it.

Usage: bench-tls-report.py WORK OUT SYSTEM WARMUP TXES PRODUCERS "BENCH ..."
"""
import os, sys
work, out, system, warmup, txes, producers, benches = sys.argv[1:]
def pct(xs, p):
    return xs[min(len(xs) - 1, int(len(xs) * p / 100))] / 1e6
rows = []
for bench in benches.split():
    cells = {}
    for proto in ("PLAINTEXT", "SASL_SSL"):
        xs = sorted(int(l) for l in open(os.path.join(work, "measured.%s.%s.txt" % (bench, proto))) if l.strip())
        secs = open(os.path.join(work, "measured.%s.%s.seconds" % (bench, proto))).read().strip()
        cells[proto] = (pct(xs, 50), pct(xs, 99), len(xs), secs)
    (p50a, p99a, n, sa), (p50b, p99b, _, sb) = cells["PLAINTEXT"], cells["SASL_SSL"]
    rows.append("| %s | %d | %.2f | %.2f | %+.0f%% | %.2f | %.2f | %+.0f%% | %s / %s |" % (
        bench, n, p50a, p50b, (p50b / p50a - 1) * 100, p99a, p99b, (p99b / p99a - 1) * 100, sa, sb))
text = ["# TLS + SASL cost (issue #15)", "",
        "`scripts/bench-tls.sh` against %s, one three-node cluster, kafka-clients 4.1.1; WARMUP=%s TXES=%s%s; "
        "SASL_SSL = TLS (1.3 with JDK 17) + SCRAM-SHA-512; after an unmeasured TxWritesBench warm-up over both. Latencies in ms per iteration." % (
            system, warmup, txes, " PRODUCERS=" + producers if producers else ""), "",
        "| bench | n | p50 PLAINTEXT | p50 SASL_SSL | Δ | p99 PLAINTEXT | p99 SASL_SSL | Δ | s (PLAINTEXT / SASL_SSL) |",
        "|---|---|---|---|---|---|---|---|---|"] + rows
open(out, "w").write("\n".join(text) + "\n")
print("\n".join(text))
