#!/usr/bin/env bash
# Issue 32's "TxWritesBench within one group unchanged against groups=1", side by side in one
# run: txbench's TxWritesBench (librdkafka; each transaction one record to topic1 and one to
# topic2, then commit) with 1 and 10 producers on three local release nodes, first with one
# Raft group, then with three and the bench's topics and transactional ids placed in group 2
# (`onelog.placement.rules=topic:topic=2,txn:tx-writes-bench=2`), so its transactions are
# coordinated and written by group 2's leader alone. ROUNDS times (default 2) each. One line per
# run: TPS, p50/p99, and each node's CPU per transaction (utime + stime of /proc/PID/stat over
# the run, warm-up included), the leader of the transactions' group marked with *.
#
#   scripts/bench-groups-txn.sh [ROUNDS]
#
# Binaries: ONELOG_BIN (else $CARGO_TARGET_DIR/release/onelog) and TXBENCH_BIN (else
# $CARGO_TARGET_DIR/release/txbench), built first when missing. Ports from ONELOG_BASE_PORT
# (default 19792).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
rounds="${1:-2}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/onelog-target}"
bin="${ONELOG_BIN:-$CARGO_TARGET_DIR/release/onelog}"
txbench="${TXBENCH_BIN:-$CARGO_TARGET_DIR/release/txbench}"
[ -x "$bin" ] || cargo build -q --release -p broker
[ -x "$txbench" ] || cargo build -q --release -p harness --bin txbench
work="$(mktemp -d "${TMPDIR:-/tmp}/bench-groups-txn.XXXXXX")"
export ONELOG_BIN="$bin" ONELOG_CLUSTER_DIR="$work/cluster" ONELOG_BASE_PORT="${ONELOG_BASE_PORT:-19792}"
export KAFKA_CONNECTION="127.0.0.1:$ONELOG_BASE_PORT,127.0.0.1:$((ONELOG_BASE_PORT + 1)),127.0.0.1:$((ONELOG_BASE_PORT + 2))"
trap '"$repo/scripts/cluster.sh" down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

# CPU ticks of each node, space-separated.
cpu_ticks() {
    local n
    for n in 1 2 3; do
        awk '{ printf "%d ", $14 + $15 }' "/proc/$(cat "$ONELOG_CLUSTER_DIR/node-$n/onelog.pid")/stat"
    done
}

# The node leading group $1, from node 1's /status.
group_leader() {
    curl -s --max-time 2 "http://127.0.0.1:$((ONELOG_BASE_PORT + 200))/status" |
        python3 -c 'import json,sys; g=int(sys.argv[1]); s=json.load(sys.stdin)
rows=s.get("raft_groups",{}).get("groups",[])
print(next((r["leader"] for r in rows if r["group"]==g), s.get("leader",-1)))' "$1"
}

# One cluster: $1 label, $2 the group holding the bench, then broker configs.
one() {
    local label="$1" group="$2"
    shift 2
    ONELOG_CONFIGS="log.segment.bytes=1048576 $*" "$repo/scripts/cluster.sh" up 3 >/dev/null
    sleep 3 # every group on its preferred leader (checked each second below)
    WARMUP=10 TXES=10 "$txbench" CreateTopics >/dev/null 2>&1
    for p in 1 10; do
        local txes=$((p == 1 ? 2000 : 4000)) before leader
        rm -f "$work/summary.json"
        before="$(cpu_ticks)"
        PRODUCERS=$p WARMUP=300 TXES=$txes SUMMARY_FILE="$work/summary.json" "$txbench" TxWritesBench >/dev/null 2>&1 ||
            { echo "$label producers=$p TxWritesBench failed"; continue; }
        leader="$(group_leader "$group")"
        python3 -c 'import json,sys,os
d=json.load(open(sys.argv[1])); n=d["count"]+d["warmup"]*d["producers"]
before=list(map(int, sys.argv[5].split())); after=list(map(int, sys.argv[6].split()))
tick=os.sysconf("SC_CLK_TCK"); leader=int(sys.argv[4])
nodes=" ".join("n{}{} {:4.0f}".format(i+1, "*" if i+1==leader else " ", (a-b)/tick*1e6/n) for i,(b,a) in enumerate(zip(before,after)))
print("{:22} producers={:2}  tps {:7.1f}  p50 {:5.2f}  p99 {:6.2f} ms  cpu us/tx: {}".format(sys.argv[2], sys.argv[3], d["tps"], d["p50_ms"], d["p99_ms"], nodes))' \
            "$work/summary.json" "$label" "$p" "$leader" "$before" "$(cpu_ticks)"
    done
    "$repo/scripts/cluster.sh" down >/dev/null
    rm -rf "$ONELOG_CLUSTER_DIR"
}

for r in $(seq "$rounds"); do
    one "groups=1" 0
    one "groups=3, bench in g2" 2 onelog.raft.groups=3 leader.imbalance.check.interval.seconds=1 \
        onelog.placement.rules=topic:topic=2,txn:tx-writes-bench=2
done
