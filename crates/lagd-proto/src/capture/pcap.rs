//! Classic pcap: the reader's file header and packet records, and [`PcapWriter`].

use std::io;

use super::error::{CaptureError, CaptureErrorKind, cerr, invalid_input};
use super::reader::{CaptureReader, InterfaceInfo, PCAP_MAGIC_NANOS, Rec};
use super::types::{
    CaptureFormat, MAX_RECORD_LEN, MAX_SNAPLEN, NANOS_PER_SEC, TsResolution, rd16, rd32,
};

/// Classic pcap file header length.
pub(super) const PCAP_HEADER_LEN: usize = 24;
/// Classic pcap record header length.
const PCAP_RECORD_HEADER_LEN: usize = 16;

impl<R: io::Read> CaptureReader<R> {
    pub(super) fn pcap_header(
        &mut self,
        big_endian: bool,
        nanos: bool,
    ) -> Result<(), CaptureError> {
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
    pub(super) fn next_pcap_record(&mut self) -> Result<Option<Rec>, CaptureError> {
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
}

/// The snapshot length [`PcapWriter`] declares in the file header.
pub const WRITER_SNAPLEN: u32 = MAX_SNAPLEN;

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
    /// Writes the 24-byte file header for `linktype` (e.g.
    /// [`LINKTYPE_ETHERNET`](super::LINKTYPE_ETHERNET)).
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
