//! ifcfg files (`BONDING_OPTS`, members by `MASTER=`).

use super::*;

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
            v.iter().any(|(_, k, _)| k == "BONDING_OPTS")
                || get(v, "TYPE").is_some_and(|t| t.eq_ignore_ascii_case("bond"))
        })
        .filter(|(_, v)| want.is_none_or(|w| get(v, "DEVICE").as_deref() == Some(w)))
        .collect();
    let (path, vars) = match bonds.as_slice() {
        [one] => one,
        [] => {
            return Err(error(
                &files[0].0,
                None,
                "no bond here (no file with BONDING_OPTS or TYPE=Bond)",
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
        bond: get(vars, "DEVICE").ok_or_else(|| error(path, None, "DEVICE is missing"))?,
        ..Imported::default()
    };
    for (line, k, v) in vars.iter() {
        match k.as_str() {
            "DEVICE" | "TYPE" | "BONDING_MASTER" => {}
            "BONDING_OPTS" => {
                for opt in v.split_whitespace() {
                    let Some((ok, ov)) = opt.split_once('=') else {
                        return Err(error(
                            path,
                            Some(*line),
                            format!("BONDING_OPTS: '{opt}' is not key=value"),
                        ));
                    };
                    take_option(&mut out, ok, ov, &format!("BONDING_OPTS {ok}={ov}"));
                }
            }
            "MTU" => {
                out.mtu =
                    Some(v.parse().map_err(|_| {
                        error(path, Some(*line), format!("MTU: '{v}' is not a number"))
                    })?)
            }
            "MACADDR" => out.mac = Some(v.clone()),
            "HWADDR" => out.drop_setting(format!(
                "HWADDR={v}: names the device by its permanent MAC; lagd names members by interface"
            )),
            other => match address_reason(other) {
                Some(r) => out.drop_setting(format!("{other}: {r}")),
                None => out.drop_setting(format!("{other}={v}: not a bond setting lagd knows")),
            },
        }
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
