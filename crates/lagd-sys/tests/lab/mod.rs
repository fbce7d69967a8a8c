//! A throwaway network lab for the integration tests: uniquely named namespaces with veth pairs,
//! removed when the [`Lab`] is dropped (also when a test fails).
//!
//! These tests need root and network namespaces. They fail, loudly, when they cannot have them:
//! a test that silently skipped would say nothing about the I/O layer.

#![allow(dead_code, unreachable_pub)]

use std::io;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use lagd_sys::netns::NetNs;
use lagd_sys::packet::PacketSocket;
use lagd_sys::poll::{Events, Interest, Poller};

static NEXT_LAB: AtomicU32 = AtomicU32::new(0);

/// The ethertype test frames carry (IEEE 802 local experimental 1).
pub const TEST_ETHERTYPE: u16 = 0x88b5;

/// Namespaces `lsys<pid>n<k>a`, `…b`, …, deleted on drop.
pub struct Lab {
    namespaces: Vec<String>,
}

impl Lab {
    /// Creates `count` fresh namespaces with IPv6 off (so that no router solicitations or MLD
    /// reports show up on the test links) and loopback up.
    pub fn new(count: usize) -> Self {
        let id = NEXT_LAB.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let mut lab = Self {
            namespaces: Vec::new(),
        };
        for i in 0..count {
            let name = format!("lsys{pid}n{id}{}", (b'a' + i as u8) as char);
            run("ip", &["netns", "add", &name]);
            // Registered before anything else can fail, so that Drop removes it.
            lab.namespaces.push(name.clone());
            lab.run_in(i, || {
                for scope in ["all", "default"] {
                    let path = format!("/proc/sys/net/ipv6/conf/{scope}/disable_ipv6");
                    match std::fs::write(&path, "1") {
                        // A kernel without IPv6 sends no IPv6 noise either.
                        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                        other => other?,
                    }
                }
                Ok(())
            });
            run("ip", &["-n", &name, "link", "set", "lo", "up"]);
        }
        lab
    }

    /// Namespace `i`.
    pub fn ns(&self, i: usize) -> &str {
        &self.namespaces[i]
    }

    /// Runs `ip -n <ns i> <args>`, panicking with its stderr if it fails.
    pub fn ip(&self, i: usize, args: &[&str]) -> String {
        let mut full = vec!["-n", self.ns(i)];
        full.extend_from_slice(args);
        run("ip", &full)
    }

    /// A veth pair: `a_name` in namespace `a`, `b_name` in namespace `b`, both up.
    pub fn veth(&self, a: usize, a_name: &str, b: usize, b_name: &str) {
        let b_ns = self.ns(b).to_string();
        self.ip(
            a,
            &[
                "link", "add", a_name, "type", "veth", "peer", "name", b_name, "netns", &b_ns,
            ],
        );
        self.ip(a, &["link", "set", a_name, "up"]);
        self.ip(b, &["link", "set", b_name, "up"]);
        // Until the kernel's link watcher has seen the carrier (it may wait up to a second when
        // busy), a device's transmit queue is the no-op qdisc, which drops what is sent: a
        // frame sent at once could vanish without an error.
        self.wait_running(a, a_name);
        self.wait_running(b, b_name);
    }

    /// Waits (up to 10 s) until interface `name` in namespace `i` is operationally up.
    pub fn wait_running(&self, i: usize, name: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let shown = self.ip(i, &["-o", "link", "show", "dev", name]);
            if shown.contains("state UP") {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{name} in {} not up after 10 s: {shown}",
                self.ns(i)
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Runs `f` inside namespace `i` on a fresh thread; panics on any error.
    pub fn run_in<T: Send>(&self, i: usize, f: impl FnOnce() -> io::Result<T> + Send) -> T {
        NetNs::enter_thread(self.ns(i), f)
            .unwrap_or_else(|e| panic!("entering {}: {e}", self.ns(i)))
            .unwrap_or_else(|e| panic!("in {}: {e}", self.ns(i)))
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for name in &self.namespaces {
            let out = Command::new("ip").args(["netns", "del", name]).output();
            match out {
                Ok(o) if o.status.success() => {}
                Ok(o) => eprintln!(
                    "lab cleanup: ip netns del {name}: {}",
                    String::from_utf8_lossy(&o.stderr)
                ),
                Err(e) => eprintln!("lab cleanup: ip netns del {name}: {e}"),
            }
        }
    }
}

/// Runs a command, panicking with its output if it cannot run or fails.
pub fn run(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd).args(args).output().unwrap_or_else(|e| {
        panic!("cannot run {cmd} {args:?}: {e} (these tests need root and iproute2)")
    });
    assert!(
        out.status.success(),
        "{cmd} {args:?} failed ({}): {}{}(these tests need root and network namespaces)",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// An Ethernet frame.
pub fn frame(dst: [u8; 6], src: [u8; 6], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(14 + payload.len());
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// The ethertype of a frame (no VLAN handling: tests send untagged frames).
pub fn ethertype(frame: &[u8]) -> Option<u16> {
    Some(u16::from_be_bytes(frame.get(12..14)?.try_into().ok()?))
}

/// Waits until `sock` is readable, for at most `timeout`. Returns false on timeout.
pub fn wait_readable(sock: &PacketSocket, timeout: Duration) -> bool {
    let poller = Poller::new().expect("epoll");
    poller.add(sock, 1, Interest::READABLE).expect("epoll add");
    let mut events = Events::with_capacity(1);
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if poller.wait(&mut events, Some(left)).expect("epoll wait") > 0 {
            return true;
        }
        if left.is_zero() {
            return false;
        }
    }
}

/// Receives frames (after `skip` bytes of vnet header) until one satisfies `want`, for at most
/// `timeout`; other frames are ignored. Returns the whole buffer contents of that frame.
pub fn recv_matching(
    sock: &PacketSocket,
    timeout: Duration,
    want: impl Fn(&[u8]) -> bool,
) -> Option<(Vec<u8>, lagd_sys::packet::RecvMeta)> {
    let deadline = Instant::now() + timeout;
    let mut buf = vec![0u8; 70_000];
    let skip = sock.vnet_hdr_len();
    loop {
        match sock.recv_from(&mut buf) {
            Ok(meta) => {
                let got = &buf[..meta.len];
                if got.len() >= skip && want(&got[skip..]) {
                    return Some((got.to_vec(), meta));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() || !wait_readable(sock, left) {
                    return None;
                }
            }
            Err(e) => panic!("recv: {e}"),
        }
    }
}

/// Median of a list of durations (sorts it).
pub fn median(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}
