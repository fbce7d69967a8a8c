//! A datagram every millisecond each way, counted: what the restart tests measure a gap with.
//!
//! Each test binary that includes this module uses only some of it.
#![allow(dead_code)]

use std::net::Ipv4Addr;
use std::thread;
use std::time::{Duration, Instant};

/// A running [`probe`].
pub(crate) type ProbeHandle = thread::JoinHandle<(u64, u64)>;

/// What a [`timed_probe`] found: when each datagram was sent (its number is its index) and the
/// numbers that arrived.
pub(crate) struct Timed {
    /// The time each datagram was sent.
    pub(crate) sent: Vec<Instant>,
    /// The numbers received.
    pub(crate) seen: std::collections::BTreeSet<u64>,
}

impl Timed {
    /// (sent, received), as [`probe`] returns them.
    pub(crate) fn counts(&self) -> (u64, u64) {
        (self.sent.len() as u64, self.seen.len() as u64)
    }

    /// The datagrams that did not arrive, as runs of their send times in ms from `since`
    /// (`"none"` if every one did).
    pub(crate) fn missed_ms(&self, since: Instant) -> String {
        let ms = |n: u64| {
            self.sent[n as usize]
                .saturating_duration_since(since)
                .as_millis()
        };
        let runs: Vec<String> = missing_runs(&self.seen, self.sent.len() as u64)
            .iter()
            .map(|&(a, b)| format!("{} ({}-{} ms)", b - a + 1, ms(a), ms(b)))
            .collect();
        if runs.is_empty() {
            "none".into()
        } else {
            runs.join(", ")
        }
    }

    /// The datagrams sent from `from` to `to` that did not arrive.
    pub(crate) fn lost_between(&self, from: Instant, to: Instant) -> u64 {
        (0u64..)
            .zip(&self.sent)
            .filter(|(n, t)| **t >= from && **t <= to && !self.seen.contains(n))
            .count() as u64
    }
}

/// [`timed_probe`], counted.
pub(crate) fn probe(
    from_ns: String,
    to_ns: String,
    to: Ipv4Addr,
    port: u16,
    span: Duration,
) -> ProbeHandle {
    let timed = timed_probe(from_ns, to_ns, to, port, span);
    thread::spawn(move || timed.join().unwrap().counts())
}

/// The ports the probes' receivers bind (each test picks its own in this range).
const RECEIVER_PORTS: std::ops::Range<u16> = 40000..41000;

/// A UDP socket for a probe's sender, on an ephemeral port outside [`RECEIVER_PORTS`]: the
/// sender of one direction may bind before the receiver of the other binds in the same
/// namespace, and an ephemeral port taken there first refuses the receiver's bind (seen once
/// in a one-CPU guest). Ports drawn in the range are held until one outside it is found, so
/// none is drawn twice.
fn sender_socket() -> std::net::UdpSocket {
    let mut held = Vec::new();
    loop {
        let s = std::net::UdpSocket::bind(("0.0.0.0", 0)).expect("a UDP socket for the probe");
        let port = s.local_addr().expect("its address").port();
        if !RECEIVER_PORTS.contains(&port) {
            return s;
        }
        held.push(s);
    }
}

/// Datagrams every millisecond from `from_ns` (bound to `from`) to `to:port` for `span`, each
/// carrying its sequence number; the receiver in `to_ns` counts the distinct ones that came.
/// Returns when each was sent and which arrived. The receiver's buffer holds every datagram
/// of the span, so a receiving thread the one-CPU guests do not schedule in time loses none (a
/// sender behind its schedule catches up in a burst); the namespace's UDP buffer overflows, if
/// any, and the runs of datagrams that did not arrive are printed.
pub(crate) fn timed_probe(
    from_ns: String,
    to_ns: String,
    to: Ipv4Addr,
    port: u16,
    span: Duration,
) -> thread::JoinHandle<Timed> {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    timed_probe_until(from_ns, to_ns, to, port, span, stop)
}

/// [`timed_probe`] that sends for at least `span` and on until `stop` is set (at most a minute
/// past the span): for an event that may outlast any fixed span in a starved guest.
pub(crate) fn timed_probe_until(
    from_ns: String,
    to_ns: String,
    to: Ipv4Addr,
    port: u16,
    span: Duration,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> thread::JoinHandle<Timed> {
    use std::net::UdpSocket;
    use std::sync::atomic::Ordering;
    let most = span + Duration::from_secs(60);
    // The sender starts once the receiver's socket is bound: a one-CPU guest may not run the
    // receiver's thread for longer than any fixed pause, and datagrams to an unbound port are
    // lost before any path is tested.
    let (bound_tx, bound_rx) = std::sync::mpsc::channel::<()>();
    // The receiver stops once 300 ms passed with nothing arriving after the sender's last
    // datagram: what is still on its way (a sender behind its schedule catches up in a burst,
    // which a busy one-CPU guest forwards through lagd for longer than that) arrives first,
    // and where nothing comes any more the probe lasts little more than its span (the tests
    // measure within lagd's 3 s bound for a kernel path without lagd). "Nothing arriving"
    // is what the receiver saw while it looked: it stops only after a read that waited and
    // found nothing. A receiver the guest did not run for longer than the 300 ms (a starting
    // lagd's verifier runs in the kernel of a one-CPU guest that does not preempt it) thus
    // reads what was queued meanwhile first, where it once stopped and counted it lost.
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let receiver = thread::spawn(move || {
        lagd_lab::topology::in_named_ns(&to_ns, move || {
            let s = UdpSocket::bind((to, port)).unwrap();
            lagd_sys::set_receive_buffer(std::os::fd::AsFd::as_fd(&s), 8 << 20).unwrap();
            s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
            let overflows_before = udp_receive_buffer_errors();
            let mut seen = std::collections::BTreeSet::new();
            let cap = Instant::now() + most + Duration::from_secs(30);
            let _ = bound_tx.send(());
            let mut buf = [0u8; 64];
            let mut done_at = None;
            let mut last = Instant::now();
            loop {
                let got = s.recv(&mut buf);
                let now = Instant::now();
                if let Ok(n) = got {
                    if n >= 8 {
                        seen.insert(u64::from_be_bytes(buf[..8].try_into().unwrap()));
                        last = now;
                    }
                }
                if done_at.is_none() && done_rx.try_recv().is_ok() {
                    done_at = Some(now);
                }
                let quiet = got.is_err()
                    && done_at.is_some_and(|t| now >= t.max(last) + Duration::from_millis(300));
                if now >= cap || quiet {
                    break;
                }
            }
            let overflows = udp_receive_buffer_errors() - overflows_before;
            if overflows > 0 {
                eprintln!("{to}:{port}: {overflows} UDP receive buffer overflows during the probe");
            }
            seen
        })
        .unwrap()
    });
    thread::spawn(move || {
        bound_rx
            .recv_timeout(Duration::from_secs(20))
            .expect("the probe's receiver did not bind");
        let sent = lagd_lab::topology::in_named_ns(&from_ns, move || {
            let s = sender_socket();
            let start = Instant::now();
            let mut sent = Vec::with_capacity(span.as_millis() as usize);
            let mut seq = 0u64;
            while start.elapsed() < span
                || (!stop.load(Ordering::Relaxed) && start.elapsed() < most)
            {
                sent.push(Instant::now());
                let _ = s.send_to(&seq.to_be_bytes(), (to, port));
                seq += 1;
                let next = start + Duration::from_millis(seq);
                if let Some(wait) = next.checked_duration_since(Instant::now()) {
                    thread::sleep(wait);
                }
            }
            sent
        })
        .unwrap();
        let _ = done_tx.send(());
        let seen = receiver.join().unwrap();
        let gaps = gaps(&seen, sent.len() as u64);
        if !gaps.is_empty() {
            // A datagram leaves about every millisecond: a gap's numbers are its times.
            eprintln!("{to}:{port}: missing datagrams (numbers, ~ms into the probe): {gaps}");
        }
        Timed { sent, seen }
    })
}

/// `RcvbufErrors` of UDP in the calling thread's network namespace.
fn udp_receive_buffer_errors() -> i64 {
    let snmp = std::fs::read_to_string("/proc/thread-self/net/snmp").unwrap_or_default();
    let mut udp = snmp.lines().filter(|l| l.starts_with("Udp: "));
    let (Some(names), Some(values)) = (udp.next(), udp.next()) else {
        return 0;
    };
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == "RcvbufErrors")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

/// The runs of the numbers below `sent` missing from `seen`, first and last of each, in order.
fn missing_runs(seen: &std::collections::BTreeSet<u64>, sent: u64) -> Vec<(u64, u64)> {
    let mut runs = Vec::new();
    let mut next = 0u64;
    for &n in seen.range(..sent).chain(std::iter::once(&sent)) {
        if n > next {
            runs.push((next, n - 1));
        }
        next = n + 1;
    }
    runs
}

/// The runs of the numbers below `sent` missing from `seen`, as `a-b` (at most ten, and how
/// many more), empty if none.
fn gaps(seen: &std::collections::BTreeSet<u64>, sent: u64) -> String {
    let mut runs: Vec<String> = missing_runs(seen, sent)
        .iter()
        .map(|(a, b)| format!("{a}-{b}"))
        .collect();
    let more = runs.len().saturating_sub(10);
    runs.truncate(10);
    if more > 0 {
        runs.push(format!("and {more} more"));
    }
    runs.join(", ")
}
