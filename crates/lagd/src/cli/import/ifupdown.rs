//! Debian's ifupdown and ifupdown2: `/etc/network/interfaces` (Debian, Ubuntu before netplan,
//! Proxmox VE). A bond is an `iface` stanza with `bond-slaves` (or `bond-ports`, `slaves`) and
//! `bond-*` options, or one whose members name it with `bond-master`; `source` and
//! `source-directory` lines bring in more files. Options are the kernel's names with `bond-`
//! before them and `-` for `_` (ifupdown passes `bond_mode` and `bond-mode` alike).

use std::collections::BTreeMap;

use super::common::*;

/// How deep `source` may nest (a file that sources itself stops here).
const MAX_DEPTH: usize = 8;

/// One `iface` stanza (stanzas of the same interface, `inet` and `inet6`, are merged).
#[derive(Debug, Default)]
struct Iface {
    /// Where the first stanza was.
    file: PathBuf,
    /// Options in order: (line, file, key as written, value).
    options: Vec<(usize, PathBuf, String, String)>,
}

impl Iface {
    fn get(&self, key: &str) -> Option<&str> {
        self.options
            .iter()
            .rev()
            .find(|(_, _, k, _)| normal(k) == key)
            .map(|(_, _, _, v)| v.as_str())
    }
}

/// An option's key as ifupdown reads it: lower case, `_` as `-`.
fn normal(key: &str) -> String {
    key.to_ascii_lowercase().replace('_', "-")
}

/// The logical lines of a file: comments dropped, `\` continuations joined; each with its
/// (first) line number.
fn logical_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if pending.is_none() && (line.is_empty() || line.starts_with('#')) {
            continue;
        }
        let (start, mut acc) = pending.take().unwrap_or((i + 1, String::new()));
        match line.strip_suffix('\\') {
            Some(head) => {
                acc.push_str(head);
                acc.push(' ');
                pending = Some((start, acc));
            }
            None => {
                acc.push_str(line);
                out.push((start, acc));
            }
        }
    }
    if let Some(p) = pending {
        out.push(p);
    }
    out
}

/// Whether `name` is one `source-directory` includes: letters, digits, `_` and `-` only.
fn sourced_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The files a `source` pattern names (relative to `base`), sorted; a pattern's `*`, `?` and
/// `[...]` match in the last path component.
fn expand_source(base: &Path, pattern: &str) -> Vec<PathBuf> {
    let path = if Path::new(pattern).is_absolute() {
        PathBuf::from(pattern)
    } else {
        base.join(pattern)
    };
    let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return Vec::new();
    };
    if !is_pattern(&name) {
        return if path.is_file() {
            vec![path]
        } else {
            Vec::new()
        };
    }
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| glob_match(&name, &e.file_name().to_string_lossy()))
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    found
}

/// What the files hold: interfaces by name, in the order first seen, and what was sourced.
#[derive(Default)]
struct Parsed {
    ifaces: BTreeMap<String, Iface>,
    order: Vec<String>,
    /// `source` lines that matched no file.
    unmatched: Vec<String>,
    /// Every file read (canonical paths): each is read once, however often it is sourced.
    read: Vec<PathBuf>,
}

fn parse_file(path: &Path, text: &str, depth: usize, into: &mut Parsed) -> Result<(), ImportError> {
    let base = path
        .parent()
        .unwrap_or_else(|| Path::new("."))
        .to_path_buf();
    let mut current: Option<String> = None;
    for (line, l) in logical_lines(text) {
        let mut words = l.split_whitespace();
        let Some(first) = words.next() else { continue };
        let rest: Vec<&str> = words.collect();
        match first {
            "iface" => {
                let Some(name) = rest.first() else {
                    return Err(error(path, Some(line), "iface without an interface name"));
                };
                let name = (*name).to_owned();
                if !into.ifaces.contains_key(&name) {
                    into.order.push(name.clone());
                    into.ifaces.insert(
                        name.clone(),
                        Iface {
                            file: path.to_path_buf(),
                            options: Vec::new(),
                        },
                    );
                }
                current = Some(name);
            }
            "mapping" => current = None,
            "auto" | "allow-auto" | "allow-hotplug" | "no-auto-down" | "no-scripts" | "rename" => {
                current = None
            }
            w if w.starts_with("allow-") => current = None,
            "source" | "source-directory" | "source-dir" => {
                current = None;
                if depth >= MAX_DEPTH {
                    return Err(error(
                        path,
                        Some(line),
                        format!("{first} nests more than {MAX_DEPTH} files deep (a loop?)"),
                    ));
                }
                for pattern in &rest {
                    let files = if first == "source" {
                        expand_source(&base, pattern)
                    } else {
                        let dir = if Path::new(pattern).is_absolute() {
                            PathBuf::from(pattern)
                        } else {
                            base.join(pattern)
                        };
                        let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
                            .into_iter()
                            .flatten()
                            .flatten()
                            .filter(|e| sourced_name(&e.file_name().to_string_lossy()))
                            .map(|e| e.path())
                            .filter(|p| p.is_file())
                            .collect();
                        v.sort();
                        v
                    };
                    if files.is_empty() {
                        into.unmatched.push(format!("{first} {pattern}"));
                    }
                    for f in files {
                        // Each file once, however often it is sourced (no loops).
                        let canonical = f.canonicalize().unwrap_or_else(|_| f.clone());
                        if into.read.contains(&canonical) {
                            continue;
                        }
                        let text = std::fs::read_to_string(&f).map_err(|e| {
                            error(
                                path,
                                Some(line),
                                format!("{}: cannot read: {e}", f.display()),
                            )
                        })?;
                        into.read.push(canonical);
                        parse_file(&f, &text, depth + 1, into)?;
                    }
                }
            }
            key => match &current {
                Some(name) => {
                    let iface = into.ifaces.get_mut(name).expect("current iface exists");
                    iface
                        .options
                        .push((line, path.to_path_buf(), key.to_owned(), rest.join(" ")));
                }
                None => {
                    return Err(error(
                        path,
                        Some(line),
                        format!("'{key}' is neither a stanza nor inside an iface stanza"),
                    ));
                }
            },
        }
    }
    Ok(())
}

/// Member names from `bond-slaves`' words: names as they are; ifupdown2's `glob` ranges
/// (`swp1-4`, `eth[0-1]`) expanded; patterns resolved on `host`.
fn member_list(
    words: &str,
    host: &[HostLink],
    out: &mut Imported,
    origin: &str,
) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    let mut glob = false;
    for w in words.split_whitespace() {
        match w {
            "none" => {}
            "glob" => glob = true,
            "regex" => {
                return Err(format!(
                    "{origin}: regex members are not resolved; list the members by name"
                ));
            }
            w if glob && !is_pattern(w) => names.extend(expand_range(w)),
            w if is_pattern(w) => {
                let found = resolve_on_host(host, &[Selector::Name(w)]);
                if found.is_empty() {
                    return Err(format!(
                        "{origin}: {w} is a pattern, and no interface of this host matches it: \
                         import on the host that has the members, or list them in the TOML's \
                         members"
                    ));
                }
                out.note(format!(
                    "{origin}: {w} resolved on this host to {} (an interface that matches later \
                     is not added)",
                    found.join(", ")
                ));
                names.extend(found);
            }
            w => names.push(w.to_owned()),
        }
    }
    Ok(names)
}

/// ifupdown2's range in a glob: `swp1-4` is swp1 to swp4, `swp1-2.100` swp1.100 and swp2.100.
fn expand_range(w: &str) -> Vec<String> {
    let bytes = w.as_bytes();
    let Some(dash) = w.find('-') else {
        return vec![w.to_owned()];
    };
    let start = bytes[..dash]
        .iter()
        .rposition(|b| !b.is_ascii_digit())
        .map_or(0, |i| i + 1);
    let end = bytes[dash + 1..]
        .iter()
        .position(|b| !b.is_ascii_digit())
        .map_or(w.len(), |i| dash + 1 + i);
    let (Ok(a), Ok(b)) = (
        w[start..dash].parse::<u32>(),
        w[dash + 1..end].parse::<u32>(),
    ) else {
        return vec![w.to_owned()];
    };
    if a > b || b - a > 4096 {
        return vec![w.to_owned()];
    }
    (a..=b)
        .map(|n| format!("{}{n}{}", &w[..start], &w[end..]))
        .collect()
}

/// ifupdown2's and ifenslave's spellings that are not `bond-` + the kernel's name.
fn option_name(key: &str) -> Option<&'static str> {
    Some(match key {
        "bond-ad-sys-priority" => "ad_actor_sys_prio",
        "bond-ad-sys-mac-addr" => "ad_actor_system",
        "bond-xmit-hash-policy" => "xmit_hash_policy",
        _ => return None,
    })
}

pub(super) fn import_ifupdown(
    files: &[(PathBuf, String)],
    want: Option<&str>,
    host: &[HostLink],
) -> Result<Imported, ImportError> {
    let mut parsed = Parsed::default();
    for (path, text) in files {
        let canonical = path.canonicalize().unwrap_or_else(|_| path.clone());
        if parsed.read.contains(&canonical) {
            continue;
        }
        parsed.read.push(canonical);
        parse_file(path, text, 0, &mut parsed)?;
    }
    let first = &files[0].0;
    let is_bond = |i: &Iface| {
        i.options.iter().any(|(_, _, k, _)| {
            let k = normal(k);
            matches!(
                k.as_str(),
                "bond-slaves" | "bond-ports" | "slaves" | "bond-mode"
            )
        })
    };
    let named_by_members: Vec<String> = parsed
        .ifaces
        .values()
        .filter_map(|i| i.get("bond-master").map(str::to_owned))
        .collect();
    let bonds: Vec<&String> = parsed
        .order
        .iter()
        .filter(|n| is_bond(&parsed.ifaces[*n]) || named_by_members.contains(n))
        .filter(|n| want.is_none_or(|w| w == n.as_str()))
        .collect();
    let name = match bonds.as_slice() {
        [one] => (*one).clone(),
        [] => {
            let ovs = parsed.ifaces.values().any(|i| {
                i.get("ovs-type")
                    .is_some_and(|t| t.eq_ignore_ascii_case("OVSBond"))
            });
            let mut m = if ovs {
                "an Open vSwitch bond (ovs_type OVSBond): this format is not supported; \
                 lagd's balance-slb and balance-tcp modes are Open vSwitch's, give them in a \
                 TOML"
                    .to_owned()
            } else if let Some(w) = want {
                format!("no bond '{w}' in these files")
            } else {
                "no bond in these files (no iface with bond-slaves, bond-ports or bond-mode, \
                 and no member with bond-master)"
                    .to_owned()
            };
            if !parsed.unmatched.is_empty() {
                let _ = write!(
                    m,
                    "; these matched no file: {} (give the sourced files too)",
                    parsed.unmatched.join(", ")
                );
            }
            return Err(error(first, None, m));
        }
        _ => return Err(error(first, None, "several bonds: name one with --bond")),
    };
    let iface = &parsed.ifaces[&name];
    let mut out = Imported {
        bond: name.clone(),
        ..Imported::default()
    };
    let mut members_given = false;
    for (line, path, key, value) in &iface.options {
        let k = normal(key);
        let what = format!("{key} {value}");
        let origin = format!("{}:{line}: {what}", path.display());
        match k.as_str() {
            "bond-slaves" | "bond-ports" | "slaves" => {
                members_given = true;
                let names = member_list(value, host, &mut out, &what)
                    .map_err(|m| error(path, Some(*line), m))?;
                for n in names {
                    out.add_member(&n);
                }
            }
            "bond-master" => {}
            "mtu" => {
                out.mtu = Some(value.parse().map_err(|_| {
                    error(path, Some(*line), format!("mtu: '{value}' is not a number"))
                })?)
            }
            "hwaddress" => {
                let mac = value.strip_prefix("ether ").unwrap_or(value).trim();
                out.mac = Some(mac.to_owned());
            }
            "up" | "down" | "pre-up" | "post-up" | "pre-down" | "post-down" => out.drop_setting(
                format!("{origin}: a command ifupdown runs; lagd runs none (its unit can)"),
            ),
            "bond-lacp-bypass-allow" | "bond-active-slave" | "bond-queue-id" => {
                out.drop_setting(format!("{origin}: no bonding option of lagd's does this"))
            }
            "address" | "netmask" | "gateway" | "broadcast" | "network" | "metric"
            | "pointopoint" | "scope" | "hostname" | "accept-ra" | "autoconf" | "privext"
            | "dad-attempts" | "dhcp" => out.drop_system(format!(
                "{origin}: addresses, routes and DNS are set on the bond interface by the \
                 system, not by lagd"
            )),
            k if k.starts_with("dns-") => out.drop_system(format!(
                "{origin}: addresses, routes and DNS are set on the bond interface by the \
                 system, not by lagd"
            )),
            k if k.starts_with("bond-") => {
                let option = option_name(k)
                    .map(str::to_owned)
                    .unwrap_or_else(|| k["bond-".len()..].replace('-', "_"));
                let value = match option.as_str() {
                    "arp_ip_target" | "ns_ip6_target" => value
                        .split([' ', ','])
                        .filter(|t| !t.is_empty())
                        .collect::<Vec<_>>()
                        .join(","),
                    o if BondOptions::takes_boolean(o) => {
                        yes_no(value).map_or_else(|| value.clone(), str::to_owned)
                    }
                    _ => value.clone(),
                };
                take_option(&mut out, &option, &value, &origin);
            }
            _ => out.drop_unknown(&origin, &k),
        }
    }
    // ifenslave's other spelling: the members name the bond (`bond-master`), the bond says
    // `bond-slaves none`.
    for n in &parsed.order {
        let i = &parsed.ifaces[n];
        if i.get("bond-master") == Some(name.as_str()) {
            out.add_member(n);
            members_given = true;
            if i.get("bond-primary") == Some(n.as_str()) && out.get("primary").is_none() {
                out.set("primary", n.clone());
            }
        }
    }
    if !members_given && !parsed.unmatched.is_empty() {
        out.note(format!(
            "these matched no file: {}",
            parsed.unmatched.join(", ")
        ));
    }
    // What sits on the bond (a Proxmox bridge, VLANs) stays the system's.
    for n in &parsed.order {
        let i = &parsed.ifaces[n];
        let on_bond = [
            "bridge-ports",
            "bridge_ports",
            "vlan-raw-device",
            "vlan_raw_device",
        ]
        .iter()
        .any(|k| {
            i.get(&normal(k))
                .is_some_and(|v| v.split_whitespace().any(|w| w == name))
        }) || n.strip_prefix(&format!("{name}.")).is_some();
        if on_bond {
            out.note(format!(
                "{n} (in {}) sits on {name}: it stays the system's and works on lagd's bond as on \
                 the kernel's",
                i.file.display()
            ));
        }
    }
    Ok(out)
}
