//! teamd JSON: runners mapped to bonding modes as libteam's team2bond does.

use super::*;

pub(super) fn import_teamd(files: &[(PathBuf, String)]) -> Result<Imported, ImportError> {
    use serde_json::Value;
    let (path, text) = &files[0];
    let doc: Value = serde_json::from_str(text)
        .map_err(|e| error(path, Some(e.line()), format!("not JSON: {e}")))?;
    let mut out = Imported {
        bond: doc["device"]
            .as_str()
            .ok_or_else(|| error(path, None, "\"device\" is missing"))?
            .to_owned(),
        ..Imported::default()
    };
    if let Some(h) = doc["hwaddr"].as_str() {
        out.mac = Some(h.to_owned());
    }
    let runner = &doc["runner"];
    let rname = runner["name"].as_str().unwrap_or("roundrobin");
    let has_balancer = runner.get("tx_balancer").is_some();
    let mode = match rname {
        "roundrobin" => "balance-rr",
        "random" => {
            out.set("packets_per_slave", "0");
            "balance-rr"
        }
        "activebackup" => "active-backup",
        "loadbalance" => "balance-xor",
        "broadcast" => "broadcast",
        "lacp" => "802.3ad",
        other => {
            return Err(error(
                path,
                None,
                format!("runner.name '{other}' has no bonding mode"),
            ));
        }
    };
    out.options.insert(0, ("mode".into(), mode.into()));
    for (k, v) in runner.as_object().into_iter().flatten() {
        let origin = format!("runner.{k}");
        match k.as_str() {
            "name" => {}
            "tx_hash" => {
                let parts: Vec<&str> = v
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                let l4 = parts
                    .iter()
                    .any(|p| matches!(*p, "l4" | "tcp" | "udp" | "sctp"));
                let l3 = parts
                    .iter()
                    .any(|p| matches!(*p, "l3" | "ip" | "ipv4" | "ipv6"));
                let policy = if l4 {
                    "layer3+4"
                } else if l3 {
                    "layer2+3"
                } else {
                    "layer2"
                };
                out.set("xmit_hash_policy", policy);
                let exact = match policy {
                    "layer3+4" => parts.iter().all(|p| {
                        matches!(
                            *p,
                            "l3" | "l4" | "ipv4" | "ipv6" | "ip" | "tcp" | "udp" | "sctp"
                        )
                    }),
                    "layer2+3" => parts
                        .iter()
                        .all(|p| matches!(*p, "eth" | "l3" | "ipv4" | "ipv6" | "ip")),
                    _ => parts.iter().all(|p| *p == "eth"),
                };
                if !exact {
                    out.drop_setting(format!(
                        "runner.tx_hash {parts:?}: hashed as xmit_hash_policy={policy}, the nearest kernel policy"
                    ));
                }
            }
            "fast_rate" => {
                let fast = v.as_bool().unwrap_or_else(|| v.as_i64() == Some(1));
                out.set("lacp_rate", if fast { "fast" } else { "slow" });
            }
            "active" => {
                let a = v.as_bool().unwrap_or(true);
                out.set("lacp_active", if a { "1" } else { "0" });
            }
            "min_ports" => take_option(&mut out, "min_links", &v.to_string(), &origin),
            "agg_select_policy" => match v.as_str() {
                Some("bandwidth") => out.set("ad_select", "bandwidth"),
                Some("count") => out.set("ad_select", "count"),
                Some(p @ ("lacp_prio" | "lacp_prio_stable")) => {
                    out.set("ad_select", "stable");
                    out.drop_setting(format!(
                        "runner.agg_select_policy={p}: the kernel has no LACP-priority aggregator choice; ad_select=stable"
                    ));
                }
                other => out.drop_setting(format!(
                    "runner.agg_select_policy={other:?}: no ad_select counterpart"
                )),
            },
            "hwaddr_policy" => match v.as_str() {
                Some("same_all") => out.set("fail_over_mac", "none"),
                Some("by_active") => out.set("fail_over_mac", "active"),
                Some("only_active") => out.set("fail_over_mac", "follow"),
                other => out.drop_setting(format!(
                    "runner.hwaddr_policy={other:?}: no fail_over_mac counterpart"
                )),
            },
            "tx_balancer" => {
                // teamd's basic balancer moves hash buckets by load: lagd's buckets.
                out.set("distribution", "buckets");
                let tenths = v["balancing_interval"].as_u64().unwrap_or(50);
                out.set("rebalance_interval", (tenths * 100).to_string());
            }
            other => out.drop_setting(format!("runner.{other}: not a bond setting lagd knows")),
        }
    }
    if has_balancer && mode != "balance-xor" && mode != "802.3ad" {
        out.options.retain(|(k, _)| k != "distribution");
    }
    for (k, key) in [
        ("notify_peers", "num_grat_arp"),
        ("mcast_rejoin", "resend_igmp"),
    ] {
        if let Some(c) = doc[k]["count"].as_u64() {
            take_option(&mut out, key, &c.to_string(), &format!("{k}.count"));
        }
    }
    // link_watch: one watcher, or a list of them.
    let watches: Vec<&Value> = match &doc["link_watch"] {
        Value::Array(a) => a.iter().collect(),
        Value::Null => Vec::new(),
        one => vec![one],
    };
    if watches.is_empty() {
        // teamd watches link state with ethtool by default: miimon.
        out.set("miimon", "100");
    }
    for w in watches {
        match w["name"].as_str() {
            Some("ethtool") => {
                out.set("miimon", "100");
                if let Some(d) = w["delay_up"].as_u64() {
                    out.set("updelay", d.to_string());
                }
                if let Some(d) = w["delay_down"].as_u64() {
                    out.set("downdelay", d.to_string());
                }
            }
            Some("arp_ping") => {
                let interval = w["interval"].as_u64().unwrap_or(1000);
                out.set("arp_interval", interval.to_string());
                if let Some(t) = w["target_host"].as_str() {
                    let mut targets: Vec<String> = out
                        .options
                        .iter()
                        .find(|(k, _)| k == "arp_ip_target")
                        .map(|(_, v)| v.split(',').map(str::to_owned).collect())
                        .unwrap_or_default();
                    targets.push(t.to_owned());
                    take_option(
                        &mut out,
                        "arp_ip_target",
                        &targets.join(","),
                        "link_watch.target_host",
                    );
                }
                if let Some(m) = w["missed_max"].as_u64() {
                    take_option(
                        &mut out,
                        "arp_missed_max",
                        &m.to_string(),
                        "link_watch.missed_max",
                    );
                }
                let active = w["validate_active"].as_bool().unwrap_or(false);
                let inactive = w["validate_inactive"].as_bool().unwrap_or(false);
                let validate = match (active, inactive) {
                    (true, true) => Some("all"),
                    (true, false) => Some("active"),
                    (false, true) => Some("backup"),
                    (false, false) => None,
                };
                if let Some(v) = validate {
                    out.set("arp_validate", v);
                }
            }
            other => out.drop_setting(format!(
                "link_watch {other:?}: lagd monitors links by carrier (miimon) or ARP only"
            )),
        }
    }
    // Ports: members; in activebackup the highest prio is the primary; lacp_prio carries.
    let mut best: Option<(i64, String)> = None;
    let mut prios = Vec::new();
    let mut sticky_any = false;
    for (name, cfg) in doc["ports"].as_object().into_iter().flatten() {
        out.add_member(name);
        for (k, v) in cfg.as_object().into_iter().flatten() {
            match k.as_str() {
                "prio" => {
                    let p = v.as_i64().unwrap_or(0);
                    if best.as_ref().is_none_or(|(b, _)| p > *b) {
                        best = Some((p, name.clone()));
                    }
                }
                "sticky" => sticky_any |= v.as_bool().unwrap_or(false),
                "lacp_prio" => prios.push(format!("{name}:{v}")),
                other => out.drop_setting(format!(
                    "ports.{name}.{other}: no per-member counterpart in lagd"
                )),
            }
        }
    }
    if mode == "active-backup" {
        let all_prios: Vec<i64> = doc["ports"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(_, c)| c["prio"].as_i64().unwrap_or(0))
            .collect();
        if let Some((_, name)) = best.filter(|_| all_prios.iter().any(|p| *p != all_prios[0])) {
            out.set("primary", name);
        }
        if sticky_any {
            out.set("primary_reselect", "failure");
        }
    }
    if !prios.is_empty() {
        take_option(
            &mut out,
            "actor_port_prio",
            &prios.join(","),
            "ports.*.lacp_prio",
        );
    }
    for (k, _) in doc.as_object().into_iter().flatten() {
        if !matches!(
            k.as_str(),
            "device"
                | "hwaddr"
                | "runner"
                | "link_watch"
                | "ports"
                | "notify_peers"
                | "mcast_rejoin"
        ) {
            out.drop_setting(format!("{k}: not a bond setting lagd knows"));
        }
    }
    Ok(out)
}
