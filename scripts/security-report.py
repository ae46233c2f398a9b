#!/usr/bin/env python3
"""The security acceptance's report (scripts/security-accept.sh): reads what the run left in
WORK (setup.jsonl from Kafka's tools; per client and protocol CLIENT.PROTO.jsonl, .rc and
.stderr from the drivers), writes the Markdown report to OUT, prints its table and exits 1 on
any failing cell (a fail line, a missing line, or a driver's non-zero exit).

Usage: security-report.py WORK OUT BROKER "CLIENT ..." "SCENARIO ..." "CLIENT.PROTO=S;..."
       CLUSTER_S SETUP_S TARGET
"""
import json, os, sys
work, out, broker, clients, scenarios, seconds, cluster_s, setup_s, target = sys.argv[1:]
clients, scenarios = clients.split(), scenarios.split()
secs = dict(kv.split("=") for kv in seconds.split(";") if kv)
def cells(path):
    got = {}
    if os.path.exists(path):
        for line in open(path):
            try:
                d = json.loads(line)
            except ValueError:
                continue
            got[d["scenario"]] = d
    return got
failed = 0
rows, details = [], []
setup = cells(os.path.join(work, "setup.jsonl"))
for name, d in setup.items():
    failed += d["result"] == "fail"
    details.append("| admin | %s | %s | %s |" % (name, d["result"], d["detail"].replace("|", "\\|").replace("\n", " ")))
for client in clients:
    for proto in ("SASL_SSL", "SSL"):
        got = cells(os.path.join(work, "%s.%s.jsonl" % (client, proto)))
        rc = open(os.path.join(work, "%s.%s.rc" % (client, proto))).read().strip()
        version = next((d["version"] for d in got.values()), "?")
        row = []
        for s in scenarios:
            d = got.get(s)
            if d is None:
                row.append("fail (no line, exit %s)" % rc)
                failed += 1
                continue
            # A driver that exits non-zero (a crash or a timeout after its last line) fails
            # each of its cells, whatever it printed.
            row.append(d["result"] if rc == "0" else "fail (exit %s, printed %s)" % (rc, d["result"]))
            failed += d["result"] == "fail" or rc != "0"
            details.append("| %s %s | %s | %s | %s |" % (client, proto, s, d["result"], d["detail"].replace("|", "\\|").replace("\n", " ")))
        if rc != "0":
            stderr = open(os.path.join(work, "%s.%s.stderr" % (client, proto)), errors="replace").read().strip()
            tail = stderr.splitlines()[-1] if stderr else "no stderr"
            details.append("| %s %s | driver | fail | exit %s: %s |" % (client, proto, rc, tail.replace("|", "\\|")))
        who = "alice (SCRAM-SHA-512)" if proto == "SASL_SSL" else "CN=bob (certificate)"
        rows.append("| %s | %s | %s | %s | %s | %s |" % (client, version, proto, who, " | ".join(row), secs.get("%s.%s" % (client, proto), "?")))
text = ["# Security acceptance (issue #15)", "",
        "`scripts/security-accept.sh%s` against %s: cluster up in %s s, set-up with Kafka's tools (SCRAM user, ACLs, topic) %s s." % (
            " --kafka" if target == "kafka" else "", broker, cluster_s, setup_s), "",
        "| client | version | protocol | principal | " + " | ".join(scenarios) + " | s |",
        "|---|---|---|---|" + "---|" * len(scenarios) + "---|"] + rows + [
        "", "| who | scenario | result | detail |", "|---|---|---|---|"] + details
open(out, "w").write("\n".join(text) + "\n")
print("\n".join(text[:len(rows) + 6]))
print("wrote %s; %d failing cells" % (out, failed))
sys.exit(1 if failed else 0)
