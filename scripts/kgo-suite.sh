#!/usr/bin/env bash
# franz-go's own kgo integration suite, unchanged, against a three-node onelog cluster (issue 12).
#
#   scripts/kgo-suite.sh [-run REGEX]      extra arguments go to `go test`
#
# The suite is fetched at a pinned version into the Go module cache (`go mod download`) and
# run from there: `go test github.com/twmb/franz-go/pkg/kgo`, with KGO_SEEDS pointed at a
# three-node cluster that this script starts with scripts/cluster.sh on its own ports
# (KGO_BASE_PORT, default 18092; Kafka, Raft, admin and SASL_PLAINTEXT ports base+0..2,
# +100..102, +200..202, +300..302, which must all be free: the script refuses to run beside
# another listener there) in a temporary ONELOG_CLUSTER_DIR, stopped and removed on exit.
# Every node also serves SCRAM on a SASL_PLAINTEXT listener (cluster.sh's
# ONELOG_SASL_PLAINTEXT_BASE_PORT); the user the SCRAM tests log in as is created the way a
# Kafka operator does it, with kafka-configs (`kafka-reference.sh tool`, which needs Java and
# Maven: the tools' jars are resolved once) over PLAINTEXT: --alter --add-config
# 'SCRAM-SHA-256=[password=...]' --entity-type users --entity-name kgo. franz-go reads the
# listener from KGO_TEST_SCRAM_SEEDS and the credentials from KGO_TEST_SCRAM (user:pass:256).
# Prints the `go test -v` output to KGO_LOG (default $TMPDIR/kgo-suite.log) and the counts of
# top-level tests passed, skipped and failed; exits non-zero when one failed.
#
# Environment: ONELOG_BIN (the onelog binary; see cluster.sh), KGO_VERSION (default v1.22.3),
# KGO_TEST_RECORDS (records per produce/consume test; unset: the suite's own 500000, about
# 3 minutes of `go test` here), KGO_TIMEOUT (default 40m).
#
# What is skipped, and why: the suite skips by itself what the broker does not advertise or
# what needs credentials: KIP-848 consumer groups (ConsumerGroupHeartbeat v1 is not
# advertised), share groups (ShareFetch/ShareAcknowledge v2, Kafka 4.2) and OAUTHBEARER
# (KGO_TEST_OAUTH_SEEDS unset: onelog serves PLAIN and SCRAM, not OAUTHBEARER). The -skip list
# below names the same tests so that they stay out whatever the suite's detection decides.
# TestSCRAMAuth and TestSCRAMAuthBadCredentials run (SCRAM-SHA-256; SHA-512 is covered by
# scripts/security-accept.sh).
# TestConsumeRegex waits for Kafka's internal `__consumer_offsets` to show in Metadata with
# is_internal and checks that a regex consumer skips it: onelog lists a virtual one
# (broker/src/internal_topic.rs). TestIssueProduceBrokerTooOldFailsRecords skips itself
# because onelog advertises Produce v0-v2 (for old librdkafka, DESIGN section 6).
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
version="${KGO_VERSION:-v1.22.3}"
base_port="${KGO_BASE_PORT:-18092}"
timeout="${KGO_TIMEOUT:-40m}"
log="${KGO_LOG:-${TMPDIR:-/tmp}/kgo-suite.log}"
skip='^(TestOAuthAuth|TestShareGroup|TestShareGroupETL|TestShareGroupAckOnClose|TestShareGroupOffsetsAdmin|Test848RegexBrokerResolves)$'

command -v go >/dev/null || { echo "kgo-suite.sh: needs go" >&2; exit 1; }
export GOFLAGS="${GOFLAGS:-} -mod=readonly"
GOPROXY="${GOPROXY:-https://proxy.golang.org,direct}" go mod download "github.com/twmb/franz-go@$version"
module_dir="$(go env GOMODCACHE)/github.com/twmb/franz-go@$version"
# The module's own dependencies, at the versions its go.sum pins.
(cd "$module_dir" && go mod download)

# cluster.sh's readiness check is a connect to each Kafka port, so a cluster someone else runs
# on these ports would pass for ours: refuse to start beside one.
for offset in 0 1 2 100 101 102 200 201 202 300 301 302; do
    port=$((base_port + offset))
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        echo "kgo-suite.sh: 127.0.0.1:$port is in use; set KGO_BASE_PORT to a free range" >&2
        exit 1
    fi
done

cluster_dir="$(mktemp -d "${TMPDIR:-/tmp}/kgo-onelog.XXXXXX")"
export ONELOG_CLUSTER_DIR="$cluster_dir" ONELOG_BASE_PORT="$base_port"
export ONELOG_SASL_PLAINTEXT_BASE_PORT=$((base_port + 300))
# Segments are Kafka's minimum, 1 MiB: a leftover from when every partition preallocated a
# whole segment per node (the suite's topics have up to 31 partitions); now only a small step.
export ONELOG_CONFIGS="log.segment.bytes=1048576 group.initial.rebalance.delay.ms=0 ${ONELOG_CONFIGS:-}"
cleanup() {
    "$repo/scripts/cluster.sh" down >/dev/null 2>&1 || true
    rm -rf "$cluster_dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
"$repo/scripts/cluster.sh" up 3
for id in 1 2 3; do
    pid="$(cat "$cluster_dir/node-$id/onelog.pid")"
    kill -0 "$pid" 2>/dev/null || { tail -n 20 "$cluster_dir/node-$id/onelog.log" >&2; exit 1; }
done
seeds="127.0.0.1:$base_port,127.0.0.1:$((base_port + 1)),127.0.0.1:$((base_port + 2))"
scram_port="$ONELOG_SASL_PLAINTEXT_BASE_PORT"
scram_seeds="127.0.0.1:$scram_port,127.0.0.1:$((scram_port + 1)),127.0.0.1:$((scram_port + 2))"
scram_password="kgo-secret-$RANDOM"
# The SCRAM user, created with Kafka's kafka-configs (Java; its jars resolved by Maven once).
KAFKA_REF_DIR="$cluster_dir/kafka-tools" "$repo/scripts/kafka-reference.sh" tool kafka.admin.ConfigCommand \
    --bootstrap-server "$seeds" --alter --add-config "SCRAM-SHA-256=[password=$scram_password]" \
    --entity-type users --entity-name kgo >"$cluster_dir/kafka-configs.log" 2>&1 ||
    { cat "$cluster_dir/kafka-configs.log" >&2; echo "kgo-suite.sh: kafka-configs could not create the SCRAM user" >&2; exit 1; }

echo "kgo suite $version against $seeds (SCRAM: $scram_seeds); log: $log"
status=0
(cd "$module_dir" && KGO_SEEDS="$seeds" KGO_TEST_RF=3 \
    KGO_TEST_SCRAM_SEEDS="$scram_seeds" KGO_TEST_SCRAM="kgo:$scram_password:256" \
    go test -count=1 -v -timeout "$timeout" -skip "$skip" "$@" ./pkg/kgo) >"$log" 2>&1 || status=$?

if [ "$status" -ne 0 ]; then
    # The nodes' logs outlive the cluster directory, for triage.
    mkdir -p "$log.nodes"
    for id in 1 2 3; do cp "$cluster_dir/node-$id/onelog.log" "$log.nodes/node-$id.log" 2>/dev/null || true; done
    echo "node logs: $log.nodes/"
fi
count() { grep -c "^--- $1:" "$log" || true; }
echo "kgo suite $version: pass $(count PASS), skip $(count SKIP), fail $(count FAIL) (go test exit $status)"
grep "^--- FAIL:" "$log" || true
grep -E "^--- (PASS|SKIP|FAIL): TestSCRAM" "$log" || true
grep -E "^(panic:|FAIL|ok) " "$log" | tail -3 || true
exit "$status"
