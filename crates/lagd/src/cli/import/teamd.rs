//! teamd JSON: runners mapped to bonding modes as libteam's team2bond does.

use super::common::*;

/// teamd's default `runner.tx_hash`.
const DEFAULT_TX_HASH: [&str; 3] = ["eth", "ipv4", "ipv6"];

/// The kernel hash policy nearest to teamd's `tx_hash` fields, and whether it hashes exactly
/// those fields.
fn hash_policy(parts: &[&str]) -> (&'static str, bool) {
    let has = |names: &[&str]| parts.iter().any(|p| names.contains(p));
    let eth = has(&["eth"]);
    let l3_full = has(&["l3", "ip"]) || (has(&["ipv4"]) && has(&["ipv6"]));
    let l3 = has(&["l3", "ip", "ipv4", "ipv6"]);
    let l4_full = has(&["l4"]) || (has(&["tcp"]) && has(&["udp"]) && has(&["sctp"]));
    let l4 = has(&["l4", "tcp", "udp", "sctp"]);
    let known = [
        "eth", "l3", "ip", "ipv4", "ipv6", "l4", "tcp", "udp", "sctp",
    ];
    let extras = parts.iter().any(|p| !known.contains(p));
    if l4 {
        ("layer3+4", !eth && l3_full && l4_full && !extras)
    } else if l3 {
        ("layer2+3", eth && l3_full && !extras)
    } else {
        ("layer2", eth && !extras)
    }
}

pub(super) fn import_teamd(files: &[(PathBuf, String)]) -> Result<Imported, ImportError> {
    let (path, text) = &files[0];
    let doc: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| error(path, Some(e.line()), format!("not JSON: {e}")))?;
    import_team_config(path, doc)
}

/// A team device's configuration as teamd reads it (from a JSON file, or from a
/// NetworkManager or ifcfg team profile, which carry the same JSON).
pub(super) fn import_team_config(
    path: &Path,
    doc: serde_json::Value,
) -> Result<Imported, ImportError> {
    use serde_json::Value;
    if !doc.is_object() || (doc.get("device").is_none() && doc.get("runner").is_none()) {
        return Err(error(
            path,
            None,
            "JSON, but not a teamd configuration (no \"device\" or \"runner\"): no bond here",
        ));
    }
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
    // The runner: an object with its name, or (the old format) just the name.
    let runner = &doc["runner"];
    let rname = match runner {
        Value::String(name) => {
            out.note(format!(
                "\"runner\": \"{name}\" (the old format, the runner's name alone) read as \
                 {{\"name\": \"{name}\"}}"
            ));
            name.as_str()
        }
        Value::Null => {
            out.note("no runner: teamd's default, roundrobin");
            "roundrobin"
        }
        r => r["name"].as_str().unwrap_or("roundrobin"),
    };
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
                format!("runner.name '{other}' has no bonding mode: nothing is imported"),
            ));
        }
    };
    out.options.insert(0, ("mode".into(), mode.into()));
    let hashes = matches!(mode, "balance-xor" | "802.3ad");
    if hashes && runner.get("tx_hash").is_none() {
        // teamd hashes MACs and IP addresses by default: the kernel's layer2+3, not the
        // kernel's (and lagd's) default layer2.
        out.set("xmit_hash_policy", "layer2+3");
        out.note(format!(
            "xmit_hash_policy=layer2+3: teamd's default runner.tx_hash {DEFAULT_TX_HASH:?}"
        ));
    }
    if mode == "802.3ad" && runner.get("agg_select_policy").is_none() {
        out.set("ad_select", "stable");
        out.drop_setting(
            "runner.agg_select_policy (teamd's default lacp_prio): the kernel has no \
             LACP-priority aggregator choice; ad_select=stable (the same choice while all \
             members face one partner)",
        );
    }
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
                let (policy, exact) = hash_policy(&parts);
                out.set("xmit_hash_policy", policy);
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
            "sys_prio" => take_option(&mut out, "ad_actor_sys_prio", &v.to_string(), &origin),
            "min_ports" => take_option(&mut out, "min_links", &v.to_string(), &origin),
            "agg_select_policy" => match v.as_str() {
                Some("bandwidth") => out.set("ad_select", "bandwidth"),
                Some("count") => out.set("ad_select", "count"),
                Some(p @ ("lacp_prio" | "lacp_prio_stable")) => {
                    out.set("ad_select", "stable");
                    out.drop_setting(format!(
                        "runner.agg_select_policy={p}: the kernel has no LACP-priority aggregator choice \
                         (its ad_select=actor_port_prio, Linux 6.18, prefers the larger sum of the \
                         members' priorities, where teamd orders them as LACP does, lower first); \
                         ad_select=stable"
                    ));
                }
                _ => out.drop_setting(format!(
                    "runner.agg_select_policy={v}: no ad_select counterpart"
                )),
            },
            "hwaddr_policy" => match v.as_str() {
                Some("same_all") => out.set("fail_over_mac", "none"),
                Some("by_active") => out.set("fail_over_mac", "active"),
                Some("only_active") => out.set("fail_over_mac", "follow"),
                _ => out.drop_setting(format!(
                    "runner.hwaddr_policy={v}: no fail_over_mac counterpart"
                )),
            },
            "tx_balancer" => {
                // teamd's basic balancer moves hash buckets by load: lagd's buckets.
                out.set("distribution", "buckets");
                let tenths = v["balancing_interval"].as_u64().unwrap_or(50);
                out.set("rebalance_interval", (tenths * 100).to_string());
            }
            other => out.drop_setting(format!("runner.{other}={v}: not a bond setting lagd knows")),
        }
    }
    if has_balancer && !hashes {
        out.options
            .retain(|(k, _)| k != "distribution" && k != "rebalance_interval");
    }
    for (k, count_key) in [
        ("notify_peers", "num_grat_arp"),
        ("mcast_rejoin", "resend_igmp"),
    ] {
        for (field, v) in doc[k].as_object().into_iter().flatten() {
            let origin = format!("{k}.{field}");
            match (k, field.as_str()) {
                (_, "count") => take_option(&mut out, count_key, &v.to_string(), &origin),
                ("notify_peers", "interval") => {
                    take_option(&mut out, "peer_notif_delay", &v.to_string(), &origin)
                }
                _ => out.drop_setting(format!("{origin}={v}: no bonding counterpart")),
            }
        }
    }
    link_watches(&doc["link_watch"], &mut out);
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
                    "ports.{name}.{other}={v}: no per-member counterpart in lagd"
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
            if matches!(k.as_str(), "debug_level" | "daemonize" | "team_name") {
                out.drop_system(format!(
                    "{k}: bookkeeping of the tool that owned the bond; lagd starts from its unit"
                ));
            } else {
                out.drop_setting(format!("{k}: not a bond setting lagd knows"));
            }
        }
    }
    Ok(out)
}

/// One ARP (`arp_ping`) or IPv6 neighbour (`nsna_ping`) watcher's timing and validation.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Probe {
    interval: u64,
    missed_max: u64,
    validate: Option<&'static str>,
}

/// teamd's link watchers (one object, a list, or the old format's bare name) as the bond's
/// monitor. teamd counts a port up when any of its watchers says so: beside `ethtool` (up
/// whenever the carrier is), ARP and NS/NA watchers never take a port down, so carrier
/// monitoring (miimon) is the whole behaviour; probes alone become ARP monitoring with every
/// watcher's target (any target answering keeps the member up, as `arp_all_targets=any`).
fn link_watches(value: &serde_json::Value, out: &mut Imported) {
    use serde_json::Value;
    let watches: Vec<Value> = match value {
        Value::Array(a) => a.clone(),
        Value::Null => Vec::new(),
        Value::String(name) => vec![serde_json::json!({ "name": name })],
        one => vec![one.clone()],
    };
    let name = |w: &Value| w["name"].as_str().unwrap_or("").to_owned();
    if watches.is_empty() {
        // teamd's default watcher: ethtool.
        out.set("miimon", "100");
        return;
    }
    for w in &watches {
        if !matches!(name(w).as_str(), "ethtool" | "arp_ping" | "nsna_ping") {
            out.drop_setting(format!(
                "link_watch {w}: lagd monitors links by carrier (miimon), ARP or IPv6 neighbour \
                 probes only"
            ));
        }
    }
    let ethtool: Vec<&Value> = watches.iter().filter(|w| name(w) == "ethtool").collect();
    let probes: Vec<&Value> = watches
        .iter()
        .filter(|w| matches!(name(w).as_str(), "arp_ping" | "nsna_ping"))
        .collect();
    if let Some(first) = ethtool.first() {
        out.set("miimon", "100");
        for (field, key) in [("delay_up", "updelay"), ("delay_down", "downdelay")] {
            let v = ethtool.iter().filter_map(|w| w[field].as_u64()).max();
            if let Some(d) = v {
                out.set(key, d.to_string());
            }
        }
        for (k, v) in first.as_object().into_iter().flatten() {
            if !matches!(k.as_str(), "name" | "delay_up" | "delay_down") {
                out.drop_setting(format!(
                    "link_watch ethtool {k}={v}: no bonding counterpart"
                ));
            }
        }
        for p in &probes {
            out.note(format!(
                "link_watch {} beside ethtool: teamd counts a port up when any watcher says so, \
                 and ethtool does whenever the carrier is up, so the probes never took a port \
                 down; carrier monitoring (miimon) alone keeps that behaviour",
                name(p)
            ));
        }
        return;
    }
    let mut arp_targets = Vec::new();
    let mut ns_targets = Vec::new();
    let mut timing: Option<Probe> = None;
    for w in &probes {
        let kind = name(w);
        let origin = format!("link_watch {kind}");
        // teamd's defaults: missed_max 3 (the kernel's arp_missed_max is 2).
        let probe = Probe {
            interval: w["interval"].as_u64().unwrap_or(1000),
            missed_max: w["missed_max"].as_u64().unwrap_or(3),
            validate: match (
                w["validate_active"].as_bool().unwrap_or(false),
                w["validate_inactive"].as_bool().unwrap_or(false),
            ) {
                (true, true) => Some("all"),
                (true, false) => Some("active"),
                (false, true) => Some("backup"),
                (false, false) => None,
            },
        };
        match &timing {
            None => timing = Some(probe),
            Some(t) if *t == probe => {}
            Some(t) => out.drop_setting(format!(
                "{origin}: interval {} ms, missed_max {}, validation {:?} differ from the first \
                 watcher's ({} ms, {}, {:?}); the bond has one ARP monitor, which keeps the first's",
                probe.interval,
                probe.missed_max,
                probe.validate,
                t.interval,
                t.missed_max,
                t.validate
            )),
        }
        for (k, v) in w.as_object().into_iter().flatten() {
            match (k.as_str(), v) {
                (
                    "name" | "interval" | "missed_max" | "validate_active" | "validate_inactive",
                    _,
                ) => {}
                ("target_host", Value::String(t)) if kind == "arp_ping" => {
                    arp_targets.push(t.clone())
                }
                ("target_host", Value::String(t)) => ns_targets.push(t.clone()),
                ("init_wait", v) if v.as_u64() == Some(0) => {}
                ("send_always", Value::Bool(false)) => {}
                ("source_host", Value::String(h)) if h == "0.0.0.0" => {}
                ("source_host", _) => out.drop_setting(format!(
                    "{origin} source_host={v}: the bond's probes carry its own address as \
                     sender, as the kernel's do"
                )),
                _ => out.drop_setting(format!("{origin} {k}={v}: no bonding counterpart")),
            }
        }
    }
    let Some(t) = timing else { return };
    out.set("arp_interval", t.interval.to_string());
    if !arp_targets.is_empty() {
        take_option(
            out,
            "arp_ip_target",
            &arp_targets.join(","),
            "link_watch arp_ping target_host",
        );
    }
    if !ns_targets.is_empty() {
        take_option(
            out,
            "ns_ip6_target",
            &ns_targets.join(","),
            "link_watch nsna_ping target_host",
        );
    }
    if out.get("arp_ip_target").is_none() && out.get("ns_ip6_target").is_none() {
        out.options.retain(|(k, _)| k != "arp_interval");
        out.drop_setting(
            "link_watch: the probe watchers have no usable target_host, so the bond has no \
             link monitor",
        );
        return;
    }
    take_option(
        out,
        "arp_missed_max",
        &t.missed_max.to_string(),
        "link_watch missed_max",
    );
    if let Some(v) = t.validate {
        out.set("arp_validate", v);
    }
}
