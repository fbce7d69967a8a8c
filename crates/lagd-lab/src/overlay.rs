//! Overlay traffic: a tunnel (VXLAN or Geneve) between the hosts' bond addresses, the streams
//! running between the tunnel's inner addresses, as pod traffic does on OpenShift (seed 000).
//!
//! The inner interfaces' MACs are derived from their IPv4 addresses as OVN-Kubernetes derives a
//! pod's: `0a:58` followed by the four address bytes. The kernel picks each tunnelled packet's
//! outer UDP source port from a hash of the inner flow, so the bond's layer3+4 and encap
//! policies see the inner flows, while layer2 and layer2+3 see one outer address pair.

use std::net::Ipv4Addr;

use anyhow::{Result, bail};

use super::topology::{Side, Topology, link_counters};

/// Bytes a tunnel adds to each inner frame over IPv4: outer IPv4 (20) + UDP (8) + the VXLAN or
/// option-less Geneve header (8) + the inner Ethernet header (14).
pub const TUNNEL_OVERHEAD: u32 = 50;

/// The tunnel kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OverlayKind {
    /// Geneve (UDP 6081), as OVN-Kubernetes uses.
    Geneve,
    /// VXLAN (UDP 4789).
    Vxlan,
}

impl OverlayKind {
    /// `geneve` or `vxlan`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Geneve => "geneve",
            Self::Vxlan => "vxlan",
        }
    }

    /// The tunnel's UDP destination port.
    pub fn port(self) -> u16 {
        match self {
            Self::Geneve => 6081,
            Self::Vxlan => 4789,
        }
    }
}

/// The MAC OVN-Kubernetes gives an interface with address `ip`: `0a:58:` + the address bytes.
pub fn ovn_mac(ip: Ipv4Addr) -> String {
    let o = ip.octets();
    format!("0a:58:{:02x}:{:02x}:{:02x}:{:02x}", o[0], o[1], o[2], o[3])
}

/// The tunnel's interface name in both hosts.
pub fn device(topo: &Topology) -> String {
    format!("{}ov", topo.tag())
}

/// Fails with a clear message if this kernel cannot make the tunnel (it tries, in host A, and
/// removes what it made).
pub fn check_kernel(topo: &Topology, kind: OverlayKind) -> Result<()> {
    let probe = format!("{}ck", topo.tag());
    let (lo, hi) = (topo.address(1).to_string(), topo.address(2).to_string());
    let mut args = vec!["link", "add", &probe, "type", kind.name(), "id", "7"];
    if kind == OverlayKind::Vxlan {
        args.extend(["local", &lo, "dstport", "4789"]);
    }
    args.extend(["remote", &hi]);
    match topo.ip(Side::A, &args) {
        Ok(_) => {
            topo.ip(Side::A, &["link", "del", &probe])?;
            Ok(())
        }
        Err(e) => bail!(
            "this kernel cannot make a {0} tunnel (`ip link add … type {0}` failed: {e:#}); \
             the kernel needs CONFIG_{1} (--overlay vxlan needs CONFIG_VXLAN)",
            kind.name(),
            kind.name().to_uppercase()
        ),
    }
}

/// Makes the tunnel between host A (`outer.0`) and host B (`outer.1`), inner MTU `outer_mtu`
/// less [`TUNNEL_OVERHEAD`]; returns the inner addresses (A, B).
pub fn bring_up(
    topo: &Topology,
    kind: OverlayKind,
    outer: (Ipv4Addr, Ipv4Addr),
    outer_mtu: u32,
) -> Result<(Ipv4Addr, Ipv4Addr)> {
    let dev = device(topo);
    let inner = (topo.overlay_address(1), topo.overlay_address(2));
    let mtu = (outer_mtu.saturating_sub(TUNNEL_OVERHEAD)).to_string();
    for (side, local, remote, addr) in [
        (Side::A, outer.0, outer.1, inner.0),
        (Side::B, outer.1, outer.0, inner.1),
    ] {
        let (local, remote) = (local.to_string(), remote.to_string());
        let mut args = vec!["link", "add", &dev, "type", kind.name(), "id", "4242"];
        if kind == OverlayKind::Vxlan {
            args.extend(["local", &local, "dstport", "4789"]);
        }
        args.extend(["remote", &remote]);
        topo.ip(side, &args)?;
        let mac = ovn_mac(addr);
        topo.ip(side, &["link", "set", &dev, "address", &mac, "mtu", &mtu])?;
        topo.ip(side, &["addr", "add", &format!("{addr}/24"), "dev", &dev])?;
        topo.ip(side, &["link", "set", &dev, "up"])?;
    }
    Ok(inner)
}

/// Has both hosts' tunnel interfaces checksum the inner packets themselves (`ethtool -K DEV tx
/// off`). Through Open vSwitch 3.1's userspace datapath the inner TCP checksum is otherwise
/// never filled in: the hosts hand the encapsulated frames on with the inner checksum left to
/// offload, OVS reads the offload request as one for the outer UDP header and passes that on,
/// and host B drops every inner TCP segment (ping crosses, TCP never connects).
pub fn checksum_in_software(topo: &Topology) -> Result<()> {
    super::topology::require_program("ethtool", "ethtool")?;
    let dev = device(topo);
    for side in [Side::A, Side::B] {
        super::topology::run(
            "ip",
            &[
                "netns",
                "exec",
                topo.ns(side),
                "ethtool",
                "-K",
                &dev,
                "tx",
                "off",
            ],
        )?;
    }
    Ok(())
}

/// Bytes host A's tunnel interface sent and received so far.
pub fn tunnel_bytes(topo: &Topology) -> Result<(u64, u64)> {
    let c = link_counters(topo.ns(Side::A), &device(topo))?;
    Ok((c.tx_bytes, c.rx_bytes))
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn macs_derive_from_ips_as_ovn_kubernetes_does() {
        assert_eq!(ovn_mac(Ipv4Addr::new(10, 128, 0, 5)), "0a:58:0a:80:00:05");
        assert_eq!(
            ovn_mac(Ipv4Addr::new(192, 168, 255, 1)),
            "0a:58:c0:a8:ff:01"
        );
    }
}
