//! Flow lists: CSV exports of NetFlow/IPFIX (or anything with per-flow counters), for users who
//! have flow records rather than captures.
//!
//! The first line that is neither blank nor a `#` comment is the header; columns are found by
//! name (case and surrounding spaces ignored), in any order, and unknown columns are ignored.
//! Names and the aliases accepted (nfdump's CSV names among them):
//!
//! | column | aliases | required | value |
//! | --- | --- | --- | --- |
//! | `src_ip` | `sa`, `srcaddr`, `src_addr` | yes | IPv4 or IPv6 address |
//! | `dst_ip` | `da`, `dstaddr`, `dst_addr` | yes | same family as `src_ip` |
//! | `proto` | `pr`, `protocol` | yes | number or name (`tcp`, `UDP`, `icmp`...) |
//! | `bytes` | `byt`, `ibyt`, `octets`, `doctets` | yes | whole frames, decimal, at most 2^40 |
//! | `packets` | `pkt`, `ipkt`, `dpkts` | no (1) | decimal, at most 2^40 |
//! | `src_port` | `sp`, `srcport` | no (0) | 0-65535; for ICMP the echo identifier |
//! | `dst_port` | `dp`, `dstport` | no (0) | 0-65535; for ICMP `type*256+code` or `T.C` |
//! | `src_mac` | `smac`, `in_src_mac`, `ismc` | no (zero) | `aa:bb:cc:dd:ee:ff` or with `-` |
//! | `dst_mac` | `dmac`, `out_dst_mac`, `odmc` | no (zero) | same |
//! | `vlan` | `vlan_id`, `svln` | no (untagged) | VLAN id 1-4095; 0, empty or `-` is untagged |
//!
//! Fields are separated by commas and may be double-quoted (`""` inside quotes is one quote);
//! blank lines and lines starting with `#` are skipped. Lines are limited to
//! [`MAX_LINE_LEN`] bytes, so memory stays bounded whatever the input. Every error names the
//! line (and column), and nothing panics on any input.

use core::fmt;
use std::io::{self, BufRead, Read};
use std::net::IpAddr;

use super::flow::{FlowRecord, parse_proto};
use crate::wire::EthernetAddress;

/// The longest line accepted, in bytes.
pub const MAX_LINE_LEN: usize = 64 * 1024;

/// The largest packet or byte count one row may give (2^40, a terabyte): far above what one
/// flow record holds, and small enough that sums over millions of rows cannot overflow.
pub const MAX_COUNT: u64 = 1 << 40;

/// Why a flow list could not be read.
#[derive(Debug)]
pub struct CsvError {
    /// 1-based line number (0 for an error before any line).
    pub line: u64,
    /// The column at fault, if one is.
    pub column: Option<&'static str>,
    /// What is wrong.
    pub kind: CsvErrorKind,
}

/// The kinds of [`CsvError`].
#[derive(Debug)]
#[non_exhaustive]
pub enum CsvErrorKind {
    /// Reading failed.
    Io(io::Error),
    /// No header line before the end of input.
    NoHeader,
    /// The header lacks a required column.
    MissingColumn,
    /// Two header columns mean the same field.
    DuplicateColumn,
    /// A line is longer than [`MAX_LINE_LEN`].
    LineTooLong,
    /// A line is not UTF-8.
    NotUtf8,
    /// A quoted field is not closed, or text follows its closing quote.
    BadQuote,
    /// A row has fewer fields than the header needs.
    TooFewFields {
        /// Fields found.
        found: usize,
    },
    /// A field's value is wrong.
    BadValue(String),
}

impl fmt::Display for CsvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}", self.line)?;
        if let Some(c) = self.column {
            write!(f, ", column {c}")?;
        }
        f.write_str(": ")?;
        match &self.kind {
            CsvErrorKind::Io(e) => write!(f, "I/O error: {e}"),
            CsvErrorKind::NoHeader => f.write_str("no header line (expected column names)"),
            CsvErrorKind::MissingColumn => f.write_str("the header has no such column"),
            CsvErrorKind::DuplicateColumn => f.write_str("named twice in the header"),
            CsvErrorKind::LineTooLong => write!(f, "line longer than {MAX_LINE_LEN} bytes"),
            CsvErrorKind::NotUtf8 => f.write_str("not UTF-8 text"),
            CsvErrorKind::BadQuote => f.write_str("unterminated or misplaced double quote"),
            CsvErrorKind::TooFewFields { found } => write!(f, "only {found} fields"),
            CsvErrorKind::BadValue(v) => f.write_str(v),
        }
    }
}

impl std::error::Error for CsvError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            CsvErrorKind::Io(e) => Some(e),
            _ => None,
        }
    }
}

/// The fields of a flow record, in [`FIELDS`] order.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Field {
    SrcIp,
    DstIp,
    Proto,
    Bytes,
    Packets,
    SrcPort,
    DstPort,
    SrcMac,
    DstMac,
    Vlan,
}

/// Canonical name, aliases, required.
const FIELDS: [(Field, &str, &[&str], bool); 10] = [
    (Field::SrcIp, "src_ip", &["sa", "srcaddr", "src_addr"], true),
    (Field::DstIp, "dst_ip", &["da", "dstaddr", "dst_addr"], true),
    (Field::Proto, "proto", &["pr", "protocol"], true),
    (
        Field::Bytes,
        "bytes",
        &["byt", "ibyt", "octets", "doctets"],
        true,
    ),
    (Field::Packets, "packets", &["pkt", "ipkt", "dpkts"], false),
    (Field::SrcPort, "src_port", &["sp", "srcport"], false),
    (Field::DstPort, "dst_port", &["dp", "dstport"], false),
    (
        Field::SrcMac,
        "src_mac",
        &["smac", "in_src_mac", "ismc"],
        false,
    ),
    (
        Field::DstMac,
        "dst_mac",
        &["dmac", "out_dst_mac", "odmc"],
        false,
    ),
    (Field::Vlan, "vlan", &["vlan_id", "svln"], false),
];

/// Reads [`FlowRecord`]s from a CSV flow list, one row at a time.
#[derive(Debug)]
pub struct FlowListReader<R: BufRead> {
    reader: R,
    line: u64,
    /// Column index of each field in [`FIELDS`] order.
    columns: [Option<usize>; 10],
    /// Fields a row must have (one more than the largest used column index).
    needed: usize,
    buf: Vec<u8>,
    done: bool,
}

impl<R: BufRead> FlowListReader<R> {
    /// Reads up to and including the header line.
    pub fn new(reader: R) -> Result<Self, CsvError> {
        let mut r = Self {
            reader,
            line: 0,
            columns: [None; 10],
            needed: 0,
            buf: Vec::new(),
            done: false,
        };
        let header = loop {
            match r.next_line()? {
                None => {
                    return Err(CsvError {
                        line: r.line,
                        column: None,
                        kind: CsvErrorKind::NoHeader,
                    });
                }
                Some(l) => {
                    if let Some(fields) = l {
                        break fields;
                    }
                }
            }
        };
        for (i, name) in header.iter().enumerate() {
            let name = name.trim().to_ascii_lowercase();
            let found = FIELDS
                .iter()
                .position(|(_, canon, aliases, _)| *canon == name || aliases.contains(&&*name));
            if let Some(fi) = found {
                if r.columns[fi].is_some() {
                    return Err(r.err(Some(FIELDS[fi].1), CsvErrorKind::DuplicateColumn));
                }
                r.columns[fi] = Some(i);
            }
        }
        for (fi, (_, canon, _, required)) in FIELDS.iter().enumerate() {
            if *required && r.columns[fi].is_none() {
                return Err(r.err(Some(canon), CsvErrorKind::MissingColumn));
            }
        }
        r.needed = r.columns.iter().flatten().max().map_or(0, |m| m + 1);
        Ok(r)
    }

    /// The line number of the last line read.
    pub fn line(&self) -> u64 {
        self.line
    }

    fn err(&self, column: Option<&'static str>, kind: CsvErrorKind) -> CsvError {
        CsvError {
            line: self.line,
            column,
            kind,
        }
    }

    /// The next line split into fields: `Ok(None)` at the end, `Ok(Some(None))` for a blank
    /// or comment line.
    #[allow(clippy::type_complexity)]
    fn next_line(&mut self) -> Result<Option<Option<Vec<String>>>, CsvError> {
        if self.done {
            return Ok(None);
        }
        self.buf.clear();
        let limit = MAX_LINE_LEN as u64 + 1;
        let n = (&mut self.reader)
            .take(limit)
            .read_until(b'\n', &mut self.buf)
            .map_err(|e| {
                self.done = true;
                CsvError {
                    line: self.line + 1,
                    column: None,
                    kind: CsvErrorKind::Io(e),
                }
            })?;
        if n == 0 {
            self.done = true;
            return Ok(None);
        }
        self.line += 1;
        if self.buf.len() > MAX_LINE_LEN {
            self.done = true;
            return Err(self.err(None, CsvErrorKind::LineTooLong));
        }
        let Ok(text) = core::str::from_utf8(&self.buf) else {
            self.done = true;
            return Err(self.err(None, CsvErrorKind::NotUtf8));
        };
        let text = text.trim_end_matches(['\n', '\r']);
        if text.trim().is_empty() || text.trim_start().starts_with('#') {
            return Ok(Some(None));
        }
        match split_fields(text) {
            Some(f) => Ok(Some(Some(f))),
            None => {
                self.done = true;
                Err(self.err(None, CsvErrorKind::BadQuote))
            }
        }
    }

    /// The next flow, `Ok(None)` at the end of the list. After an error, returns `Ok(None)`.
    pub fn next_flow(&mut self) -> Result<Option<FlowRecord>, CsvError> {
        let fields = loop {
            match self.next_line()? {
                None => return Ok(None),
                Some(None) => {}
                Some(Some(f)) => break f,
            }
        };
        if fields.len() < self.needed {
            self.done = true;
            return Err(self.err(
                None,
                CsvErrorKind::TooFewFields {
                    found: fields.len(),
                },
            ));
        }
        let res = self.record(&fields);
        if res.is_err() {
            self.done = true;
        }
        res.map(Some)
    }

    fn record(&self, fields: &[String]) -> Result<FlowRecord, CsvError> {
        let get = |f: Field| {
            let i = FIELDS.iter().position(|(x, ..)| *x == f).unwrap_or(0);
            self.columns[i].map(|c| (FIELDS[i].1, fields[c].trim()))
        };
        let bad = |col: &'static str, msg: String| self.err(Some(col), CsvErrorKind::BadValue(msg));
        let ip = |f: Field| -> Result<IpAddr, CsvError> {
            let (col, v) = get(f).unwrap_or(("", ""));
            v.parse()
                .map_err(|_| bad(col, format!("'{v}' is not an IP address")))
        };
        let num = |f: Field, max: u64, default: u64| -> Result<u64, CsvError> {
            match get(f) {
                None => Ok(default),
                Some((_, "")) => Ok(default),
                Some((col, v)) => v
                    .parse::<u64>()
                    .ok()
                    .filter(|&n| n <= max)
                    .ok_or_else(|| bad(col, format!("'{v}' is not a number from 0 to {max}"))),
            }
        };
        let mac = |f: Field| -> Result<EthernetAddress, CsvError> {
            match get(f) {
                None | Some((_, "")) => Ok(EthernetAddress::ZERO),
                Some((col, v)) => v
                    .parse()
                    .map_err(|_| bad(col, format!("'{v}' is not a MAC (aa:bb:cc:dd:ee:ff)"))),
            }
        };
        let src_ip = ip(Field::SrcIp)?;
        let dst_ip = ip(Field::DstIp)?;
        if src_ip.is_ipv4() != dst_ip.is_ipv4() {
            return Err(bad(
                "dst_ip",
                "source and destination are of different IP versions".into(),
            ));
        }
        let (pcol, pv) = get(Field::Proto).unwrap_or(("proto", ""));
        let protocol =
            parse_proto(pv).ok_or_else(|| bad(pcol, format!("'{pv}' is not an IP protocol")))?;
        let icmp = matches!(protocol, 1 | 58);
        let dst_port = match get(Field::DstPort) {
            Some((col, v)) if icmp && v.contains('.') => {
                let (t, c) = v.split_once('.').unwrap_or((v, "0"));
                match (t.parse::<u8>(), c.parse::<u8>()) {
                    (Ok(t), Ok(c)) => u16::from(t) << 8 | u16::from(c),
                    _ => return Err(bad(col, format!("'{v}' is not an ICMP TYPE.CODE"))),
                }
            }
            _ => num(Field::DstPort, 65535, 0)? as u16,
        };
        let vlan = match get(Field::Vlan) {
            None | Some((_, "" | "-" | "0")) => None,
            Some((col, v)) => Some(
                v.parse::<u16>()
                    .ok()
                    .filter(|&n| (1..=4095).contains(&n))
                    .ok_or_else(|| bad(col, format!("'{v}' is not a VLAN id from 1 to 4095")))?,
            ),
        };
        Ok(FlowRecord {
            src_mac: mac(Field::SrcMac)?,
            dst_mac: mac(Field::DstMac)?,
            vlan,
            src_ip,
            dst_ip,
            protocol,
            src_port: num(Field::SrcPort, 65535, 0)? as u16,
            dst_port,
            packets: num(Field::Packets, MAX_COUNT, 1)?,
            bytes: num(Field::Bytes, MAX_COUNT, 0)?,
        })
    }
}

/// Splits one CSV line; `None` for a bad quote.
fn split_fields(line: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        let mut field = String::new();
        // Spaces before an opening quote are allowed.
        while chars.peek() == Some(&' ') {
            field.push(' ');
            chars.next();
        }
        if chars.peek() == Some(&'"') {
            chars.next();
            field.clear();
            loop {
                match chars.next()? {
                    '"' if chars.peek() == Some(&'"') => {
                        chars.next();
                        field.push('"');
                    }
                    '"' => break,
                    c => field.push(c),
                }
            }
            while chars.peek() == Some(&' ') {
                chars.next();
            }
            match chars.next() {
                None => {
                    out.push(field);
                    return Some(out);
                }
                Some(',') => out.push(field),
                Some(_) => return None,
            }
        } else {
            loop {
                match chars.next() {
                    None => {
                        out.push(field);
                        return Some(out);
                    }
                    Some(',') => {
                        out.push(field);
                        break;
                    }
                    Some('"') => return None,
                    Some(c) => field.push(c),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(text: &str) -> Result<Vec<FlowRecord>, CsvError> {
        let mut r = FlowListReader::new(text.as_bytes())?;
        let mut v = Vec::new();
        while let Some(f) = r.next_flow()? {
            v.push(f);
        }
        Ok(v)
    }

    #[test]
    fn reads_named_columns_in_any_order_with_aliases() {
        let text = "# exported\n\
                    pr, sa ,da,sp,dp,ipkt,ibyt,smac,dmac,svln,extra\n\
                    TCP,10.0.0.1,10.0.0.2,5000,80,10,15000,02:00:00:00:00:01,02-00-00-00-00-02,100,x\n\
                    \n\
                    icmp,2001:db8::1,2001:db8::2,7,8.0,1,98,,,0,\n";
        let v = read_all(text).unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].protocol, 6);
        assert_eq!((v[0].src_port, v[0].dst_port), (5000, 80));
        assert_eq!((v[0].packets, v[0].bytes), (10, 15000));
        assert_eq!(v[0].vlan, Some(100));
        assert_eq!(v[0].dst_mac, EthernetAddress([2, 0, 0, 0, 0, 2]));
        assert_eq!(v[1].protocol, 1);
        assert_eq!(v[1].dst_port, 8 << 8);
        assert_eq!(v[1].vlan, None);
        assert_eq!(v[1].src_mac, EthernetAddress::ZERO);
    }

    #[test]
    fn quoted_fields() {
        assert_eq!(
            split_fields(r#"a, "b,c" ,"d""e""#).unwrap(),
            ["a", "b,c", "d\"e"]
        );
        assert!(split_fields(r#"a,"b"#).is_none());
        assert!(split_fields(r#"a,"b"c"#).is_none());
        assert!(split_fields(r#"a,b"c"#).is_none());
    }

    #[test]
    fn errors_name_line_and_column() {
        let e = read_all("src_ip,dst_ip,bytes\n").unwrap_err();
        assert_eq!((e.line, e.column), (1, Some("proto")));
        assert!(e.to_string().contains("column proto"), "{e}");
        let e =
            read_all("src_ip,dst_ip,proto,bytes\n10.0.0.1,10.0.0.2,tcp,12\n1.2.3,1.1.1.1,6,1\n")
                .unwrap_err();
        assert_eq!((e.line, e.column), (3, Some("src_ip")));
        let e = read_all("src_ip,dst_ip,proto,bytes\n10.0.0.1,::1,tcp,1\n").unwrap_err();
        assert!(e.to_string().contains("different IP versions"), "{e}");
        let e = read_all("src_ip,dst_ip,proto,bytes,vlan\n1.1.1.1,2.2.2.2,6,5,5000\n").unwrap_err();
        assert_eq!(e.column, Some("vlan"));
        let e =
            read_all("src_ip,dst_ip,proto,bytes\n1.1.1.1,2.2.2.2,6,2199023255553\n").unwrap_err();
        assert_eq!((e.line, e.column), (2, Some("bytes")));
        assert!(e.to_string().contains("0 to 1099511627776"), "{e}");
        let e = read_all("src_ip,dst_ip,proto,bytes\n1.1.1.1,2.2.2.2\n").unwrap_err();
        assert!(matches!(e.kind, CsvErrorKind::TooFewFields { found: 2 }));
        let e = read_all("src_ip,dst_ip,proto,bytes,sa\n").unwrap_err();
        assert!(matches!(e.kind, CsvErrorKind::DuplicateColumn));
        let e = read_all("# nothing\n\n").unwrap_err();
        assert!(matches!(e.kind, CsvErrorKind::NoHeader));
        let long = format!(
            "src_ip,dst_ip,proto,bytes\n{}\n",
            "x".repeat(MAX_LINE_LEN + 5)
        );
        let e = read_all(&long).unwrap_err();
        assert_eq!((e.line, e.column.is_none()), (2, true));
        assert!(matches!(e.kind, CsvErrorKind::LineTooLong));
        let mut r = FlowListReader::new(&b"src_ip,dst_ip,proto,bytes\n\xff\n"[..]).unwrap();
        assert!(matches!(
            r.next_flow().unwrap_err().kind,
            CsvErrorKind::NotUtf8
        ));
        assert!(r.next_flow().unwrap().is_none());
    }
}
