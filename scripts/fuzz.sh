#!/usr/bin/env bash
# Runs every cargo-fuzz target under fuzz/ for a fixed time from the checked-in seed corpus
# (fuzz/seeds/TARGET, captured from real clients by fuzz/capture.py) and fails on the first
# crash, leaving the reproducer's path in the output (issue 13).
#
#   scripts/fuzz.sh [SECONDS]     SECONDS per target, default 60
#   scripts/fuzz.sh --build-only  install and build, run nothing (CI builds while its tests run)
#
# Installs what it needs on a clean machine: the nightly toolchain (rustup; stable serves when
# the toolchain server cannot be reached, see below) and cargo-fuzz at a pinned version. A finding is any panic, any single allocation above $malloc_limit_mb (an
# allocation sized from a length the input cannot back), RSS above $rss_limit_mb, or one input
# taking longer than $input_timeout_s. Fixed time with no finding: exit 0.
# Environment: FUZZ_TOOLCHAIN (stable: the fallback below, by choice), FUZZ_TARGETS (space-separated subset), FUZZ_ARGS (extra libFuzzer flags, e.g.
# "-jobs=2 -workers=2"), FUZZ_TARGET_DIR (the build directory, default fuzz/target; CI in a fresh
# clone points it outside the clone, like .ci/run's CARGO_TARGET_DIR, to build warm). The
# growing working corpus goes to fuzz/corpus/TARGET (ignored by git); reproducers to
# fuzz/artifacts/TARGET. See docs/TESTING.md "Fuzzing".
set -euo pipefail
cd "$(dirname "$0")/.."

build_only=0
if [ "${1:-}" = --build-only ]; then build_only=1; shift; fi
seconds="${1:-60}"
cargo_fuzz_version=0.13.1
# The largest input tried: a few times the largest seed (16 KiB); large enough for every array
# and record-set shape, small enough to keep executions fast. The broker's own frame limit is
# socket.request.max.bytes (100 MiB), checked before the frame is read (frame.rs).
max_len_bytes=65536
# No single allocation above this from an input of at most $max_len_bytes: a legitimate decode
# allocates within a small factor of its input (an array of n elements needs n bytes of wire),
# so 1000x the input is an allocation from an unchecked length.
malloc_limit_mb=64
rss_limit_mb=2048
input_timeout_s=10

if ! command -v rustup >/dev/null 2>&1; then
    echo "fuzz.sh: rustup is required" >&2
    exit 1
fi
# cargo-fuzz passes nightly-only flags (-Z...) to rustc. The nightly toolchain is used when it
# is installed or can be; a machine that reaches crates.io but not the toolchain server (CI's
# registries-only network) builds with the stable toolchain told to accept them
# (RUSTC_BOOTSTRAP=1) and without a sanitizer (`-s none`): panics, the allocation limit, RSS and
# timeouts are still findings; memory errors in unsafe code would need AddressSanitizer.
toolchain="${FUZZ_TOOLCHAIN:-nightly}"
sanitizer=()
if [ "$toolchain" = stable ]; then
    sanitizer=(-s none)
    export RUSTC_BOOTSTRAP=1
elif ! rustup run nightly rustc --version >/dev/null 2>&1; then
    echo "fuzz.sh: installing the nightly toolchain"
    if ! timeout 60 rustup toolchain install nightly --profile minimal; then
        echo "fuzz.sh: no nightly toolchain; building with stable, RUSTC_BOOTSTRAP=1, no sanitizer"
        toolchain=stable
        sanitizer=(-s none)
        export RUSTC_BOOTSTRAP=1
    fi
fi
if [ "$(cargo fuzz --version 2>/dev/null)" != "cargo-fuzz $cargo_fuzz_version" ]; then
    echo "fuzz.sh: installing cargo-fuzz $cargo_fuzz_version"
    cargo install cargo-fuzz --version "$cargo_fuzz_version" --locked --force
fi

cd fuzz
# The fuzz crate has its own target directory (fuzz/target or FUZZ_TARGET_DIR): sanitizer
# flags would otherwise invalidate the workspace's build.
unset CARGO_TARGET_DIR
target_dir=()
if [ -n "${FUZZ_TARGET_DIR:-}" ]; then target_dir=(--target-dir "$FUZZ_TARGET_DIR"); fi
targets="${FUZZ_TARGETS:-$(cargo "+$toolchain" fuzz list)}"
cargo "+$toolchain" fuzz build "${sanitizer[@]}" "${target_dir[@]}"
if [ "$build_only" = 1 ]; then echo "fuzz.sh: built $(echo $targets | wc -w) targets"; exit 0; fi

failed=()
for target in $targets; do
    corpus="corpus/$target"
    mkdir -p "$corpus" "artifacts/$target"
    echo "fuzz.sh: $target for ${seconds}s from seeds/$target ($(ls "seeds/$target" | wc -l) seeds)"
    # The first corpus directory receives new inputs; seeds/ stays as checked in.
    # shellcheck disable=SC2086 # FUZZ_ARGS is a list of flags
    if ! cargo "+$toolchain" fuzz run "${sanitizer[@]}" "${target_dir[@]}" "$target" "$corpus" "seeds/$target" -- \
        -max_total_time="$seconds" -max_len="$max_len_bytes" -malloc_limit_mb="$malloc_limit_mb" \
        -rss_limit_mb="$rss_limit_mb" -timeout="$input_timeout_s" -print_final_stats=1 \
        ${FUZZ_ARGS:-} 2>&1 | tee "artifacts/$target/last-run.log" | grep -v '^#[0-9]\|^"\|^###### '; then
        failed+=("$target")
    fi
    # tee's status hides the fuzzer's: read the verdict from the log as well.
    if grep -q '^SUMMARY: \|Test unit written to' "artifacts/$target/last-run.log"; then
        [[ " ${failed[*]} " == *" $target "* ]] || failed+=("$target")
    fi
done

if [ "${#failed[@]}" -gt 0 ]; then
    echo "fuzz.sh: FAILED: ${failed[*]}" >&2
    for target in "${failed[@]}"; do
        grep -h 'Test unit written to' "artifacts/$target/last-run.log" | sed "s|^|fuzz.sh: $target: |" >&2 || true
    done
    echo "fuzz.sh: reproduce with: cd fuzz && cargo +$toolchain fuzz run ${sanitizer[*]} TARGET artifacts/TARGET/FILE" >&2
    exit 1
fi
echo "fuzz.sh: every target ran ${seconds}s without a finding"
