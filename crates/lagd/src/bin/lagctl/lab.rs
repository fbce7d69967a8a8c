//! `lagctl lab`: two network namespaces joined by shaped veth links, a bond at both ends, and
//! parallel TCP streams through it; prints goodput, each member's share and retransmits. With
//! `--switch`, `--switches`, `--clients`, `--direction`, `--overlay` and `--mtu`, the seeds'
//! topologies: a switch hashing the way back, one switch per link, clients fanning in or out,
//! tunnelled pod traffic and jumbo frames.
//!
//! Needs root. Always removes what it made, also on failure and on SIGINT/SIGTERM (which end the
//! run with exit code 1 after the cleanup).

use std::io::{self, Write};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use lagd::cli::CliError;
use lagd_lab::control::{Ctl, Progress};
use lagd_lab::dataplane::{BondConfig, Setup};
use lagd_lab::overlay::OverlayKind;
use lagd_lab::switch::SwitchKind;
use lagd_lab::topology::{Rate, is_root, require_program};
use lagd_lab::traffic::Generator;
use lagd_lab::{
    self as lab, Direction, LabOptions, SweepOptions, SweepOverlay, SweepSwitch, TopologyOptions,
    report,
};

/// A baseline to measure instead of lagd.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Baseline {
    /// No bond: one address pair directly on each veth, streams spread over the links.
    Direct,
    /// As direct, but host B is a Linux bridge over its link ends with its addresses on the
    /// bridge: the switch that balance-tlb and balance-alb run towards in the lab, without lagd.
    Bridge,
    /// An Open vSwitch userspace bond (datapath_type=netdev, userspace TSO) at both ends.
    Ovs,
}

/// What `lagctl lab` was asked to do.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct LabArgs {
    /// Number of veth links between the hosts.
    #[arg(long, default_value_t = 2)]
    pub links: usize,
    /// Rate of each link in both directions, as tc spells it (tbf, burst 256kb); 0 = unlimited.
    #[arg(long, default_value = "1gbit")]
    pub rate: String,
    /// Bonding mode (kernel names: balance-xor, 802.3ad, active-backup, balance-rr, ...).
    #[arg(long, default_value = "balance-xor")]
    pub mode: String,
    /// Transmit hash policy (kernel names: layer2, layer2+3, layer3+4, encap2+3, encap3+4,
    /// vlan+srcmac).
    #[arg(long, default_value = "layer3+4")]
    pub policy: String,
    /// Parallel TCP streams (the direct baseline spreads them over the links). Every setup
    /// runs one generator process pair per link, each with its share of the streams.
    #[arg(long, default_value_t = 8)]
    pub streams: usize,
    /// Seconds of traffic.
    #[arg(long, default_value_t = 10)]
    pub duration: u64,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Measure a baseline instead of lagd.
    #[arg(long, value_enum)]
    pub baseline: Option<Baseline>,
    /// Traffic generator: iperf3 if installed (auto), or the built-in TCP generator.
    #[arg(long, value_enum, default_value = "auto")]
    pub generator: Generator,
    /// The lagd binary (default: `lagd` beside this executable).
    #[arg(long)]
    pub lagd: Option<PathBuf>,
    /// Measure the bare TAP ↔ AF_PACKET relay instead of lagd (the dataplane benchmark's floor:
    /// `cargo build --release -p lagd --example bare_relay`, then pass
    /// target/release/examples/bare_relay).
    #[arg(long, conflicts_with_all = ["baseline", "lagd"])]
    pub relay: Option<PathBuf>,
    /// More lagd options, appended to `mode=M xmit_hash_policy=P miimon=100`.
    #[arg(long, default_value = "")]
    pub bond_opts: String,
    /// UDP instead of TCP: datagrams of --udp-length bytes at full speed (iperf3 -u -b 0).
    #[arg(long)]
    pub udp: bool,
    /// UDP payload bytes per datagram.
    #[arg(long, default_value_t = 64)]
    pub udp_length: usize,
    /// Take the busiest member link down this many seconds into the run and report the
    /// traffic gap that follows (built-in generator).
    #[arg(long)]
    pub fail_after: Option<f64>,
    /// Run every mode × policy × stream count (plus the direct baseline) and write a markdown
    /// table, an SVG chart and JSON to --out.
    #[arg(long)]
    pub sweep: bool,
    /// Directory for --sweep (default: lab-sweep-YYYYMMDD-HHMMSS, UTC).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Modes for --sweep.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "balance-xor,802.3ad,active-backup"
    )]
    pub sweep_modes: Vec<String>,
    /// Policies for --sweep (for the modes that hash).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "layer2,layer2+3,layer3+4"
    )]
    pub sweep_policies: Vec<String>,
    /// MTUs for --sweep (each configuration at each; default: --mtu only).
    #[arg(long, value_delimiter = ',')]
    pub sweep_mtus: Vec<u32>,
    /// Stream counts for --sweep.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16")]
    pub sweep_streams: Vec<usize>,
    /// Switches for --sweep (none, bridge, ovs, per-link: one bridge per link); each
    /// configuration through each (default: --switch/--switches only).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub sweep_switches: Vec<SweepSwitch>,
    /// Client counts for --sweep (0: host A to host B); clients need one switch for every
    /// link, a bridge where none is named (default: --clients only).
    #[arg(long, value_delimiter = ',')]
    pub sweep_clients: Vec<usize>,
    /// Tunnels for --sweep (none, vxlan, geneve), between host A and host B only (default:
    /// --overlay only).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub sweep_overlays: Vec<SweepOverlay>,
    /// No progress line on standard error.
    #[arg(long)]
    pub quiet: bool,
    /// MTU of the links, the bonds, the switch ports and the client links (default 1500).
    #[arg(long)]
    pub mtu: Option<u32>,
    /// A switch between the hosts, in a namespace of its own: a Linux bridge (its port-channels
    /// towards the hosts made by lagd, the kernel here having no bonding driver) or Open
    /// vSwitch. The port-channel is what a switch would configure for the hosts' bond: LACP
    /// for 802.3ad, static for balance-xor/balance-rr, none (independent ports) for the rest.
    #[arg(long, value_enum)]
    pub switch: Option<SwitchKind>,
    /// Switches: 1 (every link through one switch) or --links (every link through its own
    /// switch, a plain bridge; implies --switch bridge).
    #[arg(long, default_value_t = 1)]
    pub switches: usize,
    /// The switch's own hash on its port-channels (kernel policy names): it picks the member
    /// of the return path.
    #[arg(long, default_value = "layer2+3")]
    pub switch_policy: String,
    /// Client hosts on the switch, one link each, host A their server (implies --switch
    /// bridge); --streams is then per client and direction. The report adds a client × member
    /// matrix (which member carried each client's bytes, each way), from tcpdump on host A's
    /// members.
    #[arg(long, default_value_t = 0)]
    pub clients: usize,
    /// Which way the traffic goes: forward (host A sends: to host B, or fan-out to the
    /// clients), reverse (host A receives: fan-in) or both.
    #[arg(long, value_enum, default_value = "forward")]
    pub direction: Direction,
    /// Run the streams inside a tunnel between the hosts (inner MACs 0a:58 + inner IPv4, as
    /// OVN-Kubernetes makes them). Fails, saying so, where the kernel lacks the tunnel type.
    #[arg(long, value_enum)]
    pub overlay: Option<OverlayKind>,
    /// Write what host A's bond carried during the traffic, both ways, to this pcap file
    /// (first 128 bytes of each frame), to plan from: `lagctl plan --pcap FILE`. lagd runs
    /// without its kernel fast path then (a capture on the bond does not see what the fast
    /// path sends).
    #[arg(long, conflicts_with = "sweep")]
    pub capture: Option<PathBuf>,
}

/// `lagctl lab`.
pub(crate) fn main(args: LabArgs) -> Result<(), CliError> {
    let opts = options(&args).map_err(CliError::Usage)?;
    if !is_root() {
        return Err(CliError::Failed(anyhow::anyhow!(
            "lagctl lab needs root (it creates network namespaces)"
        )));
    }
    if matches!(opts.generator, Generator::Iperf3 | Generator::Iperf3Each) {
        require_program("iperf3", "iperf3")
            .map_err(|e| CliError::Failed(e.context("or use --generator builtin")))?;
    }
    if let Setup::Lagd(path) = &opts.setup {
        if !path.is_file() {
            return Err(CliError::Failed(anyhow::anyhow!(
                "lagd not found at {} (build it, pass --lagd PATH, or measure a --baseline)",
                path.display()
            )));
        }
    }
    let bridge_swept = args.sweep
        && (args
            .sweep_switches
            .iter()
            .any(|s| matches!(s, SweepSwitch::Bridge | SweepSwitch::PerLink))
            || args.sweep_clients.iter().any(|&n| n > 0));
    if (opts.topology.switch == Some(SwitchKind::Bridge) || bridge_swept)
        && !opts.topology.lagd.is_file()
    {
        return Err(CliError::Failed(anyhow::anyhow!(
            "the bridge switch's port-channels run lagd, not found at {} (pass --lagd PATH)",
            opts.topology.lagd.display()
        )));
    }
    if let Setup::Relay(path) = &opts.setup {
        if !path.is_file() {
            return Err(CliError::Failed(anyhow::anyhow!(
                "no relay at {} (cargo build --release -p lagd --example bare_relay)",
                path.display()
            )));
        }
    }
    // Before any thread starts, so that every thread inherits the blocked signals.
    let ctl = Ctl::with_signals(Progress::stderr(!args.quiet))?;
    if args.sweep {
        let out = args.out.clone().unwrap_or_else(|| {
            let now = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            PathBuf::from(format!("lab-sweep-{}", report::timestamp(now)))
        });
        let sweep = SweepOptions {
            base: opts,
            modes: args.sweep_modes.clone(),
            policies: args.sweep_policies.clone(),
            streams: args.sweep_streams.clone(),
            // Where the shape has room for it (no clients, no tunnel).
            include_direct: true,
            mtus: args.sweep_mtus.clone(),
            switches: args.sweep_switches.clone(),
            clients: args.sweep_clients.clone(),
            overlays: args.sweep_overlays.clone(),
            out,
        };
        let outcome = lab::sweep(&sweep, &ctl).map_err(|e| {
            ctl.progress().clear();
            interrupted_or(e, &sweep.out)
        })?;
        let text = if args.json {
            serde_json::to_string_pretty(&outcome).map_err(anyhow::Error::from)? + "\n"
        } else {
            let md = std::fs::read_to_string(outcome.out.join("sweep.md")).map_err(CliError::Io)?;
            format!(
                "{md}\nwritten to {}/ (sweep.md, sweep.svg, sweep.json)\n",
                outcome.out.display()
            )
        };
        emit(&text)?;
        return if outcome.errors.is_empty() {
            Ok(())
        } else {
            Err(CliError::Failed(anyhow::anyhow!(
                "{} configuration(s) could not be measured (see above)",
                outcome.errors.len()
            )))
        };
    }
    let result = lab::run_once(&opts, &ctl).map_err(|e| {
        ctl.progress().clear();
        interrupted_or(e, &PathBuf::new())
    })?;
    let text = if args.json {
        serde_json::to_string(&result).map_err(anyhow::Error::from)? + "\n"
    } else {
        report::text(&result)
    };
    emit(&text)
}

fn emit(text: &str) -> Result<(), CliError> {
    let mut w = io::stdout().lock();
    w.write_all(text.as_bytes())
        .and_then(|()| w.flush())
        .map_err(CliError::Io)
}

fn interrupted_or(e: anyhow::Error, partial: &std::path::Path) -> CliError {
    if lab::is_interrupted(&e) {
        let note = if partial.as_os_str().is_empty() {
            String::new()
        } else {
            format!("; partial results in {}", partial.display())
        };
        CliError::Failed(anyhow::anyhow!("{e}: the lab was cleaned up{note}"))
    } else {
        CliError::Failed(e)
    }
}

/// Checks the arguments and resolves defaults.
pub(crate) fn options(args: &LabArgs) -> Result<LabOptions, String> {
    if !(1..=32).contains(&args.links) {
        return Err("--links must be 1 to 32".into());
    }
    if !(1..=128).contains(&args.streams) {
        return Err("--streams must be 1 to 128".into());
    }
    if !(1..=3600).contains(&args.duration) {
        return Err("--duration must be 1 to 3600 seconds".into());
    }
    if args.sweep_streams.iter().any(|&s| !(1..=128).contains(&s)) {
        return Err("--sweep-streams must be 1 to 128 each".into());
    }
    let rate = Rate::parse(&args.rate)?;
    for (flag, v) in [("--mode", &args.mode), ("--policy", &args.policy)] {
        if v.is_empty() || v.contains(char::is_whitespace) || v.contains('=') {
            return Err(format!("{flag} {v:?} is not a name"));
        }
    }
    let fail_after = match args.fail_after {
        None => None,
        Some(s) if s > 0.0 && s < args.duration as f64 => Some(Duration::from_secs_f64(s)),
        Some(s) => {
            return Err(format!(
                "--fail-after {s} must be inside the run (0 < s < --duration {})",
                args.duration
            ));
        }
    };
    let lagd_binary = match &args.lagd {
        Some(p) => p.clone(),
        None => std::env::current_exe()
            .map_err(|e| format!("cannot locate this executable: {e}"))?
            .with_file_name("lagd"),
    };
    let setup = match (args.baseline, &args.relay) {
        (Some(Baseline::Direct), _) => Setup::Direct,
        (Some(Baseline::Bridge), _) => Setup::Bridge,
        (Some(Baseline::Ovs), _) => Setup::Ovs,
        (None, Some(relay)) => Setup::Relay(relay.clone()),
        (None, None) => Setup::Lagd(lagd_binary.clone()),
    };
    let topology = topology_options(args, &setup, lagd_binary)?;
    if fail_after.is_some() && setup.without_bond() {
        return Err(format!(
            "--fail-after needs a bond (not --baseline {})",
            setup.name()
        ));
    }
    if setup == Setup::Bridge && args.sweep {
        return Err("--baseline bridge measures one run (no --sweep)".into());
    }
    if matches!(setup, Setup::Relay(_)) && (fail_after.is_some() || args.sweep) {
        return Err("--relay measures throughput only (no --fail-after, no --sweep)".into());
    }
    if fail_after.is_some() && matches!(args.generator, Generator::Iperf3 | Generator::Iperf3Each) {
        return Err("--fail-after needs the built-in generator (--generator builtin)".into());
    }
    if fail_after.is_some() && args.sweep {
        return Err("--fail-after cannot be combined with --sweep".into());
    }
    let udp_length = if args.udp {
        if args.generator == Generator::Builtin {
            return Err("--udp needs iperf3 (the built-in generator speaks TCP only)".into());
        }
        if fail_after.is_some() {
            return Err("--udp cannot be combined with --fail-after".into());
        }
        if !(16..=65507).contains(&args.udp_length) {
            return Err("--udp-length must be 16 to 65507".into());
        }
        Some(args.udp_length)
    } else {
        None
    };
    if setup == Setup::Ovs && !args.sweep {
        lab::dataplane::ovs_bond(&args.mode, &args.policy)?;
    }
    let generator = match lab::resolve_generator(args.generator, fail_after.is_some()) {
        // UDP always needs iperf3; a missing one is reported when the run starts.
        Generator::Builtin if udp_length.is_some() => Generator::Iperf3,
        g => g,
    };
    Ok(LabOptions {
        links: args.links,
        rate,
        setup,
        bond: BondConfig {
            mode: args.mode.clone(),
            policy: args.policy.clone(),
            extra_opts: args.bond_opts.clone(),
            mtu: args.mtu,
        },
        streams: args.streams,
        duration: Duration::from_secs(args.duration),
        generator,
        iperf3: PathBuf::from("iperf3"),
        udp_length,
        fail_after,
        topology,
    })
}

/// Checks the switch, client, MTU and overlay options.
fn topology_options(
    args: &LabArgs,
    setup: &Setup,
    lagd: PathBuf,
) -> Result<TopologyOptions, String> {
    if args.sweep_mtus.iter().any(|m| !(576..=65535).contains(m)) {
        return Err("--sweep-mtus must be 576 to 65535 each".into());
    }
    if args.sweep_clients.iter().any(|&n| n > 32) {
        return Err("--sweep-clients must be 0 to 32 each".into());
    }
    let swept = !(args.sweep_switches.is_empty()
        && args.sweep_clients.is_empty()
        && args.sweep_overlays.is_empty());
    if swept && !args.sweep {
        return Err("--sweep-switches, --sweep-clients and --sweep-overlays need --sweep".into());
    }
    if let Some(m) = args.mtu {
        if !(576..=65535).contains(&m) {
            return Err("--mtu must be 576 to 65535".into());
        }
        if args.overlay.is_some() && m < 576 + lab::overlay::TUNNEL_OVERHEAD {
            return Err("--mtu is too small for a tunnel".into());
        }
    }
    let per_link = match args.switches {
        1 => false,
        n if n == args.links => true,
        n => {
            return Err(format!(
                "--switches {n}: 1 (one switch for every link) or --links {} (one per link)",
                args.links
            ));
        }
    };
    let mut switch = args.switch;
    if per_link {
        match switch {
            Some(SwitchKind::Ovs) => {
                return Err(
                    "--switches with one switch per link takes --switch bridge (each switch has one port per host: nothing for Open vSwitch to bond)".into(),
                );
            }
            _ => switch = Some(SwitchKind::Bridge),
        }
    }
    if args.clients > 0 {
        if args.clients > 32 {
            return Err("--clients must be 0 to 32".into());
        }
        if per_link {
            return Err("--clients needs one switch for every link (not --switches N)".into());
        }
        if setup.without_bond() {
            return Err(format!(
                "--clients needs a bond on host A (not --baseline {})",
                setup.name()
            ));
        }
        switch = switch.or(Some(SwitchKind::Bridge));
    }
    let policy = args.switch_policy.as_str();
    if policy.is_empty() || policy.contains(char::is_whitespace) || policy.contains('=') {
        return Err(format!("--switch-policy {policy:?} is not a name"));
    }
    if args.overlay.is_some() {
        if args.clients > 0 {
            return Err("--overlay runs between host A and host B (not with --clients)".into());
        }
        if setup.without_bond() {
            return Err(format!(
                "--overlay needs one address per host (not --baseline {})",
                setup.name()
            ));
        }
    }
    if *setup == Setup::Bridge && switch.is_some() {
        return Err("--baseline bridge is host B as the switch (no --switch, --switches)".into());
    }
    if matches!(setup, Setup::Relay(_)) && (switch.is_some() || args.overlay.is_some()) {
        return Err("--relay runs back to back only (no --switch, --clients, --overlay)".into());
    }
    Ok(TopologyOptions {
        mtu: args.mtu,
        switch,
        switch_per_link: per_link,
        switch_policy: args.switch_policy.clone(),
        clients: args.clients,
        direction: args.direction,
        overlay: args.overlay,
        lagd,
        capture: args.capture.clone(),
    })
}
