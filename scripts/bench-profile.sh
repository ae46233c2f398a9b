#!/usr/bin/env bash
# Where a transaction's time goes (issue #6): runs one Java benchmark of harness/java against a
# freshly started three-node system on ports that do not collide with bench-compare.sh or the
# default ones, and while the measured run goes on records
#
#   - every fsync-family system call of every node (perf tracepoints, or strace when perf
#     cannot trace syscalls), with the thread and the file it was for,
#   - every Kafka request and response on the loopback (tcpdump; client and inter-broker), and
#     onelog's Raft RPC frames,
#   - on Kafka, the broker's request log (kafka.request.logger at DEBUG, switched on at run
#     time through the broker-loggers config once the warm-up is over): each request's
#     total/local/remote time and its error codes,
#   - on onelog, the Raft log's last index before and after the run (admin API),
#
# then stops the system, wipes its data and prints a per-transaction summary: the bench's own
# percentiles, the client's requests per transaction by API with their wire time, the
# round trips it waited for and the time it spent waiting for none (backoff), inter-broker
# requests per transaction, broker-side time per API (Kafka), fsyncs per transaction per node
# by thread and file, Raft entries per transaction (onelog), and one transaction of median
# length laid out request by request.
#
#   scripts/bench-profile.sh SYSTEM [BENCH]
#   scripts/bench-profile.sh --analyze OUT     the summary again, from an earlier run's OUT
#
# SYSTEM: onelog (scripts/cluster.sh up 3), kafka-flush1 (scripts/kafka-reference.sh up:
# Kafka 4.4.0 by default, with log.flush.interval.messages=1) or kafka-default (... up --flush-default).
# BENCH: TxWritesBench (default), TxStreamingBench, BaseWritesBench or BaseStreamingBench.
#
# Settings (environment):
#   WARMUP, TXES        the measured run's unrecorded and recorded iterations (default 20, 100);
#                       per-transaction figures cover the last TXES transactions only
#   SYSTEM_WARMUP       iterations of an unrecorded run of the same bench first (default 50)
#   CLIENT              4.x (default: kafka-clients 4.1.1, transactions v2) or 2.x (2.8.2, v1)
#   CLIENT_CONFIG       passed to the bench (e.g. retry.backoff.ms=10; see BenchConfig.java)
#   CLIENT_DEBUG=1      also log the client's NetworkClient and TransactionManager at DEBUG
#                       (OUT/client.log; slows the client a little)
#   REQUEST_LOG=0       Kafka: leave the request log off (it costs the brokers some CPU)
#   TRACE=0             no tracing at all (no perf/strace, tcpdump or request log): the bench's
#                       own latency in this harness, to set against a traced run's
#   IDLE_SECONDS        seconds of idle tracing before the run, to show background fsyncs (3)
#   KAFKA_REF_EXTRA_CONFIG  broker settings for an experiment (see kafka-reference.sh)
#   PING_INTERVAL_MS    an experiment: during the measured run, also send an ApiVersions request
#                       to every node every that many ms (from a second client, "profile-pinger")
#   OUT                 output directory (default /tmp/bench-profile/SYSTEM-BENCH-TIME): raw
#                       captures, logs and summary.txt; removed only by hand
#   ONELOG_BIN          the onelog binary (else cluster.sh builds it with cargo)
#   PROFILE_ONELOG_PORT onelog's first Kafka port (default 21092; Raft +100, admin +200)
#   PROFILE_KAFKA_PORT, PROFILE_KAFKA_CONTROLLER_PORT   Kafka's (default 39092, 39192)
#   PROFILE_ONELOG_DIR, PROFILE_KAFKA_DIR   data directories (default /tmp/prof-onelog,
#                       /tmp/prof-kafka); they must not exist; removed at the end
#
# Needs java 17 and mvn (the benches), python3, and as root perf (or strace) and tcpdump;
# without tcpdump the request figures are left out, without both perf and strace the fsync
# ones. Tracing slows both systems (tcpdump copies every packet, the request log formats every
# request): it is a diagnostic, not a benchmark. docs/PERFORMANCE.md has what it found and
# traced against untraced (TRACE=0) latencies.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"

die() { echo "bench-profile.sh: $*" >&2; exit 1; }

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 2; }

# The summary, from the files this script leaves in OUT: wire.pcap (tcpdump), node-N.syscalls
# (perf script) or node-N.strace, node-N.fds and node-N.threads (what each descriptor and
# thread was at the end), node-N.log (the node's log during the run: Kafka's request log),
# node-N.status-*.json (onelog's admin API), clock-offset (realtime - monotonic, for perf's
# timestamps), run-start/run-end/idle-start, bench.json, meta.env.
analyze() {
    python3 "$repo/scripts/bench-profile-analyze.py" "$1"
}

if [ "${1:-}" = --analyze ]; then
    [ -f "${2:-}/meta.env" ] || die "--analyze OUT: no OUT/meta.env"
    analyze "$2"
    exit 0
fi

system="${1:-}"
bench="${2:-TxWritesBench}"
case "$system" in onelog | kafka-flush1 | kafka-default) ;; *) usage ;; esac
case "$bench" in TxWritesBench | TxStreamingBench | BaseWritesBench | BaseStreamingBench) ;; *) usage ;; esac

warmup="${WARMUP:-20}"
txes="${TXES:-100}"
system_warmup="${SYSTEM_WARMUP:-50}"
client="${CLIENT:-4.x}"
idle_seconds="${IDLE_SECONDS:-3}"
request_log="${REQUEST_LOG:-1}"
onelog_port="${PROFILE_ONELOG_PORT:-21092}"
kafka_port="${PROFILE_KAFKA_PORT:-39092}"
kafka_controller_port="${PROFILE_KAFKA_CONTROLLER_PORT:-39192}"
onelog_dir="${PROFILE_ONELOG_DIR:-/tmp/prof-onelog}"
kafka_dir="${PROFILE_KAFKA_DIR:-/tmp/prof-kafka}"
out="${OUT:-/tmp/bench-profile/$system-$bench-$(date -u +%Y%m%dT%H%M%S)}"
[ "$warmup" -ge 1 ] || die "WARMUP must be at least 1 (the first measured transaction starts where the last warm-up one ends)"
[ "$txes" -ge 1 ] || die "TXES must be at least 1"
[ "$(id -u)" = 0 ] || die "needs root (perf/strace attach to the brokers, tcpdump captures the loopback)"
for tool in java python3; do command -v "$tool" >/dev/null || die "$tool not found"; done

# The Raft, admin and controller ports sit above the Kafka ones.
if [ "$system" = onelog ]; then
    ports=("$onelog_port" $((onelog_port + 1)) $((onelog_port + 2)))
    raft_ports=($((onelog_port + 100)) $((onelog_port + 101)) $((onelog_port + 102)))
    all_ports=("${ports[@]}" "${raft_ports[@]}" $((onelog_port + 200)) $((onelog_port + 201)) $((onelog_port + 202)))
    data_dir="$onelog_dir"
else
    ports=("$kafka_port" $((kafka_port + 1)) $((kafka_port + 2)))
    raft_ports=("$kafka_controller_port" $((kafka_controller_port + 1)) $((kafka_controller_port + 2)))
    all_ports=("${ports[@]}" "${raft_ports[@]}")
    data_dir="$kafka_dir"
fi
bootstrap="127.0.0.1:${ports[0]},127.0.0.1:${ports[1]},127.0.0.1:${ports[2]}"
for port in "${all_ports[@]}"; do
    ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || die "port $port is in use (set PROFILE_*_PORT)"
done
[ ! -e "$data_dir" ] || die "$data_dir exists; remove it (or set PROFILE_ONELOG_DIR / PROFILE_KAFKA_DIR)"

case "$client" in
    4.x) classpath_file="$(scripts/java-build.sh)" ;;
    2.x) classpath_file="$(scripts/java-build.sh --variant kafka2 -Dkafka2)" ;;
    *) die "CLIENT must be 4.x or 2.x" ;;
esac
tools_classpath_file="$(scripts/java-build.sh)" # CreateTopics, whatever the bench's client

trace="${TRACE:-1}"
if [ "$trace" = 0 ]; then
    tracer=none
    request_log=0
elif perf list 'syscalls:sys_enter_fdatasync' 2>/dev/null | grep -q sys_enter_fdatasync; then
    tracer=perf
elif command -v strace >/dev/null; then
    tracer=strace
    echo "note: perf cannot trace syscalls here; strace stops every thread at every syscall, which slows the brokers" >&2
else
    tracer=none
    echo "note: neither perf nor strace: no fsync counts" >&2
fi
[ "$trace" = 0 ] || command -v tcpdump >/dev/null || echo "note: no tcpdump (apt-get install tcpdump): no request counts or wire times" >&2

mkdir -p "$out"
echo "output: $out"

started=0
tcpdump_pid=""
tracer_pids=()
pinger_pid=""

# Stops everything this script started and wipes the system's data; safe to call twice.
stop_all() {
    local pid
    # SIGTERM: a background job of a script ignores SIGINT unless it installs its own handler.
    if [ -n "$pinger_pid" ]; then
        kill -TERM "$pinger_pid" 2>/dev/null || true
        wait "$pinger_pid" 2>/dev/null || true
        pinger_pid=""
    fi
    for pid in "${tracer_pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
    for pid in "${tracer_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    tracer_pids=()
    if [ "$started" = 1 ]; then
        started=0
        for id in 1 2 3; do # the end of each node's log, for a run that failed
            tail -n 300 "$data_dir/node-$id/"*.log >"$out/node-$id.tail.log" 2>/dev/null || true
        done
        echo "stopping $system and wiping $data_dir"
        if [ "$system" = onelog ]; then
            ONELOG_BASE_PORT="$onelog_port" ONELOG_CLUSTER_DIR="$onelog_dir" scripts/cluster.sh down >/dev/null || true
            rm -rf "$onelog_dir"
        else
            KAFKA_REF_PORT="$kafka_port" KAFKA_REF_CONTROLLER_PORT="$kafka_controller_port" KAFKA_REF_DIR="$kafka_dir" \
                scripts/kafka-reference.sh down --wipe >/dev/null || true
        fi
    fi
    if [ -n "$tcpdump_pid" ]; then
        kill -INT "$tcpdump_pid" 2>/dev/null || true
        wait "$tcpdump_pid" 2>/dev/null || true
        tcpdump_pid=""
    fi
}
trap stop_all EXIT
trap 'exit 130' INT TERM

# tcpdump first, so that every connection is seen from its SYN (frames are found by walking
# each byte stream from its start).
if [ "$trace" != 0 ] && command -v tcpdump >/dev/null; then
    filter=""
    for port in "${all_ports[@]}"; do filter+="${filter:+ or }port $port"; done
    tcpdump -i lo -n -s 0 -B 65536 -w "$out/wire.pcap" "tcp and ($filter)" 2>"$out/tcpdump.log" &
    tcpdump_pid=$!
    for _ in $(seq 50); do grep -q listening "$out/tcpdump.log" 2>/dev/null && break; sleep 0.1; done
fi

started=1
if [ "$system" = onelog ]; then
    ONELOG_BASE_PORT="$onelog_port" ONELOG_CLUSTER_DIR="$onelog_dir" scripts/cluster.sh up 3 | tee "$out/system.log"
    node_pid() { cat "$onelog_dir/node-$1/onelog.pid"; }
else
    flush_arg=()
    [ "$system" = kafka-default ] && flush_arg=(--flush-default)
    KAFKA_REF_PORT="$kafka_port" KAFKA_REF_CONTROLLER_PORT="$kafka_controller_port" KAFKA_REF_DIR="$kafka_dir" \
        scripts/kafka-reference.sh up "${flush_arg[@]}" | tee "$out/system.log"
    node_pid() { cat "$kafka_dir/node-$1/kafka.pid"; }
fi
for id in 1 2 3; do grep -h '' "$data_dir/node-$id/server.properties" >"$out/node-$id.server.properties" 2>/dev/null || true; done

bench_env=(KAFKA_CONNECTION="$bootstrap")
[ -n "${CLIENT_CONFIG:-}" ] && bench_env+=(CLIENT_CONFIG="$CLIENT_CONFIG")
jvm_args=()
run_java() { # run_java CLASSPATH_FILE CLASS LOG [NAME=VALUE...]: the bench's settings, then jvm_args
    local cp="$1" class="$2" log="$3"
    shift 3
    env "${bench_env[@]}" "$@" java "${jvm_args[@]}" -cp "$(cat "$cp")" "dev.onelog.bench.$class" >"$log" 2>&1 ||
        { tail -n 30 "$log" >&2; die "$class failed (log $log)"; }
}

echo "creating topic1 and topic2 (replication factor 3)"
run_java "$tools_classpath_file" CreateTopics "$out/create-topics.log" REPLICATION_FACTOR=3
echo "system warm-up: $bench, $system_warmup iterations"
run_java "$classpath_file" "$bench" "$out/warmup.log" WARMUP=0 TXES="$system_warmup" TX_ID=profile-warmup GROUP=profile-warmup

if [ "$system" != onelog ] && [ "$request_log" = 1 ]; then
    echo "switching kafka.request.logger to DEBUG on every broker"
    for id in 1 2 3; do
        KAFKA_REF_PORT="$kafka_port" KAFKA_REF_CONTROLLER_PORT="$kafka_controller_port" KAFKA_REF_DIR="$kafka_dir" \
            scripts/kafka-reference.sh tool kafka.admin.ConfigCommand --bootstrap-server "$bootstrap" --alter \
            --entity-type broker-loggers --entity-name "$id" --add-config kafka.request.logger=DEBUG >/dev/null
    done
fi
for id in 1 2 3; do
    log="$data_dir/node-$id/$([ "$system" = onelog ] && echo onelog.log || echo kafka.log)"
    wc -l <"$log" >"$out/node-$id.log-lines-before"
done

admin_status() { curl -s --max-time 2 "http://127.0.0.1:$((onelog_port + 199 + $1))/status"; }
if [ "$system" = onelog ]; then
    for id in 1 2 3; do admin_status "$id" >"$out/node-$id.status-before.json" || true; done
fi

python3 -c 'import time; print(repr(time.time() - time.monotonic()))' >"$out/clock-offset"
for id in 1 2 3; do
    pid="$(node_pid "$id")"
    echo "$pid" >"$out/node-$id.pid"
    case "$tracer" in
        perf)
            perf record -q -k monotonic -o "$out/node-$id.perf.data" -p "$pid" \
                -e syscalls:sys_enter_fsync,syscalls:sys_exit_fsync \
                -e syscalls:sys_enter_fdatasync,syscalls:sys_exit_fdatasync \
                -e syscalls:sys_enter_sync_file_range,syscalls:sys_exit_sync_file_range \
                -e syscalls:sys_enter_msync,syscalls:sys_exit_msync \
                -e syscalls:sys_enter_syncfs,syscalls:sys_exit_syncfs >"$out/node-$id.perf.log" 2>&1 &
            tracer_pids+=($!)
            ;;
        strace)
            strace -f -ttt -T -e trace=fsync,fdatasync,sync_file_range,msync,syncfs -o "$out/node-$id.strace" \
                -p "$pid" 2>"$out/node-$id.strace.log" &
            tracer_pids+=($!)
            ;;
    esac
done
if [ "$tracer" != none ]; then
    sleep 1 # perf and strace attach to every thread of a JVM in well under a second
fi
date +%s.%N >"$out/idle-start"
[ "$tracer" = none ] || sleep "$idle_seconds"

if [ "${CLIENT_DEBUG:-0}" = 1 ]; then
    prefix=org.slf4j.simpleLogger.log.org.apache.kafka.clients
    jvm_args=("-D$prefix.NetworkClient=debug" "-D$prefix.producer.internals.TransactionManager=debug")
fi
if [ -n "${PING_INTERVAL_MS:-}" ]; then
    python3 "$repo/scripts/bench-profile-pinger.py" "$PING_INTERVAL_MS" "${ports[@]}" &
    pinger_pid=$!
fi
echo "measured run: $bench, WARMUP=$warmup TXES=$txes, client $client${CLIENT_CONFIG:+, CLIENT_CONFIG=$CLIENT_CONFIG}"
cat /proc/loadavg >"$out/loadavg-start"
date +%s.%N >"$out/run-start"
run_java "$classpath_file" "$bench" "$out/client.log" WARMUP="$warmup" TXES="$txes" MEASURES="$out/latencies.txt" \
    SUMMARY_FILE="$out/bench.json"
date +%s.%N >"$out/run-end"
cat /proc/loadavg >"$out/loadavg-end"
if [ -n "$pinger_pid" ]; then
    kill -TERM "$pinger_pid" 2>/dev/null || true
    wait "$pinger_pid" 2>/dev/null || true
    pinger_pid=""
fi
sleep 0.5 # markers and replication of the last transaction

for pid in "${tracer_pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
for pid in "${tracer_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
tracer_pids=()
# Which file each descriptor is, and each thread's name, while the nodes still run.
for id in 1 2 3; do
    pid="$(cat "$out/node-$id.pid")"
    for fd in /proc/"$pid"/fd/*; do printf '%s %s\n' "${fd##*/}" "$(readlink "$fd" 2>/dev/null)"; done >"$out/node-$id.fds"
    for task in /proc/"$pid"/task/*; do printf '%s %s\n' "${task##*/}" "$(cat "$task/comm" 2>/dev/null)"; done >"$out/node-$id.threads"
    if [ "$tracer" = perf ]; then
        perf script -i "$out/node-$id.perf.data" --ns >"$out/node-$id.syscalls" 2>/dev/null || true
        rm -f "$out/node-$id.perf.data"
    fi
done
if [ "$system" = onelog ]; then
    for id in 1 2 3; do admin_status "$id" >"$out/node-$id.status-after.json" || true; done
fi
for id in 1 2 3; do
    log="$data_dir/node-$id/$([ "$system" = onelog ] && echo onelog.log || echo kafka.log)"
    tail -n +"$(($(cat "$out/node-$id.log-lines-before") + 1))" "$log" >"$out/node-$id.log"
done

cat >"$out/meta.env" <<EOF
system=$system
bench=$bench
client=$client
warmup=$warmup
txes=$txes
tracer=$tracer
trace=$trace
ports=${ports[*]}
raft_ports=${raft_ports[*]}
client_config=${CLIENT_CONFIG:-}
extra_broker_config=${KAFKA_REF_EXTRA_CONFIG:-}
ping_interval_ms=${PING_INTERVAL_MS:-}
request_log=$request_log
EOF

stop_all

analyze "$out" | tee "$out/summary.txt"
