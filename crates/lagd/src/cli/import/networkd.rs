//! systemd-networkd: the `.netdev` `[Bond]` and the `.network` files with `Bond=`.

use super::*;

pub(super) fn import_networkd(
    files: &[(PathBuf, String)],
    want: Option<&str>,
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
            (_, key) => out.drop_setting(format!(
                "[{section}] {key}={v}: {}",
                address_reason(key).unwrap_or("not a bond setting lagd knows")
            )),
        }
    }
    for (p, e) in &parsed {
        if p.extension().is_none_or(|x| x != "network") {
            continue;
        }
        // The bond's own .network file: its addresses and routes are not lagd's to set.
        let names = ini_get(e, "Match", "Name").unwrap_or("");
        if names.split_whitespace().any(|n| n == out.bond) {
            for (_, section, k, v) in e {
                if section != "Match" {
                    out.drop_setting(format!(
                        "{}: [{section}] {k}={v}: {}",
                        p.display(),
                        address_reason(k).unwrap_or(
                            "the bond interface's own settings are the system's, not lagd's"
                        )
                    ));
                }
            }
            continue;
        }
        if ini_get(e, "Network", "Bond") != Some(out.bond.as_str()) {
            continue;
        }
        let names = ini_get(e, "Match", "Name").unwrap_or("");
        for n in names.split_whitespace() {
            if n.contains(['*', '?', '[']) {
                out.drop_setting(format!(
                    "{}: [Match] Name={n} is a pattern; lagd needs the member names: add them to members",
                    p.display()
                ));
            } else {
                out.add_member(n);
            }
        }
        if ini_get(e, "Network", "PrimarySlave").and_then(yes_no) == Some("1") {
            if let Some(n) = names.split_whitespace().next() {
                out.set("primary", n);
            }
        }
        for (_, section, k, v) in e {
            if (section == "Network" && !matches!(k.as_str(), "Bond" | "PrimarySlave"))
                || section == "Link"
            {
                out.drop_setting(format!(
                    "{}: [{section}] {k}={v}: member settings stay with the member's own configuration",
                    p.display()
                ));
            }
        }
    }
    Ok(out)
}
