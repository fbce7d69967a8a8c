//! What the kernel's own bonding selftests check (tools/testing/selftests/drivers/net/bonding/
//! in the Linux tree), asked of lagd and of the kernel bond alike: one scenario function per
//! check, run with lagd as the bond in network namespaces on this host and with the kernel's
//! bonding driver as the bond in 6.12, 6.1 and 5.10 user-mode-Linux guests (`tools/uml.py`; the
//! host's kernel may lack the driver). Where the 5.10 driver lacks an option (`lacp_active`,
//! `ns_ip6_target`, `prio`), the scenario checks that it does not take it and asks what it does
//! instead, or says in its output that a part is not run. The assertions are the same for both; where lagd differs on purpose,
//! the scenario says so in a comment (bench/interop.md, "The kernel's own bonding tests").
//!
//! - **LACPDU transmit after a MAC change and a down/up** (the selftest of a regression where
//!   an 802.3ad bond whose MAC was set by hand stopped sending LACPDUs): the bond's MAC set, the
//!   bond set down and up; fast-rate LACPDUs must keep leaving on every member, counted by
//!   tcpdump at the far end of each link.
//! - **Recovery with `updelay`** in active-backup and balance-xor (the mode-1 and mode-2
//!   selftests): host B is a bridge over its ends of the links; a member's far end goes down and
//!   up, and while it waits out `updelay` the only other member goes down: with no member up the
//!   bond must use the returning one at once (pings come back long before `updelay`). Added
//!   here: a member that returns while another is up comes back only after `updelay` (seen in
//!   the member's MII status), and the bond carries pings at every step.
//! - **Passive LACP** (the selftest of `lacp_active off`): two passive ends never aggregate and,
//!   once settled, send no LACPDU; one end made active, both distribute on every member and
//!   LACPDUs flow both ways on each link.
//! - **`arp_validate`** (from the options selftest): active-backup with the ARP monitor, the
//!   target a bridge beyond both links, every value from `none` to `filter_backup`, with an
//!   IPv4 target and with a link-local `ns_ip6_target` (the link-local target selftest: the
//!   bond must come up with one): both members come up, pings pass, and both stay up with no
//!   link failure and the bond's carrier for 3-4 s. (This found lagd validating backups under
//!   `arp_validate=active`, not counting on a validated backup the active member's probe heard
//!   through the switch, and not counting neighbour discovery under `filter`: fixed in
//!   lagd-proto's ARP monitor, which now judges each member by its state as the kernel does.)
//!
//! - **Address lists** (dev_addr_lists.sh): a macvlan's unicast MAC on the bond and the
//!   solicited-node multicast group of an IPv6 address on it must be taken by some member while
//!   the bond lives (in its address lists, or by a promiscuous member: lagd keeps its members
//!   promiscuous rather than copying the lists) and by none once the bond is gone; in
//!   active-backup, balance-xor and 802.3ad. In 802.3ad also the LACPDU multicast address in
//!   every member's list while the bond is up, and in none once it is gone; with the bond
//!   device set down the driver takes it off, lagd (whose LACP does not follow its device's
//!   state) keeps it.
//!
//! - **LACP port priority** (bond_lacp_prio.sh, Linux 6.18): host A's 802.3ad bond with
//!   `ad_select actor_port_prio` over two links to a switch and two to a backup switch; the
//!   members' `actor_port_prio` set at run time, a member flapped, and the aggregator whose
//!   members' priorities add up to the most must carry the traffic, both ways round. No kernel
//!   of the matrix has the option: there the scenario checks the driver takes neither the
//!   policy nor the per-slave value, and runs with lagd as the bond only.
//!
//! - **Peer notification** (the options selftest's `num_grat_arp` test): active-backup,
//!   `miimon 10`, `peer_notif_delay 100`, `num_grat_arp` 10, 20 and 30; after a failover host
//!   B must receive exactly that many gratuitous ARPs on the new active member's link, and as
//!   many unsolicited NAs (`num_unsol_na` is the same number in the driver), 100 ms apart.
//!   (This found lagd keeping `num_unsol_na` apart from `num_grat_arp`: fixed in lagd-proto,
//!   either name now sets both as in the driver.)
//!
//! - **`prio`** (from the options selftest): three members with prio 0, 10 and 11, the second
//!   the primary; members lost and returned, the active member checked against the driver's
//!   rule after each step, under `primary_reselect` always, better and failure, with the MII
//!   monitor in active-backup, balance-tlb and balance-alb and with the ARP monitor in
//!   active-backup; under `always` the prios changed at run time as well (test
//!   `selftests_lagd_prio` and, in the guest, `selftests_kernel_6_12_prio`).
//!
//! Needs root, ping and tcpdump, and for the guest the kernels `tools/uml.py` fetches; fails,
//! never skips, without them.

mod common;
mod guest;

use std::path::PathBuf;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use guest::in_guest;
use lagd::control::query_status;
use lagd_lab::dataplane::address_bond;
use lagd_lab::topology::{ProcessId, Side, Topology, in_path, is_root, run};
use lagd_proto::bond::options::ArpValidate;

/// Who is the bond under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Who {
    /// lagd (its own dataplane, `fastpath=off`: the same on every kernel).
    Lagd,
    /// The kernel's bonding driver.
    Kernel,
}

/// A bond in one host of a lab: lagd's or the kernel's, over every link of that host.
struct Bond {
    who: Who,
    side: Side,
    name: String,
    lagd: Option<(ProcessId, PathBuf)>,
}

impl Bond {
    /// Creates bond `name` in host `side` over every link with `opts` (the kernel's option
    /// names and values, which lagd shares), gives it address 1 (host A) or 2 (host B) and sets
    /// it up. With `mac`, the bond's MAC is set by hand: the kernel's before it is up and has
    /// members (as the selftest does), lagd's right after it started (lagd makes its bond
    /// device itself, with its members).
    fn create(
        topo: &mut Topology,
        who: Who,
        side: Side,
        name: &str,
        opts: &[(&str, &str)],
        mac: Option<&str>,
    ) -> Self {
        let lagd = match who {
            Who::Lagd => {
                let opts: Vec<String> = opts
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .chain(["fastpath=off".to_owned()])
                    .collect();
                let started = common::start_lagd(topo, side, name, &opts.join(" "));
                if let Some(mac) = mac {
                    topo.ip(side, &["link", "set", name, "address", mac])
                        .expect("setting the MAC of lagd's bond");
                }
                Some(started)
            }
            Who::Kernel => {
                let mut args = vec!["link", "add", name, "type", "bond"];
                for (k, v) in opts {
                    args.extend([*k, *v]);
                }
                topo.ip(side, &args).expect("the kernel bond");
                if let Some(mac) = mac {
                    topo.ip(side, &["link", "set", name, "address", mac])
                        .expect("setting the kernel bond's MAC");
                }
                topo.ip(side, &["link", "set", name, "up"]).unwrap();
                for l in topo.links().to_vec() {
                    topo.ip(side, &["link", "set", &l.name, "down"]).unwrap();
                    topo.ip(side, &["link", "set", &l.name, "master", name])
                        .expect("enslaving");
                }
                None
            }
        };
        let host = if side == Side::A { 1 } else { 2 };
        address_bond(topo, side, name, host).expect("the bond's address");
        Self {
            who,
            side,
            name: name.to_owned(),
            lagd,
        }
    }

    /// Removes the bond: lagd stopped (it releases its members), the kernel's deleted.
    fn remove(self, topo: &mut Topology) {
        match self.lagd {
            Some((id, _)) => {
                topo.stop(id);
                // lagd leaves its device behind when it stops (a restart resumes on it; see
                // `netns_restart`): removed here so the next bond starts afresh.
                if topo.ip(self.side, &["link", "show", &self.name]).is_ok() {
                    topo.ip(self.side, &["link", "del", &self.name])
                        .expect("deleting lagd's bond device");
                }
            }
            None => {
                topo.ip(self.side, &["link", "del", &self.name])
                    .expect("deleting the kernel bond");
            }
        }
    }

    /// `ip -d -j link show` in the bond's host, parsed.
    fn links_json(&self, topo: &Topology) -> Vec<serde_json::Value> {
        let text = topo
            .ip(self.side, &["-d", "-j", "link", "show"])
            .expect("ip -d -j link show");
        serde_json::from_str(&text).expect("ip's JSON")
    }

    /// Each member's MII status, in link order: `up`, `going back`, `down` or `going down`
    /// (lagd's status; the kernel's `mii_status` in lower case, `_` as a space).
    fn mii(&self, topo: &Topology) -> Vec<String> {
        match &self.lagd {
            Some((_, control)) => query_status(control)
                .expect("lagd status")
                .members
                .iter()
                .map(|m| m.mii_status.clone())
                .collect(),
            None => {
                let links = self.links_json(topo);
                topo.links()
                    .iter()
                    .map(|l| {
                        links
                            .iter()
                            .find(|j| j["ifname"] == l.name.as_str())
                            .and_then(|j| j["linkinfo"]["info_slave_data"]["mii_status"].as_str())
                            .unwrap_or("none")
                            .to_lowercase()
                            .replace('_', " ")
                    })
                    .collect()
            }
        }
    }

    /// Per member, in link order: whether its actor distributes (lagd's status; the actor
    /// port state in the kernel's `/proc/net/bonding`, bit 0x20).
    fn distributing(&self, topo: &Topology) -> Vec<bool> {
        match &self.lagd {
            Some((_, control)) => {
                guest::lagd_distributing(&query_status(control).expect("lagd status"))
            }
            None => {
                let text = self.proc_bonding(topo).expect("/proc/net/bonding");
                topo.links()
                    .iter()
                    .map(|l| actor_state(&text, &l.name).is_some_and(|s| s & 0x20 != 0))
                    .collect()
            }
        }
    }

    /// What the bond shows, for a failure message.
    fn describe(&self, topo: &Topology) -> String {
        match &self.lagd {
            Some((id, control)) => format!(
                "{}\n{}",
                query_status(control).map_or_else(|e| e.to_string(), |s| s.render()),
                topo.log_tail(*id, 30)
            ),
            None => self.proc_bonding(topo).unwrap_or_else(|e| format!("{e:#}")),
        }
    }

    /// The kernel bond's `/proc/net/bonding` file.
    fn proc_bonding(&self, topo: &Topology) -> anyhow::Result<String> {
        run(
            "ip",
            &[
                "netns",
                "exec",
                topo.ns(self.side),
                "cat",
                &format!("/proc/net/bonding/{}", self.name),
            ],
        )
    }
}

/// The actor port state of slave `slave` in a `/proc/net/bonding` text.
fn actor_state(text: &str, slave: &str) -> Option<u8> {
    let start = text.find(&format!("Slave Interface: {slave}\n"))?;
    let rest = &text[start + 1..];
    let part = &rest[..rest.find("Slave Interface:").unwrap_or(rest.len())];
    let actor = part.find("details actor lacp pdu:")?;
    part[actor..]
        .lines()
        .find_map(|l| l.trim().strip_prefix("port state: "))
        .and_then(|s| s.trim().parse().ok())
}

/// One ping from host A to host B's address (2), waiting up to 1 s: whether it came back.
fn ping_once(topo: &Topology) -> bool {
    Command::new("ip")
        .args(["netns", "exec", topo.ns(Side::A), "ping", "-n", "-q"])
        .args(["-c", "1", "-W", "1"])
        .arg(topo.address(2).to_string())
        .output()
        .expect("ping (iputils-ping)")
        .status
        .success()
}

/// Pings from A to B until one comes back; returns how long that took from `since`, failing
/// the test after `within`.
fn ping_until(
    topo: &Topology,
    since: Instant,
    within: Duration,
    what: impl Fn() -> String,
) -> Duration {
    loop {
        if ping_once(topo) {
            return since.elapsed();
        }
        assert!(
            since.elapsed() < within,
            "{}: no ping came back within {within:?}",
            what()
        );
    }
}

/// Captures the slow-protocol frames on host `side`'s end of every link for `window`; returns
/// how many LACPDUs each link carried from source MAC `from[i]` (that link's far end).
fn count_lacpdus(topo: &mut Topology, side: Side, window: Duration, from: &[String]) -> Vec<usize> {
    let capture = topo
        .capture_slow_protocols(side)
        .expect("tcpdump of slow-protocol frames");
    thread::sleep(window);
    topo.stop_capture(&capture);
    capture
        .files()
        .iter()
        .zip(from)
        .map(|(f, mac)| {
            let out = run(
                "tcpdump",
                &["-r", &f.to_string_lossy(), "-n", "-e", "ether", "src", mac],
            )
            .expect("reading the capture");
            out.lines().filter(|l| l.contains("LACP")).count()
        })
        .collect()
}

/// The MAC of host `side`'s end of every link, in link order (read before a kernel bond gives
/// its members its own: LACPDUs leave with the member's permanent MAC).
fn link_macs(topo: &Topology, side: Side) -> Vec<String> {
    let text = topo
        .ip(side, &["-j", "link", "show"])
        .expect("ip -j link show");
    let links: Vec<serde_json::Value> = serde_json::from_str(&text).expect("ip's JSON");
    topo.links()
        .iter()
        .map(|l| {
            links
                .iter()
                .find(|j| j["ifname"] == l.name.as_str())
                .and_then(|j| j["address"].as_str())
                .expect("the link's MAC")
                .to_owned()
        })
        .collect()
}

/// Prints one result line (the guest's output goes into the host's report).
fn report(who: Who, kernel: &str, scenario: &str, text: &str) {
    println!("SELFTEST {who:?} on {kernel} | {scenario} | {text}");
}

/// The MAC the LACPDU selftest gives the bond (locally administered).
const SET_MAC: &str = "02:54:00:3b:7c:a6";

/// LACPDUs keep leaving on every member after the bond's MAC is set by hand, and after the bond
/// is set down and up again. Unlike the selftest (a bridge beyond the links), host B has an
/// active partner bond of the same kind, fast rate: without a partner the defaulted partner
/// asks for the slow rate (one LACPDU in 30 s once the start is over, in lagd and in the
/// kernel), too slow to count in a short window; with one, each end sends one a second.
/// tcpdump at host B counts what host A's members sent (their own MACs).
fn lacpdu_tx(who: Who, kernel: &str) {
    let mut topo = Topology::create(2).expect("topology");
    let macs = link_macs(&topo, Side::A);
    let opts = [
        ("mode", "802.3ad"),
        ("miimon", "200"),
        ("xmit_hash_policy", "layer3+4"),
        ("ad_actor_sys_prio", "65535"),
        ("lacp_rate", "fast"),
    ];
    let started = Instant::now();
    let partner = Bond::create(&mut topo, who, Side::B, "stp0", &opts, None);
    let bond = Bond::create(&mut topo, who, Side::A, "st0", &opts, Some(SET_MAC));
    let converged =
        wait_both_distributing(&topo, &[&bond, &partner], started, Duration::from_secs(30));
    // One LACPDU a second per member at the fast rate (4 in 4 s measured in lagd and the
    // kernel, 3 in a loaded guest): 5 s must hold at least 3 on each.
    let window = Duration::from_secs(5);
    let first = count_lacpdus(&mut topo, Side::B, window, &macs);
    // lagd keeps its bond running while its device is down (it owns the members, not the
    // device: docs/design.md, run-time changes); the kernel stops its 802.3ad machines on down
    // and starts them again on up. Either way LACPDUs must flow again after the up, and both
    // ends distribute again.
    topo.ip(Side::A, &["link", "set", "st0", "down"]).unwrap();
    thread::sleep(Duration::from_millis(500));
    let up = Instant::now();
    topo.ip(Side::A, &["link", "set", "st0", "up"]).unwrap();
    let again = wait_both_distributing(&topo, &[&bond, &partner], up, Duration::from_secs(30));
    let second = count_lacpdus(&mut topo, Side::B, window, &macs);
    report(
        who,
        kernel,
        "LACPDU transmit",
        &format!(
            "MAC set: distributing after {:.2} s, then {first:?} LACPDUs per member in \
             {window:?}; down/up: distributing {:.2} s after the up, then {second:?}",
            converged.as_secs_f64(),
            again.as_secs_f64()
        ),
    );
    for (when, counts) in [
        ("after the MAC was set", &first),
        ("after down/up", &second),
    ] {
        assert!(
            counts.iter().all(|&n| n >= 3),
            "{who:?}: LACPDUs per member in {window:?} {when}: {counts:?} (at least 3 each \
             expected at the fast rate)\n{}",
            bond.describe(&topo)
        );
    }
    bond.remove(&mut topo);
    partner.remove(&mut topo);
    topo.teardown().expect("lab cleanup");
}

/// Waits until member `i`'s MII status is `up`; returns when it was first seen so, from
/// `since`. Fails after `within`.
fn wait_mii_up(
    topo: &Topology,
    bond: &Bond,
    i: usize,
    since: Instant,
    within: Duration,
) -> Duration {
    loop {
        let t = since.elapsed();
        if bond.mii(topo)[i] == "up" {
            return t;
        }
        assert!(
            t < within,
            "{:?}: member {i} not up after {within:?}: {:?}\n{}",
            bond.who,
            bond.mii(topo),
            bond.describe(topo)
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// Host B's bridge in the scenarios that face a switch.
const SWITCH: &str = "stbr";

/// Makes host B the switch: [`SWITCH`] over its link ends, with address 2 (returned).
fn switch_at_b(topo: &Topology) -> std::net::Ipv4Addr {
    let b = topo.ns(Side::B);
    run("ip", &["-n", b, "link", "add", SWITCH, "type", "bridge"]).expect("bridge");
    for l in topo.links() {
        run("ip", &["-n", b, "link", "set", &l.name, "master", SWITCH]).expect("bridge port");
    }
    address_bond(topo, Side::B, SWITCH, 2).expect("bridge address")
}

/// The mode-1 and mode-2 recovery selftests, with `updelay` ms: host B is a bridge (address 2)
/// over its ends of both links, host A the bond (address 1, `miimon 100`).
///
/// 1. Pings pass.
/// 2. Link 0's far end goes down for 2 s and comes back; while link 1 is up, member 0 must stay
///    out (`going back`, not `up`) until `updelay` is over (checked 300 ms after the return
///    when `updelay` is 1 s or more).
/// 3. Then link 1's far end goes down: no member is up, so the bond must take member 0 at
///    once, `updelay` or not: a ping comes back within 4 s (the selftest's check; `updelay`
///    5 s here, up to 10 s there).
/// 4. Link 1 comes back while member 0 is up: member 1 must be `up` no sooner than `updelay`
///    (less one `miimon` tick: the kernel counts the delay in ticks) and no later than
///    `updelay` + 2.5 s; pings pass.
fn recovery(who: Who, kernel: &str, mode: &str, updelay: u32) {
    let scenario = format!("{mode} recovery, updelay {updelay}");
    let mut topo = Topology::create(2).expect("topology");
    let b = topo.ns(Side::B).to_owned();
    switch_at_b(&topo);
    let updelay_s = updelay.to_string();
    let bond = Bond::create(
        &mut topo,
        who,
        Side::A,
        "st0",
        &[("mode", mode), ("miimon", "100"), ("updelay", &updelay_s)],
        None,
    );
    let fail = |what: &str| -> String {
        format!(
            "{who:?}, {scenario}: {what}; members {:?}\n{}",
            bond.mii(&topo),
            bond.describe(&topo)
        )
    };
    // 1. Both members up (enslaved without updelay), pings pass.
    let t0 = Instant::now();
    for i in 0..2 {
        wait_mii_up(&topo, &bond, i, t0, Duration::from_secs(10));
    }
    ping_until(&topo, t0, Duration::from_secs(10), || fail("at the start"));
    // 2. Link 0 lost and returned while link 1 stays up.
    let l0 = topo.links()[0].name.clone();
    let l1 = topo.links()[1].name.clone();
    run("ip", &["-n", &b, "link", "set", &l0, "down"]).unwrap();
    thread::sleep(Duration::from_secs(2));
    assert_ne!(bond.mii(&topo)[0], "up", "{}", fail("member 0 still up"));
    run("ip", &["-n", &b, "link", "set", &l0, "up"]).unwrap();
    if updelay >= 1000 {
        // Not up yet: `going back` once the monitor has seen the carrier (still `down` if a
        // loaded guest's miimon has not looked yet).
        thread::sleep(Duration::from_millis(300));
        let mii = bond.mii(&topo);
        assert_ne!(
            mii[0],
            "up",
            "{}",
            fail("member 0 up 300 ms after its return, before updelay")
        );
    }
    // 3. Link 1 lost: no member up; the bond must not wait for updelay.
    let lost = Instant::now();
    run("ip", &["-n", &b, "link", "set", &l1, "down"]).unwrap();
    // 1.1 s measured in the guest (its first ping lost), 0.01-1.2 s for lagd: 4 s leaves room
    // for a loaded machine and still tells "at once" from `updelay` 5000.
    // The 5.10 driver (5.10.46) in balance-xor with updelay carried nothing here for 4 s with
    // member 0 up: the failure mode-2-recovery-updelay was written for (6.1 and 6.12 pass).
    // What it does instead is asserted: no ping in 4 s; then step 4 as for the others.
    let old_xor = who == Who::Kernel && kernel == "5.10" && mode == "balance-xor" && updelay > 0;
    let recovered = if old_xor {
        while lost.elapsed() < Duration::from_secs(4) {
            assert!(
                !ping_once(&topo),
                "{}",
                fail("the 5.10 driver carried a ping in balance-xor with updelay and no member up")
            );
        }
        None
    } else {
        Some(ping_until(&topo, lost, Duration::from_secs(4), || {
            fail("no member up: the returning member was not taken at once")
        }))
    };
    // 4. Link 1 back while member 0 is up: updelay applies.
    wait_mii_up(
        &topo,
        &bond,
        0,
        lost,
        Duration::from_secs(if old_xor { 6 } else { 3 }),
    );
    let back = Instant::now();
    run("ip", &["-n", &b, "link", "set", &l1, "up"]).unwrap();
    let up = wait_mii_up(
        &topo,
        &bond,
        1,
        back,
        // The kernel: up to 0.75 s late in the guest (its miimon ticks and our polls).
        Duration::from_millis(u64::from(updelay) + 2500),
    );
    assert!(
        up + Duration::from_millis(100) >= Duration::from_millis(updelay.into()),
        "{}",
        fail(&format!("member 1 up after {up:?}, before updelay"))
    );
    ping_until(&topo, Instant::now(), Duration::from_secs(3), || {
        fail("after member 1 came back")
    });
    report(
        who,
        kernel,
        &scenario,
        &format!(
            "{}; the returning member up after {:.2} s",
            recovered.map_or_else(
                || "no ping in 4 s after the last up member was lost (as this driver does)"
                    .to_owned(),
                |r| format!(
                    "pings back {:.2} s after the last up member was lost",
                    r.as_secs_f64()
                )
            ),
            up.as_secs_f64()
        ),
    );
    bond.remove(&mut topo);
    topo.teardown().expect("lab cleanup");
}

/// Each member's link failure count, in link order (lagd's status; the kernel's
/// `link_failure_count`).
fn failure_counts(topo: &Topology, bond: &Bond) -> Vec<u64> {
    match &bond.lagd {
        Some((_, control)) => query_status(control)
            .expect("lagd status")
            .members
            .iter()
            .map(|m| u64::from(m.link_failure_count))
            .collect(),
        None => {
            let links = bond.links_json(topo);
            topo.links()
                .iter()
                .map(|l| {
                    links
                        .iter()
                        .find(|j| j["ifname"] == l.name.as_str())
                        .and_then(|j| {
                            j["linkinfo"]["info_slave_data"]["link_failure_count"].as_u64()
                        })
                        .unwrap_or(u64::MAX)
                })
                .collect()
        }
    }
}

/// The link-local IPv6 target of the `ns_ip6_target` runs (the bridge's address).
const V6_TARGET: &str = "fe80::5e1f:2";

/// Turns IPv6 on for device `dev` in host `side` and gives it link-local address `addr`
/// (/64, without duplicate detection).
fn link_local(topo: &Topology, side: Side, dev: &str, addr: &str) {
    topo.sysctl(side, &format!("net/ipv6/conf/{dev}/disable_ipv6"), "0")
        .expect("IPv6 on");
    topo.ip(
        side,
        &[
            "-6",
            "addr",
            "add",
            &format!("{addr}/64"),
            "dev",
            dev,
            "nodad",
        ],
    )
    .expect("link-local address");
}

/// The `arp_validate` values, as both the kernel's `ip` and lagd take them.
/// The `arp_validate` selftest: active-backup with the ARP monitor (`arp_interval 100`, the
/// target host B's bridge, address 2, over its ends of both links), for every `arp_validate`
/// value: both members come up, pings pass, and over 3 more seconds both stay up with no link
/// failure counted and the bond keeps its carrier. With `v6`, the target is the bridge's
/// link-local IPv6 address (`ns_ip6_target`, neighbour solicitations; the bond has a
/// link-local address of its own), every 1000 ms as in that selftest and watched for 4 s,
/// pings still over IPv4.
fn arp_validate(who: Who, kernel: &str, v6: bool) {
    let mut results = Vec::new();
    let mut failures = Vec::new();
    for validate in ArpValidate::ALL.iter().map(|v| v.name()) {
        let mut topo = Topology::create(2).expect("topology");
        let br = SWITCH;
        let v4_target = switch_at_b(&topo).to_string();
        // With the IPv6 target, IPv6 on in both namespaces and the interval of the link-local
        // target selftest: with IPv6 on only for the bridge and the bond and probes every
        // 100 ms, the kernel bond's members flapped in 6.12 even without validation (4-5
        // failures in 10 s, one run; which of the two changes cured it is not known).
        let (key, target, interval) = if v6 {
            // The lab's namespaces start with IPv6 off: on again there, and on the bridge
            // with a fixed link-local address (no duplicate detection to wait out).
            for side in [Side::A, Side::B] {
                for scope in ["all", "default"] {
                    topo.sysctl(side, &format!("net/ipv6/conf/{scope}/disable_ipv6"), "0")
                        .expect("IPv6 on");
                }
            }
            link_local(&topo, Side::B, br, V6_TARGET);
            ("ns_ip6_target", V6_TARGET.to_owned(), "1000")
        } else {
            ("arp_ip_target", v4_target, "100")
        };
        let bond = Bond::create(
            &mut topo,
            who,
            Side::A,
            "st0",
            &[
                ("mode", "active-backup"),
                ("arp_interval", interval),
                (key, &target),
                ("arp_validate", validate),
            ],
            None,
        );
        if v6 {
            link_local(&topo, Side::A, "st0", "fe80::5e1f:1");
        }
        let fail = |what: &str| -> String {
            format!(
                "{who:?}, arp_validate {validate}, {key} {target}: {what}; members {:?}, \
                 failures {:?}\n{}",
                bond.mii(&topo),
                failure_counts(&topo, &bond),
                bond.describe(&topo)
            )
        };
        let t0 = Instant::now();
        let mut up = Duration::ZERO;
        for i in 0..2 {
            up = up.max(wait_mii_up(&topo, &bond, i, t0, Duration::from_secs(10)));
        }
        ping_until(&topo, Instant::now(), Duration::from_secs(5), || {
            fail("no ping came back")
        });
        // At least three intervals, so that a member the monitor would take out goes. A
        // window with a failure is watched once more: a one-CPU guest stalls now and then for
        // longer than two 100 ms intervals (bench/kernels.md: silences of about 1 s), and the
        // kernel bond's monitor counts that as a member's failure once (6.1, `all`, one CI
        // run); a member that flaps does it in the second window too.
        let window = |before: &[u64]| {
            thread::sleep(Duration::from_secs(if v6 { 4 } else { 3 }));
            let mii = bond.mii(&topo);
            let after = failure_counts(&topo, &bond);
            let carrier = topo
                .ip(Side::A, &["-o", "link", "show", "st0"])
                .expect("ip link show")
                .contains("LOWER_UP");
            let steady = mii.iter().all(|m| m == "up") && after == before && carrier;
            (steady, mii, after, carrier)
        };
        let mut before = failure_counts(&topo, &bond);
        let (mut steady, mut mii, mut after, mut carrier) = window(&before);
        let mut second_look = String::new();
        if !steady {
            second_look = format!(" (on a second look; the first: {mii:?} failures {after:?})");
            before = after;
            (steady, mii, after, carrier) = window(&before);
        }
        if steady {
            results.push(format!("{validate} {:.2} s{second_look}", up.as_secs_f64()));
        } else {
            results.push(format!(
                "{validate} NOT STEADY {mii:?} failures {after:?} carrier {carrier}"
            ));
            failures.push(fail(&format!(
                "not steady over 3 s (failures before {before:?}) or no carrier ({carrier})"
            )));
        }
        bond.remove(&mut topo);
        topo.teardown().expect("lab cleanup");
    }
    report(
        who,
        kernel,
        &format!(
            "arp_validate, active-backup with the ARP monitor, {}",
            if v6 {
                "ns_ip6_target (link-local)"
            } else {
                "arp_ip_target"
            }
        ),
        &format!(
            "both members up, pings pass, steady 3 s (4 s with the IPv6 target), for each value \
             (members up after): {}",
            results.join(", ")
        ),
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Waits until both bonds distribute on every member; returns when, from `since`.
fn wait_both_distributing(
    topo: &Topology,
    bonds: &[&Bond; 2],
    since: Instant,
    within: Duration,
) -> Duration {
    loop {
        let t = since.elapsed();
        if bonds
            .iter()
            .all(|b| b.distributing(topo).iter().all(|&d| d))
        {
            return t;
        }
        assert!(
            t < within,
            "not distributing on every member at both ends after {within:?}:\n--- A\n{}\n--- B\n{}",
            bonds[0].describe(topo),
            bonds[1].describe(topo)
        );
        thread::sleep(Duration::from_millis(50));
    }
}

/// The passive-LACP selftest: two ends with `lacp_active off` (fast rate) never aggregate and,
/// once settled, neither sends a LACPDU; host A's bond made again with `lacp_active on`, both
/// distribute on every member and LACPDUs flow on every link (the passive end answers an
/// active partner).
fn passive(who: Who, kernel: &str) {
    let mut topo = Topology::create(2).expect("topology");
    let (macs_a, macs_b) = (link_macs(&topo, Side::A), link_macs(&topo, Side::B));
    let opts = |active: &'static str| {
        [
            ("mode", "802.3ad"),
            ("miimon", "100"),
            ("lacp_rate", "fast"),
            ("lacp_active", active),
        ]
    };
    let a = Bond::create(&mut topo, who, Side::A, "sta0", &opts("off"), None);
    let b = Bond::create(&mut topo, who, Side::B, "stb0", &opts("off"), None);
    // Settled: the kernel sends a LACPDU on a state change of its own (at enslave), never
    // periodically when passive; lagd passive sends none.
    thread::sleep(Duration::from_secs(3));
    let window = Duration::from_secs(4);
    let quiet = [
        count_lacpdus(&mut topo, Side::B, window, &macs_a),
        count_lacpdus(&mut topo, Side::A, window, &macs_b),
    ];
    let none = [a.distributing(&topo), b.distributing(&topo)];
    assert!(
        quiet.iter().flatten().all(|&n| n == 0) && none.iter().flatten().all(|&d| !d),
        "{who:?}: two passive ends: LACPDUs per link in {window:?}, A's and B's {quiet:?} (none expected), \
         distributing {none:?} (none expected)\n--- A\n{}\n--- B\n{}",
        a.describe(&topo),
        b.describe(&topo)
    );
    a.remove(&mut topo);
    let started = Instant::now();
    let a = Bond::create(&mut topo, who, Side::A, "sta0", &opts("on"), None);
    let converged = wait_both_distributing(&topo, &[&a, &b], started, Duration::from_secs(20));
    let flowing = [
        count_lacpdus(&mut topo, Side::B, Duration::from_secs(4), &macs_a),
        count_lacpdus(&mut topo, Side::A, Duration::from_secs(4), &macs_b),
    ];
    report(
        who,
        kernel,
        "passive LACP",
        &format!(
            "both passive: A's and B's LACPDUs per link {quiet:?} in {window:?}, none \
             distributing; A active: both distributing after {:.2} s, then A's and B's \
             {flowing:?} per link in 4 s",
            converged.as_secs_f64()
        ),
    );
    // Fast rate both ways: one a second each way, the passive end answering too (2-3 in 3 s
    // measured in a guest).
    assert!(
        flowing.iter().flatten().all(|&n| n >= 2),
        "{who:?}: one end active: A's and B's LACPDUs per link in 4 s {flowing:?} (at least 2 \
         each expected)"
    );
    a.remove(&mut topo);
    b.remove(&mut topo);
    topo.teardown().expect("lab cleanup");
}

/// Whether member `dev` of host A takes frames for `mac`: the address is in its address lists
/// (`bridge fdb show dev`: its unicast and multicast lists) or it is promiscuous.
fn member_accepts(topo: &Topology, dev: &str, mac: &str) -> bool {
    let listed = member_lists(topo, dev, mac);
    let text = topo
        .ip(Side::A, &["-d", "-j", "link", "show", dev])
        .expect("ip -d -j link show");
    let v: serde_json::Value = serde_json::from_str(&text).expect("ip's JSON");
    listed || v[0]["promiscuity"].as_u64().unwrap_or(0) > 0
}

/// Whether `mac` is in the address lists of member `dev` of host A (`bridge fdb show dev`).
fn member_lists(topo: &Topology, dev: &str, mac: &str) -> bool {
    let ns = topo.ns(Side::A);
    let fdb = run("bridge", &["-n", ns, "fdb", "show", "dev", dev]).expect("bridge fdb show");
    fdb.lines()
        .any(|l| l.split_whitespace().next() == Some(mac))
}

/// The slow-protocols multicast address LACPDUs go to.
const LACPDU_MC: &str = "01:80:c2:00:00:02";

/// In 802.3ad, the address-list selftest's LACPDU part (bond_listen_lacpdu_multicast): every
/// member must have the LACPDU multicast address in its list while the bond is up. Then the
/// bond device is set down and up: the driver takes the address off its members while the
/// bond is down and puts it back (not the 5.10 driver: it keeps it); lagd keeps LACP running
/// whatever its bond device's state (the device is the host's side only), so its members keep
/// the address. Returns what was seen, for the report.
fn lacpdu_address(topo: &Topology, who: Who, kernel: &str, members: &[String]) -> String {
    let on = |topo: &Topology| -> Vec<bool> {
        members
            .iter()
            .map(|m| member_lists(topo, m, LACPDU_MC))
            .collect()
    };
    let up = on(topo);
    assert!(
        up.iter().all(|&l| l),
        "{who:?} on {kernel}, 802.3ad: members without {LACPDU_MC} in their lists: {up:?}"
    );
    topo.ip(Side::A, &["link", "set", "st0", "down"])
        .expect("the bond down");
    let down = on(topo);
    topo.ip(Side::A, &["link", "set", "st0", "up"])
        .expect("the bond up");
    let again = on(topo);
    // The 5.10 driver (5.10.46) kept the address on its members with the bond down: the
    // failure bond_listen_lacpdu_multicast was written for (6.1 and 6.12 take it off);
    // asserted as what it does.
    let old_driver = who == Who::Kernel && kernel == "5.10";
    let kept = who == Who::Lagd || old_driver;
    assert!(
        down.iter().all(|&l| l == kept) && again.iter().all(|&l| l),
        "{who:?} on {kernel}, 802.3ad: {LACPDU_MC} on the members with the bond down {down:?} \
         ({} expected), up again {again:?}",
        if kept { "kept" } else { "removed" }
    );
    format!(
        "802.3ad: {LACPDU_MC} on every member while up, {} while the bond is down, back when up",
        if old_driver {
            "kept (this driver's leak)"
        } else if kept {
            "kept"
        } else {
            "removed"
        }
    )
}

/// The unicast address of the address-list scenario's macvlan on the bond.
const UC_ADDR: &str = "02:00:00:12:34:56";
/// The link-local IPv6 address the address-list scenario puts on the bond, and the
/// solicited-node multicast MAC the bond joins for it.
const MC_FOR: (&str, &str) = ("fe80::78:9abc", "33:33:ff:78:9a:bc");

/// The address-list selftest (dev_addr_lists.sh: a bond must pass the addresses it holds on
/// to its members, and take them back when it goes): a macvlan with its own MAC on the bond
/// (the bond's unicast list) and a link-local IPv6 address on the bond (its solicited-node
/// multicast group); some member must take frames for both, and once the bond is removed no
/// member may. Asked as "does the member take frames for the address": the kernel puts the
/// addresses in its members' lists (in active-backup the active member's only); lagd leaves
/// the lists alone and keeps its members promiscuous while it runs (a NIC must take frames for
/// the bond's MAC), which its packet sockets undo when they close.
fn address_lists(who: Who, kernel: &str) {
    let mut seen = Vec::new();
    for mode in ["active-backup", "balance-xor", "802.3ad"] {
        let mut topo = Topology::create(2).expect("topology");
        for scope in ["all", "default"] {
            topo.sysctl(Side::A, &format!("net/ipv6/conf/{scope}/disable_ipv6"), "0")
                .expect("IPv6 on");
        }
        let bond = Bond::create(
            &mut topo,
            who,
            Side::A,
            "st0",
            &[("mode", mode), ("miimon", "100")],
            None,
        );
        topo.ip(
            Side::A,
            &[
                "link", "add", "stmv0", "link", "st0", "up", "address", UC_ADDR, "type", "macvlan",
            ],
        )
        .expect("macvlan on the bond");
        topo.ip(
            Side::A,
            &[
                "-6",
                "addr",
                "add",
                &format!("{}/64", MC_FOR.0),
                "dev",
                "st0",
            ],
        )
        .expect("IPv6 address on the bond");
        let members: Vec<String> = topo.links().iter().map(|l| l.name.clone()).collect();
        let anyone =
            |topo: &Topology, mac: &str| members.iter().any(|m| member_accepts(topo, m, mac));
        // The multicast group is joined once duplicate detection starts (asynchronously).
        let t = Instant::now();
        while !(anyone(&topo, UC_ADDR) && anyone(&topo, MC_FOR.1)) {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "{who:?}, {mode}: no member takes frames for the bond's addresses (unicast \
                 {UC_ADDR}: {}, multicast {}: {})\n{}",
                anyone(&topo, UC_ADDR),
                MC_FOR.1,
                anyone(&topo, MC_FOR.1),
                bond.describe(&topo)
            );
            thread::sleep(Duration::from_millis(50));
        }
        seen.push(format!("{mode} {:.2} s", t.elapsed().as_secs_f64()));
        if mode == "802.3ad" {
            seen.push(lacpdu_address(&topo, who, kernel, &members));
        }
        bond.remove(&mut topo);
        if who == Who::Kernel && kernel == "5.10" {
            // The 5.10 driver (5.10.46) left both addresses on a member after the bond was
            // deleted: the leak dev_addr_lists.sh was written for (6.1 and 6.12 remove them).
            // What it does instead is asserted, 1 s after the deletion.
            thread::sleep(Duration::from_secs(1));
            assert!(
                anyone(&topo, UC_ADDR) && anyone(&topo, MC_FOR.1),
                "{who:?} on {kernel}, {mode}: the members no longer take the gone bond's \
                 addresses (unicast: {}, multicast: {}): the 5.10 driver's leak is gone",
                anyone(&topo, UC_ADDR),
                anyone(&topo, MC_FOR.1)
            );
            seen.push(format!(
                "{mode}: both still taken after the bond is gone (5.10's leak)"
            ));
            topo.teardown().expect("lab cleanup");
            continue;
        }
        let t = Instant::now();
        let lacpdu = |topo: &Topology| {
            mode == "802.3ad" && members.iter().any(|m| member_lists(topo, m, LACPDU_MC))
        };
        while anyone(&topo, UC_ADDR) || anyone(&topo, MC_FOR.1) || lacpdu(&topo) {
            assert!(
                t.elapsed() < Duration::from_secs(5),
                "{who:?}, {mode}: the bond is gone but a member still takes frames for its \
                 addresses (unicast: {}, multicast: {}, LACPDU multicast listed: {})",
                anyone(&topo, UC_ADDR),
                anyone(&topo, MC_FOR.1),
                lacpdu(&topo)
            );
            thread::sleep(Duration::from_millis(50));
        }
        topo.teardown().expect("lab cleanup");
    }
    report(
        who,
        kernel,
        "address lists (a macvlan's unicast, an IPv6 solicited-node multicast; in 802.3ad the \
         LACPDU multicast)",
        &format!(
            "a member takes both while the bond lives (after: {}), {}",
            seen.join(", "),
            if who == Who::Kernel && kernel == "5.10" {
                "still after it is gone (this driver's leak)"
            } else {
                "none once it is gone"
            }
        ),
    );
}

/// The active member's name: lagd's status; the kernel's `active_slave` (`ip -d -j link`).
fn active_member(topo: &Topology, bond: &Bond) -> Option<String> {
    match &bond.lagd {
        Some((_, control)) => query_status(control).expect("lagd status").active,
        None => bond
            .links_json(topo)
            .iter()
            .find(|j| j["ifname"] == bond.name.as_str())
            .and_then(|j| j["linkinfo"]["info_data"]["active_slave"].as_str())
            .map(str::to_owned),
    }
}

/// Sets every member's `prio` (`prios[i]` for link `i`): the kernel's per-slave option through
/// `ip link set LINK type bond_slave prio N`, lagd's `prio=` through its control socket
/// (what `lagctl set` sends). Checks the value reads back (`ip -d link`, lagd's status).
fn set_prios(topo: &Topology, bond: &Bond, prios: &[i32]) {
    let links = topo.links().to_vec();
    match &bond.lagd {
        Some((_, control)) => {
            let value: Vec<String> = links
                .iter()
                .zip(prios)
                .map(|(l, p)| format!("{}:{p}", l.name))
                .collect();
            set_at_run_time(control, "prio", value.join(","));
            let got: Vec<i32> = query_status(control)
                .expect("lagd status")
                .members
                .iter()
                .map(|m| m.prio)
                .collect();
            assert_eq!(got, prios, "lagd's members' prio");
        }
        None => {
            for (l, p) in links.iter().zip(prios) {
                topo.ip(
                    bond.side,
                    &[
                        "link",
                        "set",
                        &l.name,
                        "type",
                        "bond_slave",
                        "prio",
                        &p.to_string(),
                    ],
                )
                .expect("the kernel's per-slave prio (Linux 6.0 and later)");
            }
            let json = bond.links_json(topo);
            let got: Vec<i64> = links
                .iter()
                .map(|l| {
                    json.iter()
                        .find(|j| j["ifname"] == l.name.as_str())
                        .and_then(|j| j["linkinfo"]["info_slave_data"]["prio"].as_i64())
                        .expect("prio in ip -d link")
                })
                .collect();
            let want: Vec<i64> = prios.iter().map(|&p| p.into()).collect();
            assert_eq!(got, want, "the kernel bond's members' prio");
        }
    }
}

/// `lagctl set OPTION=VALUE` on the lagd answering at `control`, as a test step (panics if
/// lagd refuses it).
fn set_at_run_time(control: &std::path::Path, option: &str, value: String) {
    lagd::control::request(
        &lagd::control::Endpoint::File(control.to_path_buf()),
        &lagd::control::Request::Set {
            options: vec![(option.into(), value)],
        },
    )
    .unwrap_or_else(|e| panic!("lagd's {option} set at run time: {e}"));
}

/// On a kernel bond whose driver has no per-slave `prio` (before Linux 6.0): tries to set
/// one and returns how the kernel answered, failing if the value was taken (read back in
/// `ip -d link`). iproute2 may send the attribute anyway; the driver refuses or ignores it.
fn prio_not_taken(topo: &Topology, bond: &Bond) -> String {
    let link = topo.links()[0].name.clone();
    let answer = topo.ip(
        bond.side,
        &["link", "set", &link, "type", "bond_slave", "prio", "10"],
    );
    let json = bond.links_json(topo);
    let shown = json
        .iter()
        .find(|j| j["ifname"] == link.as_str())
        .map(|j| j["linkinfo"]["info_slave_data"]["prio"].clone())
        .unwrap_or_default();
    assert!(
        shown.is_null(),
        "a kernel before 6.0 took the per-slave prio: ip -d link shows prio {shown}"
    );
    match answer {
        Ok(_) => "ip accepted it, the driver ignored it (no prio in ip -d link)".to_owned(),
        Err(e) => format!(
            "refused ({})",
            format!("{e:#}").lines().last().unwrap_or("").trim()
        ),
    }
}

/// The options selftest's `prio` test: host B a bridge over three links, host A the bond
/// (`mode`, link monitor `monitor`: the MII monitor or the ARP monitor towards the bridge's
/// address every 1000 ms), `primary` the second member, prio 0, 10 and 11. After each step the
/// active member must become the one the driver's rule names (within 10 s) and pings pass:
///
/// 1. the primary at the start;
/// 2. the primary lost: the member with the highest prio (11);
/// 3. that one lost too: the only one left (prio 0);
/// 4. the prio-11 member back: it takes over under `always`; `better` (equal speeds) and
///    `failure` keep the active member (checked once the returning member is up, and again
///    after 1 s);
/// 5. the primary back: it takes over under `always`; the others keep the active member, and
///    under `failure` the primary takes over once that one is lost;
/// 6. under `always`: new prios (1000000, 0, -50) while the primary is active change nothing;
///    the primary lost, the highest of the new prios takes over.
///
/// Without `with_prio`, what a kernel without the option (before 6.0) does, and any bond with
/// every prio equal: no prio set (on such a kernel the setting is tried and must not be
/// taken), and a failover takes the first member up in enslave order:
///
/// 1. the primary at the start;
/// 2. the primary lost: the first member;
/// 3. that one lost too: the third;
/// 4. the first back: nobody takes over (it is not the primary), under every policy;
/// 5. the primary back: as in 5 above.
///
/// Returns `Err` with what happened when the scenario's premise broke rather than the rule:
/// the member a step waits for was taken down by the bond's own monitor during that step (its
/// link failure count rose although the test did not touch its link). Under the ARP monitor in
/// a loaded one-CPU guest a backup can miss its probes just as the primary goes; the driver
/// then rightly picks among the members it still counts up, and under `better` never moves
/// back. The caller runs the scenario again; any other wrong member fails here.
fn prio(
    who: Who,
    kernel: &str,
    mode: &str,
    monitor: &str,
    reselect: &str,
    with_prio: bool,
) -> Result<(), String> {
    let scenario = format!(
        "prio{}, {mode}, {monitor}, primary_reselect {reselect}",
        if with_prio { "" } else { " (none set)" }
    );
    let mut topo = Topology::create(3).expect("topology");
    let b = topo.ns(Side::B).to_owned();
    let target = switch_at_b(&topo).to_string();
    let names: Vec<String> = topo.links().iter().map(|l| l.name.clone()).collect();
    let mut opts: Vec<(&str, &str)> = vec![("mode", mode)];
    if monitor == "miimon" {
        opts.push(("miimon", "100"));
    } else {
        // option_prio.sh's interval: at bond_options.sh's 100 ms the 5.10 driver's members
        // flapped in the guest (4-5 link failures each in one run), failing over on their own.
        opts.extend([("arp_interval", "1000"), ("arp_ip_target", target.as_str())]);
    }
    opts.extend([
        ("primary", names[1].as_str()),
        ("primary_reselect", reselect),
    ]);
    let bond = Bond::create(&mut topo, who, Side::A, "st0", &opts, None);
    // The selftest sets the prios once the members are in (the kernel's is a per-slave
    // option); lagd's go through its run-time change, the same moment.
    let mut refused = None;
    if with_prio {
        set_prios(&topo, &bond, &[0, 10, 11]);
    } else if who == Who::Kernel {
        refused = Some(prio_not_taken(&topo, &bond));
    }
    let fail = |what: &str| -> String {
        format!(
            "{who:?}, {scenario}: {what}; active {:?}, members {:?}\n{}",
            active_member(&topo, &bond),
            bond.mii(&topo),
            bond.describe(&topo)
        )
    };
    let expect_active = |step: &str, want: usize| -> Result<(), String> {
        let failures = failure_counts(&topo, &bond);
        let t0 = Instant::now();
        while active_member(&topo, &bond).as_deref() != Some(names[want].as_str()) {
            if t0.elapsed() >= Duration::from_secs(10) {
                let now = failure_counts(&topo, &bond);
                let what = format!("{step}: {} not active within 10 s", names[want]);
                if now[want] > failures[want] {
                    return Err(format!(
                        "{what}, but the monitor took it down itself during the step (link \
                         failure counts {failures:?} -> {now:?})"
                    ));
                }
                panic!("{}", fail(&what));
            }
            thread::sleep(Duration::from_millis(50));
        }
        ping_until(&topo, Instant::now(), Duration::from_secs(5), || {
            fail(&format!("{step}: no ping came back"))
        });
        Ok(())
    };
    // Member `i` stays active through the return of member `back`: checked once `back` is up,
    // and again 1 s later.
    let expect_kept = |step: &str, keep: usize, back: usize| {
        wait_mii_up(&topo, &bond, back, Instant::now(), Duration::from_secs(10));
        for _ in 0..2 {
            assert_eq!(
                active_member(&topo, &bond).as_deref(),
                Some(names[keep].as_str()),
                "{}",
                fail(&format!("{step}: {} must stay active", names[keep]))
            );
            thread::sleep(Duration::from_secs(1));
        }
        ping_until(&topo, Instant::now(), Duration::from_secs(5), || {
            fail(&format!("{step}: no ping came back"))
        });
    };
    let far = |i: usize, state: &str| {
        run("ip", &["-n", &b, "link", "set", &names[i], state]).expect("the link's far end");
    };
    let all_up = |since: Instant| {
        for i in 0..3 {
            wait_mii_up(&topo, &bond, i, since, Duration::from_secs(10));
        }
    };
    let t0 = Instant::now();
    let steps = || -> Result<(), String> {
        all_up(t0);
        expect_active("1. start", 1)?;
        // The members lost in steps 2 and 3, and the one returning in step 4.
        let (second, third) = if with_prio { (2, 0) } else { (0, 2) };
        // Every backup up by the monitor's own account at the cut (the ARP monitor may have
        // lost one for a round since the start).
        all_up(Instant::now());
        far(1, "down");
        expect_active("2. primary lost", second)?;
        far(second, "down");
        expect_active("3. only one left", third)?;
        far(second, "up");
        let kept = if !with_prio {
            expect_kept("4. the first member back", third, second);
            third
        } else if reselect == "always" {
            expect_active("4. higher prio back", 2)?;
            2
        } else {
            expect_kept("4. higher prio back", 0, 2);
            0
        };
        far(1, "up");
        match reselect {
            "always" if !with_prio => expect_active("5. primary back", 1)?,
            "always" => {
                expect_active("5. primary back", 1)?;
                set_prios(&topo, &bond, &[1_000_000, 0, -50]);
                expect_kept("6. new prios under a primary", 1, 1);
                far(1, "down");
                expect_active("6. primary lost, highest new prio", 0)?;
            }
            "better" => expect_kept("5. primary back", kept, 1),
            _ => {
                expect_kept("5. primary back", kept, 1);
                far(kept, "down");
                expect_active("5. the active member lost", 1)?;
            }
        }
        Ok(())
    };
    let outcome = steps();
    match &outcome {
        Ok(()) => report(
            who,
            kernel,
            &scenario,
            &format!(
                "every step as the rule says ({:.1} s){}",
                t0.elapsed().as_secs_f64(),
                refused.map_or(String::new(), |r| format!("; prio 10 tried: {r}"))
            ),
        ),
        Err(e) => report(who, kernel, &scenario, &format!("premise broken: {e}")),
    }
    bond.remove(&mut topo);
    topo.teardown().expect("lab cleanup");
    outcome
}

/// Host A's and host B's IPv6 addresses in the peer notification scenario.
const NOTIFY_V6: (&str, &str) = ("2001:db8:5e1f::1", "2001:db8:5e1f::2");

/// What a capture file holds from the bond after a failover: the times (s) of the
/// gratuitous ARPs for `v4` (a request whose sender and target are both `v4`) and of the
/// unsolicited neighbour advertisements from `v6` to all nodes.
fn announcements(file: &std::path::Path, v4: &str, v6: &str) -> (Vec<f64>, Vec<f64>) {
    let text =
        run("tcpdump", &["-r", &file.to_string_lossy(), "-n", "-tt"]).expect("reading the capture");
    let (mut arp, mut na) = (Vec::new(), Vec::new());
    for line in text.lines() {
        let Some(t) = line.split_whitespace().next().and_then(|t| t.parse().ok()) else {
            continue;
        };
        if line.contains(&format!("Request who-has {v4} tell {v4},")) {
            arp.push(t);
        } else if line.contains(&format!("{v6} > ff02::1: ICMP6, neighbor advertisement")) {
            na.push(t);
        }
    }
    (arp, na)
}

/// The gaps between consecutive times, in ms.
fn gaps_ms(times: &[f64]) -> Vec<u64> {
    times
        .windows(2)
        .map(|w| ((w[1] - w[0]) * 1000.0).round() as u64)
        .collect()
}

/// The options selftest's gratuitous-ARP test (`num_grat_arp`), and the same for unsolicited
/// neighbour advertisements: active-backup with `miimon 10`, `peer_notif_delay 100` and
/// `num_grat_arp` `n` (the selftest's values: 10, 20, 30), host B a bridge over its ends of
/// both links, the bond with an IPv4 and an IPv6 address, each pinged once (lagd learns the
/// bond's addresses from the host's own ARP and neighbour discovery). The active member's far
/// end goes down; on the new active member's link, host B must receive exactly `n` gratuitous
/// ARPs (the selftest counts them with a tc filter, here tcpdump) and `n` unsolicited NAs for
/// the IPv6 address (`num_unsol_na` is the same number in the driver), each series
/// `peer_notif_delay` apart (no gap under 50 ms, the whole series at least 90 % of
/// (n - 1) × 100 ms; in a guest the driver's rounds come 200 ms apart, its 10 ms timer
/// taking two of the guest's 10 ms ticks).
fn peer_notify(who: Who, kernel: &str, n: u8) {
    let mut topo = Topology::create(2).expect("topology");
    for side in [Side::A, Side::B] {
        for scope in ["all", "default"] {
            topo.sysctl(side, &format!("net/ipv6/conf/{scope}/disable_ipv6"), "0")
                .expect("IPv6 on");
        }
    }
    let b = topo.ns(Side::B).to_owned();
    let br = SWITCH;
    switch_at_b(&topo);
    topo.ip(
        Side::B,
        &[
            "-6",
            "addr",
            "add",
            &format!("{}/64", NOTIFY_V6.1),
            "dev",
            br,
            "nodad",
        ],
    )
    .expect("the bridge's IPv6 address");
    let count = n.to_string();
    // iproute2 spells the option peer_notify_delay; the driver's (sysfs) name and lagd's is
    // peer_notif_delay.
    let delay_key = if who == Who::Kernel {
        "peer_notify_delay"
    } else {
        "peer_notif_delay"
    };
    let opts = [
        ("mode", "active-backup"),
        ("miimon", "10"),
        ("num_grat_arp", count.as_str()),
        (delay_key, "100"),
    ];
    let bond = Bond::create(&mut topo, who, Side::A, "st0", &opts, None);
    topo.ip(
        Side::A,
        &[
            "-6",
            "addr",
            "add",
            &format!("{}/64", NOTIFY_V6.0),
            "dev",
            "st0",
            "nodad",
        ],
    )
    .expect("the bond's IPv6 address");
    let names: Vec<String> = topo.links().iter().map(|l| l.name.clone()).collect();
    let v4 = topo.address(1).to_string();
    let fail = |topo: &Topology, what: &str| -> String {
        format!(
            "{who:?}, num_grat_arp {n}: {what}; active {:?}, members {:?}\n{}",
            active_member(topo, &bond),
            bond.mii(topo),
            bond.describe(topo)
        )
    };
    let t0 = Instant::now();
    for i in 0..2 {
        wait_mii_up(&topo, &bond, i, t0, Duration::from_secs(10));
    }
    ping_until(&topo, t0, Duration::from_secs(10), || {
        fail(&topo, "no IPv4 ping")
    });
    let ping6 = || {
        Command::new("ip")
            .args(["netns", "exec", topo.ns(Side::A), "ping", "-6", "-n", "-q"])
            .args(["-c", "1", "-W", "1", NOTIFY_V6.1])
            .output()
            .expect("ping -6 (iputils-ping)")
            .status
            .success()
    };
    while !ping6() {
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "{}",
            fail(&topo, "no IPv6 ping came back")
        );
    }
    // Whatever the start announced is over before the failover: the driver counts its rounds
    // down from when its first active member was chosen, and a series still running at the
    // failover adds its round to the new one's (21 of 20 seen in a guest). A guest's timer
    // ticks take twice the `miimon` of 10 ms (200 ms between rounds, measured), so three
    // times the series' nominal length.
    thread::sleep(Duration::from_millis(300 * u64::from(n) + 1000));
    let old = active_member(&topo, &bond)
        .unwrap_or_else(|| panic!("{}", fail(&topo, "no active member")));
    let old_i = names
        .iter()
        .position(|l| *l == old)
        .unwrap_or_else(|| panic!("{}", fail(&topo, "the active member is not a link")));
    let new_i = 1 - old_i;
    let file = topo.dir().join(format!("notify-{n}.pcap"));
    let tcpdump = topo
        .spawn(
            Side::B,
            &format!("tcpdump-notify-{n}"),
            std::path::Path::new("tcpdump"),
            &[
                "-i",
                &names[new_i],
                "-n",
                "-Q",
                "in",
                "--immediate-mode",
                "-U",
                "-w",
                &file.to_string_lossy(),
                "arp or icmp6",
            ],
        )
        .expect("tcpdump");
    let started = Instant::now();
    while !topo.log_tail(tcpdump, 5).contains("listening on") {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "tcpdump did not start: {}",
            topo.log_tail(tcpdump, 5)
        );
        thread::sleep(Duration::from_millis(20));
    }
    let lost = Instant::now();
    run("ip", &["-n", &b, "link", "set", &names[old_i], "down"]).expect("the far end");
    while active_member(&topo, &bond).as_deref() != Some(names[new_i].as_str()) {
        assert!(
            lost.elapsed() < Duration::from_secs(2),
            "{}",
            fail(&topo, "no failover within 2 s")
        );
        thread::sleep(Duration::from_millis(20));
    }
    let failover = lost.elapsed();
    // The series takes (n - 1) × 100 ms; the selftest waits up to n + 5 s for the count. A
    // second more shows that no more come.
    let deadline = Duration::from_secs(u64::from(n) + 5);
    loop {
        thread::sleep(Duration::from_millis(250));
        let (arp, na) = announcements(&file, &v4, NOTIFY_V6.0);
        if (arp.len() >= n.into() && na.len() >= n.into()) || lost.elapsed() > deadline {
            break;
        }
    }
    thread::sleep(Duration::from_secs(1));
    topo.stop(tcpdump);
    let (arp, na) = announcements(&file, &v4, NOTIFY_V6.0);
    let (arp_gaps, na_gaps) = (gaps_ms(&arp), gaps_ms(&na));
    let median = |g: &[u64]| {
        let mut g = g.to_vec();
        g.sort_unstable();
        g.get(g.len() / 2).copied().unwrap_or(0)
    };
    report(
        who,
        kernel,
        &format!("num_grat_arp {n}, peer_notif_delay 100, miimon 10"),
        &format!(
            "failover after {:.2} s; on the new active member's link {} gratuitous ARPs (gaps \
             {}-{} ms, median {}) and {} unsolicited NAs (median gap {} ms)",
            failover.as_secs_f64(),
            arp.len(),
            arp_gaps.iter().min().unwrap_or(&0),
            arp_gaps.iter().max().unwrap_or(&0),
            median(&arp_gaps),
            na.len(),
            median(&na_gaps)
        ),
    );
    // The 5.10 driver (5.10.46) counts the rounds' ticks (n × 10 here) in a u8: 300 wraps to
    // 44, 4 rounds; the overflow the selftest's num_grat_arp 30 was written for (fixed in
    // 2023, after 5.10.46). Asserted as what that driver does.
    let ticks = u32::from(n) * 10;
    let want = if who == Who::Kernel && kernel == "5.10" && ticks > 255 {
        (ticks % 256 / 10) as usize
    } else {
        usize::from(n)
    };
    for (what, times, gaps) in [
        ("gratuitous ARPs", &arp, &arp_gaps),
        ("unsolicited NAs", &na, &na_gaps),
    ] {
        assert_eq!(
            times.len(),
            want,
            "{}",
            fail(
                &topo,
                &format!("{what} on the new active member's link (gaps {gaps:?} ms)")
            )
        );
        let span = times.last().unwrap() - times.first().unwrap();
        assert!(
            gaps.iter().all(|&g| g >= 50) && span >= 0.09 * (want - 1) as f64,
            "{}",
            fail(
                &topo,
                &format!("{what} not peer_notif_delay (100 ms) apart: gaps {gaps:?} ms")
            )
        );
    }
    bond.remove(&mut topo);
    topo.teardown().expect("lab cleanup");
}

/// The lagd binary under test.
const LAGD: &str = env!("CARGO_BIN_EXE_lagd");

/// The LACP port priority selftest's partners: a switch on links 0 and 1 (host B) and a
/// backup switch on links 2 and 3 (namespace `backup`), each an 802.3ad bond at the fast
/// rate. They are lagd (the host's kernel may have no bonding driver; in a guest any
/// partner would do: only host A's bond is under test). Returns the two processes.
fn prio_switches(topo: &mut Topology, backup: &str) -> [ProcessId; 2] {
    let names: Vec<String> = topo.links().iter().map(|l| l.name.clone()).collect();
    let b = topo.ns(Side::B).to_owned();
    for l in &names[2..] {
        run("ip", &["-n", &b, "link", "set", l, "netns", backup]).expect("to the backup switch");
    }
    let mut started = Vec::new();
    for (ns, bond, members) in [
        (b.as_str(), "stsw0", &names[..2]),
        (backup, "stbk0", &names[2..]),
    ] {
        let control = topo.dir().join(format!("{bond}.sock"));
        let id = topo
            .spawn_in(
                ns,
                &format!("lagd-{bond}"),
                std::path::Path::new(LAGD),
                &[
                    "--bond",
                    bond,
                    "--members",
                    &members.join(","),
                    "--opts",
                    "mode=802.3ad miimon=100 lacp_rate=fast fastpath=off",
                    "--control",
                    &control.to_string_lossy(),
                ],
                &[],
            )
            .expect("a switch's lagd");
        started.push((id, control));
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    for (id, control) in &started {
        while query_status(control).is_err() {
            assert!(
                Instant::now() < deadline,
                "a switch's lagd did not come up:\n{}",
                topo.log_tail(*id, 20)
            );
            thread::sleep(Duration::from_millis(50));
        }
    }
    [started[0].0, started[1].0]
}

/// Sets `actor_port_prio` on members (link index, value); every other member has the default,
/// 255. The kernel's per-slave option through `ip link set LINK type bond_slave
/// actor_port_prio N` (Linux 6.18), lagd's `actor_port_prio=` through its control socket (what
/// `lagctl set` sends; the value names every member that is not at 255). Checks every member's
/// value reads back (`ip -d link`; lagd's status, the actor's port priority it sends).
fn set_port_prios(topo: &Topology, bond: &Bond, prios: &[(usize, u16)]) {
    let links = topo.links().to_vec();
    let want: Vec<u64> = (0..links.len())
        .map(|i| prios.iter().find(|p| p.0 == i).map_or(255, |p| p.1.into()))
        .collect();
    let got: Vec<u64> = match &bond.lagd {
        Some((_, control)) => {
            let value: Vec<String> = prios
                .iter()
                .map(|(i, p)| format!("{}:{p}", links[*i].name))
                .collect();
            set_at_run_time(control, "actor_port_prio", value.join(","));
            query_status(control)
                .expect("lagd status")
                .members
                .iter()
                .map(|m| m.lacp.as_ref().map_or(0, |l| l.actor.port_priority.into()))
                .collect()
        }
        None => {
            for (i, p) in prios {
                topo.ip(
                    bond.side,
                    &[
                        "link",
                        "set",
                        &links[*i].name,
                        "type",
                        "bond_slave",
                        "actor_port_prio",
                        &p.to_string(),
                    ],
                )
                .expect("the kernel's per-slave actor_port_prio (Linux 6.18 and later)");
            }
            let json = bond.links_json(topo);
            links
                .iter()
                .map(|l| {
                    json.iter()
                        .find(|j| j["ifname"] == l.name.as_str())
                        .and_then(|j| j["linkinfo"]["info_slave_data"]["actor_port_prio"].as_u64())
                        .expect("actor_port_prio in ip -d link")
                })
                .collect()
        }
    };
    assert_eq!(got, want, "{:?}: the members' actor_port_prio", bond.who);
}

/// The bond's active aggregator and each member's aggregator, in link order (lagd's status;
/// the kernel's `ad_info.aggregator` and the slaves' `ad_aggregator_id` in `ip -d -j link`).
fn aggregators(topo: &Topology, bond: &Bond) -> (Option<u64>, Vec<Option<u64>>) {
    match &bond.lagd {
        Some((_, control)) => {
            let s = query_status(control).expect("lagd status");
            let active = s
                .lacp
                .as_ref()
                .and_then(|l| l.active_aggregator.as_ref())
                .map(|a| a.id.into());
            let members = s
                .members
                .iter()
                .map(|m| m.lacp.as_ref().and_then(|l| l.aggregator_id).map(u64::from))
                .collect();
            (active, members)
        }
        None => {
            let json = bond.links_json(topo);
            let find = |name: &str| json.iter().find(|j| j["ifname"] == name).cloned();
            let active = find(&bond.name)
                .and_then(|j| j["linkinfo"]["info_data"]["ad_info"]["aggregator"].as_u64());
            let members = topo
                .links()
                .iter()
                .map(|l| {
                    find(&l.name)
                        .and_then(|j| j["linkinfo"]["info_slave_data"]["ad_aggregator_id"].as_u64())
                })
                .collect();
            (active, members)
        }
    }
}

/// Whether the bond has chosen the aggregator of links `group` (0-1: the switch, 2-3: the
/// backup switch): it is the active aggregator, as in the selftest (the bond's aggregator is
/// the one of the member named), and the bond distributes on exactly those links.
fn chose(topo: &Topology, bond: &Bond, group: [usize; 2]) -> bool {
    let (active, members) = aggregators(topo, bond);
    let dist = bond.distributing(topo);
    active.is_some()
        && group.iter().all(|&i| members[i] == active)
        && (0..dist.len()).all(|i| dist[i] == group.contains(&i))
}

/// The LACP port priority selftest (bond_lacp_prio.sh, Linux 6.18): host A's bond (802.3ad,
/// fast rate, `ad_select actor_port_prio`) over four links, two to a switch and two to a
/// backup switch (two partner systems, so two aggregators of which one carries traffic).
///
/// 1. "setting": link 0 gets `actor_port_prio` 1000, link 2 gets 10; both read back.
/// 2. "select": link 1 goes down for 0.5 s and comes back (a link event makes the kernel choose
///    again; the selftest sets the bond's own member down, here its far end goes down, which
///    the bond sees the same way); the switch's aggregator must be the active one (1000 + 255
///    against 10 + 255) and the bond distribute on links 0 and 1 only.
/// 3. "switch": link 0 gets 10, link 2 gets 1000; link 1 flaps again; the backup switch's
///    aggregator must be the active one and the bond distribute on links 2 and 3 only.
/// 4. (added) "back": the priorities of step 1 again, link 1 flaps; the switch's again.
///
/// Between setting the priorities and the flap, lagd already chooses again (it asserts that
/// here); the kernel waits for the link event (reported, not asserted).
fn lacp_prio(who: Who, kernel: &str) {
    let mut topo = Topology::create(4).expect("topology");
    let backup = topo
        .add_namespace("bk")
        .expect("the backup switch's namespace");
    let switches = prio_switches(&mut topo, &backup);
    let opts = [
        ("mode", "802.3ad"),
        ("miimon", "100"),
        ("lacp_rate", "fast"),
        ("ad_select", "actor_port_prio"),
    ];
    let bond = Bond::create(&mut topo, who, Side::A, "st0", &opts, None);
    let names: Vec<String> = topo.links().iter().map(|l| l.name.clone()).collect();
    let b = topo.ns(Side::B).to_owned();
    let fail = |step: &str| -> String {
        format!(
            "{who:?}, actor_port_prio {step}: aggregators (active, per link) {:?}, distributing \
             {:?}\n{}",
            aggregators(&topo, &bond),
            bond.distributing(&topo),
            bond.describe(&topo)
        )
    };
    let wait_chose = |step: &str, group: [usize; 2], within: Duration| -> Duration {
        let t0 = Instant::now();
        while !chose(&topo, &bond, group) {
            assert!(
                t0.elapsed() < within,
                "{}",
                fail(&format!(
                    "{step}: links {group:?}'s aggregator not chosen within {within:?}"
                ))
            );
            thread::sleep(Duration::from_millis(50));
        }
        t0.elapsed()
    };
    let flap = || {
        run("ip", &["-n", &b, "link", "set", &names[1], "down"]).expect("link 1's far end");
        thread::sleep(Duration::from_millis(500));
        run("ip", &["-n", &b, "link", "set", &names[1], "up"]).expect("link 1's far end");
        thread::sleep(Duration::from_millis(500));
    };
    // Some aggregator first (all at 255: the one with the lower id among equals).
    let t0 = Instant::now();
    while !(chose(&topo, &bond, [0, 1]) || chose(&topo, &bond, [2, 3])) {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "{}",
            fail("start: no aggregator distributing within 20 s")
        );
        thread::sleep(Duration::from_millis(50));
    }
    let formed = t0.elapsed();
    let first = if chose(&topo, &bond, [0, 1]) {
        "switch"
    } else {
        "backup switch"
    };
    set_port_prios(&topo, &bond, &[(0, 1000), (2, 10)]);
    flap();
    let select = wait_chose("select", [0, 1], Duration::from_secs(15));
    // Held for a second.
    thread::sleep(Duration::from_secs(1));
    assert!(chose(&topo, &bond, [0, 1]), "{}", fail("select: not held"));
    set_port_prios(&topo, &bond, &[(0, 10), (2, 1000)]);
    let before_flap = if who == Who::Lagd {
        // lagd chooses again at once: the backup's ports wait out the aggregate wait, the
        // switch's leave at once.
        format!(
            "chosen again before the flap after {:.2} s",
            wait_chose(
                "switch (lagd, before the flap)",
                [2, 3],
                Duration::from_secs(10)
            )
            .as_secs_f64()
        )
    } else {
        thread::sleep(Duration::from_secs(1));
        format!(
            "1 s after the change, before the flap: {}",
            if chose(&topo, &bond, [0, 1]) {
                "the switch still"
            } else {
                "not the switch"
            }
        )
    };
    flap();
    let switched = wait_chose("switch", [2, 3], Duration::from_secs(15));
    thread::sleep(Duration::from_secs(1));
    assert!(chose(&topo, &bond, [2, 3]), "{}", fail("switch: not held"));
    // Added here: back to the priorities of step 1, so that the choice of the switch is seen
    // made against a current choice (at the start all are 255, and on a tie the current
    // active aggregator stays, whichever formed first).
    set_port_prios(&topo, &bond, &[(0, 1000), (2, 10)]);
    flap();
    let back = wait_chose("back", [0, 1], Duration::from_secs(15));
    thread::sleep(Duration::from_secs(1));
    assert!(chose(&topo, &bond, [0, 1]), "{}", fail("back: not held"));
    report(
        who,
        kernel,
        "LACP port priority (ad_select actor_port_prio)",
        &format!(
            "formed on the {} in {:.2} s; setting: read back; select: the switch's aggregator \
             (1255 against 265) {:.2} s after the flap; switch: {before_flap}, the backup's \
             (1255 against 265) {:.2} s after the flap; back: the switch's {:.2} s after the \
             flap; each held 1 s",
            first,
            formed.as_secs_f64(),
            select.as_secs_f64(),
            switched.as_secs_f64(),
            back.as_secs_f64()
        ),
    );
    bond.remove(&mut topo);
    for id in switches {
        topo.stop(id);
    }
    topo.teardown().expect("lab cleanup");
}

/// On a kernel bond whose driver predates `actor_port_prio` (Linux 6.18): neither
/// `ad_select actor_port_prio` nor the per-slave `actor_port_prio` may be taken (a probe bond
/// over one end of a veth pair, in the guest's own namespace). Returns how each was answered.
fn actor_port_prio_not_taken(kernel: &str) -> String {
    assert!(
        !driver_takes("802.3ad", "ad_select", "actor_port_prio"),
        "the bonding driver of {kernel} takes ad_select actor_port_prio (Linux 6.18)"
    );
    let (bond, slave, peer) = ("stprobe0", "stprobe1", "stprobe2");
    run(
        "ip",
        &["link", "add", bond, "type", "bond", "mode", "802.3ad"],
    )
    .expect("a probe bond");
    run(
        "ip",
        &["link", "add", slave, "type", "veth", "peer", "name", peer],
    )
    .expect("a probe veth pair");
    // The driver itself, past iproute2 (which may not know the name): the policy written to
    // sysfs while the bond is down, as the option wants, and read back.
    let sysfs = format!("/sys/class/net/{bond}/bonding/ad_select");
    let written = std::fs::write(&sysfs, "actor_port_prio");
    let read = std::fs::read_to_string(&sysfs).expect("the bond's ad_select in sysfs");
    assert!(
        written.is_err() && !read.contains("actor_port_prio"),
        "the bonding driver of {kernel} took ad_select actor_port_prio through sysfs \
         (write {written:?}, reads {read:?})"
    );
    run("ip", &["link", "set", slave, "master", bond]).expect("enslaving the probe");
    let answer = run(
        "ip",
        &[
            "link",
            "set",
            slave,
            "type",
            "bond_slave",
            "actor_port_prio",
            "1000",
        ],
    );
    let shown = run("ip", &["-d", "link", "show", slave]).expect("ip -d link show");
    run("ip", &["link", "del", slave]).expect("deleting the probe veth");
    run("ip", &["link", "del", bond]).expect("deleting the probe bond");
    assert!(
        !shown.contains("actor_port_prio 1000"),
        "the bonding driver of {kernel} took a slave's actor_port_prio:\n{shown}"
    );
    format!(
        "ad_select actor_port_prio not taken (sysfs: {}, reads {}); a slave's \
         actor_port_prio (netlink only) {}",
        written.map_or_else(|e| format!("refused, {e}"), |()| "accepted".to_owned()),
        read.trim(),
        match answer {
            Ok(_) => "accepted by ip and ignored by the driver".to_owned(),
            Err(e) => format!(
                "refused ({})",
                format!("{e:#}").lines().last().unwrap_or("").trim()
            ),
        }
    )
}

/// Every scenario with `who` as the bond, on kernel `kernel` (a label for the report).
fn scenarios(who: Who, kernel: &str) {
    assert!(
        is_root(),
        "the selftest scenarios need root (network namespaces)"
    );
    for tool in ["ping", "tcpdump"] {
        assert!(in_path(tool), "{tool} is needed");
    }
    // Each scenario's run time goes into the report.
    let timed = |what: &str, run: &dyn Fn()| {
        let t = Instant::now();
        run();
        let took = format!("{what} {:.1} s", t.elapsed().as_secs_f64());
        report(who, kernel, "time", &took);
    };
    timed("LACPDU transmit", &|| lacpdu_tx(who, kernel));
    timed("recovery", &|| {
        for mode in ["active-backup", "balance-xor"] {
            for updelay in [0, 1000, 5000] {
                recovery(who, kernel, mode, updelay);
            }
        }
    });
    // Options the matrix's oldest kernel lacks: checked that the driver does not take them
    // (and that the others do), and what that kernel does instead asked in their place.
    let lacks = |mode: &str, option: &str, value: &str| {
        who == Who::Kernel && {
            let lacks = !driver_takes(mode, option, value);
            assert_eq!(
                lacks,
                kernel == "5.10",
                "the bonding driver of {kernel} {} option {option}",
                if lacks { "lacks" } else { "has" }
            );
            lacks
        }
    };
    timed("arp_validate", &|| {
        if who == Who::Kernel && kernel == "5.10" {
            // It has no ns_ip6_target either (checked: not taken).
            assert!(lacks("active-backup", "ns_ip6_target", V6_TARGET));
            // Not a validation rule: the 5.10 driver's ARP monitor would not hold its members
            // in this lab under any value, `none` included (at 100 ms 5 link failures each in
            // 3 s; at 1000 ms the first member went down once), so the scenario's "steady"
            // cannot be asked of it. Said, not skipped silently (bench/interop.md).
            report(
                who,
                kernel,
                "arp_validate",
                "not run: this driver's ARP monitor does not hold its members steady in this \
                 lab under any arp_validate value, none included; ns_ip6_target not taken",
            );
            return;
        }
        arp_validate(who, kernel, false);
        // The selftest's IPv6 half, with a link-local target as in the link-local target
        // selftest (bond-lladdr-target: the bond must come up with one).
        if lacks("active-backup", "ns_ip6_target", V6_TARGET) {
            report(
                who,
                kernel,
                "arp_validate with ns_ip6_target",
                "not run: this driver has no ns_ip6_target (it takes the bond without it)",
            );
        } else {
            arp_validate(who, kernel, true);
        }
    });
    timed("address lists", &|| address_lists(who, kernel));
    timed("peer notification", &|| {
        for n in [10, 20, 30] {
            peer_notify(who, kernel, n);
        }
    });
    timed("LACP port priority", &|| {
        // No kernel of the matrix has actor_port_prio (Linux 6.18): the driver must not take
        // it, and the scenario runs with lagd as the bond only (selftests_lagd). A driver
        // that has it runs the scenario as lagd does.
        if who == Who::Kernel && !driver_takes("802.3ad", "ad_select", "actor_port_prio") {
            let how = actor_port_prio_not_taken(kernel);
            report(
                who,
                kernel,
                "LACP port priority (ad_select actor_port_prio)",
                &format!("not run: this driver has no actor_port_prio (Linux 6.18): {how}"),
            );
        } else {
            lacp_prio(who, kernel);
        }
    });
    timed("passive LACP", &|| {
        if lacks("802.3ad", "lacp_active", "off") {
            lacp_active_missing(kernel);
        } else {
            passive(who, kernel);
        }
    });
}

/// Whether the kernel's bonding driver takes `option value` in `mode` (a bond made with it, in the
/// guest's own namespace, shows it in `ip -d link`). iproute2 sends attributes an older
/// driver does not know, which it may ignore.
fn driver_takes(mode: &str, option: &str, value: &str) -> bool {
    let name = "stprobe0";
    let made = run(
        "ip",
        &[
            "link", "add", name, "type", "bond", "mode", mode, option, value,
        ],
    );
    // The text, not the JSON: ip's JSON names some options otherwise (`ad_lacp_active`).
    let taken = made.is_ok()
        && run("ip", &["-d", "link", "show", name])
            .expect("ip -d link show")
            .contains(&format!(" {option} {value}"));
    if made.is_ok() {
        run("ip", &["link", "del", name]).expect("deleting the probe bond");
    }
    taken
}

/// The passive LACP selftest on a driver without `lacp_active` (before Linux 5.15): both
/// ends made with `lacp_active off`, which the driver does not take; what it does instead is
/// stay active, so both ends must distribute on every member and LACPDUs flow both ways.
fn lacp_active_missing(kernel: &str) {
    let mut topo = Topology::create(2).expect("topology");
    let (macs_a, macs_b) = (link_macs(&topo, Side::A), link_macs(&topo, Side::B));
    let opts = [
        ("mode", "802.3ad"),
        ("miimon", "100"),
        ("lacp_rate", "fast"),
        ("lacp_active", "off"),
    ];
    let started = Instant::now();
    let a = Bond::create(&mut topo, Who::Kernel, Side::A, "sta0", &opts, None);
    let b = Bond::create(&mut topo, Who::Kernel, Side::B, "stb0", &opts, None);
    let converged = wait_both_distributing(&topo, &[&a, &b], started, Duration::from_secs(20));
    let flowing = [
        count_lacpdus(&mut topo, Side::B, Duration::from_secs(4), &macs_a),
        count_lacpdus(&mut topo, Side::A, Duration::from_secs(4), &macs_b),
    ];
    report(
        Who::Kernel,
        kernel,
        "passive LACP (no lacp_active in this driver)",
        &format!(
            "both ends made with lacp_active off stay active: both distributing after {:.2} s, \
             A's and B's LACPDUs per link {flowing:?} in 4 s",
            converged.as_secs_f64()
        ),
    );
    assert!(
        flowing.iter().flatten().all(|&n| n >= 2),
        "Kernel on {kernel}: lacp_active not taken, both ends active: A's and B's LACPDUs per \
         link in 4 s {flowing:?} (at least 2 each expected)"
    );
    a.remove(&mut topo);
    b.remove(&mut topo);
    topo.teardown().expect("lab cleanup");
}

/// The options selftest's `prio` scenarios with `who` as the bond, on kernel `kernel`: the MII
/// monitor in the three modes with prio, the ARP monitor in active-backup, each under every
/// `primary_reselect` (a test of their own: about 3 minutes in a guest). With `with_prio`
/// the prios are set; without, none is (a kernel before 6.0 has no such option).
fn prio_scenarios(who: Who, kernel: &str, with_prio: bool) {
    assert!(
        is_root(),
        "the selftest scenarios need root (network namespaces)"
    );
    assert!(in_path("ping"), "ping is needed");
    let t = Instant::now();
    // The 5.10 driver under the ARP monitor lost its active member when a backup came back
    // (the active member's link failure count rose with no change of its link; twice, at
    // 100 and at 1000 ms): not a selection rule, so that variant is left out there, and said.
    let arp = !(who == Who::Kernel && kernel == "5.10");
    if !arp {
        report(
            who,
            kernel,
            "prio, active-backup, arp_ip_target",
            "not run: this driver's ARP monitor takes the active member down when a backup \
             returns in this lab (bench/interop.md)",
        );
    }
    let monitors = [
        ("active-backup", "miimon"),
        ("balance-tlb", "miimon"),
        ("balance-alb", "miimon"),
        ("active-backup", "arp_ip_target"),
    ];
    for (mode, monitor) in monitors.into_iter().filter(|m| arp || m.1 == "miimon") {
        for reselect in ["always", "better", "failure"] {
            // Once more when the monitor itself broke the premise (see `prio`); twice is
            // not chance.
            if let Err(first) = prio(who, kernel, mode, monitor, reselect, with_prio) {
                if let Err(second) = prio(who, kernel, mode, monitor, reselect, with_prio) {
                    panic!(
                        "{who:?}, prio, {mode}, {monitor}, {reselect}: the premise broke in \
                         both runs:\n{first}\n{second}"
                    );
                }
            }
        }
    }
    report(
        who,
        kernel,
        "time",
        &format!("prio {:.1} s", t.elapsed().as_secs_f64()),
    );
}

/// lagd as the bond, in network namespaces on this host.
#[test]
fn selftests_lagd() {
    scenarios(Who::Lagd, "this host");
}

/// lagd as the bond, the `prio` scenarios.
#[test]
fn selftests_lagd_prio() {
    prio_scenarios(Who::Lagd, "this host", true);
    // What a kernel without prio does (5.10 in the guest): the same assertions.
    prio_scenarios(Who::Lagd, "this host", false);
}

/// The kernel's bonding driver as the bond, in a 6.12 guest (`lacp_active` needs 5.15 or
/// later; 6.12 is the one the CI run can afford).
#[test]
#[ignore = "about 2 minutes in a guest: run with --ignored (CI does, beside its kernel matrix)"]
fn selftests_kernel_6_12() {
    in_guest("6.12", "selftests_kernel_6_12", 600, |k| {
        scenarios(Who::Kernel, k);
    });
}

/// The kernel's bonding driver as the bond, the `prio` scenarios, in a 6.12 guest (the
/// per-slave `prio` is Linux 6.0 and later).
#[test]
#[ignore = "about 3 minutes in a guest: run with --ignored (CI does, beside its kernel matrix)"]
fn selftests_kernel_6_12_prio() {
    in_guest("6.12", "selftests_kernel_6_12_prio", 900, |k| {
        prio_scenarios(Who::Kernel, k, true);
    });
}

/// The kernel's bonding driver as the bond in a 6.1 guest.
#[test]
#[ignore = "about 3 minutes in a guest: run with --ignored (CI does, beside its kernel matrix)"]
fn selftests_kernel_6_1() {
    in_guest("6.1", "selftests_kernel_6_1", 600, |k| {
        scenarios(Who::Kernel, k);
    });
}

/// The kernel's bonding driver as the bond in a 5.10 guest: its driver has no `lacp_active`
/// (Linux 5.15) and no `ns_ip6_target`; the scenarios check it takes neither, run passive LACP
/// as what it does instead (both ends stay active), and report the IPv6 target's half as not
/// run.
#[test]
#[ignore = "about 3 minutes in a guest: run with --ignored (CI does, beside its kernel matrix)"]
fn selftests_kernel_5_10() {
    in_guest("5.10", "selftests_kernel_5_10", 600, |k| {
        scenarios(Who::Kernel, k);
    });
}

/// The `prio` scenarios in a 6.1 guest (the first long-term kernel with the option).
#[test]
#[ignore = "about 3 minutes in a guest: run with --ignored (CI does, beside its kernel matrix)"]
fn selftests_kernel_6_1_prio() {
    in_guest("6.1", "selftests_kernel_6_1_prio", 900, |k| {
        prio_scenarios(Who::Kernel, k, true);
    });
}

/// A 5.10 guest: its driver has no per-slave `prio` (Linux 6.0). The setting is tried and must
/// not be taken, and the same sequence must follow the rule without it (the first member up
/// in enslave order), which lagd follows too when no prio is set (`selftests_lagd_prio`).
#[test]
#[ignore = "about 3 minutes in a guest: run with --ignored (CI does, beside its kernel matrix)"]
fn selftests_kernel_5_10_prio() {
    in_guest("5.10", "selftests_kernel_5_10_prio", 900, |k| {
        prio_scenarios(Who::Kernel, k, false);
    });
}
