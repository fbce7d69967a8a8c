//! What joins the hosts over the links: lagd at both ends, plain addresses on every veth (the
//! direct baseline), an Open vSwitch userspace bond at both ends (the OVS baseline), or the
//! bare TAP ↔ AF_PACKET relay (`examples/bare_relay.rs`) at both ends, the floor under lagd.

use std::fs;
use std::net::Ipv4Addr;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use super::control::Ctl;
use super::topology::{ProcessId, Side, Topology, run};

/// Where lagd's control sockets go.
pub const CONTROL_DIR: &str = "/run/lagd";
/// How long lagd gets to report a member up.
const LAGD_READY: Duration = Duration::from_secs(10);
/// Open vSwitch's database schema as Debian installs it.
const OVS_SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";

/// Which dataplane joins the hosts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Setup {
    /// lagd at both ends (the binary to run).
    Lagd(PathBuf),
    /// No bond: addresses directly on each veth, one address pair per link.
    Direct,
    /// No bond, towards a switch: host B a Linux bridge over its link ends, as the lab puts
    /// it in front of balance-tlb and balance-alb, with host B's end of every address pair
    /// of [`Setup::Direct`] on the bridge. What those modes cost without lagd's part.
    Bridge,
    /// An Open vSwitch userspace (`datapath_type=netdev`) bond at both ends.
    Ovs,
    /// The bare relay example at both ends (the binary to run): lagd's TAP and member sockets
    /// with no bonding logic, to measure what lagd's own work costs.
    Relay(PathBuf),
}

impl Setup {
    /// No bond at all: the direct baselines, with or without host B's bridge.
    pub fn without_bond(&self) -> bool {
        matches!(self, Self::Direct | Self::Bridge)
    }

    /// `lagd`, `direct`, `bridge`, `ovs` or `relay`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Lagd(_) => "lagd",
            Self::Direct => "direct",
            Self::Bridge => "bridge",
            Self::Ovs => "ovs",
            Self::Relay(_) => "relay",
        }
    }
}

/// The bond's configuration in the kernel's terms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BondConfig {
    /// `mode=` (balance-rr, active-backup, balance-xor, broadcast, 802.3ad, balance-tlb,
    /// balance-alb).
    pub mode: String,
    /// `xmit_hash_policy=`.
    pub policy: String,
    /// More options for lagd's `--opts`, appended as given.
    pub extra_opts: String,
    /// MTU of the bond and its members (`None`: the links' default, 1500).
    pub mtu: Option<u32>,
}

impl BondConfig {
    /// lagd's `--opts` string.
    pub fn lagd_opts(&self) -> String {
        let mut opts = format!(
            "mode={} xmit_hash_policy={} miimon=100",
            self.mode, self.policy
        );
        if !self.extra_opts.trim().is_empty() {
            opts.push(' ');
            opts.push_str(self.extra_opts.trim());
        }
        opts
    }
}

/// True for the modes whose transmit choice follows `xmit_hash_policy`.
pub fn mode_uses_policy(mode: &str) -> bool {
    matches!(
        mode,
        "balance-xor" | "802.3ad" | "balance-tlb" | "balance-alb" | "2" | "4" | "5" | "6"
    )
}

/// The Open vSwitch bond that stands for a kernel mode and policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OvsBond {
    /// OVS `bond_mode`.
    pub bond_mode: &'static str,
    /// OVS `lacp`: `off` or `active`.
    pub lacp: &'static str,
}

/// Maps a kernel mode and policy to OVS: active-backup stays active-backup; balance-xor and
/// 802.3ad hash L4 ports with balance-tcp (which OVS runs only with LACP, so LACP is on) and
/// MAC/IP with balance-slb; 802.3ad turns LACP on.
pub fn ovs_bond(mode: &str, policy: &str) -> Result<OvsBond, String> {
    let l4 = matches!(policy, "layer3+4" | "encap3+4");
    let lacp_mode = matches!(mode, "802.3ad" | "4");
    match mode {
        "active-backup" | "1" => Ok(OvsBond {
            bond_mode: "active-backup",
            lacp: "off",
        }),
        "balance-xor" | "2" | "802.3ad" | "4" if l4 => Ok(OvsBond {
            bond_mode: "balance-tcp",
            lacp: "active",
        }),
        "balance-xor" | "2" | "802.3ad" | "4" => Ok(OvsBond {
            bond_mode: "balance-slb",
            lacp: if lacp_mode { "active" } else { "off" },
        }),
        other => Err(format!(
            "mode {other:?} has no Open vSwitch counterpart (use active-backup, balance-xor or 802.3ad)"
        )),
    }
}

/// Brings the dataplane up and returns the address pairs (host A, host B) traffic can use.
pub fn bring_up(
    topo: &mut Topology,
    ctl: &Ctl,
    setup: &Setup,
    bond: &BondConfig,
) -> Result<Vec<(Ipv4Addr, Ipv4Addr)>> {
    match setup {
        Setup::Direct => direct(topo, None),
        Setup::Bridge => {
            let bridge = host_b_bridge(topo)?;
            direct(topo, Some(&bridge))
        }
        Setup::Lagd(binary) => lagd(topo, ctl, binary, bond),
        Setup::Ovs => ovs(topo, ctl, bond),
        Setup::Relay(binary) => relay(topo, ctl, binary),
    }
}

/// The bare relay at both ends, each over all of its host's link ends; ready once its TAP
/// exists.
fn relay(topo: &mut Topology, ctl: &Ctl, binary: &Path) -> Result<Vec<(Ipv4Addr, Ipv4Addr)>> {
    let members = topo.member_list();
    // Both start at once (as lagd does above), then each is waited for.
    let mut relays = Vec::new();
    for side in [Side::A, Side::B] {
        let tap = format!("{}r{}", topo.tag(), side.letter());
        let id = topo.spawn(
            side,
            &format!("relay-{}", side.letter()),
            binary,
            &["--tap", &tap, "--members", &members],
        )?;
        relays.push((side, tap, id));
    }
    let started = Instant::now();
    for (side, tap, id) in &relays {
        ctl.progress()
            .phase(&format!("waiting for the relay in host {}", side.letter()));
        while topo.ip(*side, &["link", "show", "dev", tap]).is_err() {
            if let Some(status) = topo.try_wait(*id)? {
                bail!(
                    "the relay in host {} exited ({status}):\n{}",
                    side.letter(),
                    topo.log_tail(*id, 20)
                );
            }
            if started.elapsed() > LAGD_READY {
                bail!(
                    "the relay in host {} made no TAP {tap} in {LAGD_READY:?}",
                    side.letter()
                );
            }
            ctl.sleep(Duration::from_millis(50))?;
        }
    }
    let a = address_bond(topo, Side::A, &relays[0].1, 1)?;
    let b = address_bond(topo, Side::B, &relays[1].1, 2)?;
    Ok(vec![(a, b)])
}

/// Link `i` gets the /30 `10.s.t.4i` (host A .4i+1, host B .4i+2). Host B's addresses go on
/// its link ends, or all on `bridge` (host A's route to each /30 still takes link `i`).
fn direct(topo: &mut Topology, bridge: Option<&str>) -> Result<Vec<(Ipv4Addr, Ipv4Addr)>> {
    let mut pairs = Vec::new();
    for (i, link) in topo.links().to_vec().iter().enumerate() {
        let a = topo.address(4 * i as u8 + 1);
        let b = topo.address(4 * i as u8 + 2);
        topo.ip(
            Side::A,
            &["addr", "add", &format!("{a}/30"), "dev", &link.name],
        )?;
        let b_dev = bridge.unwrap_or(&link.name);
        topo.ip(Side::B, &["addr", "add", &format!("{b}/30"), "dev", b_dev])?;
        pairs.push((a, b));
    }
    if let Some(bridge) = bridge {
        topo.ip(Side::B, &["link", "set", bridge, "up"])?;
    }
    Ok(pairs)
}

/// Makes host B a switch: a Linux bridge over its link ends (not yet up, no address); returns
/// its name.
fn host_b_bridge(topo: &mut Topology) -> Result<String> {
    let bridge = format!("{}sw", topo.tag());
    topo.ip(Side::B, &["link", "add", &bridge, "type", "bridge"])?;
    for link in topo.links().to_vec() {
        topo.ip(Side::B, &["link", "set", &link.name, "master", &bridge])?;
    }
    Ok(bridge)
}

/// Puts `host/24` on `dev` in a host and brings it up.
/// The `lagctl` that can query a lagd: this executable if it is lagctl, else the one beside
/// lagd.
fn lagctl_path(lagd: &Path) -> PathBuf {
    if let Ok(me) = std::env::current_exe() {
        // A rebuilt binary leaves this one "(deleted)": then take the one at the same path.
        let me = match me.to_str().and_then(|s| s.strip_suffix(" (deleted)")) {
            Some(path) => PathBuf::from(path),
            None => me,
        };
        if me
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("lagctl"))
            && me.is_file()
        {
            return me;
        }
    }
    lagd.with_file_name("lagctl")
}

fn lagd(
    topo: &mut Topology,
    ctl: &Ctl,
    binary: &Path,
    bond: &BondConfig,
) -> Result<Vec<(Ipv4Addr, Ipv4Addr)>> {
    let members = topo.member_list();
    let opts = bond.lagd_opts();
    let mut daemons = Vec::new();
    // balance-tlb/alb need a switch: host B is one (a bridge over its link ends, its address
    // on the bridge), as in the driver's documentation; lagd runs in host A only. With a
    // switch of the lab's own between the hosts, both hosts run lagd.
    let switch = needs_switch(&bond.mode) && topo.switches().is_empty();
    let sides: &[Side] = if switch {
        &[Side::A]
    } else {
        &[Side::A, Side::B]
    };
    for &side in sides {
        let name = format!("{}b{}", topo.tag(), side.letter());
        let ns = topo.ns(side).to_string();
        let (id, control) = spawn_lagd(
            topo,
            &ns,
            &format!("lagd-{}", side.letter()),
            binary,
            &name,
            &members,
            &opts,
            bond.mtu,
        )?;
        daemons.push((side, name, control, id));
    }
    let started = Instant::now();
    for (side, _, control, id) in &daemons {
        wait_lagd(
            topo,
            ctl,
            binary,
            *id,
            control,
            &format!("host {}", side.letter()),
            started,
        )?;
    }
    let a = address_bond(topo, Side::A, &daemons[0].1, 1)?;
    let b = if switch {
        let bridge = host_b_bridge(topo)?;
        address_bond(topo, Side::B, &bridge, 2)?
    } else {
        address_bond(topo, Side::B, &daemons[1].1, 2)?
    };
    Ok(vec![(a, b)])
}

/// Starts lagd in namespace `ns` as bond `name` over `members` (comma-separated) with
/// `--opts opts` (and `--mtu`), its control socket in [`CONTROL_DIR`]; returns the process and
/// the control socket. Wait for it with [`wait_lagd`].
#[allow(clippy::too_many_arguments)]
pub fn spawn_lagd(
    topo: &mut Topology,
    ns: &str,
    label: &str,
    binary: &Path,
    name: &str,
    members: &str,
    opts: &str,
    mtu: Option<u32>,
) -> Result<(ProcessId, PathBuf)> {
    fs::create_dir_all(CONTROL_DIR).with_context(|| format!("creating {CONTROL_DIR}"))?;
    let control = PathBuf::from(CONTROL_DIR).join(format!("{name}.sock"));
    topo.remove_at_end(control.clone());
    let control_s = control.to_string_lossy().into_owned();
    let mtu_s = mtu.map(|m| m.to_string());
    let mut args = vec![
        "--bond",
        name,
        "--members",
        members,
        "--opts",
        opts,
        "--control",
        &control_s,
    ];
    if let Some(m) = &mtu_s {
        args.extend(["--mtu", m.as_str()]);
    }
    let id = topo.spawn_in(ns, label, binary, &args, &[])?;
    Ok((id, control))
}

/// Waits until the lagd started as `id` answers on `control` with a member up (at most
/// ten seconds after `started`); `what` names it in errors.
pub fn wait_lagd(
    topo: &mut Topology,
    ctl: &Ctl,
    binary: &Path,
    id: ProcessId,
    control: &Path,
    what: &str,
    started: Instant,
) -> Result<()> {
    let lagctl = lagctl_path(binary);
    ctl.progress().phase(&format!("waiting for lagd in {what}"));
    loop {
        if let Some(status) = topo.try_wait(id)? {
            bail!(
                "lagd in {what} exited ({status}):\n{}",
                topo.log_tail(id, 20)
            );
        }
        if UnixStream::connect(control).is_ok() && lagd_member_up(&lagctl, control)? {
            return Ok(());
        }
        if started.elapsed() > LAGD_READY {
            bail!(
                "lagd in {what} not ready after {LAGD_READY:?} (control socket {}, no member with mii_status up):\n{}",
                control.display(),
                topo.log_tail(id, 20)
            );
        }
        ctl.sleep(Duration::from_millis(100))?;
    }
}

/// balance-tlb and balance-alb: the lab puts a switch in front of them, as the driver's
/// documentation does (the kernel's tlb takes frames on its active member only, so a peer
/// bond's flows hashed onto another member would be lost; lagd's takes unicast on every member).
pub fn needs_switch(mode: &str) -> bool {
    matches!(mode, "balance-tlb" | "balance-alb" | "5" | "6")
}

/// Asks `lagctl show --control PATH --json` whether some member reports `"mii_status": "up"`.
fn lagd_member_up(lagctl: &Path, control: &Path) -> Result<bool> {
    let out = Command::new(lagctl)
        .arg("show")
        .arg("--control")
        .arg(control)
        .arg("--json")
        .output()
        .with_context(|| format!("running {}", lagctl.display()))?;
    if !out.status.success() {
        return Ok(false);
    }
    let Ok(v) = serde_json::from_slice::<Value>(&out.stdout) else {
        return Ok(false);
    };
    Ok(has_mii_up(&v))
}

/// True if any object in `v` has `"mii_status": "up"`.
pub fn has_mii_up(v: &Value) -> bool {
    match v {
        Value::Object(map) => {
            map.get("mii_status").and_then(Value::as_str) == Some("up")
                || map.values().any(has_mii_up)
        }
        Value::Array(items) => items.iter().any(has_mii_up),
        _ => false,
    }
}

/// One Open vSwitch instance (userspace datapath) with one bridge, in one host of a lab. Its
/// processes are stopped when the lab ends.
#[derive(Clone, Debug)]
pub struct OvsInstance {
    db: String,
    ctl: PathBuf,
    /// The bridge (`datapath_type=netdev`); its internal port carries the host's address.
    pub bridge: String,
}

impl OvsInstance {
    /// Runs `ovs-vsctl` against this instance's database.
    pub fn vsctl(&self, args: &[&str]) -> Result<String> {
        let mut full = vec!["--timeout=30", "--db", self.db.as_str()];
        full.extend_from_slice(args);
        run("ovs-vsctl", &full)
    }

    /// Runs `ovs-appctl` against this instance's ovs-vswitchd (e.g. `lacp/show bond0`).
    pub fn appctl(&self, args: &[&str]) -> Result<String> {
        let target = self.ctl.to_string_lossy().into_owned();
        let mut full = vec!["-t", target.as_str()];
        full.extend_from_slice(args);
        run("ovs-appctl", &full)
    }
}

/// Starts ovsdb-server and ovs-vswitchd (userspace TSO on) in `side`, with a private directory,
/// and creates the bridge `bridge`.
pub fn start_ovs(topo: &mut Topology, side: Side, bridge: &str) -> Result<OvsInstance> {
    let ns = topo.ns(side).to_string();
    start_ovs_in(topo, &ns, side.letter(), bridge)
}

/// Open vSwitch's bond settings for a balance-tcp bond with active LACP at the fast rate.
pub const OVS_BALANCE_TCP_FAST_LACP: [&str; 3] = [
    "bond_mode=balance-tcp",
    "lacp=active",
    "other_config:lacp-time=fast",
];

/// Starts Open vSwitch in `side` with the bridge `bridge` holding `bond0`, a bond over every
/// link with `settings` (`bond_mode=…`, `lacp=…`, `other_config:…`); with one link the link
/// is a plain port. The members' own stack is kept from answering ARP for the bridge's address.
pub fn start_ovs_bond(
    topo: &mut Topology,
    side: Side,
    bridge: &str,
    settings: &[&str],
) -> Result<OvsInstance> {
    let ovs = start_ovs(topo, side, bridge)?;
    let members: Vec<String> = topo.links().iter().map(|l| l.name.clone()).collect();
    let mut args: Vec<&str> = Vec::new();
    if members.len() == 1 {
        args.extend(["add-port", bridge, &members[0]]);
    } else {
        args.extend(["add-bond", bridge, "bond0"]);
        args.extend(members.iter().map(String::as_str));
        args.extend_from_slice(settings);
    }
    ovs.vsctl(&args)?;
    for m in &members {
        topo.sysctl(side, &format!("net/ipv4/conf/{m}/arp_ignore"), "8")?;
    }
    Ok(ovs)
}

/// Gives host `side`'s device `dev` the lab address of `host` (/24) and sets it up.
pub fn address_bond(topo: &Topology, side: Side, dev: &str, host: u8) -> Result<Ipv4Addr> {
    let addr = topo.address(host);
    topo.ip(side, &["addr", "add", &format!("{addr}/24"), "dev", dev])?;
    topo.ip(side, &["link", "set", dev, "up"])?;
    Ok(addr)
}

/// [`start_ovs`] in any of the lab's namespaces; `label` names its directory (`ovs-<label>`).
pub fn start_ovs_in(
    topo: &mut Topology,
    ns: &str,
    label: &str,
    bridge: &str,
) -> Result<OvsInstance> {
    for tool in [
        "ovsdb-tool",
        "ovsdb-server",
        "ovs-vswitchd",
        "ovs-vsctl",
        "ovs-appctl",
    ] {
        if !super::topology::in_path(tool) {
            bail!("Open vSwitch is needed ({tool} not found; apt-get install openvswitch-switch)");
        }
    }
    if !Path::new(OVS_SCHEMA).exists() {
        bail!("{OVS_SCHEMA} not found (apt-get install openvswitch-common)");
    }
    let dir = topo.dir().join(format!("ovs-{label}"));
    fs::create_dir_all(&dir)?;
    let d = dir.to_string_lossy().into_owned();
    run(
        "ovsdb-tool",
        &["create", &format!("{d}/conf.db"), OVS_SCHEMA],
    )?;
    let env = [
        ("OVS_RUNDIR", d.as_str()),
        ("OVS_LOGDIR", &d),
        ("OVS_DBDIR", &d),
    ];
    topo.adopt_pidfile(dir.join("ovsdb-server.pid"));
    ns_exec(
        ns,
        &env,
        "ovsdb-server",
        &[
            &format!("{d}/conf.db"),
            &format!("--remote=punix:{d}/db.sock"),
            &format!("--pidfile={d}/ovsdb-server.pid"),
            &format!("--log-file={d}/ovsdb-server.log"),
            &format!("--unixctl={d}/ovsdb-server.ctl"),
            "--detach",
        ],
    )?;
    let ovs = OvsInstance {
        db: format!("unix:{d}/db.sock"),
        ctl: dir.join("ovs-vswitchd.ctl"),
        bridge: bridge.to_owned(),
    };
    ovs.vsctl(&["--no-wait", "init"])?;
    // Read once at start-up, so it goes in before ovs-vswitchd starts.
    ovs.vsctl(&[
        "--no-wait",
        "set",
        "Open_vSwitch",
        ".",
        "other_config:userspace-tso-enable=true",
    ])?;
    topo.adopt_pidfile(dir.join("ovs-vswitchd.pid"));
    ns_exec(
        ns,
        &env,
        "ovs-vswitchd",
        &[
            &ovs.db,
            &format!("--pidfile={d}/ovs-vswitchd.pid"),
            &format!("--log-file={d}/ovs-vswitchd.log"),
            &format!("--unixctl={d}/ovs-vswitchd.ctl"),
            "--detach",
        ],
    )?;
    ovs.vsctl(&[
        "add-br",
        bridge,
        "--",
        "set",
        "bridge",
        bridge,
        "datapath_type=netdev",
    ])?;
    Ok(ovs)
}

fn ovs(topo: &mut Topology, ctl: &Ctl, bond: &BondConfig) -> Result<Vec<(Ipv4Addr, Ipv4Addr)>> {
    let map = ovs_bond(&bond.mode, &bond.policy).map_err(anyhow::Error::msg)?;
    let bridge = format!("{}br", topo.tag());
    let members: Vec<String> = topo.links().iter().map(|l| l.name.clone()).collect();
    for side in [Side::A, Side::B] {
        ctl.check()?;
        ctl.progress()
            .phase(&format!("starting Open vSwitch in host {}", side.letter()));
        let mode = format!("bond_mode={}", map.bond_mode);
        let lacp = format!("lacp={}", map.lacp);
        let primary = format!("other_config:bond-primary={}", members[0]);
        let mut settings = vec![mode.as_str(), lacp.as_str()];
        if map.lacp != "off" {
            settings.push("other_config:lacp-time=fast");
        }
        // Each end picks its own active member, and a backup member drops what it
        // receives: make both ends start on the first member, as the kernel does.
        if map.bond_mode == "active-backup" {
            settings.push(&primary);
        }
        let ovs = start_ovs_bond(topo, side, &bridge, &settings)?;
        if let Some(mtu) = bond.mtu {
            let req = format!("mtu_request={mtu}");
            for port in members.iter().chain([&bridge]) {
                ovs.vsctl(&["set", "interface", port, &req])?;
            }
        }
    }
    let a = address_bond(topo, Side::A, &bridge, 1)?;
    let b = address_bond(topo, Side::B, &bridge, 2)?;
    Ok(vec![(a, b)])
}

/// Runs a command that detaches itself inside a host's namespace, waiting for it to return.
fn ns_exec(ns: &str, env: &[(&str, &str)], program: &str, args: &[&str]) -> Result<()> {
    let out = Command::new("ip")
        .args(["netns", "exec", ns])
        .args(super::topology::unblock_signals())
        .arg(program)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .with_context(|| format!("starting {program}"))?;
    if !out.status.success() {
        bail!(
            "{program} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn kernel_modes_map_to_ovs() {
        let m = |mode, policy| ovs_bond(mode, policy).map(|b| (b.bond_mode, b.lacp));
        assert_eq!(m("active-backup", "layer2"), Ok(("active-backup", "off")));
        assert_eq!(m("balance-xor", "layer3+4"), Ok(("balance-tcp", "active")));
        assert_eq!(m("balance-xor", "layer2+3"), Ok(("balance-slb", "off")));
        assert_eq!(m("802.3ad", "layer2"), Ok(("balance-slb", "active")));
        assert_eq!(m("802.3ad", "layer3+4"), Ok(("balance-tcp", "active")));
        assert!(m("balance-rr", "layer2").is_err());
    }

    #[test]
    fn lagd_opts_follow_the_kernel_names() {
        let b = BondConfig {
            mode: "802.3ad".into(),
            policy: "layer3+4".into(),
            extra_opts: " lacp_rate=fast ".into(),
            mtu: None,
        };
        assert_eq!(
            b.lagd_opts(),
            "mode=802.3ad xmit_hash_policy=layer3+4 miimon=100 lacp_rate=fast"
        );
    }

    #[test]
    fn mii_up_is_found_anywhere() {
        let v: Value = serde_json::from_str(
            r#"{"bond":"b","members":[{"name":"m0","mii_status":"down"},{"name":"m1","mii_status":"up"}]}"#,
        )
        .unwrap();
        assert!(has_mii_up(&v));
        let v: Value = serde_json::from_str(r#"{"members":[{"mii_status":"down"}]}"#).unwrap();
        assert!(!has_mii_up(&v));
    }
}
