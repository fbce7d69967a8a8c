//! `lagctl hash`: the member each frame would leave on.
//!
//! Input: frames as hex, one per line; blank lines and lines starting with `#` are skipped, and
//! white space inside a line is ignored (so `tcpdump -xx`-style byte groups paste in). Output:
//! per frame, the 32-bit hash as `0x%08x`, a space and the member index; with `--explain`,
//! indented lines naming the fields that fed the hash follow each frame.

use std::fmt;
use std::io::{self, BufRead, Write};

use super::CliError;
use lagd_proto::hash::{Explain, HashPolicy, member_index, xmit_hash, xmit_hash_traced};

/// What `lagctl hash` was asked to do.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct HashArgs {
    /// Transmit hash policy: layer2, layer2+3, layer3+4, encap2+3, encap3+4, vlan+srcmac,
    /// ovs-slb or ovs-tcp.
    #[arg(long)]
    pub policy: HashPolicy,
    /// Number of bond members.
    #[arg(long, default_value_t = 2)]
    pub members: usize,
    /// Also print which fields fed each hash.
    #[arg(long)]
    pub explain: bool,
}

/// `lagctl hash` on stdin and stdout.
pub fn main(args: HashArgs) -> Result<(), CliError> {
    let stdout = io::stdout();
    run(args, io::stdin().lock(), io::BufWriter::new(stdout.lock())).map_err(|e| match e {
        HashError::Io(io) => CliError::Io(io),
        other => CliError::Usage(other.to_string()),
    })
}

/// Why `lagctl hash` stopped.
#[derive(Debug)]
pub enum HashError {
    /// An input line is not UTF-8 text, or not even-length hex.
    BadLine {
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// `--members 0`.
    NoMembers,
    /// Reading input or writing output failed.
    Io(io::Error),
}

impl fmt::Display for HashError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BadLine { line, reason } => write!(f, "line {line}: {reason}"),
            Self::NoMembers => f.write_str("--members must be at least 1"),
            Self::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for HashError {}

impl From<io::Error> for HashError {
    fn from(e: io::Error) -> Self {
        Self::Io(e)
    }
}

/// Decodes one line of hex (white space ignored) into `out`.
pub fn parse_hex_line(text: &str, out: &mut Vec<u8>) -> Result<(), String> {
    out.clear();
    let mut high: Option<u8> = None;
    let mut digits = 0usize;
    for (col, c) in text.char_indices() {
        if c.is_ascii_whitespace() {
            continue;
        }
        let Some(v) = c.to_digit(16) else {
            return Err(format!("not hex: {c:?} at column {}", col + 1));
        };
        digits += 1;
        match high.take() {
            None => high = Some(v as u8),
            Some(h) => out.push(h << 4 | v as u8),
        }
    }
    if high.is_some() {
        return Err(format!(
            "odd number of hex digits ({digits}): a frame is whole bytes"
        ));
    }
    Ok(())
}

/// Runs `lagctl hash` over `input`, writing to `out`.
pub fn run(args: HashArgs, input: impl BufRead, mut out: impl Write) -> Result<(), HashError> {
    if args.members == 0 {
        return Err(HashError::NoMembers);
    }
    let mut frame = Vec::with_capacity(2048);
    let mut raw = Vec::with_capacity(4096);
    let mut input = input;
    for n in 1.. {
        // Bytes up to each newline, so that a line that is not UTF-8 is an error naming it.
        raw.clear();
        if input.read_until(b'\n', &mut raw)? == 0 {
            break;
        }
        let line = std::str::from_utf8(&raw).map_err(|e| HashError::BadLine {
            line: n,
            reason: format!(
                "not UTF-8 text (byte 0x{:02x} at byte {} of the line)",
                raw[e.valid_up_to()],
                e.valid_up_to() + 1
            ),
        })?;
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        parse_hex_line(trimmed, &mut frame)
            .map_err(|reason| HashError::BadLine { line: n, reason })?;
        let mut explain = Explain::default();
        let hash = if args.explain {
            xmit_hash_traced(args.policy, &frame, &mut explain)
        } else {
            xmit_hash(args.policy, &frame)
        };
        let member = member_index(hash, args.members).unwrap_or(0);
        writeln!(out, "0x{hash:08x} {member}")?;
        if args.explain {
            for (field, value) in &explain.notes {
                writeln!(out, "  {field}: {value}")?;
            }
            writeln!(out, "  member: 0x{hash:08x} % {} = {member}", args.members)?;
        }
    }
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod test {
    use super::*;

    fn run_str(args: HashArgs, input: &str) -> Result<String, HashError> {
        let mut out = Vec::new();
        run(args, input.as_bytes(), &mut out)?;
        Ok(String::from_utf8(out).unwrap())
    }

    const ARGS: HashArgs = HashArgs {
        policy: HashPolicy::Layer2,
        members: 2,
        explain: false,
    };

    #[test]
    fn hex_lines() {
        let mut v = Vec::new();
        parse_hex_line("0a ff\t10", &mut v).unwrap();
        assert_eq!(v, [0x0a, 0xff, 0x10]);
        assert!(parse_hex_line("abc", &mut v).unwrap_err().contains("odd"));
        assert!(
            parse_hex_line("zz", &mut v)
                .unwrap_err()
                .contains("column 1")
        );
    }

    #[test]
    fn skips_comments_and_blank_lines_and_numbers_lines() {
        let out = run_str(ARGS, "# c\n\n020000000002020000000001 0800\n").unwrap();
        assert_eq!(out, "0x00000803 1\n");
        let e = run_str(ARGS, "# c\n0200\nxyz\n").unwrap_err();
        assert!(matches!(e, HashError::BadLine { line: 3, .. }), "{e}");
        // A line that is not UTF-8 names its line, after answering the lines before it.
        let mut out = Vec::new();
        let e = run(
            ARGS,
            &b"020000000002020000000001 0800\n\xff\xfe00\n"[..],
            &mut out,
        )
        .unwrap_err();
        assert!(matches!(e, HashError::BadLine { line: 2, .. }), "{e}");
        assert!(
            e.to_string().contains("UTF-8") && e.to_string().contains("0xff"),
            "{e}"
        );
        assert_eq!(out, b"0x00000803 1\n");
        // No newline at the end, and CRLF line ends, still work.
        let out = run_str(
            ARGS,
            "020000000002020000000001 0800\r\n020000000002020000000001 0800",
        )
        .unwrap();
        assert_eq!(out, "0x00000803 1\n0x00000803 1\n");
        let zero = HashArgs { members: 0, ..ARGS };
        assert!(matches!(run_str(zero, ""), Err(HashError::NoMembers)));
    }
}
