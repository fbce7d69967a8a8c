//! `lagctl plan`: predict from real traffic how each policy would spread it over the bond.
//!
//! Input: a pcap or pcapng capture (`--pcap FILE`, `-` for stdin), streamed with bounded
//! memory, or a CSV flow list (`--flows FILE`, see `lagd_proto::plan::csv`). Output: a
//! terminal table (default), JSON (`--json`), and optionally a self-contained HTML report
//! (`--html FILE`). A progress bar goes to stderr when stderr is a terminal, or with
//! `--progress`. The work itself is `lagd_proto::plan`, which runs the daemon's hash code and,
//! for the bucket policies (`balance-tcp`, `balance-slb`, `layer3+4+buckets`...), the daemon's
//! bucket table (`lagd_proto::balance`), rebalanced every `--rebalance-interval`, and for
//! `stripe` the daemon's striping sender (`lagd_proto::stripe::StripeTx`).
//!
//! The planner's report is plain data (`lagd_proto::plan::report::Plan`); rendering it is done
//! here: [`text`] for the terminal table, [`html`] for the HTML report, [`to_json`] for JSON.

use std::fs::File;
use std::io::{self, BufReader, IsTerminal, Read, Write};
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use super::CliError;
use lagd_proto::plan::apply::applied_name;
use lagd_proto::plan::report::{Distribution, MemberLoad, Plan, Rebalancing};
use lagd_proto::plan::switch::SwitchHash;
use lagd_proto::plan::{
    DEFAULT_MAX_FLOWS, PlanConfig, PlanError, PlanPolicy, plan_capture, plan_flows,
};

pub mod html;
pub mod text;

#[cfg(test)]
mod render_tests;

/// What `lagctl plan` was asked to do.
#[derive(Debug, Clone, clap::Args)]
#[command(group(clap::ArgGroup::new("input").required(true).args(["pcap", "flows", "sflow", "sflow_listen", "ipfix", "ipfix_listen"])))]
pub struct PlanArgs {
    /// A pcap or pcapng capture to plan from (`-` reads stdin).
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<PathBuf>,
    /// A CSV flow list (NetFlow/IPFIX export) to plan from instead of a capture.
    #[arg(long, value_name = "FILE.csv")]
    pub flows: Option<PathBuf>,
    /// A capture (pcap/pcapng) of sFlow v5 datagrams (UDP port 6343) to plan from: the flow
    /// samples' raw packet headers, scaled by their sampling rates.
    #[arg(long, value_name = "FILE")]
    pub sflow: Option<PathBuf>,
    /// Receive sFlow v5 datagrams on this UDP address (e.g. `0.0.0.0:6343`) for
    /// `--listen-seconds`, then plan from them.
    #[arg(long, value_name = "ADDR:PORT", requires = "listen_seconds")]
    pub sflow_listen: Option<String>,
    /// A capture (pcap/pcapng) of IPFIX messages (UDP to `--ipfix-port`) to plan from: the
    /// flow records (addresses, ports, MACs, VLAN, packet and octet counts) read with the
    /// exporters' templates, scaled by the sampling rate they state.
    #[arg(long, value_name = "FILE")]
    pub ipfix: Option<PathBuf>,
    /// The UDP port of the IPFIX messages in `--ipfix FILE`.
    #[arg(long, value_name = "PORT", default_value_t = lagd_proto::plan::ipfix::IPFIX_PORT)]
    pub ipfix_port: u16,
    /// Which IPFIX records to plan by their flowDirection: ingress, egress or both (an
    /// exporter that observes a packet where it enters and where it leaves, as Open vSwitch
    /// does, reports it twice). Records without a direction are always planned.
    #[arg(long, value_name = "DIR", default_value = "ingress", value_parser = ["ingress", "egress", "both"])]
    pub ipfix_direction: String,
    /// Receive IPFIX messages on this UDP address (e.g. `0.0.0.0:4739`) for
    /// `--listen-seconds`, then plan from them.
    #[arg(long, value_name = "ADDR:PORT", requires = "listen_seconds")]
    pub ipfix_listen: Option<String>,
    /// How long `--sflow-listen` or `--ipfix-listen` receives, in seconds.
    #[arg(long, value_name = "SECONDS")]
    pub listen_seconds: Option<f64>,
    /// Number of bond members, each of 10 Gbit/s (default 2).
    #[arg(long, conflicts_with = "speeds")]
    pub members: Option<usize>,
    /// Member speeds, comma separated, e.g. `10G,10G,25G` (units G, M, T; bare numbers are
    /// Gbit/s); sets the member count.
    #[arg(long, value_name = "SPEEDS")]
    pub speeds: Option<String>,
    /// Policies to evaluate: `all` or a comma-separated list of layer2, layer2+3, layer3+4,
    /// encap2+3, encap3+4, vlan+srcmac, ovs-slb, ovs-tcp, balance-rr, stripe (lagd's
    /// mode=stripe: needs lagd at both ends), and the bucket policies balance-tcp, balance-slb
    /// and HASH+buckets (e.g. layer3+4+buckets: balance-xor or 802.3ad with
    /// distribution=buckets). `all` is every hash policy, balance-rr and stripe; `all+buckets`
    /// adds layer3+4+buckets, balance-tcp and balance-slb (about half as fast).
    #[arg(long, default_value = "all")]
    pub policy: String,
    /// Bucket policies: how often the table is rebalanced by load, in milliseconds (0: never),
    /// as lagd's `rebalance_interval`.
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    pub rebalance_interval: u64,
    /// The switch's load-balance hash for the return path: src-mac, dst-mac, src-dst-mac,
    /// src-ip, dst-ip, src-dst-ip, src-dst-port (modelled as a generic XOR fold).
    #[arg(long, default_value = "src-dst-ip")]
    pub switch_hash: SwitchHash,
    /// Other member counts to evaluate, comma separated.
    #[arg(long, default_value = "2,3,4,8")]
    pub sweep: String,
    /// Most flows tracked individually; traffic of further flows is still counted exactly
    /// per member, as "other flows".
    #[arg(long, default_value_t = DEFAULT_MAX_FLOWS)]
    pub max_flows: usize,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also write a self-contained HTML report to this file.
    #[arg(long, value_name = "REPORT.html")]
    pub html: Option<PathBuf>,
    /// Show a progress bar on stderr even when it is not a terminal.
    #[arg(long)]
    pub progress: bool,
    /// Hash every frame instead of once per flow (same figures, slower; for checking).
    #[arg(long, hide = true)]
    pub exact: bool,
    /// Plan from the frames that can be read as Ethernet and skip the others (by default, a
    /// capture with frames of a link type the planner cannot read is an error naming it).
    #[arg(long)]
    pub skip_unsupported: bool,
}

/// Parses `10G`, `2.5g`, `100M`, `400Mb`, `1T`, `25` (Gbit/s) into Gbit/s.
pub fn parse_speed(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let body = lower
        .strip_suffix("bit/s")
        .or_else(|| lower.strip_suffix("bps"))
        .or_else(|| lower.strip_suffix('b'))
        .unwrap_or(&lower);
    let (num, scale) = match body.chars().last() {
        Some('g') => (&body[..body.len() - 1], 1.0),
        Some('m') => (&body[..body.len() - 1], 1e-3),
        Some('t') => (&body[..body.len() - 1], 1e3),
        Some('k') => (&body[..body.len() - 1], 1e-6),
        _ => (body, 1.0),
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v * scale),
        _ => Err(format!(
            "bad speed '{t}' (expected e.g. 10G, 2.5G, 100M; a bare number is Gbit/s)"
        )),
    }
}

/// Builds the planner configuration from the arguments.
pub fn config(args: &PlanArgs) -> Result<PlanConfig, String> {
    let speeds = match &args.speeds {
        Some(s) => s
            .split(',')
            .map(parse_speed)
            .collect::<Result<Vec<f64>, String>>()?,
        None => vec![10.0; args.members.unwrap_or(2)],
    };
    if speeds.is_empty() {
        return Err("the bond needs at least one member".into());
    }
    let mut cfg = PlanConfig::new(speeds.len());
    cfg.speeds_gbps = speeds;
    cfg.policies = if args.policy.trim() == "all" {
        PlanPolicy::ALL.to_vec()
    } else if args.policy.trim() == "all+buckets" {
        PlanPolicy::ALL_WITH_BUCKETS.to_vec()
    } else {
        args.policy
            .split(',')
            .map(|p| p.trim().parse::<PlanPolicy>())
            .collect::<Result<Vec<_>, _>>()?
    };
    cfg.sweep = args
        .sweep
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            s.trim()
                .parse::<usize>()
                .map_err(|_| format!("bad member count '{s}' in --sweep"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    cfg.switch_hash = args.switch_hash;
    cfg.max_flows = args.max_flows;
    cfg.reuse_hashes = !args.exact;
    cfg.balance.rebalance_interval = Duration::from_millis(args.rebalance_interval);
    Ok(cfg)
}

/// `lagctl plan`.
pub fn main(args: PlanArgs) -> Result<(), CliError> {
    let cfg = config(&args).map_err(CliError::Usage)?;
    let (plan, title) = read_input(&args, cfg)?;
    if let (Some(lt), false) = (plan.input.skipped_linktype, args.skip_unsupported) {
        return Err(CliError::Usage(format!(
            "{title}: link type {lt} ({}) is not readable as Ethernet ({} of {} frames); \
             the planner reads Ethernet, raw IP and Linux cooked captures \
             (--skip-unsupported plans from the others)",
            lagd_proto::capture::linktype_name(lt).unwrap_or("unknown"),
            plan.input.skipped,
            plan.input.skipped + plan.input.packets + plan.input.control.total().packets,
        )));
    }
    if let Some(path) = &args.html {
        std::fs::write(path, html::render(&plan, &title)).map_err(|e| {
            CliError::Io(io::Error::new(
                e.kind(),
                format!("cannot write {}: {e}", path.display()),
            ))
        })?;
    }
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    write_output(&plan, &title, args.json, &mut out).map_err(CliError::Io)?;
    out.flush().map_err(CliError::Io)
}

fn open(path: &PathBuf) -> Result<(Box<dyn Read>, Option<u64>), CliError> {
    if path.as_os_str() == "-" {
        return Ok((Box::new(io::stdin().lock()), None));
    }
    let f = File::open(path).map_err(|e| {
        CliError::Io(io::Error::new(
            e.kind(),
            format!("cannot open {}: {e}", path.display()),
        ))
    })?;
    let size = f.metadata().ok().map(|m| m.len());
    Ok((Box::new(f), size))
}

fn plan_error(path: &std::path::Path, e: PlanError) -> CliError {
    match e {
        PlanError::Config(m) => CliError::Usage(m),
        other => CliError::Usage(format!("{}: {other}", path.display())),
    }
}

fn read_input(args: &PlanArgs, cfg: PlanConfig) -> Result<(Plan, String), CliError> {
    let show = args.progress || io::stderr().is_terminal();
    if let Some(path) = &args.flows {
        let (r, _) = open(path)?;
        let plan = plan_flows(BufReader::new(r), cfg).map_err(|e| plan_error(path, e))?;
        return Ok((plan, display_name(path)));
    }
    let listen_time = || {
        let secs = args.listen_seconds.unwrap_or(0.0);
        if !(secs.is_finite() && secs > 0.0 && secs <= 86_400.0) {
            return Err(CliError::Usage(format!(
                "--listen-seconds {secs}: expected more than 0 and at most 86400"
            )));
        }
        Ok(Duration::from_secs_f64(secs))
    };
    if let Some(addr) = &args.sflow_listen {
        let plan = listen_sflow(addr, listen_time()?, cfg)?;
        return Ok((plan, format!("sFlow on {addr}")));
    }
    if let Some(addr) = &args.ipfix_listen {
        let plan = listen_ipfix(addr, listen_time()?, ipfix_direction(args), cfg)?;
        return Ok((plan, format!("IPFIX on {addr}")));
    }
    if let Some(path) = &args.ipfix {
        let (r, _) = open(path)?;
        let plan = lagd_proto::plan::ipfix::plan_ipfix_capture(
            BufReader::new(r),
            args.ipfix_port,
            ipfix_direction(args),
            cfg,
        )
        .map_err(|e| plan_error(path, e))?;
        return Ok((plan, display_name(path)));
    }
    if let Some(path) = &args.sflow {
        let (r, _) = open(path)?;
        let plan = lagd_proto::plan::sflow::plan_sflow_capture(BufReader::new(r), cfg)
            .map_err(|e| plan_error(path, e))?;
        return Ok((plan, display_name(path)));
    }
    let path = args
        .pcap
        .as_ref()
        .ok_or_else(|| CliError::Usage("give --pcap FILE, --flows FILE or --sflow FILE".into()))?;
    let (r, size) = open(path)?;
    let mut bar = Progress::new(show, size);
    let plan =
        plan_capture(r, cfg, &mut |bytes, packets| bar.update(bytes, packets)).map_err(|e| {
            bar.end();
            plan_error(path, e)
        })?;
    bar.end();
    Ok((plan, display_name(path)))
}

/// Receives sFlow datagrams on `addr` for `time`, then plans from them; unreadable datagrams
/// are counted and skipped.
fn listen_sflow(addr: &str, time: Duration, cfg: PlanConfig) -> Result<Plan, CliError> {
    let sock = std::net::UdpSocket::bind(addr)
        .map_err(|e| CliError::Usage(format!("--sflow-listen {addr}: cannot bind: {e}")))?;
    let mut planner =
        lagd_proto::plan::Planner::new(cfg).map_err(|e| CliError::Usage(e.to_string()))?;
    let deadline = std::time::Instant::now() + time;
    let mut buf = vec![0u8; 65_536];
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            break;
        }
        sock.set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .map_err(CliError::Io)?;
        match sock.recv_from(&mut buf) {
            Ok((n, _)) => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
                planner.note_time(now);
                if planner.add_sflow_datagram(&buf[..n]).is_err() {
                    planner.count_unreadable_sflow();
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(CliError::Io(e)),
        }
    }
    Ok(planner.finish())
}

/// The `--ipfix-direction` asked for.
fn ipfix_direction(args: &PlanArgs) -> lagd_proto::plan::ipfix::Direction {
    use lagd_proto::plan::ipfix::Direction;
    match args.ipfix_direction.as_str() {
        "egress" => Direction::Egress,
        "both" => Direction::Both,
        _ => Direction::Ingress,
    }
}

/// Receives IPFIX messages on `addr` for `time`, then plans from them; each sender's
/// templates are its own, and messages that cannot be read are counted and skipped.
fn listen_ipfix(
    addr: &str,
    time: Duration,
    direction: lagd_proto::plan::ipfix::Direction,
    cfg: PlanConfig,
) -> Result<Plan, CliError> {
    let sock = std::net::UdpSocket::bind(addr)
        .map_err(|e| CliError::Usage(format!("--ipfix-listen {addr}: cannot bind: {e}")))?;
    let mut planner =
        lagd_proto::plan::Planner::new(cfg).map_err(|e| CliError::Usage(e.to_string()))?;
    let mut decoder = lagd_proto::plan::ipfix::IpfixDecoder::with_direction(direction);
    let deadline = std::time::Instant::now() + time;
    let mut buf = vec![0u8; 65_536];
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            break;
        }
        sock.set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .map_err(CliError::Io)?;
        match sock.recv_from(&mut buf) {
            Ok((n, from)) => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
                planner.note_time(now);
                use std::hash::{BuildHasher as _, BuildHasherDefault, DefaultHasher};
                let exporter = BuildHasherDefault::<DefaultHasher>::default().hash_one(from);
                // A message that cannot be read is counted in the report's IPFIX figures.
                let _ = decoder.add_message(&mut planner, exporter, &buf[..n]);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(CliError::Io(e)),
        }
    }
    Ok(planner.finish())
}

fn display_name(path: &std::path::Path) -> String {
    if path.as_os_str() == "-" {
        "stdin".into()
    } else {
        path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
    }
}

/// A one-line progress bar on stderr, redrawn when the percentage changes.
struct Progress {
    on: bool,
    size: Option<u64>,
    last: Option<u64>,
    drawn: bool,
}

impl Progress {
    fn new(on: bool, size: Option<u64>) -> Self {
        Self {
            on,
            size: size.filter(|&s| s > 0),
            last: None,
            drawn: false,
        }
    }

    fn update(&mut self, bytes: u64, packets: u64) {
        if !self.on {
            return;
        }
        let line = match self.size {
            Some(size) => {
                let pct = (bytes.min(size) * 100 / size).min(100);
                if self.last == Some(pct) {
                    return;
                }
                self.last = Some(pct);
                let filled = (pct / 4) as usize;
                format!(
                    "\rreading [{}{}] {pct:>3}% {} packets",
                    "#".repeat(filled),
                    " ".repeat(25 - filled),
                    packets
                )
            }
            None => format!("\rreading: {} packets, {} bytes", packets, bytes),
        };
        let mut e = io::stderr().lock();
        let _ = e.write_all(line.as_bytes());
        let _ = e.flush();
        self.drawn = true;
    }

    fn end(&mut self) {
        if self.drawn {
            let _ = writeln!(io::stderr());
            self.drawn = false;
        }
    }
}

/// Writes the table or the JSON.
pub fn write_output(
    plan: &Plan,
    title: &str,
    as_json: bool,
    out: &mut dyn Write,
) -> io::Result<()> {
    if as_json {
        let v = to_json(plan, title);
        serde_json::to_writer_pretty(&mut *out, &v).map_err(io::Error::other)?;
        writeln!(out)
    } else {
        let mut s = String::new();
        text::write_table(plan, title, &mut s)
            .map_err(|_| io::Error::other("formatting failed"))?;
        out.write_all(s.as_bytes())
    }
}

/// Rounds to 4 decimals for readable JSON.
fn r4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

fn members_json(m: &[MemberLoad]) -> Value {
    m.iter()
        .map(|m| {
            json!({
                "index": m.index,
                "packets": m.packets,
                "bytes": m.bytes,
                "flows": m.flows,
                "speed_gbps": r4(m.speed_gbps),
            })
        })
        .collect()
}

fn dist_fields(d: &Distribution, obj: &mut serde_json::Map<String, Value>) {
    obj.insert("members".into(), members_json(&d.members));
    obj.insert("imbalance".into(), json!(r4(d.imbalance)));
    obj.insert(
        "throughput_bound_gbps".into(),
        json!(r4(d.throughput_bound_gbps)),
    );
}

/// A bucket policy's `rebalancing`: the interval, rebalances, bucket moves by reason, buckets
/// per member at the end, and the first and last complete intervals' imbalance.
fn rebalancing_json(r: &Rebalancing) -> Value {
    let c = &r.counters;
    json!({
        "interval_ms": u64::try_from(r.interval.as_millis()).unwrap_or(u64::MAX),
        "rebalances": c.rebalances,
        "moves": {
            "total": c.moves(),
            "load": c.moved_rebalance,
            "elephant": c.moved_elephant,
            "members": c.moved_left + c.moved_joined,
        },
        "planned": c.planned,
        "waited_for_idle_gap": c.deferred,
        "forced_while_busy": c.forced,
        "expired": c.expired,
        "buckets": r.buckets,
        "intervals": r.intervals,
        "first_interval_imbalance": r.first_interval_imbalance.map(r4),
        "last_interval_imbalance": r.last_interval_imbalance.map(r4),
        "flow_list_replayed": r.replayed,
    })
}

/// The plan as JSON: per policy `members: [{index, packets, bytes, flows}]`, `imbalance`,
/// `throughput_bound_gbps`, and the `recommendation`, with the what-ifs and findings; bucket
/// policies also have `rebalancing`.
pub fn to_json(plan: &Plan, title: &str) -> Value {
    let inp = &plan.input;
    let policies: Vec<Value> = plan
        .policies
        .iter()
        .map(|p| {
            let mut o = serde_json::Map::new();
            o.insert("policy".into(), json!(p.policy.name()));
            o.insert("rank".into(), json!(p.rank));
            o.insert("cannot_judge".into(), json!(p.cannot_judge));
            if let Some(need) = p.policy.needs() {
                o.insert("needs".into(), json!(need));
            }
            dist_fields(&p.dist, &mut o);
            o.insert(
                "reorder".into(),
                match p.reorder {
                    Some(r) => json!({
                        "packets": r.packets,
                        "tcp_packets": r.tcp_packets,
                        "share": r4(r.share),
                    }),
                    None => Value::Null,
                },
            );
            if let Some(r) = &p.rebalancing {
                o.insert("rebalancing".into(), rebalancing_json(r));
            }
            o.insert("split_flows".into(), json!(p.split_flows));
            o.insert("split_bytes".into(), json!(p.split_bytes));
            o.insert(
                "elephant_collisions".into(),
                p.collisions
                    .iter()
                    .map(|c| json!({"member": c.member, "elephants": c.elephants}))
                    .collect(),
            );
            o.insert(
                "sweep".into(),
                p.sweep
                    .iter()
                    .map(|s| {
                        json!({
                            "members": s.members,
                            "imbalance": r4(s.imbalance),
                            "throughput_bound_gbps": r4(s.throughput_bound_gbps),
                        })
                    })
                    .collect(),
            );
            o.insert(
                "failures".into(),
                p.failures
                    .iter()
                    .map(|f| {
                        let mut fo = serde_json::Map::new();
                        fo.insert("failed".into(), json!(f.failed));
                        dist_fields(&f.dist, &mut fo);
                        fo.insert("flows_moved".into(), json!(f.flows_moved));
                        fo.insert("bytes_moved".into(), json!(f.bytes_moved));
                        fo.insert("collateral_flows".into(), json!(f.collateral_flows));
                        fo.insert("collateral_bytes".into(), json!(f.collateral_bytes));
                        fo.insert("elephants_moved".into(), json!(f.elephants_moved));
                        Value::Object(fo)
                    })
                    .collect(),
            );
            Value::Object(o)
        })
        .collect();
    let share = |b: u64| {
        if inp.bytes == 0 {
            0.0
        } else {
            r4(b as f64 / inp.bytes as f64)
        }
    };
    json!({
        "input": {
            "name": title,
            "packets": inp.packets,
            "bytes": inp.bytes,
            "flows": plan.flows,
            "max_flows": plan.max_flows,
            "other_flows": {"packets": inp.untracked.packets, "bytes": inp.untracked.bytes},
            "rebuilt_ethernet": inp.rebuilt_ethernet,
            "duplicates": inp.duplicates,
            "interfaces": {
                "naming": match inp.interfaces.naming {
                    Some(lagd_proto::plan::InterfaceNaming::Ifindex) => Some("ifindex"),
                    Some(lagd_proto::plan::InterfaceNaming::CaptureInterface) => Some("capture_interface"),
                    None => None,
                },
                "seen": inp.interfaces.seen().iter().map(|f| json!({
                    "interface": f.interface,
                    "name": plan.interface_names.iter().find(|(n, _)| *n == f.interface).map(|(_, s)| s),
                    "label": text::interface_label(plan, f.interface),
                    "kept": f.kept,
                    "dropped": f.dropped,
                })).collect::<Vec<_>>(),
                "other": {"kept": inp.interfaces.other.kept, "dropped": inp.interfaces.other.dropped},
            },
            "skipped": inp.skipped,
            "skipped_linktype": inp.skipped_linktype.map(|lt| json!({
                "linktype": lt,
                "name": lagd_proto::capture::linktype_name(lt),
            })),
            "control": inp.control.seen().map(|(k, l)| json!({
                "kind": k.name(),
                "packets": l.packets,
                "bytes": l.bytes,
                "how_sent": k.how_sent(),
            })).collect::<Vec<_>>(),
            "flow_list_rows": inp.rows,
            "sflow": inp.sflow.map(|sf| json!({
                "datagrams": sf.datagrams,
                "samples": sf.samples,
                "skipped_samples": sf.skipped_samples,
                "sampling_rate_min": sf.rate_range.map(|r| r.0),
                "sampling_rate_max": sf.rate_range.map(|r| r.1),
                "other_packets": sf.other_packets,
                "unreadable_datagrams": sf.unreadable,
                "share_error_95": r4(lagd_proto::plan::sflow::SflowStats::share_error(sf.samples)),
            })),
            "ipfix": inp.ipfix.map(|x| json!({
                "messages": x.messages,
                "malformed_messages": x.malformed,
                "templates": x.templates,
                "templates_dropped": x.templates_dropped,
                "records": x.records,
                "planned_records": x.planned,
                "other_direction": x.other_direction,
                "without_ip": x.without_ip,
                "without_counts": x.without_counts,
                "options_records": x.options_records,
                "no_template": x.no_template,
                "bytes_from_ip_octets": x.l3_octets,
                "sampling_unknown": x.unsampled,
                "sampled_packets": x.sampled_packets,
                "sampling_rate_min": x.rate_range.map(|r| r.0),
                "sampling_rate_max": x.rate_range.map(|r| r.1),
                "other_packets": x.other_packets,
                "share_error_95": r4(x.share_error()),
            })),
            "duration_s": inp.time_span.map(|(a, b)| r4((b - a) as f64 / 1e9)),
        },
        "members": plan.members(),
        "speeds_gbps": plan.speeds_gbps.iter().map(|s| r4(*s)).collect::<Vec<_>>(),
        "policies": policies,
        "recommendation": plan.recommendation.as_ref().map(|r| json!({
            "policy": r.policy.name(),
            "apply": applied_name(r.policy),
            "reason": r.reason,
            "note": r.note,
            "settings": r.settings.iter().map(|s| json!({
                "target": s.target,
                "value": s.value,
                "note": s.note,
            })).collect::<Vec<_>>(),
        })),
        "sample": {
            "judgeable": plan.sample.too_small.is_empty(),
            "too_small": plan.sample.too_small,
            "best_in_sample": plan.sample.best_in_sample.map(|p| p.name()),
            "confidence": plan.sample.confidence.as_ref().map(|c| json!({
                "level": c.level,
                "agreeing_halves": c.agreeing,
                "halves": c.halves,
                "bound_share_range": [r4(c.bound_range.0), r4(c.bound_range.1)],
            })),
        },
        "findings": plan.findings.iter().map(|f| json!({
            "kind": f.kind,
            "field": f.field,
            "policies": f.policies.iter().map(|p| p.name()).collect::<Vec<_>>(),
            "message": f.message,
            "advice": f.advice,
        })).collect::<Vec<_>>(),
        "elephants": plan.elephants.iter().map(|e| json!({
            "flow": e.key.to_string(),
            "packets": e.packets,
            "bytes": e.bytes,
            "share": share(e.bytes),
        })).collect::<Vec<_>>(),
        "return_path": {
            "switch_hash": plan.switch_hash.name(),
            "model": "generic XOR fold of the named fields; vendor switch hashes are proprietary",
            "hashes": plan.return_path.iter().map(|r| {
                let mut o = serde_json::Map::new();
                o.insert("hash".into(), json!(r.hash.name()));
                dist_fields(&r.dist, &mut o);
                Value::Object(o)
            }).collect::<Vec<_>>(),
        },
        "tunnels": plan.tunnels.iter().map(|t| json!({
            "tunnel": t.tunnel.name(),
            "packets": t.packets,
            "bytes": t.bytes,
            "outer_flows": t.outer_flows,
            "inner_flows": t.inner_flows,
            "inner_flows_capped": t.inner_capped,
        })).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn speeds_parse_with_units() {
        assert_eq!(parse_speed("10G"), Ok(10.0));
        assert_eq!(parse_speed("2.5g"), Ok(2.5));
        assert_eq!(parse_speed("100M"), Ok(0.1));
        assert_eq!(parse_speed("400Mb"), Ok(0.4));
        assert_eq!(parse_speed("1T"), Ok(1000.0));
        assert_eq!(parse_speed("25"), Ok(25.0));
        assert_eq!(parse_speed("25Gbit/s"), Ok(25.0));
        for bad in ["", "G", "-1G", "0", "tenG", "nanG", "infG"] {
            assert!(parse_speed(bad).is_err(), "{bad}");
        }
    }
}
