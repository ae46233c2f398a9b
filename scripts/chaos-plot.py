#!/usr/bin/env python3
"""Draws a chaos run's throughput over time with the fault windows shaded (issue 14).

    scripts/chaos-plot.py results/chaos/<run>/

Reads timeline.csv (committed / aborted / unknown transactions per second) and faults.csv
(kind, node, began, ended) written by the `chaos` binary; writes plot.png beside them.
"""
import csv
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {
    "kill-leader": "#d62728",
    "kill-follower": "#ff9896",
    "kill-all": "#8c564b",
    "pause-leader": "#1f77b4",
    "pause-follower": "#aec7e8",
    "client-crash": "#2ca02c",
    "txn-hijack": "#98df8a",
    "isolate-leader": "#9467bd",
    "isolate-follower": "#c5b0d5",
    "one-way-leader": "#e377c2",
    "client-link-leader": "#bcbd22",
    "disk-full": "#17becf",
}


def main(run_dir: Path) -> None:
    with open(run_dir / "timeline.csv") as f:
        rows = list(csv.DictReader(f))
    with open(run_dir / "faults.csv") as f:
        faults = list(csv.DictReader(f))
    seconds = [int(r["second"]) for r in rows]
    fig, ax = plt.subplots(figsize=(12, 4.5))
    ax.plot(seconds, [int(r["committed"]) for r in rows], color="black", lw=1.2, label="committed / s")
    ax.plot(seconds, [int(r["aborted"]) for r in rows], color="grey", lw=0.8, label="aborted / s")
    ax.plot(seconds, [int(r["unknown"]) for r in rows], color="orange", lw=0.8, label="unknown / s")
    shown = set()
    for fault in faults:
        began, ended = float(fault["began"]), float(fault["ended"])
        if ended - began < 0.2:
            ended = began + 0.2  # instant client faults still show
        kind = fault["kind"]
        ax.axvspan(began, ended, color=COLORS.get(kind, "#cccccc"), alpha=0.35,
                   label=None if kind in shown else kind)
        shown.add(kind)
    ax.set_xlabel("seconds since the start of the run")
    ax.set_ylabel("transactions per second")
    ax.set_title(f"chaos run {run_dir.name}")
    ax.legend(loc="upper right", fontsize=8, ncol=2)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(run_dir / "plot.png", dpi=110)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]))
