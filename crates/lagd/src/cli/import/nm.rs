//! NetworkManager keyfiles (`[bond]`, members by `master=`/`controller=`).

use super::*;

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
            let team = parsed
                .iter()
                .any(|(_, e)| ini_get(e, "connection", "type") == Some("team"));
            return Err(error(
                &files[0].0,
                None,
                if team {
                    "a NetworkManager team connection, not a bond: teams are not supported; give \
                     its [team] config JSON to lagctl import --from teamd"
                } else {
                    "no bond in these files (no keyfile with [connection] type=bond)"
                },
            ));
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
    for (_, e) in &parsed {
        let master =
            ini_get(e, "connection", "master").or_else(|| ini_get(e, "connection", "controller"));
        let kind = ini_get(e, "connection", "slave-type")
            .or_else(|| ini_get(e, "connection", "port-type"));
        if master.is_some_and(|m| names.contains(&m)) && kind.is_none_or(|k| k == "bond") {
            if let Some(ifname) = ini_get(e, "connection", "interface-name") {
                out.add_member(ifname);
            }
        }
    }
    Ok(out)
}
