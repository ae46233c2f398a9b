#!/usr/bin/env python3
"""Lists the `use crate::` edges between the broker's modules and fails on a cycle or on a
"never" rule of docs/ARCHITECTURE.md.

A module is a top-level folder or file of broker/src (`handlers`, `net`, `leader`, `raft`,
...), except under `coord/`, `net/` and `security/`, where each child (`coord::txn`,
`net::listener`, `security::authz`) is its own module. Tests (`*_tests.rs`, `tests.rs`) are
left out: they may reach anywhere. Every `crate::a::b` path in a non-test file is an edge
from the file's module to `a` (or `coord::b`).

The "never" rules are read from the table under ARCHITECTURE's "What may touch what", so that
the document stays their one source: a cell saying ``SUBJECT ... never VERB `OBJECT` `` forbids
the subject's files to name the object. The subject is a broker module (`handlers`,
`net/listener.rs`) or one of SUBJECTS below; the object is a broker module (`limits.rs`,
`crate::limits`), an edge then, or a Rust name (`SystemTime`), found as a word in the code.
A "never" the script cannot read fails it, so the table cannot promise what nothing checks.

Usage: scripts/module-deps.py [--edges]; exit 1 on a cycle or a "never" edge.
"""
import os
import re
import sys

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
ROOT = os.path.join(REPO, "broker", "src")
ARCHITECTURE = os.path.join(REPO, "docs", "ARCHITECTURE.md")
TABLE_HEADING = "### What may touch what"
# Subjects of "never" rules that are not modules of broker/src: the files they stand for,
# relative to the repository, and how those files name the broker's modules.
SUBJECTS = {
    # `onelog_state::apply_command` and the apply files it calls (state/src/apply*.rs); the
    # state crate could only reach the node's modules through the `broker` crate.
    "apply": ("state/src", re.compile(r"apply\w*\.rs$"), "broker::"),
}
SPLIT = {"coord", "net", "security"}  # folders whose children are modules of their own


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


def product_code(path):
    """A non-test source file's code: inline test modules and comments dropped, lines kept."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    # Inline test modules are tests too.
    text = re.split(r"#\[cfg\(test\)\]\s*mod tests\s*\{", text)[0]
    # Comments name modules without depending on them.
    return re.sub(r"//.*", "", text)


def sources(top, keep=None):
    """(path relative to top, code) of the non-test .rs files below top."""
    for dirpath, dirs, files in os.walk(top):
        dirs.sort()
        for name in sorted(files):
            if not name.endswith(".rs") or name.endswith("_tests.rs") or name == "tests.rs":
                continue
            rel = os.path.relpath(os.path.join(dirpath, name), top)
            if keep is None or keep.search(rel):
                yield rel, product_code(os.path.join(dirpath, name))


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def edges():
    """{(module, module): {file: first line naming the target}}."""
    found = {}
    for rel, text in sources(ROOT):
        source = module_of(rel)
        for m in re.finditer(r"crate::((?:\w+)(?:::\w+)?)", text):
            target = target_of(m.group(1))
            if target != source and target not in ("main", "lib"):
                found.setdefault((source, target), {}).setdefault(rel, line_of(text, m.start()))
    return found


NEVER = re.compile(
    r"`?(?P<subject>[\w/:.]+)`?\s+"  # handlers, `net/listener.rs`, apply
    r"(?:\w+\s+`[^`]+`,?\s+)?"  # optionally what it does instead: reads `state.limits`,
    r"never\s+(?:\w+\s+)?`(?P<object>[^`]+)`"  # never call `SystemTime`, never `limits.rs`
)


def never_rules():
    """(line in ARCHITECTURE.md, rule text, subject, object) per "never" in the table; exits on
    a "never" it cannot read."""
    with open(ARCHITECTURE, encoding="utf-8") as f:
        lines = f.read().split("\n")
    try:
        start = lines.index(TABLE_HEADING)
    except ValueError:
        sys.exit(f"docs/ARCHITECTURE.md: no section {TABLE_HEADING!r} to read the never rules from")
    rules, in_table = [], False
    for number, line in enumerate(lines[start + 1:], start + 2):
        if line.startswith("#"):
            break
        if not line.startswith("|"):
            if in_table:
                break
            continue
        in_table = True
        # One rule per clause: a cell may hold several, separated by `;`.
        for clause in re.split(r"[|;]", line.strip().strip("|")):
            count = len(re.findall(r"\bnever\b", clause))
            if not count:
                continue
            m = NEVER.search(clause)
            if not m or count > 1:
                sys.exit(f"docs/ARCHITECTURE.md:{number}: cannot read the never rule"
                         f" {clause.strip()!r} (write it as: SUBJECT never VERB `OBJECT`)")
            rules.append((number, clause.strip(), m.group("subject"), m.group("object")))
    if not rules:
        sys.exit(f"docs/ARCHITECTURE.md: no never rule under {TABLE_HEADING!r}")
    return rules


def as_module(name):
    """`limits.rs`, `net/listener.rs`, `crate::limits`, `handlers/` -> the module, or None."""
    name = name.removeprefix("crate::").rstrip("/")
    if name.endswith(".rs"):
        rel = name if os.path.exists(os.path.join(ROOT, name)) else None
        return module_of(rel) if rel else None
    path = name.replace("::", "/")
    if os.path.isdir(os.path.join(ROOT, path)) or os.path.exists(os.path.join(ROOT, path + ".rs")):
        return target_of(path.replace("/", "::"))
    return None


def within(module, rule_module):
    """A rule on `coord`, `net` or `security` covers each of their child modules."""
    return module == rule_module or module.startswith(rule_module + "::")


def never_violations(found):
    """(rule line, rule text, [(file, line)]) per "never" rule of the table."""
    out = []
    for number, text, subject, obj in never_rules():
        hits = []
        target = as_module(obj)
        if subject in SUBJECTS:
            top, keep, prefix = SUBJECTS[subject]
            if target is None:
                sys.exit(f"docs/ARCHITECTURE.md:{number}: {obj!r} is not a broker module")
            path = prefix + target
            for rel, code in sources(os.path.join(REPO, top), keep):
                for m in re.finditer(re.escape(path) + r"\b", code):
                    hits.append((f"{top}/{rel}", line_of(code, m.start())))
        else:
            module = as_module(subject)
            if module is None:
                sys.exit(f"docs/ARCHITECTURE.md:{number}: never rule {text!r}: {subject!r} is"
                         " neither a broker module nor one of module-deps.py's SUBJECTS")
            if target is not None:  # an import edge
                for (a, b), files in sorted(found.items()):
                    if within(a, module) and within(b, target):
                        hits.extend((f"broker/src/{rel}", line) for rel, line in sorted(files.items()))
            else:  # a name in the code
                if not re.fullmatch(r"[A-Za-z_]\w*(::\w+)*", obj):
                    sys.exit(f"docs/ARCHITECTURE.md:{number}: {obj!r} is neither a module nor a name")
                for rel, code in sources(ROOT):
                    if not within(module_of(rel), module):
                        continue
                    for m in re.finditer(r"\b" + re.escape(obj) + r"\b", code):
                        hits.append((f"broker/src/{rel}", line_of(code, m.start())))
        out.append((number, text, hits))
    return out


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
    rules = never_violations(found)
    broken = 0
    for number, text, hits in rules:
        for path, line in hits:
            print(f"{path}:{line}: breaks docs/ARCHITECTURE.md:{number}: {text}")
        broken += len(hits)
    print(f"{len(rules)} never rules (docs/ARCHITECTURE.md, What may touch what): "
          + (f"{broken} violations" if broken else "no violation"))
    return 1 if bad or broken else 0


if __name__ == "__main__":
    sys.exit(main())
