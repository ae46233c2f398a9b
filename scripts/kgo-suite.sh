#!/usr/bin/env bash
# franz-go's own kgo integration suite, unchanged, against a three-node onelog cluster (issue 12)
# or, with --kafka, the same `go test` command against the reference Apache Kafka (issue 28).
#
#   scripts/kgo-suite.sh [-run REGEX]              onelog; extra arguments go to `go test`
#   scripts/kgo-suite.sh --kafka [-run REGEX]      Apache Kafka from scripts/kafka-reference.sh
#   scripts/kgo-suite.sh --prepare                 fetch the suite and build its tests, run nothing
#                                                  (CI does it while its test suite runs)
#
# The suite is fetched at a pinned version into the Go module cache (`go mod download`) and
# run from there: `go test github.com/twmb/franz-go/pkg/kgo`, with KGO_SEEDS pointed at a
# three-node cluster that this script starts on its own ports, in a temporary directory,
# stopped and removed on exit:
# - onelog: scripts/cluster.sh in ONELOG_CLUSTER_DIR, from KGO_BASE_PORT (default 18092; Kafka,
#   Raft, admin and SASL_PLAINTEXT ports base+0..2, +100..102, +200..202, +300..302);
# - --kafka: scripts/kafka-reference.sh (Apache Kafka 4.4.0, its reference settings, fsync of
#   every append included) in KAFKA_REF_DIR, from KGO_KAFKA_BASE_PORT (default 27092; Kafka,
#   controller and SASL_PLAINTEXT ports base+0..2, +100..102, +300..302).
# Those ports must all be free: the script refuses to run beside another listener there.
# Every node also serves SCRAM on a SASL_PLAINTEXT listener (cluster.sh's
# ONELOG_SASL_PLAINTEXT_BASE_PORT, kafka-reference.sh's KAFKA_REF_SASL_PLAINTEXT_PORT); the
# user the SCRAM tests log in as is created the way a Kafka operator does it, with
# kafka-configs (`kafka-reference.sh tool`, which needs Java and Maven: the tools' jars are
# resolved once) over PLAINTEXT: --alter --add-config 'SCRAM-SHA-256=[password=...]'
# --entity-type users --entity-name kgo. franz-go reads the listener from KGO_TEST_SCRAM_SEEDS
# and the credentials from KGO_TEST_SCRAM (user:pass:256). Both modes run the same `go test`
# command: same environment (KGO_TEST_RF=3, KGO_TEST_RECORDS, SCRAM), same -skip list.
# Prints the `go test -v` output to KGO_LOG (default $TMPDIR/kgo-suite.log, with --kafka
# $TMPDIR/kgo-suite-kafka.log) and the counts of top-level tests passed, skipped and failed
# (and the KIP-848 subtests' results); exits non-zero when one failed.
#
# Environment: ONELOG_BIN (the onelog binary; see cluster.sh), KGO_VERSION (default v1.22.3),
# KGO_TEST_RECORDS (records per produce/consume test; unset: the suite's own 500000, about
# 3 minutes of `go test` here), KGO_TIMEOUT (default 40m).
#
# KIP-848: the suite asks ApiVersions once and runs its KIP-848 subtests (TestGroupETL and
# TestTxnEtl: range/848, sticky/848, sticky/848/static; TestGroupSimple/848) and
# Test848RegexBrokerResolves when the broker's ConsumerGroupHeartbeat (key 68) goes to v1 or
# above, which onelog's and Kafka 4.4's both do: they run in both modes (none is in the -skip
# list any more), and the script prints their results.
# Test848RegexBrokerResolves failed against onelog until f65115f (a regex that matches
# `__consumer_offsets` gets that internal topic assigned, as Kafka does, now onelog's virtual
# one too); docs/TESTING.md has the comparison.
# Share groups (KIP-932): the suite runs its share-group tests when the broker's ShareFetch
# (key 78) and ShareAcknowledge (key 79) go to v2, as onelog's and Kafka 4.4's both do:
# TestShareGroup, TestShareGroupETL (which reproduced a Kafka deadlock, KAFKA-20505),
# TestShareGroupAckOnClose, TestShareGroupOffsetsAdmin and TestConsumeRegexShareSkipsInternal
# run in both modes (the client-only TestAuditShare*, TestBuildAckRanges and
# TestDrainPurgedAcksLiveCursor need no broker). What is skipped, and why: OAUTHBEARER only
# (KGO_TEST_OAUTH_SEEDS unset: onelog serves PLAIN and SCRAM, not OAUTHBEARER); the -skip list
# names TestOAuthAuth so that it stays out in both modes.
# TestSCRAMAuth and TestSCRAMAuthBadCredentials run (SCRAM-SHA-256; SHA-512 is covered by
# scripts/security-accept.sh).
# TestConsumeRegex waits for Kafka's internal `__consumer_offsets` to show in Metadata with
# is_internal and checks that a regex consumer skips it: onelog lists a virtual one
# (broker/src/internal_topic.rs). TestIssueProduceBrokerTooOldFailsRecords skips itself
# because onelog advertises Produce v0-v2 (for old librdkafka, DESIGN section 6); so does
# Kafka 4.4 ("broker still takes produce v2").
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
mode=onelog
if [ "${1:-}" = --kafka ] || [ "${1:-}" = --prepare ]; then
    mode="${1#--}"
    shift
fi
version="${KGO_VERSION:-v1.22.3}"
timeout="${KGO_TIMEOUT:-40m}"
if [ "$mode" = kafka ]; then
    base_port="${KGO_KAFKA_BASE_PORT:-27092}"
    port_offsets="0 1 2 100 101 102 300 301 302"
    log="${KGO_LOG:-${TMPDIR:-/tmp}/kgo-suite-kafka.log}"
else
    base_port="${KGO_BASE_PORT:-18092}"
    port_offsets="0 1 2 100 101 102 200 201 202 300 301 302"
    log="${KGO_LOG:-${TMPDIR:-/tmp}/kgo-suite.log}"
fi
skip='^(TestOAuthAuth)$'

command -v go >/dev/null || { echo "kgo-suite.sh: needs go" >&2; exit 1; }
export GOFLAGS="${GOFLAGS:-} -mod=readonly"
GOPROXY="${GOPROXY:-https://proxy.golang.org,direct}" go mod download "github.com/twmb/franz-go@$version"
module_dir="$(go env GOMODCACHE)/github.com/twmb/franz-go@$version"
# The module's own dependencies, at the versions its go.sum pins.
(cd "$module_dir" && go mod download)
if [ "$mode" = prepare ]; then
    # The test binary into Go's build cache, so that the run's `go test` only links it.
    (cd "$module_dir" && go test -c -o /dev/null ./pkg/kgo)
    echo "kgo-suite.sh: kgo $version fetched and its tests built" >&2
    exit 0
fi

# The readiness checks are connects to the Kafka ports, so a cluster someone else runs on these
# ports would pass for ours: refuse to start beside one.
for offset in $port_offsets; do
    port=$((base_port + offset))
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        echo "kgo-suite.sh: 127.0.0.1:$port is in use; set $([ "$mode" = kafka ] && echo KGO_KAFKA_BASE_PORT || echo KGO_BASE_PORT) to a free range" >&2
        exit 1
    fi
done

cluster_dir="$(mktemp -d "${TMPDIR:-/tmp}/kgo-$mode.XXXXXX")"
scram_port=$((base_port + 300))
if [ "$mode" = kafka ]; then
    export KAFKA_REF_DIR="$cluster_dir/kafka" KAFKA_REF_PORT="$base_port"
    export KAFKA_REF_CONTROLLER_PORT=$((base_port + 100)) KAFKA_REF_SASL_PLAINTEXT_PORT="$scram_port"
    node_log() { echo "$KAFKA_REF_DIR/node-$1/kafka.log"; }
    cleanup() {
        "$repo/scripts/kafka-reference.sh" down >/dev/null 2>&1 || true
        rm -rf "$cluster_dir"
    }
else
    export ONELOG_CLUSTER_DIR="$cluster_dir" ONELOG_BASE_PORT="$base_port"
    export ONELOG_SASL_PLAINTEXT_BASE_PORT="$scram_port"
    # Segments are Kafka's minimum, 1 MiB: a leftover from when every partition preallocated a
    # whole segment per node (the suite's topics have up to 31 partitions); now only a small step.
    export ONELOG_CONFIGS="log.segment.bytes=1048576 group.initial.rebalance.delay.ms=0 ${ONELOG_CONFIGS:-}"
    node_log() { echo "$cluster_dir/node-$1/onelog.log"; }
    cleanup() {
        "$repo/scripts/cluster.sh" down >/dev/null 2>&1 || true
        rm -rf "$cluster_dir"
    }
fi
trap cleanup EXIT
trap 'exit 130' INT TERM
if [ "$mode" = kafka ]; then
    "$repo/scripts/kafka-reference.sh" up
    broker="Apache Kafka $("$repo/scripts/kafka-reference.sh" version)"
else
    "$repo/scripts/cluster.sh" up 3
    for id in 1 2 3; do
        pid="$(cat "$cluster_dir/node-$id/onelog.pid")"
        kill -0 "$pid" 2>/dev/null || { tail -n 20 "$(node_log "$id")" >&2; exit 1; }
    done
    broker=onelog
fi
seeds="127.0.0.1:$base_port,127.0.0.1:$((base_port + 1)),127.0.0.1:$((base_port + 2))"
scram_seeds="127.0.0.1:$scram_port,127.0.0.1:$((scram_port + 1)),127.0.0.1:$((scram_port + 2))"
scram_password="kgo-secret-$RANDOM"
# The SCRAM user, created with Kafka's kafka-configs (Java; its jars resolved by Maven once).
KAFKA_REF_DIR="$cluster_dir/kafka-tools" "$repo/scripts/kafka-reference.sh" tool kafka.admin.ConfigCommand \
    --bootstrap-server "$seeds" --alter --add-config "SCRAM-SHA-256=[password=$scram_password]" \
    --entity-type users --entity-name kgo >"$cluster_dir/kafka-configs.log" 2>&1 ||
    { cat "$cluster_dir/kafka-configs.log" >&2; echo "kgo-suite.sh: kafka-configs could not create the SCRAM user" >&2; exit 1; }

echo "kgo suite $version against $broker at $seeds (SCRAM: $scram_seeds); log: $log"
status=0
started=$SECONDS
(cd "$module_dir" && KGO_SEEDS="$seeds" KGO_TEST_RF=3 \
    KGO_TEST_SCRAM_SEEDS="$scram_seeds" KGO_TEST_SCRAM="kgo:$scram_password:256" \
    go test -count=1 -v -timeout "$timeout" -skip "$skip" "$@" ./pkg/kgo) >"$log" 2>&1 || status=$?

if [ "$status" -ne 0 ]; then
    # The nodes' logs outlive the cluster directory, for triage.
    mkdir -p "$log.nodes"
    for id in 1 2 3; do cp "$(node_log "$id")" "$log.nodes/node-$id.log" 2>/dev/null || true; done
    echo "node logs: $log.nodes/"
fi
count() { grep -c "^--- $1:" "$log" || true; }
echo "kgo suite $version against $broker: pass $(count PASS), skip $(count SKIP), fail $(count FAIL) (go test exit $status, $((SECONDS - started)) s with the build)"
grep "^--- FAIL:" "$log" || true
grep -E "^--- (PASS|SKIP|FAIL): TestSCRAM" "$log" || true
echo "KIP-848 subtests and tests:"
grep -E "^ *--- (PASS|SKIP|FAIL): [^ ]*848" "$log" | sed 's/ (.*//; s/^ */  /' || true
grep -E "^(panic:|FAIL|ok) " "$log" | tail -3 || true
exit "$status"
