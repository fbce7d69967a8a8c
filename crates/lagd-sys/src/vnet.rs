//! The `virtio_net_hdr` that precedes every frame on a TAP opened with `IFF_VNET_HDR` and on an
//! `AF_PACKET` socket with `PACKET_VNET_HDR`.
//!
//! lagd uses the 10-byte form (no `num_buffers`) on both sides, so a frame read from the TAP can
//! be sent on a member socket byte for byte, header included, and the other way round.
//!
//! Byte order: the kernel reads these fields in the legacy virtio byte order, which is the host's
//! on both sides (TAP without `TUNSETVNETLE`/`TUNSETVNETBE`, and `AF_PACKET` always), so
//! [`VirtioNetHdr`] uses native byte order. On the x86 and arm hosts lagd targets that is little
//! endian.
//!
//! This module is pure: no syscalls.

/// The 10-byte `struct virtio_net_hdr`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct VirtioNetHdr {
    /// `VIRTIO_NET_HDR_F_*` bits ([`Self::F_NEEDS_CSUM`], [`Self::F_DATA_VALID`]).
    pub flags: u8,
    /// `VIRTIO_NET_HDR_GSO_*` ([`Self::GSO_NONE`], [`Self::GSO_TCPV4`], ...), possibly with
    /// [`Self::GSO_ECN`] or-ed in.
    pub gso_type: u8,
    /// Length of the headers that every segment repeats (Ethernet + IP + L4), a hint.
    pub hdr_len: u16,
    /// Payload bytes per segment (the MSS for TCP) when `gso_type` is not `GSO_NONE`.
    pub gso_size: u16,
    /// Offset from the start of the frame where checksumming starts, with `F_NEEDS_CSUM`.
    pub csum_start: u16,
    /// Offset from `csum_start` where the checksum is stored, with `F_NEEDS_CSUM`.
    pub csum_offset: u16,
}

impl VirtioNetHdr {
    /// Size of the header on the wire between lagd and the kernel.
    pub const LEN: usize = 10;

    /// The checksum from `csum_start` on must still be computed (`CHECKSUM_PARTIAL`).
    pub const F_NEEDS_CSUM: u8 = 1;
    /// The checksum has been verified already.
    pub const F_DATA_VALID: u8 = 2;

    /// Not a GSO frame.
    pub const GSO_NONE: u8 = 0;
    /// TCP over IPv4 segmentation.
    pub const GSO_TCPV4: u8 = 1;
    /// UDP fragmentation offload (UFO).
    pub const GSO_UDP: u8 = 3;
    /// TCP over IPv6 segmentation.
    pub const GSO_TCPV6: u8 = 4;
    /// UDP segmentation (USO, `SKB_GSO_UDP_L4`).
    pub const GSO_UDP_L4: u8 = 5;
    /// Flag or-ed into `gso_type`: the TCP segments carry ECN CWR.
    pub const GSO_ECN: u8 = 0x80;

    /// Parses the first [`Self::LEN`] bytes of `bytes`; `None` if there are fewer.
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        let b: &[u8; Self::LEN] = bytes.get(..Self::LEN)?.try_into().ok()?;
        let u16_at = |i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
        Some(Self {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u16_at(2),
            gso_size: u16_at(4),
            csum_start: u16_at(6),
            csum_offset: u16_at(8),
        })
    }

    /// The header as the kernel expects it.
    pub fn to_bytes(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_ne_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_ne_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_ne_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_ne_bytes());
        b
    }

    /// Writes the header into the first [`Self::LEN`] bytes of `buf`; `None` if it is shorter.
    pub fn write_to(&self, buf: &mut [u8]) -> Option<()> {
        buf.get_mut(..Self::LEN)?.copy_from_slice(&self.to_bytes());
        Some(())
    }

    /// `gso_type` without the ECN flag.
    pub fn gso_kind(&self) -> u8 {
        self.gso_type & !Self::GSO_ECN
    }

    /// Whether the frame behind this header is a GSO super-frame.
    pub fn is_gso(&self) -> bool {
        self.gso_kind() != Self::GSO_NONE
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn round_trip_and_layout() {
        let hdr = VirtioNetHdr {
            flags: VirtioNetHdr::F_NEEDS_CSUM,
            gso_type: VirtioNetHdr::GSO_TCPV4 | VirtioNetHdr::GSO_ECN,
            hdr_len: 66,
            gso_size: 1448,
            csum_start: 34,
            csum_offset: 16,
        };
        let bytes = hdr.to_bytes();
        assert_eq!(bytes[0], 1);
        assert_eq!(bytes[1], 0x81);
        assert_eq!(&bytes[4..6], &1448u16.to_ne_bytes());
        assert_eq!(VirtioNetHdr::from_bytes(&bytes), Some(hdr));
        assert!(hdr.is_gso());
        assert_eq!(hdr.gso_kind(), VirtioNetHdr::GSO_TCPV4);

        let mut buf = [0xffu8; 12];
        assert_eq!(hdr.write_to(&mut buf), Some(()));
        assert_eq!(&buf[..10], &bytes);
        assert_eq!(&buf[10..], &[0xff, 0xff]);
        assert_eq!(VirtioNetHdr::from_bytes(&buf[..9]), None);
        assert_eq!(hdr.write_to(&mut [0u8; 9]), None);
        assert!(!VirtioNetHdr::default().is_gso());
    }
}
