//! sFlow version 5 flow samples as planner input: datagrams (from a capture of UDP port 6343)
//! whose flow samples carry a raw packet header record (an Ethernet header and what follows,
//! as sampled) are fed to the planner once per sampled packet the sample stands for (its
//! sampling rate), at the frame's original length; counter samples and other records are
//! skipped. Sampling widens the error: [`SflowStats::share_error`] gives the 95% relative
//! error of a share estimated from `n` samples, `196 * sqrt(1 / n)` percent (the sFlow
//! specification's rule of thumb for a count estimated from samples).
//!
//! The layout read (all big-endian 32-bit words, opaque data padded to 4 bytes):
//! datagram = version (5), agent address type (1 IPv4, 2 IPv6), agent address, sub-agent id,
//! sequence number, uptime, sample count, samples; sample = type (enterprise 0: 1 flow
//! sample, 3 expanded flow sample), length, body; flow sample body = sequence number, source
//! id (expanded: type and index), sampling rate, sample pool, drops, input, output (expanded:
//! format and value each), record count, records; record = type (enterprise 0, format 1: raw
//! packet header), length, body; raw packet header = header protocol (1: Ethernet), frame
//! length (octets on the wire, FCS included), stripped octets (the FCS among them), header
//! length, header bytes.

pub use super::input::SflowStats;
use core::fmt;
use std::io;

use super::error::PlanError;
use super::planner::Planner;
use super::{PlanConfig, report};
use crate::capture::{
    CaptureReader, LINKTYPE_ETHERNET, LINKTYPE_LINUX_SLL, LINKTYPE_LINUX_SLL2, LINKTYPE_RAW,
};

/// The UDP port sFlow agents send to.
pub const SFLOW_PORT: u16 = 6343;

/// The most packets one sample may stand for (a sampling rate above it is an error: a
/// corrupt datagram, or a rate no planner run could replay).
pub const MAX_SAMPLING_RATE: u32 = 1 << 20;

/// Why a datagram could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SflowError {
    /// Byte offset in the datagram.
    pub offset: usize,
    /// What was wrong there.
    pub what: String,
}

impl fmt::Display for SflowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sFlow datagram, byte {}: {}", self.offset, self.what)
    }
}

impl std::error::Error for SflowError {}

/// A raw packet header from a flow sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampledHeader<'a> {
    /// The sampling rate (1 in N).
    pub sampling_rate: u32,
    /// The header protocol (1: Ethernet).
    pub protocol: u32,
    /// The frame's length on the wire, FCS included.
    pub frame_length: u32,
    /// Octets removed before the header was taken (the FCS, usually 4).
    pub stripped: u32,
    /// The sampled bytes (from the destination MAC on, for Ethernet).
    pub header: &'a [u8],
}

struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn u32(&mut self, what: &str) -> Result<u32, SflowError> {
        let v = self
            .b
            .get(self.at..self.at + 4)
            .ok_or_else(|| self.err(format!("ends inside {what}")))?;
        self.at += 4;
        Ok(u32::from_be_bytes([v[0], v[1], v[2], v[3]]))
    }

    fn bytes(&mut self, n: usize, what: &str) -> Result<&'a [u8], SflowError> {
        let padded = n.checked_add(3).map(|x| x & !3).unwrap_or(usize::MAX);
        let end = self.at.checked_add(padded).filter(|&e| e <= self.b.len());
        let Some(end) = end else {
            return Err(self.err(format!("{what} of {n} bytes goes past the end")));
        };
        let s = &self.b[self.at..self.at + n];
        self.at = end;
        Ok(s)
    }

    fn err(&self, what: String) -> SflowError {
        SflowError {
            offset: self.at,
            what,
        }
    }
}

/// Reads one sFlow v5 datagram: calls `each` with every raw packet header of its flow
/// samples, and returns (flow samples with an Ethernet header, other samples).
pub fn read_datagram<'a>(
    d: &'a [u8],
    mut each: impl FnMut(&SampledHeader<'a>),
) -> Result<(u64, u64), SflowError> {
    let mut c = Cursor { b: d, at: 0 };
    let version = c.u32("the version")?;
    if version != 5 {
        return Err(SflowError {
            offset: 0,
            what: format!("version {version}, not 5"),
        });
    }
    match c.u32("the agent address type")? {
        1 => c.bytes(4, "the agent address")?,
        2 => c.bytes(16, "the agent address")?,
        t => return Err(c.err(format!("agent address type {t} (1 or 2 expected)"))),
    };
    for what in ["the sub-agent id", "the sequence number", "the uptime"] {
        c.u32(what)?;
    }
    let n = c.u32("the sample count")?;
    let (mut used, mut other) = (0u64, 0u64);
    for _ in 0..n {
        let kind = c.u32("a sample's type")?;
        let len = c.u32("a sample's length")? as usize;
        let start = c.at;
        let body = c.bytes(len, "a sample")?;
        let expanded = match kind {
            1 => false,
            3 => true,
            _ => {
                other += 1;
                continue;
            }
        };
        let mut s = Cursor { b: body, at: 0 };
        let fail = |e: SflowError| SflowError {
            offset: start + e.offset,
            what: e.what,
        };
        s.u32("the sample's sequence number").map_err(fail)?;
        s.u32("the source id").map_err(fail)?;
        if expanded {
            s.u32("the source id index").map_err(fail)?;
        }
        let rate = s.u32("the sampling rate").map_err(fail)?;
        if rate == 0 || rate > MAX_SAMPLING_RATE {
            return Err(fail(s.err(format!(
                "sampling rate {rate} (1 to {MAX_SAMPLING_RATE} expected)"
            ))));
        }
        s.u32("the sample pool").map_err(fail)?;
        s.u32("the drops").map_err(fail)?;
        // The expanded form gives each interface as a format and a value.
        for what in ["the input interface", "the output interface"] {
            s.u32(what).map_err(fail)?;
            if expanded {
                s.u32(what).map_err(fail)?;
            }
        }
        let records = s.u32("the record count").map_err(fail)?;
        let mut found = false;
        for _ in 0..records {
            let rkind = s.u32("a record's type").map_err(fail)?;
            let rlen = s.u32("a record's length").map_err(fail)? as usize;
            let rstart = s.at;
            let rbody = s.bytes(rlen, "a record").map_err(fail)?;
            if rkind != 1 {
                continue;
            }
            let mut r = Cursor { b: rbody, at: 0 };
            let rfail = |e: SflowError| SflowError {
                offset: start + rstart + e.offset,
                what: e.what,
            };
            let protocol = r.u32("the header protocol").map_err(rfail)?;
            let frame_length = r.u32("the frame length").map_err(rfail)?;
            let stripped = r.u32("the stripped count").map_err(rfail)?;
            let hlen = r.u32("the header length").map_err(rfail)? as usize;
            let header = r.bytes(hlen, "the sampled header").map_err(rfail)?;
            if protocol == 1 {
                found = true;
                each(&SampledHeader {
                    sampling_rate: rate,
                    protocol,
                    frame_length,
                    stripped,
                    header,
                });
            }
        }
        if found {
            used += 1;
        } else {
            other += 1;
        }
    }
    Ok((used, other))
}

/// The UDP payload of a captured frame (Ethernet, any VLAN tags, IPv4 or IPv6) sent to
/// `port`, if it is one.
pub fn udp_payload(frame: &[u8], port: u16) -> Option<&[u8]> {
    let mut at = 12;
    let mut ethertype = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    while matches!(ethertype, 0x8100 | 0x88a8) {
        at += 4;
        ethertype = u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]);
    }
    ip_udp_payload(frame.get(at + 2..)?, ethertype, port)
}

/// The UDP payload to `port` of an IP packet whose EtherType is `ethertype`.
pub fn ip_udp_payload(ip: &[u8], ethertype: u16, port: u16) -> Option<&[u8]> {
    let (l4, proto) = match ethertype {
        0x0800 => {
            let ihl = usize::from(ip.first()? & 0x0f) * 4;
            // A later fragment has no UDP header.
            let frag = u16::from_be_bytes([*ip.get(6)?, *ip.get(7)?]) & 0x1fff;
            if ihl < 20 || frag != 0 {
                return None;
            }
            (ip.get(ihl..)?, *ip.get(9)?)
        }
        0x86dd => (ip.get(40..)?, *ip.get(6)?),
        _ => return None,
    };
    if proto != 17 || u16::from_be_bytes([*l4.get(2)?, *l4.get(3)?]) != port {
        return None;
    }
    let len = usize::from(u16::from_be_bytes([*l4.get(4)?, *l4.get(5)?]));
    l4.get(8..len.max(8).min(l4.len()))
}

impl Planner {
    /// Adds one sFlow v5 datagram: each flow sample's Ethernet header counts as its sampling
    /// rate's worth of frames of the sampled length (without FCS). Counted in
    /// [`super::InputStats::sflow`].
    pub fn add_sflow_datagram(&mut self, d: &[u8]) -> Result<(), SflowError> {
        let mut samples: Vec<(u32, u32, Vec<u8>)> = Vec::new();
        let (used, other) = read_datagram(d, |h| {
            let wire = h.frame_length.saturating_sub(h.stripped);
            samples.push((h.sampling_rate, wire, h.header.to_vec()));
        })?;
        let st = self.stats.sflow.get_or_insert_with(SflowStats::default);
        st.datagrams += 1;
        st.samples += used;
        st.skipped_samples += other;
        for (rate, _, _) in &samples {
            let r = st.rate_range.get_or_insert((*rate, *rate));
            r.0 = r.0.min(*rate);
            r.1 = r.1.max(*rate);
        }
        for (rate, wire, header) in samples {
            for _ in 0..rate {
                self.add_frame(&header, wire);
            }
        }
        Ok(())
    }
}

/// The UDP payload to `port` of a captured packet of link type `linktype` (Ethernet, raw IP,
/// Linux cooked v1/v2).
fn packet_udp_payload(linktype: u32, d: &[u8], port: u16) -> Option<&[u8]> {
    match linktype {
        LINKTYPE_ETHERNET => udp_payload(d, port),
        LINKTYPE_RAW | 228 | 229 => {
            let ethertype = match d.first()? >> 4 {
                4 => 0x0800,
                6 => 0x86dd,
                _ => return None,
            };
            ip_udp_payload(d, ethertype, port)
        }
        LINKTYPE_LINUX_SLL => ip_udp_payload(
            d.get(16..)?,
            u16::from_be_bytes([*d.get(14)?, *d.get(15)?]),
            port,
        ),
        LINKTYPE_LINUX_SLL2 => ip_udp_payload(
            d.get(20..)?,
            u16::from_be_bytes([*d.first()?, *d.get(1)?]),
            port,
        ),
        _ => None,
    }
}

/// Reads a capture of sFlow v5 datagrams (UDP to [`SFLOW_PORT`]) into a plan: the flow
/// samples' headers, scaled by their sampling rates, at the capture's timestamps. A datagram
/// that cannot be read is an error naming the packet and the byte.
pub fn plan_sflow_capture<R: io::Read>(
    reader: R,
    config: PlanConfig,
) -> Result<report::Plan, PlanError> {
    let mut planner = Planner::new(config)?;
    let mut cap = CaptureReader::new(reader).map_err(PlanError::Capture)?;
    let mut n = 0u64;
    while let Some(p) = cap.next_packet().map_err(PlanError::Capture)? {
        n += 1;
        planner.note_time(p.ts_nanos);
        match packet_udp_payload(p.linktype, p.data, SFLOW_PORT) {
            Some(d) => planner
                .add_sflow_datagram(d)
                .map_err(|e| PlanError::Config(format!("packet {n}: {e}")))?,
            None => {
                planner
                    .stats
                    .sflow
                    .get_or_insert_with(SflowStats::default)
                    .other_packets += 1;
            }
        }
    }
    Ok(planner.finish())
}

impl Planner {
    /// Counts a datagram from a socket that could not be read (see [`read_datagram`]).
    pub fn count_unreadable_sflow(&mut self) {
        self.stats
            .sflow
            .get_or_insert_with(SflowStats::default)
            .unreadable += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_datagrams_name_the_byte() {
        let mut d = Vec::new();
        for w in [5u32, 1, 0x0a00_0001, 0, 1, 100, 1] {
            d.extend_from_slice(&w.to_be_bytes());
        }
        // A flow sample of 64 bytes, but only 8 follow.
        d.extend_from_slice(&1u32.to_be_bytes());
        d.extend_from_slice(&64u32.to_be_bytes());
        d.extend_from_slice(&[0; 8]);
        let e = read_datagram(&d, |_| {}).unwrap_err();
        assert_eq!(e.offset, 36);
        assert!(
            e.what.contains("a sample of 64 bytes goes past the end"),
            "{e}"
        );
        let e = read_datagram(&[0, 0, 0, 4], |_| {}).unwrap_err();
        assert!(e.to_string().contains("version 4, not 5"));
        assert!(read_datagram(&[0, 0], |_| {}).is_err());
    }

    #[test]
    fn share_error_narrows_with_samples() {
        assert_eq!(SflowStats::share_error(0), 1.0);
        assert!((SflowStats::share_error(10_000) - 0.0196).abs() < 1e-9);
        assert!(SflowStats::share_error(100) > SflowStats::share_error(1000));
    }
}
