#!/usr/bin/env bash
# A reference Apache Kafka on 127.0.0.1: three combined broker+controller KRaft nodes of the
# stock broker from Maven Central, to measure onelog against (issue #6).
#
#   scripts/kafka-reference.sh up [--flush-default]   format (first time) and start nodes 1..3,
#                                  wait until all three serve; prints the bootstrap servers,
#                                  the start-up time and each node's resident memory
#   scripts/kafka-reference.sh down [--wipe]   SIGTERM all three (SIGKILL after 60 s); data is
#                                  kept, or the whole KAFKA_REF_DIR removed with --wipe
#   scripts/kafka-reference.sh status          one line per node: pid, ports, memory, flush mode
#   scripts/kafka-reference.sh check           create a topic with replication factor 3,
#                                  produce and consume 5 records and 1,000 transactional ones
#                                  (Kafka's own console tools and producer-perf-test)
#   scripts/kafka-reference.sh tool CLASS ARGS...   run a Kafka tool class from the same
#                                  classpath, e.g. org.apache.kafka.tools.TopicCommand --list
#                                  --bootstrap-server 127.0.0.1:29092; JVM options from
#                                  KAFKA_REF_TOOL_JVM_OPTS (default -Xmx256m -XX:TieredStopAtLevel=1).
#                                  kafka-configs moved from kafka.admin.ConfigCommand (kafka_2.13,
#                                  4.1.1) to org.apache.kafka.tools.ConfigCommand (kafka-tools,
#                                  4.4.0): either name runs the one this classpath has
#   scripts/kafka-reference.sh classpath       print the path of the classpath file
#   scripts/kafka-reference.sh version         print the broker version the classpath resolves to
#
# Broker: org.apache.kafka:kafka_2.13 (main class kafka.Kafka) with kafka-tools and a log4j2
# binding, resolved by Maven from harness/kafka-reference/pom.xml into the local Maven cache;
# the classpath is written to harness/kafka-reference/target/classpath and rebuilt only when
# the pom or KAFKA_REF_MAVEN_ARGS change (KAFKA_REF_MAVEN_ARGS=-Dkafka.version=4.1.1 for
# another broker; the default is 4.4.0, the newest Kafka whose clients the compat matrix runs;
# harness/java's benchmark clients stay kafka-clients 4.1.1). Needs java 17 and mvn.
#
# Settings, after the kafka-tx-performance seed: default.replication.factor=3,
# min.insync.replicas=2, the offsets and transaction-state topics at replication factor 3
# (transaction.state.log.min.isr=2), group.initial.rebalance.delay.ms=0, and
# log.flush.interval.messages=1: every append to every partition, internal ones included, is
# fsynced before it counts, as onelog fsyncs its Raft log before acknowledging. `up
# --flush-default` leaves Kafka's default flush settings instead (the OS flushes; durability
# comes from replication alone); that run must be labelled as such wherever it is reported.
# The flush mode is a broker setting, so `down` then `up` with the other mode switches it on
# the same data; `status` shows the mode in force.
#
# Ports: node ID serves Kafka on KAFKA_REF_PORT+ID-1 (default 29092, 29093, 29094) and its
# controller on KAFKA_REF_CONTROLLER_PORT+ID-1 (default 29192..29194); never onelog's 9092...
# Files: KAFKA_REF_DIR (default ./.kafka-ref) holds cluster-id, flush-mode, log4j2 configs and
# node-ID/ for each node: server.properties, data/ (log.dirs and the KRaft metadata log),
# kafka.log (stdout and stderr, appended across restarts), kafka.pid.
# JVM: KAFKA_REF_HEAP (default 512m) is each node's -Xms and -Xmx; G1 as Kafka's own scripts.
# Security (issue #15): KAFKA_REF_SECURITY_DIR=DIR (certificates of scripts/security-certs.sh
# DIR) at `up` adds, on every node, a SASL_SSL listener (SCRAM-SHA-256 and -512) on
# KAFKA_REF_SASL_SSL_PORT+ID-1 (default 29292..) and an SSL listener with ssl.client.auth=required
# on KAFKA_REF_SSL_PORT+ID-1 (default 29392..), both PEM (DIR/node-ID.pem, DIR/ca.pem), and the
# StandardAuthorizer with allow.everyone.if.no.acl.found=false and super.users User:admin,
# User:CN=admin,OU=clients,O=onelog-test and User:ANONYMOUS: the PLAINTEXT and controller
# listeners (loopback, unauthenticated) are the brokers' own and the bootstrap administration's.
# SCRAM without TLS: KAFKA_REF_SASL_PLAINTEXT_PORT=PORT at `up` adds, on every node, a
# SASL_PLAINTEXT listener (SCRAM-SHA-256 and -512, no authorizer) on PORT+ID-1, as onelog's
# ONELOG_SASL_PLAINTEXT_BASE_PORT (scripts/kgo-suite.sh --kafka); not with KAFKA_REF_SECURITY_DIR.
# Experiments: KAFKA_REF_EXTRA_CONFIG="key=value,key=value" appends those broker settings to
# every node's server.properties at `up` (e.g. add.partitions.to.txn.retry.backoff.ms=1, for
# scripts/bench-profile.sh); a run with it is not the reference and must say so.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
module="$repo/harness/kafka-reference"
kafka_base_port="${KAFKA_REF_PORT:-29092}"
controller_base_port="${KAFKA_REF_CONTROLLER_PORT:-29192}"
sasl_ssl_base_port="${KAFKA_REF_SASL_SSL_PORT:-29292}"
ssl_base_port="${KAFKA_REF_SSL_PORT:-29392}"
security_dir="${KAFKA_REF_SECURITY_DIR:-}"
sasl_plaintext_base_port="${KAFKA_REF_SASL_PLAINTEXT_PORT:-}"
ref_dir="${KAFKA_REF_DIR:-./.kafka-ref}"
heap="${KAFKA_REF_HEAP:-512m}"
maven_args="${KAFKA_REF_MAVEN_ARGS:-}"
nodes=3
ready_timeout_s=120
stop_timeout_s=60

die() { echo "kafka-reference.sh: $*" >&2; exit 1; }

case "$ref_dir" in /*) ;; *) ref_dir="$PWD/${ref_dir#./}" ;; esac

kafka_port() { echo $((kafka_base_port + $1 - 1)); }
controller_port() { echo $((controller_base_port + $1 - 1)); }
sasl_ssl_port() { echo $((sasl_ssl_base_port + $1 - 1)); }
ssl_port() { echo $((ssl_base_port + $1 - 1)); }
sasl_plaintext_port() { echo $((sasl_plaintext_base_port + $1 - 1)); }
node_dir() { echo "$ref_dir/node-$1"; }
pid_file() { echo "$(node_dir "$1")/kafka.pid"; }
log_file() { echo "$(node_dir "$1")/kafka.log"; }

bootstrap() {
    local id out=""
    for id in $(seq 1 "$nodes"); do out+="${out:+,}127.0.0.1:$(kafka_port "$id")"; done
    echo "$out"
}

# The classpath file, resolved by Maven when missing or stale (as scripts/java-build.sh).
classpath_file() {
    local out="$module/target/classpath" stamp="$module/target/classpath.args"
    if [ -f "$out" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$maven_args" ] && [ ! "$module/pom.xml" -nt "$out" ]; then
        echo "$out"
        return
    fi
    local tool
    for tool in mvn java; do
        command -v "$tool" >/dev/null 2>&1 || die "$tool not found (apt-get install maven openjdk-17-jdk-headless)"
    done
    mkdir -p "$module/target"
    # Debian's Maven 3.8 prints colour resets even in batch mode; they are stripped.
    # shellcheck disable=SC2086 # KAFKA_REF_MAVEN_ARGS is a list of Maven arguments.
    (cd "$module" && mvn -q -B $maven_args dependency:build-classpath -Dmdep.outputFile="$out.tmp") 2>&1 |
        sed 's/\x1b\[[0-9;]*m//g' >&2
    [ -s "$out.tmp" ] || die "Maven wrote no classpath (see above)"
    mv "$out.tmp" "$out"
    printf '%s' "$maven_args" >"$stamp"
    echo "$out"
}

classpath() { cat "$(classpath_file)"; }

# The pid of a running node, or nothing.
running_pid() {
    local file pid
    file="$(pid_file "$1")"
    [ -f "$file" ] || return 0
    pid="$(cat "$file")"
    if kill -0 "$pid" 2>/dev/null; then echo "$pid"; fi
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

rss_mib() { awk '/^VmRSS:/ { printf "%d", $2 / 1024 }' "/proc/$1/status" 2>/dev/null || echo "?"; }

write_log4j_configs() {
    # Brokers: INFO to stdout, which goes to node-ID/kafka.log.
    cat >"$ref_dir/log4j2-broker.properties" <<'EOF'
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = out
logger.request.name = kafka.request.logger
logger.request.level = warn
EOF
    # Tools: warnings only, to stderr, so their stdout is just their output.
    cat >"$ref_dir/log4j2-tools.properties" <<'EOF'
status = warn
appender.err.type = Console
appender.err.name = err
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.err.ref = err
EOF
}

# tool_cmd: the java command of a Kafka tool or the storage tool (CLASS ARGS follow), with
# KAFKA_REF_TOOL_JVM_OPTS (default a small heap and C1 only: most of a tool's run is its start).
tool_command() {
    [ -f "$ref_dir/log4j2-tools.properties" ] || { mkdir -p "$ref_dir" && write_log4j_configs; }
    local -a opts
    read -r -a opts <<<"${KAFKA_REF_TOOL_JVM_OPTS:--Xmx256m -XX:TieredStopAtLevel=1}"
    tool_cmd=(java "${opts[@]}" -Djava.awt.headless=true
        -Dlog4j2.configurationFile="$ref_dir/log4j2-tools.properties" -cp "$(classpath)")
}

# The ConfigCommand class of this classpath (see `tool` above).
config_command_class() {
    local jar
    jar="$(tr ':' '\n' <"$(classpath_file)" | grep '/kafka-tools-[0-9][^/]*\.jar$' | head -n 1)"
    if [ -n "$jar" ] && python3 -c 'import sys, zipfile
sys.exit("org/apache/kafka/tools/ConfigCommand.class" not in zipfile.ZipFile(sys.argv[1]).namelist())' "$jar"; then
        echo org.apache.kafka.tools.ConfigCommand
    else
        echo kafka.admin.ConfigCommand
    fi
}

run_tool() { # run_tool CLASS ARGS...
    tool_command
    "${tool_cmd[@]}" "$@"
}

write_server_properties() {
    local id="$1" flush_mode="$2" voters="" other
    for other in $(seq 1 "$nodes"); do
        voters+="${voters:+,}$other@127.0.0.1:$(controller_port "$other")"
    done
    cat >"$(node_dir "$id")/server.properties" <<EOF
# Written by scripts/kafka-reference.sh up; rewritten at every up.
process.roles=broker,controller
node.id=$id
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:$(kafka_port "$id"),CONTROLLER://127.0.0.1:$(controller_port "$id")
advertised.listeners=PLAINTEXT://127.0.0.1:$(kafka_port "$id")
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=$(node_dir "$id")/data
num.partitions=1
default.replication.factor=3
min.insync.replicas=2
offsets.topic.replication.factor=3
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
group.initial.rebalance.delay.ms=0
EOF
    if [ -n "$security_dir" ]; then
        local certs
        certs="$(cd "$security_dir" && pwd)"
        [ -s "$certs/node-$id.pem" ] && [ -s "$certs/ca.pem" ] ||
            die "KAFKA_REF_SECURITY_DIR=$security_dir has no node-$id.pem/ca.pem (scripts/security-certs.sh)"
        # Later keys win in a properties file: these replace the PLAINTEXT-only listener lines.
        cat >>"$(node_dir "$id")/server.properties" <<EOF
# KAFKA_REF_SECURITY_DIR: the listeners and authorizer of onelog's security acceptance.
listeners=PLAINTEXT://127.0.0.1:$(kafka_port "$id"),CONTROLLER://127.0.0.1:$(controller_port "$id"),SASL_SSL://127.0.0.1:$(sasl_ssl_port "$id"),SSL://127.0.0.1:$(ssl_port "$id")
advertised.listeners=PLAINTEXT://127.0.0.1:$(kafka_port "$id"),SASL_SSL://127.0.0.1:$(sasl_ssl_port "$id"),SSL://127.0.0.1:$(ssl_port "$id")
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL
ssl.keystore.type=PEM
ssl.keystore.location=$certs/node-$id.pem
ssl.truststore.type=PEM
ssl.truststore.location=$certs/ca.pem
listener.name.ssl.ssl.client.auth=required
sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=false
super.users=User:ANONYMOUS;User:admin;User:CN=admin,OU=clients,O=onelog-test
EOF
    fi
    if [ -n "$sasl_plaintext_base_port" ]; then
        [ -z "$security_dir" ] || die "KAFKA_REF_SASL_PLAINTEXT_PORT and KAFKA_REF_SECURITY_DIR do not combine"
        cat >>"$(node_dir "$id")/server.properties" <<EOF
# KAFKA_REF_SASL_PLAINTEXT_PORT: SCRAM over plaintext, as onelog's SASL_PLAINTEXT listener.
listeners=PLAINTEXT://127.0.0.1:$(kafka_port "$id"),CONTROLLER://127.0.0.1:$(controller_port "$id"),SASL_PLAINTEXT://127.0.0.1:$(sasl_plaintext_port "$id")
advertised.listeners=PLAINTEXT://127.0.0.1:$(kafka_port "$id"),SASL_PLAINTEXT://127.0.0.1:$(sasl_plaintext_port "$id")
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT
sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
EOF
    fi
    if [ "$flush_mode" = per-message ]; then
        cat >>"$(node_dir "$id")/server.properties" <<'EOF'
# fsync every append before it counts, as onelog does (Kafka's default leaves it to the OS).
log.flush.interval.messages=1
EOF
    fi
    if [ -n "${KAFKA_REF_EXTRA_CONFIG:-}" ]; then
        echo "# KAFKA_REF_EXTRA_CONFIG (an experiment, not the reference settings)"
        tr ',' '\n' <<<"$KAFKA_REF_EXTRA_CONFIG" | sed 's/^ *//; s/ *$//; /^$/d'
    fi >>"$(node_dir "$id")/server.properties"
}

# Formats a node's storage with the shared cluster id, once.
format_node() {
    local id="$1"
    [ -f "$(node_dir "$id")/data/meta.properties" ] && return 0
    run_tool kafka.tools.StorageTool format --cluster-id "$(cat "$ref_dir/cluster-id")" \
        --config "$(node_dir "$id")/server.properties" >"$(node_dir "$id")/format.out" 2>&1 ||
        { cat "$(node_dir "$id")/format.out" >&2; die "formatting node $id failed"; }
}

start_node() {
    local id="$1" pid
    # setsid: the node outlives this shell and a Ctrl-C in it. The JVM flags are those of
    # Kafka's kafka-run-class.sh and kafka-server-start.sh, with a smaller heap.
    setsid java -Xms"$heap" -Xmx"$heap" -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
        -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent \
        -XX:MaxInlineLevel=15 -Djava.awt.headless=true \
        -Dlog4j2.configurationFile="$ref_dir/log4j2-broker.properties" \
        -cp "$(classpath)" kafka.Kafka "$(node_dir "$id")/server.properties" \
        </dev/null >>"$(log_file "$id")" 2>&1 &
    pid=$!
    echo "$pid" >"$(pid_file "$id")"
    echo "node $id: pid $pid, kafka 127.0.0.1:$(kafka_port "$id"), controller 127.0.0.1:$(controller_port "$id"), log $(log_file "$id")"
}

# A node has started when its log says so after the line it had when `up` started it.
wait_started() {
    local id="$1" from_line="$2" deadline="$3"
    # awk, not tail | grep -q: under pipefail, grep quitting early fails the pipeline (SIGPIPE).
    until awk -v from="$from_line" 'NR > from && /Kafka Server started/ { found = 1; exit } END { exit !found }' \
        "$(log_file "$id")"; do
        [ -n "$(running_pid "$id")" ] || { tail -n 30 "$(log_file "$id")" >&2; die "node $id exited"; }
        [ "$SECONDS" -lt "$deadline" ] || { tail -n 30 "$(log_file "$id")" >&2; die "node $id not started after ${ready_timeout_s}s"; }
        sleep 0.2
    done
}

# Then the metadata must list all three brokers, each answering ApiVersions.
wait_all_brokers() {
    local deadline="$1" out
    while :; do
        out="$(run_tool org.apache.kafka.tools.BrokerApiVersionsCommand --bootstrap-server "$(bootstrap)" 2>/dev/null || true)"
        [ "$(grep -c '^127\.0\.0\.1:[0-9]* (id: [0-9]*' <<<"$out")" -eq "$nodes" ] && return 0
        [ "$SECONDS" -lt "$deadline" ] || die "the metadata does not list $nodes brokers after ${ready_timeout_s}s"
        sleep 1
    done
}

cmd_up() {
    local flush_mode=per-message id started=0 deadline
    case "${1:-}" in
        "") ;;
        --flush-default) flush_mode=default ;;
        *) die "up: unknown argument '$1' (--flush-default or nothing)" ;;
    esac
    command -v java >/dev/null 2>&1 || die "java not found (apt-get install openjdk-17-jdk-headless)"
    classpath_file >/dev/null
    for id in $(seq 1 "$nodes"); do
        [ -n "$(running_pid "$id")" ] && started=$((started + 1))
    done
    if [ "$started" -gt 0 ]; then
        [ "$(cat "$ref_dir/flush-mode" 2>/dev/null)" = "$flush_mode" ] ||
            die "nodes are running with flush mode $(cat "$ref_dir/flush-mode" 2>/dev/null); 'down' first to switch"
    fi
    for id in $(seq 1 "$nodes"); do
        [ -n "$(running_pid "$id")" ] && continue
        for port in "$(kafka_port "$id")" "$(controller_port "$id")" \
            ${security_dir:+"$(sasl_ssl_port "$id")" "$(ssl_port "$id")"} \
            ${sasl_plaintext_base_port:+"$(sasl_plaintext_port "$id")"}; do
            port_open "$port" && die "port $port is in use by another process"
        done
    done
    local t0=$SECONDS
    mkdir -p "$ref_dir"
    write_log4j_configs
    [ -s "$ref_dir/cluster-id" ] || run_tool kafka.tools.StorageTool random-uuid >"$ref_dir/cluster-id"
    echo "$flush_mode" >"$ref_dir/flush-mode"
    local -a from_line to_start=()
    for id in $(seq 1 "$nodes"); do
        [ -n "$(running_pid "$id")" ] && { echo "node $id already running"; continue; }
        to_start+=("$id")
        mkdir -p "$(node_dir "$id")"
        touch "$(log_file "$id")"
        from_line[id]="$(wc -l <"$(log_file "$id")")"
        write_server_properties "$id" "$flush_mode"
        format_node "$id"
    done
    local t_formatted=$SECONDS
    for id in "${to_start[@]}"; do start_node "$id"; done
    deadline=$((SECONDS + ready_timeout_s))
    for id in "${to_start[@]}"; do wait_started "$id" "${from_line[id]}" "$deadline"; done
    wait_all_brokers "$deadline"
    echo "up in $((SECONDS - t0)) s ($((t_formatted - t0)) s classpath, cluster id and format; $((SECONDS - t_formatted)) s to all brokers serving)"
    for id in $(seq 1 "$nodes"); do
        echo "node $id: resident $(rss_mib "$(running_pid "$id")") MiB (heap -Xmx$heap)"
    done
    echo "flush: $flush_mode$([ "$flush_mode" = per-message ] && echo ' (log.flush.interval.messages=1)' || echo " (Kafka's default flush settings)")"
    echo "bootstrap servers: $(bootstrap)"
}

cmd_down() {
    local wipe=0 id pid pids=() waited=0 t0=$SECONDS
    case "${1:-}" in
        "") ;;
        --wipe) wipe=1 ;;
        *) die "down: unknown argument '$1' (--wipe or nothing)" ;;
    esac
    # All at once, as kafka-server-stop.sh does: stopped one by one, the last two nodes would
    # each wait for a controller quorum that has gone.
    for id in $(seq 1 "$nodes"); do
        pid="$(running_pid "$id")"
        [ -n "$pid" ] || { echo "node $id is not running"; continue; }
        kill -s TERM "$pid"
        pids+=("$id:$pid")
    done
    for entry in "${pids[@]}"; do
        id="${entry%%:*}" pid="${entry#*:}"
        while kill -0 "$pid" 2>/dev/null; do
            if [ "$waited" -ge $((stop_timeout_s * 10)) ]; then
                echo "node $id (pid $pid) still running ${stop_timeout_s}s after SIGTERM; sending SIGKILL" >&2
                kill -s KILL "$pid" 2>/dev/null || true
            fi
            sleep 0.1
            waited=$((waited + 1))
        done
        rm -f "$(pid_file "$id")"
        echo "node $id (pid $pid) stopped"
    done
    echo "down in $((SECONDS - t0)) s"
    if [ "$wipe" = 1 ]; then
        [ -f "$ref_dir/cluster-id" ] || [ ! -d "$ref_dir/node-1" ] ||
            die "$ref_dir has node directories but no cluster-id; not wiping what may not be ours"
        rm -rf "$ref_dir"
        echo "wiped $ref_dir"
    fi
}

cmd_status() {
    local id pid
    [ -f "$ref_dir/cluster-id" ] || die "no reference cluster in $ref_dir: run 'up' first"
    echo "cluster id $(cat "$ref_dir/cluster-id"), flush mode $(cat "$ref_dir/flush-mode" 2>/dev/null || echo ?), dir $ref_dir"
    for id in $(seq 1 "$nodes"); do
        pid="$(running_pid "$id")"
        if [ -n "$pid" ]; then
            printf 'node %s  pid %-8s kafka %s  controller %s  resident %s MiB\n' "$id" "$pid" \
                "$(kafka_port "$id")" "$(controller_port "$id")" "$(rss_mib "$pid")"
        else
            printf 'node %s  down         kafka %s  controller %s\n' "$id" "$(kafka_port "$id")" "$(controller_port "$id")"
        fi
    done
}

# A smoke test of the running cluster with Kafka's own tools.
cmd_check() {
    local topic bs out n=5 txn_records=1000
    topic="ref-check-$(date +%s)"
    bs="$(bootstrap)"
    run_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$bs" --create --topic "$topic" \
        --partitions 3 --replication-factor 3
    run_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$bs" --describe --topic "$topic"
    seq 1 "$n" | sed 's/^/record-/' | run_tool org.apache.kafka.tools.ConsoleProducer --bootstrap-server "$bs" \
        --topic "$topic" --producer-property acks=all
    out="$(run_tool org.apache.kafka.tools.consumer.ConsoleConsumer --bootstrap-server "$bs" --topic "$topic" \
        --from-beginning --max-messages "$n" --timeout-ms 30000 --group "$topic-group")"
    [ "$(wc -l <<<"$out")" -eq "$n" ] || die "check: consumed $(wc -l <<<"$out") of $n records: $out"
    echo "consumed $n of $n records: $(sort <<<"$out" | paste -sd' ')"
    # KIP-98 transactions: producer-perf-test commits a transaction every 50 ms.
    run_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$bs" --create --topic "$topic-txn" \
        --partitions 3 --replication-factor 3
    run_tool org.apache.kafka.tools.ProducerPerformance --topic "$topic-txn" --num-records "$txn_records" \
        --record-size 100 --throughput -1 --transactional-id "$topic-txn-producer" \
        --transaction-duration-ms 50 --producer-props bootstrap.servers="$bs" acks=all
    out="$(run_tool org.apache.kafka.tools.consumer.ConsoleConsumer --bootstrap-server "$bs" --topic "$topic-txn" \
        --from-beginning --max-messages "$txn_records" --timeout-ms 30000 --isolation-level read_committed \
        --property print.value=false --property print.offset=true --property print.partition=true)"
    [ "$(wc -l <<<"$out")" -eq "$txn_records" ] || die "check: read_committed consumed $(wc -l <<<"$out") of $txn_records"
    echo "read_committed consumed $txn_records of $txn_records transactional records; last $(tail -n 1 <<<"$out")"
    run_tool org.apache.kafka.tools.TransactionsCommand --bootstrap-server "$bs" describe \
        --transactional-id "$topic-txn-producer"
    echo "check passed"
}

case "${1:-}" in
    up) shift; cmd_up "$@" ;;
    down) shift; cmd_down "$@" ;;
    status) cmd_status ;;
    check) cmd_check ;;
    # exec, so that a caller's timeout or kill reaches the JVM, not a shell waiting for it.
    tool)
        shift
        [ $# -ge 1 ] || die "tool CLASS ARGS..."
        case "$1" in
            kafka.admin.ConfigCommand | org.apache.kafka.tools.ConfigCommand) set -- "$(config_command_class)" "${@:2}" ;;
        esac
        tool_command
        exec "${tool_cmd[@]}" "$@" ;;
    classpath) classpath_file ;;
    version) tr ':' '\n' <"$(classpath_file)" | sed -n 's|.*/kafka_2\.13-\([^/]*\)\.jar$|\1|p' | head -n 1 ;;
    *) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 2 ;;
esac
