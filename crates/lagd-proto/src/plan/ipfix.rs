//! IPFIX (RFC 7011) flow records as planner input: messages from a capture of UDP port 4739
//! (or any port), or from a socket, are read with the templates their exporters send, and
//! each data record that carries a flow's addresses and counters becomes one flow of the
//! plan ([`FlowRecord`], as a CSV flow list's row does).
//!
//! # What a record gives
//! Information elements read (enterprise 0; any other, and enterprise-specific ones, are
//! skipped by their length): addresses (8, 12; 27, 28), protocol (4), ports (7, 11), ICMP
//! type and code (176, 177; 178, 179; 32, 139), MACs (56, 80), VLAN (58 or 243, with the
//! priority 244), packets (2, else 86), bytes: whole frames when the exporter gives layer-2
//! octets (352, else 353), else the IP octets (1, else 85) plus 14 bytes of Ethernet header
//! (18 when tagged) per packet, an estimate counted in [`IpfixStats::l3_octets`]. Sampling: a
//! record's own `samplingInterval` (34), `samplingPacketInterval` / `samplingPacketSpace`
//! (305, 306) or `samplerRandomInterval` (50), else the same from an options record of the
//! same exporter and observation domain; with none the counts are taken as every packet
//! ([`IpfixStats::unsampled`]). Integers may be sent in fewer bytes (reduced-size encoding).
//! `flowDirection` (61) picks the records planned ([`Direction`], ingress by default): an
//! exporter that observes a packet where it enters and where it leaves (Open vSwitch's
//! bridge sampling does) reports it twice; the other direction's records are counted in
//! [`IpfixStats::other_direction`].
//!
//! # What a planner cannot know from flow records
//! A record sums a flow: the sizes of its packets, their order and their timing are gone. So
//! `balance-rr` and `stripe` take each flow's packets as back to back and of its mean size,
//! the bucket policies replay a steady mix (as for a flow list), a flow that an exporter
//! reported in several records is one flow, and an ICMP echo's identifier (which `layer3+4`
//! hashes) is not exported, so every ICMP flow between two hosts hashes alike. Records
//! without IP addresses (ARP, other non-IP) are counted and not planned. When the exporter
//! samples packets (1 in N), counts are scaled by N and a share estimated from `n` sampled
//! packets carries the same 95% error as sFlow's
//! ([`SflowStats::share_error`](super::sflow::SflowStats::share_error)).
//!
//! # Malformed input
//! A message is decoded whole before anything is applied: a message that cannot be read (bad
//! version or length, a set running past its end, a template with an impossible field) is
//! counted in [`IpfixStats::malformed`] and dropped with its templates; data records whose
//! template has not been seen are counted ([`IpfixStats::no_template`]) and dropped. Nothing
//! panics and memory is bounded ([`MAX_TEMPLATES`] templates per input).

use core::fmt;
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::error::PlanError;
use super::flow::FlowRecord;
pub use super::input::IpfixStats;
use super::planner::Planner;
use super::{PlanConfig, report};
use crate::capture::{
    CaptureReader, LINKTYPE_ETHERNET, LINKTYPE_LINUX_SLL, LINKTYPE_LINUX_SLL2, LINKTYPE_RAW,
};
use crate::wire::EthernetAddress;

/// The UDP port IPFIX exporters send to (RFC 7011).
pub const IPFIX_PORT: u16 = 4739;

/// The most templates kept for one input; further templates are counted and dropped.
pub const MAX_TEMPLATES: usize = 4096;

/// The most template fields kept for one input, all templates together (12 bytes each): with
/// [`MAX_TEMPLATES`], what bounds the decoder's memory whatever the exporters send.
pub const MAX_TEMPLATE_FIELDS: usize = 1 << 20;

/// The largest sampling rate taken (a larger one is a corrupt record, and is ignored).
pub const MAX_SAMPLING_RATE: u64 = 1 << 20;

/// Why a message could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpfixError {
    /// Byte offset in the message.
    pub offset: usize,
    /// What was wrong there.
    pub what: String,
}

impl fmt::Display for IpfixError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IPFIX message, byte {}: {}", self.offset, self.what)
    }
}

impl std::error::Error for IpfixError {}

/// One field of a template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Field {
    /// Information element id (enterprise bit cleared).
    id: u16,
    /// Enterprise number (0 for IANA's elements).
    enterprise: u32,
    /// Length in bytes; `None` for variable length.
    len: Option<u16>,
}

/// A template: its fields, and whether it is an options template.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Template {
    fields: Vec<Field>,
    options: bool,
}

impl Template {
    /// The fewest bytes a record of this template takes (variable fields at 1 byte).
    fn min_len(&self) -> usize {
        self.fields
            .iter()
            .map(|f| f.len.map_or(1, usize::from))
            .sum()
    }
}

/// (exporter, observation domain, template id).
type TemplateKey = (u64, u32, u16);

/// A flow as one data record gives it, before it is planned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IpfixRecord {
    /// Source address, if the record has one.
    pub src_ip: Option<IpAddr>,
    /// Destination address.
    pub dst_ip: Option<IpAddr>,
    /// IP protocol (0 when absent).
    pub protocol: u8,
    /// Source port (0 when absent).
    pub src_port: u16,
    /// Destination port; for ICMP `type << 8 | code`.
    pub dst_port: u16,
    /// Source MAC (zero when absent).
    pub src_mac: [u8; 6],
    /// Destination MAC (zero when absent).
    pub dst_mac: [u8; 6],
    /// VLAN id, if tagged.
    pub vlan: Option<u16>,
    /// 802.1Q priority (0 when absent).
    pub priority: u8,
    /// Packets (delta count, else total count).
    pub packets: Option<u64>,
    /// Layer-2 octets (whole frames).
    pub l2_octets: Option<u64>,
    /// IP octets.
    pub l3_octets: Option<u64>,
    /// `samplingInterval` (34) or `samplerRandomInterval` (50): 1 in N.
    pub sampling: Option<u64>,
    /// `flowDirection` (61): 0 ingress, 1 egress.
    pub direction: Option<u8>,
    /// `samplingPacketInterval` (305): packets taken in a row.
    pub packet_interval: Option<u64>,
    /// `samplingPacketSpace` (306): packets skipped after them.
    pub packet_space: Option<u64>,
}

/// A decoded message: its observation domain, templates (id, template or `None` to
/// withdraw) and data records (with whether each is an options record).
struct Decoded {
    domain: u32,
    templates: Vec<(u16, Option<Template>)>,
    records: Vec<(IpfixRecord, bool)>,
    no_template: u64,
}

struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
    base: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], IpfixError> {
        match self.at.checked_add(n).filter(|&e| e <= self.b.len()) {
            Some(end) => {
                let s = &self.b[self.at..end];
                self.at = end;
                Ok(s)
            }
            None => Err(self.err(format!("ends inside {what}"))),
        }
    }

    fn u16(&mut self, what: &str) -> Result<u16, IpfixError> {
        let b = self.take(2, what)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn u32(&mut self, what: &str) -> Result<u32, IpfixError> {
        let b = self.take(4, what)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn err(&self, what: String) -> IpfixError {
        IpfixError {
            offset: self.base + self.at,
            what,
        }
    }
}

/// An unsigned integer of 1 to 8 bytes (reduced-size encoding), big-endian.
fn uint(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 8 {
        return None;
    }
    Some(b.iter().fold(0u64, |v, &x| v << 8 | u64::from(x)))
}

fn set_field(r: &mut IpfixRecord, id: u16, v: &[u8]) {
    let n = uint(v);
    match id {
        1 | 85 if r.l3_octets.is_none() || id == 1 => r.l3_octets = n,
        2 | 86 if r.packets.is_none() || id == 2 => r.packets = n,
        352 | 353 if r.l2_octets.is_none() || id == 352 => r.l2_octets = n,
        4 => r.protocol = n.and_then(|x| u8::try_from(x).ok()).unwrap_or(0),
        7 => r.src_port = n.and_then(|x| u16::try_from(x).ok()).unwrap_or(0),
        11 => r.dst_port = n.and_then(|x| u16::try_from(x).ok()).unwrap_or(0),
        // ICMP as type << 8 | code, whichever way the exporter gives it.
        32 | 139 => r.dst_port = n.and_then(|x| u16::try_from(x).ok()).unwrap_or(0),
        176 | 178 => {
            let t = n.and_then(|x| u8::try_from(x).ok()).unwrap_or(0);
            r.dst_port = u16::from(t) << 8 | (r.dst_port & 0xff);
        }
        177 | 179 => {
            let c = n.and_then(|x| u8::try_from(x).ok()).unwrap_or(0);
            r.dst_port = (r.dst_port & 0xff00) | u16::from(c);
        }
        8 | 12 if v.len() == 4 => {
            let a = IpAddr::V4(Ipv4Addr::new(v[0], v[1], v[2], v[3]));
            if id == 8 {
                r.src_ip = Some(a);
            } else {
                r.dst_ip = Some(a);
            }
        }
        27 | 28 if v.len() == 16 => {
            let mut o = [0u8; 16];
            o.copy_from_slice(v);
            let a = IpAddr::V6(Ipv6Addr::from(o));
            if id == 27 {
                r.src_ip = Some(a);
            } else {
                r.dst_ip = Some(a);
            }
        }
        56 | 80 if v.len() == 6 => {
            let mac = if id == 56 {
                &mut r.src_mac
            } else {
                &mut r.dst_mac
            };
            mac.copy_from_slice(v);
        }
        58 | 243 => {
            let vid = n.and_then(|x| u16::try_from(x).ok()).unwrap_or(0) & 0x0fff;
            // 0 is "no tag" (an exporter's untagged flows carry vlanId 0).
            if vid != 0 {
                r.vlan = Some(vid);
            }
        }
        61 => r.direction = n.and_then(|x| u8::try_from(x).ok()),
        244 => r.priority = n.map_or(0, |x| (x & 7) as u8),
        34 | 50 => r.sampling = n.filter(|&x| (1..=MAX_SAMPLING_RATE).contains(&x)),
        305 => r.packet_interval = n.filter(|&x| (1..=MAX_SAMPLING_RATE).contains(&x)),
        306 => r.packet_space = n.filter(|&x| x < MAX_SAMPLING_RATE),
        _ => {}
    }
}

impl IpfixRecord {
    /// The sampling rate (1 in N) the record gives: `samplingInterval` or
    /// `samplerRandomInterval`, else `(interval + space) / interval` of systematic count-based
    /// sampling (rounded).
    pub fn rate(&self) -> Option<u64> {
        if let Some(r) = self.sampling {
            return Some(r);
        }
        let i = self.packet_interval?;
        let sp = self.packet_space.unwrap_or(0);
        Some(((i + sp + i / 2) / i).clamp(1, MAX_SAMPLING_RATE))
    }
}

/// Decodes one message with `known` templates (those of its exporter), without changing
/// them: the templates it carries are returned to be applied when the whole message reads.
fn decode(msg: &[u8], known: &dyn Fn(u32, u16) -> Option<Template>) -> Result<Decoded, IpfixError> {
    let mut c = Cursor {
        b: msg,
        at: 0,
        base: 0,
    };
    let version = c.u16("the version")?;
    if version != 10 {
        return Err(IpfixError {
            offset: 0,
            what: format!("version {version}, not 10"),
        });
    }
    let len = usize::from(c.u16("the length")?);
    if len < 16 || len > msg.len() {
        return Err(IpfixError {
            offset: 2,
            what: format!(
                "message length {len} (16 to the {} bytes received expected)",
                msg.len()
            ),
        });
    }
    c.b = &msg[..len];
    c.u32("the export time")?;
    c.u32("the sequence number")?;
    let domain = c.u32("the observation domain")?;
    let mut out = Decoded {
        domain,
        templates: Vec::new(),
        records: Vec::new(),
        no_template: 0,
    };
    while c.at < len {
        let set_at = c.at;
        let id = c.u16("a set's id")?;
        let slen = usize::from(c.u16("a set's length")?);
        if slen < 4 {
            return Err(IpfixError {
                offset: set_at + 2,
                what: format!("set length {slen} (at least 4)"),
            });
        }
        let body = c.take(slen - 4, "a set").map_err(|_| IpfixError {
            offset: set_at + 2,
            what: format!("set of {slen} bytes goes past the message's end ({len})"),
        })?;
        let mut s = Cursor {
            b: body,
            at: 0,
            base: set_at + 4,
        };
        match id {
            2 | 3 => {
                // Template records until what is left cannot hold one (padding).
                while body.len() - s.at >= 4 {
                    let tid = s.u16("a template id")?;
                    let count = s.u16("a field count")?;
                    if id == 2 && count == 0 {
                        out.templates.push((tid, None));
                        continue;
                    }
                    if tid < 256 {
                        return Err(s.err(format!("template id {tid} (at least 256)")));
                    }
                    if id == 3 {
                        // The scope fields come first; their values are not needed.
                        let sc = s.u16("a scope field count")?;
                        if sc == 0 || sc > count {
                            return Err(s.err(format!("scope field count {sc} of {count} fields")));
                        }
                    }
                    let mut fields = Vec::with_capacity(usize::from(count).min(256));
                    for _ in 0..count {
                        let raw = s.u16("a field's element id")?;
                        let flen = s.u16("a field's length")?;
                        let enterprise = if raw & 0x8000 != 0 {
                            s.u32("a field's enterprise number")?
                        } else {
                            0
                        };
                        if flen == 0 {
                            return Err(s.err(format!("field {} of length 0", raw & 0x7fff)));
                        }
                        fields.push(Field {
                            id: raw & 0x7fff,
                            enterprise,
                            len: (flen != 65535).then_some(flen),
                        });
                    }
                    out.templates.push((
                        tid,
                        Some(Template {
                            fields,
                            options: id == 3,
                        }),
                    ));
                }
            }
            0..=255 => {
                return Err(IpfixError {
                    offset: set_at,
                    what: format!("set id {id} (2, 3 or at least 256 expected)"),
                });
            }
            tid => {
                // A template from this message, or one learned before.
                let t = out
                    .templates
                    .iter()
                    .rev()
                    .find(|(i, _)| *i == tid)
                    .map(|(_, t)| t.clone())
                    .unwrap_or_else(|| known(domain, tid));
                let Some(t) = t else {
                    out.no_template += 1;
                    continue;
                };
                let min = t.min_len().max(1);
                while body.len() - s.at >= min {
                    let mut r = IpfixRecord::default();
                    for f in &t.fields {
                        let n = match f.len {
                            Some(n) => usize::from(n),
                            None => {
                                let first = s.take(1, "a variable-length field")?[0];
                                if first < 255 {
                                    usize::from(first)
                                } else {
                                    usize::from(s.u16("a variable-length field's length")?)
                                }
                            }
                        };
                        let v = s.take(n, "a record's field")?;
                        if f.enterprise == 0 {
                            set_field(&mut r, f.id, v);
                        }
                    }
                    out.records.push((r, t.options));
                }
            }
        }
    }
    Ok(out)
}

/// An IPFIX input's state: the templates of its exporters, and the sampling rates options
/// records gave per exporter and observation domain. Feed it messages with
/// [`IpfixDecoder::add_message`].
#[derive(Debug, Default)]
pub struct IpfixDecoder {
    templates: HashMap<TemplateKey, Template>,
    rates: HashMap<(u64, u32), u64>,
    direction: Direction,
    /// Fields of the kept templates, all together.
    fields: usize,
}

/// Which records to plan by their `flowDirection`. An exporter that observes a packet where
/// it enters and where it leaves (Open vSwitch samples on output as well as on input by
/// default) reports it twice; planning one direction counts it once. Records without a
/// direction are always planned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Direction {
    /// Ingress records (the default).
    #[default]
    Ingress,
    /// Egress records.
    Egress,
    /// Both (for exporters that observe each packet once, in either direction).
    Both,
}

impl Direction {
    /// Whether a record of `flowDirection` `d` is planned.
    fn takes(self, d: Option<u8>) -> bool {
        match (self, d) {
            (_, None) | (Self::Both, _) => true,
            (Self::Ingress, Some(d)) => d == 0,
            (Self::Egress, Some(d)) => d == 1,
        }
    }

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Ingress => "ingress",
            Self::Egress => "egress",
            Self::Both => "both",
        }
    }
}

impl IpfixDecoder {
    /// A decoder with no template, planning ingress records (and those without a direction).
    pub fn new() -> Self {
        Self::default()
    }

    /// A decoder planning the records of `direction`.
    pub fn with_direction(direction: Direction) -> Self {
        Self {
            direction,
            ..Self::default()
        }
    }

    /// Reads one message from `exporter` (any key telling exporters apart, e.g. a hash of
    /// the source address and port: templates are theirs alone) into `planner`. A message
    /// that cannot be read is counted ([`IpfixStats::malformed`]), changes nothing and is
    /// returned as the error.
    pub fn add_message(
        &mut self,
        planner: &mut Planner,
        exporter: u64,
        msg: &[u8],
    ) -> Result<(), IpfixError> {
        let templates = &self.templates;
        let decoded = decode(msg, &|domain, id| {
            templates.get(&(exporter, domain, id)).cloned()
        });
        let st = planner.stats.ipfix.get_or_insert_with(IpfixStats::default);
        st.messages += 1;
        let d = match decoded {
            Ok(d) => d,
            Err(e) => {
                st.malformed += 1;
                return Err(e);
            }
        };
        st.no_template += d.no_template;
        for (id, t) in d.templates {
            let key = (exporter, d.domain, id);
            let old = match t {
                None => self.templates.remove(&key),
                Some(t) => {
                    let old_fields = self.templates.get(&key).map_or(0, |o| o.fields.len());
                    let room = self.templates.len() < MAX_TEMPLATES || old_fields > 0;
                    if room && self.fields - old_fields + t.fields.len() <= MAX_TEMPLATE_FIELDS {
                        st.templates += 1;
                        self.fields += t.fields.len();
                        self.templates.insert(key, t)
                    } else {
                        st.templates_dropped += 1;
                        None
                    }
                }
            };
            self.fields -= old.map_or(0, |o| o.fields.len());
        }
        // Options records first: the sampling rate they give applies to the message's flows.
        for (r, options) in &d.records {
            if *options {
                st.options_records += 1;
                if let Some(rate) = r.rate() {
                    self.rates.insert((exporter, d.domain), rate);
                }
            }
        }
        let domain_rate = self.rates.get(&(exporter, d.domain)).copied();
        let mut flows = Vec::new();
        for (r, options) in d.records {
            st.records += 1;
            if options {
                continue;
            }
            if !self.direction.takes(r.direction) {
                st.other_direction += 1;
                continue;
            }
            let (Some(src), Some(dst)) = (r.src_ip, r.dst_ip) else {
                st.without_ip += 1;
                continue;
            };
            let Some(packets) = r.packets.filter(|&p| p > 0) else {
                st.without_counts += 1;
                continue;
            };
            if src.is_ipv4() != dst.is_ipv4() {
                st.without_ip += 1;
                continue;
            }
            let rate = r.rate().or(domain_rate);
            match rate {
                Some(n) => {
                    let rr = st.rate_range.get_or_insert((n, n));
                    rr.0 = rr.0.min(n);
                    rr.1 = rr.1.max(n);
                }
                None => st.unsampled += 1,
            }
            let rate = rate.unwrap_or(1);
            let header = if r.vlan.is_some() { 18 } else { 14 };
            let bytes = match (r.l2_octets, r.l3_octets) {
                (Some(b), _) => b,
                (None, Some(b)) => {
                    st.l3_octets += 1;
                    b.saturating_add(packets.saturating_mul(header))
                }
                (None, None) => {
                    st.without_counts += 1;
                    continue;
                }
            };
            st.planned += 1;
            st.sampled_packets = st.sampled_packets.saturating_add(packets);
            let cap = super::csv::MAX_COUNT;
            flows.push(FlowRecord {
                src_mac: EthernetAddress(r.src_mac),
                dst_mac: EthernetAddress(r.dst_mac),
                vlan: r.vlan.map(|v| u16::from(r.priority) << 13 | v),
                src_ip: src,
                dst_ip: dst,
                protocol: r.protocol,
                src_port: if matches!(r.protocol, 1 | 58) {
                    0
                } else {
                    r.src_port
                },
                dst_port: r.dst_port,
                packets: packets.saturating_mul(rate).min(cap),
                bytes: bytes.saturating_mul(rate).min(cap),
            });
        }
        for f in &flows {
            planner.add_flow(f);
        }
        Ok(())
    }
}

/// The IP packet of a captured frame of `linktype` (Ethernet with any VLAN tags, raw IP,
/// Linux cooked v1/v2), with its EtherType.
fn ip_of(linktype: u32, d: &[u8]) -> Option<(u16, &[u8])> {
    match linktype {
        LINKTYPE_ETHERNET => {
            let mut at = 12;
            let mut et = u16::from_be_bytes([*d.get(12)?, *d.get(13)?]);
            while matches!(et, 0x8100 | 0x88a8) {
                at += 4;
                et = u16::from_be_bytes([*d.get(at)?, *d.get(at + 1)?]);
            }
            Some((et, d.get(at + 2..)?))
        }
        LINKTYPE_RAW | 228 | 229 => match d.first()? >> 4 {
            4 => Some((0x0800, d)),
            6 => Some((0x86dd, d)),
            _ => None,
        },
        LINKTYPE_LINUX_SLL => Some((u16::from_be_bytes([*d.get(14)?, *d.get(15)?]), d.get(16..)?)),
        LINKTYPE_LINUX_SLL2 => Some((u16::from_be_bytes([*d.first()?, *d.get(1)?]), d.get(20..)?)),
        _ => None,
    }
}

/// A key for a UDP datagram's sender: its source address and port (FNV-1a).
fn exporter_key(ethertype: u16, ip: &[u8]) -> u64 {
    let (addr, l4) = match ethertype {
        0x0800 => {
            let ihl = usize::from(ip.first().map_or(0, |b| b & 0x0f)) * 4;
            (ip.get(12..16), ip.get(ihl..))
        }
        _ => (ip.get(8..24), ip.get(40..)),
    };
    let port = l4.and_then(|l| l.get(0..2)).unwrap_or(&[]);
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for &b in addr.unwrap_or(&[]).iter().chain(port) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Reads a capture of IPFIX messages (UDP to `port`, [`IPFIX_PORT`] by default) into a
/// plan, taking the records of `direction` ([`Direction`]). Messages that cannot be read are counted and dropped
/// ([`IpfixStats::malformed`]); packets that are not UDP to the port are counted as other.
pub fn plan_ipfix_capture<R: io::Read>(
    reader: R,
    port: u16,
    direction: Direction,
    config: PlanConfig,
) -> Result<report::Plan, PlanError> {
    let mut planner = Planner::new(config)?;
    let mut dec = IpfixDecoder::with_direction(direction);
    let mut cap = CaptureReader::new(reader).map_err(PlanError::Capture)?;
    while let Some(p) = cap.next_packet().map_err(PlanError::Capture)? {
        planner.note_time(p.ts_nanos);
        let msg = ip_of(p.linktype, p.data).and_then(|(et, ip)| {
            let payload = super::sflow::ip_udp_payload(ip, et, port)?;
            Some((exporter_key(et, ip), payload))
        });
        match msg {
            Some((exporter, m)) => {
                // Counted in the stats; the rest of the capture is still read.
                let _ = dec.add_message(&mut planner, exporter, m);
            }
            None => {
                planner
                    .stats
                    .ipfix
                    .get_or_insert_with(IpfixStats::default)
                    .other_packets += 1;
            }
        }
    }
    Ok(planner.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A message of `sets` (each: set id, body), domain 7.
    fn message(sets: &[(u16, Vec<u8>)]) -> Vec<u8> {
        let mut m = vec![0, 10, 0, 0];
        m.extend_from_slice(&1_700_000_000u32.to_be_bytes());
        m.extend_from_slice(&1u32.to_be_bytes());
        m.extend_from_slice(&7u32.to_be_bytes());
        for (id, body) in sets {
            m.extend_from_slice(&id.to_be_bytes());
            m.extend_from_slice(&((body.len() + 4) as u16).to_be_bytes());
            m.extend_from_slice(body);
        }
        let len = m.len() as u16;
        m[2..4].copy_from_slice(&len.to_be_bytes());
        m
    }

    /// A template record: id and (element, length) fields; an element above 0x7fff is
    /// enterprise-specific (enterprise 6876 follows).
    fn template(id: u16, fields: &[(u16, u16)]) -> Vec<u8> {
        let mut t = Vec::new();
        t.extend_from_slice(&id.to_be_bytes());
        t.extend_from_slice(&(fields.len() as u16).to_be_bytes());
        for &(e, l) in fields {
            t.extend_from_slice(&e.to_be_bytes());
            t.extend_from_slice(&l.to_be_bytes());
            if e & 0x8000 != 0 {
                t.extend_from_slice(&6876u32.to_be_bytes());
            }
        }
        t
    }

    /// MACs, a variable-length interface name, an enterprise field, VLAN, IPv4 5-tuple,
    /// packets in 4 bytes (reduced size), layer-2 octets in 8.
    const FIELDS: [(u16, u16); 13] = [
        (56, 6),
        (80, 6),
        (82, 65535),
        (0x8000 | 893, 4),
        (243, 2),
        (244, 1),
        (8, 4),
        (12, 4),
        (4, 1),
        (7, 2),
        (11, 2),
        (2, 4),
        (352, 8),
    ];

    fn record(sport: u16, packets: u32, octets: u64, name: &[u8]) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend_from_slice(&[2, 0, 0, 0, 0, 1]);
        r.extend_from_slice(&[2, 0, 0, 0, 0, 2]);
        if name.len() < 255 {
            r.push(name.len() as u8);
        } else {
            r.push(255);
            r.extend_from_slice(&(name.len() as u16).to_be_bytes());
        }
        r.extend_from_slice(name);
        r.extend_from_slice(&[9, 9, 9, 9]);
        r.extend_from_slice(&10u16.to_be_bytes());
        r.push(3);
        r.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2, 17]);
        r.extend_from_slice(&sport.to_be_bytes());
        r.extend_from_slice(&5201u16.to_be_bytes());
        r.extend_from_slice(&packets.to_be_bytes());
        r.extend_from_slice(&octets.to_be_bytes());
        r
    }

    fn planner() -> Planner {
        Planner::new(PlanConfig::new(2)).unwrap()
    }

    fn stats(p: &Planner) -> IpfixStats {
        p.stats().ipfix.unwrap()
    }

    #[test]
    fn a_template_then_its_records() {
        let mut d = IpfixDecoder::new();
        let mut p = planner();
        let mut data = record(4000, 10, 1000, b"eth0");
        data.extend(record(4001, 3, 300, &[b'x'; 300]));
        data.extend([0, 0]); // padding
        let m = message(&[(2, template(256, &FIELDS)), (256, data)]);
        d.add_message(&mut p, 1, &m).unwrap();
        let st = stats(&p);
        assert_eq!(
            (st.messages, st.templates, st.records, st.planned),
            (1, 1, 2, 2)
        );
        assert_eq!((st.unsampled, st.l3_octets, st.sampled_packets), (2, 0, 13));
        assert_eq!(st.share_error(), 0.0);
        assert_eq!(
            (p.stats().packets, p.stats().bytes, p.stats().rows),
            (13, 1300, 2)
        );
        let plan = p.finish();
        assert_eq!(plan.flows, 2);
        let flows: Vec<String> = plan.elephants.iter().map(|e| e.key.to_string()).collect();
        assert!(
            flows
                .iter()
                .any(|f| f.contains("10.0.0.1:4000") && f.contains("5201")),
            "{flows:?}"
        );
    }

    #[test]
    fn decoded_fields() {
        let m = message(&[
            (2, template(256, &FIELDS)),
            (256, record(4000, 10, 1000, b"")),
        ]);
        let d = decode(&m, &|_, _| None).unwrap();
        let (r, options) = d.records[0];
        assert!(!options);
        assert_eq!(r.src_mac, [2, 0, 0, 0, 0, 1]);
        assert_eq!(r.dst_mac, [2, 0, 0, 0, 0, 2]);
        assert_eq!((r.vlan, r.priority), (Some(10), 3));
        assert_eq!(r.src_ip, Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))));
        assert_eq!(r.dst_ip, Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2))));
        assert_eq!((r.protocol, r.src_port, r.dst_port), (17, 4000, 5201));
        assert_eq!(
            (r.packets, r.l2_octets, r.l3_octets),
            (Some(10), Some(1000), None)
        );
    }

    #[test]
    fn records_before_their_template_and_after_a_withdrawal_are_dropped() {
        let mut d = IpfixDecoder::new();
        let mut p = planner();
        let data = message(&[(256, record(4000, 10, 1000, b""))]);
        d.add_message(&mut p, 1, &data).unwrap();
        assert_eq!(stats(&p).no_template, 1);
        assert_eq!(p.stats().packets, 0);
        d.add_message(&mut p, 1, &message(&[(2, template(256, &FIELDS))]))
            .unwrap();
        // Another exporter's template 256 is not this one's.
        d.add_message(&mut p, 2, &data).unwrap();
        assert_eq!(stats(&p).no_template, 2);
        d.add_message(&mut p, 1, &data).unwrap();
        assert_eq!(p.stats().packets, 10);
        // Withdrawn (field count 0), then gone.
        d.add_message(&mut p, 1, &message(&[(2, vec![1, 0, 0, 0])]))
            .unwrap();
        d.add_message(&mut p, 1, &data).unwrap();
        assert_eq!(stats(&p).no_template, 3);
        assert_eq!(p.stats().packets, 10);
    }

    #[test]
    fn two_exporters_with_one_template_id_and_different_layouts() {
        let mut d = IpfixDecoder::new();
        let mut p = planner();
        d.add_message(&mut p, 1, &message(&[(2, template(300, &FIELDS))]))
            .unwrap();
        // Exporter 2: IPv6 addresses, IP octets only (bytes estimated per packet).
        let v6 = [(27, 16), (28, 16), (4, 1), (2, 8), (1, 8)];
        d.add_message(&mut p, 2, &message(&[(2, template(300, &v6))]))
            .unwrap();
        let mut r6 = Vec::new();
        r6.extend_from_slice(&Ipv6Addr::LOCALHOST.octets());
        r6.extend_from_slice(&Ipv6Addr::UNSPECIFIED.octets());
        r6.push(6);
        r6.extend_from_slice(&4u64.to_be_bytes());
        r6.extend_from_slice(&400u64.to_be_bytes());
        d.add_message(&mut p, 2, &message(&[(300, r6)])).unwrap();
        d.add_message(&mut p, 1, &message(&[(300, record(1, 2, 200, b""))]))
            .unwrap();
        let st = stats(&p);
        assert_eq!((st.planned, st.l3_octets), (2, 1));
        assert_eq!(p.stats().packets, 6);
        assert_eq!(p.stats().bytes, 400 + 4 * 14 + 200);
    }

    #[test]
    fn sampling_from_an_options_record_scales_the_counts() {
        let mut d = IpfixDecoder::new();
        let mut p = planner();
        // Options template 400: scope observationDomainId (149), samplingPacketInterval 1,
        // samplingPacketSpace 99: 1 in 100.
        let mut ot = template(400, &[(149, 4), (305, 4), (306, 4)]);
        ot.splice(4..4, 1u16.to_be_bytes());
        let mut orec = 7u32.to_be_bytes().to_vec();
        orec.extend_from_slice(&1u32.to_be_bytes());
        orec.extend_from_slice(&99u32.to_be_bytes());
        let m = message(&[
            (3, ot),
            (2, template(256, &FIELDS)),
            (400, orec),
            (256, record(4000, 10, 1000, b"")),
        ]);
        d.add_message(&mut p, 1, &m).unwrap();
        let st = stats(&p);
        assert_eq!((st.options_records, st.planned, st.unsampled), (1, 1, 0));
        assert_eq!(st.rate_range, Some((100, 100)));
        assert_eq!(st.sampled_packets, 10);
        assert!(
            (st.share_error() - super::super::sflow::SflowStats::share_error(10)).abs() < 1e-12
        );
        assert_eq!((p.stats().packets, p.stats().bytes), (1000, 100_000));
    }

    #[test]
    fn malformed_messages_are_counted_and_change_nothing() {
        let good = message(&[
            (2, template(256, &FIELDS)),
            (256, record(4000, 10, 1000, b"e")),
        ]);
        let mut bad: Vec<(Vec<u8>, &str)> = Vec::new();
        let mut v = good.clone();
        v[1] = 9;
        bad.push((v, "version 9, not 10"));
        let mut v = good.clone();
        v[2..4].copy_from_slice(&((good.len() + 1) as u16).to_be_bytes());
        bad.push((v, "message length"));
        let mut v = good.clone();
        v[18..20].copy_from_slice(&3u16.to_be_bytes());
        bad.push((v, "set length 3"));
        let mut v = good.clone();
        v[18..20].copy_from_slice(&2000u16.to_be_bytes());
        bad.push((v, "goes past the message's end"));
        let mut v = good.clone();
        v[16..18].copy_from_slice(&1u16.to_be_bytes());
        bad.push((v, "set id 1"));
        let mut v = good.clone();
        // The first field's length (after set header 4, template id 2, count 2, element 2).
        v[26..28].copy_from_slice(&0u16.to_be_bytes());
        bad.push((v, "of length 0"));
        let mut ot = template(400, &[(149, 4)]);
        ot.splice(4..4, 0u16.to_be_bytes());
        bad.push((message(&[(3, ot)]), "scope field count 0"));
        let mut t = template(256, &FIELDS);
        t.truncate(t.len() - 2);
        bad.push((message(&[(2, t)]), "ends inside"));
        for (m, want) in &bad {
            let mut d = IpfixDecoder::new();
            let mut p = planner();
            let e = d.add_message(&mut p, 1, m).unwrap_err();
            assert!(e.to_string().contains(want), "{want}: {e}");
            let st = stats(&p);
            assert_eq!(
                (st.messages, st.malformed, st.templates),
                (1, 1, 0),
                "{want}"
            );
            assert_eq!(p.stats().packets, 0);
            assert!(d.templates.is_empty());
        }
        // Every truncation and every single-byte change of a good message: read or
        // refused, never a panic.
        let mut d = IpfixDecoder::new();
        let mut p = planner();
        for n in 0..good.len() {
            let _ = d.add_message(&mut p, 9, &good[..n]);
        }
        for i in 0..good.len() {
            for x in [0u8, 1, 0x7f, 0x80, 0xff] {
                let mut v = good.clone();
                v[i] = x;
                let _ = d.add_message(&mut p, u64::from(x), &v);
            }
        }
        assert!(stats(&p).malformed > 0);
    }

    /// An Ethernet/IPv4/UDP frame from 192.0.2.1:`sport` to `dport` carrying `payload`.
    fn udp_frame(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
        let total = (20 + 8 + payload.len()) as u16;
        f.extend_from_slice(&[0x45, 0]);
        f.extend_from_slice(&total.to_be_bytes());
        f.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0, 192, 0, 2, 1, 192, 0, 2, 2]);
        f.extend_from_slice(&sport.to_be_bytes());
        f.extend_from_slice(&dport.to_be_bytes());
        f.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        f.extend_from_slice(&[0, 0]);
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn a_capture_of_messages_from_two_exporters() {
        use crate::capture::PcapWriter;
        let mut w = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET).unwrap();
        let t = message(&[(2, template(256, &FIELDS))]);
        let data = message(&[(256, record(4000, 10, 1000, b""))]);
        let mut bad = data.clone();
        bad[0] = 5;
        let frames = [
            udp_frame(40000, IPFIX_PORT, &t),
            udp_frame(40000, IPFIX_PORT, &data),
            // Another exporter (source port): no template of its own yet.
            udp_frame(40001, IPFIX_PORT, &data),
            udp_frame(40000, IPFIX_PORT, &bad),
            udp_frame(40000, 53, &data),
            vec![0u8; 60],
        ];
        for (i, f) in frames.iter().enumerate() {
            w.write_packet(1_000_000_000 + i as u64 * 1_000_000, f)
                .unwrap();
        }
        let cap = w.into_inner();
        let plan = plan_ipfix_capture(&cap[..], IPFIX_PORT, Direction::Ingress, PlanConfig::new(2))
            .unwrap();
        let x = plan.input.ipfix.unwrap();
        assert_eq!((x.messages, x.malformed, x.no_template), (4, 1, 1));
        assert_eq!((x.planned, x.other_packets), (1, 2));
        assert_eq!((plan.input.packets, plan.input.bytes), (10, 1000));
        // On another port, nothing is IPFIX.
        let plan = plan_ipfix_capture(&cap[..], 2055, Direction::Both, PlanConfig::new(2)).unwrap();
        assert_eq!(plan.input.ipfix.unwrap().other_packets, 6);
    }

    #[test]
    fn records_of_one_direction_are_planned() {
        let mut fields = FIELDS.to_vec();
        fields.push((61, 1));
        let rec = |dir: u8| {
            let mut r = record(4000, 10, 1000, b"");
            r.push(dir);
            r
        };
        let mut data = rec(0);
        data.extend(rec(1));
        let m = message(&[(2, template(256, &fields)), (256, data)]);
        for (d, want, other) in [
            (Direction::Ingress, 10, 1),
            (Direction::Egress, 10, 1),
            (Direction::Both, 20, 0),
        ] {
            let mut p = planner();
            IpfixDecoder::with_direction(d)
                .add_message(&mut p, 1, &m)
                .unwrap();
            assert_eq!(p.stats().packets, want, "{}", d.name());
            assert_eq!(stats(&p).other_direction, other);
        }
    }

    #[test]
    fn templates_kept_are_bounded() {
        let mut d = IpfixDecoder::new();
        let mut p = planner();
        // Templates of 16,000 one-byte fields: the field cap stops them before the count cap.
        let wide: Vec<(u16, u16)> = (0..16_000).map(|i| (1000 + (i % 100), 1)).collect();
        for id in 0..80u16 {
            d.add_message(&mut p, 1, &message(&[(2, template(256 + id, &wide))]))
                .unwrap();
        }
        let st = stats(&p);
        let fit = (MAX_TEMPLATE_FIELDS / 16_000) as u64;
        assert_eq!((st.templates, st.templates_dropped), (fit, 80 - fit));
        assert!(d.fields <= MAX_TEMPLATE_FIELDS);
        // Withdrawing one makes room for one.
        d.add_message(&mut p, 1, &message(&[(2, vec![1, 0, 0, 0])]))
            .unwrap();
        d.add_message(&mut p, 1, &message(&[(2, template(999, &wide))]))
            .unwrap();
        assert_eq!(stats(&p).templates, fit + 1);
        // Small templates: the count cap.
        let mut d = IpfixDecoder::new();
        let mut p = planner();
        for id in 0..(MAX_TEMPLATES as u16 + 10) {
            d.add_message(&mut p, 1, &message(&[(2, template(256 + id, &FIELDS))]))
                .unwrap();
        }
        assert_eq!(d.templates.len(), MAX_TEMPLATES);
        assert_eq!(stats(&p).templates_dropped, 10);
    }
}
