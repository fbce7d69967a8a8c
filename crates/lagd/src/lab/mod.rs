//! The lab: two network namespaces ("hosts") joined by N veth links, each shaped with tc tbf,
//! a bond at both ends (lagd, or Open vSwitch as a baseline, or no bond at all with addresses
//! directly on the links), and parallel TCP streams from host A to host B; then goodput, each
//! member's share of the bytes, and retransmits.
//!
//! * [`topology`]: namespaces, veths, tc shaping and process bookkeeping, all removed on drop.
//! * [`dataplane`]: lagd, the direct baseline, the Open vSwitch baseline.
//! * [`traffic`]: iperf3 or the built-in generator; failure injection.
//! * [`report`]: text, JSON, and a sweep's markdown table and SVG chart.
//! * [`control`]: SIGINT/SIGTERM handling and the progress line.
//!
//! Everything here needs root. Names are unique per lab (pid + random tag), so several labs can
//! run side by side.

pub mod control;
pub mod dataplane;
pub mod report;
pub mod topology;
pub mod traffic;

use std::fs;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};

use control::{Ctl, Interrupted};
use dataplane::{BondConfig, Setup};
use report::{RunResult, SweepError, TCP_GOODPUT_PER_BIT};
use topology::{Rate, Topology};
use traffic::{Generator, TrafficSpec};

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
}

/// A sweep: every configuration × every stream count.
#[derive(Clone, Debug)]
pub struct SweepOptions {
    /// Links, rate, duration, generator and the setup to sweep (`mode`, `policy` and `streams`
    /// are taken from the lists below).
    pub base: LabOptions,
    /// Bonding modes.
    pub modes: Vec<String>,
    /// Hash policies (for the modes that use one).
    pub policies: Vec<String>,
    /// Stream counts.
    pub streams: Vec<usize>,
    /// Also measure the direct baseline as the reference.
    pub include_direct: bool,
    /// Where the report goes.
    pub out: PathBuf,
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
    let (mut topo, pairs) = build(opts, ctl)?;
    let result = measure(&mut topo, ctl, opts, &pairs, opts.streams)?;
    ctl.progress().phase("cleaning up");
    topo.teardown()?;
    ctl.progress().clear();
    Ok(result)
}

fn build(opts: &LabOptions, ctl: &Ctl) -> Result<(Topology, Vec<(Ipv4Addr, Ipv4Addr)>)> {
    ctl.check()?;
    ctl.progress().phase("creating hosts and links");
    let mut topo = Topology::create(opts.links)?;
    ctl.check()?;
    ctl.progress()
        .phase(&format!("starting the {} dataplane", opts.setup.name()));
    let pairs = dataplane::bring_up(&mut topo, ctl, &opts.setup, &opts.bond)?;
    // After the dataplane: Open vSwitch deletes a port's qdisc when it adds the port.
    topo.shape(&opts.rate)?;
    ctl.progress()
        .phase("waiting for the path between the hosts");
    traffic::wait_reachable(&topo, ctl, &pairs, REACHABLE_TIMEOUT)?;
    Ok((topo, pairs))
}

fn measure(
    topo: &mut Topology,
    ctl: &Ctl,
    opts: &LabOptions,
    pairs: &[(Ipv4Addr, Ipv4Addr)],
    streams: usize,
) -> Result<RunResult> {
    let spec = TrafficSpec {
        flows: traffic::spread(pairs, streams),
        duration: opts.duration,
        udp_length: opts.udp_length,
        fail_after: opts.fail_after,
        generator: opts.generator,
    };
    let t = traffic::run(topo, ctl, &spec, &opts.iperf3)?;
    ctl.progress().clear();
    let names: Vec<String> = topo.links().iter().map(|l| l.name.clone()).collect();
    let counters: Vec<(u64, u64)> = t.members.iter().map(|c| (c.tx_bytes, c.rx_bytes)).collect();
    let (mode, policy) = match opts.setup {
        Setup::Direct => ("none".to_string(), "none".to_string()),
        _ => (opts.bond.mode.clone(), opts.bond.policy.clone()),
    };
    let ovs = match opts.setup {
        Setup::Ovs => dataplane::ovs_bond(&opts.bond.mode, &opts.bond.policy).ok(),
        _ => None,
    };
    let ceiling = (!opts.rate.is_unlimited() && opts.udp_length.is_none()).then(|| {
        opts.links as f64 * opts.rate.bits_per_second() as f64 * TCP_GOODPUT_PER_BIT / 1e9
    });
    Ok(RunResult {
        setup: opts.setup.name().to_string(),
        mode,
        policy,
        ovs_bond_mode: ovs.as_ref().map(|o| o.bond_mode.to_string()),
        lacp: ovs.as_ref().map(|o| o.lacp.to_string()),
        links: opts.links,
        rate: opts.rate.as_tc().to_string(),
        streams: spec.flows.iter().map(|f| f.streams).sum(),
        protocol: if opts.udp_length.is_some() {
            "udp"
        } else {
            "tcp"
        }
        .to_string(),
        generator: match opts.generator {
            Generator::Builtin => "builtin",
            _ => "iperf3",
        }
        .to_string(),
        duration_s: round(t.seconds, 3),
        aggregate_gbps: round(t.bits_per_second / 1e9, 4),
        ceiling_gbps: ceiling.map(|c| round(c, 4)),
        members: report::shares(&names, &counters),
        retransmits: t.retransmits,
        udp_pps: t.udp_pps.map(|p| p.round()),
        udp_length: opts.udp_length,
        udp_lost_percent: t.udp_lost_percent.map(|p| round(p, 2)),
        max_stall_ms: t.max_stall_ms.map(|m| round(m, 2)),
        failover: t.failover.map(|mut f| {
            f.gap_ms = round(f.gap_ms, 2);
            f.at_s = round(f.at_s, 3);
            f
        }),
        prefix: topo.prefix().to_string(),
    })
}

fn round(v: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (v * f).round() / f
}

/// The configurations a sweep visits, in order.
pub fn sweep_configs(opts: &SweepOptions) -> Vec<(Setup, BondConfig)> {
    let mut out: Vec<(Setup, BondConfig)> = Vec::new();
    let base = &opts.base.bond;
    if opts.include_direct || opts.base.setup == Setup::Direct {
        out.push((Setup::Direct, base.clone()));
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
            out.push((opts.base.setup.clone(), bond));
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
    for (i, (setup, bond)) in configs.iter().enumerate() {
        let lab = LabOptions {
            setup: setup.clone(),
            bond: bond.clone(),
            ..opts.base.clone()
        };
        let label = match setup {
            Setup::Direct => "direct veth".to_string(),
            _ => format!("{} {} {}", setup.name(), bond.mode, bond.policy),
        };
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
    let (mut topo, pairs) = build(lab, ctl)?;
    for &n in streams {
        runs.push(measure(&mut topo, ctl, lab, &pairs, n)?);
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
    let title = format!(
        "lagctl lab sweep: {} links × {rate}, {} {}",
        b.links,
        if b.udp_length.is_some() { "UDP" } else { "TCP" },
        match b.generator {
            Generator::Builtin => "built-in generator",
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
                },
                streams: 1,
                duration: Duration::from_secs(1),
                generator: Generator::Builtin,
                iperf3: "iperf3".into(),
                udp_length: None,
                fail_after: None,
            },
            modes: vec!["balance-xor".into(), "active-backup".into()],
            policies: vec!["layer2".into(), "layer2+3".into(), "layer3+4".into()],
            streams: vec![1, 2],
            include_direct: true,
            out: "x".into(),
        }
    }

    #[test]
    fn sweep_visits_modes_times_policies_plus_direct() {
        let c = sweep_configs(&base(Setup::Lagd("lagd".into())));
        let names: Vec<String> = c
            .iter()
            .map(|(s, b)| format!("{} {} {}", s.name(), b.mode, b.policy))
            .collect();
        assert_eq!(
            names,
            [
                "direct balance-xor layer3+4",
                "lagd balance-xor layer2",
                "lagd balance-xor layer2+3",
                "lagd balance-xor layer3+4",
                "lagd active-backup layer2",
            ]
        );
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
