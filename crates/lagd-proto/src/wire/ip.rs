//! Things IPv4 and IPv6 share: protocol numbers, addresses and the Internet checksum.

use core::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::{Error, Result, enum_with_unknown};

enum_with_unknown! {
    /// An IP protocol number: the IPv4 `protocol` field or an IPv6 `next header`.
    pub enum IpProtocol(u8) {
        /// IPv6 Hop-by-Hop Options.
        HopByHop = 0,
        /// ICMP for IPv4.
        Icmp = 1,
        /// IGMP.
        Igmp = 2,
        /// IPv4 encapsulated in IP.
        IpIp = 4,
        /// TCP.
        Tcp = 6,
        /// UDP.
        Udp = 17,
        /// DCCP.
        Dccp = 33,
        /// IPv6 encapsulated in IP.
        Ipv6 = 41,
        /// IPv6 Routing header.
        Ipv6Route = 43,
        /// IPv6 Fragment header.
        Ipv6Frag = 44,
        /// Generic Routing Encapsulation.
        Gre = 47,
        /// Encapsulating Security Payload.
        Esp = 50,
        /// Authentication Header.
        Ah = 51,
        /// ICMP for IPv6.
        Icmpv6 = 58,
        /// IPv6 "no next header".
        Ipv6NoNxt = 59,
        /// IPv6 Destination Options.
        Ipv6Opts = 60,
        /// SCTP.
        Sctp = 132,
        /// UDP-Lite.
        UdpLite = 136,
        /// MPLS encapsulated in IP.
        Mpls = 137,
    }
}

impl fmt::Display for IpProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unknown(v) => write!(f, "proto-{v}"),
            other => write!(f, "{other:?}"),
        }
    }
}

/// A 32-bit IPv4 address, in network byte order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Ipv4Address(pub [u8; 4]);

impl Ipv4Address {
    /// `0.0.0.0`.
    pub const UNSPECIFIED: Self = Self([0; 4]);
    /// `255.255.255.255`.
    pub const BROADCAST: Self = Self([0xff; 4]);

    /// Builds an address from a 4-byte slice.
    ///
    /// # Panics
    /// If `bytes` is not exactly 4 bytes long.
    pub fn from_bytes(bytes: &[u8]) -> Self {
        let mut a = [0u8; 4];
        a.copy_from_slice(bytes);
        Self(a)
    }

    /// The address bytes.
    pub const fn as_bytes(&self) -> &[u8; 4] {
        &self.0
    }

    /// The address as a host-order integer (`10.0.0.1` is `0x0a00_0001`).
    pub const fn to_bits(self) -> u32 {
        u32::from_be_bytes(self.0)
    }

    /// Whether this is `0.0.0.0`.
    pub const fn is_unspecified(&self) -> bool {
        u32::from_be_bytes(self.0) == 0
    }

    /// Whether this is `255.255.255.255`.
    pub const fn is_broadcast(&self) -> bool {
        u32::from_be_bytes(self.0) == u32::MAX
    }

    /// Whether this is in `224.0.0.0/4`.
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 0xf0 == 0xe0
    }
}

impl fmt::Display for Ipv4Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d] = self.0;
        write!(f, "{a}.{b}.{c}.{d}")
    }
}

impl core::str::FromStr for Ipv4Address {
    type Err = Error;

    /// Parses dotted-quad text (`192.0.2.1`).
    fn from_str(s: &str) -> Result<Self> {
        s.parse::<Ipv4Addr>()
            .map(Self::from)
            .map_err(|_| Error::Malformed)
    }
}

impl From<Ipv4Addr> for Ipv4Address {
    fn from(a: Ipv4Addr) -> Self {
        Self(a.octets())
    }
}

impl From<Ipv4Address> for Ipv4Addr {
    fn from(a: Ipv4Address) -> Self {
        Self::from(a.0)
    }
}

impl From<[u8; 4]> for Ipv4Address {
    fn from(a: [u8; 4]) -> Self {
        Self(a)
    }
}

/// A 128-bit IPv6 address, in network byte order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Ipv6Address(pub [u8; 16]);

impl Ipv6Address {
    /// `::`.
    pub const UNSPECIFIED: Self = Self([0; 16]);
    /// `::1`.
    pub const LOOPBACK: Self = Self([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);

    /// Builds an address from a 16-byte slice.
    ///
    /// # Panics
    /// If `bytes` is not exactly 16 bytes long.
    pub fn from_bytes(bytes: &[u8]) -> Self {
        let mut a = [0u8; 16];
        a.copy_from_slice(bytes);
        Self(a)
    }

    /// The address bytes.
    pub const fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// Whether this is `::`.
    pub const fn is_unspecified(&self) -> bool {
        u128::from_be_bytes(self.0) == 0
    }

    /// Whether this is in `ff00::/8`.
    pub const fn is_multicast(&self) -> bool {
        self.0[0] == 0xff
    }

    /// Whether this is in `fe80::/10`.
    pub const fn is_link_local(&self) -> bool {
        self.0[0] == 0xfe && self.0[1] & 0xc0 == 0x80
    }
}

impl fmt::Display for Ipv6Address {
    /// RFC 5952 text: lower-case, longest run of zero groups compressed.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&Ipv6Addr::from(self.0), f)
    }
}

impl core::str::FromStr for Ipv6Address {
    type Err = Error;

    /// Parses any RFC 4291 text form (`2001:db8::1`, `::ffff:192.0.2.1`, ...).
    fn from_str(s: &str) -> Result<Self> {
        s.parse::<Ipv6Addr>()
            .map(Self::from)
            .map_err(|_| Error::Malformed)
    }
}

impl From<Ipv6Addr> for Ipv6Address {
    fn from(a: Ipv6Addr) -> Self {
        Self(a.octets())
    }
}

impl From<Ipv6Address> for Ipv6Addr {
    fn from(a: Ipv6Address) -> Self {
        Self::from(a.0)
    }
}

impl From<[u8; 16]> for Ipv6Address {
    fn from(a: [u8; 16]) -> Self {
        Self(a)
    }
}

/// An address of either family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IpAddress {
    /// IPv4.
    V4(Ipv4Address),
    /// IPv6.
    V6(Ipv6Address),
}

impl fmt::Display for IpAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::V4(a) => a.fmt(f),
            Self::V6(a) => a.fmt(f),
        }
    }
}

impl core::str::FromStr for IpAddress {
    type Err = Error;

    /// Parses IPv4 or IPv6 text.
    fn from_str(s: &str) -> Result<Self> {
        s.parse::<IpAddr>()
            .map(Self::from)
            .map_err(|_| Error::Malformed)
    }
}

impl From<Ipv4Address> for IpAddress {
    fn from(a: Ipv4Address) -> Self {
        Self::V4(a)
    }
}

impl From<Ipv6Address> for IpAddress {
    fn from(a: Ipv6Address) -> Self {
        Self::V6(a)
    }
}

impl From<IpAddr> for IpAddress {
    fn from(a: IpAddr) -> Self {
        match a {
            IpAddr::V4(a) => Self::V4(a.into()),
            IpAddr::V6(a) => Self::V6(a.into()),
        }
    }
}

impl From<IpAddress> for IpAddr {
    fn from(a: IpAddress) -> Self {
        match a {
            IpAddress::V4(a) => Self::V4(a.into()),
            IpAddress::V6(a) => Self::V6(a.into()),
        }
    }
}

/// The Internet checksum (RFC 1071): a ones'-complement sum of 16-bit big-endian words.
///
/// Partial sums are `u32` accumulators that have not been folded; [`fold`](checksum::fold)
/// turns one into the 16-bit sum, and the field on the wire holds its complement.
pub mod checksum {
    use super::{IpAddress, IpProtocol, Ipv4Address, Ipv6Address};

    /// Adds `data` to the running sum `acc` (an odd final byte is padded with zero).
    ///
    /// Each call treats `data` as starting on a 16-bit boundary.
    pub fn add(acc: u32, data: &[u8]) -> u32 {
        let mut sum = u64::from(acc);
        let mut chunks = data.chunks_exact(2);
        for w in &mut chunks {
            sum += u64::from(u16::from_be_bytes([w[0], w[1]]));
        }
        if let [last] = chunks.remainder() {
            sum += u64::from(*last) << 8;
        }
        // 2^16 = 1 in ones'-complement arithmetic, so carries fold back in.
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        sum as u32
    }

    /// Folds carries until a 16-bit ones'-complement sum remains.
    pub fn fold(mut acc: u32) -> u16 {
        while acc > 0xffff {
            acc = (acc & 0xffff) + (acc >> 16);
        }
        acc as u16
    }

    /// The value to put in a checksum field covering `data` (the complement of its sum).
    pub fn of(data: &[u8]) -> u16 {
        !fold(add(0, data))
    }

    /// The partial sum of the IPv4 pseudo-header (RFC 768 / RFC 793).
    pub fn pseudo_ipv4(src: Ipv4Address, dst: Ipv4Address, proto: IpProtocol, len: u16) -> u32 {
        let acc = add(add(0, &src.0), &dst.0);
        acc + u32::from(u8::from(proto)) + u32::from(len)
    }

    /// The partial sum of the IPv6 pseudo-header (RFC 8200 section 8.1).
    pub fn pseudo_ipv6(src: Ipv6Address, dst: Ipv6Address, proto: IpProtocol, len: u32) -> u32 {
        let acc = add(add(0, &src.0), &dst.0);
        add(acc, &len.to_be_bytes()) + u32::from(u8::from(proto))
    }

    /// The pseudo-header sum for either family; `None` if the families differ or an IPv4
    /// upper-layer length does not fit in 16 bits.
    pub fn pseudo(src: IpAddress, dst: IpAddress, proto: IpProtocol, len: usize) -> Option<u32> {
        match (src, dst) {
            (IpAddress::V4(s), IpAddress::V4(d)) => {
                Some(pseudo_ipv4(s, d, proto, u16::try_from(len).ok()?))
            }
            (IpAddress::V6(s), IpAddress::V6(d)) => {
                Some(pseudo_ipv6(s, d, proto, u32::try_from(len).ok()?))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn protocol_numbers() {
        let known: [(u8, IpProtocol); 19] = [
            (0, IpProtocol::HopByHop),
            (1, IpProtocol::Icmp),
            (2, IpProtocol::Igmp),
            (4, IpProtocol::IpIp),
            (6, IpProtocol::Tcp),
            (17, IpProtocol::Udp),
            (33, IpProtocol::Dccp),
            (41, IpProtocol::Ipv6),
            (43, IpProtocol::Ipv6Route),
            (44, IpProtocol::Ipv6Frag),
            (47, IpProtocol::Gre),
            (50, IpProtocol::Esp),
            (51, IpProtocol::Ah),
            (58, IpProtocol::Icmpv6),
            (59, IpProtocol::Ipv6NoNxt),
            (60, IpProtocol::Ipv6Opts),
            (132, IpProtocol::Sctp),
            (136, IpProtocol::UdpLite),
            (137, IpProtocol::Mpls),
        ];
        for (n, p) in known {
            assert_eq!(IpProtocol::from(n), p);
            assert_eq!(u8::from(p), n);
        }
        assert_eq!(IpProtocol::from(253), IpProtocol::Unknown(253));
        assert_eq!(IpProtocol::Unknown(253).to_string(), "proto-253");
        assert_eq!(IpProtocol::Tcp.to_string(), "Tcp");
    }

    #[test]
    fn ipv4_text() {
        let a: Ipv4Address = "192.0.2.33".parse().unwrap();
        assert_eq!(a, Ipv4Address([192, 0, 2, 33]));
        assert_eq!(a.to_string(), "192.0.2.33");
        assert_eq!(a.to_bits(), 0xc000_0221);
        assert!("192.0.2".parse::<Ipv4Address>().is_err());
        assert!("192.0.2.256".parse::<Ipv4Address>().is_err());
        assert!(Ipv4Address([224, 0, 0, 18]).is_multicast());
        assert!(!Ipv4Address([192, 0, 2, 1]).is_multicast());
        assert!(Ipv4Address::BROADCAST.is_broadcast());
        assert!(Ipv4Address::UNSPECIFIED.is_unspecified());
        let std: Ipv4Addr = a.into();
        assert_eq!(Ipv4Address::from(std), a);
    }

    #[test]
    fn ipv6_text_is_rfc5952() {
        let cases = [
            ("2001:0db8:0000:0000:0000:0000:0000:0001", "2001:db8::1"),
            ("2001:db8:0:1:0:0:0:1", "2001:db8:0:1::1"),
            ("2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"),
            ("2001:DB8::AB", "2001:db8::ab"),
            ("::", "::"),
            ("::1", "::1"),
            ("fe80::0:0:1", "fe80::1"),
        ];
        for (input, text) in cases {
            let a: Ipv6Address = input.parse().unwrap();
            assert_eq!(a.to_string(), text, "{input}");
            assert_eq!(text.parse::<Ipv6Address>().unwrap(), a);
        }
        assert!("2001:db8::1::2".parse::<Ipv6Address>().is_err());
        assert!("2001:db8:1".parse::<Ipv6Address>().is_err());
        let ll: Ipv6Address = "fe80::1".parse().unwrap();
        assert!(ll.is_link_local() && !ll.is_multicast());
        assert!("ff02::1".parse::<Ipv6Address>().unwrap().is_multicast());
        assert_eq!(Ipv6Address::LOOPBACK.to_string(), "::1");
        assert!(Ipv6Address::UNSPECIFIED.is_unspecified());
    }

    #[test]
    fn ip_address_either_family() {
        let a: IpAddress = "10.1.2.3".parse().unwrap();
        assert_eq!(a, IpAddress::V4(Ipv4Address([10, 1, 2, 3])));
        let b: IpAddress = "2001:db8::2".parse().unwrap();
        assert!(matches!(b, IpAddress::V6(_)));
        assert_eq!(b.to_string(), "2001:db8::2");
        assert_eq!(IpAddress::from(IpAddr::from(b)), b);
        assert!("nope".parse::<IpAddress>().is_err());
    }

    #[test]
    fn checksum_rfc1071_example() {
        // The worked example of RFC 1071 section 3: sum 0xddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(checksum::fold(checksum::add(0, &data)), 0xddf2);
        assert_eq!(checksum::of(&data), !0xddf2);
        // Odd length pads with zero.
        assert_eq!(
            checksum::fold(checksum::add(0, &[0x12, 0x34, 0x56])),
            0x1234 + 0x5600
        );
        // A buffer holding its own checksum sums to 0xffff.
        let mut with = data.to_vec();
        with.extend_from_slice(&checksum::of(&data).to_be_bytes());
        assert_eq!(checksum::fold(checksum::add(0, &with)), 0xffff);
    }

    #[test]
    fn pseudo_mismatched_families() {
        let v4 = IpAddress::V4(Ipv4Address([1, 2, 3, 4]));
        let v6 = IpAddress::V6(Ipv6Address::LOOPBACK);
        assert_eq!(checksum::pseudo(v4, v6, IpProtocol::Udp, 8), None);
        assert_eq!(checksum::pseudo(v4, v4, IpProtocol::Udp, 70_000), None);
        assert!(checksum::pseudo(v6, v6, IpProtocol::Udp, 70_000).is_some());
    }

    proptest! {
        #[test]
        fn checksum_never_overflows(data in proptest::collection::vec(any::<u8>(), 0..70_000)) {
            // A long buffer of 0xff must not overflow the accumulator either.
            let s = checksum::add(0, &data);
            let mut with = data.clone();
            if with.len() % 2 == 1 {
                with.push(0);
            }
            with.extend_from_slice(&(!checksum::fold(s)).to_be_bytes());
            prop_assert_eq!(checksum::fold(checksum::add(0, &with)), 0xffff);
        }

        #[test]
        fn text_round_trips(v4 in any::<[u8; 4]>(), v6 in any::<[u8; 16]>()) {
            let a = Ipv4Address(v4);
            prop_assert_eq!(a.to_string().parse::<Ipv4Address>(), Ok(a));
            let b = Ipv6Address(v6);
            prop_assert_eq!(b.to_string().parse::<Ipv6Address>(), Ok(b));
        }
    }
}
