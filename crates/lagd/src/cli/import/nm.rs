//! NetworkManager keyfiles (`[bond]`, members by `master=`/`controller=`).

use super::common::*;

pub(super) fn import_nm(
    files: &[(PathBuf, String)],
    want: Option<&str>,
) -> Result<Imported, ImportError> {
    let mut parsed = Vec::new();
    for (p, t) in files {
        parsed.push((p, ini(p, t)?));
    }
    let bonds: Vec<_> = parsed
        .iter()
        .filter(|(_, e)| ini_get(e, "connection", "type") == Some("bond"))
        .filter(|(_, e)| want.is_none_or(|w| ini_get(e, "connection", "interface-name") == Some(w)))
        .collect();
    let (path, entries) = match bonds.as_slice() {
        [one] => one,
        [] => {
            let teams: Vec<_> = parsed
                .iter()
                .filter(|(_, e)| ini_get(e, "connection", "type") == Some("team"))
                .filter(|(_, e)| {
                    want.is_none_or(|w| ini_get(e, "connection", "interface-name") == Some(w))
                })
                .collect();
            return match teams.as_slice() {
                [(path, team)] => import_nm_team(path, team, &parsed),
                [] => Err(error(
                    &files[0].0,
                    None,
                    "no bond in these files (no keyfile with [connection] type=bond or team)",
                )),
                _ => Err(error(
                    &files[0].0,
                    None,
                    "several teams: name one with --bond",
                )),
            };
        }
        _ => {
            return Err(error(
                &files[0].0,
                None,
                "several bonds: name one with --bond",
            ));
        }
    };
    let mut out = Imported {
        bond: ini_get(entries, "connection", "interface-name")
            .ok_or_else(|| error(path, None, "[connection] interface-name is missing"))?
            .to_owned(),
        ..Imported::default()
    };
    // Members name their bond by interface name, connection id or uuid.
    let names: Vec<&str> = ["interface-name", "id", "uuid"]
        .iter()
        .filter_map(|k| ini_get(entries, "connection", k))
        .collect();
    for (line, section, k, v) in entries.iter() {
        match (section.as_str(), k.as_str()) {
            ("connection", "type" | "interface-name" | "id" | "uuid") => {}
            ("bond", key) => take_option(&mut out, key, v, &format!("[bond] {key}={v}")),
            ("ethernet" | "802-3-ethernet", "mtu") => {
                out.mtu = Some(v.parse().map_err(|_| {
                    error(path, Some(*line), format!("mtu: '{v}' is not a number"))
                })?)
            }
            ("ethernet" | "802-3-ethernet", "cloned-mac-address") => match v.as_str() {
                // The bond takes its first member's MAC, as lagd's default does.
                "preserve" | "permanent" => {}
                "random" | "stable" => out.drop_setting(format!(
                    "[{section}] cloned-mac-address={v}: NetworkManager generates this MAC; \
                     give lagd one with mac = \"...\""
                )),
                mac => out.mac = Some(mac.to_owned()),
            },
            (
                "ethernet" | "802-3-ethernet",
                "mac-address" | "mac-address-denylist" | "mac-address-blacklist",
            ) => out.drop_system(format!(
                "[{section}] {k}={v}: which device NetworkManager lets this profile take; \
                 lagd's bond is its own interface"
            )),
            ("ipv4" | "ipv6" | "proxy", key) => out.drop_system(format!(
                "[{section}] {key}: addresses, routes and DNS are set on the bond interface by the system, not by lagd"
            )),
            (_, key) => out.drop_unknown(format_args!("[{section}] {key}={v}"), key),
        }
    }
    out.networkmanager_defaults("the keyfile");
    // Each port's `[bond-port] prio` (NetworkManager 1.44): the kernel's per-slave prio.
    let mut prios = Vec::new();
    for (_, e) in &parsed {
        let master =
            ini_get(e, "connection", "master").or_else(|| ini_get(e, "connection", "controller"));
        let kind = ini_get(e, "connection", "slave-type")
            .or_else(|| ini_get(e, "connection", "port-type"));
        if master.is_some_and(|m| names.contains(&m)) && kind.is_none_or(|k| k == "bond") {
            if let Some(ifname) = ini_get(e, "connection", "interface-name") {
                out.add_member(ifname);
                if let Some(p) = ini_get(e, "bond-port", "prio") {
                    prios.push(format!("{ifname}:{p}"));
                }
            }
        }
    }
    if !prios.is_empty() {
        take_option(&mut out, "prio", &prios.join(","), "[bond-port] prio");
    }
    Ok(out)
}

/// A NetworkManager team profile: its `[team] config` is teamd's JSON (the device and ports
/// come from the profiles: the team's interface-name, the ports that name it as controller,
/// each with its `[team-port] config`).
fn import_nm_team(
    path: &Path,
    team: &Ini,
    parsed: &[(&PathBuf, Ini)],
) -> Result<Imported, ImportError> {
    use serde_json::{Map, Value};
    let name = ini_get(team, "connection", "interface-name")
        .ok_or_else(|| error(path, None, "[connection] interface-name is missing"))?;
    let mut doc = match ini_get(team, "team", "config") {
        Some(c) => serde_json::from_str(c)
            .map_err(|e| error(path, None, format!("[team] config is not JSON: {e}")))?,
        None => Value::Object(Map::new()),
    };
    let Some(obj) = doc.as_object_mut() else {
        return Err(error(path, None, "[team] config is not a JSON object"));
    };
    obj.insert("device".into(), Value::String(name.to_owned()));
    if !obj.contains_key("runner") {
        obj.insert("runner".into(), serde_json::json!({ "name": "roundrobin" }));
    }
    let names: Vec<&str> = ["interface-name", "id", "uuid"]
        .iter()
        .filter_map(|k| ini_get(team, "connection", k))
        .collect();
    let mut ports = Map::new();
    for (p, e) in parsed {
        let master =
            ini_get(e, "connection", "master").or_else(|| ini_get(e, "connection", "controller"));
        let kind = ini_get(e, "connection", "slave-type")
            .or_else(|| ini_get(e, "connection", "port-type"));
        if !master.is_some_and(|m| names.contains(&m)) || kind != Some("team") {
            continue;
        }
        let Some(ifname) = ini_get(e, "connection", "interface-name") else {
            continue;
        };
        let config = match ini_get(e, "team-port", "config") {
            Some(c) => serde_json::from_str(c)
                .map_err(|e| error(p, None, format!("[team-port] config is not JSON: {e}")))?,
            None => Value::Object(Map::new()),
        };
        ports.insert(ifname.to_owned(), config);
    }
    if !ports.is_empty() {
        obj.insert("ports".into(), Value::Object(ports));
    }
    let mut out = super::teamd::import_team_config(path, doc)?;
    for (line, section, k, v) in team {
        match (section.as_str(), k.as_str()) {
            ("connection", "type" | "interface-name" | "id" | "uuid") | ("team", "config") => {}
            ("ethernet" | "802-3-ethernet", "mtu") => {
                out.mtu = Some(v.parse().map_err(|_| {
                    error(path, Some(*line), format!("mtu: '{v}' is not a number"))
                })?)
            }
            ("ethernet" | "802-3-ethernet", "cloned-mac-address")
                if v.parse::<lagd_proto::wire::EthernetAddress>().is_ok() =>
            {
                out.mac = Some(v.clone())
            }
            ("ipv4" | "ipv6" | "proxy", key) => out.drop_system(format!(
                "[{section}] {key}: addresses, routes and DNS are set on the bond interface by the system, not by lagd"
            )),
            (_, key) => out.drop_unknown(format_args!("[{section}] {key}={v}"), key),
        }
    }
    Ok(out)
}
