//! Ethernet II frames with any number of 802.1Q / 802.1ad tags.

use core::fmt;

use super::view_constructors;
use super::{Error, Result, be16, enum_with_unknown};

/// A 48-bit IEEE MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct EthernetAddress(pub [u8; 6]);

impl EthernetAddress {
    /// The all-zero address (used by LACP for "no partner").
    pub const ZERO: Self = Self([0; 6]);
    /// The broadcast address.
    pub const BROADCAST: Self = Self([0xff; 6]);
    /// The Slow Protocols multicast address (IEEE 802.3 Annex 57A): LACP and Marker.
    pub const SLOW_PROTOCOLS: Self = Self([0x01, 0x80, 0xc2, 0x00, 0x00, 0x02]);

    /// Builds an address from a 6-byte slice.
    ///
    /// # Panics
    /// If `bytes` is not exactly 6 bytes long.
    pub fn from_bytes(bytes: &[u8]) -> Self {
        let mut a = [0u8; 6];
        a.copy_from_slice(bytes);
        Self(a)
    }

    /// The address bytes.
    pub const fn as_bytes(&self) -> &[u8; 6] {
        &self.0
    }

    /// Whether the group (multicast) bit is set.
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 1 == 1
    }

    /// Whether every byte is zero.
    pub fn is_zero(&self) -> bool {
        self.0 == [0; 6]
    }
}

impl fmt::Display for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl core::str::FromStr for EthernetAddress {
    type Err = Error;

    /// Parses `aa:bb:cc:dd:ee:ff` (also with `-` separators).
    fn from_str(s: &str) -> Result<Self> {
        let mut out = [0u8; 6];
        let mut n = 0;
        for part in s.split([':', '-']) {
            if n == 6 || part.len() != 2 {
                return Err(Error::Malformed);
            }
            out[n] = u8::from_str_radix(part, 16).map_err(|_| Error::Malformed)?;
            n += 1;
        }
        if n != 6 {
            return Err(Error::Malformed);
        }
        Ok(Self(out))
    }
}

enum_with_unknown! {
    /// The EtherType (or TPID) field.
    pub enum EtherType(u16) {
        /// IPv4.
        Ipv4 = 0x0800,
        /// ARP.
        Arp = 0x0806,
        /// Transparent Ethernet Bridging (Ethernet inside GRE).
        TransEtherBridging = 0x6558,
        /// Reverse ARP.
        Rarp = 0x8035,
        /// IEEE 802.1Q customer VLAN tag.
        Vlan = 0x8100,
        /// IPv6.
        Ipv6 = 0x86dd,
        /// Slow protocols (IEEE 802.3 Annex 57A): LACP, Marker, OAM.
        Slow = 0x8809,
        /// MPLS unicast.
        MplsUnicast = 0x8847,
        /// MPLS multicast.
        MplsMulticast = 0x8848,
        /// PPPoE discovery stage.
        PppoeDiscovery = 0x8863,
        /// PPPoE session stage.
        PppoeSession = 0x8864,
        /// IEEE 802.1ad service VLAN tag (QinQ outer tag).
        QinQ = 0x88a8,
        /// lagd stripe mode's sequence header (IEEE 802 local experimental EtherType 1).
        LocalExperimental1 = 0x88b5,
        /// IEEE 802.1AB LLDP.
        Lldp = 0x88cc,
    }
}

impl EtherType {
    /// Whether this value is a VLAN tag protocol identifier (802.1Q or 802.1ad).
    pub fn is_vlan_tpid(self) -> bool {
        matches!(self, Self::Vlan | Self::QinQ)
    }
}

impl fmt::Display for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{:04x}", u16::from(*self))
    }
}

/// One VLAN tag: the tag protocol identifier and the 16-bit tag control information.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VlanTag {
    /// 0x8100 (802.1Q) or 0x88a8 (802.1ad).
    pub tpid: EtherType,
    /// Tag control information: PCP (3 bits), DEI (1 bit), VID (12 bits).
    pub tci: u16,
}

impl VlanTag {
    /// The 12-bit VLAN identifier.
    pub const fn vid(&self) -> u16 {
        self.tci & 0x0fff
    }

    /// The 3-bit priority code point.
    pub const fn pcp(&self) -> u8 {
        (self.tci >> 13) as u8
    }
}

mod field {
    use core::ops::Range;
    pub(crate) const DESTINATION: Range<usize> = 0..6;
    pub(crate) const SOURCE: Range<usize> = 6..12;
    pub(crate) const ETHERTYPE: Range<usize> = 12..14;
    pub(crate) const PAYLOAD: usize = 14;
}

/// Length of the untagged Ethernet header.
pub const HEADER_LEN: usize = field::PAYLOAD;
/// Length of one VLAN tag.
pub const VLAN_TAG_LEN: usize = 4;

/// A read-only (or, for `AsMut` buffers, writable) view over an Ethernet II frame.
#[derive(Debug, Clone)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

view_constructors!(EthernetFrame);

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Checks the buffer holds at least the 14-byte header.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// Destination MAC.
    pub fn dst_addr(&self) -> EthernetAddress {
        EthernetAddress::from_bytes(&self.buffer.as_ref()[field::DESTINATION])
    }

    /// Source MAC.
    pub fn src_addr(&self) -> EthernetAddress {
        EthernetAddress::from_bytes(&self.buffer.as_ref()[field::SOURCE])
    }

    /// The type field right after the addresses (a TPID when the frame is tagged).
    pub fn ethertype(&self) -> EtherType {
        EtherType::from(be16(self.buffer.as_ref(), field::ETHERTYPE.start))
    }

    /// Everything after the 14-byte header (tags included).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }

    /// The EtherType and the network header's offset as a device that lifts one VLAN tag (as
    /// hardware tag acceleration does) sees them: the type after the outermost 802.1Q or
    /// 802.1ad tag, or the frame's own type. `None` when a tagged frame ends inside its tag. A
    /// second tag is not looked through: its TPID is the type.
    pub fn type_after_one_tag(&self) -> Option<(EtherType, usize)> {
        let ty = self.ethertype();
        if !ty.is_vlan_tpid() {
            return Some((ty, HEADER_LEN));
        }
        let inner = self.payload().get(2..4)?;
        Some((EtherType::from(be16(inner, 0)), HEADER_LEN + VLAN_TAG_LEN))
    }

    /// Walks the VLAN tags after the addresses. Returns the tags in wire order (outermost
    /// first, at most `N`; more tags are skipped but not returned), the inner EtherType and the
    /// offset of the network header.
    pub fn walk_tags<const N: usize>(&self) -> Result<TagWalk<N>> {
        let b = self.buffer.as_ref();
        let mut walk = TagWalk {
            tags: [None; N],
            ethertype: self.ethertype(),
            network_offset: HEADER_LEN,
        };
        let mut n = 0;
        while walk.ethertype.is_vlan_tpid() {
            let at = walk.network_offset;
            if b.len() < at + VLAN_TAG_LEN {
                return Err(Error::Truncated);
            }
            if n < N {
                walk.tags[n] = Some(VlanTag {
                    tpid: walk.ethertype,
                    tci: be16(b, at),
                });
                n += 1;
            }
            walk.ethertype = EtherType::from(be16(b, at + 2));
            walk.network_offset = at + VLAN_TAG_LEN;
        }
        Ok(walk)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Sets the destination MAC.
    pub fn set_dst_addr(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(&a.0);
    }

    /// Sets the source MAC.
    pub fn set_src_addr(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(&a.0);
    }

    /// Sets the type field.
    pub fn set_ethertype(&mut self, t: EtherType) {
        self.buffer.as_mut()[field::ETHERTYPE].copy_from_slice(&u16::from(t).to_be_bytes());
    }

    /// Mutable access to everything after the 14-byte header.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD..]
    }
}

/// The result of [`EthernetFrame::walk_tags`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TagWalk<const N: usize> {
    /// Up to `N` tags, outermost first.
    pub tags: [Option<VlanTag>; N],
    /// The EtherType after the last tag.
    pub ethertype: EtherType,
    /// Offset of the network header from the start of the frame.
    pub network_offset: usize,
}

/// A parsed Ethernet header (tags are not part of it; see [`EthernetFrame::walk_tags`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthernetRepr {
    /// Source MAC.
    pub src_addr: EthernetAddress,
    /// Destination MAC.
    pub dst_addr: EthernetAddress,
    /// Type field.
    pub ethertype: EtherType,
}

impl EthernetRepr {
    /// Parses the header of a checked frame.
    pub fn parse<T: AsRef<[u8]>>(frame: &EthernetFrame<T>) -> Result<Self> {
        frame.check_len()?;
        Ok(Self {
            src_addr: frame.src_addr(),
            dst_addr: frame.dst_addr(),
            ethertype: frame.ethertype(),
        })
    }

    /// Header length (14).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header into the first 14 bytes of `frame`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut EthernetFrame<T>) {
        frame.set_src_addr(self.src_addr);
        frame.set_dst_addr(self.dst_addr);
        frame.set_ethertype(self.ethertype);
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use proptest::prelude::*;

    // A real ARP request as captured on a Linux host (broadcast, 42 bytes).
    const ARP_REQ: [u8; 42] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x08, 0x06, 0x00,
        0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x0a, 0x00,
        0x02, 0x0f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x00, 0x02, 0x02,
    ];

    #[test]
    fn parses_untagged() {
        let f = EthernetFrame::new_checked(&ARP_REQ[..]).unwrap();
        assert_eq!(f.dst_addr(), EthernetAddress::BROADCAST);
        assert_eq!(f.src_addr().to_string(), "52:54:00:12:34:56");
        assert_eq!(f.ethertype(), EtherType::Arp);
        let w = f.walk_tags::<2>().unwrap();
        assert_eq!(w.network_offset, 14);
        assert_eq!(w.tags, [None, None]);
    }

    #[test]
    fn walks_qinq() {
        let mut b = vec![0u8; 12];
        b.extend_from_slice(&[0x88, 0xa8, 0x20, 0x64, 0x81, 0x00, 0x00, 0x0a, 0x08, 0x00]);
        let w = EthernetFrame::new_checked(&b[..])
            .unwrap()
            .walk_tags::<2>()
            .unwrap();
        assert_eq!(w.ethertype, EtherType::Ipv4);
        assert_eq!(w.network_offset, 22);
        let outer = w.tags[0].unwrap();
        assert_eq!(
            (outer.tpid, outer.vid(), outer.pcp()),
            (EtherType::QinQ, 100, 1)
        );
        assert_eq!(w.tags[1].unwrap().vid(), 10);
        // cut inside the second tag
        let e = EthernetFrame::new_checked(&b[..19])
            .unwrap()
            .walk_tags::<2>();
        assert_eq!(e, Err(Error::Truncated));
    }

    #[test]
    fn repr_round_trip_and_unknown_type() {
        let r = EthernetRepr {
            src_addr: EthernetAddress([2, 0, 0, 0, 0, 1]),
            dst_addr: EthernetAddress([2, 0, 0, 0, 0, 2]),
            ethertype: EtherType::from(0x1234),
        };
        assert_eq!(r.ethertype, EtherType::Unknown(0x1234));
        let mut buf = [0u8; 14];
        r.emit(&mut EthernetFrame::new_unchecked(&mut buf[..]));
        assert_eq!(&buf[12..], &[0x12, 0x34]);
        assert_eq!(
            EthernetRepr::parse(&EthernetFrame::new_checked(&buf[..]).unwrap()),
            Ok(r)
        );
        assert!(EthernetFrame::new_checked(&buf[..13]).is_err());
    }

    #[test]
    fn mac_parse_display() {
        let m: EthernetAddress = "02:AA:00:00:00:01".parse().unwrap();
        assert_eq!(m.to_string(), "02:aa:00:00:00:01");
        assert!("02:aa:00:00:00".parse::<EthernetAddress>().is_err());
        assert!("02:aa:00:00:00:01:02".parse::<EthernetAddress>().is_err());
        assert!("zz:aa:00:00:00:01".parse::<EthernetAddress>().is_err());
    }

    /// The tag walk written out independently: `(tpid, tci)` pairs before `inner`.
    fn build(tags: &[(u16, u16)], inner: u16, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01];
        for &(tpid, tci) in tags {
            f.extend_from_slice(&tpid.to_be_bytes());
            f.extend_from_slice(&tci.to_be_bytes());
        }
        f.extend_from_slice(&inner.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    /// What a walk over `tags` must find in the frame cut to `len` bytes: `None` when a tag is
    /// cut (tag `i` ends with the type after it, at byte `18 + 4 * i`).
    fn expected_walk<const N: usize>(
        tags: &[(u16, u16)],
        inner: u16,
        len: usize,
    ) -> Option<TagWalk<N>> {
        if (0..tags.len()).any(|i| len < 18 + 4 * i) {
            return None;
        }
        let mut out = [None; N];
        for (slot, &(tpid, tci)) in out.iter_mut().zip(tags) {
            *slot = Some(VlanTag {
                tpid: EtherType::from(tpid),
                tci,
            });
        }
        Some(TagWalk {
            tags: out,
            ethertype: EtherType::from(inner),
            network_offset: 14 + 4 * tags.len(),
        })
    }

    fn tags() -> impl Strategy<Value = Vec<(u16, u16)>> {
        proptest::collection::vec(
            (prop_oneof![Just(0x8100u16), Just(0x88a8u16)], any::<u16>()),
            0..6,
        )
    }

    fn inner_type() -> impl Strategy<Value = u16> {
        any::<u16>().prop_filter("not a TPID", |t| *t != 0x8100 && *t != 0x88a8)
    }

    proptest! {
        /// Any bytes: a checked view answers every accessor, and walks tags without panicking.
        #[test]
        fn accessors_and_walk_never_panic(data in proptest::collection::vec(any::<u8>(), 0..80)) {
            match EthernetFrame::new_checked(&data[..]) {
                Err(e) => prop_assert!(data.len() < HEADER_LEN && e == Error::Truncated),
                Ok(f) => {
                    prop_assert_eq!(&f.dst_addr().0[..], &data[..6]);
                    prop_assert_eq!(&f.src_addr().0[..], &data[6..12]);
                    prop_assert_eq!(u16::from(f.ethertype()), u16::from_be_bytes([data[12], data[13]]));
                    prop_assert_eq!(f.payload(), &data[14..]);
                    let _ = f.walk_tags::<0>();
                    let two = f.walk_tags::<2>();
                    let eight = f.walk_tags::<8>();
                    // How many tags are returned does not change what the walk finds.
                    prop_assert_eq!(two.is_ok(), eight.is_ok());
                    if let (Ok(a), Ok(b)) = (two, eight) {
                        prop_assert_eq!((a.ethertype, a.network_offset), (b.ethertype, b.network_offset));
                        prop_assert_eq!(&a.tags[..], &b.tags[..2]);
                        prop_assert!(a.network_offset <= data.len());
                    }
                    prop_assert!(EthernetRepr::parse(&f).is_ok());
                }
            }
        }

        /// Generated frames with up to five 802.1Q/802.1ad tags, whole or cut anywhere: the
        /// walk finds what the independent walk above finds.
        #[test]
        fn walk_tags_agrees_with_an_independent_walk(
            tags in tags(),
            inner in inner_type(),
            payload in proptest::collection::vec(any::<u8>(), 0..40),
            cut in any::<proptest::sample::Index>(),
        ) {
            let f = build(&tags, inner, &payload);
            let frame = EthernetFrame::new_checked(&f[..]).unwrap();
            prop_assert_eq!(frame.walk_tags::<8>().ok(), expected_walk::<8>(&tags, inner, f.len()));
            prop_assert_eq!(frame.walk_tags::<2>().ok(), expected_walk::<2>(&tags, inner, f.len()));
            let w = frame.walk_tags::<8>().unwrap();
            prop_assert_eq!(&f[w.network_offset..], &payload[..]);
            // Cut anywhere from the end of the MAC header on.
            let len = HEADER_LEN + cut.index(f.len() - HEADER_LEN + 1);
            let short = EthernetFrame::new_checked(&f[..len]).unwrap();
            let want = expected_walk::<2>(&tags, inner, len);
            prop_assert_eq!(short.walk_tags::<2>().ok(), want);
            if want.is_none() {
                prop_assert_eq!(short.walk_tags::<2>(), Err(Error::Truncated));
            }
        }

        /// Parsing and emitting a header is the identity on its 14 bytes.
        #[test]
        fn repr_round_trip(header in any::<[u8; 14]>()) {
            let r = EthernetRepr::parse(&EthernetFrame::new_checked(&header[..]).unwrap()).unwrap();
            let mut out = [0u8; 14];
            r.emit(&mut EthernetFrame::new_unchecked(&mut out[..]));
            prop_assert_eq!(out, header);
        }

        /// A MAC address prints and parses back to itself.
        #[test]
        fn mac_display_parse_round_trip(mac in any::<[u8; 6]>()) {
            let m = EthernetAddress(mac);
            prop_assert_eq!(m.to_string().parse::<EthernetAddress>(), Ok(m));
            prop_assert_eq!(m.is_multicast(), mac[0] & 1 == 1);
        }
    }
}
