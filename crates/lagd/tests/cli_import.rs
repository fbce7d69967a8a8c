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
/// string) and words each expected "not carried over" line contains.
struct Expect<'a> {
    bond: &'a str,
    members: &'a [&'a str],
    mtu: Option<u32>,
    mac: Option<&'a str>,
    opts: &'a str,
    dropped: &'a [&'a str],
}

fn import(files: &[PathBuf], extra: &[&str]) -> (bool, String, String) {
    let out = Command::new(LAGCTL)
        .arg("import")
        .args(files)
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn check(files: &[PathBuf], e: &Expect<'_>) {
    let (ok, toml, err) = import(files, &[]);
    assert!(ok, "lagctl import {files:?}: {err}");
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
        assert!(
            dropped.iter().any(|d| d.contains(word)),
            "no 'not carried over' line about {word} in\n{toml}"
        );
    }
    assert_eq!(
        dropped.len(),
        e.dropped.len(),
        "unexpected 'not carried over' lines in\n{toml}"
    );
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
            opts: "mode=active-backup miimon=100 updelay=200 primary=enp2s0",
            dropped: &["[ipv4] method", "[ipv4] address1", "[ipv6] method"],
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
            dropped: &["runner.tx_hash", "agg_select_policy=lacp_prio", "lacp_key"],
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
    let (ok, toml, err) = import(&[bad.clone(), member.clone()], &[]);
    assert!(ok, "{err}");
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
    let dialects = [
        Dialect::Ifcfg,
        Dialect::NmKeyfile,
        Dialect::Networkd,
        Dialect::Netplan,
        Dialect::Nmstate,
        Dialect::Teamd,
    ];
    let mut checked = 0;
    for dir in ["ifcfg", "nm", "networkd", "netplan", "nmstate", "teamd"] {
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
