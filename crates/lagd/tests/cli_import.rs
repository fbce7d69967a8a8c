//! `lagctl import`: every dialect's example (tests/data/import/) becomes a TOML configuration
//! that lagd's own loader accepts with the same options as the bond had, and names what does
//! not carry over. (tests/netns_import.rs runs an imported bond of each dialect in network
//! namespaces.)

use std::path::{Path, PathBuf};
use std::process::Command;

use lagd::config::Config;
use lagd_proto::bond::BondOptions;

const LAGCTL: &str = env!("CARGO_BIN_EXE_lagctl");

fn data(dir: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/import")
        .join(dir)
}

/// What an import must give: the bond, members, MTU, MAC, the options (as the kernel's option
/// string), words each expected "not carried over" line contains (starting with `!` for a
/// setting whose loss changes behaviour, which must be marked so and makes the exit code 4) and
/// words each "note" line contains.
struct Expect<'a> {
    bond: &'a str,
    members: &'a [&'a str],
    mtu: Option<u32>,
    mac: Option<&'a str>,
    opts: &'a str,
    dropped: &'a [&'a str],
    notes: &'a [&'a str],
}

impl Default for Expect<'_> {
    fn default() -> Self {
        Self {
            bond: "bond0",
            members: &["eth0", "eth1"],
            mtu: None,
            mac: None,
            opts: "",
            dropped: &[],
            notes: &[],
        }
    }
}

fn run(files: &[PathBuf], extra: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(LAGCTL)
        .arg("import")
        .args(files)
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn import(files: &[PathBuf], extra: &[&str]) -> (bool, String, String) {
    let (code, out, err) = run(files, extra);
    (code == Some(0), out, err)
}

/// Files a test wrote into a directory of its own; the directory goes when this does.
struct Scratch {
    dir: PathBuf,
    files: Vec<PathBuf>,
}

impl std::ops::Deref for Scratch {
    type Target = [PathBuf];
    fn deref(&self) -> &[PathBuf] {
        &self.files
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Writes `(name, text)` files into a fresh directory; returns their paths (in order).
fn write(tag: &str, files: &[(&str, &str)]) -> Scratch {
    let dir = std::env::temp_dir().join(format!("lagctl-import-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let files = files
        .iter()
        .map(|(n, t)| {
            let p = dir.join(n);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, t).unwrap();
            p
        })
        .collect();
    Scratch { dir, files }
}

fn check(files: &[PathBuf], e: &Expect<'_>) {
    check_with(files, &[], e)
}

fn check_with(files: &[PathBuf], extra: &[&str], e: &Expect<'_>) {
    let (code, toml, err) = run(files, extra);
    let lossy = e.dropped.iter().any(|d| d.starts_with('!'));
    assert_eq!(
        code,
        Some(if lossy { 4 } else { 0 }),
        "lagctl import {files:?}: {err}\n{toml}"
    );
    let c = Config::from_toml(&toml, None).unwrap_or_else(|e| panic!("{e}\n{toml}"));
    assert_eq!(c.bond, e.bond, "{toml}");
    assert_eq!(c.members, e.members, "{toml}");
    assert_eq!(c.mtu, e.mtu, "{toml}");
    assert_eq!(
        c.mac.map(|m| m.to_string()),
        e.mac.map(str::to_owned),
        "{toml}"
    );
    let (want, _) = BondOptions::parse_opts(e.opts).unwrap();
    assert_eq!(c.options, want, "options of\n{toml}\nwanted {}", e.opts);
    let dropped: Vec<&str> = toml
        .lines()
        .filter_map(|l| l.strip_prefix("# not carried over: "))
        .collect();
    for word in e.dropped {
        let (marked, word) = match word.strip_prefix('!') {
            Some(w) => (true, w),
            None => (false, *word),
        };
        assert!(
            dropped
                .iter()
                .any(|d| d.contains(word) && d.ends_with("[changes behaviour]") == marked),
            "no 'not carried over' line about {word} (changes behaviour: {marked}) in\n{toml}"
        );
        if marked {
            assert!(err.contains(word), "stderr does not name {word}: {err}");
        }
    }
    assert_eq!(
        dropped.len(),
        e.dropped.len(),
        "unexpected 'not carried over' lines in\n{toml}"
    );
    let notes: Vec<&str> = toml
        .lines()
        .filter_map(|l| l.strip_prefix("# note: "))
        .collect();
    for word in e.notes {
        assert!(
            notes.iter().any(|n| n.contains(word)),
            "no note about {word} in\n{toml}"
        );
    }
    assert_eq!(notes.len(), e.notes.len(), "unexpected notes in\n{toml}");
}

/// The error `lagctl import` gives (exit code 2) for `files`.
fn refused(files: &[PathBuf], extra: &[&str]) -> String {
    let (code, out, err) = run(files, extra);
    assert_eq!(code, Some(2), "{files:?} imported:\n{out}");
    assert!(out.is_empty(), "{out}");
    err
}

fn files(dir: &str, names: &[&str]) -> Vec<PathBuf> {
    names.iter().map(|n| data(dir).join(n)).collect()
}

#[test]
fn ifcfg() {
    check(
        &files(
            "ifcfg",
            &["ifcfg-bond0", "ifcfg-eth0", "ifcfg-eth1", "ifcfg-eth2"],
        ),
        &Expect {
            bond: "bond0",
            members: &["eth0", "eth1"],
            mtu: Some(9000),
            mac: None,
            opts: "mode=802.3ad miimon=100 lacp_rate=fast xmit_hash_policy=layer3+4 min_links=1",
            dropped: &["BOOTPROTO", "IPADDR", "PREFIX", "ONBOOT"],
            ..Expect::default()
        },
    );
}

#[test]
fn networkmanager_keyfiles() {
    check(
        &files(
            "nm",
            &[
                "bond0.nmconnection",
                "uplink-port1.nmconnection",
                "uplink-port2.nmconnection",
            ],
        ),
        &Expect {
            bond: "bond0",
            members: &["enp1s0", "enp2s0"],
            mtu: Some(1500),
            mac: Some("02:11:22:33:44:55"),
            opts: "mode=active-backup miimon=100 updelay=200 primary=enp2s0 prio=enp1s0:-5,enp2s0:20",
            dropped: &["[ipv4] method", "[ipv4] address1", "[ipv6] method"],
            ..Expect::default()
        },
    );
}

#[test]
fn systemd_networkd() {
    check(
        &files(
            "networkd",
            &[
                "25-bond1.netdev",
                "30-eno1.network",
                "30-eno2.network",
                "40-bond1.network",
            ],
        ),
        &Expect {
            bond: "bond1",
            members: &["eno1", "eno2"],
            mtu: Some(9000),
            mac: Some("02:aa:bb:cc:dd:01"),
            opts: "mode=balance-xor xmit_hash_policy=layer2+3 miimon=100 updelay=200 \
                   downdelay=0 num_grat_arp=2",
            dropped: &["[Link] MTUBytes=9000", "[Network] Address=192.0.2.40/24"],
            ..Expect::default()
        },
    );
}

#[test]
fn netplan() {
    check(
        &files("netplan", &["01-bond.yaml"]),
        &Expect {
            bond: "bond0",
            members: &["ens3", "ens4"],
            mtu: Some(9000),
            mac: None,
            opts: "mode=802.3ad lacp_rate=fast miimon=100 xmit_hash_policy=layer3+4 \
                   min_links=1 ad_select=bandwidth updelay=1000",
            dropped: &["bonds.bond0.addresses"],
            ..Expect::default()
        },
    );
}

#[test]
fn nmstate() {
    check(
        &files("nmstate", &["bond99.yaml"]),
        &Expect {
            bond: "bond99",
            members: &["eth1", "eth2"],
            mtu: Some(1500),
            mac: None,
            opts: "mode=balance-rr miimon=140 packets_per_slave=2",
            dropped: &["bond99.ipv4"],
            ..Expect::default()
        },
    );
}

#[test]
fn teamd_runners() {
    check(
        &files("teamd", &["team0-lacp.json"]),
        &Expect {
            bond: "team0",
            members: &["eth1", "eth2"],
            mtu: None,
            mac: None,
            opts: "mode=802.3ad lacp_active=1 lacp_rate=fast xmit_hash_policy=layer3+4 \
                   min_links=2 ad_select=stable miimon=100 updelay=100 downdelay=0 \
                   actor_port_prio=eth1:100,eth2:200",
            dropped: &[
                "!runner.tx_hash",
                "!agg_select_policy=lacp_prio",
                "!lacp_key",
            ],
            ..Expect::default()
        },
    );
    check(
        &files("teamd", &["team1-activebackup.json"]),
        &Expect {
            bond: "team1",
            members: &["eth1", "eth2"],
            mtu: None,
            mac: Some("02:00:00:00:00:aa"),
            opts: "mode=active-backup fail_over_mac=active arp_interval=200 \
                   arp_ip_target=192.0.2.1 arp_missed_max=3 arp_validate=active primary=eth1 \
                   primary_reselect=failure",
            dropped: &[],
            ..Expect::default()
        },
    );
    check(
        &files("teamd", &["team2-balancer.json"]),
        &Expect {
            bond: "team2",
            members: &["eth1", "eth2"],
            mtu: None,
            mac: None,
            opts: "mode=balance-xor xmit_hash_policy=layer3+4 distribution=buckets \
                   rebalance_interval=2000 miimon=100",
            dropped: &[],
            ..Expect::default()
        },
    );
}

#[test]
fn output_file_dialect_choice_and_errors() {
    let dir = std::env::temp_dir().join(format!("lagctl-import-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // --output writes the file; --from overrides the guess.
    let out = dir.join("bond0.toml");
    let (ok, stdout, err) = import(
        &files("netplan", &["01-bond.yaml"]),
        &["--from", "netplan", "--output", out.to_str().unwrap()],
    );
    assert!(ok, "{err}");
    assert!(stdout.is_empty());
    Config::from_file(&out).unwrap();

    // A file lagd's loader would refuse is an error, and nothing is written.
    let bad = dir.join("ifcfg-bond9");
    std::fs::write(
        &bad,
        "DEVICE=bond9\nBONDING_OPTS=\"mode=802.3ad arp_interval=100 arp_ip_target=10.0.0.1\"\n",
    )
    .unwrap();
    let member = dir.join("ifcfg-eth9");
    std::fs::write(&member, "DEVICE=eth9\nMASTER=bond9\n").unwrap();
    let refused = dir.join("refused.toml");
    let (ok, _, err) = import(
        &[bad.clone(), member.clone()],
        &["--output", refused.to_str().unwrap()],
    );
    assert!(!ok);
    assert!(err.contains("arp_interval"), "{err}");
    assert!(!refused.exists());

    // An option lagd does not know is reported, not silently lost.
    std::fs::write(
        &bad,
        "DEVICE=bond9\nBONDING_OPTS=\"mode=balance-xor max_bonds=2 miimon=100\"\n",
    )
    .unwrap();
    // It is written, with exit code 4: the loss may change behaviour.
    let (code, toml, err) = run(&[bad.clone(), member.clone()], &[]);
    assert_eq!(code, Some(4), "{err}");
    assert!(err.contains("max_bonds"), "{err}");
    assert!(
        toml.lines()
            .any(|l| l.starts_with("# not carried over: BONDING_OPTS max_bonds=2")),
        "{toml}"
    );

    // Several bonds: --bond picks one.
    let yaml = dir.join("two.yaml");
    std::fs::write(
        &yaml,
        "network:\n  bonds:\n    b1:\n      interfaces: [a1]\n    b2:\n      interfaces: [a2]\n",
    )
    .unwrap();
    let (ok, _, err) = import(std::slice::from_ref(&yaml), &[]);
    assert!(!ok && err.contains("--bond"), "{err}");
    let (ok, toml, err) = import(std::slice::from_ref(&yaml), &["--bond", "b2"]);
    assert!(ok, "{err}");
    assert_eq!(Config::from_toml(&toml, None).unwrap().members, ["a2"]);

    // A missing file and a malformed one name the file.
    let (ok, _, err) = import(&[dir.join("nonexistent.netdev")], &[]);
    assert!(!ok && err.contains("nonexistent.netdev"), "{err}");
    let broken = dir.join("broken.netdev");
    std::fs::write(&broken, "[NetDev]\nName=bond0\nKind=bond\n[Bond]\nMode\n").unwrap();
    let (ok, _, err) = import(&[broken], &[]);
    assert!(!ok && err.contains("broken.netdev:5"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Malformed input never panics: every prefix of every example, read as every dialect, gives
/// a bond or an error.
#[test]
fn truncated_files_give_errors_not_panics() {
    use lagd::cli::import::{Dialect, import as read};
    let dialects = Dialect::ALL;
    let mut checked = 0;
    for dir in [
        "ifcfg", "nm", "networkd", "netplan", "nmstate", "teamd", "ifupdown",
    ] {
        for entry in std::fs::read_dir(data(dir)).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            for end in (0..=text.len()).filter(|&i| text.is_char_boundary(i)) {
                let files = vec![(path.clone(), text[..end].to_owned())];
                for d in dialects {
                    let _ = read(Some(d), &files, None);
                    checked += 1;
                }
                let _ = read(None, &files, None);
            }
        }
    }
    assert!(checked > 10_000, "{checked}");
}

// ---------------------------------------------------------------------------------------------
// The defects of issue 30, each with a configuration written in the tool's documented syntax.

/// netplan: members are netplan IDs; an ID's set-name or match: name is the interface. A mode
/// netplan refuses is an error, not balance-rr.
#[test]
fn netplan_members_are_ids() {
    let files = write(
        "netplan-ids",
        &[(
            "10-bond.yaml",
            "network:\n  version: 2\n  renderer: networkd\n  ethernets:\n    uplink-a:\n      \
             match:\n        name: enp3s0\n    uplink-b:\n      match:\n        macaddress: \
             \"52:54:00:aa:bb:02\"\n      set-name: lan2\n  bonds:\n    bond0:\n      \
             interfaces: [uplink-a, uplink-b]\n      parameters:\n        mode: active-backup\n        \
             primary: uplink-b\n        mii-monitor-interval: 1s\n        up-delay: 2000\n",
        )],
    );
    check(
        &files,
        &Expect {
            members: &["enp3s0", "lan2"],
            opts: "mode=active-backup primary=lan2 miimon=1000 updelay=2000",
            notes: &["uplink-a: match: name enp3s0", "uplink-b: set-name lan2"],
            ..Expect::default()
        },
    );
    let files = write(
        "netplan-lacp",
        &[(
            "10-bond.yaml",
            "network:\n  bonds:\n    bond0:\n      interfaces: [eth0, eth1]\n      parameters:\n        \
             mode: lacp\n",
        )],
    );
    let err = refused(&files, &[]);
    assert!(
        err.contains("'lacp' is not a mode netplan accepts"),
        "{err}"
    );
    // With NetworkManager as the renderer, NetworkManager's miimon default applies.
    let files = write(
        "netplan-nm",
        &[(
            "10-bond.yaml",
            "network:\n  version: 2\n  renderer: NetworkManager\n  bonds:\n    bond0:\n      \
             interfaces: [eth0, eth1]\n      parameters:\n        mode: balance-xor\n",
        )],
    );
    check(
        &files,
        &Expect {
            opts: "mode=balance-xor miimon=100",
            notes: &["NetworkManager"],
            ..Expect::default()
        },
    );
}

/// netplan and networkd members by MAC, driver or pattern resolve on the host (here a given
/// list of interfaces); none matching is an error that says so.
#[test]
fn members_by_pattern_mac_and_driver_resolve_on_the_host() {
    use lagd::cli::import::{Dialect, HostLink, import_on};
    let host = [
        ("enp1s0f0", "52:54:00:00:00:01", "ixgbe"),
        ("enp1s0f1", "52:54:00:00:00:02", "ixgbe"),
        ("eno1", "52:54:00:00:00:03", "e1000e"),
    ]
    .map(|(n, m, d)| HostLink {
        name: n.into(),
        mac: Some(m.into()),
        driver: Some(d.into()),
    });
    let f = |name: &str, text: &str| (PathBuf::from(name), text.to_owned());
    let netdev = f(
        "20-bond0.netdev",
        "[NetDev]\nName=bond0\nKind=bond\n[Bond]\nMode=802.3ad\n",
    );
    let (_, b) = import_on(
        None,
        &[
            netdev.clone(),
            f(
                "30-ports.network",
                "[Match]\nName=enp1s0f*\n[Network]\nBond=bond0\n",
            ),
        ],
        None,
        &host,
    )
    .unwrap();
    assert_eq!(b.members, ["enp1s0f0", "enp1s0f1"]);
    assert!(
        b.notes.iter().any(|n| n.contains("Name=enp1s0f*")),
        "{:?}",
        b.notes
    );
    let (_, b) = import_on(
        None,
        &[
            netdev.clone(),
            f(
                "30-ports.network",
                "[Match]\nDriver=e1000*\n[Network]\nBond=bond0\n",
            ),
        ],
        None,
        &host,
    )
    .unwrap();
    assert_eq!(b.members, ["eno1"]);
    let e = import_on(
        None,
        &[
            netdev,
            f(
                "30-ports.network",
                "[Match]\nName=ens9*\n[Network]\nBond=bond0\n",
            ),
        ],
        None,
        &host,
    )
    .unwrap_err();
    assert!(
        e.message.contains("no interface of this host matches"),
        "{e}"
    );
    let yaml = "network:\n  ethernets:\n    p0:\n      match:\n        macaddress: \
                52:54:00:00:00:02\n    p1:\n      match:\n        driver: e1000e\n  bonds:\n    \
                bond0:\n      interfaces: [p0, p1]\n";
    let (d, b) = import_on(None, &[f("01-netcfg.yaml", yaml)], None, &host).unwrap();
    assert_eq!(d, Dialect::Netplan);
    assert_eq!(b.members, ["enp1s0f1", "eno1"]);
    let e = import_on(None, &[f("01-netcfg.yaml", yaml)], None, &host[..1]).unwrap_err();
    assert!(e.message.contains("member p0"), "{e}");
}

/// nmstate: `ports:`, booleans as strings, NetworkManager's miimon default, and a Kubernetes
/// NodeNetworkConfigurationPolicy (also several in one file, and a List of them).
#[test]
fn nmstate_spellings_and_kubernetes_policies() {
    let state = "interfaces:\n- name: bond0\n  type: bond\n  state: up\n  link-aggregation:\n    \
                 mode: balance-alb\n    ports:\n    - eth0\n    - eth1\n    options:\n      \
                 tlb_dynamic_lb: \"false\"\n      all_slaves_active: \"true\"\n";
    let want = Expect {
        opts: "mode=balance-alb tlb_dynamic_lb=0 all_slaves_active=1 miimon=100",
        notes: &["miimon=100"],
        ..Expect::default()
    };
    check(&write("nmstate-ports", &[("bond0.yml", state)]), &want);
    // ports-config: the members with the bond port priority (the kernel's per-slave prio);
    // queue-id does not carry over.
    let config = "interfaces:\n- name: bond0\n  type: bond\n  state: up\n  link-aggregation:\n    \
                  mode: active-backup\n    options:\n      miimon: 100\n    ports-config:\n    \
                  - name: eth0\n      priority: 5\n    - name: eth1\n      priority: \"-3\"\n      \
                  queue-id: 2\n";
    check(
        &write("nmstate-ports-config", &[("bond0.yml", config)]),
        &Expect {
            opts: "mode=active-backup miimon=100 prio=eth0:5,eth1:-3",
            dropped: &["!queue-id"],
            ..Expect::default()
        },
    );
    let indent = |t: &str| t.lines().map(|l| format!("    {l}\n")).collect::<String>();
    let nncp = format!(
        "apiVersion: nmstate.io/v1\nkind: NodeNetworkConfigurationPolicy\nmetadata:\n  name: \
         bond0-policy\nspec:\n  nodeSelector:\n    node-role.kubernetes.io/worker: \"\"\n  \
         desiredState:\n{}",
        indent(state)
    );
    check(&write("nncp", &[("policy.yaml", &nncp)]), &want);
    let other = "apiVersion: nmstate.io/v1\nkind: NodeNetworkConfigurationPolicy\nmetadata:\n  \
                 name: dns\nspec:\n  desiredState:\n    dns-resolver:\n      config:\n        \
                 server: [192.0.2.53]\n";
    check(
        &write(
            "nncp-two",
            &[("policies.yaml", &format!("{other}---\n{nncp}"))],
        ),
        &want,
    );
    let list = format!(
        "apiVersion: v1\nkind: List\nitems:\n- {}",
        nncp.lines().collect::<Vec<_>>().join("\n  ")
    );
    check(&write("nncp-list", &[("list.yaml", &list)]), &want);
    let err = refused(
        &write(
            "k8s-other",
            &[(
                "deploy.yaml",
                "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\n",
            )],
        ),
        &[],
    );
    assert!(
        err.contains("Kubernetes Deployment: no network state"),
        "{err}"
    );
}

/// NetworkManager keyfiles and ifcfg files (read by NetworkManager): miimon=100 when neither
/// miimon nor ARP monitoring is set; not with ARP monitoring, nor for NM_CONTROLLED=no. A MAC
/// denylist is NetworkManager's device matching, not an address.
#[test]
fn networkmanager_miimon_default() {
    let keyfile = "[connection]\nid=bond0\ntype=bond\ninterface-name=bond0\n\n[bond]\n\
                   mode=802.3ad\nxmit_hash_policy=layer3+4\n\n[ethernet]\n\
                   mac-address-denylist=52:54:00:12:34:56;\n";
    let port = |n: &str| {
        format!(
            "[connection]\nid={n}\ntype=ethernet\ninterface-name={n}\ncontroller=bond0\nport-type=bond\n"
        )
    };
    let files = write(
        "nm-default",
        &[
            ("bond0.nmconnection", keyfile),
            ("eth0.nmconnection", &port("eth0")),
            ("eth1.nmconnection", &port("eth1")),
        ],
    );
    check(
        &files,
        &Expect {
            opts: "mode=802.3ad xmit_hash_policy=layer3+4 miimon=100",
            dropped: &["mac-address-denylist=52:54:00:12:34:56;: which device NetworkManager"],
            notes: &["miimon=100"],
            ..Expect::default()
        },
    );
    let member = |n: &str| format!("DEVICE={n}\nMASTER=bond0\nSLAVE=yes\n");
    let ifcfg = |opts: &str, extra: &str| {
        write(
            "ifcfg-default",
            &[
                (
                    "ifcfg-bond0",
                    &format!("DEVICE=bond0\nTYPE=Bond\nBONDING_OPTS=\"{opts}\"\n{extra}"),
                ),
                ("ifcfg-eth0", &member("eth0")),
                ("ifcfg-eth1", &member("eth1")),
            ],
        )
    };
    check(
        &ifcfg("mode=active-backup", ""),
        &Expect {
            opts: "mode=active-backup miimon=100",
            notes: &["miimon=100"],
            ..Expect::default()
        },
    );
    check(
        &ifcfg(
            "mode=active-backup arp_interval=500 arp_ip_target=192.0.2.1",
            "",
        ),
        &Expect {
            opts: "mode=active-backup arp_interval=500 arp_ip_target=192.0.2.1",
            ..Expect::default()
        },
    );
    check(
        &ifcfg("mode=active-backup", "NM_CONTROLLED=no\n"),
        &Expect {
            opts: "mode=active-backup",
            dropped: &["NM_CONTROLLED"],
            ..Expect::default()
        },
    );
}

/// systemd-networkd: the bond's own .network sets its MTU ([Link] MTUBytes=) and MAC ([Link]
/// MACAddress=); its address stays the system's, and a VLAN on it too.
#[test]
fn networkd_bond_network_mtu_and_mac() {
    let files = write(
        "networkd-own",
        &[
            (
                "10-bond0.netdev",
                "[NetDev]\nName=bond0\nKind=bond\n\n[Bond]\nMode=balance-xor\n\
                 TransmitHashPolicy=layer3+4\nMIIMonitorSec=0.2\n",
            ),
            (
                "20-eth0.network",
                "[Match]\nName=eth0\n[Network]\nBond=bond0\n",
            ),
            (
                "20-eth1.network",
                "[Match]\nName=eth1\n[Network]\nBond=bond0\n",
            ),
            (
                "30-bond0.network",
                "[Match]\nName=bond0\n\n[Link]\nMTUBytes=9000\nMACAddress=02:00:5e:10:00:01\n\
                 RequiredForOnline=no\n\n[Network]\nAddress=192.0.2.10/24\nVLAN=bond0.100\n",
            ),
        ],
    );
    check(
        &files,
        &Expect {
            mtu: Some(9000),
            mac: Some("02:00:5e:10:00:01"),
            opts: "mode=balance-xor xmit_hash_policy=layer3+4 miimon=200",
            dropped: &[
                "RequiredForOnline",
                "Address=192.0.2.10/24",
                "VLAN=bond0.100",
            ],
            ..Expect::default()
        },
    );
}

fn teamd(tag: &str, json: &str) -> Scratch {
    write(tag, &[("team0.conf", json)])
}

/// teamd: loadbalance and lacp without tx_hash hash as teamd's default (eth, ipv4, ipv6:
/// layer2+3); the old string runner; arp_ping's missed_max default (3) and source_host.
#[test]
fn teamd_defaults_and_old_format() {
    check(
        &teamd(
            "teamd-lb",
            r#"{"device": "bond0", "runner": {"name": "loadbalance"},
                "ports": {"eth0": {}, "eth1": {}}}"#,
        ),
        &Expect {
            opts: "mode=balance-xor xmit_hash_policy=layer2+3 miimon=100",
            notes: &["teamd's default runner.tx_hash"],
            ..Expect::default()
        },
    );
    check(
        &teamd(
            "teamd-old",
            r#"{"device": "bond0", "runner": "activebackup", "link_watch": "ethtool",
                "ports": {"eth0": {}, "eth1": {}}}"#,
        ),
        &Expect {
            opts: "mode=active-backup miimon=100",
            notes: &["old format"],
            ..Expect::default()
        },
    );
    check(
        &teamd(
            "teamd-src",
            r#"{"device": "bond0", "runner": {"name": "activebackup"},
                "link_watch": {"name": "arp_ping", "interval": 100,
                               "source_host": "192.0.2.2", "target_host": "192.0.2.1"},
                "ports": {"eth0": {}, "eth1": {}}}"#,
        ),
        &Expect {
            opts: "mode=active-backup arp_interval=100 arp_ip_target=192.0.2.1 arp_missed_max=3",
            dropped: &["!source_host"],
            ..Expect::default()
        },
    );
}

/// teamd: several link watchers. Two arp_pings: both targets, any answering (teamd counts a
/// port up when any watcher does); arp_ping beside ethtool: carrier monitoring, which is what
/// teamd's any-watcher rule comes to; nsna_ping: ns_ip6_target.
#[test]
fn teamd_link_watchers() {
    check(
        &teamd(
            "teamd-two-arp",
            r#"{"device": "bond0", "runner": {"name": "activebackup"},
                "link_watch": [
                  {"name": "arp_ping", "interval": 250, "missed_max": 4, "target_host": "192.0.2.1"},
                  {"name": "arp_ping", "interval": 250, "missed_max": 4, "target_host": "192.0.2.254"}
                ],
                "ports": {"eth0": {}, "eth1": {}}}"#,
        ),
        &Expect {
            opts: "mode=active-backup arp_interval=250 arp_ip_target=192.0.2.1,192.0.2.254 \
                   arp_missed_max=4",
            ..Expect::default()
        },
    );
    check(
        &teamd(
            "teamd-arp-ethtool",
            r#"{"device": "bond0", "runner": {"name": "activebackup"},
                "link_watch": [
                  {"name": "arp_ping", "interval": 100, "target_host": "192.0.2.1"},
                  {"name": "ethtool", "delay_up": 500}
                ],
                "ports": {"eth0": {}, "eth1": {}}}"#,
        ),
        &Expect {
            opts: "mode=active-backup miimon=100 updelay=500",
            notes: &["link_watch arp_ping beside ethtool"],
            ..Expect::default()
        },
    );
    check(
        &teamd(
            "teamd-nsna",
            r#"{"device": "bond0", "runner": {"name": "activebackup"},
                "link_watch": {"name": "nsna_ping", "interval": 200, "missed_max": 15,
                               "target_host": "2001:db8::1"},
                "ports": {"eth0": {}, "eth1": {}}}"#,
        ),
        &Expect {
            opts: "mode=active-backup arp_interval=200 ns_ip6_target=2001:db8::1 \
                   arp_missed_max=15",
            ..Expect::default()
        },
    );
    check(
        &teamd(
            "teamd-differ",
            r#"{"device": "bond0", "runner": {"name": "activebackup"},
                "link_watch": [
                  {"name": "arp_ping", "interval": 100, "target_host": "192.0.2.1"},
                  {"name": "arp_ping", "interval": 300, "target_host": "192.0.2.9"}
                ],
                "ports": {"eth0": {}, "eth1": {}}}"#,
        ),
        &Expect {
            opts: "mode=active-backup arp_interval=100 arp_ip_target=192.0.2.1,192.0.2.9 \
                   arp_missed_max=3",
            dropped: &["!interval 300 ms"],
            ..Expect::default()
        },
    );
}

/// Recognised formats that lagctl import does not read, and files without a bond, say so.
#[test]
fn unsupported_formats_and_files_without_a_bond() {
    let cases: [(&str, &str, &str); 5] = [
        (
            "rc.conf",
            "ifconfig_lagg0=\"laggproto lacp laggport em0 laggport em1\"\n",
            "FreeBSD rc.conf lagg interfaces: this format is not supported",
        ),
        (
            "ovs.sh",
            "ovs-vsctl add-bond br0 bond0 eth0 eth1 lacp=active\n",
            "Open vSwitch bonds (ovs-vsctl add-bond): this format is not supported",
        ),
        (
            "01-netcfg.yaml",
            "network:\n  version: 2\n  ethernets:\n    eth0:\n      dhcp4: true\n",
            "no bond in these files",
        ),
        (
            "eth0.nmconnection",
            "[connection]\nid=eth0\ntype=ethernet\ninterface-name=eth0\n",
            "no bond in these files",
        ),
        (
            "x.json",
            "{\"name\": \"not teamd\"}",
            "not a teamd configuration",
        ),
    ];
    for (name, text, want) in cases {
        let err = refused(&write("unsupported", &[(name, text)]), &[]);
        assert!(err.contains(want), "{name}: {err}");
        assert!(!err.contains("cannot tell the dialect"), "{name}: {err}");
    }
}

// ---------------------------------------------------------------------------------------------
// Debian's ifupdown and ifupdown2.

/// Proxmox VE: an 802.3ad bond with ifupdown2's bond-slaves/bond-xmit-hash-policy under the VM
/// bridge, which stays the system's.
#[test]
fn ifupdown_proxmox() {
    check(
        &files("ifupdown", &["proxmox-interfaces"]),
        &Expect {
            members: &["eno1", "eno2"],
            mtu: Some(9000),
            opts: "mode=802.3ad miimon=100 xmit_hash_policy=layer2+3 lacp_rate=fast",
            notes: &["vmbr0"],
            ..Expect::default()
        },
    );
}

/// ifupdown2: a glob range of members, yes/no booleans, its own option spellings, a VLAN on
/// the bond; Cumulus's LACP bypass has no counterpart.
#[test]
fn ifupdown2_spellings() {
    check(
        &files("ifupdown", &["ifupdown2-interfaces"]),
        &Expect {
            bond: "bond1",
            members: &["swp1", "swp2"],
            mac: Some("02:00:5e:00:53:01"),
            opts: "mode=802.3ad min_links=1 use_carrier=1 ad_actor_sys_prio=100",
            dropped: &["!bond-lacp-bypass-allow"],
            notes: &["bond1.100"],
            ..Expect::default()
        },
    );
}

/// Debian's ifenslave spelling: the members name the bond (bond-master), the bond says
/// bond-slaves none; the stanzas come through source-directory (only names of letters, digits,
/// - and _) and source with a glob; continuation lines and comments; an `up` command is named.
#[test]
fn ifupdown_source_and_bond_master() {
    let files = write(
        "ifupdown-source",
        &[
            (
                "interfaces",
                "# The loopback.\nauto lo\niface lo inet loopback\n\nsource-directory interfaces.d\n\
                 source bonds/*.cfg\n",
            ),
            (
                "interfaces.d/eth0",
                "allow-hotplug eth0\niface eth0 inet manual\n    bond-master bond0\n    \
                 bond-primary eth0\n",
            ),
            (
                "interfaces.d/eth1",
                "allow-hotplug eth1\niface eth1 inet manual\n    bond-master bond0\n",
            ),
            // Not read: a dot in the name.
            (
                "interfaces.d/eth9.dpkg-old",
                "iface eth9 inet manual\n    bond-master bond0\n",
            ),
            (
                "bonds/bond0.cfg",
                "auto bond0\niface bond0 inet static\n    address 192.0.2.5/24\n    \
                 bond_slaves none\n    bond-mode active-backup\n    bond-miimon 100\n    \
                 bond-downdelay \\\n      200\n    bond-arp-ip-target 192.0.2.1 192.0.2.2\n    \
                 up ip route add 198.51.100.0/24 via 192.0.2.254\n",
            ),
        ],
    );
    check(
        &files[..1],
        &Expect {
            opts: "mode=active-backup miimon=100 downdelay=200 \
                   arp_ip_target=192.0.2.1,192.0.2.2 primary=eth0",
            dropped: &["address 192.0.2.5/24", "!up ip route add"],
            ..Expect::default()
        },
    );
    // --from ifupdown reads a file of any name.
    let renamed = files[0].with_file_name("network.conf");
    std::fs::copy(&files[0], &renamed).unwrap();
    let (code, toml, err) = run(std::slice::from_ref(&renamed), &["--from", "ifupdown"]);
    assert_eq!(code, Some(4), "{err}");
    assert!(toml.contains("members = [\"eth0\", \"eth1\"]"), "{toml}");
}

/// Open vSwitch bonds in interfaces (Proxmox's OVS integration), a file without a bond and a
/// source that matched nothing say so.
#[test]
fn ifupdown_refusals() {
    let ovs = write(
        "ifupdown-ovs",
        &[(
            "interfaces",
            "auto bond0\niface bond0 inet manual\n    ovs_bonds eno1 eno2\n    ovs_type OVSBond\n    \
             ovs_bridge vmbr0\n",
        )],
    );
    let err = refused(&ovs, &[]);
    assert!(
        err.contains("Open vSwitch bond") && err.contains("not supported"),
        "{err}"
    );
    let none = write(
        "ifupdown-none",
        &[(
            "interfaces",
            "auto eth0\niface eth0 inet dhcp\n\nsource /nonexistent-lagd-test/*\n",
        )],
    );
    let err = refused(&none, &[]);
    assert!(err.contains("no bond in these files"), "{err}");
    assert!(err.contains("source /nonexistent-lagd-test/*"), "{err}");
    let stray = write("ifupdown-stray", &[("interfaces", "bond-mode 802.3ad\n")]);
    let err = refused(&stray, &[]);
    assert!(err.contains("interfaces:1"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// lagctl export, and import after export.

/// The options' values, without the record of which keys were given (an export writes the
/// values, not how the file spelled them).
fn values(o: &BondOptions) -> String {
    let d = format!("{o:?}");
    d.split(", explicit_miimon:").next().unwrap().to_owned()
}

/// Every dialect, every configuration: export, then import the files; the import is the
/// configuration, except exactly the options the export named as not carried over (exit code
/// 4 then, 0 otherwise), which come back as the defaults.
#[test]
fn export_then_import_is_the_identity() {
    let configs: [(&str, &str); 8] = [
        (
            "lacp",
            "mtu = 9000\nmac = \"02:00:5e:00:53:0a\"\n[options]\nmode = \"802.3ad\"\n\
             lacp_rate = \"fast\"\nxmit_hash_policy = \"layer3+4\"\nmin_links = 1\n\
             ad_select = \"bandwidth\"\nupdelay = 200\nad_actor_sys_prio = 100\n",
        ),
        (
            "backup",
            "[options]\nmode = \"active-backup\"\nmiimon = 100\nprimary = \"eth1\"\n\
             primary_reselect = \"failure\"\nfail_over_mac = \"active\"\nnum_grat_arp = 3\n\
             downdelay = 300\n",
        ),
        (
            "arp",
            "[options]\nmode = \"active-backup\"\narp_interval = 250\n\
             arp_ip_target = [\"192.0.2.1\", \"192.0.2.2\"]\narp_validate = \"all\"\n\
             arp_all_targets = \"all\"\narp_missed_max = 4\n",
        ),
        (
            "tlb",
            "[options]\nmode = \"balance-tlb\"\nmiimon = 50\ntlb_dynamic_lb = false\nlp_interval = 5\n",
        ),
        (
            // NetworkManager carries prio on its ports ([bond-port] prio); the others have none.
            "prio",
            "[options]\nmode = \"active-backup\"\nmiimon = 100\nprio = { eth0 = 5, eth1 = -3 }\n",
        ),
        (
            "rr",
            "[options]\nmode = \"balance-rr\"\nmiimon = 100\npackets_per_slave = 3\n\
             all_slaves_active = true\nresend_igmp = 2\n",
        ),
        (
            "buckets",
            "[options]\nmode = \"balance-xor\"\nmiimon = 100\ndistribution = \"buckets\"\n\
             xmit_hash_policy = \"layer2+3\"\n",
        ),
        (
            // lagd's broadcast delivers one copy of each frame; the kernel's cannot.
            "broadcast",
            "[options]\nmode = \"broadcast\"\nmiimon = 100\n",
        ),
    ];
    let mut lossless = 0;
    for dialect in ["netplan", "nm", "nmstate", "networkd", "ifupdown"] {
        for (name, body) in configs {
            let tag = format!("export-{dialect}-{name}");
            let toml = format!("bond = \"bond0\"\nmembers = [\"eth0\", \"eth1\"]\n{body}");
            let scratch = write(&tag, &[("lagd.toml", &toml)]);
            let src = scratch[0].clone();
            let dir = src.with_file_name("out");
            let out = Command::new(LAGCTL)
                .args(["export", "--to", dialect, "-o"])
                .arg(&dir)
                .arg(&src)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            files.sort();
            let text: String = files
                .iter()
                .map(|f| std::fs::read_to_string(f).unwrap())
                .collect();
            // The keys the export says it could not carry.
            let lost: Vec<&str> = text
                .lines()
                .filter_map(|l| l.strip_prefix("# not carried over: "))
                .filter_map(|l| l.split('=').next())
                .collect();
            assert_eq!(
                out.status.code(),
                Some(if lost.is_empty() { 0 } else { 4 }),
                "{dialect} {name}: {err}\n{text}"
            );
            for k in &lost {
                assert!(err.contains(k), "{dialect} {name}: {err}");
            }
            if lost.is_empty() {
                lossless += 1;
            }
            assert_eq!(
                lost.contains(&"broadcast_dedup"),
                name == "broadcast",
                "{dialect} {name}: {text}"
            );
            // Import the files (for nmstate and netplan the one file; for the others all).
            let (code, imported, ierr) = run(&files, &["--from", dialect]);
            assert_eq!(
                code,
                Some(0),
                "{dialect} {name}: {ierr}\n{text}\n{imported}"
            );
            let back = Config::from_toml(&imported, None).unwrap();
            let kept: String = toml
                .lines()
                .filter(|l| !lost.iter().any(|k| l.starts_with(&format!("{k} ="))))
                .map(|l| format!("{l}\n"))
                .collect();
            let want = Config::from_toml(&kept, None).unwrap();
            assert_eq!(back.bond, want.bond, "{dialect} {name}");
            assert_eq!(back.members, want.members, "{dialect} {name}");
            assert_eq!(back.mtu, want.mtu, "{dialect} {name}");
            assert_eq!(back.mac, want.mac, "{dialect} {name}");
            assert_eq!(
                values(&back.options),
                values(&want.options),
                "{dialect} {name}:\n{text}\n{imported}"
            );
        }
    }
    // Most cross without loss; buckets (lagd's own) never does.
    assert!(lossless >= 15, "{lossless}");
}

/// A mode only lagd has cannot be exported; standard output holds every file, each named.
#[test]
fn export_refusals_and_standard_output() {
    let scratch = write(
        "export-slb",
        &[(
            "lagd.toml",
            "bond = \"bond0\"\nmembers = [\"eth0\", \"eth1\"]\n[options]\nmode = \"balance-slb\"\n",
        )],
    );
    let src = scratch[0].clone();
    let out = Command::new(LAGCTL)
        .args(["export", "--to", "netplan"])
        .arg(&src)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("lagd's own"));
    std::fs::write(
        &src,
        "bond = \"bond0\"\nmembers = [\"eth0\", \"eth1\"]\n[options]\nmode = \"802.3ad\"\n",
    )
    .unwrap();
    let out = Command::new(LAGCTL)
        .args(["export", "--to", "nm"])
        .arg(&src)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    for f in [
        "bond0.nmconnection",
        "bond0-port-eth0.nmconnection",
        "bond0-port-eth1.nmconnection",
    ] {
        assert!(text.contains(&format!("# ---- file: {f} ----")), "{text}");
    }
    assert!(
        text.contains("[bond]\nmode=802.3ad\nmiimon=100\n"),
        "{text}"
    );
    // Into a directory: NetworkManager reads only keyfiles that only root can read.
    let dir = src.with_file_name("nm-out");
    let out = Command::new(LAGCTL)
        .args(["export", "--to", "nm", "-o"])
        .arg(&dir)
        .arg(&src)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir.join("bond0.nmconnection"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

/// Linux 6.18's `ad_select actor_port_prio` goes to the tools that pass the kernel's option
/// names on (NetworkManager), and is named as not carried over (exit code 4) to netplan and
/// networkd, whose ad-select / AdSelect= know only stable, bandwidth and count.
#[test]
fn export_of_ad_select_actor_port_prio() {
    let scratch = write(
        "export-adselect",
        &[(
            "lagd.toml",
            "bond = \"bond0\"\nmembers = [\"eth0\", \"eth1\"]\n[options]\nmode = \"802.3ad\"\n\
             ad_select = \"actor_port_prio\"\n",
        )],
    );
    let src = scratch[0].clone();
    let export = |to: &str| {
        let out = Command::new(LAGCTL)
            .args(["export", "--to", to])
            .arg(&src)
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8(out.stdout).unwrap())
    };
    for to in ["netplan", "networkd"] {
        let (code, text) = export(to);
        assert_eq!(code, Some(4), "{to}: {text}");
        assert!(
            text.contains("# not carried over: ad_select=actor_port_prio"),
            "{to}: {text}"
        );
        assert!(
            !text.contains("ad-select") && !text.contains("AdSelect="),
            "{to}: {text}"
        );
    }
    let (code, text) = export("nm");
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("ad_select=actor_port_prio"), "{text}");
}

/// A file that sources itself, or a sourced file also given on the command line, is read once.
#[test]
fn ifupdown_source_loops_read_each_file_once() {
    let files = write(
        "ifupdown-loop",
        &[
            (
                "interfaces",
                "source interfaces\nsource *.cfg\nauto bond0\niface bond0 inet manual\n    \
                 bond-slaves eth0 eth1\n    bond-mode balance-xor\n    bond-miimon 100\n",
            ),
            ("a.cfg", "source *.cfg\nsource ./interfaces\n"),
            ("b.cfg", "source a.cfg\n"),
        ],
    );
    let want = Expect {
        opts: "mode=balance-xor miimon=100",
        ..Expect::default()
    };
    check(&files[..1], &want);
    check_with(&files, &["--from", "ifupdown"], &want);
}

/// Team profiles of NetworkManager (`[team] config`) and ifcfg (`TEAM_CONFIG`) carry teamd's
/// JSON: they import as teamd's, with the ports' own configuration.
#[test]
fn networkmanager_and_ifcfg_teams() {
    let team = "[connection]\nid=team0\ntype=team\ninterface-name=team0\n\n[team]\n\
                config={\"runner\": {\"name\": \"activebackup\"}, \"link_watch\": {\"name\": \"ethtool\"}}\n\n\
                [ipv4]\nmethod=disabled\n";
    let port = |n: &str, prio: i32| {
        format!(
            "[connection]\nid=team0-{n}\ntype=ethernet\ninterface-name={n}\ncontroller=team0\n\
             port-type=team\n\n[team-port]\nconfig={{\"prio\": {prio}}}\n"
        )
    };
    let want = Expect {
        bond: "team0",
        opts: "mode=active-backup miimon=100 primary=eth1",
        dropped: &["[ipv4] method"],
        ..Expect::default()
    };
    check(
        &write(
            "nm-team",
            &[
                ("team0.nmconnection", team),
                ("eth0.nmconnection", &port("eth0", 10)),
                ("eth1.nmconnection", &port("eth1", 100)),
            ],
        ),
        &want,
    );
    let member = |n: &str, prio: i32| {
        format!(
            "DEVICE={n}\nDEVICETYPE=TeamPort\nTEAM_MASTER=team0\nTEAM_PORT_CONFIG='{{\"prio\": {prio}}}'\n"
        )
    };
    check(
        &write(
            "ifcfg-team",
            &[
                (
                    "ifcfg-team0",
                    "DEVICE=team0\nDEVICETYPE=Team\nTEAM_CONFIG='{\"runner\": {\"name\": \
                     \"activebackup\"}, \"link_watch\": {\"name\": \"ethtool\"}}'\nBOOTPROTO=none\n",
                ),
                ("ifcfg-eth0", &member("eth0", 10)),
                ("ifcfg-eth1", &member("eth1", 100)),
            ],
        ),
        &Expect {
            dropped: &["BOOTPROTO"],
            ..want
        },
    );
}

/// The other documented spellings: the kernel's numbers for modes and policies (ifcfg,
/// ifupdown), ifenslave's underscores, networkd's time units, netplan's suffixes and nmstate's
/// quoted numbers all give the same bond.
#[test]
fn numbers_units_and_alternate_spellings() {
    let want = Expect {
        opts: "mode=802.3ad miimon=200 lacp_rate=fast xmit_hash_policy=layer3+4 updelay=400",
        ..Expect::default()
    };
    let member = |n: &str| format!("DEVICE={n}\nMASTER=bond0\n");
    check(
        &write(
            "spell-ifcfg",
            &[
                (
                    "ifcfg-bond0",
                    "DEVICE=bond0\nBONDING_OPTS='mode=4 miimon=200 lacp_rate=1 \
                     xmit_hash_policy=1 updelay=400'\n",
                ),
                ("ifcfg-eth0", &member("eth0")),
                ("ifcfg-eth1", &member("eth1")),
            ],
        ),
        &want,
    );
    check(
        &write(
            "spell-ifupdown",
            &[(
                "interfaces",
                "iface bond0 inet manual\n  bond_slaves eth0 eth1\n  bond_mode 4\n  \
                 bond_miimon 200\n  bond-lacp-rate 1\n  bond-xmit_hash_policy 1\n  \
                 BOND-UPDELAY 400\n",
            )],
        ),
        &want,
    );
    check(
        &write(
            "spell-networkd",
            &[
                (
                    "bond0.netdev",
                    "[NetDev]\nName=bond0\nKind=bond\n[Bond]\nMode=802.3ad\n\
                     MIIMonitorSec=0.2s\nLACPTransmitRate=fast\nTransmitHashPolicy=layer3+4\n\
                     UpDelaySec=400ms\n",
                ),
                (
                    "eth.network",
                    "[Match]\nName=eth0 eth1\n[Network]\nBond=bond0\n",
                ),
            ],
        ),
        &want,
    );
    check(
        &write(
            "spell-netplan",
            &[(
                "bond.yaml",
                "network:\n  bonds:\n    bond0:\n      interfaces: [eth0, eth1]\n      \
                 parameters:\n        mode: 802.3ad\n        mii-monitor-interval: 200ms\n        \
                 lacp-rate: fast\n        transmit-hash-policy: layer3+4\n        up-delay: 0.4s\n",
            )],
        ),
        &want,
    );
    check(
        &write(
            "spell-nmstate",
            &[(
                "bond.yml",
                "interfaces:\n- name: bond0\n  type: bond\n  link-aggregation:\n    mode: 802.3ad\n    \
                 port: [eth0, eth1]\n    options:\n      miimon: \"200\"\n      lacp_rate: 1\n      \
                 xmit_hash_policy: layer3+4\n      updelay: 400\n",
            )],
        ),
        &want,
    );
}
