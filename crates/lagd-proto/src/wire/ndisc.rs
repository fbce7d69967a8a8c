//! IPv6 neighbour discovery (RFC 4861): neighbour solicitations and advertisements with their
//! options, carried in ICMPv6.
//!
//! The checksum is ICMPv6's, over the IPv6 pseudo-header. [`NdiscRepr::emit_frame`] writes a
//! whole Ethernet frame (IPv6 hop limit 255, as neighbour discovery requires).

use core::ops::BitOr;

use super::ethernet::{self, EthernetFrame, EthernetRepr};
use super::ip::{IpProtocol, Ipv6Address};
use super::ipv6::{self, Ipv6Packet, Ipv6Repr};
use super::l4::checksum_ipv6_pseudo;
use super::view_constructors;
use super::{Error, EtherType, EthernetAddress, Result, be16, enum_with_unknown};

enum_with_unknown! {
    /// The ICMPv6 types this view reads.
    pub enum NdiscMessage(u8) {
        /// Neighbour solicitation.
        NeighborSolicit = 135,
        /// Neighbour advertisement.
        NeighborAdvert = 136,
    }
}

enum_with_unknown! {
    /// A neighbour-discovery option's type.
    pub enum NdiscOptionType(u8) {
        /// The sender's link-layer address (in solicitations).
        SourceLinkLayerAddr = 1,
        /// The target's link-layer address (in advertisements).
        TargetLinkLayerAddr = 2,
        /// Prefix information (router advertisements).
        PrefixInformation = 3,
        /// Redirected header (redirects).
        RedirectedHeader = 4,
        /// MTU (router advertisements).
        Mtu = 5,
    }
}

/// The flags of a neighbour advertisement (the first byte after the checksum).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct NeighborFlags(pub u8);

impl NeighborFlags {
    /// R: the sender is a router.
    pub const ROUTER: Self = Self(0x80);
    /// S: sent in response to a solicitation.
    pub const SOLICITED: Self = Self(0x40);
    /// O: override an existing cache entry.
    pub const OVERRIDE: Self = Self(0x20);
    /// The bits the RFC defines (the rest are reserved).
    const DEFINED: u8 = 0xe0;

    /// Whether every flag in `other` is set in `self`.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }
}

impl BitOr for NeighborFlags {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

mod field {
    use core::ops::Range;
    pub(crate) const TYPE: usize = 0;
    pub(crate) const CODE: usize = 1;
    pub(crate) const CHECKSUM: Range<usize> = 2..4;
    pub(crate) const FLAGS: usize = 4;
    pub(crate) const RESERVED: Range<usize> = 4..8;
    pub(crate) const TARGET: Range<usize> = 8..24;
    pub(crate) const OPTIONS: usize = 24;
}

/// Length of a solicitation or advertisement without options.
pub const HEADER_LEN: usize = field::OPTIONS;
/// Length of a link-layer address option for Ethernet.
pub const LLADDR_OPTION_LEN: usize = 8;

/// All nodes on the link, `ff02::1`.
pub const ALL_NODES: Ipv6Address = Ipv6Address([0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);

/// The solicited-node multicast address of `addr` (`ff02::1:ffXX:XXXX`, RFC 4291 §2.7.1).
pub fn solicited_node(addr: Ipv6Address) -> Ipv6Address {
    let mut a = Ipv6Address([0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 0]);
    a.0[13..].copy_from_slice(&addr.0[13..]);
    a
}

/// The Ethernet address an IPv6 multicast address maps to (`33:33` and its last four bytes,
/// RFC 2464 §7).
pub fn multicast_mac(addr: Ipv6Address) -> EthernetAddress {
    let t = addr.0;
    EthernetAddress([0x33, 0x33, t[12], t[13], t[14], t[15]])
}

/// A view over one option: type, length (in units of 8 bytes, the two header bytes
/// included), data.
#[derive(Debug, Clone)]
pub struct NdiscOption<T: AsRef<[u8]>> {
    buffer: T,
}

view_constructors!(NdiscOption);

impl<T: AsRef<[u8]>> NdiscOption<T> {
    /// `Truncated` if the buffer is shorter than 2 bytes or than the length announces;
    /// `Malformed` for length 0 (RFC 4861 §4.6).
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        if b.len() < 2 {
            return Err(Error::Truncated);
        }
        if b[1] == 0 {
            return Err(Error::Malformed);
        }
        if self.option_len() > b.len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Option type.
    pub fn option_type(&self) -> NdiscOptionType {
        NdiscOptionType::from(self.buffer.as_ref()[0])
    }

    /// The option's length in bytes (8 times its length field).
    pub fn option_len(&self) -> usize {
        self.buffer
            .as_ref()
            .get(1)
            .map_or(0, |&n| usize::from(n) * 8)
    }

    /// The data after type and length, up to the option's end. Never panics.
    pub fn data(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        b.get(2..self.option_len().min(b.len())).unwrap_or(&[])
    }

    /// The link-layer address of a source/target link-layer address option for Ethernet
    /// (length 1); `None` for other options or lengths.
    pub fn ethernet_addr(&self) -> Option<EthernetAddress> {
        let lladdr = matches!(
            self.buffer
                .as_ref()
                .first()
                .map(|&t| NdiscOptionType::from(t)),
            Some(NdiscOptionType::SourceLinkLayerAddr | NdiscOptionType::TargetLinkLayerAddr)
        );
        let d = self.data();
        (lladdr && self.option_len() == LLADDR_OPTION_LEN && d.len() == 6)
            .then(|| EthernetAddress::from_bytes(d))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> NdiscOption<T> {
    /// Writes a link-layer address option of `kind` for `addr` into the first 8 bytes.
    pub fn emit_ethernet_addr(&mut self, kind: NdiscOptionType, addr: EthernetAddress) {
        let b = self.buffer.as_mut();
        b[0] = kind.into();
        b[1] = (LLADDR_OPTION_LEN / 8) as u8;
        b[2..LLADDR_OPTION_LEN].copy_from_slice(&addr.0);
    }
}

/// The options of a message, in order; ends (never panics) at the first that does not
/// parse, which [`NdiscPacket::check_options`] reports.
#[derive(Debug, Clone)]
pub struct NdiscOptions<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for NdiscOptions<'a> {
    type Item = NdiscOption<&'a [u8]>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let Ok(o) = NdiscOption::new_checked(self.rest) else {
            self.rest = &[];
            return None;
        };
        let (this, rest) = self.rest.split_at(o.option_len());
        self.rest = rest;
        Some(NdiscOption::new_unchecked(this))
    }
}

/// A view over a neighbour solicitation or advertisement (the whole ICMPv6 message).
#[derive(Debug, Clone)]
pub struct NdiscPacket<T: AsRef<[u8]>> {
    buffer: T,
}

/// Short name for [`NdiscPacket`].
pub type Packet<T> = NdiscPacket<T>;
/// Short name for [`NdiscRepr`].
pub type Repr = NdiscRepr;

view_constructors!(NdiscPacket);

impl<T: AsRef<[u8]>> NdiscPacket<T> {
    /// `Truncated` if the buffer is shorter than 24 bytes (type to target address). The
    /// options are checked by [`check_options`](Self::check_options).
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Message (ICMPv6) type.
    pub fn msg_type(&self) -> NdiscMessage {
        NdiscMessage::from(self.buffer.as_ref()[field::TYPE])
    }

    /// ICMPv6 code (0).
    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM.start)
    }

    /// An advertisement's flags (reserved bits included).
    pub fn flags(&self) -> NeighborFlags {
        NeighborFlags(self.buffer.as_ref()[field::FLAGS])
    }

    /// The target address: the address solicited, or the one advertised.
    pub fn target_addr(&self) -> Ipv6Address {
        Ipv6Address::from_bytes(&self.buffer.as_ref()[field::TARGET])
    }

    /// The options.
    pub fn options(&self) -> NdiscOptions<'_> {
        NdiscOptions {
            rest: self.buffer.as_ref().get(field::OPTIONS..).unwrap_or(&[]),
        }
    }

    /// Checks every option: `Malformed` for one of length 0, `Truncated` for one past the end.
    pub fn check_options(&self) -> Result<()> {
        let mut rest = self.buffer.as_ref().get(field::OPTIONS..).unwrap_or(&[]);
        while !rest.is_empty() {
            let o = NdiscOption::new_checked(rest)?;
            rest = &rest[o.option_len()..];
        }
        Ok(())
    }

    /// Whether the checksum is right, the buffer being the whole message and `src`/`dst` the
    /// addresses of the IPv6 header carrying it.
    pub fn verify_checksum(&self, src: Ipv6Address, dst: Ipv6Address) -> bool {
        checksum_ipv6_pseudo(src, dst, IpProtocol::Icmpv6, self.buffer.as_ref()) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> NdiscPacket<T> {
    /// Sets the message type.
    pub fn set_msg_type(&mut self, v: NdiscMessage) {
        self.buffer.as_mut()[field::TYPE] = v.into();
    }

    /// Sets the code.
    pub fn set_code(&mut self, v: u8) {
        self.buffer.as_mut()[field::CODE] = v;
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        self.buffer.as_mut()[field::CHECKSUM].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the flags and clears the reserved bytes after them.
    pub fn set_flags(&mut self, f: NeighborFlags) {
        let b = self.buffer.as_mut();
        b[field::RESERVED].fill(0);
        b[field::FLAGS] = f.0;
    }

    /// Sets the target address.
    pub fn set_target_addr(&mut self, a: Ipv6Address) {
        self.buffer.as_mut()[field::TARGET].copy_from_slice(&a.0);
    }

    /// Mutable access to the options.
    pub fn options_mut(&mut self) -> &mut [u8] {
        self.buffer
            .as_mut()
            .get_mut(field::OPTIONS..)
            .unwrap_or(&mut [])
    }

    /// Computes and stores the checksum over the whole buffer and the pseudo-header.
    pub fn fill_checksum(&mut self, src: Ipv6Address, dst: Ipv6Address) {
        self.set_checksum(0);
        let c = checksum_ipv6_pseudo(src, dst, IpProtocol::Icmpv6, self.buffer.as_ref());
        self.set_checksum(c);
    }
}

/// A parsed neighbour solicitation or advertisement, with the link-layer address option it
/// carries for Ethernet (source in a solicitation, target in an advertisement); other options
/// are skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NdiscRepr {
    /// Who has `target_addr`?
    NeighborSolicit {
        /// The address solicited.
        target_addr: Ipv6Address,
        /// The sender's link-layer address (absent from `::`, in duplicate address detection).
        lladdr: Option<EthernetAddress>,
    },
    /// `target_addr` is at `lladdr`.
    NeighborAdvert {
        /// R, S and O (reserved bits cleared).
        flags: NeighborFlags,
        /// The address advertised.
        target_addr: Ipv6Address,
        /// The target's link-layer address.
        lladdr: Option<EthernetAddress>,
    },
}

impl NdiscRepr {
    /// Parses a checked message: `Unsupported` unless a solicitation or advertisement,
    /// `Malformed` for a non-zero code or a malformed option, `Truncated` for an option past
    /// the end. The checksum is not checked (see [`NdiscPacket::verify_checksum`]).
    pub fn parse<T: AsRef<[u8]>>(packet: &NdiscPacket<T>) -> Result<Self> {
        packet.check_len()?;
        let want = match packet.msg_type() {
            NdiscMessage::NeighborSolicit => NdiscOptionType::SourceLinkLayerAddr,
            NdiscMessage::NeighborAdvert => NdiscOptionType::TargetLinkLayerAddr,
            NdiscMessage::Unknown(_) => return Err(Error::Unsupported),
        };
        if packet.code() != 0 {
            return Err(Error::Malformed);
        }
        packet.check_options()?;
        let lladdr = packet
            .options()
            .filter(|o| o.option_type() == want)
            .find_map(|o| o.ethernet_addr());
        let target_addr = packet.target_addr();
        Ok(match packet.msg_type() {
            NdiscMessage::NeighborAdvert => Self::NeighborAdvert {
                flags: NeighborFlags(packet.flags().0 & NeighborFlags::DEFINED),
                target_addr,
                lladdr,
            },
            _ => Self::NeighborSolicit {
                target_addr,
                lladdr,
            },
        })
    }

    fn lladdr(&self) -> Option<EthernetAddress> {
        match *self {
            Self::NeighborSolicit { lladdr, .. } | Self::NeighborAdvert { lladdr, .. } => lladdr,
        }
    }

    /// Length of the emitted message: 24, plus 8 with a link-layer address option.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.lladdr().map_or(0, |_| LLADDR_OPTION_LEN)
    }

    /// Writes the message with a zero checksum; call [`NdiscPacket::fill_checksum`] (or use
    /// [`emit_frame`](Self::emit_frame)).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut NdiscPacket<T>) {
        let (ty, flags, target, option) = match *self {
            Self::NeighborSolicit { target_addr, .. } => (
                NdiscMessage::NeighborSolicit,
                NeighborFlags(0),
                target_addr,
                NdiscOptionType::SourceLinkLayerAddr,
            ),
            Self::NeighborAdvert {
                flags, target_addr, ..
            } => (
                NdiscMessage::NeighborAdvert,
                flags,
                target_addr,
                NdiscOptionType::TargetLinkLayerAddr,
            ),
        };
        packet.set_msg_type(ty);
        packet.set_code(0);
        packet.set_checksum(0);
        packet.set_flags(flags);
        packet.set_target_addr(target);
        if let Some(mac) = self.lladdr() {
            NdiscOption::new_unchecked(packet.options_mut()).emit_ethernet_addr(option, mac);
        }
    }

    /// Length of the untagged Ethernet frame [`emit_frame`](Self::emit_frame) writes (78, or
    /// 86 with a link-layer address option).
    pub fn frame_len(&self) -> usize {
        ethernet::HEADER_LEN + ipv6::HEADER_LEN + self.buffer_len()
    }

    /// Writes an untagged Ethernet frame carrying this message from `src_mac`/`src_addr` to
    /// `dst_mac`/`dst_addr` into the start of `frame`: hop limit 255, traffic class and flow
    /// label 0, checksum filled.
    ///
    /// # Panics
    /// If `frame` is shorter than [`frame_len`](Self::frame_len).
    pub fn emit_frame(
        &self,
        src_mac: EthernetAddress,
        dst_mac: EthernetAddress,
        src_addr: Ipv6Address,
        dst_addr: Ipv6Address,
        frame: &mut [u8],
    ) {
        let eth = EthernetRepr {
            src_addr: src_mac,
            dst_addr: dst_mac,
            ethertype: EtherType::Ipv6,
        };
        let ip = Ipv6Repr {
            src_addr,
            dst_addr,
            next_header: IpProtocol::Icmpv6,
            payload_len: self.buffer_len(),
            hop_limit: 255,
            traffic_class: 0,
            flow_label: 0,
        };
        let mut f = EthernetFrame::new_unchecked(&mut frame[..self.frame_len()]);
        eth.emit(&mut f);
        let mut packet = Ipv6Packet::new_unchecked(f.payload_mut());
        ip.emit(&mut packet);
        let mut nd = NdiscPacket::new_unchecked(packet.payload_mut());
        self.emit(&mut nd);
        nd.fill_checksum(src_addr, dst_addr);
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use proptest::prelude::*;

    const MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x0a]);
    const ADDR: Ipv6Address = Ipv6Address([
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x12, 0x34, 0x56,
    ]);

    /// An unsolicited advertisement for 2001:db8::12:3456 at 02:00:00:00:00:0a to all nodes,
    /// Override set, with the target link-layer address option (checksum computed by hand
    /// from the pseudo-header).
    #[rustfmt::skip]
    const UNSOLICITED_NA: [u8; 86] = [
        0x33, 0x33, 0x00, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x86, 0xdd,
        0x60, 0x00, 0x00, 0x00, 0x00, 0x20, 0x3a, 0xff,
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x12, 0x34, 0x56,
        0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01,
        0x88, 0x00, 0x90, 0x53, 0x20, 0x00, 0x00, 0x00,
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x12, 0x34, 0x56,
        0x02, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x0a,
    ];

    fn na() -> NdiscRepr {
        NdiscRepr::NeighborAdvert {
            flags: NeighborFlags::OVERRIDE,
            target_addr: ADDR,
            lladdr: Some(MAC),
        }
    }

    #[test]
    fn unsolicited_advertisement() {
        let r = na();
        assert_eq!(r.frame_len(), 86);
        let mut f = [0xeeu8; 86];
        r.emit_frame(MAC, multicast_mac(ALL_NODES), ADDR, ALL_NODES, &mut f);
        assert_eq!(f, UNSOLICITED_NA);
        let p = NdiscPacket::new_checked(&f[54..]).unwrap();
        assert!(p.verify_checksum(ADDR, ALL_NODES));
        assert!(!p.verify_checksum(ADDR, solicited_node(ADDR)));
        assert_eq!(p.msg_type(), NdiscMessage::NeighborAdvert);
        assert!(p.flags().contains(NeighborFlags::OVERRIDE));
        assert!(!p.flags().contains(NeighborFlags::SOLICITED));
        assert_eq!(p.target_addr(), ADDR);
        let o: Vec<_> = p.options().collect();
        assert_eq!(o.len(), 1);
        assert_eq!(o[0].option_type(), NdiscOptionType::TargetLinkLayerAddr);
        assert_eq!(o[0].ethernet_addr(), Some(MAC));
        assert_eq!(NdiscRepr::parse(&p), Ok(r));
    }

    #[test]
    fn solicitation_with_and_without_source() {
        let ns = NdiscRepr::NeighborSolicit {
            target_addr: ADDR,
            lladdr: Some(MAC),
        };
        let dst = solicited_node(ADDR);
        assert_eq!(dst.to_string(), "ff02::1:ff12:3456");
        assert_eq!(multicast_mac(dst).to_string(), "33:33:ff:12:34:56");
        let src = Ipv6Address([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        let mut f = vec![0u8; ns.frame_len()];
        ns.emit_frame(MAC, multicast_mac(dst), src, dst, &mut f);
        assert_eq!(f.len(), 86);
        let p = NdiscPacket::new_checked(&f[54..]).unwrap();
        assert!(p.verify_checksum(src, dst));
        assert_eq!(NdiscRepr::parse(&p), Ok(ns));
        assert_eq!(&f[78..80], &[1, 1], "source link-layer address option");
        // Duplicate address detection: from ::, no option.
        let dad = NdiscRepr::NeighborSolicit {
            target_addr: ADDR,
            lladdr: None,
        };
        let mut f = vec![0u8; dad.frame_len()];
        dad.emit_frame(
            MAC,
            multicast_mac(dst),
            Ipv6Address::UNSPECIFIED,
            dst,
            &mut f,
        );
        assert_eq!(f.len(), 78);
        let p = NdiscPacket::new_checked(&f[54..]).unwrap();
        assert!(p.verify_checksum(Ipv6Address::UNSPECIFIED, dst));
        assert_eq!(NdiscRepr::parse(&p), Ok(dad));
    }

    #[test]
    fn malformed_and_truncated() {
        let msg = &UNSOLICITED_NA[54..];
        for len in 0..HEADER_LEN {
            let e = NdiscPacket::new_checked(&msg[..len]).err();
            assert_eq!(e, Some(Error::Truncated), "len {len}");
        }
        // An option cut short.
        for len in HEADER_LEN + 1..msg.len() {
            let p = NdiscPacket::new_checked(&msg[..len]).unwrap();
            assert_eq!(NdiscRepr::parse(&p), Err(Error::Truncated), "len {len}");
            assert_eq!(p.options().count(), 0);
        }
        // Without the option: no address.
        let p = NdiscPacket::new_checked(&msg[..HEADER_LEN]).unwrap();
        assert!(matches!(
            NdiscRepr::parse(&p),
            Ok(NdiscRepr::NeighborAdvert { lladdr: None, .. })
        ));
        // Option length 0.
        let mut z = msg.to_vec();
        z[25] = 0;
        let p = NdiscPacket::new_checked(&z[..]).unwrap();
        assert_eq!(NdiscRepr::parse(&p), Err(Error::Malformed));
        // Non-zero code.
        let mut c = msg.to_vec();
        c[1] = 1;
        let p = NdiscPacket::new_checked(&c[..]).unwrap();
        assert_eq!(NdiscRepr::parse(&p), Err(Error::Malformed));
        // A router advertisement is not read here.
        let mut ra = msg.to_vec();
        ra[0] = 134;
        let p = NdiscPacket::new_checked(&ra[..]).unwrap();
        assert_eq!(p.msg_type(), NdiscMessage::Unknown(134));
        assert_eq!(NdiscRepr::parse(&p), Err(Error::Unsupported));
        // Unknown options and reserved flag bits are skipped; a 16-byte link-layer option is
        // not an Ethernet address.
        let mut u = msg[..HEADER_LEN].to_vec();
        u[4] |= 0x1f;
        u.extend_from_slice(&[14, 1, 0, 0, 0, 0, 0, 0]);
        u.extend_from_slice(&[2, 2, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]);
        u.extend_from_slice(&msg[HEADER_LEN..]);
        let p = NdiscPacket::new_checked(&u[..]).unwrap();
        assert_eq!(p.options().count(), 3);
        assert_eq!(NdiscRepr::parse(&p), Ok(na()));
    }

    fn arb_repr() -> impl Strategy<Value = NdiscRepr> {
        let mac = proptest::option::of(any::<[u8; 6]>().prop_map(EthernetAddress));
        let addr = any::<[u8; 16]>().prop_map(Ipv6Address);
        prop_oneof![
            (addr.clone(), mac.clone()).prop_map(|(target_addr, lladdr)| {
                NdiscRepr::NeighborSolicit {
                    target_addr,
                    lladdr,
                }
            }),
            (0u8..8, addr, mac).prop_map(|(f, target_addr, lladdr)| NdiscRepr::NeighborAdvert {
                flags: NeighborFlags(f << 5),
                target_addr,
                lladdr,
            }),
        ]
    }

    proptest! {
        #[test]
        fn accessors_never_panic(data in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(p) = NdiscPacket::new_checked(&data[..]) {
                let _ = (p.msg_type(), p.code(), p.checksum(), p.flags(), p.target_addr());
                let _ = (p.check_options(), p.verify_checksum(ADDR, ALL_NODES));
                for o in p.options() {
                    let _ = (o.option_type(), o.data(), o.ethernet_addr());
                }
                if let Ok(r) = NdiscRepr::parse(&p) {
                    let mut out = vec![0u8; r.frame_len()];
                    r.emit_frame(MAC, MAC, ADDR, ADDR, &mut out);
                }
            }
            let o = NdiscOption::new_unchecked(&data[..]);
            let _ = (o.data(), o.ethernet_addr(), o.option_len());
        }

        #[test]
        fn repr_round_trip(r in arb_repr(), src in any::<[u8; 16]>()) {
            let (src, dst) = (Ipv6Address(src), solicited_node(ADDR));
            let mut frame = vec![0u8; r.frame_len()];
            r.emit_frame(MAC, multicast_mac(dst), src, dst, &mut frame);
            let eth = EthernetFrame::new_checked(&frame[..]).unwrap();
            let ip = Ipv6Packet::new_checked(eth.payload()).unwrap();
            prop_assert_eq!(ip.hop_limit(), 255);
            prop_assert_eq!(ip.next_header(), IpProtocol::Icmpv6);
            let p = NdiscPacket::new_checked(ip.payload()).unwrap();
            prop_assert!(p.verify_checksum(src, dst));
            prop_assert_eq!(NdiscRepr::parse(&p), Ok(r));
        }
    }
}
