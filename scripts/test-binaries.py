#!/usr/bin/env python3
"""Runs the workspace's test binaries several at a time, for machines without cargo-nextest.

`cargo test` runs one test binary after another. Most of onelog's binaries are integration
tests that start three brokers and a client and then mostly wait (elections, session
expiries, rebalances), and many hold one test or run their tests one at a time, so one
binary after another leaves a core idle for most of the suite (560 s of binaries in a row,
2026-12-06). This runs `--jobs` binaries at once, each with `--test-threads 1`, so at most
`--jobs` tests run at any moment, as nextest runs them (one test per process, as many as
cores).

Usage: scripts/test-binaries.py [--jobs N] -- <cargo test arguments>
The cargo arguments select and build the binaries (`cargo test --no-run
--message-format=json-render-diagnostics ...`). Each binary runs in its package's directory
with CARGO_MANIFEST_DIR set, as under `cargo test`. Its output is printed whole when it ends;
the exit status is 1 when any binary failed (all of them run), and the failed ones are listed
at the end. The slowest binaries of the last run (kept in the cargo target directory) start
first, so that a long one does not start last.
"""

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path


def build(cargo_args):
    """Builds the test binaries; returns (name, executable, package directory) for each."""
    cmd = ["cargo", "test", "--no-run", "--message-format=json-render-diagnostics", *cargo_args]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.exit(f"test-binaries: {' '.join(cmd)} failed ({proc.returncode})")
    binaries = []
    for line in proc.stdout.splitlines():
        msg = json.loads(line)
        if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
            continue
        if not msg.get("profile", {}).get("test"):
            continue
        target = msg["target"]
        package_dir = str(Path(msg["manifest_path"]).parent)
        name = f"{Path(package_dir).name}::{target['name']} ({'/'.join(target['kind'])})"
        binaries.append((name, msg["executable"], package_dir))
    return binaries


def times_path():
    target = os.environ.get("CARGO_TARGET_DIR") or "target"
    return Path(target) / "test-binary-times.json"


def load_times():
    try:
        return json.loads(times_path().read_text())
    except (OSError, ValueError):
        return {}


def run_all(binaries, jobs, test_args):
    """Runs the binaries `jobs` at a time; returns {name: (seconds, exit status)}."""
    previous = load_times()
    # Longest first; a binary never timed before (a new one) counts as long.
    queue = sorted(binaries, key=lambda b: -previous.get(b[0], 1e9))
    results, lock = {}, threading.Lock()
    env = dict(os.environ, CARGO=os.environ.get("CARGO", "cargo"))

    def worker():
        while True:
            with lock:
                if not queue:
                    return
                name, exe, package_dir = queue.pop(0)
            started = time.monotonic()
            proc = subprocess.run(
                [exe, "--test-threads", "1", *test_args],
                cwd=package_dir,
                env=dict(env, CARGO_MANIFEST_DIR=package_dir),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
            )
            elapsed = time.monotonic() - started
            with lock:
                results[name] = (elapsed, proc.returncode)
                print(f"     Running {name} ({exe}), {elapsed:.1f} s", flush=True)
                sys.stdout.write(proc.stdout)
                sys.stdout.flush()

    threads = [threading.Thread(target=worker) for _ in range(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("cargo_args", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    cargo_args = [a for a in args.cargo_args if a != "--"]
    binaries = build(cargo_args)
    started = time.monotonic()
    results = run_all(binaries, max(1, args.jobs), [])
    times = load_times()
    times.update({name: round(r[0], 1) for name, r in results.items()})
    try:
        times_path().write_text(json.dumps(times, indent=1, sort_keys=True))
    except OSError:
        pass
    failed = sorted(name for name, r in results.items() if r[1] != 0)
    print(f"\ntest-binaries: {len(results)} binaries, {args.jobs} at a time, "
          f"{time.monotonic() - started:.0f} s; {len(failed)} failed")
    for name in failed:
        print(f"  FAILED {name}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
