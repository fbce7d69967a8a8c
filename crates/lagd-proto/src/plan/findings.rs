//! Pathologies: traffic patterns that defeat a policy, each tied to the field behind it.
//!
//! Every finding is checked against the actual distribution, not guessed from the addresses
//! alone: a pattern is reported only when the policy's members (computed with the daemon's hash
//! code) show the damage. The detectors:
//!
//! - **`mac-bytes-ignored`** (`layer2`): MAC pairs that differ only in the first five bytes of
//!   the MACs, which `layer2` ignores (it reads only the last byte of each).
//! - **`macs-follow-ips`** (`layer2+3`, `encap2+3`): MACs derived from IPs (last MAC byte = last
//!   IP byte, as OVN-Kubernetes assigns pod MACs): the two terms cancel in the XOR, so the member
//!   depends only on the addresses' upper bytes, which hosts of one subnet share.
//! - **`one-peer`** (`layer2`): most bytes between one pair of MACs (a gateway, a single peer).
//! - **`one-source`** (`vlan+srcmac`, `ovs-slb`): most bytes from one source MAC.
//! - **`port-bits`** (`layer3+4`, `encap3+4`, `ovs-tcp`): many port pairs between the same
//!   addresses all on one member, because the ports vary only in bits the fold drops or cancels
//!   (the even-port pattern: every port even, or a multiple of 4...).
//! - **`ip-bits`** (`layer2+3`, `layer3+4`, encap policies): many address pairs behind one MAC
//!   pair (or port pair) all on one member, because the addresses differ only in ways the XOR
//!   fold cancels.
//! - **`tunnel`**: tunnels hiding many inner flows in few outer ones, for the policies that
//!   read only outer headers (all hashing policies; for GRE and IP-in-IP not the encap ones).
//! - **`elephant`**: one flow larger than a member's fair share, which no hash can split.
//! - **`no-macs`**: frames or flow-list rows without MACs, where MAC-based results mean little.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

use super::flow::{BuildKeyHasher, FlowKey};
use super::planner::{Entry, Planner};
use super::policy::PlanPolicy;
use super::report::{Plan, human_bytes};
use crate::hash::{HashPolicy, MemberMod};

// `Finding` lives with the report's other types (a `Plan` holds them); this path stays.
pub use super::report::Finding;

type Table = HashMap<FlowKey, Entry, BuildKeyHasher>;

/// Flow fields a detector groups by: a digest of the context and of the varying field, and
/// the varying field's raw bits for describing which bits vary.
struct Row {
    ctx: u64,
    value: u64,
    raw: u64,
    member: usize,
    bytes: u64,
}

/// How a field's variation reached the members.
struct Collapse {
    /// Groups (same context) where the field took at least `min_values` values.
    groups: usize,
    /// Groups whose flows all use one member.
    collapsed_groups: usize,
    /// Bytes of the multi-valued groups, and of the collapsed ones.
    bytes: u64,
    collapsed_bytes: u64,
    /// Bytes-weighted share a well-mixed hash would leave on one member by chance.
    expected: f64,
    /// Bits of `raw` that vary inside collapsed groups, and the common value of the others.
    varying: u64,
    example_raw: u64,
    /// Most values in one collapsed group.
    values: usize,
}

/// Groups `rows` by context (sorting them in place: no per-group sets, so a million flows
/// cost nothing beyond the rows themselves) and sums up how the field's values reached the
/// members.
fn collapse(rows: &mut [Row], n: usize, min_values: usize) -> Collapse {
    rows.sort_unstable_by_key(|r| (r.ctx, r.value));
    let mut c = Collapse {
        groups: 0,
        collapsed_groups: 0,
        bytes: 0,
        collapsed_bytes: 0,
        expected: 0.0,
        varying: 0,
        example_raw: 0,
        values: 0,
    };
    let mut expected_bytes = 0.0;
    for g in rows.chunk_by(|a, b| a.ctx == b.ctx) {
        // Distinct values: the rows are sorted by value within the group.
        let k = 1 + g.windows(2).filter(|w| w[0].value != w[1].value).count();
        if k < min_values {
            continue;
        }
        let bytes: u64 = g.iter().map(|r| r.bytes).sum();
        let mixed = g.iter().any(|r| r.member != g[0].member);
        c.groups += 1;
        c.bytes += bytes;
        expected_bytes += bytes as f64 * (n as f64).powi(1 - k.min(64) as i32);
        if !mixed {
            if c.collapsed_groups == 0 {
                c.example_raw = g[0].raw;
            }
            c.collapsed_groups += 1;
            c.collapsed_bytes += bytes;
            c.varying |= g.iter().fold(0, |v, r| v | (r.raw ^ g[0].raw));
            c.values = c.values.max(k);
        }
    }
    if c.bytes > 0 {
        c.expected = expected_bytes / c.bytes as f64;
    }
    c
}

impl Collapse {
    /// The field's variation demonstrably fails to reach the members: most multi-valued traffic
    /// sits on one member per group, a well-mixed hash would rarely do that, and it matters.
    fn is_pathological(&self, total: u64) -> bool {
        self.groups > 0
            && self.collapsed_bytes as f64 >= 0.5 * self.bytes as f64
            && self.expected <= 0.1
            && self.bytes as f64 >= 0.2 * total as f64
    }
}

fn digest(parts: &[u64]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for &p in parts {
        h = (h ^ p).wrapping_mul(0x0100_0000_01b3).rotate_left(29);
    }
    h
}

fn mac_u64(m: [u8; 6]) -> u64 {
    m.iter().fold(0, |a, &b| a << 8 | u64::from(b))
}

fn ip_u128(a: IpAddr) -> u128 {
    match a {
        IpAddr::V4(v) => u128::from(u32::from(v)),
        IpAddr::V6(v) => u128::from(v),
    }
}

/// The member each tracked flow uses under hash policy `slot`.
fn member(pl: &Planner, e: &Entry, slot: usize, m: &MemberMod) -> usize {
    debug_assert!(slot < pl.hash_policies.len());
    m.index(e.hashes[slot])
}

pub(super) fn find(plan: &Plan, pl: &Planner, table: &Table) -> Vec<Finding> {
    let n = plan.members();
    let total = plan.input.bytes;
    let mut out = Vec::new();
    if total == 0 {
        return out;
    }
    let mm = MemberMod::new(n).expect("member count checked");
    // Detectors judge the hash policies evaluated (a hash computed only for a bucket policy
    // has a slot too, but no distribution of its own to show the damage).
    let slot = |h: HashPolicy| {
        pl.hash_policies
            .iter()
            .position(|(x, _)| *x == h)
            .filter(|_| plan.policy(PlanPolicy::Hash(h)).is_some())
    };
    let imbalance = |h: HashPolicy| {
        plan.policy(PlanPolicy::Hash(h))
            .map_or(1.0, |p| p.dist.imbalance)
    };
    let pct = |b: u64| b as f64 * 100.0 / total as f64;

    if n >= 2 {
        // layer2: MAC pairs that differ only in ignored bytes.
        if let Some(s) = slot(HashPolicy::Layer2) {
            let mut pairs: HashMap<(u64, u64), (usize, u64)> = HashMap::new();
            for (k, e) in table {
                let p = (mac_u64(k.src_mac().0), mac_u64(k.dst_mac().0));
                let v = pairs.entry(p).or_insert_with(|| (member(pl, e, s, &mm), 0));
                v.1 += e.total.bytes;
            }
            let last: HashSet<(u64, u64)> =
                pairs.keys().map(|(a, b)| (a & 0xff, b & 0xff)).collect();
            let used: HashSet<usize> = pairs.values().map(|v| v.0).collect();
            if pairs.len() >= 2 * n
                && last.len() < pairs.len()
                && used.len() < n
                && imbalance(HashPolicy::Layer2) >= 1.2
            {
                out.push(Finding {
                    kind: "mac-bytes-ignored",
                    field: "MAC address bytes 0-4".into(),
                    policies: vec![PlanPolicy::Hash(HashPolicy::Layer2)],
                    message: format!(
                        "{} MAC pairs reduce to {} pairs of last bytes, and layer2 reads only the last byte of each MAC: the traffic uses {} of {n} members.",
                        pairs.len(),
                        last.len(),
                        used.len()
                    ),
                    advice: "Use layer2+3 or layer3+4, whose addresses and ports tell these peers apart.".into(),
                });
            }
        }

        // layer2+3 / encap2+3: MACs that follow the IPs.
        for h in [HashPolicy::Layer23, HashPolicy::Encap23] {
            let Some(s) = slot(h) else { continue };
            let (mut follow, mut v4) = (0u64, 0u64);
            let mut used = HashSet::new();
            let mut ips = HashSet::new();
            for (k, e) in table {
                let Some((IpAddr::V4(si), IpAddr::V4(di))) = k.addrs() else {
                    continue;
                };
                v4 += e.total.bytes;
                let macs = k.src_mac().0[5] ^ k.dst_mac().0[5];
                if macs == si.octets()[3] ^ di.octets()[3] && !k.src_mac().is_zero() {
                    follow += e.total.bytes;
                    used.insert(member(pl, e, s, &mm));
                    ips.insert((u32::from(si), u32::from(di)));
                }
            }
            if v4 > 0
                && follow as f64 >= 0.5 * v4 as f64
                && follow as f64 >= 0.2 * total as f64
                && ips.len() >= 2 * n
                && used.len() < n
                && imbalance(h) >= 1.2
            {
                out.push(Finding {
                    kind: "macs-follow-ips",
                    field: "MAC addresses derived from IP addresses".into(),
                    policies: vec![PlanPolicy::Hash(h)],
                    message: format!(
                        "In {:.0}% of the bytes the last MAC byte matches the last IP byte (MACs derived from IPs, as OVN-Kubernetes assigns them); {h} XORs both, so they cancel and {} address pairs use {} of {n} members.",
                        pct(follow),
                        ips.len(),
                        used.len()
                    ),
                    advice: "Use layer3+4, or give the hosts random MAC addresses.".into(),
                });
            }
        }

        // One MAC pair under layer2.
        if slot(HashPolicy::Layer2).is_some() {
            // (bytes, flows, largest flow's bytes) per MAC pair.
            let mut pairs: HashMap<(u64, u64), (u64, u64, u64)> = HashMap::new();
            for (k, e) in table {
                let v = pairs
                    .entry((mac_u64(k.src_mac().0), mac_u64(k.dst_mac().0)))
                    .or_default();
                v.0 += e.total.bytes;
                v.1 += 1;
                v.2 = v.2.max(e.total.bytes);
            }
            // Many flows, and more than the largest one (a lone elephant is the `elephant` finding).
            let top = pairs.iter().max_by_key(|(p, v)| (v.0, **p));
            let top = top.filter(|(_, v)| {
                v.1 >= 4
                    && v.0 as f64 > 1.2 * total as f64 / n as f64
                    && (v.0 - v.2) as f64 > 0.5 * total as f64 / n as f64
            });
            if let Some((&(s, d), &(bytes, flows, _))) = top {
                let mac = |v: u64| {
                    let b = v.to_be_bytes();
                    crate::wire::EthernetAddress([b[2], b[3], b[4], b[5], b[6], b[7]])
                };
                out.push(Finding {
                    kind: "one-peer",
                    field: "MAC address pair".into(),
                    policies: vec![PlanPolicy::Hash(HashPolicy::Layer2)],
                    message: format!(
                        "{:.0}% of the bytes ({} flows) are between {} and {}: layer2 hashes only the MACs, so all of it takes one member.",
                        pct(bytes),
                        flows,
                        mac(s),
                        mac(d)
                    ),
                    advice: "Use layer2+3 or layer3+4 so addresses and ports spread the traffic to this peer (often a gateway).".into(),
                });
            }
        }

        // One source MAC under vlan+srcmac / ovs-slb.
        let src_policies: Vec<PlanPolicy> = [HashPolicy::VlanSrcMac, HashPolicy::OvsSlb]
            .into_iter()
            .filter(|h| slot(*h).is_some())
            .map(PlanPolicy::Hash)
            .collect();
        if !src_policies.is_empty() {
            let mut srcs: HashMap<u64, (u64, u64, u64)> = HashMap::new();
            for (k, e) in table {
                let v = srcs.entry(mac_u64(k.src_mac().0)).or_default();
                v.0 += e.total.bytes;
                v.1 += 1;
                v.2 = v.2.max(e.total.bytes);
            }
            let top = srcs.iter().max_by_key(|(m, v)| (v.0, **m));
            let top = top.filter(|(_, v)| {
                v.1 >= 4
                    && v.0 as f64 > 1.2 * total as f64 / n as f64
                    && (v.0 - v.2) as f64 > 0.5 * total as f64 / n as f64
            });
            if let Some((_, &(bytes, flows, _))) = top {
                let names: Vec<&str> = src_policies.iter().map(|p| p.name()).collect();
                out.push(Finding {
                    kind: "one-source",
                    field: "source MAC address".into(),
                    policies: src_policies.clone(),
                    message: format!(
                        "{:.0}% of the bytes ({flows} flows) come from one source MAC, and {} hash only the source MAC (and VLAN): all of it takes one member.",
                        pct(bytes),
                        names.join(" and ")
                    ),
                    advice: "Use a policy that reads addresses and ports (layer3+4, ovs-tcp).".into(),
                });
            }
        }

        // Ports that vary only in bits the fold loses.
        for h in [HashPolicy::Layer34, HashPolicy::Encap34, HashPolicy::OvsTcp] {
            let Some(s) = slot(h) else { continue };
            let mut rows: Vec<Row> = table
                .iter()
                .filter_map(|(k, e)| {
                    let (sp, dp) = k.ports()?;
                    let (a, b) = k.addrs()?;
                    let raw = u64::from(sp) << 16 | u64::from(dp);
                    Some(Row {
                        ctx: digest(&[
                            ip_u128(a) as u64,
                            (ip_u128(a) >> 64) as u64,
                            ip_u128(b) as u64,
                            (ip_u128(b) >> 64) as u64,
                            u64::from(k.protocol()),
                        ]),
                        value: raw,
                        raw,
                        member: member(pl, e, s, &mm),
                        bytes: e.total.bytes,
                    })
                })
                .collect();
            let c = collapse(&mut rows, n, 4);
            if c.is_pathological(total) {
                // Which ports vary, and how many of their low bits never do.
                let sp_vary = (c.varying >> 16) as u16;
                let dp_vary = c.varying as u16;
                let sp = u32::from((c.example_raw >> 16) as u16);
                let dp = u32::from(c.example_raw as u16);
                let low = [sp_vary, dp_vary]
                    .iter()
                    .filter(|v| **v != 0)
                    .map(|v| v.trailing_zeros())
                    .min()
                    .unwrap_or(0);
                let pattern = if c.varying == 0 {
                    "do not vary".to_string()
                } else if low >= 1 {
                    let m = 1u32 << low;
                    let mut which = Vec::new();
                    if sp_vary != 0 {
                        which.push(format!("every source port {} mod {m}", sp % m));
                    }
                    if dp_vary != 0 {
                        which.push(format!("every destination port {} mod {m}", dp % m));
                    }
                    format!(
                        "agree in their lowest {low} bit{} ({}: the even-port pattern)",
                        if low == 1 { "" } else { "s" },
                        which.join(", ")
                    )
                } else {
                    format!(
                        "vary only in bits 0x{:08x} of the source<<16|destination word, which the fold cancels",
                        c.varying
                    )
                };
                out.push(Finding {
                    kind: "port-bits",
                    field: "TCP/UDP ports".into(),
                    policies: vec![PlanPolicy::Hash(h)],
                    message: format!(
                        "In {} of {} address pairs with several port pairs (up to {} each, {:.0}% of the bytes), {h} puts every port pair on one member: the ports {pattern}.",
                        c.collapsed_groups,
                        c.groups,
                        c.values,
                        pct(c.collapsed_bytes)
                    ),
                    advice: if h == HashPolicy::OvsTcp {
                        "Spread source ports over the whole range (random ephemeral ports).".into()
                    } else {
                        "Use ovs-tcp-style mixing (lagd's own balancers) or spread source ports over the whole range; layer3+4 XORs the port bytes together and drops the lowest bit.".into()
                    },
                });
            }
        }

        // Addresses that differ only in ways the fold cancels.
        for h in [
            HashPolicy::Layer23,
            HashPolicy::Layer34,
            HashPolicy::Encap23,
            HashPolicy::Encap34,
        ] {
            let Some(s) = slot(h) else { continue };
            let l34 = matches!(h, HashPolicy::Layer34 | HashPolicy::Encap34);
            let mut rows: Vec<Row> = table
                .iter()
                .filter_map(|(k, e)| {
                    let (a, b) = k.addrs()?;
                    let (wa, wb) = k.addr_words()?;
                    let ctx = if l34 {
                        let (sp, dp) = k.ports().unwrap_or((0, 0));
                        digest(&[u64::from(sp) << 16 | u64::from(dp), u64::from(k.protocol())])
                    } else {
                        digest(&[mac_u64(k.src_mac().0), mac_u64(k.dst_mac().0)])
                    };
                    Some(Row {
                        ctx,
                        value: digest(&[
                            ip_u128(a) as u64,
                            (ip_u128(a) >> 64) as u64,
                            ip_u128(b) as u64,
                            (ip_u128(b) >> 64) as u64,
                        ]),
                        raw: u64::from(wa) << 32 | u64::from(wb),
                        member: member(pl, e, s, &mm),
                        bytes: e.total.bytes,
                    })
                })
                .collect();
            let c = collapse(&mut rows, n, 4);
            if c.is_pathological(total)
                && !out.iter().any(|f| {
                    f.policies.contains(&PlanPolicy::Hash(h)) && f.kind == "macs-follow-ips"
                })
            {
                out.push(Finding {
                    kind: "ip-bits",
                    field: "IP addresses".into(),
                    policies: vec![PlanPolicy::Hash(h)],
                    message: format!(
                        "In {} of {} groups of flows with the same {} and several address pairs ({:.0}% of the bytes), {h} puts every address pair on one member: the addresses differ only in ways its XOR fold cancels.",
                        c.collapsed_groups,
                        c.groups,
                        if l34 { "ports" } else { "MACs" },
                        pct(c.collapsed_bytes)
                    ),
                    advice: "Use ovs-tcp (a mixing hash), or a policy that also reads ports.".into(),
                });
            }
        }

        // One flow bigger than a member's share.
        let top = plan.elephants.first();
        if let Some(e) = top.filter(|e| e.bytes as f64 > total as f64 / n as f64) {
            out.push(Finding {
                kind: "elephant",
                field: "a single flow".into(),
                policies: Vec::new(),
                message: format!(
                    "One flow ({}) carries {:.0}% of the bytes ({}), more than a member's fair share of {:.0}%: every hash policy keeps it on one member.",
                    e.key,
                    pct(e.bytes),
                    human_bytes(e.bytes),
                    100.0 / n as f64
                ),
                advice: "Split it over several connections (parallel streams), stripe it (lagd mode=stripe at both ends), or use balance-rr and accept reordering.".into(),
            });
        }
    }

    // Tunnels.
    for t in &plan.tunnels {
        if (t.bytes as f64) < 0.2 * total as f64 || t.inner_flows < 2 * t.outer_flows.max(1) {
            continue;
        }
        // The evaluated policies that read only the outer headers: every hashing policy, but
        // the encap ones (and their bucket forms) look inside GRE and IP-in-IP.
        let mut hidden: Vec<PlanPolicy> = Vec::new();
        for &p in &pl.config.policies {
            let blind = match p.hash() {
                Some(HashPolicy::Encap23 | HashPolicy::Encap34) => !t.tunnel.kernel_dissects(),
                Some(_) => true,
                None => false,
            };
            if blind && !hidden.contains(&p) {
                hidden.push(p);
            }
        }
        if hidden.is_empty() {
            continue;
        }
        let name = t.tunnel.name();
        let advice = if t.tunnel.has_outer_ports() {
            if t.outer_flows >= 2 * n as u64 {
                format!(
                    "The encapsulator already varies the outer UDP source port over {} outer flows: use layer3+4 (or ovs-tcp) so the bond sees that entropy.",
                    t.outer_flows
                )
            } else {
                format!(
                    "Make the encapsulator derive the outer UDP source port from the inner flow (Linux {name} does by default), then use layer3+4; encap policies do not look inside UDP tunnels."
                )
            }
        } else {
            "Use encap2+3 or encap3+4: the kernel's flow dissector hashes the headers inside GRE and IP-in-IP.".into()
        };
        out.push(Finding {
            kind: "tunnel",
            field: format!("{name} outer headers"),
            policies: hidden,
            message: format!(
                "{:.0}% of the bytes are {name}: {} outer flows carry {}{} inner flows, which policies that read only outer headers cannot tell apart.",
                pct(t.bytes),
                t.outer_flows,
                if t.inner_capped { "more than " } else { "" },
                t.inner_flows
            ),
            advice,
        });
    }

    let no_macs = plan.input.rebuilt_ethernet + plan.input.rows_without_macs;
    if no_macs > 0 {
        let what = if plan.input.rows > 0 {
            format!(
                "{} of {} flow-list rows have no MACs",
                plan.input.rows_without_macs, plan.input.rows
            )
        } else {
            format!(
                "{} frames had no Ethernet header (raw IP or Linux cooked capture)",
                plan.input.rebuilt_ethernet
            )
        };
        out.push(Finding {
            kind: "no-macs",
            field: "MAC addresses (missing)".into(),
            policies: [HashPolicy::Layer2, HashPolicy::VlanSrcMac, HashPolicy::OvsSlb]
                .into_iter()
                .map(PlanPolicy::Hash)
                .collect(),
            message: format!("{what}: MAC-based results treat them all as one MAC pair."),
            advice: "Capture on the bond's Ethernet device (not 'any'), or export MACs in the flow records.".into(),
        });
    }
    out
}
