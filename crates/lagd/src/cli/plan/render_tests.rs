//! The report renderers on plans built as the planner's own tests build them (the same
//! generators, copied from `lagd_proto::plan`'s tests, where these checks lived while the
//! rendering did): the terminal table and the HTML page say what the plan holds.

use core::time::Duration;

use lagd_proto::balance::BalanceConfig;
use lagd_proto::hash::{HashPolicy, xmit_hash};
use lagd_proto::plan::flow::parse_flow_spec;
use lagd_proto::plan::report::Plan;
use lagd_proto::plan::{PlanConfig, PlanPolicy, Planner, plan_flows};

use super::{html, text};

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn frame_of(spec: &str) -> Vec<u8> {
    let mut f = Vec::new();
    assert!(parse_flow_spec(spec).unwrap().write_frame(&mut f), "{spec}");
    f
}

/// A mixed capture: TCP/UDP over IPv4 and IPv6, tagged and not, ICMP, ARP, fragments, VXLAN,
/// GRE, QinQ, runts; each flow a few times, interleaved, with padding of random length.
fn mixed_frames(seed: u64, count: usize) -> Vec<Vec<u8>> {
    let mut rng = Rng(seed);
    let mut flows: Vec<Vec<u8>> = Vec::new();
    for i in 0..60u64 {
        let spec = match i % 6 {
            0 => format!(
                "tcp 10.0.{}.{}:{} > 10.1.0.{}:80",
                i % 3,
                i,
                30000 + rng.below(30000),
                rng.below(4) + 1
            ),
            1 => format!(
                "udp [2001:db8::{:x}]:{} > [2001:db8:1::{:x}]:53",
                i,
                1024 + rng.below(60000),
                rng.below(16)
            ),
            2 => format!(
                "tcp 192.168.1.{}:{} > 192.168.2.{}:443 vlan {}",
                i,
                40000 + i,
                i % 7,
                100 + i % 3
            ),
            3 => format!("icmp 10.9.0.{} > 10.9.1.1 id {}", i, rng.below(9)),
            4 => format!(
                "udp 172.16.0.{}:{} > 172.16.1.1:4789",
                i % 5,
                49152 + rng.below(8)
            ),
            _ => format!("tcp 10.7.0.1:{} > 10.7.0.2:5201", 50000 + i * 4),
        };
        let mut f = frame_of(&spec);
        // Vary the MACs too.
        f[5] = rng.below(256) as u8;
        f[11] = rng.below(256) as u8;
        f[3] = (i % 4) as u8;
        if i % 6 == 4 {
            // A VXLAN payload: header and an inner frame.
            f.extend_from_slice(&[0x08, 0, 0, 0, 0, 0, 7, 0]);
            f.extend_from_slice(&frame_of(&format!(
                "tcp 10.200.0.{}:1000 > 10.200.0.9:22",
                i
            )));
            let ip_len = (f.len() - 14) as u16;
            f[16..18].copy_from_slice(&ip_len.to_be_bytes());
            f[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
        }
        flows.push(f);
    }
    // ARP, a first and a later IPv4 fragment of a TCP flow, GRE, QinQ, a runt.
    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&[2, 0, 0, 0, 0, 9, 0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1]);
    arp.extend_from_slice(&[2, 0, 0, 0, 0, 9, 10, 0, 0, 9, 0, 0, 0, 0, 0, 0, 10, 0, 0, 1]);
    flows.push(arp);
    let whole = frame_of("tcp 10.5.0.1:7000 > 10.5.0.2:7001");
    let mut first = whole.clone();
    first[20] = 0x20; // MF: same key as the unfragmented frames, another layer3+4 hash
    flows.push(whole);
    flows.push(first);
    let mut later = frame_of("tcp 10.5.0.1:7000 > 10.5.0.2:7001");
    later[20] = 0x00;
    later[21] = 0x10; // offset 16 bytes: no ports
    flows.push(later);
    let mut gre = frame_of("gre 192.0.2.1 > 192.0.2.2");
    gre.extend_from_slice(&[0, 0, 0x08, 0x00]);
    let inner = frame_of("udp 10.66.0.1:1234 > 10.66.0.2:5678");
    gre.extend_from_slice(&inner[14..]);
    let l = (gre.len() - 14) as u16;
    gre[16..18].copy_from_slice(&l.to_be_bytes());
    flows.push(gre);
    let mut qinq = frame_of("tcp 10.8.0.1:1 > 10.8.0.2:2 vlan 10");
    qinq.splice(12..12, [0x88, 0xa8, 0x00, 0x05]);
    flows.push(qinq);
    flows.push(vec![0x02, 0, 0, 0, 0, 1, 0x02]);
    (0..count)
        .map(|_| {
            // Skewed: low-numbered flows are much more frequent.
            let a = rng.below(flows.len() as u64);
            let b = rng.below(flows.len() as u64);
            let mut f = flows[a.min(b) as usize].clone();
            if f.len() >= 14 && rng.below(3) == 0 {
                f.resize(f.len() + rng.below(1400) as usize, 0xa5);
            }
            f
        })
        .collect()
}

fn plan_of(frames: &[Vec<u8>], config: PlanConfig) -> Plan {
    let mut p = Planner::new(config).unwrap();
    for f in frames {
        p.add_frame(f, f.len() as u32);
    }
    p.finish()
}

// Bucket policies: the daemon's bucket table over timed traffic.

/// A base capture time (ns since the epoch), so the clock must count from the first packet.
const T0: u64 = 1_700_000_000_000_000_000;

/// Timed traffic: flows (headers, wire length) and (time in ns from the start, flow) events.
struct Timed {
    flows: Vec<(Vec<u8>, u32)>,
    events: Vec<(u64, usize)>,
}

/// Three elephant TCP flows whose layer3+4 hashes are even and in three different buckets
/// (so with two members all three start on member 0, under `hash % 2` and in the bucket table
/// alike), each sending a `big`-byte frame every `period_ms` but, if `pauses`, pausing 100 ms
/// every 2 s (a bucket moves safely only after 50 ms idle), and 40 mice sending 200-byte frames
/// every 97 ms.
fn skewed(secs: u64, period_ms: u64, big: u32, pauses: bool) -> Timed {
    let mut flows = Vec::new();
    let mut buckets = Vec::new();
    for port in 40_000u16.. {
        let f = frame_of(&format!("tcp 10.0.0.1:{port} > 10.0.0.2:5201"));
        let h = xmit_hash(HashPolicy::Layer34, &f);
        if h % 2 == 0 && !buckets.contains(&(h & 0xff)) {
            buckets.push(h & 0xff);
            flows.push((f, big));
            if flows.len() == 3 {
                break;
            }
        }
    }
    for j in 0..40u16 {
        let f = frame_of(&format!(
            "udp 10.1.{}.{}:{} > 10.2.0.1:53",
            j / 7,
            j,
            5000 + j * 13
        ));
        flows.push((f, 200));
    }
    let mut events = Vec::new();
    for tick in 0..secs * 1000 {
        let ms = tick * 1_000_000;
        for e in 0..3u64 {
            if tick % period_ms == 0 && (!pauses || (tick + e * 700) % 2000 >= 100) {
                events.push((ms + e * 10_000, e as usize));
            }
        }
        for j in 0..40u64 {
            if (tick + 37 * j) % 97 == 0 {
                events.push((ms + 500_000 + j * 100, 3 + j as usize));
            }
        }
    }
    Timed { flows, events }
}

fn plan_timed(t: &Timed, config: PlanConfig) -> Plan {
    let mut p = Planner::new(config).unwrap();
    for &(ts, f) in &t.events {
        p.set_time(T0 + ts);
        let (frame, len) = &t.flows[f];
        p.add_frame(frame, *len);
    }
    p.finish()
}

fn bucket_config(policies: Vec<PlanPolicy>, interval_ms: u64, speeds: Vec<f64>) -> PlanConfig {
    PlanConfig {
        policies,
        speeds_gbps: speeds,
        balance: BalanceConfig {
            rebalance_interval: Duration::from_millis(interval_ms),
            ..BalanceConfig::default()
        },
        ..PlanConfig::new(2)
    }
}

const L34: PlanPolicy = PlanPolicy::Hash(HashPolicy::Layer34);
const L34_BUCKETS: PlanPolicy = PlanPolicy::Buckets(HashPolicy::Layer34);

/// The terminal table of `plan`.
fn table(plan: &Plan, title: &str) -> String {
    let mut out = String::new();
    text::write_table(plan, title, &mut out).unwrap();
    out
}

#[test]
fn text_table_and_html_render_every_policy() {
    let frames = mixed_frames(2, 2000);
    let plan = plan_of(&frames, PlanConfig::new(2));
    let text = table(&plan, "mixed");
    for p in PlanPolicy::ALL {
        assert!(text.contains(p.name()), "{p} missing:\n{text}");
    }
    assert!(text.contains("Recommendation: "));
    assert!(text.contains("What if a member fails"));
    let html = html::render(&plan, "mixed <capture>");
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("mixed &lt;capture&gt;"));
    assert_eq!(html.matches("<svg").count(), PlanPolicy::ALL.len() + 7);
    assert!(!html.contains("http://") && !html.contains("https://"));
}

#[test]
fn bucket_tables_say_when_rebalancing_is_off_and_when_moves_were_forced() {
    // Rebalancing off.
    let t = skewed(60, 1, 1500, true);
    let off = plan_timed(&t, bucket_config(vec![L34, L34_BUCKETS], 0, vec![10.0; 2]));
    let text = table(&off, "off");
    assert!(text.contains("Bucket tables (rebalancing off):"), "{text}");

    // Elephants that never pause: after `force_after` (3) stuck passes the table moves a busy
    // bucket at once, and the report says so.
    let t = skewed(60, 1, 1500, false);
    let plan = plan_timed(
        &t,
        bucket_config(vec![L34, L34_BUCKETS], 5_000, vec![10.0; 2]),
    );
    let text = table(&plan, "never pausing");
    assert!(
        text.contains("busy buckets moved (brief reordering)"),
        "{text}"
    );
    assert!(text.contains("forced while busy"), "{text}");
}

#[test]
fn flow_list_bucket_tables_say_the_mix_is_replayed() {
    // Three elephants on member 0 (as in `skewed`) and mice, as a flow list without MACs.
    let mut text = String::from("src_ip,dst_ip,proto,src_port,dst_port,packets,bytes\n");
    let mut found = Vec::new();
    for port in 40_000u16.. {
        let mut f = frame_of(&format!("tcp 10.0.0.1:{port} > 10.0.0.2:5201"));
        f[..12].fill(0);
        let h = xmit_hash(HashPolicy::Layer34, &f);
        if h % 2 == 0 && !found.contains(&(h & 0xff)) {
            found.push(h & 0xff);
            text.push_str(&format!(
                "10.0.0.1,10.0.0.2,tcp,{port},5201,10000,15000000\n"
            ));
            if found.len() == 3 {
                break;
            }
        }
    }
    for j in 0..40 {
        text.push_str(&format!(
            "10.1.0.{j},10.2.0.1,udp,{},53,100,20000\n",
            5000 + j
        ));
    }
    let cfg = bucket_config(vec![L34, L34_BUCKETS], 10_000, vec![10.0; 2]);
    let plan = plan_flows(text.as_bytes(), cfg).unwrap();
    let out = table(&plan, "flows");
    assert!(out.contains("replayed once per interval"), "{out}");
}

#[test]
fn bucket_tables_without_timestamps_never_rebalance() {
    // Frames with no timestamps: every table sees time 0 and never rebalances.
    let mut cfg = PlanConfig::new(2);
    cfg.policies = PlanPolicy::ALL_WITH_BUCKETS.to_vec();
    let plan = plan_of(&mixed_frames(4, 500), cfg);
    let text = table(&plan, "t");
    assert!(text.contains("balance-tcp"), "{text}");
    assert!(text.contains("less than one interval"), "{text}");
}

#[test]
fn stripe_rows_and_cards_say_what_stripe_needs() {
    // One big TCP stream and a few mice: no hash policy can split the stream; stripe can.
    let mut frames = vec![frame_of("tcp 10.0.0.1:40000 > 10.0.0.2:5201"); 400];
    for f in &mut frames {
        f.resize(1514, 0);
    }
    for i in 0..20u16 {
        frames.insert(
            usize::from(i) * 19,
            frame_of(&format!("udp 10.0.0.1:{} > 10.0.0.3:53", 5000 + i)),
        );
    }
    let plan = plan_of(&frames, PlanConfig::new(2));
    let text = table(&plan, "elephant");
    let row = text.lines().find(|l| l.contains(" stripe ")).unwrap();
    assert!(
        row.ends_with("needs lagd mode=stripe at both ends"),
        "{row}"
    );
    let html = html::render(&plan, "elephant");
    assert!(html.contains("needs lagd mode=stripe at both ends"));
}
