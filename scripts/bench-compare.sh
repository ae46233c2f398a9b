#!/usr/bin/env bash
# onelog against Apache Kafka on this machine, with the Java benchmarks of harness/java
# (issue #6). Starts each system in turn on 127.0.0.1, three nodes each:
#
#   onelog          scripts/cluster.sh up 3 (its own ports and directory)
#   kafka-flush1    scripts/kafka-reference.sh up: Kafka 4.4.0 (its default;
#                   KAFKA_REF_MAVEN_ARGS=-Dkafka.version=V for another), log.flush.interval.messages=1
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
# (both writes benches with 100 B, 1 KiB and 1 MiB records) and the raw throughput (issue 17:
# the reference Kafka's own ProducerPerformance, kafka-producer-perf-test, with 1 KiB records, acks=all,
# enable.idempotence=true and --throughput -1 into topic raw-throughput, replication factor 3,
# as 1 process and then 8 started together, each with its share of RAW_RECORDS; then one
# ConsumerPerformance reading the whole topic; per producer run also the brokers' disk writes,
# write_bytes of /proc/PID/io summed over the three nodes, and their CPU, per byte and per MB
# produced), the consumer catch-up (scripts/bench-catchup.sh: four producers write 4 GB into
# four partitions, then one consumer reads it all from a cold page cache), then stops it and
# wipes its data before the next. Finally
# scripts/bench-report.py writes report.md and the PNG plots.
#
#   scripts/bench-compare.sh [--quick] [--out DIR] [--systems onelog,kafka-flush1,kafka-default]
#
# Full mode writes results/<date>/; --quick (a smoke test: few iterations, sweep 1,10 only,
# no 1 MiB payload) writes results/quick-<date>/, which git ignores. DIR/raw/<system>/ holds,
# per client variant (4.x, 2.x, rust), <bench>.txt (MEASURES: sorted latencies in ns) and
# <bench>.json (the bench's JSON summary, plus cpu_us_per_tx_per_node: each broker node's CPU
# over the run, from /proc, per transaction; the report's concurrency table shows it for
# TxWritesBench); sweep/ and payload/ hold the same per run, logs/
# each run's output. raw-throughput/ holds producer-p<N>-<i>.txt (producer i's output, the
# tool's last line its totals and whole-ms percentiles) and producer-p<N>.json (the run's
# summary: MB/s summed over its producers, each percentile's worst producer, disk bytes and CPU
# per node), consumer.txt and consumer.json, warmup.* when RAW_WARMUP_RECORDS > 0.
# DIR/meta.json records the machine, settings, sections, command and failures.
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
#   RAW_RECORDS                 raw throughput: 1 KiB records per producer run, split over
#                               its producers                      300000 / 5000
#   RAW_PRODUCERS               producer processes of each run     1,8 / 1,2
#   RAW_WARMUP_RECORDS          an unrecorded one-producer run into raw-warmup before them
#                               (for BENCH_SECTIONS=raw: otherwise the main benches have
#                               warmed the brokers up)             50000 / 0
#   RAW_PARTITIONS              partitions of raw-throughput       1
#   RAW_JVM_OPTS                the perf tools' JVM options        -Xmx512m / -Xmx256m
#                               -XX:TieredStopAtLevel=1 (quick figures are not to be quoted)
#   RUN_TIMEOUT                 seconds per bench run              900 / 300
#   CATCHUP_RECORDS             consumer catch-up (scripts/bench-catchup.sh): 1 KiB records
#                               written, then read from a cold page cache   4000000 / 20000
#   CATCHUP_PARTITIONS, CATCHUP_PRODUCERS  its topic's partitions; its producer processes  4, 4
#   CATCHUP_PRODUCER_PROPS      its producers' extra properties  batch.size=262144 linger.ms=20
#   BENCH_SECTIONS              the sections run against each system, a comma-separated subset
#                               of main (the system warm-up and the main benches), sweep,
#                               payload, raw, catchup; e.g. BENCH_SECTIONS=raw for the raw
#                               throughput alone. The report leaves out the sections not run.
#                               Default main,sweep,payload,raw,catchup / main,sweep,payload,raw
#                               (the smoke run is in CI's budget; catchup drops the page cache)
# The full defaults are small because Kafka is slow here: on 2 shared cores its transactional
# streaming iteration takes about 0.22 s. Measured here: full 16.5 minutes, --quick 3.75 minutes
# with warm caches (Maven's first download of the clients and the broker, about 106 MB, and the
# matplotlib install add under a minute; building the broker is not counted). The raw
# throughput section, measured on 2026-12-02 on 2 cores shared with a CI run and another
# engineer's cluster (load average 9 to 25, so slower than an idle machine): full 92 s against
# onelog, 449 s against kafka-flush1 and 291 s against kafka-default (BENCH_SECTIONS=raw, with
# the systems' start and stop: 15.8 minutes); --quick 29 s against onelog and 42 s against
# kafka-flush1 (BENCH_SECTIONS=raw, so against cold brokers), most of it the tools' JVM starts.
#   ONELOG_BIN, TXBENCH_BIN     the broker binary and the Rust benches (else both are built
#                               with cargo build --release; CARGO_TARGET_DIR is honoured)
#   BENCH_PORT_BASE             onelog's Kafka ports (default 19092..19094; Raft +100,
#                               admin +200)
#   KAFKA_REF_PORT, KAFKA_REF_CONTROLLER_PORT  Kafka's ports, read by kafka-reference.sh too
#                               (default 29092..29094, 29192..29194)
#   BENCH_WORK_DIR              the running system's data (default .bench-compare), wiped
#                               after each system
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
    PAYLOAD_MIB_TXES PAYLOAD_MIB_WARMUP SYSTEM_WARMUP RUN_TIMEOUT ONELOG_BIN TXBENCH_BIN BENCH_PORT_BASE \
    RAW_RECORDS RAW_PRODUCERS RAW_WARMUP_RECORDS RAW_PARTITIONS RAW_JVM_OPTS BENCH_SECTIONS BENCH_WORK_DIR KAFKA_REF_PORT \
    KAFKA_REF_CONTROLLER_PORT CATCHUP_RECORDS CATCHUP_PARTITIONS CATCHUP_PRODUCERS CATCHUP_PRODUCER_PROPS; do
    [ -n "${!v:-}" ] && command_line+="$v=$(printf %q "${!v}") "
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
    : "${RAW_RECORDS:=5000}" "${RAW_WARMUP_RECORDS:=0}" "${RAW_JVM_OPTS:=-Xmx256m -XX:TieredStopAtLevel=1}"
    # Two producers, not eight: the smoke run is in CI's 30-minute budget, and eight tool JVMs
    # starting on two cores cost about a minute per system there.
    : "${RAW_PRODUCERS:=1,2}" "${CATCHUP_RECORDS:=20000}" "${BENCH_SECTIONS:=main,sweep,payload,raw}"
    mode=quick
else
    : "${WARMUP:=100}" "${TXES:=500}" "${SWEEP_TXES:=500}" "${SWEEP_WARMUP:=100}" "${SWEEP_MIN_TXES:=20}"
    : "${SWEEP_PRODUCERS:=1,10,50,100}" "${PAYLOAD_TXES:=200}" "${PAYLOAD_WARMUP:=50}"
    : "${PAYLOADS:=100,1024,1048576}" "${PAYLOAD_MIB_TXES:=50}" "${PAYLOAD_MIB_WARMUP:=10}" "${SYSTEM_WARMUP:=500}"
    : "${RUN_TIMEOUT:=900}" "${RAW_RECORDS:=300000}" "${RAW_WARMUP_RECORDS:=50000}" "${RAW_JVM_OPTS:=-Xmx512m}"
    : "${CATCHUP_RECORDS:=4000000}" "${BENCH_SECTIONS:=main,sweep,payload,raw,catchup}"
    mode=full
fi
: "${RAW_PRODUCERS:=1,8}" "${RAW_PARTITIONS:=1}" "${CATCHUP_PARTITIONS:=4}" "${CATCHUP_PRODUCERS:=4}"
: "${CATCHUP_PRODUCER_PROPS:=batch.size=262144 linger.ms=20}"
date_tag="$(date -u +%Y-%m-%d)"
if [ -z "$out" ]; then
    if [ "$quick" = 1 ]; then out="results/quick-$date_tag"; else out="results/$date_tag"; fi
fi
case "$out" in /*) ;; *) out="$repo/$out" ;; esac
mkdir -p "$out"
rm -rf "$out/raw"
mkdir -p "$out/raw"

port_base="${BENCH_PORT_BASE:-19092}"   # below the ephemeral port range
work="${BENCH_WORK_DIR:-$repo/.bench-compare}"   # the systems' data, wiped after each
case "$work" in /*) ;; *) work="$repo/$work" ;; esac
onelog_dir="$work/onelog"
kafka_dir="$work/kafka"
benches=(BaseWritesBench TxWritesBench BaseStreamingBench TxStreamingBench)
clients=(4.x 2.x rust)
IFS=, read -r -a system_list <<<"$systems"
IFS=, read -r -a sweep_list <<<"$SWEEP_PRODUCERS"
IFS=, read -r -a payload_list <<<"$PAYLOADS"
IFS=, read -r -a raw_producer_list <<<"$RAW_PRODUCERS"
IFS=, read -r -a section_list <<<"$BENCH_SECTIONS"
for s in "${system_list[@]}"; do
    case "$s" in onelog | kafka-flush1 | kafka-default) ;; *) echo "bench-compare.sh: unknown system '$s'" >&2; exit 2 ;; esac
done
for s in "${section_list[@]}"; do
    case "$s" in main | sweep | payload | raw | catchup) ;; *) echo "bench-compare.sh: unknown section '$s' (main, sweep, payload, raw, catchup)" >&2; exit 2 ;; esac
done
for p in "${raw_producer_list[@]}"; do
    [[ "$p" =~ ^[1-9][0-9]*$ ]] || { echo "bench-compare.sh: RAW_PRODUCERS: '$p' is not a count" >&2; exit 2; }
done
has_section() { [[ ",$BENCH_SECTIONS," == *",$1,"* ]]; }

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*"; }
die() { echo "bench-compare.sh: $*" >&2; exit 1; }

# ---- build first, so that no build lands inside a measurement -------------------------------
t_start=$SECONDS
log "building the Java benches (kafka-clients 4.1.1 and 2.8.2) and resolving the reference Kafka"
cp_4="$(scripts/java-build.sh)" || die "building harness/java failed"
cp_2="$(scripts/java-build.sh --variant kafka2 -Dkafka2)" || die "building harness/java (kafka2) failed"
KAFKA_REF_DIR="$kafka_dir" scripts/kafka-reference.sh classpath >/dev/null || die "resolving Kafka failed"
kafka_version="$(KAFKA_REF_DIR="$kafka_dir" scripts/kafka-reference.sh version)"
log "reference Kafka $kafka_version"
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
# The tree the binaries were built from, taken now: edits made while the benches run are not
# in them.
built_commit="$(git rev-parse --short HEAD 2>/dev/null || echo ?)$(git diff --quiet HEAD -- broker raft-store kafka-compat state vendor 2>/dev/null || echo ' (modified)')"
# A broker binary given from outside may be of any commit: the report says so.
[ "$ONELOG_BIN" = "$target/release/onelog" ] || built_commit="given as ONELOG_BIN, tree at $built_commit"

classpath_of() { if [ "$1" = 2.x ]; then cat "$cp_2"; else cat "$cp_4"; fi; }
# bench_command CLIENT BENCH: sets cmd to the command line of one bench run of a client variant.
bench_command() {
    case "$1" in
        rust) cmd=("$TXBENCH_BIN" "$2") ;;
        *) cmd=(java -cp "$(classpath_of "$1")" "dev.onelog.bench.$2") ;;
    esac
}

# ---- the runs --------------------------------------------------------------------------------
per_system=0
has_section main && per_system=$((per_system + 2 + ${#benches[@]} * ${#clients[@]}))
has_section sweep && per_system=$((per_system + 2 * ${#sweep_list[@]}))
has_section payload && per_system=$((per_system + 2 * ${#payload_list[@]}))
has_section raw && per_system=$((per_system + ${#raw_producer_list[@]} + 1 + (RAW_WARMUP_RECORDS > 0 ? 1 : 0)))
has_section catchup && per_system=$((per_system + 2))
total=$(( per_system * ${#system_list[@]} ))
step=0
failures=()
system_seconds=()
current=""   # the system running now, for the exit trap

bootstrap_of() {
    if [ "$1" = onelog ]; then
        echo "127.0.0.1:$port_base,127.0.0.1:$((port_base + 1)),127.0.0.1:$((port_base + 2))"
    else
        local k="${KAFKA_REF_PORT:-29092}"
        echo "127.0.0.1:$k,127.0.0.1:$((k + 1)),127.0.0.1:$((k + 2))"
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
                if [ -f "$kafka_dir/node-$id/kafka.log" ]; then
                    grep -E ' (WARN|ERROR) ' "$kafka_dir/node-$id/kafka.log" | tail -n 200 >"$out/raw/$s/logs/node-$id.warn.log" || true
                fi
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

# create_topics SYSTEM [ENV=VALUE...]: topic1 and topic2, or what TOPICS=... says.
create_topics() {
    local s="$1"
    shift
    for _ in 1 2 3 4 5; do
        if env KAFKA_CONNECTION="$(bootstrap_of "$s")" REPLICATION_FACTOR=3 TOPIC_CONFIG=max.message.bytes=2097152 "$@" \
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
        python3 "$repo/scripts/bench-compare-results.py" cpu "$base.json" "$((SECONDS - t0))" "$cpu_before" \
            "$(system_cpu_ticks)" "$(getconf CLK_TCK)"
    else
        local why
        why="$(grep -m1 -E 'Exception|Error|failed' "$logf" | cut -c1-240 || true)"
        [ "$rc" -eq 124 ] && why="timed out after ${RUN_TIMEOUT}s; $why"
        echo "FAILED (exit $rc, $((SECONDS - t0))s): ${why:-see $logf}"
        failures+=("$s $client $bench $label: exit $rc: ${why:-see log} (log ${logf#"$out/"})")
        rm -f "$base.json"
    fi
}

# ---- raw throughput (issue 17): Kafka's own perf tools ----------------------------------------
# ProducerPerformance and ConsumerPerformance from the reference Kafka's classpath of
# kafka-reference.sh, with RAW_JVM_OPTS: in full mode the heap Kafka's
# kafka-producer-perf-test.sh gives them and the full JIT (C1 alone would make the client the
# bottleneck); --quick stops at C1, as kafka-reference.sh's `tool` does, because there the
# start of nine JVMs on two cores is most of the section's time.
# The tools run through `kafka-reference.sh tool` (its classpath and quiet log4j config), in
# a directory of their own so that wiping a Kafka system's data does not remove the config.
raw_tools_dir="$work/tools"
raw_java() {
    raw_cmd=(env KAFKA_REF_DIR="$raw_tools_dir" KAFKA_REF_TOOL_JVM_OPTS="$RAW_JVM_OPTS" scripts/kafka-reference.sh tool)
}

# Per node of the running system, space-separated: FIELD (write_bytes or wchar) of
# /proc/PID/io. write_bytes counts what the process sends towards the disk when it dirties a
# page-cache folio, the whole folio each time a clean one is dirtied again: after an fsync,
# a 1 KiB append into a file pre-written in 1 MiB writes (onelog's Raft log segments) counts
# 1 MiB on this kernel (6.18, ext4 large folios), while the disk gets about 4 KiB. wchar
# counts the bytes of write calls, sockets included (the JVM's sends, not onelog's).
system_io_bytes() {
    local id pid
    for id in 1 2 3; do
        pid="$(cat "$(node_pid_file "$id")" 2>/dev/null || true)"
        { [ -n "$pid" ] && awk -v f="$1:" '$1 == f { print $2 }' "/proc/$pid/io" 2>/dev/null; } || echo 0
    done | paste -sd' '
}
# Per node, the disk space its data directory takes (allocated blocks, not apparent sizes:
# onelog's partition segments are sparse).
system_stored_bytes() {
    local id
    for id in 1 2 3; do
        du -s --block-size=1 "$(node_data_dir "$id")" 2>/dev/null | awk '{ print $1 }' || echo 0
    done | paste -sd' '
}
node_pid_file() {
    case "$current" in onelog) echo "$onelog_dir/node-$1/onelog.pid" ;; *) echo "$kafka_dir/node-$1/kafka.pid" ;; esac
}
node_data_dir() {
    case "$current" in onelog) echo "$onelog_dir/node-$1" ;; *) echo "$kafka_dir/node-$1/data" ;; esac
}

# raw_produce SYSTEM PRODUCERS TOPIC RECORDS NAME [SUBDIR [PROP=VALUE...]]: PRODUCERS
# ProducerPerformance processes started together, RECORDS in all split between them, with the
# producer properties PROP=VALUE beside the section's own; each one's output in
# SUBDIR/NAME-<i>.txt (SUBDIR raw-throughput by default), the run's summary (with the brokers'
# disk writes and CPU over it) in SUBDIR/NAME.json. Prints one line; a failure is recorded in
# failures.
raw_produce() {
    local s="$1" n="$2" topic="$3" records="$4" name="$5" sub="${6:-raw-throughput}"
    local -a props=("${@:7}")
    local dir="$out/raw/$s/$sub" t0=$SECONDS i per rc=0 why=""
    step=$((step + 1))
    printf '%s [%d/%d] %-13s %-18s %-4s %s ... ' "$(date +%H:%M:%S)" "$step" "$total" "$s" ProducerPerformance "$kafka_version" \
        "$name: $n producer(s), $records x 1 KiB"
    rm -f "$dir/$name".* "$dir/$name"-*
    local -a raw_cmd pids=()
    raw_java
    local io0 wchar0 cpu0 stored0
    io0="$(system_io_bytes write_bytes)" wchar0="$(system_io_bytes wchar)" cpu0="$(system_cpu_ticks)"
    stored0="$(system_stored_bytes)"
    for ((i = 1; i <= n; i++)); do
        per=$((records / n + (i <= records % n ? 1 : 0)))
        {
            timeout "$RUN_TIMEOUT" "${raw_cmd[@]}" org.apache.kafka.tools.ProducerPerformance --topic "$topic" \
                --num-records "$per" --record-size 1024 --throughput -1 \
                --producer-props bootstrap.servers="$(bootstrap_of "$s")" acks=all enable.idempotence=true \
                client.id="$name-$i" "${props[@]}" >"$dir/$name-$i.txt" 2>&1
            echo "$? $per $(date +%s.%N)" >"$dir/$name-$i.exit"
        } &
        pids+=($!)
    done
    wait "${pids[@]}" || true
    local result
    result="$(python3 "$repo/scripts/bench-compare-results.py" producers "$dir" "$name" "$s" "$n" "$records" \
        "$((SECONDS - t0))" "$io0" "$(system_io_bytes write_bytes)" \
        "$wchar0" "$(system_io_bytes wchar)" "$cpu0" "$(system_cpu_ticks)" "$stored0" "$(system_stored_bytes)" \
        "$(getconf CLK_TCK)" "$RUN_TIMEOUT" 2>&1)" || rc=$?
    echo "$result"
    [ "$rc" -eq 0 ] || failures+=("$s $sub $name: ${result#FAILED } (raw/$s/$sub/$name-*.txt)")
}

# raw_consume SYSTEM TOPIC MESSAGES [SUBDIR]: one ConsumerPerformance reading the whole topic,
# its output in SUBDIR/consumer.txt and summary in consumer.json (SUBDIR raw-throughput by
# default).
raw_consume() {
    local s="$1" topic="$2" messages="$3" sub="${4:-raw-throughput}" t0=$SECONDS rc=0
    local dir="$out/raw/$s/$sub"
    step=$((step + 1))
    printf '%s [%d/%d] %-13s %-18s %-4s %s ... ' "$(date +%H:%M:%S)" "$step" "$total" "$s" ConsumerPerformance "$kafka_version" \
        "$messages x 1 KiB"
    rm -f "$dir"/consumer.*
    local -a raw_cmd
    raw_java
    timeout "$RUN_TIMEOUT" "${raw_cmd[@]}" org.apache.kafka.tools.ConsumerPerformance --bootstrap-server "$(bootstrap_of "$s")" \
        --topic "$topic" --messages "$messages" --timeout 60000 --group "raw-consumer-$(date +%s)" \
        >"$dir/consumer.txt" 2>&1 || rc=$?
    local result
    result="$(python3 "$repo/scripts/bench-compare-results.py" consumer "$dir" "$s" "$messages" "$rc" \
        "$((SECONDS - t0))" 2>&1)" || rc=$?
    echo "$result"
    [ "$rc" -eq 0 ] || failures+=("$s $sub consumer: ${result#FAILED } (raw/$s/$sub/consumer.txt)")
}

# The raw-throughput section of one system: topic raw-throughput (RAW_PARTITIONS partitions,
# replication factor 3), an unrecorded warm-up into raw-warmup, then each RAW_PRODUCERS run
# into raw-throughput, then one consumer over everything the runs wrote.
raw_section() {
    local s="$1" p consumed=0
    mkdir -p "$out/raw/$s/raw-throughput"
    if ! create_topics "$s" TOPICS=raw-throughput,raw-warmup PARTITIONS="$RAW_PARTITIONS" TOPIC_CONFIG=; then
        failures+=("$s raw-throughput: CreateTopics failed (raw/$s/logs/create-topics.log)")
        step=$((step + ${#raw_producer_list[@]} + 1 + (RAW_WARMUP_RECORDS > 0 ? 1 : 0)))
        return
    fi
    [ "$RAW_WARMUP_RECORDS" -gt 0 ] && raw_produce "$s" 1 raw-warmup "$RAW_WARMUP_RECORDS" warmup
    for p in "${raw_producer_list[@]}"; do
        raw_produce "$s" "$p" raw-throughput "$RAW_RECORDS" "producer-p$p"
        [ -s "$out/raw/$s/raw-throughput/producer-p$p.json" ] && consumed=$((consumed + RAW_RECORDS))
    done
    if [ "$consumed" -gt 0 ]; then
        raw_consume "$s" raw-throughput "$consumed"
    else
        step=$((step + 1))
        failures+=("$s raw-throughput consumer: not run, no producer run succeeded")
    fi
}

# shellcheck source=scripts/bench-catchup.sh
source "$repo/scripts/bench-catchup.sh"

cp_4_path="$(cat "$cp_4")"
log "$mode run: ${system_list[*]}; $total bench runs; results in ${out#"$repo/"}"
log "main benches WARMUP=$WARMUP TXES=$TXES; sweep producers $SWEEP_PRODUCERS (SWEEP_TXES=$SWEEP_TXES in all);" \
    "payloads $PAYLOADS; system warm-up $SYSTEM_WARMUP; raw throughput RAW_RECORDS=$RAW_RECORDS per run," \
    "producers $RAW_PRODUCERS; catch-up CATCHUP_RECORDS=$CATCHUP_RECORDS; sections $BENCH_SECTIONS"
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
    if has_section main; then
        # Unrecorded: a fresh JVM broker runs interpreted code at first.
        run_bench "$s" 4.x BaseWritesBench 0 $((SYSTEM_WARMUP / 10)) "$out/raw/$s/warmup/BaseWritesBench" "system warm-up" PRODUCERS=10
        run_bench "$s" 4.x TxWritesBench 0 $((SYSTEM_WARMUP / 50 > 0 ? SYSTEM_WARMUP / 50 : 1)) "$out/raw/$s/warmup/TxWritesBench" \
            "system warm-up" PRODUCERS=10
        for client in "${clients[@]}"; do
            for bench in "${benches[@]}"; do
                run_bench "$s" "$client" "$bench" "$WARMUP" "$TXES" "$out/raw/$s/$client/$bench" ""
            done
        done
    fi
    if has_section sweep; then
        for bench in TxWritesBench BaseWritesBench; do
            for p in "${sweep_list[@]}"; do
                per=$((SWEEP_TXES / p)); [ "$per" -lt "$SWEEP_MIN_TXES" ] && per=$SWEEP_MIN_TXES
                warm=$((SWEEP_WARMUP / p)); [ "$warm" -lt 5 ] && warm=5
                run_bench "$s" 4.x "$bench" "$warm" "$per" "$out/raw/$s/sweep/$bench-p$p" "producers=$p" PRODUCERS="$p"
            done
        done
    fi
    if has_section payload; then
        for bench in TxWritesBench BaseWritesBench; do
            for bytes in "${payload_list[@]}"; do
                if [ "$bytes" -ge 1048576 ]; then tx=$PAYLOAD_MIB_TXES wu=$PAYLOAD_MIB_WARMUP; else tx=$PAYLOAD_TXES wu=$PAYLOAD_WARMUP; fi
                run_bench "$s" 4.x "$bench" "$wu" "$tx" "$out/raw/$s/payload/$bench-b$bytes" "payload=${bytes}B" PAYLOAD_BYTES="$bytes"
            done
        done
    fi
    if has_section raw; then
        t_raw=$SECONDS
        raw_section "$s"
        log "$s raw throughput in $((SECONDS - t_raw)) s"
    fi
    if has_section catchup; then
        t_catchup=$SECONDS
        catchup_section "$s"
        log "$s consumer catch-up in $((SECONDS - t_catchup)) s"
    fi
    log "stopping $s (and wiping its data)"
    stop_system "$s"
    system_seconds+=("$s=$((SECONDS - t_sys))")
    log "$s done in $((SECONDS - t_sys)) s"
done
rm -rf "$raw_tools_dir"
rmdir "$work" 2>/dev/null || true
t_runs=$SECONDS

# ---- meta.json and the report -----------------------------------------------------------------
printf '%s\n' "${failures[@]+"${failures[@]}"}" >"$out/raw/failures.txt"
META_MODE="$mode" META_COMMAND="$command_line" META_SYSTEMS="$systems" META_SECONDS="${system_seconds[*]}" \
    META_BUILD=$((t_built - t_start)) META_RUNS=$((t_runs - t_built)) META_BIN="$ONELOG_BIN" \
    META_COMMIT="$built_commit" META_KAFKA="$kafka_version" \
    META_JAVA="$(java -version 2>&1 | head -n 1)" \
    WARMUP="$WARMUP" TXES="$TXES" SWEEP_TXES="$SWEEP_TXES" SWEEP_WARMUP="$SWEEP_WARMUP" SWEEP_MIN_TXES="$SWEEP_MIN_TXES" \
    SWEEP_PRODUCERS="$SWEEP_PRODUCERS" PAYLOADS="$PAYLOADS" PAYLOAD_TXES="$PAYLOAD_TXES" PAYLOAD_WARMUP="$PAYLOAD_WARMUP" \
    PAYLOAD_MIB_TXES="$PAYLOAD_MIB_TXES" PAYLOAD_MIB_WARMUP="$PAYLOAD_MIB_WARMUP" SYSTEM_WARMUP="$SYSTEM_WARMUP" \
    RAW_RECORDS="$RAW_RECORDS" RAW_PRODUCERS="$RAW_PRODUCERS" RAW_WARMUP_RECORDS="$RAW_WARMUP_RECORDS" \
    RAW_PARTITIONS="$RAW_PARTITIONS" RAW_JVM_OPTS="$RAW_JVM_OPTS" BENCH_SECTIONS="$BENCH_SECTIONS" \
    CATCHUP_RECORDS="$CATCHUP_RECORDS" CATCHUP_PARTITIONS="$CATCHUP_PARTITIONS" CATCHUP_PRODUCERS="$CATCHUP_PRODUCERS" \
    CATCHUP_PRODUCER_PROPS="$CATCHUP_PRODUCER_PROPS" \
    python3 "$repo/scripts/bench-compare-results.py" meta "$out/meta.json" "$out/raw/failures.txt"

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
