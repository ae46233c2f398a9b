#!/usr/bin/env bash
# Share groups (KIP-932, Kafka's queues): throughput and acknowledgement latency with 1 and 4
# KafkaShareConsumer members, on onelog and on Apache Kafka, side by side in one run (issue 29).
#
#   scripts/bench-share.sh [--records N] [--record-bytes B] [--partitions P] [--consumers 1,4]
#       [--warmup-records N] [--kafka-version V] [--kafka-flush-default] [--systems onelog,kafka]
#       [--out FILE]
#
# For each system in turn (the other one stopped, so they do not share the two cores): start it
# fresh (onelog: scripts/cluster.sh up 3 with ONELOG_BIN, else the release build of
# `cargo build --release -p broker`; Kafka: scripts/kafka-reference.sh up, KRaft, version V,
# default 4.4.0, with its reference settings: an fsync per message unless --kafka-flush-default),
# then run dev.onelog.compat.share.ShareBench (harness/compat/java, kafka-clients 4.4.0): it
# creates a topic of P partitions (default 4, replication factor 3), produces N records of B
# bytes (default 200,000 of 1,024) round-robin, lets an unmeasured group of one member consume
# --warmup-records of them (default 20,000), then for each consumer count (default 1 then 4) a
# fresh share group consumes all N exactly once. Members are threads of one client JVM (2 GiB
# heap at most), each its own KafkaShareConsumer with share.acknowledgement.mode=explicit: every
# record ACCEPTed, then commitSync after every poll (client defaults otherwise: max.poll.records
# 500, share.acquire.mode batch_optimized). Every group gets share.auto.offset.reset=earliest,
# share.record.lock.duration.ms=30000 and share.delivery.count.limit=5 (Kafka 4.4's defaults, set
# explicitly) through Admin.incrementalAlterConfigs on its GROUP resource, read back before any
# member joins.
#
# Measured, per run: the clock starts when the settled group's members (ShareGroupDescribe: every
# member at the target assignment epoch, every partition assigned) start polling and stops when
# the commitSync confirming the last distinct record returns: records/s and MB/s (10^6 bytes) of
# values. Acknowledgement latency: the duration of each commitSync call, from the call to its
# per-partition results (the broker answers once the acknowledgements are durable), one sample
# per poll batch: p50 / p99 / max. Redeliveries: deliveries of a record already delivered (0 in
# a clean run), and acknowledgements that failed. Broker CPU: utime + stime of each node's
# process from /proc/PID/stat over the same window, per 1,000 records and per MB; the client
# JVM's CPU beside it (it shares the two cores). A run fails unless every record is accepted
# exactly once and ListShareGroupOffsets then shows lag 0 on every partition.
#
# Ports: onelog Kafka BENCH_SHARE_ONELOG_PORT.. (default 24092..24094; Raft +100, admin +200);
# Kafka BENCH_SHARE_KAFKA_PORT.. (default 25092..25094), controllers +100. Prints one table and
# writes it to --out (default results/share-DATE.md); raw JSON lines, the client's log and each
# node's log go to $TMPDIR/bench-share.*/. Cluster data is removed after each system.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
records=200000
record_bytes=1024
partitions=4
consumers=1,4
warmup_records=20000
kafka_version=4.4.0
kafka_flush=per-message
systems=onelog,kafka
out="results/share-$(date -u +%Y-%m-%d).md"
args_given="$*"
while [ $# -gt 0 ]; do
    case "$1" in
        --records) records="${2:?}"; shift 2 ;;
        --record-bytes) record_bytes="${2:?}"; shift 2 ;;
        --partitions) partitions="${2:?}"; shift 2 ;;
        --consumers) consumers="${2:?}"; shift 2 ;;
        --warmup-records) warmup_records="${2:?}"; shift 2 ;;
        --kafka-version) kafka_version="${2:?}"; shift 2 ;;
        --kafka-flush-default) kafka_flush=default; shift ;;
        --systems) systems="${2:?}"; shift 2 ;;
        --out) out="${2:?}"; shift 2 ;;
        *) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 2 ;;
    esac
done

work="$(mktemp -d "${TMPDIR:-/tmp}/bench-share.XXXXXX")"
onelog_dir="$work/onelog-cluster"
kafka_dir="$work/kafka-cluster"
onelog_port="${BENCH_SHARE_ONELOG_PORT:-24092}"
kafka_port="${BENCH_SHARE_KAFKA_PORT:-25092}"
export KAFKA_REF_PORT="$kafka_port" KAFKA_REF_CONTROLLER_PORT=$((kafka_port + 100))
# The reference's classpath stamp is its Maven arguments: none for the default version.
[ "$kafka_version" = 4.4.0 ] || export KAFKA_REF_MAVEN_ARGS="-Dkafka.version=$kafka_version"
current=""

onelog_env() { ONELOG_CLUSTER_DIR="$onelog_dir" ONELOG_BASE_PORT="$onelog_port" ONELOG_BIN="$onelog_bin" "$@"; }

# Stops the running system and removes its data, keeping each node's log in $work.
cleanup() {
    local id
    case "$current" in
        onelog) onelog_env scripts/cluster.sh down >/dev/null 2>&1 || true
            for id in 1 2 3; do cp "$onelog_dir/node-$id/onelog.log" "$work/onelog-node-$id.log" 2>/dev/null || true; done
            rm -rf "$onelog_dir" ;;
        kafka) KAFKA_REF_DIR="$kafka_dir" scripts/kafka-reference.sh down >/dev/null 2>&1 || true
            for id in 1 2 3; do cp "$kafka_dir/node-$id/kafka.log" "$work/kafka-node-$id.log" 2>/dev/null || true; done
            KAFKA_REF_DIR="$kafka_dir" scripts/kafka-reference.sh down --wipe >/dev/null 2>&1 || true ;;
    esac
    current=""
}
trap cleanup EXIT

echo "bench-share: building the Java driver; the onelog binary; resolving Kafka $kafka_version" >&2
COMPAT_BUILD_ONLY=1 harness/compat/java/run.sh java-4.4.0-share
classpath="$(cat "${ONELOG_COMPAT_CACHE:-$HOME/.cache/onelog-compat}/java/clients-4.4.0/classpath")"
if [ -n "${ONELOG_BIN:-}" ]; then
    onelog_bin="$ONELOG_BIN"
else
    cargo build --release -p broker >&2
    onelog_bin="${CARGO_TARGET_DIR:-$repo/target}/release/onelog"
fi
[ -x "$onelog_bin" ] || { echo "bench-share: $onelog_bin is not executable" >&2; exit 1; }
KAFKA_REF_DIR="$kafka_dir" scripts/kafka-reference.sh classpath >/dev/null

# The broker processes' pids, node 1 first, checked to be the broker itself (not a wrapper).
broker_pids() {
    local dir="$1" file="$2" comm="$3" id pid out=""
    for id in 1 2 3; do
        pid="$(cat "$dir/node-$id/$file")"
        [ "$(cat "/proc/$pid/comm")" = "$comm" ] || { echo "bench-share: pid $pid of node $id is $(cat "/proc/$pid/comm"), not $comm" >&2; exit 1; }
        out+="${out:+,}$pid"
    done
    echo "$out"
}

# cluster.sh takes an open Kafka port for a serving node, so a port held by another process must
# stop the run before onelog starts (kafka-reference.sh checks its own).
ports_free() {
    local port
    for port in "$@"; do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            echo "bench-share: port $port is in use by another process (BENCH_SHARE_ONELOG_PORT moves onelog's)" >&2
            return 1
        fi
    done
}

run_system() {
    local system="$1" bootstrap pids
    echo "bench-share: $system: starting three nodes" >&2
    case "$system" in
        onelog)
            ports_free $(for d in 0 100 200; do seq $((onelog_port + d)) $((onelog_port + d + 2)); done)
            current=onelog
            onelog_env scripts/cluster.sh up 3 >"$work/onelog-up.log" 2>&1 ||
                { tail -n 20 "$work/onelog-up.log" >&2; return 1; }
            bootstrap="127.0.0.1:$onelog_port,127.0.0.1:$((onelog_port + 1)),127.0.0.1:$((onelog_port + 2))"
            pids="$(broker_pids "$onelog_dir" onelog.pid "$(basename "$onelog_bin" | cut -c1-15)")"
            ;;
        kafka)
            current=kafka
            local up=(up)
            if [ "$kafka_flush" = default ]; then up+=(--flush-default); fi
            KAFKA_REF_DIR="$kafka_dir" scripts/kafka-reference.sh "${up[@]}" >"$work/kafka-up.log" 2>&1 ||
                { tail -n 20 "$work/kafka-up.log" >&2; return 1; }
            bootstrap="127.0.0.1:$kafka_port,127.0.0.1:$((kafka_port + 1)),127.0.0.1:$((kafka_port + 2))"
            pids="$(broker_pids "$kafka_dir" kafka.pid java)"
            ;;
    esac
    echo "load_before=$(cut -d' ' -f1-3 /proc/loadavg)" >"$work/$system.meta"
    case "$system" in
        onelog) echo "version=$("$onelog_bin" --version)"
            echo "leader_before=$(onelog_env scripts/cluster.sh leader 2>/dev/null || echo '?')" ;;
        kafka) echo "version=Apache Kafka $(KAFKA_REF_DIR="$kafka_dir" scripts/kafka-reference.sh version)"
            echo "flush=$kafka_flush" ;;
    esac >>"$work/$system.meta"
    echo "bench-share: $system: $records records of $record_bytes bytes, consumers $consumers" >&2
    if ! java -Xms1g -Xmx2g -cp "$classpath" dev.onelog.compat.share.ShareBench "--bootstrap=$bootstrap" \
        "--records=$records" "--record-bytes=$record_bytes" "--partitions=$partitions" \
        "--consumers=$consumers" "--warmup-records=$warmup_records" "--broker-pids=$pids" \
        "--clk-tck=$(getconf CLK_TCK)" >"$work/$system.jsonl" 2>"$work/$system.log"; then
        echo "bench-share: $system failed; last lines of $work/$system.log:" >&2
        tail -n 20 "$work/$system.log" >&2
        return 1
    fi
    if [ "$system" = onelog ]; then
        echo "leader_after=$(onelog_env scripts/cluster.sh leader 2>/dev/null || echo '?')" >>"$work/$system.meta"
    fi
    echo "load_after=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$work/$system.meta"
    cleanup
}

for system in ${systems//,/ }; do
    case "$system" in onelog | kafka) run_system "$system" ;; *) echo "bench-share: unknown system $system" >&2; exit 2 ;; esac
done

mkdir -p "$(dirname "$out")"
python3 scripts/bench-share-report.py "$work" "$out" "$kafka_version" "$kafka_flush" \
    "scripts/bench-share.sh${args_given:+ $args_given}"
