#!/usr/bin/env bash
# onelog against Apache Kafka on this machine, with the Java benchmarks of harness/java
# (issue #6). Starts each system in turn on 127.0.0.1, three nodes each:
#
#   onelog          scripts/cluster.sh up 3 (its own ports and directory)
#   kafka-flush1    scripts/kafka-reference.sh up: Kafka 4.1.1, log.flush.interval.messages=1
#                   (an fsync per append, as onelog fsyncs before acknowledging)
#   kafka-default   scripts/kafka-reference.sh up --flush-default: Kafka's default flush
#                   settings (the OS flushes; durability from replication alone)
#
# and against each: creates topic1 and topic2 (1 partition, replication factor 3,
# max.message.bytes=2097152 so that the 1 MiB payload fits), runs BaseWritesBench,
# TxWritesBench, BaseStreamingBench and TxStreamingBench (WARMUP then TXES iterations) with
# kafka-clients 4.1.1 (transactions v2) and 2.8.2 (transactions v1), and with their Rust port
# (`txbench`, harness/src/bench/suite: librdkafka through rdkafka), the concurrency sweep
# (TxWritesBench and BaseWritesBench with PRODUCERS=1,10,50,100) and the payload modes
# (both writes benches with 100 B, 1 KiB and 1 MiB records), then stops it and wipes its data
# before the next. Finally scripts/bench-report.py writes report.md and the PNG plots.
#
#   scripts/bench-compare.sh [--quick] [--out DIR] [--systems onelog,kafka-flush1,kafka-default]
#
# Full mode writes results/<date>/; --quick (a smoke test: few iterations, sweep 1,10 only,
# no 1 MiB payload) writes results/quick-<date>/, which git ignores. DIR/raw/<system>/ holds,
# per client variant (4.x, 2.x, rust), <bench>.txt (MEASURES: sorted latencies in ns) and
# <bench>.json (the bench's JSON summary, plus cpu_us_per_tx_per_node: each broker node's CPU
# over the run, from /proc, per transaction; the report's concurrency table shows it for
# TxWritesBench); sweep/ and payload/ hold the same per run, logs/
# each run's output. DIR/meta.json records the machine, settings, command and failures.
#
# Settings (environment; defaults full / --quick):
#   WARMUP, TXES                main benches, per run              100, 500 / 20, 50
#   SWEEP_TXES                  sweep: recorded iterations in all, split over the producers
#                               (at least SWEEP_MIN_TXES each)     500 / 50
#   SWEEP_WARMUP                sweep: warm-up iterations in all   100 / 20 (at least 5 each)
#   SWEEP_MIN_TXES              per producer                       20 / 5
#   SWEEP_PRODUCERS                                                1,10,50,100 / 1,10
#   PAYLOAD_TXES, PAYLOAD_WARMUP  100 B and 1 KiB runs             200, 50 / 30, 10
#   PAYLOAD_MIB_TXES, PAYLOAD_MIB_WARMUP  1 MiB runs               50, 10 / (skipped)
#   PAYLOADS                    bytes                              100,1024,1048576 / 100,1024
#   SYSTEM_WARMUP               iterations in all of the unrecorded warm-up of each freshly
#                               started system (BaseWritesBench, then TxWritesBench with a
#                               fifth as many, 10 producers)        500 / 50
#   RUN_TIMEOUT                 seconds per bench run              900 / 300
# The full defaults are small because Kafka is slow here: on 2 shared cores its transactional
# streaming iteration takes about 0.22 s. Measured here: full 16.5 minutes, --quick 3.75 minutes
# with warm caches (Maven's first download of the clients and the broker, about 106 MB, and the
# matplotlib install add under a minute; building the broker is not counted).
#   ONELOG_BIN, TXBENCH_BIN     the broker binary and the Rust benches (else both are built
#                               with cargo build --release; CARGO_TARGET_DIR is honoured)
#   BENCH_PORT_BASE             onelog's Kafka ports (default 19092..19094; Raft +100,
#                               admin +200); Kafka keeps kafka-reference.sh's 29092..29094
# A failed run is logged, recorded in meta.json and shown in the report; the others go on.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"

quick=0
out=""
systems="onelog,kafka-flush1,kafka-default"
# The command as run, with any settings given in the environment in front.
command_line=""
for v in WARMUP TXES SWEEP_TXES SWEEP_WARMUP SWEEP_MIN_TXES SWEEP_PRODUCERS PAYLOADS PAYLOAD_TXES PAYLOAD_WARMUP \
    PAYLOAD_MIB_TXES PAYLOAD_MIB_WARMUP SYSTEM_WARMUP RUN_TIMEOUT ONELOG_BIN TXBENCH_BIN BENCH_PORT_BASE; do
    [ -n "${!v:-}" ] && command_line+="$v=${!v} "
done
command_line+="scripts/bench-compare.sh${*:+ $*}"
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) quick=1 ;;
        --out) out="${2:?--out DIR}"; shift ;;
        --systems) systems="${2:?--systems LIST}"; shift ;;
        -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) echo "bench-compare.sh: unknown argument '$1' (--quick, --out DIR, --systems LIST)" >&2; exit 2 ;;
    esac
    shift
done

if [ "$quick" = 1 ]; then
    : "${WARMUP:=20}" "${TXES:=50}" "${SWEEP_TXES:=50}" "${SWEEP_WARMUP:=20}" "${SWEEP_MIN_TXES:=5}"
    : "${SWEEP_PRODUCERS:=1,10}" "${PAYLOAD_TXES:=30}" "${PAYLOAD_WARMUP:=10}" "${PAYLOADS:=100,1024}"
    : "${PAYLOAD_MIB_TXES:=20}" "${PAYLOAD_MIB_WARMUP:=5}" "${SYSTEM_WARMUP:=50}" "${RUN_TIMEOUT:=300}"
    mode=quick
else
    : "${WARMUP:=100}" "${TXES:=500}" "${SWEEP_TXES:=500}" "${SWEEP_WARMUP:=100}" "${SWEEP_MIN_TXES:=20}"
    : "${SWEEP_PRODUCERS:=1,10,50,100}" "${PAYLOAD_TXES:=200}" "${PAYLOAD_WARMUP:=50}"
    : "${PAYLOADS:=100,1024,1048576}" "${PAYLOAD_MIB_TXES:=50}" "${PAYLOAD_MIB_WARMUP:=10}" "${SYSTEM_WARMUP:=500}"
    : "${RUN_TIMEOUT:=900}"
    mode=full
fi
date_tag="$(date -u +%Y-%m-%d)"
if [ -z "$out" ]; then
    if [ "$quick" = 1 ]; then out="results/quick-$date_tag"; else out="results/$date_tag"; fi
fi
case "$out" in /*) ;; *) out="$repo/$out" ;; esac
mkdir -p "$out"
rm -rf "$out/raw"
mkdir -p "$out/raw"

port_base="${BENCH_PORT_BASE:-19092}"   # below the ephemeral port range
work="$repo/.bench-compare"          # the systems' data, wiped after each
onelog_dir="$work/onelog"
kafka_dir="$work/kafka"
benches=(BaseWritesBench TxWritesBench BaseStreamingBench TxStreamingBench)
clients=(4.x 2.x rust)
IFS=, read -r -a system_list <<<"$systems"
IFS=, read -r -a sweep_list <<<"$SWEEP_PRODUCERS"
IFS=, read -r -a payload_list <<<"$PAYLOADS"
for s in "${system_list[@]}"; do
    case "$s" in onelog | kafka-flush1 | kafka-default) ;; *) echo "bench-compare.sh: unknown system '$s'" >&2; exit 2 ;; esac
done

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*"; }
die() { echo "bench-compare.sh: $*" >&2; exit 1; }

# ---- build first, so that no build lands inside a measurement -------------------------------
t_start=$SECONDS
log "building the Java benches (kafka-clients 4.1.1 and 2.8.2) and resolving Kafka 4.1.1"
cp_4="$(scripts/java-build.sh)" || die "building harness/java failed"
cp_2="$(scripts/java-build.sh --variant kafka2 -Dkafka2)" || die "building harness/java (kafka2) failed"
KAFKA_REF_DIR="$kafka_dir" scripts/kafka-reference.sh classpath >/dev/null || die "resolving Kafka failed"
target="${CARGO_TARGET_DIR:-$repo/target}"
case "$target" in /*) ;; *) target="$repo/$target" ;; esac
build=()
[ -z "${ONELOG_BIN:-}" ] && build+=(-p broker --bin onelog) && ONELOG_BIN="$target/release/onelog"
[ -z "${TXBENCH_BIN:-}" ] && build+=(-p harness --bin txbench) && TXBENCH_BIN="$target/release/txbench"
if [ "${#build[@]}" -gt 0 ]; then
    log "building release binaries (cargo build --release ${build[*]})"
    cargo build --release "${build[@]}" >&2 || die "building the release binaries failed"
fi
[ -x "$ONELOG_BIN" ] || die "ONELOG_BIN=$ONELOG_BIN is not executable"
[ -x "$TXBENCH_BIN" ] || die "TXBENCH_BIN=$TXBENCH_BIN is not executable"
export ONELOG_BIN
t_built=$SECONDS

classpath_of() { if [ "$1" = 2.x ]; then cat "$cp_2"; else cat "$cp_4"; fi; }
# bench_command CLIENT BENCH: sets cmd to the command line of one bench run of a client variant.
bench_command() {
    case "$1" in
        rust) cmd=("$TXBENCH_BIN" "$2") ;;
        *) cmd=(java -cp "$(classpath_of "$1")" "dev.onelog.bench.$2") ;;
    esac
}

# ---- the runs --------------------------------------------------------------------------------
per_system=$(( 2 + ${#benches[@]} * ${#clients[@]} + 2 * ${#sweep_list[@]} + 2 * ${#payload_list[@]} ))
total=$(( per_system * ${#system_list[@]} ))
step=0
failures=()
system_seconds=()
current=""   # the system running now, for the exit trap

bootstrap_of() {
    if [ "$1" = onelog ]; then
        echo "127.0.0.1:$port_base,127.0.0.1:$((port_base + 1)),127.0.0.1:$((port_base + 2))"
    else
        echo "127.0.0.1:29092,127.0.0.1:29093,127.0.0.1:29094"
    fi
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start_system() {
    local s="$1" logf="$out/raw/$1/logs/system.log" p
    mkdir -p "$out/raw/$s/logs"
    case "$s" in
        onelog)
            for p in $port_base $((port_base + 1)) $((port_base + 2)) $((port_base + 100)) $((port_base + 101)) \
                $((port_base + 102)); do
                port_free "$p" || { echo "port $p is in use (set BENCH_PORT_BASE)" >&2; return 1; }
            done
            rm -rf "$onelog_dir"
            current=onelog
            ONELOG_CLUSTER_DIR="$onelog_dir" ONELOG_BASE_PORT="$port_base" scripts/cluster.sh up 3 >>"$logf" 2>&1 ||
                { tail -n 30 "$logf" >&2; return 1; }
            ;;
        kafka-flush1 | kafka-default)
            rm -rf "$kafka_dir"
            current="$s"
            local flag=()
            [ "$s" = kafka-default ] && flag=(--flush-default)
            KAFKA_REF_DIR="$kafka_dir" scripts/kafka-reference.sh up "${flag[@]}" >>"$logf" 2>&1 ||
                { tail -n 30 "$logf" >&2; return 1; }
            ;;
    esac
}

stop_system() {
    local s="$1" logf="$out/raw/$1/logs/system.log"
    case "$s" in
        onelog)
            ONELOG_CLUSTER_DIR="$onelog_dir" ONELOG_BASE_PORT="$port_base" scripts/cluster.sh down >>"$logf" 2>&1 || true
            # Keep the nodes' logs beside the results, then wipe the data.
            for id in 1 2 3; do
                [ -f "$onelog_dir/node-$id/onelog.log" ] && tail -n 200 "$onelog_dir/node-$id/onelog.log" >"$out/raw/$s/logs/node-$id.tail.log"
            done
            rm -rf "$onelog_dir"
            ;;
        kafka-*)
            for id in 1 2 3; do
                [ -f "$kafka_dir/node-$id/kafka.log" ] && grep -E ' (WARN|ERROR) ' "$kafka_dir/node-$id/kafka.log" |
                    tail -n 200 >"$out/raw/$s/logs/node-$id.warn.log" || true
            done
            KAFKA_REF_DIR="$kafka_dir" scripts/kafka-reference.sh down --wipe >>"$logf" 2>&1 || true
            ;;
    esac
    current=""
}

cleanup() {
    local rc=$?
    if [ -n "$current" ]; then
        log "stopping $current"
        stop_system "$current"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

create_topics() {
    local s="$1" attempt
    for attempt in 1 2 3 4 5; do
        if KAFKA_CONNECTION="$(bootstrap_of "$s")" REPLICATION_FACTOR=3 TOPIC_CONFIG=max.message.bytes=2097152 \
            timeout 120 java -cp "$cp_4_path" dev.onelog.bench.CreateTopics >>"$out/raw/$s/logs/create-topics.log" 2>&1; then
            return 0
        fi
        sleep 2
    done
    tail -n 20 "$out/raw/$s/logs/create-topics.log" >&2
    return 1
}

# run SYSTEM CLIENT BENCH WARMUP TXES OUTBASE [ENV=VALUE...]: one bench run; its summary goes
# to OUTBASE.json, its latencies to OUTBASE.txt, its output to logs/.
# CPU time (utime + stime, clock ticks) of each node of the running system, space-separated,
# from /proc: what a bench run costs the brokers (issue 17 asks for CPU per transaction).
system_cpu_ticks() {
    local pattern id pid
    case "$current" in
        onelog) pattern="$onelog_dir/node-%s/onelog.pid" ;;
        kafka-*) pattern="$kafka_dir/node-%s/kafka.pid" ;;
        *) return 0 ;;
    esac
    for id in 1 2 3; do
        # shellcheck disable=SC2059
        pid="$(cat "$(printf "$pattern" "$id")" 2>/dev/null || true)"
        # Fields 14 and 15 after the command name, which may hold spaces: cut at its ')'.
        { [ -n "$pid" ] && sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | awk '{print $12 + $13}'; } || echo 0
    done | paste -sd' '
}

run_bench() {
    local s="$1" client="$2" bench="$3" warmup="$4" txes="$5" base="$6" label="$7"
    shift 7
    step=$((step + 1))
    local rel="${base#"$out/raw/$s/"}" t0=$SECONDS rc=0
    local logf="$out/raw/$s/logs/${rel//\//-}.log"
    mkdir -p "$(dirname "$base")"
    printf '%s [%d/%d] %-13s %-18s %-4s %s ... ' "$(date +%H:%M:%S)" "$step" "$total" "$s" "$bench" "$client" "$label"
    rm -f "$base.json" "$base.txt"
    local -a cmd
    bench_command "$client" "$bench"
    local cpu_before
    cpu_before="$(system_cpu_ticks)"
    env KAFKA_CONNECTION="$(bootstrap_of "$s")" WARMUP="$warmup" TXES="$txes" MEASURES="$base.txt" \
        SUMMARY_FILE="$base.json" TX_ID="$bench-$client-$(basename "$base")" GROUP="$bench-$client-$(basename "$base")" \
        "$@" timeout "$RUN_TIMEOUT" "${cmd[@]}" >"$logf" 2>&1 || rc=$?
    if [ "$rc" -eq 0 ] && [ -s "$base.json" ]; then
        # Broker CPU per transaction per node: the nodes' CPU over the whole run (client start,
        # warm-up and measured transactions) divided by every transaction the run made, so an
        # upper bound; added to the bench's summary as cpu_us_per_tx_per_node.
        python3 - "$base.json" "$((SECONDS - t0))" "$cpu_before" "$(system_cpu_ticks)" "$(getconf CLK_TCK)" <<'PY'
import json, sys
path, seconds, before, after, hz = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
d = json.load(open(path))
cpu = ""
b, a = [int(x) for x in before.split()], [int(x) for x in after.split()]
txs = d.get("count", 0) + d.get("warmup", 0)
if len(a) == len(b) == 3 and txs > 0:
    per_node = [(y - x) / hz * 1e6 / txs for x, y in zip(b, a)]
    d["cpu_us_per_tx_per_node"] = [round(v) for v in per_node]
    json.dump(d, open(path, "w"))
    cpu = "  cpu %.0f us/tx/node" % (sum(per_node) / 3)
print("p50 %.2f ms  p99 %.2f ms  %.0f tps%s  (%ds)" % (d["p50_ms"], d["p99_ms"], d["tps"], cpu, seconds))
PY
    else
        local why
        why="$(grep -m1 -E 'Exception|Error|failed' "$logf" | cut -c1-240 || true)"
        [ "$rc" -eq 124 ] && why="timed out after ${RUN_TIMEOUT}s; $why"
        echo "FAILED (exit $rc, $((SECONDS - t0))s): ${why:-see $logf}"
        failures+=("$s $client $bench $label: exit $rc: ${why:-see log} (log ${logf#"$out/"})")
        rm -f "$base.json"
    fi
}

cp_4_path="$(cat "$cp_4")"
log "$mode run: ${system_list[*]}; $total bench runs; results in ${out#"$repo/"}"
log "main benches WARMUP=$WARMUP TXES=$TXES; sweep producers $SWEEP_PRODUCERS (SWEEP_TXES=$SWEEP_TXES in all);" \
    "payloads $PAYLOADS; system warm-up $SYSTEM_WARMUP"
for s in "${system_list[@]}"; do
    t_sys=$SECONDS
    log "starting $s"
    if ! start_system "$s"; then
        failures+=("$s: did not start (raw/$s/logs/system.log)")
        stop_system "$s"
        step=$((step + per_system))
        echo "$s: did not start; skipping its $per_system runs" >&2
        system_seconds+=("$s=$((SECONDS - t_sys))")
        continue
    fi
    log "$s up in $((SECONDS - t_sys)) s; creating topic1, topic2 (replication factor 3)"
    if ! create_topics "$s"; then
        failures+=("$s: CreateTopics failed (raw/$s/logs/create-topics.log)")
        stop_system "$s"
        step=$((step + per_system))
        system_seconds+=("$s=$((SECONDS - t_sys))")
        continue
    fi
    # Unrecorded: a fresh JVM broker runs interpreted code at first.
    run_bench "$s" 4.x BaseWritesBench 0 $((SYSTEM_WARMUP / 10)) "$out/raw/$s/warmup/BaseWritesBench" "system warm-up" PRODUCERS=10
    run_bench "$s" 4.x TxWritesBench 0 $((SYSTEM_WARMUP / 50 > 0 ? SYSTEM_WARMUP / 50 : 1)) "$out/raw/$s/warmup/TxWritesBench" \
        "system warm-up" PRODUCERS=10
    for client in "${clients[@]}"; do
        for bench in "${benches[@]}"; do
            run_bench "$s" "$client" "$bench" "$WARMUP" "$TXES" "$out/raw/$s/$client/$bench" ""
        done
    done
    for bench in TxWritesBench BaseWritesBench; do
        for p in "${sweep_list[@]}"; do
            per=$((SWEEP_TXES / p)); [ "$per" -lt "$SWEEP_MIN_TXES" ] && per=$SWEEP_MIN_TXES
            warm=$((SWEEP_WARMUP / p)); [ "$warm" -lt 5 ] && warm=5
            run_bench "$s" 4.x "$bench" "$warm" "$per" "$out/raw/$s/sweep/$bench-p$p" "producers=$p" PRODUCERS="$p"
        done
    done
    for bench in TxWritesBench BaseWritesBench; do
        for bytes in "${payload_list[@]}"; do
            if [ "$bytes" -ge 1048576 ]; then tx=$PAYLOAD_MIB_TXES wu=$PAYLOAD_MIB_WARMUP; else tx=$PAYLOAD_TXES wu=$PAYLOAD_WARMUP; fi
            run_bench "$s" 4.x "$bench" "$wu" "$tx" "$out/raw/$s/payload/$bench-b$bytes" "payload=${bytes}B" PAYLOAD_BYTES="$bytes"
        done
    done
    log "stopping $s (and wiping its data)"
    stop_system "$s"
    system_seconds+=("$s=$((SECONDS - t_sys))")
    log "$s done in $((SECONDS - t_sys)) s"
done
rmdir "$work" 2>/dev/null || true
t_runs=$SECONDS

# ---- meta.json and the report -----------------------------------------------------------------
printf '%s\n' "${failures[@]+"${failures[@]}"}" >"$out/raw/failures.txt"
META_MODE="$mode" META_COMMAND="$command_line" META_SYSTEMS="$systems" META_SECONDS="${system_seconds[*]}" \
    META_BUILD=$((t_built - t_start)) META_RUNS=$((t_runs - t_built)) META_BIN="$ONELOG_BIN" \
    META_COMMIT="$(git rev-parse --short HEAD 2>/dev/null || echo ?)$(git diff --quiet HEAD -- broker raft-store kafka-compat 2>/dev/null || echo ' (modified)')" \
    META_JAVA="$(java -version 2>&1 | head -n 1)" \
    WARMUP="$WARMUP" TXES="$TXES" SWEEP_TXES="$SWEEP_TXES" SWEEP_WARMUP="$SWEEP_WARMUP" SWEEP_MIN_TXES="$SWEEP_MIN_TXES" \
    SWEEP_PRODUCERS="$SWEEP_PRODUCERS" PAYLOADS="$PAYLOADS" PAYLOAD_TXES="$PAYLOAD_TXES" PAYLOAD_WARMUP="$PAYLOAD_WARMUP" \
    PAYLOAD_MIB_TXES="$PAYLOAD_MIB_TXES" PAYLOAD_MIB_WARMUP="$PAYLOAD_MIB_WARMUP" SYSTEM_WARMUP="$SYSTEM_WARMUP" \
    python3 - "$out/meta.json" "$out/raw/failures.txt" <<'EOF'
import json, os, platform, sys, time
e = os.environ
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
mem_kib = next(int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemTotal"))
keys = ["WARMUP", "TXES", "SWEEP_TXES", "SWEEP_WARMUP", "SWEEP_MIN_TXES", "SWEEP_PRODUCERS", "PAYLOADS",
        "PAYLOAD_TXES", "PAYLOAD_WARMUP", "PAYLOAD_MIB_TXES", "PAYLOAD_MIB_WARMUP", "SYSTEM_WARMUP"]
json.dump({
    "mode": e["META_MODE"],
    "command": e["META_COMMAND"],
    "date_utc": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    "nproc": os.cpu_count(),
    "cpu": cpu,
    "memory_gib": round(mem_kib / 2**20, 1),
    "kernel": " ".join(platform.uname()[i] for i in (0, 2, 4)),
    "load_avg_at_end": [round(x, 2) for x in os.getloadavg()],
    "java": e["META_JAVA"],
    "onelog_commit": e["META_COMMIT"],
    "onelog_bin": e["META_BIN"],
    "settings": {k: e[k] for k in keys},
    "systems": e["META_SYSTEMS"].split(","),
    "seconds": {"build": int(e["META_BUILD"]), "runs": int(e["META_RUNS"]),
                "per_system": {k: int(v) for k, v in (kv.split("=", 1) for kv in e["META_SECONDS"].split())}},
    "failures": [l for l in open(sys.argv[2]).read().splitlines() if l],
}, open(sys.argv[1], "w"), indent=2)
EOF

venv="$repo/.venv-bench"
if ! "$venv/bin/python" -c 'import matplotlib' >/dev/null 2>&1; then
    log "installing matplotlib into .venv-bench (PNG plots)"
    { python3 -m venv "$venv" && "$venv/bin/pip" install -q --disable-pip-version-check matplotlib; } >&2 ||
        echo "bench-compare.sh: no matplotlib; the report will have no plots" >&2
fi
py="$venv/bin/python"; [ -x "$py" ] || py=python3
"$py" scripts/bench-report.py "$out"
log "done in $((SECONDS - t_start)) s (build $((t_built - t_start)) s, runs $((t_runs - t_built)) s); report ${out#"$repo/"}/report.md"
if [ "${#failures[@]}" -gt 0 ]; then
    echo "${#failures[@]} failure(s):"
    printf '  %s\n' "${failures[@]}"
    exit 1
fi
