#!/usr/bin/env bash
# Issue 32's transaction figures, side by side in one run, on three local release nodes with
# txbench's TxWritesBench (librdkafka; each transaction one record to each of two topics, then
# commit), first with one Raft group, then with three; ROUNDS times (default 2) each.
#
# - "one": one bench with 1 and 10 producers. With three groups its topics and transactional ids
#   are placed in group 2 (`onelog.placement.rules=topic:topic=2,txn:tx-writes-bench=2`), so
#   its transactions are coordinated and written by group 2's leader alone: TxWritesBench
#   within one group against groups=1.
# - "cross": with three groups, the same bench within group 2 and then with its second topic
#   placed in group 1 (`topic:topic1=2,topic:topic2=1,txn:tx-writes-bench=2`), so every
#   transaction spans groups 2 and 1: its commit is one decision entry in group 2 delivered to
#   group 1 (docs/SCALING.md §3). Issue 32: a cross-group p50 at most 1.5x a single-group one.
# - "spread": three bench processes at once, SPREAD_PRODUCERS producers each (default 4),
#   process g on topics sg<g>a/sg<g>b with transactional ids txg<g>-…; with three groups both
#   are placed in group g, so each node leads one process's transactions.
#
# One line per run: TPS (summed over the processes), p50/p99 (of each process), and each node's
# CPU per transaction (utime + stime of /proc/PID/stat over the run, warm-up included), the
# node leading the transactions' group marked with *; then, for "spread", the busiest node's
# CPU per transaction with three groups as a share of one group's leader.
#
#   scripts/bench-groups-txn.sh [ROUNDS]      BENCH_PARTS="one spread" (default), any of one, cross, spread
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

# Entries applied so far, summed over every Raft group node 1 runs (its /status).
applied_entries() {
    curl -s --max-time 2 "http://127.0.0.1:$((ONELOG_BASE_PORT + 200))/status" |
        python3 -c 'import json,sys; s=json.load(sys.stdin)
rows=s.get("raft_groups",{}).get("groups",[])
print(sum(r.get("last_applied") or 0 for r in rows) if rows else s.get("last_applied") or 0)'
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

# Three bench processes at once, each on its own topics and transactional ids: $1 label, then
# broker configs. Prints one line and appends "label busiest-us-per-tx" to $work/spread.
spread() {
    local label="$1" per="${SPREAD_PRODUCERS:-4}" g before pids=()
    shift
    ONELOG_CONFIGS="log.segment.bytes=1048576 $*" "$repo/scripts/cluster.sh" up 3 >/dev/null
    sleep 3
    for g in 0 1 2; do
        TOPICS="sg${g}a,sg${g}b" WARMUP=10 TXES=10 "$txbench" CreateTopics >/dev/null 2>&1
    done
    before="$(cpu_ticks)"
    local entries; entries="$(applied_entries)"
    for g in 0 1 2; do
        TOPICS="sg${g}a,sg${g}b" TX_ID="txg$g" PRODUCERS=$per WARMUP=200 TXES=2000 \
            SUMMARY_FILE="$work/spread-$g.json" "$txbench" TxWritesBench >/dev/null 2>&1 &
        pids+=($!)
    done
    for g in "${pids[@]}"; do wait "$g" || echo "$label: a bench process failed"; done
    entries=$(($(applied_entries) - entries))
    python3 -c 'import json,sys,os
ds=[json.load(open(f)) for f in sys.argv[4:7]]
n=sum(d["count"]+d["warmup"]*d["producers"] for d in ds)
before=list(map(int, sys.argv[2].split())); after=list(map(int, sys.argv[3].split()))
tick=os.sysconf("SC_CLK_TCK"); us=[(a-b)/tick*1e6/n for b,a in zip(before,after)]
p50=" ".join("{:5.2f}".format(d["p50_ms"]) for d in ds); p99=" ".join("{:6.2f}".format(d["p99_ms"]) for d in ds)
print("{:22} spread 3x{:2}  tps {:7.1f}  p50 {} p99 {} ms  cpu us/tx: {}  busiest {:4.0f}  entries/tx {:4.2f}".format(sys.argv[1], ds[0]["producers"], sum(d["tps"] for d in ds), p50, p99, " ".join("n{} {:4.0f}".format(i+1,u) for i,u in enumerate(us)), max(us), int(sys.argv[8])/n))
open(sys.argv[7], "a").write("{} {}\n".format(sys.argv[1].split(",")[0], max(us)))' \
        "$label" "$before" "$(cpu_ticks)" "$work"/spread-{0,1,2}.json "$work/spread" "$entries"
    "$repo/scripts/cluster.sh" down >/dev/null
    rm -rf "$ONELOG_CLUSTER_DIR"
}

rules_spread="topic:sg0=0,topic:sg1=1,topic:sg2=2,txn:txg0=0,txn:txg1=1,txn:txg2=2"
parts="${BENCH_PARTS:-one spread}"
for r in $(seq "$rounds"); do
    [[ " $parts " == *" one "* ]] || continue
    one "groups=1" 0
    one "groups=3, bench in g2" 2 onelog.raft.groups=3 leader.imbalance.check.interval.seconds=1 \
        onelog.placement.rules=topic:topic=2,txn:tx-writes-bench=2
done
for r in $(seq "$rounds"); do
    [[ " $parts " == *" cross "* ]] || continue
    one "groups=3, within g2" 2 onelog.raft.groups=3 leader.imbalance.check.interval.seconds=1 \
        onelog.placement.rules=topic:topic=2,txn:tx-writes-bench=2
    one "groups=3, across g2+g1" 2 onelog.raft.groups=3 leader.imbalance.check.interval.seconds=1 \
        onelog.placement.rules=topic:topic1=2,topic:topic2=1,txn:tx-writes-bench=2
done
for r in $(seq "$rounds"); do
    [[ " $parts " == *" spread "* ]] || continue
    spread "groups=1"
    spread "groups=3, one per group" onelog.raft.groups=3 leader.imbalance.check.interval.seconds=1 \
        onelog.placement.rules="$rules_spread"
done
[ -f "$work/spread" ] || exit 0
python3 -c 'import sys
rows=[l.split() for l in open(sys.argv[1])]
one=[float(v) for k,v in rows if k=="groups=1"]; three=[float(v) for k,v in rows if k=="groups=3"]
if one and three:
    print("spread: busiest node with 3 groups {:.0f} us/tx, 1-group leader {:.0f} us/tx: {:.0f} %".format(sum(three)/len(three), sum(one)/len(one), 100*sum(three)/len(three)/(sum(one)/len(one))))' "$work/spread"
