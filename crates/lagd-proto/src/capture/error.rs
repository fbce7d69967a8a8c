//! Why a capture file could not be read, and where ([`CaptureError`]).

use core::fmt;
use std::io;

use super::types::{MAX_INTERFACES, MAX_SNAPLEN};

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
    /// A pcapng block longer than [`MAX_RECORD_LEN`](super::MAX_RECORD_LEN).
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

pub(super) fn cerr(offset: u64, kind: CaptureErrorKind) -> CaptureError {
    CaptureError { offset, kind }
}

pub(super) fn invalid_input(msg: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}
