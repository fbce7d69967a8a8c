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
        [] => return Err(error(&files[0].0, None, "no keyfile with type=bond")),
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
            ("ethernet" | "802-3-ethernet", "cloned-mac-address") => out.mac = Some(v.clone()),
            ("ipv4" | "ipv6" | "proxy", key) => out.drop_setting(format!(
                "[{section}] {key}: addresses, routes and DNS are set on the bond interface by the system, not by lagd"
            )),
            (_, key) => out.drop_setting(format!(
                "[{section}] {key}={v}: {}",
                address_reason(key).unwrap_or("not a bond setting lagd knows")
            )),
        }
    }
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
