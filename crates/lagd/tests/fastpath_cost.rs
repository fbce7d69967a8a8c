//! What a small frame costs the kernel fast path's programs: each program run many times on
//! one frame in a single `BPF_PROG_TEST_RUN` (`repeat`), the kernel's mean ns per run printed,
//! the median of several such calls. A measurement, not a timed test: ignored by default, run
//! it with
//!
//! ```text
//! cargo test -p lagd --test fastpath_cost -- --ignored --nocapture --test-threads=1
//! ```
//!
//! or inside a kernel of the matrix (no BPF JIT there: the interpreter runs the programs):
//! `python3 tools/uml.py run 5.10 -- $(python3 tools/uml.py testbin lagd fastpath_cost)
//! --ignored --nocapture --test-threads=1`. `LAGD_COST_REPEAT` (default 100000) sets the runs
//! per call, `LAGD_COST_ROUNDS` (default 5) the calls. Each case's verdict and member are
//! checked: a figure for a frame the program did not forward would measure something else.
//! Needs root.

use lagd_sys::fastpath::{FastPath, MAX_MEMBERS, Rule, Table, TlbMacs, abi};

/// `TC_ACT_OK`, `TC_ACT_REDIRECT`.
const PASS: u32 = 0;
const REDIRECT: u32 = 7;

fn env_u32(name: &str, default: u32) -> u32 {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v}: not a number")),
        Err(_) => default,
    }
}

/// A frame from 10.9.8.7 (fd00::11:7) to 10.1.2.3 (fd00::22:1): UDP 40000 -> 5201 with
/// `payload` bytes, or a TCP segment of that many.
fn frame(v6: bool, tcp: bool, payload: usize) -> Vec<u8> {
    let l4_len = if tcp { 20 } else { 8 } + payload;
    let mut f = vec![2, 0, 0, 0, 0, 0x0b, 2, 0, 0, 0, 0, 0x0a];
    let proto = if tcp { 6 } else { 17 };
    if v6 {
        f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
        f.extend_from_slice(&(l4_len as u16).to_be_bytes());
        f.extend_from_slice(&[proto, 64]);
        f.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x11, 7]);
        f.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x22, 1]);
    } else {
        f.extend_from_slice(&[0x08, 0x00, 0x45, 0]);
        f.extend_from_slice(&((20 + l4_len) as u16).to_be_bytes());
        f.extend_from_slice(&[
            0x12, 0x34, 0x40, 0, 64, proto, 0, 0, 10, 9, 8, 7, 10, 1, 2, 3,
        ]);
    }
    f.extend_from_slice(&40000u16.to_be_bytes());
    f.extend_from_slice(&5201u16.to_be_bytes());
    if tcp {
        f.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
    } else {
        f.extend_from_slice(&(l4_len as u16).to_be_bytes());
        f.extend_from_slice(&[0, 0]);
    }
    f.resize(f.len() + payload, 0x5a);
    f
}

/// Three members at made-up interface indexes (a test run performs no redirect), all
/// delivering, layer3+4.
fn table(rule: Rule) -> Table {
    let mut t = Table::lagd_only(1);
    t.rule = rule;
    t.policy = 1;
    for i in 0..3 {
        t.ifindex[i] = 1000 + i as u32;
    }
    t.usable = vec![0, 1, 2];
    for (b, slot) in t.buckets.iter_mut().enumerate() {
        *slot = [2, 0, 1][b % 3];
    }
    t.rx_unicast = [false; MAX_MEMBERS];
    t.rx_multicast = [false; MAX_MEMBERS];
    for m in 0..3 {
        t.rx_unicast[m] = true;
        t.rx_multicast[m] = true;
    }
    t
}

fn median(mut v: Vec<u32>) -> u32 {
    v.sort_unstable();
    v[v.len() / 2]
}

#[test]
#[ignore = "a measurement: run with --ignored --nocapture"]
fn ns_per_run_of_each_program_on_small_frames() {
    assert!(
        lagd_lab::topology::is_root(),
        "the fast path's programs need root to load (CI runs as root)"
    );
    let repeat = env_u32("LAGD_COST_REPEAT", 100_000);
    let rounds = env_u32("LAGD_COST_ROUNDS", 5).max(1);
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").expect("kernel release");
    let jit = std::fs::read_to_string("/proc/sys/net/core/bpf_jit_enable")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "absent".into());
    println!(
        "kernel {} (bpf_jit_enable {jit}); {repeat} runs per call, median of {rounds} calls",
        release.trim()
    );
    lagd_sys::fastpath::pin_thread_to_cpu(0).expect("pin to CPU 0");
    let fp = FastPath::load().expect("load the fast path programs");
    fp.set_alive_until(u64::MAX).expect("set the heartbeat");
    let cases = [
        ("UDP/IPv4 64 B", frame(false, false, 64)),
        ("UDP/IPv6 64 B", frame(true, false, 64)),
        ("TCP/IPv4 64 B", frame(false, true, 64)),
    ];
    let mut ingress_settable = true;
    for rule in [Rule::Modulo, Rule::Buckets] {
        fp.set_table(&table(rule)).expect("set the table");
        for (name, f) in &cases {
            let mut ns = Vec::new();
            for _ in 0..rounds {
                let (run, t) = fp.time_egress(f, repeat).expect("time the TAP program");
                assert_eq!(run.verdict, REDIRECT, "{name}: the TAP program forwards it");
                assert!(run.port < 3, "{name}: on a member, not {}", run.port);
                ns.push(t);
            }
            println!(
                "lagd_tap_egress {rule:?} layer3+4 {name}: {} ns/run ({ns:?})",
                median(ns.clone())
            );
        }
        if rule != Rule::Modulo {
            continue;
        }
        for (name, f) in &cases {
            let mut ns = Vec::new();
            for _ in 0..rounds {
                match fp.time_ingress(f, 1001, repeat) {
                    Ok((run, t)) => {
                        assert_eq!(run.verdict, REDIRECT, "{name}: the member delivers it");
                        assert_eq!(run.port, 1, "{name}: from member 1");
                        ns.push(t);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Unsupported => {
                        ingress_settable = false;
                        break;
                    }
                    Err(e) => panic!("time the members' program: {e}"),
                }
            }
            if !ingress_settable {
                println!(
                    "lagd_member_ingress: not measured on this kernel: a test run cannot set the \
                     frame's ingress interface before Linux 5.16"
                );
                break;
            }
            println!(
                "lagd_member_ingress {name}: {} ns/run ({ns:?})",
                median(ns.clone())
            );
        }
    }
    // The other modes' tables, the TAP's program on the 64-byte UDP/IPv4 frame: each mode's
    // rule and policy as lagd writes them (balance-tlb and balance-alb from the bond's MAC,
    // on the member the frame's hash picks).
    let bond_mac = [2, 0, 0, 0, 0, 0x0a];
    let tlb = |mut t: Table| {
        let mut wire = [[0; 6]; MAX_MEMBERS];
        for (i, w) in wire.iter_mut().enumerate().take(3) {
            *w = [2, 0, 0, 0, 1, i as u8];
        }
        t.tlb = Some(TlbMacs {
            bond: bond_mac,
            wire,
        });
        t
    };
    let with = |rule: Rule, policy: u32| {
        let mut t = table(rule);
        t.policy = policy;
        t.active = Some(0);
        t
    };
    let mut rr = with(Rule::RoundRobin, abi::POLICY_LAYER2);
    rr.rr_packets = 1;
    rr.rr_members = 3;
    rr.rr_next[..3].copy_from_slice(&[0, 1, 2]);
    let modes = [
        ("active-backup", with(Rule::Active, abi::POLICY_LAYER2)),
        ("balance-rr packets_per_slave 1", rr),
        (
            "balance-xor layer2 (modulo)",
            with(Rule::Modulo, abi::POLICY_LAYER2),
        ),
        (
            "balance-xor layer2+3 (modulo)",
            with(Rule::Modulo, abi::POLICY_LAYER23),
        ),
        (
            "balance-xor encap3+4 (modulo)",
            with(Rule::Modulo, abi::POLICY_ENCAP34),
        ),
        (
            "balance-tlb layer3+4 (buckets)",
            tlb(with(Rule::Buckets, abi::POLICY_LAYER34)),
        ),
        (
            "balance-tlb layer2 (buckets)",
            tlb(with(Rule::Buckets, abi::POLICY_LAYER2)),
        ),
        (
            "balance-alb (buckets)",
            tlb(with(Rule::Buckets, abi::POLICY_ALB)),
        ),
        // The clones go nowhere here (no such interfaces): the program's own work.
        ("broadcast", with(Rule::All, abi::POLICY_LAYER2)),
    ];
    let mut udp = cases[0].1.clone();
    udp[6..12].copy_from_slice(&bond_mac);
    for (name, t) in modes {
        fp.set_table(&t).expect("set the table");
        let mut ns = Vec::new();
        for _ in 0..rounds {
            let (run, t) = fp.time_egress(&udp, repeat).expect("time the TAP program");
            assert_eq!(run.verdict, REDIRECT, "{name}: the TAP program forwards it");
            assert!(run.port < 3, "{name}: on a member, not {}", run.port);
            ns.push(t);
        }
        println!(
            "lagd_tap_egress {name} {}: {} ns/run ({ns:?})",
            cases[0].0,
            median(ns.clone())
        );
    }
    // The floor: the heartbeat and the table's lookups, then every frame to lagd.
    fp.set_table(&table(Rule::Lagd)).expect("set the table");
    for (prog, ingress) in [("lagd_tap_egress", false), ("lagd_member_ingress", true)] {
        let mut ns = Vec::new();
        for _ in 0..rounds {
            let (run, t) = if ingress {
                fp.time_ingress(&cases[0].1, 0, repeat)
            } else {
                fp.time_egress(&cases[0].1, repeat)
            }
            .expect("time a program");
            assert_eq!(run.verdict, PASS, "{prog}: rule lagd passes every frame");
            ns.push(t);
        }
        println!(
            "{prog} Lagd (heartbeat and table only) {}: {} ns/run ({ns:?})",
            cases[0].0,
            median(ns.clone())
        );
    }
    let c = fp.port_counters().expect("read the counters");
    let tx: u64 = c.iter().map(|c| c.tx_packets).sum();
    assert!(
        tx >= u64::from(repeat),
        "the TAP program counted its frames: {tx}"
    );
}
