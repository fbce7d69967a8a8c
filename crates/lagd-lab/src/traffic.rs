//! Traffic from host A to host B: iperf3 when it is installed, or a built-in multi-threaded TCP
//! sender and receiver whose sockets are opened inside the namespaces.
//!
//! Both measure goodput at the receiver, retransmits at the sender, and the member links' kernel
//! counters (side A) over the run. The built-in generator also timestamps every read, which gives
//! the longest stall of any stream: with `fail_after`, one member link is taken down mid-run and
//! the stall that follows is the failover gap.

use std::fs;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use super::control::Ctl;
use super::topology::{Counters, ProcessId, Side, Topology, in_named_ns};

/// First TCP/UDP port the lab's traffic uses (one per address pair), inside the namespaces.
const PORT_BASE: u16 = 5201;
/// Port of the reachability probe.
const PROBE_PORT: u16 = 5199;
/// How often the progress line and the signal check run during traffic.
const TICK: Duration = Duration::from_millis(200);
/// How often the lab looks whether iperf3 clients have ended.
const EXIT_POLL: Duration = Duration::from_millis(10);
/// Receive silences shorter than this are not recorded (a busy stream reads every few
/// microseconds; a 10 Mbit/s one every millisecond or so).
const GAP_MIN: Duration = Duration::from_millis(1);

/// Which traffic generator drives the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Generator {
    /// iperf3 when installed, the built-in generator otherwise.
    Auto,
    /// iperf3 (must be installed), one process pair per flow running its streams (`-P`).
    Iperf3,
    /// iperf3, one process pair per stream: iperf3 before 3.16 serves all `-P` streams from
    /// one thread, which then bounds what several streams can carry.
    #[serde(rename = "iperf3-each")]
    Iperf3Each,
    /// The built-in TCP generator.
    Builtin,
}

/// A path traffic can take: a sender's address and namespace, a receiver's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// The sender's address.
    pub src: Ipv4Addr,
    /// The receiver's address.
    pub dst: Ipv4Addr,
    /// The sender's namespace.
    pub src_ns: String,
    /// The receiver's namespace.
    pub dst_ns: String,
    /// How reports name it (`a>b`, `c0>a`).
    pub label: String,
}

/// One route and how many parallel streams it carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flow {
    /// The route.
    pub route: Route,
    /// Parallel streams on it.
    pub streams: usize,
}

/// Spreads `streams` over `flows` flows (at least one per route), flow `i` on route
/// `i % routes`: flow `i` gets `streams / n`, plus one for the first `streams % n` flows; flows
/// left with no stream are dropped.
///
/// Each flow is one generator process pair (iperf3 `-P`), so asking every setup for the same
/// number of flows gives them the same number of sending and receiving threads: a direct
/// baseline needs a flow per address pair (one per link), and a bond, whose one address pair
/// carries everything, gets as many flows on that pair.
pub fn spread(routes: &[Route], flows: usize, streams: usize) -> Vec<Flow> {
    if routes.is_empty() {
        return Vec::new();
    }
    let n = flows.max(routes.len());
    (0..n)
        .map(|i| Flow {
            route: routes[i % routes.len()].clone(),
            streams: streams / n + usize::from(i < streams % n),
        })
        .filter(|f| f.streams > 0)
        .collect()
}

/// What to run.
#[derive(Clone, Debug)]
pub struct TrafficSpec {
    /// Address pairs and streams.
    pub flows: Vec<Flow>,
    /// How long to measure.
    pub duration: Duration,
    /// UDP datagrams of this many payload bytes at full speed (iperf3 `-u -l LEN -b 0`) instead
    /// of TCP.
    pub udp_length: Option<usize>,
    /// Take the busiest member link down (at host B, so host A sees carrier loss) this long
    /// after the start.
    pub fail_after: Option<Duration>,
    /// The generator (never [`Generator::Auto`] here).
    pub generator: Generator,
}

/// A failure injected mid-run and the stall it caused.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Failover {
    /// The member whose link was taken down.
    pub member: String,
    /// When, in seconds after the start of traffic.
    pub at_s: f64,
    /// The longest time, counted from the failure, that any stream then received nothing: how
    /// long traffic on the failed member stopped.
    pub gap_ms: f64,
    /// False if some stream received nothing in the last quarter of the time between the
    /// failure and the end of the run.
    pub recovered: bool,
}

/// What a run measured.
#[derive(Clone, Debug, PartialEq)]
pub struct TrafficResult {
    /// Goodput at the receiver, bits per second.
    pub bits_per_second: f64,
    /// The measured time in seconds.
    pub seconds: f64,
    /// TCP retransmitted segments at the sender.
    pub retransmits: Option<u64>,
    /// UDP datagrams received per second.
    pub udp_pps: Option<f64>,
    /// UDP datagrams lost, in percent of those sent.
    pub udp_lost_percent: Option<f64>,
    /// The member links' counter deltas at host A over the run, in link order.
    pub members: Vec<Counters>,
    /// The longest receive silence of any stream (built-in generator only).
    pub max_stall_ms: Option<f64>,
    /// The injected failure, if any.
    pub failover: Option<Failover>,
    /// Goodput of each flow, bits per second, in the spec's order.
    pub flows_bps: Vec<f64>,
}

/// Waits until a TCP connection from each route's sender to its receiver succeeds, which
/// proves the path both ways (ARP included), for at most `timeout`.
pub fn wait_reachable(ctl: &Ctl, routes: &[Route], timeout: Duration) -> Result<()> {
    let started = Instant::now();
    for r in routes {
        let dst = r.dst;
        let listener = in_named_ns(&r.dst_ns, || TcpListener::bind((dst, PROBE_PORT)))?
            .with_context(|| format!("probe listener on {dst}:{PROBE_PORT}"))?;
        let addr = SocketAddr::from((dst, PROBE_PORT));
        loop {
            ctl.check()?;
            let attempt = in_named_ns(&r.src_ns, || {
                TcpStream::connect_timeout(&addr, Duration::from_millis(500))
            })?;
            match attempt {
                Ok(_) => break,
                Err(e) if started.elapsed() > timeout => {
                    bail!("{} cannot reach {dst} after {timeout:?}: {e}", r.src)
                }
                Err(_) => ctl.sleep(Duration::from_millis(100))?,
            }
        }
        drop(listener);
    }
    Ok(())
}

/// Runs the traffic and measures it.
pub fn run(
    topo: &mut Topology,
    ctl: &Ctl,
    spec: &TrafficSpec,
    iperf3: &Path,
) -> Result<TrafficResult> {
    match spec.generator {
        Generator::Builtin => Builtin::run(topo, ctl, spec),
        Generator::Iperf3 | Generator::Iperf3Each | Generator::Auto => {
            run_iperf3(topo, ctl, spec, iperf3)
        }
    }
}

/// State shared between the main thread and a failure injection.
struct FailState {
    at: Option<Duration>,
    done: Option<(usize, Duration)>,
    before: Vec<Counters>,
}

impl FailState {
    fn new(at: Option<Duration>, before: Vec<Counters>) -> Self {
        Self {
            at,
            done: None,
            before,
        }
    }

    /// Takes the busiest member down once the failure time (after `t0`) has passed.
    fn poll(&mut self, topo: &Topology, t0: Instant) -> Result<()> {
        let Some(at) = self.at else { return Ok(()) };
        if self.done.is_some() || t0.elapsed() < at {
            return Ok(());
        }
        let now = topo.member_counters(Side::A)?;
        let busiest = now
            .iter()
            .zip(&self.before)
            .map(|(n, b)| n.since(*b).tx_bytes)
            .enumerate()
            .max_by_key(|&(_, bytes)| bytes)
            .map(|(i, _)| i)
            .unwrap_or(0);
        let when = t0.elapsed();
        topo.cut_link(busiest)?;
        self.done = Some((busiest, when));
        Ok(())
    }
}

fn run_iperf3(
    topo: &mut Topology,
    ctl: &Ctl,
    spec: &TrafficSpec,
    iperf3: &Path,
) -> Result<TrafficResult> {
    if spec.fail_after.is_some() {
        bail!("failure injection needs the built-in generator (it timestamps every read)");
    }
    let secs = spec.duration.as_secs().max(1).to_string();
    // One iperf3 pair per flow, or per stream: (flow index, streams of this pair).
    let jobs: Vec<(usize, usize)> = spec
        .flows
        .iter()
        .enumerate()
        .flat_map(|(i, flow)| match spec.generator {
            Generator::Iperf3Each => vec![(i, 1); flow.streams],
            _ => vec![(i, flow.streams)],
        })
        .collect();
    let mut servers = Vec::new();
    for (j, &(i, _)) in jobs.iter().enumerate() {
        let route = &spec.flows[i].route;
        let port = PORT_BASE + j as u16;
        let id = topo.spawn_in(
            &route.dst_ns,
            &format!("iperf3-server-{j}"),
            iperf3,
            &["-s", "-B", &route.dst.to_string(), "-p", &port.to_string()],
            &[],
        )?;
        servers.push(id);
        wait_listening(topo, ctl, id, &route.dst_ns, port, "iperf3 server")?;
    }
    let before = topo.member_counters(Side::A)?;
    let mut clients = Vec::new();
    for (j, &(i, streams)) in jobs.iter().enumerate() {
        let route = &spec.flows[i].route;
        let port = (PORT_BASE + j as u16).to_string();
        let (dst, src, streams) = (
            route.dst.to_string(),
            route.src.to_string(),
            streams.to_string(),
        );
        let mut args = vec![
            "-c", &dst, "-B", &src, "-p", &port, "-P", &streams, "-t", &secs, "-J",
        ];
        let len;
        if let Some(l) = spec.udp_length {
            len = l.to_string();
            args.extend(["-u", "-l", &len, "-b", "0"]);
        }
        clients.push(topo.spawn_in(
            &route.src_ns,
            &format!("iperf3-client-{j}"),
            iperf3,
            &args,
            &[],
        )?);
    }
    let started = Instant::now();
    let limit = spec.duration + Duration::from_secs(20);
    // When each client ended (seconds after `started`, as of the poll that saw it: within
    // EXIT_POLL): with several pairs on the same links their measuring windows need not
    // coincide (one pair's connections can take longer), and the aggregate is taken over the
    // span from the first window's start to the last one's end.
    let mut ended = vec![0.0; clients.len()];
    let mut running: Vec<usize> = (0..clients.len()).collect();
    let mut last_tick = started;
    while !running.is_empty() {
        ctl.sleep(EXIT_POLL)?;
        let elapsed = started.elapsed();
        if last_tick.elapsed() >= TICK {
            last_tick = Instant::now();
            ctl.progress()
                .tick("traffic (iperf3)", elapsed, spec.duration);
        }
        let mut still = Vec::with_capacity(running.len());
        for i in running {
            if topo.try_wait(clients[i])?.is_some() {
                ended[i] = elapsed.as_secs_f64();
            } else {
                still.push(i);
            }
        }
        running = still;
        if !running.is_empty() && elapsed > limit {
            bail!("iperf3 still running {limit:?} after it started");
        }
    }
    let after = topo.member_counters(Side::A)?;
    for s in servers {
        topo.stop(s);
    }
    let (mut sent, mut lost) = (0u64, 0u64);
    let (mut retransmits, mut udp_pps) = (None, None);
    let mut windows = Vec::new();
    let mut flow_bits = vec![0.0; spec.flows.len()];
    for ((&c, &(flow, _)), &end) in clients.iter().zip(&jobs).zip(&ended) {
        let text = fs::read_to_string(topo.out_path(c)).unwrap_or_default();
        let report = parse_iperf3(&text).with_context(|| {
            format!(
                "iperf3 client ({}): {}",
                topo.try_wait(c)
                    .ok()
                    .flatten()
                    .map(|s| s.to_string())
                    .unwrap_or_default(),
                topo.log_tail(c, 5)
            )
        })?;
        windows.push((end - report.seconds, end));
        flow_bits[flow] += report.bits_per_second * report.seconds;
        if let Some(r) = report.retransmits {
            *retransmits.get_or_insert(0) += r;
        }
        if let Some(pps) = report.udp_pps {
            *udp_pps.get_or_insert(0.0) += pps;
            sent += report.udp_packets;
            lost += report.udp_lost;
        }
    }
    let seconds = union_span(&windows);
    let rate = |bits: f64| if seconds > 0.0 { bits / seconds } else { 0.0 };
    Ok(TrafficResult {
        bits_per_second: rate(flow_bits.iter().sum()),
        seconds,
        retransmits,
        udp_pps,
        udp_lost_percent: (udp_pps.is_some() && sent > 0)
            .then(|| 100.0 * lost as f64 / sent as f64),
        members: after
            .iter()
            .zip(&before)
            .map(|(a, b)| a.since(*b))
            .collect(),
        max_stall_ms: None,
        failover: None,
        flows_bps: flow_bits.iter().map(|&b| rate(b)).collect(),
    })
}

/// The span from the earliest start to the latest end of measuring windows `(start, end)`
/// (seconds); 0 without any. Pairs that ran at the same time span one window's length, pairs
/// that ran one after the other the sum of theirs: their bits over it are what the links
/// carried, where adding each pair's own rate would count the links twice while only one ran.
pub fn union_span(windows: &[(f64, f64)]) -> f64 {
    if windows.is_empty() {
        return 0.0;
    }
    let start = windows.iter().map(|w| w.0).fold(f64::INFINITY, f64::min);
    let end = windows
        .iter()
        .map(|w| w.1)
        .fold(f64::NEG_INFINITY, f64::max);
    (end - start).max(0.0)
}

/// What one iperf3 client reported.
#[derive(Clone, Debug, PartialEq)]
pub struct Iperf3Report {
    /// Goodput at the receiver.
    pub bits_per_second: f64,
    /// Seconds measured.
    pub seconds: f64,
    /// TCP retransmits at the sender.
    pub retransmits: Option<u64>,
    /// UDP datagrams received per second.
    pub udp_pps: Option<f64>,
    /// UDP datagrams sent (as counted by the receiver's sequence numbers).
    pub udp_packets: u64,
    /// UDP datagrams lost.
    pub udp_lost: u64,
}

/// Parses `iperf3 -c … -J` output (TCP or UDP).
pub fn parse_iperf3(text: &str) -> Result<Iperf3Report> {
    let v: Value = serde_json::from_str(text).context("iperf3 printed no JSON")?;
    if let Some(e) = v.get("error").and_then(Value::as_str) {
        bail!("iperf3: {e}");
    }
    let udp = v
        .pointer("/start/test_start/protocol")
        .and_then(Value::as_str)
        == Some("UDP");
    let recv = v
        .pointer("/end/sum_received")
        .context("iperf3 JSON has no end.sum_received")?;
    let num = |val: &Value, key: &str| val.get(key).and_then(Value::as_f64);
    let bits_per_second = num(recv, "bits_per_second").context("no bits_per_second")?;
    let seconds = num(recv, "seconds").unwrap_or(0.0);
    let mut report = Iperf3Report {
        bits_per_second,
        seconds,
        retransmits: None,
        udp_pps: None,
        udp_packets: 0,
        udp_lost: 0,
    };
    if udp {
        let packets = num(recv, "packets").unwrap_or(0.0) as u64;
        let lost = num(recv, "lost_packets").unwrap_or(0.0) as u64;
        report.udp_packets = packets;
        report.udp_lost = lost;
        if seconds > 0.0 {
            report.udp_pps = Some(packets.saturating_sub(lost) as f64 / seconds);
        }
    } else {
        report.retransmits = v
            .pointer("/end/sum_sent/retransmits")
            .and_then(Value::as_u64);
    }
    Ok(report)
}

/// Waits until a started process listens on TCP `port` in namespace `ns`.
fn wait_listening(
    topo: &mut Topology,
    ctl: &Ctl,
    id: ProcessId,
    ns: &str,
    port: u16,
    what: &str,
) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = topo.try_wait(id)? {
            bail!("{what} exited ({status}): {}", topo.log_tail(id, 5));
        }
        let listening = in_named_ns(ns, || fs::read_to_string("/proc/thread-self/net/tcp"))??
            .lines()
            .skip(1)
            .any(|l| is_listening(l, port));
        if listening {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{what} does not listen on port {port}");
        }
        ctl.sleep(Duration::from_millis(50))?;
    }
}

/// True if a `/proc/net/tcp` line is a socket listening on `port`.
fn is_listening(line: &str, port: u16) -> bool {
    let mut f = line.split_whitespace();
    let (Some(_), Some(local), Some(_), Some(state)) = (f.next(), f.next(), f.next(), f.next())
    else {
        return false;
    };
    let lport = local
        .rsplit_once(':')
        .and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
    state == "0A" && lport == Some(port)
}

/// `TcpRetransSegs` (the `RetransSegs` column of the `Tcp:` lines) from `/proc/net/snmp` text.
pub fn retrans_segs(snmp: &str) -> Option<u64> {
    let mut tcp = snmp.lines().filter(|l| l.starts_with("Tcp:"));
    let (names, values) = (tcp.next()?, tcp.next()?);
    let col = names.split_whitespace().position(|n| n == "RetransSegs")?;
    values.split_whitespace().nth(col)?.parse().ok()
}

/// TCP retransmissions summed over the namespaces `namespaces`.
fn read_retrans(namespaces: &[String]) -> Result<u64> {
    let mut total = 0;
    for ns in namespaces {
        let text = in_named_ns(ns, || fs::read_to_string("/proc/thread-self/net/snmp"))??;
        total += retrans_segs(&text).context("no TCP RetransSegs in /proc/net/snmp")?;
    }
    Ok(total)
}

/// The senders' namespaces, each once.
fn sender_namespaces(spec: &TrafficSpec) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for f in &spec.flows {
        if !out.contains(&f.route.src_ns) {
            out.push(f.route.src_ns.clone());
        }
    }
    out
}

/// Per-stream receive state of the built-in generator.
#[derive(Debug)]
struct StreamStat {
    bytes: AtomicU64,
    /// Nanoseconds after the base instant of the last read.
    last_ns: AtomicU64,
    /// Silences of at least [`GAP_MIN`]: (start, end) in nanoseconds after the base instant.
    gaps: Mutex<Vec<(u64, u64)>>,
}

/// The built-in generator's threads; dropping it stops and joins them.
struct Builtin {
    stop: Arc<AtomicBool>,
    abort: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Drop for Builtin {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.abort.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Builtin {
    fn run(topo: &mut Topology, ctl: &Ctl, spec: &TrafficSpec) -> Result<TrafficResult> {
        if spec.udp_length.is_some() {
            bail!("UDP traffic needs iperf3 (the built-in generator speaks TCP only)");
        }
        let base = Instant::now();
        let mut load = Self {
            stop: Arc::new(AtomicBool::new(false)),
            abort: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
        };
        let total: usize = spec.flows.iter().map(|f| f.streams).sum();
        let stats: Arc<Vec<StreamStat>> = Arc::new(
            (0..total)
                .map(|_| StreamStat {
                    bytes: AtomicU64::new(0),
                    last_ns: AtomicU64::new(0),
                    gaps: Mutex::new(Vec::new()),
                })
                .collect(),
        );
        let accepted = Arc::new(AtomicUsize::new(0));
        // Receivers: a listener per flow in host B, a reader thread per accepted stream.
        let mut first = 0;
        for (i, flow) in spec.flows.iter().enumerate() {
            let port = PORT_BASE + i as u16;
            let dst = flow.route.dst;
            let listener = in_named_ns(&flow.route.dst_ns, || TcpListener::bind((dst, port)))?
                .with_context(|| format!("listening on {dst}:{port}"))?;
            let (stats, accepted, abort) = (stats.clone(), accepted.clone(), load.abort.clone());
            let (n, start) = (flow.streams, first);
            listener.set_nonblocking(true)?;
            load.threads.push(thread::spawn(move || {
                let mut readers = Vec::new();
                let mut k = 0;
                while k < n && !abort.load(Ordering::Relaxed) {
                    let conn = match listener.accept() {
                        Ok((conn, _)) => conn,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            thread::sleep(Duration::from_millis(5));
                            continue;
                        }
                        Err(_) => break,
                    };
                    if conn.set_nonblocking(false).is_err() {
                        break;
                    }
                    accepted.fetch_add(1, Ordering::SeqCst);
                    let (stats, abort) = (stats.clone(), abort.clone());
                    readers.push(thread::spawn(move || {
                        receive(conn, &stats[start + k], base, &abort);
                    }));
                    k += 1;
                }
                for r in readers {
                    let _ = r.join();
                }
            }));
            first += flow.streams;
        }
        // Senders: connect inside host A; the sockets stay there.
        let mut conns = Vec::new();
        for (i, flow) in spec.flows.iter().enumerate() {
            let addr = SocketAddr::from((flow.route.dst, PORT_BASE + i as u16));
            let n = flow.streams;
            let mut batch = in_named_ns(&flow.route.src_ns, || {
                (0..n)
                    .map(|_| TcpStream::connect_timeout(&addr, Duration::from_secs(5)))
                    .collect::<io::Result<Vec<_>>>()
            })?
            .with_context(|| format!("connecting to {addr}"))?;
            conns.append(&mut batch);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while accepted.load(Ordering::SeqCst) < total {
            if Instant::now() > deadline {
                bail!("the receiver accepted only {accepted:?} of {total} streams");
            }
            ctl.sleep(Duration::from_millis(10))?;
        }
        let senders = sender_namespaces(spec);
        let retrans_before = read_retrans(&senders)?;
        let before = topo.member_counters(Side::A)?;
        let mut fail = FailState::new(spec.fail_after, before.clone());
        let t0 = Instant::now();
        let t0_ns = nanos(base, t0);
        for s in stats.iter() {
            s.last_ns.store(t0_ns, Ordering::SeqCst);
        }
        let bytes0: u64 = stats.iter().map(|s| s.bytes.load(Ordering::SeqCst)).sum();
        for conn in conns {
            let stop = load.stop.clone();
            load.threads.push(thread::spawn(move || send(conn, &stop)));
        }
        loop {
            let elapsed = t0.elapsed();
            let left = spec.duration.saturating_sub(elapsed);
            if left.is_zero() {
                break;
            }
            let until_fail = match (fail.at, fail.done) {
                (Some(at), None) => at.saturating_sub(elapsed),
                _ => TICK,
            };
            ctl.sleep(left.min(TICK).min(until_fail))?;
            let elapsed = t0.elapsed();
            ctl.progress()
                .tick("traffic (built-in)", elapsed, spec.duration);
            fail.poll(topo, t0)?;
        }
        let t1 = Instant::now();
        let bytes1: u64 = stats.iter().map(|s| s.bytes.load(Ordering::SeqCst)).sum();
        let t1_ns = nanos(base, t1);
        // Streams still silent at the end of the window: the silence lasts until now.
        let last_reads: Vec<u64> = stats
            .iter()
            .map(|s| s.last_ns.load(Ordering::SeqCst))
            .collect();
        for (s, &last) in stats.iter().zip(&last_reads) {
            if t1_ns.saturating_sub(last) >= GAP_MIN.as_nanos() as u64 {
                lock(&s.gaps).push((last, t1_ns));
            }
        }
        let after = topo.member_counters(Side::A)?;
        let retrans_after = read_retrans(&senders)?;
        let flow_bytes: Vec<u64> = {
            let mut first = 0;
            spec.flows
                .iter()
                .map(|f| {
                    let b = stats[first..first + f.streams]
                        .iter()
                        .map(|s| s.bytes.load(Ordering::SeqCst))
                        .sum::<u64>();
                    first += f.streams;
                    b
                })
                .collect()
        };
        // Stop: senders close their side; receivers read to the end (or give up).
        load.stop.store(true, Ordering::SeqCst);
        let drain_deadline = Instant::now() + Duration::from_secs(3);
        while load.threads.iter().any(|t| !t.is_finished()) && Instant::now() < drain_deadline {
            thread::sleep(Duration::from_millis(20));
        }
        drop(load);

        let seconds = (t1 - t0).as_secs_f64();
        let window: Vec<(u64, u64)> = stats
            .iter()
            .flat_map(|s| lock(&s.gaps).clone())
            .filter(|&(start, end)| end > t0_ns && start < t1_ns)
            .collect();
        let ms = |(start, end): (u64, u64)| (end.min(t1_ns) - start.max(t0_ns)) as f64 / 1e6;
        let max_stall_ms = window.iter().map(|&g| ms(g)).fold(0.0, f64::max);
        let failover = fail.done.map(|(link, at)| {
            let at_ns = t0_ns + at.as_nanos() as u64;
            // Silences still going on at the failure count from the failure on.
            let gap_ms = window
                .iter()
                .filter(|&&(_, end)| end >= at_ns)
                .map(|&(start, end)| ms((start.max(at_ns), end)))
                .fold(0.0, f64::max);
            Failover {
                member: topo.links()[link].name.clone(),
                at_s: at.as_secs_f64(),
                gap_ms,
                // Every stream received something in the last quarter of the time after the
                // failure.
                recovered: last_reads
                    .iter()
                    .all(|&last| last >= t1_ns - t1_ns.saturating_sub(at_ns) / 4),
            }
        });
        Ok(TrafficResult {
            bits_per_second: (bytes1 - bytes0) as f64 * 8.0 / seconds,
            seconds,
            retransmits: Some(retrans_after.saturating_sub(retrans_before)),
            udp_pps: None,
            udp_lost_percent: None,
            members: after
                .iter()
                .zip(&before)
                .map(|(a, b)| a.since(*b))
                .collect(),
            max_stall_ms: Some(max_stall_ms),
            failover,
            // Bytes since the connections opened (the start-up before the window is a few ms).
            flows_bps: flow_bytes
                .iter()
                .map(|&b| b as f64 * 8.0 / seconds)
                .collect(),
        })
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn nanos(base: Instant, t: Instant) -> u64 {
    t.saturating_duration_since(base).as_nanos() as u64
}

/// Writes as fast as the socket takes data until `stop`, then closes the sending side.
fn send(mut conn: TcpStream, stop: &AtomicBool) {
    let buf = vec![0x5a_u8; 256 * 1024];
    let _ = conn.set_write_timeout(Some(Duration::from_millis(100)));
    while !stop.load(Ordering::Relaxed) {
        match conn.write(&buf) {
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(_) => break,
        }
    }
    let _ = conn.shutdown(Shutdown::Write);
}

/// Reads until end of stream (or `abort`), counting bytes and recording silences.
fn receive(mut conn: TcpStream, stat: &StreamStat, base: Instant, abort: &AtomicBool) {
    let mut buf = vec![0u8; 256 * 1024];
    let _ = conn.set_read_timeout(Some(Duration::from_millis(100)));
    while !abort.load(Ordering::Relaxed) {
        match conn.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let now = nanos(base, Instant::now());
                let last = stat.last_ns.swap(now, Ordering::SeqCst);
                if now.saturating_sub(last) >= GAP_MIN.as_nanos() as u64 {
                    lock(&stat.gaps).push((last, now));
                }
                stat.bytes.fetch_add(n as u64, Ordering::SeqCst);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(_) => break,
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn streams_spread_over_pairs() {
        let p = |i: u8| Route {
            src: Ipv4Addr::new(10, 0, 0, i),
            dst: Ipv4Addr::new(10, 0, 1, i),
            src_ns: "a".into(),
            dst_ns: "b".into(),
            label: format!("r{i}"),
        };
        let pairs = [p(1), p(2)];
        let counts = |s| {
            spread(&pairs, 1, s)
                .iter()
                .map(|f| f.streams)
                .collect::<Vec<_>>()
        };
        assert_eq!(counts(1), vec![1]);
        assert_eq!(counts(2), vec![1, 1]);
        assert_eq!(counts(5), vec![3, 2]);
        assert_eq!(counts(8), vec![4, 4]);
        assert_eq!(
            spread(&pairs, 1, 1)[0].route.src,
            Ipv4Addr::new(10, 0, 0, 1)
        );
        // Asking for more flows than routes cycles over the routes.
        let four = spread(&pairs, 4, 8);
        assert_eq!(four.iter().map(|f| f.streams).collect::<Vec<_>>(), [2; 4]);
        let srcs: Vec<u8> = four.iter().map(|f| f.route.src.octets()[3]).collect();
        assert_eq!(srcs, [1, 2, 1, 2]);
        assert!(spread(&[], 2, 8).is_empty());
    }

    #[test]
    fn pairs_windows_span_from_first_start_to_last_end() {
        assert_eq!(union_span(&[]), 0.0);
        assert_eq!(union_span(&[(0.1, 3.1)]), 3.0);
        // Together: one window's length; one late by half a second: 3.5 s.
        assert!((union_span(&[(0.1, 3.1), (0.1, 3.1)]) - 3.0).abs() < 1e-9);
        assert!((union_span(&[(0.1, 3.1), (0.6, 3.6)]) - 3.5).abs() < 1e-9);
    }

    #[test]
    fn a_bond_gets_as_many_flows_as_the_direct_baseline() {
        let route = |i: u8, label: &str| Route {
            src: Ipv4Addr::new(10, 0, 0, i),
            dst: Ipv4Addr::new(10, 0, 1, i),
            src_ns: "a".into(),
            dst_ns: "b".into(),
            label: label.into(),
        };
        // Direct: one address pair per link; a bond: one pair. Two links, 8 streams.
        let direct = spread(&[route(1, "l0"), route(2, "l1")], 2, 8);
        let bond = spread(&[route(9, "bond")], 2, 8);
        assert_eq!(direct.len(), bond.len());
        assert_eq!(
            direct.iter().map(|f| f.streams).collect::<Vec<_>>(),
            bond.iter().map(|f| f.streams).collect::<Vec<_>>()
        );
        assert!(bond.iter().all(|f| f.route.label == "bond"));
        // One stream stays one flow either way.
        assert_eq!(spread(&[route(9, "bond")], 2, 1).len(), 1);
    }

    #[test]
    fn snmp_retransmits() {
        let snmp = "Ip: Forwarding DefaultTTL\nIp: 1 64\n\
            Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors\n\
            Tcp: 1 200 120000 -1 1 0 0 0 0 14 13 42 0 0 0\n";
        assert_eq!(retrans_segs(snmp), Some(42));
        assert_eq!(retrans_segs("Ip: a\nIp: 1\n"), None);
    }

    #[test]
    fn proc_net_tcp_listening() {
        let l = "   0: 0200000A:1451 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1234 1";
        assert!(is_listening(l, 5201));
        assert!(!is_listening(l, 5202));
        let est = "   1: 0200000A:1451 0100000A:D3F2 01 00000000:00000000 00:00000000 00000000     0        0 1235 1";
        assert!(!is_listening(est, 5201));
    }

    #[test]
    fn iperf3_tcp_and_udp_reports() {
        let tcp = r#"{"start":{"test_start":{"protocol":"TCP"}},
            "end":{"sum_sent":{"seconds":3.0,"bytes":1,"bits_per_second":9.6e7,"retransmits":7},
                   "sum_received":{"seconds":3.001,"bytes":1,"bits_per_second":9.5e7}}}"#;
        let r = parse_iperf3(tcp).unwrap();
        assert_eq!(r.bits_per_second, 9.5e7);
        assert_eq!(r.retransmits, Some(7));
        assert_eq!(r.udp_pps, None);
        let udp = r#"{"start":{"test_start":{"protocol":"UDP"}},
            "end":{"sum_received":{"seconds":2.0,"bytes":16,"bits_per_second":6.5e7,
                                   "packets":1000,"lost_packets":400}}}"#;
        let r = parse_iperf3(udp).unwrap();
        assert_eq!(r.udp_pps, Some(300.0));
        assert_eq!((r.udp_packets, r.udp_lost), (1000, 400));
        let err = parse_iperf3(r#"{"start":{},"end":{},"error":"unable to connect"}"#);
        assert!(format!("{:#}", err.unwrap_err()).contains("unable to connect"));
        assert!(parse_iperf3("").is_err());
    }
}

/// FNV-1a, 64-bit, over a byte stream: enough to notice any corruption, loss or reordering.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamSum(pub u64);

impl Default for StreamSum {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl StreamSum {
    /// Folds `data` in.
    pub fn update(&mut self, data: &[u8]) {
        for &b in data {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x100_0000_01b3);
        }
    }
}

/// What [`checked_transfer`] saw.
#[derive(Clone, Copy, Debug)]
pub struct Transfer {
    /// The sender's checksum of what it wrote.
    pub sent: StreamSum,
    /// The receiver's checksum of what it read.
    pub received: StreamSum,
    /// The longest pause between two reads at the receiver.
    pub longest_gap: Duration,
}

impl Transfer {
    /// Whether the receiver got exactly what was sent.
    pub fn intact(&self) -> bool {
        self.sent == self.received
    }
}

/// Sends `bytes` of patterned data over one TCP connection from namespace `from_ns` to a
/// listener at `to` in namespace `to_ns`, sleeping `pace` after each 64 KB if given; `during`
/// runs while the data flows.
pub fn checked_transfer(
    from_ns: &str,
    to_ns: &str,
    to: std::net::SocketAddrV4,
    bytes: usize,
    pace: Option<Duration>,
    during: impl FnOnce() + Send,
) -> Result<Transfer> {
    use super::topology::in_named_ns;
    let listener = in_named_ns(to_ns, || TcpListener::bind(to))?.context("listen")?;
    let receiver = thread::spawn(move || -> io::Result<(StreamSum, Duration)> {
        let (mut s, _) = listener.accept()?;
        let mut sum = StreamSum::default();
        let mut buf = vec![0u8; 65536];
        let mut last = Instant::now();
        let mut gap = Duration::ZERO;
        loop {
            let n = s.read(&mut buf)?;
            if n == 0 {
                return Ok((sum, gap));
            }
            gap = gap.max(last.elapsed());
            last = Instant::now();
            sum.update(&buf[..n]);
        }
    });
    let mut stream = in_named_ns(from_ns, || {
        TcpStream::connect_timeout(&to.into(), Duration::from_secs(5))
    })?
    .with_context(|| format!("connecting to {to} from {from_ns}"))?;
    let sender = thread::spawn(move || -> io::Result<StreamSum> {
        let mut sum = StreamSum::default();
        let mut sent = 0usize;
        let chunk: Vec<u8> = (0..65536u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let mut c = chunk.clone();
        while sent < bytes {
            let n = chunk.len().min(bytes - sent);
            // Vary the content so reordering or loss cannot cancel out.
            c[..n].copy_from_slice(&chunk[..n]);
            c[0] = (sent / 65536) as u8;
            stream.write_all(&c[..n])?;
            sum.update(&c[..n]);
            sent += n;
            if let Some(p) = pace {
                thread::sleep(p);
            }
        }
        Ok(sum)
    });
    during();
    let sent = sender
        .join()
        .map_err(|_| anyhow::anyhow!("sender panicked"))?
        .context("sending")?;
    let (received, longest_gap) = receiver
        .join()
        .map_err(|_| anyhow::anyhow!("receiver panicked"))?
        .context("receiving")?;
    Ok(Transfer {
        sent,
        received,
        longest_gap,
    })
}
