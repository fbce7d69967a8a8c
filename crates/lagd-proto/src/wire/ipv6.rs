//! IPv6 headers (RFC 8200) and a walker over the extension headers.

use super::ip::{IpProtocol, Ipv6Address};
use super::view_constructors;
use super::{Error, Result, be16, be32};

mod field {
    use core::ops::Range;
    pub(crate) const VER_TC_FLOW: Range<usize> = 0..4;
    pub(crate) const LENGTH: Range<usize> = 4..6;
    pub(crate) const NXT_HDR: usize = 6;
    pub(crate) const HOP_LIMIT: usize = 7;
    pub(crate) const SRC_ADDR: Range<usize> = 8..24;
    pub(crate) const DST_ADDR: Range<usize> = 24..40;
    pub(crate) const PAYLOAD: usize = 40;
}

/// Length of the fixed header.
pub const HEADER_LEN: usize = field::PAYLOAD;

/// The most extension headers [`Ipv6Packet::upper_layer`] walks before giving up.
pub const MAX_EXTENSION_HEADERS: usize = 16;

/// Length of the Fragment extension header.
pub const FRAGMENT_HEADER_LEN: usize = 8;

/// A view over an IPv6 packet.
#[derive(Debug, Clone)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

/// Short name for [`Ipv6Packet`].
pub type Packet<T> = Ipv6Packet<T>;
/// Short name for [`Ipv6Repr`].
pub type Repr = Ipv6Repr;

view_constructors!(Ipv6Packet);

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Checks the buffer holds the 40-byte header and the payload length it announces.
    ///
    /// `Truncated` if either is cut short; `Malformed` if the version is not 6. A longer buffer
    /// (Ethernet padding) is fine: [`payload`](Self::payload) stops at the payload length.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 6 {
            return Err(Error::Malformed);
        }
        if HEADER_LEN + usize::from(self.payload_len()) > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    fn first_word(&self) -> u32 {
        be32(self.buffer.as_ref(), field::VER_TC_FLOW.start)
    }

    /// The version field (6 for a checked packet).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 4
    }

    /// Traffic class: DSCP (high 6 bits) and ECN (low 2 bits).
    pub fn traffic_class(&self) -> u8 {
        (self.first_word() >> 20) as u8
    }

    /// The 20-bit flow label.
    pub fn flow_label(&self) -> u32 {
        self.first_word() & 0x000f_ffff
    }

    /// Payload length: everything after the fixed header, extension headers included.
    pub fn payload_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::LENGTH.start)
    }

    /// The header after the fixed header.
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol::from(self.buffer.as_ref()[field::NXT_HDR])
    }

    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv6Address {
        Ipv6Address::from_bytes(&self.buffer.as_ref()[field::SRC_ADDR])
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv6Address {
        Ipv6Address::from_bytes(&self.buffer.as_ref()[field::DST_ADDR])
    }

    /// Everything after the fixed header up to the payload length (extension headers
    /// included). A zero payload length with a Hop-by-Hop header next is a jumbogram
    /// (RFC 2675): its payload runs to the end of the buffer. Never panics.
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        b.get(field::PAYLOAD..self.payload_end()).unwrap_or(&[])
    }

    fn payload_end(&self) -> usize {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return len;
        }
        let plen = usize::from(self.payload_len());
        if plen == 0 && self.next_header() == IpProtocol::HopByHop {
            return len;
        }
        (HEADER_LEN + plen).min(len)
    }

    /// Walks the extension headers to the upper-layer header.
    ///
    /// Walks Hop-by-Hop Options, Routing and Destination Options (length `(hdrlen + 1) * 8`),
    /// Fragment (8 bytes) and Authentication (length `(payload_len + 2) * 4`) headers, and stops
    /// at any other next header (ESP and "no next header" included), at the payload past a
    /// non-first fragment (whose bytes are not an upper-layer header: check
    /// [`Ipv6Upper::is_later_fragment`] before reading ports), or after
    /// [`MAX_EXTENSION_HEADERS`] headers (`Unsupported`). Headers must lie within the payload
    /// (`Truncated` otherwise). Headers out of the RFC 8200 order are walked all the same.
    pub fn upper_layer(&self) -> Result<Ipv6Upper> {
        let b = self.buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let end = self.payload_end();
        let mut up = Ipv6Upper {
            next_header: self.next_header(),
            offset: HEADER_LEN,
            fragment: None,
        };
        for _ in 0..MAX_EXTENSION_HEADERS {
            let (this, at) = (up.next_header, up.offset);
            // The length byte, when the header has one, is the second.
            let len_byte = || match b.get(at + 1) {
                Some(&n) if at + 2 <= end => Ok(usize::from(n)),
                _ => Err(Error::Truncated),
            };
            let len = match this {
                IpProtocol::HopByHop | IpProtocol::Ipv6Route | IpProtocol::Ipv6Opts => {
                    (len_byte()? + 1) * 8
                }
                IpProtocol::Ah => (len_byte()? + 2) * 4,
                IpProtocol::Ipv6Frag => FRAGMENT_HEADER_LEN,
                _ => return Ok(up),
            };
            if at + len > end {
                return Err(Error::Truncated);
            }
            up.next_header = IpProtocol::from(b[at]);
            up.offset = at + len;
            if this == IpProtocol::Ipv6Frag {
                let off_flags = be16(b, at + 2);
                let frag = Ipv6Fragment {
                    offset: off_flags & 0xfff8,
                    more: off_flags & 1 != 0,
                    ident: be32(b, at + 4),
                };
                up.fragment = Some(frag);
                if frag.offset != 0 {
                    return Ok(up);
                }
            }
        }
        match up.next_header {
            IpProtocol::HopByHop
            | IpProtocol::Ipv6Route
            | IpProtocol::Ipv6Opts
            | IpProtocol::Ipv6Frag
            | IpProtocol::Ah => Err(Error::Unsupported),
            _ => Ok(up),
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    fn set_first_word(&mut self, v: u32) {
        self.buffer.as_mut()[field::VER_TC_FLOW].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the version field.
    pub fn set_version(&mut self, v: u8) {
        let w = self.first_word() & 0x0fff_ffff;
        self.set_first_word(w | (u32::from(v & 0x0f) << 28));
    }

    /// Sets the traffic class.
    pub fn set_traffic_class(&mut self, tc: u8) {
        let w = self.first_word() & 0xf00f_ffff;
        self.set_first_word(w | (u32::from(tc) << 20));
    }

    /// Sets the flow label (only the low 20 bits are used).
    pub fn set_flow_label(&mut self, label: u32) {
        let w = self.first_word() & 0xfff0_0000;
        self.set_first_word(w | (label & 0x000f_ffff));
    }

    /// Sets the payload length.
    pub fn set_payload_len(&mut self, v: u16) {
        self.buffer.as_mut()[field::LENGTH].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the next header.
    pub fn set_next_header(&mut self, p: IpProtocol) {
        self.buffer.as_mut()[field::NXT_HDR] = p.into();
    }

    /// Sets the hop limit.
    pub fn set_hop_limit(&mut self, v: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = v;
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, a: Ipv6Address) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&a.0);
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, a: Ipv6Address) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&a.0);
    }

    /// Mutable access to the payload (same bounds as [`payload`](Ipv6Packet::payload)).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = self.payload_end();
        self.buffer
            .as_mut()
            .get_mut(field::PAYLOAD..end)
            .unwrap_or(&mut [])
    }
}

/// The Fragment header's fields, as found by [`Ipv6Packet::upper_layer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Fragment {
    /// Offset of this fragment's data in the original payload, in bytes (a multiple of 8).
    pub offset: u16,
    /// More fragments follow.
    pub more: bool,
    /// Identification.
    pub ident: u32,
}

/// The result of [`Ipv6Packet::upper_layer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Upper {
    /// The last next-header value: the upper-layer protocol, or the header the walk stopped at.
    pub next_header: IpProtocol,
    /// Offset of the upper-layer header (for a non-first fragment, of the fragment's data)
    /// from the start of the IPv6 header.
    pub offset: usize,
    /// The Fragment header, if one was crossed.
    pub fragment: Option<Ipv6Fragment>,
}

impl Ipv6Upper {
    /// Whether the packet is a fragment other than the first, so that no upper-layer header
    /// (and no port) is present at `offset`.
    pub fn is_later_fragment(&self) -> bool {
        matches!(self.fragment, Some(f) if f.offset != 0)
    }
}

/// A parsed IPv6 fixed header.
///
/// Legal values: `payload_len <= 65535`, `flow_label < 2^20`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Repr {
    /// Source address.
    pub src_addr: Ipv6Address,
    /// Destination address.
    pub dst_addr: Ipv6Address,
    /// The header after the fixed header.
    pub next_header: IpProtocol,
    /// Payload length in bytes (extension headers included).
    pub payload_len: usize,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class (DSCP and ECN).
    pub traffic_class: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
}

impl Ipv6Repr {
    /// Parses the fixed header of a packet, checking its length.
    pub fn parse<T: AsRef<[u8]>>(packet: &Ipv6Packet<T>) -> Result<Self> {
        packet.check_len()?;
        Ok(Self {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: usize::from(packet.payload_len()),
            hop_limit: packet.hop_limit(),
            traffic_class: packet.traffic_class(),
            flow_label: packet.flow_label(),
        })
    }

    /// Length of the fixed header (40).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the fixed header into the start of `packet` (the payload length saturates at
    /// 65535 for an illegal Repr).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Ipv6Packet<T>) {
        packet.set_first_word(0);
        packet.set_version(6);
        packet.set_traffic_class(self.traffic_class);
        packet.set_flow_label(self.flow_label);
        packet.set_payload_len(u16::try_from(self.payload_len).unwrap_or(u16::MAX));
        packet.set_next_header(self.next_header);
        packet.set_hop_limit(self.hop_limit);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use proptest::prelude::*;

    /// IPv6/UDP DNS query for `example.com` A, 2001:db8::1:53421 -> 2001:4860:4860::8888:53,
    /// flow label 0x5d3e1 (checksums valid).
    const DNS_QUERY: [u8; 77] = [
        0x60, 0x05, 0xd3, 0xe1, 0x00, 0x25, 0x11, 0x40, // ver/tc/flow, len 37, UDP, hlim 64
        0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x01, // src
        0x20, 0x01, 0x48, 0x60, 0x48, 0x60, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x88,
        0x88, // dst
        0xd0, 0xad, 0x00, 0x35, 0x00, 0x25, 0xde, 0x24, // UDP
        0x1a, 0x2b, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // DNS header
        0x07, b'e', b'x', b'a', b'm', b'p', b'l', b'e', 0x03, b'c', b'o', b'm', 0x00, 0x00, 0x01,
        0x00, 0x01, // question
    ];

    /// IPv6 fe80::1 -> ff02::16 with a Hop-by-Hop header (PadN), then a Fragment header (first
    /// fragment, M set, ident 0xdeadbeef), then a UDP header 5353 -> 5353.
    const HBH_FRAG: [u8; 72] = [
        0x60, 0x00, 0x00, 0x00, 0x00, 0x20, 0x00, 0x01, // len 32, next HBH, hlim 1
        0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x01, // src
        0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x16, // dst
        0x2c, 0x00, 0x01, 0x04, 0x00, 0x00, 0x00, 0x00, // HBH: next Fragment, PadN(4)
        0x11, 0x00, 0x00, 0x01, 0xde, 0xad, 0xbe, 0xef, // Fragment: next UDP, offset 0, M
        0x14, 0xe9, 0x14, 0xe9, 0x05, 0x18, 0x00,
        0x00, // UDP header (length of whole datagram)
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // data
    ];

    #[test]
    fn parses_dns_query() {
        let p = Ipv6Packet::new_checked(&DNS_QUERY[..]).unwrap();
        assert_eq!(p.version(), 6);
        assert_eq!(p.traffic_class(), 0);
        assert_eq!(p.flow_label(), 0x5d3e1);
        assert_eq!(p.payload_len(), 37);
        assert_eq!(p.next_header(), IpProtocol::Udp);
        assert_eq!(p.hop_limit(), 64);
        assert_eq!(p.src_addr().to_string(), "2001:db8::1");
        assert_eq!(p.dst_addr().to_string(), "2001:4860:4860::8888");
        assert_eq!(p.payload(), &DNS_QUERY[40..]);
        let up = p.upper_layer().unwrap();
        assert_eq!(
            up,
            Ipv6Upper {
                next_header: IpProtocol::Udp,
                offset: 40,
                fragment: None
            }
        );
        assert!(!up.is_later_fragment());
        let r = Ipv6Repr::parse(&p).unwrap();
        assert_eq!(
            r,
            Ipv6Repr {
                src_addr: "2001:db8::1".parse().unwrap(),
                dst_addr: "2001:4860:4860::8888".parse().unwrap(),
                next_header: IpProtocol::Udp,
                payload_len: 37,
                hop_limit: 64,
                traffic_class: 0,
                flow_label: 0x5d3e1,
            }
        );
        let mut buf = DNS_QUERY;
        buf[..40].fill(0xaa);
        r.emit(&mut Ipv6Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, DNS_QUERY);
    }

    #[test]
    fn traffic_class_and_flow_label_bits() {
        let mut b = DNS_QUERY;
        let mut p = Ipv6Packet::new_unchecked(&mut b[..]);
        p.set_traffic_class(0xb8); // EF
        assert_eq!(p.flow_label(), 0x5d3e1);
        assert_eq!(p.version(), 6);
        p.set_flow_label(0xfff_ffff);
        assert_eq!(p.traffic_class(), 0xb8);
        assert_eq!(&b[..4], &[0x6b, 0x8f, 0xff, 0xff]);
    }

    #[test]
    fn walks_hop_by_hop_then_fragment() {
        let p = Ipv6Packet::new_checked(&HBH_FRAG[..]).unwrap();
        assert_eq!(p.next_header(), IpProtocol::HopByHop);
        let up = p.upper_layer().unwrap();
        assert_eq!(up.next_header, IpProtocol::Udp);
        assert_eq!(up.offset, 56);
        assert_eq!(
            up.fragment,
            Some(Ipv6Fragment {
                offset: 0,
                more: true,
                ident: 0xdead_beef
            })
        );
        assert!(!up.is_later_fragment());
        assert_eq!(
            &HBH_FRAG[up.offset..up.offset + 4],
            &[0x14, 0xe9, 0x14, 0xe9]
        );
    }

    #[test]
    fn stops_after_a_later_fragment() {
        let mut b = HBH_FRAG;
        // offset 1232 bytes (154 units), last fragment.
        b[50..52].copy_from_slice(&(154u16 << 3).to_be_bytes());
        let up = Ipv6Packet::new_checked(&b[..])
            .unwrap()
            .upper_layer()
            .unwrap();
        assert_eq!(up.next_header, IpProtocol::Udp);
        assert_eq!(up.offset, 56);
        assert_eq!(
            up.fragment,
            Some(Ipv6Fragment {
                offset: 1232,
                more: false,
                ident: 0xdead_beef
            })
        );
        assert!(up.is_later_fragment());
        // A Destination Options header after a later fragment is data, not walked.
        b[48] = 60;
        let up = Ipv6Packet::new_checked(&b[..])
            .unwrap()
            .upper_layer()
            .unwrap();
        assert_eq!((up.next_header, up.offset), (IpProtocol::Ipv6Opts, 56));
    }

    #[test]
    fn walks_routing_dest_opts_and_ah() {
        // fixed header -> Routing (24 bytes) -> Dest opts (8) -> AH (16) -> ESP
        let mut b = [0u8; 40 + 24 + 8 + 16 + 8];
        b[0] = 0x60;
        let plen = (b.len() - 40) as u16;
        b[4..6].copy_from_slice(&plen.to_be_bytes());
        b[6] = 43;
        b[40] = 60;
        b[41] = 2; // (2 + 1) * 8 = 24
        b[64] = 51;
        b[65] = 0;
        b[72] = 50;
        b[73] = 2; // (2 + 2) * 4 = 16
        let up = Ipv6Packet::new_checked(&b[..])
            .unwrap()
            .upper_layer()
            .unwrap();
        assert_eq!(up.next_header, IpProtocol::Esp);
        assert_eq!(up.offset, 88);
        assert_eq!(up.fragment, None);
        // Routing header longer than the payload.
        b[41] = 9;
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.upper_layer(), Err(Error::Truncated));
        // No next header: stop right away.
        b[6] = 59;
        let up = Ipv6Packet::new_checked(&b[..])
            .unwrap()
            .upper_layer()
            .unwrap();
        assert_eq!((up.next_header, up.offset), (IpProtocol::Ipv6NoNxt, 40));
    }

    #[test]
    fn walk_is_bounded() {
        // 20 empty Destination Options headers chained: more than the walk allows.
        let n = MAX_EXTENSION_HEADERS + 4;
        let mut b = vec![0u8; 40 + n * 8];
        b[0] = 0x60;
        b[4..6].copy_from_slice(&((n * 8) as u16).to_be_bytes());
        b[6] = 60;
        for i in 0..n {
            b[40 + i * 8] = if i + 1 == n { 6 } else { 60 };
        }
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.upper_layer(), Err(Error::Unsupported));
        // Exactly the limit is fine.
        let n = MAX_EXTENSION_HEADERS;
        b[40 + (n - 1) * 8] = 6;
        let len = (n * 8) as u16;
        b[4..6].copy_from_slice(&len.to_be_bytes());
        let up = Ipv6Packet::new_checked(&b[..])
            .unwrap()
            .upper_layer()
            .unwrap();
        assert_eq!((up.next_header, up.offset), (IpProtocol::Tcp, 40 + n * 8));
    }

    #[test]
    fn walk_truncations() {
        // Cut the payload length inside each extension header.
        for plen in 0..16u16 {
            let mut b = HBH_FRAG;
            b[4..6].copy_from_slice(&plen.to_be_bytes());
            let p = Ipv6Packet::new_checked(&b[..]).unwrap();
            if plen == 0 {
                // Zero with Hop-by-Hop next is a jumbogram: the buffer bounds the walk.
                assert_eq!(p.upper_layer().unwrap().offset, 56);
            } else {
                assert_eq!(p.upper_layer(), Err(Error::Truncated), "plen {plen}");
            }
        }
        let mut b = HBH_FRAG;
        b[4..6].copy_from_slice(&16u16.to_be_bytes());
        let up = Ipv6Packet::new_checked(&b[..])
            .unwrap()
            .upper_layer()
            .unwrap();
        assert_eq!(up.offset, 56, "headers end exactly at the payload end");
    }

    #[test]
    fn every_truncation_is_an_error() {
        for frame in [&DNS_QUERY[..], &HBH_FRAG[..]] {
            for len in 0..frame.len() {
                let e = Ipv6Packet::new_checked(&frame[..len]).err();
                assert_eq!(e, Some(Error::Truncated), "len {len}");
            }
        }
        let mut b = DNS_QUERY;
        b[0] = 0x45;
        assert_eq!(
            Ipv6Packet::new_checked(&b[..]).err(),
            Some(Error::Malformed)
        );
    }

    fn arb_repr() -> impl Strategy<Value = Ipv6Repr> {
        (
            any::<[u8; 16]>(),
            any::<[u8; 16]>(),
            any::<u8>(),
            0usize..=2000,
            any::<u8>(),
            any::<u8>(),
            0u32..(1 << 20),
        )
            .prop_map(|(s, d, nh, len, hl, tc, fl)| Ipv6Repr {
                src_addr: Ipv6Address(s),
                dst_addr: Ipv6Address(d),
                next_header: IpProtocol::from(nh),
                payload_len: len,
                hop_limit: hl,
                traffic_class: tc,
                flow_label: fl,
            })
    }

    /// Builds mostly-valid fixed headers followed by garbage, so the walker gets exercised.
    fn arb_packet() -> impl Strategy<Value = Vec<u8>> {
        (
            proptest::collection::vec(any::<u8>(), 0..200),
            prop_oneof![
                Just(0u8),
                Just(43),
                Just(44),
                Just(51),
                Just(60),
                any::<u8>()
            ],
            any::<bool>(),
        )
            .prop_map(|(mut v, nh, fix_len)| {
                if v.len() >= 40 {
                    v[0] = (v[0] & 0x0f) | 0x60;
                    v[6] = nh;
                    if fix_len {
                        let plen = (v.len() - 40) as u16;
                        v[4..6].copy_from_slice(&plen.to_be_bytes());
                    }
                }
                for i in (40..v.len()).step_by(8) {
                    // Favour extension-header next-header values inside the garbage.
                    if v[i] % 3 == 0 {
                        v[i] = [0, 43, 44, 51, 60][usize::from(v[i]) % 5];
                    }
                }
                v
            })
    }

    proptest! {
        #[test]
        fn accessors_never_panic(data in arb_packet()) {
            if let Ok(p) = Ipv6Packet::new_checked(&data[..]) {
                let _ = (p.version(), p.traffic_class(), p.flow_label(), p.payload_len());
                let _ = (p.next_header(), p.hop_limit(), p.src_addr(), p.dst_addr());
                prop_assert!(40 + p.payload().len() <= data.len());
                if let Ok(up) = p.upper_layer() {
                    prop_assert!(up.offset >= 40 && up.offset <= data.len());
                }
                let _ = Ipv6Repr::parse(&p).unwrap();
            }
            let p = Ipv6Packet::new_unchecked(&data[..]);
            let _ = (p.payload(), p.upper_layer());
        }

        #[test]
        fn repr_round_trip(r in arb_repr()) {
            let mut buf = vec![0u8; r.buffer_len() + r.payload_len];
            r.emit(&mut Ipv6Packet::new_unchecked(&mut buf[..]));
            let p = Ipv6Packet::new_checked(&buf[..]).unwrap();
            prop_assert_eq!(Ipv6Repr::parse(&p), Ok(r));
        }
    }
}
