//! Capture files: streaming reading of classic pcap and pcapng, and writing of both.
//!
//! [`CaptureReader`] sniffs the format from the first four bytes and then hands out one packet
//! at a time as a [`Packet`] that borrows the reader's internal buffer, so reading allocates
//! nothing per packet and memory stays bounded by the largest record (at most
//! [`MAX_RECORD_LEN`]) whatever the file size. Records are parsed straight out of one large
//! buffer that is refilled with big `read` calls, so the reader needs no [`io::BufReader`] and
//! makes no per-packet `read_exact`. Every error carries the byte offset at which the offending
//! header, record or block starts, so a corrupt multi-gigabyte file can be inspected with a hex
//! dump at the right place. Nothing here panics on any input.
//!
//! Supported: classic pcap in both byte orders with microsecond or nanosecond magic; pcapng
//! with any number of sections (each in its own byte order) and interfaces (each with its own
//! link type, `if_tsresol` and `if_tsoffset`), Enhanced, Simple and obsolete Packet Blocks, and
//! every other block type skipped. [`PcapWriter`] writes classic pcap and [`PcapNgWriter`]
//! writes small pcapng files for tests.
//!
//! This module holds what both formats share: the reader with its buffer and format sniffing,
//! the packet, interface and error types. The classic pcap records and writer are in `pcap.rs`,
//! the pcapng blocks, options and writer in `pcapng.rs`; everything public is here.
//!
//! # Why our own code and not a crate
//! The `pcap-file` crate was considered. Its 2.x reader keeps pcap and pcapng apart (no format
//! sniffing), its error type says what went wrong but never where (no byte offset), it decodes
//! every pcapng block, options included, into typed structures rather than handing out plain
//! slices, and its 3.x line is a release candidate that needs Rust 1.93, above this workspace's
//! minimum of 1.85. The subset we need is small, so this module implements it directly and
//! keeps the pure core free of dependencies.

use core::fmt;
use core::ops::Range;
use std::io;

mod pcap;
mod pcapng;
#[cfg(test)]
mod tests;

pub use pcap::PcapWriter;
pub use pcapng::PcapNgWriter;

use pcap::{PCAP_MAGIC_KUZNETSOV, PCAP_MAGIC_MICROS, PCAP_MAGIC_NANOS};
use pcapng::BT_SHB;

/// `LINKTYPE_ETHERNET`: IEEE 802.3 Ethernet frames.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// `LINKTYPE_RAW`: raw IPv4 or IPv6 packets, no link-layer header.
pub const LINKTYPE_RAW: u32 = 101;
/// `LINKTYPE_LINUX_SLL`: Linux "cooked" capture, version 1.
pub const LINKTYPE_LINUX_SLL: u32 = 113;
/// `LINKTYPE_LINUX_SLL2`: Linux "cooked" capture, version 2.
pub const LINKTYPE_LINUX_SLL2: u32 = 276;

/// The largest pcapng block the reader accepts, and the most a classic pcap file's snaplen can
/// raise its record limit to (256 MiB).
///
/// 256 MiB is far above the packets real capture tools write, yet still catches a corrupt
/// length field. The buffer only grows as data actually arrives, so a bogus length in a short
/// file does not allocate the full amount.
pub const MAX_RECORD_LEN: u32 = 256 << 20;

/// The captured length up to which a classic pcap record is accepted whatever the file's
/// snaplen (262144, libpcap's `MAXIMUM_SNAPLEN` and Wireshark's `WTAP_MAX_PACKET_SIZE_STANDARD`).
///
/// A record is corrupt, as libpcap and Wireshark judge it, when its captured length exceeds
/// both this and the snaplen of the file header: some writers produce records longer than the
/// snaplen they declared, but never beyond the tools' maximum, so a longer one means the
/// record header is damaged (and the rest of the file cannot be framed).
pub const MAX_SNAPLEN: u32 = 262_144;

/// The most pcapng interfaces (summed over all sections) the reader keeps track of.
pub const MAX_INTERFACES: usize = 65_536;

/// The snapshot length [`PcapWriter`] declares in the file header.
pub const WRITER_SNAPLEN: u32 = MAX_SNAPLEN;

/// The reader's initial buffer size: one `read` call fills this much.
const DEFAULT_BUF_LEN: usize = 1 << 20;

const NANOS_PER_SEC: u64 = 1_000_000_000;

#[inline(always)]
fn rd16(b: &[u8], at: usize, big_endian: bool) -> u16 {
    let a = [b[at], b[at + 1]];
    if big_endian {
        u16::from_be_bytes(a)
    } else {
        u16::from_le_bytes(a)
    }
}

#[inline(always)]
fn rd32(b: &[u8], at: usize, big_endian: bool) -> u32 {
    let a = [b[at], b[at + 1], b[at + 2], b[at + 3]];
    if big_endian {
        u32::from_be_bytes(a)
    } else {
        u32::from_le_bytes(a)
    }
}

#[inline(always)]
fn rd64(b: &[u8], at: usize, big_endian: bool) -> u64 {
    let hi = u64::from(rd32(b, at, big_endian));
    let lo = u64::from(rd32(b, at + 4, big_endian));
    if big_endian {
        (hi << 32) | lo
    } else {
        (lo << 32) | hi
    }
}

/// The container format of a capture file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CaptureFormat {
    /// Classic libpcap format.
    Pcap {
        /// Timestamps are in nanoseconds (magic `0xa1b23c4d`) rather than microseconds.
        nanos: bool,
        /// The file is big-endian.
        big_endian: bool,
    },
    /// pcapng (the byte order may change from section to section).
    PcapNg,
}

/// The unit of an interface's timestamps (pcapng `if_tsresol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TsResolution {
    /// One tick is 10^-n seconds.
    Decimal(u8),
    /// One tick is 2^-n seconds.
    Binary(u8),
}

impl TsResolution {
    /// Microseconds, the pcapng default and classic pcap's usual unit.
    pub const MICROS: Self = Self::Decimal(6);
    /// Nanoseconds.
    pub const NANOS: Self = Self::Decimal(9);

    /// Decodes an `if_tsresol` option byte: the top bit selects base 2, the rest is the
    /// exponent.
    pub const fn from_if_tsresol(raw: u8) -> Self {
        if raw & 0x80 != 0 {
            Self::Binary(raw & 0x7f)
        } else {
            Self::Decimal(raw)
        }
    }

    /// Encodes as an `if_tsresol` option byte, or `None` if the exponent exceeds 127.
    pub const fn to_if_tsresol(self) -> Option<u8> {
        match self {
            Self::Decimal(n) if n < 0x80 => Some(n),
            Self::Binary(n) if n < 0x80 => Some(n | 0x80),
            _ => None,
        }
    }

    /// Converts a count of ticks to nanoseconds, rounding down and saturating at `u64::MAX`.
    #[inline]
    pub fn to_nanos(self, ticks: u64) -> u64 {
        match self {
            Self::Decimal(9) => ticks,
            Self::Decimal(6) => ticks.saturating_mul(1000),
            Self::Decimal(n) if n <= 9 => ticks.saturating_mul(10u64.pow(9 - u32::from(n))),
            // 10^19 is the largest power of ten in a u64; beyond it every u64 rounds to 0.
            Self::Decimal(n) if n - 9 <= 19 => ticks / 10u64.pow(u32::from(n - 9)),
            Self::Decimal(_) => 0,
            Self::Binary(n) => {
                // ticks * 10^9 < 2^94, so the product fits; n <= 255 would not all shift.
                let v = (u128::from(ticks) * u128::from(NANOS_PER_SEC))
                    .checked_shr(u32::from(n))
                    .unwrap_or(0);
                u64::try_from(v).unwrap_or(u64::MAX)
            }
        }
    }

    /// Converts nanoseconds to a count of ticks, rounding down and saturating at `u64::MAX`.
    pub fn from_nanos(self, nanos: u64) -> u64 {
        match self {
            Self::Decimal(9) => nanos,
            Self::Decimal(6) => nanos / 1000,
            Self::Decimal(n) if n <= 9 => nanos / 10u64.pow(9 - u32::from(n)),
            Self::Decimal(n) if n - 9 <= 19 => nanos.saturating_mul(10u64.pow(u32::from(n - 9))),
            Self::Decimal(_) => {
                if nanos == 0 {
                    0
                } else {
                    u64::MAX
                }
            }
            Self::Binary(n) => {
                let bits = 64 - nanos.leading_zeros();
                if nanos == 0 {
                    0
                } else if bits + u32::from(n) > 127 {
                    u64::MAX
                } else {
                    let v = (u128::from(nanos) << n) / u128::from(NANOS_PER_SEC);
                    u64::try_from(v).unwrap_or(u64::MAX)
                }
            }
        }
    }
}

/// What the reader knows about one capture interface.
///
/// A classic pcap file has exactly one. In pcapng, interfaces accumulate over all sections in
/// the order their Interface Description Blocks appear; [`Packet::interface`] indexes this list
/// (for a single-section file that is the pcapng interface id).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct InterfaceInfo {
    /// The link type (`LINKTYPE_*`), e.g. [`LINKTYPE_ETHERNET`]. For classic pcap only the low
    /// 16 bits of the header field (the FCS bits above them are dropped).
    pub linktype: u32,
    /// The declared snapshot length; 0 means unlimited in pcapng.
    pub snaplen: u32,
    /// The `if_name` option, if the IDB had one (invalid UTF-8 replaced, cut at 1 KiB).
    pub name: Option<String>,
    /// The unit of this interface's timestamps.
    pub ts_resolution: TsResolution,
    /// The `if_tsoffset` option: seconds added to every timestamp (0 if absent).
    pub ts_offset_secs: i64,
    /// The zero-based pcapng section the interface belongs to (0 for classic pcap).
    pub section: u32,
}

/// One captured packet, borrowing the reader's buffer until the next call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Packet<'a> {
    /// Capture time in nanoseconds since the Unix epoch (0 for pcapng Simple Packet Blocks,
    /// which carry no timestamp; saturated if the file's value does not fit).
    pub ts_nanos: u64,
    /// Index into [`CaptureReader::interfaces`].
    pub interface: u32,
    /// The interface's link type (`LINKTYPE_*`).
    pub linktype: u32,
    /// The packet's length on the wire, which may exceed `data.len()` if it was cut short.
    pub orig_len: u32,
    /// The captured bytes.
    pub data: &'a [u8],
}

/// Why a capture file could not be read, and where.
#[derive(Debug)]
pub struct CaptureError {
    /// Byte offset in the file of the header, record or block at fault (for I/O errors, the
    /// offset the read was to continue at).
    pub offset: u64,
    /// What went wrong.
    pub kind: CaptureErrorKind,
}

/// The kinds of [`CaptureError`].
#[derive(Debug)]
#[non_exhaustive]
pub enum CaptureErrorKind {
    /// The underlying reader failed.
    Io(io::Error),
    /// The input is empty.
    Empty,
    /// The first four bytes are neither a pcap magic nor a pcapng Section Header Block.
    NotACapture {
        /// The first four bytes.
        magic: [u8; 4],
    },
    /// A recognised but unsupported variant of the format.
    UnsupportedFormat(&'static str),
    /// A file or section header with a major/minor version this reader does not know.
    UnsupportedVersion {
        /// Major version.
        major: u16,
        /// Minor version.
        minor: u16,
    },
    /// The input ends inside a fixed-size header.
    TruncatedHeader {
        /// Which header (e.g. "pcap file header").
        what: &'static str,
        /// Its size in bytes.
        needed: usize,
        /// How many bytes were left.
        available: usize,
    },
    /// The input ends inside a classic pcap record's packet data.
    TruncatedRecord {
        /// The captured length the record header announced.
        len: u32,
        /// How many data bytes were left.
        available: usize,
    },
    /// The input ends inside a pcapng block.
    TruncatedBlock {
        /// The block total length its header announced.
        len: u32,
        /// How many bytes of the block were present.
        available: usize,
    },
    /// A classic pcap record whose captured length exceeds both the file's snaplen and
    /// [`MAX_SNAPLEN`]: a damaged record header.
    BadRecordLength {
        /// The captured length the record header announced.
        len: u32,
        /// The file header's snaplen.
        snaplen: u32,
    },
    /// A pcapng block longer than [`MAX_RECORD_LEN`].
    TooLarge {
        /// "packet record" or "pcapng block".
        what: &'static str,
        /// The announced length.
        len: u32,
        /// The limit.
        max: u32,
    },
    /// A pcapng block total length smaller than the block's minimum.
    BlockTooShort {
        /// The announced block total length.
        len: u32,
        /// The minimum for this block.
        min: u32,
    },
    /// A pcapng block total length that is not a multiple of 4.
    BlockLengthUnaligned {
        /// The announced block total length.
        len: u32,
    },
    /// A pcapng block whose trailing length differs from its leading one.
    BlockLengthMismatch {
        /// The leading block total length.
        header: u32,
        /// The trailing block total length.
        trailer: u32,
    },
    /// A Section Header Block whose byte-order magic is wrong in both byte orders.
    BadByteOrderMagic {
        /// The four bytes found.
        raw: [u8; 4],
    },
    /// A pcapng block whose body contradicts itself (e.g. a captured length longer than the
    /// block).
    MalformedBlock {
        /// The block type.
        block_type: u32,
        /// What is wrong.
        what: &'static str,
    },
    /// A packet block naming an interface its section has not described.
    UnknownInterface {
        /// The interface id in the block.
        id: u32,
        /// How many interfaces the section has described so far.
        count: u32,
    },
    /// More than [`MAX_INTERFACES`] interface descriptions.
    TooManyInterfaces,
}

impl fmt::Display for CaptureErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io(e) => write!(f, "I/O error: {e}"),
            Self::Empty => f.write_str("empty file, not a capture"),
            Self::NotACapture { magic } => write!(
                f,
                "not a pcap or pcapng file (first bytes {:02x} {:02x} {:02x} {:02x})",
                magic[0], magic[1], magic[2], magic[3]
            ),
            Self::UnsupportedFormat(what) => write!(f, "unsupported capture format: {what}"),
            Self::UnsupportedVersion { major, minor } => {
                write!(f, "unsupported format version {major}.{minor}")
            }
            Self::TruncatedHeader {
                what,
                needed,
                available,
            } => write!(
                f,
                "truncated {what} (need {needed} bytes, {available} left)"
            ),
            Self::TruncatedRecord { len, available } => write!(
                f,
                "truncated packet record (header says {len} bytes, {available} left)"
            ),
            Self::TruncatedBlock { len, available } => write!(
                f,
                "truncated pcapng block (header says {len} bytes, {available} left)"
            ),
            Self::BadRecordLength { len, snaplen } => write!(
                f,
                "corrupt packet record: captured length {len} is above the file's snaplen {snaplen} and the {MAX_SNAPLEN}-byte maximum"
            ),
            Self::TooLarge { what, len, max } => {
                write!(f, "{what} of {len} bytes exceeds the {max}-byte limit")
            }
            Self::BlockTooShort { len, min } => write!(
                f,
                "bad pcapng block length {len} (this block needs at least {min})"
            ),
            Self::BlockLengthUnaligned { len } => {
                write!(f, "bad pcapng block length {len} (not a multiple of 4)")
            }
            Self::BlockLengthMismatch { header, trailer } => write!(
                f,
                "bad pcapng block length: leading {header}, trailing {trailer}"
            ),
            Self::BadByteOrderMagic { raw } => write!(
                f,
                "bad pcapng byte-order magic {:02x} {:02x} {:02x} {:02x}",
                raw[0], raw[1], raw[2], raw[3]
            ),
            Self::MalformedBlock { block_type, what } => {
                write!(f, "malformed pcapng block (type {block_type:#x}): {what}")
            }
            Self::UnknownInterface { id, count } => write!(
                f,
                "packet refers to interface {id} but the section describes {count}"
            ),
            Self::TooManyInterfaces => {
                write!(f, "more than {MAX_INTERFACES} interface descriptions")
            }
        }
    }
}

impl fmt::Display for CaptureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at byte {}: {}", self.offset, self.kind)
    }
}

impl std::error::Error for CaptureError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            CaptureErrorKind::Io(e) => Some(e),
            _ => None,
        }
    }
}

fn cerr(offset: u64, kind: CaptureErrorKind) -> CaptureError {
    CaptureError { offset, kind }
}

/// A packet located in the buffer, before it is lent out.
struct Rec {
    ts_nanos: u64,
    interface: u32,
    linktype: u32,
    orig_len: u32,
    data: Range<usize>,
}

/// Streams packets out of a classic pcap or pcapng file.
///
/// Give it the file (or any [`io::Read`]) directly: it buffers internally in large reads. A
/// clean end of input between records is `Ok(None)`; an end inside a record, or anything
/// corrupt, is a [`CaptureError`] naming the byte offset. After `Ok(None)` or an error, further
/// calls return `Ok(None)`. A reader returning [`io::ErrorKind::Interrupted`] is retried; other
/// I/O errors (including `WouldBlock`) end the stream.
///
/// ```
/// use lagd_proto::capture::{CaptureReader, PcapWriter, LINKTYPE_ETHERNET};
///
/// let mut w = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET).unwrap();
/// w.write_packet(1_500_000_000_000_000_123, &[0xff; 60]).unwrap();
/// let file = w.into_inner();
///
/// let mut r = CaptureReader::new(&file[..]).unwrap();
/// let p = r.next_packet().unwrap().unwrap();
/// assert_eq!((p.ts_nanos, p.linktype, p.data.len()), (1_500_000_000_000_000_123, 1, 60));
/// assert!(r.next_packet().unwrap().is_none());
/// ```
pub struct CaptureReader<R: io::Read> {
    reader: R,
    /// Bytes `start..end` are read but not yet consumed.
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// File offset of `buf[0]`.
    base: u64,
    /// The reader has reported end of input.
    eof: bool,
    /// A previous call returned `Ok(None)` or an error.
    done: bool,
    format: CaptureFormat,
    /// Byte order of the file (pcap) or the current section (pcapng).
    big_endian: bool,
    interfaces: Vec<InterfaceInfo>,
    /// Index in `interfaces` of the current pcapng section's interface 0.
    section_first: usize,
    /// Number of pcapng sections seen.
    sections: u32,
    /// Classic pcap: nanosecond timestamps.
    pcap_nanos: bool,
    /// Classic pcap: the file's link type.
    pcap_linktype: u32,
    /// Classic pcap: the file header's snaplen.
    pcap_snaplen: u32,
}

impl<R: io::Read> fmt::Debug for CaptureReader<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CaptureReader")
            .field("format", &self.format)
            .field("offset", &self.offset())
            .field("interfaces", &self.interfaces)
            .finish_non_exhaustive()
    }
}

impl<R: io::Read> CaptureReader<R> {
    /// Reads the file header (pcap) or first Section Header Block (pcapng).
    pub fn new(reader: R) -> Result<Self, CaptureError> {
        let mut r = Self {
            reader,
            buf: vec![0; DEFAULT_BUF_LEN],
            start: 0,
            end: 0,
            base: 0,
            eof: false,
            done: false,
            format: CaptureFormat::PcapNg,
            big_endian: false,
            interfaces: Vec::new(),
            section_first: 0,
            sections: 0,
            pcap_nanos: false,
            pcap_linktype: 0,
            pcap_snaplen: 0,
        };
        let avail = r.fill(4)?;
        if avail == 0 {
            return Err(cerr(0, CaptureErrorKind::Empty));
        }
        let mut magic = [0u8; 4];
        let n = avail.min(4);
        magic[..n].copy_from_slice(&r.buf[..n]);
        if avail < 4 {
            return Err(cerr(0, CaptureErrorKind::NotACapture { magic }));
        }
        let le = u32::from_le_bytes(magic);
        let be = u32::from_be_bytes(magic);
        if le == BT_SHB {
            r.first_section()?;
        } else if le == PCAP_MAGIC_MICROS || le == PCAP_MAGIC_NANOS {
            r.pcap_header(false, le == PCAP_MAGIC_NANOS)?;
        } else if be == PCAP_MAGIC_MICROS || be == PCAP_MAGIC_NANOS {
            r.pcap_header(true, be == PCAP_MAGIC_NANOS)?;
        } else if le == PCAP_MAGIC_KUZNETSOV || be == PCAP_MAGIC_KUZNETSOV {
            let what = "Kuznetsov-modified pcap (convert with editcap)";
            return Err(cerr(0, CaptureErrorKind::UnsupportedFormat(what)));
        } else {
            return Err(cerr(0, CaptureErrorKind::NotACapture { magic }));
        }
        Ok(r)
    }

    /// The container format.
    pub fn format(&self) -> CaptureFormat {
        self.format
    }

    /// Every interface described so far (see [`InterfaceInfo`]).
    pub fn interfaces(&self) -> &[InterfaceInfo] {
        &self.interfaces
    }

    /// Bytes of the file consumed so far (headers, records and skipped blocks).
    pub fn offset(&self) -> u64 {
        self.base + self.start as u64
    }

    /// The next packet, `Ok(None)` at a clean end of input.
    pub fn next_packet(&mut self) -> Result<Option<Packet<'_>>, CaptureError> {
        if self.done {
            return Ok(None);
        }
        let res = match self.format {
            CaptureFormat::Pcap { .. } => self.next_pcap_record(),
            CaptureFormat::PcapNg => self.next_pcapng_packet(),
        };
        match res {
            Ok(Some(rec)) => Ok(Some(Packet {
                ts_nanos: rec.ts_nanos,
                interface: rec.interface,
                linktype: rec.linktype,
                orig_len: rec.orig_len,
                data: &self.buf[rec.data],
            })),
            Ok(None) => {
                self.done = true;
                Ok(None)
            }
            Err(e) => {
                self.done = true;
                Err(e)
            }
        }
    }

    /// Makes at least `n` unconsumed bytes available unless the input ends first; returns how
    /// many are available. Grows the buffer only as data arrives, so a bogus large `n` costs at
    /// most about twice the bytes actually present.
    fn fill(&mut self, n: usize) -> Result<usize, CaptureError> {
        while self.end - self.start < n && !self.eof {
            if self.end == self.buf.len() {
                if self.start > 0 {
                    self.buf.copy_within(self.start..self.end, 0);
                    self.base += self.start as u64;
                    self.end -= self.start;
                    self.start = 0;
                }
                if self.end == self.buf.len() {
                    let new_len = self.buf.len().saturating_mul(2).min(n).max(self.end + 1);
                    self.buf.resize(new_len, 0);
                }
            }
            match self.reader.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(k) => self.end += k.min(self.buf.len() - self.end),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let at = self.base + self.end as u64;
                    return Err(cerr(at, CaptureErrorKind::Io(e)));
                }
            }
        }
        Ok(self.end - self.start)
    }
}

fn invalid_input(msg: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}
