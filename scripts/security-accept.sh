#!/usr/bin/env bash
# The security acceptance (issue #15): stock clients over SASL_SSL (SCRAM-SHA-512) and over SSL
# with client certificates, against one three-node cluster with the ACL authorizer, set up with
# Kafka's own tools; results as JSON lines and a markdown table (results/security.md).
#
#   scripts/security-accept.sh [--kafka] [--clients a,b] [--keep] [--out FILE]
#
# Steps: certificates (scripts/security-certs.sh) in a temporary directory; the cluster, onelog
# (scripts/cluster.sh with ONELOG_SECURITY_DIR) or with --kafka the reference Apache Kafka (default 4.4.0)
# (scripts/kafka-reference.sh with KAFKA_REF_SECURITY_DIR): a SASL_SSL listener, an SSL listener
# with ssl.client.auth=required and a PLAINTEXT one, the StandardAuthorizer (onelog: its built-in
# ACL authorizer under that name), super.users User:admin;User:CN=admin,OU=clients,O=onelog-test.
# Then, as the admin (its client certificate, over SSL): kafka-configs --alter --add-config
# 'SCRAM-SHA-512=[password=...]' --entity-type users --entity-name alice; kafka-acls: alice and
# User:CN=bob,OU=clients,O=onelog-test may Read and Write topics prefixed sec-, Read groups
# prefixed sec-, Write and Describe transactional id txn-a (none for txn-b); kafka-topics creates
# the topic the clients share. Then every client's driver (harness/compat/, COMPAT_SUITE=security)
# twice: as alice over SASL_SSL and as bob over SSL, each running sec_produce_consume,
# sec_txn_allowed (txn-a committed, read back read_committed), sec_txn_denied (txn-b fails with
# TRANSACTIONAL_ID_AUTHORIZATION_FAILED, a read_uncommitted read sees none of it) and
# sec_bad_credentials (a wrong password; on SSL no client certificate). The CLI driver does the
# same with console producer/consumer and producer-perf-test and client properties files.
# Exits non-zero when any cell fails. About 4 minutes against Kafka with warm caches (223 s for
# the 56 cells of all 7 clients; the JVM drivers' first Maven build adds minutes).
# --clients: a subset of the client ids below. --keep: keep the work directory (certificates,
# node logs, driver output). Ports: ONELOG_SEC_BASE_PORT (default 26092, below the ephemeral range): PLAINTEXT base..+2,
# SASL_SSL base+300.., SSL base+400.. (onelog: Raft +100, admin +200; Kafka: controllers +100).
# Broker binary (onelog): ONELOG_BIN, else cluster.sh's own choice.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
compat="$repo/harness/compat"
cache="${ONELOG_COMPAT_CACHE:-$HOME/.cache/onelog-compat}"
out="$repo/results/security.md"
target=onelog
keep=0
only=""
base="${ONELOG_SEC_BASE_PORT:-26092}"
driver_timeout_s="${ONELOG_COMPAT_DRIVER_TIMEOUT_S:-300}"
export COMPAT_TIMEOUT_S="${COMPAT_TIMEOUT_S:-60}"
alice_password=alice-secret
ALL_CLIENTS=(java-4.4.0 java-3.9.1 java-2.8.2 kafka-cli-4.4.0 confluent-kafka-python franz-go kafkajs)
SCENARIOS=(sec_produce_consume sec_txn_allowed sec_txn_denied sec_bad_credentials)

die() { echo "security-accept.sh: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
    case "$1" in
        --kafka) target=kafka; shift ;;
        --clients) only="${2:?--clients a,b}"; shift 2 ;;
        --keep) keep=1; shift ;;
        --out) out="${2:?--out FILE}"; shift 2 ;;
        *) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 2 ;;
    esac
done
clients=("${ALL_CLIENTS[@]}")
if [ -n "$only" ]; then
    IFS=, read -r -a clients <<<"$only"
    for c in "${clients[@]}"; do
        [[ " ${ALL_CLIENTS[*]} " == *" $c "* ]] || die "unknown client '$c' (one of ${ALL_CLIENTS[*]})"
    done
fi

t_start=$SECONDS
work="$(mktemp -d "${TMPDIR:-/tmp}/onelog-security.XXXXXX")"
certs="$work/certs"
export KAFKA_REF_DIR="$work/kafka"
cleanup() {
    if [ "$target" = kafka ]; then
        [ -d "$KAFKA_REF_DIR" ] && "$repo/scripts/kafka-reference.sh" down >/dev/null 2>&1 || true
    else
        [ -f "$work/cluster/nodes" ] && ONELOG_CLUSTER_DIR="$work/cluster" "$repo/scripts/cluster.sh" down >/dev/null 2>&1 || true
    fi
    if [ "$keep" = 1 ]; then echo "security-accept.sh: kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'echo "security-accept.sh: failed at line $LINENO: $BASH_COMMAND" >&2' ERR

for port in $(seq "$base" $((base + 2))) $(seq $((base + 100)) $((base + 102))) $(seq $((base + 200)) $((base + 202))) \
    $(seq $((base + 300)) $((base + 302))) $(seq $((base + 400)) $((base + 402))); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        die "port $port is in use; pick another ONELOG_SEC_BASE_PORT"
    fi
done

source "$compat/install.sh"
install_for_clients

"$repo/scripts/security-certs.sh" "$certs" >&2
store_password="$(cat "$certs/store-password")"
list() { local p="$1" out="" i; for i in 0 1 2; do out+="${out:+,}127.0.0.1:$((p + i))"; done; echo "$out"; }
sasl_bootstrap="$(list $((base + 300)))"
ssl_bootstrap="$(list $((base + 400)))"

# --- the cluster ---
t_cluster=$SECONDS
if [ "$target" = kafka ]; then
    KAFKA_REF_SECURITY_DIR="$certs" KAFKA_REF_PORT="$base" KAFKA_REF_CONTROLLER_PORT=$((base + 100)) \
        KAFKA_REF_SASL_SSL_PORT=$((base + 300)) KAFKA_REF_SSL_PORT=$((base + 400)) \
        "$repo/scripts/kafka-reference.sh" up --flush-default >&2
    broker="Apache Kafka $("$repo/scripts/kafka-reference.sh" version)"
else
    ONELOG_CLUSTER_DIR="$work/cluster" ONELOG_BASE_PORT="$base" ONELOG_SECURITY_DIR="$certs" \
        ONELOG_SASL_SSL_BASE_PORT=$((base + 300)) ONELOG_SSL_BASE_PORT=$((base + 400)) \
        ONELOG_CONFIGS="auto.create.topics.enable=false ${ONELOG_CONFIGS:-}" \
        "$repo/scripts/cluster.sh" up 3 >&2
    broker="$("${ONELOG_BIN:-onelog}" --version 2>/dev/null || echo onelog)"
fi
cluster_s=$((SECONDS - t_cluster))

# --- set-up with Kafka's tools, as the admin over SSL ---
cat >"$work/admin.properties" <<EOF
security.protocol=SSL
ssl.truststore.type=PEM
ssl.truststore.location=$certs/ca.pem
ssl.keystore.type=PKCS12
ssl.keystore.location=$certs/admin.p12
ssl.keystore.password=$store_password
EOF
run_id="$(date +%s)"
topic="sec-$run_id"
setup="$work/setup.jsonl"
: >"$setup"
# The admin's tools come from kafka-reference.sh's classpath, against either target.
tools_version="$("$repo/scripts/kafka-reference.sh" version)"
emit() { # emit SCENARIO RESULT DETAIL
    python3 -c 'import json,sys; print(json.dumps({"client": "kafka-cli-%s (admin)" % sys.argv[4], "version": sys.argv[4], "scenario": sys.argv[1], "result": sys.argv[2], "detail": sys.argv[3][-400:]}))' \
        "$1" "$2" "$3" "$tools_version" >>"$setup"
}
tool() { # tool NAME CLASS ARGS...: runs a Kafka tool as the admin; a JSON line for NAME
    local name="$1" out rc=0
    shift
    out="$("$repo/scripts/kafka-reference.sh" tool "$@" --bootstrap-server "$ssl_bootstrap" \
        --command-config "$work/admin.properties" 2>&1)" || rc=$?
    echo "$out" >>"$work/setup.log"
    if [ "$rc" = 0 ]; then emit "$name" pass "$(tail -n 1 <<<"$out")"; else emit "$name" fail "exit $rc: $out"; fi
    return "$rc"
}
principals=(--allow-principal User:alice --allow-principal "User:CN=bob,OU=clients,O=onelog-test")
t_setup=$SECONDS
set +e
tool kafka-configs-scram-user kafka.admin.ConfigCommand --alter --add-config "SCRAM-SHA-512=[password=$alice_password]" \
    --entity-type users --entity-name alice
tool kafka-acls-topic org.apache.kafka.tools.AclCommand --add "${principals[@]}" --operation Read --operation Write \
    --topic sec- --resource-pattern-type prefixed
tool kafka-acls-group org.apache.kafka.tools.AclCommand --add "${principals[@]}" --operation Read \
    --group sec- --resource-pattern-type prefixed
tool kafka-acls-txn org.apache.kafka.tools.AclCommand --add "${principals[@]}" --operation Write --operation Describe \
    --transactional-id txn-a
tool kafka-topics-create org.apache.kafka.tools.TopicCommand --create --topic "$topic" --partitions 1 --replication-factor 3
set -e
setup_s=$((SECONDS - t_setup))

# --- the drivers: as alice over SASL_SSL, as bob over SSL ---
declare -A seconds_of=()
for client in "${clients[@]}"; do
    cmd="$(driver_command "$client")"
    for proto in SASL_SSL SSL; do
        lines="$work/$client.$proto.jsonl"
        : >"$lines"
        if [ "$proto" = SASL_SSL ]; then
            sec=(COMPAT_BOOTSTRAP="$sasl_bootstrap" COMPAT_SECURITY_PROTOCOL=SASL_SSL COMPAT_SASL_MECHANISM=SCRAM-SHA-512
                COMPAT_SASL_USERNAME=alice COMPAT_SASL_PASSWORD="$alice_password" COMPAT_SSL_CA="$certs/ca.pem")
        else
            sec=(COMPAT_BOOTSTRAP="$ssl_bootstrap" COMPAT_SECURITY_PROTOCOL=SSL COMPAT_SSL_CA="$certs/ca.pem"
                COMPAT_SSL_CERT="$certs/bob.pem" COMPAT_SSL_KEY="$certs/bob.key")
        fi
        # Java reads PKCS#12 (PEM keys in kafka-clients 2.8 need a password).
        sec+=(COMPAT_SSL_TRUSTSTORE="$certs/truststore.p12" COMPAT_SSL_STORE_PASSWORD="$store_password")
        [ "$proto" = SSL ] && sec+=(COMPAT_SSL_KEYSTORE="$certs/bob.p12")
        started=$SECONDS
        echo "== $client over $proto: $cmd" >&2
        set +e
        env "${sec[@]}" COMPAT_SUITE=security COMPAT_SEC_TOPIC="$topic" COMPAT_SEC_TXN_ALLOWED=txn-a \
            COMPAT_SEC_TXN_DENIED=txn-b COMPAT_PREFIX="sec-$run_id-${client//./_}-${proto,,}" \
            COMPAT_SCENARIOS= timeout -k 10 "$driver_timeout_s" bash -c "$cmd" >"$lines" 2>"$work/$client.$proto.stderr"
        echo $? >"$work/$client.$proto.rc"
        set -e
        seconds_of[$client.$proto]=$((SECONDS - started))
        echo "== $client over $proto: $((SECONDS - started)) s, $(grep -c '"result": *"pass"' "$lines" || true) pass" >&2
    done
done

# --- the report ---
mkdir -p "$(dirname "$out")"
status=0
python3 "$repo/scripts/security-report.py" "$work" "$out" "$broker" "${clients[*]}" "${SCENARIOS[*]}" \
    "$(for k in "${!seconds_of[@]}"; do printf '%s=%s;' "$k" "${seconds_of[$k]}"; done)" \
    "$cluster_s" "$setup_s" "$target" || status=$?
echo "security-accept.sh: $((SECONDS - t_start)) s in all" >&2
exit "$status"
