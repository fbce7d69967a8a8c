//! GRE headers: RFC 2784 with the RFC 2890 key and sequence number extensions, and the
//! RFC 2637 (PPTP) "enhanced GRE" version 1 with its acknowledgment number.

use super::ip::checksum;
use super::view_constructors;
use super::{Error, EtherType, Result, be16, be32};

mod field {
    use core::ops::Range;
    pub(crate) const FLAGS: usize = 0;
    pub(crate) const VERSION: usize = 1;
    pub(crate) const PROTOCOL: Range<usize> = 2..4;
    pub(crate) const OPTIONAL: usize = 4;
}

/// Length of the GRE header without optional fields.
pub const BASE_HEADER_LEN: usize = field::OPTIONAL;

const FLAG_C: u8 = 0x80;
const FLAG_R: u8 = 0x40;
const FLAG_K: u8 = 0x20;
const FLAG_S: u8 = 0x10;
const FLAG_A: u8 = 0x80; // in the second byte
const VERSION_MASK: u8 = 0x07;

/// The PPTP protocol type (PPP), carried by version 1.
pub const PPP: EtherType = EtherType::Unknown(0x880b);

/// A view over a GRE header and its payload.
#[derive(Debug, Clone)]
pub struct GrePacket<T: AsRef<[u8]>> {
    buffer: T,
}

/// Short name for [`GrePacket`].
pub type Packet<T> = GrePacket<T>;
/// Short name for [`GreRepr`].
pub type Repr = GreRepr;

view_constructors!(GrePacket);

impl<T: AsRef<[u8]>> GrePacket<T> {
    /// Checks the header is one this view can read and is whole.
    ///
    /// `Truncated` if the buffer is shorter than 4 bytes or than the optional fields the
    /// flags call for; `Unsupported` for a version above 1 or a set routing bit (RFC 1701
    /// source routing, deprecated by RFC 2784 and dropped by Linux too); `Malformed` for a
    /// version 1 header without the key field or with a checksum (RFC 2637 forbids both).
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < BASE_HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() > 1 || self.routing_present() {
            return Err(Error::Unsupported);
        }
        if self.version() == 1 && (!self.key_present() || self.checksum_present()) {
            return Err(Error::Malformed);
        }
        if len < self.header_len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    /// The C bit: checksum (and reserved/offset) field present.
    pub fn checksum_present(&self) -> bool {
        self.flags() & FLAG_C != 0
    }

    /// The R bit: RFC 1701 routing present (rejected by `check_len`).
    pub fn routing_present(&self) -> bool {
        self.flags() & FLAG_R != 0
    }

    /// The K bit: key field present.
    pub fn key_present(&self) -> bool {
        self.flags() & FLAG_K != 0
    }

    /// The S bit: sequence number present.
    pub fn seq_present(&self) -> bool {
        self.flags() & FLAG_S != 0
    }

    /// The A bit: acknowledgment number present (version 1 only; reserved in version 0).
    pub fn ack_present(&self) -> bool {
        self.version() == 1 && self.buffer.as_ref()[field::VERSION] & FLAG_A != 0
    }

    /// The version: 0 for GRE, 1 for PPTP's enhanced GRE.
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION] & VERSION_MASK
    }

    /// The protocol type of the payload, an EtherType.
    pub fn protocol_type(&self) -> EtherType {
        EtherType::from(be16(self.buffer.as_ref(), field::PROTOCOL.start))
    }

    fn checksum_len(&self) -> usize {
        if self.flags() & (FLAG_C | FLAG_R) != 0 {
            4
        } else {
            0
        }
    }

    fn key_at(&self) -> usize {
        BASE_HEADER_LEN + self.checksum_len()
    }

    fn seq_at(&self) -> usize {
        self.key_at() + if self.key_present() { 4 } else { 0 }
    }

    fn ack_at(&self) -> usize {
        self.seq_at() + if self.seq_present() { 4 } else { 0 }
    }

    /// Header length in bytes, from the flags: 4, plus 4 for the checksum, key, sequence and
    /// (version 1) acknowledgment fields each when present.
    pub fn header_len(&self) -> usize {
        self.ack_at() + if self.ack_present() { 4 } else { 0 }
    }

    /// The checksum field, when present.
    pub fn checksum(&self) -> Option<u16> {
        self.checksum_present()
            .then(|| be16(self.buffer.as_ref(), BASE_HEADER_LEN))
    }

    /// The key, when present. In version 1 it holds the payload length (high half) and the
    /// call ID (low half).
    pub fn key(&self) -> Option<u32> {
        self.key_present()
            .then(|| be32(self.buffer.as_ref(), self.key_at()))
    }

    /// The sequence number, when present.
    pub fn sequence(&self) -> Option<u32> {
        self.seq_present()
            .then(|| be32(self.buffer.as_ref(), self.seq_at()))
    }

    /// The acknowledgment number of a version 1 header, when present.
    pub fn ack_number(&self) -> Option<u32> {
        self.ack_present()
            .then(|| be32(self.buffer.as_ref(), self.ack_at()))
    }

    /// Version 1: the payload length from the key field.
    pub fn pptp_payload_len(&self) -> Option<u16> {
        (self.version() == 1)
            .then(|| self.key().map(|k| (k >> 16) as u16))
            .flatten()
    }

    /// Version 1: the call ID from the key field.
    pub fn pptp_call_id(&self) -> Option<u16> {
        (self.version() == 1)
            .then(|| self.key().map(|k| k as u16))
            .flatten()
    }

    /// Everything after the header. Never panics.
    pub fn payload(&self) -> &[u8] {
        if self.buffer.as_ref().len() < BASE_HEADER_LEN {
            return &[];
        }
        self.buffer.as_ref().get(self.header_len()..).unwrap_or(&[])
    }

    /// Whether the checksum (over the header and the payload) is right; true when there is
    /// no checksum.
    pub fn verify_checksum(&self) -> bool {
        !self.checksum_present() || checksum::fold(checksum::add(0, self.buffer.as_ref())) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> GrePacket<T> {
    /// Sets the flags and version bytes: which optional fields are present. Set these before
    /// the optional fields, whose offsets depend on them. The A bit is only written for
    /// version 1.
    pub fn set_flags(&mut self, checksum: bool, key: bool, seq: bool, ack: bool, version: u8) {
        let b = self.buffer.as_mut();
        b[field::FLAGS] = (if checksum { FLAG_C } else { 0 })
            | (if key { FLAG_K } else { 0 })
            | (if seq { FLAG_S } else { 0 });
        let a = if ack && version == 1 { FLAG_A } else { 0 };
        b[field::VERSION] = a | (version & VERSION_MASK);
    }

    /// Sets the protocol type.
    pub fn set_protocol_type(&mut self, t: EtherType) {
        self.buffer.as_mut()[field::PROTOCOL].copy_from_slice(&u16::from(t).to_be_bytes());
    }

    /// Sets the checksum field and zeroes the reserved field after it; does nothing when the
    /// C bit is clear.
    pub fn set_checksum(&mut self, v: u16) {
        if self.checksum_present() {
            let b = self.buffer.as_mut();
            b[BASE_HEADER_LEN..BASE_HEADER_LEN + 2].copy_from_slice(&v.to_be_bytes());
            b[BASE_HEADER_LEN + 2..BASE_HEADER_LEN + 4].fill(0);
        }
    }

    /// Sets the key; does nothing when the K bit is clear.
    pub fn set_key(&mut self, v: u32) {
        if self.key_present() {
            let at = self.key_at();
            self.buffer.as_mut()[at..at + 4].copy_from_slice(&v.to_be_bytes());
        }
    }

    /// Sets the sequence number; does nothing when the S bit is clear.
    pub fn set_sequence(&mut self, v: u32) {
        if self.seq_present() {
            let at = self.seq_at();
            self.buffer.as_mut()[at..at + 4].copy_from_slice(&v.to_be_bytes());
        }
    }

    /// Sets the acknowledgment number; does nothing unless a version 1 A bit is set.
    pub fn set_ack_number(&mut self, v: u32) {
        if self.ack_present() {
            let at = self.ack_at();
            self.buffer.as_mut()[at..at + 4].copy_from_slice(&v.to_be_bytes());
        }
    }

    /// Computes and stores the checksum over the whole buffer (header and payload); does
    /// nothing when the C bit is clear.
    pub fn fill_checksum(&mut self) {
        if self.checksum_present() {
            self.set_checksum(0);
            let c = checksum::of(self.buffer.as_ref());
            self.set_checksum(c);
        }
    }

    /// Mutable access to everything after the header.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        if self.buffer.as_ref().len() < BASE_HEADER_LEN {
            return &mut [];
        }
        let at = self.header_len();
        self.buffer.as_mut().get_mut(at..).unwrap_or(&mut [])
    }
}

/// A version 0 GRE header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GreRepr {
    /// The payload's EtherType.
    pub protocol_type: EtherType,
    /// Whether a checksum is present (its value is computed on emit).
    pub checksum: bool,
    /// The key, if any.
    pub key: Option<u32>,
    /// The sequence number, if any.
    pub sequence: Option<u32>,
}

impl GreRepr {
    /// Parses a checked header. `Unsupported` for version 1 (PPTP); the checksum is not
    /// verified (see [`GrePacket::verify_checksum`]).
    pub fn parse<T: AsRef<[u8]>>(packet: &GrePacket<T>) -> Result<Self> {
        packet.check_len()?;
        if packet.version() != 0 {
            return Err(Error::Unsupported);
        }
        Ok(Self {
            protocol_type: packet.protocol_type(),
            checksum: packet.checksum_present(),
            key: packet.key(),
            sequence: packet.sequence(),
        })
    }

    /// Length of the header: 4, plus 4 for each optional field.
    pub const fn buffer_len(&self) -> usize {
        BASE_HEADER_LEN
            + 4 * (self.checksum as usize
                + self.key.is_some() as usize
                + self.sequence.is_some() as usize)
    }

    /// Writes the header into the start of `packet`. With a checksum, it is computed over the
    /// whole buffer as it stands: write the payload first, or call
    /// [`GrePacket::fill_checksum`] after writing it.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut GrePacket<T>) {
        packet.set_flags(
            self.checksum,
            self.key.is_some(),
            self.sequence.is_some(),
            false,
            0,
        );
        packet.set_protocol_type(self.protocol_type);
        if let Some(k) = self.key {
            packet.set_key(k);
        }
        if let Some(s) = self.sequence {
            packet.set_sequence(s);
        }
        packet.fill_checksum();
    }
}

#[cfg(test)]
mod test {
    use super::super::ip::{IpProtocol, Ipv4Address};
    use super::super::ipv4::Ipv4Packet;
    use super::*;
    use proptest::prelude::*;

    /// IPv4 10.0.0.1 -> 10.0.0.2 carrying GRE with key 100 and sequence 1, carrying an IPv4
    /// ICMP echo request 192.168.1.1 -> 192.168.1.2 (id 1, seq 1). Checksums valid.
    const GRE_KEY_SEQ: [u8; 60] = [
        0x45, 0x00, 0x00, 0x3c, 0x00, 0x01, 0x40, 0x00, 0x40, 0x2f, 0x26, 0x90, 0x0a, 0x00, 0x00,
        0x01, 0x0a, 0x00, 0x00, 0x02, // outer IPv4
        0x30, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x64, 0x00, 0x00, 0x00, 0x01, // GRE
        0x45, 0x00, 0x00, 0x1c, 0xab, 0xcd, 0x00, 0x00, 0x40, 0x01, 0x4b, 0xc0, 0xc0, 0xa8, 0x01,
        0x01, 0xc0, 0xa8, 0x01, 0x02, // inner IPv4
        0x08, 0x00, 0xf7, 0xfd, 0x00, 0x01, 0x00, 0x01, // ICMP echo request
    ];

    /// GRE with a checksum carrying the same inner packet (checksum valid).
    const GRE_CSUM: [u8; 36] = [
        0x80, 0x00, 0x08, 0x00, 0x77, 0xff, 0x00, 0x00, // GRE: C, checksum, reserved
        0x45, 0x00, 0x00, 0x1c, 0xab, 0xcd, 0x00, 0x00, 0x40, 0x01, 0x4b, 0xc0, 0xc0, 0xa8, 0x01,
        0x01, 0xc0, 0xa8, 0x01, 0x02, 0x08, 0x00, 0xf7, 0xfd, 0x00, 0x01, 0x00, 0x01,
    ];

    /// PPTP enhanced GRE (version 1): K, S and A set, payload length 4, call ID 0x1234,
    /// sequence 5, acknowledgment 4, then a 4-byte PPP header (IPv4).
    const PPTP: [u8; 20] = [
        0x30, 0x81, 0x88, 0x0b, 0x00, 0x04, 0x12, 0x34, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00,
        0x04, 0xff, 0x03, 0x00, 0x21,
    ];

    #[test]
    fn parses_key_and_sequence() {
        let ip = Ipv4Packet::new_checked(&GRE_KEY_SEQ[..]).unwrap();
        assert!(ip.verify_checksum());
        assert_eq!(ip.next_header(), IpProtocol::Gre);
        let g = GrePacket::new_checked(ip.payload()).unwrap();
        assert!(!g.checksum_present() && !g.routing_present() && !g.ack_present());
        assert!(g.key_present() && g.seq_present());
        assert_eq!(g.version(), 0);
        assert_eq!(g.protocol_type(), EtherType::Ipv4);
        assert_eq!(g.header_len(), 12);
        assert_eq!(g.checksum(), None);
        assert_eq!(g.key(), Some(100));
        assert_eq!(g.sequence(), Some(1));
        assert_eq!(g.ack_number(), None);
        assert_eq!((g.pptp_payload_len(), g.pptp_call_id()), (None, None));
        assert!(g.verify_checksum());
        let inner = Ipv4Packet::new_checked(g.payload()).unwrap();
        assert!(inner.verify_checksum());
        assert_eq!(inner.src_addr(), Ipv4Address([192, 168, 1, 1]));
        assert_eq!(inner.next_header(), IpProtocol::Icmp);

        let r = GreRepr::parse(&g).unwrap();
        assert_eq!(
            r,
            GreRepr {
                protocol_type: EtherType::Ipv4,
                checksum: false,
                key: Some(100),
                sequence: Some(1),
            }
        );
        assert_eq!(r.buffer_len(), 12);
        let mut b = GRE_KEY_SEQ[20..].to_vec();
        b[..12].fill(0xff);
        r.emit(&mut GrePacket::new_unchecked(&mut b[..]));
        assert_eq!(&b[..], &GRE_KEY_SEQ[20..]);
    }

    #[test]
    fn checksum() {
        let g = GrePacket::new_checked(&GRE_CSUM[..]).unwrap();
        assert!(g.checksum_present() && !g.key_present() && !g.seq_present());
        assert_eq!(g.header_len(), 8);
        assert_eq!(g.checksum(), Some(0x77ff));
        assert!(g.verify_checksum());
        assert_eq!(g.payload(), &GRE_KEY_SEQ[32..]);
        let r = GreRepr::parse(&g).unwrap();
        assert_eq!(
            r,
            GreRepr {
                protocol_type: EtherType::Ipv4,
                checksum: true,
                key: None,
                sequence: None,
            }
        );
        // Emit over a buffer already holding the payload computes the same checksum.
        let mut b = GRE_CSUM;
        b[..8].fill(0);
        r.emit(&mut GrePacket::new_unchecked(&mut b[..]));
        assert_eq!(b, GRE_CSUM);
        // A flipped payload bit is caught.
        b[20] ^= 1;
        assert!(!GrePacket::new_checked(&b[..]).unwrap().verify_checksum());
    }

    #[test]
    fn parses_pptp() {
        let g = GrePacket::new_checked(&PPTP[..]).unwrap();
        assert_eq!(g.version(), 1);
        assert_eq!(g.protocol_type(), PPP);
        assert!(g.key_present() && g.seq_present() && g.ack_present());
        assert_eq!(g.header_len(), 16);
        assert_eq!(g.key(), Some(0x0004_1234));
        assert_eq!(g.pptp_payload_len(), Some(4));
        assert_eq!(g.pptp_call_id(), Some(0x1234));
        assert_eq!(g.sequence(), Some(5));
        assert_eq!(g.ack_number(), Some(4));
        assert_eq!(g.payload(), &[0xff, 0x03, 0x00, 0x21]);
        assert_eq!(GreRepr::parse(&g), Err(Error::Unsupported));
        // Without S the ack follows the key directly.
        let mut b = [0u8; 12];
        let mut p = GrePacket::new_unchecked(&mut b[..]);
        p.set_flags(false, true, false, true, 1);
        p.set_protocol_type(PPP);
        p.set_key(0x0000_0007);
        p.set_sequence(99); // S clear: ignored
        p.set_ack_number(0x0102_0304);
        assert_eq!(b, [0x20, 0x81, 0x88, 0x0b, 0, 0, 0, 7, 1, 2, 3, 4]);
        let g = GrePacket::new_checked(&b[..]).unwrap();
        assert_eq!((g.sequence(), g.ack_number()), (None, Some(0x0102_0304)));
    }

    #[test]
    fn rejects_what_it_cannot_read() {
        let mut b = GRE_KEY_SEQ[20..].to_vec();
        b[1] = 2; // version 2
        assert_eq!(
            GrePacket::new_checked(&b[..]).err(),
            Some(Error::Unsupported)
        );
        b[1] = 0;
        b[0] |= 0x40; // routing
        assert_eq!(
            GrePacket::new_checked(&b[..]).err(),
            Some(Error::Unsupported)
        );
        let mut v1 = PPTP;
        v1[0] = 0x10; // version 1 without a key
        assert_eq!(
            GrePacket::new_checked(&v1[..]).err(),
            Some(Error::Malformed)
        );
        v1[0] = 0xb0; // version 1 with a checksum
        assert_eq!(
            GrePacket::new_checked(&v1[..]).err(),
            Some(Error::Malformed)
        );
        // In version 0 the A bit is reserved and does not add a field.
        let mut a = GRE_KEY_SEQ[20..].to_vec();
        a[1] = 0x80;
        let g = GrePacket::new_checked(&a[..]).unwrap();
        assert!(!g.ack_present());
        assert_eq!(g.header_len(), 12);
    }

    #[test]
    fn every_truncation_is_an_error() {
        for frame in [&GRE_KEY_SEQ[20..32], &GRE_CSUM[..8], &PPTP[..16]] {
            for len in 0..frame.len() {
                let e = GrePacket::new_checked(&frame[..len]).err();
                assert_eq!(e, Some(Error::Truncated), "len {len} of {frame:02x?}");
            }
            assert!(GrePacket::new_checked(frame).is_ok());
        }
    }

    fn arb_repr() -> impl Strategy<Value = GreRepr> {
        (
            any::<u16>(),
            any::<bool>(),
            proptest::option::of(any::<u32>()),
            proptest::option::of(any::<u32>()),
        )
            .prop_map(|(t, c, k, s)| GreRepr {
                protocol_type: EtherType::from(t),
                checksum: c,
                key: k,
                sequence: s,
            })
    }

    proptest! {
        #[test]
        fn accessors_never_panic(data in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Ok(g) = GrePacket::new_checked(&data[..]) {
                let _ = (g.checksum_present(), g.routing_present(), g.key_present());
                let _ = (g.seq_present(), g.ack_present(), g.version(), g.protocol_type());
                let _ = (g.checksum(), g.key(), g.sequence(), g.ack_number());
                let _ = (g.pptp_payload_len(), g.pptp_call_id(), g.verify_checksum());
                prop_assert_eq!(g.header_len() + g.payload().len(), data.len());
                let _ = GreRepr::parse(&g);
            }
            let _ = GrePacket::new_unchecked(&data[..]).payload();
        }

        #[test]
        fn repr_round_trip(
            r in arb_repr(),
            payload in proptest::collection::vec(any::<u8>(), 0..32),
        ) {
            let mut buf = vec![0u8; r.buffer_len()];
            buf.extend_from_slice(&payload);
            r.emit(&mut GrePacket::new_unchecked(&mut buf[..]));
            let g = GrePacket::new_checked(&buf[..]).unwrap();
            prop_assert_eq!(g.header_len(), r.buffer_len());
            prop_assert!(g.verify_checksum());
            prop_assert_eq!(g.payload(), &payload[..]);
            prop_assert_eq!(GreRepr::parse(&g), Ok(r));
        }
    }
}
