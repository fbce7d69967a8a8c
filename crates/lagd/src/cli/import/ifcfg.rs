//! ifcfg files (`BONDING_OPTS`, members by `MASTER=`).

use super::common::*;

/// `(line, KEY, value)` of an ifcfg file.
type Vars = Vec<(usize, String, String)>;

/// `KEY=value` lines of an ifcfg file (shell quoting), with their line numbers.
fn shell_vars(text: &str) -> Vars {
    let mut v = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((k, val)) = line.split_once('=') else {
            continue;
        };
        let val = val.trim();
        let val = if val.len() >= 2
            && ((val.starts_with('"') && val.ends_with('"'))
                || (val.starts_with('\'') && val.ends_with('\'')))
        {
            &val[1..val.len() - 1]
        } else {
            val.split(" #").next().unwrap_or(val).trim()
        };
        v.push((i + 1, k.trim().to_owned(), val.to_owned()));
    }
    v
}

pub(super) fn import_ifcfg(
    files: &[(PathBuf, String)],
    want: Option<&str>,
) -> Result<Imported, ImportError> {
    let parsed: Vec<(&PathBuf, Vars)> = files.iter().map(|(p, t)| (p, shell_vars(t))).collect();
    let get = |vars: &[(usize, String, String)], key: &str| {
        vars.iter()
            .find(|(_, k, _)| k == key)
            .map(|(_, _, v)| v.clone())
    };
    let bonds: Vec<_> = parsed
        .iter()
        .filter(|(_, v)| {
            v.iter()
                .any(|(_, k, _)| k == "BONDING_OPTS" || k == "BONDING_MODULE_OPTS")
                || get(v, "TYPE").is_some_and(|t| t.eq_ignore_ascii_case("bond"))
        })
        .filter(|(_, v)| want.is_none_or(|w| get(v, "DEVICE").as_deref() == Some(w)))
        .collect();
    let (path, vars) = match bonds.as_slice() {
        [one] => one,
        [] => {
            let teams: Vec<_> = parsed
                .iter()
                .filter(|(_, v)| {
                    get(v, "DEVICETYPE").is_some_and(|t| t.eq_ignore_ascii_case("team"))
                })
                .filter(|(_, v)| want.is_none_or(|w| get(v, "DEVICE").as_deref() == Some(w)))
                .collect();
            return match teams.as_slice() {
                [(path, vars)] => import_ifcfg_team(path, vars, &parsed),
                [] => Err(error(
                    &files[0].0,
                    None,
                    "no bond in these files (no file with BONDING_OPTS, BONDING_MODULE_OPTS, \
                     TYPE=Bond or DEVICETYPE=Team)",
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
        bond: get(vars, "DEVICE").ok_or_else(|| error(path, None, "DEVICE is missing"))?,
        ..Imported::default()
    };
    for (line, k, v) in vars.iter() {
        match k.as_str() {
            "DEVICE" | "TYPE" | "BONDING_MASTER" => {}
            // SUSE's ifcfg: members are listed in the bond's file.
            k if k.starts_with("BONDING_SLAVE") => out.add_member(v),
            "BONDING_OPTS" | "BONDING_MODULE_OPTS" => {
                for opt in v.split_whitespace() {
                    let Some((ok, ov)) = opt.split_once('=') else {
                        return Err(error(
                            path,
                            Some(*line),
                            format!("{k}: '{opt}' is not key=value"),
                        ));
                    };
                    take_option(&mut out, ok, ov, &format!("{k} {ok}={ov}"));
                }
            }
            "MTU" => {
                out.mtu =
                    Some(v.parse().map_err(|_| {
                        error(path, Some(*line), format!("MTU: '{v}' is not a number"))
                    })?)
            }
            "MACADDR" => out.mac = Some(v.clone()),
            "HWADDR" => out.drop_system(format!(
                "HWADDR={v}: binds the profile to the device with this permanent MAC; lagd's bond \
                 is its own interface (MACADDR sets its MAC)"
            )),
            other => out.drop_unknown(format_args!("{other}={v}"), other),
        }
    }
    // Red Hat's ifcfg files are NetworkManager's (its ifcfg-rh plugin) unless NM_CONTROLLED=no;
    // SUSE's (BONDING_MODULE_OPTS) are wicked's, which leaves the kernel's defaults.
    let suse = vars.iter().any(|(_, k, _)| k == "BONDING_MODULE_OPTS");
    let nm = get(vars, "NM_CONTROLLED").is_none_or(|v| yes_no(&v) != Some("0"));
    if nm && !suse {
        out.networkmanager_defaults("the ifcfg file (read by NetworkManager)");
    }
    for (_, vars) in &parsed {
        if get(vars, "MASTER").as_deref() == Some(out.bond.as_str()) {
            if let Some(d) = get(vars, "DEVICE") {
                out.add_member(&d);
            }
        }
    }
    Ok(out)
}

/// An ifcfg team (`DEVICETYPE=Team`): `TEAM_CONFIG` is teamd's JSON; the ports are the files
/// with `TEAM_MASTER=` naming it, each with its `TEAM_PORT_CONFIG`.
fn import_ifcfg_team(
    path: &Path,
    vars: &Vars,
    parsed: &[(&PathBuf, Vars)],
) -> Result<Imported, ImportError> {
    use serde_json::{Map, Value};
    let get = |vars: &Vars, key: &str| {
        vars.iter()
            .find(|(_, k, _)| k == key)
            .map(|(_, _, v)| v.clone())
    };
    let name = get(vars, "DEVICE").ok_or_else(|| error(path, None, "DEVICE is missing"))?;
    let mut doc = match get(vars, "TEAM_CONFIG") {
        Some(c) => serde_json::from_str(&c)
            .map_err(|e| error(path, None, format!("TEAM_CONFIG is not JSON: {e}")))?,
        None => Value::Object(Map::new()),
    };
    let Some(obj) = doc.as_object_mut() else {
        return Err(error(path, None, "TEAM_CONFIG is not a JSON object"));
    };
    obj.insert("device".into(), Value::String(name.clone()));
    if !obj.contains_key("runner") {
        obj.insert("runner".into(), serde_json::json!({ "name": "roundrobin" }));
    }
    let mut ports = Map::new();
    for (p, v) in parsed {
        if get(v, "TEAM_MASTER").as_deref() != Some(name.as_str()) {
            continue;
        }
        let Some(dev) = get(v, "DEVICE") else {
            continue;
        };
        let config = match get(v, "TEAM_PORT_CONFIG") {
            Some(c) => serde_json::from_str(&c)
                .map_err(|e| error(p, None, format!("TEAM_PORT_CONFIG is not JSON: {e}")))?,
            None => Value::Object(Map::new()),
        };
        ports.insert(dev, config);
    }
    if !ports.is_empty() {
        obj.insert("ports".into(), Value::Object(ports));
    }
    let mut out = super::teamd::import_team_config(path, doc)?;
    for (line, k, v) in vars {
        match k.as_str() {
            "DEVICE" | "DEVICETYPE" | "TEAM_CONFIG" => {}
            "MTU" => {
                out.mtu =
                    Some(v.parse().map_err(|_| {
                        error(path, Some(*line), format!("MTU: '{v}' is not a number"))
                    })?)
            }
            "MACADDR" => out.mac = Some(v.clone()),
            other => out.drop_unknown(format_args!("{other}={v}"), other),
        }
    }
    Ok(out)
}
