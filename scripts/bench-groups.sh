#!/usr/bin/env bash
# Issue 32's scaling figure, side by side in one run: three local release nodes with one Raft
# group, then with three (each node leading one), under the same load: three Kafka
# ProducerPerformance processes at once (kafka-reference.sh's classpath), one per topic, 1 KiB
# records, acks=all, idempotent, as fast as they go. With three groups topic bench-g is placed
# in group g (`onelog.placement.rules=topic:bench-0=0,...`: kafka-topics.sh sends only Kafka's
# own topic configs), so each node leads the writes of one topic; with one group one node leads
# all three. Prints per run the MB/s and, per node, the CPU seconds it used
# (utime + stime of /proc/PID/stat over the load), its CPU ms per MB produced and the groups it
# led; then the busiest node's CPU per MB with three groups as a share of one group's.
#
#   scripts/bench-groups.sh [RECORDS]    RECORDS in all (default 300000, split over the topics)
#
# Binary: ONELOG_BIN, else $CARGO_TARGET_DIR/release/onelog (built first). Ports from
# ONELOG_BASE_PORT (default 19592). Two cores carry the brokers and the JVMs, so MB/s is what
# they leave each other; CPU per MB is each broker's own.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
records="${1:-300000}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/onelog-target}"
bin="${ONELOG_BIN:-$CARGO_TARGET_DIR/release/onelog}"
[ -x "$bin" ] || cargo build -q --release -p broker
base="${ONELOG_BASE_PORT:-19592}"
work="$(mktemp -d "${TMPDIR:-/tmp}/bench-groups.XXXXXX")"
export ONELOG_BIN="$bin" ONELOG_BASE_PORT="$base"
bootstrap="127.0.0.1:$base,127.0.0.1:$((base + 1)),127.0.0.1:$((base + 2))"
tool=(env KAFKA_REF_DIR="$work/tools" KAFKA_REF_TOOL_JVM_OPTS="-Xmx512m" scripts/kafka-reference.sh tool)
cleanup() {
    ONELOG_CLUSTER_DIR="$work/cluster" scripts/cluster.sh down >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
scripts/kafka-reference.sh classpath >/dev/null

# CPU ticks of each node, space-separated (fields 14 and 15 after the command's ')').
cpu_ticks() {
    local id
    for id in 1 2 3; do
        sed 's/.*) //' "/proc/$(cat "$ONELOG_CLUSTER_DIR/node-$id/onelog.pid")/stat" | awk '{ print $12 + $13 }'
    done | paste -sd' '
}

# The groups each node leads, from its /status: "1:0 2:1 3:2" (node:groups, groups joined by +).
leaders() {
    local id
    for id in 1 2 3; do
        curl -sf "http://127.0.0.1:$((base + 200 + id - 1))/status" | python3 -c '
import json, sys
status = json.load(sys.stdin)
rows = (status.get("raft_groups") or {}).get("groups") or [{"group": 0, "leader": status.get("leader")}]
led = [str(r["group"]) for r in rows if r.get("leader") == int(sys.argv[1])]
print(sys.argv[1] + ":" + ("+".join(led) or "-"))' "$id"
    done | paste -sd' '
}

# run GROUPS: one measured load on a fresh cluster; prints one summary line.
run() {
    local groups="$1" g t0 t1 cpu0 cpu1 i
    export ONELOG_CLUSTER_DIR="$work/cluster"
    rm -rf "$ONELOG_CLUSTER_DIR"
    local rules=""
    [ "$groups" -eq 1 ] || rules="onelog.placement.rules=topic:bench-0=0,topic:bench-1=1,topic:bench-2=2"
    ONELOG_CONFIGS="onelog.raft.groups=$groups leader.imbalance.check.interval.seconds=1 $rules" \
        scripts/cluster.sh up 3 >/dev/null
    sleep 5
    for g in 0 1 2; do
        "${tool[@]}" org.apache.kafka.tools.TopicCommand --bootstrap-server "$bootstrap" --create \
            --topic "bench-$g" --partitions 3 --replication-factor 3 >/dev/null
    done
    sleep 2
    local led
    led="$(leaders)"
    cpu0="$(cpu_ticks)" t0="$(date +%s.%N)"
    local -a pids=()
    for g in 0 1 2; do
        "${tool[@]}" org.apache.kafka.tools.ProducerPerformance --topic "bench-$g" \
            --num-records "$((records / 3))" --record-size 1024 --throughput -1 \
            --producer-props bootstrap.servers="$bootstrap" acks=all enable.idempotence=true \
            >"$work/producer-$groups-$g.txt" 2>&1 &
        pids+=($!)
    done
    for i in "${pids[@]}"; do wait "$i" || { echo "a producer failed:" >&2; cat "$work"/producer-"$groups"-*.txt >&2; exit 1; }; done
    t1="$(date +%s.%N)" cpu1="$(cpu_ticks)"
    python3 - "$groups" "$records" "$t0" "$t1" "$cpu0" "$cpu1" "$(getconf CLK_TCK)" "$led" <<'EOF'
import sys
groups, records, t0, t1 = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
cpu0, cpu1 = [list(map(int, a.split())) for a in sys.argv[5:7]]
tick, led = int(sys.argv[7]), dict(p.split(":") for p in sys.argv[8].split())
mb = records // 3 * 3 * 1024 / 1e6
cpu = [(b - a) / tick for a, b in zip(cpu0, cpu1)]
per_mb = [c * 1000 / mb for c in cpu]
print(f"groups={groups}: {mb:.0f} MB in {t1 - t0:.1f} s, {mb / (t1 - t0):.1f} MB/s")
for i, (c, m) in enumerate(zip(cpu, per_mb), start=1):
    print(f"  node {i}: leads group(s) {led.get(str(i), '-'):5} CPU {c:6.1f} s  {m:5.1f} ms/MB")
print(f"RESULT {groups} {max(per_mb):.2f}")
EOF
    scripts/cluster.sh down >/dev/null
}

one="$(run 1)"
echo "$one"
three="$(run 3)"
echo "$three"
python3 - "$one" "$three" <<'EOF'
import sys
busiest = [float(l.split()[2]) for s in sys.argv[1:] for l in s.splitlines() if l.startswith("RESULT")]
print(f"busiest node: {busiest[0]:.1f} ms/MB with 1 group, {busiest[1]:.1f} ms/MB with 3 groups "
      f"({100 * busiest[1] / busiest[0]:.0f} %)")
EOF
