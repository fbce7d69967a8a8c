//! Capture files: streaming reading of classic pcap and pcapng, and writing of both.
//!
//! [`CaptureReader`] sniffs the format from the first four bytes and then hands out one packet
//! at a time as a [`Packet`] that borrows the reader's internal buffer, so reading allocates
//! nothing per packet and memory stays bounded by the largest record (at most
//! [`MAX_RECORD_LEN`]) whatever the file size. Records are parsed straight out of one large
//! buffer that is refilled with big `read` calls, so the reader needs no
//! [`io::BufReader`](std::io::BufReader) and makes no per-packet `read_exact`. Every error
//! carries the byte offset at which the offending header, record or block starts, so a corrupt
//! multi-gigabyte file can be inspected with a hex dump at the right place. Nothing here panics
//! on any input.
//!
//! Supported: classic pcap in both byte orders with microsecond or nanosecond magic; pcapng
//! with any number of sections (each in its own byte order) and interfaces (each with its own
//! link type, `if_tsresol` and `if_tsoffset`), Enhanced, Simple and obsolete Packet Blocks, and
//! every other block type skipped. [`PcapWriter`] writes classic pcap and [`PcapNgWriter`]
//! writes small pcapng files for tests.
//!
//! What both formats share has files of its own: the reader with its buffer and format
//! sniffing, and the packet and interface types it hands out, in `reader.rs`; the error types
//! in `error.rs`; link types, limits, timestamp units and byte-order reads in `types.rs`. The
//! classic pcap records and writer are in `pcap.rs`, the pcapng blocks, options and writer in
//! `pcapng.rs`; everything public is re-exported here.
//!
//! # Why our own code and not a crate
//! The `pcap-file` crate was considered. Its 2.x reader keeps pcap and pcapng apart (no format
//! sniffing), its error type says what went wrong but never where (no byte offset), it decodes
//! every pcapng block, options included, into typed structures rather than handing out plain
//! slices, and its 3.x line is a release candidate that needs Rust 1.93, above this workspace's
//! minimum of 1.85. The subset we need is small, so this module implements it directly and
//! keeps the pure core free of dependencies.

mod error;
mod pcap;
mod pcapng;
mod reader;
#[cfg(test)]
mod tests;
mod types;

pub use error::{CaptureError, CaptureErrorKind};
pub use pcap::{PcapWriter, WRITER_SNAPLEN};
pub use pcapng::PcapNgWriter;
pub use reader::{CaptureReader, InterfaceInfo, Packet};
pub use types::{
    CaptureFormat, LINKTYPE_ETHERNET, LINKTYPE_LINUX_SLL, LINKTYPE_LINUX_SLL2, LINKTYPE_RAW,
    MAX_INTERFACES, MAX_RECORD_LEN, MAX_SNAPLEN, TsResolution, linktype_name,
};
