//! The kernel fast path's programs and maps: lagd decides, the kernel forwards.
//!
//! Two tc programs (source `bpf/fastpath.c`, built by `bpf/build.py` with a pinned clang into
//! `programs.rs`), attached with tcx links or as clsact filters ([`Attach`], [`crate::clsact`]),
//! forward data frames as the bond decided, read from a table this module writes:
//!
//! * the TAP's egress program sends a host frame to the member the [`Table`] names (the bonding
//!   hash modulo the usable members, the 256-bucket table, the active member, or balance-rr's
//!   turn from a per-CPU frame count) and passes to
//!   lagd what only lagd handles (ARP, neighbour discovery, IGMP/MLD, modes decided per frame);
//! * each member's ingress program hands a data frame to the TAP's ingress (the host stack)
//!   when the table lets that member deliver it, drops it otherwise, and passes slow protocols
//!   to lagd's own socket.
//!
//! [`FastPath::load`] creates the maps and loads both programs (no ELF reader, no libbpf: the
//! map descriptors are patched into the `ld_imm64` instructions the build recorded).
//! [`FastPath::set_table`] replaces the whole table at once: a new inner map is filled and then
//! swapped into the outer array-of-maps in one update, so a program sees either the old table
//! or the new one, never a mix (a program that looked the old one up keeps it until it returns:
//! the kernel frees it after an RCU grace period). Per-CPU counters per member and per bucket
//! are summed by [`FastPath::port_counters`] and [`FastPath::bucket_loads`].
//! [`FastPath::test_egress`] and [`FastPath::test_ingress`] run a program on one frame with
//! `BPF_PROG_TEST_RUN`, returning its verdict, the hash it computed and the member it chose.

mod program;
#[rustfmt::skip]
mod programs;

use program::{MapDef, MapId, Program};

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use crate::clsact::{Attach, Hook};

use crate::isolate::{
    BPF_TCX_EGRESS, BPF_TCX_INGRESS, BpfInsn, Hold, addr, attach_at, load_program, sys_bpf,
    sys_bpf_int,
};

/// Members the table holds (the kernel bond has no such limit; lagd's fast path does).
pub const MAX_MEMBERS: usize = 16;
/// "No member" in the table's port fields.
pub const NO_PORT: u8 = 0xff;
/// The encoded size of [`Table`] (`struct table` in the source).
pub const TABLE_LEN: usize = 516;

const BPF_MAP_CREATE: libc::c_int = 0;
const BPF_MAP_LOOKUP_ELEM: libc::c_int = 1;
const BPF_MAP_UPDATE_ELEM: libc::c_int = 2;
const BPF_PROG_TEST_RUN: libc::c_int = 10;
const BPF_MAP_LOOKUP_BATCH: libc::c_int = 24;
/// The kernel's internal "operation not supported" (`ENOTSUPP`, 524), which `bpf()` returns for
/// map types without batch operations.
const ENOTSUPP: i32 = 524;
const BPF_MAP_TYPE_ARRAY: u32 = 2;
/// `BPF_PSEUDO_MAP_FD`: an `ld_imm64` whose immediate is a map descriptor.
const BPF_PSEUDO_MAP_FD: u8 = 1;
/// `BPF_LD | BPF_IMM | BPF_DW`.
const LD_IMM64: u8 = 0x18;
/// `sizeof(struct __sk_buff)` and the offsets a test run uses.
const SKB_LEN: usize = 192;
const SKB_INGRESS_IFINDEX: usize = 36;
const SKB_CB: usize = 48;

/// How the TAP's program chooses a host frame's member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Every frame to lagd: the userspace path decides.
    Lagd = 0,
    /// The hash modulo the number of usable members indexes [`Table::usable`].
    Modulo = 1,
    /// The hash picks one of 256 buckets ([`Table::seed`]), each naming a member.
    Buckets = 2,
    /// Every frame on [`Table::active`].
    Active = 3,
    /// A copy of every frame on each member of [`Table::usable`] (broadcast).
    All = 4,
    /// Stripe: TCP frames through [`Table::buckets`] as 256 slots of 64 KiB each (the
    /// program counts bytes per CPU); a slot naming no member, and every frame that is not
    /// TCP, go to lagd.
    Stripe = 5,
    /// balance-rr: a turn per [`Table::rr_packets`] frames from a per-CPU frame count (a random
    /// turn with 0), the member [`Table::rr_next`] names at the turn modulo
    /// [`Table::rr_members`].
    RoundRobin = 6,
}

/// [`Table::policy`] for Open vSwitch's balance-slb hash (source MAC and VLAN), which has no
/// kernel number.
pub const POLICY_OVS_SLB: u32 = 16;

/// [`Table::policy`] for Open vSwitch's balance-tcp hash (its userspace datapath's 5-tuple
/// hash), which has no kernel number. A frame whose IPv6 extension headers go on too long for
/// the program is left to lagd.
pub const POLICY_OVS_TCP: u32 = 17;

/// The table the programs read: the bond's distribution in the kernel's terms. Ports are the
/// bond's member positions (`PortId`s), at most [`MAX_MEMBERS`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    /// How a host frame's member is chosen.
    pub rule: Rule,
    /// The hash policy, by the kernel's `xmit_hash_policy` number (0 layer2, 1 layer3+4, 2
    /// layer2+3, 5 vlan+srcmac), [`POLICY_OVS_SLB`] or [`POLICY_OVS_TCP`].
    pub policy: u32,
    /// The bucket seed.
    pub seed: u32,
    /// The TAP's interface index (where members deliver).
    pub tap_ifindex: u32,
    /// The active member.
    pub active: Option<u8>,
    /// Member position -> interface index (0: none).
    pub ifindex: [u32; MAX_MEMBERS],
    /// Usable members, in order.
    pub usable: Vec<u8>,
    /// Bucket -> member ([`NO_PORT`]: none).
    pub buckets: [u8; 256],
    /// Per member: its unicast frames reach the host.
    pub rx_unicast: [bool; MAX_MEMBERS],
    /// Per member: its broadcast and multicast frames reach the host.
    pub rx_multicast: [bool; MAX_MEMBERS],
    /// Untagged ARP frames from the members go to lagd's socket instead of the host (the ARP
    /// monitor reads them, and lagd hands them on).
    pub arp_to_lagd: bool,
    /// Per member: its confirmed LACP partner's MAC, whose slow-protocol frames pass the
    /// program's policer unlimited (`None`: every source is policed).
    pub slow_partner: [Option<[u8; 6]>; MAX_MEMBERS],
    /// balance-rr: `packets_per_slave` (0: a random member per frame).
    pub rr_packets: u32,
    /// balance-rr: the bond's members, usable or not (the turn is taken modulo this).
    pub rr_members: u32,
    /// balance-rr: member position -> the first usable member from that position on, in
    /// enslave order and round (the kernel's walk from a failed member's turn; [`NO_PORT`]:
    /// none).
    pub rr_next: [u8; MAX_MEMBERS],
}

impl Table {
    /// A table that sends everything to lagd.
    pub fn lagd_only(tap_ifindex: u32) -> Self {
        Self {
            rule: Rule::Lagd,
            policy: 0,
            seed: 0,
            tap_ifindex,
            active: None,
            ifindex: [0; MAX_MEMBERS],
            usable: Vec::new(),
            buckets: [NO_PORT; 256],
            rx_unicast: [false; MAX_MEMBERS],
            rx_multicast: [false; MAX_MEMBERS],
            arp_to_lagd: false,
            slow_partner: [None; MAX_MEMBERS],
            rr_packets: 0,
            rr_members: 0,
            rr_next: [NO_PORT; MAX_MEMBERS],
        }
    }

    /// The table's bytes, as `struct table` lays them out.
    pub fn encode(&self) -> io::Result<[u8; TABLE_LEN]> {
        if self.usable.len() > MAX_MEMBERS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("the fast path takes at most {MAX_MEMBERS} members"),
            ));
        }
        let mut b = [0u8; TABLE_LEN];
        let words = [
            self.rule as u32,
            self.policy,
            self.seed,
            self.usable.len() as u32,
            self.tap_ifindex,
            u32::from(self.active.unwrap_or(NO_PORT)),
        ];
        for (i, w) in words.iter().chain(self.ifindex.iter()).enumerate() {
            b[i * 4..i * 4 + 4].copy_from_slice(&w.to_ne_bytes());
        }
        let mut at = 24 + 4 * MAX_MEMBERS;
        b[at..at + self.usable.len()].copy_from_slice(&self.usable);
        at += MAX_MEMBERS;
        b[at..at + 256].copy_from_slice(&self.buckets);
        at += 256;
        for (i, (&u, &m)) in self.rx_unicast.iter().zip(&self.rx_multicast).enumerate() {
            b[at + i] = u8::from(u);
            b[at + MAX_MEMBERS + i] = u8::from(m);
        }
        at += 2 * MAX_MEMBERS;
        b[at..at + 4].copy_from_slice(&u32::from(self.arp_to_lagd).to_ne_bytes());
        at += 4;
        for (i, mac) in self.slow_partner.iter().enumerate() {
            if let Some(mac) = mac {
                b[at + 6 * i..at + 6 * i + 6].copy_from_slice(mac);
            }
        }
        at += 6 * MAX_MEMBERS;
        b[at..at + 4].copy_from_slice(&self.rr_packets.to_ne_bytes());
        b[at + 4..at + 8].copy_from_slice(&self.rr_members.to_ne_bytes());
        at += 8;
        b[at..at + MAX_MEMBERS].copy_from_slice(&self.rr_next);
        debug_assert_eq!(at + MAX_MEMBERS, TABLE_LEN);
        Ok(b)
    }
}

/// A member's counters, summed over CPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortCounters {
    /// Frames the TAP's program sent on the member.
    pub tx_packets: u64,
    /// Their bytes.
    pub tx_bytes: u64,
    /// Frames the member's program delivered to the host.
    pub rx_packets: u64,
    /// Their bytes.
    pub rx_bytes: u64,
    /// Frames the member's program dropped (the member may not deliver them).
    pub rx_dropped: u64,
    /// Slow-protocol frames the member's program dropped: not from the member's confirmed
    /// LACP partner, and over the policer's rate (200 per second per CPU, bursts of 50).
    pub slow_policed: u64,
}

/// A bucket's load, summed over CPUs (the latest time over CPUs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BucketLoad {
    /// Bytes sent through the bucket.
    pub bytes: u64,
    /// When the bucket last sent, in `CLOCK_MONOTONIC` nanoseconds (0: never).
    pub last_ns: u64,
}

/// The clock of [`BucketLoad::last_ns`] (`CLOCK_MONOTONIC`, as `bpf_ktime_get_ns`), now.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable `timespec` for the call; CLOCK_MONOTONIC always exists.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    debug_assert_eq!(rc, 0);
    u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(ts.tv_nsec).unwrap_or(0)
}

/// What a program did with one frame in a test run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TestRun {
    /// The program's return value (0 pass, 2 drop, 7 redirect).
    pub verdict: u32,
    /// The hash the TAP's program computed (`cb[0]`).
    pub hash: u32,
    /// The member the program chose or the frame came from (`cb[1]`; [`NO_PORT`]: none).
    pub port: u32,
}

/// A program attached to an interface, with a tcx link or as a clsact filter
/// ([`crate::clsact`]); detached when dropped.
#[derive(Debug)]
pub struct Attachment {
    hold: Hold,
    ifindex: u32,
}

impl Attachment {
    /// The interface the program is attached to.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// How the program is attached.
    pub fn how(&self) -> Attach {
        self.hold.how()
    }

    /// The tcx link's descriptor, for the service manager's store (see
    /// [`offer_tcx_links`](crate::isolate::offer_tcx_links)); none for a clsact filter.
    pub fn tcx_link(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.hold.tcx_link()
    }

    /// How many clsact filters an earlier lagd left on the hook were deleted (with either
    /// attachment, see [`FastPath::attach_tap`]).
    pub fn replaced(&self) -> usize {
        self.hold.replaced()
    }

    /// Whether attaching added the interface's clsact qdisc (which detaching then deletes,
    /// if no filter is left on it).
    pub fn added_qdisc(&self) -> bool {
        self.hold.added_qdisc()
    }

    /// Detaches the program now, reporting a failure to delete a clsact filter (dropping the
    /// value does the same silently).
    pub fn detach(self) -> io::Result<()> {
        self.hold.detach()
    }
}

/// The clsact filter slots of lagd's programs ([`crate::clsact::HANDLE_BASE`] + slot).
pub(crate) const SLOT_TAP_EGRESS: u8 = 1;
pub(crate) const SLOT_MEMBER_INGRESS: u8 = 2;

/// The loaded programs and their maps.
#[derive(Debug)]
pub struct FastPath {
    tables: OwnedFd,
    ports: OwnedFd,
    buckets: OwnedFd,
    stripe_rx: OwnedFd,
    /// Why the kernel refused the members' program with stripe's receiver (the one without
    /// it runs then), or `None`.
    no_receiver: Option<String>,
    egress: OwnedFd,
    ingress: OwnedFd,
    cpus: usize,
}

/// The `BPF_MAP_CREATE` member of `union bpf_attr`, through `map_name`, then zeroes.
#[repr(C, align(8))]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
    rest: [u32; 9],
}

const _: () = assert!(size_of::<MapCreateAttr>() == 80);

/// The `BPF_MAP_*_ELEM` member of `union bpf_attr`.
#[repr(C, align(8))]
#[derive(Default)]
struct MapElemAttr {
    map_fd: u32,
    pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

const _: () = assert!(size_of::<MapElemAttr>() == 32);

/// The `BPF_MAP_*_BATCH` member of `union bpf_attr`.
#[repr(C, align(8))]
#[derive(Default)]
struct MapBatchAttr {
    in_batch: u64,
    out_batch: u64,
    keys: u64,
    values: u64,
    count: u32,
    map_fd: u32,
    elem_flags: u64,
    flags: u64,
}

const _: () = assert!(size_of::<MapBatchAttr>() == 56);

/// The `BPF_PROG_TEST_RUN` member of `union bpf_attr`.
#[repr(C, align(8))]
#[derive(Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    pad: u32,
}

const _: () = assert!(size_of::<TestRunAttr>() == 80);

fn fd_u32(fd: &OwnedFd) -> u32 {
    // Descriptors are non-negative.
    fd.as_raw_fd() as u32
}

fn map_create(def: &MapDef, name: &str, inner: Option<&OwnedFd>) -> io::Result<OwnedFd> {
    let mut map_name = [0u8; 16];
    let n = name.len().min(15);
    map_name[..n].copy_from_slice(&name.as_bytes()[..n]);
    let mut attr = MapCreateAttr {
        map_type: def.map_type,
        key_size: def.key_size,
        value_size: def.value_size,
        max_entries: def.max_entries,
        map_flags: def.map_flags,
        inner_map_fd: inner.map_or(0, fd_u32),
        map_name,
        ..MapCreateAttr::default()
    };
    // SAFETY: `attr` is a `MapCreateAttr` for BPF_MAP_CREATE and holds no user addresses.
    unsafe { sys_bpf(BPF_MAP_CREATE, &mut attr) }
        .map_err(|e| crate::error::annotate(e, "bpf(BPF_MAP_CREATE)", Some(name)))
}

fn map_update(map: &OwnedFd, key: u32, value: &[u8]) -> io::Result<()> {
    let mut attr = MapElemAttr {
        map_fd: fd_u32(map),
        key: addr(&key),
        value: addr(value.as_ptr()),
        ..MapElemAttr::default()
    };
    // SAFETY: `attr` is a `MapElemAttr` for BPF_MAP_UPDATE_ELEM; `key` points to 4 bytes and
    // `value` to `value.len()` bytes, the map's value size (checked by the callers), both
    // borrowed for the call.
    unsafe { sys_bpf_int(BPF_MAP_UPDATE_ELEM, &mut attr) }
        .map(drop)
        .map_err(|e| crate::error::annotate(e, "bpf(BPF_MAP_UPDATE_ELEM)", None))
}

fn map_lookup(map: &OwnedFd, key: u32, value: &mut [u8]) -> io::Result<()> {
    let mut attr = MapElemAttr {
        map_fd: fd_u32(map),
        key: addr(&key),
        value: addr(value.as_mut_ptr()),
        ..MapElemAttr::default()
    };
    // SAFETY: `attr` is a `MapElemAttr` for BPF_MAP_LOOKUP_ELEM; `key` points to 4 bytes and
    // `value` to `value.len()` writable bytes, at least the map's value size times the possible
    // CPUs for a per-CPU map (checked by the callers), both borrowed for the call.
    unsafe { sys_bpf_int(BPF_MAP_LOOKUP_ELEM, &mut attr) }
        .map(drop)
        .map_err(|e| crate::error::annotate(e, "bpf(BPF_MAP_LOOKUP_ELEM)", None))
}

/// Reads the values of keys `0..entries` of the array `map` in one call into `values`
/// (`entries` times the map's per-key value length). `Ok(false)` when the kernel has no batch
/// operations for the map (the caller reads key by key).
fn map_lookup_all(map: &OwnedFd, entries: u32, values: &mut [u8]) -> io::Result<bool> {
    let mut keys = vec![0u32; entries as usize];
    let mut out_batch = 0u32;
    let mut attr = MapBatchAttr {
        out_batch: addr(&mut out_batch as *mut u32),
        keys: addr(keys.as_mut_ptr()),
        values: addr(values.as_mut_ptr()),
        count: entries,
        map_fd: fd_u32(map),
        ..MapBatchAttr::default()
    };
    // SAFETY: `attr` is a `MapBatchAttr` for BPF_MAP_LOOKUP_BATCH starting at the first key
    // (`in_batch` null): `out_batch` points to 4 writable bytes (an array's key), `keys` to
    // `entries` writable keys and `values` to `values.len()` writable bytes, which the callers
    // size as `entries` values of the map; all borrowed for the call.
    match unsafe { sys_bpf_int(BPF_MAP_LOOKUP_BATCH, &mut attr) } {
        Ok(_) => {}
        // The end of the map was reached within this batch: every key was read.
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EINVAL | ENOTSUPP | libc::EOPNOTSUPP)
            ) =>
        {
            return Ok(false);
        }
        Err(e) => return Err(crate::error::annotate(e, "bpf(BPF_MAP_LOOKUP_BATCH)", None)),
    }
    if attr.count != entries || keys.iter().enumerate().any(|(i, &k)| k as usize != i) {
        return Err(io::Error::other(format!(
            "bpf(BPF_MAP_LOOKUP_BATCH): {} of {entries} keys read",
            attr.count
        )));
    }
    Ok(true)
}

/// The number of possible CPUs, the stride of a per-CPU map's values.
fn possible_cpus() -> io::Result<usize> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/possible")?;
    let mut n = 0;
    for range in text.trim().split(',') {
        let (a, b) = range.split_once('-').unwrap_or((range, range));
        let parse = |s: &str| {
            s.parse::<usize>()
                .map_err(|_| io::Error::other(format!("cpu list '{}'", text.trim())))
        };
        n += parse(b)? - parse(a)? + 1;
    }
    Ok(n)
}

/// Patches the map descriptors into `program`'s instructions and loads it.
fn load(program: &Program, maps: &[(MapId, &OwnedFd)], attach_type: u32) -> io::Result<OwnedFd> {
    let mut insns: Vec<BpfInsn> = program
        .insns
        .iter()
        .map(|w| BpfInsn::from_le_bytes(w.to_le_bytes()))
        .collect();
    for &(at, id) in program.maps {
        let fd = maps
            .iter()
            .find(|(m, _)| *m == id)
            .map(|(_, fd)| fd)
            .ok_or_else(|| io::Error::other(format!("no map {id:?} for {}", program.name)))?;
        let insn = insns
            .get_mut(at)
            .filter(|i| i.code() == LD_IMM64)
            .ok_or_else(|| {
                io::Error::other(format!("{}: relocation {at} is not ld_imm64", program.name))
            })?;
        insn.set_src(BPF_PSEUDO_MAP_FD);
        insn.set_imm(fd.as_raw_fd());
    }
    let name = &program.name.as_bytes()[..program.name.len().min(15)];
    load_program(&insns, name, attach_type, program.name)
}

/// The maps the programs reference, created as the source defines them.
struct Maps {
    tables: OwnedFd,
    ports: OwnedFd,
    buckets: OwnedFd,
    stripe_tx: OwnedFd,
    stripe_rx: OwnedFd,
}

impl Maps {
    fn create() -> io::Result<Self> {
        let inner = map_create(&inner_def(), "lagd_table", None)?;
        let tables = map_create(&programs::TABLES_DEF, "lagd_tables", Some(&inner))?;
        drop(inner);
        Ok(Self {
            tables,
            ports: map_create(&programs::PORTS_DEF, "lagd_ports", None)?,
            buckets: map_create(&programs::BUCKETS_DEF, "lagd_buckets", None)?,
            stripe_tx: map_create(&programs::STRIPE_TX_DEF, "lagd_stripe_tx", None)?,
            stripe_rx: map_create(&programs::STRIPE_RX_DEF, "lagd_stripe_rx", None)?,
        })
    }
}

/// Whether this kernel loads one of lagd's eBPF programs ([`load_check`]).
#[derive(Debug)]
pub struct LoadCheck {
    /// The program's name.
    pub name: &'static str,
    /// Its instructions.
    pub instructions: usize,
    /// `Err` with the error (and the verifier's log) when the kernel refused it.
    pub result: Result<(), String>,
}

/// Loads each of lagd's eBPF programs on its own, attaching none, and says which this kernel
/// accepts: the fast path's TAP program, its members' program with and without stripe's
/// receiver (the one with it needs Linux 5.12), and member isolation's two drop programs
/// ([`crate::isolate`]). For a look at a kernel before running lagd on it (the kernel matrix
/// runs it in each kernel).
///
/// # Errors
/// Creating the maps fails (no `bpf()`, `EPERM` without `CAP_BPF`).
pub fn load_check() -> io::Result<Vec<LoadCheck>> {
    let m = Maps::create()?;
    let maps = [
        (MapId::Tables, &m.tables),
        (MapId::Ports, &m.ports),
        (MapId::Buckets, &m.buckets),
        (MapId::StripeTx, &m.stripe_tx),
        (MapId::StripeRx, &m.stripe_rx),
    ];
    let mut out = Vec::new();
    for (program, attach_type) in [
        (&programs::TAP_EGRESS, BPF_TCX_EGRESS),
        (&programs::MEMBER_INGRESS, BPF_TCX_INGRESS),
        (&programs::MEMBER_INGRESS_NO_CAS, BPF_TCX_INGRESS),
    ] {
        out.push(LoadCheck {
            name: program.name,
            instructions: program.insns.len(),
            result: load(program, &maps, attach_type)
                .map(drop)
                .map_err(|e| e.to_string()),
        });
    }
    for (raw, insns, attach_type) in crate::isolate::drop_programs() {
        let name = std::str::from_utf8(raw).unwrap_or("lagd drop program");
        out.push(LoadCheck {
            name,
            instructions: insns.len(),
            result: load_program(insns, raw, attach_type, name)
                .map(drop)
                .map_err(|e| e.to_string()),
        });
    }
    Ok(out)
}

impl FastPath {
    /// Creates the maps and loads both programs (not attached yet), with no table: until
    /// [`FastPath::set_table`], both programs pass every frame on.
    ///
    /// # Errors
    /// `bpf()` errors (`EPERM` without `CAP_BPF`, the verifier's log when a program is refused).
    pub fn load() -> io::Result<Self> {
        let Maps {
            tables,
            ports,
            buckets,
            stripe_tx,
            stripe_rx,
        } = Maps::create()?;
        let maps = [
            (MapId::Tables, &tables),
            (MapId::Ports, &ports),
            (MapId::Buckets, &buckets),
            (MapId::StripeTx, &stripe_tx),
            (MapId::StripeRx, &stripe_rx),
        ];
        let egress = load(&programs::TAP_EGRESS, &maps, BPF_TCX_EGRESS)?;
        // Stripe's receiver needs BPF compare-and-swap (Linux 5.12+). A kernel that refuses
        // the members' program with it gets the one without, which hands stripe frames to lagd.
        let (ingress, no_receiver) = match load(&programs::MEMBER_INGRESS, &maps, BPF_TCX_INGRESS) {
            Ok(fd) => (fd, None),
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => return Err(e),
            Err(full) => {
                let fd = load(&programs::MEMBER_INGRESS_NO_CAS, &maps, BPF_TCX_INGRESS)
                    .map_err(|e| io::Error::new(e.kind(), format!("{e}; and before: {full}")))?;
                (fd, Some(full.to_string()))
            }
        };
        Ok(Self {
            tables,
            ports,
            buckets,
            stripe_rx,
            no_receiver,
            egress,
            ingress,
            cpus: possible_cpus()?,
        })
    }

    /// Why stripe's receiver does not run in the kernel (the kernel refused the members'
    /// program with it: Linux before 5.12 has no BPF compare-and-swap), or `None` when it
    /// runs. Without it the members' program hands every stripe frame to lagd, which orders
    /// the flows itself.
    pub fn stripe_receiver_refused(&self) -> Option<&str> {
        self.no_receiver.as_deref()
    }

    /// Replaces the table the programs read, at once (see the [module docs](self)).
    pub fn set_table(&self, table: &Table) -> io::Result<()> {
        let bytes = table.encode()?;
        let inner = map_create(&inner_def(), "lagd_table", None)?;
        map_update(&inner, 0, &bytes)?;
        let fd = inner.as_raw_fd() as u32;
        map_update(&self.tables, 0, &fd.to_ne_bytes())
        // `inner` is closed here; the outer map holds it.
    }

    /// Maps stripe's receive table (`lagd_stripe_rx`) into lagd's memory, shared with the
    /// members' program.
    pub fn stripe_rx(&self) -> io::Result<StripeRxTable> {
        StripeRxTable::map(&self.stripe_rx)
    }

    /// Attaches the TAP's program to the TAP `ifindex`'s egress hook, with a tcx link or as a
    /// clsact filter as `how` says. Either way, lagd filters an earlier lagd left on the hook
    /// are deleted.
    ///
    /// # Errors
    ///
    /// With [`Attach::Tcx`], an error of kind [`io::ErrorKind::Unsupported`] carrying a
    /// [`TcxUnavailable`](crate::isolate::TcxUnavailable) on a kernel without tcx; with
    /// [`Attach::Tc`], the failing rtnetlink request (see [`TcFilter::attach`](crate::clsact::TcFilter::attach)).
    pub fn attach_tap(&self, ifindex: u32, how: Attach) -> io::Result<Attachment> {
        let name = programs::TAP_EGRESS.name;
        Ok(Attachment {
            hold: attach_at(
                &self.egress,
                name,
                ifindex,
                Hook::Egress,
                SLOT_TAP_EGRESS,
                how,
                0,
            )?,
            ifindex,
        })
    }

    /// Attaches the members' program to member `ifindex`'s ingress hook, as
    /// [`FastPath::attach_tap`] does the TAP's.
    pub fn attach_member(&self, ifindex: u32, how: Attach) -> io::Result<Attachment> {
        let name = programs::MEMBER_INGRESS.name;
        Ok(Attachment {
            hold: attach_at(
                &self.ingress,
                name,
                ifindex,
                Hook::Ingress,
                SLOT_MEMBER_INGRESS,
                how,
                0,
            )?,
            ifindex,
        })
    }

    /// Reads every entry of a per-CPU array map of `entries` values of `size` bytes, summing
    /// each 8-byte field over CPUs with `fold`.
    fn percpu<const N: usize>(
        &self,
        map: &OwnedFd,
        entries: u32,
        fold: impl Fn(usize, u64, u64) -> u64,
    ) -> io::Result<Vec<[u64; N]>> {
        let stride = (N * 8).next_multiple_of(8);
        let per_key = stride * self.cpus;
        let mut all = vec![0u8; per_key * entries as usize];
        if !map_lookup_all(map, entries, &mut all)? {
            for (key, chunk) in (0..entries).zip(all.chunks_exact_mut(per_key)) {
                map_lookup(map, key, chunk)?;
            }
        }
        let mut out = Vec::with_capacity(entries as usize);
        for buf in all.chunks_exact(per_key) {
            let mut sum = [0u64; N];
            for cpu in buf.chunks_exact(stride) {
                for (i, s) in sum.iter_mut().enumerate() {
                    let v = u64::from_ne_bytes(cpu[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
                    *s = fold(i, *s, v);
                }
            }
            out.push(sum);
        }
        Ok(out)
    }

    /// Per member position, then one entry for frames no member could take (its `tx_packets`
    /// and `tx_bytes`), summed over CPUs.
    pub fn port_counters(&self) -> io::Result<Vec<PortCounters>> {
        // The seventh field is the policer's state, not a counter (its sum means nothing).
        let rows = self.percpu::<7>(&self.ports, programs::PORTS_DEF.max_entries, |_, a, b| {
            a.wrapping_add(b)
        })?;
        Ok(rows
            .into_iter()
            .map(|r| PortCounters {
                tx_packets: r[0],
                tx_bytes: r[1],
                rx_packets: r[2],
                rx_bytes: r[3],
                rx_dropped: r[4],
                slow_policed: r[5],
            })
            .collect())
    }

    /// Per bucket: bytes summed over CPUs, and the latest time any CPU saw it.
    pub fn bucket_loads(&self) -> io::Result<Vec<BucketLoad>> {
        let rows = self.percpu::<2>(&self.buckets, 256, |i, a, b| {
            if i == 0 { a.wrapping_add(b) } else { a.max(b) }
        })?;
        Ok(rows
            .into_iter()
            .map(|r| BucketLoad {
                bytes: r[0],
                last_ns: r[1],
            })
            .collect())
    }

    fn test_run(&self, prog: &OwnedFd, frame: &[u8], ingress_ifindex: u32) -> io::Result<TestRun> {
        let mut ctx = [0u8; SKB_LEN];
        ctx[SKB_INGRESS_IFINDEX..SKB_INGRESS_IFINDEX + 4]
            .copy_from_slice(&ingress_ifindex.to_ne_bytes());
        let cb = [NO_PORT as u32; 5];
        for (i, w) in cb.iter().enumerate() {
            ctx[SKB_CB + i * 4..SKB_CB + i * 4 + 4].copy_from_slice(&w.to_ne_bytes());
        }
        let mut ctx_out = [0u8; SKB_LEN];
        let mut attr = TestRunAttr {
            prog_fd: fd_u32(prog),
            data_size_in: frame.len() as u32,
            data_in: addr(frame.as_ptr()),
            repeat: 1,
            ctx_size_in: SKB_LEN as u32,
            ctx_in: addr(ctx.as_ptr()),
            ctx_size_out: SKB_LEN as u32,
            ctx_out: addr(ctx_out.as_mut_ptr()),
            ..TestRunAttr::default()
        };
        // SAFETY: `attr` is a `TestRunAttr` for BPF_PROG_TEST_RUN: `data_in` points to
        // `data_size_in` readable bytes of `frame`, `ctx_in` to `SKB_LEN` readable bytes and
        // `ctx_out` to `SKB_LEN` writable bytes, all borrowed for the call; `data_out` is null
        // with size 0, so no frame is written back.
        let ran = unsafe { sys_bpf_int(BPF_PROG_TEST_RUN, &mut attr) };
        if let Err(e) = ran {
            // Before Linux 5.16 a test run refuses any ingress_ifindex (EINVAL): tell that
            // apart from a refused frame by running the frame without one.
            if ingress_ifindex != 0
                && e.raw_os_error() == Some(libc::EINVAL)
                && self.test_run(prog, frame, 0).is_ok()
            {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "bpf(BPF_PROG_TEST_RUN): this kernel's test runs cannot set \
                     ingress_ifindex (Linux 5.16+)",
                ));
            }
            return Err(crate::error::annotate(e, "bpf(BPF_PROG_TEST_RUN)", None));
        }
        let word = |at: usize| u32::from_ne_bytes(ctx_out[at..at + 4].try_into().expect("4 bytes"));
        Ok(TestRun {
            verdict: attr.retval,
            hash: word(SKB_CB),
            port: word(SKB_CB + 4),
        })
    }

    /// Runs the TAP's program on `frame` (no VLAN metadata: an outer tag is in the frame).
    pub fn test_egress(&self, frame: &[u8]) -> io::Result<TestRun> {
        self.test_run(&self.egress, frame, 0)
    }

    /// Runs the members' program on `frame` as if it arrived on interface `ingress_ifindex`.
    ///
    /// # Errors
    /// `bpf()` errors; of kind [`io::ErrorKind::Unsupported`] when `ingress_ifindex` is not 0
    /// and the kernel's test runs cannot set it (before Linux 5.16).
    pub fn test_ingress(&self, frame: &[u8], ingress_ifindex: u32) -> io::Result<TestRun> {
        self.test_run(&self.ingress, frame, ingress_ifindex)
    }
}

/// Flow slots in stripe's receive table (`STRIPE_RX_SLOTS` in the source).
pub const STRIPE_RX_SLOTS: usize = 1024;
/// Bytes per entry of stripe's receive table (`struct stripe_rx`).
const STRIPE_RX_ENTRY: usize = 80;
const _: () = assert!(programs::STRIPE_RX_DEF.value_size as usize == STRIPE_RX_ENTRY);
const _: () = assert!(programs::STRIPE_RX_DEF.max_entries as usize == STRIPE_RX_SLOTS);

/// Stripe's receive table as lagd sees it: the array map `lagd_stripe_rx` mapped into memory,
/// shared with the members' program (which changes an entry's word only by compare-and-swap,
/// so lagd does the same). Every access goes through atomics: the program may write any entry
/// at any time.
pub struct StripeRxTable {
    base: std::ptr::NonNull<u8>,
    len: usize,
}

impl std::fmt::Debug for StripeRxTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StripeRxTable")
            .field("len", &self.len)
            .finish()
    }
}

impl StripeRxTable {
    fn map(fd: &OwnedFd) -> io::Result<Self> {
        // SAFETY: sysconf has no memory effects.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        let page = usize::try_from(page).unwrap_or(4096).max(1);
        let len = (STRIPE_RX_SLOTS * STRIPE_RX_ENTRY).div_ceil(page) * page;
        // SAFETY: a new shared mapping of `len` bytes of the map's values (the kernel checks
        // that the map is mmapable and that `len` fits); no existing memory is touched.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(crate::error::annotate(
                io::Error::last_os_error(),
                "mmap",
                Some("lagd_stripe_rx"),
            ));
        }
        let base =
            std::ptr::NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap"))?;
        Ok(Self { base, len })
    }

    fn u64_at(&self, slot: usize, off: usize) -> &std::sync::atomic::AtomicU64 {
        let at = (slot % STRIPE_RX_SLOTS) * STRIPE_RX_ENTRY + off;
        assert!(at + 8 <= self.len && at % 8 == 0);
        // SAFETY: `at` is inside the mapping (asserted) and 8-aligned (the mapping is
        // page-aligned, entries are 80 bytes, `off` is a multiple of 8), and the mapping lives
        // as long as `self`; the memory is shared with the kernel program, which is why it is
        // only ever accessed atomically.
        unsafe {
            &*self
                .base
                .as_ptr()
                .add(at)
                .cast::<std::sync::atomic::AtomicU64>()
        }
    }

    fn u32_at(&self, slot: usize, off: usize) -> &std::sync::atomic::AtomicU32 {
        let at = (slot % STRIPE_RX_SLOTS) * STRIPE_RX_ENTRY + off;
        assert!(at + 4 <= self.len && at % 4 == 0);
        // SAFETY: as in `u64_at`, for 4 aligned bytes.
        unsafe {
            &*self
                .base
                .as_ptr()
                .add(at)
                .cast::<std::sync::atomic::AtomicU32>()
        }
    }

    /// Slot `slot`'s word: next sequence number (bits 0-31), generation (32-47), state (48-55).
    pub fn word(&self, slot: usize) -> &std::sync::atomic::AtomicU64 {
        self.u64_at(slot, 0)
    }

    /// When the slot's flow was last delivered or handed over (`CLOCK_MONOTONIC` ns).
    pub fn last_ns(&self, slot: usize) -> &std::sync::atomic::AtomicU64 {
        self.u64_at(slot, 8)
    }

    /// The slot's flow key words.
    pub fn key(&self, slot: usize) -> [u32; 10] {
        std::array::from_fn(|i| {
            self.u32_at(slot, 16 + 4 * i)
                .load(std::sync::atomic::Ordering::Acquire)
        })
    }

    /// Writes the slot's flow key words (only while the slot's state keeps the program off it).
    pub fn set_key(&self, slot: usize, key: &[u32; 10]) {
        for (i, k) in key.iter().enumerate() {
            self.u32_at(slot, 16 + 4 * i)
                .store(*k, std::sync::atomic::Ordering::Release);
        }
    }

    /// Segments and payload bytes the program delivered through the slot.
    pub fn delivered(&self, slot: usize) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (
            self.u64_at(slot, 56).load(Relaxed),
            self.u64_at(slot, 64).load(Relaxed),
        )
    }

    /// Rounds the program sent segments of the slot's flow that were ahead of the next in
    /// sequence, while the flow was moving, back through their member's queue (each time it
    /// saw one again counts).
    pub fn held(&self, slot: usize) -> u64 {
        self.u64_at(slot, 72)
            .load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Drop for StripeRxTable {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, of `len` bytes, unmapped once; no reference into
        // it outlives `self` (they borrow it).
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// The inner map: one table.
fn inner_def() -> MapDef {
    MapDef {
        map_type: BPF_MAP_TYPE_ARRAY,
        key_size: 4,
        value_size: TABLE_LEN as u32,
        max_entries: 1,
        map_flags: 0,
    }
}

/// Keeps the calling thread on CPU `cpu` from now on: the programs keep some state per CPU
/// (stripe's byte count), so a test comparing runs against a model must not migrate between
/// them.
pub fn pin_thread_to_cpu(cpu: usize) -> io::Result<()> {
    // SAFETY: `cpu_set_t` is plain data for which all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    // SAFETY: `cpu` is below CPU_SETSIZE (checked above), so CPU_SET writes inside `set`.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid, initialised `cpu_set_t` of the size passed; pid 0 is the
    // calling thread.
    let r = unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) };
    if r != 0 {
        return Err(crate::error::annotate(
            io::Error::last_os_error(),
            "sched_setaffinity",
            None,
        ));
    }
    Ok(())
}
