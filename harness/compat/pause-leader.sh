#!/usr/bin/env bash
# COMPAT_PAUSE_LEADER for the opt-in streams_soak scenario: SIGSTOP the current Raft leader of
# the cluster in ONELOG_CLUSTER_DIR (ports from ONELOG_BASE_PORT / ONELOG_ADMIN_BASE_PORT, as
# scripts/cluster.sh and kill-leader.sh), hold it stopped for COMPAT_PAUSE_S seconds (default 5,
# several times the 300-600 ms election timeout), watching the other nodes elect a new leader,
# then SIGCONT it and return once every node agrees on one leader again. The paused process
# keeps its sockets and its belief that it leads: on SIGCONT it must find the newer term and
# follow. Exit status 0: a new leader was elected during the pause and the cluster is whole
# again; 1 otherwise (the node is resumed in every case).
# Lines: "node N (pid P) paused with SIGSTOP", "node M leads after Xs", "node N resumed with
# SIGCONT after Xs", "every node names node M leader again after Xs".
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
cluster="$repo/scripts/cluster.sh"
cluster_dir="${ONELOG_CLUSTER_DIR:-./.cluster}"
base_port="${ONELOG_BASE_PORT:-9092}"
admin_base_port="${ONELOG_ADMIN_BASE_PORT:-$((base_port + 200))}"
pause_s="${COMPAT_PAUSE_S:-5}"
rejoin_timeout_s=30

now_ms() { echo $(($(date +%s%N) / 1000000)); }
secs() { printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)); }

old="$("$cluster" leader)"
pid="$(cat "$cluster_dir/node-$old/onelog.pid")"
kill -0 "$pid"
n="$(cat "$cluster_dir/nodes")"
kill -s STOP "$pid"
# Never leave the node stopped, whatever happens below.
trap 'kill -s CONT "$pid" 2>/dev/null || true' EXIT
start="$(now_ms)"
echo "pause-leader: node $old (pid $pid) paused with SIGSTOP for ${pause_s}s"

# The others' view, from their admin APIs (the stopped node cannot answer): one leader they all
# name, other than the paused node.
others_leader() {
    local id status leader agreed=""
    for id in $(seq 1 "$n"); do
        [ "$id" = "$old" ] && continue
        status="$(curl -s --max-time 1 "http://127.0.0.1:$((admin_base_port + id - 1))/status")" || return 1
        leader="$(sed -n 's/.*"leader" *: *\([0-9]*\).*/\1/p' <<<"$status")"
        [ -n "$leader" ] && [ "$leader" != "$old" ] || return 1
        if [ -z "$agreed" ]; then agreed="$leader"; elif [ "$agreed" != "$leader" ]; then return 1; fi
    done
    echo "$agreed"
}

new=""
while [ $(($(now_ms) - start)) -lt $((pause_s * 1000)) ]; do
    if [ -z "$new" ] && new="$(others_leader)"; then
        echo "pause-leader: node $new leads after $(secs $(($(now_ms) - start)))s (node $old still stopped)"
    fi
    sleep 0.1
done
kill -s CONT "$pid"
resumed="$(now_ms)"
echo "pause-leader: node $old resumed with SIGCONT after $(secs $((resumed - start)))s"
[ -n "$new" ] || echo "pause-leader: no new leader was elected while node $old was stopped" >&2

until agreed="$("$cluster" leader 2>/dev/null)" && [ -n "$agreed" ]; do
    if [ $(($(now_ms) - resumed)) -ge $((rejoin_timeout_s * 1000)) ]; then
        echo "pause-leader: the nodes do not agree on a leader ${rejoin_timeout_s}s after the resume" >&2
        exit 1
    fi
    sleep 0.2
done
echo "pause-leader: every node names node $agreed leader again after $(secs $(($(now_ms) - resumed)))s"
[ -n "$new" ] || exit 1
