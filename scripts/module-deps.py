#!/usr/bin/env python3
"""Lists the `use crate::` edges between the broker's modules and fails on a cycle.

A module is a top-level folder or file of broker/src (`handlers`, `net`, `leader`, `raft`,
...), except under `coord/`, where each coordinator (`coord::txn`, `coord::group`) is its own
module. Tests (`*_tests.rs`, `tests.rs`) are left out: they may reach anywhere. Every
`crate::a::b` path in a non-test file is an edge from the file's module to `a` (or
`coord::b`). Usage: scripts/module-deps.py [--edges]; exit 1 if the graph has a cycle.
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "broker", "src")
SPLIT = {"coord", "net"}  # folders whose children are modules of their own


def module_of(rel):
    parts = rel[:-3].split(os.sep)  # strip .rs
    if parts[0] in SPLIT and len(parts) > 1 and parts[1] != "mod":
        return f"{parts[0]}::{parts[1]}"
    return parts[0]


def target_of(path):
    parts = path.split("::")
    if parts[0] in SPLIT and len(parts) > 1:
        return f"{parts[0]}::{parts[1]}"
    return parts[0]


def edges():
    found = {}
    for dirpath, _, files in os.walk(ROOT):
        for name in files:
            if not name.endswith(".rs") or name.endswith("_tests.rs") or name == "tests.rs":
                continue
            rel = os.path.relpath(os.path.join(dirpath, name), ROOT)
            source = module_of(rel)
            text = open(os.path.join(dirpath, name), encoding="utf-8").read()
            # Inline test modules are tests too.
            text = re.split(r"#\[cfg\(test\)\]\s*mod tests\s*\{", text)[0]
            # Comments name modules without depending on them.
            text = re.sub(r"//.*", "", text)
            for m in re.finditer(r"crate::((?:\w+)(?:::\w+)?)", text):
                target = target_of(m.group(1))
                if target != source and target not in ("main", "lib"):
                    found.setdefault((source, target), set()).add(rel)
    return found


def cycles(graph):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main():
    found = edges()
    graph = {}
    for (a, b) in found:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    if "--edges" in sys.argv:
        for (a, b), files in sorted(found.items()):
            print(f"{a} -> {b}    ({', '.join(sorted(files))})")
    bad = cycles(graph)
    for component in bad:
        print("cycle among: " + ", ".join(component))
        for (a, b), files in sorted(found.items()):
            if a in component and b in component:
                print(f"  {a} -> {b}    ({', '.join(sorted(files))})")
    if not bad:
        print(f"{len(found)} edges between {len(graph)} modules, no cycle")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
