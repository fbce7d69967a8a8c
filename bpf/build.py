#!/usr/bin/env python3
"""Builds bpf/fastpath.c into crates/lagd-sys/src/fastpath/programs.rs, and bpf/lagd_shared.h
into crates/lagd-sys/src/fastpath/abi.rs.

    python3 bpf/build.py            # rebuild the Rust files
    python3 bpf/build.py --check    # rebuild into memory; exit 1 if a checked-in file differs

The programs are compiled with the clang pinned below (Debian's clang-19), without BTF, and
read back from the ELF object: each program section's instructions, as the little-endian
64-bit words the kernel takes, and its relocations (which ld_imm64 instruction names which
map). lagd-sys creates the maps itself and patches their descriptors into those instructions,
so users need no compiler, no libbpf and no ELF reader at run time. CI runs --check: the
checked-in instructions are exactly what this source and this compiler produce.

What the programs and lagd share (lagd_shared.h: the structures in the maps, states, constants)
is compiled on its own with BTF, and its types read back from the compiler's BTF: each
structure becomes a #[repr(C)] Rust struct with the compiler's size and field offsets asserted
at compile time and a byte encoding at those offsets, each enumerator a u32 constant. --check
covers this file too: the Rust types are exactly the header's.
"""

import os
import re
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "bpf" / "fastpath.c"
SHARED = ROOT / "bpf" / "lagd_shared.h"
OUTPUT = ROOT / "crates" / "lagd-sys" / "src" / "fastpath" / "programs.rs"
ABI_OUTPUT = ROOT / "crates" / "lagd-sys" / "src" / "fastpath" / "abi.rs"
CLANG = "clang-19"
# The Debian package version the checked-in file was built with.
CLANG_VERSION = "19.1.7"
FLAGS = ["-O2", "-g0", "-target", "bpf", "-mcpu=v3", "-Wall", "-Wextra", "-Werror"]
PROGRAMS = {
    "tcx/egress": "TAP_EGRESS",
    "tcx/ingress": "MEMBER_INGRESS",
    "tcx/ingress_no_cas": "MEMBER_INGRESS_NO_CAS",
}
R_BPF_64_64 = 1


def multiarch_include():
    try:
        arch = subprocess.run(
            ["gcc", "-print-multiarch"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        arch = "x86_64-linux-gnu"
    return f"/usr/include/{arch}"


def check_clang():
    version = subprocess.run([CLANG, "--version"], capture_output=True, text=True, check=True)
    if f"version {CLANG_VERSION}" not in version.stdout:
        sys.exit(f"build.py: {CLANG} {CLANG_VERSION} needed, found: {version.stdout.splitlines()[0]}")


def compile_object(out):
    cmd = [CLANG, *FLAGS, "-I", multiarch_include(), "-c", str(SOURCE), "-o", out]
    subprocess.run(cmd, check=True)


def sections(data):
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    heads = []
    for i in range(shnum):
        name, typ, _flags, _addr, off, size, link, info, _align, entsize = struct.unpack_from(
            "<IIQQQQIIQQ", data, shoff + i * shentsize
        )
        heads.append(dict(name=name, type=typ, off=off, size=size, link=link, info=info, entsize=entsize))
    strtab = heads[shstrndx]

    def cstr(tab, at):
        start = tab["off"] + at
        return data[start : data.index(b"\0", start)].decode()

    for h in heads:
        h["name"] = cstr(strtab, h["name"])
    return heads, cstr


def read_object(path):
    data = Path(path).read_bytes()
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, "a 64-bit little-endian ELF"
    heads, cstr = sections(data)
    symtab = next(h for h in heads if h["type"] == 2)
    strtab = heads[symtab["link"]]
    symbols = []
    for k in range(symtab["size"] // 24):
        name, _info, _other, shndx, value, size = struct.unpack_from(
            "<IBBHQQ", data, symtab["off"] + k * 24
        )
        symbols.append(dict(name=cstr(strtab, name), shndx=shndx, value=value, size=size))
    maps_index = next(i for i, h in enumerate(heads) if h["name"] == "maps")
    maps_sec = heads[maps_index]
    maps = {}
    for s in symbols:
        if s["shndx"] == maps_index and s["name"]:
            fields = struct.unpack_from("<IIIII", data, maps_sec["off"] + s["value"])
            maps[s["name"]] = fields
    programs = {}
    for i, h in enumerate(heads):
        if h["name"] not in PROGRAMS:
            continue
        raw = data[h["off"] : h["off"] + h["size"]]
        insns = [struct.unpack_from("<Q", raw, j)[0] for j in range(0, len(raw), 8)]
        entry = next(s["name"] for s in symbols if s["shndx"] == i and s["name"] and s["value"] == 0 and s["size"])
        relocs = []
        for r in heads:
            if r["type"] == 9 and r["info"] == i:
                for k in range(r["size"] // 16):
                    off, info = struct.unpack_from("<QQ", data, r["off"] + k * 16)
                    sym, typ = info >> 32, info & 0xFFFFFFFF
                    if typ != R_BPF_64_64:
                        sys.exit(f"build.py: relocation type {typ} in {h['name']} is not a map reference")
                    relocs.append((off // 8, symbols[sym]["name"]))
        programs[h["name"]] = dict(entry=entry, insns=insns, relocs=relocs)
    return maps, programs


def successors(insns, t):
    """The instructions control can go to after instruction t (the verifier's CFG edges)."""
    w = insns[t]
    code = w & 0xFF
    cls = code & 0x07
    if code == 0x18:  # ld_imm64 takes two slots
        return [t + 2]
    if cls not in (0x05, 0x06):  # not BPF_JMP / BPF_JMP32
        return [t + 1]
    op = code & 0xF0
    off = (w >> 16) & 0xFFFF
    off -= 0x10000 if off & 0x8000 else 0
    if op == 0x90:  # exit
        return []
    if op == 0x80:  # call: a helper, or a bpf-to-bpf call into this section
        src = (w >> 12) & 0x0F
        imm = (w >> 32) & 0xFFFFFFFF
        imm -= 1 << 32 if imm & 0x80000000 else 0
        return [t + 1, t + 1 + imm] if src == 1 else [t + 1]
    if op == 0x00:  # ja
        return [t + 1 + off]
    return [t + 1, t + 1 + off]


def cycles(insns):
    """The edges (from, to) that close a loop: a depth-first walk from instruction 0 meets an
    instruction still on its path, as the kernel's check_cfg() walks the program."""
    state = [0] * len(insns)  # 0 unseen, 1 on the path, 2 done
    found = []
    stack = [(0, iter(successors(insns, 0)))]
    state[0] = 1
    while stack:
        t, nexts = stack[-1]
        for w in nexts:
            if not 0 <= w < len(insns):
                sys.exit(f"build.py: a jump from instruction {t} leaves the program ({w})")
            if state[w] == 1:
                found.append((t, w))
            elif state[w] == 0:
                state[w] = 1
                stack.append((w, iter(successors(insns, w))))
                break
        else:
            state[t] = 2
            stack.pop()
    return found


def check_cycles():
    """cycles() on two hand-made programs, before it judges the real ones: a loop closed by a
    fall-through (what 5.10 and 6.1 refuse) is found, a backward jump outside any loop is not."""

    def insn(code, dst=0, src=0, off=0, imm=0):
        return code | dst << 8 | src << 12 | (off & 0xFFFF) << 16 | (imm & 0xFFFFFFFF) << 32

    mov_r0_0, add_r0_1, exit_ = insn(0xB7), insn(0x07, imm=1), insn(0x95)
    loop = [mov_r0_0, insn(0x05, off=1), add_r0_1, insn(0xA5, off=-2, imm=10), exit_]
    assert cycles(loop) == [(2, 3)], cycles(loop)
    straight = [insn(0x05, off=1), exit_, insn(0x05, off=-2)]
    assert cycles(straight) == [], cycles(straight)


# --- The shared header: its types as the compiler laid them out (BTF), into Rust. ---

BTF_INT, BTF_PTR, BTF_ARRAY, BTF_STRUCT, BTF_UNION, BTF_ENUM = 1, 2, 3, 4, 5, 6
BTF_TYPEDEF, BTF_VOLATILE, BTF_CONST, BTF_RESTRICT = 8, 9, 10, 11
BTF_KIND_NAMES = {1: "int", 2: "pointer", 3: "array", 4: "struct", 5: "union", 6: "enum",
                  7: "forward declaration", 13: "function type", 16: "float", 19: "enum64"}


def header_names(text):
    """The structures and enums lagd_shared.h defines, in order (only their names are read from
    the text; their contents come from the compiler)."""
    code = re.sub(r"//[^\n]*", "", text)
    for macro in re.findall(r"^\s*#\s*define\s+(\w+)", code, re.M):
        if macro != "LAGD_SHARED_H":
            sys.exit(f"build.py: {SHARED.name} defines the macro {macro}: make it an enumerator "
                     "(the compiler's BTF, which the Rust types come from, holds no macros)")
    names = []
    for kind, name in re.findall(r"\b(struct|enum)\s*(\w*)\s*\{", code):
        if not name:
            sys.exit(f"build.py: {SHARED.name}: an anonymous {kind}: name it (its items are generated by name)")
        names.append((kind, name))
    return names


def header_docs(text):
    """Documentation from lagd_shared.h's comments: (kind, name) -> the comment lines right above
    a structure or enum; (scope, item) -> the comment on a field's or enumerator's line."""
    docs = {}
    above = []
    scope = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("//"):
            above.append(stripped[2:].strip())
            continue
        m = re.match(r"(struct|enum)\s+(\w+)\s*\{", stripped)
        if m:
            scope = m.group(2)
            docs[(m.group(1), scope)] = " ".join(a for a in above if a)
        elif scope and stripped.startswith("}"):
            scope = None
        elif scope and "//" in stripped:
            decl, comment = stripped.split("//", 1)
            m = re.match(r"(?:[\w\s]*?\s)?(\w+)\s*(?:\[[^;]*\])?\s*(?:=[^,]*)?[;,]\s*$", decl.strip())
            if m:
                docs[(scope, m.group(1))] = comment.strip()
        above = []
    return docs


def read_btf(path):
    data = Path(path).read_bytes()
    heads, _cstr = sections(data)
    btf = next((h for h in heads if h["name"] == ".BTF"), None)
    if btf is None:
        sys.exit(f"build.py: no .BTF section in the compiled {SHARED.name}")
    raw = data[btf["off"] : btf["off"] + btf["size"]]
    magic, _version, _flags, hdr_len, type_off, type_len, str_off, str_len = struct.unpack_from(
        "<HBBIIIII", raw, 0
    )
    assert magic == 0xEB9F, "BTF magic"
    strings = raw[hdr_len + str_off : hdr_len + str_off + str_len]

    def name(off):
        return strings[off : strings.index(b"\0", off)].decode()

    types = [None]  # type ids start at 1
    at, end = hdr_len + type_off, hdr_len + type_off + type_len
    while at < end:
        name_off, info, size_type = struct.unpack_from("<III", raw, at)
        at += 12
        kind, vlen, kflag = (info >> 24) & 0x1F, info & 0xFFFF, info >> 31
        t = dict(kind=kind, name=name(name_off), size=size_type, type=size_type, kflag=kflag)
        if kind == BTF_INT:
            (enc,) = struct.unpack_from("<I", raw, at)
            t.update(signed=bool((enc >> 24) & 1), bits=enc & 0xFF, bit_off=(enc >> 16) & 0xFF)
            at += 4
        elif kind == BTF_ARRAY:
            t["elem"], _index, t["n"] = struct.unpack_from("<III", raw, at)
            at += 12
        elif kind in (BTF_STRUCT, BTF_UNION):
            members = []
            for _ in range(vlen):
                m_name, m_type, m_off = struct.unpack_from("<III", raw, at)
                members.append(dict(name=name(m_name), type=m_type, off=m_off))
                at += 12
            t["members"] = members
        elif kind == BTF_ENUM:
            values = []
            for _ in range(vlen):
                v_name, v_val = struct.unpack_from("<Ii", raw, at)
                # kflag: the enum's values are signed.
                values.append((name(v_name), v_val if kflag else v_val & 0xFFFFFFFF))
                at += 8
            t["values"] = values
        elif kind == 13:  # FUNC_PROTO
            at += 8 * vlen
        elif kind == 14:  # VAR
            at += 4
        elif kind == 15:  # DATASEC
            at += 12 * vlen
        elif kind == 17:  # DECL_TAG
            at += 4
        elif kind == 19:  # ENUM64: values beyond 32 bits, which the header does not take
            at += 12 * vlen
        types.append(t)
    return types


def compile_shared(tmp, names):
    """lagd_shared.h compiled with BTF: one global of each structure and enum, so that the
    compiler records every one of them."""
    probe = os.path.join(tmp, "shared.c")
    lines = [f'#include "{SHARED}"']
    lines += [f"{kind} {name} lagd_abi_{kind}_{name};" for kind, name in names]
    Path(probe).write_text("\n".join(lines) + "\n")
    out = os.path.join(tmp, "shared.o")
    cmd = [CLANG, "-O2", "-g", "-target", "bpf", "-Wall", "-Wextra", "-Werror",
           "-I", multiarch_include(), "-c", probe, "-o", out]
    subprocess.run(cmd, check=True)
    return read_btf(out)


def strip(types, tid):
    while types[tid]["kind"] in (BTF_TYPEDEF, BTF_VOLATILE, BTF_CONST, BTF_RESTRICT):
        tid = types[tid]["type"]
    return types[tid]


def camel(name):
    return "".join(part.capitalize() for part in name.split("_"))


def rust_type(types, t, where):
    """The Rust type of a field of BTF type t: an integer or an array of them."""
    if t["kind"] == BTF_INT:
        if t["bit_off"] or t["bits"] != 8 * t["size"] or t["size"] not in (1, 2, 4, 8):
            sys.exit(f"build.py: {where}: an integer of {t['bits']} bits is not generated")
        return f"{'i' if t['signed'] else 'u'}{8 * t['size']}"
    if t["kind"] == BTF_ARRAY:
        return f"[{rust_type(types, strip(types, t['elem']), where)}; {t['n']}]"
    kind = BTF_KIND_NAMES.get(t["kind"], f"BTF kind {t['kind']}")
    sys.exit(f"build.py: {where} is a {kind}: the header's structures hold integers and arrays of them only")


def size_of(types, t):
    if t["kind"] == BTF_INT:
        return t["size"]
    return t["n"] * size_of(types, strip(types, t["elem"]))


def encode_field(types, t, expr, off, depth, out, indent):
    """Lines writing `expr` (of BTF type t; a reference inside a loop) into `b` at byte offset
    `off` (a number, or the name of a Rust variable)."""
    pad = "    " * indent

    def span(n):
        return f"{off}..{off + n}" if isinstance(off, int) else f"{off}..{off} + {n}"

    if t["kind"] == BTF_INT:
        n = t["size"]
        if n == 1:
            value = f"*{expr}" if depth else expr
            out.append(f"{pad}b[{off}] = {value} as u8;" if t["signed"] else f"{pad}b[{off}] = {value};")
        else:
            out.append(f"{pad}b[{span(n)}].copy_from_slice(&{expr}.to_ne_bytes());")
        return
    elem = strip(types, t["elem"])
    if elem["kind"] == BTF_INT and elem["size"] == 1 and not elem["signed"]:
        out.append(f"{pad}b[{span(t['n'])}].copy_from_slice({expr if depth else '&' + expr});")
        return
    i, v, at = f"i{depth}", f"v{depth}", f"at{depth}"
    stride = size_of(types, elem)
    out.append(f"{pad}for ({i}, {v}) in {expr}.iter().enumerate() {{")
    out.append(f"{pad}    let {at} = {off} + {stride} * {i};")
    encode_field(types, elem, v, at, depth + 1, out, indent + 1)
    out.append(f"{pad}}}")


def decode_field(types, t, off, depth):
    """An expression reading a value of BTF type t from `b` at byte offset `off`."""
    if t["kind"] == BTF_INT:
        ty = rust_type(types, t, "")
        if t["size"] == 1:
            return f"b[{off}]" if ty == "u8" else f"b[{off}] as i8"
        return f"{ty}::from_ne_bytes(take(b, {off}))"
    elem = strip(types, t["elem"])
    if elem["kind"] == BTF_INT and elem["size"] == 1 and not elem["signed"]:
        return f"take(b, {off})"
    i = f"i{depth}"
    stride = size_of(types, elem)
    inner = decode_field(types, elem, f"{off} + {stride} * {i}", depth + 1)
    return f"core::array::from_fn(|{i}| {inner})"


def zero_of(types, t):
    if t["kind"] == BTF_INT:
        return "0"
    return f"[{zero_of(types, strip(types, t['elem']))}; {t['n']}]"


def doc(text):
    """A comment from the header as Rust documentation (brackets are not links)."""
    return text.replace("[", "\\[").replace("]", "\\]")


def render_abi(types, text):
    names = header_names(text)
    docs = header_docs(text)
    by_name = {}
    for t in types[1:]:
        if t["kind"] in (BTF_STRUCT, BTF_ENUM, 19) and t["name"]:
            kind = "struct" if t["kind"] == BTF_STRUCT else "enum"
            by_name[(kind, t["name"])] = t
    out = [
        f"// @generated by bpf/build.py from bpf/{SHARED.name} with clang {CLANG_VERSION}: do not edit.",
        "// Rebuild with `python3 bpf/build.py`; CI checks it with `--check`.",
        "",
        f"//! What the kernel programs and lagd share, as `bpf/{SHARED.name}` defines it: each",
        "//! structure as a `#[repr(C)]` struct whose size and field offsets are the compiler's",
        "//! (asserted below), with its bytes at those offsets in this machine's byte order, and each",
        "//! enumerator as a constant.",
    ]
    uses_take = False
    for kind, name in names:
        t = by_name.get((kind, name))
        if t is None:
            sys.exit(f"build.py: the compiler recorded no {kind} {name}")
        if t["kind"] == 19:
            sys.exit(f"build.py: enum {name} has a value beyond 32 bits: the header's constants are u32")
        about = doc(docs.get((kind, name)) or f"`{kind} {name}`.")
        if kind == "enum":
            out.append("")
            out.append(f"// enum {name}: {about}")
            for item, value in t["values"]:
                if value < 0:
                    sys.exit(f"build.py: {item} = {value}: the header's constants are u32")
                out.append(f"/// {doc(docs.get((name, item)) or f'`{item}` (enum {name}).')}")
                out.append(f"pub const {item}: u32 = {value};")
            continue
        rust = camel(name)
        out.append("")
        out.append(f"/// `struct {name}`: {about}")
        out.append("#[repr(C)]")
        out.append("#[derive(Debug, Clone, Copy, PartialEq, Eq)]")
        out.append(f"pub struct {rust} {{")
        fields = []
        for m in t["members"]:
            if t["kflag"] or not m["name"]:
                sys.exit(f"build.py: struct {name}: bit fields and anonymous members are not generated")
            if m["off"] % 8:
                sys.exit(f"build.py: struct {name}.{m['name']} does not start on a byte")
            ft = strip(types, m["type"])
            ty = rust_type(types, ft, f"struct {name}.{m['name']}")
            fields.append((m["name"], ft, m["off"] // 8))
            out.append(f"    /// {doc(docs.get((name, m['name'])) or '`' + m['name'] + '`.')}")
            out.append(f"    pub {m['name']}: {ty},")
        out.append("}")
        size = t["size"]
        out.append("")
        out.append(f"const _: () = assert!(size_of::<{rust}>() == {size});")
        for fname, _ft, off in fields:
            out.append(f"const _: () = assert!(core::mem::offset_of!({rust}, {fname}) == {off});")
        out.append("")
        out.append(f"impl {rust} {{")
        out.append(f"    /// `sizeof(struct {name})`.")
        out.append(f"    pub const SIZE: usize = {size};")
        out.append("")
        out.append("    /// Every field 0.")
        out.append("    pub const ZERO: Self = Self {")
        for fname, ft, _off in fields:
            out.append(f"        {fname}: {zero_of(types, ft)},")
        out.append("    };")
        out.append("")
        out.append(f"    /// The bytes of `struct {name}`, in this machine's byte order (padding 0).")
        out.append(f"    pub fn to_ne_bytes(&self) -> [u8; {size}] {{")
        out.append(f"        let mut b = [0u8; {size}];")
        for fname, ft, off in fields:
            encode_field(types, ft, f"self.{fname}", off, 0, out, 2)
        out.append("        b")
        out.append("    }")
        out.append("")
        out.append(f"    /// The `struct {name}` in `b`, in this machine's byte order.")
        out.append(f"    pub fn from_ne_bytes(b: &[u8; {size}]) -> Self {{")
        out.append("        Self {")
        for fname, ft, off in fields:
            expr = decode_field(types, ft, str(off), 0)
            uses_take |= "take(" in expr
            out.append(f"            {fname}: {expr},")
        out.append("        }")
        out.append("    }")
        out.append("}")
    if uses_take:
        out += [
            "",
            "/// `N` bytes of `b` from `at`.",
            "fn take<const N: usize>(b: &[u8], at: usize) -> [u8; N] {",
            "    let mut a = [0u8; N];",
            "    a.copy_from_slice(&b[at..at + N]);",
            "    a",
            "}",
        ]
    return "\n".join(out) + "\n"


MAP_NAMES = {
    "lagd_tables": "Tables",
    "lagd_ports": "Ports",
    "lagd_buckets": "Buckets",
    "lagd_stripe_tx": "StripeTx",
    "lagd_stripe_rx": "StripeRx",
    "lagd_alive": "Alive",
    "lagd_dedup": "Dedup",
}


def render(maps, programs):
    out = [
        "// @generated by bpf/build.py from bpf/fastpath.c with clang " + CLANG_VERSION + ": do not edit.",
        "// Rebuild with `python3 bpf/build.py`; CI checks it with `--check`.",
        "",
        "use super::program::{MapDef, MapId, Program};",
        "",
    ]
    for name, (typ, key, value, max_entries, flags) in sorted(maps.items()):
        const = name.upper().removeprefix("LAGD_")
        out.append(f"/// `{name}` as the source defines it.")
        out.append(
            f"pub(super) const {const}_DEF: MapDef = MapDef {{ map_type: {typ}, key_size: {key}, "
            f"value_size: {value}, max_entries: {max_entries}, map_flags: {flags} }};"
        )
    for section, const in PROGRAMS.items():
        p = programs[section]
        out.append("")
        out.append(f"/// `{p['entry']}` (section `{section}`), {len(p['insns'])} instructions.")
        out.append(f"pub(super) const {const}: Program = Program {{")
        out.append(f'    name: "{p["entry"]}",')
        relocs = ", ".join(f"({i}, MapId::{MAP_NAMES[m]})" for i, m in p["relocs"])
        out.append(f"    maps: &[{relocs}],")
        out.append("    insns: &[")
        for k in range(0, len(p["insns"]), 4):
            words = ", ".join(f"0x{w:016x}" for w in p["insns"][k : k + 4])
            out.append(f"        {words},")
        out.append("    ],")
        out.append("};")
    return "\n".join(out) + "\n"


def main():
    check = "--check" in sys.argv[1:]
    check_cycles()
    check_clang()
    with tempfile.TemporaryDirectory() as tmp:
        obj = os.path.join(tmp, "fastpath.o")
        compile_object(obj)
        maps, programs = read_object(obj)
        abi = render_abi(compile_shared(tmp, header_names(SHARED.read_text())), SHARED.read_text())
    for section, p in programs.items():
        # Linux 5.10 knows only the plain atomic add; compare-and-swap, exchange and the
        # fetching forms arrived in 5.12. Only the member program with stripe's receiver may
        # use them (lagd-sys falls back to the one without where the kernel refuses it).
        if section != "tcx/ingress":
            for k, w in enumerate(p["insns"]):
                if w & 0xFF in (0xC3, 0xDB) and (w >> 32) & 0xFFFFFFFF != 0:
                    sys.exit(f"build.py: {section} instruction {k} is an atomic operation "
                             "other than add, which Linux before 5.12 refuses")
        # Linux 5.10 and 6.1 refuse a loop whose closing edge is a fall-through ("back-edge from
        # insn X to Y") before they look at anything else, and every kernel walks a loop once
        # per iteration: the programs are built without loops (every loop unrolled).
        loops = cycles(p["insns"])
        if loops:
            edges = ", ".join(f"{a} -> {b}" for a, b in loops[:10])
            sys.exit(f"build.py: {section} has {len(loops)} loop(s), closed by {edges}: unroll "
                     "them (#pragma unroll with a constant bound); see bpf/fastpath.c's header")
    outputs = [(OUTPUT, render(maps, programs), SOURCE), (ABI_OUTPUT, abi, SHARED)]
    if check:
        failed = 0
        for path, text, source in outputs:
            current = path.read_text() if path.exists() else ""
            if current != text:
                print(f"build.py: {path.relative_to(ROOT)} is not what {source.relative_to(ROOT)} "
                      "builds to; run python3 bpf/build.py")
                failed = 1
            else:
                print(f"build.py: {path.relative_to(ROOT)} matches {source.relative_to(ROOT)} "
                      f"({CLANG} {CLANG_VERSION})")
        return failed
    for path, text, _source in outputs:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"build.py: wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
