//! pcapng: the reader's blocks (sections, interfaces, packets) and options, and
//! [`PcapNgWriter`].

use core::ops::Range;
use std::io;

use super::error::{CaptureError, CaptureErrorKind, cerr, invalid_input};
use super::reader::{BT_SHB, CaptureReader, InterfaceInfo, Rec};
use super::types::{
    CaptureFormat, MAX_INTERFACES, MAX_RECORD_LEN, NANOS_PER_SEC, TsResolution, rd16, rd32, rd64,
};

/// `if_name` values longer than this many bytes are cut short.
const MAX_NAME_LEN: usize = 1024;
/// pcapng Interface Description Block type.
pub(super) const BT_IDB: u32 = 1;
/// pcapng (obsolete) Packet Block type.
pub(super) const BT_PB: u32 = 2;
/// pcapng Simple Packet Block type.
pub(super) const BT_SPB: u32 = 3;
/// pcapng Enhanced Packet Block type.
pub(super) const BT_EPB: u32 = 6;
/// The SHB byte-order magic, as a native `u32`.
pub(super) const BYTE_ORDER_MAGIC: u32 = 0x1a2b_3c4d;
/// Smallest pcapng block: type, length, trailing length.
const MIN_BLOCK_LEN: usize = 12;
/// Smallest SHB: 12 bytes of framing plus byte-order magic, versions and section length.
const MIN_SHB_LEN: usize = 28;

/// pcapng option codes used here.
const OPT_ENDOFOPT: u16 = 0;
pub(super) const OPT_IF_NAME: u16 = 2;
pub(super) const OPT_IF_TSRESOL: u16 = 9;
pub(super) const OPT_IF_TSOFFSET: u16 = 14;

/// A framed pcapng block: its type, file offset and body range in the buffer.
struct Block {
    block_type: u32,
    at: u64,
    body: Range<usize>,
}

impl<R: io::Read> CaptureReader<R> {
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

    pub(super) fn first_section(&mut self) -> Result<(), CaptureError> {
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
    pub(super) fn next_pcapng_packet(&mut self) -> Result<Option<Rec>, CaptureError> {
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
