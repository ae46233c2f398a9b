#!/usr/bin/env bash
# Rebalance time (issue 28): a consumer joining a settled group of 10, on onelog and on Apache
# Kafka, with the classic protocol (cooperative-sticky, the Java default's successor) and with
# KIP-848's consumer protocol, side by side in one run.
#
#   scripts/bench-rebalance.sh [--rounds N] [--members N] [--kafka-version V]
#
# For each system in turn (the other one stopped, so they do not share the two cores): start
# it (onelog: scripts/cluster.sh up 3 with the release binary; Kafka: scripts/kafka-reference.sh
# up, KRaft, version V, default 4.4.0), then for each protocol run dev.onelog.it.RebalanceBench
# (harness/java): --members consumers settle on a 30-partition topic (replication factor 3), one
# more joins, and the time until every partition is owned once again, the newcomer owning some,
# is one sample; it leaves, the group settles, N rounds (default 5). Both systems run with their
# default group settings (heartbeat interval 5 s and assignment interval 1 s for the consumer
# protocol; a 3 s heartbeat for classic members) and group.initial.rebalance.delay.ms=0.
# Prints one table; raw lines go to $TMPDIR/bench-rebalance.*/.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
rounds=5
members=10
kafka_version=4.4.0
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) rounds="${2:?}"; shift 2 ;;
        --members) members="${2:?}"; shift 2 ;;
        --kafka-version) kafka_version="${2:?}"; shift 2 ;;
        *) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 2 ;;
    esac
done

work="$(mktemp -d "${TMPDIR:-/tmp}/bench-rebalance.XXXXXX")"
onelog_dir="$work/onelog"
kafka_dir="$work/kafka"
onelog_port=23092
export KAFKA_REF_MAVEN_ARGS="-Dkafka.version=$kafka_version"
current=""

cleanup() {
    case "$current" in
        onelog) ONELOG_CLUSTER_DIR="$onelog_dir" ONELOG_BASE_PORT="$onelog_port" scripts/cluster.sh down >/dev/null 2>&1 || true ;;
        kafka) KAFKA_REF_DIR="$kafka_dir" scripts/kafka-reference.sh down --wipe >/dev/null 2>&1 || true ;;
    esac
}
trap cleanup EXIT

echo "building the Java driver and the onelog release binary; resolving Kafka $kafka_version" >&2
classpath="$(cat "$(scripts/java-build.sh)")"
cargo build --release -p broker >&2
KAFKA_REF_DIR="$kafka_dir" scripts/kafka-reference.sh classpath >/dev/null

# One protocol's run against `bootstrap`: the summary line's "min median max" in ms.
run_protocol() {
    local system="$1" bootstrap="$2" protocol="$3"
    local client=()
    case "$protocol" in
        classic) client=("partition.assignment.strategy=org.apache.kafka.clients.consumer.CooperativeStickyAssignor") ;;
        consumer) client=("group.protocol=consumer") ;;
    esac
    local raw="$work/$system-$protocol.jsonl"
    if ! java -Xmx512m -cp "$classpath" dev.onelog.it.RebalanceBench "$bootstrap" \
        "--topic=rebalance-$protocol" "--group=rebalance-$protocol" "--members=$members" \
        "--rounds=$rounds" "${client[@]}" >"$raw" 2>"$work/$system-$protocol.log"; then
        echo "bench-rebalance: $system, $protocol failed; last lines of $work/$system-$protocol.log:" >&2
        tail -n 20 "$work/$system-$protocol.log" >&2
        return 1
    fi
    python3 -c '
import json, sys
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("event") == "summary":
        print(e["min_ms"], e["median_ms"], e["max_ms"])
' "$raw"
}

declare -A result
for system in onelog kafka; do
    case "$system" in
        onelog)
            current=onelog
            ONELOG_CLUSTER_DIR="$onelog_dir" ONELOG_BASE_PORT="$onelog_port" \
                ONELOG_CONFIGS="group.initial.rebalance.delay.ms=0" scripts/cluster.sh up 3 >"$work/onelog-up.log" 2>&1
            bootstrap="127.0.0.1:$onelog_port,127.0.0.1:$((onelog_port + 1)),127.0.0.1:$((onelog_port + 2))"
            ;;
        kafka)
            current=kafka
            KAFKA_REF_DIR="$kafka_dir" scripts/kafka-reference.sh up >"$work/kafka-up.log" 2>&1
            bootstrap="127.0.0.1:29092,127.0.0.1:29093,127.0.0.1:29094"
            ;;
    esac
    for protocol in classic consumer; do
        echo "$system, $protocol protocol: $rounds joins to a group of $members" >&2
        result[$system-$protocol]="$(run_protocol "$system" "$bootstrap" "$protocol")" || exit 1
    done
    cleanup
    current=""
done

echo
echo "Rebalance time: one consumer joins a settled group of $members (30 partitions), ms until every"
echo "partition is owned once again; $rounds joins each (min / median / max)."
echo
echo "| protocol | onelog | Apache Kafka $kafka_version |"
echo "|---|---|---|"
for protocol in classic consumer; do
    read -r a b c <<<"${result[onelog-$protocol]}"
    read -r d e f <<<"${result[kafka-$protocol]}"
    echo "| $protocol | $a / $b / $c | $d / $e / $f |"
done
echo
echo "raw: $work"
