//! netplan YAML (`network: bonds:`).

use super::*;

pub(super) fn import_netplan(
    files: &[(PathBuf, String)],
    want: Option<&str>,
) -> Result<Imported, ImportError> {
    let (path, text) = &files[0];
    let doc = load_yaml(path, text)?;
    let bonds = &doc["network"]["bonds"];
    let Some(map) = bonds.as_hash() else {
        return Err(error(path, None, "no network: bonds: here"));
    };
    let names: Vec<String> = map
        .keys()
        .filter_map(|k| k.as_str().map(str::to_owned))
        .collect();
    let name = match (want, names.as_slice()) {
        (Some(w), _) if names.iter().any(|n| n == w) => w.to_owned(),
        (Some(w), _) => return Err(error(path, None, format!("no bond '{w}' under bonds:"))),
        (None, [one]) => one.clone(),
        (None, _) => return Err(error(path, None, "several bonds: name one with --bond")),
    };
    let bond = &bonds[name.as_str()];
    let mut out = Imported {
        bond: name.clone(),
        ..Imported::default()
    };
    for (k, v) in bond.as_hash().into_iter().flatten() {
        let Some(k) = k.as_str() else { continue };
        match k {
            "interfaces" => {
                for m in v.as_vec().into_iter().flatten() {
                    if let Some(m) = m.as_str() {
                        out.add_member(m);
                    }
                }
            }
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
                        "mode" => "mode",
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
                    } else {
                        text
                    };
                    take_option(&mut out, key, &text, &origin);
                }
            }
            other => out.drop_setting(format!(
                "bonds.{name}.{other}: {}",
                address_reason(other).unwrap_or("not a bond setting lagd knows")
            )),
        }
    }
    Ok(out)
}
