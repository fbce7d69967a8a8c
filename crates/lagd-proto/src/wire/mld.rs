//! MLD (RFC 2710 v1, RFC 3810 v2): multicast listener queries, reports and dones, carried in
//! ICMPv6 (usually behind a Hop-by-Hop header with a Router Alert).
//!
//! The checksum is ICMPv6's, over the IPv6 pseudo-header. MLDv2 multicast address records use
//! the [`GroupRecord`] view of [`igmp`](super::igmp) with IPv6 addresses.

use super::igmp::{GroupRecord, GroupRecords, QueryV3, RecordAddress};
use super::ip::{IpProtocol, Ipv6Address};
use super::l4::checksum_ipv6_pseudo;
use super::view_constructors;
use super::{Error, Result, be16, enum_with_unknown};

enum_with_unknown! {
    /// The ICMPv6 types MLD uses.
    pub enum MldMessage(u8) {
        /// Multicast listener query (v1 and v2; the length tells them apart).
        Query = 130,
        /// MLDv1 report.
        ReportV1 = 131,
        /// MLDv1 done.
        Done = 132,
        /// MLDv2 report.
        ReportV2 = 143,
    }
}

/// An MLDv2 multicast address record.
pub type AddressRecord<T> = GroupRecord<T, Ipv6Address>;

mod field {
    use core::ops::Range;
    pub(crate) const TYPE: usize = 0;
    pub(crate) const CODE: usize = 1;
    pub(crate) const CHECKSUM: Range<usize> = 2..4;
    pub(crate) const MAX_RESP: Range<usize> = 4..6;
    pub(crate) const RESERVED: Range<usize> = 6..8;
    pub(crate) const MCAST_ADDR: Range<usize> = 8..24;
    // MLDv2 query.
    pub(crate) const S_QRV: usize = 24;
    pub(crate) const QQIC: usize = 25;
    pub(crate) const NUM_SOURCES: Range<usize> = 26..28;
    pub(crate) const SOURCES: usize = 28;
    // MLDv2 report.
    pub(crate) const NUM_RECORDS: Range<usize> = 6..8;
    pub(crate) const RECORDS: usize = 8;
}

/// Length of an MLDv1 message.
pub const V1_LEN: usize = field::MCAST_ADDR.end;
/// Length of an MLDv2 query without sources.
pub const V2_QUERY_LEN: usize = field::SOURCES;
/// Length of an MLDv2 report without records.
pub const V2_REPORT_HEADER_LEN: usize = field::RECORDS;

/// A view over an MLD message (the whole ICMPv6 message).
#[derive(Debug, Clone)]
pub struct MldPacket<T: AsRef<[u8]>> {
    buffer: T,
}

/// Short name for [`MldPacket`].
pub type Packet<T> = MldPacket<T>;
/// Short name for [`MldRepr`].
pub type Repr = MldRepr;

view_constructors!(MldPacket);

impl<T: AsRef<[u8]>> MldPacket<T> {
    /// `Truncated` if the buffer is shorter than the 8-byte ICMPv6 header, than 24 bytes for
    /// a query, v1 report or done, than an MLDv2 query's sources (a query of 28 bytes or more
    /// is v2) or than an MLDv2 report's records.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < V2_REPORT_HEADER_LEN {
            return Err(Error::Truncated);
        }
        match self.msg_type() {
            MldMessage::Query | MldMessage::ReportV1 | MldMessage::Done if len < V1_LEN => {
                return Err(Error::Truncated);
            }
            MldMessage::ReportV2 => self.records().check()?,
            _ => {}
        }
        if self.is_v2_query() && V2_QUERY_LEN + 16 * usize::from(self.num_sources()) > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Message (ICMPv6) type.
    pub fn msg_type(&self) -> MldMessage {
        MldMessage::from(self.buffer.as_ref()[field::TYPE])
    }

    /// ICMPv6 code (0).
    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM.start)
    }

    /// Maximum response delay (v1, ms) or code (v2) of a query.
    pub fn max_resp_code(&self) -> u16 {
        be16(self.buffer.as_ref(), field::MAX_RESP.start)
    }

    /// The multicast address of a query, v1 report or done (`::` if the buffer is shorter,
    /// as for a v2 report).
    pub fn mcast_addr(&self) -> Ipv6Address {
        self.buffer
            .as_ref()
            .get(field::MCAST_ADDR)
            .map_or(Ipv6Address::UNSPECIFIED, Ipv6Address::from_bytes)
    }

    /// Whether this is an MLDv2 query: a query of at least 28 bytes.
    pub fn is_v2_query(&self) -> bool {
        self.buffer.as_ref().len() >= V2_QUERY_LEN && self.msg_type() == MldMessage::Query
    }

    /// The v2 query fields; `None` unless [`is_v2_query`](Self::is_v2_query).
    pub fn query_v2(&self) -> Option<QueryV3> {
        let b = self.buffer.as_ref();
        self.is_v2_query()
            .then(|| QueryV3::from_bytes(b[field::S_QRV], b[field::QQIC], self.num_sources()))
    }

    fn num_sources(&self) -> u16 {
        if self.is_v2_query() {
            be16(self.buffer.as_ref(), field::NUM_SOURCES.start)
        } else {
            0
        }
    }

    /// Source `i` of a v2 query; `None` past its sources or for other messages.
    pub fn query_source(&self, i: usize) -> Option<Ipv6Address> {
        RecordAddress::read_list(self.buffer.as_ref(), field::SOURCES, self.num_sources(), i)
    }

    /// A v2 report's number of records (0 for anything else).
    pub fn num_records(&self) -> u16 {
        let b = self.buffer.as_ref();
        if b.len() >= V2_REPORT_HEADER_LEN && self.msg_type() == MldMessage::ReportV2 {
            be16(b, field::NUM_RECORDS.start)
        } else {
            0
        }
    }

    /// The multicast address records of a v2 report (none for other messages).
    pub fn records(&self) -> GroupRecords<'_, Ipv6Address> {
        let rest = self.buffer.as_ref().get(field::RECORDS..).unwrap_or(&[]);
        GroupRecords::new(rest, self.num_records())
    }

    /// Whether the checksum is right, the buffer being the whole message and `src`/`dst` the
    /// addresses of the IPv6 header carrying it.
    pub fn verify_checksum(&self, src: Ipv6Address, dst: Ipv6Address) -> bool {
        checksum_ipv6_pseudo(src, dst, IpProtocol::Icmpv6, self.buffer.as_ref()) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> MldPacket<T> {
    /// Sets the message type.
    pub fn set_msg_type(&mut self, v: MldMessage) {
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

    /// Sets the max response delay/code and clears the reserved field.
    pub fn set_max_resp_code(&mut self, v: u16) {
        let b = self.buffer.as_mut();
        b[field::MAX_RESP].copy_from_slice(&v.to_be_bytes());
        b[field::RESERVED].fill(0);
    }

    /// Sets the multicast address (bytes 8..24).
    pub fn set_mcast_addr(&mut self, a: Ipv6Address) {
        self.buffer.as_mut()[field::MCAST_ADDR].copy_from_slice(&a.0);
    }

    /// Sets the v2 query fields (bytes 24..28).
    pub fn set_query_v2(&mut self, q: QueryV3) {
        let b = self.buffer.as_mut();
        b[field::S_QRV] = q.flags_byte();
        b[field::QQIC] = q.qqic;
        b[field::NUM_SOURCES].copy_from_slice(&q.num_sources.to_be_bytes());
    }

    /// Sets source `i` of a v2 query.
    pub fn set_query_source(&mut self, i: usize, a: Ipv6Address) {
        a.write_list(self.buffer.as_mut(), field::SOURCES, i);
    }

    /// Sets a v2 report's reserved field and record count (bytes 4..8).
    pub fn set_num_records(&mut self, n: u16) {
        let b = self.buffer.as_mut();
        b[4..6].fill(0);
        b[field::NUM_RECORDS].copy_from_slice(&n.to_be_bytes());
    }

    /// Mutable access to what follows the v2 report header (the records).
    pub fn records_mut(&mut self) -> &mut [u8] {
        self.buffer
            .as_mut()
            .get_mut(field::RECORDS..)
            .unwrap_or(&mut [])
    }

    /// Computes and stores the checksum over the whole buffer and the pseudo-header.
    pub fn fill_checksum(&mut self, src: Ipv6Address, dst: Ipv6Address) {
        self.set_checksum(0);
        let c = checksum_ipv6_pseudo(src, dst, IpProtocol::Icmpv6, self.buffer.as_ref());
        self.set_checksum(c);
    }
}

/// A parsed MLD message. A v2 query's sources and a v2 report's records are read from the
/// view ([`MldPacket::query_source`], [`MldPacket::records`]) and written with its setters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MldRepr {
    /// A query: general (`::`) or address-specific.
    Query {
        /// Maximum response delay (v1, ms) or code (v2).
        max_resp_code: u16,
        /// The address asked about.
        mcast_addr: Ipv6Address,
        /// The v2 fields, for an MLDv2 query.
        v2: Option<QueryV3>,
    },
    /// An MLDv1 report.
    Report {
        /// The address listened to.
        mcast_addr: Ipv6Address,
    },
    /// An MLDv1 done.
    Done {
        /// The address no longer listened to.
        mcast_addr: Ipv6Address,
    },
    /// An MLDv2 report with this many records.
    ReportV2 {
        /// Number of multicast address records.
        num_records: u16,
    },
}

impl MldRepr {
    /// Parses a checked message. `Malformed` for a non-zero code or a query of 25 to 27
    /// bytes (RFC 3810 §8.1 ignores those); `Unsupported` for other ICMPv6 types. The
    /// checksum is not checked (see [`MldPacket::verify_checksum`]).
    pub fn parse<T: AsRef<[u8]>>(packet: &MldPacket<T>) -> Result<Self> {
        packet.check_len()?;
        if matches!(packet.msg_type(), MldMessage::Unknown(_)) {
            return Err(Error::Unsupported);
        }
        if packet.code() != 0 {
            return Err(Error::Malformed);
        }
        let mcast_addr = packet.mcast_addr();
        Ok(match packet.msg_type() {
            MldMessage::Query => {
                let len = packet.buffer.as_ref().len();
                if len > V1_LEN && len < V2_QUERY_LEN {
                    return Err(Error::Malformed);
                }
                Self::Query {
                    max_resp_code: packet.max_resp_code(),
                    mcast_addr,
                    v2: packet.query_v2(),
                }
            }
            MldMessage::ReportV1 => Self::Report { mcast_addr },
            MldMessage::Done => Self::Done { mcast_addr },
            MldMessage::ReportV2 => Self::ReportV2 {
                num_records: packet.num_records(),
            },
            MldMessage::Unknown(_) => return Err(Error::Unsupported),
        })
    }

    /// Length of the emitted message: 24, 28 plus 16 per source for a v2 query, 8 for the
    /// header of a v2 report (its records are the caller's).
    pub const fn buffer_len(&self) -> usize {
        match self {
            Self::Query { v2: Some(q), .. } => V2_QUERY_LEN + 16 * q.num_sources as usize,
            Self::Query { .. } | Self::Report { .. } | Self::Done { .. } => V1_LEN,
            Self::ReportV2 { .. } => V2_REPORT_HEADER_LEN,
        }
    }

    /// Writes the message with a zero checksum (v2 query sources zeroed); call
    /// [`MldPacket::fill_checksum`] once sources or records are in place.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut MldPacket<T>) {
        packet.set_code(0);
        packet.set_checksum(0);
        match *self {
            Self::Query {
                max_resp_code,
                mcast_addr,
                v2,
            } => {
                packet.set_msg_type(MldMessage::Query);
                packet.set_max_resp_code(max_resp_code);
                packet.set_mcast_addr(mcast_addr);
                if let Some(q) = v2 {
                    packet.set_query_v2(q);
                    let end = self.buffer_len();
                    packet.buffer.as_mut()[V2_QUERY_LEN..end].fill(0);
                }
            }
            Self::Report { mcast_addr } | Self::Done { mcast_addr } => {
                packet.set_msg_type(if matches!(self, Self::Report { .. }) {
                    MldMessage::ReportV1
                } else {
                    MldMessage::Done
                });
                packet.set_max_resp_code(0);
                packet.set_mcast_addr(mcast_addr);
            }
            Self::ReportV2 { num_records } => {
                packet.set_msg_type(MldMessage::ReportV2);
                packet.set_num_records(num_records);
            }
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::wire::igmp::{GroupRecordRepr, GroupRecordType};
    use proptest::prelude::*;

    const SRC: Ipv6Address = Ipv6Address([
        0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0, 0, 0xff, 0xfe, 0, 0, 0x01,
    ]);
    const MLDV2_ROUTERS: Ipv6Address =
        Ipv6Address([0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x16]);
    const GROUP: Ipv6Address = Ipv6Address([0xff, 0x15, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7]);

    /// An MLDv2 report with one CHANGE_TO_EXCLUDE {} record for ff15::7.
    fn v2_report() -> Vec<u8> {
        let mut m = vec![143, 0, 0, 0, 0, 0, 0, 1, 4, 0, 0, 0];
        m.extend_from_slice(&GROUP.0);
        MldPacket::new_unchecked(&mut m[..]).fill_checksum(SRC, MLDV2_ROUTERS);
        m
    }

    #[test]
    fn parses_v2_report() {
        let m = v2_report();
        let p = MldPacket::new_checked(&m[..]).unwrap();
        assert!(p.verify_checksum(SRC, MLDV2_ROUTERS));
        assert!(!p.verify_checksum(SRC, GROUP));
        assert_eq!(MldRepr::parse(&p), Ok(MldRepr::ReportV2 { num_records: 1 }));
        let rec = p.records().next().unwrap();
        let r = GroupRecordRepr::parse(&rec).unwrap();
        assert_eq!(r.record_type, GroupRecordType::ChangeToExclude);
        assert_eq!(r.group_addr, GROUP);
        assert_eq!(r.buffer_len(), 20);
        let mut out = vec![0u8; 28];
        let mut w = MldPacket::new_unchecked(&mut out[..]);
        MldRepr::ReportV2 { num_records: 1 }.emit(&mut w);
        r.emit(&mut AddressRecord::new_unchecked(w.records_mut()));
        w.fill_checksum(SRC, MLDV2_ROUTERS);
        assert_eq!(out, m);
        for len in 0..m.len() {
            let e = MldPacket::new_checked(&m[..len]).err();
            assert_eq!(e, Some(Error::Truncated), "len {len}");
        }
    }

    #[test]
    fn v1_messages_and_queries() {
        for (r, ty) in [
            (MldRepr::Report { mcast_addr: GROUP }, 131),
            (MldRepr::Done { mcast_addr: GROUP }, 132),
            (
                MldRepr::Query {
                    max_resp_code: 10_000,
                    mcast_addr: Ipv6Address::UNSPECIFIED,
                    v2: None,
                },
                130,
            ),
        ] {
            let mut m = vec![0u8; r.buffer_len()];
            let mut w = MldPacket::new_unchecked(&mut m[..]);
            r.emit(&mut w);
            w.fill_checksum(SRC, GROUP);
            assert_eq!((m.len(), m[0]), (24, ty));
            let p = MldPacket::new_checked(&m[..]).unwrap();
            assert!(p.verify_checksum(SRC, GROUP));
            assert_eq!(MldRepr::parse(&p), Ok(r));
            for len in 0..24 {
                let e = MldPacket::new_checked(&m[..len]).err();
                assert_eq!(e, Some(Error::Truncated), "{ty} len {len}");
            }
            let mut c = m.clone();
            c[1] = 1;
            let p = MldPacket::new_checked(&c[..]).unwrap();
            assert_eq!(MldRepr::parse(&p), Err(Error::Malformed));
        }
        // A v2 query: a 28-byte query; 25 to 27 bytes are malformed.
        let q = MldRepr::Query {
            max_resp_code: 1000,
            mcast_addr: Ipv6Address::UNSPECIFIED,
            v2: Some(QueryV3 {
                suppress: true,
                qrv: 2,
                qqic: 125,
                num_sources: 1,
            }),
        };
        let mut m = vec![0u8; q.buffer_len()];
        let mut w = MldPacket::new_unchecked(&mut m[..]);
        q.emit(&mut w);
        w.set_query_source(0, SRC);
        assert_eq!(m[24], 0x0a);
        let p = MldPacket::new_checked(&m[..]).unwrap();
        assert_eq!(MldRepr::parse(&p), Ok(q));
        assert_eq!((p.query_source(0), p.query_source(1)), (Some(SRC), None));
        for len in 25..28 {
            let p = MldPacket::new_checked(&m[..len]).unwrap();
            assert_eq!(MldRepr::parse(&p), Err(Error::Malformed), "len {len}");
        }
        assert_eq!(
            MldPacket::new_checked(&m[..40]).err(),
            Some(Error::Truncated)
        );
        // Echo request: not MLD.
        let echo = [128u8, 0, 0, 0, 0, 0, 0, 0];
        let p = MldPacket::new_checked(&echo[..]).unwrap();
        assert_eq!(MldRepr::parse(&p), Err(Error::Unsupported));
    }

    proptest! {
        #[test]
        fn accessors_never_panic(data in proptest::collection::vec(any::<u8>(), 0..100)) {
            if let Ok(p) = MldPacket::new_checked(&data[..]) {
                let _ = (p.msg_type(), p.code(), p.checksum(), p.max_resp_code());
                let _ = (p.mcast_addr(), p.query_v2(), p.query_source(0));
                let _ = p.verify_checksum(SRC, GROUP);
                for r in p.records() {
                    let _ = GroupRecordRepr::parse(&r).unwrap();
                }
                prop_assert_eq!(p.records().count(), usize::from(p.num_records()));
                if let Ok(r) = MldRepr::parse(&p) {
                    let mut out = vec![0u8; r.buffer_len()];
                    r.emit(&mut MldPacket::new_unchecked(&mut out[..]));
                }
            }
            let u = MldPacket::new_unchecked(&data[..]);
            let _ = (u.records().count(), u.mcast_addr());
        }

        #[test]
        fn repr_round_trip(
            kind in 0u8..4,
            code in any::<u16>(),
            addr in any::<[u8; 16]>(),
            v2 in proptest::option::of((any::<bool>(), 0u8..8, any::<u8>(), 0u16..4)),
        ) {
            let mcast_addr = Ipv6Address(addr);
            let r = match kind {
                0 => MldRepr::Query {
                    max_resp_code: code,
                    mcast_addr,
                    v2: v2.map(|(suppress, qrv, qqic, num_sources)| QueryV3 {
                        suppress, qrv, qqic, num_sources,
                    }),
                },
                1 => MldRepr::Report { mcast_addr },
                2 => MldRepr::Done { mcast_addr },
                _ => MldRepr::ReportV2 { num_records: 0 },
            };
            let mut buf = vec![0u8; r.buffer_len()];
            let mut p = MldPacket::new_unchecked(&mut buf[..]);
            r.emit(&mut p);
            p.fill_checksum(SRC, mcast_addr);
            let p = MldPacket::new_checked(&buf[..]).unwrap();
            prop_assert!(p.verify_checksum(SRC, mcast_addr));
            prop_assert_eq!(MldRepr::parse(&p), Ok(r));
        }
    }
}
