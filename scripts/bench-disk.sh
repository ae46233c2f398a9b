#!/usr/bin/env bash
# The disk benchmark of issue 13 (a benchmark, not a test: it reports figures and asserts
# nothing). Builds the release broker and `onelog-bench`, then, one after another, spawns three
# 3-node release clusters on free ports under the system temp directory, creates a topic of
# PARTITIONS partitions (default 1000) and produces two records to each partition, one at a
# time with acks=all:
#   - the old footprint: log.preallocate=true (whole segments reserved at creation) at
#     OLD_SEGMENT_BYTES (default 1 MiB: 1,000 whole 128 MiB segments on 3 nodes would need
#     375 GiB; the figure at 128 MiB is computed and printed);
#   - the new footprint (blocks reserved in steps) at the same size, and at the default 128 MiB.
# Prints, side by side, each node's partition files and data directory in real blocks and the
# produce latency p50/p99 of the first and second record of every partition, then the
# fdatasync of a pre-written, a step-reserved and an appending file. Each cluster's directory
# is removed when its run ends. Needs about 1 GiB per node free for the old run at 1 MiB.
#
#   scripts/bench-disk.sh [PARTITIONS]
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
partitions="${1:-1000}"
target_dir="${CARGO_TARGET_DIR:-$repo/target}"
cargo build --quiet --release -p broker >&2
cargo build --quiet --release -p harness --bin onelog-bench >&2
export ONELOG_BIN="$target_dir/release/onelog"
exec "$target_dir/release/onelog-bench" disk --partitions "$partitions" \
    --old-segment-bytes "${OLD_SEGMENT_BYTES:-1048576}"
