#!/usr/bin/env bash
# Where the onelog leader's CPU goes under TxWritesBench (issue 17): starts three release nodes,
# and for each producer count given runs TxWritesBench once unrecorded (warm-up), then once
# measured. For the measured run it reports the bench's summary, each node's CPU per
# transaction (utime + stime from /proc over the measured run only, divided by its
# transactions) and the client process's CPU per transaction; with PERF=1 (the default)
# `perf record` samples the leader during the measured run and the script writes the
# `perf report --no-children` top-30 by symbol (self cost) and by shared object to OUT. Then it
# stops the nodes and removes their data. perf.data files stay in OUT.
#
#   scripts/profile-leader.sh [PRODUCERS...]        default: 1 10 50 100
#
# Settings (environment):
#   OUT (/tmp/onelog-profile)      where summaries, logs and perf.data go
#   CLIENT (rust)                  rust: `txbench` (librdkafka); java: dev.onelog.bench (kafka-clients 4.1.1)
#   PERF (1)                       0: no perf (for CPU and TPS figures without its overhead)
#   PERF_SECONDS (8)               how long perf samples, from the start of the measured run
#   PERF_CALL_GRAPH (dwarf,16384)  perf record --call-graph
#   TXES_TOTAL (2000)              measured transactions over all producers (at least 50 each)
#   ONELOG_BASE_PORT (19692), ONELOG_CLUSTER_DIR ($OUT/cluster), ONELOG_BIN, TXBENCH_BIN
#   LABEL                          prefix of the output files (default: the client)
#   RUN_WARMUP (0)                 unrecorded iterations inside the measured process (counted in
#                                  the CPU per transaction, as bench-compare.sh does)
# Needs perf (Debian's linux-perf); hardware counters are not needed (cpu-clock is a software
# event). Prints one line per run: producers, TPS, p50/p99, CPU µs/tx per node and client, and
# Raft entries per transaction (the leader's applied index over the run: how much it batches).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/onelog-target}"
perf_on="${PERF:-1}"
client="${CLIENT:-rust}"
[ "$perf_on" = 0 ] || command -v perf >/dev/null ||
    { echo "profile-leader.sh: needs perf (apt-get install linux-perf)" >&2; exit 2; }
bin="$CARGO_TARGET_DIR/release"
if [ -z "${ONELOG_BIN:-}" ] || [ -z "${TXBENCH_BIN:-}" ]; then
    cargo build -q --release -p broker --bin onelog -p harness --bin txbench
fi
onelog_bin="${ONELOG_BIN:-$bin/onelog}"
txbench="${TXBENCH_BIN:-$bin/txbench}"
case "$client" in
    rust) bench_cmd=("$txbench" TxWritesBench) ;;
    java) bench_cmd=(java -cp "$(cat "$(scripts/java-build.sh)")" dev.onelog.bench.TxWritesBench) ;;
    *) echo "profile-leader.sh: CLIENT is rust or java, not '$client'" >&2; exit 2 ;;
esac
out="${OUT:-/tmp/onelog-profile}"
label="${LABEL:-$client}"
seconds="${PERF_SECONDS:-8}"
call_graph="${PERF_CALL_GRAPH:-dwarf,16384}"
total="${TXES_TOTAL:-2000}"
base="${ONELOG_BASE_PORT:-19692}"
mkdir -p "$out"
export ONELOG_BIN="$onelog_bin" ONELOG_CLUSTER_DIR="${ONELOG_CLUSTER_DIR:-$out/cluster}" ONELOG_BASE_PORT="$base"
rm -rf "$ONELOG_CLUSTER_DIR"
trap 'scripts/cluster.sh down >/dev/null 2>&1 || true; rm -rf "$ONELOG_CLUSTER_DIR"' EXIT
scripts/cluster.sh up 3 >"$out/cluster-up.log" 2>&1
boot="127.0.0.1:$base,127.0.0.1:$((base + 1)),127.0.0.1:$((base + 2))"
KAFKA_CONNECTION=$boot "$txbench" CreateTopics >"$out/create-topics.log" 2>&1
leader="$(scripts/cluster.sh leader)"
pids=()
for id in 1 2 3; do pids+=("$(cat "$ONELOG_CLUSTER_DIR/node-$id/onelog.pid")"); done
pid="${pids[$((leader - 1))]}"
echo "leader: node $leader, pid $pid; client $client; $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"

# The leader's last applied Raft index (admin API), for Raft entries per transaction.
applied_index() {
    scripts/cluster.sh status | awk -v id="$leader" '$2 == id { for (i = 1; i < NF; i++) if ($i == "last_applied") print $(i + 1) }'
}

# utime + stime in clock ticks of each node, space-separated.
node_ticks() {
    local p
    for p in "${pids[@]}"; do sed 's/^.*) //' "/proc/$p/stat" | awk '{print $12 + $13}'; done | paste -sd' '
}

producers=("$@")
[ "${#producers[@]}" -gt 0 ] || producers=(1 10 50 100)
for p in "${producers[@]}"; do
    txes=$((total / p)); [ "$txes" -ge 50 ] || txes=50
    KAFKA_CONNECTION=$boot WARMUP=100 TXES=100 PRODUCERS="$p" TX_ID="warm$p-$label" \
        "${bench_cmd[@]}" >"$out/$label-warm-$p.log" 2>&1
    rec=""
    if [ "$perf_on" != 0 ]; then
        perf record -q -e cpu-clock -F 499 --call-graph "$call_graph" -p "$pid" -o "$out/$label-leader-$p.data" \
            -- sleep "$seconds" >/dev/null 2>&1 &
        rec=$!
    fi
    before="$(node_ticks)"
    index_before="$(applied_index)"
    # The client's own CPU: its rusage from /usr/bin/time (user + system seconds).
    KAFKA_CONNECTION=$boot WARMUP="${RUN_WARMUP:-0}" TXES="$txes" PRODUCERS="$p" TX_ID="run$p-$label" \
        SUMMARY_FILE="$out/$label-bench-$p.json" timeout 300 /usr/bin/time -f '%U %S' -o "$out/$label-client-$p.time" \
        "${bench_cmd[@]}" >"$out/$label-run-$p.log" 2>&1 || true
    after="$(node_ticks)"
    index_after="$(applied_index)"
    [ -z "$rec" ] || wait "$rec" || true
    python3 "$repo/scripts/profile-leader-result.py" "$out/$label-bench-$p.json" "$before" "$after" "$(getconf CLK_TCK)" "$out/$label-client-$p.time" \
        "$leader" "$index_before" "$index_after"
    if [ "$perf_on" != 0 ]; then
        perf report -i "$out/$label-leader-$p.data" --stdio --no-children --sort dso -g none 2>/dev/null |
            grep '%' | head -8 >"$out/$label-leader-$p.dso.txt" || true
        perf report -i "$out/$label-leader-$p.data" --stdio --no-children --sort sym -g none 2>/dev/null |
            grep -v '^$' | head -45 >"$out/$label-leader-$p.top30.txt" || true
    fi
done
