#!/usr/bin/env bash
# A/B of two onelog binaries with txbench (librdkafka): for each binary in turn, ROUNDS times
# (default 2), a fresh three-node cluster on 127.0.0.1 (Kafka ports from 19992), then
# BaseWritesBench and TxWritesBench with 1 and 10 producers (AB_PRODUCERS="1 10 100" adds
# rows); one line per bench with TPS, p50/p99, the three nodes' CPU (utime+stime from /proc)
# per transaction, warm-up included, and, from the nodes' /metrics, the Raft entries
# proposed per transaction and the mean of `onelog_raft_entries_in_flight` (entries in flight when
# each was proposed; 1 = no pipelining). Used for the openraft patch (vendor/openraft/ONELOG.md:
# build the released openraft by commenting out its `[patch.crates-io]` line, copy that
# binary, restore the line) and for pipelined proposals (issue 31).
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
# Sums of the entry histograms over the three nodes' /metrics (only the leader proposes):
# "entries in_flight_count in_flight_sum" (a build without pipelining has no in-flight one).
entry_counts() {
    local n out=""
    for n in 1 2 3; do
        out+="$(curl -s --max-time 2 "http://127.0.0.1:$((ONELOG_BASE_PORT + 200 + n - 1))/metrics" || true)"$'\n'
    done
    awk '/^onelog_raft_entry_proposals_count/ {e += $2} /^onelog_raft_entries_in_flight_count/ {c += $2}
        /^onelog_raft_entries_in_flight_sum/ {s += $2} END {printf "%d %d %d\n", e, c, s}' <<<"$out"
}
one() {
    local bin="$1" label="$2"
    ONELOG_BIN="$bin" "$repo/scripts/cluster.sh" up 3 >/dev/null
    WARMUP=10 TXES=10 "$txbench" CreateTopics >/dev/null 2>&1
    for p in ${AB_PRODUCERS:-1 10}; do
        for bench in BaseWritesBench TxWritesBench; do
            local txes=$((p == 1 ? 2000 : 4000))
            rm -f "$work/summary.json"
            local before entries_before; before="$(cpu_ticks)"; entries_before="$(entry_counts)"
            PRODUCERS=$p WARMUP=300 TXES=$txes SUMMARY_FILE="$work/summary.json" "$txbench" "$bench" >/dev/null 2>&1 ||
                { echo "$label producers=$p $bench failed"; continue; }
            local ticks=$(($(cpu_ticks) - before))
            python3 -c 'import json,sys,os
d=json.load(open(sys.argv[1])); n=d["count"]+d["warmup"]*d["producers"]
us=int(sys.argv[5])/os.sysconf("SC_CLK_TCK")*1e6/n
(e0, c0, s0), (e1, c1, s1) = [map(int, a.split()) for a in sys.argv[6:8]]
in_flight = "{:4.2f}".format((s1 - s0) / (c1 - c0)) if c1 > c0 else "   -"
print("{:4} producers={:3} {:16} tps {:8.1f}  p50 {:6.2f}  p99 {:6.2f} ms  cpu {:6.0f} us/tx  entries/tx {:5.2f}  in flight {}".format(sys.argv[2], sys.argv[3], sys.argv[4], d["tps"], d["p50_ms"], d["p99_ms"], us, (e1 - e0) / n, in_flight))' \
                "$work/summary.json" "$label" "$p" "$bench" "$ticks" "$entries_before" "$(entry_counts)"
        done
    done
    "$repo/scripts/cluster.sh" down >/dev/null
    rm -rf "$ONELOG_CLUSTER_DIR"
}
for r in $(seq "$rounds"); do
    one "$a" "A$r"
    one "$b" "B$r"
done
