//! Synthetic traffic for the planner's tests, benchmarks and the renderers' tests: a mixed
//! capture of every frame kind the policies treat apart, and timed elephant-and-mice traffic
//! for the bucket table. Deterministic: the same seed gives the same frames.
#![allow(missing_docs)]

use core::time::Duration;

use super::config::PlanConfig;
use super::flow::parse_flow_spec;
use super::planner::Planner;
use super::policy::PlanPolicy;
use super::report::Plan;
use crate::balance::BalanceConfig;
use crate::hash::{HashPolicy, xmit_hash};

/// A small deterministic generator (xorshift64*).
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

pub fn frame_of(spec: &str) -> Vec<u8> {
    let mut f = Vec::new();
    assert!(parse_flow_spec(spec).unwrap().write_frame(&mut f), "{spec}");
    f
}

/// A mixed capture: TCP/UDP over IPv4 and IPv6, tagged and not, ICMP, ARP, fragments, VXLAN,
/// GRE, QinQ, runts; each flow a few times, interleaved, with padding of random length.
pub fn mixed_frames(seed: u64, count: usize) -> Vec<Vec<u8>> {
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

pub fn plan_of(frames: &[Vec<u8>], config: PlanConfig) -> Plan {
    let mut p = Planner::new(config).unwrap();
    for f in frames {
        p.add_frame(f, f.len() as u32);
    }
    p.finish()
}

/// A base capture time (ns since the epoch), so the clock must count from the first packet.
pub const T0: u64 = 1_700_000_000_000_000_000;

/// Timed traffic: flows (headers, wire length) and (time in ns from the start, flow) events.
pub struct Timed {
    pub flows: Vec<(Vec<u8>, u32)>,
    pub events: Vec<(u64, usize)>,
}

/// Three elephant TCP flows whose layer3+4 hashes are even and in three different buckets
/// (so with two members all three start on member 0, under `hash % 2` and in the bucket table
/// alike), each sending a `big`-byte frame every `period_ms` but, if `pauses`, pausing 100 ms
/// every 2 s (a bucket moves safely only after 50 ms idle), and 40 mice sending 200-byte frames
/// every 97 ms.
pub fn skewed(secs: u64, period_ms: u64, big: u32, pauses: bool) -> Timed {
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

pub fn plan_timed(t: &Timed, config: PlanConfig) -> Plan {
    let mut p = Planner::new(config).unwrap();
    for &(ts, f) in &t.events {
        p.set_time(T0 + ts);
        let (frame, len) = &t.flows[f];
        p.add_frame(frame, *len);
    }
    p.finish()
}

pub fn bucket_config(policies: Vec<PlanPolicy>, interval_ms: u64, speeds: Vec<f64>) -> PlanConfig {
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

pub const L34: PlanPolicy = PlanPolicy::Hash(HashPolicy::Layer34);
pub const L34_BUCKETS: PlanPolicy = PlanPolicy::Buckets(HashPolicy::Layer34);

/// [`skewed`]'s traffic as a flow list (CSV, no MACs): three elephant TCP flows whose layer3+4
/// hashes are even and in three different buckets (all on member 0 of two), and 40 mice.
pub fn skewed_flow_list() -> String {
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
    text
}

/// One big TCP stream (400 frames of 1514 bytes) with 20 DNS mice among them: no hash policy
/// can split the stream; stripe can.
pub fn one_elephant_and_mice() -> Vec<Vec<u8>> {
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
    frames
}
