//! IPv4 headers (RFC 791).

use super::ip::{IpProtocol, Ipv4Address, checksum};
use super::view_constructors;
use super::{Error, Result, be16};

mod field {
    use core::ops::Range;
    pub(crate) const VER_IHL: usize = 0;
    pub(crate) const DSCP_ECN: usize = 1;
    pub(crate) const LENGTH: Range<usize> = 2..4;
    pub(crate) const IDENT: Range<usize> = 4..6;
    pub(crate) const FLG_OFF: Range<usize> = 6..8;
    pub(crate) const TTL: usize = 8;
    pub(crate) const PROTOCOL: usize = 9;
    pub(crate) const CHECKSUM: Range<usize> = 10..12;
    pub(crate) const SRC_ADDR: Range<usize> = 12..16;
    pub(crate) const DST_ADDR: Range<usize> = 16..20;
    pub(crate) const OPTIONS: usize = 20;
}

/// Length of a header without options.
pub const HEADER_LEN: usize = field::OPTIONS;

const FLAG_DF: u16 = 0x4000;
const FLAG_MF: u16 = 0x2000;
const OFFSET_MASK: u16 = 0x1fff;

/// A view over an IPv4 packet.
#[derive(Debug, Clone)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

/// Short name for [`Ipv4Packet`].
pub type Packet<T> = Ipv4Packet<T>;
/// Short name for [`Ipv4Repr`].
pub type Repr = Ipv4Repr;

view_constructors!(Ipv4Packet);

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Checks the header is whole and consistent.
    ///
    /// `Truncated` if the buffer is shorter than 20 bytes, than the header length or than the
    /// total length; `Malformed` if the version is not 4, the IHL is below 5 or the total length
    /// is below the header length. A buffer longer than the total length (Ethernet padding) is
    /// fine: [`payload`](Self::payload) stops at the total length.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 4 || self.ihl() < 5 {
            return Err(Error::Malformed);
        }
        let header_len = self.header_len();
        if len < header_len {
            return Err(Error::Truncated);
        }
        let total_len = usize::from(self.total_len());
        if total_len < header_len {
            return Err(Error::Malformed);
        }
        if total_len > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The version field (4 for a checked packet).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// The IHL field: header length in 32-bit words.
    pub fn ihl(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] & 0x0f
    }

    /// Header length in bytes, options included.
    pub fn header_len(&self) -> usize {
        usize::from(self.ihl()) * 4
    }

    /// The whole second byte: DSCP (6 bits) and ECN (2 bits).
    pub fn dscp_ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN]
    }

    /// Differentiated Services code point.
    pub fn dscp(&self) -> u8 {
        self.dscp_ecn() >> 2
    }

    /// Explicit Congestion Notification bits.
    pub fn ecn(&self) -> u8 {
        self.dscp_ecn() & 0x03
    }

    /// Total length: header plus payload, in bytes.
    pub fn total_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::LENGTH.start)
    }

    /// Identification.
    pub fn ident(&self) -> u16 {
        be16(self.buffer.as_ref(), field::IDENT.start)
    }

    fn flags_offset(&self) -> u16 {
        be16(self.buffer.as_ref(), field::FLG_OFF.start)
    }

    /// The Don't Fragment flag.
    pub fn dont_frag(&self) -> bool {
        self.flags_offset() & FLAG_DF != 0
    }

    /// The More Fragments flag.
    pub fn more_frags(&self) -> bool {
        self.flags_offset() & FLAG_MF != 0
    }

    /// Fragment offset in bytes (the field times 8).
    pub fn frag_offset(&self) -> u16 {
        (self.flags_offset() & OFFSET_MASK) << 3
    }

    /// Whether this is a fragment: More Fragments set or a non-zero offset (DF alone is not).
    pub fn is_fragment(&self) -> bool {
        self.flags_offset() & (FLAG_MF | OFFSET_MASK) != 0
    }

    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    /// The protocol field.
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol::from(self.buffer.as_ref()[field::PROTOCOL])
    }

    /// The header checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM.start)
    }

    /// Whether the header checksum (over the header and its options) is right.
    pub fn verify_checksum(&self) -> bool {
        match self.buffer.as_ref().get(..self.header_len()) {
            Some(h) => checksum::fold(checksum::add(0, h)) == 0xffff,
            None => false,
        }
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv4Address {
        Ipv4Address::from_bytes(&self.buffer.as_ref()[field::SRC_ADDR])
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv4Address {
        Ipv4Address::from_bytes(&self.buffer.as_ref()[field::DST_ADDR])
    }

    /// The options (empty when IHL is 5). Never panics.
    pub fn options(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        if b.len() < HEADER_LEN {
            return &[];
        }
        let end = self.header_len().min(b.len());
        b.get(field::OPTIONS..end).unwrap_or(&[])
    }

    /// The payload: from the end of the header to the total length, or to the end of the
    /// buffer when the total length is not sane (smaller than the header or past the buffer;
    /// `new_checked` rejects both). Never panics.
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        let (start, end) = self.payload_range();
        b.get(start..end).unwrap_or(&[])
    }

    fn payload_range(&self) -> (usize, usize) {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return (len, len);
        }
        let start = self.header_len().min(len);
        let total = usize::from(self.total_len());
        let end = if total >= start && total <= len {
            total
        } else {
            len
        };
        (start, end)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Sets the version field.
    pub fn set_version(&mut self, v: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0x0f) | (v << 4);
    }

    /// Sets the header length in bytes (rounded down to 32-bit words; at most 60).
    pub fn set_header_len(&mut self, len: usize) {
        let words = (len / 4).min(15) as u8;
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0xf0) | words;
    }

    /// Sets the DSCP/ECN byte.
    pub fn set_dscp_ecn(&mut self, v: u8) {
        self.buffer.as_mut()[field::DSCP_ECN] = v;
    }

    /// Sets the total length.
    pub fn set_total_len(&mut self, v: u16) {
        self.buffer.as_mut()[field::LENGTH].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the identification.
    pub fn set_ident(&mut self, v: u16) {
        self.buffer.as_mut()[field::IDENT].copy_from_slice(&v.to_be_bytes());
    }

    fn set_flags_offset(&mut self, v: u16) {
        self.buffer.as_mut()[field::FLG_OFF].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the Don't Fragment flag.
    pub fn set_dont_frag(&mut self, on: bool) {
        let v = self.flags_offset() & !FLAG_DF;
        self.set_flags_offset(if on { v | FLAG_DF } else { v });
    }

    /// Sets the More Fragments flag.
    pub fn set_more_frags(&mut self, on: bool) {
        let v = self.flags_offset() & !FLAG_MF;
        self.set_flags_offset(if on { v | FLAG_MF } else { v });
    }

    /// Sets the fragment offset in bytes (the low three bits are dropped).
    pub fn set_frag_offset(&mut self, bytes: u16) {
        let v = self.flags_offset() & !OFFSET_MASK;
        self.set_flags_offset(v | (bytes >> 3));
    }

    /// Sets the time to live.
    pub fn set_ttl(&mut self, v: u8) {
        self.buffer.as_mut()[field::TTL] = v;
    }

    /// Sets the protocol field.
    pub fn set_next_header(&mut self, p: IpProtocol) {
        self.buffer.as_mut()[field::PROTOCOL] = p.into();
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        self.buffer.as_mut()[field::CHECKSUM].copy_from_slice(&v.to_be_bytes());
    }

    /// Computes and stores the header checksum (over the header and its options).
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let end = self.header_len().min(self.buffer.as_ref().len());
        let sum = checksum::of(&self.buffer.as_ref()[..end]);
        self.set_checksum(sum);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, a: Ipv4Address) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&a.0);
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, a: Ipv4Address) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&a.0);
    }

    /// Mutable access to the payload (same bounds as [`payload`](Ipv4Packet::payload)).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (start, end) = self.payload_range();
        self.buffer.as_mut().get_mut(start..end).unwrap_or(&mut [])
    }
}

/// A parsed IPv4 header without options.
///
/// Legal values: `payload_len <= 65515`, `frag_offset` a multiple of 8.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Repr {
    /// Source address.
    pub src_addr: Ipv4Address,
    /// Destination address.
    pub dst_addr: Ipv4Address,
    /// Protocol of the payload.
    pub next_header: IpProtocol,
    /// Payload length in bytes (total length minus header length).
    pub payload_len: usize,
    /// Time to live.
    pub hop_limit: u8,
    /// DSCP (high 6 bits) and ECN (low 2 bits).
    pub dscp_ecn: u8,
    /// Identification.
    pub ident: u16,
    /// Don't Fragment.
    pub dont_frag: bool,
    /// More Fragments.
    pub more_frags: bool,
    /// Fragment offset in bytes.
    pub frag_offset: u16,
}

impl Ipv4Repr {
    /// Parses a packet, checking its length. Options are skipped; the checksum is **not**
    /// verified (captures of locally sent frames often carry offloaded, unfinished checksums):
    /// call [`Ipv4Packet::verify_checksum`] when that matters.
    pub fn parse<T: AsRef<[u8]>>(packet: &Ipv4Packet<T>) -> Result<Self> {
        packet.check_len()?;
        Ok(Self {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: usize::from(packet.total_len()) - packet.header_len(),
            hop_limit: packet.ttl(),
            dscp_ecn: packet.dscp_ecn(),
            ident: packet.ident(),
            dont_frag: packet.dont_frag(),
            more_frags: packet.more_frags(),
            frag_offset: packet.frag_offset(),
        })
    }

    /// Length of the emitted header (20: no options).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes a 20-byte header, with a valid checksum, into the start of `packet`.
    ///
    /// The total length is `20 + payload_len` (saturating at 65535 for an illegal Repr).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Ipv4Packet<T>) {
        packet.set_version(4);
        packet.set_header_len(HEADER_LEN);
        packet.set_dscp_ecn(self.dscp_ecn);
        let total = u16::try_from(HEADER_LEN + self.payload_len).unwrap_or(u16::MAX);
        packet.set_total_len(total);
        packet.set_ident(self.ident);
        packet.set_flags_offset(0);
        packet.set_dont_frag(self.dont_frag);
        packet.set_more_frags(self.more_frags);
        packet.set_frag_offset(self.frag_offset);
        packet.set_ttl(self.hop_limit);
        packet.set_next_header(self.next_header);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
        packet.fill_checksum();
    }
}

/// Whether `frame` (an Ethernet frame) is IPv4 carrying IGMP, untagged or behind one 802.1Q or
/// 802.1ad tag. Only the protocol field is read, so a frame cut short after it still counts:
/// balance-rr sends IGMP on the first usable member without taking a turn, as the kernel's
/// `bond_xmit_roundrobin` does, and the planner models the same rule with this function.
pub fn is_igmp(frame: &[u8]) -> bool {
    let Ok(eth) = super::EthernetFrame::new_checked(frame) else {
        return false;
    };
    matches!(eth.type_after_one_tag(), Some((super::EtherType::Ipv4, l3))
        if frame.get(l3 + field::PROTOCOL) == Some(&u8::from(IpProtocol::Igmp)))
}

#[cfg(test)]
mod test {
    use super::*;
    use proptest::prelude::*;

    /// A Linux IPv4/TCP SYN, 192.168.0.104:47330 -> 192.168.0.1:80, with MSS, SACK-permitted,
    /// timestamps and window-scale options (the IP header as sent, checksums valid).
    const TCP_SYN: [u8; 60] = [
        0x45, 0x00, 0x00, 0x3c, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x06, 0x9c, 0xbc, 0xc0, 0xa8, 0x00,
        0x68, 0xc0, 0xa8, 0x00, 0x01, // IPv4
        0xb8, 0xe2, 0x00, 0x50, 0x3a, 0x4f, 0x1b, 0x2c, 0x00, 0x00, 0x00, 0x00, 0xa0, 0x02, 0xfa,
        0xf0, 0xc4, 0x67, 0x00, 0x00, // TCP
        0x02, 0x04, 0x05, 0xb4, 0x04, 0x02, 0x08, 0x0a, 0x6b, 0x2e, 0x8d, 0x11, 0x00, 0x00, 0x00,
        0x00, 0x01, 0x03, 0x03, 0x07, // options
    ];

    /// An IPv4 header with a Router Alert option (IGMPv2 report to 224.0.0.251), IHL 6.
    const IGMP_RA: [u8; 32] = [
        0x46, 0xc0, 0x00, 0x20, 0x00, 0x00, 0x40, 0x00, 0x01, 0x02, 0x42, 0x0c, 0xc0, 0xa8, 0x00,
        0x68, 0xe0, 0x00, 0x00, 0xfb, 0x94, 0x04, 0x00, 0x00, // header + RA option
        0x16, 0x00, 0x09, 0x04, 0xe0, 0x00, 0x00, 0xfb, // IGMPv2 membership report
    ];

    #[test]
    fn parses_tcp_syn() {
        let p = Ipv4Packet::new_checked(&TCP_SYN[..]).unwrap();
        assert_eq!(p.version(), 4);
        assert_eq!(p.ihl(), 5);
        assert_eq!(p.header_len(), 20);
        assert_eq!((p.dscp(), p.ecn(), p.dscp_ecn()), (0, 0, 0));
        assert_eq!(p.total_len(), 60);
        assert_eq!(p.ident(), 0x1c46);
        assert!(p.dont_frag());
        assert!(!p.more_frags());
        assert_eq!(p.frag_offset(), 0);
        assert!(!p.is_fragment(), "DF alone is not a fragment");
        assert_eq!(p.ttl(), 64);
        assert_eq!(p.next_header(), IpProtocol::Tcp);
        assert_eq!(p.checksum(), 0x9cbc);
        assert!(p.verify_checksum());
        assert_eq!(p.src_addr().to_string(), "192.168.0.104");
        assert_eq!(p.dst_addr(), Ipv4Address([192, 168, 0, 1]));
        assert_eq!(p.options(), &[] as &[u8]);
        assert_eq!(p.payload(), &TCP_SYN[20..]);

        let r = Ipv4Repr::parse(&p).unwrap();
        assert_eq!(
            r,
            Ipv4Repr {
                src_addr: Ipv4Address([192, 168, 0, 104]),
                dst_addr: Ipv4Address([192, 168, 0, 1]),
                next_header: IpProtocol::Tcp,
                payload_len: 40,
                hop_limit: 64,
                dscp_ecn: 0,
                ident: 0x1c46,
                dont_frag: true,
                more_frags: false,
                frag_offset: 0,
            }
        );
        // Emitting the Repr reproduces the header byte for byte, checksum included.
        let mut buf = TCP_SYN;
        buf[..20].fill(0);
        r.emit(&mut Ipv4Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, TCP_SYN);
    }

    #[test]
    fn parses_options_and_padding() {
        let mut frame = IGMP_RA.to_vec();
        frame.extend_from_slice(&[0; 14]); // Ethernet minimum-size padding
        let p = Ipv4Packet::new_checked(&frame[..]).unwrap();
        assert_eq!(p.header_len(), 24);
        assert_eq!(p.options(), &[0x94, 0x04, 0x00, 0x00]);
        assert_eq!((p.dscp(), p.ecn()), (48, 0));
        assert_eq!(p.next_header(), IpProtocol::Igmp);
        assert!(p.verify_checksum());
        assert_eq!(p.payload(), &IGMP_RA[24..], "padding is not payload");
        assert_eq!(Ipv4Repr::parse(&p).unwrap().payload_len, 8);
    }

    #[test]
    fn bad_checksum_detected_and_fixed() {
        let mut b = TCP_SYN;
        b[8] = 63; // TTL decremented without updating the checksum
        let mut p = Ipv4Packet::new_checked(&mut b[..]).unwrap();
        assert!(!p.verify_checksum());
        p.fill_checksum();
        assert!(p.verify_checksum());
        assert_eq!(p.checksum(), 0x9dbc);
    }

    #[test]
    fn fragments() {
        let mut b = TCP_SYN;
        let mut p = Ipv4Packet::new_unchecked(&mut b[..]);
        p.set_dont_frag(false);
        p.set_more_frags(true);
        assert!(p.is_fragment() && p.more_frags() && !p.dont_frag());
        assert_eq!(p.frag_offset(), 0);
        p.set_more_frags(false);
        p.set_frag_offset(1480);
        assert!(p.is_fragment());
        assert_eq!(p.frag_offset(), 1480);
        assert_eq!(&b[6..8], &[0x00, 0xb9]);
        // The reserved (evil) bit alone does not make a fragment.
        b[6] = 0x80;
        b[7] = 0;
        assert!(!Ipv4Packet::new_unchecked(&b[..]).is_fragment());
    }

    #[test]
    fn every_truncation_is_an_error() {
        for len in 0..TCP_SYN.len() {
            assert_eq!(
                Ipv4Packet::new_checked(&TCP_SYN[..len]).err(),
                Some(Error::Truncated),
                "len {len}"
            );
        }
        for len in 0..IGMP_RA.len() {
            assert_eq!(
                Ipv4Packet::new_checked(&IGMP_RA[..len]).err(),
                Some(Error::Truncated)
            );
        }
    }

    #[test]
    fn malformed_headers() {
        let mut b = TCP_SYN;
        b[0] = 0x65; // version 6
        assert_eq!(
            Ipv4Packet::new_checked(&b[..]).err(),
            Some(Error::Malformed)
        );
        b[0] = 0x44; // IHL 4
        assert_eq!(
            Ipv4Packet::new_checked(&b[..]).err(),
            Some(Error::Malformed)
        );
        b[0] = 0x45;
        b[2..4].copy_from_slice(&19u16.to_be_bytes()); // total length below the header
        assert_eq!(
            Ipv4Packet::new_checked(&b[..]).err(),
            Some(Error::Malformed)
        );
        b[0] = 0x4f; // IHL 15: 60 bytes, fits the buffer, but total length is 19
        assert_eq!(
            Ipv4Packet::new_checked(&b[..]).err(),
            Some(Error::Malformed)
        );
        b[2..4].copy_from_slice(&61u16.to_be_bytes());
        assert_eq!(
            Ipv4Packet::new_checked(&b[..]).err(),
            Some(Error::Truncated)
        );
        // Unchecked views with insane lengths still do not panic in payload().
        let p = Ipv4Packet::new_unchecked(&b[..]);
        assert_eq!(p.payload(), &[] as &[u8]);
        b[0] = 0x45;
        let p = Ipv4Packet::new_unchecked(&b[..]);
        assert_eq!(p.payload(), &TCP_SYN[20..]);
    }

    fn arb_repr() -> impl Strategy<Value = Ipv4Repr> {
        (
            (
                any::<[u8; 4]>(),
                any::<[u8; 4]>(),
                any::<u8>(),
                0usize..=65515,
            ),
            (
                any::<u8>(),
                any::<u8>(),
                any::<u16>(),
                any::<bool>(),
                any::<bool>(),
            ),
            0u16..=0x1fff,
        )
            .prop_map(|((s, d, p, len), (ttl, tos, id, df, mf), off)| Ipv4Repr {
                src_addr: Ipv4Address(s),
                dst_addr: Ipv4Address(d),
                next_header: IpProtocol::from(p),
                payload_len: len,
                hop_limit: ttl,
                dscp_ecn: tos,
                ident: id,
                dont_frag: df,
                more_frags: mf,
                frag_offset: off * 8,
            })
    }

    proptest! {
        #[test]
        fn accessors_never_panic(data in proptest::collection::vec(any::<u8>(), 0..100)) {
            if let Ok(p) = Ipv4Packet::new_checked(&data[..]) {
                let _ = (p.version(), p.ihl(), p.dscp(), p.ecn(), p.total_len(), p.ident());
                let _ = (p.dont_frag(), p.more_frags(), p.frag_offset(), p.is_fragment());
                let _ = (p.ttl(), p.next_header(), p.checksum(), p.verify_checksum());
                let _ = (p.src_addr(), p.dst_addr(), p.options(), p.payload());
                prop_assert!(p.header_len() + p.payload().len() <= data.len());
                prop_assert_eq!(p.header_len() + p.payload().len(), usize::from(p.total_len()));
                let r = Ipv4Repr::parse(&p).unwrap();
                prop_assert_eq!(r.payload_len, p.payload().len());
            }
            // The lenient accessors never panic even unchecked.
            let p = Ipv4Packet::new_unchecked(&data[..]);
            let _ = (p.options(), p.payload());
        }

        #[test]
        fn repr_round_trip(r in arb_repr()) {
            let mut buf = vec![0u8; r.buffer_len() + r.payload_len];
            r.emit(&mut Ipv4Packet::new_unchecked(&mut buf[..]));
            let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
            prop_assert!(p.verify_checksum());
            prop_assert_eq!(Ipv4Repr::parse(&p), Ok(r));
        }
    }
}
