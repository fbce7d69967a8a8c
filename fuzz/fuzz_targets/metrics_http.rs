//! Fuzz target: the metrics server's answer to what a scraper sends (`--metrics`, which may
//! face the network with `--metrics-allow-remote`).
//!
//! The first byte chooses how the rest arrives (the size of each read, and whether it is sent
//! over and over, past the size limit); the rest is what the scraper writes. `answer` runs on
//! it with a control socket nobody answers on: never a panic, it reads at most
//! `MAX_REQUEST` bytes and one read more, and writes one well-formed HTTP/1.1 reply whose
//! `Content-Length` matches the body it sends (none for `HEAD`).
#![no_main]

use std::io::{self, Read, Write};

use lagd::control::Endpoint;
use lagd::metrics::{MAX_REQUEST, answer};
use libfuzzer_sys::fuzz_target;

/// A scraper: `input` in reads of at most `step` bytes; what the server writes goes to `out`.
struct Scraper<'a> {
    input: &'a [u8],
    step: usize,
    read: usize,
    out: Vec<u8>,
}

impl Read for Scraper<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf.len().min(self.step).min(self.input.len() - self.read);
        buf[..n].copy_from_slice(&self.input[self.read..self.read + n]);
        self.read += n;
        Ok(n)
    }
}

impl Write for Scraper<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.out.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&how, rest)) = data.split_first() else {
        return;
    };
    let input: Vec<u8> = if how & 0x80 != 0 && !rest.is_empty() {
        rest.iter()
            .copied()
            .cycle()
            .take(MAX_REQUEST + 2048)
            .collect()
    } else {
        rest.to_vec()
    };
    let mut scraper = Scraper {
        input: &input,
        step: usize::from(how & 0x7f) * 16 + 1,
        read: 0,
        out: Vec::new(),
    };
    let control = Endpoint::parse("@lagd-fuzz/nobody");
    answer(&mut scraper, &control).expect("an in-memory stream does not fail");
    assert!(
        scraper.read <= MAX_REQUEST + 1024,
        "read {} bytes",
        scraper.read
    );
    let out = scraper.out;
    let end = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a reply head");
    let head = std::str::from_utf8(&out[..end]).expect("an ASCII head");
    let status = head.lines().next().unwrap_or("");
    let code = status.strip_prefix("HTTP/1.1 ").expect("a status line");
    assert!(
        code.len() > 4 && code.as_bytes()[..3].iter().all(u8::is_ascii_digit),
        "{status}"
    );
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .expect("Content-Length")
        .parse()
        .expect("a number");
    let body = &out[end + 4..];
    assert!(
        body.len() == length || body.is_empty(),
        "{status}: Content-Length {length}, body {}",
        body.len()
    );
});
