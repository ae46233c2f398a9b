#!/usr/bin/env bash
# Runs one of the Rust (librdkafka) ports of the Java benchmarks (`txbench`, harness/src/bench/suite)
# against KAFKA_CONNECTION, building it in release mode first (cargo decides whether anything
# needs rebuilding; CARGO_TARGET_DIR is honoured). Needs no JVM.
#
#   scripts/bench-rust.sh BENCH
#
# BENCH: BaseWritesBench, TxWritesBench, BaseStreamingBench, TxStreamingBench, or
# CreateTopics (as scripts/bench-java.sh: topic1 and topic2, 1 partition, REPLICATION_FACTOR
# replicas, default 3; topic configs from TOPIC_CONFIG). The same environment variables as the
# Java benches: KAFKA_CONNECTION, WARMUP, TXES, MEASURES and PRODUCERS, PAYLOAD_BYTES,
# SUMMARY=json, SUMMARY_FILE, TX_ID, GROUP, CLIENT_CONFIG (librdkafka property names), e.g.
#   KAFKA_CONNECTION=127.0.0.1:9092 WARMUP=1000 TXES=1000 MEASURES=tx.writes.log \
#       scripts/bench-rust.sh TxWritesBench
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"

bench="${1:-}"
case "$bench" in
    BaseWritesBench | TxWritesBench | BaseStreamingBench | TxStreamingBench | CreateTopics) ;;
    *) echo "usage: bench-rust.sh BaseWritesBench|TxWritesBench|BaseStreamingBench|TxStreamingBench|CreateTopics" >&2
       exit 2 ;;
esac
cd "$repo"
cargo build --quiet --release -p harness --bin txbench >&2
exec "${CARGO_TARGET_DIR:-$repo/target}/release/txbench" "$bench"
