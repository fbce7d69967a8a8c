//! lagd's Open vSwitch hashes against a running Open vSwitch 3.1.
//!
//! - `ovs-slb`: `ovs-appctl bond/hash MAC VLAN BASIS` prints the bucket
//!   (`hash_mac(mac, vlan, basis) & 0xff`, OVS `ofproto/bond.c`) that ovs-vswitchd itself
//!   computes; lagd must give the same low 8 bits for every MAC, VLAN and basis tried.
//! - `ovs-tcp`: frames are sent into the bridge (its internal port) and hit a `dp_hash` select
//!   group, so the userspace datapath hashes each with the hash action a balance-tcp bond uses;
//!   the datapath flow installed after the recirculation shows the full 32-bit `dp_hash`, which
//!   is `hash_int(rss, 0)` of the packet's RSS hash (lib/odp-execute.c). lagd's ovs-tcp hash is
//!   that RSS hash: every real frame of `real-frames.txt`, each cut where the reference model's
//!   hash changes, and hand-built edge cases must give OVS's `dp_hash` exactly.
//!
//! Needs root and Open vSwitch (`.ci/run` installs it); fails, never skips, without them. The
//! ovs-vswitchd runs in a namespace and directory of its own, stopped and removed when the test
//! ends, whatever happens.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use lagd_lab::dataplane::{OvsInstance, start_ovs};
use lagd_lab::topology::{Side, Topology, is_root, run};
use lagd_proto::hash::{HashPolicy, ovs_hash_mac, xmit_hash};
use lagd_sys::packet::{PacketOptions, PacketSocket};

/// OVS's bond bucket mask (`BOND_MASK`).
const BOND_MASK: u32 = 0xff;

/// The real frames, with the reference model's hashes.
const REAL_FRAMES: &str = include_str!("../../lagd-proto/src/hash/testdata/real-frames.txt");
/// The reference model's hash of every prefix of every real frame.
const PREFIXES: &str = include_str!("../../lagd-proto/src/hash/testdata/prefixes.txt");
/// Hand-built frames at the edges of OVS's parser.
const EDGE_FRAMES: &str = include_str!("data/ovs-edge-frames.hex");

/// A private ovs-vswitchd (no members needed: `bond/hash` is pure computation) and its bridge.
fn ovs() -> (Topology, OvsInstance) {
    assert!(
        is_root(),
        "the Open vSwitch hash tests need root (CI runs them as root)"
    );
    let mut topo = Topology::create(0).expect("namespaces for Open vSwitch");
    let bridge = format!("{}br", topo.tag());
    let ovs = start_ovs(&mut topo, Side::A, &bridge).expect("start Open vSwitch");
    (topo, ovs)
}

/// A small deterministic generator (xorshift64*), so a failure names reproducible values. The
/// same as lagd-proto's planner tests use; that one is private to lagd-proto's unit tests.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn mac_text(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// An IPv4 UDP frame from `src`, with an 802.1Q tag (priority bits `pcp`) when `vid` is set.
fn frame_from(src: [u8; 6], vid: u16, pcp: u16) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 0x99];
    f.extend_from_slice(&src);
    if vid != 0 {
        f.extend_from_slice(&[0x81, 0x00]);
        f.extend_from_slice(&(pcp << 13 | vid).to_be_bytes());
    }
    f.extend_from_slice(&[0x08, 0x00]);
    f.extend_from_slice(&[
        0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ]);
    f.extend_from_slice(&[0x9c, 0x40, 0x00, 0x35, 0, 8, 0, 0]);
    f
}

/// The bucket ovs-vswitchd computes for `mac` on `vlan` with `basis`.
fn ovs_bucket(ovs: &OvsInstance, mac: [u8; 6], vlan: u16, basis: u32) -> u32 {
    let out = ovs
        .appctl(&[
            "bond/hash",
            &mac_text(mac),
            &vlan.to_string(),
            &basis.to_string(),
        ])
        .unwrap_or_else(|e| panic!("ovs-appctl bond/hash {}: {e:#}", mac_text(mac)));
    out.trim()
        .parse()
        .unwrap_or_else(|e| panic!("bond/hash printed {out:?}: {e}"))
}

#[test]
fn ovs_slb_matches_ovs_vswitchd_bond_hash() {
    let (topo, ovs) = ovs();
    let mut rng = Rng(0x6c61_6764_5f73_6c62);
    let mut cases: Vec<([u8; 6], u16, u32)> = Vec::new();
    // Edges: zero, broadcast and one-bit MACs; VLAN 0, 1 and 4095; basis 0, 1 and u32::MAX.
    for mac in [
        [0u8; 6],
        [0xff; 6],
        [0x02, 0, 0, 0, 0, 0x01],
        [0x80, 0, 0, 0, 0, 0],
        [0x52, 0x54, 0x00, 0x12, 0x34, 0x56],
    ] {
        for vlan in [0u16, 1, 100, 4095] {
            for basis in [0u32, 1, u32::MAX] {
                cases.push((mac, vlan, basis));
            }
        }
    }
    // Random MACs, VLANs and bases; a third with basis 0 (lagd's own hash).
    for i in 0..400 {
        let r = rng.next();
        let mac: [u8; 6] = r.to_le_bytes()[..6].try_into().unwrap();
        let vlan = (rng.next() % 4096) as u16;
        let basis = if i % 3 == 0 { 0 } else { rng.next() as u32 };
        cases.push((mac, vlan, basis));
    }
    // Consecutive MACs, as lab and VM MACs usually are: every bucket bit must follow.
    for last in 0..64u8 {
        cases.push(([0x02, 0, 0, 0, 0x0a, last], 0, 0));
    }

    let mut mismatches = Vec::new();
    let mut via_frames = 0;
    for &(mac, vlan, basis) in &cases {
        let want = ovs_bucket(&ovs, mac, vlan, basis);
        let got = ovs_hash_mac(mac, vlan, basis) & BOND_MASK;
        if got != want {
            mismatches.push(format!(
                "{} vlan {vlan} basis {basis}: OVS bucket {want}, lagd {got}",
                mac_text(mac)
            ));
        }
        if basis == 0 {
            // The policy itself, on a frame: priority bits must not matter.
            let pcp = (mac[0] & 7).into();
            let frame = frame_from(mac, vlan, pcp);
            let h = xmit_hash(HashPolicy::OvsSlb, &frame);
            assert_eq!(
                h,
                ovs_hash_mac(mac, vlan, 0),
                "ovs-slb on a frame from {} vlan {vlan}",
                mac_text(mac)
            );
            via_frames += 1;
        }
    }
    assert!(
        via_frames > 100,
        "only {via_frames} frames went through xmit_hash"
    );
    assert!(
        mismatches.is_empty(),
        "{} of {} (MAC, VLAN, basis) differ from ovs-vswitchd:\n{}",
        mismatches.len(),
        cases.len(),
        mismatches.join("\n")
    );
    topo.teardown().expect("remove the Open vSwitch namespaces");
}

// OVS's `hash_add()`/`hash_finish()` are written out again here on purpose, not taken from
// lagd_proto: `hash_int` is a step of Open vSwitch's datapath (the oracle side of this test), not
// of lagd's hash, so the test keeps its own model of it, checked against the published
// MurmurHash3 vector below. lagd's copies are checked by lagd-proto's unit tests.

/// OVS `hash_add()` (a MurmurHash3 block step), written here from `lib/hash.h` for `hash_int`.
fn mhash_add(hash: u32, data: u32) -> u32 {
    let d = data
        .wrapping_mul(0xcc9e_2d51)
        .rotate_left(15)
        .wrapping_mul(0x1b87_3593);
    (hash ^ d)
        .rotate_left(13)
        .wrapping_mul(5)
        .wrapping_add(0xe654_6b64)
}

/// OVS `hash_finish(hash, fin)`: MurmurHash3's finaliser after mixing in `fin`.
fn mhash_finish(hash: u32, fin: u32) -> u32 {
    let mut h = hash ^ fin;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// OVS `hash_int(x, basis)`: `hash_finish(hash_add(hash_add(x, 0), basis), 8)`, what the
/// datapath's hash action makes of a packet's RSS hash.
fn hash_int(x: u32, basis: u32) -> u32 {
    mhash_finish(mhash_add(mhash_add(x, 0), basis), 8)
}

#[test]
fn hash_int_matches_murmur3_reference_vector() {
    // MurmurHash3_x86_32 of the 4-byte key 0x87654321 with seed 0 is 0xf55b516b (the published
    // vector); hash_int(0, seed) is the same steps with a zero key and length word 8.
    let murmur = |key: u32, seed: u32| mhash_finish(mhash_add(seed, key), 4);
    assert_eq!(murmur(0x8765_4321, 0), 0xf55b_516b);
}

fn parse_hex(s: &str) -> Vec<u8> {
    assert!(s.len() % 2 == 0, "odd hex: {s}");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// `(line, frame, description)` of every frame line in a `HEX ... # description` file.
fn frames(text: &str) -> Vec<(usize, Vec<u8>, String)> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|(i, l)| {
            let (body, desc) = l.split_once('#').unwrap_or((l, ""));
            let hex = body.split_whitespace().next().expect("hex");
            (i + 1, parse_hex(hex), desc.trim().to_owned())
        })
        .collect()
}

/// The frame lengths at which the reference model's ovs-tcp hash of a real frame changes
/// (each start of a run, and the length just before it), per frame line.
fn ovs_tcp_cuts() -> HashMap<usize, Vec<usize>> {
    let mut cuts = HashMap::new();
    for l in PREFIXES.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.get(2) != Some(&"ovs-tcp") {
            continue;
        }
        let line: usize = f[0].parse().expect("line");
        let mut at: Vec<usize> = Vec::new();
        for run in &f[3..] {
            let from: usize = run
                .split_once(':')
                .expect("FROM:HASH")
                .0
                .parse()
                .expect("FROM");
            at.extend([from.saturating_sub(1), from]);
        }
        cuts.insert(line, at);
    }
    cuts
}

/// Sends frames into a bridge whose only flow is a `dp_hash` select group, and reads the
/// `dp_hash` the datapath computed for each.
struct DpHashProbe<'a> {
    ovs: &'a OvsInstance,
    socket: PacketSocket,
}

impl<'a> DpHashProbe<'a> {
    fn new(topo: &Topology, ovs: &'a OvsInstance) -> Self {
        let bridge = ovs.bridge.clone();
        topo.ip(Side::A, &["link", "set", &bridge, "up"])
            .expect("bridge port up");
        // The OpenFlow socket of the bridge, in the instance's private run directory.
        let mgmt = topo.dir().join("ovs-a").join(format!("{bridge}.mgmt"));
        assert!(mgmt.exists(), "no OpenFlow socket at {}", mgmt.display());
        let target = format!("unix:{}", mgmt.display());
        // 256 buckets that differ (each sets another DSCP), selected by dp_hash.
        let mut group = String::from("group_id=1,type=select,selection_method=dp_hash");
        for i in 0..256 {
            group.push_str(&format!(
                ",bucket=bucket_id={i},weight=1,actions=mod_nw_tos:{},output:LOCAL",
                (i % 64) * 4
            ));
        }
        run(
            "ovs-ofctl",
            &["-O", "OpenFlow15", "add-group", &target, &group],
        )
        .expect("add-group");
        run("ovs-ofctl", &["-O", "OpenFlow15", "del-flows", &target]).expect("del-flows");
        run(
            "ovs-ofctl",
            &[
                "-O",
                "OpenFlow15",
                "add-flow",
                &target,
                "in_port=LOCAL,actions=group:1",
            ],
        )
        .expect("add-flow");
        let socket = topo
            .in_ns(Side::A, || {
                PacketSocket::bind_name(&bridge, PacketOptions::default())
            })
            .expect("enter the namespace")
            .expect("AF_PACKET socket on the bridge port");
        Self { ovs, socket }
    }

    /// The `dp_hash` OVS computes for `frame` (at least 14 bytes: the kernel sends no shorter
    /// frame on an Ethernet device).
    fn dp_hash(&self, frame: &[u8]) -> u32 {
        // Drop every datapath flow (and the upcall layer's record of it), so the frame misses,
        // is hashed and recirculated, and the flow installed after it carries its dp_hash.
        self.ovs
            .appctl(&["revalidator/purge"])
            .expect("revalidator/purge");
        self.socket.send(frame).expect("send the frame");
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let flows = self.ovs.appctl(&["dpctl/dump-flows"]).expect("dump-flows");
            if let Some(h) = flows.split("dp_hash(0x").nth(1) {
                let hex: String = h.chars().take_while(char::is_ascii_hexdigit).collect();
                return u32::from_str_radix(&hex, 16).expect("dp_hash value");
            }
            assert!(
                Instant::now() < deadline,
                "no dp_hash flow for {frame:02x?}; flows:\n{flows}"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

#[test]
fn ovs_tcp_matches_ovs_vswitchd_datapath_hash() {
    let (topo, ovs) = ovs();
    let probe = DpHashProbe::new(&topo, &ovs);
    let cuts = ovs_tcp_cuts();
    let mut cases: Vec<(Vec<u8>, String)> = Vec::new();
    for (line, frame, desc) in frames(REAL_FRAMES) {
        let at = cuts
            .get(&line)
            .unwrap_or_else(|| panic!("prefixes.txt has no ovs-tcp line for frame {line}"));
        for &cut in at.iter().chain([frame.len()].iter()) {
            if cut >= 14 && cut <= frame.len() {
                cases.push((
                    frame[..cut].to_vec(),
                    format!("line {line} cut at {cut}: {desc}"),
                ));
            }
        }
    }
    let real = cases.len();
    for (line, frame, desc) in frames(EDGE_FRAMES) {
        cases.push((frame, format!("edge line {line}: {desc}")));
    }
    cases.sort();
    cases.dedup_by(|a, b| a.0 == b.0);
    assert!(real > 300, "only {real} real-frame cases");

    let mut mismatches = Vec::new();
    for (frame, what) in &cases {
        let want = probe.dp_hash(frame);
        let lagd = xmit_hash(HashPolicy::OvsTcp, frame);
        let got = hash_int(lagd, 0);
        if got != want {
            mismatches.push(format!(
                "{what}: OVS dp_hash 0x{want:08x}, hash_int(lagd 0x{lagd:08x}) = 0x{got:08x}"
            ));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} of {} frames hash differently from ovs-vswitchd:\n{}",
        mismatches.len(),
        cases.len(),
        mismatches.join("\n")
    );
    drop(probe);
    topo.teardown().expect("remove the Open vSwitch namespaces");
}
