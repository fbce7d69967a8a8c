//! netplan YAML (`network: bonds:`).

use super::common::*;

/// The modes netplan accepts (balance-tcp and balance-slb only for Open vSwitch bonds).
const MODES: [&str; 7] = [
    "balance-rr",
    "active-backup",
    "balance-xor",
    "broadcast",
    "802.3ad",
    "balance-tlb",
    "balance-alb",
];

pub(super) fn import_netplan(
    files: &[(PathBuf, String)],
    want: Option<&str>,
    host: &[HostLink],
) -> Result<Imported, ImportError> {
    // netplan merges its files in order: a later definition of an ID replaces the earlier.
    let mut bonds: Vec<(String, Yaml, &Path)> = Vec::new();
    let mut ethernets: Vec<(String, Yaml)> = Vec::new();
    let mut renderer: Option<String> = None;
    for (path, text) in files {
        let doc = load_yaml(path, text)?;
        if let Some(r) = doc["network"]["renderer"].as_str() {
            renderer = Some(r.to_owned());
        }
        for (k, v) in doc["network"]["bonds"].as_hash().into_iter().flatten() {
            if let Some(k) = k.as_str() {
                bonds.retain(|(n, _, _)| n != k);
                bonds.push((k.to_owned(), v.clone(), path.as_path()));
            }
        }
        for (k, v) in doc["network"]["ethernets"].as_hash().into_iter().flatten() {
            if let Some(k) = k.as_str() {
                ethernets.retain(|(n, _)| n != k);
                ethernets.push((k.to_owned(), v.clone()));
            }
        }
    }
    let first = &files[0].0;
    let names: Vec<&str> = bonds.iter().map(|(n, _, _)| n.as_str()).collect();
    let (name, bond, path) = match (want, names.as_slice()) {
        (Some(w), _) => bonds
            .iter()
            .find(|(n, _, _)| n == w)
            .ok_or_else(|| error(first, None, format!("no bond '{w}' under network: bonds:")))?,
        (None, [_]) => &bonds[0],
        (None, []) => {
            return Err(error(
                first,
                None,
                "no bond in these files (no network: bonds: entry)",
            ));
        }
        (None, _) => return Err(error(first, None, "several bonds: name one with --bond")),
    };
    let (name, path) = (name.clone(), *path);
    let mut out = Imported {
        bond: name.clone(),
        ..Imported::default()
    };
    let ovs = !bond["openvswitch"].is_badvalue();
    // Members are netplan IDs: an ID's set-name or match: names the interface.
    let mut id_names: Vec<(String, Vec<String>)> = Vec::new();
    for id in bond["interfaces"].as_vec().into_iter().flatten() {
        let Some(id) = id.as_str() else { continue };
        let resolved = member_names(id, &ethernets, host)
            .map_err(|m| error(path, None, format!("bonds.{name}.interfaces: {m}")))?;
        if resolved.0 != [id] {
            if let Some(how) = resolved.1 {
                out.note(format!(
                    "member {id}: {how} resolves to {}",
                    resolved.0.join(", ")
                ));
            }
        }
        for n in &resolved.0 {
            out.add_member(n);
        }
        id_names.push((id.to_owned(), resolved.0));
    }
    for (k, v) in bond.as_hash().into_iter().flatten() {
        let Some(k) = k.as_str() else { continue };
        match k {
            "interfaces" => {}
            "mtu" => {
                out.mtu = v.as_i64().and_then(|m| u32::try_from(m).ok());
                if out.mtu.is_none() {
                    return Err(error(
                        path,
                        None,
                        format!("bonds.{name}.mtu is not a number"),
                    ));
                }
            }
            "macaddress" => out.mac = yaml_text(v),
            "parameters" => {
                for (pk, pv) in v.as_hash().into_iter().flatten() {
                    let Some(pk) = pk.as_str() else { continue };
                    let origin = format!("parameters.{pk}");
                    let text = match pv {
                        Yaml::Array(a) => {
                            Some(a.iter().filter_map(yaml_text).collect::<Vec<_>>().join(","))
                        }
                        other => yaml_text(other),
                    };
                    let Some(text) = text else {
                        out.drop_setting(format!("{origin}: value not understood"));
                        continue;
                    };
                    let bad = || {
                        error(
                            path,
                            None,
                            format!("bonds.{name}.{origin}: '{text}' is not a time"),
                        )
                    };
                    let key = match pk {
                        "mode" => {
                            let ok = MODES.contains(&text.as_str())
                                || (ovs && matches!(text.as_str(), "balance-tcp" | "balance-slb"));
                            if !ok {
                                out.refused_mode.get_or_insert_with(|| format!(
                                    "bonds.{name}.parameters.mode: '{text}' is not a mode netplan \
                                     accepts ({}{}); the bond would run another mode, so nothing \
                                     is imported",
                                    MODES.join(", "),
                                    if ovs {
                                        ", balance-tcp, balance-slb"
                                    } else {
                                        ""
                                    }
                                ));
                                continue;
                            }
                            "mode"
                        }
                        "lacp-rate" => "lacp_rate",
                        "min-links" => "min_links",
                        "transmit-hash-policy" => "xmit_hash_policy",
                        "ad-select" => "ad_select",
                        "all-members-active" | "all-slaves-active" => "all_slaves_active",
                        "arp-ip-targets" => "arp_ip_target",
                        "arp-validate" => "arp_validate",
                        "arp-all-targets" => "arp_all_targets",
                        "fail-over-mac-policy" => "fail_over_mac",
                        "gratuitous-arp" | "gratuitious-arp" => "num_grat_arp",
                        "packets-per-member" | "packets-per-slave" => "packets_per_slave",
                        "primary-reselect-policy" => "primary_reselect",
                        "resend-igmp" => "resend_igmp",
                        "primary" => "primary",
                        "mii-monitor-interval"
                        | "arp-interval"
                        | "up-delay"
                        | "down-delay"
                        | "learn-packet-interval" => {
                            // netplan: milliseconds without a suffix; learn-packet-interval:
                            // seconds.
                            let seconds = pk == "learn-packet-interval";
                            let ms = timespan_ms(&text, !seconds).ok_or_else(bad)?;
                            let (key, value) = match pk {
                                "mii-monitor-interval" => ("miimon", ms),
                                "arp-interval" => ("arp_interval", ms),
                                "up-delay" => ("updelay", ms),
                                "down-delay" => ("downdelay", ms),
                                _ => ("lp_interval", (ms / 1000).max(1)),
                            };
                            take_option(&mut out, key, &value.to_string(), &origin);
                            continue;
                        }
                        _ => {
                            out.drop_setting(format!("{origin}: not a bond setting lagd knows"));
                            continue;
                        }
                    };
                    let text = if key == "all_slaves_active" {
                        yes_no(&text).unwrap_or("x").to_owned()
                    } else if key == "primary" {
                        // An ID too.
                        match id_names.iter().find(|(id, _)| *id == text) {
                            Some((_, names)) if names.len() == 1 => names[0].clone(),
                            _ => text,
                        }
                    } else {
                        text
                    };
                    take_option(&mut out, key, &text, &origin);
                }
            }
            "openvswitch" => {}
            other => out.drop_unknown(format_args!("bonds.{name}.{other}"), other),
        }
    }
    let bond_renderer = bond["renderer"].as_str().map(str::to_owned);
    if bond_renderer.or(renderer).as_deref() == Some("NetworkManager") {
        out.networkmanager_defaults("the netplan bond (renderer NetworkManager)");
    }
    Ok(out)
}

/// The interface names of netplan ID `id`: its `set-name`, or what its `match:` selects (a
/// plain name as it is; a pattern, MAC or driver resolved on `host`), or the ID itself when no
/// `ethernets:` entry defines it. With how it was resolved, when by `match:`.
fn member_names(
    id: &str,
    ethernets: &[(String, Yaml)],
    host: &[HostLink],
) -> Result<(Vec<String>, Option<String>), String> {
    let Some((_, def)) = ethernets.iter().find(|(n, _)| n == id) else {
        return Ok((vec![id.to_owned()], None));
    };
    if let Some(n) = def["set-name"].as_str() {
        return Ok((vec![n.to_owned()], Some(format!("set-name {n}"))));
    }
    let m = &def["match"];
    if m.is_badvalue() {
        return Ok((vec![id.to_owned()], None));
    }
    let name = m["name"].as_str();
    let mac = m["macaddress"].as_str();
    let driver = match &m["driver"] {
        Yaml::String(d) => vec![d.clone()],
        Yaml::Array(a) => a.iter().filter_map(yaml_text).collect(),
        _ => Vec::new(),
    };
    if let (Some(n), None, true) = (name, mac, driver.is_empty()) {
        if !is_pattern(n) {
            return Ok((vec![n.to_owned()], Some(format!("match: name {n}"))));
        }
    }
    let mut what = Vec::new();
    if let Some(n) = name {
        what.push(format!("name {n}"));
    }
    if let Some(m) = mac {
        what.push(format!("macaddress {m}"));
    }
    if !driver.is_empty() {
        what.push(format!("driver {}", driver.join("|")));
    }
    let what = format!("match: {}", what.join(", "));
    let found: Vec<String> = host
        .iter()
        .filter(|l| {
            let one = std::slice::from_ref(*l);
            name.is_none_or(|n| !resolve_on_host(one, &[Selector::Name(n)]).is_empty())
                && mac.is_none_or(|m| !resolve_on_host(one, &[Selector::Mac(m)]).is_empty())
                && (driver.is_empty()
                    || driver
                        .iter()
                        .any(|d| !resolve_on_host(one, &[Selector::Driver(d)]).is_empty()))
        })
        .map(|l| l.name.clone())
        .collect();
    if found.is_empty() {
        return Err(format!(
            "member {id} is selected by {what}, and no interface of this host matches: import \
             on the host that has the members, or give the member a set-name"
        ));
    }
    Ok((
        found,
        Some(format!(
            "{what} on this host (an interface that matches later is not added)"
        )),
    ))
}
