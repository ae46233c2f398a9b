#!/usr/bin/env bash
# The one test command: installs what is missing (scripts/prereqs.sh), builds the broker with fault injection (the scenario tests crash it on
# purpose), points the harness at that binary, builds the Java scenario drivers once (tests run
# one process each) against kafka-clients 4.x and 3.9 and exports both classpaths, and runs
# every test in the workspace, two at a time (ONELOG_TEST_JOBS).
set -euo pipefail
cd "$(dirname "$0")/.."

# A brand-new machine: the packages the build and the tests need (scripts/prereqs.sh).
scripts/prereqs.sh

target_dir="${CARGO_TARGET_DIR:-$PWD/target}"

# The test build enables the same feature, so `cargo test` does not rebuild target/debug/onelog
# without it and swap the binary the harness spawns.
features=(--features broker/fault-injection)

# One build of every target, the broker's binary and the tests' alike: `cargo build -p broker`
# alone resolves the dependencies' features without the dev-dependencies, so the test build
# then compiled tokio, openraft and the rest a second time (106 s of a cold CI run's 405 s of
# building, 2026-12-06).
cargo build --workspace --all-targets "${features[@]}"
export ONELOG_BIN="$target_dir/debug/onelog"

ONELOG_JAVA_CLASSPATH="$(cat "$(scripts/java-build.sh)")"
export ONELOG_JAVA_CLASSPATH
# The same drivers against kafka-clients 3.9 (transactions v1), for the tests that compare
# client generations (harness::java::Clients::Kafka3).
ONELOG_JAVA3_CLASSPATH="$(cat "$(scripts/java-build.sh --variant kafka3 -Dkafka.version=3.9.1)")"
export ONELOG_JAVA3_CLASSPATH
ONELOG_JAVA44_CLASSPATH="$(cat "$(scripts/java-build.sh --variant kafka44 -Dkafka.version=4.4.0)")"
export ONELOG_JAVA44_CLASSPATH

# At most two tests at a time: nextest when installed (a process per test); else the test
# binaries two at a time, one test at a time in each (scripts/test-binaries.py: `cargo test`
# runs one binary after another, which left a core idle through most of the 560 s it took).
# Neither runs doctests, so they follow.
status=0
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace "${features[@]}" --no-fail-fast || status=1
else
    python3 scripts/test-binaries.py --jobs "${ONELOG_TEST_JOBS:-2}" -- --workspace "${features[@]}" || status=1
fi
cargo test --workspace "${features[@]}" --doc || status=1
exit "$status"
