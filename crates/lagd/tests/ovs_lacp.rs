//! lagd's LACP against a real partner: Open vSwitch's userspace datapath in a network namespace.
//! Needs root and Open vSwitch (`.ci/run` installs it); fails, never skips, without them.

use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use lagd::control::query_status;
use lagd::status::Status;
use lagd_lab::dataplane::{OvsInstance, address_bond, start_ovs, start_ovs_bond};
use lagd_lab::topology::{
    LacpInfoExpectation, LacpduExpectation, ProcessId, Side, SlowCapture, Topology,
    check_lacpdus_with_tshark, is_root,
};
use lagd_lab::traffic::checked_transfer;
use lagd_proto::capture::PcapWriter;
use lagd_proto::lacp::{SHORT_TIMEOUT_TIME, SLOW_PERIODIC_TIME};
use lagd_proto::wire::EthernetAddress;
use lagd_proto::wire::slow::{LacpInfo, LacpRepr, PortState};

mod common;

use common::{
    STATUS_POLL, lacp_doctor, leave_bound, leave_floor, rejoin_bound, start_lagd,
    wait_member_distributing,
};

const LAGD: &str = env!("CARGO_BIN_EXE_lagd");

struct Interop {
    topo: Topology,
    ovs: OvsInstance,
    control: PathBuf,
    /// tcpdump of slow-protocol frames on host A's end of every link, from before lagd started.
    capture: SlowCapture,
    lagd: ProcessId,
    started: Instant,
}

impl Interop {
    /// Host A: lagd 802.3ad over both links. Host B: an OVS balance-tcp bond with
    /// `lacp=ovs_lacp` and `lacp-time=ovs_time`.
    fn new(ovs_lacp: &str, ovs_time: &str, lagd_rate: &str) -> Self {
        Self::with_lagd_opts(ovs_lacp, ovs_time, &format!("lacp_rate={lagd_rate}"))
    }

    /// Like [`Interop::new`], with extra lagd options after `mode=802.3ad`.
    fn with_lagd_opts(ovs_lacp: &str, ovs_time: &str, lagd_opts: &str) -> Self {
        assert!(
            is_root(),
            "the Open vSwitch interop tests need root (CI runs them as root)"
        );
        let mut topo = Topology::create(2).expect("topology");
        let first = topo.links()[0].name.clone();
        let bridge = format!("{}br", topo.tag());
        let lacp = format!("lacp={ovs_lacp}");
        let time = format!("other_config:lacp-time={ovs_time}");
        // balance-tcp needs LACP in OVS. Without LACP the partner is an active-backup bond on
        // the first link: a peer that does not aggregate, as LACP fallback expects (a static
        // LAG would return traffic on any member, which active-backup does not collect).
        let primary = format!("other_config:bond-primary={first}");
        let mut settings = if ovs_lacp == "off" {
            vec!["bond_mode=active-backup", primary.as_str()]
        } else {
            vec!["bond_mode=balance-tcp"]
        };
        settings.extend([lacp.as_str(), time.as_str()]);
        let ovs = start_ovs_bond(&mut topo, Side::B, &bridge, &settings)
            .expect("start Open vSwitch with its bond");
        address_bond(&topo, Side::B, &bridge, 2).unwrap();

        let capture = topo
            .capture_slow_protocols(Side::A)
            .expect("tcpdump on every member (CI installs it)");
        let bond = format!("{}ba", topo.tag());
        let opts = format!("mode=802.3ad xmit_hash_policy=layer3+4 {lagd_opts}");
        let started = Instant::now();
        let (lagd, control) = start_lagd(&mut topo, Side::A, &bond, &opts);
        address_bond(&topo, Side::A, &bond, 1).unwrap();
        Self {
            topo,
            ovs,
            control,
            capture,
            lagd,
            started,
        }
    }

    /// Waits until lagd distributes on every member and OVS reports the bond negotiated with
    /// both members attached; returns how long after lagd's start that was.
    fn wait_aggregated(&self, within: Duration) -> Duration {
        loop {
            let s = self.status();
            let lagd_ok = s
                .members
                .iter()
                .all(|m| m.lacp.as_ref().is_some_and(|l| l.distributing));
            let show = self.ovs.appctl(&["lacp/show", "bond0"]).unwrap_or_default();
            let ovs_ok = show.contains("negotiated")
                && show.matches(": current attached").count() == 2
                && show
                    .lines()
                    .filter(|l| l.trim_start().starts_with("actor state:"))
                    .all(|l| l.contains("collecting distributing"));
            if lagd_ok && ovs_ok {
                return self.started.elapsed();
            }
            assert!(
                self.started.elapsed() < within,
                "no aggregation after {within:?}\nOVS:\n{show}\nlagd:\n{}",
                s.render()
            );
            thread::sleep(Duration::from_millis(50));
        }
    }

    fn ovs_field<'a>(show: &'a str, key: &str) -> Vec<&'a str> {
        show.lines()
            .filter_map(|l| l.trim_start().strip_prefix(key))
            .map(str::trim)
            .collect()
    }

    /// A TCP transfer from `from` to the other host; the data's checksum at both ends.
    fn transfer(&self, from: Side, bytes: usize) -> (u64, u64) {
        let to = if from == Side::A { Side::B } else { Side::A };
        let host = if to == Side::A { 1 } else { 2 };
        let addr = SocketAddrV4::new(self.topo.address(host), 5002);
        let t = checked_transfer(
            self.topo.ns(from),
            self.topo.ns(to),
            addr,
            bytes,
            None,
            || {},
        )
        .unwrap_or_else(|e| {
            panic!(
                "transfer: {e:#}\nlagd:\n{}\nOVS:\n{}",
                self.status().render(),
                self.ovs.appctl(&["bond/show", "bond0"]).unwrap_or_default()
            )
        });
        (t.sent.0, t.received.0)
    }

    /// Stops the captures and checks, member by member, that every LACPDU lagd sent decodes in
    /// `tshark -V` without a malformed mark or expert information and carries what lagd's
    /// status reports (actor identity; for the last one also the actor state and partner
    /// identity). Returns how many LACPDUs each member sent.
    fn check_capture(&mut self) -> Vec<usize> {
        self.topo.stop_capture(&self.capture);
        let s = self.status();
        s.members
            .iter()
            .zip(self.capture.files())
            .map(|(m, file)| {
                let expect = common::lacpdu_expectation(m);
                check_lacpdus_with_tshark(file, &expect).unwrap_or_else(|e| {
                    panic!(
                        "{}'s LACPDUs: {e:#}\nlagd log:\n{}",
                        m.name,
                        self.topo.log_tail(self.lagd, 30)
                    )
                })
            })
            .collect()
    }

    fn status(&self) -> Status {
        query_status(&self.control).expect("status")
    }

    /// `lagctl lacp doctor --json`: the causes it names, with their members.
    fn doctor(&self) -> Vec<(String, Vec<String>)> {
        lacp_doctor(&self.control)
    }
}

/// lagd 802.3ad against an OVS balance-tcp bond with every LACP mode and rate: both ends agree
/// (OVS `lacp/show` and `lagctl show --json` tell the same story), TCP crosses both ways, and
/// every LACPDU lagd sent decodes cleanly in tshark.
#[test]
fn negotiates_with_open_vswitch() {
    for (lacp, time) in [
        ("active", "fast"),
        ("active", "slow"),
        ("passive", "fast"),
        ("passive", "slow"),
    ] {
        let mut lab = Interop::new(lacp, time, time);
        let took = lab.wait_aggregated(Duration::from_secs(15));
        println!(
            "lagd <-> OVS lacp={lacp} lacp-time={time}: distributing {} ms after lagd started",
            took.as_millis()
        );
        let show = lab.ovs.appctl(&["lacp/show", "bond0"]).unwrap();
        assert!(
            show.contains(&format!("status: {lacp} negotiated")),
            "{show}"
        );
        let s = lab.status();
        let l = s.lacp.as_ref().unwrap();
        // Each side's view of the other matches the other's own identity.
        let ovs_sys = Interop::ovs_field(&show, "sys_id:")[0].to_owned();
        assert_eq!(l.active_aggregator.as_ref().unwrap().partner_mac, ovs_sys);
        for partner in Interop::ovs_field(&show, "partner sys_id:") {
            assert_eq!(partner, l.system_mac);
        }
        for partner_state in Interop::ovs_field(&show, "partner state:") {
            assert!(
                partner_state.contains("synchronized collecting distributing"),
                "{partner_state}"
            );
        }
        assert_eq!(l.active_aggregator.as_ref().unwrap().number_of_ports, 2);
        for m in &s.members {
            let ml = m.lacp.as_ref().unwrap();
            assert!(
                ml.partner.state_names.iter().any(|n| n == "distributing"),
                "{:?}",
                ml.partner
            );
            assert!(ml.lacpdu_rx > 0 && ml.lacpdu_tx > 0);
            assert_eq!(ml.illegal_rx, 0);
        }
        for from in [Side::A, Side::B] {
            let (sent, got) = lab.transfer(from, 4 << 20);
            assert_eq!(sent, got, "lacp={lacp} time={time}: TCP from {from:?}");
        }
        // The kernel fast path carried the data against Open vSwitch (fastpath=auto): the
        // programs' counters grew, and lagd's member sockets read no data frame.
        let s = lab.status();
        assert_eq!(s.dataplane.path, "kernel", "{:?}", s.dataplane);
        let kernel: u64 = s
            .members
            .iter()
            .map(|m| m.kernel_rx_packets + m.kernel_tx_packets)
            .sum();
        assert!(kernel > 100, "kernel path: {kernel} frames");
        let own_rx: u64 = s
            .members
            .iter()
            .map(|m| m.rx_packets - m.kernel_rx_packets)
            .sum();
        assert_eq!(own_rx, 0, "lagd read no member frame");
        let doctor = lab.doctor();
        assert_eq!(doctor.len(), 1, "{doctor:?}");
        assert_eq!(doctor[0].0, "healthy");
        let counts = lab.check_capture();
        assert!(
            counts.iter().all(|&n| n >= 2),
            "lagd's LACPDUs were captured on every member: {counts:?}"
        );
    }
}

impl Interop {
    /// LACPDU counts received per member, from lagd's status.
    fn lacpdu_rx(&self) -> Vec<u64> {
        self.status()
            .members
            .iter()
            .map(|m| m.lacp.as_ref().unwrap().lacpdu_rx)
            .collect()
    }

    /// Waits until OVS has just one member attached; returns when, counted from `since`.
    fn wait_ovs_drops_a_member(&self, since: Instant, within: Duration) -> Duration {
        loop {
            let show = self.ovs.appctl(&["lacp/show", "bond0"]).unwrap();
            if show.matches(": current attached").count() == 1 {
                return since.elapsed();
            }
            assert!(
                since.elapsed() < within,
                "OVS kept the member whose LACPDUs are dropped:\n{show}"
            );
            thread::sleep(STATUS_POLL);
        }
    }

    /// Polls lagd's status every [`STATUS_POLL`] until member `leaving` stops distributing,
    /// checking on every poll that every other member still distributes. Returns when the first
    /// query that saw it out started, counted from `since`, and the longest status query.
    fn wait_member_leaves(
        &self,
        leaving: usize,
        since: Instant,
        within: Duration,
    ) -> (Duration, Duration) {
        let ([out], longest_query) =
            wait_member_distributing([Side::A], |_| self.status(), leaving, false, since, within);
        (out, longest_query)
    }

    /// Polls until member 1 distributes again, checking member 0 never stops; returns when the
    /// first query that saw it back started, counted from `since`, and the longest status query.
    fn wait_member_rejoins(&self, since: Instant, within: Duration) -> (Duration, Duration) {
        let ([back], longest_query) =
            wait_member_distributing([Side::A], |_| self.status(), 1, true, since, within);
        (back, longest_query)
    }
}

/// Dropping only the LACPDUs of one link (an eBPF drop of EtherType 0x8809 at tcx egress on both
/// ends: carrier stays up and every other frame still crosses) takes just that member out of
/// both ends within 3 s at the fast rate, while the other member keeps distributing and TCP
/// keeps flowing; it rejoins when the drop is lifted: within about a second if lagd had the
/// member EXPIRED, within a slow periodic time (30 s) and the aggregate wait if both ends had
/// DEFAULTED it.
#[test]
fn member_losing_lacpdus_leaves_and_rejoins() {
    let mut lab = Interop::new("active", "fast", "fast");
    lab.wait_aggregated(Duration::from_secs(15));
    let link1 = lab.topo.links()[1].name.clone();

    // Phase 1: lifted while the member is EXPIRED.
    let t0 = Instant::now();
    let lacp_drop = lab.topo.drop_slow_protocols(&link1).unwrap();
    let t = Instant::now();
    let attach = t - t0;
    // Data still crosses the link while its LACPDUs are dropped (and the member is still in).
    assert_eq!(
        lab.topo.probe_link(&link1, 20).unwrap(),
        20,
        "data frames cross {link1}"
    );
    let rx_at_drop = lab.lacpdu_rx();
    let (out, longest_query) = lab.wait_member_leaves(1, t, Duration::from_secs(10));
    println!(
        "member without LACPDUs out of lagd's distribution {} ms after the drop began \
         (drop attached in {} ms, longest status query {} ms)",
        out.as_millis(),
        attach.as_millis(),
        longest_query.as_millis()
    );
    assert!(
        out <= leave_bound(longest_query),
        "left after {out:?}, bound {:?}",
        leave_bound(longest_query)
    );
    assert!(
        out >= leave_floor(attach),
        "left after {out:?}: earlier than current_while allows ({:?})",
        leave_floor(attach)
    );
    let s = lab.status();
    assert_eq!(s.mii_status, "up", "{}", s.render());
    assert_eq!(s.members[1].mii_status, "up", "carrier is still up");
    // OVS also stops using it: its own current_while, 3 s from the last LACPDU it heard.
    let ovs_out = lab.wait_ovs_drops_a_member(t, SHORT_TIMEOUT_TIME + Duration::from_secs(1));
    println!(
        "OVS took the member out {} ms after the drop began",
        ovs_out.as_millis()
    );
    // LACP alone took it out: the link still carries data, and TCP crosses on the other member.
    assert_eq!(
        lab.topo.probe_link(&link1, 20).unwrap(),
        20,
        "data frames cross {link1}"
    );
    let (sent, got) = lab.transfer(Side::A, 2 << 20);
    assert_eq!(sent, got, "traffic continues on the other member");
    let doctor = lab.doctor();
    assert!(
        doctor
            .iter()
            .any(|(c, m)| c == "lacpdus-lost" && m == &[s.members[1].name.clone()]),
        "{doctor:?}"
    );
    // Not one LACPDU crossed the link during the drop; the other member kept receiving them.
    let rx = lab.lacpdu_rx();
    assert_eq!(
        rx[1], rx_at_drop[1],
        "LACPDUs crossed {link1} during the drop"
    );
    assert!(rx[0] > rx_at_drop[0], "{rx_at_drop:?} -> {rx:?}");
    let s = lab.status();
    assert_eq!(
        s.members[1].lacp.as_ref().unwrap().rx_state,
        "EXPIRED",
        "the test took too long to lift the drop while the member is EXPIRED ({:?})",
        t.elapsed()
    );
    drop(lacp_drop);
    let lifted = Instant::now();
    let (back, longest_query) = lab.wait_member_rejoins(lifted, Duration::from_secs(15));
    lab.wait_aggregated(lab.started.elapsed() + Duration::from_secs(5));
    println!(
        "lifted while EXPIRED: rejoined lagd's distribution {} ms after the lift, OVS agreeing \
         {} ms after",
        back.as_millis(),
        lifted.elapsed().as_millis()
    );
    let bound = rejoin_bound(false, longest_query);
    assert!(back <= bound, "{back:?}, bound {bound:?}");

    // Phase 2: lifted once both ends have DEFAULTED the member.
    let lacp_drop = lab.topo.drop_slow_protocols(&link1).unwrap();
    let t = Instant::now();
    let mut longest_query = Duration::ZERO;
    loop {
        let q = Instant::now();
        let s = lab.status();
        longest_query = longest_query.max(q.elapsed());
        assert!(
            s.members[0].lacp.as_ref().unwrap().distributing,
            "{}",
            s.render()
        );
        if s.members[1].lacp.as_ref().unwrap().rx_state == "DEFAULTED" {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "{}", s.render());
        thread::sleep(STATUS_POLL);
    }
    let defaulted = t.elapsed();
    println!(
        "member defaulted {} ms after the drop began",
        defaulted.as_millis()
    );
    // EXPIRED 3 s after the last LACPDU, DEFAULTED another short timeout later.
    let bound = 2 * SHORT_TIMEOUT_TIME + STATUS_POLL + longest_query;
    assert!(defaulted <= bound, "{defaulted:?}, bound {bound:?}");
    // OVS defaults it too (`member: NAME: defaulted detached` in lacp/show).
    loop {
        let show = lab.ovs.appctl(&["lacp/show", "bond0"]).unwrap();
        if show.contains(": defaulted") {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "{show}");
        thread::sleep(STATUS_POLL);
    }
    drop(lacp_drop);
    let lifted = Instant::now();
    let (back, longest_query) =
        lab.wait_member_rejoins(lifted, SLOW_PERIODIC_TIME + Duration::from_secs(10));
    println!(
        "lifted once DEFAULTED: rejoined lagd's distribution {} ms after the lift",
        back.as_millis()
    );
    let bound = rejoin_bound(true, longest_query);
    assert!(back <= bound, "{back:?}, bound {bound:?}");
    lab.wait_aggregated(lab.started.elapsed() + Duration::from_secs(5));
    let (sent, got) = lab.transfer(Side::A, 2 << 20);
    assert_eq!(sent, got);
    let counts = lab.check_capture();
    assert!(counts.iter().all(|&n| n >= 5), "{counts:?}");
}

/// A partner that does not speak LACP (an OVS active-backup bond with LACP off): lagd never
/// aggregates, and `lagctl lacp doctor` says why.
#[test]
fn doctor_names_a_partner_without_lacp() {
    let lab = Interop::new("off", "fast", "fast");
    thread::sleep(Duration::from_secs(4));
    let s = lab.status();
    assert!(
        s.members
            .iter()
            .all(|m| !m.lacp.as_ref().unwrap().distributing)
    );
    let doctor = lab.doctor();
    assert_eq!(doctor[0].0, "no-partner", "{doctor:?}");
    assert_eq!(doctor[0].1.len(), 2);
    let mut lab = lab;
    let counts = lab.check_capture();
    assert!(counts.iter().all(|&n| n >= 2), "{counts:?}");
}

/// One LACP end in a benchmark: lagd or Open vSwitch.
enum End {
    Lagd(PathBuf),
    Ovs(OvsInstance),
}

impl End {
    fn start(topo: &mut Topology, side: Side, ovs: bool, rate: &str, extra: &str) -> Self {
        let members: Vec<String> = topo.links().iter().map(|l| l.name.clone()).collect();
        if ovs {
            let bridge = format!("{}br{}", topo.tag(), side.letter());
            let o = start_ovs(topo, side, &bridge).expect("ovs");
            let mut args = vec!["add-bond", &bridge, "bond0"];
            args.extend(members.iter().map(String::as_str));
            let time = format!("other_config:lacp-time={rate}");
            args.extend(["bond_mode=balance-tcp", "lacp=active", time.as_str()]);
            o.vsctl(&args).expect("add-bond");
            Self::Ovs(o)
        } else {
            let bond = format!("{}b{}", topo.tag(), side.letter());
            let control = topo.dir().join(format!("{bond}.sock"));
            let opts = format!("mode=802.3ad lacp_rate={rate} {extra}");
            let m = topo.member_list();
            let c = control.to_string_lossy().into_owned();
            topo.spawn(
                side,
                &format!("lagd-{}", side.letter()),
                Path::new(LAGD),
                &[
                    "--bond",
                    &bond,
                    "--members",
                    &m,
                    "--opts",
                    &opts,
                    "--control",
                    &c,
                ],
            )
            .expect("lagd");
            let t = Instant::now();
            while query_status(&control).is_err() {
                assert!(t.elapsed() < Duration::from_secs(10));
                thread::sleep(Duration::from_millis(20));
            }
            Self::Lagd(control)
        }
    }

    fn distributing(&self) -> bool {
        match self {
            Self::Lagd(c) => query_status(c).is_ok_and(|s| {
                s.members
                    .iter()
                    .all(|m| m.lacp.as_ref().is_some_and(|l| l.distributing))
            }),
            Self::Ovs(o) => o.appctl(&["lacp/show", "bond0"]).is_ok_and(|show| {
                show.matches(": current attached").count() == 2
                    && show
                        .lines()
                        .filter(|l| l.trim_start().starts_with("actor state:"))
                        .all(|l| l.contains("collecting distributing"))
            }),
        }
    }
}

/// Link-up to Distributing on both ends: both ends start with their links down, then the
/// links come up at once.
fn time_to_distributing(a_ovs: bool, b_ovs: bool, rate: &str, extra: &str) -> Duration {
    let mut topo = Topology::create(2).expect("topology");
    let links: Vec<String> = topo.links().iter().map(|l| l.name.clone()).collect();
    let a = End::start(&mut topo, Side::A, a_ovs, rate, extra);
    let b = End::start(&mut topo, Side::B, b_ovs, rate, extra);
    for l in &links {
        topo.ip(Side::B, &["link", "set", l, "down"]).unwrap();
    }
    thread::sleep(Duration::from_secs(4));
    assert!(!a.distributing() && !b.distributing());
    let t = Instant::now();
    for l in &links {
        topo.ip(Side::B, &["link", "set", l, "up"]).unwrap();
    }
    while !(a.distributing() && b.distributing()) {
        assert!(t.elapsed() < Duration::from_secs(60), "no aggregation");
        thread::sleep(Duration::from_millis(10));
    }
    t.elapsed()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Runs slower than their row's fastest by more than this are listed under the table.
const BENCH_OUTLIER: Duration = Duration::from_millis(500);

/// Writes `bench/lacp.md`: link-up to Distributing for lagd↔lagd, lagd↔OVS and OVS↔OVS at
/// both rates (medians of 3, all in this run), whether the 1 s goal is met, the runs far from
/// their median, and the time to take out a member whose LACPDUs are dropped.
/// Run: `cargo test --release -p lagd --test ovs_lacp -- --ignored --nocapture bench_lacp`.
#[test]
#[ignore = "benchmark: writes bench/lacp.md"]
fn bench_lacp() {
    const DEFAULT_LAGD: &str = "lagd ↔ lagd";
    const DEFAULT_OVS: &str = "lagd ↔ OVS";
    const SHORT_LAGD: &str = "lagd ↔ lagd, lacp_aggregate_wait=100";
    const SHORT_OVS: &str = "lagd ↔ OVS, lacp_aggregate_wait=100";
    let mut results: Vec<(&str, [Vec<Duration>; 2])> = Vec::new();
    for (label, a_ovs, b_ovs, extra) in [
        (DEFAULT_LAGD, false, false, ""),
        (DEFAULT_OVS, false, true, ""),
        ("OVS ↔ OVS", true, true, ""),
        (SHORT_LAGD, false, false, "lacp_aggregate_wait=100"),
        (SHORT_OVS, false, true, "lacp_aggregate_wait=100"),
    ] {
        let runs = ["fast", "slow"].map(|rate| {
            (0..3)
                .map(|_| time_to_distributing(a_ovs, b_ovs, rate, extra))
                .collect::<Vec<Duration>>()
        });
        results.push((label, runs));
    }
    let ms = |d: Duration| d.as_millis();
    let mut rows = String::new();
    let mut outliers = Vec::new();
    for (label, runs) in &results {
        let cells = [0, 1].map(|r| {
            let list: Vec<String> = runs[r].iter().map(|d| ms(*d).to_string()).collect();
            format!("{} ms ({})", ms(median(runs[r].clone())), list.join(", "))
        });
        rows.push_str(&format!("| {label} | {} | {} |\n", cells[0], cells[1]));
        for (r, rate) in ["fast", "slow"].iter().enumerate() {
            let fastest = runs[r].iter().min().copied().unwrap_or_default();
            for d in &runs[r] {
                if *d > fastest + BENCH_OUTLIER {
                    outliers.push(format!("{label} at the {rate} rate: {} ms", ms(*d)));
                }
            }
        }
    }
    let fast_median = |label: &str| {
        let (_, runs) = results.iter().find(|(l, _)| *l == label).unwrap();
        median(runs[0].clone())
    };
    let verdict = |a: Duration, b: Duration| {
        let word = if a.max(b) <= Duration::from_secs(1) {
            "met"
        } else {
            "not met"
        };
        format!(
            "{word} ({} ms against lagd, {} ms against OVS)",
            ms(a),
            ms(b)
        )
    };
    let goal = format!(
        "**Goal: at most 1 s from member link-up to Distributing at the fast rate.** With default \
         options: {}. With `lacp_aggregate_wait=100`: {}.",
        verdict(fast_median(DEFAULT_LAGD), fast_median(DEFAULT_OVS)),
        verdict(fast_median(SHORT_LAGD), fast_median(SHORT_OVS)),
    );
    let outliers = if outliers.is_empty() {
        format!(
            "No run was more than {} ms slower than its row's fastest.",
            ms(BENCH_OUTLIER)
        )
    } else {
        format!(
            "Runs more than {} ms slower than their row's fastest: {}. In the runs diagnosed \
             they came from an Open vSwitch glitch at link-up: OVS marks a just-enabled member \
             EXPIRED a few ms after it came up (its LACPDUs then carry the Expired bit and a \
             stale view of the partner, without Synchronization) and keeps it so until the \
             partner's next LACPDU. Between two OVS bridges (at the fast rate, captured) that \
             was the partner's next periodic LACPDU, 1 s later. Against lagd with \
             `lacp_aggregate_wait=100`, lagd's status during such a run showed it CURRENT and \
             COLLECTING_DISTRIBUTING while both OVS members were `expired attached`: lagd's \
             answer to OVS's stale view was held back, most likely by the 802.1AX transmit limit \
             (3 LACPDUs per second per member, already spent on the link-up LACPDU, the reply \
             and the attach in the first ~100 ms). With the default 2 s wait the exchange is \
             spread over 2 s and the glitch, when it happens, is over before the wait ends. A \
             tcpdump on the members made the glitch rare enough that no capture of a lagd ↔ OVS \
             run caught it.",
            ms(BENCH_OUTLIER),
            outliers.join("; ")
        )
    };
    // The member whose LACPDUs are dropped: the drop starts at a random point of the 1 s
    // periodic cycle, some time after aggregation, so the runs show the spread.
    let mut silent = Vec::new();
    for _ in 0..5 {
        let lab = Interop::new("active", "fast", "fast");
        lab.wait_aggregated(Duration::from_secs(15));
        thread::sleep(Duration::from_millis(
            1000 + lagd_lab::topology::random_u64() % 1000,
        ));
        let link1 = lab.topo.links()[1].name.clone();
        let _lacp_drop = lab.topo.drop_slow_protocols(&link1).unwrap();
        let t = Instant::now();
        let (out, _) = lab.wait_member_leaves(1, t, Duration::from_secs(10));
        silent.push(out);
    }
    let silent_ms: Vec<String> = silent.iter().map(|d| ms(*d).to_string()).collect();
    let silent_max = silent.iter().max().copied().unwrap_or_default();
    let text_of = |cmd: &str, args: &[&str]| {
        String::from_utf8_lossy(&Command::new(cmd).args(args).output().unwrap().stdout)
            .trim()
            .to_owned()
    };
    let kernel = text_of("uname", &["-r"]);
    let date = text_of("date", &["-u", "+%Y-%m-%d"]);
    let ovs_version = text_of("ovs-vswitchd", &["--version"])
        .lines()
        .next()
        .unwrap_or("")
        .rsplit(' ')
        .next()
        .unwrap_or("")
        .to_owned();
    let md = format!(
        "# LACP timings\n\n\
         Measured by `cargo test --release -p lagd --test ovs_lacp -- --ignored --nocapture bench_lacp` \
         on {date} (Linux {kernel}, 2 vCPUs, shared and noisy), two network namespaces joined by two veth \
         links; Open vSwitch {ovs_version} userspace datapath (balance-tcp, lacp=active). Medians of 3, every run \
         listed; all rows from the same run.\n\n\
         ## Member link-up to Distributing on both ends\n\n\
         Both ends run with their links down; the links come up at once; the clock stops when both \
         ends report every member collecting and distributing (lagd: `lagctl show --json`; OVS: \
         `ovs-appctl lacp/show`), polled every 10 ms.\n\n\
         | pair | lacp_rate / lacp-time fast | slow |\n|---|---|---|\n{rows}\n\
         {goal}\n\n\
         Why the default is 2 s: lagd's `lacp_aggregate_wait` defaults to 2000 ms, IEEE 802.1AX's \
         Aggregate_Wait_Time and the Linux bonding driver's (`AD_AGGREGATE_WAIT_TIME`, 2 s), so that \
         lagd forms an aggregate as a kernel bond does: a port waits that long in WAITING before \
         it attaches, so that ports that come up together attach together instead of one by one \
         (each attach is a change the partner must follow). About 2 s is therefore the floor with \
         default options, whatever the partner. Open vSwitch has no such wait (tens of ms). \
         `lacp_aggregate_wait=100` trades the standard's wait for speed and meets the goal against \
         lagd or OVS. The rate does not change formation time: LACPDUs that carry news are sent at \
         once (need-to-transmit), the rate only spaces the periodic ones, and lagd sends on \
         link-up, so the slow rate forms as fast as the fast one.\n\n\
         {outliers}\n\n\
         ## A member whose LACPDUs are dropped leaves distribution\n\n\
         lagd ↔ OVS, fast rate; carrier stays up and data still crosses the link: only EtherType \
         0x8809 is dropped, by an eBPF program at tcx egress on both ends (`Topology::drop_slow_protocols`). \
         From the start of the drop to lagd's status showing the member out (polled every {} ms): \
         {} ms median ({} ms; at most {} ms). 802.1AX: the partner's information times out \
         (`current_while`, 3 × the 1 s fast periodic time) 3 s after the last LACPDU heard, which \
         came up to 1 s before the drop began, so between 2 and 3 s after it; the drop starts at a \
         random point of the periodic cycle. The tests assert at most 3 s plus one status poll.\n",
        ms(STATUS_POLL),
        ms(median(silent.clone())),
        silent_ms.join(", "),
        ms(silent_max),
    );
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/lacp.md");
    std::fs::write(&path, &md).unwrap();
    println!("{md}");
}

/// LACP fallback (as OVS's lacp-fallback-ab): against a partner that never speaks LACP (an OVS
/// active-backup bond whose primary is the first link), lagd
/// falls back to active-backup on its first member after `lacp_fallback` ms, traffic flows,
/// and the doctor says so.
#[test]
fn fallback_to_active_backup_without_a_partner() {
    let lab = Interop::with_lagd_opts("off", "fast", "lacp_rate=fast lacp_fallback=1000");
    let t = Instant::now();
    loop {
        let s = lab.status();
        if let Some(f) = s.lacp.as_ref().and_then(|l| l.fallback_member.clone()) {
            assert_eq!(f, s.members[0].name, "the deterministic fallback member");
            assert_eq!(s.mii_status, "up");
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "no fallback:\n{}",
            s.render()
        );
        thread::sleep(Duration::from_millis(50));
    }
    println!(
        "fallback active {} ms after lagd started",
        lab.started.elapsed().as_millis()
    );
    for from in [Side::A, Side::B] {
        let (sent, got) = lab.transfer(from, 2 << 20);
        assert_eq!(sent, got, "TCP from {from:?} over the fallback member");
    }
    let s = lab.status();
    assert!(
        s.members[0].tx_bytes > 2 << 20 && s.members[1].tx_bytes == 0,
        "active-backup"
    );
    let doctor = lab.doctor();
    assert!(doctor.iter().any(|(c, _)| c == "fallback"), "{doctor:?}");
    let mut lab = lab;
    let counts = lab.check_capture();
    assert!(counts.iter().all(|&n| n >= 1), "{counts:?}");
}

/// A LACPDU frame from `src` with the given actor and partner.
fn lacpdu_frame(src: EthernetAddress, actor: LacpInfo, partner: LacpInfo) -> Vec<u8> {
    let pdu = LacpRepr {
        actor,
        partner,
        ..LacpRepr::default()
    };
    let mut f = vec![0; pdu.frame_len()];
    pdu.emit_frame(src, &mut f);
    f
}

fn info_status(i: &LacpInfo) -> LacpInfoExpectation {
    LacpInfoExpectation {
        system_priority: i.system_priority,
        system_mac: i.system.to_string(),
        key: i.key,
        port_priority: i.port_priority,
        port: i.port,
        state: i.state.0,
    }
}

/// The negative control of the capture check: [`check_lacpdus_with_tshark`] accepts a sound
/// LACPDU that matches lagd's status, and fails on a damaged one (a TLV length that tshark
/// flags, a truncated frame tshark calls malformed, a frame from the member that is not a
/// LACPDU) and on a sound one whose fields differ from the status (actor key, actor state or
/// partner port of the last LACPDU), so a passing check means something.
#[test]
fn tshark_check_fails_on_damaged_lacpdus() {
    let src = EthernetAddress([0x02, 0x6c, 0x61, 0x67, 0x64, 0x01]);
    let actor = LacpInfo {
        system_priority: 65535,
        system: EthernetAddress([0x02, 0x6c, 0x61, 0x67, 0x64, 0x00]),
        key: 15,
        port_priority: 255,
        port: 1,
        state: PortState(0x3f),
    };
    let partner = LacpInfo {
        system: EthernetAddress([0x02, 0x6c, 0x61, 0x67, 0x64, 0x80]),
        port: 2,
        ..actor
    };
    let expect = LacpduExpectation {
        src_mac: src.to_string(),
        actor: info_status(&actor),
        partner: info_status(&partner),
    };
    let good = lacpdu_frame(src, actor, partner);
    let dir = std::env::temp_dir().join(format!("lagd-lacpdu-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    struct RemoveDir(PathBuf);
    impl Drop for RemoveDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _cleanup = RemoveDir(dir.clone());
    let check = |name: &str, frames: &[Vec<u8>]| {
        let path = dir.join(format!("{name}.pcap"));
        let mut w = PcapWriter::new(std::fs::File::create(&path).unwrap(), 1).unwrap();
        for (i, f) in frames.iter().enumerate() {
            w.write_packet(i as u64 * 1_000_000, f).unwrap();
        }
        drop(w.into_inner());
        check_lacpdus_with_tshark(&path, &expect)
    };
    // The positive control: two sound LACPDUs (the first in an earlier state) pass.
    let earlier = lacpdu_frame(
        src,
        LacpInfo {
            state: PortState(0x07),
            ..actor
        },
        LacpInfo::default(),
    );
    assert_eq!(check("good", &[earlier.clone(), good.clone()]).unwrap(), 2);
    let fails = |name: &str, frames: &[Vec<u8>], why: &str| {
        let err = format!("{:#}", check(name, frames).expect_err(name));
        assert!(err.contains(why), "{name}: expected {why:?} in: {err}");
    };
    // Actor Information length 19 instead of 20: tshark's expert info flags it.
    let mut bad_len = good.clone();
    bad_len[14 + 3] = 19;
    fails("tlv-length", &[bad_len], "Expert Info");
    // Cut in the middle of the Partner Information: malformed.
    fails("truncated", &[good[..50].to_vec()], "Malformed");
    // A frame from the member that is not a LACPDU (a Marker PDU's subtype).
    let mut marker = good.clone();
    marker[14] = 2;
    fails("not-lacp", &[marker], "not a LACPDU");
    // Sound LACPDUs whose fields are not what lagd reports.
    let other_key = lacpdu_frame(src, LacpInfo { key: 16, ..actor }, partner);
    fails("actor-key", &[other_key, good.clone()], "actor key 16");
    let stale_state = lacpdu_frame(
        src,
        LacpInfo {
            state: PortState(0x0f),
            ..actor
        },
        partner,
    );
    fails(
        "actor-state",
        &[good.clone(), stale_state],
        "actor state 0x0f",
    );
    let other_partner = lacpdu_frame(src, actor, LacpInfo { port: 3, ..partner });
    fails("partner-port", &[other_partner], "partner port 3");
    // Expired set in the last LACPDU and cleared since is not a difference: 802.1AX does not
    // announce that bit (see `ANNOUNCED_STATE_BITS`).
    let expired = lacpdu_frame(
        src,
        LacpInfo {
            state: PortState(0xbf),
            ..actor
        },
        partner,
    );
    assert_eq!(check("expired-bit", &[expired]).unwrap(), 1);
    // Frames from another source are not the member's: nothing to check.
    let from_other = lacpdu_frame(EthernetAddress([0x02, 0, 0, 0, 0, 9]), actor, partner);
    assert_eq!(check("other-source", &[from_other]).unwrap(), 0);
}
