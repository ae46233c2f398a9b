#!/usr/bin/env bash
# Runs one of the Java benchmarks of harness/java (package dev.onelog.bench) against
# KAFKA_CONNECTION, building the module first when needed (scripts/java-build.sh).
#
#   scripts/bench-java.sh [--variant default|kafka2] BENCH
#
# BENCH: BaseWritesBench, TxWritesBench, BaseStreamingBench, TxStreamingBench, or
# CreateTopics (topic1 and topic2, 1 partition, REPLICATION_FACTOR replicas, default 3; topic
# configs from TOPIC_CONFIG, e.g. max.message.bytes=2097152 for PAYLOAD_BYTES=1048576).
# Variants: default is kafka-clients from the pom (4.x, transactions v2); kafka2 is
# kafka-clients 2.8.2 (transactions v1).
# Settings are environment variables, as in the original suite:
#   KAFKA_CONNECTION=127.0.0.1:9092 WARMUP=1000 TXES=1000 MEASURES=tx.writes.log \
#       scripts/bench-java.sh TxWritesBench
# and, beyond it, PRODUCERS, PAYLOAD_BYTES, SUMMARY=json, SUMMARY_FILE, TX_ID, GROUP,
# CLIENT_CONFIG (see harness/java/src/main/java/dev/onelog/bench/BenchConfig.java).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"

variant=default
if [ "${1:-}" = "--variant" ]; then
    variant="${2:-}"
    shift 2 || true
fi
bench="${1:-}"
case "$bench" in
    BaseWritesBench | TxWritesBench | BaseStreamingBench | TxStreamingBench | CreateTopics) ;;
    *) echo "usage: bench-java.sh [--variant default|kafka2] BaseWritesBench|TxWritesBench|BaseStreamingBench|TxStreamingBench|CreateTopics" >&2
       exit 2 ;;
esac
case "$variant" in
    default) classpath_file="$("$repo/scripts/java-build.sh")" ;;
    kafka2) classpath_file="$("$repo/scripts/java-build.sh" --variant kafka2 -Dkafka2)" ;;
    *) echo "bench-java: unknown variant '$variant' (default or kafka2)" >&2; exit 2 ;;
esac
exec java -cp "$(cat "$classpath_file")" "dev.onelog.bench.$bench"
