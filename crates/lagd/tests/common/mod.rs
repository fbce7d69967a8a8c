//! Helpers shared by the network-namespace tests.

use std::net::Ipv4Addr;

/// A UDP/IPv4 frame with the flow's addresses and ports (MACs do not matter to layer3+4).
pub(crate) fn udp_frame(src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16) -> Vec<u8> {
    let mut f = vec![0u8; 12];
    f.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 28, 0, 0, 0x40, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&dst.octets());
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&[0, 8, 0, 0]);
    f
}
