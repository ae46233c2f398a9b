#!/usr/bin/env bash
# A/B of two onelog binaries with txbench (librdkafka): for each binary in turn, ROUNDS times
# (default 2), a fresh three-node cluster on 127.0.0.1 (Kafka ports from 19992), then
# BaseWritesBench and TxWritesBench with 1 and 10 producers; one line per bench with TPS,
# p50/p99 and the three nodes' CPU (utime+stime from /proc) per transaction, warm-up included. Used for the openraft patch (vendor/openraft/ONELOG.md): build the released
# openraft by commenting out its `[patch.crates-io]` line, copy that binary, restore the line.
#
#   scripts/txbench-ab.sh A_BIN B_BIN [ROUNDS]
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
a="${1:?A binary}"; b="${2:?B binary}"; rounds="${3:-2}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/onelog-target}"
txbench="${TXBENCH_BIN:-$CARGO_TARGET_DIR/release/txbench}"
[ -x "$txbench" ] || cargo build -q --release -p harness --bin txbench
work="$(mktemp -d "${TMPDIR:-/tmp}/txbench-ab.XXXXXX")"
export ONELOG_CLUSTER_DIR="$work/cluster" ONELOG_BASE_PORT="${ONELOG_AB_BASE_PORT:-19992}"
export ONELOG_CONFIGS="log.segment.bytes=1048576"
export KAFKA_CONNECTION="127.0.0.1:$ONELOG_BASE_PORT,127.0.0.1:$((ONELOG_BASE_PORT + 1)),127.0.0.1:$((ONELOG_BASE_PORT + 2))"
trap '"$repo/scripts/cluster.sh" down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
# The three nodes' CPU seconds so far (utime+stime of /proc/PID/stat, clock ticks).
cpu_ticks() {
    local total=0 pid
    for n in 1 2 3; do
        pid="$(cat "$ONELOG_CLUSTER_DIR/node-$n/onelog.pid")"
        total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat")))
    done
    echo "$total"
}
one() {
    local bin="$1" label="$2"
    ONELOG_BIN="$bin" "$repo/scripts/cluster.sh" up 3 >/dev/null
    WARMUP=10 TXES=10 "$txbench" CreateTopics >/dev/null 2>&1
    for p in 1 10; do
        for bench in BaseWritesBench TxWritesBench; do
            local txes=$((p == 1 ? 2000 : 4000))
            rm -f "$work/summary.json"
            local before; before="$(cpu_ticks)"
            PRODUCERS=$p WARMUP=300 TXES=$txes SUMMARY_FILE="$work/summary.json" "$txbench" "$bench" >/dev/null 2>&1 ||
                { echo "$label producers=$p $bench failed"; continue; }
            local ticks=$(($(cpu_ticks) - before))
            python3 -c 'import json,sys,os; d=json.load(open(sys.argv[1])); n=d["count"]+d["warmup"]*d["producers"]; us=int(sys.argv[5])/os.sysconf("SC_CLK_TCK")*1e6/n; print("{:4} producers={:3} {:16} tps {:8.1f}  p50 {:6.2f}  p99 {:6.2f} ms  cpu {:6.0f} us/tx".format(sys.argv[2], sys.argv[3], sys.argv[4], d["tps"], d["p50_ms"], d["p99_ms"], us))' \
                "$work/summary.json" "$label" "$p" "$bench" "$ticks"
        done
    done
    "$repo/scripts/cluster.sh" down >/dev/null
    rm -rf "$ONELOG_CLUSTER_DIR"
}
for r in $(seq "$rounds"); do
    one "$a" "A$r"
    one "$b" "B$r"
done
