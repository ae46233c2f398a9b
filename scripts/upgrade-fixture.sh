#!/usr/bin/env bash
# Makes the golden data set of an old onelog release, which the current build must load
# (harness/tests/upgrade_fixture.rs, issue 33):
#
#   scripts/upgrade-fixture.sh [VERSION]      # default 0.1.0; writes harness/fixtures/VERSION/
#
# The release's binary comes from scripts/release-binary.sh (built once, cached). The harness's
# `upgrade fixture` runs three nodes of it on the fixture's fixed ports (27092.. Kafka, 27192..
# Raft, 27292.. admin, 27392.. SASL_PLAINTEXT; they must be free), writes topics, records
# (uncompressed and every codec), an idempotent producer, a committed and an aborted
# transaction, consumer-group offsets, SCRAM users, ACLs, quotas, dynamic configs, a deleted
# topic and DeleteRecords with librdkafka and Kafka's command-line tools, restarts the nodes,
# reads everything back into manifest.json, then stops them with SIGTERM and archives each data
# directory as node-N.tar.gz. The fixture is replaced only when all of it succeeded.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
version="${1:-0.1.0}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/onelog-target}"

old_bin="$(scripts/release-binary.sh "$version")"
commit="$(cat "$(dirname "$old_bin")/commit")"
export ONELOG_JAVA_CLASSPATH="${ONELOG_JAVA_CLASSPATH:-$(cat "$(scripts/java-build.sh)")}"
cargo build -q -p harness --bin upgrade

out="harness/fixtures/$version"
staging="$(mktemp -d "$repo/harness/fixtures/.$version.XXXXXX")"
trap 'rm -rf "$staging"' EXIT
"$CARGO_TARGET_DIR/debug/upgrade" fixture --old-bin "$old_bin" --release "$version" --commit "$commit" \
    --out "$staging"
rm -rf "$out"
mv "$staging" "$out"
trap - EXIT
chmod 755 "$out"
echo "fixture files:"
du -b "$out"/* | awk '{ printf "  %8d bytes  %s\n", $1, $2; total += $1 } END { printf "  %8d bytes  total\n", total }'
