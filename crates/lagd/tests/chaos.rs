//! Chaos, short versions for CI (seconds each): what the wire can throw at a bond. Two hosts
//! (network namespaces) joined by veth links, lagd at both ends; frames are injected on host
//! B's end of a link with a packet socket of the test's own, so they arrive at host A's member
//! as if the partner (or an attacker on the wire) sent them. Needs root; fails (never skips)
//! without it. The long versions with figures are bench/chaos.sh (bench/reliability.md).

use std::path::PathBuf;
use std::thread;
use std::time::{Duration, Instant};

use lagd::daemon::query_status;
use lagd::lab::topology::{
    ProcessId, Side, Topology, in_named_ns, is_root, random_u64, require_program,
};
use lagd::status::{MemberLacp, Status};
use lagd_proto::wire::EthernetAddress;
use lagd_proto::wire::slow::{LacpInfo, LacpRepr, MarkerKind, MarkerRepr, PortState};
use lagd_sys::packet::{PacketOptions, PacketSocket};

mod common;
use common::{address_bonds, start_lagd};

/// Two lagds in 802.3ad over `links` links, both up, with their control sockets and
/// processes (A, B).
struct Pair {
    topo: Topology,
    controls: [PathBuf; 2],
    procs: [ProcessId; 2],
}

impl Pair {
    fn new(links: usize, opts: &str) -> Self {
        assert!(
            is_root(),
            "network namespace tests need root (CI runs them as root)"
        );
        let mut topo = Topology::create(links).expect("create topology");
        let tag = topo.tag().to_owned();
        let bonds = [format!("{tag}bA"), format!("{tag}bB")];
        let (pb, cb) = start_lagd(&mut topo, Side::B, &bonds[1], opts);
        let (pa, ca) = start_lagd(&mut topo, Side::A, &bonds[0], opts);
        address_bonds(&topo, &bonds);
        Self {
            topo,
            controls: [ca, cb],
            procs: [pa, pb],
        }
    }

    fn status(&self, side: Side) -> Status {
        let i = usize::from(side == Side::B);
        query_status(&self.controls[i]).expect("status")
    }

    /// Whether member `m` distributes at both ends.
    fn distributing(&self, m: usize) -> bool {
        [Side::A, Side::B]
            .iter()
            .all(|&s| lacp(&self.status(s), m).distributing)
    }

    /// Waits up to `within` for member `m` to distribute at both ends.
    fn wait_distributing(&self, m: usize, within: Duration) -> bool {
        let t = Instant::now();
        while t.elapsed() < within {
            if self.distributing(m) {
                return true;
            }
            thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// Host `side`'s lagd log.
    fn log(&self, side: Side) -> String {
        let i = usize::from(side == Side::B);
        self.topo.log_tail(self.procs[i], 1_000_000)
    }
}

fn lacp(s: &Status, m: usize) -> MemberLacp {
    s.members[m].lacp.clone().expect("member LACP status")
}

/// Every slow-protocol frame a member's status accounts for: parsed (by kind), refused before
/// parsing, or dropped by the kernel before lagd read it.
fn accounted(l: &MemberLacp) -> u64 {
    l.lacpdu_rx + l.marker_rx + l.illegal_rx + l.unknown_rx + l.rate_limited_rx + l.socket_drops
}

/// A tiny xorshift generator (the test's own randomness, seeded from the OS).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn mac(&mut self) -> EthernetAddress {
        let b = self.next().to_be_bytes();
        // Locally administered unicast.
        EthernetAddress([(b[0] & 0xfc) | 0x02, b[1], b[2], b[3], b[4], b[5]])
    }
}

/// The frames of a flood: valid LACPDUs naming random partners, malformed slow-protocol
/// frames (random bytes after a LACP subtype, truncated), and Marker Information PDUs, all
/// from one attacker address.
fn flood_frames(rng: &mut Rng, n: usize) -> Vec<Vec<u8>> {
    let src = rng.mac();
    (0..n)
        .map(|i| match i % 3 {
            0 => {
                let pdu = LacpRepr {
                    actor: LacpInfo {
                        system_priority: 1,
                        system: rng.mac(),
                        key: rng.next() as u16,
                        port_priority: 1,
                        port: rng.next() as u16,
                        state: PortState::ACTIVITY
                            | PortState::AGGREGATION
                            | PortState::SYNCHRONIZATION
                            | PortState::COLLECTING
                            | PortState::DISTRIBUTING,
                    },
                    ..LacpRepr::default()
                };
                let mut f = vec![0; pdu.frame_len()];
                pdu.emit_frame(src, &mut f);
                f
            }
            1 => {
                let len = 14 + (rng.next() % 120) as usize;
                let mut f: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
                f[..6].copy_from_slice(&[0x01, 0x80, 0xc2, 0, 0, 2]);
                f[6..12].copy_from_slice(&src.0);
                f[12..14].copy_from_slice(&[0x88, 0x09]);
                if len > 14 {
                    f[14] = 1;
                }
                f
            }
            _ => {
                let m = MarkerRepr {
                    kind: MarkerKind::Information,
                    requester_port: 1,
                    requester_system: src,
                    transaction_id: i as u32,
                };
                let mut f = vec![0; m.frame_len()];
                m.emit_frame(src, &mut f);
                f
            }
        })
        .collect()
}

/// Sends `frames` (cycling) on interface `link` of host B (its end of a link, or `lo`) as fast
/// as one thread goes, for `flood`; the thread returns how many were sent.
fn flood_in_background(
    pair: &Pair,
    link: String,
    frames: Vec<Vec<u8>>,
    flood: Duration,
) -> thread::JoinHandle<u64> {
    let ns_b = pair.topo.ns(Side::B).to_owned();
    thread::spawn(move || {
        in_named_ns(&ns_b, || {
            let s = PacketSocket::bind_name(
                &link,
                PacketOptions {
                    protocol: 0,
                    ..PacketOptions::default()
                },
            )
            .expect("injection socket");
            let t = Instant::now();
            let mut sent = 0u64;
            let mut i = 0;
            while t.elapsed() < flood {
                if s.send(&frames[i % frames.len()]).is_ok() {
                    sent += 1;
                } else {
                    thread::yield_now();
                }
                i += 1;
            }
            sent
        })
        .expect("enter host B's namespace")
    })
}

/// A flood of slow-protocol frames (valid LACPDUs with random partners, malformed ones, Marker
/// PDUs) on one member, as fast as one sender goes, for 3 s: the other member keeps
/// distributing at both ends all along; every frame that reached lagd is accounted for in its
/// counters (parsed, refused by the rate limit, or dropped by the kernel), and almost all are
/// refused before parsing; Marker responses stay within the limit; the random partners are
/// held off and the member keeps its partner; partner changes are logged; the flooded member
/// distributes after the flood.
#[test]
fn slow_protocol_flood_on_one_member() {
    let opts = "mode=802.3ad lacp_rate=fast";
    let pair = Pair::new(2, opts);
    assert!(
        pair.wait_distributing(0, Duration::from_secs(20))
            && pair.wait_distributing(1, Duration::from_secs(20)),
        "the bond forms"
    );
    let before = [
        lacp(&pair.status(Side::A), 0),
        lacp(&pair.status(Side::B), 0),
    ];
    let mut rng = Rng(random_u64() | 1);
    let frames = flood_frames(&mut rng, 3 * 256);
    let flood = Duration::from_secs(3);
    let link = pair.topo.links()[0].name.clone();
    let sender = flood_in_background(&pair, link, frames, flood);
    // The stable member distributes at both ends all through the flood.
    let t = Instant::now();
    let mut flooded_kept = true;
    while !sender.is_finished() {
        flooded_kept &= pair.distributing(0);
        assert!(
            pair.distributing(1),
            "member 1 stopped distributing {:?} into the flood",
            t.elapsed()
        );
        thread::sleep(Duration::from_millis(100));
    }
    let sent = sender.join().unwrap();
    println!("flood: {sent} frames in {flood:?}; member 0 distributing all along: {flooded_kept}");
    assert!(
        sent > 10_000,
        "the flood was too slow to mean anything: {sent}"
    );
    // Let lagd read what is queued, then compare.
    thread::sleep(Duration::from_millis(500));
    let after = [
        lacp(&pair.status(Side::A), 0),
        lacp(&pair.status(Side::B), 0),
    ];
    let partner_sent = after[1].lacpdu_tx - before[1].lacpdu_tx;
    let got = accounted(&after[0]) - accounted(&before[0]);
    let refused = after[0].rate_limited_rx - before[0].rate_limited_rx;
    let dropped = after[0].socket_drops - before[0].socket_drops;
    let answered = after[0].marker_response_tx - before[0].marker_response_tx;
    println!(
        "host A member 0: accounted {got} (refused {refused}, kernel drops {dropped}), \
         marker responses {answered}, partner LACPDUs {partner_sent}"
    );
    // Frames lost between the sender and lagd's socket (veth backlog) are the kernel's; lagd
    // accounts for everything that reached its member.
    assert!(
        got * 100 >= sent * 95,
        "only {got} of {sent} flood frames accounted for"
    );
    assert!(
        got <= sent + partner_sent,
        "{got} > {sent} + {partner_sent}"
    );
    // Almost everything is refused before parsing: at most the budget is parsed.
    let parsed = got - refused - dropped;
    assert!(parsed <= 60 * 5, "{parsed} parsed in ~3.5 s");
    // Marker responses within the limit (5/s, plus the first burst).
    assert!(answered <= 5 * 5, "{answered} marker responses");
    // The flood's LACPDUs named random partners from one address: held off, none took the
    // member from its partner.
    let foreign = after[0].foreign_rx - before[0].foreign_rx;
    assert!(foreign > 0, "no LACPDU held off");
    let partner = lacp(&pair.status(Side::A), 0).partner;
    let b_actor = lacp(&pair.status(Side::B), 0).actor;
    assert_eq!(partner.system_mac, b_actor.system_mac);
    // Partner changes are logged: the one at formation names B.
    let member = pair.status(Side::A).members[0].name.clone();
    let log = pair.log(Side::A);
    assert!(
        log.lines().any(|l| l.contains("LACP partner")
            && l.contains(member.as_str())
            && l.contains(b_actor.system_mac.as_str())),
        "no partner change logged for {member}:\n{log}"
    );
    // The flooded member distributes (again, if a partner LACPDU was lost in the kernel's
    // drops: those are counted, not avoided).
    assert!(
        pair.wait_distributing(0, Duration::from_secs(15)),
        "member 0 did not distribute after the flood"
    );
}

/// Sends `signal` (`STOP`, `CONT`) to the process `pid` this test started, with kill(1).
fn signal(pid: u32, sig: &str) {
    require_program("kill", "procps").unwrap_or_else(|e| panic!("{e:#}"));
    let ok = std::process::Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill -{sig} {pid}");
}

/// Continues a stopped process when dropped, so a failing assertion leaves no lagd stopped.
struct Continue(u32);

impl Drop for Continue {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-CONT", &self.0.to_string()])
            .status();
    }
}

/// lagd A stopped (SIGSTOP) for 5 s, longer than the 3 s LACP timeout at the fast rate: the
/// partner takes the members out; after SIGCONT lagd A recovers without a restart, every member
/// distributing again at both ends, and pings cross the bond.
#[test]
fn sigstop_longer_than_the_lacp_timeout_then_sigcont_recovers() {
    let pair = Pair::new(2, "mode=802.3ad lacp_rate=fast");
    for m in 0..2 {
        assert!(pair.wait_distributing(m, Duration::from_secs(20)), "forms");
    }
    let pid = lagd_pid(&pair.controls[0]).expect("lagd A's pid");
    let cont = Continue(pid);
    signal(pid, "STOP");
    thread::sleep(Duration::from_secs(5));
    // B timed its partner out meanwhile.
    let b = pair.status(Side::B);
    assert!(
        (0..2).all(|m| !lacp(&b, m).distributing),
        "B still distributes to a partner silent for 5 s"
    );
    drop(cont);
    for m in 0..2 {
        assert!(
            pair.wait_distributing(m, Duration::from_secs(15)),
            "member {m} did not distribute again after SIGCONT"
        );
    }
    assert!(ping(&pair, 5), "no ping across the bond after SIGCONT");
}

/// Pings host A's bond address from host B, `count` times.
fn ping(pair: &Pair, count: u32) -> bool {
    require_program("ping", "iputils-ping").unwrap_or_else(|e| panic!("{e:#}"));
    std::process::Command::new("ip")
        .args(["netns", "exec", pair.topo.ns(Side::B), "ping", "-q", "-c"])
        .arg(count.to_string())
        .args(["-i", "0.1", "-W", "2", &pair.topo.address(1).to_string()])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Random garbage: random lengths (runts to jumbo), random bytes, odd EtherTypes, VLAN stacks.
fn garbage(rng: &mut Rng, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let len = match i % 4 {
                0 => (rng.next() % 14) as usize + 1,
                1 => 14 + (rng.next() % 1500) as usize,
                2 => 1514 + (rng.next() % 7500) as usize,
                _ => 60,
            };
            let mut f: Vec<u8> = (0..len.max(14)).map(|_| rng.next() as u8).collect();
            f.truncate(len);
            if len >= 22 && i % 3 == 0 {
                // Stacked VLAN tags, then a random EtherType.
                f[12..14].copy_from_slice(&[0x88, 0xa8]);
                f[16..18].copy_from_slice(&[0x81, 0x00]);
            }
            f
        })
        .collect()
}

/// Garbage frames (random bytes and lengths, runts, jumbo, VLAN stacks) into a member for 3 s
/// and into host A's bond (the TAP, from the host side) for 3 s, as fast as one sender goes:
/// lagd answers throughout, its RSS does not grow by more than 1 MiB, and the bond still
/// carries pings afterwards.
#[test]
fn garbage_into_a_member_and_into_the_tap() {
    let pair = Pair::new(2, "mode=balance-xor xmit_hash_policy=layer3+4");
    let pid = lagd_pid(&pair.controls[0]).expect("lagd A's pid");
    assert!(ping(&pair, 3), "the bond carries pings");
    let rss0 = rss_kib(pid);
    let mut rng = Rng(random_u64() | 1);
    // Into member 0 of host A, from host B's end.
    let link = pair.topo.links()[0].name.clone();
    let sender = flood_in_background(&pair, link, garbage(&mut rng, 512), Duration::from_secs(3));
    while !sender.is_finished() {
        pair.status(Side::A);
        thread::sleep(Duration::from_millis(100));
    }
    let into_member = sender.join().unwrap();
    // Into the TAP: a packet socket on host A's bond interface sends into lagd.
    let bond = pair.status(Side::A).bond;
    let frames = garbage(&mut rng, 512);
    let ns_a = pair.topo.ns(Side::A).to_owned();
    let into_tap = in_named_ns(&ns_a, move || {
        let s = PacketSocket::bind_name(
            &bond,
            PacketOptions {
                protocol: 0,
                ..PacketOptions::default()
            },
        )
        .expect("socket on the bond");
        let t = Instant::now();
        let (mut sent, mut i) = (0u64, 0usize);
        while t.elapsed() < Duration::from_secs(3) {
            sent += u64::from(s.send(&frames[i % frames.len()]).is_ok());
            i += 1;
        }
        sent
    })
    .expect("host A's namespace");
    println!("garbage: {into_member} frames into a member, {into_tap} into the TAP");
    assert!(
        into_member > 1000 && into_tap > 1000,
        "too few frames to mean anything"
    );
    let status = pair.status(Side::A);
    assert_eq!(status.mii_status, "up");
    let rss1 = rss_kib(pid);
    println!("lagd A RSS: {rss0} KiB before, {rss1} KiB after");
    assert!(rss1 <= rss0 + 1024, "RSS grew from {rss0} to {rss1} KiB");
    assert!(ping(&pair, 3), "the bond carries pings after the garbage");
}

/// What a flap storm did: samples with a member distributing at both ends, samples taken,
/// the longest pause the TCP receiver saw, and whether the data arrived intact.
struct Storm {
    carried: u32,
    total: u32,
    longest_gap: Duration,
    intact: bool,
}

/// 802.3ad with `opts` at both ends, one TCP connection (paced, about 15 MB/s) from B to A,
/// while the two members flap in turn for `rounds` seconds (each down 150 ms once a second,
/// half a second apart, never both at once), sampling every 25 ms whether a member
/// distributes at both ends.
fn flap_storm(opts: &str, rounds: u32, port: u16) -> Storm {
    let pair = Pair::new(2, opts);
    for m in 0..2 {
        assert!(pair.wait_distributing(m, Duration::from_secs(20)), "forms");
    }
    let links: Vec<String> = pair.topo.links().iter().map(|l| l.name.clone()).collect();
    let ns_b = pair.topo.ns(Side::B).to_owned();
    let controls = pair.controls.clone();
    let to = std::net::SocketAddrV4::new(pair.topo.address(1), port);
    let samples = std::sync::Mutex::new((0u32, 0u32));
    let transfer = lagd::lab::traffic::checked_transfer(
        &ns_b,
        pair.topo.ns(Side::A),
        to,
        250 * rounds as usize * 65536,
        Some(Duration::from_millis(4)),
        || {
            let any_distributing = || {
                let [a, b] = [&controls[0], &controls[1]].map(|c| query_status(c).ok());
                let (Some(a), Some(b)) = (a, b) else {
                    return false;
                };
                (0..2).any(|m| lacp(&a, m).distributing && lacp(&b, m).distributing)
            };
            let sample_for = |d: Duration| {
                let t = Instant::now();
                while t.elapsed() < d {
                    let ok = any_distributing();
                    let mut s = samples.lock().unwrap();
                    s.0 += u32::from(ok);
                    s.1 += 1;
                    drop(s);
                    thread::sleep(Duration::from_millis(25));
                }
            };
            for _ in 0..rounds {
                for link in &links {
                    let set = |state: &str| {
                        std::process::Command::new("ip")
                            .args(["netns", "exec", &ns_b, "ip", "link", "set", link, state])
                            .status()
                            .expect("ip link set")
                    };
                    set("down");
                    sample_for(Duration::from_millis(150));
                    set("up");
                    sample_for(Duration::from_millis(350));
                }
            }
        },
    )
    .expect("transfer");
    let (carried, total) = *samples.lock().unwrap();
    Storm {
        carried,
        total,
        longest_gap: transfer.longest_gap,
        intact: transfer.intact(),
    }
}

/// 802.3ad with `lacp_rejoin_hold=2000` at both ends under a flap storm of 8 s ([`flap_storm`]):
/// the connection arrives intact, and a member distributes at both ends in most samples (each
/// member that returns rejoins at once; with the kernel-like default, each waits the 2 s
/// aggregate wait and loses its link again first: bench/reliability.md has both).
#[test]
fn lacp_members_flapping_in_turn_keep_carrying_with_rejoin_hold() {
    let s = flap_storm(
        "mode=802.3ad lacp_rate=fast xmit_hash_policy=layer3+4 lacp_rejoin_hold=2000",
        8,
        5002,
    );
    println!(
        "flap storm: a member distributing at both ends in {} of {} samples; longest gap at \
         the receiver {:?}",
        s.carried, s.total, s.longest_gap
    );
    assert!(s.intact, "the TCP connection lost or damaged data");
    assert!(s.total > 50, "too few samples: {}", s.total);
    assert!(
        f64::from(s.carried) >= 0.7 * f64::from(s.total),
        "carried in {} of {} samples only",
        s.carried,
        s.total
    );
}

/// Open descriptors of `pid`.
fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// A one-minute soak: 802.3ad (fast rate), one paced TCP connection from B to A for 60 s, a
/// member flap every 4 s (members in turn), status queried all along. lagd A's RSS and open
/// descriptors are sampled every 5 s: descriptors identical throughout, RSS within 512 KiB of
/// the sample at 10 s (after warm-up); the connection arrives intact.
#[test]
fn soak_one_minute_with_flaps_keeps_memory_and_descriptors_flat() {
    let pair = Pair::new(
        2,
        "mode=802.3ad lacp_rate=fast xmit_hash_policy=layer3+4 lacp_rejoin_hold=2000",
    );
    for m in 0..2 {
        assert!(pair.wait_distributing(m, Duration::from_secs(20)), "forms");
    }
    let pid = lagd_pid(&pair.controls[0]).expect("lagd A's pid");
    let links: Vec<String> = pair.topo.links().iter().map(|l| l.name.clone()).collect();
    let ns_b = pair.topo.ns(Side::B).to_owned();
    let control = pair.controls[0].clone();
    let to = std::net::SocketAddrV4::new(pair.topo.address(1), 5003);
    let samples = std::sync::Mutex::new(Vec::new());
    let transfer = lagd::lab::traffic::checked_transfer(
        &ns_b,
        pair.topo.ns(Side::A),
        to,
        15_000 * 65536,
        Some(Duration::from_millis(4)),
        || {
            let t = Instant::now();
            let mut next_flap = Duration::from_secs(4);
            let mut next_sample = Duration::ZERO;
            let mut k = 0;
            while t.elapsed() < Duration::from_secs(60) {
                if t.elapsed() >= next_sample {
                    samples.lock().unwrap().push((
                        t.elapsed().as_secs(),
                        rss_kib(pid),
                        fd_count(pid),
                    ));
                    next_sample += Duration::from_secs(5);
                }
                if t.elapsed() >= next_flap {
                    let link = &links[k % links.len()];
                    for state in ["down", "up"] {
                        std::process::Command::new("ip")
                            .args(["netns", "exec", &ns_b, "ip", "link", "set", link, state])
                            .status()
                            .expect("ip link set");
                        thread::sleep(Duration::from_millis(200));
                    }
                    k += 1;
                    next_flap += Duration::from_secs(4);
                }
                let _ = query_status(&control);
                thread::sleep(Duration::from_millis(100));
            }
        },
    )
    .expect("transfer");
    let samples = samples.into_inner().unwrap();
    println!("soak samples (s, RSS KiB, fds): {samples:?}");
    assert!(transfer.intact(), "the TCP connection lost or damaged data");
    assert!(samples.len() >= 12, "{samples:?}");
    let fds: Vec<usize> = samples.iter().map(|s| s.2).collect();
    assert!(
        fds.iter().all(|&n| n == fds[0] && n > 0),
        "descriptors moved: {fds:?}"
    );
    let warm = samples[2].1;
    let last = samples[samples.len() - 1].1;
    assert!(
        warm > 0 && last <= warm + 512,
        "RSS grew from {warm} KiB to {last} KiB: {samples:?}"
    );
}

/// The pid of the lagd whose control socket is `control` (its command line names it).
fn lagd_pid(control: &std::path::Path) -> Option<u32> {
    let want = control.to_string_lossy().into_owned();
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
        let cmd = String::from_utf8_lossy(&cmd);
        (cmd.contains("--control") && cmd.split('\0').any(|a| a == want)).then_some(pid)
    })
}

/// User plus system CPU time of `pid`, in clock ticks (1/100 s).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command name (which is in parentheses and may hold spaces).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0)
}

/// Resident set size of `pid` in KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// TCP goodput from host B to host A with iperf3, 8 streams for `secs`, in Gbit/s.
fn iperf3_b_to_a(pair: &mut Pair, secs: u32, port: u16) -> f64 {
    let a = pair.topo.address(1).to_string();
    let port_s = port.to_string();
    let server = pair
        .topo
        .spawn(
            Side::A,
            &format!("iperf3-s-{port}"),
            std::path::Path::new("iperf3"),
            &["-s", "-1", "-p", &port_s],
        )
        .expect("iperf3 server");
    thread::sleep(Duration::from_millis(300));
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", pair.topo.ns(Side::B), "iperf3", "-c", &a])
        .args(["-p", &port_s, "-P", "8", "-t", &secs.to_string(), "-J"])
        .output()
        .expect("iperf3 client");
    pair.topo.stop(server);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or(0.0)
        / 1e9
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// One flood kind's figures over its runs.
#[derive(Default)]
struct Row {
    /// Goodput per run, Gbit/s.
    gbit: Vec<f64>,
    /// lagd A's CPU per run, percent of a core.
    cpu: Vec<f64>,
    /// Flood frames per second per run.
    rate: Vec<f64>,
    /// Member 1 was not distributing at the end of some run.
    unstable: bool,
    /// Member 0 was not distributing at the end of some run.
    flooded_lost: bool,
    /// Flood frames sent, all runs.
    sent: u64,
    /// Slow-protocol frames lagd A accounted for on member 0, all runs.
    accounted: u64,
}

/// The CPU model and count.
fn machine() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|m| m.trim_start_matches([':', ' ', '\t']).to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let n = thread::available_parallelism().map_or(0, |n| n.get());
    format!("{model}, {n} CPUs")
}

/// The frames of one kind of flood, from one attacker address.
fn flood_of(kind: &str, rng: &mut Rng) -> Vec<Vec<u8>> {
    let all = flood_frames(rng, 3 * 256);
    let pick = match kind {
        "LACPDUs, random partners" => 0,
        "malformed slow frames" => 1,
        _ => 2,
    };
    all.into_iter()
        .enumerate()
        .filter(|(i, _)| i % 3 == pick)
        .map(|(_, f)| f)
        .collect()
}

/// The long version of the flood test, with figures: 802.3ad, two links, TCP goodput from B to
/// A (iperf3, 8 streams, 4 s) with no flood and under floods on A's member 0 at the highest
/// rate one sender thread gives (valid LACPDUs naming random partners, malformed slow frames,
/// Marker PDUs); three runs of each, interleaved, so the baseline shares the run's noise.
/// lagd A's CPU (user + system) over each iperf3 run, its RSS, what it accounted for, and
/// whether the stable member kept distributing. Writes bench/reliability.md.
/// Run: `bench/chaos.sh` (or `cargo test --release -p lagd --test chaos -- --ignored
/// --nocapture bench_chaos`).
#[test]
#[ignore = "benchmark: writes bench/reliability.md"]
fn bench_chaos() {
    require_program("iperf3", "iperf3").unwrap_or_else(|e| panic!("{e:#}"));
    let mut pair = Pair::new(2, "mode=802.3ad lacp_rate=fast xmit_hash_policy=layer3+4");
    assert!(pair.wait_distributing(0, Duration::from_secs(20)));
    assert!(pair.wait_distributing(1, Duration::from_secs(20)));
    let pid = lagd_pid(&pair.controls[0]).expect("lagd A's pid");
    let rss_start = rss_kib(pid);
    const BUSY: &str = "sender busy on B's loopback (nothing reaches lagd)";
    let kinds = [
        "none",
        BUSY,
        "LACPDUs, random partners",
        "malformed slow frames",
        "Marker PDUs",
    ];
    let secs = 4u32;
    let mut rng = Rng(random_u64() | 1);
    let mut rows: Vec<Row> = kinds.iter().map(|_| Row::default()).collect();
    let mut port = 5301u16;
    for round in 0..3 {
        for (k, kind) in kinds.iter().enumerate() {
            // Each run starts from a formed bond.
            assert!(
                pair.wait_distributing(0, Duration::from_secs(20))
                    && pair.wait_distributing(1, Duration::from_secs(20)),
                "round {round}, {kind}: the bond did not form again"
            );
            let before = lacp(&pair.status(Side::A), 0);
            let flood = Duration::from_secs(u64::from(secs) + 1);
            let iface = if *kind == BUSY {
                "lo".to_owned()
            } else {
                pair.topo.links()[0].name.clone()
            };
            let sender = (*kind != "none")
                .then(|| flood_in_background(&pair, iface, flood_of(kind, &mut rng), flood));
            thread::sleep(Duration::from_millis(300));
            let c0 = cpu_ticks(pid);
            let t0 = Instant::now();
            port += 1;
            let gbit = iperf3_b_to_a(&mut pair, secs, port);
            let cpu = (cpu_ticks(pid) - c0) as f64 / t0.elapsed().as_secs_f64();
            let stable = pair.distributing(1);
            let flooded_kept = pair.distributing(0);
            let sent = sender.map_or(0, |s| s.join().unwrap());
            thread::sleep(Duration::from_millis(300));
            let after = lacp(&pair.status(Side::A), 0);
            let r = &mut rows[k];
            r.gbit.push(gbit);
            r.cpu.push(cpu);
            r.rate.push(sent as f64 / flood.as_secs_f64());
            r.unstable |= !stable;
            r.flooded_lost |= !flooded_kept;
            r.sent += sent;
            r.accounted += accounted(&after) - accounted(&before);
            println!(
                "round {round} {kind}: {gbit:.2} Gbit/s, lagd A CPU {cpu:.0} %, flood {sent} \
                 frames, member 1 distributing: {stable}"
            );
        }
    }
    let rss_end = rss_kib(pid);
    drop(pair);
    // Flap storms, 802.3ad, with and without lacp_rejoin_hold, interleaved.
    let base_opts = "mode=802.3ad lacp_rate=fast xmit_hash_policy=layer3+4";
    let storm_kinds = [
        ("default (as the kernel)", base_opts.to_owned()),
        (
            "lacp_rejoin_hold=2000",
            format!("{base_opts} lacp_rejoin_hold=2000"),
        ),
    ];
    let mut storms: Vec<Vec<Storm>> = storm_kinds.iter().map(|_| Vec::new()).collect();
    for round in 0..3 {
        for (k, (label, opts)) in storm_kinds.iter().enumerate() {
            port += 1;
            let s = flap_storm(opts, 20, port);
            println!(
                "round {round} flap storm {label}: {} of {} samples carried, longest gap {:?}, \
                 intact {}",
                s.carried, s.total, s.longest_gap, s.intact
            );
            storms[k].push(s);
        }
    }
    let mut storm_table = String::new();
    for ((label, _), runs) in storm_kinds.iter().zip(&storms) {
        let frac: Vec<f64> = runs
            .iter()
            .map(|s| f64::from(s.carried) / f64::from(s.total.max(1)))
            .collect();
        let gaps: Vec<f64> = runs.iter().map(|s| s.longest_gap.as_secs_f64()).collect();
        let list = |v: &[f64], scale: f64, unit: &str| {
            v.iter()
                .map(|x| format!("{:.0}{unit}", x * scale))
                .collect::<Vec<_>>()
                .join(", ")
        };
        storm_table.push_str(&format!(
            "| {label} | {:.0} % ({}) | {:.1} s ({}) | {} of {} |\n",
            100.0 * median(frac.clone()),
            list(&frac, 100.0, " %"),
            median(gaps.clone()),
            list(&gaps, 1000.0, " ms"),
            runs.iter().filter(|s| s.intact).count(),
            runs.len()
        ));
    }
    let base = median(rows[0].gbit.clone());
    let busy = median(rows[1].gbit.clone());
    let mut table = String::new();
    for (kind, r) in kinds.iter().zip(&rows) {
        let g = median(r.gbit.clone());
        let runs: Vec<String> = r.gbit.iter().map(|x| format!("{x:.2}")).collect();
        table.push_str(&format!(
            "| {kind} | {} | {g:.2} ({}) | {:.2}x | {:.2}x | {:.0} % | {} | {} |\n",
            if *kind == "none" {
                "–".to_owned()
            } else {
                format!("{:.0} k/s", median(r.rate.clone()) / 1000.0)
            },
            runs.join(", "),
            g / base,
            g / busy,
            median(r.cpu.clone()),
            match (r.unstable, r.flooded_lost) {
                (false, false) => "both",
                (false, true) => "member 1 only",
                (true, false) => "member 0 only",
                (true, true) => "neither",
            },
            if *kind == "none" || *kind == BUSY {
                "–".to_owned()
            } else {
                format!("{} of {}", r.accounted, r.sent)
            },
        ));
    }
    let md = format!(
        "# Reliability figures\n\n\
         Written by `bench/chaos.sh` (the ignored test `bench_chaos` in \
         crates/lagd/tests/chaos.rs); the short versions run in CI (`cargo test -p lagd --test \
         chaos`).\n\n\
         ## Slow-protocol floods on one member (802.3ad)\n\n\
         Two lagds in 802.3ad (`lacp_rate=fast`, layer3+4) over two veth links in network \
         namespaces. TCP goodput from host B to host A, iperf3 with 8 streams for {secs} s; \
         during the flood runs one thread in host B sends slow-protocol frames on its end of \
         link 0 as fast as it can, so they arrive at host A's member 0 with the data. Three \
         runs of each kind, interleaved with the no-flood baseline; medians, each run in \
         parentheses. CPU is lagd A's user + system time over the iperf3 run (100 % = one \
         core). *Accounted* is what lagd A's counters show for member 0 (parsed by kind, \
         refused by the per-member rate limit, dropped by the kernel on the slow-protocols \
         socket) against what the sender sent (frames the veth backlog drops before any \
         socket are the kernel's; the partner's own LACPDUs are included in the first \
         figure). The sender is a thread on the same 2-CPU machine and takes most of a core: \
         the *busy sender* row sends the same way on host B's loopback, so nothing reaches \
         the bond, and is the fair baseline for what the frames themselves cost (*vs busy \
         sender*).\n\n\
         | flood | rate | goodput Gbit/s | vs no flood | vs busy sender | lagd A CPU | distributing after each run | accounted |\n\
         |---|---|---|---|---|---|---|---|\n\
         {table}\n\
         lagd A's RSS: {rss_start} KiB before the first run, {rss_end} KiB after the last.\n\n\
         ## Member flap storm under TCP (802.3ad)\n\n\
         The same two hosts, a fresh pair per run: one paced TCP connection (about 15 MB/s) \
         from B to A while both members flap in turn for 20 s (each down 150 ms once a second, \
         half a second apart, so one member is always up). Every 25 ms both lagds are asked \
         whether some member distributes at both ends. Three runs of each, interleaved; \
         medians, each run in parentheses.\n\n\
         | options | samples with a member carrying | longest receiver pause | connection intact |\n\
         |---|---|---|---|\n\
         {storm_table}\n\
         With the default each member that comes back waits the 2 s aggregate wait and loses \
         its link again before it distributes, so the bond carries almost nothing for the \
         whole storm (the kernel bond behaves the same). `lacp_rejoin_hold` lets a member that \
         returns within the hold to the partner it had attach at once.\n\n\
         What bounds the work: each member admits 30 slow-protocol frames a second from its \
         confirmed partner's address and 20 from all others together, before parsing \
         (`lagd_proto::lacp::limit`); Marker Responses go at 5 a second at most; frames are \
         read 64 per `recvmmsg`; the data socket never sees EtherType 0x8809 (a socket \
         filter). Valid LACPDUs naming random partners from another address are held off while \
         member 0's confirmed partner is current (a real new partner repeats itself and takes \
         over one LACPDU later), so the member keeps its partner.\n\n\
         Machine: {}.\n",
        machine(),
    );
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/reliability.md");
    std::fs::write(&out, md).expect("write bench/reliability.md");
    println!("wrote {}", out.display());
}
