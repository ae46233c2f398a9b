#!/usr/bin/env python3
"""Recovery figures over several chaos runs (issue 14's acceptance): for each fault kind, how
many faults, and p50 / max of the time to a new leader and to the first acknowledged commit
after the fault began, pooled over every run given. Runs with re-introduced bugs or a
widened transactional write window (`--txn-write-delay-ms`) are skipped.

    scripts/chaos-recovery.py results/chaos/*/          # a Markdown table on stdout

Reads each run's summary.json (written by `chaos`, harness/src/chaos/report.rs).
"""
import json
import sys
from pathlib import Path

# The faults whose recovery the issue asks for, first; any other kind follows.
FIRST = ["kill-leader", "pause-leader", "isolate-leader", "one-way-leader", "kill-all"]


def p50_max(values):
    """The lower median and the maximum, as report.rs computes them; None when empty."""
    if not values:
        return None
    values = sorted(values)
    return values[(len(values) - 1) // 2], values[-1]


def fmt(pair):
    return "-" if pair is None else f"{pair[0]:,} / {pair[1]:,}"


def main(dirs):
    runs = []
    for d in dirs:
        summary = Path(d) / "summary.json"
        if not summary.is_file():
            print(f"chaos-recovery: no {summary}", file=sys.stderr)
            return 2
        report = json.loads(summary.read_text())
        # A re-introduced broker bug, a broken copier or a widened write window: not the
        # broker's recovery as users meet it.
        if report.get("broker_flags") or "-bug-" in Path(d).name or report.get("txn_write_delay_ms"):
            continue
        runs.append((Path(d).name, report))
    if not runs:
        print("chaos-recovery: no run without a re-introduced bug", file=sys.stderr)
        return 2
    by_kind = {}
    for _, report in runs:
        for r in report["recovery"]:
            entry = by_kind.setdefault(r["kind"], {"n": 0, "leader": [], "commit": []})
            entry["n"] += 1
            if r.get("new_leader_ms") is not None:
                entry["leader"].append(r["new_leader_ms"])
            if r.get("first_commit_ms") is not None:
                entry["commit"].append(r["first_commit_ms"])
    kinds = [k for k in FIRST if k in by_kind] + sorted(k for k in by_kind if k not in FIRST)
    names = ", ".join(name for name, _ in runs)
    print(f"Recovery over {len(runs)} runs ({names}); ms, p50 / max, from the fault's start.\n")
    print("| fault | faults | new leader | first acknowledged commit |")
    print("|---|---:|---:|---:|")
    for kind in kinds:
        e = by_kind[kind]
        print(f"| {kind} | {e['n']} | {fmt(p50_max(e['leader']))} | {fmt(p50_max(e['commit']))} |")
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
