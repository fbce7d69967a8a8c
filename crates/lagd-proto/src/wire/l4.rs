//! Minimal transport-layer views: what transmit hashing and the planner read, and what the
//! lab's frame generators write. TCP, UDP, SCTP (common header only) and ICMP (v4 and v6).
//!
//! TCP and UDP checksums cover a pseudo-header taken from the IP header; the helpers here take
//! the addresses as [`IpAddress`]es so one call serves both families.

use core::ops::{BitAnd, BitOr, BitOrAssign};

use super::ip::{IpAddress, IpProtocol, Ipv4Address, Ipv6Address, checksum};
use super::view_constructors;
use super::{Error, Result, be16, be32};

/// The checksum of an upper-layer message over the IPv4 pseudo-header (RFC 768/793): the value
/// to store after zeroing the checksum field in `segment`, or 0 when `segment` already carries
/// a correct checksum.
///
/// `segment` is the whole upper-layer message (header and payload); lengths past 65535 are
/// truncated in the pseudo-header, as they cannot occur in IPv4.
pub fn checksum_ipv4_pseudo(
    src: Ipv4Address,
    dst: Ipv4Address,
    proto: IpProtocol,
    segment: &[u8],
) -> u16 {
    let len = segment.len() as u16;
    !checksum::fold(checksum::add(
        checksum::pseudo_ipv4(src, dst, proto, len),
        segment,
    ))
}

/// The checksum of an upper-layer message over the IPv6 pseudo-header (RFC 8200 section 8.1);
/// see [`checksum_ipv4_pseudo`].
pub fn checksum_ipv6_pseudo(
    src: Ipv6Address,
    dst: Ipv6Address,
    proto: IpProtocol,
    segment: &[u8],
) -> u16 {
    let len = u32::try_from(segment.len()).unwrap_or(u32::MAX);
    !checksum::fold(checksum::add(
        checksum::pseudo_ipv6(src, dst, proto, len),
        segment,
    ))
}

/// The pseudo-header checksum for either family; `None` if `src` and `dst` differ in family.
pub fn checksum_pseudo(
    src: IpAddress,
    dst: IpAddress,
    proto: IpProtocol,
    segment: &[u8],
) -> Option<u16> {
    match (src, dst) {
        (IpAddress::V4(s), IpAddress::V4(d)) => Some(checksum_ipv4_pseudo(s, d, proto, segment)),
        (IpAddress::V6(s), IpAddress::V6(d)) => Some(checksum_ipv6_pseudo(s, d, proto, segment)),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// TCP

mod tcp_field {
    use core::ops::Range;
    pub(crate) const SRC_PORT: Range<usize> = 0..2;
    pub(crate) const DST_PORT: Range<usize> = 2..4;
    pub(crate) const SEQ_NUM: Range<usize> = 4..8;
    pub(crate) const ACK_NUM: Range<usize> = 8..12;
    pub(crate) const DATA_OFFSET: usize = 12;
    pub(crate) const FLAGS: usize = 13;
    pub(crate) const WINDOW: Range<usize> = 14..16;
    pub(crate) const CHECKSUM: Range<usize> = 16..18;
    pub(crate) const URGENT: Range<usize> = 18..20;
    pub(crate) const OPTIONS: usize = 20;
}

/// Length of a TCP header without options.
pub const TCP_HEADER_LEN: usize = tcp_field::OPTIONS;

/// The eight TCP flag bits (byte 13 of the header).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct TcpFlags(pub u8);

impl TcpFlags {
    /// FIN: no more data from the sender.
    pub const FIN: Self = Self(0x01);
    /// SYN: synchronise sequence numbers.
    pub const SYN: Self = Self(0x02);
    /// RST: reset the connection.
    pub const RST: Self = Self(0x04);
    /// PSH: push.
    pub const PSH: Self = Self(0x08);
    /// ACK: the acknowledgment number is significant.
    pub const ACK: Self = Self(0x10);
    /// URG: the urgent pointer is significant.
    pub const URG: Self = Self(0x20);
    /// ECE: ECN echo.
    pub const ECE: Self = Self(0x40);
    /// CWR: congestion window reduced.
    pub const CWR: Self = Self(0x80);

    /// No flag set.
    pub const fn empty() -> Self {
        Self(0)
    }

    /// The raw bits.
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// Whether every flag in `other` is set in `self`.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether no flag is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl BitOr for TcpFlags {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

impl BitOrAssign for TcpFlags {
    fn bitor_assign(&mut self, rhs: Self) {
        self.0 |= rhs.0;
    }
}

impl BitAnd for TcpFlags {
    type Output = Self;
    fn bitand(self, rhs: Self) -> Self {
        Self(self.0 & rhs.0)
    }
}

/// A view over a TCP segment.
#[derive(Debug, Clone)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

view_constructors!(TcpPacket);

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// `Truncated` if the buffer is shorter than 20 bytes or than the data offset says;
    /// `Malformed` if the data offset is below 5 words.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < TCP_HEADER_LEN {
            return Err(Error::Truncated);
        }
        let header_len = self.header_len();
        if header_len < TCP_HEADER_LEN {
            return Err(Error::Malformed);
        }
        if header_len > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), tcp_field::SRC_PORT.start)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), tcp_field::DST_PORT.start)
    }

    /// Sequence number.
    pub fn seq_number(&self) -> u32 {
        be32(self.buffer.as_ref(), tcp_field::SEQ_NUM.start)
    }

    /// Acknowledgment number.
    pub fn ack_number(&self) -> u32 {
        be32(self.buffer.as_ref(), tcp_field::ACK_NUM.start)
    }

    /// Header length in bytes, options included (the data offset times 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[tcp_field::DATA_OFFSET] >> 4) * 4
    }

    /// The flag bits.
    pub fn flags(&self) -> TcpFlags {
        TcpFlags(self.buffer.as_ref()[tcp_field::FLAGS])
    }

    /// The SYN flag.
    pub fn syn(&self) -> bool {
        self.flags().contains(TcpFlags::SYN)
    }

    /// The ACK flag.
    pub fn ack(&self) -> bool {
        self.flags().contains(TcpFlags::ACK)
    }

    /// The FIN flag.
    pub fn fin(&self) -> bool {
        self.flags().contains(TcpFlags::FIN)
    }

    /// The RST flag.
    pub fn rst(&self) -> bool {
        self.flags().contains(TcpFlags::RST)
    }

    /// The PSH flag.
    pub fn psh(&self) -> bool {
        self.flags().contains(TcpFlags::PSH)
    }

    /// Window size (unscaled).
    pub fn window(&self) -> u16 {
        be16(self.buffer.as_ref(), tcp_field::WINDOW.start)
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), tcp_field::CHECKSUM.start)
    }

    /// Urgent pointer.
    pub fn urgent_ptr(&self) -> u16 {
        be16(self.buffer.as_ref(), tcp_field::URGENT.start)
    }

    /// The options (empty for a 20-byte header). Never panics.
    pub fn options(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        if b.len() < TCP_HEADER_LEN {
            return &[];
        }
        let end = self.header_len().min(b.len());
        b.get(tcp_field::OPTIONS..end).unwrap_or(&[])
    }

    /// Everything after the header. Never panics.
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        if b.len() < TCP_HEADER_LEN {
            return &[];
        }
        let start = self.header_len().clamp(TCP_HEADER_LEN, b.len());
        b.get(start..).unwrap_or(&[])
    }

    /// Whether the checksum is right, the buffer being the whole segment and `src`/`dst` the
    /// addresses of the IP header carrying it (false if their families differ).
    pub fn verify_checksum(&self, src: IpAddress, dst: IpAddress) -> bool {
        checksum_pseudo(src, dst, IpProtocol::Tcp, self.buffer.as_ref()) == Some(0)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    /// Sets the source port.
    pub fn set_src_port(&mut self, v: u16) {
        self.buffer.as_mut()[tcp_field::SRC_PORT].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, v: u16) {
        self.buffer.as_mut()[tcp_field::DST_PORT].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the sequence number.
    pub fn set_seq_number(&mut self, v: u32) {
        self.buffer.as_mut()[tcp_field::SEQ_NUM].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the acknowledgment number.
    pub fn set_ack_number(&mut self, v: u32) {
        self.buffer.as_mut()[tcp_field::ACK_NUM].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the header length in bytes (rounded down to words, at most 60); clears the
    /// reserved bits.
    pub fn set_header_len(&mut self, len: usize) {
        self.buffer.as_mut()[tcp_field::DATA_OFFSET] = ((len / 4).min(15) as u8) << 4;
    }

    /// Sets the flag bits.
    pub fn set_flags(&mut self, f: TcpFlags) {
        self.buffer.as_mut()[tcp_field::FLAGS] = f.0;
    }

    /// Sets the window size.
    pub fn set_window(&mut self, v: u16) {
        self.buffer.as_mut()[tcp_field::WINDOW].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        self.buffer.as_mut()[tcp_field::CHECKSUM].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the urgent pointer.
    pub fn set_urgent_ptr(&mut self, v: u16) {
        self.buffer.as_mut()[tcp_field::URGENT].copy_from_slice(&v.to_be_bytes());
    }

    /// Mutable access to everything after the header.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let len = self.buffer.as_ref().len();
        if len < TCP_HEADER_LEN {
            return &mut [];
        }
        let start = self.header_len().clamp(TCP_HEADER_LEN, len);
        self.buffer.as_mut().get_mut(start..).unwrap_or(&mut [])
    }

    /// Computes and stores the checksum over the whole buffer (see
    /// [`verify_checksum`](TcpPacket::verify_checksum)). Leaves 0 if the families differ.
    pub fn fill_checksum(&mut self, src: IpAddress, dst: IpAddress) {
        self.set_checksum(0);
        let c = checksum_pseudo(src, dst, IpProtocol::Tcp, self.buffer.as_ref());
        self.set_checksum(c.unwrap_or(0));
    }
}

/// The TCP header fields hashing and the generators care about (no options).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TcpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq_number: u32,
    /// Acknowledgment number.
    pub ack_number: u32,
    /// Flags.
    pub flags: TcpFlags,
    /// Window size.
    pub window: u16,
}

impl TcpRepr {
    /// Parses a segment, checking its length; options and payload are ignored.
    pub fn parse<T: AsRef<[u8]>>(packet: &TcpPacket<T>) -> Result<Self> {
        packet.check_len()?;
        Ok(Self {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            seq_number: packet.seq_number(),
            ack_number: packet.ack_number(),
            flags: packet.flags(),
            window: packet.window(),
        })
    }

    /// Length of the emitted header (20).
    pub const fn buffer_len(&self) -> usize {
        TCP_HEADER_LEN
    }

    /// Writes a 20-byte header with a zero checksum and urgent pointer; call
    /// [`TcpPacket::fill_checksum`] once the payload is in place.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut TcpPacket<T>) {
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_seq_number(self.seq_number);
        packet.set_ack_number(self.ack_number);
        packet.set_header_len(TCP_HEADER_LEN);
        packet.set_flags(self.flags);
        packet.set_window(self.window);
        packet.set_checksum(0);
        packet.set_urgent_ptr(0);
    }
}

// ---------------------------------------------------------------------------------------------
// UDP

mod udp_field {
    use core::ops::Range;
    pub(crate) const SRC_PORT: Range<usize> = 0..2;
    pub(crate) const DST_PORT: Range<usize> = 2..4;
    pub(crate) const LENGTH: Range<usize> = 4..6;
    pub(crate) const CHECKSUM: Range<usize> = 6..8;
    pub(crate) const PAYLOAD: usize = 8;
}

/// Length of the UDP header.
pub const UDP_HEADER_LEN: usize = udp_field::PAYLOAD;

/// A view over a UDP datagram.
#[derive(Debug, Clone)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

view_constructors!(UdpPacket);

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// `Truncated` if the buffer is shorter than 8 bytes or than the length field;
    /// `Malformed` if the length field is below 8.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < UDP_HEADER_LEN {
            return Err(Error::Truncated);
        }
        let field_len = usize::from(self.len());
        if field_len < UDP_HEADER_LEN {
            return Err(Error::Malformed);
        }
        if field_len > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), udp_field::SRC_PORT.start)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), udp_field::DST_PORT.start)
    }

    /// The length field: header plus payload.
    pub fn len(&self) -> u16 {
        be16(self.buffer.as_ref(), udp_field::LENGTH.start)
    }

    /// Whether the length field announces no payload.
    pub fn is_empty(&self) -> bool {
        usize::from(self.len()) <= UDP_HEADER_LEN
    }

    /// Checksum field (0: none was computed, legal over IPv4 only).
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), udp_field::CHECKSUM.start)
    }

    fn end(&self) -> usize {
        let len = self.buffer.as_ref().len();
        if len < UDP_HEADER_LEN {
            return len;
        }
        let field_len = usize::from(self.len());
        if (UDP_HEADER_LEN..=len).contains(&field_len) {
            field_len
        } else {
            len
        }
    }

    /// The payload, up to the length field (or the end of the buffer if that is not sane).
    /// Never panics.
    pub fn payload(&self) -> &[u8] {
        self.buffer
            .as_ref()
            .get(UDP_HEADER_LEN..self.end())
            .unwrap_or(&[])
    }

    /// Whether the checksum is right over the datagram (up to the length field) and the
    /// pseudo-header of `src`/`dst`. A zero checksum over IPv4 means "none" and passes.
    pub fn verify_checksum(&self, src: IpAddress, dst: IpAddress) -> bool {
        if self.checksum() == 0 && matches!(src, IpAddress::V4(_)) {
            return true;
        }
        let b = self.buffer.as_ref();
        checksum_pseudo(src, dst, IpProtocol::Udp, &b[..self.end()]) == Some(0)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    /// Sets the source port.
    pub fn set_src_port(&mut self, v: u16) {
        self.buffer.as_mut()[udp_field::SRC_PORT].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, v: u16) {
        self.buffer.as_mut()[udp_field::DST_PORT].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the length field.
    pub fn set_len(&mut self, v: u16) {
        self.buffer.as_mut()[udp_field::LENGTH].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        self.buffer.as_mut()[udp_field::CHECKSUM].copy_from_slice(&v.to_be_bytes());
    }

    /// Mutable access to the payload (same bounds as [`payload`](UdpPacket::payload)).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = self.end();
        self.buffer
            .as_mut()
            .get_mut(UDP_HEADER_LEN..end)
            .unwrap_or(&mut [])
    }

    /// Computes and stores the checksum (a computed 0 is sent as 0xffff). Leaves 0 if the
    /// families differ.
    pub fn fill_checksum(&mut self, src: IpAddress, dst: IpAddress) {
        self.set_checksum(0);
        let end = self.end();
        let c = checksum_pseudo(src, dst, IpProtocol::Udp, &self.buffer.as_ref()[..end]);
        self.set_checksum(match c {
            Some(0) => 0xffff,
            Some(c) => c,
            None => 0,
        });
    }
}

/// A UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Payload length in bytes (at most 65527).
    pub payload_len: usize,
}

impl UdpRepr {
    /// Parses a datagram, checking its length.
    pub fn parse<T: AsRef<[u8]>>(packet: &UdpPacket<T>) -> Result<Self> {
        packet.check_len()?;
        Ok(Self {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            payload_len: usize::from(packet.len()) - UDP_HEADER_LEN,
        })
    }

    /// Length of the header (8).
    pub const fn buffer_len(&self) -> usize {
        UDP_HEADER_LEN
    }

    /// Writes the header with a zero checksum (the length saturates at 65535 for an illegal
    /// Repr); call [`UdpPacket::fill_checksum`] once the payload is in place.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut UdpPacket<T>) {
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        let len = u16::try_from(UDP_HEADER_LEN + self.payload_len).unwrap_or(u16::MAX);
        packet.set_len(len);
        packet.set_checksum(0);
    }
}

// ---------------------------------------------------------------------------------------------
// SCTP

mod sctp_field {
    use core::ops::Range;
    pub(crate) const SRC_PORT: Range<usize> = 0..2;
    pub(crate) const DST_PORT: Range<usize> = 2..4;
    pub(crate) const VERIFICATION_TAG: Range<usize> = 4..8;
    pub(crate) const CHECKSUM: Range<usize> = 8..12;
    pub(crate) const CHUNKS: usize = 12;
}

/// Length of the SCTP common header.
pub const SCTP_HEADER_LEN: usize = sctp_field::CHUNKS;

/// A view over an SCTP packet's common header (RFC 9260 section 3.1).
#[derive(Debug, Clone)]
pub struct SctpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

view_constructors!(SctpPacket);

impl<T: AsRef<[u8]>> SctpPacket<T> {
    /// `Truncated` if the buffer is shorter than the 12-byte common header.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < SCTP_HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), sctp_field::SRC_PORT.start)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), sctp_field::DST_PORT.start)
    }

    /// Verification tag.
    pub fn verification_tag(&self) -> u32 {
        be32(self.buffer.as_ref(), sctp_field::VERIFICATION_TAG.start)
    }

    /// The CRC32c checksum field, as four big-endian bytes (not verified here).
    pub fn checksum(&self) -> u32 {
        be32(self.buffer.as_ref(), sctp_field::CHECKSUM.start)
    }

    /// The chunks after the common header. Never panics.
    pub fn chunks(&self) -> &[u8] {
        self.buffer.as_ref().get(SCTP_HEADER_LEN..).unwrap_or(&[])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> SctpPacket<T> {
    /// Sets the source port.
    pub fn set_src_port(&mut self, v: u16) {
        self.buffer.as_mut()[sctp_field::SRC_PORT].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, v: u16) {
        self.buffer.as_mut()[sctp_field::DST_PORT].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the verification tag.
    pub fn set_verification_tag(&mut self, v: u32) {
        self.buffer.as_mut()[sctp_field::VERIFICATION_TAG].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u32) {
        self.buffer.as_mut()[sctp_field::CHECKSUM].copy_from_slice(&v.to_be_bytes());
    }
}

// ---------------------------------------------------------------------------------------------
// ICMP

mod icmp_field {
    use core::ops::Range;
    pub(crate) const TYPE: usize = 0;
    pub(crate) const CODE: usize = 1;
    pub(crate) const CHECKSUM: Range<usize> = 2..4;
    pub(crate) const IDENT: Range<usize> = 4..6;
    pub(crate) const SEQ_NO: Range<usize> = 6..8;
    pub(crate) const REST: Range<usize> = 4..8;
    pub(crate) const DATA: usize = 8;
}

/// Length of the ICMP header (type, code, checksum and the 4-byte rest of header).
pub const ICMP_HEADER_LEN: usize = icmp_field::DATA;

/// Whether an ICMPv4 type is an error message quoting the packet that caused it:
/// destination unreachable (3), source quench (4), redirect (5), time exceeded (11),
/// parameter problem (12).
pub const fn icmpv4_is_error(msg_type: u8) -> bool {
    matches!(msg_type, 3 | 4 | 5 | 11 | 12)
}

/// Whether an ICMPv6 type is an error message: destination unreachable (1), packet too big
/// (2), time exceeded (3), parameter problem (4).
pub const fn icmpv6_is_error(msg_type: u8) -> bool {
    matches!(msg_type, 1..=4)
}

/// Whether a message of this type (ICMPv4 or ICMPv6: the numbers do not collide) carries an
/// identifier and sequence number: echo reply/request (0, 8; 129, 128) and ICMPv4 timestamp
/// request/reply (13, 14).
pub const fn icmp_has_id(msg_type: u8) -> bool {
    matches!(msg_type, 0 | 8 | 13 | 14 | 128 | 129)
}

/// A view over an ICMPv4 or ICMPv6 message.
#[derive(Debug, Clone)]
pub struct IcmpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

view_constructors!(IcmpPacket);

impl<T: AsRef<[u8]>> IcmpPacket<T> {
    /// `Truncated` if the buffer is shorter than the 8-byte header.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < ICMP_HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// Message type.
    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[icmp_field::TYPE]
    }

    /// Message code.
    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[icmp_field::CODE]
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), icmp_field::CHECKSUM.start)
    }

    /// The four bytes after the checksum, whatever the type.
    pub fn rest_of_header(&self) -> u32 {
        be32(self.buffer.as_ref(), icmp_field::REST.start)
    }

    /// The identifier (meaningful when [`icmp_has_id`] holds for the type).
    pub fn identifier(&self) -> u16 {
        be16(self.buffer.as_ref(), icmp_field::IDENT.start)
    }

    /// The sequence number (meaningful when [`icmp_has_id`] holds for the type).
    pub fn sequence(&self) -> u16 {
        be16(self.buffer.as_ref(), icmp_field::SEQ_NO.start)
    }

    /// Everything after the 8-byte header: for an error message, the start of the packet
    /// that caused it (often cut short, so parse it with care); for echo, its data. Never
    /// panics.
    pub fn quoted(&self) -> &[u8] {
        self.buffer.as_ref().get(icmp_field::DATA..).unwrap_or(&[])
    }

    /// Whether the ICMPv4 checksum (over the whole buffer) is right.
    pub fn verify_checksum_v4(&self) -> bool {
        checksum::fold(checksum::add(0, self.buffer.as_ref())) == 0xffff
    }

    /// Whether the ICMPv6 checksum (over the pseudo-header and the whole buffer) is right.
    pub fn verify_checksum_v6(&self, src: Ipv6Address, dst: Ipv6Address) -> bool {
        checksum_ipv6_pseudo(src, dst, IpProtocol::Icmpv6, self.buffer.as_ref()) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> IcmpPacket<T> {
    /// Sets the message type.
    pub fn set_msg_type(&mut self, v: u8) {
        self.buffer.as_mut()[icmp_field::TYPE] = v;
    }

    /// Sets the message code.
    pub fn set_code(&mut self, v: u8) {
        self.buffer.as_mut()[icmp_field::CODE] = v;
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        self.buffer.as_mut()[icmp_field::CHECKSUM].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the rest of the header.
    pub fn set_rest_of_header(&mut self, v: u32) {
        self.buffer.as_mut()[icmp_field::REST].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the identifier.
    pub fn set_identifier(&mut self, v: u16) {
        self.buffer.as_mut()[icmp_field::IDENT].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the sequence number.
    pub fn set_sequence(&mut self, v: u16) {
        self.buffer.as_mut()[icmp_field::SEQ_NO].copy_from_slice(&v.to_be_bytes());
    }

    /// Mutable access to everything after the header.
    pub fn quoted_mut(&mut self) -> &mut [u8] {
        self.buffer
            .as_mut()
            .get_mut(icmp_field::DATA..)
            .unwrap_or(&mut [])
    }

    /// Computes and stores the ICMPv4 checksum over the whole buffer.
    pub fn fill_checksum_v4(&mut self) {
        self.set_checksum(0);
        let c = checksum::of(self.buffer.as_ref());
        self.set_checksum(c);
    }

    /// Computes and stores the ICMPv6 checksum over the pseudo-header and the whole buffer.
    pub fn fill_checksum_v6(&mut self, src: Ipv6Address, dst: Ipv6Address) {
        self.set_checksum(0);
        let c = checksum_ipv6_pseudo(src, dst, IpProtocol::Icmpv6, self.buffer.as_ref());
        self.set_checksum(c);
    }
}

/// An ICMP header: type, code and the 4-byte rest of header (identifier and sequence number
/// for echo; unused, MTU or pointer for errors).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IcmpRepr {
    /// Message type.
    pub msg_type: u8,
    /// Message code.
    pub code: u8,
    /// The four bytes after the checksum.
    pub rest_of_header: u32,
}

impl IcmpRepr {
    /// An echo request or reply header (`msg_type` 8/0 for ICMPv4, 128/129 for ICMPv6).
    pub const fn echo(msg_type: u8, identifier: u16, sequence: u16) -> Self {
        Self {
            msg_type,
            code: 0,
            rest_of_header: ((identifier as u32) << 16) | sequence as u32,
        }
    }

    /// Parses a message, checking its length; the checksum is not verified.
    pub fn parse<T: AsRef<[u8]>>(packet: &IcmpPacket<T>) -> Result<Self> {
        packet.check_len()?;
        Ok(Self {
            msg_type: packet.msg_type(),
            code: packet.code(),
            rest_of_header: packet.rest_of_header(),
        })
    }

    /// Length of the header (8).
    pub const fn buffer_len(&self) -> usize {
        ICMP_HEADER_LEN
    }

    /// Writes the header with a zero checksum; call [`IcmpPacket::fill_checksum_v4`] or
    /// [`IcmpPacket::fill_checksum_v6`] once the data is in place.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut IcmpPacket<T>) {
        packet.set_msg_type(self.msg_type);
        packet.set_code(self.code);
        packet.set_checksum(0);
        packet.set_rest_of_header(self.rest_of_header);
    }
}

#[cfg(test)]
mod test {
    use super::super::ipv4::Ipv4Packet;
    use super::super::ipv6::Ipv6Packet;
    use super::*;
    use proptest::prelude::*;

    /// A Linux IPv4/TCP SYN, 192.168.0.104:47330 -> 192.168.0.1:80, with MSS 1460,
    /// SACK-permitted, timestamps and window scale 7 (checksums valid).
    const TCP_SYN: [u8; 60] = [
        0x45, 0x00, 0x00, 0x3c, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x06, 0x9c, 0xbc, 0xc0, 0xa8, 0x00,
        0x68, 0xc0, 0xa8, 0x00, 0x01, // IPv4
        0xb8, 0xe2, 0x00, 0x50, 0x3a, 0x4f, 0x1b, 0x2c, 0x00, 0x00, 0x00, 0x00, 0xa0, 0x02, 0xfa,
        0xf0, 0xc4, 0x67, 0x00, 0x00, // TCP
        0x02, 0x04, 0x05, 0xb4, 0x04, 0x02, 0x08, 0x0a, 0x6b, 0x2e, 0x8d, 0x11, 0x00, 0x00, 0x00,
        0x00, 0x01, 0x03, 0x03, 0x07, // options
    ];

    /// IPv6/UDP DNS query for `example.com` A, 2001:db8::1:53421 -> 2001:4860:4860::8888:53.
    const DNS_QUERY: [u8; 77] = [
        0x60, 0x05, 0xd3, 0xe1, 0x00, 0x25, 0x11, 0x40, // IPv6
        0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x01, 0x20, 0x01, 0x48, 0x60, 0x48, 0x60, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x88, 0x88, // addresses
        0xd0, 0xad, 0x00, 0x35, 0x00, 0x25, 0xde, 0x24, // UDP
        0x1a, 0x2b, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, b'e', b'x',
        b'a', b'm', b'p', b'l', b'e', 0x03, b'c', b'o', b'm', 0x00, 0x00, 0x01, 0x00, 0x01,
    ];

    /// ICMPv4 port unreachable from 192.168.0.1 to 192.168.0.104, quoting the IPv4 header and
    /// the UDP header (45678 -> 33434) of the datagram that caused it.
    const PORT_UNREACH: [u8; 56] = [
        0x45, 0xc0, 0x00, 0x38, 0x7a, 0x10, 0x00, 0x00, 0x40, 0x01, 0x7e, 0x3b, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0x68, // IPv4
        0x03, 0x03, 0x6c, 0x2c, 0x00, 0x00, 0x00, 0x00, // ICMP: type 3 code 3, unused
        0x45, 0x00, 0x00, 0x3c, 0x5b, 0x2c, 0x00, 0x00, 0x01, 0x11, 0xdc, 0xcb, 0xc0, 0xa8, 0x00,
        0x68, 0xc0, 0xa8, 0x00, 0x01, // quoted IPv4
        0xb2, 0x6e, 0x82, 0x9a, 0x00, 0x28, 0x5b, 0x9f, // quoted UDP
    ];

    /// ICMPv6 echo request fe80::1 -> fe80::2, id 0x1234, seq 1, 4 data bytes.
    const ECHO6: [u8; 52] = [
        0x60, 0x00, 0x00, 0x00, 0x00, 0x0c, 0x3a, 0x40, // IPv6
        0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x01, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x02, // addresses
        0x80, 0x00, 0xd2, 0xe1, 0x12, 0x34, 0x00, 0x01, 0xde, 0xad, 0xbe, 0xef, // ICMPv6
    ];

    fn v4(p: &Ipv4Packet<&[u8]>) -> (IpAddress, IpAddress) {
        (p.src_addr().into(), p.dst_addr().into())
    }

    #[test]
    fn parses_tcp_syn() {
        let ip = Ipv4Packet::new_checked(&TCP_SYN[..]).unwrap();
        let (src, dst) = v4(&ip);
        let t = TcpPacket::new_checked(ip.payload()).unwrap();
        assert_eq!((t.src_port(), t.dst_port()), (47330, 80));
        assert_eq!(t.seq_number(), 0x3a4f_1b2c);
        assert_eq!(t.ack_number(), 0);
        assert_eq!(t.header_len(), 40);
        assert_eq!(t.flags(), TcpFlags::SYN);
        assert!(t.syn() && !t.ack() && !t.fin() && !t.rst() && !t.psh());
        assert_eq!(t.window(), 64240);
        assert_eq!(t.checksum(), 0xc467);
        assert_eq!(t.urgent_ptr(), 0);
        assert_eq!(t.options().len(), 20);
        assert_eq!(&t.options()[..4], &[0x02, 0x04, 0x05, 0xb4]);
        assert!(t.payload().is_empty());
        assert!(t.verify_checksum(src, dst));
        assert!(!t.verify_checksum(dst, IpAddress::V4(Ipv4Address([192, 168, 0, 2]))));
        assert!(!t.verify_checksum(src, IpAddress::V6(Ipv6Address::LOOPBACK)));

        let r = TcpRepr::parse(&t).unwrap();
        assert_eq!(
            r,
            TcpRepr {
                src_port: 47330,
                dst_port: 80,
                seq_number: 0x3a4f_1b2c,
                ack_number: 0,
                flags: TcpFlags::SYN,
                window: 64240,
            }
        );
        // Refill the checksum after clearing it: same value.
        let mut seg = TCP_SYN[20..].to_vec();
        let mut t = TcpPacket::new_unchecked(&mut seg[..]);
        t.set_checksum(0xdead);
        t.fill_checksum(src, dst);
        assert_eq!(t.checksum(), 0xc467);
    }

    #[test]
    fn tcp_flags_and_header_len() {
        let f = TcpFlags::SYN | TcpFlags::ACK;
        assert!(f.contains(TcpFlags::ACK) && !f.contains(TcpFlags::FIN | TcpFlags::ACK));
        assert_eq!(f.bits(), 0x12);
        assert_eq!(f & TcpFlags::SYN, TcpFlags::SYN);
        assert!(TcpFlags::empty().is_empty());
        let mut g = TcpFlags::FIN;
        g |= TcpFlags::PSH | TcpFlags::RST | TcpFlags::URG | TcpFlags::ECE | TcpFlags::CWR;
        assert_eq!(g.bits(), 0xed);

        let mut seg = TCP_SYN[20..].to_vec();
        seg[12] = 0x40; // data offset 4 words
        assert_eq!(
            TcpPacket::new_checked(&seg[..]).err(),
            Some(Error::Malformed)
        );
        seg[12] = 0xb0; // 44 bytes, more than the 40 present
        assert_eq!(
            TcpPacket::new_checked(&seg[..]).err(),
            Some(Error::Truncated)
        );
        // Unchecked with a bad offset: payload and options still do not panic.
        let t = TcpPacket::new_unchecked(&seg[..]);
        assert_eq!((t.options().len(), t.payload().len()), (20, 0));
        seg[12] = 0x10;
        let t = TcpPacket::new_unchecked(&seg[..]);
        assert_eq!((t.options().len(), t.payload().len()), (0, 20));
    }

    #[test]
    fn parses_udp_dns_over_ipv6() {
        let ip = Ipv6Packet::new_checked(&DNS_QUERY[..]).unwrap();
        let (src, dst) = (ip.src_addr().into(), ip.dst_addr().into());
        let u = UdpPacket::new_checked(ip.payload()).unwrap();
        assert_eq!((u.src_port(), u.dst_port()), (53421, 53));
        assert_eq!(u.len(), 37);
        assert!(!u.is_empty());
        assert_eq!(u.checksum(), 0xde24);
        assert_eq!(u.payload(), &DNS_QUERY[48..]);
        assert_eq!(&u.payload()[..2], &[0x1a, 0x2b]);
        assert!(u.verify_checksum(src, dst));
        let r = UdpRepr::parse(&u).unwrap();
        assert_eq!(
            r,
            UdpRepr {
                src_port: 53421,
                dst_port: 53,
                payload_len: 29
            }
        );
        // emit + fill reproduces the datagram.
        let mut d = DNS_QUERY[40..].to_vec();
        d[..8].fill(0);
        let mut u = UdpPacket::new_unchecked(&mut d[..]);
        r.emit(&mut u);
        assert_eq!(u.checksum(), 0);
        assert!(
            !u.verify_checksum(src, dst),
            "zero is no checksum only over IPv4"
        );
        u.fill_checksum(src, dst);
        assert_eq!(&d[..], &DNS_QUERY[40..]);
    }

    #[test]
    fn udp_lengths() {
        let dgram = &DNS_QUERY[40..];
        let mut padded = dgram.to_vec();
        padded.extend_from_slice(&[0xee; 5]);
        let u = UdpPacket::new_checked(&padded[..]).unwrap();
        assert_eq!(u.payload().len(), 29, "payload stops at the length field");
        let mut b = dgram.to_vec();
        b[4..6].copy_from_slice(&7u16.to_be_bytes());
        assert_eq!(UdpPacket::new_checked(&b[..]).err(), Some(Error::Malformed));
        b[4..6].copy_from_slice(&38u16.to_be_bytes());
        assert_eq!(UdpPacket::new_checked(&b[..]).err(), Some(Error::Truncated));
        assert_eq!(UdpPacket::new_unchecked(&b[..]).payload().len(), 29);
        for len in 0..dgram.len() {
            let e = UdpPacket::new_checked(&dgram[..len]).err();
            assert_eq!(e, Some(Error::Truncated), "len {len}");
        }
        // No checksum over IPv4 passes.
        let mut z = dgram.to_vec();
        z[6..8].fill(0);
        let a = IpAddress::V4(Ipv4Address([10, 0, 0, 1]));
        assert!(
            UdpPacket::new_checked(&z[..])
                .unwrap()
                .verify_checksum(a, a)
        );
    }

    #[test]
    fn udp_zero_checksum_is_sent_as_ffff() {
        // Pick a source port that makes the computed checksum 0 and check it goes out as 0xffff.
        let a = IpAddress::V4(Ipv4Address([10, 0, 0, 1]));
        let b = IpAddress::V4(Ipv4Address([10, 0, 0, 2]));
        let mut d = [0u8; 8];
        let r = UdpRepr {
            src_port: 0,
            dst_port: 9,
            payload_len: 0,
        };
        r.emit(&mut UdpPacket::new_unchecked(&mut d[..]));
        let c = checksum_pseudo(a, b, IpProtocol::Udp, &d).unwrap();
        // Adding !c to the port makes the ones'-complement sum 0xffff, so the checksum 0.
        d[..2].copy_from_slice(&c.to_be_bytes());
        let mut u = UdpPacket::new_unchecked(&mut d[..]);
        u.fill_checksum(a, b);
        assert_eq!(u.checksum(), 0xffff);
        assert!(u.verify_checksum(a, b));
    }

    #[test]
    fn parses_port_unreachable() {
        let ip = Ipv4Packet::new_checked(&PORT_UNREACH[..]).unwrap();
        assert!(ip.verify_checksum());
        assert_eq!(ip.next_header(), IpProtocol::Icmp);
        let icmp = IcmpPacket::new_checked(ip.payload()).unwrap();
        assert_eq!((icmp.msg_type(), icmp.code()), (3, 3));
        assert!(icmpv4_is_error(icmp.msg_type()));
        assert!(!icmp_has_id(icmp.msg_type()));
        assert_eq!(icmp.checksum(), 0x6c2c);
        assert_eq!(icmp.rest_of_header(), 0);
        assert!(icmp.verify_checksum_v4());
        let q = icmp.quoted();
        assert_eq!(q.len(), 28);
        // The quoted datagram is cut short: a checked view refuses it...
        assert_eq!(Ipv4Packet::new_checked(q).err(), Some(Error::Truncated));
        // ...but its fixed header and the ports are there to read.
        let inner = Ipv4Packet::new_unchecked(q);
        assert!(inner.verify_checksum());
        assert_eq!(inner.src_addr(), Ipv4Address([192, 168, 0, 104]));
        assert_eq!(inner.dst_addr(), Ipv4Address([192, 168, 0, 1]));
        assert_eq!(inner.next_header(), IpProtocol::Udp);
        assert_eq!(inner.ttl(), 1);
        let udp = &q[inner.header_len()..];
        assert_eq!(UdpPacket::new_checked(udp).err(), Some(Error::Truncated));
        let u = UdpPacket::new_unchecked(udp);
        assert_eq!((u.src_port(), u.dst_port(), u.len()), (45678, 33434, 40));

        let r = IcmpRepr::parse(&icmp).unwrap();
        let mut m = ip.payload().to_vec();
        m[..8].fill(0xff);
        let mut p = IcmpPacket::new_unchecked(&mut m[..]);
        r.emit(&mut p);
        p.fill_checksum_v4();
        assert_eq!(&m[..], ip.payload());
    }

    #[test]
    fn parses_icmpv6_echo() {
        let ip = Ipv6Packet::new_checked(&ECHO6[..]).unwrap();
        assert_eq!(ip.next_header(), IpProtocol::Icmpv6);
        let icmp = IcmpPacket::new_checked(ip.payload()).unwrap();
        assert_eq!((icmp.msg_type(), icmp.code()), (128, 0));
        assert!(icmp_has_id(128) && !icmpv6_is_error(128));
        assert_eq!((icmp.identifier(), icmp.sequence()), (0x1234, 1));
        assert_eq!(icmp.quoted(), &[0xde, 0xad, 0xbe, 0xef]);
        assert!(icmp.verify_checksum_v6(ip.src_addr(), ip.dst_addr()));
        assert!(!icmp.verify_checksum_v6(ip.dst_addr(), ip.dst_addr()));
        let r = IcmpRepr::parse(&icmp).unwrap();
        assert_eq!(r, IcmpRepr::echo(128, 0x1234, 1));
        let mut m = ip.payload().to_vec();
        m[..8].fill(0);
        let mut p = IcmpPacket::new_unchecked(&mut m[..]);
        r.emit(&mut p);
        p.fill_checksum_v6(ip.src_addr(), ip.dst_addr());
        assert_eq!(&m[..], ip.payload());
    }

    #[test]
    fn icmp_type_helpers() {
        for t in 0..=255u8 {
            assert_eq!(icmpv4_is_error(t), [3, 4, 5, 11, 12].contains(&t), "{t}");
            assert_eq!(icmpv6_is_error(t), [1, 2, 3, 4].contains(&t), "{t}");
            assert_eq!(icmp_has_id(t), [0, 8, 13, 14, 128, 129].contains(&t), "{t}");
        }
    }

    #[test]
    fn sctp_common_header() {
        // INIT from port 5000 to 36412 (S1AP), verification tag 0 as INIT requires.
        let b = [
            0x13, 0x88, 0x8e, 0x3c, 0x00, 0x00, 0x00, 0x00, 0x12, 0x34, 0x56, 0x78, 0x01, 0x00,
            0x00, 0x14,
        ];
        let s = SctpPacket::new_checked(&b[..]).unwrap();
        assert_eq!((s.src_port(), s.dst_port()), (5000, 36412));
        assert_eq!(s.verification_tag(), 0);
        assert_eq!(s.checksum(), 0x1234_5678);
        assert_eq!(s.chunks(), &[0x01, 0x00, 0x00, 0x14]);
        let mut c = [0u8; 12];
        let mut s = SctpPacket::new_unchecked(&mut c[..]);
        s.set_src_port(5000);
        s.set_dst_port(36412);
        s.set_verification_tag(0);
        s.set_checksum(0x1234_5678);
        assert_eq!(&c[..], &b[..12]);
        for len in 0..12 {
            assert_eq!(
                SctpPacket::new_checked(&b[..len]).err(),
                Some(Error::Truncated)
            );
        }
    }

    #[test]
    fn every_truncation_is_an_error() {
        let tcp = &TCP_SYN[20..];
        for len in 0..tcp.len() {
            let e = TcpPacket::new_checked(&tcp[..len]).err();
            assert_eq!(e, Some(Error::Truncated), "tcp len {len}");
        }
        for len in 0..8 {
            let e = IcmpPacket::new_checked(&PORT_UNREACH[20..20 + len]).err();
            assert_eq!(e, Some(Error::Truncated), "icmp len {len}");
        }
    }

    fn arb_addr_pair() -> impl Strategy<Value = (IpAddress, IpAddress)> {
        prop_oneof![
            (any::<[u8; 4]>(), any::<[u8; 4]>())
                .prop_map(|(a, b)| (IpAddress::V4(Ipv4Address(a)), IpAddress::V4(Ipv4Address(b)))),
            (any::<[u8; 16]>(), any::<[u8; 16]>())
                .prop_map(|(a, b)| (IpAddress::V6(Ipv6Address(a)), IpAddress::V6(Ipv6Address(b)))),
        ]
    }

    proptest! {
        #[test]
        fn accessors_never_panic(data in proptest::collection::vec(any::<u8>(), 0..80)) {
            let a = IpAddress::V4(Ipv4Address([1, 2, 3, 4]));
            if let Ok(t) = TcpPacket::new_checked(&data[..]) {
                let _ = (t.src_port(), t.dst_port(), t.seq_number(), t.ack_number());
                let _ = (t.flags(), t.syn(), t.ack(), t.fin(), t.rst(), t.psh(), t.window());
                let _ = (t.checksum(), t.urgent_ptr(), t.verify_checksum(a, a));
                prop_assert_eq!(t.header_len(), 20 + t.options().len());
                prop_assert_eq!(t.header_len() + t.payload().len(), data.len());
                let _ = TcpRepr::parse(&t).unwrap();
            }
            if let Ok(u) = UdpPacket::new_checked(&data[..]) {
                let _ = (u.src_port(), u.dst_port(), u.checksum(), u.is_empty());
                let _ = u.verify_checksum(a, a);
                prop_assert_eq!(8 + u.payload().len(), usize::from(u.len()));
                let _ = UdpRepr::parse(&u).unwrap();
            }
            if let Ok(s) = SctpPacket::new_checked(&data[..]) {
                let _ = (s.src_port(), s.dst_port(), s.verification_tag(), s.checksum());
                let _ = s.chunks();
            }
            if let Ok(i) = IcmpPacket::new_checked(&data[..]) {
                let _ = (i.msg_type(), i.code(), i.checksum(), i.rest_of_header());
                let _ = (i.identifier(), i.sequence(), i.quoted(), i.verify_checksum_v4());
                let _ = i.verify_checksum_v6(Ipv6Address::LOOPBACK, Ipv6Address::LOOPBACK);
                let _ = IcmpRepr::parse(&i).unwrap();
            }
            let _ = TcpPacket::new_unchecked(&data[..]).payload();
            let _ = TcpPacket::new_unchecked(&data[..]).options();
            let _ = UdpPacket::new_unchecked(&data[..]).payload();
            let _ = IcmpPacket::new_unchecked(&data[..]).quoted();
            let _ = SctpPacket::new_unchecked(&data[..]).chunks();
        }

        #[test]
        fn tcp_round_trip(
            ports in any::<(u16, u16)>(),
            seq in any::<u32>(),
            ack in any::<u32>(),
            flags in any::<u8>(),
            window in any::<u16>(),
            payload in proptest::collection::vec(any::<u8>(), 0..64),
            (src, dst) in arb_addr_pair(),
        ) {
            let r = TcpRepr {
                src_port: ports.0,
                dst_port: ports.1,
                seq_number: seq,
                ack_number: ack,
                flags: TcpFlags(flags),
                window,
            };
            let mut buf = vec![0u8; r.buffer_len() + payload.len()];
            let mut t = TcpPacket::new_unchecked(&mut buf[..]);
            r.emit(&mut t);
            t.payload_mut().copy_from_slice(&payload);
            t.fill_checksum(src, dst);
            let t = TcpPacket::new_checked(&buf[..]).unwrap();
            prop_assert!(t.verify_checksum(src, dst));
            prop_assert_eq!(t.payload(), &payload[..]);
            prop_assert_eq!(TcpRepr::parse(&t), Ok(r));
        }

        #[test]
        fn udp_round_trip(
            ports in any::<(u16, u16)>(),
            payload in proptest::collection::vec(any::<u8>(), 0..64),
            (src, dst) in arb_addr_pair(),
        ) {
            let r = UdpRepr { src_port: ports.0, dst_port: ports.1, payload_len: payload.len() };
            let mut buf = vec![0u8; r.buffer_len() + payload.len()];
            let mut u = UdpPacket::new_unchecked(&mut buf[..]);
            r.emit(&mut u);
            u.payload_mut().copy_from_slice(&payload);
            u.fill_checksum(src, dst);
            let u = UdpPacket::new_checked(&buf[..]).unwrap();
            prop_assert!(u.checksum() != 0);
            prop_assert!(u.verify_checksum(src, dst));
            prop_assert_eq!(UdpRepr::parse(&u), Ok(r));
        }

        #[test]
        fn icmp_round_trip(
            t in any::<u8>(),
            c in any::<u8>(),
            rest in any::<u32>(),
            data in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let r = IcmpRepr { msg_type: t, code: c, rest_of_header: rest };
            let mut buf = vec![0u8; r.buffer_len() + data.len()];
            let mut p = IcmpPacket::new_unchecked(&mut buf[..]);
            r.emit(&mut p);
            p.quoted_mut().copy_from_slice(&data);
            p.fill_checksum_v4();
            let p = IcmpPacket::new_checked(&buf[..]).unwrap();
            prop_assert!(p.verify_checksum_v4());
            prop_assert_eq!(IcmpRepr::parse(&p), Ok(r));
        }
    }
}
