#!/usr/bin/env python3
"""Builds bpf/fastpath.c into crates/lagd-sys/src/fastpath/programs.rs.

    python3 bpf/build.py            # rebuild the Rust file
    python3 bpf/build.py --check    # rebuild into memory; exit 1 if the checked-in file differs

The programs are compiled with the clang pinned below (Debian's clang-19), without BTF, and
read back from the ELF object: each program section's instructions, as the little-endian
64-bit words the kernel takes, and its relocations (which ld_imm64 instruction names which
map). lagd-sys creates the maps itself and patches their descriptors into those instructions,
so users need no compiler, no libbpf and no ELF reader at run time. CI runs --check: the
checked-in instructions are exactly what this source and this compiler produce.
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
OUTPUT = ROOT / "crates" / "lagd-sys" / "src" / "fastpath" / "programs.rs"
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


def compile_object(out):
    version = subprocess.run([CLANG, "--version"], capture_output=True, text=True, check=True)
    if f"version {CLANG_VERSION}" not in version.stdout:
        sys.exit(f"build.py: {CLANG} {CLANG_VERSION} needed, found: {version.stdout.splitlines()[0]}")
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


MAP_NAMES = {
    "lagd_tables": "Tables",
    "lagd_ports": "Ports",
    "lagd_buckets": "Buckets",
    "lagd_stripe_tx": "StripeTx",
    "lagd_stripe_rx": "StripeRx",
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
    with tempfile.TemporaryDirectory() as tmp:
        obj = os.path.join(tmp, "fastpath.o")
        compile_object(obj)
        maps, programs = read_object(obj)
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
    text = render(maps, programs)
    if check:
        current = OUTPUT.read_text() if OUTPUT.exists() else ""
        if current != text:
            print(f"build.py: {OUTPUT.relative_to(ROOT)} is not what bpf/fastpath.c builds to; run python3 bpf/build.py")
            return 1
        print(f"build.py: {OUTPUT.relative_to(ROOT)} matches bpf/fastpath.c ({CLANG} {CLANG_VERSION})")
        return 0
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(text)
    print(f"build.py: wrote {OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
