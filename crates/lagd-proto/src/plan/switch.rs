//! The switch's side of the bond: how the partner switch might spread the return traffic.
//!
//! Host and switch hash independently: the host's `xmit_hash_policy` decides the links frames
//! leave on, the switch's port-channel load-balance setting decides the links they come back
//! on. Switch hashes are vendor secrets (Broadcom's RTAG7, Cisco's and Juniper's are not
//! published and mix in seeds and CRCs), so the planner cannot predict a given switch
//! bit-exactly. It models each of the usual load-balance options as a **generic XOR fold**
//! over the fields that option names, which is the textbook scheme and what several
//! switches document for their simple modes. Treat the result as "how much variety does this
//! field give", not as the switch's exact link choice.
//!
//! The fold: take the fields as big-endian 32-bit words (a MAC as its first four bytes and its
//! last two; an IPv4 address as one word; an IPv6 address as four; the ports as
//! `source << 16 | destination`), XOR the words, then `h ^= h >> 16; h ^= h >> 8` and keep the
//! low byte; the link is that byte modulo the number of links. Frames without the field the
//! option names (non-IP frames under an IP option) fall back to source and destination MAC, as
//! switches do; frames without ports use the addresses alone under `src-dst-port`.
//!
//! # Return traffic
//! The switch hashes the frames it sends *to* the bond: the replies to the captured traffic,
//! whose source and destination (MACs, addresses, ports) are the captured frames' swapped.
//! The planner hashes each flow's reversed key ([`SwitchHash::hash_return`],
//! [`FlowKey::reversed`]), so the one-sided options come out the right way round: under
//! `src-ip` the return path spreads by the captured traffic's *destination* addresses (a
//! client talking to many servers spreads, many clients of one server do not), and under
//! `dst-mac` by the captured source MACs. The symmetric options (`src-dst-*`) give the same
//! link both ways. Like the host's policies, the model takes the input to be what the bond
//! sends, and weighs each reply flow with its captured flow's packets and bytes (a capture of
//! one direction does not show the replies' volume).

use core::fmt;
use core::str::FromStr;
use std::net::IpAddr;

use super::flow::FlowKey;

/// A switch load-balance option, modelled as a generic XOR fold (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SwitchHash {
    /// Source MAC.
    SrcMac,
    /// Destination MAC.
    DstMac,
    /// Source and destination MAC.
    SrcDstMac,
    /// Source IP.
    SrcIp,
    /// Destination IP.
    DstIp,
    /// Source and destination IP.
    SrcDstIp,
    /// Source and destination IP and TCP/UDP ports.
    SrcDstPort,
}

impl SwitchHash {
    /// Every option, in the order switch CLIs list them.
    pub const ALL: [Self; 7] = [
        Self::SrcMac,
        Self::DstMac,
        Self::SrcDstMac,
        Self::SrcIp,
        Self::DstIp,
        Self::SrcDstIp,
        Self::SrcDstPort,
    ];

    /// The option's name (`src-dst-ip`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            Self::SrcMac => "src-mac",
            Self::DstMac => "dst-mac",
            Self::SrcDstMac => "src-dst-mac",
            Self::SrcIp => "src-ip",
            Self::DstIp => "dst-ip",
            Self::SrcDstIp => "src-dst-ip",
            Self::SrcDstPort => "src-dst-port",
        }
    }

    /// The 8-bit folded hash of a flow (the link is this modulo the link count).
    pub fn hash(self, key: &FlowKey) -> u32 {
        let mac = |m: [u8; 6]| {
            u32::from_be_bytes([m[0], m[1], m[2], m[3]])
                ^ u32::from(u16::from_be_bytes([m[4], m[5]]))
        };
        let src_mac = mac(key.src_mac().0);
        let dst_mac = mac(key.dst_mac().0);
        let ip = |a: IpAddr| match a {
            IpAddr::V4(v4) => u32::from(v4),
            IpAddr::V6(v6) => v6
                .octets()
                .chunks(4)
                .fold(0, |h, c| h ^ u32::from_be_bytes([c[0], c[1], c[2], c[3]])),
        };
        let addrs = key.addrs().map(|(s, d)| (ip(s), ip(d)));
        let h = match (self, addrs) {
            (Self::SrcMac, _) => src_mac,
            (Self::DstMac, _) => dst_mac,
            (Self::SrcIp, Some((s, _))) => s,
            (Self::DstIp, Some((_, d))) => d,
            (Self::SrcDstIp, Some((s, d))) => s ^ d,
            (Self::SrcDstPort, Some((s, d))) => {
                let ports = key
                    .ports()
                    .map_or(0, |(sp, dp)| u32::from(sp) << 16 | u32::from(dp));
                s ^ d ^ ports
            }
            (
                Self::SrcDstMac | Self::SrcIp | Self::DstIp | Self::SrcDstIp | Self::SrcDstPort,
                _,
            ) => src_mac ^ dst_mac,
        };
        let h = h ^ (h >> 16);
        (h ^ (h >> 8)) & 0xff
    }
}

impl SwitchHash {
    /// The 8-bit folded hash of the flow's return traffic, the frames the switch sends to the
    /// bond: [`SwitchHash::hash`] of `key` with source and destination swapped.
    pub fn hash_return(self, key: &FlowKey) -> u32 {
        self.hash(&key.reversed())
    }
}

impl fmt::Display for SwitchHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown switch hash name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownSwitchHash(pub String);

impl fmt::Display for UnknownSwitchHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown switch hash '{}' (expected one of:", self.0)?;
        for h in SwitchHash::ALL {
            write!(f, " {h}")?;
        }
        f.write_str(")")
    }
}

impl std::error::Error for UnknownSwitchHash {}

impl FromStr for SwitchHash {
    type Err = UnknownSwitchHash;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|h| h.name() == s)
            .ok_or_else(|| UnknownSwitchHash(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::flow::{extract, parse_flow_spec};

    fn key(spec: &str) -> FlowKey {
        let mut f = Vec::new();
        parse_flow_spec(spec).unwrap().write_frame(&mut f);
        extract(&f).key
    }

    #[test]
    fn reversed_keys_are_the_replies_keys() {
        for (fwd, back) in [
            (
                "tcp 10.0.0.1:1000 > 10.0.0.2:80 src-mac 02:00:00:00:00:01 dst-mac 02:00:00:00:00:02",
                "tcp 10.0.0.2:80 > 10.0.0.1:1000 src-mac 02:00:00:00:00:02 dst-mac 02:00:00:00:00:01",
            ),
            (
                "udp [2001:db8::1]:5353 > [2001:db8:1::9]:53 vlan 7 src-mac 02:00:00:00:00:0a dst-mac 0e:00:00:00:00:0b",
                "udp [2001:db8:1::9]:53 > [2001:db8::1]:5353 vlan 7 src-mac 0e:00:00:00:00:0b dst-mac 02:00:00:00:00:0a",
            ),
            // ICMP: the addresses swap, the type and identifier stay.
            (
                "icmp 10.0.0.1 > 10.0.0.9 id 7 src-mac 02:00:00:00:00:01 dst-mac 02:00:00:00:00:09",
                "icmp 10.0.0.9 > 10.0.0.1 id 7 src-mac 02:00:00:00:00:09 dst-mac 02:00:00:00:00:01",
            ),
        ] {
            let (k, r) = (key(fwd), key(back));
            assert_eq!(k.reversed(), r, "{fwd}");
            assert_eq!(r.reversed(), k, "{back}");
            for h in SwitchHash::ALL {
                assert_eq!(h.hash_return(&k), h.hash(&r), "{h}: {fwd}");
            }
        }
        // The one-sided options read the other end on the way back.
        let k = key("tcp 10.0.0.1:1000 > 10.0.0.2:80");
        assert_eq!(
            SwitchHash::SrcIp.hash_return(&k),
            SwitchHash::DstIp.hash(&k)
        );
        assert_eq!(
            SwitchHash::DstIp.hash_return(&k),
            SwitchHash::SrcIp.hash(&k)
        );
        assert_eq!(
            SwitchHash::SrcDstIp.hash_return(&k),
            SwitchHash::SrcDstIp.hash(&k)
        );
    }

    #[test]
    fn folds_the_named_fields_only() {
        let a = key("tcp 10.0.0.1:1000 > 10.0.0.2:80");
        let b = key("tcp 10.0.0.1:1001 > 10.0.0.2:80");
        let c = key("tcp 10.0.0.3:1000 > 10.0.0.2:80");
        // Same MACs (the spec's defaults): MAC options cannot tell these apart.
        for h in [
            SwitchHash::SrcMac,
            SwitchHash::DstMac,
            SwitchHash::SrcDstMac,
        ] {
            assert_eq!(h.hash(&a), h.hash(&b));
            assert_eq!(h.hash(&a), h.hash(&c));
        }
        // Ports matter only to src-dst-port; the source IP to the source options.
        assert_eq!(SwitchHash::SrcDstIp.hash(&a), SwitchHash::SrcDstIp.hash(&b));
        assert_ne!(
            SwitchHash::SrcDstPort.hash(&a),
            SwitchHash::SrcDstPort.hash(&b)
        );
        assert_ne!(SwitchHash::SrcIp.hash(&a), SwitchHash::SrcIp.hash(&c));
        assert_eq!(SwitchHash::DstIp.hash(&a), SwitchHash::DstIp.hash(&c));
        // Worked by hand: 10.0.0.1 ^ 10.0.0.2 = 0x00000003; fold keeps 0x03.
        assert_eq!(SwitchHash::SrcDstIp.hash(&a), 3);
        // 0x03 ^ (1000 << 16 | 80) = 0x03e80053 -> ^>>16: 0x03e8_03bb -> ^>>8: low byte 0xbb^0x03.
        assert_eq!(SwitchHash::SrcDstPort.hash(&a), 0xbb ^ 0x03);
        for h in SwitchHash::ALL {
            assert_eq!(h.name().parse::<SwitchHash>(), Ok(h));
            assert!(h.hash(&a) <= 0xff);
        }
        assert!("src-dst-vlan".parse::<SwitchHash>().is_err());
    }
}
