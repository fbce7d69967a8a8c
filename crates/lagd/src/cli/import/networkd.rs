//! systemd-networkd: the `.netdev` `[Bond]` and the `.network` files with `Bond=`.

use super::common::*;

pub(super) fn import_networkd(
    files: &[(PathBuf, String)],
    want: Option<&str>,
    host: &[HostLink],
) -> Result<Imported, ImportError> {
    let mut parsed = Vec::new();
    for (p, t) in files {
        parsed.push((p, ini(p, t)?));
    }
    let bonds: Vec<_> = parsed
        .iter()
        .filter(|(p, e)| {
            p.extension().is_some_and(|x| x == "netdev")
                && ini_get(e, "NetDev", "Kind") == Some("bond")
        })
        .filter(|(_, e)| want.is_none_or(|w| ini_get(e, "NetDev", "Name") == Some(w)))
        .collect();
    let (path, entries) = match bonds.as_slice() {
        [one] => one,
        [] => return Err(error(&files[0].0, None, "no .netdev with Kind=bond")),
        _ => {
            return Err(error(
                &files[0].0,
                None,
                "several bonds: name one with --bond",
            ));
        }
    };
    let mut out = Imported {
        bond: ini_get(entries, "NetDev", "Name")
            .ok_or_else(|| error(path, None, "[NetDev] Name is missing"))?
            .to_owned(),
        ..Imported::default()
    };
    for (line, section, k, v) in entries.iter() {
        let bad = |what: &str| error(path, Some(*line), format!("{k}: '{v}' is not {what}"));
        match (section.as_str(), k.as_str()) {
            ("NetDev", "Name" | "Kind" | "Description") => {}
            ("NetDev", "MTUBytes") => out.mtu = Some(v.parse().map_err(|_| bad("a number"))?),
            ("NetDev", "MACAddress") => out.mac = Some(v.clone()),
            ("Bond", key) => {
                let direct = match key {
                    "Mode" => Some("mode"),
                    "TransmitHashPolicy" => Some("xmit_hash_policy"),
                    "LACPTransmitRate" => Some("lacp_rate"),
                    "AdSelect" => Some("ad_select"),
                    "AdActorSystemPriority" => Some("ad_actor_sys_prio"),
                    "AdUserPortKey" => Some("ad_user_port_key"),
                    "AdActorSystem" => Some("ad_actor_system"),
                    "FailOverMACPolicy" => Some("fail_over_mac"),
                    "ARPValidate" => Some("arp_validate"),
                    "ARPAllTargets" => Some("arp_all_targets"),
                    "ARPMissedMax" => Some("arp_missed_max"),
                    "PrimaryReselectPolicy" => Some("primary_reselect"),
                    "ResendIGMP" => Some("resend_igmp"),
                    "PacketsPerSlave" => Some("packets_per_slave"),
                    "GratuitousARP" => Some("num_grat_arp"),
                    "MinLinks" => Some("min_links"),
                    _ => None,
                };
                let ms = match key {
                    "MIIMonitorSec" => Some("miimon"),
                    "UpDelaySec" => Some("updelay"),
                    "DownDelaySec" => Some("downdelay"),
                    "ARPIntervalSec" => Some("arp_interval"),
                    "PeerNotifyDelaySec" => Some("peer_notif_delay"),
                    _ => None,
                };
                let boolean = match key {
                    "AllSlavesActive" => Some("all_slaves_active"),
                    "DynamicTransmitLoadBalancing" => Some("tlb_dynamic_lb"),
                    _ => None,
                };
                let origin = format!("[Bond] {key}={v}");
                if let Some(o) = direct {
                    take_option(&mut out, o, v, &origin);
                } else if let Some(o) = ms {
                    let n = timespan_ms(v, false).ok_or_else(|| bad("a time span"))?;
                    take_option(&mut out, o, &n.to_string(), &origin);
                } else if let Some(o) = boolean {
                    let b = yes_no(v).ok_or_else(|| bad("a boolean"))?;
                    take_option(&mut out, o, b, &origin);
                } else if key == "LearnPacketIntervalSec" {
                    let n = timespan_ms(v, false).ok_or_else(|| bad("a time span"))?;
                    take_option(
                        &mut out,
                        "lp_interval",
                        &(n / 1000).max(1).to_string(),
                        &origin,
                    );
                } else if key == "ARPIPTargets" {
                    let t: Vec<&str> = v.split_whitespace().collect();
                    take_option(&mut out, "arp_ip_target", &t.join(","), &origin);
                } else {
                    out.drop_setting(format!("{origin}: not a bond setting lagd knows"));
                }
            }
            (_, key) => out.drop_unknown(format_args!("[{section}] {key}={v}"), key),
        }
    }
    for (p, e) in &parsed {
        if p.extension().is_none_or(|x| x != "network") {
            continue;
        }
        // The bond's own .network file: its MTU and MAC are the bond's; its addresses, routes
        // and the interfaces stacked on it are the system's.
        let names = ini_get(e, "Match", "Name").unwrap_or("");
        if names.split_whitespace().any(|n| n == out.bond) {
            for (line, section, k, v) in e {
                let what = format!("{}: [{section}] {k}={v}", p.display());
                match (section.as_str(), k.as_str()) {
                    ("Match", _) => {}
                    ("Link", "MTUBytes") => {
                        out.mtu = Some(v.parse().map_err(|_| {
                            error(p, Some(*line), format!("MTUBytes: '{v}' is not a number"))
                        })?)
                    }
                    ("Link", "MACAddress") => out.mac = Some(v.clone()),
                    (
                        "Network",
                        "VLAN" | "MACVLAN" | "MACVTAP" | "IPVLAN" | "IPVTAP" | "VXLAN" | "Tunnel"
                        | "Bridge" | "VRF" | "Xfrm",
                    ) => out.drop_system(format!(
                        "{what}: interfaces stacked on the bond stay the system's (they work on \
                         lagd's bond as on the kernel's)"
                    )),
                    (
                        "Address" | "Route" | "RoutingPolicyRule" | "DHCP" | "DHCPv4" | "DHCPv6"
                        | "IPv6AcceptRA" | "IPv6SendRA" | "IPv6Prefix" | "DHCPServer" | "Neighbor"
                        | "NextHop",
                        _,
                    ) => out.drop_system(format!(
                        "{what}: addresses, routes and DNS are set on the bond interface by the \
                         system, not by lagd"
                    )),
                    (_, key) => out.drop_unknown(what, key),
                }
            }
            continue;
        }
        if ini_get(e, "Network", "Bond") != Some(out.bond.as_str()) {
            continue;
        }
        // Members by name, or by pattern, MAC or driver: those resolve on this host.
        let names = ini_get(e, "Match", "Name").unwrap_or("");
        let macs = ini_get(e, "Match", "MACAddress")
            .or_else(|| ini_get(e, "Match", "PermanentMACAddress"))
            .unwrap_or("");
        let drivers = ini_get(e, "Match", "Driver").unwrap_or("");
        let plain = !names.is_empty()
            && macs.is_empty()
            && drivers.is_empty()
            && !names.split_whitespace().any(is_pattern);
        let these: Vec<String> = if plain {
            names.split_whitespace().map(str::to_owned).collect()
        } else {
            let criteria = [("Name", names), ("MACAddress", macs), ("Driver", drivers)]
                .iter()
                .filter(|(_, v)| !v.is_empty())
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ");
            // Each key lists alternatives; the keys must all match.
            let found: Vec<String> = host
                .iter()
                .filter(|l| {
                    let any = |list: &str, f: &dyn Fn(&str) -> bool| {
                        list.is_empty() || list.split_whitespace().any(f)
                    };
                    any(names, &|n| glob_match(n, &l.name))
                        && any(macs, &|m| {
                            !resolve_on_host(std::slice::from_ref(l), &[Selector::Mac(m)])
                                .is_empty()
                        })
                        && any(drivers, &|d| {
                            !resolve_on_host(std::slice::from_ref(l), &[Selector::Driver(d)])
                                .is_empty()
                        })
                })
                .map(|l| l.name.clone())
                .collect();
            if found.is_empty() {
                return Err(error(
                    p,
                    None,
                    format!(
                        "[Match] {criteria} selects the members by pattern, and no interface of \
                         this host matches it: import on the host that has the members, or list \
                         them in the TOML's members"
                    ),
                ));
            }
            out.note(format!(
                "{}: [Match] {criteria} resolved on this host to {}; an interface that matches \
                 later is not added (lagd's members are a fixed list)",
                p.display(),
                found.join(", ")
            ));
            found
        };
        for n in &these {
            out.add_member(n);
        }
        if ini_get(e, "Network", "PrimarySlave").and_then(yes_no) == Some("1") {
            if let Some(n) = these.first() {
                out.set("primary", n.clone());
            }
        }
        for (_, section, k, v) in e {
            if (section == "Network" && !matches!(k.as_str(), "Bond" | "PrimarySlave"))
                || section == "Link"
            {
                out.drop_system(format!(
                    "{}: [{section}] {k}={v}: member settings stay with the member's own configuration",
                    p.display()
                ));
            }
        }
    }
    Ok(out)
}
