#!/usr/bin/env bash
# A rolling upgrade from an old onelog release to the current build, under load (issue 33):
#
#   scripts/upgrade-roll.sh [--release 0.1.0] [--seed N] [--settle-seconds 10] [--out DIR]
#
# Builds the release's binary (scripts/release-binary.sh, cached), the current broker (debug,
# with the fault-injection feature, as scripts/test.sh builds it; ONELOG_BIN overrides) and the
# harness's `upgrade` runner, which starts three nodes of the release on its golden fixture
# (harness/fixtures/VERSION, on the fixture's fixed ports 27092.. to 27394, which must be free),
# checks the fixture on the old build, runs an idempotent producer, four transactional
# producers, two read_committed readers and a consumer group, and rolls the nodes one at a
# time to the current build (SIGTERM, same data directory and configs, wait until caught up):
# a follower, the leader, leadership onto the new build, the first follower back to the
# release and forward again (with the release back, `kafka-features.sh upgrade` must be
# refused), the last one. Then `kafka-features.sh upgrade --feature onelog.version=2`, the old
# build refused on a node's data after it, and the checks: every acknowledged record and committed transaction
# exactly once, no transaction aborted by the roll, committed offsets never going backwards,
# the fixture on the new build, equal replica digests. Prints each step and the figures
# (the longest write stall among them); exits non-zero on any failure. Every other argument
# goes to the runner (`upgrade roll --help`).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/onelog-target}"

release=0.1.0
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --release) release="$2"; args+=(--release "$2"); shift 2 ;;
        *) args+=("$1"); shift ;;
    esac
done

old_bin="$(scripts/release-binary.sh "$release")"
if [ -z "${ONELOG_BIN:-}" ]; then
    cargo build -q -p broker --features broker/fault-injection
    ONELOG_BIN="$CARGO_TARGET_DIR/debug/onelog"
fi
cargo build -q -p harness --bin upgrade
# Kafka's kafka-features.sh (FeatureCommand) runs from the Java drivers' classpath.
export ONELOG_JAVA_CLASSPATH="${ONELOG_JAVA_CLASSPATH:-$(cat "$(scripts/java-build.sh)")}"
exec "$CARGO_TARGET_DIR/debug/upgrade" roll --old-bin "$old_bin" --new-bin "$ONELOG_BIN" "${args[@]}"
