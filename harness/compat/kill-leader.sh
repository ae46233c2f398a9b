#!/usr/bin/env bash
# COMPAT_KILL_LEADER for the compatibility matrix: kill -9 the current Raft leader of the
# cluster in ONELOG_CLUSTER_DIR (ports from ONELOG_BASE_PORT), wait until the surviving nodes
# agree on a new leader (scripts/cluster.sh leader asks each node's admin API), restart the killed
# node on its data and ports, and return once it serves Kafka again. A driver runs it while it
# produces and consumes; exit status 0 means the cluster is whole again.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
cluster="$repo/scripts/cluster.sh"
new_leader_timeout_s=30

old="$("$cluster" leader)"
"$cluster" kill "$old" >&2
waited=0
until new="$("$cluster" leader 2>/dev/null)" && [ "$new" != "$old" ]; do
    [ "$waited" -lt $((new_leader_timeout_s * 5)) ] || { echo "kill-leader: no new leader after ${new_leader_timeout_s}s" >&2; exit 1; }
    sleep 0.2
    waited=$((waited + 1))
done
echo "kill-leader: node $old killed, node $new leads after $((waited / 5)).$(( (waited % 5) * 2 ))s" >&2
"$cluster" start "$old" >&2
echo "kill-leader: node $old restarted" >&2
