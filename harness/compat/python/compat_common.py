"""The compatibility-matrix contract for the Python drivers (kafka-python, aiokafka, confluent-kafka).

One home for what the drivers share: the scenario ids in matrix order (the client list, and the
share-group list that confluent_share_driver.py runs), the environment the runner hands every
driver (COMPAT_BOOTSTRAP, COMPAT_KILL_LEADER, COMPAT_PREFIX, COMPAT_TIMEOUT_S), the
one-JSON-line-per-scenario printer, and the expected records that scenarios read back. A
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
    "txn_leader_kill",
    "err_unknown_topic",
    "err_offset_out_of_range",
    "err_stale_generation",
    "err_fenced_producer",
]

# The share-group (KIP-932) scenarios, in matrix order: a *-share driver (confluent_share_driver.py)
# runs this list instead of SCENARIOS, as java-4.4.0-share does (scripts/compat.sh SHARE_SCENARIOS).
SHARE_SCENARIOS = [
    "share_consume_implicit",
    "share_explicit_ack",
    "share_reject_archive",
    "share_lock_expiry",
    "share_two_consumers",
    "share_member_kill",
    "share_leader_kill",
]

# The security acceptance's scenarios (scripts/security-accept.sh), run instead of SCENARIOS
# when COMPAT_SUITE=security: produce+consume through a group, a transaction with the allowed
# transactional id, one with the denied id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, nothing of
# it in the log), and a connection with bad credentials. The runner creates SEC_TOPIC (one
# partition) and the ACLs; every record carries PREFIX, so clients sharing the topic read their own.
SECURITY_SCENARIOS = ["sec_produce_consume", "sec_txn_allowed", "sec_txn_denied", "sec_bad_credentials"]
SUITE = os.environ.get("COMPAT_SUITE", "")
SEC_TOPIC = os.environ.get("COMPAT_SEC_TOPIC", "sec-topic")
SEC_TXN_ALLOWED = os.environ.get("COMPAT_SEC_TXN_ALLOWED", "txn-a")
SEC_TXN_DENIED = os.environ.get("COMPAT_SEC_TXN_DENIED", "txn-b")

BOOTSTRAP = os.environ.get("COMPAT_BOOTSTRAP", "127.0.0.1:19092")
PREFIX = os.environ.get("COMPAT_PREFIX", "compat-py-%d" % os.getpid())
TIMEOUT_S = float(os.environ.get("COMPAT_TIMEOUT_S", "60"))
KILL_LEADER = os.environ.get("COMPAT_KILL_LEADER", "")
# Small segments (Kafka's minimum): a leftover from when every partition preallocated a whole
# segment per node; partitions now reserve blocks step by step, so it only makes segments roll.
TOPIC_CONFIGS = {"segment.bytes": "1048576"}


def _env(key):
    return os.environ.get(key) or None


# COMPAT_GROUP_PROTOCOL: "classic" (default) or "consumer" (KIP-848), the protocol of every group
# consumer of the run. The runner sets it for the *-consumer client ids (confluent-kafka-python-
# consumer); a driver that supports it names itself with client_id() and builds its group
# consumers with it. CONSUMER_ONLY_SCENARIOS run only under the consumer protocol.
GROUP_PROTOCOL = (_env("COMPAT_GROUP_PROTOCOL") or "classic").lower()
CONSUMER_PROTOCOL = GROUP_PROTOCOL == "consumer"
CONSUMER_ONLY_SCENARIOS = ["mixed_group", "online_migration"]
# librdkafka settings of the classic protocol that a consumer-protocol consumer must not set (the
# broker owns the session timeout, the heartbeat interval and the assignor: group.remote.assignor).
CLASSIC_ONLY_CONF = ("session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy")


def client_id(base):
    """The client id of a driver: base, or base + "-consumer" under the consumer protocol."""
    return base + "-consumer" if CONSUMER_PROTOCOL else base


def librdkafka_group_conf(conf):
    """conf for a librdkafka group consumer under GROUP_PROTOCOL (a new dict)."""
    conf = dict(conf)
    if CONSUMER_PROTOCOL:
        conf["group.protocol"] = "consumer"
        for key in CLASSIC_ONLY_CONF:
            conf.pop(key, None)
        if _env("COMPAT_GROUP_REMOTE_ASSIGNOR"):
            conf["group.remote.assignor"] = _env("COMPAT_GROUP_REMOTE_ASSIGNOR")
    return conf


# Connection security (issue #15), read from the environment once, for every Python driver:
# COMPAT_SECURITY_PROTOCOL (PLAINTEXT, SSL, SASL_SSL, SASL_PLAINTEXT), COMPAT_SASL_MECHANISM,
# COMPAT_SASL_USERNAME / COMPAT_SASL_PASSWORD, COMPAT_SSL_CA / COMPAT_SSL_CERT / COMPAT_SSL_KEY (PEM).
SECURITY_PROTOCOL = (_env("COMPAT_SECURITY_PROTOCOL") or "PLAINTEXT").upper()
SASL_MECHANISM = _env("COMPAT_SASL_MECHANISM") or "SCRAM-SHA-512"
SASL_USERNAME = _env("COMPAT_SASL_USERNAME")
SASL_PASSWORD = _env("COMPAT_SASL_PASSWORD")
SSL_CA = _env("COMPAT_SSL_CA")
SSL_CERT = _env("COMPAT_SSL_CERT")
SSL_KEY = _env("COMPAT_SSL_KEY")
SASL = SECURITY_PROTOCOL.startswith("SASL_")
TLS = SECURITY_PROTOCOL.endswith("SSL")


def librdkafka_security(password=None, client_cert=True):
    """librdkafka properties (confluent-kafka) for the environment's security; {} for PLAINTEXT.
    password replaces the SASL password, client_cert=False leaves the client certificate out."""
    if SECURITY_PROTOCOL == "PLAINTEXT":
        return {}
    conf = {"security.protocol": SECURITY_PROTOCOL.lower()}
    if SASL:
        conf.update({"sasl.mechanism": SASL_MECHANISM, "sasl.username": SASL_USERNAME or "",
                     "sasl.password": password if password is not None else (SASL_PASSWORD or "")})
    if TLS:
        if SSL_CA:
            conf["ssl.ca.location"] = SSL_CA
        if client_cert and SSL_CERT and SSL_KEY:
            conf.update({"ssl.certificate.location": SSL_CERT, "ssl.key.location": SSL_KEY})
    return conf


def kafka_python_security(password=None, client_cert=True):
    """kafka-python keyword arguments for the environment's security; {} for PLAINTEXT."""
    if SECURITY_PROTOCOL == "PLAINTEXT":
        return {}
    kw = {"security_protocol": SECURITY_PROTOCOL}
    if SASL:
        kw.update({"sasl_mechanism": SASL_MECHANISM, "sasl_plain_username": SASL_USERNAME,
                   "sasl_plain_password": password if password is not None else SASL_PASSWORD})
    if TLS:
        kw["ssl_check_hostname"] = True
        if SSL_CA:
            kw["ssl_cafile"] = SSL_CA
        if client_cert and SSL_CERT and SSL_KEY:
            kw.update({"ssl_certfile": SSL_CERT, "ssl_keyfile": SSL_KEY})
    return kw


def aiokafka_security(password=None, client_cert=True):
    """aiokafka keyword arguments for the environment's security (an ssl.SSLContext for TLS)."""
    if SECURITY_PROTOCOL == "PLAINTEXT":
        return {}
    kw = {"security_protocol": SECURITY_PROTOCOL}
    if SASL:
        kw.update({"sasl_mechanism": SASL_MECHANISM, "sasl_plain_username": SASL_USERNAME,
                   "sasl_plain_password": password if password is not None else SASL_PASSWORD})
    if TLS:
        import ssl

        ctx = ssl.create_default_context(cafile=SSL_CA)
        if client_cert and SSL_CERT and SSL_KEY:
            ctx.load_cert_chain(SSL_CERT, SSL_KEY)
        kw["ssl_context"] = ctx
    return kw


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


# txn_leader_kill: transactions run for TXN_BEFORE_S, then across COMPAT_KILL_LEADER, then
# TXN_AFTER_S more; each writes one record to each of TXN_PARTITIONS partitions. The kill starts
# while one transaction is held open with its records acknowledged (TXN_HOLD_S before its commit),
# so it always lands inside an open transaction, never by chance between two. Every client step
# has TXN_CALL_S, so a slow election is waited out inside the client, not taken for an abort.
TXN_BEFORE_S = 2.0
TXN_HOLD_S = 1.0
TXN_AFTER_S = 3.0
TXN_PARTITIONS = 3
TXN_CALL_S = 60


def txn_value(seq, partition):
    return ("tlk-%d-p%d" % (seq, partition)).encode()


class TxnRun:
    """What a txn_leader_kill loop saw: the committed transactions (seq, began, done, commit
    call seconds), the first failure (seq, at, text) and when the kill began and ended."""

    def __init__(self):
        self.committed = []
        self.failure = None
        self.kill_began = self.kill_ended = None
        # The transaction under way: (seq, began, step); one_txn may name its step.
        self.current = None
        # The loop holds one transaction open once the kill is wanted; the kill starts then.
        self.kill_wanted, self.held = threading.Event(), threading.Event()
        self.held_seq = None

    def hold(self, seq):
        """one_txn calls this once its records are acknowledged, before committing: the first
        transaction to get here after the kill is wanted stays open TXN_HOLD_S across the kill."""
        if self.kill_wanted.is_set() and not self.held.is_set():
            self.step("held open")
            self.held_seq = seq
            self.held.set()
            time.sleep(TXN_HOLD_S)

    async def hold_async(self, seq):
        if self.kill_wanted.is_set() and not self.held.is_set():
            self.step("held open")
            self.held_seq = seq
            self.held.set()
            await asyncio.sleep(TXN_HOLD_S)

    def await_held(self):
        """Sets kill_wanted and waits until a transaction is held open (or the loop failed)."""
        self.kill_wanted.set()
        deadline = time.monotonic() + TXN_CALL_S / 4
        while not self.held.is_set() and self.failure is None:
            expect(time.monotonic() < deadline, "no transaction got its records acknowledged in %d s; %s" % (
                TXN_CALL_S / 4, self.stuck()))
            time.sleep(0.005)

    def step(self, what):
        seq, began, _ = self.current
        self.current = (seq, began, what)

    def record(self, seq, began, commit_started):
        now = time.monotonic()
        self.committed.append((seq, began, now, now - commit_started))

    def fail(self, seq, err):
        self.failure = (seq, time.monotonic(), "%s: %s" % (type(err).__name__, err))

    def stuck(self):
        seq, began, step = self.current
        if self.kill_began is None:
            return "transaction %d stuck in %s, %.1f s after it began, before the kill; %d committed" % (
                seq, step, time.monotonic() - began, len(self.committed))
        return "transaction %d stuck in %s, %.1f s after it began (%.1f s after the kill began); %s" % (
            seq, step, time.monotonic() - began, time.monotonic() - self.kill_began, self.summary())

    def counts(self):
        before = sum(1 for _s, _b, done, _c in self.committed if done < self.kill_began)
        during = sum(1 for _s, _b, done, _c in self.committed if self.kill_began <= done < self.kill_ended)
        after = len(self.committed) - before - during
        return before, during, after

    def summary(self):
        before, during, after = self.counts()
        held = [c for seq, _b, _d, c in self.committed if seq == self.held_seq]
        held_text = "; transaction %s held open across the kill%s" % (
            self.held_seq, ", its commit took %d ms" % (held[0] * 1000) if held else "")
        return "%d committed: %d before the kill, %d during it (%.1f s), %d after%s" % (
            len(self.committed), before, during, self.kill_ended - self.kill_began, after,
            held_text if self.held_seq is not None else "")

    def check(self):
        """Raises for a failed transaction step or no commit before or after the kill."""
        if self.failure is not None:
            seq, at, text = self.failure
            if at >= self.kill_began:
                when = "%.1f s after the kill began" % (at - self.kill_began)
            else:
                when = "%.1f s before the kill" % (self.kill_began - at)
            raise AssertionError("transaction %d failed %s: %s; %s" % (seq, when, text, self.summary()))
        before, _during, after = self.counts()
        expect(self.held_seq is not None, "no transaction was held open across the kill; " + self.summary())
        expect(before > 0, "no transaction committed before the kill; " + self.summary())
        expect(after > 0, "no transaction committed after the kill; " + self.summary())

    def wanted(self, partition):
        return [txn_value(seq, partition) for seq, _b, _d, _c in self.committed]

    def total(self):
        return len(self.committed) * TXN_PARTITIONS

    def check_read(self, by_partition):
        """by_partition: {partition: [values in offset order]} read under read_committed."""
        for p in range(TXN_PARTITIONS):
            exactly_once("partition %d under read_committed" % p, by_partition.get(p, []), self.wanted(p))
        longest = max(done - began for _s, began, done, _c in self.committed)
        longest_commit = max(c for _s, _b, _d, c in self.committed)
        return "%s; all %d records read back once under read_committed; longest transaction %d ms (commit call %d ms)" % (
            self.summary(), self.total(), longest * 1000, longest_commit * 1000)


def exactly_once(what, have, want):
    """Raises unless have is exactly want (each value once, in order), counting what differs."""
    if have == want:
        return
    wanted = set(want)
    seen, dups = set(), 0
    for v in have:
        dups += v in seen
        seen.add(v)
    missing = [v for v in want if v not in seen]
    extra = [v for v in have if v not in wanted]
    order = ", out of order" if not missing and not dups and not extra else ""
    raise AssertionError("%s: %d records, want %d; %d missing (e.g. %s), %d duplicated, %d unexpected (e.g. %s)%s" % (
        what, len(have), len(want), len(missing), missing[:3], dups, len(extra), extra[:3], order))


def txn_loop_across_kill(one_txn):
    """Runs one_txn(seq, run) in a loop on a thread for TXN_BEFORE_S, then COMPAT_KILL_LEADER
    (once a transaction is held open: one_txn calls run.hold once its records are acknowledged,
    and run.record on commit), then TXN_AFTER_S; stops at the first exception."""
    run, stop, started = TxnRun(), threading.Event(), time.monotonic()

    def loop():
        seq = 0
        while not stop.is_set():
            run.current = (seq, time.monotonic(), "begin")
            try:
                one_txn(seq, run)
            except Exception as e:  # noqa: BLE001 - the first failure is the scenario's result
                log(traceback.format_exc())
                run.fail(seq, e)
                return
            seq += 1

    worker = threading.Thread(target=loop, daemon=True)
    worker.start()
    time.sleep(TXN_BEFORE_S)
    run.await_held()
    if run.failure is not None:
        raise AssertionError("transaction %d failed before the kill: %s" % (run.failure[0], run.failure[2]))
    run.kill_began = time.monotonic()
    try:
        kill_leader()
    finally:
        run.kill_ended = time.monotonic()
    time.sleep(TXN_AFTER_S)
    stop.set()
    # Leave the reading-back a third of the scenario's budget.
    worker.join(max(1.0, TIMEOUT_S * 2 / 3 - (time.monotonic() - started)))
    if worker.is_alive():
        raise AssertionError(run.stuck())
    return run


async def txn_loop_across_kill_async(one_txn):
    """txn_loop_across_kill for an asyncio client: one_txn is a coroutine function."""
    run, stop = TxnRun(), asyncio.Event()

    async def loop():
        seq = 0
        while not stop.is_set():
            run.current = (seq, time.monotonic(), "begin")
            try:
                await one_txn(seq, run)
            except Exception as e:  # noqa: BLE001
                log(traceback.format_exc())
                run.fail(seq, e)
                return
            seq += 1

    started = time.monotonic()
    worker = asyncio.create_task(loop())
    await asyncio.sleep(TXN_BEFORE_S)
    run.kill_wanted.set()
    deadline = time.monotonic() + TXN_CALL_S / 4
    while not run.held.is_set() and run.failure is None:
        expect(time.monotonic() < deadline, "no transaction got its records acknowledged in %d s; %s" % (
            TXN_CALL_S / 4, run.stuck()))
        await asyncio.sleep(0.005)
    if run.failure is not None:
        raise AssertionError("transaction %d failed before the kill: %s" % (run.failure[0], run.failure[2]))
    run.kill_began = time.monotonic()
    try:
        await asyncio.get_running_loop().run_in_executor(None, kill_leader)
    finally:
        run.kill_ended = time.monotonic()
    await asyncio.sleep(TXN_AFTER_S)
    stop.set()
    try:
        await asyncio.wait_for(worker, max(1.0, TIMEOUT_S * 2 / 3 - (time.monotonic() - started)))
    except asyncio.TimeoutError:
        raise AssertionError(run.stuck()) from None
    return run


def emit(client, version, scenario, result, detail):
    line = {"client": client, "version": version, "scenario": scenario, "result": result, "detail": detail}
    print(json.dumps(line), flush=True)


def _outcome(fn, budget_s=None):
    """Runs one scenario function (sync or async) within budget_s (default COMPAT_TIMEOUT_S) and
    answers (result, detail)."""
    budget_s = budget_s or TIMEOUT_S
    try:
        if asyncio.iscoroutinefunction(fn):
            detail = asyncio.run(asyncio.wait_for(fn(), budget_s))
        else:
            detail = _with_deadline(fn, budget_s)
        return "pass", detail or ""
    except NotExpressible as e:
        return "n/a", str(e)
    except BaseException as e:  # noqa: BLE001 - every failure becomes a fail cell
        log(traceback.format_exc())
        text = str(e) or type(e).__name__
        return "fail", "%s: %s" % (type(e).__name__, text)


def _with_deadline(fn, budget_s):
    """A synchronous scenario in a daemon thread, abandoned (and failed) past budget_s."""
    box = {}

    def target():
        try:
            box["detail"] = fn()
        except BaseException as e:  # noqa: BLE001
            box["error"] = e
            box["trace"] = traceback.format_exc()

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(budget_s)
    if thread.is_alive():
        raise TimeoutError("scenario still running after %.0f s" % budget_s)
    if "error" in box:
        log(box["trace"])
        raise box["error"]
    return box.get("detail")


def active_scenarios(extra=()):
    """The scenario ids of this run: the matrix's (and the driver's `extra` ones, under the
    consumer protocol only), or the security suite's (COMPAT_SUITE=security)."""
    if SUITE == "security":
        return SECURITY_SCENARIOS
    return SCENARIOS + ([s for s in extra if s in CONSUMER_ONLY_SCENARIOS] if CONSUMER_PROTOCOL else [])


def scenario_functions(namespace, extra=()):
    """The driver's functions named s_<scenario id>, one for every id (a missing one is a KeyError)."""
    return {s: namespace["s_" + s] for s in active_scenarios(extra)}


def run_all(client, version, impls, only=None, scenarios=None, budgets_s=None):
    """Prints one line per scenario id (of `scenarios`, default the matrix's); a scenario absent
    from impls must be given as n/a. budgets_s: {scenario: seconds} for those that need more
    than COMPAT_TIMEOUT_S (a lock to wait out, a leader kill)."""
    only = set(filter(None, (only or os.environ.get("COMPAT_SCENARIOS", "")).split(",")))
    budgets_s = budgets_s or {}
    for scenario in scenarios or active_scenarios(extra=impls):
        if only and scenario not in only:
            continue
        impl = impls[scenario]
        started = time.monotonic()
        if isinstance(impl, str):
            result, detail = "n/a", impl
        else:
            log("[%s] %s ..." % (client, scenario))
            result, detail = _outcome(impl, budgets_s.get(scenario))
        log("[%s] %s: %s (%.1f s) %s" % (client, scenario, result, time.monotonic() - started, detail))
        emit(client, version, scenario, result, detail)
    sys.stdout.flush()
    # Abandoned scenario threads must not keep the process (and the runner) waiting.
    os._exit(0)
