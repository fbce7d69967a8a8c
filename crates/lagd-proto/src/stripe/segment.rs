//! Software TCP segmentation (TSO) and checksum completion for frames from the TAP.
//!
//! The host hands the TAP 64 KB TCP super-frames with a `virtio_net_hdr` asking for
//! segmentation, and frames whose checksum it left to the device. A striped frame cannot be
//! segmented or checksummed by the member's NIC or the kernel (they do not know the 0x88b5
//! header), so lagd does it before encapsulating: [`segment`] splits a super-frame into
//! complete MSS-sized frames, each with correct IPv4 total length, identification and header
//! checksum (or IPv6 payload length), advanced TCP sequence number, flags as the kernel's own
//! segmentation sets them (FIN and PSH on the last segment only, CWR on the first only) and a
//! full TCP checksum; [`complete_checksum`] finishes the checksum of a single frame.
//!
//! [`GsoInfo`] carries the header's fields without depending on the system crate. Only TCP over
//! IPv4 and IPv6 (no IPv6 extension headers) is segmented: the daemon offers the host no UDP
//! segmentation in stripe mode. Inconsistent input is an error, never a panic, and nothing is
//! emitted for a frame that fails.

use core::fmt;

use crate::wire::ethernet::EthernetFrame;
use crate::wire::ip::{IpAddress, IpProtocol, checksum};
use crate::wire::ipv4::Ipv4Packet;
use crate::wire::ipv6::{HEADER_LEN as IPV6_HEADER_LEN, Ipv6Packet};
use crate::wire::l4::{TcpFlags, TcpPacket};
use crate::wire::{self, EtherType};

/// The kind of segmentation asked for (`virtio_net_hdr.gso_type` without the ECN bit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum GsoKind {
    /// Not a super-frame.
    #[default]
    None,
    /// TCP over IPv4.
    TcpV4,
    /// TCP over IPv6.
    TcpV6,
    /// Anything else (UDP fragmentation or segmentation...): not supported here.
    Other(u8),
}

/// The segmentation and checksum request that comes with a frame from the TAP: the fields of a
/// `virtio_net_hdr`, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct GsoInfo {
    /// What to segment.
    pub kind: GsoKind,
    /// The ECN flag of `gso_type`: the super-frame carries CWR, for the first segment only.
    pub ecn: bool,
    /// Payload bytes per segment (the MSS).
    pub gso_size: u16,
    /// Length of the headers every segment repeats (a hint; [`segment`] finds them itself).
    pub hdr_len: u16,
    /// The checksum from `csum_start` on is still to be computed; its field holds the
    /// pseudo-header sum.
    pub needs_csum: bool,
    /// Where checksumming starts, from the start of the frame.
    pub csum_start: u16,
    /// Where the checksum goes, from `csum_start`.
    pub csum_offset: u16,
}

impl GsoInfo {
    /// `VIRTIO_NET_HDR_F_NEEDS_CSUM`.
    pub const F_NEEDS_CSUM: u8 = 1;
    /// `VIRTIO_NET_HDR_GSO_TCPV4`.
    pub const GSO_TCPV4: u8 = 1;
    /// `VIRTIO_NET_HDR_GSO_TCPV6`.
    pub const GSO_TCPV6: u8 = 4;
    /// `VIRTIO_NET_HDR_GSO_ECN`.
    pub const GSO_ECN: u8 = 0x80;

    /// Decodes the fields of a `virtio_net_hdr` (in the host's byte order already).
    pub fn from_virtio(
        flags: u8,
        gso_type: u8,
        hdr_len: u16,
        gso_size: u16,
        csum_start: u16,
        csum_offset: u16,
    ) -> Self {
        let kind = match gso_type & !Self::GSO_ECN {
            0 => GsoKind::None,
            Self::GSO_TCPV4 => GsoKind::TcpV4,
            Self::GSO_TCPV6 => GsoKind::TcpV6,
            other => GsoKind::Other(other),
        };
        Self {
            kind,
            ecn: gso_type & Self::GSO_ECN != 0,
            gso_size,
            hdr_len,
            needs_csum: flags & Self::F_NEEDS_CSUM != 0,
            csum_start,
            csum_offset,
        }
    }

    /// Whether the frame is a super-frame to segment.
    pub fn is_gso(&self) -> bool {
        self.kind != GsoKind::None
    }
}

/// Why a frame could not be segmented or checksummed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SegmentError {
    /// The frame ends before its headers or lengths say.
    Truncated,
    /// The frame contradicts itself or the request (wrong IP version for the GSO type, not
    /// TCP, an IPv4 fragment, MSS 0, checksum offsets outside the frame).
    Malformed,
    /// Well-formed, but not something this code segments (UDP GSO, IPv6 extension headers).
    Unsupported,
    /// The caller's buffer cannot hold one segment after the headroom.
    BufferTooSmall,
}

impl SegmentError {
    /// A short lower-case name, stable enough for a metric label.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Truncated => "truncated",
            Self::Malformed => "malformed",
            Self::Unsupported => "unsupported",
            Self::BufferTooSmall => "buffer too small",
        }
    }
}

impl fmt::Display for SegmentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::error::Error for SegmentError {}

impl From<wire::Error> for SegmentError {
    fn from(e: wire::Error) -> Self {
        match e {
            wire::Error::Truncated => Self::Truncated,
            wire::Error::Malformed => Self::Malformed,
            wire::Error::Unsupported => Self::Unsupported,
        }
    }
}

/// Where the headers of a TCP super-frame are.
#[derive(Debug, Clone, Copy)]
struct Layout {
    v4: bool,
    l3: usize,
    l4: usize,
    /// End of the TCP header: where the payload starts.
    payload: usize,
    /// End of the IP packet (Ethernet padding excluded).
    end: usize,
    src: IpAddress,
    dst: IpAddress,
}

fn layout(frame: &[u8], kind: GsoKind) -> Result<Layout, SegmentError> {
    let walk = EthernetFrame::new_checked(frame)?.walk_tags::<0>()?;
    let l3 = walk.network_offset;
    let ip = &frame[l3..];
    let (v4, l4, end, src, dst) = match (kind, walk.ethertype) {
        (GsoKind::TcpV4, EtherType::Ipv4) => {
            let p = Ipv4Packet::new_checked(ip)?;
            if p.next_header() != IpProtocol::Tcp || p.is_fragment() {
                return Err(SegmentError::Malformed);
            }
            let end = l3 + usize::from(p.total_len());
            let (s, d) = (p.src_addr().into(), p.dst_addr().into());
            (true, l3 + p.header_len(), end, s, d)
        }
        (GsoKind::TcpV6, EtherType::Ipv6) => {
            let p = Ipv6Packet::new_checked(ip)?;
            if p.next_header() != IpProtocol::Tcp {
                return Err(SegmentError::Unsupported);
            }
            let end = l3 + IPV6_HEADER_LEN + usize::from(p.payload_len());
            let (s, d) = (p.src_addr().into(), p.dst_addr().into());
            (false, l3 + IPV6_HEADER_LEN, end, s, d)
        }
        (GsoKind::TcpV4 | GsoKind::TcpV6, _) => return Err(SegmentError::Malformed),
        _ => return Err(SegmentError::Unsupported),
    };
    let tcp = TcpPacket::new_checked(frame.get(l4..end).ok_or(SegmentError::Truncated)?)?;
    Ok(Layout {
        v4,
        l3,
        l4,
        payload: l4 + tcp.header_len(),
        end,
        src,
        dst,
    })
}

/// How many segments [`segment`] makes of `frame`, and the length of the longest; checks the
/// frame as `segment` does.
pub fn segment_count(frame: &[u8], gso: &GsoInfo) -> Result<(usize, usize), SegmentError> {
    plan(frame, gso).map(|(_, count, longest)| (count, longest))
}

fn plan(frame: &[u8], gso: &GsoInfo) -> Result<(Layout, usize, usize), SegmentError> {
    let l = layout(frame, gso.kind)?;
    let mss = usize::from(gso.gso_size);
    if mss == 0 {
        return Err(SegmentError::Malformed);
    }
    let payload = l.end - l.payload;
    let count = payload.div_ceil(mss).max(1);
    Ok((l, count, l.payload + payload.min(mss)))
}

/// Splits the TCP super-frame `frame` into segments of at most `gso.gso_size` payload bytes.
///
/// Each segment is built in `buf` at offset `headroom` (the bytes before it are left for the
/// caller, e.g. [`encapsulate`](super::header::encapsulate)'s 8 bytes) and handed to `out` as
/// `&mut buf[..headroom + segment length]`, in order. Every segment is a complete frame: the
/// Ethernet header and VLAN tags are copied, IP lengths, IPv4 identification (incremented per
/// segment) and header checksum, TCP sequence number, flags and full checksum are set.
///
/// Returns the number of segments. The frame is checked completely before the first segment is
/// emitted, so on error nothing was.
pub fn segment<F: FnMut(&mut [u8])>(
    frame: &[u8],
    gso: &GsoInfo,
    buf: &mut [u8],
    headroom: usize,
    mut out: F,
) -> Result<usize, SegmentError> {
    let (l, count, longest) = plan(frame, gso)?;
    if headroom.saturating_add(longest) > buf.len() {
        return Err(SegmentError::BufferTooSmall);
    }
    let mss = usize::from(gso.gso_size);
    let headers = &frame[..l.payload];
    let payload = &frame[l.payload..l.end];
    let tcp0 = TcpPacket::new_unchecked(&frame[l.l4..l.end]);
    let (seq0, flags0) = (tcp0.seq_number(), tcp0.flags());
    let ident0 = Ipv4Packet::new_unchecked(&frame[l.l3..]).ident();
    for i in 0..count {
        let chunk = payload.get(i * mss..).unwrap_or(&[]);
        let chunk = &chunk[..chunk.len().min(mss)];
        let seg_len = l.payload + chunk.len();
        let seg = &mut buf[headroom..headroom + seg_len];
        seg[..l.payload].copy_from_slice(headers);
        seg[l.payload..].copy_from_slice(chunk);
        let ip_len = seg_len - l.l3;
        if l.v4 {
            let mut ip = Ipv4Packet::new_unchecked(&mut seg[l.l3..]);
            ip.set_total_len(ip_len as u16);
            ip.set_ident(ident0.wrapping_add(i as u16));
            ip.fill_checksum();
        } else {
            let mut ip = Ipv6Packet::new_unchecked(&mut seg[l.l3..]);
            ip.set_payload_len((ip_len - IPV6_HEADER_LEN) as u16);
        }
        let mut tcp = TcpPacket::new_unchecked(&mut seg[l.l4..]);
        tcp.set_seq_number(seq0.wrapping_add((i * mss) as u32));
        let mut flags = flags0.bits();
        if i + 1 < count {
            flags &= !(TcpFlags::FIN.bits() | TcpFlags::PSH.bits());
        }
        if i > 0 {
            flags &= !TcpFlags::CWR.bits();
        }
        tcp.set_flags(TcpFlags(flags));
        tcp.fill_checksum(l.src, l.dst);
        out(&mut buf[..headroom + seg_len]);
    }
    Ok(count)
}

/// Completes a checksum the host left to the device (`NEEDS_CSUM`): the ones'-complement sum
/// of `frame[csum_start..]` (whose checksum field holds the pseudo-header sum) is complemented
/// into the 16-bit field at `csum_start + csum_offset`, as the kernel's `skb_checksum_help`
/// does (a result of 0 is stored as 0xffff).
///
/// `Malformed` (and the frame untouched) if the field does not lie within the frame.
pub fn complete_checksum(
    frame: &mut [u8],
    csum_start: usize,
    csum_offset: usize,
) -> Result<(), SegmentError> {
    let field = csum_start
        .checked_add(csum_offset)
        .filter(|&f| f.checked_add(2).is_some_and(|e| e <= frame.len()))
        .ok_or(SegmentError::Malformed)?;
    let sum = !checksum::fold(checksum::add(0, &frame[csum_start..]));
    let sum = if sum == 0 { 0xffff } else { sum };
    frame[field..field + 2].copy_from_slice(&sum.to_be_bytes());
    Ok(())
}

#[cfg(test)]
mod test;
