//! IGMP (RFC 1112 v1, RFC 2236 v2, RFC 3376 v3): membership queries and reports, and the
//! group records IGMPv3 and MLDv2 reports share.
//!
//! An IGMP message is the payload of an IPv4 packet (protocol 2, usually with a Router Alert
//! option); its checksum covers the message alone. The group record view
//! ([`GroupRecord`]) is generic over the address it carries, so MLDv2
//! ([`mld`](super::mld)) reuses it with IPv6 addresses.

use core::marker::PhantomData;

use super::ip::{Ipv4Address, Ipv6Address, checksum};
use super::view_constructors;
use super::{Error, Result, be16, enum_with_unknown};

enum_with_unknown! {
    /// The IGMP message type.
    pub enum IgmpMessage(u8) {
        /// Membership query (every version; the length tells v3 from v1/v2).
        MembershipQuery = 0x11,
        /// IGMPv1 membership report.
        MembershipReportV1 = 0x12,
        /// IGMPv2 membership report.
        MembershipReportV2 = 0x16,
        /// IGMPv2 leave group.
        LeaveGroup = 0x17,
        /// IGMPv3 membership report.
        MembershipReportV3 = 0x22,
    }
}

enum_with_unknown! {
    /// The type of an IGMPv3 group record or an MLDv2 multicast address record (the same
    /// numbers in both).
    pub enum GroupRecordType(u8) {
        /// Current state: INCLUDE the listed sources.
        ModeIsInclude = 1,
        /// Current state: EXCLUDE the listed sources.
        ModeIsExclude = 2,
        /// Filter mode changed to INCLUDE.
        ChangeToInclude = 3,
        /// Filter mode changed to EXCLUDE.
        ChangeToExclude = 4,
        /// Sources added.
        AllowNewSources = 5,
        /// Sources removed.
        BlockOldSources = 6,
    }
}

impl GroupRecordType {
    /// Whether a record of this type with no sources says the host left the group: INCLUDE
    /// nothing (`ModeIsInclude` or `ChangeToInclude` with an empty source list).
    pub fn is_leave(self, num_sources: u16) -> bool {
        num_sources == 0 && matches!(self, Self::ModeIsInclude | Self::ChangeToInclude)
    }
}

mod field {
    use core::ops::Range;
    pub(crate) const TYPE: usize = 0;
    pub(crate) const MAX_RESP: usize = 1;
    pub(crate) const CHECKSUM: Range<usize> = 2..4;
    pub(crate) const GROUP: Range<usize> = 4..8;
    // IGMPv3 query.
    pub(crate) const S_QRV: usize = 8;
    pub(crate) const QQIC: usize = 9;
    pub(crate) const NUM_SOURCES: Range<usize> = 10..12;
    pub(crate) const SOURCES: usize = 12;
    // IGMPv3 report.
    pub(crate) const NUM_RECORDS: Range<usize> = 6..8;
    pub(crate) const RECORDS: usize = 8;
}

/// Length of an IGMPv1/v2 message (and of the fixed part of every message).
pub const HEADER_LEN: usize = field::SOURCES - 4;
/// Length of an IGMPv3 query without sources.
pub const V3_QUERY_LEN: usize = field::SOURCES;
/// Length of an IGMPv3 report without records.
pub const V3_REPORT_HEADER_LEN: usize = field::RECORDS;

/// The "suppress router-side processing" bit of a v3 query's flags byte.
const S_FLAG: u8 = 0x08;

/// An address a group record carries: IPv4 (IGMPv3) or IPv6 (MLDv2).
pub trait RecordAddress: Copy {
    /// Its length on the wire.
    const LEN: usize;
    /// Reads it from exactly [`LEN`](Self::LEN) bytes.
    fn read(bytes: &[u8]) -> Self;
    /// Its bytes.
    fn octets(&self) -> &[u8];

    /// Address `i` of a list of `count` addresses that starts at byte `first` of `buffer`;
    /// `None` past the list or the buffer. Never panics.
    fn read_list(buffer: &[u8], first: usize, count: u16, i: usize) -> Option<Self> {
        if i >= usize::from(count) {
            return None;
        }
        let at = first + Self::LEN * i;
        buffer.get(at..at + Self::LEN).map(Self::read)
    }

    /// Writes `self` as address `i` of a list that starts at byte `first` of `buffer`, which
    /// the caller sized for it.
    fn write_list(&self, buffer: &mut [u8], first: usize, i: usize) {
        let at = first + Self::LEN * i;
        buffer[at..at + Self::LEN].copy_from_slice(self.octets());
    }
}

impl RecordAddress for Ipv4Address {
    const LEN: usize = 4;
    fn read(bytes: &[u8]) -> Self {
        Self::from_bytes(bytes)
    }
    fn octets(&self) -> &[u8] {
        &self.0
    }
}

impl RecordAddress for Ipv6Address {
    const LEN: usize = 16;
    fn read(bytes: &[u8]) -> Self {
        Self::from_bytes(bytes)
    }
    fn octets(&self) -> &[u8] {
        &self.0
    }
}

/// A view over a group record of an IGMPv3 report (`A` = [`Ipv4Address`]) or a multicast
/// address record of an MLDv2 report (`A` = [`Ipv6Address`]): type, auxiliary data length (in
/// 32-bit words), number of sources, the group, the sources, the auxiliary data.
#[derive(Debug, Clone)]
pub struct GroupRecord<T: AsRef<[u8]>, A: RecordAddress> {
    buffer: T,
    addr: PhantomData<A>,
}

impl<T: AsRef<[u8]>, A: RecordAddress> GroupRecord<T, A> {
    const GROUP_AT: usize = 4;

    /// Wraps a buffer without checking it (for emitting into a buffer the caller sized).
    pub const fn new_unchecked(buffer: T) -> Self {
        Self {
            buffer,
            addr: PhantomData,
        }
    }

    /// Wraps a buffer, checking it with [`check_len`](Self::check_len): after that no
    /// accessor panics.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let view = Self::new_unchecked(buffer);
        view.check_len()?;
        Ok(view)
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// `Truncated` if the buffer is shorter than the fixed part or than the sources and
    /// auxiliary data it announces.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < Self::GROUP_AT + A::LEN || len < self.record_len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The record's whole length as its fields announce it.
    pub fn record_len(&self) -> usize {
        let b = self.buffer.as_ref();
        if b.len() < 4 {
            return Self::GROUP_AT + A::LEN;
        }
        Self::GROUP_AT
            + A::LEN * (1 + usize::from(be16(b, 2)))
            + 4 * usize::from(self.aux_data_len())
    }

    /// Record type.
    pub fn record_type(&self) -> GroupRecordType {
        GroupRecordType::from(self.buffer.as_ref()[0])
    }

    /// Auxiliary data length, in 32-bit words.
    pub fn aux_data_len(&self) -> u8 {
        self.buffer.as_ref()[1]
    }

    /// Number of sources.
    pub fn num_sources(&self) -> u16 {
        be16(self.buffer.as_ref(), 2)
    }

    /// The group (multicast address) the record is about.
    pub fn group_addr(&self) -> A {
        A::read(&self.buffer.as_ref()[Self::GROUP_AT..Self::GROUP_AT + A::LEN])
    }

    /// Source `i`; `None` past the sources present. Never panics.
    pub fn source(&self, i: usize) -> Option<A> {
        let first = Self::GROUP_AT + A::LEN;
        A::read_list(self.buffer.as_ref(), first, self.num_sources(), i)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>, A: RecordAddress> GroupRecord<T, A> {
    /// Sets the record type.
    pub fn set_record_type(&mut self, v: GroupRecordType) {
        self.buffer.as_mut()[0] = v.into();
    }

    /// Sets the auxiliary data length (32-bit words).
    pub fn set_aux_data_len(&mut self, v: u8) {
        self.buffer.as_mut()[1] = v;
    }

    /// Sets the number of sources.
    pub fn set_num_sources(&mut self, v: u16) {
        self.buffer.as_mut()[2..4].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the group.
    pub fn set_group_addr(&mut self, a: A) {
        self.buffer.as_mut()[Self::GROUP_AT..Self::GROUP_AT + A::LEN].copy_from_slice(a.octets());
    }

    /// Sets source `i`.
    ///
    /// # Panics
    /// If the buffer is too short for it.
    pub fn set_source(&mut self, i: usize, a: A) {
        a.write_list(self.buffer.as_mut(), Self::GROUP_AT + A::LEN, i);
    }
}

/// The fixed fields of a group record; the sources and auxiliary data follow it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GroupRecordRepr<A: RecordAddress> {
    /// Record type.
    pub record_type: GroupRecordType,
    /// Auxiliary data length, in 32-bit words (0 in IGMPv3 and MLDv2 as sent).
    pub aux_data_len: u8,
    /// Number of sources.
    pub num_sources: u16,
    /// The group.
    pub group_addr: A,
}

impl<A: RecordAddress> GroupRecordRepr<A> {
    /// Parses a checked record.
    pub fn parse<T: AsRef<[u8]>>(record: &GroupRecord<T, A>) -> Result<Self> {
        record.check_len()?;
        Ok(Self {
            record_type: record.record_type(),
            aux_data_len: record.aux_data_len(),
            num_sources: record.num_sources(),
            group_addr: record.group_addr(),
        })
    }

    /// Whether the record says the host left the group (see [`GroupRecordType::is_leave`]).
    pub fn is_leave(&self) -> bool {
        self.record_type.is_leave(self.num_sources)
    }

    /// Length of the whole record, sources and auxiliary data included.
    pub const fn buffer_len(&self) -> usize {
        4 + A::LEN * (1 + self.num_sources as usize) + 4 * self.aux_data_len as usize
    }

    /// Writes the fixed fields; the sources (with [`GroupRecord::set_source`]) and auxiliary
    /// data are the caller's.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, record: &mut GroupRecord<T, A>) {
        record.set_record_type(self.record_type);
        record.set_aux_data_len(self.aux_data_len);
        record.set_num_sources(self.num_sources);
        record.set_group_addr(self.group_addr);
    }
}

/// The records of an IGMPv3 or MLDv2 report, in order; ends early (never panics) at a
/// record that does not fit.
#[derive(Debug, Clone)]
pub struct GroupRecords<'a, A: RecordAddress> {
    rest: &'a [u8],
    left: u16,
    addr: PhantomData<A>,
}

impl<'a, A: RecordAddress> GroupRecords<'a, A> {
    /// The `count` records at the start of `rest`.
    pub(crate) fn new(rest: &'a [u8], count: u16) -> Self {
        Self {
            rest,
            left: count,
            addr: PhantomData,
        }
    }

    /// Checks that all records are present.
    pub(crate) fn check(self) -> Result<()> {
        let mut it = self;
        while it.left > 0 {
            if it.next().is_none() {
                return Err(Error::Truncated);
            }
        }
        Ok(())
    }
}

impl<'a, A: RecordAddress> Iterator for GroupRecords<'a, A> {
    type Item = GroupRecord<&'a [u8], A>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        let Ok(r) = GroupRecord::<_, A>::new_checked(self.rest) else {
            self.left = 0;
            return None;
        };
        let (this, rest) = self.rest.split_at(r.record_len());
        self.rest = rest;
        self.left -= 1;
        Some(GroupRecord::new_unchecked(this))
    }
}

/// The fields of an IGMPv3 query after the group (and of an MLDv2 query after the address).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct QueryV3 {
    /// Suppress router-side processing.
    pub suppress: bool,
    /// Querier's robustness variable (0..=7).
    pub qrv: u8,
    /// Querier's query interval code.
    pub qqic: u8,
    /// Number of sources listed after these fields.
    pub num_sources: u16,
}

impl QueryV3 {
    pub(crate) fn flags_byte(&self) -> u8 {
        (if self.suppress { S_FLAG } else { 0 }) | (self.qrv & 0x07)
    }

    pub(crate) fn from_bytes(flags: u8, qqic: u8, num_sources: u16) -> Self {
        Self {
            suppress: flags & S_FLAG != 0,
            qrv: flags & 0x07,
            qqic,
            num_sources,
        }
    }
}

/// A view over an IGMP message (the whole IPv4 payload).
#[derive(Debug, Clone)]
pub struct IgmpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

/// Short name for [`IgmpPacket`].
pub type Packet<T> = IgmpPacket<T>;
/// Short name for [`IgmpRepr`].
pub type Repr = IgmpRepr;

view_constructors!(IgmpPacket);

impl<T: AsRef<[u8]>> IgmpPacket<T> {
    /// `Truncated` if the buffer is shorter than 8 bytes, than an IGMPv3 query's sources (a
    /// query of 12 bytes or more is v3) or than an IGMPv3 report's records.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.is_v3_query() && V3_QUERY_LEN + 4 * usize::from(self.num_sources()) > len {
            return Err(Error::Truncated);
        }
        if self.msg_type() == IgmpMessage::MembershipReportV3 {
            if len < V3_REPORT_HEADER_LEN {
                return Err(Error::Truncated);
            }
            self.records().check()?;
        }
        Ok(())
    }

    /// Message type.
    pub fn msg_type(&self) -> IgmpMessage {
        IgmpMessage::from(self.buffer.as_ref()[field::TYPE])
    }

    /// Max response code (tenths of a second in v2; 0 in a v1 query; an exponential code in
    /// v3 from 128 on).
    pub fn max_resp_code(&self) -> u8 {
        self.buffer.as_ref()[field::MAX_RESP]
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM.start)
    }

    /// The group address of a query, v1/v2 report or leave (in a v3 report these bytes are
    /// reserved and the record count).
    pub fn group_addr(&self) -> Ipv4Address {
        Ipv4Address::from_bytes(&self.buffer.as_ref()[field::GROUP])
    }

    /// Whether this is an IGMPv3 query: a query of at least 12 bytes.
    pub fn is_v3_query(&self) -> bool {
        let b = self.buffer.as_ref();
        b.len() >= V3_QUERY_LEN && self.msg_type() == IgmpMessage::MembershipQuery
    }

    /// The v3 query fields; `None` unless [`is_v3_query`](Self::is_v3_query).
    pub fn query_v3(&self) -> Option<QueryV3> {
        let b = self.buffer.as_ref();
        self.is_v3_query()
            .then(|| QueryV3::from_bytes(b[field::S_QRV], b[field::QQIC], self.num_sources()))
    }

    /// A v3 query's number of sources (0 for anything else).
    fn num_sources(&self) -> u16 {
        let b = self.buffer.as_ref();
        if self.is_v3_query() {
            be16(b, field::NUM_SOURCES.start)
        } else {
            0
        }
    }

    /// Source `i` of a v3 query; `None` past its sources or for other messages.
    pub fn query_source(&self, i: usize) -> Option<Ipv4Address> {
        RecordAddress::read_list(self.buffer.as_ref(), field::SOURCES, self.num_sources(), i)
    }

    /// A v3 report's number of group records (0 for anything else).
    pub fn num_records(&self) -> u16 {
        let b = self.buffer.as_ref();
        if b.len() >= V3_REPORT_HEADER_LEN && self.msg_type() == IgmpMessage::MembershipReportV3 {
            be16(b, field::NUM_RECORDS.start)
        } else {
            0
        }
    }

    /// The group records of a v3 report (none for other messages).
    pub fn records(&self) -> GroupRecords<'_, Ipv4Address> {
        let rest = self.buffer.as_ref().get(field::RECORDS..).unwrap_or(&[]);
        GroupRecords::new(rest, self.num_records())
    }

    /// Whether the checksum over the whole buffer is right.
    pub fn verify_checksum(&self) -> bool {
        checksum::of(self.buffer.as_ref()) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> IgmpPacket<T> {
    /// Sets the message type.
    pub fn set_msg_type(&mut self, v: IgmpMessage) {
        self.buffer.as_mut()[field::TYPE] = v.into();
    }

    /// Sets the max response code.
    pub fn set_max_resp_code(&mut self, v: u8) {
        self.buffer.as_mut()[field::MAX_RESP] = v;
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        self.buffer.as_mut()[field::CHECKSUM].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the group address (bytes 4..8).
    pub fn set_group_addr(&mut self, a: Ipv4Address) {
        self.buffer.as_mut()[field::GROUP].copy_from_slice(&a.0);
    }

    /// Sets the v3 query fields (bytes 8..12).
    pub fn set_query_v3(&mut self, q: QueryV3) {
        let b = self.buffer.as_mut();
        b[field::S_QRV] = q.flags_byte();
        b[field::QQIC] = q.qqic;
        b[field::NUM_SOURCES].copy_from_slice(&q.num_sources.to_be_bytes());
    }

    /// Sets source `i` of a v3 query.
    pub fn set_query_source(&mut self, i: usize, a: Ipv4Address) {
        a.write_list(self.buffer.as_mut(), field::SOURCES, i);
    }

    /// Sets a v3 report's reserved field and record count (bytes 4..8).
    pub fn set_num_records(&mut self, n: u16) {
        let b = self.buffer.as_mut();
        b[4..6].fill(0);
        b[field::NUM_RECORDS].copy_from_slice(&n.to_be_bytes());
    }

    /// Mutable access to what follows the v3 report header (the records).
    pub fn records_mut(&mut self) -> &mut [u8] {
        self.buffer
            .as_mut()
            .get_mut(field::RECORDS..)
            .unwrap_or(&mut [])
    }

    /// Computes and stores the checksum over the whole buffer.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::of(self.buffer.as_ref());
        self.set_checksum(c);
    }
}

/// The IGMP version of a v1/v2 report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IgmpVersion {
    /// RFC 1112.
    V1,
    /// RFC 2236.
    V2,
}

/// A parsed IGMP message. A v3 query's sources and a v3 report's records are read from the
/// view ([`IgmpPacket::query_source`], [`IgmpPacket::records`]) and written with its setters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IgmpRepr {
    /// A membership query: general (group 0) or group-specific.
    MembershipQuery {
        /// Max response code.
        max_resp_code: u8,
        /// The group asked about (0 for a general query).
        group_addr: Ipv4Address,
        /// The v3 fields, for an IGMPv3 query.
        v3: Option<QueryV3>,
    },
    /// A v1 or v2 membership report.
    MembershipReport {
        /// Which version.
        version: IgmpVersion,
        /// The group joined.
        group_addr: Ipv4Address,
    },
    /// A v2 leave.
    LeaveGroup {
        /// The group left.
        group_addr: Ipv4Address,
    },
    /// A v3 report with this many group records.
    MembershipReportV3 {
        /// Number of group records.
        num_records: u16,
    },
}

impl IgmpRepr {
    /// Parses a checked message. `Malformed` for a query of 9 to 11 bytes (RFC 3376 §7.1
    /// ignores those); `Unsupported` for other message types. The checksum is not checked
    /// (see [`IgmpPacket::verify_checksum`]).
    pub fn parse<T: AsRef<[u8]>>(packet: &IgmpPacket<T>) -> Result<Self> {
        packet.check_len()?;
        let group_addr = packet.group_addr();
        Ok(match packet.msg_type() {
            IgmpMessage::MembershipQuery => {
                let len = packet.buffer.as_ref().len();
                if len > HEADER_LEN && len < V3_QUERY_LEN {
                    return Err(Error::Malformed);
                }
                Self::MembershipQuery {
                    max_resp_code: packet.max_resp_code(),
                    group_addr,
                    v3: packet.query_v3(),
                }
            }
            IgmpMessage::MembershipReportV1 => Self::MembershipReport {
                version: IgmpVersion::V1,
                group_addr,
            },
            IgmpMessage::MembershipReportV2 => Self::MembershipReport {
                version: IgmpVersion::V2,
                group_addr,
            },
            IgmpMessage::LeaveGroup => Self::LeaveGroup { group_addr },
            IgmpMessage::MembershipReportV3 => Self::MembershipReportV3 {
                num_records: packet.num_records(),
            },
            IgmpMessage::Unknown(_) => return Err(Error::Unsupported),
        })
    }

    /// Length of the emitted message: 8, 12 plus 4 per source for a v3 query, 8 for the
    /// header of a v3 report (its records are the caller's).
    pub const fn buffer_len(&self) -> usize {
        match self {
            Self::MembershipQuery { v3: Some(q), .. } => V3_QUERY_LEN + 4 * q.num_sources as usize,
            Self::MembershipReportV3 { .. } => V3_REPORT_HEADER_LEN,
            _ => HEADER_LEN,
        }
    }

    /// Writes the message with a zero checksum (v3 query sources zeroed); call
    /// [`IgmpPacket::fill_checksum`] once sources or records are in place.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut IgmpPacket<T>) {
        packet.set_checksum(0);
        match *self {
            Self::MembershipQuery {
                max_resp_code,
                group_addr,
                v3,
            } => {
                packet.set_msg_type(IgmpMessage::MembershipQuery);
                packet.set_max_resp_code(max_resp_code);
                packet.set_group_addr(group_addr);
                if let Some(q) = v3 {
                    packet.set_query_v3(q);
                    let end = self.buffer_len();
                    packet.buffer.as_mut()[V3_QUERY_LEN..end].fill(0);
                }
            }
            Self::MembershipReport {
                version,
                group_addr,
            } => {
                packet.set_msg_type(match version {
                    IgmpVersion::V1 => IgmpMessage::MembershipReportV1,
                    IgmpVersion::V2 => IgmpMessage::MembershipReportV2,
                });
                packet.set_max_resp_code(0);
                packet.set_group_addr(group_addr);
            }
            Self::LeaveGroup { group_addr } => {
                packet.set_msg_type(IgmpMessage::LeaveGroup);
                packet.set_max_resp_code(0);
                packet.set_group_addr(group_addr);
            }
            Self::MembershipReportV3 { num_records } => {
                packet.set_msg_type(IgmpMessage::MembershipReportV3);
                packet.set_max_resp_code(0);
                packet.set_num_records(num_records);
            }
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use proptest::prelude::*;

    /// An IGMPv2 report for 224.0.0.251 (as Linux sends it for mDNS), checksum valid.
    const V2_REPORT: [u8; 8] = [0x16, 0x00, 0x09, 0x04, 0xe0, 0x00, 0x00, 0xfb];

    /// An IGMPv3 report with two records: CHANGE_TO_EXCLUDE {} for 239.1.1.1 and
    /// ALLOW_NEW_SOURCES {10.0.0.9} for 232.1.1.1; checksum valid.
    const V3_REPORT: [u8; 32] = [
        0x22, 0x00, 0xf1, 0xed, 0x00, 0x00, 0x00, 0x02, // header: 2 records
        0x04, 0x00, 0x00, 0x00, 0xef, 0x01, 0x01, 0x01, // TO_EX {} 239.1.1.1
        0x05, 0x00, 0x00, 0x01, 0xe8, 0x01, 0x01, 0x01, // ALLOW 232.1.1.1
        0x0a, 0x00, 0x00, 0x09, // source 10.0.0.9
        0xde, 0xad, 0xbe, 0xef, // not part of the report (trailing bytes are ignored)
    ];

    /// An IGMPv3 general query: max resp 100 (10 s), S clear, QRV 2, QQIC 125, no sources.
    const V3_QUERY: [u8; 12] = [
        0x11, 0x64, 0xec, 0x1e, 0x00, 0x00, 0x00, 0x00, 0x02, 0x7d, 0x00, 0x00,
    ];

    #[test]
    fn parses_v2_report() {
        let p = IgmpPacket::new_checked(&V2_REPORT[..]).unwrap();
        assert_eq!(p.msg_type(), IgmpMessage::MembershipReportV2);
        assert_eq!(p.group_addr().to_string(), "224.0.0.251");
        assert!(p.verify_checksum());
        let r = IgmpRepr::parse(&p).unwrap();
        assert_eq!(
            r,
            IgmpRepr::MembershipReport {
                version: IgmpVersion::V2,
                group_addr: Ipv4Address([224, 0, 0, 251])
            }
        );
        let mut out = [0xffu8; 8];
        let mut q = IgmpPacket::new_unchecked(&mut out[..]);
        r.emit(&mut q);
        q.fill_checksum();
        assert_eq!(out, V2_REPORT);
        let mut bad = V2_REPORT;
        bad[7] ^= 1;
        assert!(!IgmpPacket::new_checked(&bad[..]).unwrap().verify_checksum());
    }

    #[test]
    fn parses_v3_report_records() {
        let msg = &V3_REPORT[..28];
        let p = IgmpPacket::new_checked(msg).unwrap();
        assert!(p.verify_checksum());
        assert_eq!(p.num_records(), 2);
        assert_eq!(
            IgmpRepr::parse(&p),
            Ok(IgmpRepr::MembershipReportV3 { num_records: 2 })
        );
        let recs: Vec<_> = p.records().collect();
        assert_eq!(recs.len(), 2);
        let r0 = GroupRecordRepr::parse(&recs[0]).unwrap();
        assert_eq!(r0.record_type, GroupRecordType::ChangeToExclude);
        assert_eq!(r0.group_addr, Ipv4Address([239, 1, 1, 1]));
        assert!(!r0.is_leave());
        assert_eq!(recs[1].record_type(), GroupRecordType::AllowNewSources);
        assert_eq!(recs[1].source(0), Some(Ipv4Address([10, 0, 0, 9])));
        assert_eq!(recs[1].source(1), None);
        assert_eq!(recs[1].record_len(), 12);
        // Emit header and records again: the same bytes.
        let mut out = [0u8; 28];
        let mut q = IgmpPacket::new_unchecked(&mut out[..]);
        IgmpRepr::MembershipReportV3 { num_records: 2 }.emit(&mut q);
        let recs_out = q.records_mut();
        let (a, b) = recs_out.split_at_mut(8);
        r0.emit(&mut GroupRecord::new_unchecked(a));
        let r1 = GroupRecordRepr::parse(&recs[1]).unwrap();
        assert_eq!(r1.buffer_len(), 12);
        let mut g = GroupRecord::new_unchecked(b);
        r1.emit(&mut g);
        g.set_source(0, Ipv4Address([10, 0, 0, 9]));
        q.fill_checksum();
        assert_eq!(&out[..], msg);
        // A record count past the records present is truncated.
        let mut more = msg.to_vec();
        more[7] = 3;
        assert_eq!(
            IgmpPacket::new_checked(&more[..]).err(),
            Some(Error::Truncated)
        );
        // A source count past the end, too.
        let mut src = msg.to_vec();
        src[19] = 2;
        assert_eq!(
            IgmpPacket::new_checked(&src[..]).err(),
            Some(Error::Truncated)
        );
    }

    #[test]
    fn leave_records() {
        for (t, n, leave) in [
            (1u8, 0u16, true),
            (3, 0, true),
            (3, 1, false),
            (2, 0, false),
        ] {
            assert_eq!(GroupRecordType::from(t).is_leave(n), leave, "{t} {n}");
        }
    }

    #[test]
    fn parses_queries() {
        let p = IgmpPacket::new_checked(&V3_QUERY[..]).unwrap();
        assert!(p.is_v3_query() && p.verify_checksum());
        let r = IgmpRepr::parse(&p).unwrap();
        let q = QueryV3 {
            suppress: false,
            qrv: 2,
            qqic: 125,
            num_sources: 0,
        };
        assert_eq!(
            r,
            IgmpRepr::MembershipQuery {
                max_resp_code: 100,
                group_addr: Ipv4Address::UNSPECIFIED,
                v3: Some(q)
            }
        );
        let mut out = [0u8; 12];
        let mut w = IgmpPacket::new_unchecked(&mut out[..]);
        r.emit(&mut w);
        w.fill_checksum();
        assert_eq!(out, V3_QUERY);
        // The v2 query is the first 8 bytes; 9 to 11 bytes are malformed.
        let v2 = IgmpPacket::new_checked(&V3_QUERY[..8]).unwrap();
        assert!(matches!(
            IgmpRepr::parse(&v2),
            Ok(IgmpRepr::MembershipQuery { v3: None, .. })
        ));
        for len in 9..12 {
            let p = IgmpPacket::new_checked(&V3_QUERY[..len]).unwrap();
            assert_eq!(IgmpRepr::parse(&p), Err(Error::Malformed), "len {len}");
        }
        // Sources announced but missing.
        let mut s = V3_QUERY;
        s[11] = 1;
        assert_eq!(
            IgmpPacket::new_checked(&s[..]).err(),
            Some(Error::Truncated)
        );
        let mut unknown = V2_REPORT;
        unknown[0] = 0x13; // DVMRP
        let p = IgmpPacket::new_checked(&unknown[..]).unwrap();
        assert_eq!(p.msg_type(), IgmpMessage::Unknown(0x13));
        assert_eq!(IgmpRepr::parse(&p), Err(Error::Unsupported));
    }

    #[test]
    fn every_truncation_is_an_error() {
        for len in 0..8 {
            let e = IgmpPacket::new_checked(&V2_REPORT[..len]).err();
            assert_eq!(e, Some(Error::Truncated), "len {len}");
        }
        for len in 8..28 {
            let e = IgmpPacket::new_checked(&V3_REPORT[..len]).err();
            assert_eq!(e, Some(Error::Truncated), "v3 len {len}");
        }
    }

    fn arb_repr() -> impl Strategy<Value = IgmpRepr> {
        let addr = any::<[u8; 4]>().prop_map(Ipv4Address);
        prop_oneof![
            (
                any::<u8>(),
                addr.clone(),
                proptest::option::of((any::<bool>(), 0u8..8, any::<u8>(), 0u16..8))
            )
                .prop_map(|(m, g, v3)| IgmpRepr::MembershipQuery {
                    max_resp_code: m,
                    group_addr: g,
                    v3: v3.map(|(suppress, qrv, qqic, num_sources)| QueryV3 {
                        suppress,
                        qrv,
                        qqic,
                        num_sources
                    }),
                }),
            (any::<bool>(), addr.clone()).prop_map(|(v1, g)| IgmpRepr::MembershipReport {
                version: if v1 { IgmpVersion::V1 } else { IgmpVersion::V2 },
                group_addr: g,
            }),
            addr.prop_map(|g| IgmpRepr::LeaveGroup { group_addr: g }),
            Just(IgmpRepr::MembershipReportV3 { num_records: 0 }),
        ]
    }

    proptest! {
        #[test]
        fn accessors_never_panic(data in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(p) = IgmpPacket::new_checked(&data[..]) {
                let _ = (p.msg_type(), p.max_resp_code(), p.checksum(), p.group_addr());
                let _ = (p.query_v3(), p.query_source(0), p.verify_checksum());
                for r in p.records() {
                    let _ = (r.record_type(), r.group_addr(), r.source(0));
                    let _ = GroupRecordRepr::parse(&r).unwrap();
                }
                prop_assert_eq!(p.records().count(), usize::from(p.num_records()));
                if let Ok(r) = IgmpRepr::parse(&p) {
                    let mut out = vec![0u8; r.buffer_len()];
                    r.emit(&mut IgmpPacket::new_unchecked(&mut out[..]));
                }
            }
            let u = IgmpPacket::new_unchecked(&data[..]);
            let _ = (u.records().count(), u.num_records());
        }

        #[test]
        fn repr_round_trip(r in arb_repr(), sources in any::<[u8; 4]>()) {
            let mut buf = vec![0u8; r.buffer_len()];
            let mut p = IgmpPacket::new_unchecked(&mut buf[..]);
            r.emit(&mut p);
            if let IgmpRepr::MembershipQuery { v3: Some(q), .. } = r {
                for i in 0..usize::from(q.num_sources) {
                    p.set_query_source(i, Ipv4Address(sources));
                }
            }
            p.fill_checksum();
            let p = IgmpPacket::new_checked(&buf[..]).unwrap();
            prop_assert!(p.verify_checksum());
            prop_assert_eq!(IgmpRepr::parse(&p), Ok(r));
            if let IgmpRepr::MembershipQuery { v3: Some(q), .. } = r {
                prop_assert_eq!(p.query_source(usize::from(q.num_sources)), None);
                if q.num_sources > 0 {
                    prop_assert_eq!(p.query_source(0), Some(Ipv4Address(sources)));
                }
            }
        }
    }
}
