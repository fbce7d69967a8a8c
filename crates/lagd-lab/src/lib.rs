//! The lab: two network namespaces ("hosts") joined by N veth links, each shaped with tc tbf,
//! a bond at both ends (lagd, or Open vSwitch as a baseline, or no bond at all with addresses
//! directly on the links), and parallel TCP streams from host A to host B; then goodput, each
//! member's share of the bytes, and retransmits.
//!
//! Beyond that: the links may run through a switch namespace (a bridge with port-channels
//! towards the hosts, or Open vSwitch) or each through its own; client hosts on the switch talk
//! to host A (fan-in, fan-out or both); the streams may run inside a VXLAN or Geneve tunnel;
//! and every link, bond and switch port may carry a larger MTU, checked end to end before the
//! traffic starts. Each direction's member shares are reported: the way back is the switch's
//! (or the peer's) choice.
//!
//! * [`topology`]: namespaces, veths, tc shaping and process bookkeeping, all removed on drop.
//! * [`dataplane`]: lagd, the direct baseline, the Open vSwitch baseline.
//! * [`switch`]: a switch between the hosts (Linux bridge or Open vSwitch, with port-channels
//!   towards the hosts), one per link, and client hosts on it.
//! * [`overlay`]: a VXLAN or Geneve tunnel between the hosts, OVN-Kubernetes style.
//! * [`matrix`]: with clients, which client's traffic crossed which member (captures on host
//!   A's members).
//! * [`traffic`]: iperf3 or the built-in generator; failure injection.
//! * [`report`]: text, JSON, and a sweep's markdown table and SVG chart.
//! * [`control`]: SIGINT/SIGTERM handling and the progress line.
//!
//! Everything here needs root. Names are unique per lab (pid + random tag), so several labs can
//! run side by side.
//!
//! A crate of its own, apart from the daemon: it uses lagd-proto and lagd-sys, and starts
//! `lagd` and `lagctl` as programs (by path), so the daemon's library carries no lab. `lagctl
//! lab` is its command line, and lagd's network-namespace tests build their hosts with it.
#![forbid(unsafe_code)]

pub mod control;
pub mod dataplane;
pub mod matrix;
pub mod overlay;
pub mod report;
pub mod switch;
pub mod topology;
pub mod traffic;

use std::fs;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};

use control::{Ctl, Interrupted};
use dataplane::{BondConfig, Setup};
use overlay::OverlayKind;
use report::{FlowFigure, RunResult, SweepError, TCP_GOODPUT_PER_BIT};
use switch::{PortChannel, SwitchConfig, SwitchKind};
use topology::{Fabric, Rate, Side, Topology};
use traffic::{Generator, Route, TrafficSpec};

/// How long the path between the hosts gets to come up (LACP negotiation included).
const REACHABLE_TIMEOUT: Duration = Duration::from_secs(20);

/// One lab run, fully resolved (see `lagctl lab --help` for the meaning of each).
#[derive(Clone, Debug)]
pub struct LabOptions {
    /// Number of veth links.
    pub links: usize,
    /// Per-link rate, both directions.
    pub rate: Rate,
    /// What joins the hosts.
    pub setup: Setup,
    /// Mode and policy (ignored by the direct baseline).
    pub bond: BondConfig,
    /// Parallel streams.
    pub streams: usize,
    /// Measured time.
    pub duration: Duration,
    /// iperf3 or built-in (resolved, never `Auto`).
    pub generator: Generator,
    /// The iperf3 program.
    pub iperf3: PathBuf,
    /// UDP payload length, for a UDP run.
    pub udp_length: Option<usize>,
    /// Take the busiest member down this long after traffic starts.
    pub fail_after: Option<Duration>,
    /// What stands between the hosts (and the clients).
    pub topology: TopologyOptions,
}

/// Which way the traffic goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Host A sends: to host B, or to every client (fan-out).
    #[value(alias = "fan-out")]
    Forward,
    /// Host A receives: from host B, or from every client (fan-in).
    #[value(alias = "fan-in")]
    Reverse,
    /// Both at once.
    Both,
}

impl Direction {
    /// `forward`, `reverse` or `both`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Forward => "forward",
            Self::Reverse => "reverse",
            Self::Both => "both",
        }
    }
}

/// The lab's shape beyond two bonded hosts back to back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopologyOptions {
    /// MTU of the links, the bonds and the switch ports (`None`: 1500).
    pub mtu: Option<u32>,
    /// A switch between the hosts.
    pub switch: Option<SwitchKind>,
    /// One switch for all links (false) or one per link (true).
    pub switch_per_link: bool,
    /// The switch's own hash on its port-channels (kernel policy names).
    pub switch_policy: String,
    /// Client hosts on the switch, one link each (host A is their server).
    pub clients: usize,
    /// Which way the traffic goes.
    pub direction: Direction,
    /// A tunnel between the hosts that carries the streams.
    pub overlay: Option<OverlayKind>,
    /// The lagd binary for the Linux-bridge switch's port-channels.
    pub lagd: PathBuf,
    /// Write what host A's bond carried during the traffic to this pcap file (tcpdump, first
    /// 128 bytes of each frame), for `lagctl plan`. lagd then runs without its kernel fast
    /// path, whose frames a capture on the bond would not see.
    pub capture: Option<PathBuf>,
}

impl Default for TopologyOptions {
    fn default() -> Self {
        Self {
            mtu: None,
            switch: None,
            switch_per_link: false,
            switch_policy: "layer2+3".into(),
            clients: 0,
            direction: Direction::Forward,
            overlay: None,
            lagd: PathBuf::from("lagd"),
            capture: None,
        }
    }
}

/// A sweep: every shape of the lab (MTU × switch × clients × overlay) × every configuration ×
/// every stream count.
#[derive(Clone, Debug)]
pub struct SweepOptions {
    /// Links, rate, duration, generator and the setup to sweep (`mode`, `policy` and `streams`
    /// are taken from the lists below, and the shape's dimensions from theirs when given).
    pub base: LabOptions,
    /// Bonding modes.
    pub modes: Vec<String>,
    /// Hash policies (for the modes that use one).
    pub policies: Vec<String>,
    /// Stream counts.
    pub streams: Vec<usize>,
    /// Also measure the direct baseline as the reference (in the shapes that have room for it:
    /// no clients, no tunnel).
    pub include_direct: bool,
    /// MTUs to sweep (empty: the base's only).
    pub mtus: Vec<u32>,
    /// Switches to sweep (empty: the base's only).
    pub switches: Vec<SweepSwitch>,
    /// Client counts to sweep (empty: the base's only; 0 is host A to host B).
    pub clients: Vec<usize>,
    /// Tunnels to sweep (empty: the base's only).
    pub overlays: Vec<SweepOverlay>,
    /// Where the report goes.
    pub out: PathBuf,
}

/// What stands between the hosts, as a sweep dimension.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SweepSwitch {
    /// The hosts back to back (with clients: a bridge all the same, they need a switch).
    None,
    /// One Linux bridge for every link.
    Bridge,
    /// One Open vSwitch for every link.
    Ovs,
    /// Every link through a bridge of its own (`--switches N`).
    PerLink,
}

impl SweepSwitch {
    /// The switch and whether there is one per link.
    fn resolve(self) -> (Option<SwitchKind>, bool) {
        match self {
            Self::None => (None, false),
            Self::Bridge => (Some(SwitchKind::Bridge), false),
            Self::Ovs => (Some(SwitchKind::Ovs), false),
            Self::PerLink => (Some(SwitchKind::Bridge), true),
        }
    }
}

/// A tunnel carrying the streams, as a sweep dimension.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SweepOverlay {
    /// No tunnel.
    None,
    /// VXLAN.
    Vxlan,
    /// Geneve (refused, by name, where the kernel lacks it).
    Geneve,
}

impl SweepOverlay {
    fn resolve(self) -> Option<OverlayKind> {
        match self {
            Self::None => None,
            Self::Vxlan => Some(OverlayKind::Vxlan),
            Self::Geneve => Some(OverlayKind::Geneve),
        }
    }
}

/// One configuration a sweep visits: what joins the hosts, their bond, and the lab's shape.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepConfig {
    /// lagd, a baseline.
    pub setup: Setup,
    /// Mode and policy.
    pub bond: BondConfig,
    /// MTU, switch, clients, tunnel.
    pub topology: TopologyOptions,
}

impl SweepConfig {
    /// `lagd balance-xor layer3+4, ovs switch, 4 clients, mtu 9000`, as the progress line and
    /// the errors name it.
    pub fn label(&self) -> String {
        let mut label = match self.setup {
            Setup::Direct => "direct veth".to_string(),
            Setup::Bridge => "direct veth towards a bridge".to_string(),
            _ => format!(
                "{} {} {}",
                self.setup.name(),
                self.bond.mode,
                self.bond.policy
            ),
        };
        label.push_str(&shape_text(&self.topology));
        label
    }
}

/// `, bridge switch, 4 clients, vxlan, mtu 9000` (empty for two hosts back to back at 1500).
fn shape_text(t: &TopologyOptions) -> String {
    let mut s = String::new();
    match (t.switch, t.switch_per_link) {
        (None, _) => {}
        (Some(_), true) => s.push_str(", one switch per link"),
        (Some(SwitchKind::Bridge), false) => s.push_str(", bridge switch"),
        (Some(SwitchKind::Ovs), false) => s.push_str(", ovs switch"),
    }
    if t.clients > 0 {
        s.push_str(&format!(", {} clients", t.clients));
    }
    if let Some(o) = t.overlay {
        s.push_str(&format!(", {}", o.name()));
    }
    if let Some(m) = t.mtu.filter(|&m| m != 1500) {
        s.push_str(&format!(", mtu {m}"));
    }
    s
}

/// What a sweep measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SweepOutcome {
    /// Every run, in order.
    pub runs: Vec<RunResult>,
    /// Configurations that failed.
    pub errors: Vec<SweepError>,
    /// The directory the report was written to.
    pub out: PathBuf,
}

/// Resolves [`Generator::Auto`]: iperf3 if installed (and no failure injection, which needs the
/// built-in generator's timestamps), else built-in.
pub fn resolve_generator(wanted: Generator, fail: bool) -> Generator {
    match wanted {
        Generator::Auto if !fail && topology::in_path("iperf3") => Generator::Iperf3,
        Generator::Auto => Generator::Builtin,
        other => other,
    }
}

/// True if the error (or its cause) is an interruption by a signal.
pub fn is_interrupted(e: &anyhow::Error) -> bool {
    e.downcast_ref::<Interrupted>().is_some()
}

/// Builds the topology and the dataplane, runs the traffic once, tears everything down.
pub fn run_once(opts: &LabOptions, ctl: &Ctl) -> Result<RunResult> {
    let (mut topo, routes) = build(opts, ctl)?;
    let result = measure(&mut topo, ctl, opts, &routes, opts.streams)?;
    ctl.progress().phase("cleaning up");
    topo.teardown()?;
    ctl.progress().clear();
    Ok(result)
}

fn build(opts: &LabOptions, ctl: &Ctl) -> Result<(Topology, Vec<Route>)> {
    let t = &opts.topology;
    ctl.check()?;
    ctl.progress().phase("creating hosts and links");
    let fabric = match (t.switch, t.switch_per_link) {
        (None, _) => Fabric::Direct,
        (Some(_), false) => Fabric::Switch,
        (Some(_), true) => Fabric::SwitchPerLink,
    };
    let mut topo = Topology::create_with(opts.links, fabric)?;
    if let Some(kind) = t.overlay {
        overlay::check_kernel(&topo, kind)?;
    }
    for _ in 0..t.clients {
        topo.add_client()?;
    }
    if let Some(mtu) = t.mtu {
        topo.set_mtu(mtu)?;
    }
    ctl.check()?;
    ctl.progress()
        .phase(&format!("starting the {} dataplane", opts.setup.name()));
    let mut bond = BondConfig {
        mtu: t.mtu,
        ..opts.bond.clone()
    };
    if t.capture.is_some() && matches!(opts.setup, Setup::Lagd(_)) {
        // The kernel fast path sends the host's frames from the TAP's egress hook, before
        // the point where a capture on the TAP sees them: capture through lagd itself.
        bond.extra_opts = format!("{} fastpath=off", bond.extra_opts.trim());
    }
    let pairs = dataplane::bring_up(&mut topo, ctl, &opts.setup, &bond)?;
    if let Some(kind) = t.switch {
        ctl.progress().phase("starting the switch");
        switch::bring_up(&mut topo, ctl, &switch_config(opts, kind), &t.lagd)?;
    }
    let server = pairs[0].0;
    for (k, c) in topo.clients().to_vec().iter().enumerate() {
        let addr = topo.address(10 + k as u8);
        topology::run(
            "ip",
            &[
                "-n",
                &c.ns,
                "addr",
                "add",
                &format!("{addr}/24"),
                "dev",
                &c.dev,
            ],
        )?;
    }
    // After the dataplane: Open vSwitch deletes a port's qdisc when it adds the port.
    topo.shape(&opts.rate)?;
    let (a, b) = (topo.ns(Side::A).to_string(), topo.ns(Side::B).to_string());
    let route = |src, dst, src_ns: &str, dst_ns: &str, label: String| Route {
        src,
        dst,
        src_ns: src_ns.to_string(),
        dst_ns: dst_ns.to_string(),
        label,
    };
    let mut forward = Vec::new();
    let mut reverse = Vec::new();
    if t.clients > 0 {
        for (k, c) in topo.clients().iter().enumerate() {
            let addr = topo.address(10 + k as u8);
            forward.push(route(server, addr, &a, &c.ns, format!("a>c{k}")));
            reverse.push(route(addr, server, &c.ns, &a, format!("c{k}>a")));
        }
    } else {
        let pairs = match t.overlay {
            Some(kind) => {
                let outer_mtu = t.mtu.unwrap_or(1500);
                let inner = overlay::bring_up(&topo, kind, pairs[0], outer_mtu)?;
                if t.switch == Some(SwitchKind::Ovs) {
                    overlay::checksum_in_software(&topo)?;
                }
                vec![inner]
            }
            None => pairs,
        };
        for &(x, y) in &pairs {
            forward.push(route(x, y, &a, &b, "a>b".into()));
            reverse.push(route(y, x, &b, &a, "b>a".into()));
        }
    }
    let routes = match t.direction {
        Direction::Forward => forward,
        Direction::Reverse => reverse,
        Direction::Both => forward.into_iter().chain(reverse).collect(),
    };
    ctl.progress()
        .phase("waiting for the path between the hosts");
    traffic::wait_reachable(ctl, &routes, REACHABLE_TIMEOUT)?;
    if let Some(mtu) = t.mtu {
        ctl.progress().phase("checking the MTU end to end");
        let inner = match (t.overlay, t.clients) {
            (Some(_), 0) => mtu.saturating_sub(overlay::TUNNEL_OVERHEAD),
            _ => mtu,
        };
        for r in &routes {
            check_path_mtu(r, inner)?;
        }
    }
    Ok((topo, routes))
}

/// Checks that an IPv4 packet of exactly `mtu` bytes with Don't Fragment set crosses the route
/// and is answered, and that one byte more is refused at the sender (so the sender's interface
/// has exactly that MTU). Up to three tries each, for a slow machine.
pub fn check_path_mtu(r: &Route, mtu: u32) -> Result<()> {
    topology::require_program("ping", "iputils-ping")?;
    let ping = |size: u32| -> bool {
        let (size, dst) = (size.saturating_sub(28).to_string(), r.dst.to_string());
        (0..3).any(|_| {
            topology::run(
                "ip",
                &[
                    "netns", "exec", &r.src_ns, "ping", "-n", "-q", "-M", "do", "-c", "1", "-W",
                    "2", "-s", &size, &dst,
                ],
            )
            .is_ok()
        })
    };
    if !ping(mtu) {
        anyhow::bail!(
            "MTU {mtu} is not applied end to end: a {mtu}-byte packet with Don't Fragment from {} to {} got no answer",
            r.src,
            r.dst
        );
    }
    if ping(mtu + 1) {
        anyhow::bail!(
            "a {}-byte packet crossed from {} to {}: the path's MTU is above {mtu}",
            mtu + 1,
            r.src,
            r.dst
        );
    }
    Ok(())
}

/// Every address the routes use, with the interface that holds it.
fn endpoints(routes: &[Route]) -> Result<Vec<report::Endpoint>> {
    let mut out: Vec<report::Endpoint> = Vec::new();
    for r in routes {
        let (src_host, dst_host) = r.label.split_once('>').unwrap_or(("?", "?"));
        for (host, ns, ip) in [(src_host, &r.src_ns, r.src), (dst_host, &r.dst_ns, r.dst)] {
            if out.iter().any(|e| e.ip == ip.to_string()) {
                continue;
            }
            let (dev, mac) = topology::interface_with_address(ns, ip)?;
            out.push(report::Endpoint {
                host: host.to_string(),
                ip: ip.to_string(),
                dev,
                mac,
            });
        }
    }
    Ok(out)
}

/// The switch a run asks for: its port-channels are what a switch would configure for the
/// hosts' bonds.
fn switch_config(opts: &LabOptions, kind: SwitchKind) -> SwitchConfig {
    let channel = match &opts.setup {
        s if s.without_bond() => PortChannel::None,
        Setup::Ovs => {
            let lacp = dataplane::ovs_bond(&opts.bond.mode, &opts.bond.policy)
                .map(|o| o.lacp != "off")
                .unwrap_or(false);
            PortChannel::for_host(&opts.bond.mode, lacp)
        }
        _ => PortChannel::for_host(&opts.bond.mode, false),
    };
    SwitchConfig {
        kind,
        policy: opts.topology.switch_policy.clone(),
        channel,
        mtu: opts.topology.mtu,
    }
}

/// The flows of a run: with clients, `streams` per client and direction; without, `streams`
/// spread in each direction over one flow per link, cycling over the address pairs (a direct
/// baseline has one per link, a bond one): every setup runs as many generator processes.
fn flows(opts: &LabOptions, routes: &[Route], streams: usize) -> Vec<traffic::Flow> {
    if opts.topology.clients > 0 {
        return routes
            .iter()
            .map(|r| traffic::Flow {
                route: r.clone(),
                streams,
            })
            .collect();
    }
    let (fwd, rev): (Vec<Route>, Vec<Route>) =
        routes.iter().cloned().partition(|r| r.label == "a>b");
    let mut out = traffic::spread(&fwd, opts.links, streams);
    out.extend(traffic::spread(&rev, opts.links, streams));
    out
}

fn measure(
    topo: &mut Topology,
    ctl: &Ctl,
    opts: &LabOptions,
    routes: &[Route],
    streams: usize,
) -> Result<RunResult> {
    let spec = TrafficSpec {
        flows: flows(opts, routes, streams),
        duration: opts.duration,
        udp_length: opts.udp_length,
        fail_after: opts.fail_after,
        generator: opts.generator,
    };
    let t = &opts.topology;
    let switch_before = topo.switch_rx_bytes()?;
    let tunnel_before = match t.overlay {
        Some(_) if t.clients == 0 => Some(overlay::tunnel_bytes(topo)?),
        _ => None,
    };
    let capture = match &t.capture {
        Some(file) => Some(start_capture(topo, routes, file)?),
        None => None,
    };
    let client_ips: Vec<std::net::Ipv4Addr> =
        (0..t.clients).map(|k| topo.address(10 + k as u8)).collect();
    let server = routes.first().map(|r| {
        if r.label.starts_with("a>") {
            r.src
        } else {
            r.dst
        }
    });
    let member_capture = match server {
        Some(_) if t.clients > 0 => Some(matrix::start(topo)?),
        _ => None,
    };
    let tr = traffic::run(topo, ctl, &spec, &opts.iperf3)?;
    if let Some(id) = capture {
        topo.stop(id);
    }
    let client_members = match (member_capture, server) {
        (Some(cap), Some(server)) => matrix::finish(topo, cap, server, &client_ips, tr.seconds)?,
        _ => Vec::new(),
    };
    ctl.progress().clear();
    let switch_after = topo.switch_rx_bytes()?;
    let tunnel = match tunnel_before {
        Some((tx, rx)) => {
            let (tx1, rx1) = overlay::tunnel_bytes(topo)?;
            Some((tx1.saturating_sub(tx), rx1.saturating_sub(rx)))
        }
        None => None,
    };
    let names: Vec<String> = topo.links().iter().map(|l| l.name.clone()).collect();
    let counters: Vec<(u64, u64)> = tr
        .members
        .iter()
        .map(|c| (c.tx_bytes, c.rx_bytes))
        .collect();
    let (mode, policy) = if opts.setup.without_bond() {
        ("none".to_string(), "none".to_string())
    } else {
        (opts.bond.mode.clone(), opts.bond.policy.clone())
    };
    let ovs = match opts.setup {
        Setup::Ovs => dataplane::ovs_bond(&opts.bond.mode, &opts.bond.policy).ok(),
        _ => None,
    };
    let mtu = t.mtu.unwrap_or(1500);
    let ceiling = (!opts.rate.is_unlimited()
        && opts.udp_length.is_none()
        && t.clients == 0
        && t.overlay.is_none())
    .then(|| {
        let directions = if t.direction == Direction::Both {
            2.0
        } else {
            1.0
        };
        directions * opts.links as f64 * opts.rate.bits_per_second() as f64 * goodput_per_bit(mtu)
            / 1e9
    });
    let switch_cfg = t.switch.map(|k| switch_config(opts, k));
    let endpoints = endpoints(routes)?;
    Ok(RunResult {
        setup: opts.setup.name().to_string(),
        mode,
        policy,
        ovs_bond_mode: ovs.as_ref().map(|o| o.bond_mode.to_string()),
        lacp: ovs.as_ref().map(|o| o.lacp.to_string()),
        links: opts.links,
        rate: opts.rate.as_tc().to_string(),
        streams,
        protocol: if opts.udp_length.is_some() {
            "udp"
        } else {
            "tcp"
        }
        .to_string(),
        generator: match opts.generator {
            Generator::Builtin => "builtin",
            Generator::Iperf3Each => "iperf3-each",
            _ => "iperf3",
        }
        .to_string(),
        duration_s: round(tr.seconds, 3),
        aggregate_gbps: round(tr.bits_per_second / 1e9, 4),
        ceiling_gbps: ceiling.map(|c| round(c, 4)),
        members: report::shares(&names, &counters),
        retransmits: tr.retransmits,
        udp_pps: tr.udp_pps.map(|p| p.round()),
        udp_length: opts.udp_length,
        udp_lost_percent: tr.udp_lost_percent.map(|p| round(p, 2)),
        max_stall_ms: tr.max_stall_ms.map(|m| round(m, 2)),
        failover: tr.failover.map(|mut f| {
            f.gap_ms = round(f.gap_ms, 2);
            f.at_s = round(f.at_s, 3);
            f
        }),
        mtu,
        path_mtu: t.mtu.map(|m| match (t.overlay, t.clients) {
            (Some(_), 0) => m.saturating_sub(overlay::TUNNEL_OVERHEAD),
            _ => m,
        }),
        direction: t.direction.name().to_string(),
        switch: t.switch.map(|k| report::SwitchFigure {
            kind: k,
            switches: topo.switches().len(),
            policy: switch_cfg
                .as_ref()
                .map(|c| c.policy.clone())
                .unwrap_or_default(),
            // One switch per link (or one link): each host has one port per switch.
            port_channel: match &switch_cfg {
                Some(c) if topo.switches().len() == 1 && opts.links > 1 => c.channel,
                _ => PortChannel::None,
            },
            rx_bytes: switch_after.saturating_sub(switch_before),
        }),
        clients: t.clients,
        overlay: t.overlay.map(|k| report::OverlayFigure {
            kind: k,
            inner_mtu: mtu.saturating_sub(overlay::TUNNEL_OVERHEAD),
            tunnel_tx_bytes: tunnel.map(|x| x.0).unwrap_or(0),
            tunnel_rx_bytes: tunnel.map(|x| x.1).unwrap_or(0),
        }),
        flows: spec
            .flows
            .iter()
            .zip(&tr.flows_bps)
            .map(|(f, &bps)| FlowFigure {
                label: f.route.label.clone(),
                src: f.route.src.to_string(),
                dst: f.route.dst.to_string(),
                streams: f.streams,
                gbps: round(bps / 1e9, 4),
            })
            .collect(),
        endpoints,
        client_members,
        prefix: topo.prefix().to_string(),
    })
}

/// Starts tcpdump on host A's bond (the interface holding host A's outer address: with a
/// tunnel, the bond carries the encapsulated frames) writing to `file`, and waits until it
/// listens.
fn start_capture(
    topo: &mut Topology,
    routes: &[Route],
    file: &std::path::Path,
) -> Result<topology::ProcessId> {
    topology::require_program("tcpdump", "tcpdump")?;
    let a = topo.ns(Side::A).to_string();
    // The bond's address is the lab's host 1 (the tunnel's inner one is elsewhere).
    let outer = topo.address(1);
    let dev = match topology::interface_with_address(&a, outer) {
        Ok((dev, _)) => dev,
        Err(_) => {
            let r = routes.first().context("no route to capture")?;
            let ip = if r.src_ns == a { r.src } else { r.dst };
            topology::interface_with_address(&a, ip)?.0
        }
    };
    let path = file.to_string_lossy().into_owned();
    let id = topo.spawn(
        Side::A,
        "tcpdump-capture",
        std::path::Path::new("tcpdump"),
        // --immediate-mode: the frames of a ring block not yet full when tcpdump stops would
        // not be written.
        &[
            "-i",
            &dev,
            "-n",
            "-s",
            "128",
            "--immediate-mode",
            "-U",
            "-w",
            &path,
        ],
    )?;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !topo.log_tail(id, 5).contains("listening on") {
        if let Some(status) = topo.try_wait(id)? {
            anyhow::bail!(
                "tcpdump exited ({status}) before listening: {}",
                topo.log_tail(id, 5)
            );
        }
        if std::time::Instant::now() > deadline {
            anyhow::bail!("tcpdump did not start listening within 10 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(id)
}

/// TCP goodput per bit of link rate at `mtu` (TCP timestamps: 52 bytes of headers in the
/// packet, 14 of Ethernet header outside it, as tbf counts).
pub fn goodput_per_bit(mtu: u32) -> f64 {
    if mtu == 1500 {
        return TCP_GOODPUT_PER_BIT;
    }
    let m = f64::from(mtu.max(100));
    (m - 52.0) / (m + 14.0)
}

fn round(v: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (v * f).round() / f
}

/// The shapes a sweep visits, in order (MTU, then switch, then clients, then tunnel): every
/// combination of the swept dimensions that a lab can be, once. Clients need a switch (a bridge
/// where the combination names none) and one for every link; a tunnel runs between host A and
/// host B, so not with clients.
pub fn sweep_shapes(opts: &SweepOptions) -> Vec<TopologyOptions> {
    let base = &opts.base.topology;
    let mtus: Vec<Option<u32>> = if opts.mtus.is_empty() {
        vec![base.mtu]
    } else {
        opts.mtus.iter().map(|&m| Some(m)).collect()
    };
    let switches: Vec<(Option<SwitchKind>, bool)> = if opts.switches.is_empty() {
        vec![(base.switch, base.switch_per_link)]
    } else {
        opts.switches.iter().map(|s| s.resolve()).collect()
    };
    let clients = if opts.clients.is_empty() {
        vec![base.clients]
    } else {
        opts.clients.clone()
    };
    let overlays: Vec<Option<OverlayKind>> = if opts.overlays.is_empty() {
        vec![base.overlay]
    } else {
        opts.overlays.iter().map(|o| o.resolve()).collect()
    };
    let mut out: Vec<TopologyOptions> = Vec::new();
    for &mtu in &mtus {
        for &(switch, per_link) in &switches {
            for &n in &clients {
                for &overlay in &overlays {
                    if n > 0 && (per_link || overlay.is_some()) {
                        continue;
                    }
                    let shape = TopologyOptions {
                        mtu,
                        switch: if n > 0 {
                            switch.or(Some(SwitchKind::Bridge))
                        } else {
                            switch
                        },
                        switch_per_link: per_link,
                        clients: n,
                        overlay,
                        ..base.clone()
                    };
                    if !out.contains(&shape) {
                        out.push(shape);
                    }
                }
            }
        }
    }
    out
}

/// The configurations a sweep visits, in order: every shape, and in each the direct baseline
/// (where it applies) and every mode × policy.
pub fn sweep_configs(opts: &SweepOptions) -> Vec<SweepConfig> {
    sweep_shapes(opts)
        .into_iter()
        .flat_map(|shape| sweep_configs_in(opts, shape))
        .collect()
}

fn sweep_configs_in(opts: &SweepOptions, shape: TopologyOptions) -> Vec<SweepConfig> {
    let mut out = Vec::new();
    let base = &BondConfig {
        mtu: shape.mtu,
        ..opts.base.bond.clone()
    };
    // The direct baseline has no bond for clients or a tunnel to use.
    let direct_fits = shape.clients == 0 && shape.overlay.is_none();
    if direct_fits && (opts.include_direct || opts.base.setup == Setup::Direct) {
        out.push(SweepConfig {
            setup: Setup::Direct,
            bond: base.clone(),
            topology: shape.clone(),
        });
    }
    if opts.base.setup == Setup::Direct {
        return out;
    }
    let mut seen_ovs = Vec::new();
    for mode in &opts.modes {
        let policies: Vec<&String> = if dataplane::mode_uses_policy(mode) {
            opts.policies.iter().collect()
        } else {
            opts.policies.iter().take(1).collect()
        };
        for policy in policies {
            let bond = BondConfig {
                mode: mode.clone(),
                policy: policy.clone(),
                extra_opts: base.extra_opts.clone(),
                mtu: base.mtu,
            };
            if opts.base.setup == Setup::Ovs {
                // Several kernel configurations map to the same OVS bond: measure it once.
                if let Ok(o) = dataplane::ovs_bond(mode, policy) {
                    if seen_ovs.contains(&o) {
                        continue;
                    }
                    seen_ovs.push(o);
                }
            }
            out.push(SweepConfig {
                setup: opts.base.setup.clone(),
                bond,
                topology: shape.clone(),
            });
        }
    }
    out
}

/// Runs a sweep and writes `sweep.md`, `sweep.svg` and `sweep.json` into `opts.out` (also the
/// part measured so far when interrupted, before returning the interruption).
pub fn sweep(opts: &SweepOptions, ctl: &Ctl) -> Result<SweepOutcome> {
    fs::create_dir_all(&opts.out).with_context(|| format!("creating {}", opts.out.display()))?;
    let mut outcome = SweepOutcome {
        runs: Vec::new(),
        errors: Vec::new(),
        out: opts.out.clone(),
    };
    let configs = sweep_configs(opts);
    let mut stopped = None;
    for (i, config) in configs.iter().enumerate() {
        let lab = LabOptions {
            setup: config.setup.clone(),
            bond: config.bond.clone(),
            topology: config.topology.clone(),
            ..opts.base.clone()
        };
        let label = config.label();
        ctl.progress()
            .phase(&format!("[{}/{}] {label}", i + 1, configs.len()));
        match sweep_one(&lab, ctl, &opts.streams, &mut outcome.runs) {
            Ok(()) => {}
            Err(e) if is_interrupted(&e) => {
                stopped = Some(e);
                break;
            }
            Err(e) => {
                ctl.progress().clear();
                eprintln!("lagctl lab: {label}: {e:#}");
                outcome.errors.push(SweepError {
                    label,
                    error: format!("{e:#}"),
                });
            }
        }
    }
    ctl.progress().clear();
    write_sweep(opts, &outcome)?;
    match stopped {
        Some(e) => Err(e),
        None => Ok(outcome),
    }
}

fn sweep_one(
    lab: &LabOptions,
    ctl: &Ctl,
    streams: &[usize],
    runs: &mut Vec<RunResult>,
) -> Result<()> {
    let (mut topo, routes) = build(lab, ctl)?;
    for &n in streams {
        runs.push(measure(&mut topo, ctl, lab, &routes, n)?);
    }
    topo.teardown()
}

fn write_sweep(opts: &SweepOptions, outcome: &SweepOutcome) -> Result<()> {
    let b = &opts.base;
    let rate = if b.rate.is_unlimited() {
        "unlimited".to_string()
    } else {
        b.rate.as_tc().to_string()
    };
    let t = &b.topology;
    // The base's shape, but for the dimensions swept (each row names those).
    let mut shape = String::new();
    if let Some(m) = t.mtu.filter(|_| opts.mtus.is_empty()) {
        shape.push_str(&format!(", MTU {m}"));
    }
    match t.switch.filter(|_| opts.switches.is_empty()) {
        Some(k) => {
            let n = if t.switch_per_link {
                "one per link"
            } else {
                "one"
            };
            let kind = match k {
                SwitchKind::Bridge => "bridge",
                SwitchKind::Ovs => "ovs",
            };
            shape.push_str(&format!(
                ", {kind} switch ({n}, hashing {})",
                t.switch_policy
            ));
        }
        None if !opts.switches.is_empty() => {
            shape.push_str(&format!(", switches hashing {}", t.switch_policy));
        }
        None => {}
    }
    if t.clients > 0 && opts.clients.is_empty() {
        shape.push_str(&format!(", {} clients", t.clients));
    }
    if t.direction != Direction::Forward {
        shape.push_str(&format!(", direction {}", t.direction.name()));
    }
    if let Some(o) = t.overlay.filter(|_| opts.overlays.is_empty()) {
        shape.push_str(&format!(", {} overlay", o.name()));
    }
    let title = format!(
        "lagctl lab sweep: {} links × {rate}{shape}, {} {}",
        b.links,
        if b.udp_length.is_some() { "UDP" } else { "TCP" },
        match b.generator {
            Generator::Builtin => "built-in generator",
            Generator::Iperf3Each => "iperf3, one process per stream",
            _ => "iperf3",
        }
    );
    let write = |name: &str, text: String| -> Result<()> {
        let path = opts.out.join(name);
        fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
    };
    write(
        "sweep.md",
        report::markdown(&title, &outcome.runs, &outcome.errors, &opts.streams),
    )?;
    write(
        "sweep.svg",
        report::svg(&title, &outcome.runs, &opts.streams),
    )?;
    write("sweep.json", serde_json::to_string_pretty(outcome)? + "\n")?;
    Ok(())
}

#[cfg(test)]
mod test {
    use super::*;

    fn base(setup: Setup) -> SweepOptions {
        SweepOptions {
            base: LabOptions {
                links: 2,
                rate: Rate::parse("1gbit").unwrap(),
                setup,
                bond: BondConfig {
                    mode: "balance-xor".into(),
                    policy: "layer3+4".into(),
                    extra_opts: String::new(),
                    mtu: None,
                },
                streams: 1,
                duration: Duration::from_secs(1),
                generator: Generator::Builtin,
                iperf3: "iperf3".into(),
                udp_length: None,
                fail_after: None,
                topology: TopologyOptions::default(),
            },
            modes: vec!["balance-xor".into(), "active-backup".into()],
            policies: vec!["layer2".into(), "layer2+3".into(), "layer3+4".into()],
            streams: vec![1, 2],
            include_direct: true,
            mtus: Vec::new(),
            switches: Vec::new(),
            clients: Vec::new(),
            overlays: Vec::new(),
            out: "x".into(),
        }
    }

    #[test]
    fn sweep_visits_modes_times_policies_plus_direct() {
        let c = sweep_configs(&base(Setup::Lagd("lagd".into())));
        let names: Vec<String> = c.iter().map(SweepConfig::label).collect();
        assert_eq!(
            names,
            [
                "direct veth",
                "lagd balance-xor layer2",
                "lagd balance-xor layer2+3",
                "lagd balance-xor layer3+4",
                "lagd active-backup layer2",
            ]
        );
    }

    #[test]
    fn sweep_repeats_every_configuration_per_mtu() {
        let mut o = base(Setup::Lagd("lagd".into()));
        o.mtus = vec![1500, 9000];
        let c = sweep_configs(&o);
        assert_eq!(c.len(), 2 * 5);
        assert_eq!(c[0].bond.mtu, Some(1500));
        assert_eq!(c[5].bond.mtu, Some(9000));
        assert_eq!(c[5].topology.mtu, Some(9000));
        assert_eq!(c[5].setup, Setup::Direct);
    }

    #[test]
    fn sweep_crosses_switches_clients_and_tunnels_where_a_lab_can_be() {
        let mut o = base(Setup::Lagd("lagd".into()));
        o.modes = vec!["802.3ad".into()];
        o.policies = vec!["layer2".into()];
        o.switches = vec![
            SweepSwitch::None,
            SweepSwitch::Bridge,
            SweepSwitch::Ovs,
            SweepSwitch::PerLink,
        ];
        o.clients = vec![0, 4];
        o.overlays = vec![SweepOverlay::None, SweepOverlay::Vxlan];
        let names: Vec<String> = sweep_configs(&o).iter().map(SweepConfig::label).collect();
        let lagd = "lagd 802.3ad layer2";
        let want: Vec<String> = [
            // Back to back: direct and lagd, then the tunnel (no direct: one address per host).
            "direct veth",
            lagd,
            &format!("{lagd}, vxlan"),
            // Clients without a switch get a bridge (once: the bridge's own clients are it).
            &format!("{lagd}, bridge switch, 4 clients"),
            "direct veth, bridge switch",
            &format!("{lagd}, bridge switch"),
            &format!("{lagd}, bridge switch, vxlan"),
            "direct veth, ovs switch",
            &format!("{lagd}, ovs switch"),
            &format!("{lagd}, ovs switch, vxlan"),
            &format!("{lagd}, ovs switch, 4 clients"),
            // One switch per link: no clients (they need one switch for every link).
            "direct veth, one switch per link",
            &format!("{lagd}, one switch per link"),
            &format!("{lagd}, one switch per link, vxlan"),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(names, want);
        let shapes = sweep_shapes(&o);
        assert_eq!(shapes.len(), 10);
        assert!(
            shapes
                .iter()
                .all(|s| s.clients == 0 || (s.switch.is_some() && s.overlay.is_none()))
        );
        assert!(shapes.iter().all(|s| !(s.switch_per_link && s.clients > 0)));
    }

    #[test]
    fn unswept_dimensions_keep_the_base() {
        let mut o = base(Setup::Lagd("lagd".into()));
        o.base.topology.switch = Some(SwitchKind::Ovs);
        o.base.topology.mtu = Some(9000);
        o.clients = vec![1, 4];
        let shapes = sweep_shapes(&o);
        assert_eq!(shapes.len(), 2);
        for (s, n) in shapes.iter().zip([1, 4]) {
            assert_eq!(s.switch, Some(SwitchKind::Ovs));
            assert_eq!(s.mtu, Some(9000));
            assert_eq!(s.clients, n);
        }
        // With clients, no direct baseline: only the two bond configurations per shape.
        assert_eq!(sweep_configs(&o).len(), 2 * 4);
    }

    #[test]
    fn ovs_sweep_measures_each_ovs_bond_once() {
        let c = sweep_configs(&base(Setup::Ovs));
        // balance-xor layer2 and layer2+3 are both balance-slb without LACP.
        assert_eq!(c.len(), 1 + 3);
        let direct_only = sweep_configs(&base(Setup::Direct));
        assert_eq!(direct_only.len(), 1);
    }

    #[test]
    fn auto_generator_prefers_builtin_for_failover() {
        assert_eq!(resolve_generator(Generator::Auto, true), Generator::Builtin);
        assert_eq!(
            resolve_generator(Generator::Iperf3, false),
            Generator::Iperf3
        );
    }
}
