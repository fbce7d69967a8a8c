//! Member isolation against the real kernel: the ingress drop (with a tcx link, and as a
//! clsact filter) cuts an interface's own stack off while an `ETH_P_ALL` packet socket still
//! sees every frame, and `quiet_stack` sets its sysctls. Each test builds two namespaces `liso<pid>n<k>a` / `…b` joined by a veth pair
//! `va` (10.254.77.1/24, in A) — `vb` (10.254.77.2/24, in B), removed by a guard on drop.
//!
//! Needs root; fails (never skips) without it. Run with
//! `cargo test -p lagd-sys --test isolate -- --test-threads=1 --nocapture`.

mod lab;

use std::io;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use lab::{ethertype, frame, recv_matching, run};
use lagd_sys::clsact::{self, Attach, Hook};
use lagd_sys::isolate::{IngressDrop, SlowProtocolsEgressDrop, TcxUnavailable, quiet_stack};
use lagd_sys::link;
use lagd_sys::netns::NetNs;
use lagd_sys::packet::{PacketOptions, PacketSocket};

const A_IP: [u8; 4] = [10, 254, 77, 1];
const B_IP: [u8; 4] = [10, 254, 77, 2];
const B_IP_STR: &str = "10.254.77.2";
const WAIT: Duration = Duration::from_secs(2);

static NEXT_PAIR: AtomicU32 = AtomicU32::new(0);

/// Two fresh namespaces joined by `va` — `vb`, deleted on drop (also when a test panics).
struct Pair {
    namespaces: Vec<String>,
}

impl Pair {
    fn new() -> Self {
        require_root();
        let id = NEXT_PAIR.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let mut pair = Self {
            namespaces: Vec::new(),
        };
        for side in ['a', 'b'] {
            let name = format!("liso{pid}n{id}{side}");
            run("ip", &["netns", "add", &name]);
            // Registered right away, so that Drop removes it whatever fails next.
            pair.namespaces.push(name.clone());
            run("ip", &["-n", &name, "link", "set", "lo", "up"]);
        }
        let (a, b) = (pair.a().to_owned(), pair.b().to_owned());
        run(
            "ip",
            &[
                "-n", &a, "link", "add", "va", "type", "veth", "peer", "name", "vb", "netns", &b,
            ],
        );
        run(
            "ip",
            &["-n", &a, "addr", "add", "10.254.77.1/24", "dev", "va"],
        );
        run(
            "ip",
            &["-n", &b, "addr", "add", "10.254.77.2/24", "dev", "vb"],
        );
        run("ip", &["-n", &a, "link", "set", "va", "up"]);
        run("ip", &["-n", &b, "link", "set", "vb", "up"]);
        pair
    }

    fn a(&self) -> &str {
        &self.namespaces[0]
    }

    fn b(&self) -> &str {
        &self.namespaces[1]
    }

    /// Runs `f` on a fresh thread inside namespace `ns`; panics on any error.
    fn run_in<T: Send>(&self, ns: &str, f: impl FnOnce() -> io::Result<T> + Send) -> T {
        NetNs::enter_thread(ns, f)
            .unwrap_or_else(|e| panic!("entering {ns}: {e}"))
            .unwrap_or_else(|e| panic!("in {ns}: {e}"))
    }

    /// One `ping -c1 -W1` from A to B; true if it got its reply.
    fn ping_once(&self) -> bool {
        require_ping();
        let out = Command::new("ip")
            .args(["netns", "exec", self.a(), "ping", "-n", "-q", "-c1", "-W1"])
            .arg(B_IP_STR)
            .output()
            .unwrap_or_else(|e| panic!("cannot run ip netns exec … ping: {e}"));
        out.status.success()
    }

    /// `ping -c1 -W1` from A to B, up to three times (the first one also resolves ARP); true as
    /// soon as one gets its reply.
    fn ping_ok(&self) -> bool {
        (0..3).any(|_| self.ping_once())
    }

    /// A's neighbour entry for B, as `ip neigh show` prints it (empty if none).
    fn a_neigh_of_b(&self) -> String {
        run(
            "ip",
            &["-n", self.a(), "neigh", "show", B_IP_STR, "dev", "va"],
        )
    }

    /// `Ip: InReceives` of namespace B: IPv4 packets B's stack received.
    fn b_ip_in_receives(&self) -> u64 {
        self.run_in(self.b(), ip_in_receives)
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for name in &self.namespaces {
            match Command::new("ip").args(["netns", "del", name]).output() {
                Ok(o) if o.status.success() => {}
                Ok(o) => eprintln!(
                    "cleanup: ip netns del {name}: {}",
                    String::from_utf8_lossy(&o.stderr)
                ),
                Err(e) => eprintln!("cleanup: ip netns del {name}: {e}"),
            }
        }
    }
}

/// Fails the test, naming the package, unless `ping` is on PATH: `ip netns exec NS ping` alone
/// only fails with exit code 255, which would read as a broken network.
fn require_ping() {
    let found = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("ping").is_file()));
    assert!(
        found,
        "ping is not installed: `apt-get install iputils-ping` (.ci/run installs it)"
    );
}

/// Fails the test unless the effective uid is 0: these tests must never pass by skipping.
fn require_root() {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let euid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .expect("Uid: line in /proc/self/status");
    assert_eq!(
        euid, "0",
        "these tests need root (bpf, network namespaces); they never skip"
    );
}

/// `Ip: InReceives` from `/proc/thread-self/net/snmp`. (`/proc/net` is `/proc/self/net`, the
/// namespace of the process's main thread, not of the calling thread.)
fn ip_in_receives() -> io::Result<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/net/snmp")?;
    let mut ip = text.lines().filter(|l| l.starts_with("Ip:"));
    let (names, values) = (ip.next(), ip.next());
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "unexpected /proc/net/snmp");
    let (names, values) = (names.ok_or_else(bad)?, values.ok_or_else(bad)?);
    let col = names
        .split_whitespace()
        .position(|n| n == "InReceives")
        .ok_or_else(bad)?;
    values
        .split_whitespace()
        .nth(col)
        .and_then(|v| v.parse().ok())
        .ok_or_else(bad)
}

fn read_sysctl(path: &str) -> io::Result<String> {
    Ok(std::fs::read_to_string(path)?.trim().to_owned())
}

/// An ARP request (`who-has target`).
fn is_arp_request_for(f: &[u8], target: [u8; 4]) -> bool {
    f.len() >= 42 && f[12..14] == [0x08, 0x06] && f[20..22] == [0, 1] && f[38..42] == target
}

/// An IPv4 ICMP echo request from `src` to `dst`.
fn is_echo_request(f: &[u8], src: [u8; 4], dst: [u8; 4]) -> bool {
    if f.len() < 34 || f[12..14] != [0x08, 0x00] || f[23] != 1 {
        return false;
    }
    let ihl = usize::from(f[14] & 0x0f) * 4;
    f[26..30] == src && f[30..34] == dst && f.get(14 + ihl) == Some(&8)
}

/// Attaches the drop program in the current thread's namespace, failing loudly (with the tcx
/// diagnosis) if it cannot.
fn attach(name: &str) -> io::Result<IngressDrop> {
    attach_with(name, Attach::Tcx)
}

/// Whether this kernel has tcx (Linux 6.6+, `/proc/sys/kernel/osrelease`).
fn kernel_has_tcx() -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut parts = release
        .trim()
        .split(['.', '-'])
        .map(|p| p.parse::<u32>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0)) >= (6, 6)
}

/// On a kernel without tcx, a tcx test checks what the daemon's `auto` relies on instead:
/// attaching with tcx is refused as [`TcxUnavailable`] (the `_tc` tests cover the clsact
/// fallback); says so and returns `true`. `false` on a kernel with tcx.
fn refused_without_tcx(pair: &Pair) -> bool {
    if kernel_has_tcx() {
        return false;
    }
    let err = pair
        .run_in(pair.b(), || Ok(attach("vb")))
        .expect_err("tcx attached on a kernel before 6.6");
    assert!(TcxUnavailable::of(&err).is_some(), "{err}");
    eprintln!("this kernel has no tcx: the tcx attachment is refused as TcxUnavailable ({err})");
    true
}

/// [`attach`] as `how` says.
fn attach_with(name: &str, how: Attach) -> io::Result<IngressDrop> {
    IngressDrop::attach_with(link::ifindex(name)?, how).inspect_err(|e| {
        if let Some(t) = TcxUnavailable::of(e) {
            eprintln!("tcx unavailable: errno {} from {}", t.errno(), t.call());
        }
    })
}

#[test]
fn without_isolation_b_answers_and_its_stack_sees_the_ping() {
    let pair = Pair::new();
    let sock = pair.run_in(pair.b(), || {
        PacketSocket::bind_name("vb", PacketOptions::default())
    });
    let before = pair.b_ip_in_receives();
    assert!(pair.ping_ok(), "ping A → B without isolation failed");
    let after = pair.b_ip_in_receives();
    assert!(
        after > before,
        "B's IpInReceives did not move: {before} → {after}"
    );
    assert!(
        pair.a_neigh_of_b().contains("lladdr"),
        "A did not learn B's MAC: {}",
        pair.a_neigh_of_b()
    );
    assert!(
        recv_matching(&sock, WAIT, |f| is_echo_request(f, A_IP, B_IP)).is_some(),
        "packet socket saw no echo request"
    );
    println!("no isolation: ping ok, B IpInReceives {before} → {after}");
}

#[test]
fn ingress_drop_hides_frames_from_the_stack_but_not_from_packet_sockets() {
    drop_hides_frames(Attach::Tcx);
}

#[test]
fn ingress_drop_hides_frames_from_the_stack_but_not_from_packet_sockets_tc() {
    drop_hides_frames(Attach::Tc);
}

fn drop_hides_frames(how: Attach) {
    let pair = Pair::new();
    if how == Attach::Tcx && refused_without_tcx(&pair) {
        return;
    }
    let (sock, guard, vb_index, vb_mac) = pair.run_in(pair.b(), || {
        let sock = PacketSocket::bind_name("vb", PacketOptions::default())?;
        let guard = attach_with("vb", how)?;
        Ok((sock, guard, link::ifindex("vb")?, link::mac("vb")?))
    });
    assert_eq!(guard.ifindex(), vb_index);
    assert_eq!(guard.how(), how);
    let before = pair.b_ip_in_receives();

    // 1. A does not know B's MAC: its ARP requests reach the wire (and the packet socket), but
    //    B's stack never sees them, so nobody answers and the ping fails.
    assert!(!pair.ping_once(), "ping succeeded through the ingress drop");
    assert!(
        recv_matching(&sock, WAIT, |f| is_arp_request_for(f, B_IP)).is_some(),
        "packet socket saw no ARP request for B"
    );
    let neigh = pair.a_neigh_of_b();
    assert!(!neigh.contains("lladdr"), "B answered ARP: {neigh}");

    // 2. Give A B's MAC: now echo requests go out, the packet socket sees them, B's IP layer
    //    still receives nothing.
    let mac = vb_mac.map(|b| format!("{b:02x}")).join(":");
    run(
        "ip",
        &[
            "-n",
            pair.a(),
            "neigh",
            "replace",
            B_IP_STR,
            "lladdr",
            &mac,
            "dev",
            "va",
            "nud",
            "permanent",
        ],
    );
    assert!(!pair.ping_once(), "ping succeeded through the ingress drop");
    assert!(
        recv_matching(&sock, WAIT, |f| is_echo_request(f, A_IP, B_IP)).is_some(),
        "packet socket saw no ICMP echo request"
    );
    let during = pair.b_ip_in_receives();
    assert_eq!(
        during, before,
        "B's IP stack received packets through the drop"
    );

    // 3. Drop it (on this thread, outside B): detached at once; ARP and ping work again.
    drop(guard);
    run(
        "ip",
        &["-n", pair.a(), "neigh", "del", B_IP_STR, "dev", "va"],
    );
    assert!(
        pair.ping_ok(),
        "ping still fails after the IngressDrop was dropped"
    );
    let after = pair.b_ip_in_receives();
    assert!(
        after > during,
        "B's stack still sees nothing after detaching"
    );
    assert!(
        pair.a_neigh_of_b().contains("lladdr"),
        "B does not answer ARP after detaching"
    );
    if how == Attach::Tc {
        // Gone with the drop: the filter, and the qdisc it added.
        let filters = pair.run_in(pair.b(), || clsact::filters(vb_index, Hook::Ingress));
        assert!(filters.is_empty(), "{filters:?}");
        let q = run(
            "ip",
            &[
                "netns",
                "exec",
                pair.b(),
                "tc",
                "qdisc",
                "show",
                "dev",
                "vb",
            ],
        );
        assert!(!q.contains("clsact"), "{q}");
    }
    println!(
        "{how} ingress drop on vb (ifindex {vb_index}): ping failed, ARP + echo seen by AF_PACKET, \
         B IpInReceives {before} → {during} while attached, {after} after drop"
    );
}

#[test]
fn two_drops_stack_and_each_detaches_only_itself() {
    let pair = Pair::new();
    if refused_without_tcx(&pair) {
        return;
    }
    let (first, second) = pair.run_in(pair.b(), || Ok((attach("vb")?, attach("vb")?)));
    assert!(!pair.ping_once(), "ping succeeded with two drops attached");
    drop(first);
    assert!(
        !pair.ping_once(),
        "ping succeeded with one drop still attached"
    );
    drop(second);
    assert!(pair.ping_ok(), "ping fails with both drops gone");
}

/// A clsact drop is a filter at lagd's priority and handle, named for lagd; a second one on the
/// same interface replaces the first (lagd never has two there), and a filter of someone else's
/// at the same priority stays through both and after.
#[test]
fn tc_drop_is_lagds_filter_and_leaves_others_be() {
    let pair = Pair::new();
    run(
        "ip",
        &[
            "netns",
            "exec",
            pair.b(),
            "tc",
            "qdisc",
            "add",
            "dev",
            "vb",
            "clsact",
        ],
    );
    // Matches nothing and lets the next filter decide (`ret #-1`).
    run(
        "ip",
        &[
            "netns",
            "exec",
            pair.b(),
            "tc",
            "filter",
            "add",
            "dev",
            "vb",
            "ingress",
            "prio",
            "1",
            "handle",
            "9",
            "bpf",
            "da",
            "bytecode",
            "1,6 0 0 4294967295,",
        ],
    );
    let index = pair.run_in(pair.b(), || link::ifindex("vb"));
    let show = || pair.run_in(pair.b(), || clsact::filters(index, Hook::Ingress));
    let first = pair.run_in(pair.b(), || attach_with("vb", Attach::Tc));
    let f = show();
    assert_eq!(f.len(), 2, "{f:?}");
    let lagd: Vec<_> = f.iter().filter(|f| f.is_lagd()).collect();
    assert_eq!(lagd.len(), 1, "{f:?}");
    assert_eq!(lagd[0].prio, clsact::PRIO);
    assert_eq!(lagd[0].bpf_name.as_deref(), Some("lagd_ingr_drop"));
    assert!(!pair.ping_once(), "ping passed the drop");
    let second = pair.run_in(pair.b(), || attach_with("vb", Attach::Tc));
    assert_eq!(show().iter().filter(|f| f.is_lagd()).count(), 1);
    drop(first);
    drop(second);
    let f = show();
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!((f[0].handle, f[0].is_lagd()), (9, false));
    assert!(pair.ping_ok(), "ping fails with the drop gone");
    // Not lagd's qdisc: it stays.
    let q = run(
        "ip",
        &[
            "netns",
            "exec",
            pair.b(),
            "tc",
            "qdisc",
            "show",
            "dev",
            "vb",
        ],
    );
    assert!(q.contains("clsact"), "{q}");
}

#[test]
fn tc_attach_errors_are_annotated_and_interface_deletion_is_harmless() {
    let pair = Pair::new();
    let err = pair
        .run_in(pair.b(), || {
            Ok(IngressDrop::attach_with(999_999, Attach::Tc))
        })
        .expect_err("attached to a missing interface");
    assert_eq!(lagd_sys::errno(&err), Some(libc::ENODEV), "{err}");
    let text = err.to_string();
    assert!(
        text.starts_with("RTM_NEWQDISC clsact on ifindex 999999: "),
        "{text}"
    );
    let guard = pair.run_in(pair.b(), || attach_with("vb", Attach::Tc));
    run("ip", &["-n", pair.b(), "link", "del", "vb"]);
    guard
        .detach()
        .expect("detaching from a deleted interface is no error");
}

/// The slow-protocols egress drop (a fault injector) drops 0x8809 frames A sends on `va` and
/// nothing else, with a tcx link and as a clsact filter, and lets them through once dropped.
fn slow_drop_drops_only_slow_protocols(how: Attach) {
    let pair = Pair::new();
    if how == Attach::Tcx && refused_without_tcx(&pair) {
        return;
    }
    let rx = pair.run_in(pair.b(), || {
        PacketSocket::bind_name("vb", PacketOptions::default())
    });
    let (tx, drop_guard) = pair.run_in(pair.a(), || {
        let tx = PacketSocket::bind_name("va", PacketOptions::default())?;
        let d = SlowProtocolsEgressDrop::attach_with(link::ifindex("va")?, how)?;
        Ok((tx, d))
    });
    assert_eq!(drop_guard.how(), how);
    let dst = [0x01, 0x80, 0xc2, 0, 0, 0x02];
    let src = [0x02, 0, 0, 0, 0, 0x0a];
    let slow = frame(dst, src, 0x8809, &[1; 60]);
    let other = frame(dst, src, 0x88b6, &[2; 60]);
    // A dropped frame fails its send with ENOBUFS; that is the drop, not an error here.
    let _ = tx.send(&slow);
    tx.send(&other).expect("send");
    assert!(
        recv_matching(&rx, WAIT, |f| ethertype(f) == Some(0x88b6)).is_some(),
        "{how}: the other frame did not cross"
    );
    assert!(
        recv_matching(&rx, Duration::from_millis(300), |f| ethertype(f)
            == Some(0x8809))
        .is_none(),
        "{how}: a slow-protocols frame crossed the drop"
    );
    drop(drop_guard);
    tx.send(&slow).expect("send");
    assert!(
        recv_matching(&rx, WAIT, |f| ethertype(f) == Some(0x8809)).is_some(),
        "{how}: no slow-protocols frame after the drop went"
    );
}

#[test]
fn slow_protocols_drop_drops_only_slow_protocols() {
    slow_drop_drops_only_slow_protocols(Attach::Tcx);
}

#[test]
fn slow_protocols_drop_drops_only_slow_protocols_tc() {
    slow_drop_drops_only_slow_protocols(Attach::Tc);
}

#[test]
fn attach_errors_are_annotated_and_interface_deletion_is_harmless() {
    let pair = Pair::new();
    if refused_without_tcx(&pair) {
        return;
    }
    let err = pair
        .run_in(pair.b(), || Ok(IngressDrop::attach(999_999)))
        .expect_err("attached to a missing interface");
    assert!(TcxUnavailable::of(&err).is_none(), "{err}");
    assert_eq!(lagd_sys::errno(&err), Some(libc::ENODEV), "{err}");
    let text = err.to_string();
    assert!(
        text.starts_with("bpf(BPF_LINK_CREATE) on ifindex 999999: "),
        "{text}"
    );

    // The interface goes away under an attached program: the link goes defunct, dropping it
    // later is fine.
    let guard = pair.run_in(pair.b(), || attach("vb"));
    run("ip", &["-n", pair.b(), "link", "del", "vb"]);
    drop(guard);
}

#[test]
fn quiet_stack_sets_the_sysctls_of_the_calling_threads_namespace() {
    let pair = Pair::new();
    let ipv6 = "/proc/sys/net/ipv6/conf/vb/disable_ipv6";
    let arp = "/proc/sys/net/ipv4/conf/vb/arp_ignore";
    let (v6_before, arp_before, v6_after, arp_after) = pair.run_in(pair.b(), || {
        // Start from known values, so that the read-back proves the write.
        std::fs::write(ipv6, "0")?;
        std::fs::write(arp, "0")?;
        let before = (read_sysctl(ipv6)?, read_sysctl(arp)?);
        quiet_stack("vb")?;
        Ok((before.0, before.1, read_sysctl(ipv6)?, read_sysctl(arp)?))
    });
    assert_eq!((v6_before.as_str(), arp_before.as_str()), ("0", "0"));
    assert_eq!(v6_after, "1", "disable_ipv6 not set");
    assert_eq!(arp_after, "8", "arp_ignore not set");

    // The peer in A is untouched, and A has no vb: the thread's namespace is what counts.
    let (va_arp, missing) = pair.run_in(pair.a(), || {
        Ok((
            read_sysctl("/proc/sys/net/ipv4/conf/va/arp_ignore")?,
            quiet_stack("vb").expect_err("vb is not in A"),
        ))
    });
    assert_eq!(va_arp, "0");
    assert_eq!(missing.kind(), io::ErrorKind::NotFound, "{missing}");
    assert!(
        missing
            .to_string()
            .contains("/proc/sys/net/ipv4/conf/vb/arp_ignore"),
        "{missing}"
    );

    // The fallback on its own: B no longer answers ARP, so A cannot reach it.
    assert!(!pair.ping_once(), "ping succeeded with arp_ignore=8 on vb");
    let neigh = pair.a_neigh_of_b();
    assert!(
        !neigh.contains("lladdr"),
        "B answered ARP with arp_ignore=8: {neigh}"
    );
}
