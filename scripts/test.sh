#!/usr/bin/env bash
# The one test command: installs what is missing (scripts/prereqs.sh), builds the broker with fault injection (the scenario tests crash it on
# purpose), points the harness at that binary, builds the Java scenario drivers once (tests run
# one process each under nextest) against kafka-clients 4.x and 3.9 and exports both
# classpaths, and runs every test in the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."

# A brand-new machine: the packages the build and the tests need (scripts/prereqs.sh).
scripts/prereqs.sh

target_dir="${CARGO_TARGET_DIR:-$PWD/target}"

# The test build enables the same feature, so `cargo test` does not rebuild target/debug/onelog
# without it and swap the binary the harness spawns.
features=(--features broker/fault-injection)

cargo build -p broker "${features[@]}"
export ONELOG_BIN="$target_dir/debug/onelog"

ONELOG_JAVA_CLASSPATH="$(cat "$(scripts/java-build.sh)")"
export ONELOG_JAVA_CLASSPATH
# The same drivers against kafka-clients 3.9 (transactions v1), for the tests that compare
# client generations (harness::java::Clients::Kafka3).
ONELOG_JAVA3_CLASSPATH="$(cat "$(scripts/java-build.sh --variant kafka3 -Dkafka.version=3.9.1)")"
export ONELOG_JAVA3_CLASSPATH
ONELOG_JAVA44_CLASSPATH="$(cat "$(scripts/java-build.sh --variant kafka44 -Dkafka.version=4.4.0)")"
export ONELOG_JAVA44_CLASSPATH

if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace "${features[@]}" --no-fail-fast
    # nextest does not run doctests.
    cargo test --workspace "${features[@]}" --doc
else
    cargo test --workspace "${features[@]}" --no-fail-fast
fi
