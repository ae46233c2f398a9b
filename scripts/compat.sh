#!/usr/bin/env bash
# The client compatibility matrix (issue #12): every driver in harness/compat/ against one
# three-node onelog cluster, written to results/compat.md.
#
#   scripts/compat.sh [--ci] [--kafka] [--clients a,b] [--keep] [--out FILE]
#   scripts/compat.sh --streams-soak [--kafka] [--keep] [--out FILE]
#   scripts/compat.sh --share-accept [--kafka] [--keep] [--out FILE]
#   scripts/compat.sh --streams-scale [--kafka | --compare] [--clients a,b] [--keep] [--out FILE]
#   scripts/compat.sh --install-only [--clients a,b]
#
# Installs each toolchain's packages from the registries into ONELOG_COMPAT_CACHE (default
# ~/.cache/onelog-compat, reused across runs): a Python venv with pinned pip packages, `npm ci`
# from harness/compat/node/package-lock.json, the Go modules pinned in harness/compat/go/go.sum
# (built once into the cache), the rdkafka driver through cargo (CARGO_TARGET_DIR; none when
# ONELOG_COMPAT_RDKAFKA_BIN names one built already). Then starts
# a cluster with scripts/cluster.sh on Kafka ports ONELOG_COMPAT_BASE_PORT.. (default 19092) in a
# temporary ONELOG_CLUSTER_DIR, every node with auto-create off and 1 MiB segments, and runs the
# drivers one after another, each with COMPAT_BOOTSTRAP, COMPAT_KILL_LEADER
# (harness/compat/kill-leader.sh), COMPAT_PREFIX and COMPAT_TIMEOUT_S (default 60) and a
# whole-driver timeout (ONELOG_COMPAT_DRIVER_TIMEOUT_S, default 900). A driver prints one JSON
# line per scenario (harness/compat/README.md); a missing line, a non-zero exit or a timeout is
# a `fail`. Exits non-zero when any cell is `fail`.
# --install-only: the installs below and the JVM drivers' builds, then exit (no cluster, no run):
# CI fills the caches in the background while its test suite runs.
# --clients: a comma-separated subset of the client ids below. --keep: keep the cluster
# directory (and its node logs) for debugging; it is printed at the end.
# --ci: the fixed subset `.ci/run` runs (about half the time of the full matrix): every client
# runs every quick scenario (CI_QUICK) and the slow ones named for it in CI_SLOW, so each slow
# scenario still runs for at least two clients; the consumer-protocol ids run only the short
# lists of CI_ONLY; Kafka Streams and the CLI tools run in full.
# Cells outside the subset are `-` in the report, which goes to $TMPDIR/compat-ci.md unless
# --out says otherwise (results/compat.md stays the full matrix's).
# --streams-soak: only the opt-in Kafka Streams soak, streams_soak (kafka-streams-4.4.0): the
# exactly_once_v2 word count for COMPAT_STREAMS_SOAK_S seconds (default 600) under continuous
# input, a fault on the Raft leader every COMPAT_STREAMS_SOAK_FAULT_EVERY_S (default 50), kill -9
# (COMPAT_KILL_LEADER) and SIGSTOP for COMPAT_PAUSE_S seconds (default 5; COMPAT_PAUSE_LEADER,
# harness/compat/pause-leader.sh; against --kafka there is none, so kills only) in turn. Never
# part of the matrix or --ci. Report: $TMPDIR/compat-streams-soak.md unless --out says otherwise;
# the per-fault figures are in the driver's stderr (--keep keeps it).
# --share-accept: only the opt-in share-group acceptance run, share_acceptance
# (java-4.4.0-share, ShareAcceptance.java): three KafkaShareConsumer processes take
# COMPAT_SHARE_RECORDS records (default 100,000) while COMPAT_KILL_LEADER kill -9s the leader
# twice and one consumer is killed -9; every record accepted exactly once, none lost, the
# redeliveries reported. Never part of the matrix or --ci. Report:
# $TMPDIR/compat-share-accept.md unless --out says otherwise; per-fault lines in the driver's
# stderr (--keep keeps it).
# --streams-scale: only the opt-in Kafka Streams scaling measurement, streams_scale, for both
# Streams ids (--clients narrows): one instance of the word count + join app (9 tasks), then 3,
# then 1 again (two closed, leaving the group), COMPAT_STREAMS_SCALE_ROUNDS times (default 2);
# the time until all tasks run again, each once, on RUNNING instances. Never part of the matrix
# or --ci. Report: $TMPDIR/compat-streams-scale.md unless --out says otherwise, with a table of
# the times. --compare: the same against onelog and then the reference Kafka (--kafka), one
# after the other, and one table of both (printed, and in $TMPDIR/compat-streams-scale-compare.md).
# Broker binary: ONELOG_BIN (default /tmp/compat-bin/onelog, else cluster.sh's own choice).
# --kafka: the same drivers against the reference Apache Kafka instead (scripts/kafka-reference.sh,
# default 4.4.0, KAFKA_REF_MAVEN_ARGS for another; three KRaft nodes on Kafka ports
# ONELOG_COMPAT_BASE_PORT.., controllers +100, its reference settings plus auto-create off, 1 MiB
# segments and the Streams group bounds lowered to the session timeout (6 s) and heartbeat
# interval (1.5 s) the Streams driver sets on its groups, as the classic apps use; Kafka 4.4
# formats new clusters with streams.version=1 and enables the Streams group protocol by default,
# so nothing else is needed for kafka-streams-4.4.0-streams), with COMPAT_KILL_LEADER harness/compat/kill-kafka.sh: it kill -9s the broker
# the scenario depends on (txn_leader_kill: the transaction coordinator of the open
# transaction; leader_kill and share_leader_kill: the leader of the topic's partition 0, which
# for a share group also holds the share partition's in-memory state), waits until another
# broker has taken that role and restarts it. Kafka 4.4 formats new clusters with share.version=2
# (share groups on by default), so java-4.4.0-share needs no setting either. The report goes to
# results/compat-kafka.md unless --out says otherwise.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
compat="$repo/harness/compat"
cache="${ONELOG_COMPAT_CACHE:-$HOME/.cache/onelog-compat}"
out="$repo/results/compat.md"
keep=0
only=""
ci=0
out_given=0
soak=0
share_accept=0
scale=0
compare=0
install_only=0
target=onelog
driver_timeout_s="${ONELOG_COMPAT_DRIVER_TIMEOUT_S:-900}"
export COMPAT_TIMEOUT_S="${COMPAT_TIMEOUT_S:-60}"

# A *-consumer id runs its client's driver with COMPAT_GROUP_PROTOCOL=consumer: every group
# consumer on the KIP-848 consumer group protocol (the others use the classic protocol).
# kafka-streams-4.4.0-streams is the Streams driver with COMPAT_GROUP_PROTOCOL=streams: every
# Streams app on the KIP-1071 Streams group protocol (group.protocol=streams).
# java-4.4.0-share is kafka-clients 4.4.0's KafkaShareConsumer on share groups (KIP-932, Kafka's
# queues): its own scenario list, SHARE_SCENARIOS, and its own table in the report.
# confluent-kafka-python-share is librdkafka's preview ShareConsumer on the same list.
# franz-go-share is franz-go's share consumer (kgo.ShareGroup, harness/compat/go/cmd/franzshare) on it too.
JAVA_CLIENTS=(java-4.4.0 java-4.4.0-consumer java-3.9.1 java-2.8.2 java-4.4.0-share kafka-streams-4.4.0
    kafka-streams-4.4.0-streams kafka-cli-4.4.0)
OTHER_CLIENTS=(rdkafka-rust confluent-kafka-python confluent-kafka-python-consumer franz-go franz-go-consumer
    sarama kafka-python aiokafka kafkajs confluent-kafka-python-share franz-go-share)
# The scenario ids of the client drivers (the JVM-only lists come from their drivers' lines).
SCENARIOS=(create_topic produce_consume compression consume_earliest consume_latest seek_timestamp
    group_rebalance member_leave_rejoin idempotent_produce txn_commit_abort consume_process_produce
    txn_fencing alter_config delete_records leader_kill txn_leader_kill err_unknown_topic
    err_offset_out_of_range err_stale_generation err_fenced_producer)
STREAMS_SCENARIOS=(streams_eos_wordcount streams_kill_streams streams_kill_leader streams_three_instances
    streams_standby_static)
STREAMS_CLIENTS=(kafka-streams-4.4.0 kafka-streams-4.4.0-streams)
SHARE_SCENARIOS=(share_consume_implicit share_explicit_ack share_reject_archive share_lock_expiry share_two_consumers
    share_member_kill share_leader_kill)
# Scenarios one client id runs besides SCENARIOS (their own table in the report): mixed_group, a
# Java 4.4.0 and a librdkafka member in one consumer-protocol group, and online_migration, a
# running classic group upgraded by a consumer-protocol member and downgraded when it leaves
# (confluent_driver.py).
declare -A EXTRA_SCENARIOS=([confluent-kafka-python-consumer]="mixed_group online_migration")
CLI_SCENARIOS=(kafka-topics kafka-console-producer-consumer kafka-consumer-groups-describe
    kafka-consumer-groups-reset-offsets kafka-consumer-groups-delete kafka-configs-describe
    kafka-configs-alter kafka-delete-records kafka-transactions kafka-producer-perf-test
    kafka-consumer-perf-test kafka-log-dirs kafka-metadata-quorum)

# The CI subset (--ci). Quick: a few seconds each. Slow: a rebalance, a session expiry, a
# leader kill or a wait for a record that must not come (about 5-12 s each).
CI_QUICK=(create_topic produce_consume compression consume_earliest seek_timestamp
    idempotent_produce txn_commit_abort consume_process_produce txn_fencing alter_config
    delete_records err_offset_out_of_range err_fenced_producer)
declare -A CI_SLOW=(
    [java-4.4.0]="leader_kill err_unknown_topic txn_leader_kill"
    [java-3.9.1]="member_leave_rejoin"
    [java-2.8.2]="err_stale_generation consume_latest"
    [rdkafka-rust]="leader_kill consume_latest txn_leader_kill"
    [confluent-kafka-python]="err_unknown_topic"
    [franz-go]="group_rebalance"
    [sarama]="member_leave_rejoin"
    [kafka-python]="group_rebalance"
    [aiokafka]="err_stale_generation"
    [kafkajs]="leader_kill"
)
# The consumer-protocol ids run a short list of their own in the CI subset instead: their produce
# and transaction paths are their classic twins', so only group scenarios, two quick ones and one
# or two slow ones (measured: java 17 s + group_rebalance ~10 s in the JVM lane, confluent 15 s
# and franz-go 13 s in the native lane).
# The Streams ids too: the classic one its three scenarios of before, the Streams-protocol one
# the leader kills, the three instances and standbys with static members (the rest run in the
# full matrix). The share-group id: both acknowledgement modes and both kills (about 80 s against
# Kafka; share_lock_expiry and share_reject_archive wait out a 15 s lock or a redelivery loop and
# run in the full matrix, share_two_consumers too).
declare -A CI_ONLY=(
    [kafka-streams-4.4.0]="streams_eos_wordcount streams_kill_streams streams_kill_leader"
    [kafka-streams-4.4.0-streams]="streams_kill_leader streams_three_instances streams_standby_static"
    [java-4.4.0-consumer]="consume_earliest consume_process_produce group_rebalance err_stale_generation"
    [java-4.4.0-share]="share_consume_implicit share_explicit_ack share_member_kill share_leader_kill"
    [confluent-kafka-python-share]="share_consume_implicit share_explicit_ack share_member_kill share_leader_kill"
    [franz-go-share]="share_consume_implicit share_explicit_ack share_member_kill share_leader_kill"
    [confluent-kafka-python-consumer]="consume_earliest consume_process_produce mixed_group online_migration"
    [franz-go-consumer]="consume_earliest group_rebalance err_stale_generation"
)

die() { echo "compat.sh: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
    case "$1" in
        --ci) ci=1; shift ;;
        --clients) only="${2:?--clients a,b}"; shift 2 ;;
        --keep) keep=1; shift ;;
        --kafka) target=kafka; shift ;;
        --streams-soak) soak=1; shift ;;
        --share-accept) share_accept=1; shift ;;
        --streams-scale) scale=1; shift ;;
        --compare) compare=1; shift ;;
        --install-only) install_only=1; shift ;;
        --out) out="${2:?--out FILE}"; out_given=1; shift 2 ;;
        *) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 2 ;;
    esac
done

clients=("${JAVA_CLIENTS[@]}" "${OTHER_CLIENTS[@]}")
if [ "$compare" = 1 ]; then
    # --streams-scale --compare: this script twice, onelog then Kafka, and one table of both.
    [ "$scale" = 1 ] && [ "$target" = onelog ] || die "--compare goes with --streams-scale and without --kafka"
    tmp="${TMPDIR:-/tmp}"
    status=0
    passed=(${only:+--clients "$only"})
    [ "$keep" = 0 ] || passed+=(--keep)
    "$0" --streams-scale "${passed[@]}" --out "$tmp/compat-streams-scale-onelog.md" || status=$?
    "$0" --streams-scale --kafka "${passed[@]}" --out "$tmp/compat-streams-scale-kafka.md" || status=$?
    [ "$out_given" = 1 ] || out="$tmp/compat-streams-scale-compare.md"
    {
        echo "# Kafka Streams scaling: onelog and Apache Kafka"
        echo
        echo "Written by \`scripts/compat.sh --streams-scale --compare${only:+ --clients $only}\` on $(date -u '+%Y-%m-%d %H:%M UTC'); milliseconds until all tasks run again, per round."
        echo
        echo "| broker | client | 1 -> 3 instances (ms) | 3 -> 1 instance (ms) |"
        echo "|---|---|---|---|"
        for side in onelog kafka; do
            grep '^| ' "$tmp/compat-streams-scale-$side.md" 2>/dev/null | sed -n '/^| scale: /{s/^| scale: /| /;p}' |
                sed "s/^| /| $side | /" || true
        done
    } >"$out"
    cat "$out"
    echo "compat.sh: wrote $out (details: $tmp/compat-streams-scale-onelog.md, $tmp/compat-streams-scale-kafka.md)" >&2
    exit "$status"
fi
if [ "$soak" = 1 ]; then
    [ "$ci" = 0 ] && [ -z "$only" ] || die "--streams-soak runs kafka-streams-4.4.0's streams_soak alone: no --ci, no --clients"
    clients=(kafka-streams-4.4.0)
    STREAMS_SCENARIOS=(streams_soak)
    # Its run plus start-up, the last fault's recovery and the drain, with room.
    soak_s="${COMPAT_STREAMS_SOAK_S:-600}"
    [ "$driver_timeout_s" -ge $((soak_s + 600)) ] || driver_timeout_s=$((soak_s + 600))
fi
if [ "$share_accept" = 1 ]; then
    [ "$soak" = 0 ] && [ "$ci" = 0 ] && [ -z "$only" ] || die "--share-accept runs java-4.4.0-share's share_acceptance alone"
    clients=(java-4.4.0-share)
    SHARE_SCENARIOS=(share_acceptance)
    [ "$driver_timeout_s" -ge 2400 ] || driver_timeout_s=2400
fi
if [ "$scale" = 1 ]; then
    [ "$soak" = 0 ] && [ "$ci" = 0 ] || die "--streams-scale runs streams_scale alone: no --ci, no --streams-soak"
    clients=("${STREAMS_CLIENTS[@]}")
    STREAMS_SCENARIOS=(streams_scale)
fi
if [ -n "$only" ]; then
    IFS=, read -r -a clients <<<"$only"
    for c in "${clients[@]}"; do
        [[ " ${JAVA_CLIENTS[*]} ${OTHER_CLIENTS[*]} " == *" $c "* ]] || die "unknown client '$c'"
        [ "$scale" = 0 ] || [[ " ${STREAMS_CLIENTS[*]} " == *" $c "* ]] || die "--streams-scale runs only ${STREAMS_CLIENTS[*]}"
    done
fi
wants() { [[ " ${clients[*]} " == *" $1 "* ]]; }
if [ "$soak" = 1 ] && [ "$out_given" = 0 ]; then out="${TMPDIR:-/tmp}/compat-streams-soak.md"
elif [ "$share_accept" = 1 ] && [ "$out_given" = 0 ]; then out="${TMPDIR:-/tmp}/compat-share-accept.md"
elif [ "$scale" = 1 ] && [ "$out_given" = 0 ]; then out="${TMPDIR:-/tmp}/compat-streams-scale.md"
elif [ "$ci" = 1 ] && [ "$out_given" = 0 ]; then out="${TMPDIR:-/tmp}/compat-ci.md"
elif [ "$target" = kafka ] && [ "$out_given" = 0 ]; then out="$repo/results/compat-kafka.md"; fi

# The scenario ids one client runs: empty for all of them (the full matrix, and always for the
# CLI driver, whose list is short).
selected_for() {
    if [ "$soak" = 1 ]; then
        echo streams_soak # opt-in: the driver runs it only when named
    elif [ "$share_accept" = 1 ]; then
        echo share_acceptance # opt-in too
    elif [ "$scale" = 1 ]; then
        echo streams_scale # opt-in too
    elif [ "$ci" = 1 ] && [ -n "${CI_ONLY[$1]+set}" ]; then
        local ids="${CI_ONLY[$1]}"
        echo "${ids// /,}"
    elif [ "$ci" = 1 ] && [ -n "${CI_SLOW[$1]+set}" ]; then
        local ids="${CI_QUICK[*]} ${CI_SLOW[$1]}"
        echo "${ids// /,}"
    fi
}
# Every slow scenario of the full list must run for some client of the CI subset.
for s in "${SCENARIOS[@]}"; do
    [[ " ${CI_QUICK[*]} ${CI_SLOW[*]} " == *" $s "* ]] || die "scenario $s is in neither CI_QUICK nor CI_SLOW"
done

mkdir -p "$cache"
work="$(mktemp -d "${TMPDIR:-/tmp}/onelog-compat.XXXXXX")"
export ONELOG_CLUSTER_DIR="$work/cluster"
export ONELOG_BASE_PORT="${ONELOG_COMPAT_BASE_PORT:-19092}"
# The Streams group bounds as for the reference Kafka below: the Streams driver sets its groups'
# streams.session.timeout.ms to 6000 and streams.heartbeat.interval.ms to 1500.
onelog_streams_bounds="group.streams.min.session.timeout.ms=6000 group.streams.min.heartbeat.interval.ms=1500"
export ONELOG_CONFIGS="auto.create.topics.enable=false log.segment.bytes=1048576 $onelog_streams_bounds ${ONELOG_CONFIGS:-}"
if [ -z "${ONELOG_BIN:-}" ] && [ -x /tmp/compat-bin/onelog ]; then export ONELOG_BIN=/tmp/compat-bin/onelog; fi
if [ "$target" = kafka ]; then
    # kafka-reference.sh's settings for the reference cluster (kill-kafka.sh restarts nodes
    # with them too).
    export KAFKA_REF_DIR="$work/kafka" KAFKA_REF_PORT="$ONELOG_BASE_PORT" KAFKA_REF_CONTROLLER_PORT=$((ONELOG_BASE_PORT + 100))
    # The Streams group bounds: the Streams driver sets its groups' streams.session.timeout.ms
    # to 6000 and streams.heartbeat.interval.ms to 1500 (Kafka's minimums are 45000 and 5000).
    streams_bounds="group.streams.min.session.timeout.ms=6000,group.streams.min.heartbeat.interval.ms=1500"
    export KAFKA_REF_EXTRA_CONFIG="auto.create.topics.enable=false,log.segment.bytes=1048576,$streams_bounds${KAFKA_REF_EXTRA_CONFIG:+,$KAFKA_REF_EXTRA_CONFIG}"
fi

cleanup() {
    [ -f "$ONELOG_CLUSTER_DIR/nodes" ] && "$repo/scripts/cluster.sh" down >/dev/null 2>&1 || true
    [ "$target" = kafka ] && [ -f "$KAFKA_REF_DIR/cluster-id" ] && "$repo/scripts/kafka-reference.sh" down >/dev/null 2>&1 || true
    if [ "$keep" = 1 ]; then echo "compat.sh: kept $work (cluster data and node logs, driver output)" >&2
    else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'echo "compat.sh: failed at line $LINENO: $BASH_COMMAND" >&2' ERR

# --- installs: each into the cache, each skipped when its pinned inputs did not change ---
source "$compat/install.sh"
install_for_clients
if [ "$install_only" = 1 ]; then
    install_java_drivers
    echo "compat: installed for ${clients[*]}" >&2
    exit 0
fi

# --- the cluster ---
# A port already taken would let a driver talk to someone else's process: refuse to start.
for port in $((ONELOG_BASE_PORT)) $((ONELOG_BASE_PORT + 1)) $((ONELOG_BASE_PORT + 2)) \
    $((ONELOG_BASE_PORT + 100)) $((ONELOG_BASE_PORT + 101)) $((ONELOG_BASE_PORT + 102)) \
    $((ONELOG_BASE_PORT + 200)) $((ONELOG_BASE_PORT + 201)) $((ONELOG_BASE_PORT + 202)); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        die "port $port is in use; pick another ONELOG_COMPAT_BASE_PORT (Kafka, +100 Raft, +200 admin)"
    fi
done
bootstrap="127.0.0.1:$ONELOG_BASE_PORT,127.0.0.1:$((ONELOG_BASE_PORT + 1)),127.0.0.1:$((ONELOG_BASE_PORT + 2))"
export COMPAT_BOOTSTRAP="$bootstrap"
if [ "$target" = kafka ]; then
    "$repo/scripts/kafka-reference.sh" up >&2
    broker="Apache Kafka $("$repo/scripts/kafka-reference.sh" version) (scripts/kafka-reference.sh up, KAFKA_REF_EXTRA_CONFIG=$KAFKA_REF_EXTRA_CONFIG)"
    export COMPAT_KILL_LEADER="$compat/kill-kafka.sh"
else
    "$repo/scripts/cluster.sh" up 3 >&2
    broker="$("${ONELOG_BIN:-onelog}" --version 2>/dev/null || echo "${ONELOG_BIN:-onelog}")"
    export COMPAT_KILL_LEADER="$compat/kill-leader.sh"
    export COMPAT_PAUSE_LEADER="$compat/pause-leader.sh"
fi

# --- the drivers ---
declare -A seconds_of=()
run_id="$(date +%s)"
for client in "${clients[@]}"; do
    lines="$work/$client.jsonl"
    : >"$lines"
    cmd="$(driver_command "$client")"
    if [ "$client" = kafka-streams-4.4.0-streams ]; then
        # run.sh knows kafka-streams-4.4.0 only; the driver names itself ...-streams under this protocol.
        cmd="$(driver_command kafka-streams-4.4.0)"
        [ -z "$cmd" ] || cmd="COMPAT_GROUP_PROTOCOL=streams $cmd"
    fi
    started=$SECONDS
    if [ -z "$cmd" ]; then
        echo "driver missing" >"$work/$client.missing"
    else
        echo "== $client: $cmd" >&2
        set +e
        COMPAT_PREFIX="c$run_id-${client//./_}" COMPAT_SCENARIOS="$(selected_for "$client")" timeout -k 10 "$driver_timeout_s" bash -c "$cmd" \
            >"$lines" 2>"$work/$client.stderr"
        echo $? >"$work/$client.rc"
        set -e
    fi
    seconds_of[$client]=$((SECONDS - started))
    echo "== $client: $((SECONDS - started)) s, exit $(cat "$work/$client.rc" 2>/dev/null || echo -), $(grep -c '"result": *"pass"' "$lines" || true) pass" >&2
done

# --- the report ---
mkdir -p "$(dirname "$out")"
status=0
command_line="scripts/compat.sh"
if [ "$ci" = 1 ]; then command_line+=" --ci"; fi
if [ "$soak" = 1 ]; then command_line+=" --streams-soak (COMPAT_STREAMS_SOAK_S=${COMPAT_STREAMS_SOAK_S:-600})"; fi
if [ "$scale" = 1 ]; then command_line+=" --streams-scale"; fi
if [ "$share_accept" = 1 ]; then command_line+=" --share-accept (COMPAT_SHARE_RECORDS=${COMPAT_SHARE_RECORDS:-100000})"; fi
if [ "$target" = kafka ]; then command_line+=" --kafka"; fi
if [ -n "$only" ]; then command_line+=" --clients $only"; fi
selected="$(for c in "${clients[@]}"; do printf '%s=%s;' "$c" "$(selected_for "$c")"; done)"
python3 "$compat/report.py" --work "$work" --out "$out" \
    --command "$command_line" \
    --selected "$selected" \
    --clients "${clients[*]}" --scenarios "${SCENARIOS[*]}" --streams "${STREAMS_SCENARIOS[*]}" \
    --extra "$(for c in "${!EXTRA_SCENARIOS[@]}"; do printf '%s=%s;' "$c" "${EXTRA_SCENARIOS[$c]// /,}"; done)" \
    --cli "${CLI_SCENARIOS[*]}" --share "${SHARE_SCENARIOS[*]}" --broker "$broker" \
    --seconds "$(for c in "${!seconds_of[@]}"; do printf '%s=%s;' "$c" "${seconds_of[$c]}"; done)" || status=$?
if [ "$scale" = 1 ]; then
    # The driver's "streams_scale: result client=... up_ms=a,b down_ms=c,d" lines, as a table.
    {
        echo
        echo "## Streams scaling (ms until all tasks run again, per round)"
        echo
        echo "| client | 1 -> 3 instances | 3 -> 1 instance |"
        echo "|---|---|---|"
        for c in "${clients[@]}"; do
            row="$(sed -n 's/^streams_scale: result client=[^ ]* up_ms=\([^ ]*\) down_ms=\([^ ]*\)$/\1 | \2/p' \
                "$work/$c.stderr" 2>/dev/null | tail -n 1)"
            echo "| scale: $c | ${row:-no figures (see the failing cells) | -} |"
        done
    } >>"$out"
    sed -n '/^## Streams scaling/,$p' "$out" >&2
fi
exit "$status"
