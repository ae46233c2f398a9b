"""The compatibility-matrix contract for the Python drivers (kafka-python, aiokafka, confluent-kafka).

One home for what the three drivers share: the scenario ids in matrix order, the environment the
runner hands every driver (COMPAT_BOOTSTRAP, COMPAT_KILL_LEADER, COMPAT_PREFIX, COMPAT_TIMEOUT_S),
the one-JSON-line-per-scenario printer, and the expected records that scenarios read back. A
driver supplies one function per scenario it can express; `run_all` prints a line for every id,
turning exceptions into `fail` and `NotExpressible` into `n/a`.
"""

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
import traceback

SCENARIOS = [
    "create_topic",
    "produce_consume",
    "compression",
    "consume_earliest",
    "consume_latest",
    "seek_timestamp",
    "group_rebalance",
    "member_leave_rejoin",
    "idempotent_produce",
    "txn_commit_abort",
    "consume_process_produce",
    "txn_fencing",
    "alter_config",
    "delete_records",
    "leader_kill",
    "err_unknown_topic",
    "err_offset_out_of_range",
    "err_stale_generation",
    "err_fenced_producer",
]

BOOTSTRAP = os.environ.get("COMPAT_BOOTSTRAP", "127.0.0.1:19092")
PREFIX = os.environ.get("COMPAT_PREFIX", "compat-py-%d" % os.getpid())
TIMEOUT_S = float(os.environ.get("COMPAT_TIMEOUT_S", "60"))
KILL_LEADER = os.environ.get("COMPAT_KILL_LEADER", "")
# Small segments (Kafka's minimum): a leftover from when every partition preallocated a whole
# segment per node; partitions now reserve blocks step by step, so it only makes segments roll.
TOPIC_CONFIGS = {"segment.bytes": "1048576"}


class NotExpressible(Exception):
    """The client's API cannot express the scenario: the cell is n/a with this reason."""


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def name(client, scenario, suffix=""):
    """A topic, group or transactional id unique to this run, client and scenario."""
    return "%s-%s-%s%s" % (PREFIX, client.replace(".", "_"), scenario, suffix)


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def expect_eq(got, want, what):
    if got != want:
        raise AssertionError("%s: got %s, want %s" % (what, short(got), short(want)))


def short(value, limit=300):
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def records(n, tag="r"):
    """n records with distinct keys, values and two headers each: (key, value, headers)."""
    return [
        (
            ("k-%s-%d" % (tag, i)).encode(),
            ("v-%s-%d" % (tag, i)).encode(),
            [("h1", ("a%d" % i).encode()), ("h2", b"")],
        )
        for i in range(n)
    ]


def values(n, tag):
    return [("v-%s-%d" % (tag, i)).encode() for i in range(n)]


def kill_leader():
    """Runs COMPAT_KILL_LEADER: kill -9 the Raft leader, wait for a new one, restart the node."""
    expect(KILL_LEADER, "COMPAT_KILL_LEADER is not set")
    done = subprocess.run(KILL_LEADER, shell=True, stdout=sys.stderr, stderr=sys.stderr, timeout=120)
    expect_eq(done.returncode, 0, "COMPAT_KILL_LEADER exit code")


def emit(client, version, scenario, result, detail):
    line = {"client": client, "version": version, "scenario": scenario, "result": result, "detail": detail}
    print(json.dumps(line), flush=True)


def _outcome(fn):
    """Runs one scenario function (sync or async) and answers (result, detail)."""
    try:
        if asyncio.iscoroutinefunction(fn):
            detail = asyncio.run(asyncio.wait_for(fn(), TIMEOUT_S))
        else:
            detail = _with_deadline(fn)
        return "pass", detail or ""
    except NotExpressible as e:
        return "n/a", str(e)
    except BaseException as e:  # noqa: BLE001 - every failure becomes a fail cell
        log(traceback.format_exc())
        text = str(e) or type(e).__name__
        return "fail", "%s: %s" % (type(e).__name__, text)


def _with_deadline(fn):
    """A synchronous scenario in a daemon thread, abandoned (and failed) past COMPAT_TIMEOUT_S."""
    box = {}

    def target():
        try:
            box["detail"] = fn()
        except BaseException as e:  # noqa: BLE001
            box["error"] = e
            box["trace"] = traceback.format_exc()

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(TIMEOUT_S)
    if thread.is_alive():
        raise TimeoutError("scenario still running after %.0f s" % TIMEOUT_S)
    if "error" in box:
        log(box["trace"])
        raise box["error"]
    return box.get("detail")


def scenario_functions(namespace):
    """The driver's functions named s_<scenario id>, one for every id (a missing one is a KeyError)."""
    return {s: namespace["s_" + s] for s in SCENARIOS}


def run_all(client, version, impls, only=None):
    """Prints one line per scenario id; a scenario absent from impls must be given as n/a."""
    only = set(filter(None, (only or os.environ.get("COMPAT_SCENARIOS", "")).split(",")))
    for scenario in SCENARIOS:
        if only and scenario not in only:
            continue
        impl = impls[scenario]
        started = time.monotonic()
        if isinstance(impl, str):
            result, detail = "n/a", impl
        else:
            log("[%s] %s ..." % (client, scenario))
            result, detail = _outcome(impl)
        log("[%s] %s: %s (%.1f s) %s" % (client, scenario, result, time.monotonic() - started, detail))
        emit(client, version, scenario, result, detail)
    sys.stdout.flush()
    # Abandoned scenario threads must not keep the process (and the runner) waiting.
    os._exit(0)
