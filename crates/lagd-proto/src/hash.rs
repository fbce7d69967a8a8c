//! Transmit hashing: every `xmit_hash_policy` of the Linux bonding driver, bit-exact, plus the
//! Open vSwitch `balance-slb` and `balance-tcp` hashes.
//!
//! # The kernel model
//! The numbers match `bond_xmit_hash()` of a v6.17-era little-endian kernel (see
//! `shared/research/linux-bonding.md` §2 for the facts, read from `drivers/net/bonding/bond_main.c`
//! and `net/core/flow_dissector.c`). lagd hashes frames as the bond device would see them:
//!
//! - The **outermost VLAN tag** (802.1Q or 802.1ad) is treated as a hardware-accelerated tag,
//!   which is what a VLAN interface stacked on a kernel bond produces: it is metadata, not data
//!   (only a whole tag: a frame that ends inside its TCI or before the EtherType after it keeps
//!   the tag in band, as the kernel's untagging needs 18 bytes, and hashes its 14-byte header
//!   with the TPID as the type).
//!   `layer2`, `layer2+3` and `layer3+4` ignore it; `vlan+srcmac` uses its full TCI (priority
//!   bits included); the encap policies start at the inner EtherType. A second, in-band tag
//!   (QinQ) makes `skb->protocol` a TPID, so the bond's own parser falls back to the layer2
//!   formula with EtherType 0x8100 while the flow dissector walks through it.
//! - The network header starts right after the MAC header (and the accelerated tag), as for a
//!   forwarded frame.
//! - lagd has no socket hash, so the kernel's `encap3+4` shortcut (`skb->l4_hash`: return the
//!   socket's random `sk_txhash`) never applies: `encap3+4` always dissects.
//! - TIPC keep-alive messages get a random key in the kernel; lagd uses 0 for them, the only
//!   deterministic choice.
//!
//! `testdata/real-frames.txt` holds 137 frames (72 captured on this kernel's veth, 13 captured
//! after re-tagging, 52 built by hand for cases a capture cannot produce) with the hashes of
//! `tools/hashref.py`, an independent Python model of the kernel written from the same facts;
//! `tests/real_frames.rs` checks every policy against it.
//!
//! The building blocks: `E = dst[5] ^ src[5] ^ ethertype` (last MAC bytes only); address words
//! are the IPv4 address loaded little-endian, or the XOR of an IPv6 address's four
//! little-endian words; the ports word is the first four transport bytes loaded little-endian;
//! the ICMP word is `type | code << 8 | id << 16` for echo/timestamp types. The fold is
//! `h ^= dst ^ src; h ^= h >> 16; h ^= h >> 8`, then `>> 1` for the 3+4 policies only.
//!
//! # Why a dissector of its own
//! The frame is read here by `KernelView`, a deliberate copy of the kernel's dissection
//! (`bond_flow_dissect`, `__skb_flow_dissect`), not through [`crate::wire`]'s views: the hash
//! must reproduce the kernel's choices, faults included (a tag lifted from a frame too short
//! for it, headers the kernel reads without checking their length, fallbacks to the layer2
//! formula), which a validating view would refuse. Everything else in lagd reads frames through
//! the views.
//!
//! # Open vSwitch
//! Both hashes are those of Open vSwitch 3.1 (Debian's build), checked against a running
//! ovs-vswitchd by `crates/lagd/tests/ovs_hash.rs`, and modelled independently in
//! `tools/hashref.py`.
//! - `ovs-slb`: `hash_mac(src_mac, vid, 0)` from OVS `lib/packets.h` / `lib/hash.h`
//!   (`bond_hash_src()` in `ofproto/bond.c`): the 64-bit value `vid << 48 | src_mac` through
//!   OVS's murmur-style `hash_uint64_basis`. `ovs-appctl bond/hash MAC VLAN BASIS` prints its
//!   low 8 bits (the bucket); [`ovs_hash_mac`] takes a basis.
//! - `ovs-tcp`: the hash the userspace datapath keeps as a packet's RSS hash when the NIC gave
//!   none, which a balance-tcp bond with `lb-output-action` masks with `0xff` to pick the bucket
//!   (without it, the datapath's hash action makes `hash_int(rss, basis)` of it). OVS computes
//!   it while parsing the packet (`miniflow_extract()` in `lib/flow.c`): for TCP (data offset
//!   valid) and UDP, `dp_packet_update_rss_hash_ipv4/ipv6_tcp_udp()` of `lib/dp-packet.h` hashes
//!   the addresses, the protocol byte of the IP header itself (for IPv6 the fixed header's
//!   next-header field, so a hop-by-hop header hashes as protocol 0) and the ports; for
//!   everything else `miniflow_hash_5tuple(flow, 0)` hashes the addresses, the protocol found
//!   after the extension headers and, for TCP/UDP/SCTP/ICMP/ICMPv6, the ports word (ICMP: type
//!   and code). OVS parses one VLAN tag (`other_config:vlan-limit` defaults to 1), LLC/SNAP,
//!   IPv4 and IPv6 only when their length fields fit the frame (otherwise addresses and
//!   protocol count as 0), ARP (sender and target addresses, the opcode as protocol), and no
//!   tunnels.
//!
//! Both follow OVS's portable `hash_add`/`hash_finish` (murmur3 steps), which is what a generic
//! x86-64 build (Debian's) uses; a build with `-msse4.2` uses CRC32 steps instead and gives
//! other numbers. OVS maps hashes to members through a 256-bucket table it rebalances, so for
//! these two policies the member index `hash % n` is lagd's deterministic starting point, not a
//! prediction of OVS's live bucket map.

use crate::wire::be16;
use core::fmt;
use core::str::FromStr;

/// A transmit hash policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HashPolicy {
    /// `layer2`: last bytes of the MACs and the EtherType.
    Layer2,
    /// `layer2+3`: `layer2` plus the IP addresses.
    Layer23,
    /// `layer3+4`: IP addresses and transport ports (or ICMP identifier).
    Layer34,
    /// `encap2+3`: like `layer2+3`, with the innermost addresses the flow dissector reaches.
    Encap23,
    /// `encap3+4`: like `layer3+4`, with the innermost headers the flow dissector reaches.
    Encap34,
    /// `vlan+srcmac`: VLAN TCI and source MAC.
    VlanSrcMac,
    /// Open vSwitch `balance-slb`: source MAC and VLAN.
    OvsSlb,
    /// Open vSwitch `balance-tcp`: the 5-tuple.
    OvsTcp,
}

impl HashPolicy {
    /// Every policy, kernel ones first.
    pub const ALL: [Self; 8] = [
        Self::Layer2,
        Self::Layer23,
        Self::Layer34,
        Self::Encap23,
        Self::Encap34,
        Self::VlanSrcMac,
        Self::OvsSlb,
        Self::OvsTcp,
    ];

    /// The six policies of the Linux bonding driver.
    pub const KERNEL: [Self; 6] = [
        Self::Layer2,
        Self::Layer23,
        Self::Layer34,
        Self::Encap23,
        Self::Encap34,
        Self::VlanSrcMac,
    ];

    /// The name users write (`xmit_hash_policy=` value, or `ovs-slb`/`ovs-tcp`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Layer2 => "layer2",
            Self::Layer23 => "layer2+3",
            Self::Layer34 => "layer3+4",
            Self::Encap23 => "encap2+3",
            Self::Encap34 => "encap3+4",
            Self::VlanSrcMac => "vlan+srcmac",
            Self::OvsSlb => "ovs-slb",
            Self::OvsTcp => "ovs-tcp",
        }
    }

    /// The kernel's numeric value of the policy (note: 1 is `layer3+4`, 2 is `layer2+3`), as
    /// printed in `/proc/net/bonding` (`Transmit Hash Policy: layer3+4 (1)`); `None` for OVS's.
    pub const fn kernel_value(self) -> Option<u8> {
        match self {
            Self::Layer2 => Some(0),
            Self::Layer34 => Some(1),
            Self::Layer23 => Some(2),
            Self::Encap23 => Some(3),
            Self::Encap34 => Some(4),
            Self::VlanSrcMac => Some(5),
            Self::OvsSlb | Self::OvsTcp => None,
        }
    }

    /// The policy with the kernel's numeric value `v`.
    pub fn from_kernel_value(v: u8) -> Option<Self> {
        Self::KERNEL
            .into_iter()
            .find(|p| p.kernel_value() == Some(v))
    }
}

impl fmt::Display for HashPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown policy name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownPolicy(pub String);

impl fmt::Display for UnknownPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown hash policy '{}' (expected one of:", self.0)?;
        for p in HashPolicy::ALL {
            write!(f, " {p}")?;
        }
        f.write_str(")")
    }
}

impl std::error::Error for UnknownPolicy {}

impl FromStr for HashPolicy {
    type Err = UnknownPolicy;

    /// Parses a policy name exactly as the kernel spells it (or `ovs-slb`, `ovs-tcp`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| UnknownPolicy(s.to_owned()))
    }
}

/// Receives notes on which fields fed a hash; see [`xmit_hash_traced`].
pub trait Trace {
    /// Whether notes are wanted at all; when `false` the hashing code skips formatting them.
    const ENABLED: bool;
    /// Records that `field` contributed `value`.
    fn note(&mut self, field: &'static str, value: fmt::Arguments<'_>);
}

/// A [`Trace`] that records nothing (what [`xmit_hash`] uses).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoTrace;

impl Trace for NoTrace {
    const ENABLED: bool = false;
    #[inline(always)]
    fn note(&mut self, _: &'static str, _: fmt::Arguments<'_>) {}
}

/// A [`Trace`] that keeps every note, for `lagctl hash --explain` and `lagctl explain`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Explain {
    /// `(field, value)` in the order the hash consumed them.
    pub notes: Vec<(&'static str, String)>,
}

impl Trace for Explain {
    const ENABLED: bool = true;
    fn note(&mut self, field: &'static str, value: fmt::Arguments<'_>) {
        self.notes.push((field, value.to_string()));
    }
}

macro_rules! note {
    ($t:expr, $field:expr, $($arg:tt)*) => {
        if T::ENABLED {
            $t.note($field, format_args!($($arg)*));
        }
    };
}

/// The hash of `frame` (starting at the Ethernet header, no FCS) under `policy`.
#[inline]
pub fn xmit_hash(policy: HashPolicy, frame: &[u8]) -> u32 {
    xmit_hash_traced(policy, frame, &mut NoTrace)
}

/// The member a hash selects among `members` usable members: `hash % members` (unsigned 32-bit,
/// as the kernel's `bond_xmit_3ad_xor_slave_get`), or `None` when there is no member.
#[inline]
pub fn member_index(hash: u32, members: usize) -> Option<usize> {
    match u32::try_from(members) {
        Ok(0) => None,
        // The kernel's unsigned 32-bit modulo; a 32-bit divide is also much cheaper than 64.
        Ok(n) => Some((hash % n) as usize),
        // More members than fit in 32 bits cannot exist; keep the arithmetic total anyway.
        Err(_) => Some(hash as usize),
    }
}

/// A hash function specialised for one policy: what a dataplane keeps per bond, so the policy
/// is decided once instead of per frame. Gives the same numbers as [`xmit_hash`].
pub fn hasher(policy: HashPolicy) -> fn(&[u8]) -> u32 {
    fn with<const P: u8>(frame: &[u8]) -> u32 {
        xmit_hash_traced(HashPolicy::ALL[P as usize], frame, &mut NoTrace)
    }
    match policy {
        HashPolicy::Layer2 => with::<0>,
        HashPolicy::Layer23 => with::<1>,
        HashPolicy::Layer34 => with::<2>,
        HashPolicy::Encap23 => with::<3>,
        HashPolicy::Encap34 => with::<4>,
        HashPolicy::VlanSrcMac => with::<5>,
        HashPolicy::OvsSlb => with::<6>,
        HashPolicy::OvsTcp => with::<7>,
    }
}

/// Open vSwitch's source-MAC hash with a basis: `hash_mac(mac, vid, basis)` of OVS
/// `lib/packets.h`, what a `balance-slb` bond computes with `other_config:bond-hash-basis`
/// (`ovs-appctl bond/hash MAC VLAN BASIS` prints its low 8 bits, the bucket). With basis 0 it
/// is [`xmit_hash`] under [`HashPolicy::OvsSlb`] for a frame from `mac` on VLAN `vid`.
pub fn ovs_hash_mac(mac: [u8; 6], vid: u16, basis: u32) -> u32 {
    ovs::hash_mac(mac, vid, basis)
}

/// `hash % members` without a divide, for a member count that changes rarely (the dataplane
/// builds one per distribution change). Exact for every 32-bit hash: it uses the precomputed
/// 64-bit reciprocal of the divisor (Lemire, Kaser and Kurz, "Faster remainder by direct
/// computation", 2019).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemberMod {
    n: u32,
    m: u64,
}

impl MemberMod {
    /// Prepares `hash % members`; `None` when there are no members (or more than `u32::MAX`).
    pub fn new(members: usize) -> Option<Self> {
        let n = u32::try_from(members).ok().filter(|&n| n > 0)?;
        Some(Self {
            n,
            m: (u64::MAX / u64::from(n)).wrapping_add(1),
        })
    }

    /// The member count.
    pub const fn members(&self) -> usize {
        self.n as usize
    }

    /// `hash % members`, the same number [`member_index`] gives.
    #[inline(always)]
    pub fn index(&self, hash: u32) -> usize {
        let low = self.m.wrapping_mul(u64::from(hash));
        ((u128::from(low) * u128::from(self.n)) >> 64) as usize
    }
}

/// Like [`xmit_hash`], reporting the fields that fed the hash to `trace`.
#[inline(always)]
pub fn xmit_hash_traced<T: Trace>(policy: HashPolicy, frame: &[u8], trace: &mut T) -> u32 {
    let v = KernelView::new(frame);
    match policy {
        HashPolicy::Layer2 => v.eth_hash(trace),
        HashPolicy::VlanSrcMac => v.vlan_srcmac_hash(trace),
        HashPolicy::Layer23 | HashPolicy::Layer34 => {
            let l34 = policy == HashPolicy::Layer34;
            let mut fk = FlowKeys::default();
            if !v.bond_flow_dissect(l34, &mut fk, trace) {
                note!(trace, "fallback", "no IPv4/IPv6 header: layer2 formula");
                return v.eth_hash(trace);
            }
            v.finish(l34, &fk, trace)
        }
        HashPolicy::Encap23 | HashPolicy::Encap34 => {
            let l34 = policy == HashPolicy::Encap34;
            let mut fk = FlowKeys::default();
            if !v.flow_dissect(&mut fk, trace) {
                note!(trace, "fallback", "flow dissector failed: layer2 formula");
                return v.eth_hash(trace);
            }
            v.finish(l34, &fk, trace)
        }
        HashPolicy::OvsSlb => ovs::slb_hash(frame, trace),
        HashPolicy::OvsTcp => ovs::tcp_hash(frame, trace),
    }
}

#[inline(always)]
fn le32(b: &[u8], at: usize) -> u32 {
    // One bounds check for the four bytes.
    let w: [u8; 4] = b[at..at + 4].try_into().expect("4-byte slice");
    u32::from_le_bytes(w)
}

/// `ipv6_addr_hash()`: XOR of the four little-endian words of the address at `at`.
#[inline(always)]
fn ipv6_word(b: &[u8], at: usize) -> u32 {
    le32(b, at) ^ le32(b, at + 4) ^ le32(b, at + 8) ^ le32(b, at + 12)
}

const ETH_P_IP: u16 = 0x0800;
const ETH_P_IPV6: u16 = 0x86dd;
const ETH_P_8021Q: u16 = 0x8100;
const ETH_P_8021AD: u16 = 0x88a8;

const IPPROTO_ICMP: u8 = 1;
const IPPROTO_ICMPV6: u8 = 58;

/// What the flow dissection found (the kernel's `struct flow_keys`, as far as bonding reads it).
#[derive(Debug, Clone, Copy, Default)]
struct FlowKeys {
    /// `flow_get_u32_src()`.
    src: u32,
    /// `flow_get_u32_dst()`.
    dst: u32,
    /// The ports word.
    ports: u32,
    /// The ICMP key as a word: `type | code << 8 | id << 16`.
    icmp: u32,
}

impl FlowKeys {
    fn icmp_id(&self) -> u16 {
        (self.icmp >> 16) as u16
    }
}

/// The frame as the kernel bond would hold it: the outermost tag as metadata.
struct KernelView<'a> {
    b: &'a [u8],
    /// The accelerated tag's TCI.
    tci: Option<u16>,
    /// `skb->protocol`, also the EtherType the MAC header carries once the tag is lifted.
    proto: u16,
    /// The network header offset in `b`.
    nhoff: usize,
}

impl<'a> KernelView<'a> {
    #[inline(always)]
    fn new(b: &'a [u8]) -> Self {
        // Only a whole tag (TCI and the EtherType it encloses: an 18-byte header) is lifted,
        // as the kernel's untagging needs `VLAN_ETH_HLEN` bytes; a frame that ends inside or
        // right after its tag keeps it in band, and hashes its 14-byte header with the TPID as
        // the type.
        if b.len() >= 18 {
            let t = be16(b, 12);
            if t == ETH_P_8021Q || t == ETH_P_8021AD {
                return Self {
                    b,
                    tci: Some(be16(b, 14)),
                    proto: be16(b, 16),
                    nhoff: 18,
                };
            }
        }
        let proto = if b.len() >= 14 { be16(b, 12) } else { 0 };
        Self {
            b,
            tci: None,
            proto,
            nhoff: 14,
        }
    }

    /// `bond_eth_hash()`.
    #[inline(always)]
    fn eth_hash<T: Trace>(&self, t: &mut T) -> u32 {
        // The MAC header ends at `nhoff` (the accelerated tag lifted out of it).
        if self.b.len() < self.nhoff {
            note!(t, "eth", "frame shorter than an Ethernet header: hash 0");
            return 0;
        }
        note!(
            t,
            "eth",
            "dst[5]=0x{:02x} src[5]=0x{:02x} type=0x{:04x}",
            self.b[5],
            self.b[11],
            self.proto
        );
        u32::from(self.b[5]) ^ u32::from(self.b[11]) ^ u32::from(self.proto)
    }

    /// `bond_vlan_srcmac_hash()`.
    fn vlan_srcmac_hash<T: Trace>(&self, t: &mut T) -> u32 {
        // The MAC header ends at `nhoff` (the accelerated tag lifted out of it).
        if self.b.len() < self.nhoff {
            note!(t, "eth", "frame shorter than an Ethernet header: hash 0");
            return 0;
        }
        let s = &self.b[6..12];
        let vendor = u32::from(s[0]) << 16 | u32::from(s[1]) << 8 | u32::from(s[2]);
        let dev = u32::from(s[3]) << 16 | u32::from(s[4]) << 8 | u32::from(s[5]);
        let vlan = u32::from(self.tci.unwrap_or(0));
        note!(
            t,
            "vlan",
            "tci=0x{vlan:04x}{}",
            if self.tci.is_some() {
                ""
            } else {
                " (untagged)"
            }
        );
        note!(t, "srcmac", "vendor=0x{vendor:06x} device=0x{dev:06x}");
        vlan ^ vendor ^ dev
    }

    /// `bond_flow_ip()`: parses an IPv4/IPv6 header at `*nhoff` per the bond's own parser.
    #[inline(always)]
    fn bond_flow_ip<T: Trace>(
        &self,
        fk: &mut FlowKeys,
        nhoff: &mut usize,
        ip_proto: &mut Option<u8>,
        l34: bool,
        t: &mut T,
    ) -> bool {
        let b = self.b;
        let at = *nhoff;
        if self.proto == ETH_P_IP {
            // A fixed-size view: the field reads below need no bounds checks.
            let Some(ip) = b.get(at..at + 20) else {
                return false;
            };
            let ip: &[u8; 20] = ip.try_into().expect("20-byte slice");
            fk.src = u32::from_le_bytes([ip[12], ip[13], ip[14], ip[15]]);
            fk.dst = u32::from_le_bytes([ip[16], ip[17], ip[18], ip[19]]);
            *nhoff = at + usize::from(ip[0] & 0x0f) * 4;
            let frag = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0;
            if !frag {
                *ip_proto = Some(ip[9]);
            }
            note!(
                t,
                "ipv4",
                "{} > {} proto {}{}",
                v4_text(b, at + 12),
                v4_text(b, at + 16),
                b[at + 9],
                if frag { " (fragment: no ports)" } else { "" }
            );
        } else if self.proto == ETH_P_IPV6 {
            if at + 40 > b.len() {
                return false;
            }
            fk.src = ipv6_word(b, at + 8);
            fk.dst = ipv6_word(b, at + 24);
            *nhoff = at + 40;
            *ip_proto = Some(b[at + 6]);
            note!(
                t,
                "ipv6",
                "{} > {} next-header {}",
                v6_text(b, at + 8),
                v6_text(b, at + 24),
                b[at + 6]
            );
        } else {
            return false;
        }
        if l34 {
            if let Some(p) = *ip_proto {
                fk.ports = get_ports(b, *nhoff, p);
                note!(t, "ports", "{}", PortsText(fk.ports, p));
            }
        }
        true
    }

    /// `bond_flow_dissect()` for layer2+3 and layer3+4.
    #[inline(always)]
    fn bond_flow_dissect<T: Trace>(&self, l34: bool, fk: &mut FlowKeys, t: &mut T) -> bool {
        let mut nhoff = self.nhoff;
        let mut ip_proto = None;
        if !self.bond_flow_ip(fk, &mut nhoff, &mut ip_proto, l34, t) {
            return false;
        }
        // ICMP errors quote the packet that caused them: hash them with that flow.
        if let Some(p @ (IPPROTO_ICMP | IPPROTO_ICMPV6)) = ip_proto {
            fk.icmp = icmp_key(self.b, nhoff);
            let ty = fk.icmp as u8;
            let is_err = if p == IPPROTO_ICMP {
                matches!(ty, 3 | 4 | 5 | 11 | 12)
            } else {
                matches!(ty, 1..=4)
            };
            note!(
                t,
                "icmp",
                "type {} code {} id {}",
                ty,
                (fk.icmp >> 8) as u8,
                fk.icmp_id()
            );
            if !is_err {
                return true;
            }
            note!(t, "icmp", "error message: hashing the quoted packet");
            nhoff += 8;
            return self.bond_flow_ip(fk, &mut nhoff, &mut ip_proto, l34, t);
        }
        true
    }

    /// `__skb_flow_dissect()` with the bonding key set and no flags, from `skb->protocol` at the
    /// network header.
    fn flow_dissect<T: Trace>(&self, fk: &mut FlowKeys, t: &mut T) -> bool {
        let b = self.b;
        let len = b.len();
        let mut proto = self.proto;
        let mut nhoff = self.nhoff;
        let mut num_hdrs = 0u32;
        let mut vlan_depth = 0u8;
        let mut is_fragment = false;
        // Bounded like MAX_FLOW_DISSECT_HDRS: past 15 headers the dissection ends "good".
        let mut allowed = || {
            num_hdrs += 1;
            num_hdrs <= 15
        };
        'proto: loop {
            let mut ip_proto: u8;
            match proto {
                ETH_P_IP => {
                    if nhoff + 20 > len || b[nhoff] & 0x0f < 5 {
                        return false;
                    }
                    let at = nhoff;
                    nhoff += usize::from(b[at] & 0x0f) * 4;
                    ip_proto = b[at + 9];
                    fk.src = le32(b, at + 12);
                    fk.dst = le32(b, at + 16);
                    note!(
                        t,
                        "ipv4",
                        "{} > {} proto {}",
                        v4_text(b, at + 12),
                        v4_text(b, at + 16),
                        ip_proto
                    );
                    if be16(b, at + 6) & 0x3fff != 0 {
                        // Any fragment, the first included: no ports.
                        note!(t, "ipv4", "fragment: no ports");
                        return true;
                    }
                }
                ETH_P_IPV6 => {
                    if nhoff + 40 > len {
                        return false;
                    }
                    let at = nhoff;
                    ip_proto = b[at + 6];
                    nhoff += 40;
                    fk.src = ipv6_word(b, at + 8);
                    fk.dst = ipv6_word(b, at + 24);
                    note!(
                        t,
                        "ipv6",
                        "{} > {} next-header {}",
                        v6_text(b, at + 8),
                        v6_text(b, at + 24),
                        ip_proto
                    );
                }
                ETH_P_8021Q | ETH_P_8021AD => {
                    if vlan_depth == 0 && self.tci.is_some() {
                        // The dissector takes the first tag it meets for the accelerated one and
                        // jumps to skb->protocol without consuming a header.
                        proto = self.proto;
                    } else {
                        if nhoff + 4 > len {
                            return false;
                        }
                        proto = be16(b, nhoff + 2);
                        nhoff += 4;
                        note!(t, "vlan", "in-band tag 0x{:04x}", be16(b, nhoff - 4));
                    }
                    vlan_depth = vlan_depth.saturating_add(1);
                    if allowed() {
                        continue 'proto;
                    }
                    return true;
                }
                0x8864 => {
                    // PPPoE session: version/type 1/1, code 0, then a PPP protocol field that
                    // may be compressed to one byte.
                    if nhoff + 8 > len || b[nhoff] != 0x11 || b[nhoff + 1] != 0 {
                        return false;
                    }
                    let mut ppp = be16(b, nhoff + 6);
                    if ppp & 0x0100 != 0 {
                        ppp >>= 8;
                        nhoff += 7;
                    } else {
                        nhoff += 8;
                    }
                    proto = match ppp {
                        0x0021 => ETH_P_IP,
                        0x0057 => ETH_P_IPV6,
                        0x0281 => 0x8847,
                        0x0283 => 0x8848,
                        p if p & 0x0101 == 0x0001 => return true,
                        _ => return false,
                    };
                    if allowed() {
                        continue 'proto;
                    }
                    return true;
                }
                0x88ca => {
                    // TIPC: the key is the fourth header word (source node), random for
                    // keep-alives in the kernel (0 here).
                    if nhoff + 16 > len {
                        return false;
                    }
                    let keepalive =
                        u32::from_be_bytes([b[nhoff], b[nhoff + 1], b[nhoff + 2], b[nhoff + 3]])
                            & 0x0e08_0000
                            == 0x0e08_0000;
                    fk.src = if keepalive { 0 } else { le32(b, nhoff + 12) };
                    fk.dst = 0;
                    note!(t, "tipc", "key 0x{:08x}", fk.src);
                    return true;
                }
                // MPLS, ARP, RARP, CFM: bonding asks for none of their keys, so the dissector
                // stops with success having read nothing.
                0x8847 | 0x8848 | 0x0806 | 0x8035 | 0x8902 => {
                    note!(t, "l3", "EtherType 0x{proto:04x}: no addresses");
                    return true;
                }
                // FCoE: success when its header fits.
                0x8906 => return nhoff + 38 <= len,
                // PTP over Ethernet: success when its header fits.
                0x88f7 => return nhoff + 34 <= len,
                // batman-adv: only version 15 unicast packets are entered, past the 10-byte
                // batman header and the inner Ethernet header, to the inner EtherType.
                0x4305 => {
                    if nhoff + 24 > len || b[nhoff + 1] != 15 || b[nhoff] != 0x40 {
                        return false;
                    }
                    proto = be16(b, nhoff + 22);
                    nhoff += 24;
                    if allowed() {
                        continue 'proto;
                    }
                    return true;
                }
                // HSR/PRP: skip the 6-byte tag.
                0x892f | 0x88fb => {
                    if nhoff + 6 > len {
                        return false;
                    }
                    proto = be16(b, nhoff + 4);
                    nhoff += 6;
                    if allowed() {
                        continue 'proto;
                    }
                    return true;
                }
                _ => return false,
            }

            // The transport-protocol step, repeated for IPv6 extension headers.
            loop {
                enum Next {
                    Done,
                    Bad,
                    Proto,
                    IpProto,
                }
                let next = match ip_proto {
                    47 => match gre(b, &mut nhoff) {
                        GreStep::Bad => Next::Bad,
                        GreStep::Good => Next::Done,
                        GreStep::Again(p) => {
                            note!(t, "gre", "inner EtherType 0x{p:04x}");
                            proto = p;
                            Next::Proto
                        }
                    },
                    0 | 43 | 60 if proto == ETH_P_IPV6 => {
                        if nhoff + 2 > len {
                            Next::Bad
                        } else {
                            ip_proto = b[nhoff];
                            nhoff += (usize::from(b[nhoff + 1]) + 1) << 3;
                            Next::IpProto
                        }
                    }
                    44 if proto == ETH_P_IPV6 => {
                        if nhoff + 8 > len {
                            Next::Bad
                        } else {
                            is_fragment = true;
                            ip_proto = b[nhoff];
                            nhoff += 8;
                            note!(t, "ipv6", "fragment header: no ports");
                            Next::Done
                        }
                    }
                    4 => {
                        proto = ETH_P_IP;
                        Next::Proto
                    }
                    41 => {
                        proto = ETH_P_IPV6;
                        Next::Proto
                    }
                    137 => {
                        proto = 0x8847;
                        Next::Proto
                    }
                    IPPROTO_ICMP | IPPROTO_ICMPV6 => {
                        fk.icmp = icmp_key(b, nhoff);
                        note!(
                            t,
                            "icmp",
                            "type {} code {} id {}",
                            fk.icmp as u8,
                            (fk.icmp >> 8) as u8,
                            fk.icmp_id()
                        );
                        Next::Done
                    }
                    _ => Next::Done,
                };
                if !is_fragment {
                    fk.ports = get_ports(b, nhoff, ip_proto);
                }
                match next {
                    Next::Bad => return false,
                    Next::Done => {
                        if !is_fragment && fk.ports != 0 {
                            note!(t, "ports", "{}", PortsText(fk.ports, ip_proto));
                        }
                        return true;
                    }
                    Next::Proto => {
                        if allowed() {
                            continue 'proto;
                        }
                        return true;
                    }
                    Next::IpProto => {
                        if !allowed() {
                            return true;
                        }
                    }
                }
            }
        }
    }

    /// The end of `__bond_xmit_hash()` and `bond_ip_hash()`.
    #[inline(always)]
    fn finish<T: Trace>(&self, l34: bool, fk: &FlowKeys, t: &mut T) -> u32 {
        let mut hash = if !l34 {
            self.eth_hash(t)
        } else if fk.icmp_id() != 0 {
            note!(t, "l4", "ICMP word 0x{:08x}", fk.icmp);
            fk.icmp
        } else {
            fk.ports
        };
        hash ^= fk.dst ^ fk.src;
        hash ^= hash >> 16;
        hash ^= hash >> 8;
        if l34 {
            note!(
                t,
                "fold",
                "xor-fold of addresses and l4 word, lowest bit dropped"
            );
            hash >> 1
        } else {
            note!(t, "fold", "xor-fold of addresses and layer2 word");
            hash
        }
    }
}

/// `skb_flow_get_ports()`: the first transport word (the SPI for ESP, the SPI at offset 4 for
/// AH), little-endian, or 0.
#[inline(always)]
fn get_ports(b: &[u8], thoff: usize, ip_proto: u8) -> u32 {
    let off = match ip_proto {
        6 | 17 | 33 | 50 | 132 | 136 => 0,
        51 => 4,
        _ => return 0,
    };
    match b.get(thoff + off..thoff + off + 4) {
        Some(w) => u32::from_le_bytes(w.try_into().expect("4-byte slice")),
        None => 0,
    }
}

/// `skb_flow_get_icmp_tci()`: `type | code << 8 | id << 16`, the id only for types that carry
/// one (0 replaced by 1), all zero when the 8-byte header is cut.
#[inline(always)]
fn icmp_key(b: &[u8], thoff: usize) -> u32 {
    if thoff + 8 > b.len() {
        return 0;
    }
    let ty = b[thoff];
    let id = if matches!(ty, 0 | 8 | 13 | 14 | 128 | 129) {
        match be16(b, thoff + 4) {
            0 => 1,
            id => id,
        }
    } else {
        0
    };
    u32::from(ty) | u32::from(b[thoff + 1]) << 8 | u32::from(id) << 16
}

enum GreStep {
    Bad,
    Good,
    Again(u16),
}

/// `__skb_flow_dissect_gre()`: GRE versions 0 and 1 (PPTP) without routing.
fn gre(b: &[u8], nhoff: &mut usize) -> GreStep {
    const CSUM: u16 = 0x8000;
    const ROUTING: u16 = 0x4000;
    const KEY: u16 = 0x2000;
    const SEQ: u16 = 0x1000;
    const ACK: u16 = 0x0080;
    let at = *nhoff;
    if at + 4 > b.len() {
        return GreStep::Bad;
    }
    let flags = be16(b, at);
    if flags & ROUTING != 0 {
        return GreStep::Good;
    }
    let version = flags & 7;
    if version > 1 {
        return GreStep::Good;
    }
    let mut proto = be16(b, at + 2);
    if version == 1 && !(proto == 0x880b && flags & KEY != 0) {
        return GreStep::Good;
    }
    let mut off = 4;
    if flags & CSUM != 0 {
        off += 4;
    }
    if flags & KEY != 0 {
        if at + off + 4 > b.len() {
            return GreStep::Bad;
        }
        off += 4;
    }
    if flags & SEQ != 0 {
        off += 4;
    }
    if version == 0 {
        if proto == 0x6558 {
            if at + off + 14 > b.len() {
                return GreStep::Bad;
            }
            proto = be16(b, at + off + 12);
            off += 14;
        }
    } else {
        if flags & ACK != 0 {
            off += 4;
        }
        if at + off + 4 > b.len() {
            return GreStep::Bad;
        }
        match be16(b, at + off + 2) {
            0x0021 => proto = ETH_P_IP,
            0x0057 => proto = ETH_P_IPV6,
            _ => {}
        }
        off += 4;
    }
    *nhoff = at + off;
    GreStep::Again(proto)
}

/// The IPv4 address at `b[at..at + 4]`, for notes (dotted quad).
fn v4_text(b: &[u8], at: usize) -> std::net::Ipv4Addr {
    std::net::Ipv4Addr::new(b[at], b[at + 1], b[at + 2], b[at + 3])
}

/// Whether the TCP header at `b[l4..]`, with `avail` bytes of transport header and payload,
/// has a data offset that covers its 20-byte header and fits (Open vSwitch's `parse_tcp()`
/// takes ports only then; the planner's per-flow shortcut relies on the same test).
#[inline(always)]
pub(crate) fn tcp_offset_fits(b: &[u8], l4: usize, avail: usize) -> bool {
    let offset = b.get(l4 + 12).map_or(0, |v| usize::from(v >> 4) * 4);
    (20..=avail).contains(&offset)
}

/// The IPv6 address at `b[at..at + 16]`, for notes.
fn v6_text(b: &[u8], at: usize) -> std::net::Ipv6Addr {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[at..at + 16]);
    std::net::Ipv6Addr::from(a)
}

/// Shows a ports word as the ports it holds.
struct PortsText(u32, u8);

impl fmt::Display for PortsText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bytes = self.0.to_le_bytes();
        match self.1 {
            50 | 51 => write!(
                f,
                "SPI 0x{:08x} (word 0x{:08x})",
                u32::from_be_bytes(bytes),
                self.0
            ),
            _ => write!(
                f,
                "{} > {} (word 0x{:08x})",
                u16::from_be_bytes([bytes[0], bytes[1]]),
                u16::from_be_bytes([bytes[2], bytes[3]]),
                self.0
            ),
        }
    }
}

/// Open vSwitch's bond hashes.
mod ovs {
    use super::{Trace, be16, le32};

    /// `mhash_add()` of OVS `lib/hash.h` (a murmur3 step).
    #[inline(always)]
    pub(super) fn hash_add(hash: u32, data: u32) -> u32 {
        let d = data
            .wrapping_mul(0xcc9e_2d51)
            .rotate_left(15)
            .wrapping_mul(0x1b87_3593);
        (hash ^ d)
            .rotate_left(13)
            .wrapping_mul(5)
            .wrapping_add(0xe654_6b64)
    }

    /// `hash_add64()`: the low word, then the high word.
    #[inline(always)]
    fn hash_add64(hash: u32, data: u64) -> u32 {
        hash_add(hash_add(hash, data as u32), (data >> 32) as u32)
    }

    /// `hash_finish()`: murmur3's finaliser after mixing in `fin`.
    #[inline(always)]
    pub(super) fn hash_finish(hash: u32, fin: u32) -> u32 {
        let mut h = hash ^ fin;
        h ^= h >> 16;
        h = h.wrapping_mul(0x85eb_ca6b);
        h ^= h >> 13;
        h = h.wrapping_mul(0xc2b2_ae35);
        h ^ (h >> 16)
    }

    /// `hash_mac(mac, vid, basis)` of OVS `lib/packets.h`: `vid << 48 | mac` through
    /// `hash_uint64_basis()`.
    pub(super) fn hash_mac(mac: [u8; 6], vid: u16, basis: u32) -> u32 {
        let x = u64::from(vid) << 48 | mac.iter().fold(0u64, |a, &m| a << 8 | u64::from(m));
        hash_finish(hash_add64(basis, x), 8)
    }

    /// `hash_mac(src, vid, 0)`.
    pub(super) fn slb_hash<T: Trace>(b: &[u8], t: &mut T) -> u32 {
        let mut mac = [0u8; 6];
        let mut vid = 0u16;
        if b.len() >= 14 {
            mac.copy_from_slice(&b[6..12]);
            if b.len() >= 18 && matches!(be16(b, 12), 0x8100 | 0x88a8) {
                vid = be16(b, 14) & 0x0fff;
            }
        }
        note!(
            t,
            "ovs-slb",
            "src {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x} vlan {}",
            mac[0],
            mac[1],
            mac[2],
            mac[3],
            mac[4],
            mac[5],
            vid
        );
        hash_mac(mac, vid, 0)
    }

    const TCP: u8 = 6;
    const UDP: u8 = 17;
    const SCTP: u8 = 132;
    const ICMP: u8 = 1;
    const ICMPV6: u8 = 58;

    /// What `miniflow_extract()` leaves in the fields the 5-tuple hash reads. A field OVS does
    /// not fill reads as 0.
    #[derive(Default)]
    struct Flow {
        /// `dl_type`, or `None` for a frame shorter than an Ethernet header.
        dl_type: Option<u16>,
        /// `nw_src`, `nw_dst` (IPv4 or ARP), little-endian loads.
        v4: [u32; 2],
        /// `ipv6_src`, `ipv6_dst` as eight little-endian words.
        v6: [u32; 8],
        /// `nw_proto`.
        proto: u8,
        /// `tp_src` and `tp_dst` as one little-endian word.
        ports: u32,
        /// Set when `miniflow_extract()` computed the packet's RSS hash itself
        /// (`dp_packet_update_rss_hash_ipv{4,6}_tcp_udp()`, for TCP and UDP): the protocol word
        /// it hashes, the IPv4 protocol or the IPv6 header's own next-header field.
        rss_proto: Option<u8>,
    }

    /// `miniflow_extract()` of OVS 3.1 (`lib/flow.c`), as far as the 5-tuple hash reads it.
    fn extract<T: Trace>(b: &[u8], t: &mut T) -> Flow {
        let mut f = Flow::default();
        if b.len() < 14 {
            note!(
                t,
                "ovs-tcp",
                "frame shorter than an Ethernet header: constant hash"
            );
            return f;
        }
        // parse_vlan(): one tag, as `other_config:vlan-limit` defaults to 1, if 6 bytes remain.
        let mut at = 12;
        if matches!(be16(b, at), 0x8100 | 0x88a8) && b.len() >= at + 6 {
            note!(
                t,
                "vlan",
                "tag 0x{:04x} skipped (OVS parses one tag)",
                be16(b, at + 2)
            );
            at += 4;
        }
        // parse_ethertype(): a length field means LLC, and only SNAP with OUI 0 carries a type.
        let mut dl_type = be16(b, at);
        at += 2;
        if dl_type < 0x600 {
            let snap = b
                .get(at..at + 8)
                .filter(|h| h[..6] == [0xaa, 0xaa, 0x03, 0, 0, 0]);
            dl_type = match snap {
                Some(h) if u16::from_be_bytes([h[6], h[7]]) >= 0x600 => {
                    at += 8;
                    note!(t, "llc", "SNAP header, EtherType 0x{:04x}", be16(h, 6));
                    be16(h, 6)
                }
                _ => 0x05ff,
            };
        }
        f.dl_type = Some(dl_type);
        let (l4, end, later) = match dl_type {
            0x0800 => {
                // ipv4_sanity_check(): a broken header leaves addresses and protocol unset.
                let hl = b.get(at).map_or(0, |v| usize::from(v & 0x0f) * 4);
                let tot = if at + 4 <= b.len() {
                    usize::from(be16(b, at + 2))
                } else {
                    0
                };
                if at + 20 > b.len() || hl < 20 || at + hl > b.len() || tot < hl {
                    note!(t, "ipv4", "header cut or IHL < 5: addresses and protocol 0");
                    return f;
                }
                if at + tot > b.len() {
                    note!(
                        t,
                        "ipv4",
                        "total length {tot} beyond the frame: addresses and protocol 0"
                    );
                    return f;
                }
                f.v4 = [le32(b, at + 12), le32(b, at + 16)];
                f.proto = b[at + 9];
                let later = be16(b, at + 6) & 0x1fff != 0;
                note!(
                    t,
                    "ipv4",
                    "{} > {} proto {}{}",
                    super::v4_text(b, at + 12),
                    super::v4_text(b, at + 16),
                    f.proto,
                    if later {
                        " (later fragment: no ports)"
                    } else {
                        ""
                    }
                );
                (at + hl, at + tot, later)
            }
            0x86dd => {
                // ipv6_sanity_check(): the header and its payload length must fit.
                if at + 40 > b.len() || at + 40 + usize::from(be16(b, at + 4)) > b.len() {
                    note!(
                        t,
                        "ipv6",
                        "header cut or payload length beyond the frame: addresses and protocol 0"
                    );
                    return f;
                }
                for (w, v) in f.v6.iter_mut().enumerate() {
                    *v = le32(b, at + 8 + 4 * w);
                }
                let end = at + 40 + usize::from(be16(b, at + 4));
                let nxt = b[at + 6];
                note!(
                    t,
                    "ipv6",
                    "{} > {} next-header {nxt}",
                    super::v6_text(b, at + 8),
                    super::v6_text(b, at + 24)
                );
                match ipv6_upper(b, at + 40, end, nxt) {
                    Some((p, l4, later)) => {
                        f.proto = p;
                        if p != nxt {
                            note!(t, "ipv6", "extension headers walked to protocol {p}");
                        }
                        if later {
                            note!(t, "ipv6", "later fragment: protocol 44, no ports");
                        }
                        (l4, end, later)
                    }
                    None => {
                        note!(t, "ipv6", "extension header cut: protocol 0");
                        return f;
                    }
                }
            }
            0x0806 => {
                // Ethernet/IPv4 ARP: sender and target protocol addresses, opcode as protocol.
                let ok = at + 28 <= b.len()
                    && be16(b, at) == 1
                    && be16(b, at + 2) == 0x0800
                    && b[at + 4] == 6
                    && b[at + 5] == 4;
                if !ok {
                    note!(t, "arp", "not Ethernet/IPv4 ARP: addresses and protocol 0");
                    return f;
                }
                f.v4 = [le32(b, at + 14), le32(b, at + 24)];
                let op = be16(b, at + 6);
                f.proto = if op <= 0xff { op as u8 } else { 0 };
                note!(
                    t,
                    "arp",
                    "{} > {} opcode {op} as protocol",
                    super::v4_text(b, at + 14),
                    super::v4_text(b, at + 24)
                );
                return f;
            }
            other => {
                note!(
                    t,
                    "ovs-tcp",
                    "EtherType 0x{other:04x} is not IP or ARP: constant hash"
                );
                return f;
            }
        };
        if later {
            return f;
        }
        let avail = end.saturating_sub(l4);
        let ok = match f.proto {
            // parse_tcp(): the data offset must cover the 20-byte header and fit.
            TCP => super::tcp_offset_fits(b, l4, avail),
            UDP | ICMP | ICMPV6 => avail >= 8,
            SCTP => avail >= 12,
            _ => false,
        };
        if !ok {
            if matches!(f.proto, TCP | UDP | ICMP | ICMPV6 | SCTP) {
                note!(t, "l4", "protocol {} header cut: ports 0", f.proto);
            }
            return f;
        }
        f.ports = match f.proto {
            ICMP | ICMPV6 => u32::from(b[l4]) << 8 | u32::from(b[l4 + 1]) << 24,
            _ => le32(b, l4),
        };
        if matches!(f.proto, TCP | UDP) {
            f.rss_proto = Some(if dl_type == 0x86dd {
                b[at + 6]
            } else {
                f.proto
            });
        }
        f
    }

    /// `parse_ipv6_ext_hdrs__()`: walks extension headers from `at` up to the payload's `end`.
    /// Returns the upper protocol (44 for a later fragment), the offset of its header and
    /// whether the packet is a later fragment; `None` when an extension header is cut.
    fn ipv6_upper(b: &[u8], mut at: usize, end: usize, nxt: u8) -> Option<(u8, usize, bool)> {
        let mut proto = nxt;
        loop {
            if !matches!(proto, 0 | 43 | 60 | 51 | 44) {
                return Some((proto, at, false));
            }
            if at + 8 > end {
                return None;
            }
            let len = match proto {
                51 => (usize::from(b[at + 1]) + 2) * 4,
                44 => 8,
                _ => (usize::from(b[at + 1]) + 1) * 8,
            };
            let next = b[at];
            if proto == 44 && be16(b, at + 2) & 0xfff8 != 0 {
                return Some((44, at + 8, true));
            }
            proto = next;
            if at + len > end {
                return None;
            }
            at += len;
        }
    }

    /// The hash OVS 3.1's userspace datapath keeps as the packet's RSS hash (what
    /// `lb-output-action` reads): `dp_packet_update_rss_hash_ipv{4,6}_tcp_udp()` for TCP and
    /// UDP, `miniflow_hash_5tuple(flow, 0)` for everything else.
    pub(super) fn tcp_hash<T: Trace>(b: &[u8], t: &mut T) -> u32 {
        let f = extract(b, t);
        let mut hash = 0u32;
        match f.dl_type {
            Some(0x86dd) => {
                for w in f.v6 {
                    hash = hash_add(hash, w);
                }
            }
            Some(0x0800 | 0x0806) => {
                hash = hash_add(hash_add(hash, f.v4[0]), f.v4[1]);
            }
            _ => return hash_finish(hash, 42),
        }
        if let Some(p) = f.rss_proto {
            note!(
                t,
                "protocol",
                "{p}{}",
                if p == f.proto {
                    ""
                } else {
                    " (the IPv6 header's next-header field, as OVS's TCP/UDP RSS hash reads it)"
                }
            );
            note!(t, "ports", "{}", super::PortsText(f.ports, f.proto));
            return hash_finish(hash_add(hash_add(hash, u32::from(p)), f.ports), 42);
        }
        note!(t, "protocol", "{}", f.proto);
        hash = hash_add(hash, u32::from(f.proto));
        if !matches!(f.proto, TCP | UDP | SCTP | ICMP | ICMPV6) {
            return hash_finish(hash, 42);
        }
        if matches!(f.proto, ICMP | ICMPV6) {
            note!(
                t,
                "l4",
                "type {} code {} (word 0x{:08x})",
                (f.ports >> 8) as u8,
                (f.ports >> 24) as u8,
                f.ports
            );
        } else {
            note!(t, "ports", "{}", super::PortsText(f.ports, f.proto));
        }
        hash_finish(hash_add(hash, f.ports), 42)
    }
}

#[cfg(test)]
mod test;
