#!/usr/bin/env bash
# The docker-compose.yml demo without Docker: the same three nodes (ids 1-3, the same flags
# and configs, on 127.0.0.1 through scripts/cluster.sh) and the same two demo commands, with
# the leader killed (SIGKILL) partway through and started again.
#
#   scripts/demo.sh
#   ONELOG_BIN=$CARGO_TARGET_DIR/debug/onelog scripts/demo.sh    # a debug build, as tests use
#
# Prints both demos' summaries and exits non-zero if either check failed; stops the cluster
# and removes its directory at the end, pass or fail. For machines without a Docker engine
# (like the one this was written on, which has the docker client only and no `docker compose`).
#
# Binaries: ONELOG_BIN, else ${CARGO_TARGET_DIR:-target}/release/onelog, built first (as
# scripts/cluster.sh does); the demo programs are built into the same target directory and
# profile as that onelog.
# Ports: ONELOG_BASE_PORT (default 19092: Kafka 19092-19094, Raft 19192-19194, admin
# 19292-19294, as in docker-compose.yml). Files: ONELOG_CLUSTER_DIR (default ./.cluster-demo),
# which must not exist yet; each demo's output goes to checkout.out / pipeline.out in it.
# Timing: DEMO_KILL_AFTER_S (default 10) seconds after the demos start, the leader is killed,
# and started again DEMO_DOWN_S (default 3) seconds later.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
export ONELOG_BASE_PORT="${ONELOG_BASE_PORT:-19092}"
export ONELOG_CLUSTER_DIR="${ONELOG_CLUSTER_DIR:-./.cluster-demo}"
# The brokers' --config flags in docker-compose.yml.
export ONELOG_CONFIGS="log.segment.bytes=1048576 group.initial.rebalance.delay.ms=0"
# The demo services' commands in docker-compose.yml, but for --bootstrap
# (harness/tests/demo_compose.rs checks that they agree).
checkout_args=(--mode both --orders 1500 --per-second 50)
pipeline_args=(--seconds 30)
kill_after_s="${DEMO_KILL_AFTER_S:-10}"
down_s="${DEMO_DOWN_S:-3}"
cluster="$repo/scripts/cluster.sh"

die() { echo "demo.sh: $*" >&2; exit 1; }

[ -e "$ONELOG_CLUSTER_DIR" ] && die "$ONELOG_CLUSTER_DIR exists: another demo or cluster? remove it first"

# The onelog binary, and the demos built beside it (same target directory and profile).
if [ -z "${ONELOG_BIN:-}" ]; then
    (cd "$repo" && cargo build --release -p broker) || die "building the broker failed"
    target="${CARGO_TARGET_DIR:-$repo/target}"
    [[ "$target" = /* ]] || target="$repo/$target"
    export ONELOG_BIN="$target/release/onelog"
fi
[ -x "$ONELOG_BIN" ] || die "ONELOG_BIN=$ONELOG_BIN is not executable"
bin_dir="$(cd "$(dirname "$ONELOG_BIN")" && pwd)"
profile_flag=()
[ "$(basename "$bin_dir")" = release ] && profile_flag=(--release)
(cd "$repo" && CARGO_TARGET_DIR="$(dirname "$bin_dir")" cargo build "${profile_flag[@]}" -p harness \
    --bin demo-checkout --bin demo-pipeline) || die "building the demo programs failed"

pids=()
cleanup() {
    local pid
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    "$cluster" down >/dev/null 2>&1 || true
    rm -rf "$ONELOG_CLUSTER_DIR"
}
trap cleanup EXIT

up_out="$("$cluster" up 3)"
echo "$up_out"
bootstrap="$(sed -n 's/^bootstrap servers: //p' <<<"$up_out")"
started=$SECONDS
"$bin_dir/demo-checkout" --bootstrap "$bootstrap" "${checkout_args[@]}" >"$ONELOG_CLUSTER_DIR/checkout.out" 2>&1 &
checkout_pid=$!
"$bin_dir/demo-pipeline" --bootstrap "$bootstrap" "${pipeline_args[@]}" >"$ONELOG_CLUSTER_DIR/pipeline.out" 2>&1 &
pipeline_pid=$!
pids=("$checkout_pid" "$pipeline_pid")
echo "demo-checkout ${checkout_args[*]} (pid $checkout_pid), demo-pipeline ${pipeline_args[*]} (pid $pipeline_pid): bootstrap $bootstrap"

sleep "$kill_after_s"
"$cluster" status
leader="$("$cluster" leader)"
echo "$((SECONDS - started)) s: killing the leader, node $leader"
"$cluster" kill "$leader"
sleep "$down_s"
echo "$((SECONDS - started)) s: starting node $leader again"
"$cluster" start "$leader"
"$cluster" status

failed=0
checkout_status=0
wait "$checkout_pid" || checkout_status=$?
pipeline_status=0
wait "$pipeline_pid" || pipeline_status=$?
pids=()
for demo in checkout pipeline; do
    status_var="${demo}_status"
    if [ "${!status_var}" -ne 0 ]; then
        failed=1
        echo "--- demo-$demo exited with ${!status_var}; its output:"
        cat "$ONELOG_CLUSTER_DIR/$demo.out"
    fi
done
echo "--- summaries ($((SECONDS - started)) s after the demos started; leader node $leader killed at ${kill_after_s} s, back ${down_s} s later)"
tail -n 1 "$ONELOG_CLUSTER_DIR/checkout.out"
tail -n 1 "$ONELOG_CLUSTER_DIR/pipeline.out"
exit "$failed"
