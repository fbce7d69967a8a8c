//! `lagctl import` per dialect, for real: a bond defined for ifcfg, NetworkManager,
//! systemd-networkd, netplan, nmstate, teamd and ifupdown, naming the members of a test's own network
//! namespaces, is imported; lagd runs host A from the imported TOML against a lagd on host B;
//! the running bond reports the mode, hash policy, monitor and members the dialect said
//! (`lagctl show --json`) and carries a ping across. Each dialect's example also holds settings
//! lagd does not carry, and the import names them.
//!
//! Needs root and network namespaces; fails (never skips) without them. Every test builds its
//! own topology with a unique prefix, which `Topology` removes when dropped (also on failure).

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use lagd::control::query_status;
use lagd::status::Status;
use lagd_lab::topology::{ProcessId, Side, Topology, is_root, require_program};

mod common;

use common::{address_bonds, lagctl_ok, start_lagd};

const LAGD: &str = env!("CARGO_BIN_EXE_lagd");
const LAGCTL: &str = env!("CARGO_BIN_EXE_lagctl");

/// A bond imported from a dialect and running on host A, a lagd on host B as its peer, with
/// addresses on both bonds and a ping that crossed.
struct Imported {
    topo: Topology,
    lagd: ProcessId,
    control: PathBuf,
    /// The bond's and its members' names (host A's members are host B's too).
    bond: String,
    members: [String; 2],
    /// Host A's and host B's bond addresses.
    addrs: [Ipv4Addr; 2],
    /// What `lagctl import` wrote.
    toml: String,
}

impl Imported {
    /// Writes `files` (name, text) into a fresh lab, where `{bond}`, `{m0}`, `{m1}`, `{addr}`
    /// and `{peer}` stand for host A's bond, its two members, its address and host B's; starts
    /// host B's lagd with `peer_opts`; imports the files with `lagctl import`, checks its "not
    /// carried over" lines (one per entry of `dropped`, each containing it; a `!` first: a loss
    /// that changes behaviour, exit code 4), and starts host
    /// A's lagd from the imported TOML (with a control socket of the lab's added). Then
    /// addresses both bonds and waits (up to 20 s: LACP and the monitors' up-delays) until a
    /// ping from A reaches B.
    fn run(files: &[(&str, &str)], peer_opts: &str, dropped: &[&str]) -> Self {
        assert!(
            is_root(),
            "network namespace tests need root (CI runs them as root)"
        );
        require_program("ping", "iputils-ping").unwrap_or_else(|e| panic!("{e:#}"));
        let mut topo = Topology::create(2).expect("create topology");
        let members = [0, 1].map(|i| topo.links()[i].name.clone());
        let bond = format!("{}ba", topo.tag());
        let bond_b = format!("{}bb", topo.tag());
        let addrs = [topo.address(1), topo.address(2)];
        let fill = |t: &str| {
            t.replace("{bond}", &bond)
                .replace("{m0}", &members[0])
                .replace("{m1}", &members[1])
                .replace("{addr}", &addrs[0].to_string())
                .replace("{peer}", &addrs[1].to_string())
        };
        start_lagd(&mut topo, Side::B, &bond_b, &fill(peer_opts));

        let dir = topo.dir().join("import");
        std::fs::create_dir_all(&dir).unwrap();
        // Files in a subdirectory are written but not named: the others source them.
        let paths: Vec<PathBuf> = files
            .iter()
            .filter_map(|(name, text)| {
                let p = dir.join(fill(name));
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(&p, fill(text)).unwrap();
                (!name.contains('/')).then_some(p)
            })
            .collect();
        let out = Command::new(LAGCTL)
            .arg("import")
            .args(&paths)
            .output()
            .expect("run lagctl import");
        let toml = String::from_utf8(out.stdout).unwrap();
        // Exit code 4 when a lost setting changes behaviour (`!` in `dropped`), else 0.
        let lossy = dropped.iter().any(|d| d.starts_with('!'));
        assert_eq!(
            out.status.code(),
            Some(if lossy { 4 } else { 0 }),
            "lagctl import {paths:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let not_carried: Vec<&str> = toml
            .lines()
            .filter_map(|l| l.strip_prefix("# not carried over: "))
            .collect();
        for word in dropped {
            let word = fill(word.trim_start_matches('!'));
            assert!(
                not_carried.iter().any(|l| l.contains(&word)),
                "no 'not carried over' line names {word}:\n{toml}"
            );
        }
        assert_eq!(
            not_carried.len(),
            dropped.len(),
            "unexpected 'not carried over' lines:\n{toml}"
        );

        // The lab's control socket, as a top-level key (before [options]).
        let control = topo.dir().join(format!("{bond}.sock"));
        let config = toml.replacen(
            "\n[options]",
            &format!("control = \"{}\"\n\n[options]", control.display()),
            1,
        );
        assert_ne!(config, toml, "no [options] table in\n{toml}");
        let config_path = topo.dir().join("imported.toml");
        std::fs::write(&config_path, &config).unwrap();
        let lagd = topo
            .spawn(
                Side::A,
                "lagd-a",
                Path::new(LAGD),
                &[
                    "--config",
                    config_path.to_str().unwrap(),
                    "--log-level",
                    "debug",
                ],
            )
            .expect("start lagd from the imported configuration");
        let t = Instant::now();
        while query_status(&control).is_err() {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "lagd did not come up from\n{config}\n{}",
                topo.log_tail(lagd, 20)
            );
            thread::sleep(Duration::from_millis(50));
        }
        address_bonds(&topo, &[bond.clone(), bond_b]);
        let run = Self {
            topo,
            lagd,
            control,
            bond,
            members,
            addrs,
            toml,
        };
        let t = Instant::now();
        while !run.ping(1) {
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "no ping across the imported bond:\n{config}\n{}\n{}",
                run.status().render(),
                run.topo.log_tail(run.lagd, 20)
            );
            thread::sleep(Duration::from_millis(200));
        }
        run
    }

    /// `count` pings from host A to host B, 50 ms apart; true when every one was answered.
    /// Pinned to CPU 0: balance-rr on the kernel path counts its turns per CPU (the kernel's
    /// own counter is per CPU too on recent kernels), so only one CPU's frames show the
    /// `packets_per_slave` pattern exactly.
    fn ping(&self, count: u32) -> bool {
        Command::new("ip")
            .args(["netns", "exec", self.topo.ns(Side::A), "taskset", "-c", "0"])
            .args(["ping", "-q", "-c"])
            .arg(count.to_string())
            .args(["-i", "0.05", "-W", "2", &self.addrs[1].to_string()])
            .output()
            .expect("ping")
            .status
            .success()
    }

    /// The bond's status as `lagctl show --json` prints it.
    fn status(&self) -> Status {
        let json = lagctl_ok(&self.control, &["show", "--json"]);
        serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"))
    }

    /// The checks every dialect shares: the bond's name, its members in order and the mode; and
    /// (waiting up to 10 s: a backup's monitor may take a few intervals) the bond and every
    /// member up. Returns the status that showed them up.
    fn check_common(&self, mode: &str) -> Status {
        let t = Instant::now();
        loop {
            let s = self.status();
            assert_eq!(s.bond, self.bond);
            let names: Vec<&str> = s.members.iter().map(|m| m.name.as_str()).collect();
            assert_eq!(names, self.members, "{}", s.render());
            assert_eq!(s.mode, mode, "{}", s.render());
            if s.mii_status == "up" && s.members.iter().all(|m| m.mii_status == "up") {
                return s;
            }
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "the bond or a member is not up:\n{}",
                s.render()
            );
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits (up to 20 s) until both members distribute (802.3ad); returns the status then.
    fn wait_both_distributing(&self) -> Status {
        let t = Instant::now();
        loop {
            let s = self.status();
            if s.members
                .iter()
                .all(|m| m.lacp.as_ref().is_some_and(|l| l.distributing))
            {
                return s;
            }
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "the members never both distributed:\n{}",
                s.render()
            );
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits (up to `within`) until `member` is the active member.
    fn wait_active(&self, member: &str, within: Duration) -> Status {
        let t = Instant::now();
        loop {
            let s = self.status();
            if s.active.as_deref() == Some(member) {
                return s;
            }
            assert!(
                t.elapsed() < within,
                "{member} never became active:\n{}",
                s.render()
            );
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// The MTU of host A's bond interface.
    fn bond_mtu(&self) -> u32 {
        let out = self
            .topo
            .ip(Side::A, &["-o", "link", "show", &self.bond])
            .unwrap();
        out.split_whitespace()
            .skip_while(|w| *w != "mtu")
            .nth(1)
            .and_then(|m| m.parse().ok())
            .unwrap_or_else(|| panic!("no mtu in {out}"))
    }

    fn teardown(self) {
        self.topo.teardown().unwrap();
    }
}

/// ifcfg: an active-backup bond watched by the ARP monitor (BONDING_OPTS), primary the second
/// member. The peer broadcasts, so both of A's members hear its replies. When the primary's
/// link goes silent, the ARP monitor (not carrier: it stays up) moves A to the other member.
#[test]
fn ifcfg_active_backup_with_arp_monitor() {
    let run = Imported::run(
        &[
            (
                "ifcfg-{bond}",
                "DEVICE={bond}\nTYPE=Bond\nBONDING_MASTER=yes\n\
                 BONDING_OPTS=\"mode=active-backup arp_interval=100 arp_ip_target={peer} \
                 arp_missed_max=5 primary={m1}\"\n\
                 BOOTPROTO=none\nIPADDR={addr}\nPREFIX=24\nONBOOT=yes\n",
            ),
            ("ifcfg-{m0}", "DEVICE={m0}\nMASTER={bond}\nSLAVE=yes\n"),
            ("ifcfg-{m1}", "DEVICE='{m1}'\nMASTER={bond}\nSLAVE=yes\n"),
        ],
        "mode=broadcast miimon=100",
        &["BOOTPROTO", "IPADDR", "PREFIX", "ONBOOT"],
    );
    run.wait_active(&run.members[1], Duration::from_secs(5));
    let s = run.check_common("active-backup");
    assert_eq!(s.primary.as_deref(), Some(run.members[1].as_str()));
    assert_eq!(
        s.miimon, 0,
        "the ARP monitor, not miimon, watches the links"
    );
    assert_eq!(s.xmit_hash_policy, None);

    run.topo.drop_link_traffic(&run.members[1], true).unwrap();
    let s = run.wait_active(&run.members[0], Duration::from_secs(5));
    assert_eq!(s.members[1].mii_status, "down", "{}", s.render());
    assert!(run.ping(3), "ping over the backup");
    run.topo.drop_link_traffic(&run.members[1], false).unwrap();
    // The primary returns (primary_reselect always, the default).
    run.wait_active(&run.members[1], Duration::from_secs(5));
    run.teardown();
}

/// NetworkManager keyfiles: an active-backup bond with miimon, updelay, a primary and a cloned
/// MAC; its ports name it by interface name and by UUID. The addresses stay with the system.
#[test]
fn networkmanager_active_backup() {
    let run = Imported::run(
        &[
            (
                "{bond}.nmconnection",
                "[connection]\nid=uplink\nuuid=7d1f0e52-2c4b-4a39-9b7e-5f0c3a6d8e14\n\
                 type=bond\ninterface-name={bond}\n\n\
                 [bond]\nmode=active-backup\nmiimon=100\nupdelay=200\nprimary={m1}\n\n\
                 [ethernet]\ncloned-mac-address=02:5e:11:22:33:44\n\n\
                 [ipv4]\nmethod=manual\naddress1={addr}/24\n",
            ),
            (
                "port0.nmconnection",
                "[connection]\nid=port0\ntype=ethernet\ninterface-name={m0}\n\
                 controller={bond}\nport-type=bond\n",
            ),
            (
                "port1.nmconnection",
                "[connection]\nid=port1\ntype=ethernet\ninterface-name={m1}\n\
                 master=7d1f0e52-2c4b-4a39-9b7e-5f0c3a6d8e14\nslave-type=bond\n",
            ),
        ],
        "mode=active-backup miimon=100 primary={m1}",
        &["[ipv4] method", "[ipv4] address1"],
    );
    run.wait_active(&run.members[1], Duration::from_secs(5));
    let s = run.check_common("active-backup");
    assert_eq!(s.primary.as_deref(), Some(run.members[1].as_str()));
    assert_eq!((s.miimon, s.updelay), (100, 200));
    assert_eq!(s.mac, "02:5e:11:22:33:44");
    run.teardown();
}

/// systemd-networkd: a balance-xor bond (layer2+3, miimon, updelay, MAC and MTU from the
/// .netdev), its members from .network files; one member's own [Network] setting stays with
/// that member, and the bond's own .network (its address) with the system.
#[test]
fn systemd_networkd_balance_xor() {
    let run = Imported::run(
        &[
            (
                "25-{bond}.netdev",
                "[NetDev]\nName={bond}\nKind=bond\nMTUBytes=9000\nMACAddress=02:5e:00:00:00:25\n\n\
                 [Bond]\nMode=balance-xor\nTransmitHashPolicy=layer2+3\nMIIMonitorSec=100ms\n\
                 UpDelaySec=200ms\n",
            ),
            (
                "30-{m0}.network",
                "[Match]\nName={m0}\n\n[Network]\nBond={bond}\n",
            ),
            (
                "30-{m1}.network",
                "[Match]\nName={m1}\n\n[Network]\nBond={bond}\nLinkLocalAddressing=no\n",
            ),
            (
                "40-{bond}.network",
                "[Match]\nName={bond}\n\n[Network]\nAddress={addr}/24\n",
            ),
        ],
        "mode=balance-xor xmit_hash_policy=layer2+3 miimon=100",
        &["LinkLocalAddressing=no", "Address={addr}/24"],
    );
    let s = run.check_common("balance-xor");
    assert_eq!(s.xmit_hash_policy.as_deref(), Some("layer2+3"));
    assert_eq!((s.miimon, s.updelay), (100, 200));
    assert_eq!(s.mac, "02:5e:00:00:00:25");
    assert_eq!(run.bond_mtu(), 9000);
    run.teardown();
}

/// netplan: an 802.3ad bond (fast LACP, layer3+4, miimon) forms an aggregator with host B's
/// lagd; the bond's addresses stay with netplan.
#[test]
fn netplan_lacp() {
    let run = Imported::run(
        &[(
            "01-{bond}.yaml",
            "network:\n  version: 2\n  ethernets:\n    {m0}: {}\n    {m1}: {}\n  bonds:\n    \
             {bond}:\n      interfaces: [{m0}, {m1}]\n      addresses: [{addr}/24]\n      \
             parameters:\n        mode: 802.3ad\n        lacp-rate: fast\n        \
             mii-monitor-interval: 100ms\n        transmit-hash-policy: layer3+4\n",
        )],
        "mode=802.3ad lacp_rate=fast miimon=100 xmit_hash_policy=layer3+4",
        &["bonds.{bond}.addresses"],
    );
    run.wait_both_distributing();
    let s = run.check_common("802.3ad");
    assert_eq!(s.lacp.as_ref().unwrap().lacp_rate, "fast");
    assert_eq!(s.xmit_hash_policy.as_deref(), Some("layer3+4"));
    assert_eq!(s.miimon, 100);
    let agg = s.lacp.as_ref().unwrap().active_aggregator.as_ref();
    assert_eq!(agg.map(|a| a.number_of_ports), Some(2), "{}", s.render());
    run.teardown();
}

/// nmstate: a balance-rr bond with miimon and packets_per_slave=2: the members take turns
/// every two echo requests. The bond's IPv4 settings stay with nmstate.
#[test]
fn nmstate_balance_rr() {
    let run = Imported::run(
        &[(
            "{bond}.yml",
            "interfaces:\n- name: {bond}\n  type: bond\n  state: up\n  ipv4:\n    enabled: true\n    \
             address:\n    - ip: {addr}\n      prefix-length: 24\n  link-aggregation:\n    \
             mode: balance-rr\n    options:\n      miimon: 140\n      packets_per_slave: 2\n    \
             port:\n    - {m0}\n    - {m1}\n- name: {m0}\n  type: ethernet\n  state: up\n\
             - name: {m1}\n  type: ethernet\n  state: up\n",
        )],
        "mode=balance-rr miimon=100",
        &["{bond}.ipv4"],
    );
    let s = run.check_common("balance-rr");
    assert_eq!(s.miimon, 140);
    // One ping at a time: the member whose transmit count rose sent its echo request. With
    // packets_per_slave=2 the members take turns every two frames (about 10 changes of member
    // in 21 pings; 20 with one frame each). A stray frame (an ARP refresh) adds at most two.
    let tx = || -> Vec<u64> { run.status().members.iter().map(|m| m.tx_packets).collect() };
    let mut senders = Vec::new();
    let mut last = tx();
    for _ in 0..21 {
        assert!(run.ping(1));
        let now = tx();
        let rose: Vec<usize> = (0..2).filter(|&i| now[i] > last[i]).collect();
        if let [one] = rose[..] {
            senders.push(one);
        }
        last = now;
    }
    let changes = senders.windows(2).filter(|w| w[0] != w[1]).count();
    println!("senders {senders:?}: {changes} changes");
    assert!(senders.len() >= 18, "{senders:?}");
    assert!(senders.contains(&0) && senders.contains(&1), "{senders:?}");
    assert!(
        (7..=13).contains(&changes),
        "{changes} changes of member in {senders:?}: not two frames per member"
    );
    run.teardown();
}

/// teamd: the lacp runner (fast rate, tx_hash, min_ports, per-port LACP priorities) as
/// team2bond maps it; the aggregator-selection policy and a port's own LACP key have no
/// bonding counterpart. With one member left, below min_ports, the bond goes down.
#[test]
fn teamd_lacp_runner() {
    let run = Imported::run(
        &[(
            "{bond}.json",
            r#"{
  "device": "{bond}",
  "runner": {
    "name": "lacp",
    "active": true,
    "fast_rate": true,
    "tx_hash": ["l3", "l4"],
    "min_ports": 2,
    "agg_select_policy": "lacp_prio"
  },
  "link_watch": {"name": "ethtool"},
  "ports": {
    "{m0}": {"lacp_prio": 100},
    "{m1}": {"lacp_prio": 200, "lacp_key": 7}
  }
}
"#,
        )],
        "mode=802.3ad lacp_rate=fast miimon=100 xmit_hash_policy=layer3+4",
        &["!agg_select_policy=lacp_prio", "!lacp_key"],
    );
    run.wait_both_distributing();
    let s = run.check_common("802.3ad");
    let lacp = s.lacp.as_ref().unwrap();
    assert_eq!(lacp.lacp_rate, "fast");
    assert!(lacp.lacp_active);
    assert_eq!(lacp.min_links, 2);
    assert_eq!(s.xmit_hash_policy.as_deref(), Some("layer3+4"));
    let prios: Vec<u16> = s
        .members
        .iter()
        .map(|m| m.lacp.as_ref().unwrap().actor.port_priority)
        .collect();
    assert_eq!(prios, [100, 200], "{}", s.render());
    assert!(run.toml.contains("actor_port_prio"), "{}", run.toml);
    // min_ports 2: one member left is too few, the bond goes down.
    run.topo.set_link_down(Side::A, 1).unwrap();
    let t = Instant::now();
    loop {
        let s = run.status();
        if s.mii_status == "down" {
            assert_eq!(s.members[0].mii_status, "up", "{}", s.render());
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "one member of min_links 2 left, the bond stays up:\n{}",
            s.render()
        );
        thread::sleep(Duration::from_millis(50));
    }
    // No traffic either, at once: lagd sends nothing without carrier, although the host
    // keeps handing the TAP frames until the kernel acts on its carrier (up to a second).
    assert!(!run.ping(3), "no traffic below min_links");
    run.teardown();
}

/// ifupdown as Proxmox VE writes it: an 802.3ad bond (bond-slaves, bond-xmit-hash-policy
/// layer2+3, fast LACP) under a bridge, which stays the system's; the bond's stanza comes
/// through source-directory. It forms an aggregator with host B's lagd.
#[test]
fn ifupdown_proxmox_lacp() {
    let run = Imported::run(
        &[
            (
                "interfaces",
                "auto lo\niface lo inet loopback\n\nsource-directory interfaces.d\n\n\
                 auto vmbr0\niface vmbr0 inet static\n\taddress {addr}/24\n\tbridge-ports {bond}\n\
                 \tbridge-stp off\n",
            ),
            (
                "interfaces.d/{bond}",
                "iface {m0} inet manual\niface {m1} inet manual\n\nauto {bond}\n\
                 iface {bond} inet manual\n\tbond-slaves {m0} {m1}\n\tbond-miimon 100\n\
                 \tbond-mode 802.3ad\n\tbond-xmit-hash-policy layer2+3\n\tbond-lacp-rate 1\n",
            ),
        ],
        "mode=802.3ad lacp_rate=fast miimon=100 xmit_hash_policy=layer2+3",
        &[],
    );
    assert!(run.toml.contains("# note: vmbr0"), "{}", run.toml);
    run.wait_both_distributing();
    let s = run.check_common("802.3ad");
    assert_eq!(s.lacp.as_ref().unwrap().lacp_rate, "fast");
    assert_eq!(s.xmit_hash_policy.as_deref(), Some("layer2+3"));
    let agg = s.lacp.as_ref().unwrap().active_aggregator.as_ref();
    assert_eq!(agg.map(|a| a.number_of_ports), Some(2), "{}", s.render());
    run.teardown();
}

/// `cmd` (a binary and its arguments) run in host A's namespace: exit code, stdout, stderr.
fn in_a(topo: &Topology, cmd: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new("ip")
        .args(["netns", "exec", topo.ns(Side::A)])
        .args(cmd)
        .output()
        .expect("ip netns exec");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `lagd --check` and `lagctl import --check` against host A: a good configuration passes with
/// the data path named and leaves every interface as it was (no TAP, no change to a member);
/// a missing member, `fastpath=on` in a mode the kernel path cannot carry, an interface of the
/// bond's name that is not a TAP and a member enslaved to a bridge are errors (exit code 1).
/// (Bridges, not kernel bonds: CI's kernel need not have the bonding module.)
#[test]
fn check_changes_nothing_and_names_what_fails() {
    assert!(
        is_root(),
        "network namespace tests need root (CI runs them as root)"
    );
    let topo = Topology::create(2).expect("create topology");
    let [m0, m1] = [0, 1].map(|i| topo.links()[i].name.clone());
    let bond = format!("{}ck", topo.tag());
    let config = |name: &str, members: &str, opts: &str| {
        let p = topo.dir().join(format!("{name}.toml"));
        std::fs::write(
            &p,
            format!("bond = \"{bond}\"\nmembers = [{members}]\n\n[options]\n{opts}\n"),
        )
        .unwrap();
        p.to_str().unwrap().to_owned()
    };
    let links = || topo.ip(Side::A, &["-d", "-o", "link", "show"]).unwrap();
    let before = links();
    let good = config("good", &format!("\"{m0}\", \"{m1}\""), "mode = \"802.3ad\"");
    let (code, out, err) = in_a(&topo, &[LAGD, "--check", "--config", &good]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("ok: data path:"), "{out}");
    assert!(
        out.contains(&format!("ok: members {m0}, {m1} exist")),
        "{out}"
    );
    assert_eq!(links(), before, "lagd --check changed an interface");

    let missing = config(
        "missing",
        &format!("\"{m0}\", \"nosuch9\""),
        "mode = \"802.3ad\"",
    );
    let (code, out, _) = in_a(&topo, &[LAGD, "--check", "--config", &missing]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("error: member 'nosuch9': no such interface"),
        "{out}"
    );

    // More members than the programs' table holds: the refusal no mode or monitor removes.
    let many: Vec<String> = [m0.clone(), m1.clone()]
        .into_iter()
        .chain((2..17).map(|i| format!("nosuch{i}")))
        .map(|m| format!("\"{m}\""))
        .collect();
    let forced = config(
        "forced",
        &many.join(", "),
        "mode = \"active-backup\"\nmiimon = 100\nfastpath = \"on\"",
    );
    let (code, out, _) = in_a(&topo, &[LAGD, "--check", "--config", &forced]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains(
            "error: fastpath=on, but the kernel path cannot carry this bond: more than 16 members"
        ),
        "{out}"
    );

    // A bad configuration is a finding too, with exit code 1.
    let (code, out, _) = in_a(
        &topo,
        &[
            LAGD,
            "--check",
            "--bond",
            &bond,
            "--members",
            &m0,
            "--opts",
            "mode=nosuch",
        ],
    );
    assert_eq!(code, Some(1), "{out}");
    assert!(out.starts_with("error: "), "{out}");

    topo.ip(Side::A, &["link", "add", &bond, "type", "bridge"])
        .unwrap();
    let (code, out, _) = in_a(&topo, &[LAGD, "--check", "--config", &good]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("exists and is not a TAP"), "{out}");
    topo.ip(Side::A, &["link", "del", &bond]).unwrap();

    let kb = format!("{}kb", topo.tag());
    topo.ip(Side::A, &["link", "add", &kb, "type", "bridge"])
        .unwrap();
    topo.ip(Side::A, &["link", "set", &m1, "down"]).unwrap();
    topo.ip(Side::A, &["link", "set", &m1, "master", &kb])
        .unwrap();
    let (code, out, _) = in_a(&topo, &[LAGD, "--check", "--config", &good]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains(&format!("member '{m1}' is enslaved to '{kb}'")),
        "{out}"
    );

    // lagctl import --check: the same findings for an imported bond.
    let interfaces = topo.dir().join("interfaces");
    std::fs::write(
        &interfaces,
        format!("auto {bond}\niface {bond} inet manual\n    bond-slaves {m0} {m1}\n    bond-mode 802.3ad\n"),
    )
    .unwrap();
    let ifs = interfaces.to_str().unwrap();
    let (code, out, err) = in_a(&topo, &[LAGCTL, "import", "--check", ifs]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        out.contains("bond-slaves") || out.contains("members"),
        "{out}"
    );
    assert!(err.contains("enslaved"), "{err}");
    topo.ip(Side::A, &["link", "set", &m1, "nomaster"]).unwrap();
    let (code, _, err) = in_a(&topo, &[LAGCTL, "import", "--check", ifs]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("ok: data path:"), "{err}");
    topo.ip(Side::A, &["link", "del", &kb]).unwrap();
    topo.teardown().unwrap();
}
