//! Lab results as people and programs read them: a text summary, one JSON object per run, and
//! for a sweep a markdown table and a hand-written SVG bar chart.

use std::fmt::Write as _;

use serde::Serialize;

use super::traffic::Failover;

/// TCP goodput per bit of link rate with a 1500-byte MTU and TCP timestamps (1448 payload bytes
/// per 1514-byte frame on the wire, as tbf counts it).
pub const TCP_GOODPUT_PER_BIT: f64 = 1448.0 / 1514.0;

/// One member link's share of a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MemberShare {
    /// Interface name (both ends carry it).
    pub name: String,
    /// Bytes host A sent on it during the run.
    pub tx_bytes: u64,
    /// Bytes host A received on it during the run.
    pub rx_bytes: u64,
    /// Its fraction of all bytes host A sent on members (0..1).
    pub share: f64,
    /// Its fraction of all bytes host A received on members (0..1): the return path, the
    /// peer's (or the switch's) choice.
    pub rx_share: f64,
}

/// One flow's goodput (a client's, in a run with clients).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FlowFigure {
    /// `a>b`, `b>a`, `a>c0`, `c0>a`.
    pub label: String,
    /// Sender address.
    pub src: String,
    /// Receiver address.
    pub dst: String,
    /// Parallel streams.
    pub streams: usize,
    /// Goodput at the receiver, Gbit/s.
    pub gbps: f64,
}

/// A host's address the traffic used, and the interface (and MAC) that holds it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Endpoint {
    /// `a`, `b`, `c0`, ….
    pub host: String,
    /// The IPv4 address.
    pub ip: String,
    /// The interface holding it (the bond, the tunnel, a client's link).
    pub dev: String,
    /// That interface's MAC.
    pub mac: String,
}

/// The switch of a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SwitchFigure {
    /// Bridge or Open vSwitch.
    pub kind: super::switch::SwitchKind,
    /// How many switch namespaces (1, or one per link).
    pub switches: usize,
    /// The switch's hash on its port-channels.
    pub policy: String,
    /// The port-channel towards the hosts.
    pub port_channel: super::switch::PortChannel,
    /// Bytes the switch namespaces' ports received during the run.
    pub rx_bytes: u64,
}

/// The tunnel of a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OverlayFigure {
    /// Geneve or VXLAN.
    pub kind: super::overlay::OverlayKind,
    /// The tunnel interface's MTU.
    pub inner_mtu: u32,
    /// Bytes host A's tunnel interface sent during the run (inner frames).
    pub tunnel_tx_bytes: u64,
    /// Bytes host A's tunnel interface received during the run.
    pub tunnel_rx_bytes: u64,
}

/// Computes shares from tx byte counts.
pub fn shares(names: &[String], counters: &[(u64, u64)]) -> Vec<MemberShare> {
    let total: u64 = counters.iter().map(|c| c.0).sum();
    let total_rx: u64 = counters.iter().map(|c| c.1).sum();
    names
        .iter()
        .zip(counters)
        .map(|(name, &(tx, rx))| MemberShare {
            name: name.clone(),
            tx_bytes: tx,
            rx_bytes: rx,
            share: if total == 0 {
                0.0
            } else {
                tx as f64 / total as f64
            },
            rx_share: if total_rx == 0 {
                0.0
            } else {
                rx as f64 / total_rx as f64
            },
        })
        .collect()
}

/// Everything one lab run measured; `lagctl lab --json` prints it as one object.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunResult {
    /// `lagd`, `direct` or `ovs`.
    pub setup: String,
    /// Bonding mode (`none` for the direct baseline).
    pub mode: String,
    /// Transmit hash policy (`none` for the direct baseline).
    pub policy: String,
    /// The OVS `bond_mode` the mode was mapped to (OVS baseline only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ovs_bond_mode: Option<String>,
    /// OVS `lacp` setting (OVS baseline only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lacp: Option<String>,
    /// Number of member links.
    pub links: usize,
    /// Per-link rate as given to tc (`0` = unlimited).
    pub rate: String,
    /// Parallel streams.
    pub streams: usize,
    /// `tcp` or `udp`.
    pub protocol: String,
    /// `iperf3` or `builtin`.
    pub generator: String,
    /// Seconds measured.
    pub duration_s: f64,
    /// Goodput at the receiver, Gbit/s.
    pub aggregate_gbps: f64,
    /// What the links can carry as TCP goodput, Gbit/s (shaped links only).
    pub ceiling_gbps: Option<f64>,
    /// Per-member bytes and shares (host A's ends).
    pub members: Vec<MemberShare>,
    /// TCP retransmitted segments at the sender (`null` for UDP).
    pub retransmits: Option<u64>,
    /// UDP datagrams received per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub udp_pps: Option<f64>,
    /// UDP payload bytes per datagram.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub udp_length: Option<usize>,
    /// UDP datagrams lost, percent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub udp_lost_percent: Option<f64>,
    /// Longest receive silence of any stream, ms (built-in generator only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_stall_ms: Option<f64>,
    /// The member failure injected mid-run and the gap it caused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failover: Option<Failover>,
    /// MTU of the links and bonds.
    pub mtu: u32,
    /// With `--mtu`: the packet size checked on every route before the traffic (a packet of
    /// this size with Don't Fragment crossed, one byte more did not); the tunnel's inner MTU
    /// with an overlay.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_mtu: Option<u32>,
    /// `forward` (host A sends), `reverse` (host A receives) or `both`.
    pub direction: String,
    /// The switch between the hosts, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub switch: Option<SwitchFigure>,
    /// Client hosts (0: host A and host B talk).
    pub clients: usize,
    /// The tunnel the streams ran in, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overlay: Option<OverlayFigure>,
    /// Each flow's goodput.
    pub flows: Vec<FlowFigure>,
    /// The addresses the flows ran between (so that a hash can be recomputed).
    pub endpoints: Vec<Endpoint>,
    /// With clients: each client's bytes on each of host A's members, each way (empty
    /// without clients).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub client_members: Vec<super::matrix::ClientMembers>,
    /// Start of the lab's namespace names (`lagdlab-<pid>-<tag>`).
    pub prefix: String,
}

impl RunResult {
    /// `lagd balance-xor layer3+4`, `direct veth`, `ovs balance-tcp (lacp active)`, then the
    /// lab's shape where it is more than two hosts back to back at MTU 1500: `, ovs switch`,
    /// `, one switch per link`, `, 4 clients`, `, vxlan`, `, mtu 9000`.
    pub fn label(&self) -> String {
        let mut s = self.base_label();
        match &self.switch {
            None => {}
            Some(sw) if sw.switches > 1 => s.push_str(", one switch per link"),
            Some(sw) => {
                let kind = match sw.kind {
                    super::switch::SwitchKind::Bridge => "bridge",
                    super::switch::SwitchKind::Ovs => "ovs",
                };
                s.push_str(&format!(", {kind} switch"));
            }
        }
        if self.clients > 0 {
            s.push_str(&format!(", {} clients", self.clients));
        }
        if let Some(o) = &self.overlay {
            s.push_str(&format!(", {}", o.kind.name()));
        }
        if self.mtu != 1500 {
            s.push_str(&format!(", mtu {}", self.mtu));
        }
        s
    }

    fn base_label(&self) -> String {
        match self.setup.as_str() {
            "direct" => "direct veth".to_string(),
            "bridge" => "direct veth towards a bridge".to_string(),
            "ovs" => format!(
                "ovs {} (lacp {})",
                self.ovs_bond_mode.as_deref().unwrap_or("?"),
                self.lacp.as_deref().unwrap_or("?")
            ),
            _ if !super::dataplane::mode_uses_policy(&self.mode) => {
                format!("{} {}", self.setup, self.mode)
            }
            _ => format!("{} {} {}", self.setup, self.mode, self.policy),
        }
    }

    /// Member shares as `50/50`.
    pub fn share_text(&self) -> String {
        self.members
            .iter()
            .map(|m| format!("{:.0}", m.share * 100.0))
            .collect::<Vec<_>>()
            .join("/")
    }
}

/// The human-readable summary of one run.
pub fn text(r: &RunResult) -> String {
    let mut s = String::new();
    let rate = if r.rate == "0" {
        "unlimited".to_string()
    } else {
        r.rate.clone()
    };
    let _ = writeln!(
        s,
        "{} · {} links × {} · {} {} stream{} · {:.1} s · {}",
        r.label(),
        r.links,
        rate,
        r.streams,
        r.protocol.to_uppercase(),
        if r.streams == 1 { "" } else { "s" },
        r.duration_s,
        r.generator
    );
    match r.ceiling_gbps {
        Some(c) if r.protocol == "tcp" && c > 0.0 => {
            let _ = writeln!(
                s,
                "aggregate    {:.3} Gbit/s ({:.1} % of the {:.3} Gbit/s TCP ceiling)",
                r.aggregate_gbps,
                100.0 * r.aggregate_gbps / c,
                c
            );
        }
        _ => {
            let _ = writeln!(s, "aggregate    {:.3} Gbit/s", r.aggregate_gbps);
        }
    }
    if let Some(pps) = r.udp_pps {
        let _ = writeln!(
            s,
            "udp          {:.1} kpps received ({} B datagrams, {:.1} % lost)",
            pps / 1e3,
            r.udp_length.unwrap_or(0),
            r.udp_lost_percent.unwrap_or(0.0)
        );
    }
    if let Some(rt) = r.retransmits {
        let _ = writeln!(s, "retransmits  {rt}");
    }
    if let Some(st) = r.max_stall_ms {
        let _ = writeln!(s, "max stall    {st:.1} ms");
    }
    if let Some(f) = &r.failover {
        let _ = writeln!(
            s,
            "failover     {} down at {:.1} s: traffic gap {:.1} ms{}",
            f.member,
            f.at_s,
            f.gap_ms,
            if f.recovered {
                ""
            } else {
                " (NOT recovered by the end)"
            }
        );
    }
    if let Some(p) = r.path_mtu {
        let _ = writeln!(
            s,
            "mtu          {} (a {p}-byte packet crosses unfragmented, one byte more does not)",
            r.mtu
        );
    }
    if let Some(sw) = &r.switch {
        let _ = writeln!(
            s,
            "switch       {:?}{}, port-channel {:?} hashing {}, {} bytes crossed it",
            sw.kind,
            if sw.switches > 1 {
                format!(" × {} (one per link)", sw.switches)
            } else {
                String::new()
            },
            sw.port_channel,
            sw.policy,
            sw.rx_bytes
        );
    }
    if let Some(o) = &r.overlay {
        let _ = writeln!(
            s,
            "overlay      {:?}, inner MTU {}, {} bytes sent and {} received in the tunnel",
            o.kind, o.inner_mtu, o.tunnel_tx_bytes, o.tunnel_rx_bytes
        );
    }
    if r.flows.len() > 1 || r.clients > 0 || r.direction != "forward" {
        let _ = writeln!(s, "{:<14} {:>8} {:>12}", "flow", "streams", "Gbit/s");
        for f in &r.flows {
            let _ = writeln!(s, "{:<14} {:>8} {:>12.3}", f.label, f.streams, f.gbps);
        }
    }
    let _ = writeln!(
        s,
        "{:<14} {:>16} {:>16} {:>8} {:>8}",
        "member", "tx bytes", "rx bytes", "tx share", "rx share"
    );
    for m in &r.members {
        let _ = writeln!(
            s,
            "{:<14} {:>16} {:>16} {:>7.1}% {:>7.1}%",
            m.name,
            m.tx_bytes,
            m.rx_bytes,
            m.share * 100.0,
            m.rx_share * 100.0
        );
    }
    if !r.client_members.is_empty() {
        let _ = write!(
            s,
            "client × member, Mbit/s on the wire (out: host A to the client, its bond's choice; \
             in: to host A, the switch's)\n{:<6} {:<16}",
            "client", "address"
        );
        for m in &r.members {
            let _ = write!(s, " {:>10} {:>10}", format!("{} out", m.name), "in");
        }
        let _ = writeln!(s);
        for c in &r.client_members {
            let _ = write!(s, "{:<6} {:<16}", c.client, c.ip);
            for (tx, rx) in c.tx_mbps.iter().zip(&c.rx_mbps) {
                let _ = write!(s, " {tx:>10.2} {rx:>10.2}");
            }
            let _ = writeln!(s);
        }
    }
    s
}

/// A configuration of a sweep that could not be measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SweepError {
    /// Which configuration.
    pub label: String,
    /// Why.
    pub error: String,
}

/// The sweep's markdown report: one row per configuration, one column per stream count (Gbit/s
/// and member shares), then every run in detail.
pub fn markdown(
    title: &str,
    runs: &[RunResult],
    errors: &[SweepError],
    streams: &[usize],
) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# {title}\n");
    if let Some(r) = runs.first() {
        let rate = if r.rate == "0" { "unlimited" } else { &r.rate };
        let _ = writeln!(
            s,
            "{} links, {} each, {} traffic with {}, {:.0} s per run.",
            r.links, rate, r.protocol, r.generator, r.duration_s
        );
        if let Some(c) = r.ceiling_gbps {
            let _ = writeln!(s, "TCP goodput ceiling of all links: {c:.3} Gbit/s.");
        }
        let _ = writeln!(s);
    }
    let _ = write!(s, "| configuration |");
    for n in streams {
        let _ = write!(s, " {n} stream{} |", if *n == 1 { "" } else { "s" });
    }
    let _ = write!(s, "\n| --- |");
    for _ in streams {
        let _ = write!(s, " ---: |");
    }
    let _ = writeln!(s);
    for label in labels(runs) {
        let _ = write!(s, "| {label} |");
        for &n in streams {
            match runs.iter().find(|r| r.label() == label && r.streams == n) {
                Some(r) => {
                    let _ = write!(s, " {:.3} ({}) |", r.aggregate_gbps, r.share_text());
                }
                None => {
                    let _ = write!(s, " – |");
                }
            }
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(
        s,
        "\nGbit/s at the receiver; in parentheses each member's share of the bytes sent, in percent.\n"
    );
    let _ = writeln!(s, "## Every run\n");
    let _ = writeln!(
        s,
        "| configuration | streams | Gbit/s | % of ceiling | member shares | retransmits |"
    );
    let _ = writeln!(s, "| --- | ---: | ---: | ---: | --- | ---: |");
    for r in runs {
        let pct = r
            .ceiling_gbps
            .filter(|c| *c > 0.0)
            .map(|c| format!("{:.1}", 100.0 * r.aggregate_gbps / c))
            .unwrap_or_else(|| "–".into());
        let _ = writeln!(
            s,
            "| {} | {} | {:.3} | {} | {} | {} |",
            r.label(),
            r.streams,
            r.aggregate_gbps,
            pct,
            r.share_text(),
            r.retransmits
                .map(|x| x.to_string())
                .unwrap_or_else(|| "–".into())
        );
    }
    if !errors.is_empty() {
        let _ = writeln!(s, "\n## Not measured\n");
        for e in errors {
            let first = e.error.lines().next().unwrap_or("");
            let _ = writeln!(s, "- {}: {}", e.label, first);
        }
    }
    s
}

/// Configuration labels in first-seen order.
fn labels(runs: &[RunResult]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in runs {
        let l = r.label();
        if !out.contains(&l) {
            out.push(l);
        }
    }
    out
}

/// Bar colours, one per configuration (cycled).
const COLOURS: [&str; 8] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f",
];

/// A grouped bar chart: one group per stream count, one bar per configuration, Gbit/s on the y
/// axis, the TCP ceiling as a dashed line.
pub fn svg(title: &str, runs: &[RunResult], streams: &[usize]) -> String {
    let labels = labels(runs);
    let ceiling = runs.iter().find_map(|r| r.ceiling_gbps);
    let top = runs
        .iter()
        .map(|r| r.aggregate_gbps)
        .chain(ceiling)
        .fold(0.0_f64, f64::max);
    let y_max = nice_ceil(top.max(0.001) * 1.05);
    let (left, right, top_m, bottom) = (60.0, 20.0, 40.0, 50.0);
    let legend_h = 18.0 * labels.len() as f64 + 10.0;
    let bar_w = 14.0;
    let groups = streams.len().max(1) as f64;
    let group_w = (bar_w * labels.len().max(1) as f64 + 24.0).max(400.0 / groups);
    let plot_w = group_w * groups;
    let plot_h = 260.0;
    let width = left + plot_w + right;
    let height = top_m + plot_h + bottom + legend_h;
    let y = |v: f64| top_m + plot_h - plot_h * (v / y_max);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        s,
        r#"<rect width="100%" height="100%" fill="white"/>
<text x="{:.0}" y="22" font-size="15" text-anchor="middle">{}</text>"#,
        width / 2.0,
        escape(title)
    );
    // Grid and y axis labels.
    for i in 0..=5 {
        let v = y_max * i as f64 / 5.0;
        let yy = y(v);
        let _ = writeln!(
            s,
            r##"<line x1="{left}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#ddd"/><text x="{:.0}" y="{:.1}" text-anchor="end">{}</text>"##,
            left + plot_w,
            left - 6.0,
            yy + 4.0,
            trim_num(v)
        );
    }
    let _ = writeln!(
        s,
        r#"<text transform="translate(16 {:.0}) rotate(-90)" text-anchor="middle">Gbit/s</text>"#,
        top_m + plot_h / 2.0
    );
    for (g, &n) in streams.iter().enumerate() {
        let gx = left + group_w * g as f64 + (group_w - bar_w * labels.len() as f64) / 2.0;
        for (k, label) in labels.iter().enumerate() {
            let Some(r) = runs.iter().find(|r| &r.label() == label && r.streams == n) else {
                continue;
            };
            let x = gx + bar_w * k as f64;
            let yy = y(r.aggregate_gbps);
            let _ = writeln!(
                s,
                r#"<rect x="{x:.1}" y="{yy:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{}: {} streams, {:.3} Gbit/s, shares {}</title></rect>"#,
                bar_w - 2.0,
                (top_m + plot_h - yy).max(0.0),
                COLOURS[k % COLOURS.len()],
                escape(label),
                n,
                r.aggregate_gbps,
                r.share_text()
            );
        }
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{n}</text>"#,
            gx + bar_w * labels.len() as f64 / 2.0,
            top_m + plot_h + 16.0
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">parallel streams</text>"#,
        left + plot_w / 2.0,
        top_m + plot_h + 34.0
    );
    let _ = writeln!(
        s,
        r##"<line x1="{left}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#333"/>"##,
        top_m + plot_h,
        left + plot_w,
        top_m + plot_h
    );
    if let Some(c) = ceiling {
        let yy = y(c);
        let _ = writeln!(
            s,
            r##"<line x1="{left}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#c00" stroke-dasharray="6 4"/><text x="{:.1}" y="{:.1}" text-anchor="end" fill="#c00">ceiling {c:.3}</text>"##,
            left + plot_w,
            left + plot_w,
            yy - 4.0
        );
    }
    let ly = top_m + plot_h + bottom;
    for (k, label) in labels.iter().enumerate() {
        let yy = ly + 18.0 * k as f64;
        let _ = writeln!(
            s,
            r#"<rect x="{left}" y="{yy:.1}" width="12" height="12" fill="{}"/><text x="{:.0}" y="{:.1}">{}</text>"#,
            COLOURS[k % COLOURS.len()],
            left + 18.0,
            yy + 10.0,
            escape(label)
        );
    }
    s.push_str("</svg>\n");
    s
}

/// The smallest of 1, 2, 2.5, 5 × 10^k that is at least `v`.
fn nice_ceil(v: f64) -> f64 {
    let mag = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if m * mag >= v {
            return m * mag;
        }
    }
    10.0 * mag
}

fn trim_num(v: f64) -> String {
    let t = format!("{v:.3}");
    t.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn escape(t: &str) -> String {
    t.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// `YYYYMMDD-HHMMSS` (UTC) for a Unix time in seconds.
pub fn timestamp(unix_secs: u64) -> String {
    let days = (unix_secs / 86_400) as i64;
    let rem = unix_secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Proleptic Gregorian date of a day count since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    // Shift the epoch to 0000-03-01 so that leap days fall at the end of a year, then split
    // into 400-year eras of 146097 days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod test {
    use super::*;

    fn run(setup: &str, mode: &str, streams: usize, gbps: f64) -> RunResult {
        RunResult {
            setup: setup.into(),
            mode: mode.into(),
            policy: "layer3+4".into(),
            ovs_bond_mode: None,
            lacp: None,
            links: 2,
            rate: "1gbit".into(),
            streams,
            protocol: "tcp".into(),
            generator: "iperf3".into(),
            duration_s: 10.0,
            aggregate_gbps: gbps,
            ceiling_gbps: Some(2.0 * TCP_GOODPUT_PER_BIT),
            members: shares(&["m0".into(), "m1".into()], &[(300, 1), (100, 2)]),
            retransmits: Some(3),
            udp_pps: None,
            udp_length: None,
            udp_lost_percent: None,
            max_stall_ms: None,
            failover: None,
            mtu: 1500,
            path_mtu: None,
            direction: "forward".into(),
            switch: None,
            clients: 0,
            overlay: None,
            flows: Vec::new(),
            endpoints: Vec::new(),
            client_members: Vec::new(),
            prefix: "lagdlab-1-lg000000".into(),
        }
    }

    #[test]
    fn shares_sum_to_one() {
        let m = shares(&["a".into(), "b".into()], &[(300, 0), (100, 0)]);
        assert_eq!(m[0].share, 0.75);
        assert_eq!(m[1].share, 0.25);
        let z = shares(&["a".into()], &[(0, 0)]);
        assert_eq!(z[0].share, 0.0);
    }

    #[test]
    fn json_has_the_documented_keys() {
        let v = serde_json::to_value(run("lagd", "balance-xor", 4, 1.9)).unwrap();
        for key in [
            "mode",
            "policy",
            "streams",
            "aggregate_gbps",
            "members",
            "retransmits",
        ] {
            assert!(v.get(key).is_some(), "{key} missing");
        }
        let m = &v["members"][0];
        for key in ["name", "tx_bytes", "rx_bytes", "share"] {
            assert!(m.get(key).is_some(), "members[].{key} missing");
        }
        assert!(v.get("udp_pps").is_none(), "absent options are left out");
    }

    #[test]
    fn text_summary_names_everything() {
        let t = text(&run("lagd", "balance-xor", 4, 1.912));
        assert!(t.contains("lagd balance-xor layer3+4"), "{t}");
        assert!(t.contains("1.912 Gbit/s (100.0 % of the 1.913"), "{t}");
        assert!(t.contains("retransmits  3"), "{t}");
        assert!(t.contains("75.0%"), "{t}");
    }

    #[test]
    fn markdown_pivots_by_streams() {
        let runs = vec![
            run("direct", "none", 1, 0.956),
            run("direct", "none", 2, 1.912),
            run("lagd", "balance-xor", 1, 0.95),
        ];
        let errors = vec![SweepError {
            label: "ovs".into(),
            error: "no ovs\nmore".into(),
        }];
        let md = markdown("sweep", &runs, &errors, &[1, 2]);
        assert!(
            md.contains("| configuration | 1 stream | 2 streams |"),
            "{md}"
        );
        assert!(
            md.contains("| direct veth | 0.956 (75/25) | 1.912 (75/25) |"),
            "{md}"
        );
        assert!(
            md.contains("| lagd balance-xor layer3+4 | 0.950 (75/25) | – |"),
            "{md}"
        );
        assert!(md.contains("- ovs: no ovs\n"), "{md}");
    }

    #[test]
    fn svg_is_well_formed_enough() {
        let runs = vec![
            run("direct", "none", 1, 0.956),
            run("lagd", "balance-xor", 1, 0.5),
        ];
        let svg = svg("a <title>", &runs, &[1, 2]);
        assert!(svg.starts_with("<svg "));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(
            svg.matches("<rect x=").count(),
            2 + 2,
            "2 bars + 2 legend boxes"
        );
        assert!(svg.contains("a &lt;title&gt;"));
        assert!(svg.contains("ceiling 1.913"));
    }

    #[test]
    fn nice_axis_tops() {
        assert_eq!(nice_ceil(1.7), 2.0);
        assert_eq!(nice_ceil(2.1), 2.5);
        assert_eq!(nice_ceil(0.3), 0.5);
        assert_eq!(nice_ceil(18.0), 20.0);
    }

    #[test]
    fn timestamps_are_utc_calendar_dates() {
        assert_eq!(timestamp(0), "19700101-000000");
        // 2000-02-29 12:34:56 UTC, a leap day.
        assert_eq!(timestamp(951_827_696), "20000229-123456");
        // 2026-11-22 00:00:00 UTC.
        assert_eq!(timestamp(1_795_305_600), "20261122-000000");
    }
}
