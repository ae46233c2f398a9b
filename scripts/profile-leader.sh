#!/usr/bin/env bash
# Where the onelog leader's CPU goes under TxWritesBench (issue 17): starts three release nodes
# on ports 19692.. (Kafka), 19792.. (Raft), 19892.. (admin), and for each producer count given
# runs the Rust TxWritesBench (`txbench`, librdkafka) once unrecorded, then once while
# `perf record -e cpu-clock -g` samples the leader for PERF_SECONDS; prints the bench's summary
# and the leader's profile by binary and by the system calls and onelog functions that cost
# most (inclusive), then stops the nodes and removes their data. Profiles stay in OUT.
#
#   scripts/profile-leader.sh [PRODUCERS...]        default: 1 10 50 100
#
# Settings (environment): OUT (default /tmp/onelog-profile), PERF_SECONDS (8), TXES per
# producer for the recorded run (2000 / producers, at least 50). Needs perf (Debian's
# linux-perf); hardware counters are not needed (cpu-clock is a software event).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/onelog-target}"
command -v perf >/dev/null || { echo "profile-leader.sh: needs perf (apt-get install linux-perf)" >&2; exit 2; }
cargo build -q --release -p broker --bin onelog -p harness --bin txbench
bin="$CARGO_TARGET_DIR/release"
out="${OUT:-/tmp/onelog-profile}"
seconds="${PERF_SECONDS:-8}"
mkdir -p "$out"
export ONELOG_BIN="$bin/onelog" ONELOG_CLUSTER_DIR="$out/cluster" ONELOG_BASE_PORT=19692
rm -rf "$ONELOG_CLUSTER_DIR"
trap 'scripts/cluster.sh down >/dev/null 2>&1 || true; rm -rf "$ONELOG_CLUSTER_DIR"' EXIT
scripts/cluster.sh up 3 >"$out/cluster-up.log" 2>&1
boot=127.0.0.1:19692,127.0.0.1:19693,127.0.0.1:19694
KAFKA_CONNECTION=$boot "$bin/txbench" CreateTopics >"$out/create-topics.log" 2>&1
leader="$(scripts/cluster.sh leader)"
pid="$(cat "$ONELOG_CLUSTER_DIR/node-$leader/onelog.pid")"
echo "leader: node $leader, pid $pid"
producers=("$@")
[ "${#producers[@]}" -gt 0 ] || producers=(1 10 50 100)
for p in "${producers[@]}"; do
    txes=$((2000 / p)); [ "$txes" -ge 50 ] || txes=50
    KAFKA_CONNECTION=$boot WARMUP=100 TXES=100 PRODUCERS="$p" TX_ID="warm$p" GROUP="warm$p" \
        "$bin/txbench" TxWritesBench >"$out/warm-$p.log" 2>&1
    perf record -q -e cpu-clock -F 499 -g -p "$pid" -o "$out/leader-$p.data" -- sleep "$seconds" >/dev/null 2>&1 &
    rec=$!
    KAFKA_CONNECTION=$boot WARMUP=0 TXES="$txes" PRODUCERS="$p" TX_ID="run$p" GROUP="run$p" \
        SUMMARY_FILE="$out/bench-$p.json" timeout 120 "$bin/txbench" TxWritesBench >"$out/run-$p.log" 2>&1 || true
    wait "$rec" || true
    echo "== $p producers: $(cat "$out/bench-$p.json" 2>/dev/null || echo 'bench failed')"
    perf report -i "$out/leader-$p.data" --stdio --no-children --sort dso -g none 2>/dev/null | grep '%' | head -4 || true
    perf report -i "$out/leader-$p.data" --stdio --children --sort sym -g none 2>/dev/null | grep '%' |
        grep -E 'onelog_state|broker::|raft_store|openraft::core|sys_fdatasync|sys_sendto|sys_futex|sys_epoll|ksys_write|sys_recvfrom' |
        head -12 || true
done
echo "profiles: $out/leader-*.data (perf report -i FILE)"
