#!/usr/bin/env python3
"""The function-length ratchet (TigerBeetle's tidy.zig): product functions over 70 lines may
only become fewer and shorter.

A product function is a `fn` with a body in broker/src, state/src, raft-store/src or
kafka-compat/src, outside test code: files named `tests.rs` or `*_tests.rs`, folders named
`tests`, files declared by `#[cfg(test)] mod name;`, and items under `#[cfg(test)]`
(or `#[cfg(all(test, ...))]`), `#[test]` or `#[tokio::test]`. Its length counts from the line of
`fn` to the line of its closing brace. The scanner matches braces over tokens, so braces in
comments, strings (raw, byte and C strings too) and char literals do not count.

Each function over the limit is named `path::Type::function` (the chain of `mod`, `impl` and
`trait` around it, and the outer function for a nested one) and compared with the baseline,
scripts/fn-length-baseline.txt (`name lines` per line). Exit 1 when a function not in the
baseline is over the limit or a baselined one grew; a hint when one got shorter or is fixed.

Usage: scripts/fn-length.py [--list] [--update [--force]]
  --list    print every product function over the limit, longest first
  --update  write the baseline from the tree; once it exists, refused when that would let a
            function grow or a new one in, unless --force
"""
import argparse
import os
import re
import sys

LIMIT_LINES = 70
REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
PRODUCT_DIRS = ["broker/src", "state/src", "raft-store/src", "kafka-compat/src"]
BASELINE = os.path.join(REPO, "scripts", "fn-length-baseline.txt")

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# `#[cfg(test)]` and `#[cfg(all(test, ...))]` compile only for tests; `any(test, ...)` does not.
TEST_CFG = re.compile(r"cfg\(\s*(test|all\(\s*(?:[^()]*,\s*)?test\s*(?:,[^()]*)?\))\s*\)$")
TEST_ATTRS = {"test", "tokio::test"}


class Token:
    __slots__ = ("text", "line")

    def __init__(self, text, line):
        self.text = text
        self.line = line


def tokenize(src):
    """Identifiers (with `r#`), numbers and single punctuation characters, each with its line;
    comments, strings and char literals dropped (a string is kept as one `""` token)."""
    tokens = []
    i, n, line = 0, len(src), 1
    while i < n:
        c = src[i]
        if c == "\n":
            line += 1
            i += 1
        elif c.isspace():
            i += 1
        elif src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            depth, i = 1, i + 2  # block comments nest in Rust
            while i < n and depth:
                if src.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif src.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    line += src[i] == "\n"
                    i += 1
        elif c == '"':
            start = line
            i += 1
            while i < n and src[i] != '"':
                if src[i] == "\\":
                    line += src[i + 1] == "\n"
                    i += 2
                    continue
                line += src[i] == "\n"
                i += 1
            i += 1
            tokens.append(Token('""', start))
        elif c == "'":
            # A char literal ('x', '\n', '\u{..}', '{') or a lifetime/label ('a, 'static).
            if i + 1 < n and src[i + 1] == "\\":
                j = i + 3  # past the escaped character, which may be a quote
                while j < n and src[j] != "'":
                    j += 1
                i = j + 1
                tokens.append(Token("''", line))
            elif i + 2 < n and src[i + 2] == "'":
                i += 3
                tokens.append(Token("''", line))
            else:
                m = IDENT.match(src, i + 1)
                i = m.end() if m else i + 1
                tokens.append(Token("'lifetime", line))
        elif c.isalpha() or c == "_":
            m = IDENT.match(src, i)
            word = m.group(0)
            j = m.end()
            # Raw, byte, raw byte and C strings: r"..", r#".."#, b"..", br#".."#, c"..", cr"..".
            if word in ("r", "br", "cr") and j < n and src[j] in '#"':
                k = j
                while k < n and src[k] == "#":
                    k += 1
                if k < n and src[k] == '"':
                    end = src.find('"' + "#" * (k - j), k + 1)
                    end = n if end < 0 else end
                    tokens.append(Token('""', line))
                    line += src.count("\n", i, end)
                    i = end + 1 + (k - j)
                    continue
                if word == "r" and k == j + 1 and IDENT.match(src, k):  # r#ident
                    m = IDENT.match(src, k)
                    tokens.append(Token(m.group(0), line))
                    i = m.end()
                    continue
            if word in ("b", "c") and j < n and src[j] == '"':
                i = j  # the string itself is scanned next round
                continue
            if word == "b" and j < n and src[j] == "'":
                i = j  # b'x': the char literal is scanned next round
                continue
            tokens.append(Token(word, line))
            i = j
        elif c.isdigit():
            j = i + 1
            while j < n and (src[j].isalnum() or src[j] == "_"):
                j += 1
            tokens.append(Token("0", line))
            i = j
        else:
            tokens.append(Token(c, line))
            i += 1
    return tokens


def matching(tokens, i):
    """Index of the token closing the bracket at tokens[i]."""
    pairs = {"{": "}", "(": ")", "[": "]"}
    stack = [pairs[tokens[i].text]]
    j = i + 1
    while j < len(tokens):
        t = tokens[j].text
        if t in pairs:
            stack.append(pairs[t])
        elif t in (")", "]", "}"):
            stack.pop()
            if not stack:
                return j
        j += 1
    raise ValueError(f"unbalanced bracket opened on line {tokens[i].line}")


def item_end(tokens, i):
    """From tokens[i], the index of the `;` that ends an item or the `}` that closes its body,
    skipping (), []; an item or statement that ends at the enclosing block's `}` (a tail
    expression under an attribute) ends just before it."""
    j = i
    while j < len(tokens):
        t = tokens[j].text
        if t in ("(", "["):
            j = matching(tokens, j) + 1
        elif t == "{":
            return matching(tokens, j)
        elif t == ";":
            return j
        elif t == "}":
            return j - 1
        else:
            j += 1
    return len(tokens) - 1


def impl_type(tokens, i, body):
    """The self type's name of `impl ... {` whose tokens run from i to body (exclusive)."""
    words = [t.text for t in tokens[i + 1:body]]
    # Drop the impl's own generics: `impl<T: Foo<U>>`.
    if words and words[0] == "<":
        depth, k = 0, 0
        for k, w in enumerate(words):
            depth += (w == "<") - (w == ">")
            if depth == 0:
                break
        words = words[k + 1:]
    if "for" in words:
        words = words[words.index("for") + 1:]
    name = None
    for k, w in enumerate(words):
        if w in ("<", "where", "{"):
            break
        if IDENT.fullmatch(w) and w not in ("dyn", "mut", "const", "unsafe", "impl"):
            name = w
        elif w not in (":", "&", "'lifetime", "!"):
            break
    return name or "impl"


def attribute_is_test(tokens, i, end):
    """`#[...]` from tokens[i] (`#`) to end (`]`): a test-only attribute?"""
    text = "".join(t.text for t in tokens[i + 2:end])
    return bool(TEST_CFG.match(text)) or text in {a.replace(" ", "") for a in TEST_ATTRS}


def functions(tokens):
    """(qualified name, first line, last line) of every fn with a body outside test code, and
    the names of `#[cfg(test)] mod name;` files."""
    found, test_files = [], []
    scopes = []  # (name or None, index of the closing brace)
    test_item = False
    i = 0
    while i < len(tokens):
        while scopes and scopes[-1][1] < i:
            scopes.pop()
        t = tokens[i].text
        nxt = tokens[i + 1].text if i + 1 < len(tokens) else ""
        if t == "#" and nxt in ("[", "!"):
            open_ = i + 1 if nxt == "[" else i + 2
            if open_ < len(tokens) and tokens[open_].text == "[":
                close = matching(tokens, open_)
                if nxt == "[" and attribute_is_test(tokens, i, close):
                    test_item = True
                i = close + 1
                continue
        if test_item:
            test_item = False
            end = item_end(tokens, i)
            if t == "mod" and IDENT.fullmatch(nxt) and tokens[end].text == ";":
                test_files.append(nxt)
            i = end + 1
            continue
        prefix = [s[0] for s in scopes if s[0]]
        if t in ("mod", "trait") and IDENT.fullmatch(nxt):
            end = item_end(tokens, i)
            if tokens[end].text == "}":
                body = next(k for k in range(i, end + 1) if tokens[k].text == "{")
                scopes.append((nxt, end))
                i = body + 1
                continue
            i = end + 1
            continue
        if t == "impl" and nxt != "(":
            end = item_end(tokens, i)
            if tokens[end].text == "}":
                body = next(k for k in range(i, end + 1) if tokens[k].text == "{")
                scopes.append((impl_type(tokens, i, body), end))
                i = body + 1
                continue
        if t == "fn" and IDENT.fullmatch(nxt):
            end = item_end(tokens, i)
            if tokens[end].text == "}":
                body = next(k for k in range(i, end + 1) if tokens[k].text == "{")
                found.append(("::".join(prefix + [nxt]), tokens[i].line, tokens[end].line))
                scopes.append((nxt, end))
                i = body + 1
                continue
            i = end + 1
            continue
        i += 1
    return found, test_files


def is_test_path(rel):
    name = os.path.basename(rel)
    return name == "tests.rs" or name.endswith("_tests.rs") or "tests" in rel.split("/")[:-1]


def product_functions():
    """{name: lines} for every product function; a name is `path::Type::fn`."""
    out = {}
    for top in PRODUCT_DIRS:
        files = {}
        for dirpath, dirs, names in os.walk(os.path.join(REPO, top)):
            dirs.sort()
            for name in sorted(names):
                if name.endswith(".rs"):
                    path = os.path.join(dirpath, name)
                    rel = os.path.relpath(path, REPO).replace(os.sep, "/")
                    if not is_test_path(rel):
                        files[rel] = path
        excluded = set()
        parsed = {}
        for rel, path in files.items():
            with open(path, encoding="utf-8") as f:
                tokens = tokenize(f.read())
            try:
                parsed[rel], test_mods = functions(tokens)
            except ValueError as e:
                sys.exit(f"{rel}: {e}")
            # `#[cfg(test)] mod name;` in a/mod.rs, a/lib.rs or a.rs names a/name.rs.
            base = os.path.dirname(rel)
            if os.path.basename(rel) not in ("mod.rs", "lib.rs", "main.rs"):
                base = rel[:-3]
            for m in test_mods:
                excluded.update({f"{base}/{m}.rs", f"{base}/{m}/mod.rs"})
        for rel, fns in parsed.items():
            if rel in excluded or any(rel.startswith(e[:-len("mod.rs")]) for e in excluded
                                      if e.endswith("/mod.rs")):
                continue
            for name, first, last in fns:
                key = f"{rel}::{name}"
                k, n = key, 2
                while k in out:  # the same name twice in one file (cfg'd alternatives)
                    k, n = f"{key}#{n}", n + 1
                out[k] = last - first + 1
    return out


def read_baseline():
    baseline = {}
    if not os.path.exists(BASELINE):
        return baseline
    with open(BASELINE, encoding="utf-8") as f:
        for number, raw in enumerate(f, 1):
            line = raw.split("#", 1)[0].strip() if raw.lstrip().startswith("#") else raw.strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 2 or not parts[1].isdigit():
                sys.exit(f"{BASELINE}:{number}: expected `path::function lines`, got {raw!r}")
            baseline[parts[0]] = int(parts[1])
    return baseline


def write_baseline(over):
    with open(BASELINE, "w", encoding="utf-8") as f:
        f.write(f"# Product functions over {LIMIT_LINES} lines (scripts/fn-length.py): this list may"
                " only shrink.\n# Regenerate with `scripts/fn-length.py --update` after shortening"
                " one.\n")
        for name in sorted(over):
            f.write(f"{name} {over[name]}\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="print every function over the limit")
    parser.add_argument("--update", action="store_true", help="rewrite the baseline (shrink only)")
    parser.add_argument("--force", action="store_true", help="with --update: allow it to grow")
    args = parser.parse_args()

    over = {k: v for k, v in product_functions().items() if v > LIMIT_LINES}
    baseline = read_baseline()
    new = sorted(k for k in over if k not in baseline)
    grew = sorted(k for k in over if k in baseline and over[k] > baseline[k])
    shorter = sorted(k for k in over if k in baseline and over[k] < baseline[k])
    fixed = sorted(k for k in baseline if k not in over)

    if args.list:
        for name in sorted(over, key=lambda k: (-over[k], k)):
            print(f"{over[name]:5}  {name}")
    if args.update:
        if (new or grew) and not args.force and os.path.exists(BASELINE):
            for k in new:
                print(f"new over {LIMIT_LINES} lines: {k} ({over[k]} lines)")
            for k in grew:
                print(f"grew: {k} ({baseline[k]} -> {over[k]} lines)")
            print("refusing to let the baseline grow; shorten these, or --update --force")
            return 1
        write_baseline(over)
        print(f"{len(over)} product functions over {LIMIT_LINES} lines (baseline {len(baseline)}"
              f" -> {len(over)}); wrote {os.path.relpath(BASELINE, REPO)}")
        return 0

    for k in new:
        print(f"new function over {LIMIT_LINES} lines: {k} ({over[k]} lines);"
              f" split it (docs: STYLE.md, Size)")
    for k in grew:
        print(f"function grew: {k} ({baseline[k]} -> {over[k]} lines); the baseline only shrinks")
    for k in shorter:
        print(f"shorter: {k} ({baseline[k]} -> {over[k]} lines)")
    for k in fixed:
        print(f"no longer over {LIMIT_LINES} lines (or gone): {k}")
    if shorter or fixed:
        print("hint: lower the baseline with `scripts/fn-length.py --update` and commit it")
    print(f"{len(over)} product functions over {LIMIT_LINES} lines (baseline {len(baseline)})")
    return 1 if new or grew else 0


if __name__ == "__main__":
    sys.exit(main())
