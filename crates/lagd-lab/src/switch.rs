//! The switch between the hosts: a Linux bridge in a namespace of its own, or Open vSwitch
//! there, with a port-channel (a LAG) towards each host's bond, and the client hosts' ports.
//!
//! The kernel here has no bonding driver, so the Linux-bridge switch's port-channels are lagd
//! instances in the switch namespace (a TAP on the bridge, the host's links as members): static
//! (`balance-xor`) or LACP (`802.3ad`), hashing with the switch's own policy. Open vSwitch makes
//! its port-channels as bonds (`balance-tcp` with LACP, or `balance-slb`). Either way the return
//! path towards a host is the switch's choice, not the host's.
//!
//! With one switch per link (seed 004) each switch is a plain bridge with one port per host:
//! nothing to aggregate there.

use std::path::Path;
use std::time::Instant;

use anyhow::{Result, bail};

use super::control::Ctl;
use super::dataplane::{spawn_lagd, start_ovs_in, wait_lagd};
use super::topology::{Side, Topology, link_mtu, run};

/// Which switch stands between the hosts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SwitchKind {
    /// A Linux bridge (port-channels made by lagd, the kernel here having no bonding driver).
    Bridge,
    /// Open vSwitch (port-channels made by OVS bonds).
    Ovs,
}

/// How the switch treats the ports towards one host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PortChannel {
    /// Independent ports, each a bridge port (active-backup, balance-tlb/alb, no bond).
    None,
    /// A static LAG (a switch's `channel-group mode on`).
    Static,
    /// An LACP LAG.
    Lacp,
}

impl PortChannel {
    /// The port-channel a real switch would configure for a host bond in `mode` (OVS bonds
    /// that run LACP count as LACP).
    pub fn for_host(mode: &str, host_lacp: bool) -> Self {
        match mode {
            _ if host_lacp => Self::Lacp,
            // lagd's balance-tcp is 802.3ad with OVS's L4 hash.
            "802.3ad" | "4" | "balance-tcp" => Self::Lacp,
            "balance-xor" | "2" | "balance-rr" | "0" | "broadcast" | "3" => Self::Static,
            _ => Self::None,
        }
    }
}

/// The switch to build.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwitchConfig {
    /// Bridge or Open vSwitch.
    pub kind: SwitchKind,
    /// The switch's own transmit hash (kernel policy names) on its port-channels.
    pub policy: String,
    /// The port-channel towards both hosts.
    pub channel: PortChannel,
    /// MTU of the switch's ports.
    pub mtu: Option<u32>,
}

/// Joins the link ends in the lab's switch namespaces (and the client ports in the first one).
/// `lagd` is the binary for the bridge's port-channels.
pub fn bring_up(topo: &mut Topology, ctl: &Ctl, cfg: &SwitchConfig, lagd: &Path) -> Result<()> {
    // The hosts' bonds may have raised their members' MTU above the bond's (lagd's stripe mode
    // adds a header to every frame): the switch's ports take the largest, as a real switch
    // would have to be configured.
    let mut mtu = cfg.mtu;
    for side in [Side::A, Side::B] {
        for link in topo.links() {
            let m = link_mtu(topo.ns(side), &link.name)?;
            if m > mtu.unwrap_or(1500) {
                mtu = Some(m);
            }
        }
    }
    let cfg = &SwitchConfig { mtu, ..cfg.clone() };
    let switches = topo.switches().to_vec();
    let links = topo.links().len();
    let tag = topo.tag().to_string();
    let bridge = format!("{tag}br");
    if switches.len() > 1 || links == 1 {
        // One port per host on each switch: plain bridges.
        if cfg.kind == SwitchKind::Ovs {
            bail!("--switch ovs with one switch per link is not supported (use --switch bridge)");
        }
        for (k, ns) in switches.iter().enumerate() {
            let mut ports = Vec::new();
            for i in (0..links).filter(|i| i % switches.len() == k) {
                ports.push(format!("{tag}a{i}"));
                ports.push(format!("{tag}b{i}"));
            }
            if k == 0 {
                ports.extend(topo.clients().iter().map(|c| c.port.clone()));
            }
            linux_bridge(ns, &bridge, &ports, cfg.mtu)?;
        }
        return Ok(());
    }
    let ns = switches[0].clone();
    let side_ports =
        |side: char| -> Vec<String> { (0..links).map(|i| format!("{tag}{side}{i}")).collect() };
    let clients: Vec<String> = topo.clients().iter().map(|c| c.port.clone()).collect();
    match cfg.kind {
        SwitchKind::Bridge => {
            let mut ports = clients;
            let mut daemons = Vec::new();
            for side in ['a', 'b'] {
                let members = side_ports(side);
                if cfg.channel == PortChannel::None {
                    ports.extend(members);
                    continue;
                }
                let mode = match cfg.channel {
                    PortChannel::Lacp => "802.3ad lacp_rate=fast",
                    _ => "balance-xor",
                };
                let opts = format!("mode={mode} xmit_hash_policy={} miimon=100", cfg.policy);
                let name = format!("{tag}p{side}");
                let (id, control) = spawn_lagd(
                    topo,
                    &ns,
                    &format!("lagd-switch-{side}"),
                    lagd,
                    &name,
                    &members.join(","),
                    &opts,
                    cfg.mtu,
                )?;
                daemons.push((side, id, control));
                ports.push(name);
            }
            let started = Instant::now();
            for (side, id, control) in &daemons {
                wait_lagd(
                    topo,
                    ctl,
                    lagd,
                    *id,
                    control,
                    &format!("the switch's port-channel to host {side}"),
                    started,
                )?;
            }
            linux_bridge(&ns, &bridge, &ports, cfg.mtu)
        }
        SwitchKind::Ovs => {
            ctl.progress().phase("starting Open vSwitch in the switch");
            let ovs = start_ovs_in(topo, &ns, "switch", &bridge)?;
            let l4 = matches!(cfg.policy.as_str(), "layer3+4" | "encap3+4");
            for side in ['a', 'b'] {
                let members = side_ports(side);
                let mut args: Vec<String> = Vec::new();
                if cfg.channel == PortChannel::None {
                    for m in &members {
                        ovs.vsctl(&["add-port", &bridge, m])?;
                    }
                } else {
                    // balance-tcp runs only with LACP; a static LAG hashes MACs (balance-slb).
                    let (bond_mode, lacp) = match cfg.channel {
                        PortChannel::Lacp if l4 => ("balance-tcp", "active"),
                        PortChannel::Lacp => ("balance-slb", "active"),
                        _ => ("balance-slb", "off"),
                    };
                    args.extend(
                        ["add-bond", &bridge, &format!("p{side}")]
                            .iter()
                            .map(|s| s.to_string()),
                    );
                    args.extend(members.iter().cloned());
                    args.push(format!("bond_mode={bond_mode}"));
                    args.push(format!("lacp={lacp}"));
                    if lacp != "off" {
                        args.push("other_config:lacp-time=fast".into());
                    }
                    let a: Vec<&str> = args.iter().map(String::as_str).collect();
                    ovs.vsctl(&a)?;
                }
                if let Some(mtu) = cfg.mtu {
                    let req = format!("mtu_request={mtu}");
                    for m in &members {
                        ovs.vsctl(&["set", "interface", m, &req])?;
                    }
                }
            }
            for c in &clients {
                ovs.vsctl(&["add-port", &bridge, c])?;
                if let Some(mtu) = cfg.mtu {
                    ovs.vsctl(&["set", "interface", c, &format!("mtu_request={mtu}")])?;
                }
            }
            Ok(())
        }
    }
}

/// A Linux bridge `bridge` in `ns` over `ports`, all up.
fn linux_bridge(ns: &str, bridge: &str, ports: &[String], mtu: Option<u32>) -> Result<()> {
    run("ip", &["-n", ns, "link", "add", bridge, "type", "bridge"])?;
    for p in ports {
        if let Some(m) = mtu {
            run("ip", &["-n", ns, "link", "set", p, "mtu", &m.to_string()])?;
        }
        run("ip", &["-n", ns, "link", "set", p, "master", bridge])?;
        run("ip", &["-n", ns, "link", "set", p, "up"])?;
    }
    run("ip", &["-n", ns, "link", "set", bridge, "up"])?;
    Ok(())
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn port_channel_follows_the_host_bond() {
        assert_eq!(PortChannel::for_host("802.3ad", false), PortChannel::Lacp);
        assert_eq!(
            PortChannel::for_host("balance-tcp", false),
            PortChannel::Lacp
        );
        assert_eq!(
            PortChannel::for_host("balance-xor", true),
            PortChannel::Lacp
        );
        assert_eq!(
            PortChannel::for_host("balance-rr", false),
            PortChannel::Static
        );
        assert_eq!(
            PortChannel::for_host("balance-xor", false),
            PortChannel::Static
        );
        assert_eq!(
            PortChannel::for_host("active-backup", false),
            PortChannel::None
        );
        assert_eq!(
            PortChannel::for_host("balance-alb", false),
            PortChannel::None
        );
    }
}
