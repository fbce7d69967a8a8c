//! ARP over Ethernet for IPv4 (RFC 826), including gratuitous ARP.

use super::ethernet::{self, EthernetFrame, EthernetRepr};
use super::ip::Ipv4Address;
use super::view_constructors;
use super::{Error, EtherType, EthernetAddress, Result, be16, enum_with_unknown};

enum_with_unknown! {
    /// The hardware type field.
    pub enum ArpHardware(u16) {
        /// Ethernet (10 Mb and every later speed).
        Ethernet = 1,
    }
}

enum_with_unknown! {
    /// The operation field.
    pub enum ArpOperation(u16) {
        /// Who has `tpa`? Tell `spa`.
        Request = 1,
        /// `spa` is at `sha`.
        Reply = 2,
    }
}

mod field {
    use core::ops::Range;
    pub(crate) const HTYPE: Range<usize> = 0..2;
    pub(crate) const PTYPE: Range<usize> = 2..4;
    pub(crate) const HLEN: usize = 4;
    pub(crate) const PLEN: usize = 5;
    pub(crate) const OPER: Range<usize> = 6..8;
    // The addresses, at the offsets they have when hlen = 6 and plen = 4.
    pub(crate) const SHA: Range<usize> = 8..14;
    pub(crate) const SPA: Range<usize> = 14..18;
    pub(crate) const THA: Range<usize> = 18..24;
    pub(crate) const TPA: Range<usize> = 24..28;
}

/// Length of an Ethernet/IPv4 ARP packet.
pub const PACKET_LEN: usize = field::TPA.end;
/// Length of the fixed part before the addresses.
const FIXED_LEN: usize = field::SHA.start;

/// A view over an ARP packet.
///
/// The address accessors read the Ethernet/IPv4 layout (6-byte hardware, 4-byte protocol
/// addresses); for other `hlen`/`plen` they return whatever bytes sit at those offsets, and
/// [`ArpRepr::parse`] says `Unsupported`.
#[derive(Debug, Clone)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

/// Short name for [`ArpPacket`].
pub type Packet<T> = ArpPacket<T>;
/// Short name for [`ArpRepr`].
pub type Repr = ArpRepr;

view_constructors!(ArpPacket);

impl<T: AsRef<[u8]>> ArpPacket<T> {
    /// `Truncated` if the buffer is shorter than 28 bytes (an Ethernet/IPv4 packet) or than
    /// the four addresses its `hlen`/`plen` announce.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < PACKET_LEN {
            return Err(Error::Truncated);
        }
        let addrs = 2 * (usize::from(self.hardware_len()) + usize::from(self.protocol_len()));
        if FIXED_LEN + addrs > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Hardware type.
    pub fn hardware_type(&self) -> ArpHardware {
        ArpHardware::from(be16(self.buffer.as_ref(), field::HTYPE.start))
    }

    /// Protocol type.
    pub fn protocol_type(&self) -> EtherType {
        EtherType::from(be16(self.buffer.as_ref(), field::PTYPE.start))
    }

    /// Hardware address length.
    pub fn hardware_len(&self) -> u8 {
        self.buffer.as_ref()[field::HLEN]
    }

    /// Protocol address length.
    pub fn protocol_len(&self) -> u8 {
        self.buffer.as_ref()[field::PLEN]
    }

    /// Operation.
    pub fn operation(&self) -> ArpOperation {
        ArpOperation::from(be16(self.buffer.as_ref(), field::OPER.start))
    }

    /// Sender hardware address.
    pub fn source_hardware_addr(&self) -> EthernetAddress {
        EthernetAddress::from_bytes(&self.buffer.as_ref()[field::SHA])
    }

    /// Sender protocol address.
    pub fn source_protocol_addr(&self) -> Ipv4Address {
        Ipv4Address::from_bytes(&self.buffer.as_ref()[field::SPA])
    }

    /// Target hardware address.
    pub fn target_hardware_addr(&self) -> EthernetAddress {
        EthernetAddress::from_bytes(&self.buffer.as_ref()[field::THA])
    }

    /// Target protocol address.
    pub fn target_protocol_addr(&self) -> Ipv4Address {
        Ipv4Address::from_bytes(&self.buffer.as_ref()[field::TPA])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    /// Sets the hardware type.
    pub fn set_hardware_type(&mut self, v: ArpHardware) {
        self.buffer.as_mut()[field::HTYPE].copy_from_slice(&u16::from(v).to_be_bytes());
    }

    /// Sets the protocol type.
    pub fn set_protocol_type(&mut self, v: EtherType) {
        self.buffer.as_mut()[field::PTYPE].copy_from_slice(&u16::from(v).to_be_bytes());
    }

    /// Sets the hardware address length.
    pub fn set_hardware_len(&mut self, v: u8) {
        self.buffer.as_mut()[field::HLEN] = v;
    }

    /// Sets the protocol address length.
    pub fn set_protocol_len(&mut self, v: u8) {
        self.buffer.as_mut()[field::PLEN] = v;
    }

    /// Sets the operation.
    pub fn set_operation(&mut self, v: ArpOperation) {
        self.buffer.as_mut()[field::OPER].copy_from_slice(&u16::from(v).to_be_bytes());
    }

    /// Sets the sender hardware address.
    pub fn set_source_hardware_addr(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[field::SHA].copy_from_slice(&a.0);
    }

    /// Sets the sender protocol address.
    pub fn set_source_protocol_addr(&mut self, a: Ipv4Address) {
        self.buffer.as_mut()[field::SPA].copy_from_slice(&a.0);
    }

    /// Sets the target hardware address.
    pub fn set_target_hardware_addr(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[field::THA].copy_from_slice(&a.0);
    }

    /// Sets the target protocol address.
    pub fn set_target_protocol_addr(&mut self, a: Ipv4Address) {
        self.buffer.as_mut()[field::TPA].copy_from_slice(&a.0);
    }
}

/// A parsed ARP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArpRepr {
    /// Ethernet hardware addresses, IPv4 protocol addresses.
    EthernetIpv4 {
        /// Operation.
        operation: ArpOperation,
        /// Sender hardware address.
        source_hardware_addr: EthernetAddress,
        /// Sender protocol address.
        source_protocol_addr: Ipv4Address,
        /// Target hardware address.
        target_hardware_addr: EthernetAddress,
        /// Target protocol address.
        target_protocol_addr: Ipv4Address,
    },
}

impl ArpRepr {
    /// A gratuitous ARP announcing that `ip` is at `mac`, as sent after a failover so switches
    /// and neighbours relearn the port: a request with sender and target protocol address both
    /// `ip` and a zero target hardware address (what Linux sends, and an RFC 5227
    /// announcement).
    pub const fn gratuitous(mac: EthernetAddress, ip: Ipv4Address) -> Self {
        Self::EthernetIpv4 {
            operation: ArpOperation::Request,
            source_hardware_addr: mac,
            source_protocol_addr: ip,
            target_hardware_addr: EthernetAddress::ZERO,
            target_protocol_addr: ip,
        }
    }

    /// Whether this is gratuitous: sender and target protocol addresses are equal.
    pub fn is_gratuitous(&self) -> bool {
        match self {
            Self::EthernetIpv4 {
                source_protocol_addr,
                target_protocol_addr,
                ..
            } => source_protocol_addr == target_protocol_addr,
        }
    }

    /// Parses a checked packet. `Unsupported` unless it is Ethernet/IPv4 with 6- and 4-byte
    /// addresses.
    pub fn parse<T: AsRef<[u8]>>(packet: &ArpPacket<T>) -> Result<Self> {
        packet.check_len()?;
        if packet.hardware_type() != ArpHardware::Ethernet
            || packet.protocol_type() != EtherType::Ipv4
            || packet.hardware_len() != 6
            || packet.protocol_len() != 4
        {
            return Err(Error::Unsupported);
        }
        Ok(Self::EthernetIpv4 {
            operation: packet.operation(),
            source_hardware_addr: packet.source_hardware_addr(),
            source_protocol_addr: packet.source_protocol_addr(),
            target_hardware_addr: packet.target_hardware_addr(),
            target_protocol_addr: packet.target_protocol_addr(),
        })
    }

    /// Length of the emitted packet (28).
    pub const fn buffer_len(&self) -> usize {
        match self {
            Self::EthernetIpv4 { .. } => PACKET_LEN,
        }
    }

    /// Writes the packet into the first 28 bytes of `packet`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut ArpPacket<T>) {
        match *self {
            Self::EthernetIpv4 {
                operation,
                source_hardware_addr,
                source_protocol_addr,
                target_hardware_addr,
                target_protocol_addr,
            } => {
                packet.set_hardware_type(ArpHardware::Ethernet);
                packet.set_protocol_type(EtherType::Ipv4);
                packet.set_hardware_len(6);
                packet.set_protocol_len(4);
                packet.set_operation(operation);
                packet.set_source_hardware_addr(source_hardware_addr);
                packet.set_source_protocol_addr(source_protocol_addr);
                packet.set_target_hardware_addr(target_hardware_addr);
                packet.set_target_protocol_addr(target_protocol_addr);
            }
        }
    }

    /// Length of the untagged Ethernet frame [`emit_frame`](Self::emit_frame) writes (42).
    pub const fn frame_len(&self) -> usize {
        ethernet::HEADER_LEN + self.buffer_len()
    }

    /// Writes an untagged Ethernet frame carrying this packet into the start of `frame`:
    /// from the sender hardware address, to the broadcast address for a request (and any
    /// reply whose target hardware address is zero), otherwise to the target hardware address.
    ///
    /// # Panics
    /// If `frame` is shorter than [`frame_len`](Self::frame_len).
    pub fn emit_frame(&self, frame: &mut [u8]) {
        let Self::EthernetIpv4 {
            operation,
            source_hardware_addr,
            target_hardware_addr,
            ..
        } = *self;
        let dst_addr = if operation == ArpOperation::Request || target_hardware_addr.is_zero() {
            EthernetAddress::BROADCAST
        } else {
            target_hardware_addr
        };
        let (head, rest) = frame.split_at_mut(ethernet::HEADER_LEN);
        EthernetRepr {
            src_addr: source_hardware_addr,
            dst_addr,
            ethertype: EtherType::Arp,
        }
        .emit(&mut EthernetFrame::new_unchecked(head));
        self.emit(&mut ArpPacket::new_unchecked(&mut rest[..PACKET_LEN]));
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use proptest::prelude::*;

    /// An ARP reply in its Ethernet frame, padded to 60 bytes: 10.0.2.2 is at
    /// 52:55:0a:00:02:02, answering 10.0.2.15 at 52:54:00:12:34:56.
    const REPLY_FRAME: [u8; 60] = [
        0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x52, 0x55, 0x0a, 0x00, 0x02, 0x02, 0x08, 0x06,
        // ARP
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x02, // Ethernet/IPv4, reply
        0x52, 0x55, 0x0a, 0x00, 0x02, 0x02, 0x0a, 0x00, 0x02, 0x02, // sha, spa
        0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x0a, 0x00, 0x02, 0x0f, // tha, tpa
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, // padding
    ];

    fn reply() -> ArpRepr {
        ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Reply,
            source_hardware_addr: EthernetAddress([0x52, 0x55, 0x0a, 0x00, 0x02, 0x02]),
            source_protocol_addr: Ipv4Address([10, 0, 2, 2]),
            target_hardware_addr: EthernetAddress([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]),
            target_protocol_addr: Ipv4Address([10, 0, 2, 15]),
        }
    }

    #[test]
    fn parses_reply() {
        let eth = EthernetFrame::new_checked(&REPLY_FRAME[..]).unwrap();
        assert_eq!(eth.ethertype(), EtherType::Arp);
        let p = ArpPacket::new_checked(eth.payload()).unwrap();
        assert_eq!(p.hardware_type(), ArpHardware::Ethernet);
        assert_eq!(p.protocol_type(), EtherType::Ipv4);
        assert_eq!((p.hardware_len(), p.protocol_len()), (6, 4));
        assert_eq!(p.operation(), ArpOperation::Reply);
        assert_eq!(p.source_hardware_addr().to_string(), "52:55:0a:00:02:02");
        assert_eq!(p.source_protocol_addr().to_string(), "10.0.2.2");
        assert_eq!(p.target_hardware_addr().to_string(), "52:54:00:12:34:56");
        assert_eq!(p.target_protocol_addr().to_string(), "10.0.2.15");
        let r = ArpRepr::parse(&p).unwrap();
        assert_eq!(r, reply());
        assert!(!r.is_gratuitous());

        let mut frame = [0u8; 60];
        r.emit_frame(&mut frame);
        assert_eq!(r.frame_len(), 42);
        assert_eq!(
            frame, REPLY_FRAME,
            "emit_frame addresses the reply to its target"
        );
    }

    #[test]
    fn gratuitous() {
        let mac = EthernetAddress([0x02, 0, 0, 0, 0, 0x0a]);
        let ip = Ipv4Address([192, 0, 2, 10]);
        let g = ArpRepr::gratuitous(mac, ip);
        assert!(g.is_gratuitous());
        let mut frame = vec![0u8; g.frame_len()];
        g.emit_frame(&mut frame);
        #[rustfmt::skip]
        let want: [u8; 42] = [
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x08, 0x06,
            0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01,
            0x02, 0x00, 0x00, 0x00, 0x00, 0x0a, 0xc0, 0x00, 0x02, 0x0a,
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x00, 0x02, 0x0a,
        ];
        assert_eq!(frame, want);
        let back = ArpRepr::parse(&ArpPacket::new_checked(&frame[14..]).unwrap()).unwrap();
        assert_eq!(back, g);
    }

    #[test]
    fn unsupported_and_unknown() {
        let mut b: [u8; 28] = REPLY_FRAME[14..42].try_into().unwrap();
        b[6..8].copy_from_slice(&[0x00, 0x08]); // InARP request: unknown, but kept
        let p = ArpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(p.operation(), ArpOperation::Unknown(8));
        let r = ArpRepr::parse(&p).unwrap();
        let mut out = [0u8; 28];
        r.emit(&mut ArpPacket::new_unchecked(&mut out[..]));
        assert_eq!(out, b);

        for (at, v) in [(1, 6u8), (3, 0xdd), (4, 8), (5, 16)] {
            let mut c = b;
            c[at] = v;
            let p = ArpPacket::new_checked(&c[..]);
            let e = p.and_then(|p| ArpRepr::parse(&p));
            // hlen 8 / plen 16 announce more than 28 bytes: truncated; others unsupported.
            let want = if at >= 4 {
                Error::Truncated
            } else {
                Error::Unsupported
            };
            assert_eq!(e, Err(want), "byte {at}");
        }
        // IPoIB-like lengths in a big enough buffer are unsupported, not truncated.
        let mut big = [0u8; 8 + 2 * (20 + 4)];
        big[..8].copy_from_slice(&[0x00, 0x20, 0x08, 0x00, 20, 4, 0x00, 0x01]);
        let p = ArpPacket::new_checked(&big[..]).unwrap();
        assert_eq!(p.hardware_type(), ArpHardware::Unknown(32));
        assert_eq!(ArpRepr::parse(&p), Err(Error::Unsupported));
    }

    #[test]
    fn every_truncation_is_an_error() {
        for len in 0..28 {
            let p = ArpPacket::new_checked(&REPLY_FRAME[14..14 + len]);
            assert_eq!(p.err(), Some(Error::Truncated), "len {len}");
        }
    }

    fn arb_repr() -> impl Strategy<Value = ArpRepr> {
        (
            any::<u16>(),
            any::<[u8; 6]>(),
            any::<[u8; 4]>(),
            any::<[u8; 6]>(),
            any::<[u8; 4]>(),
        )
            .prop_map(|(op, sha, spa, tha, tpa)| ArpRepr::EthernetIpv4 {
                operation: ArpOperation::from(op),
                source_hardware_addr: EthernetAddress(sha),
                source_protocol_addr: Ipv4Address(spa),
                target_hardware_addr: EthernetAddress(tha),
                target_protocol_addr: Ipv4Address(tpa),
            })
    }

    proptest! {
        #[test]
        fn accessors_never_panic(data in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(p) = ArpPacket::new_checked(&data[..]) {
                let _ = (p.hardware_type(), p.protocol_type(), p.hardware_len());
                let _ = (p.protocol_len(), p.operation(), p.source_hardware_addr());
                let _ = (p.source_protocol_addr(), p.target_hardware_addr());
                let _ = (p.target_protocol_addr(), ArpRepr::parse(&p));
            }
        }

        #[test]
        fn repr_round_trip(r in arb_repr()) {
            let mut buf = vec![0u8; r.buffer_len()];
            r.emit(&mut ArpPacket::new_unchecked(&mut buf[..]));
            prop_assert_eq!(ArpRepr::parse(&ArpPacket::new_checked(&buf[..]).unwrap()), Ok(r));
            let mut frame = vec![0u8; r.frame_len()];
            r.emit_frame(&mut frame);
            let eth = EthernetFrame::new_checked(&frame[..]).unwrap();
            prop_assert_eq!(eth.ethertype(), EtherType::Arp);
            let p = ArpPacket::new_checked(eth.payload()).unwrap();
            prop_assert_eq!(ArpRepr::parse(&p), Ok(r));
        }
    }
}
