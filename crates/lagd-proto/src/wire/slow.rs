//! Slow Protocols (IEEE 802.3 Annex 57A): the LACPDU and the Marker PDU of IEEE 802.1AX.
//!
//! Slow Protocols frames are untagged Ethernet II frames with EtherType 0x8809, sent to the
//! multicast address 01:80:c2:00:00:02. The first payload byte is the *subtype*: 1 for LACP
//! (802.1AX-2014 §6.4.2), 2 for the Marker protocol (802.1AX-2014 §6.5). Everything in this
//! module works on the slow-protocol *payload* (starting at the subtype byte) unless the name
//! says `frame`.
//!
//! # LACPDU layout (802.1AX-2014 §6.4.2.3, LACPDU structure)
//!
//! | Payload offset | Len | Field |
//! |---|---|---|
//! | 0 | 1 | subtype = 1 |
//! | 1 | 1 | version (1; 2 for 802.1AX-2014 version 2 LACPDUs) |
//! | 2 | 20 | Actor Information TLV: type 1, length 20, system priority, system, key, port priority, port, state, 3 reserved |
//! | 22 | 20 | Partner Information TLV: type 2, length 20, same fields |
//! | 42 | 16 | Collector Information TLV: type 3, length 16, max delay, 12 reserved |
//! | 58 | n | further TLVs (version 2 TLVs, 802.1AX-2014 §6.4.2.4), kept as [`Tlv`] |
//! | 58 + n | 2 | Terminator TLV: type 0, length 0 |
//! | 60 + n | … | reserved / pad, zero |
//!
//! A TLV's length byte counts the whole TLV, type and length bytes included. A version 1
//! LACPDU is exactly [`LACPDU_LEN`] = 110 bytes (124 with the Ethernet header): the 50 bytes
//! after the Terminator are reserved. When extra TLVs are present they take the place of
//! reserved bytes; this module pads an emitted LACPDU to 110 bytes and never beyond what the
//! TLVs need.
//!
//! # Marker PDU layout (802.1AX-2014 §6.5.3, Marker and Marker Response PDU structure)
//!
//! | Payload offset | Len | Field |
//! |---|---|---|
//! | 0 | 1 | subtype = 2 |
//! | 1 | 1 | version = 1 |
//! | 2 | 1 | TLV type: 1 Marker Information, 2 Marker Response |
//! | 3 | 1 | TLV length = 16 (0x10) |
//! | 4 | 2 | requester port |
//! | 6 | 6 | requester system |
//! | 12 | 4 | requester transaction id |
//! | 16 | 2 | pad, zero |
//! | 18 | 2 | Terminator TLV: type 0, length 0 |
//! | 20 | 90 | reserved, zero |
//!
//! A Marker Response is the Marker Information echoed back with the TLV type changed to 2
//! (the Marker Responder, 802.1AX-2014 §6.5.4); see [`MarkerRepr::to_response`].
//!
//! # Validation policy
//!
//! Peer input never panics: every problem is an [`Error`]. The rules are deliberately close to
//! what the Linux bonding driver accepts, tightened only where a PDU could not be understood:
//!
//! - **Length.** Both PDUs must be at least 110 bytes ([`LACPDU_LEN`], [`MARKER_PDU_LEN`]),
//!   as in Linux; shorter is [`Error::Truncated`]. Bytes past the end of the PDU (Ethernet
//!   padding, a frame check sequence) are ignored.
//! - **Subtype.** [`SlowPdu::parse`] dispatches on it and returns [`SlowPdu::Unknown`] for
//!   anything but 1 and 2 (OAM, ESMC, …). [`LacpRepr::parse`] / [`MarkerRepr::parse`] given the
//!   other subtype return [`Error::Unsupported`], as do the `parse_frame` functions given a
//!   frame whose (outer) EtherType is not 0x8809 — slow protocol frames are never VLAN-tagged.
//! - **Version.** Not checked, as Linux does not check it and 802.1AX (§6.4.2.3, §6.4.2.4)
//!   expects a receiver to handle a later version's LACPDU through the fields it knows. The LACP version is
//!   kept in [`LacpRepr::version`]; the Marker version is ignored and written as 1.
//! - **Actor, Partner and Collector TLVs.** Their TLV types (1, 2, 3) and lengths (20, 20, 16)
//!   are fixed by every version of the standard, and fields are found at fixed offsets. Linux
//!   does not look at them; lagd treats a mismatch as [`Error::Malformed`] (the daemon counts it
//!   as an illegal LACPDU), because a PDU that gets them wrong was not built to this layout and
//!   its fields cannot be trusted.
//! - **Further TLVs.** Everything between the Collector TLV and the Terminator is kept as
//!   [`Tlv`]s, whatever its type, so that version 2 (and later) LACPDUs (802.1AX-2014
//!   §6.4.2.4) are accepted and a TLV lagd does not know is skipped, not rejected. A TLV whose
//!   length is below 2 cannot be skipped and is [`Error::Malformed`]; one that runs past the
//!   end of the buffer, or a buffer that ends before a Terminator, is [`Error::Truncated`]. The
//!   Terminator's own length byte is not checked.
//! - **Marker TLV.** The type is kept as [`MarkerKind`] (unknown values as
//!   `MarkerKind::Unknown`). The length must be 16 (0x10) as 802.1AX-2014 §6.5.3 says;
//!   0x16 (22) is also accepted because the Linux bonding header documents that value in the
//!   comment of its marker structure (a decimal/hex mix-up), so a peer may copy it. Any other
//!   length is [`Error::Malformed`]. We always emit 16 (Wireshark flags 0x16 as "TLV is not
//!   expected length").
//! - **Reserved and pad bytes** are ignored on parse and written as zero on emit.

use core::fmt;
use core::ops::{BitAnd, BitAndAssign, BitOr, BitOrAssign, Not};

use super::ethernet::{EtherType, EthernetAddress, EthernetFrame, HEADER_LEN};
use super::view_constructors;
use super::{Error, Result, be16, be32, enum_with_unknown};

/// Length of a version 1 LACPDU, from the subtype byte to the end of the reserved bytes.
pub const LACPDU_LEN: usize = 110;
/// Length of a Marker PDU, from the subtype byte to the end of the reserved bytes.
pub const MARKER_PDU_LEN: usize = 110;
/// The LACP version this module emits by default.
pub const LACP_VERSION: u8 = 1;
/// The Marker protocol version this module emits.
pub const MARKER_VERSION: u8 = 1;
/// TLV type of the Actor Information TLV.
pub const TLV_ACTOR: u8 = 1;
/// TLV type of the Partner Information TLV.
pub const TLV_PARTNER: u8 = 2;
/// TLV type of the Collector Information TLV.
pub const TLV_COLLECTOR: u8 = 3;
/// TLV type of the Terminator TLV.
pub const TLV_TERMINATOR: u8 = 0;
/// Length of the Actor and Partner Information TLVs.
pub const INFO_TLV_LEN: u8 = 20;
/// Length of the Collector Information TLV.
pub const COLLECTOR_TLV_LEN: u8 = 16;
/// Length of the Marker Information / Marker Response TLV (802.1AX-2014 §6.5.3).
pub const MARKER_TLV_LEN: u8 = 16;
/// A Marker TLV length that is wrong but accepted on parse (see the module docs).
pub const MARKER_TLV_LEN_LEGACY: u8 = 0x16;

enum_with_unknown! {
    /// The Slow Protocols subtype, the first payload byte (IEEE 802.3 Table 57A-3).
    pub enum SlowSubtype(u8) {
        /// Link Aggregation Control Protocol.
        Lacp = 1,
        /// Link Aggregation Marker protocol.
        Marker = 2,
    }
}

enum_with_unknown! {
    /// The TLV type of a Marker PDU.
    pub enum MarkerKind(u8) {
        /// Marker Information: a request to be echoed back.
        Information = 1,
        /// Marker Response: the echo.
        Response = 2,
    }
}

/// The Actor_State / Partner_State octet of a LACPDU (802.1AX-2014 §6.4.2.3).
///
/// A plain newtype over the wire byte; unknown combinations are kept as they are.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct PortState(pub u8);

impl PortState {
    /// LACP_Activity: active (set) or passive (clear).
    pub const ACTIVITY: Self = Self(0x01);
    /// LACP_Timeout: short timeout, fast rate (set) or long timeout (clear).
    pub const TIMEOUT: Self = Self(0x02);
    /// Aggregation: aggregatable (set) or individual (clear).
    pub const AGGREGATION: Self = Self(0x04);
    /// Synchronization: the link is in sync (attached to the right aggregator).
    pub const SYNCHRONIZATION: Self = Self(0x08);
    /// Collecting: collection of incoming frames is enabled.
    pub const COLLECTING: Self = Self(0x10);
    /// Distributing: distribution of outgoing frames is enabled.
    pub const DISTRIBUTING: Self = Self(0x20);
    /// Defaulted: the partner information in use is the administrative default.
    pub const DEFAULTED: Self = Self(0x40);
    /// Expired: the receive machine is in the EXPIRED state.
    pub const EXPIRED: Self = Self(0x80);
    /// No bit set.
    pub const EMPTY: Self = Self(0);

    /// Each bit with its name, lowest bit first.
    pub const NAMED: [(Self, &'static str); 8] = [
        (Self::ACTIVITY, "activity"),
        (Self::TIMEOUT, "timeout"),
        (Self::AGGREGATION, "aggregation"),
        (Self::SYNCHRONIZATION, "synchronization"),
        (Self::COLLECTING, "collecting"),
        (Self::DISTRIBUTING, "distributing"),
        (Self::DEFAULTED, "defaulted"),
        (Self::EXPIRED, "expired"),
    ];

    /// The raw byte.
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// Whether every bit of `other` is set in `self`.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether any bit of `other` is set in `self`.
    pub const fn intersects(self, other: Self) -> bool {
        self.0 & other.0 != 0
    }

    /// Whether no bit is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Sets the bits of `other`.
    pub fn insert(&mut self, other: Self) {
        self.0 |= other.0;
    }

    /// Clears the bits of `other`.
    pub fn remove(&mut self, other: Self) {
        self.0 &= !other.0;
    }

    /// Sets (`on`) or clears the bits of `other`.
    pub fn set(&mut self, other: Self, on: bool) {
        if on {
            self.insert(other);
        } else {
            self.remove(other);
        }
    }

    /// The names of the set bits, lowest bit first (`activity`, `timeout`, …).
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        Self::NAMED
            .into_iter()
            .filter(move |(bit, _)| self.contains(*bit))
            .map(|(_, name)| name)
    }
}

impl BitOr for PortState {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

impl BitOrAssign for PortState {
    fn bitor_assign(&mut self, rhs: Self) {
        self.0 |= rhs.0;
    }
}

impl BitAnd for PortState {
    type Output = Self;
    fn bitand(self, rhs: Self) -> Self {
        Self(self.0 & rhs.0)
    }
}

impl BitAndAssign for PortState {
    fn bitand_assign(&mut self, rhs: Self) {
        self.0 &= rhs.0;
    }
}

impl Not for PortState {
    type Output = Self;
    fn not(self) -> Self {
        Self(!self.0)
    }
}

impl From<u8> for PortState {
    fn from(bits: u8) -> Self {
        Self(bits)
    }
}

impl From<PortState> for u8 {
    fn from(state: PortState) -> Self {
        state.0
    }
}

impl fmt::Display for PortState {
    /// The set bit names separated by spaces, lowest bit first; `-` when none is set.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("-");
        }
        for (i, name) in self.names().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            f.write_str(name)?;
        }
        Ok(())
    }
}

impl fmt::Debug for PortState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PortState(0x{:02x}: {})", self.0, self)
    }
}

/// The contents of an Actor or Partner Information TLV.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct LacpInfo {
    /// System priority (lower is better).
    pub system_priority: u16,
    /// System identifier (a MAC address).
    pub system: EthernetAddress,
    /// Operational key.
    pub key: u16,
    /// Port priority (lower is better).
    pub port_priority: u16,
    /// Port number.
    pub port: u16,
    /// State bits.
    pub state: PortState,
}

/// One TLV after the Collector TLV of a LACPDU that this module does not interpret (for
/// example the version 2 TLVs of 802.1AX-2014 §6.4.2.4).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Tlv {
    /// TLV type. Must not be 0, which is the Terminator.
    pub tlv_type: u8,
    /// The value, without the type and length bytes. At most [`Tlv::MAX_VALUE_LEN`] bytes;
    /// a longer value is cut to that length on emit.
    pub value: Vec<u8>,
}

impl Tlv {
    /// The longest value a one-byte TLV length can describe (255 minus the 2 header bytes).
    pub const MAX_VALUE_LEN: usize = 253;

    /// The value as it is emitted (cut to [`Tlv::MAX_VALUE_LEN`]).
    fn emitted_value(&self) -> &[u8] {
        &self.value[..self.value.len().min(Self::MAX_VALUE_LEN)]
    }

    /// Bytes this TLV takes on the wire, header included.
    pub fn wire_len(&self) -> usize {
        2 + self.emitted_value().len()
    }
}

/// Field offsets within the slow-protocol payload (the subtype byte is offset 0).
mod field {
    use core::ops::Range;

    pub(crate) const SUBTYPE: usize = 0;
    pub(crate) const VERSION: usize = 1;

    // LACPDU.
    pub(crate) const ACTOR: usize = 2;
    pub(crate) const PARTNER: usize = 22;
    pub(crate) const COLLECTOR: usize = 42;
    pub(crate) const COLLECTOR_MAX_DELAY: Range<usize> = 44..46;
    pub(crate) const COLLECTOR_RESERVED: Range<usize> = 46..58;
    pub(crate) const LACP_TLVS: usize = 58;

    // Within an Actor/Partner Information TLV, relative to its type byte.
    pub(crate) const INFO_TYPE: usize = 0;
    pub(crate) const INFO_LEN: usize = 1;
    pub(crate) const INFO_SYSTEM_PRIORITY: Range<usize> = 2..4;
    pub(crate) const INFO_SYSTEM: Range<usize> = 4..10;
    pub(crate) const INFO_KEY: Range<usize> = 10..12;
    pub(crate) const INFO_PORT_PRIORITY: Range<usize> = 12..14;
    pub(crate) const INFO_PORT: Range<usize> = 14..16;
    pub(crate) const INFO_STATE: usize = 16;
    pub(crate) const INFO_RESERVED: Range<usize> = 17..20;

    // Marker PDU.
    pub(crate) const MARKER_TLV_TYPE: usize = 2;
    pub(crate) const MARKER_TLV_LEN: usize = 3;
    pub(crate) const MARKER_REQUESTER_PORT: Range<usize> = 4..6;
    pub(crate) const MARKER_REQUESTER_SYSTEM: Range<usize> = 6..12;
    pub(crate) const MARKER_TRANSACTION_ID: Range<usize> = 12..16;
    pub(crate) const MARKER_PAD: Range<usize> = 16..18;
    pub(crate) const MARKER_TERMINATOR: Range<usize> = 18..20;
    pub(crate) const MARKER_RESERVED: Range<usize> = 20..110;
}

/// Whether `frame` is addressed as a Slow Protocols frame: destination 01:80:c2:00:00:02 and
/// EtherType 0x8809 (IEEE 802.3 Annex 57A). Receivers check both before handing the payload
/// to [`SlowPdu::parse`].
pub fn is_slow_protocols_frame(frame: &[u8]) -> bool {
    match EthernetFrame::new_checked(frame) {
        Ok(f) => {
            f.dst_addr() == EthernetAddress::SLOW_PROTOCOLS && f.ethertype() == EtherType::Slow
        }
        Err(_) => false,
    }
}

/// The slow-protocol payload of an Ethernet frame: `Truncated` if shorter than the Ethernet
/// header, `Unsupported` if the EtherType is not 0x8809. The destination is not checked.
pub fn slow_protocols_payload(frame: &[u8]) -> Result<&[u8]> {
    let f = EthernetFrame::new_checked(frame)?;
    if f.ethertype() != EtherType::Slow {
        return Err(Error::Unsupported);
    }
    Ok(&frame[HEADER_LEN..])
}

/// Writes the Ethernet header of a Slow Protocols frame into `frame[..14]`.
fn emit_slow_header(src: EthernetAddress, frame: &mut [u8]) {
    let mut f = EthernetFrame::new_unchecked(&mut frame[..HEADER_LEN]);
    f.set_dst_addr(EthernetAddress::SLOW_PROTOCOLS);
    f.set_src_addr(src);
    f.set_ethertype(EtherType::Slow);
}

/// Iterator over the TLVs that follow the Collector TLV of a LACPDU, up to the Terminator.
///
/// Yields `(type, value)` pairs; after the Terminator it ends, and after an error (see the
/// module docs) it yields that error once and then ends.
#[derive(Debug, Clone)]
pub struct TlvIter<'a> {
    rest: &'a [u8],
    done: bool,
}

impl<'a> Iterator for TlvIter<'a> {
    type Item = Result<(u8, &'a [u8])>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let rest = self.rest;
        let (tlv_type, len) = match rest {
            [t, l, ..] => (*t, usize::from(*l)),
            _ => {
                self.done = true;
                return Some(Err(Error::Truncated));
            }
        };
        if tlv_type == TLV_TERMINATOR {
            self.done = true;
            return None;
        }
        if len < 2 {
            self.done = true;
            return Some(Err(Error::Malformed));
        }
        if len > rest.len() {
            self.done = true;
            return Some(Err(Error::Truncated));
        }
        self.rest = &rest[len..];
        Some(Ok((tlv_type, &rest[2..len])))
    }
}

/// A view over a LACPDU (the slow-protocol payload, subtype byte first).
#[derive(Debug, Clone)]
pub struct LacpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

view_constructors!(LacpPacket);

impl<T: AsRef<[u8]>> LacpPacket<T> {
    /// Checks the buffer holds at least [`LACPDU_LEN`] bytes, after which no getter panics.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < LACPDU_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The Slow Protocols subtype (1 for a LACPDU).
    pub fn subtype(&self) -> SlowSubtype {
        SlowSubtype::from(self.buffer.as_ref()[field::SUBTYPE])
    }

    /// The LACP version number.
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }

    /// The `(type, length)` bytes of the Actor Information TLV.
    pub fn actor_tlv_header(&self) -> (u8, u8) {
        self.tlv_header(field::ACTOR)
    }

    /// The `(type, length)` bytes of the Partner Information TLV.
    pub fn partner_tlv_header(&self) -> (u8, u8) {
        self.tlv_header(field::PARTNER)
    }

    /// The `(type, length)` bytes of the Collector Information TLV.
    pub fn collector_tlv_header(&self) -> (u8, u8) {
        self.tlv_header(field::COLLECTOR)
    }

    fn tlv_header(&self, at: usize) -> (u8, u8) {
        let b = self.buffer.as_ref();
        (b[at + field::INFO_TYPE], b[at + field::INFO_LEN])
    }

    /// The fields of the Actor Information TLV.
    pub fn actor(&self) -> LacpInfo {
        self.info(field::ACTOR)
    }

    /// The fields of the Partner Information TLV.
    pub fn partner(&self) -> LacpInfo {
        self.info(field::PARTNER)
    }

    fn info(&self, at: usize) -> LacpInfo {
        let b = &self.buffer.as_ref()[at..at + usize::from(INFO_TLV_LEN)];
        LacpInfo {
            system_priority: be16(b, field::INFO_SYSTEM_PRIORITY.start),
            system: EthernetAddress::from_bytes(&b[field::INFO_SYSTEM]),
            key: be16(b, field::INFO_KEY.start),
            port_priority: be16(b, field::INFO_PORT_PRIORITY.start),
            port: be16(b, field::INFO_PORT.start),
            state: PortState(b[field::INFO_STATE]),
        }
    }

    /// Collector_Max_Delay, in tens of microseconds.
    pub fn collector_max_delay(&self) -> u16 {
        be16(self.buffer.as_ref(), field::COLLECTOR_MAX_DELAY.start)
    }

    /// The TLVs after the Collector TLV, up to the Terminator.
    pub fn extra_tlvs(&self) -> TlvIter<'_> {
        TlvIter {
            rest: &self.buffer.as_ref()[field::LACP_TLVS..],
            done: false,
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> LacpPacket<T> {
    /// Sets the subtype byte.
    pub fn set_subtype(&mut self, subtype: SlowSubtype) {
        self.buffer.as_mut()[field::SUBTYPE] = subtype.into();
    }

    /// Sets the version byte.
    pub fn set_version(&mut self, version: u8) {
        self.buffer.as_mut()[field::VERSION] = version;
    }

    /// Writes the whole Actor Information TLV (type, length, fields, zero reserved bytes).
    pub fn set_actor(&mut self, info: &LacpInfo) {
        self.set_info(field::ACTOR, TLV_ACTOR, info);
    }

    /// Writes the whole Partner Information TLV (type, length, fields, zero reserved bytes).
    pub fn set_partner(&mut self, info: &LacpInfo) {
        self.set_info(field::PARTNER, TLV_PARTNER, info);
    }

    fn set_info(&mut self, at: usize, tlv_type: u8, info: &LacpInfo) {
        let b = &mut self.buffer.as_mut()[at..at + usize::from(INFO_TLV_LEN)];
        b[field::INFO_TYPE] = tlv_type;
        b[field::INFO_LEN] = INFO_TLV_LEN;
        b[field::INFO_SYSTEM_PRIORITY].copy_from_slice(&info.system_priority.to_be_bytes());
        b[field::INFO_SYSTEM].copy_from_slice(&info.system.0);
        b[field::INFO_KEY].copy_from_slice(&info.key.to_be_bytes());
        b[field::INFO_PORT_PRIORITY].copy_from_slice(&info.port_priority.to_be_bytes());
        b[field::INFO_PORT].copy_from_slice(&info.port.to_be_bytes());
        b[field::INFO_STATE] = info.state.0;
        b[field::INFO_RESERVED].fill(0);
    }

    /// Writes the whole Collector Information TLV (type, length, delay, zero reserved bytes).
    pub fn set_collector(&mut self, max_delay: u16) {
        let b = self.buffer.as_mut();
        b[field::COLLECTOR + field::INFO_TYPE] = TLV_COLLECTOR;
        b[field::COLLECTOR + field::INFO_LEN] = COLLECTOR_TLV_LEN;
        b[field::COLLECTOR_MAX_DELAY].copy_from_slice(&max_delay.to_be_bytes());
        b[field::COLLECTOR_RESERVED].fill(0);
    }

    /// Mutable access to everything after the Collector TLV (further TLVs, Terminator, pad).
    pub fn tlvs_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::LACP_TLVS..]
    }
}

/// A parsed LACPDU.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LacpRepr {
    /// LACP version number; 1 by default.
    pub version: u8,
    /// Actor Information.
    pub actor: LacpInfo,
    /// Partner Information (all zero when no partner is known).
    pub partner: LacpInfo,
    /// Collector_Max_Delay, in tens of microseconds.
    pub collector_max_delay: u16,
    /// TLVs between the Collector TLV and the Terminator, in wire order.
    pub extra_tlvs: Vec<Tlv>,
}

impl Default for LacpRepr {
    fn default() -> Self {
        Self {
            version: LACP_VERSION,
            actor: LacpInfo::default(),
            partner: LacpInfo::default(),
            collector_max_delay: 0,
            extra_tlvs: Vec::new(),
        }
    }
}

impl LacpRepr {
    /// Parses a LACPDU from the slow-protocol payload (subtype byte first), following the
    /// validation policy in the module docs.
    pub fn parse(payload: &[u8]) -> Result<Self> {
        let p = LacpPacket::new_checked(payload)?;
        if p.subtype() != SlowSubtype::Lacp {
            return Err(Error::Unsupported);
        }
        if p.actor_tlv_header() != (TLV_ACTOR, INFO_TLV_LEN)
            || p.partner_tlv_header() != (TLV_PARTNER, INFO_TLV_LEN)
            || p.collector_tlv_header() != (TLV_COLLECTOR, COLLECTOR_TLV_LEN)
        {
            return Err(Error::Malformed);
        }
        let extra_tlvs = p
            .extra_tlvs()
            .map(|t| {
                t.map(|(tlv_type, value)| Tlv {
                    tlv_type,
                    value: value.to_vec(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            version: p.version(),
            actor: p.actor(),
            partner: p.partner(),
            collector_max_delay: p.collector_max_delay(),
            extra_tlvs,
        })
    }

    /// Parses a whole Ethernet frame: the EtherType must be 0x8809 (else `Unsupported`); the
    /// destination address is the caller's concern (see [`is_slow_protocols_frame`]).
    pub fn parse_frame(frame: &[u8]) -> Result<Self> {
        Self::parse(slow_protocols_payload(frame)?)
    }

    /// Length of the emitted PDU: [`LACPDU_LEN`], or more when the extra TLVs do not fit in
    /// the reserved bytes.
    pub fn buffer_len(&self) -> usize {
        let tlvs: usize = self.extra_tlvs.iter().map(Tlv::wire_len).sum();
        (field::LACP_TLVS + tlvs + 2).max(LACPDU_LEN)
    }

    /// Length of the emitted Ethernet frame (14 + [`LacpRepr::buffer_len`]).
    pub fn frame_len(&self) -> usize {
        HEADER_LEN + self.buffer_len()
    }

    /// Writes the PDU into `payload[..self.buffer_len()]`; reserved bytes are zeroed.
    ///
    /// # Panics
    /// If `payload` is shorter than [`LacpRepr::buffer_len`].
    pub fn emit(&self, payload: &mut [u8]) {
        let len = self.buffer_len();
        let buf = &mut payload[..len];
        buf.fill(0);
        let mut p = LacpPacket::new_unchecked(buf);
        p.set_subtype(SlowSubtype::Lacp);
        p.set_version(self.version);
        p.set_actor(&self.actor);
        p.set_partner(&self.partner);
        p.set_collector(self.collector_max_delay);
        let mut at = 0;
        let out = p.tlvs_mut();
        for tlv in &self.extra_tlvs {
            let value = tlv.emitted_value();
            out[at] = tlv.tlv_type;
            // `wire_len` is at most 255 by construction.
            out[at + 1] = tlv.wire_len() as u8;
            out[at + 2..at + 2 + value.len()].copy_from_slice(value);
            at += tlv.wire_len();
        }
        // Terminator (type 0, length 0) and pad are already zero.
    }

    /// Writes a whole Slow Protocols frame (destination 01:80:c2:00:00:02, source `src`,
    /// EtherType 0x8809, then the PDU) into `frame[..self.frame_len()]`.
    ///
    /// # Panics
    /// If `frame` is shorter than [`LacpRepr::frame_len`].
    pub fn emit_frame(&self, src: EthernetAddress, frame: &mut [u8]) {
        emit_slow_header(src, frame);
        self.emit(&mut frame[HEADER_LEN..]);
    }
}

/// A view over a Marker PDU (the slow-protocol payload, subtype byte first).
#[derive(Debug, Clone)]
pub struct MarkerPacket<T: AsRef<[u8]>> {
    buffer: T,
}

view_constructors!(MarkerPacket);

impl<T: AsRef<[u8]>> MarkerPacket<T> {
    /// Checks the buffer holds at least [`MARKER_PDU_LEN`] bytes, after which no getter
    /// panics.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < MARKER_PDU_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The Slow Protocols subtype (2 for a Marker PDU).
    pub fn subtype(&self) -> SlowSubtype {
        SlowSubtype::from(self.buffer.as_ref()[field::SUBTYPE])
    }

    /// The Marker protocol version number.
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }

    /// The TLV type: Information or Response.
    pub fn kind(&self) -> MarkerKind {
        MarkerKind::from(self.buffer.as_ref()[field::MARKER_TLV_TYPE])
    }

    /// The TLV length byte (16 in a conforming PDU).
    pub fn tlv_len(&self) -> u8 {
        self.buffer.as_ref()[field::MARKER_TLV_LEN]
    }

    /// Requester_Port.
    pub fn requester_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::MARKER_REQUESTER_PORT.start)
    }

    /// Requester_System.
    pub fn requester_system(&self) -> EthernetAddress {
        EthernetAddress::from_bytes(&self.buffer.as_ref()[field::MARKER_REQUESTER_SYSTEM])
    }

    /// Requester_Transaction_ID.
    pub fn transaction_id(&self) -> u32 {
        be32(self.buffer.as_ref(), field::MARKER_TRANSACTION_ID.start)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> MarkerPacket<T> {
    /// Sets the subtype byte.
    pub fn set_subtype(&mut self, subtype: SlowSubtype) {
        self.buffer.as_mut()[field::SUBTYPE] = subtype.into();
    }

    /// Sets the version byte.
    pub fn set_version(&mut self, version: u8) {
        self.buffer.as_mut()[field::VERSION] = version;
    }

    /// Sets the TLV type.
    pub fn set_kind(&mut self, kind: MarkerKind) {
        self.buffer.as_mut()[field::MARKER_TLV_TYPE] = kind.into();
    }

    /// Sets the TLV length byte.
    pub fn set_tlv_len(&mut self, len: u8) {
        self.buffer.as_mut()[field::MARKER_TLV_LEN] = len;
    }

    /// Sets Requester_Port.
    pub fn set_requester_port(&mut self, port: u16) {
        self.buffer.as_mut()[field::MARKER_REQUESTER_PORT].copy_from_slice(&port.to_be_bytes());
    }

    /// Sets Requester_System.
    pub fn set_requester_system(&mut self, system: EthernetAddress) {
        self.buffer.as_mut()[field::MARKER_REQUESTER_SYSTEM].copy_from_slice(&system.0);
    }

    /// Sets Requester_Transaction_ID.
    pub fn set_transaction_id(&mut self, id: u32) {
        self.buffer.as_mut()[field::MARKER_TRANSACTION_ID].copy_from_slice(&id.to_be_bytes());
    }

    /// Zeroes the pad, writes the Terminator TLV and zeroes the reserved bytes.
    pub fn clear_trailer(&mut self) {
        let b = self.buffer.as_mut();
        b[field::MARKER_PAD].fill(0);
        b[field::MARKER_TERMINATOR].copy_from_slice(&[TLV_TERMINATOR, 0]);
        b[field::MARKER_RESERVED].fill(0);
    }
}

/// A parsed Marker PDU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MarkerRepr {
    /// Information (request) or Response.
    pub kind: MarkerKind,
    /// Requester_Port: the port number of the requester.
    pub requester_port: u16,
    /// Requester_System: the system identifier of the requester.
    pub requester_system: EthernetAddress,
    /// Requester_Transaction_ID, chosen by the requester.
    pub transaction_id: u32,
}

impl MarkerRepr {
    /// Parses a Marker PDU from the slow-protocol payload (subtype byte first), following the
    /// validation policy in the module docs.
    pub fn parse(payload: &[u8]) -> Result<Self> {
        let p = MarkerPacket::new_checked(payload)?;
        if p.subtype() != SlowSubtype::Marker {
            return Err(Error::Unsupported);
        }
        if p.tlv_len() != MARKER_TLV_LEN && p.tlv_len() != MARKER_TLV_LEN_LEGACY {
            return Err(Error::Malformed);
        }
        Ok(Self {
            kind: p.kind(),
            requester_port: p.requester_port(),
            requester_system: p.requester_system(),
            transaction_id: p.transaction_id(),
        })
    }

    /// Parses a whole Ethernet frame: the EtherType must be 0x8809 (else `Unsupported`); the
    /// destination address is the caller's concern (see [`is_slow_protocols_frame`]).
    pub fn parse_frame(frame: &[u8]) -> Result<Self> {
        Self::parse(slow_protocols_payload(frame)?)
    }

    /// The Marker Response to this Marker Information: the same fields with the kind changed
    /// (802.1AX-2014 §6.5.4).
    pub fn to_response(&self) -> Self {
        Self {
            kind: MarkerKind::Response,
            ..*self
        }
    }

    /// Length of the emitted PDU ([`MARKER_PDU_LEN`]).
    pub const fn buffer_len(&self) -> usize {
        MARKER_PDU_LEN
    }

    /// Length of the emitted Ethernet frame (124).
    pub const fn frame_len(&self) -> usize {
        HEADER_LEN + MARKER_PDU_LEN
    }

    /// Writes the PDU into `payload[..110]`, with TLV length 16 and zero pad and reserved bytes.
    ///
    /// # Panics
    /// If `payload` is shorter than [`MarkerRepr::buffer_len`].
    pub fn emit(&self, payload: &mut [u8]) {
        let mut p = MarkerPacket::new_unchecked(&mut payload[..MARKER_PDU_LEN]);
        p.set_subtype(SlowSubtype::Marker);
        p.set_version(MARKER_VERSION);
        p.set_kind(self.kind);
        p.set_tlv_len(MARKER_TLV_LEN);
        p.set_requester_port(self.requester_port);
        p.set_requester_system(self.requester_system);
        p.set_transaction_id(self.transaction_id);
        p.clear_trailer();
    }

    /// Writes a whole Slow Protocols frame (destination 01:80:c2:00:00:02, source `src`,
    /// EtherType 0x8809, then the PDU) into `frame[..self.frame_len()]`.
    ///
    /// # Panics
    /// If `frame` is shorter than [`MarkerRepr::frame_len`].
    pub fn emit_frame(&self, src: EthernetAddress, frame: &mut [u8]) {
        emit_slow_header(src, frame);
        self.emit(&mut frame[HEADER_LEN..]);
    }
}

/// Any Slow Protocols PDU, dispatched on the subtype byte.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SlowPdu {
    /// A LACPDU (subtype 1).
    Lacp(LacpRepr),
    /// A Marker PDU (subtype 2).
    Marker(MarkerRepr),
    /// Another slow protocol (OAM, ESMC, …), not parsed further.
    Unknown {
        /// The subtype byte.
        subtype: u8,
    },
}

impl SlowPdu {
    /// Parses the slow-protocol payload (subtype byte first). An empty payload is
    /// `Truncated`; an unknown subtype is [`SlowPdu::Unknown`], not an error.
    pub fn parse(payload: &[u8]) -> Result<Self> {
        let Some(&subtype) = payload.first() else {
            return Err(Error::Truncated);
        };
        match SlowSubtype::from(subtype) {
            SlowSubtype::Lacp => LacpRepr::parse(payload).map(Self::Lacp),
            SlowSubtype::Marker => MarkerRepr::parse(payload).map(Self::Marker),
            SlowSubtype::Unknown(subtype) => Ok(Self::Unknown { subtype }),
        }
    }

    /// Parses a whole Ethernet frame: the EtherType must be 0x8809 (else `Unsupported`); the
    /// destination address is the caller's concern (see [`is_slow_protocols_frame`]).
    pub fn parse_frame(frame: &[u8]) -> Result<Self> {
        Self::parse(slow_protocols_payload(frame)?)
    }

    /// The subtype this PDU carries.
    pub fn subtype(&self) -> SlowSubtype {
        match self {
            Self::Lacp(_) => SlowSubtype::Lacp,
            Self::Marker(_) => SlowSubtype::Marker,
            Self::Unknown { subtype } => SlowSubtype::from(*subtype),
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use proptest::prelude::*;

    const ACTOR_SYS: EthernetAddress = EthernetAddress([0x02, 0xaa, 0, 0, 0, 1]);
    const SWITCH_SYS: EthernetAddress = EthernetAddress([0x00, 0x11, 0x22, 0x33, 0x44, 0x55]);

    /// A LACPDU payload as Linux bonding sends it once the port is collecting and
    /// distributing: 10G full duplex (key 15), port 1, fast rate, partner a switch.
    fn linux_lacpdu() -> Vec<u8> {
        let mut b = vec![
            0x01, 0x01, // subtype LACP, version 1
            0x01, 0x14, // Actor Information TLV, length 20
            0xff, 0xff, // actor system priority 65535
            0x02, 0xaa, 0x00, 0x00, 0x00, 0x01, // actor system
            0x00, 0x0f, // actor key 15
            0x00, 0xff, // actor port priority 255
            0x00, 0x01, // actor port 1
            0x3f, // actor state
            0x00, 0x00, 0x00, // reserved
            0x02, 0x14, // Partner Information TLV, length 20
            0x80, 0x00, // partner system priority 32768
            0x00, 0x11, 0x22, 0x33, 0x44, 0x55, // partner system
            0x01, 0x2c, // partner key 300
            0x80, 0x00, // partner port priority 32768
            0x01, 0x05, // partner port 261
            0x3d, // partner state
            0x00, 0x00, 0x00, // reserved
            0x03, 0x10, // Collector Information TLV, length 16
            0x00, 0x00, // collector max delay 0
        ];
        b.extend_from_slice(&[0; 12]); // collector reserved
        b.extend_from_slice(&[0x00, 0x00]); // Terminator
        b.extend_from_slice(&[0; 50]); // reserved
        b
    }

    fn linux_repr() -> LacpRepr {
        LacpRepr {
            version: 1,
            actor: LacpInfo {
                system_priority: 65535,
                system: ACTOR_SYS,
                key: 15,
                port_priority: 255,
                port: 1,
                state: PortState(0x3f),
            },
            partner: LacpInfo {
                system_priority: 32768,
                system: SWITCH_SYS,
                key: 300,
                port_priority: 32768,
                port: 261,
                state: PortState(0x3d),
            },
            collector_max_delay: 0,
            extra_tlvs: Vec::new(),
        }
    }

    fn marker_info() -> Vec<u8> {
        let mut b = vec![
            0x02, 0x01, // subtype Marker, version 1
            0x01, 0x10, // Marker Information TLV, length 16
            0x00, 0x07, // requester port 7
            0x00, 0x11, 0x22, 0x33, 0x44, 0x55, // requester system
            0xde, 0xad, 0xbe, 0xef, // transaction id
            0x00, 0x00, // pad
            0x00, 0x00, // Terminator
        ];
        b.extend_from_slice(&[0; 90]);
        b
    }

    /// LACPDUs Open vSwitch 3.1 sent (bond `lacp=active`, `lacp-time=fast`,
    /// `lacp-system-priority=100`, member 2 of a balance-tcp bond on a veth whose peer was
    /// another OVS bond), captured with tcpdump on the member: whole frames as on the wire (no
    /// FCS). The first is OVS's first LACPDU (partner unknown, actor state Expired); the second
    /// one after negotiation. Field values as `tshark -V` decodes them.
    const OVS_LACPDU_FIRST: &str = "0180c2000002020a000000008809010101140064e6e6efe4f6420001ffff0002bf0000\
        0002140000000000000000000000000000020000000310000000000000000000000000000000000000000000\
        0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000\
        00";
    const OVS_LACPDU_NEGOTIATED: &str = "0180c2000002020a000000008809010101140064e6e6efe4f6420001ffff00023f\
        0000000214fffe8a23584455430001ffff00023f00000003100000000000000000000000000000000000000000\
        0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000\
        0000";

    fn unhex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn open_vswitch_lacpdus_decode_and_re_emit_byte_for_byte() {
        let ovs_system = EthernetAddress([0xe6, 0xe6, 0xef, 0xe4, 0xf6, 0x42]);
        let actor = LacpInfo {
            system_priority: 100,
            system: ovs_system,
            key: 1,
            port_priority: 65535,
            port: 2,
            state: PortState(0xbf),
        };
        let first = unhex(OVS_LACPDU_FIRST);
        let negotiated = unhex(OVS_LACPDU_NEGOTIATED);
        let src = EthernetAddress([0x02, 0x0a, 0, 0, 0, 0]);
        for f in [&first, &negotiated] {
            assert_eq!(f.len(), 124);
            assert!(is_slow_protocols_frame(f));
            assert_eq!(&f[6..12], &src.0);
        }

        let r = LacpRepr::parse_frame(&first).unwrap();
        assert_eq!(r.version, 1);
        assert_eq!(r.actor, actor);
        assert_eq!(
            r.actor.state.to_string(),
            "activity timeout aggregation synchronization collecting distributing expired"
        );
        // No partner yet: all zero but the Timeout bit (OVS's default partner is fast).
        assert_eq!(
            r.partner,
            LacpInfo {
                state: PortState(0x02),
                ..LacpInfo::default()
            }
        );
        assert_eq!(r.collector_max_delay, 0);
        assert!(r.extra_tlvs.is_empty());

        let n = LacpRepr::parse_frame(&negotiated).unwrap();
        assert_eq!(
            n.actor,
            LacpInfo {
                state: PortState(0x3f),
                ..actor
            }
        );
        assert_eq!(
            n.partner,
            LacpInfo {
                system_priority: 65534,
                system: EthernetAddress([0x8a, 0x23, 0x58, 0x44, 0x55, 0x43]),
                key: 1,
                port_priority: 65535,
                port: 2,
                state: PortState(0x3f),
            }
        );
        assert_eq!(
            SlowPdu::parse_frame(&negotiated),
            Ok(SlowPdu::Lacp(n.clone()))
        );

        // emit(parse(x)) == x, for the PDU and for the whole frame.
        for (f, r) in [(&first, r), (&negotiated, n)] {
            let mut payload = vec![0xee; r.buffer_len()];
            r.emit(&mut payload);
            assert_eq!(&payload[..], &f[HEADER_LEN..]);
            let mut frame = vec![0xee; r.frame_len()];
            r.emit_frame(src, &mut frame);
            assert_eq!(&frame, f);
        }
    }

    #[test]
    fn linux_lacpdu_parses() {
        let b = linux_lacpdu();
        assert_eq!(b.len(), LACPDU_LEN);
        assert_eq!(LacpRepr::parse(&b), Ok(linux_repr()));
        assert_eq!(SlowPdu::parse(&b), Ok(SlowPdu::Lacp(linux_repr())));
        let p = LacpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(p.subtype(), SlowSubtype::Lacp);
        assert_eq!(
            p.actor().state.to_string(),
            "activity timeout aggregation synchronization collecting distributing"
        );
        assert_eq!(p.extra_tlvs().count(), 0);
    }

    #[test]
    fn linux_lacpdu_emits_same_bytes() {
        let r = linux_repr();
        assert_eq!(r.buffer_len(), 110);
        assert_eq!(r.frame_len(), 124);
        let mut out = vec![0xee; r.buffer_len()];
        r.emit(&mut out);
        assert_eq!(out, linux_lacpdu());

        let mut frame = vec![0xee; r.frame_len()];
        r.emit_frame(ACTOR_SYS, &mut frame);
        assert_eq!(&frame[..6], &[0x01, 0x80, 0xc2, 0x00, 0x00, 0x02]);
        assert_eq!(&frame[6..12], &ACTOR_SYS.0);
        assert_eq!(&frame[12..14], &[0x88, 0x09]);
        assert_eq!(&frame[14..], &linux_lacpdu()[..]);
        assert!(is_slow_protocols_frame(&frame));
        assert_eq!(LacpRepr::parse_frame(&frame), Ok(r.clone()));
        assert_eq!(SlowPdu::parse_frame(&frame), Ok(SlowPdu::Lacp(r)));
    }

    #[test]
    fn reserved_bytes_ignored_and_trailing_bytes_allowed() {
        let mut b = linux_lacpdu();
        for at in [19, 20, 21, 39, 40, 41] {
            b[at] = 0xa5; // info reserved
        }
        b[50] = 0x5a; // collector reserved
        b[100] = 0x77; // pad after terminator
        b[59] = 0x33; // terminator length is not checked
        b.extend_from_slice(&[0xff; 20]); // Ethernet padding / FCS after the PDU
        assert_eq!(LacpRepr::parse(&b), Ok(linux_repr()));
        let mut out = vec![0; 110];
        linux_repr().emit(&mut out);
        assert_eq!(out, linux_lacpdu());
    }

    #[test]
    fn version_is_kept() {
        let mut b = linux_lacpdu();
        b[1] = 2;
        let r = LacpRepr::parse(&b).unwrap();
        assert_eq!(r.version, 2);
        let mut out = vec![0; r.buffer_len()];
        r.emit(&mut out);
        assert_eq!(out, b);
    }

    #[test]
    fn lacpdu_truncated_at_every_length() {
        let b = linux_lacpdu();
        for n in 0..b.len() {
            assert_eq!(LacpRepr::parse(&b[..n]), Err(Error::Truncated), "len {n}");
            assert_eq!(SlowPdu::parse(&b[..n]), Err(Error::Truncated), "len {n}");
            let mut frame = vec![0u8; 14];
            frame[12..14].copy_from_slice(&[0x88, 0x09]);
            frame.extend_from_slice(&b[..n]);
            assert_eq!(
                SlowPdu::parse_frame(&frame),
                Err(Error::Truncated),
                "len {n}"
            );
        }
        for n in 0..14 {
            assert_eq!(
                LacpRepr::parse_frame(&[0x88; 14][..n]),
                Err(Error::Truncated)
            );
        }
    }

    #[test]
    fn marker_truncated_at_every_length() {
        let b = marker_info();
        for n in 0..b.len() {
            assert_eq!(MarkerRepr::parse(&b[..n]), Err(Error::Truncated), "len {n}");
            assert_eq!(SlowPdu::parse(&b[..n]), Err(Error::Truncated), "len {n}");
        }
    }

    #[test]
    fn fixed_tlv_mismatch_is_malformed() {
        for (at, bad) in [(2, 9), (3, 21), (22, 1), (23, 19), (42, 4), (43, 0x10 + 1)] {
            let mut b = linux_lacpdu();
            b[at] = bad;
            assert_eq!(
                LacpRepr::parse(&b),
                Err(Error::Malformed),
                "byte {at} = {bad}"
            );
        }
    }

    #[test]
    fn wrong_subtype_or_ethertype_is_unsupported() {
        assert_eq!(LacpRepr::parse(&marker_info()), Err(Error::Unsupported));
        assert_eq!(MarkerRepr::parse(&linux_lacpdu()), Err(Error::Unsupported));
        let mut frame = vec![0u8; 124];
        linux_repr().emit_frame(ACTOR_SYS, &mut frame);
        frame[12] = 0x81;
        frame[13] = 0x00;
        assert!(!is_slow_protocols_frame(&frame));
        assert_eq!(LacpRepr::parse_frame(&frame), Err(Error::Unsupported));
        assert_eq!(SlowPdu::parse_frame(&frame), Err(Error::Unsupported));
        // The destination is not checked by parse_frame, only by the helper.
        linux_repr().emit_frame(ACTOR_SYS, &mut frame);
        frame[0] = 0x03;
        assert!(!is_slow_protocols_frame(&frame));
        assert!(LacpRepr::parse_frame(&frame).is_ok());
        assert!(!is_slow_protocols_frame(&frame[..13]));
    }

    #[test]
    fn unknown_tlvs_are_kept_and_re_emitted() {
        // A version 2 LACPDU with a Port Algorithm TLV (type 4, length 6) and an odd TLV.
        let mut b = linux_lacpdu();
        b[1] = 2;
        let extra = [0x04, 0x06, 0x00, 0x80, 0xc2, 0x01, 0xf0, 0x03, 0xab];
        b[58..58 + extra.len()].copy_from_slice(&extra);
        // Terminator right after, the rest stays zero.
        let r = LacpRepr::parse(&b).unwrap();
        assert_eq!(
            r.extra_tlvs,
            vec![
                Tlv {
                    tlv_type: 4,
                    value: vec![0x00, 0x80, 0xc2, 0x01]
                },
                Tlv {
                    tlv_type: 0xf0,
                    value: vec![0xab]
                },
            ]
        );
        assert_eq!(r.buffer_len(), 110);
        let mut out = vec![0xee; r.buffer_len()];
        r.emit(&mut out);
        assert_eq!(out, b);

        // TLVs longer than the reserved space make the PDU longer, with no padding beyond.
        let big = LacpRepr {
            extra_tlvs: vec![Tlv {
                tlv_type: 9,
                value: vec![0x11; 100],
            }],
            ..linux_repr()
        };
        assert_eq!(big.buffer_len(), 58 + 102 + 2);
        let mut out = vec![0xee; big.buffer_len()];
        big.emit(&mut out);
        assert_eq!(&out[58..60], &[9, 102]);
        assert_eq!(&out[160..], &[0, 0]);
        assert_eq!(LacpRepr::parse(&out), Ok(big.clone()));
        // Cut anywhere, the long PDU is truncated, never accepted as something else.
        for n in 0..out.len() {
            assert_eq!(LacpRepr::parse(&out[..n]), Err(Error::Truncated), "len {n}");
        }
    }

    #[test]
    fn bad_extra_tlvs() {
        let mut b = linux_lacpdu();
        b[58..60].copy_from_slice(&[0x04, 0x01]); // length below the header size
        assert_eq!(LacpRepr::parse(&b), Err(Error::Malformed));
        b[58..60].copy_from_slice(&[0x04, 0x00]);
        assert_eq!(LacpRepr::parse(&b), Err(Error::Malformed));
        b[58..60].copy_from_slice(&[0x04, 53]); // one byte past the end of 110
        assert_eq!(LacpRepr::parse(&b), Err(Error::Truncated));
        b[58..60].copy_from_slice(&[0x04, 52]); // exactly to the end, no Terminator
        assert_eq!(LacpRepr::parse(&b), Err(Error::Truncated));
        b[58..60].copy_from_slice(&[0x04, 51]); // one byte left: no room for a Terminator
        assert_eq!(LacpRepr::parse(&b), Err(Error::Truncated));
        b[58..60].copy_from_slice(&[0x04, 50]); // Terminator in the last two bytes
        assert_eq!(LacpRepr::parse(&b).unwrap().extra_tlvs[0].value.len(), 48);
    }

    #[test]
    fn long_tlv_value_is_cut_consistently() {
        let r = LacpRepr {
            extra_tlvs: vec![Tlv {
                tlv_type: 7,
                value: vec![1; 300],
            }],
            ..LacpRepr::default()
        };
        assert_eq!(r.buffer_len(), 58 + 255 + 2);
        let mut out = vec![0; r.buffer_len()];
        r.emit(&mut out);
        let back = LacpRepr::parse(&out).unwrap();
        assert_eq!(back.extra_tlvs[0].value, vec![1; Tlv::MAX_VALUE_LEN]);
    }

    #[test]
    fn marker_information_to_response() {
        let b = marker_info();
        let info = MarkerRepr::parse(&b).unwrap();
        assert_eq!(
            info,
            MarkerRepr {
                kind: MarkerKind::Information,
                requester_port: 7,
                requester_system: SWITCH_SYS,
                transaction_id: 0xdead_beef,
            }
        );
        let mut out = vec![0xee; info.buffer_len()];
        info.emit(&mut out);
        assert_eq!(out, b);

        let resp = info.to_response();
        assert_eq!(resp.kind, MarkerKind::Response);
        let mut frame = vec![0xee; resp.frame_len()];
        resp.emit_frame(ACTOR_SYS, &mut frame);
        assert_eq!(frame.len(), 124);
        let mut want = b.clone();
        want[2] = 2;
        assert_eq!(&frame[14..], &want[..]);
        assert!(is_slow_protocols_frame(&frame));
        assert_eq!(SlowPdu::parse_frame(&frame), Ok(SlowPdu::Marker(resp)));
    }

    #[test]
    fn marker_lengths_and_unknown_kind() {
        let mut b = marker_info();
        b[3] = 0x16; // the Linux header's value: accepted, but we emit 0x10
        let r = MarkerRepr::parse(&b).unwrap();
        let mut out = vec![0; 110];
        r.emit(&mut out);
        assert_eq!(out[3], 0x10);
        for bad in [0x00, 0x0f, 0x11, 0x14, 0xff] {
            b[3] = bad;
            assert_eq!(MarkerRepr::parse(&b), Err(Error::Malformed), "len {bad:#x}");
        }
        b[3] = 0x10;
        b[2] = 9;
        b[1] = 7; // version ignored
        b[16] = 0xff; // pad ignored
        b[60] = 0xff; // reserved ignored
        let r = MarkerRepr::parse(&b).unwrap();
        assert_eq!(r.kind, MarkerKind::Unknown(9));
        r.emit(&mut out);
        assert_eq!(out[1..4], [1, 9, 0x10]);
        assert_eq!(out[16], 0);
        assert_eq!(out[60], 0);
    }

    #[test]
    fn unknown_subtype() {
        assert_eq!(SlowPdu::parse(&[3]), Ok(SlowPdu::Unknown { subtype: 3 }));
        let oam = [0x03, 0x00, 0x50, 0x01, 0x01];
        let pdu = SlowPdu::parse(&oam).unwrap();
        assert_eq!(pdu, SlowPdu::Unknown { subtype: 3 });
        assert_eq!(pdu.subtype(), SlowSubtype::Unknown(3));
        assert_eq!(
            SlowPdu::parse(&[0x0a; 40]),
            Ok(SlowPdu::Unknown { subtype: 10 })
        );
        assert_eq!(SlowPdu::parse(&[0]), Ok(SlowPdu::Unknown { subtype: 0 }));
        assert_eq!(SlowPdu::parse(&[]), Err(Error::Truncated));
        assert_eq!(SlowSubtype::from(2), SlowSubtype::Marker);
        assert_eq!(u8::from(SlowSubtype::Lacp), 1);
    }

    #[test]
    fn port_state_ops_and_display() {
        let mut s = PortState::ACTIVITY | PortState::AGGREGATION;
        assert_eq!(s.bits(), 0x05);
        assert!(s.contains(PortState::ACTIVITY));
        assert!(!s.contains(PortState::ACTIVITY | PortState::TIMEOUT));
        assert!(s.intersects(PortState::ACTIVITY | PortState::TIMEOUT));
        s.insert(PortState::SYNCHRONIZATION);
        assert_eq!(s, PortState(0x0d));
        s.remove(PortState::ACTIVITY);
        assert_eq!(s, PortState(0x0c));
        s.set(PortState::EXPIRED, true);
        s.set(PortState::AGGREGATION, false);
        assert_eq!(s, PortState(0x88));
        assert_eq!(s & PortState::EXPIRED, PortState::EXPIRED);
        assert_eq!(s & !PortState::EXPIRED, PortState::SYNCHRONIZATION);
        s |= PortState::TIMEOUT;
        s &= PortState::TIMEOUT | PortState::EXPIRED;
        assert_eq!(s, PortState(0x82));
        assert_eq!(PortState::default(), PortState(0));
        assert_eq!(PortState::default().to_string(), "-");
        assert_eq!(
            PortState(0x3d).to_string(),
            "activity aggregation synchronization collecting distributing"
        );
        assert_eq!(
            PortState(0xff).to_string(),
            "activity timeout aggregation synchronization collecting distributing defaulted expired"
        );
        assert_eq!(
            PortState(0x4d).names().collect::<Vec<_>>(),
            ["activity", "aggregation", "synchronization", "defaulted"]
        );
        assert_eq!(
            format!("{:?}", PortState(0x07)),
            "PortState(0x07: activity timeout aggregation)"
        );
        for (i, (bit, _)) in PortState::NAMED.iter().enumerate() {
            assert_eq!(bit.bits(), 1 << i);
        }
    }

    fn arb_info() -> impl Strategy<Value = LacpInfo> {
        (
            any::<u16>(),
            any::<[u8; 6]>(),
            any::<u16>(),
            any::<u16>(),
            any::<u16>(),
            any::<u8>(),
        )
            .prop_map(
                |(system_priority, system, key, port_priority, port, state)| LacpInfo {
                    system_priority,
                    system: EthernetAddress(system),
                    key,
                    port_priority,
                    port,
                    state: PortState(state),
                },
            )
    }

    fn arb_lacp() -> impl Strategy<Value = LacpRepr> {
        let tlv = (
            1u8..=255,
            proptest::collection::vec(any::<u8>(), 0..=Tlv::MAX_VALUE_LEN),
        )
            .prop_map(|(tlv_type, value)| Tlv { tlv_type, value });
        (
            any::<u8>(),
            arb_info(),
            arb_info(),
            any::<u16>(),
            proptest::collection::vec(tlv, 0..4),
        )
            .prop_map(
                |(version, actor, partner, collector_max_delay, extra_tlvs)| LacpRepr {
                    version,
                    actor,
                    partner,
                    collector_max_delay,
                    extra_tlvs,
                },
            )
    }

    fn arb_marker() -> impl Strategy<Value = MarkerRepr> {
        (any::<u8>(), any::<u16>(), any::<[u8; 6]>(), any::<u32>()).prop_map(
            |(kind, requester_port, system, transaction_id)| MarkerRepr {
                kind: MarkerKind::from(kind),
                requester_port,
                requester_system: EthernetAddress(system),
                transaction_id,
            },
        )
    }

    /// Parsing must never panic, and whatever parses must survive emit → parse unchanged.
    fn check_bytes(bytes: &[u8]) -> core::result::Result<(), TestCaseError> {
        match SlowPdu::parse(bytes) {
            Ok(SlowPdu::Lacp(r)) => {
                let mut out = vec![0; r.buffer_len()];
                r.emit(&mut out);
                prop_assert_eq!(LacpRepr::parse(&out), Ok(r));
            }
            Ok(SlowPdu::Marker(r)) => {
                let mut out = vec![0; r.buffer_len()];
                r.emit(&mut out);
                prop_assert_eq!(MarkerRepr::parse(&out), Ok(r));
            }
            Ok(SlowPdu::Unknown { subtype }) => prop_assert!(subtype != 1 && subtype != 2),
            Err(_) => {}
        }
        let _ = SlowPdu::parse_frame(bytes);
        let _ = is_slow_protocols_frame(bytes);
        Ok(())
    }

    proptest! {
        #[test]
        fn parse_never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            check_bytes(&bytes)?;
        }

        #[test]
        fn parse_never_panics_on_mutated_pdus(
            marker in any::<bool>(),
            edits in proptest::collection::vec((0usize..400, any::<u8>()), 0..8),
            cut in 0usize..400,
            tail in proptest::collection::vec(any::<u8>(), 0..200),
        ) {
            let mut b = if marker { marker_info() } else { linux_lacpdu() };
            b.extend_from_slice(&tail);
            for (at, v) in edits {
                let n = b.len();
                b[at % n] = v;
            }
            b.truncate(cut.max(1));
            check_bytes(&b)?;
        }

        #[test]
        fn lacp_round_trip(r in arb_lacp(), src in any::<[u8; 6]>()) {
            let mut out = vec![0xee; r.buffer_len()];
            r.emit(&mut out);
            prop_assert!(out.len() >= LACPDU_LEN);
            prop_assert_eq!(LacpRepr::parse(&out), Ok(r.clone()));
            let mut frame = vec![0xee; r.frame_len()];
            r.emit_frame(EthernetAddress(src), &mut frame);
            prop_assert!(is_slow_protocols_frame(&frame));
            prop_assert_eq!(&frame[14..], &out[..]);
            prop_assert_eq!(SlowPdu::parse_frame(&frame), Ok(SlowPdu::Lacp(r)));
        }

        #[test]
        fn marker_round_trip(r in arb_marker(), src in any::<[u8; 6]>()) {
            let mut out = vec![0xee; r.buffer_len()];
            r.emit(&mut out);
            prop_assert_eq!(MarkerRepr::parse(&out), Ok(r));
            let mut frame = vec![0xee; r.frame_len()];
            r.emit_frame(EthernetAddress(src), &mut frame);
            prop_assert_eq!(SlowPdu::parse_frame(&frame), Ok(SlowPdu::Marker(r)));
        }
    }
}
