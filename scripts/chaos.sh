#!/usr/bin/env bash
# A seeded chaos run against a onelog cluster on 127.0.0.1 (issue 14): builds the
# fault-injection broker and the `chaos` runner, runs it with the arguments given, and draws
# the run's plot (matplotlib in .venv-bench, as the benchmarks do).
#
#   scripts/chaos.sh --workload queue --seconds 600 --seed 42
#   scripts/chaos.sh --workload bank --seconds 60 --bug read-committed-to-hw
#   scripts/chaos.sh --workload share --seconds 120 --seed 1     (KIP-932 share groups)
#
# Every argument goes to the runner (`chaos --help`). The report lands under results/chaos/
# (or --out); the exit status is the runner's: non-zero when the checker found a violation.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/onelog-target}"
cargo build -q -p broker --features broker/fault-injection
cargo build -q -p harness --bin chaos
export ONELOG_BIN="${ONELOG_BIN:-$CARGO_TARGET_DIR/debug/onelog}"
log="$(mktemp "${TMPDIR:-/tmp}/chaos.XXXXXX.log")"
status=0
"$CARGO_TARGET_DIR/debug/chaos" "$@" | tee "$log" || status=$?
out="$(sed -n 's/^report: //p' "$log" | tail -1)"
rm -f "$log"
if [ -n "$out" ] && [ -d "$out" ]; then
    venv="$repo/.venv-bench"
    if ! "$venv/bin/python" -c 'import matplotlib' >/dev/null 2>&1; then
        { python3 -m venv "$venv" && "$venv/bin/pip" install -q --disable-pip-version-check matplotlib; } >&2 ||
            echo "chaos.sh: no matplotlib; no plot" >&2
    fi
    if "$venv/bin/python" -c 'import matplotlib' >/dev/null 2>&1; then
        "$venv/bin/python" scripts/chaos-plot.py "$out" && echo "plot: $out/plot.png"
    fi
fi
exit "$status"
