#!/usr/bin/env bash
# A local onelog cluster on 127.0.0.1, for trying failover by hand.
#
#   scripts/cluster.sh up [N]     start N voters (default 3); prints the bootstrap servers
#   scripts/cluster.sh down       SIGTERM every node (SIGKILL after 30 s); data is kept
#   scripts/cluster.sh kill ID    SIGKILL node ID
#   scripts/cluster.sh stop ID    SIGTERM node ID and wait for it to exit
#   scripts/cluster.sh start ID   start node ID again on its ports and data
#   scripts/cluster.sh leader     print the leader's node id (admin API, needs curl)
#   scripts/cluster.sh status     one line per node: pid, ports, role, leader, term, applied
#
# Ports: node ID serves Kafka on ONELOG_BASE_PORT+ID-1 (default 9092, 9093, ...), Raft on
# ONELOG_RAFT_BASE_PORT+ID-1 (default Kafka base + 100) and the admin API on
# ONELOG_ADMIN_BASE_PORT+ID-1 (default Kafka base + 200).
# Files: ONELOG_CLUSTER_DIR (default ./.cluster) holds `nodes` (the voter count), `admin` (1
# when the binary has --admin-listen), `cluster-secret` (the Raft handshake's key) and one directory per node, node-ID/, which is that
# node's --data-dir and also holds onelog.log (stdout and stderr, appended across restarts)
# and onelog.pid. `rm -rf` it after `down` to start from scratch.
# Configs: ONELOG_CONFIGS, space-separated key=value broker configs passed to every node as
# --config (e.g. "log.segment.bytes=1048576", which scripted suites creating many topics set).
# Security (issue #15): ONELOG_SECURITY_DIR=DIR (certificates of scripts/security-certs.sh DIR)
# gives every node, besides its PLAINTEXT listener, a SASL_SSL listener (SCRAM) on
# ONELOG_SASL_SSL_BASE_PORT+ID-1 (default Kafka base + 300) and an SSL listener with
# ssl.client.auth=required on ONELOG_SSL_BASE_PORT+ID-1 (default Kafka base + 400), PEM
# (DIR/node-ID.pem, DIR/ca.pem), the ACL authorizer with allow.everyone.if.no.acl.found=false
# and super.users=User:admin;User:CN=admin,OU=clients,O=onelog-test; peers advertise all three.
# ONELOG_SECURITY_AUTHORIZER overrides authorizer.class.name (set and empty: no authorizer).
# Without ONELOG_SECURITY_DIR, ONELOG_SASL_PLAINTEXT_BASE_PORT=P gives every node a
# SASL_PLAINTEXT listener (SCRAM-SHA-256/512, no TLS, no authorizer) on P+ID-1 beside its
# PLAINTEXT one: for client suites that test SCRAM logins (scripts/kgo-suite.sh).
# Admin API over HTTPS (nodes configured with onelog.admin.ssl.* through ONELOG_CONFIGS or the
# environment): ONELOG_ADMIN_CA=PATH, the CA of its certificate, makes `leader` and `status`
# call it with curl --cacert over https; unset, plain http as before.
# Binary: ONELOG_BIN, else ${CARGO_TARGET_DIR:-target}/release/onelog, built first with
# `cargo build --release -p broker`.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
base_port="${ONELOG_BASE_PORT:-9092}"
raft_base_port="${ONELOG_RAFT_BASE_PORT:-$((base_port + 100))}"
admin_base_port="${ONELOG_ADMIN_BASE_PORT:-$((base_port + 200))}"
cluster_dir="${ONELOG_CLUSTER_DIR:-./.cluster}"
ready_timeout_s=30
stop_timeout_s=30

die() { echo "cluster.sh: $*" >&2; exit 1; }

kafka_port() { echo $((base_port + $1 - 1)); }
raft_port() { echo $((raft_base_port + $1 - 1)); }
admin_port() { echo $((admin_base_port + $1 - 1)); }
security_dir="${ONELOG_SECURITY_DIR:-}"
sasl_ssl_port() { echo $((${ONELOG_SASL_SSL_BASE_PORT:-$((base_port + 300))} + $1 - 1)); }
ssl_port() { echo $((${ONELOG_SSL_BASE_PORT:-$((base_port + 400))} + $1 - 1)); }
sasl_plaintext_base="${ONELOG_SASL_PLAINTEXT_BASE_PORT:-}"
# A node's Kafka address(es) as peers and advertised.listeners name them.
kafka_addresses() {
    if [ -n "$security_dir" ]; then
        echo "PLAINTEXT://127.0.0.1:$(kafka_port "$1");SASL_SSL://127.0.0.1:$(sasl_ssl_port "$1");SSL://127.0.0.1:$(ssl_port "$1")"
    elif [ -n "$sasl_plaintext_base" ]; then
        echo "PLAINTEXT://127.0.0.1:$(kafka_port "$1");SASL_PLAINTEXT://127.0.0.1:$((sasl_plaintext_base + $1 - 1))"
    else
        echo "127.0.0.1:$(kafka_port "$1")"
    fi
}
# The security settings of node $1 (ONELOG_SECURITY_DIR, ONELOG_SASL_PLAINTEXT_BASE_PORT), one
# --config each.
security_args() {
    local certs listeners kv
    if [ -z "$security_dir" ] && [ -n "$sasl_plaintext_base" ]; then
        listeners="$(kafka_addresses "$1" | tr ';' ',')"
        for kv in "listeners=$listeners" "advertised.listeners=$listeners" \
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT" \
            sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512; do
            printf '%s\0%s\0' --config "$kv"
        done
    fi
    [ -n "$security_dir" ] || return 0
    certs="$(cd "$security_dir" && pwd)"
    [ -s "$certs/node-$1.pem" ] && [ -s "$certs/ca.pem" ] ||
        die "ONELOG_SECURITY_DIR=$security_dir has no node-$1.pem/ca.pem (scripts/security-certs.sh)"
    listeners="$(kafka_addresses "$1" | tr ';' ',')"
    for kv in "listeners=$listeners" "advertised.listeners=$listeners" \
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL" \
        ssl.keystore.type=PEM "ssl.keystore.location=$certs/node-$1.pem" \
        ssl.truststore.type=PEM "ssl.truststore.location=$certs/ca.pem" \
        listener.name.ssl.ssl.client.auth=required sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512 \
        "authorizer.class.name=${ONELOG_SECURITY_AUTHORIZER-org.apache.kafka.metadata.authorizer.StandardAuthorizer}" \
        allow.everyone.if.no.acl.found=false "super.users=User:admin;User:CN=admin,OU=clients,O=onelog-test"; do
        printf '%s\0%s\0' --config "$kv"
    done
}
node_dir() { echo "$cluster_dir/node-$1"; }
pid_file() { echo "$(node_dir "$1")/onelog.pid"; }
log_file() { echo "$(node_dir "$1")/onelog.log"; }

node_count() {
    [ -f "$cluster_dir/nodes" ] || die "no cluster in $cluster_dir: run 'up' first"
    cat "$cluster_dir/nodes"
}

check_id() {
    local id="$1" n
    n="$(node_count)"
    if ! [[ "$id" =~ ^[0-9]+$ ]] || [ "$id" -lt 1 ] || [ "$id" -gt "$n" ]; then
        die "node id must be 1..$n, got '$id'"
    fi
}

binary() {
    if [ -n "${ONELOG_BIN:-}" ]; then
        [ -x "$ONELOG_BIN" ] || die "ONELOG_BIN=$ONELOG_BIN is not executable"
        echo "$ONELOG_BIN"
        return
    fi
    (cd "$repo" && cargo build --release -p broker >&2) || die "building the broker failed"
    local target="${CARGO_TARGET_DIR:-$repo/target}"
    [[ "$target" = /* ]] || target="$repo/$target"
    echo "$target/release/onelog"
}

has_admin() { "$1" --help 2>/dev/null | grep -q -- '--admin-listen'; }

# Whether `up` found --admin-listen in the binary (recorded in $cluster_dir/admin).
admin_enabled() { [ "$(cat "$cluster_dir/admin" 2>/dev/null)" = 1 ]; }

# The pid of a running node, or nothing.
running_pid() {
    local file pid
    file="$(pid_file "$1")"
    [ -f "$file" ] || return 0
    pid="$(cat "$file")"
    if kill -0 "$pid" 2>/dev/null; then echo "$pid"; fi
}

start_node() {
    local id="$1" bin="$2" n peers="" other dir pid
    n="$(node_count)"
    [ -z "$(running_pid "$id")" ] || die "node $id is already running (pid $(running_pid "$id"))"
    for other in $(seq 1 "$n"); do
        [ "$other" -eq "$id" ] && continue
        peers+="${peers:+,}$other=127.0.0.1:$(raft_port "$other")@$(kafka_addresses "$other")"
    done
    dir="$(node_dir "$id")"
    mkdir -p "$dir"
    local args=(--node-id "$id" --data-dir "$dir"
        --kafka-listen "127.0.0.1:$(kafka_port "$id")" --advertised-kafka "127.0.0.1:$(kafka_port "$id")"
        --raft-listen "127.0.0.1:$(raft_port "$id")")
    [ -n "$peers" ] && args+=(--peers "$peers")
    local config
    for config in ${ONELOG_CONFIGS:-}; do args+=(--config "$config"); done
    admin_enabled && args+=(--admin-listen "127.0.0.1:$(admin_port "$id")")
    local -a security=()
    mapfile -d '' security < <(security_args "$id")
    args+=("${security[@]}")
    # The Raft handshake's shared secret (`onelog.cluster.secret.file`), made by `up`.
    [ -f "$cluster_dir/cluster-secret" ] &&
        args+=(--config "onelog.cluster.secret.file=$(cd "$cluster_dir" && pwd)/cluster-secret")
    # setsid: the node outlives this shell and a Ctrl-C in it.
    NO_COLOR=1 setsid "$bin" "${args[@]}" </dev/null >>"$(log_file "$id")" 2>&1 &
    pid=$!
    echo "$pid" >"$(pid_file "$id")"
    echo "node $id: pid $pid, kafka 127.0.0.1:$(kafka_port "$id"), log $(log_file "$id")"
}

# A onelog node binds its Kafka port only once it knows a leader and has applied its log.
wait_serving() {
    local id="$1" waited=0
    until (exec 3<>"/dev/tcp/127.0.0.1/$(kafka_port "$id")") 2>/dev/null; do
        [ -n "$(running_pid "$id")" ] || { tail -n 30 "$(log_file "$id")" >&2; die "node $id exited"; }
        [ "$waited" -lt $((ready_timeout_s * 10)) ] || {
            tail -n 30 "$(log_file "$id")" >&2
            die "node $id not serving Kafka after ${ready_timeout_s}s"
        }
        sleep 0.1
        waited=$((waited + 1))
    done
}

bootstrap() {
    local n id out=""
    n="$(node_count)"
    for id in $(seq 1 "$n"); do out+="${out:+,}127.0.0.1:$(kafka_port "$id")"; done
    echo "$out"
}

signal_and_wait() {
    local id="$1" signal="$2" pid waited=0
    pid="$(running_pid "$id")"
    [ -n "$pid" ] || { echo "node $id is not running"; return 0; }
    kill -s "$signal" "$pid"
    while kill -0 "$pid" 2>/dev/null; do
        if [ "$waited" -ge $((stop_timeout_s * 10)) ]; then
            echo "node $id (pid $pid) still running ${stop_timeout_s}s after SIG$signal; sending SIGKILL" >&2
            kill -s KILL "$pid" 2>/dev/null || true
        fi
        sleep 0.1
        waited=$((waited + 1))
    done
    rm -f "$(pid_file "$id")"
    echo "node $id (pid $pid) stopped with SIG$signal"
}

admin_status() { # HTTPS when the nodes' admin API has onelog.admin.ssl.* (ONELOG_ADMIN_CA: its CA)
    if [ -n "${ONELOG_ADMIN_CA:-}" ]; then
        curl -s --max-time 2 --cacert "$ONELOG_ADMIN_CA" "https://127.0.0.1:$(admin_port "$1")/status"
    else
        curl -s --max-time 2 "http://127.0.0.1:$(admin_port "$1")/status"
    fi
}

json_field() { # json_field NAME < json: a number, null, or a quoted string's contents
    sed -n "s/.*\"$1\" *: *\"\{0,1\}\([^\",} ]*\).*/\1/p"
}

cmd_up() {
    local n="${1:-3}" bin id
    if ! [[ "$n" =~ ^[0-9]+$ ]] || [ "$n" -lt 1 ]; then die "up: node count must be a positive number"; fi
    if [ -f "$cluster_dir/nodes" ] && [ "$(cat "$cluster_dir/nodes")" != "$n" ]; then
        die "$cluster_dir holds a $(cat "$cluster_dir/nodes")-node cluster; 'down' and remove it first"
    fi
    bin="$(binary)"
    mkdir -p "$cluster_dir"
    echo "$n" >"$cluster_dir/nodes"
    # Every node proves this secret to its peers; kept with the cluster (and its data).
    if [ ! -f "$cluster_dir/cluster-secret" ]; then
        (umask 077; od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$cluster_dir/cluster-secret")
    fi
    if has_admin "$bin"; then echo 1 >"$cluster_dir/admin"; else echo 0 >"$cluster_dir/admin"; fi
    for id in $(seq 1 "$n"); do
        [ -n "$(running_pid "$id")" ] && { echo "node $id already running"; continue; }
        start_node "$id" "$bin"
    done
    for id in $(seq 1 "$n"); do wait_serving "$id"; done
    admin_enabled || echo "note: $bin has no --admin-listen; 'leader' and 'status' cannot ask the nodes"
    echo "bootstrap servers: $(bootstrap)"
}

cmd_down() {
    local n id
    n="$(node_count)"
    for id in $(seq 1 "$n"); do signal_and_wait "$id" TERM; done
}

cmd_kill() {
    local id="${1:?kill ID}" pid
    check_id "$id"
    pid="$(running_pid "$id")"
    [ -n "$pid" ] || die "node $id is not running"
    kill -s KILL "$pid"
    rm -f "$(pid_file "$id")"
    echo "node $id (pid $pid) killed with SIGKILL"
}

cmd_start() {
    local id="${1:?start ID}"
    check_id "$id"
    start_node "$id" "$(binary)"
    wait_serving "$id"
}

cmd_stop() {
    local id="${1:?stop ID}"
    check_id "$id"
    signal_and_wait "$id" TERM
}

cmd_leader() {
    local n id status leader views="" agreed=""
    n="$(node_count)"
    admin_enabled || die "leader needs the admin API, and the nodes were started without --admin-listen"
    command -v curl >/dev/null || die "leader needs curl"
    for id in $(seq 1 "$n"); do
        [ -n "$(running_pid "$id")" ] || continue
        status="$(admin_status "$id")" || die "node $id: no answer from the admin API on port $(admin_port "$id")"
        leader="$(json_field leader <<<"$status")"
        views+="node $id sees leader ${leader:-?}; "
        if [ -z "$agreed" ]; then agreed="$leader"; elif [ "$agreed" != "$leader" ]; then agreed="disagree"; fi
    done
    if [ -z "$agreed" ] || [ "$agreed" = "disagree" ] || [ "$agreed" = "null" ]; then
        die "no agreed leader: ${views:-no node running}"
    fi
    echo "$agreed"
}

cmd_status() {
    local n id pid status
    n="$(node_count)"
    for id in $(seq 1 "$n"); do
        pid="$(running_pid "$id")"
        printf 'node %s  %-12s kafka %s  raft %s  admin %s  ' "$id" "$([ -n "$pid" ] && echo "pid $pid" || echo down)" \
            "$(kafka_port "$id")" "$(raft_port "$id")" "$(admin_port "$id")"
        if [ -n "$pid" ] && admin_enabled && command -v curl >/dev/null && status="$(admin_status "$id")"; then
            echo "role $(json_field role <<<"$status")  leader $(json_field leader <<<"$status")" \
                " term $(json_field term <<<"$status")  last_applied $(json_field last_applied <<<"$status")"
        else
            echo "-"
        fi
    done
}

case "${1:-}" in
    up) shift; cmd_up "$@" ;;
    down) cmd_down ;;
    kill) shift; cmd_kill "$@" ;;
    start) shift; cmd_start "$@" ;;
    stop) shift; cmd_stop "$@" ;;
    leader) cmd_leader ;;
    status) cmd_status ;;
    *) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 2 ;;
esac
