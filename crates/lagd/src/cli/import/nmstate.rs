//! nmstate YAML (`link-aggregation`).

use super::common::*;

/// The network states in one YAML document: nmstate's own (`interfaces:`), a Kubernetes
/// NodeNetworkConfigurationPolicy's `spec.desiredState`, a NodeNetworkState's
/// `status.currentState`, or those of a `kind: List`'s items. Each with where it came from.
fn states(doc: &Yaml, into: &mut Vec<(String, Yaml)>, unsupported: &mut Vec<String>) {
    match doc["kind"].as_str() {
        Some("NodeNetworkConfigurationPolicy") => {
            let name = doc["metadata"]["name"].as_str().unwrap_or("?");
            into.push((
                format!("NodeNetworkConfigurationPolicy {name}"),
                doc["spec"]["desiredState"].clone(),
            ));
        }
        Some("NodeNetworkState") => {
            let name = doc["metadata"]["name"].as_str().unwrap_or("?");
            into.push((
                format!("NodeNetworkState {name}"),
                doc["status"]["currentState"].clone(),
            ));
        }
        Some("List") => {
            for item in doc["items"].as_vec().into_iter().flatten() {
                states(item, into, unsupported);
            }
        }
        Some(other) => unsupported.push(other.to_owned()),
        None => into.push(("nmstate".to_owned(), doc.clone())),
    }
}

pub(super) fn import_nmstate(
    files: &[(PathBuf, String)],
    want: Option<&str>,
) -> Result<Imported, ImportError> {
    let mut found = Vec::new();
    let mut other_kinds = Vec::new();
    for (path, text) in files {
        let docs = YamlLoader::load_from_str(text).map_err(|e| {
            error(
                path,
                Some(e.marker().line()),
                format!("not YAML: {}", e.info()),
            )
        })?;
        for doc in &docs {
            let mut here = Vec::new();
            states(doc, &mut here, &mut other_kinds);
            found.extend(here.into_iter().map(|(w, s)| (path, w, s)));
        }
    }
    let first = &files[0].0;
    if found
        .iter()
        .all(|(_, _, s)| s["interfaces"].as_vec().is_none())
    {
        return Err(error(
            first,
            None,
            if !other_kinds.is_empty() {
                format!(
                    "Kubernetes {}: no network state here (lagctl import reads nmstate's YAML, a \
                     NodeNetworkConfigurationPolicy's spec.desiredState or a NodeNetworkState)",
                    other_kinds.join(", ")
                )
            } else {
                "no interfaces: list here (nmstate's YAML, or a Kubernetes \
                 NodeNetworkConfigurationPolicy with spec.desiredState.interfaces)"
                    .to_owned()
            },
        ));
    }
    let bonds: Vec<(&PathBuf, &str, &Yaml)> = found
        .iter()
        .flat_map(|(p, w, s)| {
            s["interfaces"]
                .as_vec()
                .into_iter()
                .flatten()
                .map(move |i| (*p, w.as_str(), i))
        })
        .filter(|(_, _, i)| i["type"].as_str() == Some("bond"))
        .filter(|(_, _, i)| want.is_none_or(|w| i["name"].as_str() == Some(w)))
        .collect();
    let (path, bond) = match bonds.as_slice() {
        [(p, _, one)] => (*p, *one),
        [] => {
            return Err(error(
                first,
                None,
                "no bond in these files (no interface of type: bond)",
            ));
        }
        _ => {
            let from: Vec<String> = bonds
                .iter()
                .map(|(_, w, i)| format!("{} in {w}", i["name"].as_str().unwrap_or("?")))
                .collect();
            return Err(error(
                first,
                None,
                format!(
                    "several bonds ({}): name one with --bond, or give one policy's file",
                    from.join(", ")
                ),
            ));
        }
    };
    if bond["state"].as_str() == Some("absent") {
        return Err(error(
            path,
            None,
            "the bond is state: absent (this state removes it): nothing to import",
        ));
    }
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
                        "port" | "ports" | "slaves" => {
                            for m in lv.as_vec().into_iter().flatten() {
                                if let Some(m) = m.as_str() {
                                    out.add_member(m);
                                }
                            }
                        }
                        "ports-config" => {
                            // Each port's `priority` is the bond port's prio (NetworkManager's
                            // [bond-port] prio, the kernel's per-slave prio), not the LACP
                            // actor_port_prio; `queue-id` has no counterpart in lagd.
                            let mut prios = Vec::new();
                            for pc in lv.as_vec().into_iter().flatten() {
                                let Some(port) = pc["name"].as_str() else {
                                    out.drop_setting(
                                        "link-aggregation.ports-config: an entry without a name",
                                    );
                                    continue;
                                };
                                out.add_member(port);
                                for (pk, pv) in pc.as_hash().into_iter().flatten() {
                                    match pk.as_str() {
                                        Some("name") => {}
                                        Some("priority") => match yaml_text(pv) {
                                            Some(p) => prios.push(format!("{port}:{p}")),
                                            None => out.drop_setting(format!(
                                                "link-aggregation.ports-config {port} \
                                                 priority: value not understood"
                                            )),
                                        },
                                        Some("queue-id") => out.drop_setting(format!(
                                            "link-aggregation.ports-config {port} queue-id: \
                                             lagd has no per-member transmit queue id"
                                        )),
                                        other => out.drop_setting(format!(
                                            "link-aggregation.ports-config {port} {}: not a \
                                             bond port setting lagd knows",
                                            other.unwrap_or("?")
                                        )),
                                    }
                                }
                            }
                            if !prios.is_empty() {
                                take_option(
                                    &mut out,
                                    "prio",
                                    &prios.join(","),
                                    "link-aggregation.ports-config priority",
                                );
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
                                // Booleans may come as strings ("true", "yes"); the kernel's
                                // all_slaves_active also as dropped/delivered.
                                let text = text.map(|t| {
                                    let boolean = if ok == "all_slaves_active" {
                                        match t.as_str() {
                                            "delivered" => Some("1"),
                                            "dropped" => Some("0"),
                                            other => yes_no(other),
                                        }
                                    } else if BondOptions::takes_boolean(ok) {
                                        yes_no(&t)
                                    } else {
                                        None
                                    };
                                    boolean.map_or(t, str::to_owned)
                                });
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
            other => out.drop_unknown(format_args!("{name}.{other}"), other),
        }
    }
    // nmstate applies the bond through NetworkManager.
    out.networkmanager_defaults("the nmstate bond (applied by NetworkManager)");
    Ok(out)
}
