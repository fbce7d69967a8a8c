//! Chaos, short versions for CI (seconds each): what the wire can throw at a bond. Two hosts
//! (network namespaces) joined by veth links, lagd at both ends; frames are injected on host
//! B's end of a link with a packet socket of the test's own, so they arrive at host A's member
//! as if the partner (or an attacker on the wire) sent them. Needs root; fails (never skips)
//! without it. The long versions with figures are bench/chaos.sh (bench/reliability.md).

use std::path::PathBuf;
use std::thread;
use std::time::{Duration, Instant};

use lagd::daemon::query_status;
use lagd::lab::topology::{ProcessId, Side, Topology, is_root, random_u64};
use lagd::status::{MemberLacp, Status};
use lagd_proto::wire::EthernetAddress;
use lagd_proto::wire::slow::{LacpInfo, LacpRepr, MarkerKind, MarkerRepr, PortState};
use lagd_sys::packet::{PacketOptions, PacketSocket};

mod common;
use common::start_lagd;

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
        let (pb, cb) = start_lagd(&mut topo, Side::B, &format!("{tag}bB"), opts);
        let (pa, ca) = start_lagd(&mut topo, Side::A, &format!("{tag}bA"), opts);
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

/// A flood of slow-protocol frames (valid LACPDUs with random partners, malformed ones, Marker
/// PDUs) on one member, as fast as one sender goes, for 3 s: the other member keeps
/// distributing at both ends all along; every frame that reached lagd is accounted for in its
/// counters (parsed, refused by the rate limit, or dropped by the kernel), and almost all are
/// refused before parsing; Marker responses stay within the limit; partner changes are logged;
/// and the flooded member distributes again soon after the flood.
#[test]
fn slow_protocol_flood_on_one_member() {
    let opts = "mode=802.3ad lacp_rate=fast";
    let pair = Pair::new(2, opts);
    assert!(
        pair.wait_distributing(0, Duration::from_secs(20))
            && pair.wait_distributing(1, Duration::from_secs(20)),
        "the bond forms"
    );
    let link = pair.topo.links()[0].name.clone();
    let before = [
        lacp(&pair.status(Side::A), 0),
        lacp(&pair.status(Side::B), 0),
    ];
    let mut rng = Rng(random_u64() | 1);
    let frames = flood_frames(&mut rng, 3 * 256);
    let flood = Duration::from_secs(3);
    let ns_b = pair.topo.ns(Side::B).to_owned();
    let sender = thread::spawn(move || {
        lagd::lab::topology::in_named_ns(&ns_b, || {
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
    });
    // The stable member distributes at both ends all through the flood.
    let t = Instant::now();
    while !sender.is_finished() {
        assert!(
            pair.distributing(1),
            "member 1 stopped distributing {:?} into the flood",
            t.elapsed()
        );
        thread::sleep(Duration::from_millis(100));
    }
    let sent = sender.join().unwrap();
    println!("flood: {sent} frames in {flood:?}");
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
    // Partner changes are logged (the flood's partners took member 0 over).
    let member = &pair.status(Side::A).members[0].name;
    assert!(
        pair.log(Side::A)
            .lines()
            .any(|l| l.contains("LACP partner") && l.contains(member.as_str())),
        "no partner change logged for {member}"
    );
    // The flooded member comes back with its real partner.
    assert!(
        pair.wait_distributing(0, Duration::from_secs(15)),
        "member 0 did not distribute again after the flood"
    );
    let partner = lacp(&pair.status(Side::A), 0).partner;
    let b_actor = lacp(&pair.status(Side::B), 0).actor;
    assert_eq!(partner.system_mac, b_actor.system_mac);
}
