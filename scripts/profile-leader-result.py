#!/usr/bin/env python3
"""profile-leader.sh's figures for one run: adds CPU per transaction per node (from the nodes'
CPU ticks before and after), the client's CPU per transaction (/usr/bin/time's user + system
seconds), the leader and Raft entries per transaction to the bench's JSON summary, and prints
them on one line ("bench failed" when the bench wrote no summary).

Usage: profile-leader-result.py BENCH_JSON TICKS_BEFORE TICKS_AFTER CLK_TCK CLIENT_TIME LEADER
       APPLIED_INDEX_BEFORE APPLIED_INDEX_AFTER
"""
import json, sys
path, before, after, hz, timef, leader, i0, i1 = sys.argv[1:9]
try:
    d = json.load(open(path))
except Exception:
    print("bench failed"); sys.exit(0)
txs = d["count"] + d.get("warmup", 0) * d["producers"]
per = [(int(a) - int(b)) / int(hz) * 1e6 / txs for b, a in zip(before.split(), after.split())]
u, s = open(timef).read().split()[-2:]
client = (float(u) + float(s)) * 1e6 / txs
d["cpu_us_per_tx_per_node"] = [round(v) for v in per]
d["client_cpu_us_per_tx"] = round(client)
d["leader"] = int(leader)
entries = (int(i1) - int(i0)) / txs if i0.isdigit() and i1.isdigit() else float("nan")
d["raft_entries_per_tx"] = round(entries, 3)
json.dump(d, open(path, "w"))
nodes = " / ".join("%d%s" % (v, "*" if i + 1 == int(leader) else "") for i, v in enumerate(per))
print("producers %3d  tps %7.1f  p50 %6.2f ms  p99 %7.2f ms  cpu us/tx nodes %s (* leader)  client %d  entries/tx %.2f" %
      (d["producers"], d["tps"], d["p50_ms"], d["p99_ms"], nodes, client, entries))
