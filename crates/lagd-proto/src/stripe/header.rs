//! The stripe wire format: the 8-byte sequence header of data frames and the hello frame.
//!
//! A striped frame keeps the host frame's Ethernet destination and source; its outermost type
//! field (bytes 12..14) becomes [`ETHERTYPE`] (0x88b5, IEEE 802 local experimental EtherType 1)
//! and the 8-byte stripe header follows at offset 14. The rest of the host frame, from its own
//! offset 14 on (VLAN tags included), follows unchanged, so a striped frame is exactly
//! [`HEADER_LEN`] bytes longer than the host frame.
//!
//! # Data header (bytes 14..22 of the frame)
//!
//! | offset | size | field |
//! | --- | --- | --- |
//! | 14 | 1 | version (high nibble, [`VERSION`] = 1) and kind (low nibble, 0 = data) |
//! | 15 | 1 | epoch tag: the low byte of the sender's epoch (a restart changes it) |
//! | 16 | 2 | the host frame's own type field (its EtherType or outer VLAN TPID), big endian |
//! | 18 | 4 | sequence number, big endian, consecutive per sender, wrapping at 2^32 |
//!
//! # Hello frame (sent by lagd on every member, [`HELLO_FRAME_LEN`] = 60 bytes)
//!
//! Ethernet destination [`HELLO_DST`] (locally administered multicast: switches flood it, hosts
//! filter it), source chosen by the sender, type 0x88b5, then:
//!
//! | offset | size | field |
//! | --- | --- | --- |
//! | 14 | 1 | version (high nibble, 1) and kind (low nibble, 1 = hello) |
//! | 15 | 1 | flags: bit 0 = the echo fields below are valid ("I hear you on this member") |
//! | 16 | 2 | length of the hello body from offset 22 on (26 in version 1; more is ignored) |
//! | 18 | 4 | the sender's epoch (chosen at random when lagd starts) |
//! | 22 | 6 | the sender's bond identity (its bond MAC) |
//! | 28 | 2 | the sender's member index (the member this hello left by) |
//! | 30 | 4 | that member's speed in Mb/s (0 = unknown) |
//! | 34 | 2 | the sender's hello interval in milliseconds |
//! | 36 | 6 | echo: the bond identity last heard from the peer on this member |
//! | 42 | 4 | echo: the peer's epoch last heard on this member |
//! | 46 | 2 | echo: the peer's member index last heard on this member |
//! | 48 | 12 | zero padding to the 60-byte Ethernet minimum |
//!
//! Without the echo flag the echo fields are zero. Parsing ignores unknown flag bits and bytes
//! past the body length, so a later version can grow the body.
//!
//! Parsing never panics: anything malformed is an [`Error`] for the caller to count.

use core::fmt;

use crate::wire::ethernet::HEADER_LEN as ETH_HEADER_LEN;
use crate::wire::{Error, EtherType, EthernetAddress, Result, be16, be32};

/// The EtherType of every stripe frame (IEEE 802 local experimental EtherType 1).
pub const ETHERTYPE: EtherType = EtherType::LocalExperimental1;
/// The protocol version this code emits and accepts.
pub const VERSION: u8 = 1;
/// Length of the stripe header that follows the Ethernet addresses and type.
pub const HEADER_LEN: usize = 8;
/// Offset of the stripe header in a frame.
pub const HEADER_OFFSET: usize = ETH_HEADER_LEN;
/// Length of the hello body in version 1 (from offset 22).
pub const HELLO_BODY_LEN: usize = 26;
/// Length of an emitted hello frame (the 60-byte Ethernet minimum, without FCS).
pub const HELLO_FRAME_LEN: usize = 60;
/// The destination of hello frames: locally administered multicast `03:6c:61:67:64:00`.
pub const HELLO_DST: EthernetAddress = EthernetAddress([0x03, 0x6c, 0x61, 0x67, 0x64, 0x00]);

const KIND_DATA: u8 = 0;
const KIND_HELLO: u8 = 1;
const FLAG_ECHO: u8 = 0x01;

/// What a stripe frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A host frame with its sequence number.
    Data,
    /// A hello between the two lagd ends of a member.
    Hello,
}

/// The header of a stripe data frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DataHeader {
    /// The low byte of the sender's epoch.
    pub epoch_tag: u8,
    /// The host frame's type field at offset 12 (an EtherType or an outer VLAN TPID).
    pub ethertype: EtherType,
    /// The sequence number.
    pub seq: u32,
}

impl DataHeader {
    /// Parses the data header of a whole stripe frame (Ethernet header included).
    ///
    /// `Unsupported` if the frame is not a stripe frame, has another version or is a hello;
    /// `Truncated` if it ends inside the header.
    pub fn parse_frame(frame: &[u8]) -> Result<Self> {
        let h = header_bytes(frame)?;
        match kind_of(h[0])? {
            Kind::Data => Ok(Self::parse_bytes(h)),
            Kind::Hello => Err(Error::Unsupported),
        }
    }

    fn parse_bytes(h: &[u8; HEADER_LEN]) -> Self {
        Self {
            epoch_tag: h[1],
            ethertype: EtherType::from(be16(h, 2)),
            seq: be32(h, 4),
        }
    }

    /// The header's 8 bytes.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        h[0] = (VERSION << 4) | KIND_DATA;
        h[1] = self.epoch_tag;
        h[2..4].copy_from_slice(&u16::from(self.ethertype).to_be_bytes());
        h[4..8].copy_from_slice(&self.seq.to_be_bytes());
        h
    }
}

/// Checks the type field and version of a frame and returns its stripe header bytes.
fn header_bytes(frame: &[u8]) -> Result<&[u8; HEADER_LEN]> {
    if frame.len() < ETH_HEADER_LEN {
        return Err(Error::Truncated);
    }
    if be16(frame, 12) != u16::from(ETHERTYPE) {
        return Err(Error::Unsupported);
    }
    let h = frame
        .get(HEADER_OFFSET..HEADER_OFFSET + HEADER_LEN)
        .ok_or(Error::Truncated)?;
    let h: &[u8; HEADER_LEN] = h.try_into().map_err(|_| Error::Truncated)?;
    if h[0] >> 4 != VERSION {
        return Err(Error::Unsupported);
    }
    Ok(h)
}

fn kind_of(b: u8) -> Result<Kind> {
    match b & 0x0f {
        KIND_DATA => Ok(Kind::Data),
        KIND_HELLO => Ok(Kind::Hello),
        _ => Err(Error::Unsupported),
    }
}

/// Whether the frame's outermost type field is the stripe EtherType (nothing else is checked).
pub fn is_stripe_frame(frame: &[u8]) -> bool {
    frame.len() >= ETH_HEADER_LEN && be16(frame, 12) == u16::from(ETHERTYPE)
}

/// What the peer last heard on a member, echoed back in a hello.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Echo {
    /// The peer's bond identity.
    pub bond: EthernetAddress,
    /// The peer's epoch.
    pub epoch: u32,
    /// The peer's member index.
    pub member: u16,
}

/// A hello frame's contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HelloRepr {
    /// The sender's epoch: random per lagd start, so a restart is seen.
    pub epoch: u32,
    /// The sender's bond identity (its bond MAC).
    pub bond: EthernetAddress,
    /// The sender's index of the member the hello left by.
    pub member: u16,
    /// That member's speed in Mb/s (0 = unknown).
    pub speed_mbps: u32,
    /// The sender's hello interval in milliseconds.
    pub interval_ms: u16,
    /// What the sender last heard from us on this member, if it heard anything recently.
    pub echo: Option<Echo>,
}

impl HelloRepr {
    /// Parses a whole hello frame (Ethernet header included).
    ///
    /// `Unsupported` if it is not a stripe frame, has another version or is a data frame;
    /// `Truncated` if it ends before the body length says; `Malformed` if the body length is
    /// below version 1's.
    pub fn parse_frame(frame: &[u8]) -> Result<Self> {
        let h = header_bytes(frame)?;
        if kind_of(h[0])? != Kind::Hello {
            return Err(Error::Unsupported);
        }
        let flags = h[1];
        let body_len = usize::from(be16(h, 2));
        if body_len < HELLO_BODY_LEN {
            return Err(Error::Malformed);
        }
        let at = HEADER_OFFSET + HEADER_LEN;
        let body = frame.get(at..at + body_len).ok_or(Error::Truncated)?;
        let echo = (flags & FLAG_ECHO != 0).then(|| Echo {
            bond: EthernetAddress::from_bytes(&body[14..20]),
            epoch: be32(body, 20),
            member: be16(body, 24),
        });
        Ok(Self {
            epoch: be32(h, 4),
            bond: EthernetAddress::from_bytes(&body[0..6]),
            member: be16(body, 6),
            speed_mbps: be32(body, 8),
            interval_ms: be16(body, 12),
            echo,
        })
    }

    /// Writes the hello frame into `frame`: destination [`HELLO_DST`], source `src`, padded
    /// with zeros to the end of `frame`.
    ///
    /// Returns the length written: [`HELLO_FRAME_LEN`], or `Truncated` (nothing written) if
    /// `frame` is shorter.
    pub fn emit_frame(&self, src: EthernetAddress, frame: &mut [u8]) -> Result<usize> {
        let f = frame.get_mut(..HELLO_FRAME_LEN).ok_or(Error::Truncated)?;
        f.fill(0);
        f[0..6].copy_from_slice(&HELLO_DST.0);
        f[6..12].copy_from_slice(&src.0);
        f[12..14].copy_from_slice(&u16::from(ETHERTYPE).to_be_bytes());
        f[14] = (VERSION << 4) | KIND_HELLO;
        f[15] = if self.echo.is_some() { FLAG_ECHO } else { 0 };
        f[16..18].copy_from_slice(&(HELLO_BODY_LEN as u16).to_be_bytes());
        f[18..22].copy_from_slice(&self.epoch.to_be_bytes());
        let b = &mut f[22..22 + HELLO_BODY_LEN];
        b[0..6].copy_from_slice(&self.bond.0);
        b[6..8].copy_from_slice(&self.member.to_be_bytes());
        b[8..12].copy_from_slice(&self.speed_mbps.to_be_bytes());
        b[12..14].copy_from_slice(&self.interval_ms.to_be_bytes());
        if let Some(e) = self.echo {
            b[14..20].copy_from_slice(&e.bond.0);
            b[20..24].copy_from_slice(&e.epoch.to_be_bytes());
            b[24..26].copy_from_slice(&e.member.to_be_bytes());
        }
        Ok(HELLO_FRAME_LEN)
    }
}

/// A parsed stripe frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StripeFrame {
    /// A data frame's header (the host frame follows it).
    Data(DataHeader),
    /// A hello.
    Hello(HelloRepr),
}

impl StripeFrame {
    /// Parses any stripe frame (see [`DataHeader::parse_frame`] and
    /// [`HelloRepr::parse_frame`]).
    pub fn parse(frame: &[u8]) -> Result<Self> {
        let h = header_bytes(frame)?;
        match kind_of(h[0])? {
            Kind::Data => Ok(Self::Data(DataHeader::parse_bytes(h))),
            Kind::Hello => HelloRepr::parse_frame(frame).map(Self::Hello),
        }
    }
}

/// Why [`encapsulate`] could not work in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EncapError {
    /// Fewer than [`HEADER_LEN`] bytes before the frame.
    NoHeadroom,
    /// The frame is shorter than an Ethernet header or runs past the buffer.
    BadFrame,
}

impl fmt::Display for EncapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NoHeadroom => "no headroom for the stripe header",
            Self::BadFrame => "frame shorter than an Ethernet header or outside the buffer",
        })
    }
}

impl std::error::Error for EncapError {}

/// Encapsulates in place the host frame at `buf[start..start + len]`: its 12 address bytes
/// move down [`HEADER_LEN`] bytes, followed by type 0x88b5 and the data header with `seq` and
/// `epoch_tag`; the rest of the frame does not move.
///
/// Returns the start of the striped frame (`start - 8`); it is `len + 8` bytes long. Nothing is
/// written on error.
pub fn encapsulate(
    buf: &mut [u8],
    start: usize,
    len: usize,
    seq: u32,
    epoch_tag: u8,
) -> core::result::Result<usize, EncapError> {
    if start < HEADER_LEN {
        return Err(EncapError::NoHeadroom);
    }
    let end = start.checked_add(len).ok_or(EncapError::BadFrame)?;
    if len < ETH_HEADER_LEN || end > buf.len() {
        return Err(EncapError::BadFrame);
    }
    let new = start - HEADER_LEN;
    let ethertype = EtherType::from(be16(buf, start + 12));
    buf.copy_within(start..start + 12, new);
    buf[new + 12..new + 14].copy_from_slice(&u16::from(ETHERTYPE).to_be_bytes());
    let h = DataHeader {
        epoch_tag,
        ethertype,
        seq,
    };
    buf[new + 14..new + 14 + HEADER_LEN].copy_from_slice(&h.to_bytes());
    Ok(new)
}

/// Decapsulates a stripe data frame in place: the host frame is rebuilt at `frame[8..]` (its
/// addresses move up [`HEADER_LEN`] bytes and get their type field back).
///
/// Returns the header; the host frame is `&frame[HEADER_LEN..]`. The frame is untouched on
/// error (see [`DataHeader::parse_frame`]).
pub fn decapsulate(frame: &mut [u8]) -> Result<DataHeader> {
    let h = DataHeader::parse_frame(frame)?;
    frame.copy_within(0..12, HEADER_LEN);
    frame[HEADER_LEN + 12..HEADER_LEN + 14].copy_from_slice(&u16::from(h.ethertype).to_be_bytes());
    Ok(h)
}

/// Copies the host frame out of a stripe data frame (the decapsulation of [`decapsulate`]
/// without touching `frame`). `out` must hold at least `frame.len() - 8` bytes.
///
/// Returns the header and the host frame's length; `Truncated` if `out` is too short.
pub fn decapsulate_into(frame: &[u8], out: &mut [u8]) -> Result<(DataHeader, usize)> {
    let h = DataHeader::parse_frame(frame)?;
    let len = frame.len() - HEADER_LEN;
    let out = out.get_mut(..len).ok_or(Error::Truncated)?;
    out[..12].copy_from_slice(&frame[..12]);
    out[12..14].copy_from_slice(&u16::from(h.ethertype).to_be_bytes());
    out[14..].copy_from_slice(&frame[ETH_HEADER_LEN + HEADER_LEN..]);
    Ok((h, len))
}

#[cfg(test)]
mod test {
    use super::*;
    use proptest::prelude::*;

    fn hello(echo: bool) -> HelloRepr {
        HelloRepr {
            epoch: 0xdead_beef,
            bond: EthernetAddress([0x02, 0, 0, 0, 0, 1]),
            member: 3,
            speed_mbps: 25_000,
            interval_ms: 100,
            echo: echo.then_some(Echo {
                bond: EthernetAddress([0x02, 0, 0, 0, 0, 2]),
                epoch: 7,
                member: 1,
            }),
        }
    }

    fn host_frame(ethertype: u16, payload: usize) -> Vec<u8> {
        let mut f = vec![0u8; 14 + payload];
        f[0..6].copy_from_slice(&[0x02, 0xaa, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[0x02, 0xbb, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&ethertype.to_be_bytes());
        for (i, b) in f[14..].iter_mut().enumerate() {
            *b = i as u8;
        }
        f
    }

    #[test]
    fn data_layout_is_as_documented() {
        let h = DataHeader {
            epoch_tag: 0xab,
            ethertype: EtherType::Ipv4,
            seq: 0x0102_0304,
        };
        assert_eq!(h.to_bytes(), [0x10, 0xab, 0x08, 0x00, 1, 2, 3, 4]);
    }

    #[test]
    fn hello_layout_is_as_documented() {
        let mut f = [0xffu8; 64];
        let src = EthernetAddress([0x02, 9, 9, 9, 9, 9]);
        assert_eq!(hello(true).emit_frame(src, &mut f), Ok(60));
        assert_eq!(&f[0..6], &HELLO_DST.0);
        assert_eq!(&f[6..12], &src.0);
        assert_eq!(
            &f[12..22],
            &[0x88, 0xb5, 0x11, 0x01, 0, 26, 0xde, 0xad, 0xbe, 0xef]
        );
        assert_eq!(&f[22..28], &[0x02, 0, 0, 0, 0, 1]);
        assert_eq!(&f[28..36], &[0, 3, 0, 0, 0x61, 0xa8, 0, 100]);
        assert_eq!(&f[36..48], &[0x02, 0, 0, 0, 0, 2, 0, 0, 0, 7, 0, 1]);
        assert_eq!(&f[48..60], &[0; 12]);
        assert_eq!(&f[60..], &[0xff; 4]);
        assert_eq!(
            hello(true).emit_frame(src, &mut [0; 59]),
            Err(Error::Truncated)
        );
    }

    #[test]
    fn hello_round_trip_and_truncation_at_every_length() {
        for echo in [false, true] {
            let r = hello(echo);
            let mut f = [0u8; HELLO_FRAME_LEN];
            r.emit_frame(EthernetAddress([2, 0, 0, 0, 0, 5]), &mut f)
                .unwrap();
            assert_eq!(HelloRepr::parse_frame(&f), Ok(r));
            assert_eq!(StripeFrame::parse(&f), Ok(StripeFrame::Hello(r)));
            assert_eq!(DataHeader::parse_frame(&f), Err(Error::Unsupported));
            // The body ends at 48: any shorter frame is truncated, any longer one parses.
            for n in 0..f.len() {
                let got = HelloRepr::parse_frame(&f[..n]);
                if n < 48 {
                    assert_eq!(got, Err(Error::Truncated), "length {n}");
                    assert!(StripeFrame::parse(&f[..n]).is_err());
                } else {
                    assert_eq!(got, Ok(r), "length {n}");
                }
            }
        }
    }

    #[test]
    fn hello_rejects_bad_version_kind_and_body_length() {
        let mut f = [0u8; HELLO_FRAME_LEN];
        hello(false)
            .emit_frame(EthernetAddress::ZERO, &mut f)
            .unwrap();
        let mut v = f;
        v[14] = 0x21;
        assert_eq!(HelloRepr::parse_frame(&v), Err(Error::Unsupported));
        let mut k = f;
        k[14] = 0x1f;
        assert_eq!(StripeFrame::parse(&k), Err(Error::Unsupported));
        let mut l = f;
        l[17] = 25;
        assert_eq!(HelloRepr::parse_frame(&l), Err(Error::Malformed));
        let mut long = f;
        long[17] = 38; // a longer (future) body that still fits the frame
        assert_eq!(HelloRepr::parse_frame(&long), Ok(hello(false)));
        long[17] = 39;
        assert_eq!(HelloRepr::parse_frame(&long), Err(Error::Truncated));
        let mut t = f;
        t[12] = 0x08;
        t[13] = 0x00;
        assert_eq!(StripeFrame::parse(&t), Err(Error::Unsupported));
        assert!(!is_stripe_frame(&t));
        assert!(is_stripe_frame(&f));
    }

    #[test]
    fn encapsulate_decapsulate_round_trip_and_truncation() {
        for ethertype in [0x0800u16, 0x8100, 0x86dd, 0x88b5] {
            let host = host_frame(ethertype, 50);
            let mut buf = vec![0u8; 8 + host.len() + 3];
            buf[8..8 + host.len()].copy_from_slice(&host);
            let start = encapsulate(&mut buf, 8, host.len(), 0xfeed_f00d, 0x42).unwrap();
            assert_eq!(start, 0);
            let frame = &mut buf[..host.len() + 8];
            assert_eq!(&frame[..12], &host[..12]);
            assert_eq!(&frame[12..14], &[0x88, 0xb5]);
            assert_eq!(&frame[22..], &host[14..]);
            let want = DataHeader {
                epoch_tag: 0x42,
                ethertype: EtherType::from(ethertype),
                seq: 0xfeed_f00d,
            };
            assert_eq!(StripeFrame::parse(frame), Ok(StripeFrame::Data(want)));
            let mut out = vec![0u8; host.len()];
            assert_eq!(decapsulate_into(frame, &mut out), Ok((want, host.len())));
            assert_eq!(out, host);
            assert_eq!(
                decapsulate_into(frame, &mut out[..host.len() - 1]),
                Err(Error::Truncated)
            );
            // Truncation at every length: an error, never a panic, frame untouched.
            for n in 0..22 {
                let mut cut = frame[..n].to_vec();
                let before = cut.clone();
                assert_eq!(decapsulate(&mut cut), Err(Error::Truncated), "length {n}");
                assert_eq!(cut, before);
                assert_eq!(StripeFrame::parse(&frame[..n]), Err(Error::Truncated));
            }
            assert_eq!(decapsulate(frame), Ok(want));
            assert_eq!(&frame[8..], &host[..]);
        }
    }

    #[test]
    fn encapsulate_checks_headroom_and_bounds() {
        let host = host_frame(0x0800, 10);
        let mut buf = vec![0u8; 7 + host.len()];
        assert_eq!(
            encapsulate(&mut buf, 7, host.len(), 1, 0),
            Err(EncapError::NoHeadroom)
        );
        let mut buf = vec![0u8; 8 + host.len()];
        assert_eq!(
            encapsulate(&mut buf, 8, host.len() + 1, 1, 0),
            Err(EncapError::BadFrame)
        );
        assert_eq!(
            encapsulate(&mut buf, 8, 13, 1, 0),
            Err(EncapError::BadFrame)
        );
        assert_eq!(
            encapsulate(&mut buf, 8, usize::MAX, 1, 0),
            Err(EncapError::BadFrame)
        );
        assert_eq!(encapsulate(&mut buf, 8, 14, 1, 0), Ok(0));
    }

    proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            let mut b = bytes.clone();
            if b.len() >= 14 && b[0] & 1 == 0 {
                b[12] = 0x88;
                b[13] = 0xb5;
            }
            for f in [&bytes, &b] {
                if let Ok(StripeFrame::Hello(h)) = StripeFrame::parse(f) {
                    let mut out = [0u8; HELLO_FRAME_LEN];
                    h.emit_frame(EthernetAddress::ZERO, &mut out).unwrap();
                    prop_assert_eq!(HelloRepr::parse_frame(&out), Ok(h));
                }
                let mut m = f.clone();
                let _ = decapsulate(&mut m);
                let _ = decapsulate_into(f, &mut [0u8; 80]);
            }
        }

        #[test]
        fn hello_round_trips(
            epoch in any::<u32>(), bond in any::<[u8; 6]>(), member in any::<u16>(),
            speed in any::<u32>(), interval in any::<u16>(),
            echo in proptest::option::of((any::<[u8; 6]>(), any::<u32>(), any::<u16>())),
        ) {
            let r = HelloRepr {
                epoch,
                bond: EthernetAddress(bond),
                member,
                speed_mbps: speed,
                interval_ms: interval,
                echo: echo.map(|(b, e, m)| Echo { bond: EthernetAddress(b), epoch: e, member: m }),
            };
            let mut f = [0u8; HELLO_FRAME_LEN];
            r.emit_frame(EthernetAddress(bond), &mut f).unwrap();
            prop_assert_eq!(StripeFrame::parse(&f), Ok(StripeFrame::Hello(r)));
        }
    }
}
