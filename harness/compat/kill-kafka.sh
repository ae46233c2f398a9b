#!/usr/bin/env bash
# COMPAT_KILL_LEADER of `scripts/compat.sh --kafka`: kill -9 the broker of the reference Apache
# Kafka (scripts/kafka-reference.sh, KAFKA_REF_DIR) that the running scenario depends on, wait
# until another broker has taken its role, restart it on its data and ports, and return once all
# three brokers serve again. On onelog one node leads everything (kill-leader.sh kills it); on
# Kafka the partition leaders and each transactional id's coordinator are spread over the
# brokers, so harness/compat/kafka_probe.py picks the one that matters: for txn_leader_kill the
# transaction coordinator of the driver's transactional id (found with FindCoordinator), for
# leader_kill and share_leader_kill the leader of the driver's topic's partition 0. Prints what it
# did on stderr.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
probe="$repo/harness/compat/kafka_probe.py"
ref_dir="${KAFKA_REF_DIR:-./.kafka-ref}"
moved_timeout_s=60

t0=$(date +%s.%N)
elapsed() { awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
found="$(python3 "$probe" target)" || { echo "kill-kafka: no target" >&2; exit 1; }
read -r node key what <<<"$found"
# `moved` follows the same role: this transactional id's coordinator, or this topic's leader.
case "$key" in
    txn:*) export COMPAT_KILL_TXN_ID="${key#txn:}" ;;
    topic:*) export COMPAT_KILL_TOPIC="${key#topic:}" ;;
esac
pid_file="$ref_dir/node-$node/kafka.pid"
[ -s "$pid_file" ] || { echo "kill-kafka: no pid file $pid_file" >&2; exit 1; }
kill -9 "$(cat "$pid_file")"
echo "kill-kafka: $(date +%T.%3N) node $node killed after $(elapsed)s: $what" >&2
until new="$(python3 "$probe" moved "$node" 2>/dev/null)"; do
    awk -v a="$t0" -v b="$(date +%s.%N)" -v t="$moved_timeout_s" 'BEGIN { exit !(b - a < t) }' ||
        { echo "kill-kafka: still on node $node after ${moved_timeout_s}s" >&2; exit 1; }
    sleep 0.2
done
echo "kill-kafka: $(date +%T.%3N) node $new took over after $(elapsed)s" >&2
"$repo/scripts/kafka-reference.sh" up >&2
echo "kill-kafka: $(date +%T.%3N) node $node restarted, all brokers serve, after $(elapsed)s" >&2
