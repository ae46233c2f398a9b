#!/usr/bin/env bash
# What TLS and SASL cost (issue #15), a benchmark, not a test: harness/java's TxWritesBench and
# BaseWritesBench (kafka-clients 4.1.1) against one three-node cluster, over PLAINTEXT and over
# SASL_SSL with SCRAM-SHA-512, in one run after an unmeasured warm-up over both, the two
# alternating (which goes first swaps bench by bench); prints p50/p99
# side by side and writes them to results/bench-tls.md (--out FILE).
#
#   scripts/bench-tls.sh [--kafka] [--out FILE]
#
# The cluster: onelog (scripts/cluster.sh with ONELOG_SECURITY_DIR and no authorizer, so both
# runs pay for the same work but the connection's) or with --kafka the reference Apache Kafka (kafka-reference.sh, default 4.4.0)
# (scripts/kafka-reference.sh with KAFKA_REF_SECURITY_DIR, Kafka's default flush settings; its
# authorizer stays on, the bench user is a super user). Certificates from
# scripts/security-certs.sh; the SCRAM user `admin` made with kafka-configs over SSL as the
# admin certificate; topic1/topic2 by dev.onelog.bench.CreateTopics over PLAINTEXT. The
# SASL_SSL runs get their client settings through the benches' CLIENT_CONFIG.
# Environment: WARMUP (default 200) and TXES (default 1000) per run, PRODUCERS (unset: one
# producer, as the original suite), ONELOG_BIN, BENCH_TLS_PORT_BASE (default 27092; below the
# ephemeral port range: PLAINTEXT base.., SASL_SSL base+300.., SSL base+400..).
# About 5 minutes at the defaults against Kafka (251 s), most of it the two TxWritesBench runs.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
out="$repo/results/bench-tls.md"
target=onelog
base="${BENCH_TLS_PORT_BASE:-27092}"
warmup="${WARMUP:-200}"
txes="${TXES:-1000}"
password=bench-secret
benches=(TxWritesBench BaseWritesBench)

die() { echo "bench-tls.sh: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
    case "$1" in
        --kafka) target=kafka; shift ;;
        --out) out="${2:?--out FILE}"; shift 2 ;;
        *) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 2 ;;
    esac
done

t_start=$SECONDS
work="$(mktemp -d "${TMPDIR:-/tmp}/onelog-bench-tls.XXXXXX")"
certs="$work/certs"
export KAFKA_REF_DIR="$work/kafka"
cleanup() {
    if [ "$target" = kafka ]; then
        [ -d "$KAFKA_REF_DIR" ] && "$repo/scripts/kafka-reference.sh" down >/dev/null 2>&1 || true
    else
        [ -f "$work/cluster/nodes" ] && ONELOG_CLUSTER_DIR="$work/cluster" "$repo/scripts/cluster.sh" down >/dev/null 2>&1 || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

"$repo/scripts/security-certs.sh" "$certs" >&2
list() { local p="$1" o="" i; for i in 0 1 2; do o+="${o:+,}127.0.0.1:$((p + i))"; done; echo "$o"; }
plaintext="$(list "$base")"
sasl_ssl="$(list $((base + 300)))"
ssl="$(list $((base + 400)))"

if [ "$target" = kafka ]; then
    KAFKA_REF_SECURITY_DIR="$certs" KAFKA_REF_PORT="$base" KAFKA_REF_CONTROLLER_PORT=$((base + 100)) \
        KAFKA_REF_SASL_SSL_PORT=$((base + 300)) KAFKA_REF_SSL_PORT=$((base + 400)) \
        "$repo/scripts/kafka-reference.sh" up --flush-default >&2
    system="Apache Kafka $("$repo/scripts/kafka-reference.sh" version) (default flush)"
else
    ONELOG_CLUSTER_DIR="$work/cluster" ONELOG_BASE_PORT="$base" ONELOG_SECURITY_DIR="$certs" \
        ONELOG_SECURITY_AUTHORIZER= ONELOG_SASL_SSL_BASE_PORT=$((base + 300)) ONELOG_SSL_BASE_PORT=$((base + 400)) \
        "$repo/scripts/cluster.sh" up 3 >&2
    system="$("${ONELOG_BIN:-onelog}" --version 2>/dev/null || echo onelog)"
fi

cat >"$work/admin.properties" <<EOF
security.protocol=SSL
ssl.truststore.type=PEM
ssl.truststore.location=$certs/ca.pem
ssl.keystore.type=PKCS12
ssl.keystore.location=$certs/admin.p12
ssl.keystore.password=$(cat "$certs/store-password")
EOF
"$repo/scripts/kafka-reference.sh" tool kafka.admin.ConfigCommand --bootstrap-server "$ssl" \
    --command-config "$work/admin.properties" --alter --add-config "SCRAM-SHA-512=[password=$password]" \
    --entity-type users --entity-name admin >&2

classpath="$(cat "$("$repo/scripts/java-build.sh")")"
KAFKA_CONNECTION="$plaintext" java -cp "$classpath" dev.onelog.bench.CreateTopics >&2

# The SASL_SSL client settings, as CLIENT_CONFIG's "k=v,k=v" (no value holds a comma).
sasl_config="security.protocol=SASL_SSL,sasl.mechanism=SCRAM-SHA-512"
sasl_config+=",sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"admin\" password=\"$password\";"
sasl_config+=",ssl.truststore.type=PEM,ssl.truststore.location=$certs/ca.pem"

run() { # run BENCH PROTO WARMUP TXES NAME
    local bs cc
    if [ "$2" = PLAINTEXT ]; then bs="$plaintext" cc=""; else bs="$sasl_ssl" cc="$sasl_config"; fi
    echo "== $5: $1 over $2: WARMUP=$3 TXES=$4${PRODUCERS:+ PRODUCERS=$PRODUCERS}" >&2
    local t0=$SECONDS
    env KAFKA_CONNECTION="$bs" CLIENT_CONFIG="$cc" WARMUP="$3" TXES="$4" \
        MEASURES="$work/$5.$1.$2.txt" TX_ID="$1-$2-$5" GROUP="$1-$2-$5" \
        timeout 1200 java -cp "$classpath" "dev.onelog.bench.$1" >"$work/$5.$1.$2.log" 2>&1 ||
        { tail -n 20 "$work/$5.$1.$2.log" >&2; die "$1 over $2 failed"; }
    echo "$((SECONDS - t0))" >"$work/$5.$1.$2.seconds"
}
# The brokers' warm-up (JIT, first connections, the transaction coordinator), not measured.
for proto in PLAINTEXT SASL_SSL; do run TxWritesBench "$proto" 0 $((warmup > 0 ? warmup : 50)) warmup; done
# The measured runs, the two protocols alternating, the first one swapped per bench.
order=(PLAINTEXT SASL_SSL)
for bench in "${benches[@]}"; do
    for proto in "${order[@]}"; do run "$bench" "$proto" "$warmup" "$txes" measured; done
    order=("${order[1]}" "${order[0]}")
done

mkdir -p "$(dirname "$out")"
python3 "$repo/scripts/bench-tls-report.py" "$work" "$out" "$system" "$warmup" "$txes" "${PRODUCERS:-}" "${benches[*]}"
echo "bench-tls.sh: $((SECONDS - t_start)) s in all" >&2
