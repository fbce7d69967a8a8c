//! Helpers shared by the network-namespace tests.
//!
//! Each test binary that includes this module uses only some of them.
#![allow(dead_code)]

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use lagd::control::query_status;
use lagd::status::{LacpInfoStatus, MemberStatus, Status};
use lagd_lab::dataplane::address_bond;
use lagd_lab::topology::{LacpInfoExpectation, LacpduExpectation, ProcessId, Side, Topology};
use lagd_proto::lacp::{
    AGGREGATE_WAIT_TIME, FAST_PERIODIC_TIME, MAX_TX_PER_FAST_PERIODIC, SHORT_TIMEOUT_TIME,
    SLOW_PERIODIC_TIME,
};

const LAGD: &str = env!("CARGO_BIN_EXE_lagd");
const LAGCTL: &str = env!("CARGO_BIN_EXE_lagctl");

/// Polls `check` every 20 ms until it holds (true) or `timeout` passed (false).
pub(crate) fn poll_until(timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if check() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// Polls `check` every 20 ms until it holds; panics naming `what` after `timeout`.
pub(crate) fn wait_for(what: &str, timeout: Duration, check: impl FnMut() -> bool) {
    assert!(poll_until(timeout, check), "timed out waiting for {what}");
}

/// A UDP/IPv4 frame with the flow's addresses and ports (MACs do not matter to layer3+4).
pub(crate) fn udp_frame(src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16) -> Vec<u8> {
    let mut f = vec![0u8; 12];
    f.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 28, 0, 0, 0x40, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&dst.octets());
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&[0, 8, 0, 0]);
    f
}

/// Starts lagd (process label `lagd-a` or `lagd-b`) in host `side` of `topo` as bond `bond`
/// over every link, with options `opts` and debug logging, and waits up to 10 s until its
/// control socket (`<bond>.sock` in the lab's directory) answers. Returns the process and the
/// control socket.
pub(crate) fn start_lagd(
    topo: &mut Topology,
    side: Side,
    bond: &str,
    opts: &str,
) -> (ProcessId, PathBuf) {
    let members = topo.member_list();
    let control = topo.dir().join(format!("{bond}.sock"));
    let control_s = control.to_string_lossy().into_owned();
    let lagd = topo
        .spawn(
            side,
            &format!("lagd-{}", side.letter()),
            Path::new(LAGD),
            &[
                "--bond",
                bond,
                "--members",
                &members,
                "--opts",
                opts,
                "--control",
                &control_s,
                "--log-level",
                "debug",
            ],
        )
        .expect("start lagd");
    // Long enough for a one-CPU user-mode-Linux guest (tests/guest) under load.
    let deadline = Instant::now() + Duration::from_secs(20);
    while query_status(&control).is_err() {
        assert!(
            Instant::now() < deadline,
            "lagd did not come up on {}:\n{}",
            control.display(),
            topo.log_tail(lagd, 20)
        );
        thread::sleep(Duration::from_millis(50));
    }
    (lagd, control)
}

/// `opts` with `{A}` and `{B}` standing for the hosts' bond addresses in `topo` (those
/// [`address_bonds`] gives them).
pub(crate) fn with_addresses(topo: &Topology, opts: &str) -> String {
    opts.replace("{A}", &topo.address(1).to_string())
        .replace("{B}", &topo.address(2).to_string())
}

/// Gives host A's bond `bonds[0]` the topology's address 1 and host B's `bonds[1]` address 2
/// (a /24) and sets both up; returns the two addresses.
pub(crate) fn address_bonds(topo: &Topology, bonds: &[String; 2]) -> [Ipv4Addr; 2] {
    [
        address_bond(topo, Side::A, &bonds[0], 1).unwrap(),
        address_bond(topo, Side::B, &bonds[1], 2).unwrap(),
    ]
}

/// `lagctl lacp doctor --json` for the lagd behind `control`: the causes it names, each with
/// its members.
pub(crate) fn lacp_doctor(control: &Path) -> Vec<(String, Vec<String>)> {
    let out = Command::new(LAGCTL)
        .args(["lacp", "doctor", "--json", "--control"])
        .arg(control)
        .output()
        .expect("lagctl");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stderr));
    });
    let causes: Vec<(String, Vec<String>)> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let members = f["members"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m.as_str().unwrap().to_owned())
                .collect();
            (f["cause"].as_str().unwrap().to_owned(), members)
        })
        .collect();
    // Exit code 0 exactly when the doctor says healthy, 3 otherwise.
    let healthy = causes.iter().any(|(c, _)| c == "healthy");
    assert_eq!(
        out.status.code(),
        Some(if healthy { 0 } else { 3 }),
        "{causes:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    causes
}

/// How long the LACP tests sleep between two status queries while they wait for a change.
pub(crate) const STATUS_POLL: Duration = Duration::from_millis(20);

/// Polls `status` of each of `hosts` every [`STATUS_POLL`] until member `member` is (`want`
/// true) or is not distributing at every one, checking on every poll that every other member
/// distributes. Returns, per host, when the first query that saw the change started (counted
/// from `since`), and the longest status query.
pub(crate) fn wait_member_distributing<const N: usize>(
    hosts: [Side; N],
    status: impl Fn(Side) -> Status,
    member: usize,
    want: bool,
    since: Instant,
    within: Duration,
) -> ([Duration; N], Duration) {
    let mut seen: [Option<Duration>; N] = [None; N];
    let mut longest_query = Duration::ZERO;
    while seen.iter().any(Option::is_none) {
        for (i, &side) in hosts.iter().enumerate() {
            if seen[i].is_some() {
                continue;
            }
            let asked = since.elapsed();
            let q = Instant::now();
            let s = status(side);
            longest_query = longest_query.max(q.elapsed());
            for (k, m) in s.members.iter().enumerate() {
                let distributing = m.lacp.as_ref().expect("member LACP status").distributing;
                if k == member {
                    if distributing == want {
                        seen[i] = Some(asked);
                    }
                } else {
                    assert!(
                        distributing,
                        "host {side:?}: {} left distribution too:\n{}",
                        m.name,
                        s.render()
                    );
                }
            }
            assert!(
                asked < within,
                "host {side:?}: {} distributing is not {want} after {within:?}:\n{}",
                s.members[member].name,
                s.render()
            );
        }
        thread::sleep(STATUS_POLL);
    }
    (seen.map(Option::unwrap), longest_query)
}

/// The latest a member whose LACPDUs are all dropped from `t` on can still be seen
/// distributing, counted from `t`: the member's partner information times out
/// (`current_while`, [`SHORT_TIMEOUT_TIME`] = 3 × the fast periodic time) 3 s after the last
/// LACPDU it received, and that one arrived before `t`, so it leaves by `t` + 3 s; the poll
/// that sees it starts at most one [`STATUS_POLL`] plus one status query later.
pub(crate) fn leave_bound(longest_query: Duration) -> Duration {
    SHORT_TIMEOUT_TIME + STATUS_POLL + longest_query
}

/// The earliest such a member may leave, counted from `t`, if the drop took `attach` to put in
/// place: the partner sends a LACPDU every [`FAST_PERIODIC_TIME`], so the last one arrived at
/// most 1 s before the drop began, and `current_while` runs 3 s from it.
pub(crate) fn leave_floor(attach: Duration) -> Duration {
    SHORT_TIMEOUT_TIME
        .saturating_sub(FAST_PERIODIC_TIME)
        .saturating_sub(attach)
}

/// The latest a member can rejoin after its LACPDUs flow again, counted from the lift.
///
/// Lifted while lagd has the member EXPIRED (`defaulted` false), the port is still selected and
/// attached, only out of sync: the partner's next periodic LACPDU (within
/// [`FAST_PERIODIC_TIME`], the rate both ends use while EXPIRED) and the LACPDUs that bring
/// both ends in sync, which the transmit limit ([`MAX_TX_PER_FAST_PERIODIC`] per second) may
/// hold back for up to one more second. Once both ends have DEFAULTED it, the default partner
/// asks for the long timeout, so the next LACPDU comes within [`SLOW_PERIODIC_TIME`], and the
/// port, unselected by the defaults, also waits [`AGGREGATE_WAIT_TIME`] (2 s) in WAITING. Then
/// one poll and one status query.
pub(crate) fn rejoin_bound(defaulted: bool, longest_query: Duration) -> Duration {
    assert_eq!(MAX_TX_PER_FAST_PERIODIC, 3);
    let first_lacpdu = if defaulted {
        SLOW_PERIODIC_TIME + AGGREGATE_WAIT_TIME
    } else {
        FAST_PERIODIC_TIME
    };
    first_lacpdu + FAST_PERIODIC_TIME + STATUS_POLL + longest_query
}

/// Runs `lagctl ARGS --control CONTROL` and returns its output, failing the test with lagctl's
/// error when it refuses.
pub(crate) fn lagctl_ok(control: &Path, args: &[&str]) -> String {
    let out = Command::new(LAGCTL)
        .args(args)
        .arg("--control")
        .arg(control)
        .output()
        .expect("run lagctl");
    assert!(
        out.status.success(),
        "lagctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What the LACPDUs `member` sent must carry ([`lagd_lab::topology::check_lacpdus_with_tshark`]),
/// from its status: its permanent MAC and the actor's and partner's information.
pub(crate) fn lacpdu_expectation(member: &MemberStatus) -> LacpduExpectation {
    let lacp = member
        .lacp
        .as_ref()
        .unwrap_or_else(|| panic!("member {} has no LACP status", member.name));
    LacpduExpectation {
        src_mac: member.perm_hw_addr.clone(),
        actor: info_expectation(&lacp.actor),
        partner: info_expectation(&lacp.partner),
    }
}

/// One side's LACP information from lagd's status, as the lab's LACPDU check compares it.
pub(crate) fn info_expectation(info: &LacpInfoStatus) -> LacpInfoExpectation {
    LacpInfoExpectation {
        system_priority: info.system_priority,
        system_mac: info.system_mac.clone(),
        key: info.key,
        port_priority: info.port_priority,
        port: info.port,
        state: info.state,
    }
}
