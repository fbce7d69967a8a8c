//! Flows: the compact key the planner aggregates frames by, its fast hasher, and flow records
//! (a flow given as fields rather than as a frame, from a flow list or `lagctl explain --flow`)
//! with the representative frame the hash code is run on.
//!
//! # Which frames can share one hash computation
//! The planner hashes a frame with the daemon's own code. Most frames of a capture belong to a
//! flow it has already hashed, and for a **simple** frame every policy reads only fields that
//! are in the [`FlowKey`]; [`extract`] says whether a frame is simple, and the planner then
//! reuses the hashes of the flow's first simple frame. Simple means: Ethernet with at most one
//! VLAN tag (the tag lagd treats as accelerated), then either
//! - IPv4 with a 20-byte header, not a fragment (MF clear, offset 0), TCP or UDP, a total
//!   length that covers the full TCP (20-byte) or UDP (8-byte) header and fits in the
//!   captured bytes; or
//! - IPv6 whose next header is TCP or UDP, with a payload length that fits in the captured
//!   bytes and covers the full transport header;
//!
//! and for TCP a data offset that covers the 20-byte header and fits in the IP payload (Open
//! vSwitch's parser, and so `ovs-tcp`, reads the ports only then).
//!
//! The keys the policies read from such a frame are: the MACs (all of `layer2`'s last bytes,
//! `vlan+srcmac`'s and `ovs-slb`'s whole source MAC), the tag's TCI, the EtherType, the
//! addresses, the protocol and the ports. The unit test `simple_frames_hash_as_their_key`
//! checks the claim with random frames: two simple frames with the same key hash alike under
//! every policy, whatever their other bytes. Every other frame (ICMP, fragments, GRE, QinQ,
//! ARP, truncated captures...) is hashed on its own.

use core::fmt;
use core::hash::{BuildHasherDefault, Hasher};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::wire::gre::GrePacket;
use crate::wire::{EthernetAddress, be16};

/// `FlowKey` flag: the frame had a VLAN tag (the outermost one is in the key).
const F_TAGGED: u8 = 1;
/// `FlowKey` flag: the addresses are IPv4.
const F_IPV4: u8 = 2;
/// `FlowKey` flag: the addresses are IPv6.
const F_IPV6: u8 = 4;
/// `FlowKey` flag: the ports are valid (TCP, UDP, SCTP, DCCP, UDP-Lite first fragment).
const F_PORTS: u8 = 8;
/// `FlowKey` flag: the "ports" are an ICMP type/code and identifier.
const F_ICMP: u8 = 16;
/// `FlowKey` flags: the tunnel kind, 3 bits (see [`Tunnel`]).
const F_TUNNEL_SHIFT: u8 = 5;

/// A tunnel the planner recognises around a flow's inner traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tunnel {
    /// VXLAN (UDP port 4789, or 8472 as Linux used before the IANA port).
    Vxlan,
    /// Geneve (UDP port 6081).
    Geneve,
    /// GRE (IP protocol 47).
    Gre,
    /// IPv4 in IP (protocol 4).
    IpIp,
    /// IPv6 in IP (protocol 41).
    Ip6In4,
}

impl Tunnel {
    const ALL: [Self; 5] = [
        Self::Vxlan,
        Self::Geneve,
        Self::Gre,
        Self::IpIp,
        Self::Ip6In4,
    ];

    /// A short name.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Vxlan => "VXLAN",
            Self::Geneve => "Geneve",
            Self::Gre => "GRE",
            Self::IpIp => "IP-in-IP",
            Self::Ip6In4 => "IPv6-in-IP",
        }
    }

    /// Whether the tunnel rides on UDP, so an encapsulator can put entropy in the outer source
    /// port (which `layer3+4` then sees); GRE and IP-in-IP have no ports.
    pub const fn has_outer_ports(self) -> bool {
        matches!(self, Self::Vxlan | Self::Geneve)
    }

    /// Whether the kernel's flow dissector (the `encap2+3`/`encap3+4` policies) walks into it:
    /// it does for GRE and IP-in-IP, not for UDP tunnels.
    pub const fn kernel_dissects(self) -> bool {
        !self.has_outer_ports()
    }

    const fn code(self) -> u8 {
        match self {
            Self::Vxlan => 1,
            Self::Geneve => 2,
            Self::Gre => 3,
            Self::IpIp => 4,
            Self::Ip6In4 => 5,
        }
    }

    fn from_code(c: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.code() == c)
    }
}

/// The fields a flow is told apart by: MACs, outermost VLAN tag, EtherType (after that tag),
/// addresses, protocol and ports (for ICMP: the identifier and type/code). Seven words, compared
/// and hashed as words.
#[derive(Debug, Clone, Copy, Eq, Default, PartialOrd, Ord)]
pub struct FlowKey {
    /// 0: dst MAC (bytes 0..6) | EtherType << 48. 1: src MAC | TCI << 48. 2: src port | dst port
    /// << 16 | protocol << 32 | flags << 40. 3-4: source address. 5-6: destination address.
    w: [u64; 7],
}

impl PartialEq for FlowKey {
    #[inline(always)]
    fn eq(&self, other: &Self) -> bool {
        // Branch-free word compare: the derived one calls `memcmp`, a third of the planner's
        // time in a profile.
        let (a, b) = (&self.w, &other.w);
        ((a[0] ^ b[0])
            | (a[1] ^ b[1])
            | (a[2] ^ b[2])
            | (a[3] ^ b[3])
            | (a[4] ^ b[4])
            | (a[5] ^ b[5])
            | (a[6] ^ b[6]))
            == 0
    }
}

impl core::hash::Hash for FlowKey {
    #[inline]
    fn hash<H: Hasher>(&self, state: &mut H) {
        // One call: `KeyHasher` mixes the seven words in parallel.
        state.write_u64(mix_words(&self.w));
    }
}

#[inline(always)]
fn fold_mul(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

/// Mixes the key words: four independent 64x64->128 multiplies folded together (the
/// construction of wyhash-style hashes), so hashing a key costs a few cycles.
#[inline(always)]
fn mix_words(w: &[u64; 7]) -> u64 {
    const K: [u64; 8] = [
        0xa076_1d64_78bd_642f,
        0xe703_7ed1_a0b4_28db,
        0x8ebc_6af0_9c88_c6e3,
        0x5899_65cc_7537_4cc3,
        0x1d8e_4e27_c47d_124f,
        0x9e37_79b9_7f4a_7c15,
        0xbf58_476d_1ce4_e5b9,
        0x94d0_49bb_1331_11eb,
    ];
    let a = fold_mul(w[0] ^ K[0], w[1] ^ K[1]);
    let b = fold_mul(w[2] ^ K[2], w[3] ^ K[3]);
    let c = fold_mul(w[4] ^ K[4], w[5] ^ K[5]);
    let d = fold_mul(w[6] ^ K[6], K[7]);
    fold_mul(a ^ c ^ K[4], b ^ d ^ K[5])
}

/// The hasher of the planner's flow table: it expects one `write_u64` per key (what
/// [`FlowKey`]'s `Hash` does) and falls back to an FxHash-style word mix for anything else.
/// Not for untrusted keys where collisions are an attack: a capture is the user's own data.
#[derive(Debug, Clone, Copy, Default)]
pub struct KeyHasher {
    h: u64,
}

impl Hasher for KeyHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(w));
        }
    }

    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.h = (self.h.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    #[inline]
    fn finish(&self) -> u64 {
        // hashbrown takes the bucket from the low bits and a tag from the top 7: spread both.
        fold_mul(self.h, 0x9e37_79b9_7f4a_7c15)
    }
}

/// `BuildHasher` for [`KeyHasher`].
pub type BuildKeyHasher = BuildHasherDefault<KeyHasher>;

#[inline(always)]
fn mac48(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w[..6].copy_from_slice(&b[..6]);
    u64::from_le_bytes(w)
}

fn mac_of(w: u64) -> EthernetAddress {
    let b = w.to_le_bytes();
    EthernetAddress([b[0], b[1], b[2], b[3], b[4], b[5]])
}

impl FlowKey {
    /// Destination MAC.
    pub fn dst_mac(&self) -> EthernetAddress {
        mac_of(self.w[0])
    }

    /// Source MAC.
    pub fn src_mac(&self) -> EthernetAddress {
        mac_of(self.w[1])
    }

    /// EtherType after the outermost VLAN tag (0 for a frame shorter than 14 bytes).
    pub fn ethertype(&self) -> u16 {
        (self.w[0] >> 48) as u16
    }

    /// The outermost VLAN tag's TCI, if the frame was tagged.
    pub fn tci(&self) -> Option<u16> {
        (self.flags() & F_TAGGED != 0).then_some((self.w[1] >> 48) as u16)
    }

    /// IP protocol (0 when not IP).
    pub fn protocol(&self) -> u8 {
        (self.w[2] >> 32) as u8
    }

    /// Source and destination ports, when the protocol has them.
    pub fn ports(&self) -> Option<(u16, u16)> {
        (self.flags() & F_PORTS != 0).then_some((self.w[2] as u16, (self.w[2] >> 16) as u16))
    }

    /// ICMP (or ICMPv6) type, code and identifier (0 for types without one).
    pub fn icmp(&self) -> Option<(u8, u8, u16)> {
        (self.flags() & F_ICMP != 0).then_some((
            (self.w[2] >> 24) as u8,
            (self.w[2] >> 16) as u8,
            self.w[2] as u16,
        ))
    }

    /// Source and destination IP addresses, when the frame carries IPv4 or IPv6.
    pub fn addrs(&self) -> Option<(IpAddr, IpAddr)> {
        let f = self.flags();
        if f & F_IPV4 != 0 {
            let s = (self.w[3] as u32).to_le_bytes();
            let d = (self.w[5] as u32).to_le_bytes();
            Some((Ipv4Addr::from(s).into(), Ipv4Addr::from(d).into()))
        } else if f & F_IPV6 != 0 {
            let v6 = |a: u64, b: u64| {
                let mut o = [0u8; 16];
                o[..8].copy_from_slice(&a.to_le_bytes());
                o[8..].copy_from_slice(&b.to_le_bytes());
                IpAddr::from(Ipv6Addr::from(o))
            };
            Some((v6(self.w[3], self.w[4]), v6(self.w[5], self.w[6])))
        } else {
            None
        }
    }

    /// The tunnel the flow's packets are, if recognised.
    pub fn tunnel(&self) -> Option<Tunnel> {
        Tunnel::from_code(self.flags() >> F_TUNNEL_SHIFT)
    }

    /// The source and destination address words as the kernel's `layer2+3` folds them (IPv4
    /// loaded little-endian; IPv6 as the XOR of its four words), when IP.
    pub fn addr_words(&self) -> Option<(u32, u32)> {
        let f = self.flags();
        let word = |a: u64, b: u64| {
            if f & F_IPV6 != 0 {
                (a as u32) ^ ((a >> 32) as u32) ^ (b as u32) ^ ((b >> 32) as u32)
            } else {
                a as u32
            }
        };
        (f & (F_IPV4 | F_IPV6) != 0)
            .then(|| (word(self.w[3], self.w[4]), word(self.w[5], self.w[6])))
    }

    fn flags(&self) -> u8 {
        (self.w[2] >> 40) as u8
    }

    fn set_flag(&mut self, f: u8) {
        self.w[2] |= u64::from(f) << 40;
    }

    fn set_l4(&mut self, lo: u16, hi: u16, proto: u8) {
        self.w[2] = (self.w[2] & !0xff_ffff_ffff) | u64::from(lo) | u64::from(hi) << 16;
        self.w[2] |= u64::from(proto) << 32;
    }

    /// The key of the flow's return traffic: source and destination swapped for the MACs,
    /// the IP addresses and the ports (an ICMP type, code and identifier stay as they are).
    /// The VLAN tag, EtherType, protocol and tunnel kind are the same both ways.
    pub fn reversed(&self) -> Self {
        const MAC: u64 = (1 << 48) - 1;
        let mut r = *self;
        r.w[0] = (self.w[0] & !MAC) | (self.w[1] & MAC);
        r.w[1] = (self.w[1] & !MAC) | (self.w[0] & MAC);
        r.w[3] = self.w[5];
        r.w[4] = self.w[6];
        r.w[5] = self.w[3];
        r.w[6] = self.w[4];
        if self.flags() & F_PORTS != 0 {
            let (sp, dp) = (self.w[2] & 0xffff, (self.w[2] >> 16) & 0xffff);
            r.w[2] = (self.w[2] & !0xffff_ffff) | dp | sp << 16;
        }
        r
    }

    /// A 64-bit digest of the key (for sets of keys where only distinctness matters).
    pub fn digest(&self) -> u64 {
        mix_words(&self.w)
    }
}

impl fmt::Display for FlowKey {
    /// `tcp 10.0.0.1:5000 > 10.0.0.2:80`, `icmp 10.0.0.1 > 10.0.0.2 type 8 id 7`, or for non-IP
    /// frames `ethertype 0x0806 02:00:00:00:00:01 > ff:ff:ff:ff:ff:ff`; `vlan N` and a tunnel
    /// name follow when present.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.addrs() {
            Some((s, d)) => {
                let p = self.protocol();
                let name = proto_name(p, matches!(s, IpAddr::V6(_)));
                let show = |a: IpAddr| match a {
                    IpAddr::V6(v6) => format!("[{v6}]"),
                    IpAddr::V4(v4) => v4.to_string(),
                };
                if let Some((sp, dp)) = self.ports() {
                    write!(f, "{name} {}:{sp} > {}:{dp}", show(s), show(d))?;
                } else if let Some((ty, code, id)) = self.icmp() {
                    write!(f, "{name} {s} > {d} type {ty}")?;
                    if code != 0 {
                        write!(f, " code {code}")?;
                    }
                    if id != 0 {
                        write!(f, " id {id}")?;
                    }
                } else {
                    write!(f, "{name} {s} > {d}")?;
                }
            }
            None => write!(
                f,
                "ethertype 0x{:04x} {} > {}",
                self.ethertype(),
                self.src_mac(),
                self.dst_mac()
            )?,
        }
        if let Some(tci) = self.tci() {
            write!(f, " vlan {}", tci & 0x0fff)?;
        }
        if let Some(t) = self.tunnel() {
            write!(f, " ({})", t.name())?;
        }
        Ok(())
    }
}

/// The usual lower-case name of an IP protocol number (`proto-N` when it has none here).
pub fn proto_name(p: u8, v6: bool) -> std::borrow::Cow<'static, str> {
    match p {
        1 => "icmp".into(),
        58 => "icmp6".into(),
        6 => "tcp".into(),
        17 => "udp".into(),
        132 => "sctp".into(),
        33 => "dccp".into(),
        136 => "udplite".into(),
        47 => "gre".into(),
        4 => "ipip".into(),
        41 if !v6 => "6in4".into(),
        50 => "esp".into(),
        51 => "ah".into(),
        _ => format!("proto-{p}").into(),
    }
}

/// Parses a protocol name or number as [`proto_name`] prints it (also upper case).
pub fn parse_proto(s: &str) -> Option<u8> {
    let s = s.trim();
    if let Ok(n) = s.parse::<u8>() {
        return Some(n);
    }
    let lower = s.to_ascii_lowercase();
    let n = match lower.as_str() {
        "icmp" => 1,
        "icmp6" | "icmpv6" | "ipv6-icmp" => 58,
        "tcp" => 6,
        "udp" => 17,
        "sctp" => 132,
        "dccp" => 33,
        "udplite" => 136,
        "gre" => 47,
        "ipip" => 4,
        "esp" => 50,
        "ah" => 51,
        other => other.strip_prefix("proto-")?.parse().ok()?,
    };
    Some(n)
}

/// What [`extract`] found in a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extracted {
    /// The flow key.
    pub key: FlowKey,
    /// Whether every policy's hash of this frame is a function of `key` alone (see the module
    /// documentation).
    pub simple: bool,
    /// For a recognised tunnel, a digest of the inner flow's key (0 if the inner headers are
    /// cut short).
    pub inner: Option<u64>,
}

const ETH_IP: u16 = 0x0800;
const ETH_IPV6: u16 = 0x86dd;
const TCP: u8 = 6;
const UDP: u8 = 17;

fn has_ports(proto: u8) -> bool {
    matches!(proto, 6 | 17 | 33 | 132 | 136)
}

/// Reads a frame's flow key (best effort for any bytes: never panics) and whether it is simple.
#[inline]
pub fn extract(b: &[u8]) -> Extracted {
    let mut key = FlowKey::default();
    if b.len() < 14 {
        // Whatever MAC bytes there are; no EtherType.
        let mut m = [0u8; 12];
        let have = b.len().min(12);
        m[..have].copy_from_slice(&b[..have]);
        key.w[0] = mac48(&m[0..6]);
        key.w[1] = mac48(&m[6..12]);
        return Extracted {
            key,
            simple: false,
            inner: None,
        };
    }
    key.w[0] = mac48(&b[0..6]);
    key.w[1] = mac48(&b[6..12]);
    let mut ethertype = be16(b, 12);
    let mut nh = 14;
    if matches!(ethertype, 0x8100 | 0x88a8) && b.len() >= 18 {
        key.w[1] |= u64::from(be16(b, 14)) << 48;
        key.set_flag(F_TAGGED);
        ethertype = be16(b, 16);
        nh = 18;
    }
    key.w[0] |= u64::from(ethertype) << 48;
    let (simple, tunnel) = l3(b, nh, ethertype, &mut key);
    let inner = tunnel.map(|(t, at)| {
        key.set_flag(t.code() << F_TUNNEL_SHIFT);
        inner_digest(b, t, at)
    });
    Extracted { key, simple, inner }
}

/// Fills the key from the network header at `nh`; returns whether the frame is simple and, for
/// a tunnel, where its payload starts.
#[inline(always)]
fn l3(b: &[u8], nh: usize, ethertype: u16, key: &mut FlowKey) -> (bool, Option<(Tunnel, usize)>) {
    match ethertype {
        ETH_IP => {
            let Some(ip) = b.get(nh..nh + 20) else {
                return (false, None);
            };
            key.set_flag(F_IPV4);
            key.w[3] = u64::from(u32::from_le_bytes([ip[12], ip[13], ip[14], ip[15]]));
            key.w[5] = u64::from(u32::from_le_bytes([ip[16], ip[17], ip[18], ip[19]]));
            let ihl = usize::from(ip[0] & 0x0f);
            let proto = ip[9];
            let frag = be16(ip, 6) & 0x3fff;
            let later = frag & 0x1fff != 0;
            let tot = usize::from(be16(ip, 2));
            let l4 = nh + ihl * 4;
            key.set_l4(0, 0, proto);
            let simple = ip[0] == 0x45
                && frag == 0
                && nh + tot <= b.len()
                && match proto {
                    TCP => tot >= 40 && crate::hash::tcp_offset_fits(b, l4, tot - 20),
                    UDP => tot >= 28,
                    _ => false,
                };
            let tunnel = if later || ihl < 5 {
                None
            } else {
                transport(b, l4, proto, key)
            };
            (simple, tunnel)
        }
        ETH_IPV6 => {
            let Some(ip) = b.get(nh..nh + 40) else {
                return (false, None);
            };
            key.set_flag(F_IPV6);
            let w = |at: usize| {
                let mut x = [0u8; 8];
                x.copy_from_slice(&ip[at..at + 8]);
                u64::from_le_bytes(x)
            };
            key.w[3] = w(8);
            key.w[4] = w(16);
            key.w[5] = w(24);
            key.w[6] = w(32);
            let next = ip[6];
            let l4 = nh + 40;
            let payload = usize::from(be16(ip, 4));
            let simple = l4 + payload <= b.len()
                && match next {
                    TCP => payload >= 20 && crate::hash::tcp_offset_fits(b, l4, payload),
                    UDP => payload >= 8,
                    _ => false,
                };
            key.set_l4(0, 0, next);
            if simple {
                return (true, transport(b, l4, next, key));
            }
            // Walk extension headers with the wire view (slower, but these frames are rare).
            let v6 = crate::wire::ipv6::Ipv6Packet::new_unchecked(&b[nh..]);
            match v6.upper_layer() {
                Ok(up) => {
                    let p = u8::from(up.next_header);
                    key.set_l4(0, 0, p);
                    if up.is_later_fragment() {
                        (false, None)
                    } else {
                        (false, transport(b, nh + up.offset, p, key))
                    }
                }
                Err(_) => (false, None),
            }
        }
        _ => (false, None),
    }
}

/// Fills ports or the ICMP fields at the transport header `at`; returns a tunnel it carries.
#[inline(always)]
fn transport(b: &[u8], at: usize, proto: u8, key: &mut FlowKey) -> Option<(Tunnel, usize)> {
    if has_ports(proto) {
        let p = b.get(at..at + 4)?;
        let (sp, dp) = (be16(p, 0), be16(p, 2));
        key.set_l4(sp, dp, proto);
        key.set_flag(F_PORTS);
        if proto == UDP {
            match dp {
                4789 | 8472 => return Some((Tunnel::Vxlan, at + 8)),
                6081 => return Some((Tunnel::Geneve, at + 8)),
                _ => {}
            }
        }
        None
    } else {
        match proto {
            1 | 58 => {
                let h = b.get(at..at + 8)?;
                let (ty, code) = (h[0], h[1]);
                let echo = matches!(ty, 0 | 8 | 13 | 14 | 128 | 129);
                let id = if echo { be16(h, 4) } else { 0 };
                key.set_l4(id, u16::from(ty) << 8 | u16::from(code), proto);
                key.set_flag(F_ICMP);
                None
            }
            47 => Some((Tunnel::Gre, at)),
            4 => Some((Tunnel::IpIp, at)),
            41 => Some((Tunnel::Ip6In4, at)),
            _ => None,
        }
    }
}

/// A digest of the inner flow of a tunnel whose payload (after the UDP header, or the IP
/// header for GRE and IP-in-IP) starts at `at`; 0 when the inner headers are cut.
fn inner_digest(b: &[u8], t: Tunnel, at: usize) -> u64 {
    let mut inner = FlowKey::default();
    let ok = match t {
        Tunnel::Vxlan => inner_ethernet(b, at + 8, &mut inner),
        Tunnel::Geneve => match b.get(at..at + 8) {
            Some(g) => {
                let opt = usize::from(g[0] & 0x3f) * 4;
                match be16(g, 2) {
                    0x6558 => inner_ethernet(b, at + 8 + opt, &mut inner),
                    et @ (ETH_IP | ETH_IPV6) => inner_ip(b, at + 8 + opt, et, &mut inner),
                    _ => false,
                }
            }
            None => false,
        },
        // Through the GRE view: the optional fields the flags announce are skipped; a header
        // the view refuses (the deprecated routing bit, as Linux drops it) hides its flow.
        Tunnel::Gre => match b.get(at..).map(GrePacket::new_checked) {
            Some(Ok(g)) => {
                let off = g.header_len();
                match u16::from(g.protocol_type()) {
                    0x6558 => inner_ethernet(b, at + off, &mut inner),
                    et @ (ETH_IP | ETH_IPV6) => inner_ip(b, at + off, et, &mut inner),
                    _ => false,
                }
            }
            _ => false,
        },
        Tunnel::IpIp => inner_ip(b, at, ETH_IP, &mut inner),
        Tunnel::Ip6In4 => inner_ip(b, at, ETH_IPV6, &mut inner),
    };
    if ok { inner.digest() | 1 } else { 0 }
}

fn inner_ethernet(b: &[u8], at: usize, key: &mut FlowKey) -> bool {
    let Some(e) = b.get(at..at + 14) else {
        return false;
    };
    key.w[0] = mac48(&e[0..6]) | u64::from(be16(e, 12)) << 48;
    key.w[1] = mac48(&e[6..12]);
    // A non-IP inner frame is still told apart by its MACs and EtherType.
    let _ = inner_ip(b, at + 14, be16(e, 12), key);
    true
}

fn inner_ip(b: &[u8], at: usize, ethertype: u16, key: &mut FlowKey) -> bool {
    // Inner tunnels are not followed further.
    let _ = l3(b, at, ethertype, key);
    key.addrs().is_some()
}

/// A flow given by its fields (a row of a flow list, or `lagctl explain --flow`): what to build
/// a representative frame from, and how much traffic it carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowRecord {
    /// Source MAC (all zero when the flow list has none).
    pub src_mac: EthernetAddress,
    /// Destination MAC.
    pub dst_mac: EthernetAddress,
    /// VLAN TCI (priority bits included) when the flow is tagged.
    pub vlan: Option<u16>,
    /// Source address.
    pub src_ip: IpAddr,
    /// Destination address (same family as the source).
    pub dst_ip: IpAddr,
    /// IP protocol number.
    pub protocol: u8,
    /// Source port; for ICMP the echo identifier.
    pub src_port: u16,
    /// Destination port; for ICMP `type << 8 | code` (the NetFlow convention).
    pub dst_port: u16,
    /// Packets in the flow.
    pub packets: u64,
    /// Bytes in the flow (whole frames).
    pub bytes: u64,
}

impl FlowRecord {
    /// Writes into `out` (cleared first) an Ethernet frame the flow's packets look like: the
    /// MACs, the tag, an IPv4 or IPv6 header (TTL 64, no options) and a transport header with
    /// the ports (TCP: 20 bytes with ACK set; UDP: 8; SCTP: 12; ICMP: 8). Returns `false` (and
    /// leaves `out` empty) when the two addresses are of different families.
    pub fn write_frame(&self, out: &mut Vec<u8>) -> bool {
        out.clear();
        let v6 = match (self.src_ip, self.dst_ip) {
            (IpAddr::V4(_), IpAddr::V4(_)) => false,
            (IpAddr::V6(_), IpAddr::V6(_)) => true,
            _ => return false,
        };
        out.extend_from_slice(&self.dst_mac.0);
        out.extend_from_slice(&self.src_mac.0);
        if let Some(tci) = self.vlan {
            out.extend_from_slice(&[0x81, 0x00]);
            out.extend_from_slice(&tci.to_be_bytes());
        }
        out.extend_from_slice(&if v6 { ETH_IPV6 } else { ETH_IP }.to_be_bytes());
        let l4: Vec<u8> = match self.protocol {
            6 => {
                let mut t = vec![0u8; 20];
                t[0..2].copy_from_slice(&self.src_port.to_be_bytes());
                t[2..4].copy_from_slice(&self.dst_port.to_be_bytes());
                t[12] = 5 << 4;
                t[13] = 0x10;
                t[14..16].copy_from_slice(&65535u16.to_be_bytes());
                t
            }
            17 | 136 => {
                let mut u = vec![0u8; 8];
                u[0..2].copy_from_slice(&self.src_port.to_be_bytes());
                u[2..4].copy_from_slice(&self.dst_port.to_be_bytes());
                u[4..6].copy_from_slice(&8u16.to_be_bytes());
                u
            }
            132 | 33 => {
                let mut s = vec![0u8; 12];
                s[0..2].copy_from_slice(&self.src_port.to_be_bytes());
                s[2..4].copy_from_slice(&self.dst_port.to_be_bytes());
                s
            }
            1 | 58 => {
                let mut i = vec![0u8; 8];
                i[0..2].copy_from_slice(&self.dst_port.to_be_bytes());
                i[4..6].copy_from_slice(&self.src_port.to_be_bytes());
                i
            }
            _ => Vec::new(),
        };
        match (self.src_ip, self.dst_ip) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let tot = (20 + l4.len()) as u16;
                let mut h = [0u8; 20];
                h[0] = 0x45;
                h[2..4].copy_from_slice(&tot.to_be_bytes());
                h[6] = 0x40; // DF
                h[8] = 64;
                h[9] = self.protocol;
                h[12..16].copy_from_slice(&s.octets());
                h[16..20].copy_from_slice(&d.octets());
                let sum = crate::wire::ip::checksum::of(&h);
                h[10..12].copy_from_slice(&sum.to_be_bytes());
                out.extend_from_slice(&h);
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                let mut h = [0u8; 40];
                h[0] = 0x60;
                h[4..6].copy_from_slice(&(l4.len() as u16).to_be_bytes());
                h[6] = self.protocol;
                h[7] = 64;
                h[8..24].copy_from_slice(&s.octets());
                h[24..40].copy_from_slice(&d.octets());
                out.extend_from_slice(&h);
            }
            _ => unreachable!("families checked above"),
        }
        out.extend_from_slice(&l4);
        true
    }
}

/// Why a flow description could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowSpecError(pub String);

impl fmt::Display for FlowSpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FlowSpecError {}

/// Splits `ADDR[:PORT]` (IPv6 as `[ADDR]:PORT`, or bare without a port).
fn addr_port(s: &str) -> Result<(IpAddr, Option<u16>), FlowSpecError> {
    let bad = || {
        FlowSpecError(format!(
            "'{s}' is not ADDRESS[:PORT] (IPv6 as [ADDRESS]:PORT)"
        ))
    };
    let port = |p: &str| {
        p.parse::<u16>()
            .map_err(|_| FlowSpecError(format!("bad port '{p}' in '{s}' (0-65535)")))
    };
    if let Some(rest) = s.strip_prefix('[') {
        let (a, after) = rest.split_once(']').ok_or_else(bad)?;
        let ip: Ipv6Addr = a.parse().map_err(|_| bad())?;
        let p = match after {
            "" => None,
            _ => Some(port(after.strip_prefix(':').ok_or_else(bad)?)?),
        };
        return Ok((ip.into(), p));
    }
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Ok((ip, None));
    }
    let (a, p) = s.rsplit_once(':').ok_or_else(bad)?;
    let ip: Ipv4Addr = a.parse().map_err(|_| bad())?;
    Ok((ip.into(), Some(port(p)?)))
}

/// Parses a flow as `lagctl explain --flow` takes it:
/// `PROTO SRC[:PORT] > DST[:PORT] [src-mac MAC] [dst-mac MAC] [vlan TCI] [type T] [code C] [id I]`,
/// e.g. `tcp 10.0.0.1:5000 > 10.0.0.2:80` or `udp [2001:db8::1]:53 > [2001:db8::2]:53 vlan 100`.
/// Without MACs the frame uses `02:00:00:00:00:01 > 02:00:00:00:00:02`. For ICMP, `type`
/// defaults to 8 (echo request) and `id` to 0.
pub fn parse_flow_spec(s: &str) -> Result<FlowRecord, FlowSpecError> {
    let toks: Vec<&str> = s.split_whitespace().collect();
    let usage = "expected 'PROTO SRC[:PORT] > DST[:PORT]', e.g. 'tcp 10.0.0.1:5000 > 10.0.0.2:80'";
    if toks.len() < 4 || toks[2] != ">" {
        return Err(FlowSpecError(format!("bad flow '{s}': {usage}")));
    }
    let protocol = parse_proto(toks[0])
        .ok_or_else(|| FlowSpecError(format!("unknown protocol '{}'", toks[0])))?;
    let (src_ip, sp) = addr_port(toks[1])?;
    let (dst_ip, dp) = addr_port(toks[3])?;
    if src_ip.is_ipv4() != dst_ip.is_ipv4() {
        return Err(FlowSpecError(
            "source and destination are of different IP versions".into(),
        ));
    }
    let mut rec = FlowRecord {
        src_mac: EthernetAddress([0x02, 0, 0, 0, 0, 1]),
        dst_mac: EthernetAddress([0x02, 0, 0, 0, 0, 2]),
        vlan: None,
        src_ip,
        dst_ip,
        protocol,
        src_port: sp.unwrap_or(0),
        dst_port: dp.unwrap_or(0),
        packets: 1,
        bytes: 0,
    };
    let icmp = matches!(protocol, 1 | 58);
    let (mut ty, mut code, mut id) = (if protocol == 58 { 128 } else { 8 }, 0u8, 0u16);
    let mut rest = toks[4..].iter();
    while let Some(&opt) = rest.next() {
        let val = rest
            .next()
            .ok_or_else(|| FlowSpecError(format!("'{opt}' needs a value")))?;
        let num = |max: u32| {
            val.parse::<u32>()
                .ok()
                .filter(|&v| v <= max)
                .ok_or_else(|| FlowSpecError(format!("bad {opt} '{val}' (0-{max})")))
        };
        match opt {
            "src-mac" | "dst-mac" => {
                let mac: EthernetAddress = val
                    .parse()
                    .map_err(|_| FlowSpecError(format!("bad MAC '{val}' (aa:bb:cc:dd:ee:ff)")))?;
                if opt == "src-mac" {
                    rec.src_mac = mac;
                } else {
                    rec.dst_mac = mac;
                }
            }
            "vlan" => rec.vlan = Some(num(0xffff)? as u16),
            "type" if icmp => ty = num(255)? as u8,
            "code" if icmp => code = num(255)? as u8,
            "id" if icmp => id = num(0xffff)? as u16,
            _ => {
                return Err(FlowSpecError(format!(
                    "unknown option '{opt}' (src-mac, dst-mac, vlan; for ICMP type, code, id)"
                )));
            }
        }
    }
    if icmp {
        if sp.is_some() || dp.is_some() {
            return Err(FlowSpecError(
                "ICMP has no ports: use 'type T code C id I'".into(),
            ));
        }
        rec.dst_port = u16::from(ty) << 8 | u16::from(code);
        rec.src_port = id;
    }
    Ok(rec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::{HashPolicy, xmit_hash};
    use proptest::prelude::*;

    fn tcp4(sp: u16, dp: u16) -> Vec<u8> {
        let rec = FlowRecord {
            src_mac: EthernetAddress([2, 0, 0, 0, 0, 1]),
            dst_mac: EthernetAddress([2, 0, 0, 0, 0, 2]),
            vlan: None,
            src_ip: "10.0.0.1".parse().unwrap(),
            dst_ip: "10.0.0.2".parse().unwrap(),
            protocol: 6,
            src_port: sp,
            dst_port: dp,
            packets: 1,
            bytes: 54,
        };
        let mut f = Vec::new();
        assert!(rec.write_frame(&mut f));
        f
    }

    #[test]
    fn key_fields_round_trip() {
        let f = tcp4(5000, 80);
        let e = extract(&f);
        assert!(e.simple);
        assert_eq!(e.key.ports(), Some((5000, 80)));
        assert_eq!(e.key.protocol(), 6);
        assert_eq!(e.key.ethertype(), 0x0800);
        assert_eq!(e.key.tci(), None);
        assert_eq!(e.key.to_string(), "tcp 10.0.0.1:5000 > 10.0.0.2:80");
        assert_eq!(e.key.src_mac(), EthernetAddress([2, 0, 0, 0, 0, 1]));
        // The kernel's address word: the IPv4 address loaded little-endian.
        assert_eq!(e.key.addr_words(), Some((0x0100_000a, 0x0200_000a)));
    }

    #[test]
    fn short_and_odd_frames_are_not_simple_and_do_not_panic() {
        for len in 0..60 {
            let f = tcp4(1, 2);
            let e = extract(&f[..len.min(f.len())]);
            assert_eq!(e.simple, len >= f.len(), "len {len}");
        }
        // A fragment is not simple (layer3+4 drops its ports).
        let mut f = tcp4(1, 2);
        f[14 + 6] = 0x20; // MF
        assert!(!extract(&f).simple);
        // ICMP echo: flow key has the identifier.
        let rec = parse_flow_spec("icmp 10.0.0.1 > 10.0.0.2 id 7").unwrap();
        let mut f = Vec::new();
        rec.write_frame(&mut f);
        let e = extract(&f);
        assert!(!e.simple);
        assert_eq!(e.key.icmp(), Some((8, 0, 7)));
        assert_eq!(e.key.to_string(), "icmp 10.0.0.1 > 10.0.0.2 type 8 id 7");
    }

    #[test]
    fn tunnels_are_recognised_with_their_inner_flow() {
        // VXLAN: outer UDP to 4789 around an inner TCP frame.
        let inner = tcp4(1111, 2222);
        let outer = FlowRecord {
            protocol: 17,
            src_port: 49152,
            dst_port: 4789,
            ..parse_flow_spec("udp 192.0.2.1:49152 > 192.0.2.2:4789").unwrap()
        };
        let mut f = Vec::new();
        outer.write_frame(&mut f);
        f.extend_from_slice(&[0x08, 0, 0, 0, 0, 0, 1, 0]);
        f.extend_from_slice(&inner);
        let e = extract(&f);
        assert_eq!(e.key.tunnel(), Some(Tunnel::Vxlan));
        assert_eq!(e.inner, Some(extract(&inner).key.digest() | 1));
        let other = extract(&{
            let mut g = f.clone();
            let n = g.len();
            g[n - 20] ^= 1; // another inner source port
            g
        });
        assert_ne!(other.inner, e.inner);
        assert_eq!(other.key, e.key);
    }

    #[test]
    fn flow_specs_parse_and_reject_nonsense() {
        let r = parse_flow_spec("tcp 10.0.0.1:5000 > 10.0.0.2:80 vlan 100").unwrap();
        assert_eq!((r.src_port, r.dst_port, r.vlan), (5000, 80, Some(100)));
        let r = parse_flow_spec("udp [2001:db8::1]:53 > [2001:db8::2]:5353").unwrap();
        assert_eq!((r.src_port, r.dst_port), (53, 5353));
        for bad in [
            "",
            "tcp 10.0.0.1:1 10.0.0.2:2",
            "tcp 10.0.0.1:1 > ::1",
            "tcp 10.0.0.1:99999 > 10.0.0.2:1",
            "xyz 10.0.0.1 > 10.0.0.2",
            "tcp 10.0.0.1:1 > 10.0.0.2:2 vlan",
            "tcp 10.0.0.1:1 > 10.0.0.2:2 colour blue",
            "icmp 10.0.0.1:1 > 10.0.0.2",
        ] {
            assert!(parse_flow_spec(bad).is_err(), "{bad}");
        }
        let mut f = Vec::new();
        let r = parse_flow_spec("tcp 10.0.0.1:1234 > 10.0.0.2:80").unwrap();
        r.write_frame(&mut f);
        // The hand-worked vector of the hash tests, with the MACs of the default spec.
        assert_eq!(xmit_hash(HashPolicy::Layer34, &f), 0x29a9c0c2);
    }

    fn simple_frame() -> impl Strategy<Value = Vec<u8>> {
        (
            any::<[u8; 12]>(),
            proptest::option::of(any::<u16>()),
            any::<bool>(),
            prop_oneof![Just(6u8), Just(17u8)],
            any::<[u8; 32]>(),
            any::<u32>(),
            0usize..64,
        )
            .prop_map(|(macs, tag, v6, proto, addrs, ports, extra)| {
                let mut f = macs.to_vec();
                if let Some(t) = tag {
                    f.extend_from_slice(&[0x81, 0]);
                    f.extend_from_slice(&t.to_be_bytes());
                }
                let l4len = if proto == 6 { 20 } else { 8 };
                if v6 {
                    let payload = (l4len + extra) as u16;
                    f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
                    f.extend_from_slice(&payload.to_be_bytes());
                    f.extend_from_slice(&[proto, 64]);
                    f.extend_from_slice(&addrs);
                } else {
                    let tot = (20 + l4len + extra) as u16;
                    f.extend_from_slice(&[0x08, 0, 0x45, 0]);
                    f.extend_from_slice(&tot.to_be_bytes());
                    f.extend_from_slice(&[0, 0, 0x40, 0, 64, proto, 0, 0]);
                    f.extend_from_slice(&addrs[..8]);
                }
                let l4 = f.len();
                f.extend_from_slice(&ports.to_be_bytes());
                f.resize(f.len() + l4len - 4 + extra, 0);
                if proto == 6 {
                    // A data offset of 5 words up to what the payload holds.
                    let words = 5 + macs[0] as usize % (1 + (extra / 4).min(10));
                    f[l4 + 12] = (words as u8) << 4;
                }
                f
            })
    }

    proptest! {
        /// The claim the planner's reuse of hashes rests on: two simple frames with the same
        /// key hash alike under every policy, whatever their other bytes.
        #[test]
        fn simple_frames_hash_as_their_key(
            f in simple_frame(),
            noise in proptest::collection::vec(any::<u8>(), 64),
            pad in 0usize..32,
        ) {
            let e = extract(&f);
            prop_assert!(e.simple);
            // Scramble every byte that is not a key field: IP TOS, id, TTL, checksum, IPv6 flow
            // label, the transport header past the ports (but TCP's data offset), the payload;
            // the IP lengths stay valid. Add trailing padding.
            let mut g = f.clone();
            let tagged = e.key.tci().is_some();
            let nh = if tagged { 18 } else { 14 };
            let v6 = g[nh - 2..nh] == [0x86, 0xdd];
            let l4 = nh + if v6 { 40 } else { 20 };
            let tcp = g[nh + if v6 { 6 } else { 9 }] == 6;
            let mut keep: Vec<core::ops::Range<usize>> = if v6 {
                vec![0..nh, nh..nh + 1, nh + 4..nh + 7, nh + 8..nh + 44]
            } else {
                vec![0..nh, nh..nh + 1, nh + 2..nh + 4, nh + 6..nh + 7, nh + 9..nh + 10,
                     nh + 12..nh + 24]
            };
            if tcp {
                keep.push(l4 + 12..l4 + 13);
            }
            for (i, byte) in g.iter_mut().enumerate() {
                if !keep.iter().any(|r| r.contains(&i)) {
                    *byte = noise[i % noise.len()] ^ (i as u8);
                }
            }
            if !v6 {
                // Keep DF free but never set MF or an offset.
                g[nh + 6] &= 0x40;
                g[nh + 7] = 0;
            }
            g.resize(g.len() + pad, 0xee);
            let e2 = extract(&g);
            prop_assert!(e2.simple);
            prop_assert_eq!(e2.key, e.key);
            for p in HashPolicy::ALL {
                prop_assert_eq!(xmit_hash(p, &f), xmit_hash(p, &g), "policy {}", p);
            }
            // A data offset under 20 bytes or past the payload, or an IPv6 payload length past
            // the frame: not simple (ovs-tcp would hash the ports as 0), the same key.
            let mut bad = g.clone();
            let avail = if v6 {
                usize::from(u16::from_be_bytes([g[nh + 4], g[nh + 5]]))
            } else {
                usize::from(u16::from_be_bytes([g[nh + 2], g[nh + 3]])) - 20
            };
            if tcp {
                let words = if noise[0] & 1 == 0 || avail >= 60 { 4 } else { 15 };
                bad[l4 + 12] = words << 4 | (bad[l4 + 12] & 0x0f);
            } else if v6 {
                bad[nh + 4..nh + 6].copy_from_slice(&0xfff0u16.to_be_bytes());
            }
            if tcp || v6 {
                let e3 = extract(&bad);
                prop_assert!(!e3.simple);
                prop_assert_eq!(e3.key, e.key);
            }
        }

        #[test]
        fn extract_never_panics(f in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = extract(&f);
        }
    }
}
