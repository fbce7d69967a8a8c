#!/usr/bin/env python3
"""The import structure of a Rust crate's files: circles and upward imports.

    python3 tools/modgraph.py [SRC] [--layers 'a,b;c;d'] [--show]

SRC is a crate's source folder (default crates/lagd-proto/src). Every non-test file is read;
each path it names (`use` trees expanded, and `crate::`/`super::` paths in code) is resolved to
the file that *defines* the item, following `pub use` re-exports to their source. An edge from
file A to file B means A names something B defines; `mod` declarations and re-exports are not
edges. The check fails on:

- a circle: files that import each other, directly or around a loop;
- an upward import: a file naming an item defined in the file of one of its ancestor modules
  (a child taking back from the `mod.rs` that declares it); a `mod.rs` may gather and
  re-export its children's items, which costs nothing here;
- with --layers, a top-level module importing one of a higher layer (layers separated by ';',
  lowest first, modules of one layer by ',').

Test code is left out: files named test.rs or tests.rs, files under a test/ or tests/ folder,
and `#[cfg(test)]` modules. Comments and string literals are ignored. Prints
what it finds and exits 1 on any problem.
"""

import re
import sys
from pathlib import Path

ITEM = re.compile(
    r"^\s*(?:pub(?:\([a-z]+\))?\s+)?(?:const\s+fn|unsafe\s+fn|async\s+fn|fn|struct|enum|trait|"
    r"type|const|static|union|macro_rules!)\s+([A-Za-z_][A-Za-z0-9_]*)",
    re.M,
)
REEXPORT = re.compile(r"^\s*pub(?:\([a-z]+\))?\s+use\s+([^;]+);", re.M)
USE = re.compile(r"\buse\s+([^;]+);")
INLINE_PATH = re.compile(r"\b((?:crate|super|self)(?:::(?:super|[A-Za-z_][A-Za-z0-9_]*))+)")
INLINE_MOD = re.compile(r"^\s*(?:pub(?:\([a-z]+\))?\s+)?mod\s+([a-z_][a-z0-9_]*)\s*\{", re.M)


def module_of(root, f):
    parts = list(f.relative_to(root).with_suffix("").parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


def is_test(root, f):
    rel = f.relative_to(root)
    return rel.name in ("test.rs", "tests.rs") or any(p in ("test", "tests") for p in rel.parts[:-1])


def code_of(f):
    text = re.sub(r"//[^\n]*", "", f.read_text())
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    # Test modules: `#[cfg(test)] mod x;` and `#[cfg(test)] mod x { ... }`.
    text = re.sub(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*;", "", text)
    while True:
        m = re.search(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", text)
        if not m:
            return text
        depth, j = 0, m.end() - 1
        while j < len(text):
            depth += text[j] == "{"
            depth -= text[j] == "}"
            j += 1
            if depth == 0:
                break
        text = text[: m.start()] + text[j:]


def expand(tree):
    """A `use` tree as the list of paths it names."""
    tree = " ".join(tree.split())
    i = tree.find("{")
    if i < 0:
        return [re.sub(r"\s+as\s+\w+$", "", tree).strip()]
    prefix = tree[:i].rstrip(":").strip()
    inner = tree[i + 1 : tree.rfind("}")]
    items, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    items.append(cur)
    out = []
    for it in items:
        if it.strip():
            for sub in expand(it):
                out.append(prefix if sub == "self" else f"{prefix}::{sub}")
    return out


def blocks(code):
    """(module suffix, text) for the file's top level and each inline `mod x { ... }`."""
    out, top, last = [], [], 0
    for m in INLINE_MOD.finditer(code):
        if m.start() < last:
            continue
        depth, j = 0, m.end() - 1
        while j < len(code):
            depth += code[j] == "{"
            depth -= code[j] == "}"
            j += 1
            if depth == 0:
                break
        top.append(code[last : m.start()])
        out.append(((m.group(1),), code[m.end() : j - 1]))
        last = j
    top.append(code[last:])
    return [((), "".join(top))] + out


class Crate:
    def __init__(self, root):
        self.root = root
        self.files = {}
        for f in sorted(root.rglob("*.rs")):
            if not is_test(root, f):
                self.files[module_of(root, f)] = f
        self.code = {m: code_of(f) for m, f in self.files.items()}
        self.defs = {m: set(ITEM.findall(c)) for m, c in self.code.items()}
        self.reexports = {}
        for m, c in self.code.items():
            table = {}
            for r in REEXPORT.finditer(c):
                for path in expand(r.group(1)):
                    alias = re.search(r"\s+as\s+(\w+)$", path)
                    name = alias.group(1) if alias else path.split("::")[-1]
                    table[name] = path
            self.reexports[m] = table

    def base(self, path, here):
        parts = path.split("::")
        if parts[0] == "crate":
            return (), parts[1:]
        if parts[0] in ("super", "self"):
            mod = here[:-1] if parts[0] == "super" else here
            rest = parts[1:]
            while rest and rest[0] == "super":
                mod, rest = mod[:-1], rest[1:]
            return mod, rest
        return None, None

    def define_site(self, path, here, depth=0):
        """The file module defining what `path` (seen from module `here`) names."""
        mod, rest = self.base(path, here)
        if mod is None or depth > 8:
            return None
        while rest and mod + (rest[0],) in self.files:
            mod, rest = mod + (rest[0],), rest[1:]
        # An inline module of the file: its items belong to the file.
        while rest and rest[0] in [s[0] for s, _ in blocks(self.code.get(mod, "")) if s]:
            rest = rest[1:]
        if not rest or mod not in self.files:
            return mod if mod in self.files else None
        name = rest[0]
        if name in self.defs.get(mod, ()):
            return mod
        if name in self.reexports.get(mod, {}):
            return self.define_site(self.reexports[mod][name], mod, depth + 1)
        return mod

    def edges(self):
        out = {}
        for mod, code in self.code.items():
            deps = {}
            for suffix, text in blocks(code):
                # `super` in a/b.rs and in a/b/mod.rs (module a::b) is a; in an inline module
                # x of that file it is a::b.
                here = mod + suffix
                paths = []
                for u in USE.finditer(text):
                    if re.match(r"\s*pub(?:\([a-z]+\))?\s+use\b", text[max(0, u.start() - 12) : u.start() + 4]):
                        continue
                    paths.extend(expand(u.group(1)))
                body = USE.sub("", text)
                paths.extend(INLINE_PATH.findall(body))
                # Paths relative to this module: `child::item` for a child module.
                for child, item in re.findall(r"(?<![:\w])([a-z_][a-z0-9_]*)::([A-Za-z_]\w*)", body):
                    if here + (child,) in self.files:
                        paths.append(f"self::{child}::{item}")
                for p in paths:
                    site = self.define_site(p, here)
                    if site is not None and site != mod:
                        deps.setdefault(site, p)
            out[mod] = deps
        return out


def name(m):
    return "::".join(m) or "crate"


def main(argv):
    root = Path("crates/lagd-proto/src")
    layers, show = None, False
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "--layers":
            layers = [set(x.split(",")) for x in args.pop(0).split(";")]
        elif a == "--show":
            show = True
        else:
            root = Path(a)
    crate = Crate(root)
    edges = crate.edges()
    problems = []
    for mod, deps in edges.items():
        for d, path in deps.items():
            if len(d) < len(mod) and mod[: len(d)] == d:
                problems.append(f"upward import: {name(mod)} takes `{path}` from {name(d)}")
    index, low, stack, on, comps = {}, {}, [], set(), []

    def strong(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(comp)

    sys.setrecursionlimit(10000)
    for v in list(edges):
        if v not in index:
            strong(v)
    for comp in comps:
        inside = sorted(comp)
        ties = [
            f"{name(a)} -> {name(b)} (`{edges[a][b]}`)"
            for a in inside
            for b in inside
            if b in edges[a]
        ]
        problems.append("circle: " + "; ".join(ties))
    if layers:
        rank = {m: i for i, layer in enumerate(layers) for m in layer}
        for mod, deps in edges.items():
            for d in deps:
                if mod and d and mod[0] in rank and d[0] in rank and rank[d[0]] > rank[mod[0]]:
                    problems.append(f"layer: {name(mod)} imports {name(d)}, a higher layer")
        unranked = sorted({m[0] for m in crate.files if m and m[0] not in rank})
        if unranked:
            problems.append("modules in no layer: " + ", ".join(unranked))
    if show:
        for mod in sorted(edges):
            print(f"{name(mod)} -> {', '.join(sorted(name(d) for d in edges[mod]))}")
    n = sum(len(d) for d in edges.values())
    print(f"{root}: {len(crate.files)} files, {n} imports between them, {len(problems)} problems")
    for p in sorted(set(problems)):
        print("  " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
