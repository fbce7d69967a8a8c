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

/// `if_name` values longer than this many bytes are cut short.
const MAX_NAME_LEN: usize = 1024;
/// The reader's initial buffer size: one `read` call fills this much.
const DEFAULT_BUF_LEN: usize = 1 << 20;

/// Classic pcap magic for microsecond timestamps, as a native `u32`.
const PCAP_MAGIC_MICROS: u32 = 0xa1b2_c3d4;
/// Classic pcap magic for nanosecond timestamps, as a native `u32`.
const PCAP_MAGIC_NANOS: u32 = 0xa1b2_3c4d;
/// Alexey Kuznetsov's modified pcap format, which we recognise only to reject clearly.
const PCAP_MAGIC_KUZNETSOV: u32 = 0xa1b2_cd34;
/// Classic pcap file header length.
const PCAP_HEADER_LEN: usize = 24;
/// Classic pcap record header length.
const PCAP_RECORD_HEADER_LEN: usize = 16;

/// pcapng Section Header Block type (a byte palindrome, so byte-order independent).
const BT_SHB: u32 = 0x0a0d_0d0a;
/// pcapng Interface Description Block type.
const BT_IDB: u32 = 1;
/// pcapng (obsolete) Packet Block type.
const BT_PB: u32 = 2;
/// pcapng Simple Packet Block type.
const BT_SPB: u32 = 3;
/// pcapng Enhanced Packet Block type.
const BT_EPB: u32 = 6;
/// The SHB byte-order magic, as a native `u32`.
const BYTE_ORDER_MAGIC: u32 = 0x1a2b_3c4d;
/// Smallest pcapng block: type, length, trailing length.
const MIN_BLOCK_LEN: usize = 12;
/// Smallest SHB: 12 bytes of framing plus byte-order magic, versions and section length.
const MIN_SHB_LEN: usize = 28;

/// pcapng option codes used here.
const OPT_ENDOFOPT: u16 = 0;
const OPT_IF_NAME: u16 = 2;
const OPT_IF_TSRESOL: u16 = 9;
const OPT_IF_TSOFFSET: u16 = 14;

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

/// A framed pcapng block: its type, file offset and body range in the buffer.
struct Block {
    block_type: u32,
    at: u64,
    body: Range<usize>,
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

    fn pcap_header(&mut self, big_endian: bool, nanos: bool) -> Result<(), CaptureError> {
        let avail = self.fill(PCAP_HEADER_LEN)?;
        if avail < PCAP_HEADER_LEN {
            let kind = CaptureErrorKind::TruncatedHeader {
                what: "pcap file header",
                needed: PCAP_HEADER_LEN,
                available: avail,
            };
            return Err(cerr(0, kind));
        }
        let h = &self.buf[self.start..self.start + PCAP_HEADER_LEN];
        let major = rd16(h, 4, big_endian);
        let minor = rd16(h, 6, big_endian);
        let snaplen = rd32(h, 16, big_endian);
        let linktype = rd32(h, 20, big_endian) & 0xffff;
        if major != 2 {
            return Err(cerr(
                0,
                CaptureErrorKind::UnsupportedVersion { major, minor },
            ));
        }
        self.start += PCAP_HEADER_LEN;
        self.format = CaptureFormat::Pcap { nanos, big_endian };
        self.big_endian = big_endian;
        self.pcap_nanos = nanos;
        self.pcap_linktype = linktype;
        self.pcap_snaplen = snaplen;
        self.interfaces.push(InterfaceInfo {
            linktype,
            snaplen,
            name: None,
            ts_resolution: if nanos {
                TsResolution::NANOS
            } else {
                TsResolution::MICROS
            },
            ts_offset_secs: 0,
            section: 0,
        });
        Ok(())
    }

    #[inline]
    fn next_pcap_record(&mut self) -> Result<Option<Rec>, CaptureError> {
        let at = self.offset();
        let mut avail = self.end - self.start;
        if avail < PCAP_RECORD_HEADER_LEN {
            avail = self.fill(PCAP_RECORD_HEADER_LEN)?;
            if avail == 0 {
                return Ok(None);
            }
            if avail < PCAP_RECORD_HEADER_LEN {
                let kind = CaptureErrorKind::TruncatedHeader {
                    what: "packet record header",
                    needed: PCAP_RECORD_HEADER_LEN,
                    available: avail,
                };
                return Err(cerr(at, kind));
            }
        }
        let be = self.big_endian;
        let h = &self.buf[self.start..self.start + PCAP_RECORD_HEADER_LEN];
        let secs = rd32(h, 0, be);
        let frac = rd32(h, 4, be);
        let caplen = rd32(h, 8, be);
        let orig_len = rd32(h, 12, be);
        if caplen > MAX_SNAPLEN && caplen > self.pcap_snaplen.min(MAX_RECORD_LEN) {
            let kind = CaptureErrorKind::BadRecordLength {
                len: caplen,
                snaplen: self.pcap_snaplen,
            };
            return Err(cerr(at, kind));
        }
        let total = PCAP_RECORD_HEADER_LEN + caplen as usize;
        if avail < total {
            avail = self.fill(total)?;
            if avail < total {
                let kind = CaptureErrorKind::TruncatedRecord {
                    len: caplen,
                    available: avail - PCAP_RECORD_HEADER_LEN,
                };
                return Err(cerr(at, kind));
            }
        }
        // `fill` may have moved the data to the front of the buffer.
        let s = self.start;
        self.start = s + total;
        let frac_nanos = if self.pcap_nanos {
            u64::from(frac)
        } else {
            u64::from(frac) * 1000
        };
        Ok(Some(Rec {
            // At most (2^32 - 1) * (10^9 + 1000), well inside a u64.
            ts_nanos: u64::from(secs) * NANOS_PER_SEC + frac_nanos,
            interface: 0,
            linktype: self.pcap_linktype,
            orig_len,
            data: s + PCAP_RECORD_HEADER_LEN..s + total,
        }))
    }

    /// Frames the next pcapng block and consumes it; `Ok(None)` at a clean end of input. For a
    /// Section Header Block this also switches the byte order.
    #[inline]
    fn next_block(&mut self) -> Result<Option<Block>, CaptureError> {
        let at = self.offset();
        let mut avail = self.end - self.start;
        if avail < MIN_BLOCK_LEN {
            avail = self.fill(MIN_BLOCK_LEN)?;
            if avail == 0 {
                return Ok(None);
            }
            if avail < MIN_BLOCK_LEN {
                let kind = CaptureErrorKind::TruncatedHeader {
                    what: "pcapng block header",
                    needed: MIN_BLOCK_LEN,
                    available: avail,
                };
                return Err(cerr(at, kind));
            }
        }
        let s = self.start;
        let h = &self.buf[s..s + MIN_BLOCK_LEN];
        if rd32(h, 0, false) == BT_SHB {
            let raw = [h[8], h[9], h[10], h[11]];
            if u32::from_le_bytes(raw) == BYTE_ORDER_MAGIC {
                self.big_endian = false;
            } else if u32::from_be_bytes(raw) == BYTE_ORDER_MAGIC {
                self.big_endian = true;
            } else {
                return Err(cerr(at + 8, CaptureErrorKind::BadByteOrderMagic { raw }));
            }
        }
        let be = self.big_endian;
        let block_type = rd32(h, 0, be);
        let len32 = rd32(h, 4, be);
        let min = if block_type == BT_SHB {
            MIN_SHB_LEN
        } else {
            MIN_BLOCK_LEN
        };
        if (len32 as usize) < min {
            let kind = CaptureErrorKind::BlockTooShort {
                len: len32,
                min: min as u32,
            };
            return Err(cerr(at, kind));
        }
        if len32 % 4 != 0 {
            return Err(cerr(
                at,
                CaptureErrorKind::BlockLengthUnaligned { len: len32 },
            ));
        }
        if len32 > MAX_RECORD_LEN {
            let kind = CaptureErrorKind::TooLarge {
                what: "pcapng block",
                len: len32,
                max: MAX_RECORD_LEN,
            };
            return Err(cerr(at, kind));
        }
        let len = len32 as usize;
        if avail < len {
            avail = self.fill(len)?;
            if avail < len {
                let kind = CaptureErrorKind::TruncatedBlock {
                    len: len32,
                    available: avail,
                };
                return Err(cerr(at, kind));
            }
        }
        let s = self.start;
        let trailer = rd32(&self.buf, s + len - 4, be);
        if trailer != len32 {
            let kind = CaptureErrorKind::BlockLengthMismatch {
                header: len32,
                trailer,
            };
            return Err(cerr(at, kind));
        }
        self.start = s + len;
        Ok(Some(Block {
            block_type,
            at,
            body: s + 8..s + len - 4,
        }))
    }

    fn first_section(&mut self) -> Result<(), CaptureError> {
        self.format = CaptureFormat::PcapNg;
        match self.next_block()? {
            Some(b) if b.block_type == BT_SHB => self.section_header(&b),
            // The first four bytes were the SHB type, so a block was framed, and it is an SHB.
            _ => Err(cerr(
                0,
                CaptureErrorKind::MalformedBlock {
                    block_type: BT_SHB,
                    what: "missing section header",
                },
            )),
        }
    }

    fn section_header(&mut self, b: &Block) -> Result<(), CaptureError> {
        // The body holds at least 16 bytes (checked against MIN_SHB_LEN when framing).
        let body = &self.buf[b.body.clone()];
        let major = rd16(body, 4, self.big_endian);
        let minor = rd16(body, 6, self.big_endian);
        if major != 1 {
            return Err(cerr(
                b.at,
                CaptureErrorKind::UnsupportedVersion { major, minor },
            ));
        }
        self.section_first = self.interfaces.len();
        self.sections = self.sections.saturating_add(1);
        Ok(())
    }

    fn interface_description(&mut self, b: &Block) -> Result<(), CaptureError> {
        let be = self.big_endian;
        let body = &self.buf[b.body.clone()];
        if body.len() < 8 {
            let kind = CaptureErrorKind::MalformedBlock {
                block_type: BT_IDB,
                what: "interface description shorter than 8 bytes",
            };
            return Err(cerr(b.at, kind));
        }
        if self.interfaces.len() >= MAX_INTERFACES {
            return Err(cerr(b.at, CaptureErrorKind::TooManyInterfaces));
        }
        let mut info = InterfaceInfo {
            linktype: u32::from(rd16(body, 0, be)),
            snaplen: rd32(body, 4, be),
            name: None,
            ts_resolution: TsResolution::MICROS,
            ts_offset_secs: 0,
            section: self.sections.saturating_sub(1),
        };
        for (code, value) in Options::new(&body[8..], be) {
            match code {
                OPT_IF_NAME => {
                    let v = &value[..value.len().min(MAX_NAME_LEN)];
                    let v = v.strip_suffix(&[0]).unwrap_or(v);
                    info.name = Some(String::from_utf8_lossy(v).into_owned());
                }
                OPT_IF_TSRESOL if !value.is_empty() => {
                    info.ts_resolution = TsResolution::from_if_tsresol(value[0]);
                }
                OPT_IF_TSOFFSET if value.len() == 8 => {
                    info.ts_offset_secs = rd64(value, 0, be) as i64;
                }
                _ => {}
            }
        }
        self.interfaces.push(info);
        Ok(())
    }

    /// Maps a section-relative interface id to an index in `interfaces`.
    #[inline]
    fn interface_index(&self, at: u64, id: u32) -> Result<usize, CaptureError> {
        let count = self.interfaces.len() - self.section_first;
        if (id as usize) < count {
            Ok(self.section_first + id as usize)
        } else {
            let kind = CaptureErrorKind::UnknownInterface {
                id,
                count: count as u32,
            };
            Err(cerr(at, kind))
        }
    }

    /// Enhanced Packet Block, or the obsolete Packet Block (which has a 16-bit interface id
    /// followed by a 16-bit drop count, then the same layout).
    #[inline]
    fn enhanced_packet(&self, b: &Block) -> Result<Rec, CaptureError> {
        let be = self.big_endian;
        let body = &self.buf[b.body.clone()];
        if body.len() < 20 {
            let kind = CaptureErrorKind::MalformedBlock {
                block_type: b.block_type,
                what: "packet block shorter than its 20-byte header",
            };
            return Err(cerr(b.at, kind));
        }
        let id = if b.block_type == BT_PB {
            u32::from(rd16(body, 0, be))
        } else {
            rd32(body, 0, be)
        };
        let ticks = (u64::from(rd32(body, 4, be)) << 32) | u64::from(rd32(body, 8, be));
        let caplen = rd32(body, 12, be);
        let orig_len = rd32(body, 16, be);
        if caplen as usize > body.len() - 20 {
            let kind = CaptureErrorKind::MalformedBlock {
                block_type: b.block_type,
                what: "captured length exceeds the block",
            };
            return Err(cerr(b.at, kind));
        }
        let idx = self.interface_index(b.at, id)?;
        let iface = &self.interfaces[idx];
        let mut ts_nanos = iface.ts_resolution.to_nanos(ticks);
        if iface.ts_offset_secs != 0 {
            let t =
                i128::from(ts_nanos) + i128::from(iface.ts_offset_secs) * i128::from(NANOS_PER_SEC);
            ts_nanos = u64::try_from(t.max(0)).unwrap_or(u64::MAX);
        }
        let data_start = b.body.start + 20;
        Ok(Rec {
            ts_nanos,
            interface: idx as u32,
            linktype: iface.linktype,
            orig_len,
            data: data_start..data_start + caplen as usize,
        })
    }

    /// Simple Packet Block: no interface id (always 0), no timestamp, and the captured length
    /// is the original length capped by the interface snaplen and by the block.
    fn simple_packet(&self, b: &Block) -> Result<Rec, CaptureError> {
        let body = &self.buf[b.body.clone()];
        if body.len() < 4 {
            let kind = CaptureErrorKind::MalformedBlock {
                block_type: BT_SPB,
                what: "simple packet block shorter than 4 bytes",
            };
            return Err(cerr(b.at, kind));
        }
        let orig_len = rd32(body, 0, self.big_endian);
        let idx = self.interface_index(b.at, 0)?;
        let iface = &self.interfaces[idx];
        let mut caplen = (orig_len as usize).min(body.len() - 4);
        if iface.snaplen != 0 {
            caplen = caplen.min(iface.snaplen as usize);
        }
        let data_start = b.body.start + 4;
        Ok(Rec {
            ts_nanos: 0,
            interface: idx as u32,
            linktype: iface.linktype,
            orig_len,
            data: data_start..data_start + caplen,
        })
    }

    #[inline]
    fn next_pcapng_packet(&mut self) -> Result<Option<Rec>, CaptureError> {
        loop {
            let Some(b) = self.next_block()? else {
                return Ok(None);
            };
            match b.block_type {
                BT_EPB | BT_PB => return self.enhanced_packet(&b).map(Some),
                BT_SPB => return self.simple_packet(&b).map(Some),
                BT_IDB => self.interface_description(&b)?,
                BT_SHB => self.section_header(&b)?,
                _ => {}
            }
        }
    }
}

/// Iterates over pcapng options `(code, value)`, stopping at `opt_endofopt` or at the first
/// option that does not fit (options are advisory, so a damaged list is cut, not fatal).
struct Options<'a> {
    rest: &'a [u8],
    big_endian: bool,
}

impl<'a> Options<'a> {
    fn new(rest: &'a [u8], big_endian: bool) -> Self {
        Self { rest, big_endian }
    }
}

impl<'a> Iterator for Options<'a> {
    type Item = (u16, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.len() < 4 {
            return None;
        }
        let code = rd16(self.rest, 0, self.big_endian);
        let len = rd16(self.rest, 2, self.big_endian) as usize;
        let padded = (len + 3) & !3;
        if code == OPT_ENDOFOPT || self.rest.len() - 4 < len {
            self.rest = &[];
            return None;
        }
        let value = &self.rest[4..4 + len];
        self.rest = self.rest.get(4 + padded..).unwrap_or(&[]);
        Some((code, value))
    }
}

/// Writes a classic pcap file: little-endian, nanosecond timestamps, snaplen 262144.
///
/// Packets are written whole (captured length = original length) up to the snaplen; a longer
/// one is cut to it and keeps its original length, as capture tools do, so every file it
/// writes is one [`CaptureReader`] (and libpcap) accepts. The writer does no buffering of its
/// own; wrap `W` in an [`io::BufWriter`] for large captures.
#[derive(Debug)]
pub struct PcapWriter<W: io::Write> {
    inner: W,
}

impl<W: io::Write> PcapWriter<W> {
    /// Writes the 24-byte file header for `linktype` (e.g. [`LINKTYPE_ETHERNET`]).
    pub fn new(mut writer: W, linktype: u32) -> io::Result<Self> {
        let mut h = [0u8; PCAP_HEADER_LEN];
        h[0..4].copy_from_slice(&PCAP_MAGIC_NANOS.to_le_bytes());
        h[4..6].copy_from_slice(&2u16.to_le_bytes());
        h[6..8].copy_from_slice(&4u16.to_le_bytes());
        // thiszone and sigfigs stay zero.
        h[16..20].copy_from_slice(&WRITER_SNAPLEN.to_le_bytes());
        h[20..24].copy_from_slice(&linktype.to_le_bytes());
        writer.write_all(&h)?;
        Ok(Self { inner: writer })
    }

    /// Appends one packet captured at `ts_nanos` nanoseconds since the Unix epoch (its first
    /// [`WRITER_SNAPLEN`] bytes if it is longer).
    ///
    /// Fails with [`io::ErrorKind::InvalidInput`] if `data` is longer than `u32::MAX` bytes or
    /// the timestamp's seconds do not fit the format's 32-bit field (after year 2106).
    pub fn write_packet(&mut self, ts_nanos: u64, data: &[u8]) -> io::Result<()> {
        let secs = u32::try_from(ts_nanos / NANOS_PER_SEC)
            .map_err(|_| invalid_input("timestamp after 2106"))?;
        let frac = (ts_nanos % NANOS_PER_SEC) as u32;
        let len = u32::try_from(data.len()).map_err(|_| invalid_input("packet over 4 GiB"))?;
        let caplen = len.min(WRITER_SNAPLEN);
        let mut h = [0u8; PCAP_RECORD_HEADER_LEN];
        h[0..4].copy_from_slice(&secs.to_le_bytes());
        h[4..8].copy_from_slice(&frac.to_le_bytes());
        h[8..12].copy_from_slice(&caplen.to_le_bytes());
        h[12..16].copy_from_slice(&len.to_le_bytes());
        self.inner.write_all(&h)?;
        self.inner.write_all(&data[..caplen as usize])
    }

    /// Returns the underlying writer (not flushed; flush it if it buffers).
    pub fn into_inner(self) -> W {
        self.inner
    }
}

fn invalid_input(msg: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// Writes a minimal pcapng file, mainly for tests: Section Header Blocks, one Interface
/// Description Block per interface, and Enhanced (or Simple) Packet Blocks.
///
/// ```
/// use lagd_proto::capture::*;
///
/// let mut w = PcapNgWriter::new(Vec::new()).unwrap();
/// let eth = w.add_interface(LINKTYPE_ETHERNET, 0, Some("eth0"), TsResolution::MICROS).unwrap();
/// let raw = w.add_interface(LINKTYPE_RAW, 0, None, TsResolution::NANOS).unwrap();
/// w.write_packet(eth, 5_000_000_000, &[0; 60]).unwrap();
/// w.write_packet(raw, 5_000_000_001, &[0x45; 20]).unwrap();
/// let file = w.into_inner();
///
/// let mut r = CaptureReader::new(&file[..]).unwrap();
/// assert_eq!(r.next_packet().unwrap().unwrap().linktype, LINKTYPE_ETHERNET);
/// assert_eq!(r.next_packet().unwrap().unwrap().ts_nanos, 5_000_000_001);
/// assert_eq!(r.interfaces()[0].name.as_deref(), Some("eth0"));
/// ```
#[derive(Debug)]
pub struct PcapNgWriter<W: io::Write> {
    inner: W,
    big_endian: bool,
    /// Timestamp units of the current section's interfaces, by interface id.
    resolutions: Vec<TsResolution>,
}

impl<W: io::Write> PcapNgWriter<W> {
    /// Starts a little-endian file with its first Section Header Block.
    pub fn new(writer: W) -> io::Result<Self> {
        Self::with_byte_order(writer, false)
    }

    /// Starts a file whose first section is in the given byte order.
    pub fn with_byte_order(writer: W, big_endian: bool) -> io::Result<Self> {
        let mut w = Self {
            inner: writer,
            big_endian,
            resolutions: Vec::new(),
        };
        w.new_section(big_endian)?;
        Ok(w)
    }

    /// Starts a new section (in the given byte order). Interface ids restart at 0.
    pub fn new_section(&mut self, big_endian: bool) -> io::Result<()> {
        self.big_endian = big_endian;
        self.resolutions.clear();
        let mut body = [0u8; 16];
        body[0..4].copy_from_slice(&self.u32_bytes(BYTE_ORDER_MAGIC));
        body[4..6].copy_from_slice(&self.u16_bytes(1));
        body[6..8].copy_from_slice(&self.u16_bytes(0));
        body[8..16].copy_from_slice(&[0xff; 8]); // section length -1: not given
        self.write_block(BT_SHB, &[&body])
    }

    /// Describes an interface in the current section and returns its id. `snaplen` 0 means
    /// unlimited; `name` becomes `if_name`; a resolution other than microseconds is written as
    /// `if_tsresol`.
    pub fn add_interface(
        &mut self,
        linktype: u32,
        snaplen: u32,
        name: Option<&str>,
        ts_resolution: TsResolution,
    ) -> io::Result<u32> {
        let linktype =
            u16::try_from(linktype).map_err(|_| invalid_input("link type over 65535"))?;
        let tsresol = ts_resolution
            .to_if_tsresol()
            .ok_or_else(|| invalid_input("timestamp exponent over 127"))?;
        let id = u32::try_from(self.resolutions.len())
            .map_err(|_| invalid_input("too many interfaces"))?;
        let mut body = Vec::with_capacity(32);
        body.extend_from_slice(&self.u16_bytes(linktype));
        body.extend_from_slice(&[0, 0]);
        body.extend_from_slice(&self.u32_bytes(snaplen));
        let mut any_option = false;
        if let Some(name) = name {
            let len = u16::try_from(name.len()).map_err(|_| invalid_input("name too long"))?;
            self.push_option(&mut body, OPT_IF_NAME, len, name.as_bytes());
            any_option = true;
        }
        if ts_resolution != TsResolution::MICROS {
            self.push_option(&mut body, OPT_IF_TSRESOL, 1, &[tsresol]);
            any_option = true;
        }
        if any_option {
            self.push_option(&mut body, OPT_ENDOFOPT, 0, &[]);
        }
        self.write_block(BT_IDB, &[&body])?;
        self.resolutions.push(ts_resolution);
        Ok(id)
    }

    /// Writes an Enhanced Packet Block (captured length = original length) on `interface`,
    /// converting `ts_nanos` to the interface's resolution (rounding down).
    pub fn write_packet(&mut self, interface: u32, ts_nanos: u64, data: &[u8]) -> io::Result<()> {
        let res = *self
            .resolutions
            .get(interface as usize)
            .ok_or_else(|| invalid_input("unknown interface id"))?;
        let len = u32::try_from(data.len()).map_err(|_| invalid_input("packet over 4 GiB"))?;
        let ticks = res.from_nanos(ts_nanos);
        let mut h = [0u8; 20];
        h[0..4].copy_from_slice(&self.u32_bytes(interface));
        h[4..8].copy_from_slice(&self.u32_bytes((ticks >> 32) as u32));
        h[8..12].copy_from_slice(&self.u32_bytes(ticks as u32));
        h[12..16].copy_from_slice(&self.u32_bytes(len));
        h[16..20].copy_from_slice(&self.u32_bytes(len));
        self.write_block(BT_EPB, &[&h, data])
    }

    /// Writes a Simple Packet Block (implicitly on interface 0, without a timestamp).
    pub fn write_simple_packet(&mut self, data: &[u8]) -> io::Result<()> {
        let len = u32::try_from(data.len()).map_err(|_| invalid_input("packet over 4 GiB"))?;
        self.write_block(BT_SPB, &[&self.u32_bytes(len), data])
    }

    /// Writes an arbitrary block (e.g. one a reader must skip); the body is zero-padded to a
    /// multiple of 4 bytes.
    pub fn write_block_raw(&mut self, block_type: u32, body: &[u8]) -> io::Result<()> {
        self.write_block(block_type, &[body])
    }

    /// Returns the underlying writer (not flushed; flush it if it buffers).
    pub fn into_inner(self) -> W {
        self.inner
    }

    fn u16_bytes(&self, v: u16) -> [u8; 2] {
        if self.big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }

    fn u32_bytes(&self, v: u32) -> [u8; 4] {
        if self.big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }

    fn push_option(&self, out: &mut Vec<u8>, code: u16, len: u16, value: &[u8]) {
        out.extend_from_slice(&self.u16_bytes(code));
        out.extend_from_slice(&self.u16_bytes(len));
        out.extend_from_slice(value);
        out.resize(out.len() + (4 - value.len() % 4) % 4, 0);
    }

    fn write_block(&mut self, block_type: u32, parts: &[&[u8]]) -> io::Result<()> {
        let body_len: usize = parts.iter().map(|p| p.len()).sum();
        let pad = (4 - body_len % 4) % 4;
        let total = u32::try_from(12 + body_len + pad)
            .ok()
            .filter(|&t| t <= MAX_RECORD_LEN)
            .ok_or_else(|| invalid_input("block too large"))?;
        self.inner.write_all(&self.u32_bytes(block_type))?;
        self.inner.write_all(&self.u32_bytes(total))?;
        for p in parts {
            self.inner.write_all(p)?;
        }
        self.inner.write_all(&[0u8; 3][..pad])?;
        self.inner.write_all(&self.u32_bytes(total))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A packet copied out of the reader.
    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Owned {
        ts: u64,
        iface: u32,
        linktype: u32,
        orig_len: u32,
        data: Vec<u8>,
    }

    /// Reads everything; returns the packets read and the final error, if any.
    fn read_all<R: io::Read>(r: R) -> (Vec<Owned>, Option<CaptureError>) {
        let mut out = Vec::new();
        let mut rd = match CaptureReader::new(r) {
            Ok(rd) => rd,
            Err(e) => return (out, Some(e)),
        };
        loop {
            match rd.next_packet() {
                Ok(Some(p)) => out.push(Owned {
                    ts: p.ts_nanos,
                    iface: p.interface,
                    linktype: p.linktype,
                    orig_len: p.orig_len,
                    data: p.data.to_vec(),
                }),
                Ok(None) => return (out, None),
                Err(e) => {
                    // The reader is finished after an error.
                    assert!(matches!(rd.next_packet(), Ok(None)));
                    return (out, Some(e));
                }
            }
        }
    }

    fn read_ok(bytes: &[u8]) -> Vec<Owned> {
        let (pkts, err) = read_all(bytes);
        if let Some(e) = err {
            panic!("unexpected error: {e}");
        }
        pkts
    }

    fn read_err(bytes: &[u8]) -> CaptureError {
        read_all(bytes).1.expect("expected an error")
    }

    /// Hands out at most `chunk` bytes per `read`, and `Interrupted` every third call.
    struct Chunked<'a> {
        data: &'a [u8],
        chunk: usize,
        calls: usize,
    }

    impl io::Read for Chunked<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.calls += 1;
            if self.calls % 3 == 0 {
                return Err(io::ErrorKind::Interrupted.into());
            }
            let n = self.chunk.min(buf.len()).min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    fn chunked(data: &[u8], chunk: usize) -> Chunked<'_> {
        Chunked {
            data,
            chunk,
            calls: 0,
        }
    }

    /// Little byte builder for hand-made files, independent of the writers under test.
    struct B {
        be: bool,
        v: Vec<u8>,
    }

    impl B {
        fn new(be: bool) -> Self {
            Self { be, v: Vec::new() }
        }
        fn u16(&mut self, x: u16) -> &mut Self {
            let b = if self.be {
                x.to_be_bytes()
            } else {
                x.to_le_bytes()
            };
            self.v.extend_from_slice(&b);
            self
        }
        fn u32(&mut self, x: u32) -> &mut Self {
            let b = if self.be {
                x.to_be_bytes()
            } else {
                x.to_le_bytes()
            };
            self.v.extend_from_slice(&b);
            self
        }
        fn bytes(&mut self, b: &[u8]) -> &mut Self {
            self.v.extend_from_slice(b);
            self
        }
        fn pad4(&mut self) -> &mut Self {
            while self.v.len() % 4 != 0 {
                self.v.push(0);
            }
            self
        }
        /// Appends a pcapng block with the given body (padded here).
        fn block(&mut self, block_type: u32, body: &[u8]) -> &mut Self {
            let padded = body.len().div_ceil(4) * 4;
            let total = (12 + padded) as u32;
            self.u32(block_type)
                .u32(total)
                .bytes(body)
                .pad4()
                .u32(total)
        }
        /// Body bytes in this builder's byte order.
        fn body(&self) -> Self {
            Self::new(self.be)
        }
    }

    fn shb_body(be: bool) -> Vec<u8> {
        let mut b = B::new(be);
        b.u32(BYTE_ORDER_MAGIC)
            .u16(1)
            .u16(0)
            .u32(0xffff_ffff)
            .u32(0xffff_ffff);
        b.v
    }

    fn idb_body(be: bool, linktype: u16, snaplen: u32, opts: &[(u16, &[u8])]) -> Vec<u8> {
        let mut b = B::new(be);
        b.u16(linktype).u16(0).u32(snaplen);
        for (code, val) in opts {
            b.u16(*code).u16(val.len() as u16).bytes(val).pad4();
        }
        if !opts.is_empty() {
            b.u32(0);
        }
        b.v
    }

    fn epb_body(be: bool, id: u32, ticks: u64, orig_len: u32, data: &[u8]) -> Vec<u8> {
        let mut b = B::new(be);
        b.u32(id).u32((ticks >> 32) as u32).u32(ticks as u32);
        b.u32(data.len() as u32).u32(orig_len).bytes(data).pad4();
        b.v
    }

    #[test]
    fn pcap_writer_round_trip() {
        let pkts: [(u64, Vec<u8>); 4] = [
            (0, vec![]),
            (1, vec![0xab]),
            (1_700_000_000_999_999_999, (0..=255).collect()),
            (u64::from(u32::MAX) * NANOS_PER_SEC + 5, vec![7; 1514]),
        ];
        let mut w = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET).unwrap();
        for (ts, d) in &pkts {
            w.write_packet(*ts, d).unwrap();
        }
        let file = w.into_inner();
        // The header is exactly the classic little-endian nanosecond one.
        assert_eq!(
            file[..24],
            [
                0x4d, 0x3c, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 1, 0, 0, 0
            ]
        );
        let mut r = CaptureReader::new(&file[..]).unwrap();
        assert_eq!(
            r.format(),
            CaptureFormat::Pcap {
                nanos: true,
                big_endian: false
            }
        );
        assert_eq!(r.offset(), 24);
        for (ts, d) in &pkts {
            let p = r.next_packet().unwrap().unwrap();
            assert_eq!(p.ts_nanos, *ts);
            assert_eq!(p.data, &d[..]);
            assert_eq!(p.orig_len as usize, d.len());
            assert_eq!((p.interface, p.linktype), (0, LINKTYPE_ETHERNET));
        }
        assert!(r.next_packet().unwrap().is_none());
        assert_eq!(r.offset(), file.len() as u64);
        let ifs = r.interfaces();
        assert_eq!(ifs.len(), 1);
        assert_eq!(ifs[0].snaplen, WRITER_SNAPLEN);
        assert_eq!(ifs[0].ts_resolution, TsResolution::NANOS);
    }

    #[test]
    fn pcap_writer_rejects_unrepresentable_timestamp() {
        let mut w = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET).unwrap();
        let e = w
            .write_packet((u64::from(u32::MAX) + 1) * NANOS_PER_SEC, &[1])
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn big_endian_microsecond_pcap_by_hand() {
        #[rustfmt::skip]
        let file: &[u8] = &[
            0xa1, 0xb2, 0xc3, 0xd4, // magic, big-endian microseconds
            0x00, 0x02, 0x00, 0x04, // version 2.4
            0, 0, 0, 0, 0, 0, 0, 0, // thiszone, sigfigs
            0x00, 0x00, 0xff, 0xff, // snaplen 65535
            0x00, 0x00, 0x00, 0x65, // LINKTYPE_RAW
            0x5f, 0x5e, 0x10, 0x00, // 1_600_000_000 s
            0x00, 0x01, 0xe2, 0x40, // 123_456 us
            0x00, 0x00, 0x00, 0x04, // caplen 4
            0x00, 0x00, 0x00, 0x3c, // orig_len 60
            0xde, 0xad, 0xbe, 0xef,
            0x00, 0x00, 0x00, 0x01, // 1 s
            0x00, 0x0f, 0x42, 0x3f, // 999_999 us
            0, 0, 0, 0, 0, 0, 0, 0, // empty packet
        ];
        let mut r = CaptureReader::new(file).unwrap();
        assert_eq!(
            r.format(),
            CaptureFormat::Pcap {
                nanos: false,
                big_endian: true
            }
        );
        assert_eq!(r.interfaces()[0].snaplen, 65535);
        let p = r.next_packet().unwrap().unwrap();
        assert_eq!(p.ts_nanos, 1_600_000_000_123_456_000);
        assert_eq!((p.linktype, p.orig_len), (LINKTYPE_RAW, 60));
        assert_eq!(p.data, [0xde, 0xad, 0xbe, 0xef]);
        let p = r.next_packet().unwrap().unwrap();
        assert_eq!(
            (p.ts_nanos, p.orig_len, p.data.len()),
            (1_999_999_000, 0, 0)
        );
        assert!(r.next_packet().unwrap().is_none());
    }

    #[test]
    fn all_four_pcap_magics() {
        for (be, nanos) in [(false, false), (false, true), (true, false), (true, true)] {
            let magic = if nanos {
                PCAP_MAGIC_NANOS
            } else {
                PCAP_MAGIC_MICROS
            };
            let mut b = B::new(be);
            b.u32(magic)
                .u16(2)
                .u16(4)
                .u32(0)
                .u32(0)
                .u32(1500)
                .u32(0x0400_0001);
            b.u32(3).u32(250).u32(2).u32(2).bytes(&[1, 2]);
            let pkts = read_ok(&b.v);
            let frac = if nanos { 250 } else { 250_000 };
            assert_eq!(
                pkts,
                [Owned {
                    ts: 3 * NANOS_PER_SEC + frac,
                    iface: 0,
                    // The FCS bits above the low 16 are not part of the link type.
                    linktype: LINKTYPE_ETHERNET,
                    orig_len: 2,
                    data: vec![1, 2],
                }],
                "be={be} nanos={nanos}"
            );
            let r = CaptureReader::new(&b.v[..]).unwrap();
            assert_eq!(
                r.format(),
                CaptureFormat::Pcap {
                    nanos,
                    big_endian: be
                }
            );
        }
    }

    /// A two-section pcapng file built by hand, and the offsets at which each block ends.
    fn multi_section_pcapng() -> (Vec<u8>, Vec<usize>) {
        let mut ends = Vec::new();
        let mut f = B::new(false);
        f.block(BT_SHB, &shb_body(false));
        ends.push(f.v.len());
        // if 0: Ethernet, named, microseconds (explicit), snaplen 62.
        f.block(
            BT_IDB,
            &idb_body(
                false,
                1,
                62,
                &[(OPT_IF_NAME, b"eth0"), (OPT_IF_TSRESOL, &[6])],
            ),
        );
        ends.push(f.v.len());
        // if 1: raw IP, nanoseconds, and an unknown option before the ones we know.
        f.block(
            BT_IDB,
            &idb_body(false, 101, 0, &[(0x7777, b"xyz"), (OPT_IF_TSRESOL, &[9])]),
        );
        ends.push(f.v.len());
        f.block(BT_EPB, &epb_body(false, 1, 1_000_000_007, 20, &[0x45; 20]));
        ends.push(f.v.len());
        // An unknown block type must be skipped.
        f.block(0x0bad_0bad, &[1, 2, 3, 4, 5]);
        ends.push(f.v.len());
        // EPB on if 0 with trailing options (epb_flags) after padded data.
        let mut body = epb_body(false, 0, 2_000_001, 61, &[0xee; 5]);
        body.extend_from_slice(&[2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        f.block(BT_EPB, &body);
        ends.push(f.v.len());
        // SPB: orig 100, capped at if 0's snaplen 62; the 2 padding bytes are not data.
        let mut spb = f.body();
        spb.u32(100).bytes(&[0x5a; 62]);
        f.block(BT_SPB, &spb.v);
        ends.push(f.v.len());
        // Interface Statistics Block (type 5) — also skipped.
        f.block(5, &[0; 12]);
        ends.push(f.v.len());
        // Section 2, big-endian: if 0 (global 2) is SLL2 with 2^-3 s ticks and an offset.
        let mut g = B::new(true);
        g.block(BT_SHB, &shb_body(true));
        let offset = 1_000i64.to_be_bytes();
        g.block(
            BT_IDB,
            &idb_body(
                true,
                276,
                0,
                &[
                    (OPT_IF_TSRESOL, &[0x83]),
                    (OPT_IF_TSOFFSET, &offset),
                    (OPT_IF_NAME, b"any\0"),
                ],
            ),
        );
        g.block(BT_EPB, &epb_body(true, 0, 12, 3, &[9, 8, 7]));
        let base = f.v.len();
        let mut gends = Vec::new();
        // Block ends in section 2, recomputed by walking the lengths we just wrote.
        let mut at = 0;
        while at < g.v.len() {
            at += u32::from_be_bytes(g.v[at + 4..at + 8].try_into().unwrap()) as usize;
            gends.push(base + at);
        }
        f.bytes(&g.v);
        ends.extend(gends);
        (f.v, ends)
    }

    #[test]
    fn pcapng_two_sections_several_interfaces() {
        let (file, _) = multi_section_pcapng();
        let mut r = CaptureReader::new(&file[..]).unwrap();
        assert_eq!(r.format(), CaptureFormat::PcapNg);
        assert_eq!(r.offset(), 28);
        let mut pkts = Vec::new();
        while let Some(p) = r.next_packet().unwrap() {
            pkts.push((
                p.ts_nanos,
                p.interface,
                p.linktype,
                p.orig_len,
                p.data.to_vec(),
            ));
        }
        assert_eq!(
            pkts,
            [
                (1_000_000_007, 1, LINKTYPE_RAW, 20, vec![0x45; 20]),
                (2_000_001_000, 0, LINKTYPE_ETHERNET, 61, vec![0xee; 5]),
                (0, 0, LINKTYPE_ETHERNET, 100, vec![0x5a; 62]),
                // 12 ticks of 1/8 s = 1.5 s, plus 1000 s offset.
                (1_001_500_000_000, 2, LINKTYPE_LINUX_SLL2, 3, vec![9, 8, 7]),
            ]
        );
        assert_eq!(r.offset(), file.len() as u64);
        let ifs = r.interfaces();
        assert_eq!(ifs.len(), 3);
        assert_eq!(
            ifs[0],
            InterfaceInfo {
                linktype: 1,
                snaplen: 62,
                name: Some("eth0".into()),
                ts_resolution: TsResolution::MICROS,
                ts_offset_secs: 0,
                section: 0
            }
        );
        assert_eq!(
            (
                ifs[1].linktype,
                ifs[1].ts_resolution,
                ifs[1].name.as_deref()
            ),
            (101, TsResolution::NANOS, None)
        );
        assert_eq!(
            ifs[2],
            InterfaceInfo {
                linktype: 276,
                snaplen: 0,
                name: Some("any".into()),
                ts_resolution: TsResolution::Binary(3),
                ts_offset_secs: 1000,
                section: 1
            }
        );
    }

    #[test]
    fn pcapng_big_endian_first_section_and_obsolete_packet_block() {
        let mut f = B::new(true);
        f.block(BT_SHB, &shb_body(true));
        f.block(BT_IDB, &idb_body(true, 1, 0, &[]));
        let mut pb = f.body();
        pb.u16(0)
            .u16(0)
            .u32(0)
            .u32(3_000_000)
            .u32(2)
            .u32(60)
            .bytes(&[1, 2]);
        f.block(BT_PB, &pb.v);
        assert_eq!(
            read_ok(&f.v),
            [Owned {
                ts: 3_000_000_000,
                iface: 0,
                linktype: 1,
                orig_len: 60,
                data: vec![1, 2]
            }]
        );
    }

    #[test]
    fn pcapng_writer_matches_hand_built_bytes() {
        let mut w = PcapNgWriter::new(Vec::new()).unwrap();
        let e = w
            .add_interface(LINKTYPE_ETHERNET, 64, Some("eth0"), TsResolution::MICROS)
            .unwrap();
        let r = w
            .add_interface(LINKTYPE_RAW, 0, None, TsResolution::NANOS)
            .unwrap();
        assert_eq!((e, r), (0, 1));
        w.write_packet(1, 1_000_000_007, &[0x45; 20]).unwrap();
        w.write_packet(0, 2_000_001_999, &[0xee; 5]).unwrap();
        w.write_simple_packet(&[0x5a; 3]).unwrap();
        w.write_block_raw(0x0bad_0bad, &[1, 2, 3, 4, 5]).unwrap();
        w.new_section(true).unwrap();
        w.add_interface(LINKTYPE_LINUX_SLL2, 0, None, TsResolution::Binary(3))
            .unwrap();
        w.write_packet(0, 1_500_000_000, &[9, 8, 7]).unwrap();
        assert!(w.write_packet(1, 0, &[]).is_err());
        let got = w.into_inner();

        let mut f = B::new(false);
        f.block(BT_SHB, &shb_body(false));
        f.block(BT_IDB, &idb_body(false, 1, 64, &[(OPT_IF_NAME, b"eth0")]));
        f.block(BT_IDB, &idb_body(false, 101, 0, &[(OPT_IF_TSRESOL, &[9])]));
        f.block(BT_EPB, &epb_body(false, 1, 1_000_000_007, 20, &[0x45; 20]));
        f.block(BT_EPB, &epb_body(false, 0, 2_000_001, 5, &[0xee; 5]));
        f.block(BT_SPB, &[3, 0, 0, 0, 0x5a, 0x5a, 0x5a]);
        f.block(0x0bad_0bad, &[1, 2, 3, 4, 5]);
        let mut g = B::new(true);
        g.block(BT_SHB, &shb_body(true));
        g.block(
            BT_IDB,
            &idb_body(true, 276, 0, &[(OPT_IF_TSRESOL, &[0x83])]),
        );
        g.block(BT_EPB, &epb_body(true, 0, 12, 3, &[9, 8, 7]));
        f.bytes(&g.v);
        assert_eq!(got, f.v);
        // A literal check of the framing itself: the first SHB, little-endian.
        #[rustfmt::skip]
        let shb = [
            0x0a, 0x0d, 0x0d, 0x0a, 28, 0, 0, 0, 0x4d, 0x3c, 0x2b, 0x1a, 1, 0, 0, 0,
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 28, 0, 0, 0,
        ];
        assert_eq!(got[..28], shb);
    }

    /// Every prefix of a valid file either ends cleanly at a record boundary, with exactly the
    /// records before it, or fails at the offset where the cut record starts.
    fn check_every_truncation(file: &[u8], header_end: usize, ends: &[usize]) {
        let (all, err) = read_all(file);
        assert!(err.is_none());
        for len in 0..=file.len() {
            let (pkts, err) = read_all(&file[..len]);
            if len < header_end {
                let e = err.expect("short header must fail");
                assert_eq!(e.offset, 0, "len {len}: {e}");
                if len == 0 {
                    assert!(matches!(e.kind, CaptureErrorKind::Empty));
                }
                continue;
            }
            let last = *ends
                .iter()
                .filter(|&&e| e <= len)
                .max()
                .unwrap_or(&header_end);
            assert_eq!(pkts[..], all[..pkts.len()], "len {len}: wrong packets");
            if len == last {
                assert!(err.is_none(), "len {len}: {}", err.unwrap());
            } else {
                let e = err.unwrap_or_else(|| panic!("len {len}: cut record not reported"));
                assert_eq!(e.offset, last as u64, "len {len}: {e}");
                assert!(matches!(
                    e.kind,
                    CaptureErrorKind::TruncatedHeader { .. }
                        | CaptureErrorKind::TruncatedRecord { .. }
                        | CaptureErrorKind::TruncatedBlock { .. }
                ));
            }
        }
    }

    #[test]
    fn pcap_truncated_at_every_length() {
        let mut w = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET).unwrap();
        let mut ends = vec![24];
        for n in [0usize, 1, 7, 60] {
            w.write_packet(n as u64 * 1000, &vec![n as u8; n]).unwrap();
            ends.push(ends.last().unwrap() + 16 + n);
        }
        let file = w.into_inner();
        assert_eq!(*ends.last().unwrap(), file.len());
        check_every_truncation(&file, 24, &ends);
    }

    #[test]
    fn pcapng_truncated_at_every_length() {
        let (file, ends) = multi_section_pcapng();
        assert_eq!(*ends.last().unwrap(), file.len());
        check_every_truncation(&file, 28, &ends);
    }

    #[test]
    fn truncated_record_message_names_offset_and_lengths() {
        let mut w = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET).unwrap();
        w.write_packet(0, &[0; 100]).unwrap();
        w.write_packet(0, &[0; 1514]).unwrap();
        let file = w.into_inner();
        let cut = 24 + 116 + 16 + 200;
        let e = read_err(&file[..cut]);
        assert_eq!(
            e.to_string(),
            "at byte 140: truncated packet record (header says 1514 bytes, 200 left)"
        );
        let e = read_err(&file[..24 + 116 + 5]);
        assert_eq!(
            e.to_string(),
            "at byte 140: truncated packet record header (need 16 bytes, 5 left)"
        );
    }

    /// A classic pcap file header with `snaplen`, then one good 60-byte record.
    fn pcap_with_snaplen(snaplen: u32) -> B {
        let mut b = B::new(false);
        b.u32(PCAP_MAGIC_MICROS)
            .u16(2)
            .u16(4)
            .u32(0)
            .u32(0)
            .u32(snaplen)
            .u32(1);
        b.u32(0).u32(0).u32(60).u32(60).bytes(&[0; 60]);
        b
    }

    #[test]
    fn record_lengths_beyond_snaplen_and_the_maximum_are_corrupt() {
        // The second record starts after the 24-byte header and the first 16 + 60 bytes.
        const AT: u64 = 24 + 16 + 60;
        for (snaplen, limit) in [
            (65_535, MAX_SNAPLEN),
            (0, MAX_SNAPLEN),
            (MAX_SNAPLEN, MAX_SNAPLEN),
            (1_000_000, 1_000_000),
            // A bogus snaplen raises the limit only as far as the pcapng block limit.
            (u32::MAX, MAX_RECORD_LEN),
        ] {
            let mut b = pcap_with_snaplen(snaplen);
            b.u32(0).u32(0).u32(limit + 1).u32(60).bytes(&[0; 100]);
            let (packets, e) = read_all(&b.v[..]);
            assert_eq!(packets.len(), 1, "snaplen {snaplen}: the good record first");
            let e = e.expect("a corrupt record");
            assert_eq!(e.offset, AT, "snaplen {snaplen}");
            assert!(
                matches!(e.kind, CaptureErrorKind::BadRecordLength { len, snaplen: s } if len == limit + 1 && s == snaplen),
                "snaplen {snaplen}: {e}"
            );
            // Up to the limit the record is accepted, and a short file is merely truncated.
            let mut b = pcap_with_snaplen(snaplen);
            b.u32(0).u32(0).u32(limit).u32(60).bytes(&[0; 100]);
            let e = read_err(&b.v);
            assert_eq!(e.offset, AT);
            assert!(
                matches!(e.kind, CaptureErrorKind::TruncatedRecord { len, available: 100 } if len == limit),
                "snaplen {snaplen}: {e}"
            );
        }
        // The message names the offset and both bounds, as libpcap's and Wireshark's do.
        let mut b = pcap_with_snaplen(65_535);
        b.u32(0).u32(0).u32(0xffff_fff0).u32(60);
        assert_eq!(
            read_err(&b.v).to_string(),
            "at byte 100: corrupt packet record: captured length 4294967280 is above the file's snaplen 65535 and the 262144-byte maximum"
        );
        // A record longer than a small snaplen but within the maximum is read (some writers
        // do this).
        let mut b = pcap_with_snaplen(64);
        b.u32(0).u32(0).u32(1514).u32(1514).bytes(&[7; 1514]);
        let (packets, e) = read_all(&b.v[..]);
        assert!(e.is_none(), "{e:?}");
        assert_eq!(packets.len(), 2);
        // The writer cuts a longer packet at its snaplen, so its files always read back.
        let mut w = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET).unwrap();
        w.write_packet(1, &vec![9; 300_000]).unwrap();
        w.write_packet(2, &[8; 60]).unwrap();
        let (packets, e) = read_all(&w.into_inner()[..]);
        assert!(e.is_none(), "{e:?}");
        assert_eq!(packets[0].data.len(), WRITER_SNAPLEN as usize);
        assert_eq!(packets[0].orig_len, 300_000);
        assert_eq!(packets[1].data, [8; 60]);
    }

    /// SHB + IDB + one EPB whose length fields a test then corrupts; returns the EPB offset.
    fn small_pcapng() -> (Vec<u8>, usize) {
        let mut f = B::new(false);
        f.block(BT_SHB, &shb_body(false));
        f.block(BT_IDB, &idb_body(false, 1, 0, &[]));
        let at = f.v.len();
        f.block(BT_EPB, &epb_body(false, 0, 1, 4, &[1, 2, 3, 4]));
        (f.v, at)
    }

    #[test]
    fn corrupt_block_lengths_name_the_block_offset() {
        let (good, at) = small_pcapng();
        assert_eq!(read_ok(&good).len(), 1);
        let epb_len = good.len() - at;
        let set = |f: &mut Vec<u8>, pos: usize, v: u32| {
            f[pos..pos + 4].copy_from_slice(&v.to_le_bytes());
        };
        let cases = [
            ("unaligned", at + 4, 13),
            ("too short", at + 4, 8),
            ("zero", at + 4, 0),
            ("trailer", at + epb_len - 4, 40),
            ("huge", at + 4, 0xffff_fff0),
            ("past end", at + 4, epb_len as u32 + 400),
        ];
        for (name, pos, value) in cases {
            let mut f = good.clone();
            set(&mut f, pos, value);
            let e = read_err(&f);
            assert_eq!(e.offset, at as u64, "{name}: {e}");
            assert!(e.to_string().starts_with(&format!("at byte {at}: ")), "{e}");
            let ok = match name {
                "unaligned" => matches!(e.kind, CaptureErrorKind::BlockLengthUnaligned { len: 13 }),
                "too short" | "zero" => matches!(e.kind, CaptureErrorKind::BlockTooShort { .. }),
                "trailer" => matches!(
                    e.kind,
                    CaptureErrorKind::BlockLengthMismatch {
                        header: 36,
                        trailer: 40
                    }
                ),
                "huge" => matches!(e.kind, CaptureErrorKind::TooLarge { .. }),
                _ => matches!(e.kind, CaptureErrorKind::TruncatedBlock { .. }),
            };
            assert!(ok, "{name}: {e}");
        }
        // The first SHB: too short, and a bad byte-order magic.
        let mut f = good.clone();
        set(&mut f, 4, 24);
        let e = read_err(&f);
        assert_eq!(e.offset, 0);
        assert!(matches!(
            e.kind,
            CaptureErrorKind::BlockTooShort { len: 24, min: 28 }
        ));
        let mut f = good.clone();
        set(&mut f, 8, 0x1234_5678);
        let e = read_err(&f);
        assert_eq!(e.offset, 8);
        assert!(matches!(e.kind, CaptureErrorKind::BadByteOrderMagic { .. }));
    }

    #[test]
    fn malformed_pcapng_bodies() {
        let (good, at) = small_pcapng();
        // Captured length longer than the block.
        let mut f = good.clone();
        f[at + 20..at + 24].copy_from_slice(&5u32.to_le_bytes());
        let e = read_err(&f);
        assert_eq!(e.offset, at as u64);
        assert!(matches!(
            e.kind,
            CaptureErrorKind::MalformedBlock { block_type: 6, .. }
        ));
        // Packet on an interface the section never described.
        let mut f = good.clone();
        f[at + 8..at + 12].copy_from_slice(&1u32.to_le_bytes());
        let e = read_err(&f);
        assert_eq!(e.offset, at as u64);
        assert!(matches!(
            e.kind,
            CaptureErrorKind::UnknownInterface { id: 1, count: 1 }
        ));
        // Interface ids are per section: after a new SHB, id 0 is unknown again.
        let mut f = B::new(false);
        f.block(BT_SHB, &shb_body(false));
        f.block(BT_IDB, &idb_body(false, 1, 0, &[]));
        let second = f.v.len();
        f.block(BT_SHB, &shb_body(false));
        f.block(BT_EPB, &epb_body(false, 0, 1, 1, &[1]));
        let e = read_err(&f.v);
        assert_eq!(e.offset, second as u64 + 28);
        assert!(matches!(
            e.kind,
            CaptureErrorKind::UnknownInterface { id: 0, count: 0 }
        ));
        // SHB with an unknown major version.
        let mut f = good.clone();
        f[12..14].copy_from_slice(&2u16.to_le_bytes());
        let e = read_err(&f);
        assert!(matches!(
            e.kind,
            CaptureErrorKind::UnsupportedVersion { major: 2, minor: 0 }
        ));
        // A too-short IDB body and SPB body.
        let mut f = B::new(false);
        f.block(BT_SHB, &shb_body(false));
        let at = f.v.len();
        f.block(BT_IDB, &[1, 0, 0, 0]);
        let e = read_err(&f.v);
        assert_eq!(e.offset, at as u64);
        assert!(matches!(
            e.kind,
            CaptureErrorKind::MalformedBlock { block_type: 1, .. }
        ));
        let mut f = B::new(false);
        f.block(BT_SHB, &shb_body(false));
        f.block(BT_IDB, &idb_body(false, 1, 0, &[]));
        f.block(BT_SPB, &[]);
        assert!(matches!(
            read_err(&f.v).kind,
            CaptureErrorKind::MalformedBlock { block_type: 3, .. }
        ));
    }

    #[test]
    fn not_a_capture() {
        let e = read_err(b"");
        assert!(matches!(e.kind, CaptureErrorKind::Empty));
        let e = read_err(b"GET / HTTP/1.1\r\n");
        assert!(matches!(e.kind, CaptureErrorKind::NotACapture { magic } if &magic == b"GET "));
        assert_eq!(
            e.to_string(),
            "at byte 0: not a pcap or pcapng file (first bytes 47 45 54 20)"
        );
        let e = read_err(&[0xd4, 0xc3]);
        assert!(matches!(e.kind, CaptureErrorKind::NotACapture { .. }));
        let e = read_err(&[0x34, 0xcd, 0xb2, 0xa1, 0, 0]);
        assert!(matches!(e.kind, CaptureErrorKind::UnsupportedFormat(_)));
        let mut b = B::new(false);
        b.u32(PCAP_MAGIC_MICROS)
            .u16(1)
            .u16(0)
            .u32(0)
            .u32(0)
            .u32(0)
            .u32(1);
        assert!(matches!(
            read_err(&b.v).kind,
            CaptureErrorKind::UnsupportedVersion { major: 1, minor: 0 }
        ));
    }

    #[test]
    fn io_errors_carry_the_offset() {
        struct Failing(usize);
        impl io::Read for Failing {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                if self.0 == 0 {
                    return Err(io::Error::other("disk on fire"));
                }
                let n = self.0.min(buf.len());
                // A valid little-endian pcap header, then zeros.
                let mut h = [0u8; 24];
                h[..4].copy_from_slice(&PCAP_MAGIC_MICROS.to_le_bytes());
                h[4] = 2;
                for (i, b) in buf[..n].iter_mut().enumerate() {
                    *b = h.get(i).copied().unwrap_or(0);
                }
                self.0 -= n;
                Ok(n)
            }
        }
        let (pkts, e) = read_all(Failing(24 + 16 + 3));
        assert_eq!(pkts.len(), 1);
        let e = e.unwrap();
        assert_eq!(e.offset, 43);
        assert!(matches!(e.kind, CaptureErrorKind::Io(_)));
        assert!(std::error::Error::source(&e).is_some());
        assert!(e.to_string().contains("disk on fire"));
    }

    #[test]
    fn small_reads_and_buffer_growth_and_compaction() {
        // Enough 64..127-byte packets to refill the 1 MiB buffer several times, with a 3 MiB
        // packet (bigger than the initial buffer) in the middle, in a file whose snaplen admits
        // it (the writer cuts at 256 KiB, so that record is written by hand).
        let mut want = Vec::new();
        let mut file = Vec::new();
        let mut w = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET).unwrap();
        for i in 0..40_000u64 {
            if i == 20_000 {
                file = w.into_inner();
                file[16..20].copy_from_slice(&(4u32 << 20).to_le_bytes());
                let d = vec![i as u8; 3 << 20];
                for x in [0, i as u32, 3 << 20, 3 << 20] {
                    file.extend_from_slice(&x.to_le_bytes());
                }
                file.extend_from_slice(&d);
                want.push((i, d));
                w = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET).unwrap();
                continue;
            }
            let d = vec![i as u8; 64 + (i % 64) as usize];
            w.write_packet(i, &d).unwrap();
            want.push((i, d));
        }
        file.extend_from_slice(&w.into_inner()[PCAP_HEADER_LEN..]);
        for chunk in [usize::MAX, 4093, 1] {
            if chunk == 1 {
                // Byte-at-a-time on a prefix only, to keep the test fast.
                let cut = 24 + (0..5).map(|i| 16 + 64 + i).sum::<usize>() + 3;
                let (pkts, e) = read_all(chunked(&file[..cut], 1));
                assert_eq!(pkts.len(), 5);
                assert_eq!(e.unwrap().offset, cut as u64 - 3);
                continue;
            }
            let mut r = CaptureReader::new(chunked(&file, chunk)).unwrap();
            for (ts, d) in &want {
                let p = r.next_packet().unwrap().unwrap();
                assert_eq!((p.ts_nanos, p.data), (*ts, &d[..]));
            }
            assert!(r.next_packet().unwrap().is_none());
            assert_eq!(r.offset(), file.len() as u64);
        }
    }

    #[test]
    fn timestamp_resolutions() {
        let r = TsResolution::from_if_tsresol;
        assert_eq!(r(6), TsResolution::MICROS);
        assert_eq!(r(0x8a), TsResolution::Binary(10));
        assert_eq!(TsResolution::Binary(10).to_if_tsresol(), Some(0x8a));
        assert_eq!(TsResolution::Decimal(200).to_if_tsresol(), None);
        assert_eq!(r(0).to_nanos(7), 7_000_000_000);
        assert_eq!(r(3).to_nanos(7), 7_000_000);
        assert_eq!(r(6).to_nanos(7), 7_000);
        assert_eq!(r(9).to_nanos(7), 7);
        assert_eq!(r(12).to_nanos(7_999), 7);
        assert_eq!(r(28).to_nanos(u64::MAX), 1);
        assert_eq!(r(29).to_nanos(u64::MAX), 0);
        assert_eq!(r(127).to_nanos(u64::MAX), 0);
        assert_eq!(r(0).to_nanos(u64::MAX), u64::MAX);
        assert_eq!(r(0x80).to_nanos(3), 3_000_000_000);
        assert_eq!(r(0x81).to_nanos(3), 1_500_000_000);
        assert_eq!(r(0x9e).to_nanos(1 << 30), NANOS_PER_SEC);
        assert_eq!(r(0xff).to_nanos(u64::MAX), 0);
        assert_eq!(TsResolution::Binary(255).to_nanos(u64::MAX), 0);
        assert_eq!(r(6).from_nanos(7_999), 7);
        assert_eq!(r(12).from_nanos(7), 7_000);
        assert_eq!(r(40).from_nanos(1), u64::MAX);
        assert_eq!(r(40).from_nanos(0), 0);
        assert_eq!(r(0x81).from_nanos(1_500_000_000), 3);
        assert_eq!(r(0xff).from_nanos(1), u64::MAX);
        assert_eq!(r(0xff).from_nanos(0), 0);
    }

    /// The first bytes of a file of each kind, so arbitrary tails exercise the record parsers.
    fn prefixes() -> [Vec<u8>; 4] {
        let mut le = B::new(false);
        le.u32(PCAP_MAGIC_NANOS)
            .u16(2)
            .u16(4)
            .u32(0)
            .u32(0)
            .u32(65535)
            .u32(1);
        let mut be = B::new(true);
        be.u32(PCAP_MAGIC_MICROS)
            .u16(2)
            .u16(4)
            .u32(0)
            .u32(0)
            .u32(65535)
            .u32(1);
        let mut ng = B::new(false);
        ng.block(BT_SHB, &shb_body(false))
            .block(BT_IDB, &idb_body(false, 1, 8, &[]));
        let mut ngbe = B::new(true);
        ngbe.block(BT_SHB, &shb_body(true));
        [le.v, be.v, ng.v, ngbe.v]
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(
            which in 0usize..5,
            tail in proptest::collection::vec(any::<u8>(), 0..600),
            chunk in 1usize..64,
        ) {
            let mut file = prefixes().get(which).cloned().unwrap_or_default();
            file.extend_from_slice(&tail);
            let (pkts, err) = read_all(chunked(&file, chunk));
            // Every packet consumed at least 12 bytes, so reading terminated by itself.
            prop_assert!(pkts.len() * 12 <= file.len());
            if let Some(e) = err {
                prop_assert!(e.offset <= file.len() as u64, "{}", e);
            }
        }

        #[test]
        fn pcap_write_read_identity(
            pkts in proptest::collection::vec(
                (0..=u64::from(u32::MAX) * NANOS_PER_SEC, proptest::collection::vec(any::<u8>(), 0..300)),
                0..40,
            ),
            linktype in any::<u16>(),
            chunk in 1usize..200,
        ) {
            let mut w = PcapWriter::new(Vec::new(), u32::from(linktype)).unwrap();
            for (ts, d) in &pkts {
                w.write_packet(*ts, d).unwrap();
            }
            let file = w.into_inner();
            let (got, err) = read_all(chunked(&file, chunk));
            prop_assert!(err.is_none());
            let want: Vec<Owned> = pkts
                .iter()
                .map(|(ts, d)| Owned {
                    ts: *ts,
                    iface: 0,
                    linktype: u32::from(linktype),
                    orig_len: d.len() as u32,
                    data: d.clone(),
                })
                .collect();
            prop_assert_eq!(got, want);
        }

        #[test]
        fn pcapng_write_read_identity(
            sections in proptest::collection::vec(
                (
                    any::<bool>(),
                    proptest::collection::vec((any::<u16>(), 0u8..4), 1..4),
                    proptest::collection::vec(
                        (any::<u8>(), any::<u64>(), proptest::collection::vec(any::<u8>(), 0..100)),
                        0..20,
                    ),
                ),
                1..4,
            ),
        ) {
            let resolutions = [
                TsResolution::MICROS,
                TsResolution::NANOS,
                TsResolution::Decimal(3),
                TsResolution::Binary(20),
            ];
            let mut w: Option<PcapNgWriter<Vec<u8>>> = None;
            let mut want = Vec::new();
            let mut first_global = 0u32;
            for (be, ifaces, pkts) in &sections {
                match &mut w {
                    None => w = Some(PcapNgWriter::with_byte_order(Vec::new(), *be).unwrap()),
                    Some(w) => w.new_section(*be).unwrap(),
                }
                let w = w.as_mut().unwrap();
                for (lt, res) in ifaces {
                    w.add_interface(u32::from(*lt), 0, None, resolutions[*res as usize]).unwrap();
                }
                for (pick, ts, d) in pkts {
                    let id = u32::from(*pick) % ifaces.len() as u32;
                    let (lt, res) = ifaces[id as usize];
                    let res = resolutions[res as usize];
                    w.write_packet(id, *ts, d).unwrap();
                    want.push(Owned {
                        ts: res.to_nanos(res.from_nanos(*ts)),
                        iface: first_global + id,
                        linktype: u32::from(lt),
                        orig_len: d.len() as u32,
                        data: d.clone(),
                    });
                }
                first_global += ifaces.len() as u32;
            }
            let file = w.unwrap().into_inner();
            let (got, err) = read_all(&file[..]);
            prop_assert!(err.is_none(), "{}", err.unwrap());
            prop_assert_eq!(got, want);
        }
    }
}
