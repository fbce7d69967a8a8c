//! Keeping a member's own kernel stack off the member: an ingress drop (tcx or clsact) and quiet
//! sysctls.
//!
//! lagd reads a member with an `ETH_P_ALL` [`PacketSocket`](crate::packet::PacketSocket). The
//! member is still an ordinary interface to the kernel, so without help every frame that arrives
//! on it also goes up the member's own stack. That stack answers ARP for the bond's address with
//! the member's MAC (the default `arp_ignore=0` answers for any local address, on any
//! interface), peers cache that MAC, and their traffic then bypasses the bond.
//!
//! The kernel hands a received frame to `ETH_P_ALL` packet sockets ("taps") *before* tc ingress.
//! A program at tc ingress that drops everything therefore cuts the member's stack off (ARP,
//! IPv4, IPv6, LLDP, everything, including protocol-bound packet sockets such as `ETH_P_IP`)
//! while lagd still receives every frame. Frames lagd *sends* on the member are not affected
//! (ingress only).
//!
//! * [`IngressDrop`] loads a five-instruction eBPF program (drop everything but slow-protocol
//!   frames, which lagd reads on their own protocol-bound socket) and attaches it with a tcx link
//!   (`BPF_LINK_CREATE`, `BPF_TCX_INGRESS`, Linux 6.6+), or as a clsact filter (see below). No
//!   clang, no object file, no `tc` program, no bpffs. The program stays attached exactly as long
//!   as the value lives: dropping it detaches the program, and with tcx, if lagd dies the
//!   kernel closes the link for it, so a crash never leaves a member black-holed.
//! * [`SlowProtocolsEgressDrop`] is a fault injector for tests and the lab, not part of member
//!   isolation: a ten-instruction program at tcx egress (`BPF_TCX_EGRESS`) that drops only
//!   frames whose EtherType is 0x8809 (LACPDUs, Marker PDUs) and passes everything else, so a
//!   link loses its LACPDUs while data still crosses it. Same loader, same lifetime rule.
//! * [`quiet_stack`] sets `disable_ipv6=1` (no router solicitations, DAD or MLD originated by the
//!   member) and `arp_ignore=8` (never answer ARP) on the member, a second guard that also works
//!   where tcx does not.
//!
//! # Without tcx
//!
//! On a kernel without tcx (before 6.6), or without `bpf()` at all, [`IngressDrop::attach`]
//! returns an error of kind [`io::ErrorKind::Unsupported`] that carries a [`TcxUnavailable`]
//! (see [`TcxUnavailable::of`]). [`TcxDrop::attach_with`] with [`Attach::Tc`] attaches the same
//! program as a direct-action filter on the clsact qdisc instead ([`crate::clsact`]), which every
//! kernel lagd runs on has; such a filter is not tied to a descriptor, so it stays after a
//! `kill -9` until the next lagd replaces it (any attach deletes lagd filters already on the
//! hook, so a second drop on the same interface replaces the first). The last resort is
//! [`quiet_stack`] alone: the member then does not answer ARP and originates no IPv6, but its
//! IPv4 stack still receives the frames lagd relays (unicast to the bond's address arriving on
//! the member that carries the bond's MAC is delivered locally twice). The caller should log a
//! warning and carry on.
//!
//! # Privileges and namespaces
//!
//! Both need root (`CAP_BPF` + `CAP_NET_ADMIN` for the tcx link, `CAP_NET_ADMIN` over the
//! namespace for the sysctls). Interface indexes and `/proc/sys/net` are resolved in the *calling
//! thread's* network namespace; use [`NetNs::run`](crate::netns::NetNs::run) to act on a member in
//! another namespace. An [`IngressDrop`] made there stays attached to that member after the thread
//! ends and can be dropped from any thread.

use std::error::Error;
use std::fmt;
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::marker::PhantomData;
use std::mem::offset_of;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::ptr;

use crate::clsact::{self, Attach, Hook, TcFilter};
use crate::error;
use crate::link;

/// `BPF_MAP_CREATE` in `enum bpf_cmd`.
pub(crate) const BPF_MAP_CREATE: libc::c_int = 0;
/// `BPF_PROG_LOAD` in `enum bpf_cmd`.
const BPF_PROG_LOAD: libc::c_int = 5;
/// `BPF_LINK_CREATE` in `enum bpf_cmd` (Linux 5.7+).
const BPF_LINK_CREATE: libc::c_int = 28;
/// `BPF_PROG_TYPE_SCHED_CLS` in `enum bpf_prog_type`: tc classifier programs, which tcx runs.
const BPF_PROG_TYPE_SCHED_CLS: u32 = 3;
/// `BPF_TCX_INGRESS` in `enum bpf_attach_type` (Linux 6.6+).
pub(crate) const BPF_TCX_INGRESS: u32 = 46;
/// `BPF_TCX_EGRESS` in `enum bpf_attach_type` (Linux 6.6+).
pub(crate) const BPF_TCX_EGRESS: u32 = 47;
/// `BPF_F_BEFORE`: with no relative program, attach in front of every program already there, so
/// that no earlier program's `TCX_PASS` lets a frame through to the stack.
pub(crate) const BPF_F_BEFORE: u32 = 1 << 3;
/// `TCX_DROP` (equal to `TC_ACT_SHOT`): drop the frame.
const TCX_DROP: i32 = 2;
/// `TCX_PASS`: hand the frame on to the stack.
const TCX_PASS: i32 = 0;
/// Verifier log level 1: the error and the statistics line, not a trace of every instruction.
const LOG_LEVEL: u32 = 1;
/// Bytes of verifier log to ask for; plenty for programs of ten instructions (the kernel minimum
/// is 128).
const LOG_SIZE: usize = 16 * 1024;
/// The program's license. The program calls no helpers, so any string would load; this one is
/// GPL-compatible, the crate's own licence being MIT OR Apache-2.0.
const LICENSE: &std::ffi::CStr = c"Dual MIT/GPL";
/// The program's name as `bpftool prog` shows it (at most 15 bytes: letters, digits, `_`, `.`).
const PROG_NAME: &[u8] = b"lagd_ingr_drop";
/// [`SLOW_DROP_PROGRAM`]'s name, under the same rules.
const SLOW_DROP_NAME: &[u8] = b"lagd_slow_drop";
/// `IFNAMSIZ` minus the terminating NUL.
const IFNAME_MAX: usize = 15;

/// `BPF_JMP | BPF_CALL`: a call of a helper (source 0) or of a function of the program.
pub(crate) const CALL: u8 = 0x05 | 0x80;

/// `struct bpf_insn`: `code`, `dst_reg:4 | src_reg:4`, `off`, `imm`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct BpfInsn {
    code: u8,
    /// The two 4-bit register fields: `dst_reg` in the low nibble, `src_reg` in the high one
    /// (the bit-field order of little-endian targets, the only ones lagd builds for).
    regs: u8,
    off: i16,
    imm: i32,
}

const _: () = assert!(size_of::<BpfInsn>() == 8);

impl BpfInsn {
    /// An instruction from its 8 bytes as the kernel reads them (little-endian targets).
    pub(crate) const fn from_le_bytes(b: [u8; 8]) -> Self {
        Self {
            code: b[0],
            regs: b[1],
            off: i16::from_le_bytes([b[2], b[3]]),
            imm: i32::from_le_bytes([b[4], b[5], b[6], b[7]]),
        }
    }

    /// The opcode.
    pub(crate) const fn code(&self) -> u8 {
        self.code
    }

    /// The source register field (for a call: 0 a helper, 1 a function of the program).
    pub(crate) const fn src(&self) -> u8 {
        self.regs >> 4
    }

    /// The immediate (for a helper call: the helper's number).
    pub(crate) const fn imm(&self) -> i32 {
        self.imm
    }

    /// `BPF_JMP | BPF_CALL` of helper `helper`.
    pub(crate) const fn call(helper: i32) -> Self {
        Self {
            code: CALL,
            regs: 0,
            off: 0,
            imm: helper,
        }
    }

    /// Sets the source register field (for `ld_imm64`: the pseudo-source kind).
    pub(crate) fn set_src(&mut self, src: u8) {
        self.regs = (self.regs & 0x0f) | (src << 4);
    }

    /// Sets the immediate.
    pub(crate) fn set_imm(&mut self, imm: i32) {
        self.imm = imm;
    }

    /// `BPF_ALU64 | BPF_MOV | BPF_K`: `r0 = imm`, the program's verdict.
    pub(crate) const fn mov_r0(imm: i32) -> Self {
        Self {
            code: 0x07 | 0xb0,
            regs: 0,
            off: 0,
            imm,
        }
    }

    /// `BPF_JMP | BPF_JNE | BPF_K`: if register `dst` != `imm`, skip `off` instructions.
    const fn jne(dst: u8, imm: i32, off: i16) -> Self {
        Self {
            code: 0x05 | 0x50,
            regs: dst,
            off,
            imm,
        }
    }

    /// `BPF_JMP | BPF_EXIT`: return r0.
    pub(crate) const EXIT: Self = Self {
        code: 0x05 | 0x90,
        regs: 0,
        off: 0,
        imm: 0,
    };
}

/// The EtherType 0x8809 as both programs read it: the big-endian value (`skb->protocol`, or the
/// header bytes `88 09` in the frame) loaded little-endian.
const SLOW_PROTOCOLS_LOADED: i32 = 0x0988;

/// Drop everything except slow protocols:
///
/// ```text
/// r2 = *(u32 *)(r1 + 16)      ; __sk_buff.protocol
/// r0 = TCX_DROP
/// if r2 != 0x0988 goto +1     ; not 0x8809: keep TCX_DROP
/// r0 = TCX_PASS
/// exit
/// ```
///
/// Slow-protocol frames (LACP, Marker) pass because lagd reads them on a protocol-bound socket,
/// which only sees what tc ingress lets through, so they keep their own socket buffer when the
/// data socket is saturated. The kernel has no bonding driver to consume them; the stack drops
/// them as an unknown protocol.
static DROP_PROGRAM: [BpfInsn; 5] = [
    // BPF_LDX | BPF_MEM | BPF_W: r2 = *(u32 *)(r1 + 16). Register byte: src r1 in the high
    // nibble, dst r2 in the low one (the little-endian bit-field order).
    BpfInsn {
        code: 0x01 | 0x60, // BPF_W is 0x00
        regs: 0x12,
        off: 16,
        imm: 0,
    },
    // r0 = TCX_DROP.
    BpfInsn::mov_r0(TCX_DROP),
    // if r2 != imm, skip one instruction.
    BpfInsn::jne(0x02, SLOW_PROTOCOLS_LOADED, 1),
    // r0 = TCX_PASS.
    BpfInsn::mov_r0(TCX_PASS),
    // return r0.
    BpfInsn::EXIT,
];

/// Length of an Ethernet header without VLAN tags: destination, source, EtherType.
const ETH_HLEN: i32 = 14;
/// Offset of the EtherType in an untagged Ethernet header.
const ETH_TYPE_OFFSET: i16 = 12;
/// `offsetof(struct __sk_buff, data)`: the verifier turns a 32-bit load of it into a packet
/// pointer.
const SKB_DATA: i16 = 76;
/// `offsetof(struct __sk_buff, data_end)`: the end of the linear packet data.
const SKB_DATA_END: i16 = 80;

/// Drop slow-protocol frames only, pass everything else (for [`SlowProtocolsEgressDrop`]):
///
/// ```text
/// 0: r2 = *(u32 *)(r1 + 76)      ; __sk_buff.data: at tc egress, the Ethernet header
/// 1: r3 = *(u32 *)(r1 + 80)      ; __sk_buff.data_end
/// 2: r0 = TCX_PASS
/// 3: r4 = r2
/// 4: r4 += 14
/// 5: if r4 > r3 goto +3          ; no whole Ethernet header in the linear data: pass (to 9)
/// 6: r4 = *(u16 *)(r2 + 12)      ; the EtherType, as it is on the wire
/// 7: if r4 != 0x0988 goto +1     ; not 0x8809: keep TCX_PASS
/// 8: r0 = TCX_DROP
/// 9: exit
/// ```
///
/// It reads the EtherType from the frame, not `__sk_buff.protocol`: for a frame sent on a
/// packet socket, `skb->protocol` is what the socket declared (its bound protocol or
/// `sll_protocol`), which need not be the frame's EtherType; the frame's own header is what
/// "an 0x8809 frame" means. The bounds check (instructions 3 to 5) is what the verifier needs
/// before any direct packet read. Slow-protocol frames are never VLAN-tagged (IEEE 802.3 Annex
/// 57A), so only the untagged EtherType is looked at.
static SLOW_DROP_PROGRAM: [BpfInsn; 10] = [
    // BPF_LDX | BPF_MEM | BPF_W: r2 = *(u32 *)(r1 + 76); src r1 high nibble, dst r2 low.
    BpfInsn {
        code: 0x01 | 0x60,
        regs: 0x12,
        off: SKB_DATA,
        imm: 0,
    },
    // BPF_LDX | BPF_MEM | BPF_W: r3 = *(u32 *)(r1 + 80).
    BpfInsn {
        code: 0x01 | 0x60,
        regs: 0x13,
        off: SKB_DATA_END,
        imm: 0,
    },
    // r0 = TCX_PASS.
    BpfInsn::mov_r0(TCX_PASS),
    // BPF_ALU64 | BPF_MOV | BPF_X: r4 = r2 (src r2, dst r4).
    BpfInsn {
        code: 0x07 | 0xb0 | 0x08,
        regs: 0x24,
        off: 0,
        imm: 0,
    },
    // BPF_ALU64 | BPF_ADD | BPF_K: r4 += 14.
    BpfInsn {
        code: 0x07,
        regs: 0x04,
        off: 0,
        imm: ETH_HLEN,
    },
    // BPF_JMP | BPF_JGT | BPF_X: if r4 > r3 (src r3, dst r4), skip three instructions.
    BpfInsn {
        code: 0x05 | 0x20 | 0x08,
        regs: 0x34,
        off: 3,
        imm: 0,
    },
    // BPF_LDX | BPF_MEM | BPF_H: r4 = *(u16 *)(r2 + 12) (src r2, dst r4).
    BpfInsn {
        code: 0x01 | 0x60 | 0x08,
        regs: 0x24,
        off: ETH_TYPE_OFFSET,
        imm: 0,
    },
    // if r4 != 0x0988, skip one instruction.
    BpfInsn::jne(0x04, SLOW_PROTOCOLS_LOADED, 1),
    // r0 = TCX_DROP.
    BpfInsn::mov_r0(TCX_DROP),
    // return r0.
    BpfInsn::EXIT,
];

/// Both drop programs, their names and tcx attach types, for
/// [`crate::fastpath::load_check`].
pub(crate) fn drop_programs() -> [(&'static [u8], &'static [BpfInsn], u32); 2] {
    [
        (PROG_NAME, &DROP_PROGRAM, BPF_TCX_INGRESS),
        (SLOW_DROP_NAME, &SLOW_DROP_PROGRAM, BPF_TCX_EGRESS),
    ]
}

/// The `BPF_PROG_LOAD` member of `union bpf_attr` (include/uapi/linux/bpf.h), through
/// `fd_array_cnt` (Linux 6.13). Every byte is a named field, so a value built from zeroes has no
/// uninitialised padding. An older kernel accepts the fields it does not know as long as they are
/// zero (`bpf_check_uarg_tail_zero`).
#[repr(C, align(8))]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
    prog_btf_fd: u32,
    func_info_rec_size: u32,
    func_info: u64,
    func_info_cnt: u32,
    line_info_rec_size: u32,
    line_info: u64,
    line_info_cnt: u32,
    attach_btf_id: u32,
    attach_prog_fd: u32,
    core_relo_cnt: u32,
    fd_array: u64,
    core_relos: u64,
    core_relo_rec_size: u32,
    /// Output: the size the whole log needed, terminating NUL included.
    log_true_size: u32,
    prog_token_fd: i32,
    fd_array_cnt: u32,
}

const _: () = {
    assert!(offset_of!(ProgLoadAttr, insn_cnt) == 4);
    assert!(offset_of!(ProgLoadAttr, insns) == 8);
    assert!(offset_of!(ProgLoadAttr, license) == 16);
    assert!(offset_of!(ProgLoadAttr, log_level) == 24);
    assert!(offset_of!(ProgLoadAttr, log_size) == 28);
    assert!(offset_of!(ProgLoadAttr, log_buf) == 32);
    assert!(offset_of!(ProgLoadAttr, kern_version) == 40);
    assert!(offset_of!(ProgLoadAttr, prog_flags) == 44);
    assert!(offset_of!(ProgLoadAttr, prog_name) == 48);
    assert!(offset_of!(ProgLoadAttr, prog_ifindex) == 64);
    assert!(offset_of!(ProgLoadAttr, expected_attach_type) == 68);
    assert!(offset_of!(ProgLoadAttr, prog_btf_fd) == 72);
    assert!(offset_of!(ProgLoadAttr, func_info) == 80);
    assert!(offset_of!(ProgLoadAttr, line_info) == 96);
    assert!(offset_of!(ProgLoadAttr, attach_btf_id) == 108);
    assert!(offset_of!(ProgLoadAttr, fd_array) == 120);
    assert!(offset_of!(ProgLoadAttr, core_relos) == 128);
    assert!(offset_of!(ProgLoadAttr, log_true_size) == 140);
    assert!(offset_of!(ProgLoadAttr, fd_array_cnt) == 148);
    assert!(size_of::<ProgLoadAttr>() == 152);
};

/// The `BPF_LINK_CREATE` member of `union bpf_attr`. The per-link-type union after `flags` is
/// left zero: for tcx that is `relative_fd = 0` and `expected_revision = 0` (no revision check),
/// which with [`BPF_F_BEFORE`] means "in front of all others". 48 bytes is its largest member
/// (`uprobe_multi`).
#[repr(C, align(8))]
#[derive(Default)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
    per_type: [u64; 6],
}

const _: () = {
    assert!(offset_of!(LinkCreateAttr, target_ifindex) == 4);
    assert!(offset_of!(LinkCreateAttr, attach_type) == 8);
    assert!(offset_of!(LinkCreateAttr, flags) == 12);
    assert!(offset_of!(LinkCreateAttr, per_type) == 16);
    assert!(size_of::<LinkCreateAttr>() == 64);
};

/// A user-space address as the kernel's `__aligned_u64` wants it.
pub(crate) fn addr<T>(p: *const T) -> u64 {
    p as usize as u64
}

/// `bpf(cmd, attr, sizeof(*attr))` for a command that returns a new descriptor.
///
/// # Safety
///
/// `T` must be one of the `#[repr(C)]` attribute structs above (no padding, every field an
/// integer), laid out as the kernel expects for `cmd`, and every user address stored in `attr`
/// must be valid, for the duration of the call, for the reads and writes `cmd` makes through it.
pub(crate) unsafe fn sys_bpf<T>(cmd: libc::c_int, attr: &mut T) -> io::Result<OwnedFd> {
    // SAFETY: the caller's guarantees are the ones `sys_bpf_int` needs.
    let ret = unsafe { sys_bpf_int(cmd, attr) }?;
    let fd = RawFd::try_from(ret).map_err(|_| io::Error::other("bpf() returned a bad fd"))?;
    // SAFETY: a non-negative return from these commands is a new descriptor (opened with
    // O_CLOEXEC by the kernel) that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `bpf(cmd, attr, sizeof(*attr))` for a command that returns a number (0 on success for the
/// map and test-run commands).
///
/// # Safety
///
/// As for [`sys_bpf`].
pub(crate) unsafe fn sys_bpf_int<T>(cmd: libc::c_int, attr: &mut T) -> io::Result<i64> {
    // SAFETY: `attr` is valid for reads and writes of `size_of::<T>()` bytes (the kernel copies
    // it in and may write output fields such as `log_true_size` back); the caller guarantees the
    // addresses inside it. The arguments are passed as `long`, which is what syscall(2) reads.
    let mut call = || unsafe {
        libc::syscall(
            libc::SYS_bpf,
            libc::c_long::from(cmd),
            ptr::from_mut(attr).cast::<libc::c_void>(),
            size_of::<T>() as libc::c_long,
        )
    };
    let mut ret = call();
    // Kernels before 5.11 charge maps and programs to RLIMIT_MEMLOCK and say EPERM when it is
    // spent; a service manager's default (64 KiB in systemd before 253, Debian 11's) is below
    // what the fast path's maps take. Raised as far as the process may, and tried again.
    if ret < 0
        && io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
        && matches!(cmd, BPF_MAP_CREATE | BPF_PROG_LOAD)
        && raise_memlock()
    {
        ret = call();
    }
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(ret)
}

/// Raises RLIMIT_MEMLOCK to unlimited (with CAP_SYS_RESOURCE), or else its soft limit to the
/// hard one. Whether the limit went up.
fn raise_memlock() -> bool {
    let mut now = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `now` is a valid `rlimit` for the kernel to write.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut now) } != 0
        || now.rlim_cur == libc::RLIM_INFINITY
    {
        return false;
    }
    let unlimited = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    let hard = libc::rlimit {
        rlim_cur: now.rlim_max,
        rlim_max: now.rlim_max,
    };
    // SAFETY: `limit` is a valid `rlimit` the kernel only reads.
    let set = |limit: &libc::rlimit| unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, limit) } == 0;
    set(&unlimited) || (now.rlim_max > now.rlim_cur && set(&hard))
}

/// Loads `program` as a tc classifier expected at
/// the tcx hook `attach_type`, named `name` for `bpftool prog`.
pub(crate) fn load_program(
    program: &[BpfInsn],
    name: &[u8],
    attach_type: u32,
    subject: &str,
) -> io::Result<OwnedFd> {
    let mut prog_name = [0u8; 16];
    prog_name[..name.len()].copy_from_slice(name);
    let mut attr = ProgLoadAttr {
        prog_type: BPF_PROG_TYPE_SCHED_CLS,
        insn_cnt: program.len() as u32,
        insns: addr(program.as_ptr()),
        license: addr(LICENSE.as_ptr()),
        prog_name,
        expected_attach_type: attach_type,
        ..ProgLoadAttr::default()
    };
    // First without a log: a verifier log that does not fit its buffer fails the load
    // (ENOSPC) even for a program the verifier accepts.
    // SAFETY: `attr` is a `ProgLoadAttr` for BPF_PROG_LOAD. `insns` points to the `insn_cnt`
    // instructions of `program`, borrowed for the call, `license` to a NUL-terminated static
    // string; there is no log buffer.
    if let Ok(fd) = unsafe { sys_bpf(BPF_PROG_LOAD, &mut attr) } {
        return Ok(fd);
    }
    // Refused: again with the verifier's log, for the error message.
    let mut log = vec![0u8; LOG_SIZE];
    attr.log_level = LOG_LEVEL;
    attr.log_size = LOG_SIZE as u32;
    attr.log_buf = addr(log.as_mut_ptr());
    // SAFETY: `attr` is a `ProgLoadAttr` for BPF_PROG_LOAD. `insns` points to the `insn_cnt`
    // instructions of `program`, borrowed for the call, `license` to a NUL-terminated static
    // string, and `log_buf` to `log_size` writable bytes of `log`, which outlives the call.
    let loaded = unsafe { sys_bpf(BPF_PROG_LOAD, &mut attr) };
    loaded.map_err(|os| {
        if os.raw_os_error() == Some(libc::ENOSYS) {
            return TcxUnavailable::error(os, "bpf(BPF_PROG_LOAD)", subject);
        }
        let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
        let text = String::from_utf8_lossy(&log[..end]);
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        let detail = if lines.is_empty() {
            subject.to_owned()
        } else {
            format!("{subject} (verifier log: {})", lines.join(" | "))
        };
        error::annotate(os, "bpf(BPF_PROG_LOAD)", Some(&detail))
    })
}

/// Attaches the loaded program `prog` to interface `ifindex`'s tcx hook `attach_type` with a
/// tcx link (`flags`: 0 to append, [`BPF_F_BEFORE`] to go first); returns the link's
/// descriptor, which detaches the program when closed.
pub(crate) fn link_create(
    prog: &OwnedFd,
    ifindex: u32,
    attach_type: u32,
    flags: u32,
) -> io::Result<OwnedFd> {
    let subject = format!("ifindex {ifindex}");
    let prog_fd =
        u32::try_from(prog.as_raw_fd()).map_err(|_| io::Error::other("negative program fd"))?;
    let mut attr = LinkCreateAttr {
        prog_fd,
        target_ifindex: ifindex,
        attach_type,
        flags,
        ..LinkCreateAttr::default()
    };
    // SAFETY: `attr` is a `LinkCreateAttr` for BPF_LINK_CREATE and holds no user addresses;
    // `prog_fd` is open (`prog` is borrowed for the call).
    let link =
        unsafe { sys_bpf(BPF_LINK_CREATE, &mut attr) }.map_err(|os| match os.raw_os_error() {
            Some(libc::EINVAL | libc::EOPNOTSUPP | libc::ENOSYS) => {
                TcxUnavailable::error(os, "bpf(BPF_LINK_CREATE)", &subject)
            }
            _ => error::annotate(os, "bpf(BPF_LINK_CREATE)", Some(&subject)),
        })?;
    Ok(link)
}

/// `BPF_OBJ_GET_INFO_BY_FD` in `enum bpf_cmd`.
const BPF_OBJ_GET_INFO_BY_FD: libc::c_int = 15;
/// `BPF_LINK_UPDATE` in `enum bpf_cmd` (Linux 5.7+).
const BPF_LINK_UPDATE: libc::c_int = 29;
/// `BPF_LINK_TYPE_TCX` in `enum bpf_link_type` (Linux 6.6+).
const BPF_LINK_TYPE_TCX: u32 = 11;

/// The `BPF_LINK_UPDATE` member of `union bpf_attr`.
#[repr(C, align(8))]
#[derive(Default)]
struct LinkUpdateAttr {
    link_fd: u32,
    new_prog_fd: u32,
    flags: u32,
    old_prog_fd: u32,
}

/// The `info` member of `union bpf_attr` (`BPF_OBJ_GET_INFO_BY_FD`).
#[repr(C, align(8))]
#[derive(Default)]
pub(crate) struct InfoAttr {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

/// The start of `struct bpf_link_info`: type, id, prog_id, then (at 16) the per-type union,
/// whose tcx member is {ifindex, attach_type}; the rest is room the kernel may fill.
#[repr(C, align(8))]
#[derive(Default)]
pub(crate) struct LinkInfo {
    pub(crate) link_type: u32,
    pub(crate) id: u32,
    pub(crate) prog_id: u32,
    _pad: u32,
    pub(crate) ifindex: u32,
    pub(crate) attach_type: u32,
    rest: [u64; 6],
}

const _: () = assert!(std::mem::offset_of!(LinkInfo, ifindex) == 16);

/// The index of the interface the tcx link `link` is attached to (0 once the interface is
/// gone); `None` for a link of another type.
///
/// # Errors
///
/// `BPF_OBJ_GET_INFO_BY_FD`'s, for example `EBADF` or `EINVAL` for a descriptor that is not a
/// BPF link.
pub fn tcx_link_ifindex(link: BorrowedFd<'_>) -> io::Result<Option<u32>> {
    let mut info = LinkInfo::default();
    object_info(link, &mut info)?;
    Ok((info.link_type == BPF_LINK_TYPE_TCX).then_some(info.ifindex))
}

/// The kernel's id of the tcx link `link` (it stays the link's while any descriptor of it is
/// open: a program put into it with `BPF_LINK_UPDATE` keeps the id, a new link gets another);
/// `None` for a link of another type.
///
/// # Errors
///
/// As [`tcx_link_ifindex`].
pub fn tcx_link_id(link: BorrowedFd<'_>) -> io::Result<Option<u32>> {
    let mut info = LinkInfo::default();
    object_info(link, &mut info)?;
    Ok((info.link_type == BPF_LINK_TYPE_TCX).then_some(info.id))
}

/// The interface and hook (`BPF_TCX_INGRESS`/`EGRESS`) a tcx link is attached to; `None` for
/// a link of another type.
fn tcx_target(link: &OwnedFd) -> io::Result<Option<(u32, u32)>> {
    let mut info = LinkInfo::default();
    object_info(link.as_fd(), &mut info)?;
    Ok((info.link_type == BPF_LINK_TYPE_TCX).then_some((info.ifindex, info.attach_type)))
}

/// A `struct bpf_*_info` of the kernel's that [`object_info`] may fill: plain integers, every
/// bit pattern valid, an address field only where the caller points it at its own buffer.
///
/// # Safety
/// The type must be `#[repr(C)]` with integer fields only, laid out as the kernel's struct
/// (a prefix of it), and any address it carries must point at memory writable for the length
/// its count field says.
pub(crate) unsafe trait BpfInfo: Default {}

// SAFETY: integer fields only, `struct bpf_link_info`'s prefix (offset of `ifindex` asserted).
unsafe impl BpfInfo for LinkInfo {}

/// `BPF_OBJ_GET_INFO_BY_FD` on `fd` (a program, map or link) into `info`.
pub(crate) fn object_info<T: BpfInfo>(fd: BorrowedFd<'_>, info: &mut T) -> io::Result<()> {
    let mut attr = InfoAttr {
        bpf_fd: u32::try_from(fd.as_raw_fd()).map_err(|_| io::Error::other("negative fd"))?,
        info_len: u32::try_from(size_of::<T>()).map_err(|_| io::Error::other("info too long"))?,
        info: addr(ptr::from_mut(info)),
    };
    // SAFETY: `attr.info` points at `info`, writable for `info_len` bytes (its size) for the
    // call, and the kernel writes at most that many; `T: BpfInfo` holds plain integers and
    // only addresses its caller pointed at its own buffers. `bpf_fd` is open (borrowed).
    unsafe { sys_bpf_int(BPF_OBJ_GET_INFO_BY_FD, &mut attr) }
        .map(drop)
        .map_err(|os| error::annotate(os, "bpf(BPF_OBJ_GET_INFO_BY_FD)", None))
}

/// Puts `prog` in place of the program `link` runs, in one step (the hook is never without a
/// program).
fn link_update(link: &OwnedFd, prog: &OwnedFd) -> io::Result<()> {
    let fd =
        |f: &OwnedFd| u32::try_from(f.as_raw_fd()).map_err(|_| io::Error::other("negative fd"));
    let mut attr = LinkUpdateAttr {
        link_fd: fd(link)?,
        new_prog_fd: fd(prog)?,
        ..LinkUpdateAttr::default()
    };
    // SAFETY: `attr` is a `LinkUpdateAttr` for BPF_LINK_UPDATE with no user addresses; both
    // descriptors are open (borrowed for the call).
    unsafe { sys_bpf_int(BPF_LINK_UPDATE, &mut attr) }
        .map(drop)
        .map_err(|os| error::annotate(os, "bpf(BPF_LINK_UPDATE)", None))
}

/// tcx links a lagd before this one left (through the service manager's descriptor store),
/// waiting to be adopted by [`attach_at`].
static OFFERED: std::sync::Mutex<Vec<OwnedFd>> = std::sync::Mutex::new(Vec::new());

/// Offers `links`, tcx links an earlier lagd held (passed by the service manager), for
/// adoption: attaching a program with tcx at a hook one of them is attached to then puts the
/// program into that link in one step (`BPF_LINK_UPDATE`) instead of creating a new link, so
/// the hook never runs without a program across the change of process. Descriptors that are
/// not tcx links are closed at once.
pub fn offer_tcx_links(links: Vec<OwnedFd>) {
    let mut offered = OFFERED.lock().unwrap_or_else(|e| e.into_inner());
    offered.extend(
        links
            .into_iter()
            .filter(|l| tcx_target(l).is_ok_and(|t| t.is_some())),
    );
}

/// Closes the offered links nobody adopted (their programs detach); returns how many.
pub fn close_unadopted() -> usize {
    let mut offered = OFFERED.lock().unwrap_or_else(|e| e.into_inner());
    let n = offered.len();
    offered.clear();
    n
}

/// Takes an offered link attached at hook `attach_type` of `ifindex`.
fn take_offered(ifindex: u32, attach_type: u32) -> Option<OwnedFd> {
    let mut offered = OFFERED.lock().unwrap_or_else(|e| e.into_inner());
    let k = offered
        .iter()
        .position(|l| tcx_target(l).ok().flatten() == Some((ifindex, attach_type)))?;
    Some(offered.swap_remove(k))
}

/// A drop-everything program on an interface's tcx ingress hook: the interface's own stack sees
/// no received frame, `ETH_P_ALL` packet sockets still see all of them.
///
/// Holds the tcx link's descriptor; dropping the value closes it, which detaches the program.
/// The descriptor is close-on-exec and not shared, so nothing else keeps the program attached
/// (unless this process forks without exec: the child's copy then holds the link too).
///
/// [`TcxDrop::attach`] puts it in front of any other tcx ingress program.
pub type IngressDrop = TcxDrop<AllIngress>;

/// A program on an interface's tcx egress hook that drops every frame with EtherType 0x8809
/// (slow protocols: LACPDUs and Marker PDUs) and passes every other frame: a link that loses
/// its LACPDUs while data still crosses it. A fault injector for tests and the lab (an
/// `act_gact` drop or nftables would do the same where the kernel has them); lagd itself never
/// attaches it.
///
/// On egress the frame is dropped before it reaches the wire and before packet taps (tcpdump)
/// see it. A sender whose frame is dropped gets `ENOBUFS` from `send` (tcx reports
/// `NET_XMIT_DROP`), as for a full device queue; lagd counts and logs that and carries on, and
/// so does Open vSwitch. Put one on each end of a link to drop the slow-protocol frames of both
/// directions.
///
/// It is appended after any program already on the hook. Dropping the value closes the tcx
/// link and detaches the program; so does the process's exit, or the interface's removal.
pub type SlowProtocolsEgressDrop = TcxDrop<SlowProtocolsEgress>;

/// Which program a [`TcxDrop`] attaches, and where: [`AllIngress`] or [`SlowProtocolsEgress`].
/// Sealed: the programs are this module's own.
pub trait TcxDropProgram: sealed::Program + fmt::Debug {}

/// [`IngressDrop`]'s program: everything but slow protocols dropped at tcx ingress, attached in
/// front of the hook's other programs.
#[derive(Debug)]
pub enum AllIngress {}

/// [`SlowProtocolsEgressDrop`]'s program: slow protocols dropped at tcx egress, appended after
/// the hook's other programs.
#[derive(Debug)]
pub enum SlowProtocolsEgress {}

mod sealed {
    /// A program [`super::TcxDrop`] loads and the tcx hook it attaches it to.
    pub struct Spec {
        pub(super) program: &'static [super::BpfInsn],
        /// The name `bpftool prog` shows.
        pub(super) name: &'static [u8],
        /// `BPF_TCX_INGRESS` or `BPF_TCX_EGRESS`.
        pub(super) attach_type: u32,
        /// `BPF_LINK_CREATE` flags: 0 to append, `BPF_F_BEFORE` to go first.
        pub(super) flags: u32,
        /// Its clsact filter slot (handle `HANDLE_BASE` + slot).
        pub(super) slot: u8,
    }

    pub trait Program {
        const SPEC: Spec;
    }
}

impl sealed::Program for AllIngress {
    const SPEC: sealed::Spec = sealed::Spec {
        program: &DROP_PROGRAM,
        name: PROG_NAME,
        attach_type: BPF_TCX_INGRESS,
        flags: BPF_F_BEFORE,
        slot: 3,
    };
}
impl TcxDropProgram for AllIngress {}

impl sealed::Program for SlowProtocolsEgress {
    const SPEC: sealed::Spec = sealed::Spec {
        program: &SLOW_DROP_PROGRAM,
        name: SLOW_DROP_NAME,
        attach_type: BPF_TCX_EGRESS,
        flags: 0,
        slot: 4,
    };
}
impl TcxDropProgram for SlowProtocolsEgress {}

/// An eBPF program `P` attached to one interface's tcx hook with a tcx link: [`IngressDrop`] or
/// [`SlowProtocolsEgressDrop`].
///
/// Holds the link's descriptor; dropping the value closes it, which detaches the program.
#[derive(Debug)]
pub struct TcxDrop<P: TcxDropProgram> {
    /// Held only to be closed (tcx) or deleted (clsact) on drop, which detaches the program.
    hold: Hold,
    ifindex: u32,
    program: PhantomData<P>,
}

impl<P: TcxDropProgram> TcxDrop<P> {
    /// Loads the program and attaches it at its tcx hook of interface `ifindex` in the calling
    /// thread's network namespace (an [`IngressDrop`] in front of any other tcx ingress
    /// program, a [`SlowProtocolsEgressDrop`] after any other tcx egress program).
    ///
    /// # Errors
    ///
    /// * kind [`io::ErrorKind::Unsupported`] carrying a [`TcxUnavailable`] when the kernel has no
    ///   tcx (`BPF_LINK_CREATE` fails with `EINVAL` or `EOPNOTSUPP`) or no `bpf()` (`ENOSYS`).
    ///   For an [`IngressDrop`], fall back on [`quiet_stack`] alone and warn; see the
    ///   [module docs](self).
    /// * `bpf(BPF_PROG_LOAD)` errors with the verifier's log in the message, for example `EPERM`
    ///   without `CAP_BPF`.
    /// * `bpf(BPF_LINK_CREATE)` errors such as `ENODEV` (no such interface) or `EPERM` (no
    ///   `CAP_NET_ADMIN`).
    pub fn attach(ifindex: u32) -> io::Result<Self> {
        Self::attach_with(ifindex, Attach::Tcx)
    }

    /// [`TcxDrop::attach`] with a tcx link ([`Attach::Tcx`]) or as a direct-action filter on
    /// the clsact qdisc ([`Attach::Tc`], any kernel with clsact; see [`crate::clsact`]), at
    /// lagd's priority, which runs it before any other filter of the hook. Either way, lagd
    /// filters an earlier lagd left on the hook are deleted first.
    ///
    /// # Errors
    ///
    /// As [`TcxDrop::attach`] for tcx; for clsact, the failing rtnetlink request
    /// ([`TcFilter::attach`](crate::clsact::TcFilter::attach)).
    pub fn attach_with(ifindex: u32, how: Attach) -> io::Result<Self> {
        let spec = P::SPEC;
        let subject = format!("ifindex {ifindex}");
        let prog = load_program(spec.program, spec.name, spec.attach_type, &subject)?;
        let name = std::str::from_utf8(spec.name).unwrap_or("lagd_drop");
        let hook = if spec.attach_type == BPF_TCX_INGRESS {
            Hook::Ingress
        } else {
            Hook::Egress
        };
        let hold = attach_at(&prog, name, ifindex, hook, spec.slot, how, spec.flags)?;
        // The link or the filter holds its own reference to the program.
        Ok(Self {
            hold,
            ifindex,
            program: PhantomData,
        })
    }

    /// How the program is attached.
    pub fn how(&self) -> Attach {
        self.hold.how()
    }

    /// The tcx link's descriptor, for the service manager's store (see
    /// [`offer_tcx_links`]); none for a clsact filter.
    pub fn tcx_link(&self) -> Option<BorrowedFd<'_>> {
        self.hold.tcx_link()
    }

    /// Whether attaching added the interface's clsact qdisc (which detaching then deletes,
    /// if no filter is left on it).
    pub fn added_qdisc(&self) -> bool {
        self.hold.added_qdisc()
    }

    /// How many clsact filters an earlier lagd left on the hook were deleted on attaching.
    pub fn replaced(&self) -> usize {
        self.hold.replaced()
    }

    /// Detaches the program now, reporting a failure to delete a clsact filter (dropping the
    /// value does the same silently).
    pub fn detach(self) -> io::Result<()> {
        self.hold.detach()
    }

    /// [`TcxDrop::attach`] to the interface called `name` (looked up with [`link::ifindex`]).
    pub fn attach_name(name: &str) -> io::Result<Self> {
        Self::attach(link::ifindex(name)?)
    }

    /// The index of the interface the program is attached to (in the namespace it was attached
    /// in).
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }
}

/// Why [`TcxDrop::attach`] could not use tcx: the kernel lacks it (before Linux 6.6) or lacks
/// `bpf()` altogether.
///
/// Returned inside an [`io::Error`] of kind [`io::ErrorKind::Unsupported`]; get it back with
/// [`TcxUnavailable::of`]. The fallback is [`quiet_stack`] alone (see the [module docs](self)).
/// [`crate::errno`] does not look inside this type; use [`TcxUnavailable::errno`].
#[derive(Debug)]
pub struct TcxUnavailable {
    call: &'static str,
    subject: String,
    os: io::Error,
}

impl TcxUnavailable {
    /// The error the attach functions return when tcx is missing: kind
    /// [`io::ErrorKind::Unsupported`], carrying the failed `call` (`"bpf(BPF_LINK_CREATE)"`),
    /// what it was about and its OS error. Public for callers that decide on a fallback and
    /// want to test that decision.
    pub fn error(os: io::Error, call: &'static str, subject: &str) -> io::Error {
        io::Error::new(
            io::ErrorKind::Unsupported,
            Self {
                call,
                subject: subject.to_owned(),
                os,
            },
        )
    }

    /// The [`TcxUnavailable`] inside `err`, if that is what `err` is.
    pub fn of(err: &io::Error) -> Option<&Self> {
        err.get_ref()?.downcast_ref::<Self>()
    }

    /// The raw `errno` of the failed call (`EINVAL`, `EOPNOTSUPP` or `ENOSYS`).
    pub fn errno(&self) -> i32 {
        self.os.raw_os_error().unwrap_or(0)
    }

    /// The failed call, `"bpf(BPF_LINK_CREATE)"` or `"bpf(BPF_PROG_LOAD)"`.
    pub fn call(&self) -> &'static str {
        self.call
    }
}

impl fmt::Display for TcxUnavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "tcx unavailable ({} on {}: {}); the kernel needs tcx (Linux 6.6 or later). \
             Without it the program can go on the clsact qdisc instead (fastpath_attach=tc); \
             with no ingress drop at all, the member is quieted by arp_ignore=8 and \
             disable_ipv6=1 only, and its IPv4 stack still receives the frames lagd relays",
            self.call, self.subject, self.os
        )
    }
}

impl Error for TcxUnavailable {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&self.os)
    }
}

/// Quiets interface `ifname`'s own stack: `net.ipv6.conf.IF.disable_ipv6 = 1` (the member
/// originates no router solicitations, DAD or MLD) and `net.ipv4.conf.IF.arp_ignore = 8` (it
/// answers no ARP request, whatever addresses the host has).
///
/// `/proc/sys/net` shows the network namespace of the calling *thread*, so this acts on the
/// interface of that name in the calling thread's namespace. A kernel without IPv6 (no
/// `/proc/sys/net/ipv6`) is not an error: it sends no IPv6 either.
///
/// # Errors
///
/// `InvalidInput` for a name that cannot be an interface name; otherwise the `open` or `write`
/// error with the sysctl path, for example `NotFound` when there is no such interface.
pub fn quiet_stack(ifname: &str) -> io::Result<()> {
    check_ifname(ifname)?;
    write_sysctl(&format!("/proc/sys/net/ipv4/conf/{ifname}/arp_ignore"), "8")?;
    match write_sysctl(
        &format!("/proc/sys/net/ipv6/conf/{ifname}/disable_ipv6"),
        "1",
    ) {
        Err(e)
            if e.kind() == io::ErrorKind::NotFound && !Path::new("/proc/sys/net/ipv6").exists() =>
        {
            Ok(())
        }
        other => other,
    }
}

/// The values [`quiet_stack`] changes on an interface, as they were read, so that they can be
/// put back with [`StackSettings::restore`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackSettings {
    /// `net.ipv4.conf.IF.arp_ignore`, as the kernel prints it (without the newline).
    pub arp_ignore: String,
    /// `net.ipv6.conf.IF.disable_ipv6`; `None` on a kernel without IPv6.
    pub disable_ipv6: Option<String>,
}

impl StackSettings {
    /// Reads the settings of interface `ifname` in the calling thread's namespace.
    ///
    /// # Errors
    ///
    /// As [`quiet_stack`]: `InvalidInput` for an impossible name, else the `open`/`read` error
    /// with the sysctl path.
    pub fn read(ifname: &str) -> io::Result<Self> {
        check_ifname(ifname)?;
        let arp_ignore = read_sysctl(&format!("/proc/sys/net/ipv4/conf/{ifname}/arp_ignore"))?;
        let disable_ipv6 =
            match read_sysctl(&format!("/proc/sys/net/ipv6/conf/{ifname}/disable_ipv6")) {
                Ok(v) => Some(v),
                Err(e)
                    if e.kind() == io::ErrorKind::NotFound
                        && !Path::new("/proc/sys/net/ipv6").exists() =>
                {
                    None
                }
                Err(e) => return Err(e),
            };
        Ok(Self {
            arp_ignore,
            disable_ipv6,
        })
    }

    /// Writes these settings back to interface `ifname` (each value is checked to be a
    /// decimal number first, so a corrupt record cannot write anything else).
    ///
    /// # Errors
    ///
    /// `InvalidData` for a value that is not a number, else the `open`/`write` error.
    pub fn restore(&self, ifname: &str) -> io::Result<()> {
        check_ifname(ifname)?;
        let number = |v: &str| {
            if !v.is_empty() && v.len() <= 10 && v.bytes().all(|b| b.is_ascii_digit()) {
                Ok(())
            } else {
                Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("sysctl value {v:?} is not a number"),
                ))
            }
        };
        number(&self.arp_ignore)?;
        write_sysctl(
            &format!("/proc/sys/net/ipv4/conf/{ifname}/arp_ignore"),
            &self.arp_ignore,
        )?;
        if let Some(v) = &self.disable_ipv6 {
            number(v)?;
            write_sysctl(&format!("/proc/sys/net/ipv6/conf/{ifname}/disable_ipv6"), v)?;
        }
        Ok(())
    }
}

fn check_ifname(ifname: &str) -> io::Result<()> {
    if ifname.is_empty()
        || ifname.len() > IFNAME_MAX
        || ifname == "."
        || ifname == ".."
        || ifname.contains(['/', '\0'])
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid interface name {ifname:?}"),
        ));
    }
    Ok(())
}

fn read_sysctl(path: &str) -> io::Result<String> {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .map_err(|e| error::annotate(e, "read", Some(path)))
}

/// Writes `value` to an existing sysctl file (no `O_CREAT`).
fn write_sysctl(path: &str, value: &str) -> io::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| error::annotate(e, "open", Some(path)))?;
    file.write_all(format!("{value}\n").as_bytes())
        .map_err(|e| error::annotate(e, "write", Some(path)))
}

/// What keeps a program attached.
#[derive(Debug)]
pub(crate) enum Hold {
    /// The tcx link's descriptor, and how many lagd clsact filters an earlier lagd left on
    /// the hook were deleted.
    Tcx(OwnedFd, usize),
    /// The filter, deleted when dropped.
    Tc(TcFilter),
}

impl Hold {
    pub(crate) fn how(&self) -> Attach {
        match self {
            Self::Tcx(..) => Attach::Tcx,
            Self::Tc(_) => Attach::Tc,
        }
    }

    pub(crate) fn replaced(&self) -> usize {
        match self {
            Self::Tcx(_, n) => *n,
            Self::Tc(f) => f.replaced(),
        }
    }

    pub(crate) fn added_qdisc(&self) -> bool {
        matches!(self, Self::Tc(f) if f.added_qdisc())
    }

    /// The tcx link's descriptor (none for a clsact filter, which needs none to stay).
    pub(crate) fn tcx_link(&self) -> Option<BorrowedFd<'_>> {
        match self {
            Self::Tcx(link, _) => Some(link.as_fd()),
            Self::Tc(_) => None,
        }
    }

    pub(crate) fn detach(self) -> io::Result<()> {
        match self {
            Self::Tcx(link, _) => {
                drop(link);
                Ok(())
            }
            Self::Tc(f) => f.detach(),
        }
    }
}

/// Attaches `prog` (named `name`) at `hook` of `ifindex` as `how` says. A tcx attachment also
/// deletes lagd filters an earlier lagd left on the clsact hook (best effort: a kernel
/// without clsact has none).
pub(crate) fn attach_at(
    prog: &OwnedFd,
    name: &str,
    ifindex: u32,
    hook: Hook,
    slot: u8,
    how: Attach,
    tcx_flags: u32,
) -> io::Result<Hold> {
    match how {
        Attach::Tcx => {
            let attach_type = match hook {
                Hook::Ingress => BPF_TCX_INGRESS,
                Hook::Egress => BPF_TCX_EGRESS,
            };
            // A link the last lagd left, adopted: the new program goes into it in one step.
            if let Some(link) = take_offered(ifindex, attach_type) {
                if link_update(&link, prog).is_ok() {
                    return Ok(Hold::Tcx(link, 1));
                }
            }
            let link = link_create(prog, ifindex, attach_type, tcx_flags)?;
            let replaced = clsact::remove_lagd_filters(ifindex, hook).unwrap_or(0);
            Ok(Hold::Tcx(link, replaced))
        }
        Attach::Tc => Ok(Hold::Tc(TcFilter::attach(
            prog.as_fd(),
            ifindex,
            hook,
            slot,
            name,
        )?)),
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn program_encoding() {
        // 61 12 1000 00000000: r2 = *(u32 *)(r1 + 16)
        assert_eq!(
            (
                DROP_PROGRAM[0].code,
                DROP_PROGRAM[0].regs,
                DROP_PROGRAM[0].off
            ),
            (0x61, 0x12, 16)
        );
        // b7 00 0000 02000000: r0 = 2
        assert_eq!((DROP_PROGRAM[1].code, DROP_PROGRAM[1].imm), (0xb7, 2));
        // 55 02 0100 88090000: if r2 != 0x0988 goto +1
        assert_eq!((DROP_PROGRAM[2].code, DROP_PROGRAM[2].regs), (0x55, 0x02));
        assert_eq!((DROP_PROGRAM[2].off, DROP_PROGRAM[2].imm), (1, 0x0988));
        assert_eq!(u16::from_be_bytes(0x8809u16.to_be_bytes()), 0x8809);
        assert_eq!(
            i32::from(u16::from_le_bytes([0x88, 0x09])),
            SLOW_PROTOCOLS_LOADED
        );
        // b7 00 0000 00000000: r0 = 0; 95: exit
        assert_eq!((DROP_PROGRAM[3].code, DROP_PROGRAM[3].imm), (0xb7, 0));
        assert_eq!(DROP_PROGRAM[4].code, 0x95);
        assert_eq!(PROG_NAME.len(), 14);
        assert!(PROG_NAME.len() < 16);
    }

    #[test]
    fn slow_drop_program_encoding() {
        let p = &SLOW_DROP_PROGRAM;
        let raw: Vec<(u8, u8, i16, i32)> =
            p.iter().map(|i| (i.code, i.regs, i.off, i.imm)).collect();
        assert_eq!(
            raw,
            [
                (0x61, 0x12, 76, 0),     // r2 = *(u32 *)(r1 + 76)
                (0x61, 0x13, 80, 0),     // r3 = *(u32 *)(r1 + 80)
                (0xb7, 0x00, 0, 0),      // r0 = 0 (TCX_PASS)
                (0xbf, 0x24, 0, 0),      // r4 = r2
                (0x07, 0x04, 0, 14),     // r4 += 14
                (0x2d, 0x34, 3, 0),      // if r4 > r3 goto +3
                (0x69, 0x24, 12, 0),     // r4 = *(u16 *)(r2 + 12)
                (0x55, 0x04, 1, 0x0988), // if r4 != 0x0988 goto +1
                (0xb7, 0x00, 0, 2),      // r0 = 2 (TCX_DROP)
                (0x95, 0x00, 0, 0),      // exit
            ]
        );
        // Both jumps land on the exit.
        assert_eq!(5 + 1 + 3, p.len() - 1);
        assert_eq!(7 + 1 + 1, p.len() - 1);
        // The EtherType bytes 88 09, read by a little-endian half-word load.
        assert_eq!(
            i32::from(u16::from_le_bytes([0x88, 0x09])),
            SLOW_PROTOCOLS_LOADED
        );
        assert_eq!(SLOW_DROP_NAME.len(), 14);
    }

    #[test]
    fn bad_names_are_rejected_before_any_path_is_built() {
        for name in [
            "",
            ".",
            "..",
            "a/b",
            "../../../etc",
            "a\0b",
            "sixteen-chars-xx",
        ] {
            let err = quiet_stack(name).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{name:?}");
        }
    }

    #[test]
    fn tcx_unavailable_is_recognisable_and_keeps_errno() {
        let err = TcxUnavailable::error(
            io::Error::from_raw_os_error(libc::EINVAL),
            "bpf(BPF_LINK_CREATE)",
            "ifindex 7",
        );
        assert_eq!(err.kind(), io::ErrorKind::Unsupported);
        let inner = TcxUnavailable::of(&err).expect("TcxUnavailable inside");
        assert_eq!(inner.errno(), libc::EINVAL);
        assert_eq!(inner.call(), "bpf(BPF_LINK_CREATE)");
        let text = err.to_string();
        assert!(text.contains("tcx unavailable"), "{text}");
        assert!(text.contains("ifindex 7"), "{text}");
        assert!(text.contains("arp_ignore=8"), "{text}");
        assert!(TcxUnavailable::of(&io::Error::from_raw_os_error(libc::EINVAL)).is_none());
    }
}
