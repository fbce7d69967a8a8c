//! The reader ([`CaptureReader`]): its buffer, the format sniffing and the magic numbers it
//! goes by, and what it hands out ([`Packet`], [`InterfaceInfo`]).

use core::fmt;
use core::ops::Range;
use std::io;

use super::error::{CaptureError, CaptureErrorKind, cerr};
use super::types::{CaptureFormat, TsResolution};

/// Classic pcap magic for microsecond timestamps, as a native `u32`.
pub(super) const PCAP_MAGIC_MICROS: u32 = 0xa1b2_c3d4;
/// Classic pcap magic for nanosecond timestamps, as a native `u32`.
pub(super) const PCAP_MAGIC_NANOS: u32 = 0xa1b2_3c4d;
/// Alexey Kuznetsov's modified pcap format, which we recognise only to reject clearly.
pub(super) const PCAP_MAGIC_KUZNETSOV: u32 = 0xa1b2_cd34;
/// pcapng Section Header Block type (a byte palindrome, so byte-order independent).
pub(super) const BT_SHB: u32 = 0x0a0d_0d0a;

/// The reader's initial buffer size: one `read` call fills this much.
const DEFAULT_BUF_LEN: usize = 1 << 20;

/// What the reader knows about one capture interface.
///
/// A classic pcap file has exactly one. In pcapng, interfaces accumulate over all sections in
/// the order their Interface Description Blocks appear; [`Packet::interface`] indexes this list
/// (for a single-section file that is the pcapng interface id).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct InterfaceInfo {
    /// The link type (`LINKTYPE_*`), e.g. [`LINKTYPE_ETHERNET`](super::LINKTYPE_ETHERNET). For
    /// classic pcap only the low 16 bits of the header field (the FCS bits above them are
    /// dropped).
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

/// A packet located in the buffer, before it is lent out.
pub(super) struct Rec {
    pub(super) ts_nanos: u64,
    pub(super) interface: u32,
    pub(super) linktype: u32,
    pub(super) orig_len: u32,
    pub(super) data: Range<usize>,
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
    pub(super) buf: Vec<u8>,
    pub(super) start: usize,
    pub(super) end: usize,
    /// File offset of `buf[0]`.
    base: u64,
    /// The reader has reported end of input.
    eof: bool,
    /// A previous call returned `Ok(None)` or an error.
    done: bool,
    pub(super) format: CaptureFormat,
    /// Byte order of the file (pcap) or the current section (pcapng).
    pub(super) big_endian: bool,
    pub(super) interfaces: Vec<InterfaceInfo>,
    /// Index in `interfaces` of the current pcapng section's interface 0.
    pub(super) section_first: usize,
    /// Number of pcapng sections seen.
    pub(super) sections: u32,
    /// Classic pcap: nanosecond timestamps.
    pub(super) pcap_nanos: bool,
    /// Classic pcap: the file's link type.
    pub(super) pcap_linktype: u32,
    /// Classic pcap: the file header's snaplen.
    pub(super) pcap_snaplen: u32,
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
        Ok(self.next_packet_counted()?.map(|(p, _)| p))
    }

    /// [`CaptureReader::next_packet`], with the number of interfaces described so far (those
    /// of [`CaptureReader::interfaces`], the packet's included).
    pub fn next_packet_counted(&mut self) -> Result<Option<(Packet<'_>, usize)>, CaptureError> {
        if self.done {
            return Ok(None);
        }
        let res = match self.format {
            CaptureFormat::Pcap { .. } => self.next_pcap_record(),
            CaptureFormat::PcapNg => self.next_pcapng_packet(),
        };
        match res {
            Ok(Some(rec)) => Ok(Some((
                Packet {
                    ts_nanos: rec.ts_nanos,
                    interface: rec.interface,
                    linktype: rec.linktype,
                    orig_len: rec.orig_len,
                    data: &self.buf[rec.data],
                },
                self.interfaces.len(),
            ))),
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
    pub(super) fn fill(&mut self, n: usize) -> Result<usize, CaptureError> {
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
