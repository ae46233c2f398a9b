#!/usr/bin/env bash
# Where the brokers' CPU per transaction goes, by node and thread, with the system calls behind
# it (issue 31). Starts three nodes of BIN on 127.0.0.1, warms up with one txbench run, then
# measures one run of BENCH (default TxWritesBench) with PRODUCERS (default 8) librdkafka
# producers and 16,000 transactions over all of them. Prints TPS and p50, then per node and
# thread (tokio-rt-worker, raft-log-flush) the context switches and CPU µs per transaction
# (/proc/PID/task/*/status and stat, deltas over the measured run), then per node the system
# calls per transaction (`perf stat` of syscalls:sys_enter_*, needs perf; skipped without it).
#
#   scripts/cpu-per-tx.sh BIN [PRODUCERS] [BENCH]
#
# BIN may be a wrapper script that execs the broker with settings in its environment (for
# example ONELOG_RUNTIME_WORKER_THREADS=1). Ports from ONELOG_BASE_PORT (default 19892);
# TXBENCH_BIN as in txbench-ab.sh.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
bin="${1:?BIN}"; producers="${2:-8}"; bench="${3:-TxWritesBench}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/onelog-target}"
txbench="${TXBENCH_BIN:-$CARGO_TARGET_DIR/release/txbench}"
[ -x "$txbench" ] || cargo build -q --release -p harness --bin txbench
work="$(mktemp -d "${TMPDIR:-/tmp}/cpu-per-tx.XXXXXX")"
base="${ONELOG_BASE_PORT:-19892}"
export ONELOG_BIN="$bin" ONELOG_CLUSTER_DIR="$work/cluster" ONELOG_BASE_PORT="$base"
export ONELOG_CONFIGS="log.segment.bytes=1048576"
export KAFKA_CONNECTION="127.0.0.1:$base,127.0.0.1:$((base + 1)),127.0.0.1:$((base + 2))"
perf_pids=()
cleanup() {
    [ ${#perf_pids[@]} -eq 0 ] || kill -INT "${perf_pids[@]}" 2>/dev/null || true
    "$repo/scripts/cluster.sh" down >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
"$repo/scripts/cluster.sh" up 3 >/dev/null
WARMUP=10 TXES=10 "$txbench" CreateTopics >/dev/null 2>&1
PRODUCERS=$producers WARMUP=300 TXES=300 "$txbench" "$bench" >/dev/null 2>&1
node_pid() { cat "$ONELOG_CLUSTER_DIR/node-$1/onelog.pid"; }
# One line per thread: node, name, context switches, CPU ticks.
threads() {
    local n t
    for n in 1 2 3; do
        for t in /proc/"$(node_pid "$n")"/task/*; do
            echo "$n $(tr ' ' _ <"$t/comm") $(awk '/voluntary_ctxt_switches/ {s += $2} END {print s}' "$t/status") $(awk '{print $14 + $15}' "$t/stat")"
        done
    done
}
threads >"$work/before"
if command -v perf >/dev/null; then
    events=""
    for e in sendto write recvfrom read epoll_wait futex fdatasync pwrite64 pread64 statfs; do
        events+="syscalls:sys_enter_$e,"
    done
    for n in 1 2 3; do
        perf stat -x, -e "${events%,}" -p "$(node_pid "$n")" -o "$work/syscalls-$n" 2>/dev/null &
        perf_pids+=($!)
    done
    sleep 0.5
fi
PRODUCERS=$producers WARMUP=0 TXES=$((16000 / producers)) SUMMARY_FILE="$work/summary.json" "$txbench" "$bench" >/dev/null 2>&1
threads >"$work/after"
if [ ${#perf_pids[@]} -gt 0 ]; then
    kill -INT "${perf_pids[@]}" 2>/dev/null || true
    wait "${perf_pids[@]}" 2>/dev/null || true
    perf_pids=()
fi
echo "leader: $("$repo/scripts/cluster.sh" leader 2>/dev/null || echo unknown)"
python3 - "$work" <<'PY'
import collections, json, os, sys
work = sys.argv[1]
def load(name):
    totals = collections.defaultdict(lambda: [0, 0])
    for line in open(os.path.join(work, name)):
        node, comm, switches, ticks = line.split()
        totals[(node, comm)][0] += int(switches)
        totals[(node, comm)][1] += int(ticks)
    return totals
before, after, summary = load("before"), load("after"), json.load(open(os.path.join(work, "summary.json")))
tx, hz = summary["count"], os.sysconf("SC_CLK_TCK")
print(f'{summary["bench"]} producers={summary["producers"]} tps {summary["tps"]:.0f} p50 {summary["p50_ms"]:.2f} ms')
all_switches = all_us = 0
for key in sorted(after):
    switches = after[key][0] - before.get(key, [0, 0])[0]
    us = (after[key][1] - before.get(key, [0, 0])[1]) / hz * 1e6
    all_switches, all_us = all_switches + switches, all_us + us
    if switches or us:
        print(f"node {key[0]} {key[1]:16} context switches/tx {switches / tx:5.2f}  cpu {us / tx:5.0f} us/tx")
for node in "123":
    path = os.path.join(work, f"syscalls-{node}")
    if os.path.exists(path):
        counts = []
        for line in open(path):
            fields = line.strip().split(",")
            if len(fields) > 3 and fields[0].isdigit() and int(fields[0]) > 0:
                counts.append(f'{fields[2].split("sys_enter_")[1]} {int(fields[0]) / tx:.2f}')
        print(f"node {node} system calls/tx: " + ", ".join(counts))
print(f"all three nodes: context switches/tx {all_switches / tx:.2f}  cpu {all_us / tx:.0f} us/tx")
PY
