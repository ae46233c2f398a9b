"""Writes results/compat.md from the drivers' JSON lines (called by scripts/compat.sh).

Each client's lines are in WORK/<client>.jsonl, its exit code in WORK/<client>.rc (absent with a
WORK/<client>.missing marker when no driver exists). A scenario without a line, a driver that
exited non-zero or timed out, and a malformed line all become `fail` cells, so a crashing driver
can never look green. Exits 1 when any cell is `fail`.
"""

import argparse
import datetime
import json
import os
import sys


def pairs(text):
    return dict(item.split("=", 1) for item in text.split(";") if "=" in item)


def is_share(client):
    """A share-group (KIP-932) driver, e.g. java-4.4.0-share: its own scenario list (--share)."""
    return client.endswith("-share")


def scenario_list(client, args):
    if client.startswith("kafka-streams-"):
        return args.streams.split()
    if client.startswith("kafka-cli-"):
        return args.cli.split()
    if is_share(client):
        return args.share.split()
    return args.scenarios.split() + extra_of(client, args)


def extra_of(client, args):
    """The scenarios this client runs besides the client list (--extra), e.g. mixed_group."""
    return list(filter(None, pairs(args.extra).get(client, "").split(",")))


def selected_of(client, args):
    """The scenario ids the runner asked this client for (--selected): all of them when empty."""
    ids = pairs(args.selected).get(client, "")
    return set(filter(None, ids.split(",")))


def cells_of(client, args):
    """Answers (version, {scenario: (result, detail)}) for one client."""
    base = os.path.join(args.work, client)
    selected = selected_of(client, args)
    wanted = [s for s in scenario_list(client, args) if not selected or s in selected]
    if os.path.exists(base + ".missing"):
        return "-", {s: ("fail", "driver missing") for s in wanted}
    cells, version = {}, "?"
    with open(base + ".jsonl", errors="replace") as f:
        for raw in f:
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(line, dict) or line.get("scenario") not in wanted:
                continue
            result = line.get("result")
            if result not in ("pass", "fail", "n/a"):
                result, line["detail"] = "fail", "bad result %r" % result
            version = str(line.get("version") or version)
            cells[line["scenario"]] = (result, str(line.get("detail", "")))
    rc = open(base + ".rc").read().strip() if os.path.exists(base + ".rc") else "?"
    why = "driver timed out" if rc in ("124", "137") else "driver exited %s" % rc
    for s in wanted:
        if s not in cells:
            cells[s] = ("fail", "no line (%s)" % why)
    if rc != "0":
        cells["_driver"] = ("fail", why)
    for s in scenario_list(client, args):
        cells.setdefault(s, ("-", "not in the CI subset"))
    return version, cells


def table(clients, results, scenarios):
    head = "| client | version | " + " | ".join(scenarios) + " |"
    rule = "|" + "---|" * (len(scenarios) + 2)
    rows = [head, rule]
    for client in clients:
        version, cells = results[client]
        marks = [cells[s][0] for s in scenarios]
        rows.append("| %s | %s | %s |" % (client, version.replace("|", "/"), " | ".join(marks)))
    return rows


def main():
    ap = argparse.ArgumentParser()
    for opt in ["work", "out", "command", "clients", "scenarios", "streams", "cli", "broker", "versions", "seconds",
                "selected", "extra", "share"]:
        ap.add_argument("--" + opt, default="")
    args = ap.parse_args()
    clients = args.clients.split()
    seconds = pairs(args.seconds)
    results = {c: cells_of(c, args) for c in clients}
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# Client compatibility matrix",
        "",
        "Written by `%s` on %s against `%s` (three nodes, auto-create off)." % (args.command.strip(), now, args.broker),
        "Legend: **pass** the scenario's results were checked exact; **fail** see the details below; "
        "**n/a** the client's API cannot express it (reason below).",
    ]
    if any(r == "-" for c in clients for r, _ in results[c][1].values()):
        lines.append("**-** not run: this is the fixed CI subset (`scripts/compat.sh --ci`); "
                     "`scripts/compat.sh` runs every cell.")
    lines.append("")
    groups = [
        ("Client scenarios", [c for c in clients if not c.startswith(("kafka-streams-", "kafka-cli-")) and not is_share(c)]),
        ("Share groups (KIP-932)", [c for c in clients if is_share(c)]),
        ("Kafka Streams", [c for c in clients if c.startswith("kafka-streams-")]),
        ("Kafka command-line tools", [c for c in clients if c.startswith("kafka-cli-")]),
    ]
    for title, members in groups:
        if not members:
            continue
        lines += ["## " + title, ""]
        columns = scenario_list(members[0], args)
        if title == "Client scenarios":
            columns = args.scenarios.split()
        lines += table(members, results, columns) + [""]
    extras = [c for c in clients if extra_of(c, args)]
    if extras:
        lines += ["## Mixed consumer groups (KIP-848)", "",
                  "`mixed_group`: a Java kafka-clients 4.4.0 member and a librdkafka member in one "
                  "consumer-protocol group (each partition owned by exactly one, every record read once "
                  "across the two, then the Java member leaves and the other takes every partition). "
                  "`online_migration`: a running classic group of two librdkafka members upgrades to a "
                  "consumer group when a consumer-protocol member joins and downgrades when it leaves; "
                  "in each phase every partition is owned once, the group's type is right and records "
                  "are read exactly once.", ""]
        for c in extras:
            lines += table([c], results, extra_of(c, args)) + [""]
    lines += ["## Driver run times", "", "| client | seconds |", "|---|---|"]
    lines += ["| %s | %s |" % (c, seconds.get(c, "?")) for c in clients] + [""]
    failed = False
    for result, title in [("fail", "Failing cells"), ("n/a", "Not expressible")]:
        lines += ["## " + title, ""]
        for c in clients:
            cells = [(s, d) for s, (r, d) in sorted(results[c][1].items()) if r == result]
            failed |= result == "fail" and bool(cells)
            if len(cells) > 1 and len({d for _, d in cells}) == 1:
                lines.append("- `%s` / every scenario: %s" % (c, cells[0][1]))
                continue
            for s, detail in cells:
                lines.append("- `%s` / `%s`: %s" % (c, s, detail.replace("\n", " ")[:400]))
        lines.append("")
    with open(args.out, "w") as f:
        f.write("\n".join(lines))
    print("compat: wrote %s%s" % (args.out, " (failing cells)" if failed else ""), file=sys.stderr)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
