//! nmstate YAML (`link-aggregation`).

use super::*;

pub(super) fn import_nmstate(
    files: &[(PathBuf, String)],
    want: Option<&str>,
) -> Result<Imported, ImportError> {
    let (path, text) = &files[0];
    let doc = load_yaml(path, text)?;
    let ifaces = doc["interfaces"]
        .as_vec()
        .ok_or_else(|| error(path, None, "no interfaces: list here"))?;
    let bonds: Vec<&Yaml> = ifaces
        .iter()
        .filter(|i| i["type"].as_str() == Some("bond"))
        .filter(|i| want.is_none_or(|w| i["name"].as_str() == Some(w)))
        .collect();
    let bond = match bonds.as_slice() {
        [one] => *one,
        [] => return Err(error(path, None, "no interface of type bond")),
        _ => return Err(error(path, None, "several bonds: name one with --bond")),
    };
    let name = bond["name"]
        .as_str()
        .ok_or_else(|| error(path, None, "the bond has no name"))?;
    let mut out = Imported {
        bond: name.to_owned(),
        ..Imported::default()
    };
    for (k, v) in bond.as_hash().into_iter().flatten() {
        let Some(k) = k.as_str() else { continue };
        match k {
            "name" | "type" | "state" => {}
            "mtu" => {
                out.mtu = v.as_i64().and_then(|m| u32::try_from(m).ok());
                if out.mtu.is_none() {
                    return Err(error(path, None, format!("{name}: mtu is not a number")));
                }
            }
            "mac-address" => out.mac = yaml_text(v),
            "link-aggregation" => {
                for (lk, lv) in v.as_hash().into_iter().flatten() {
                    let Some(lk) = lk.as_str() else { continue };
                    match lk {
                        "mode" => {
                            let m = yaml_text(lv).unwrap_or_default();
                            take_option(&mut out, "mode", &m, "link-aggregation.mode");
                        }
                        "port" | "slaves" => {
                            for m in lv.as_vec().into_iter().flatten() {
                                if let Some(m) = m.as_str() {
                                    out.add_member(m);
                                }
                            }
                        }
                        "options" => {
                            for (ok, ov) in lv.as_hash().into_iter().flatten() {
                                let Some(ok) = ok.as_str() else { continue };
                                let origin = format!("link-aggregation.options.{ok}");
                                let text = match ov {
                                    Yaml::Array(a) => Some(
                                        a.iter()
                                            .filter_map(yaml_text)
                                            .collect::<Vec<_>>()
                                            .join(","),
                                    ),
                                    other => yaml_text(other),
                                };
                                match text {
                                    Some(t) => take_option(&mut out, ok, &t, &origin),
                                    None => {
                                        out.drop_setting(format!("{origin}: value not understood"))
                                    }
                                }
                            }
                        }
                        other => out.drop_setting(format!(
                            "link-aggregation.{other}: not a bond setting lagd knows"
                        )),
                    }
                }
            }
            other => out.drop_setting(format!(
                "{name}.{other}: {}",
                address_reason(other).unwrap_or("not a bond setting lagd knows")
            )),
        }
    }
    Ok(out)
}
