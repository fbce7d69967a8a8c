//! `lagctl import FILE...`: reads a bond defined for another tool and writes lagd's TOML, with
//! a comment line for each setting that does not carry over and why.
//!
//! Dialects: ifcfg (`BONDING_OPTS`, members by `MASTER=`), NetworkManager keyfiles (`[bond]`,
//! members by `master=`/`controller=`), systemd-networkd (`.netdev` `[Bond]` and the `.network`
//! files with `Bond=`), netplan (`bonds:`), nmstate (`link-aggregation`) and teamd JSON (runners
//! mapped to bonding modes as libteam's team2bond does). The result is checked with lagd's own
//! configuration loader before it is printed: an import that lagd would refuse is an error.

use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use lagd_proto::bond::BondOptions;
use yaml_rust2::{Yaml, YamlLoader};

use super::CliError;
use crate::config::Config;

/// Arguments of `lagctl import`.
#[derive(Debug, Clone, clap::Args)]
pub struct ImportArgs {
    /// The files defining the bond and its members (the bond's file and its members' files).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// The dialect (default: guessed from the file names and contents).
    #[arg(long, value_parser = ["ifcfg", "nm", "networkd", "netplan", "nmstate", "teamd"])]
    pub from: Option<String>,
    /// The bond to import when the files define several.
    #[arg(long)]
    pub bond: Option<String>,
    /// Write the TOML to this file instead of standard output.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
}

/// A configuration dialect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// Red Hat's ifcfg files (`BONDING_OPTS`).
    Ifcfg,
    /// NetworkManager keyfiles.
    NmKeyfile,
    /// systemd-networkd `.netdev` and `.network` files.
    Networkd,
    /// netplan YAML.
    Netplan,
    /// nmstate YAML.
    Nmstate,
    /// teamd JSON.
    Teamd,
}

impl Dialect {
    /// The dialect's name for `--from`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Ifcfg => "ifcfg",
            Self::NmKeyfile => "nm",
            Self::Networkd => "networkd",
            Self::Netplan => "netplan",
            Self::Nmstate => "nmstate",
            Self::Teamd => "teamd",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        [
            Self::Ifcfg,
            Self::NmKeyfile,
            Self::Networkd,
            Self::Netplan,
            Self::Nmstate,
            Self::Teamd,
        ]
        .into_iter()
        .find(|d| d.name() == s)
    }

    /// Guesses the dialect of a file from its name and text.
    pub fn guess(path: &Path, text: &str) -> Option<Self> {
        let name = path.file_name()?.to_string_lossy();
        let ext = path.extension().map(|e| e.to_string_lossy().into_owned());
        match ext.as_deref() {
            Some("netdev" | "network") => return Some(Self::Networkd),
            Some("nmconnection") => return Some(Self::NmKeyfile),
            Some("json") | Some("conf") if text.trim_start().starts_with('{') => {
                return Some(Self::Teamd);
            }
            Some("yaml" | "yml") => {
                let top = text
                    .lines()
                    .find(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))?;
                return if top.starts_with("network:") {
                    Some(Self::Netplan)
                } else {
                    Some(Self::Nmstate)
                };
            }
            _ => {}
        }
        if name.starts_with("ifcfg-") {
            return Some(Self::Ifcfg);
        }
        if text.trim_start().starts_with('{') {
            return Some(Self::Teamd);
        }
        if text.lines().any(|l| l.trim() == "[connection]") {
            return Some(Self::NmKeyfile);
        }
        None
    }
}

/// A bond read from another tool's configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Imported {
    /// The bond's name.
    pub bond: String,
    /// Members, in the order the files give them.
    pub members: Vec<String>,
    /// Bonding options by their kernel (lagd) names, in the order read.
    pub options: Vec<(String, String)>,
    /// The bond's MAC, if set.
    pub mac: Option<String>,
    /// The MTU, if set.
    pub mtu: Option<u32>,
    /// Settings that do not carry over, each with why.
    pub dropped: Vec<String>,
}

/// An import error: the file, the line when known, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportError {
    /// The file.
    pub file: PathBuf,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for ImportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ImportError {}

fn error(file: &Path, line: Option<usize>, message: impl Into<String>) -> ImportError {
    ImportError {
        file: file.to_path_buf(),
        line,
        message: message.into(),
    }
}

impl Imported {
    fn set(&mut self, key: &str, value: impl Into<String>) {
        let value = value.into();
        match self.options.iter_mut().find(|(k, _)| k == key) {
            Some(e) => e.1 = value,
            None => self.options.push((key.to_owned(), value)),
        }
    }

    fn drop_setting(&mut self, what: impl Into<String>) {
        self.dropped.push(what.into());
    }

    fn add_member(&mut self, m: &str) {
        if !self.members.iter().any(|x| x == m) {
            self.members.push(m.to_owned());
        }
    }

    /// lagd's TOML for the bond, with the settings that did not carry over as comments.
    pub fn to_toml(&self, dialect: Dialect, sources: &[PathBuf]) -> String {
        let mut s = String::new();
        let files: Vec<String> = sources.iter().map(|p| p.display().to_string()).collect();
        let _ = writeln!(
            s,
            "# Imported by lagctl import from {} ({})",
            dialect.name(),
            files.join(", ")
        );
        for d in &self.dropped {
            let _ = writeln!(s, "# not carried over: {d}");
        }
        let _ = writeln!(s, "bond = {}", quote(&self.bond));
        let members: Vec<String> = self.members.iter().map(|m| quote(m)).collect();
        let _ = writeln!(s, "members = [{}]", members.join(", "));
        if let Some(m) = &self.mac {
            let _ = writeln!(s, "mac = {}", quote(m));
        }
        if let Some(m) = self.mtu {
            let _ = writeln!(s, "mtu = {m}");
        }
        let _ = writeln!(s, "\n[options]");
        for (k, v) in &self.options {
            let value = if BondOptions::takes_boolean(k) {
                match v.as_str() {
                    "1" => "true".to_owned(),
                    "0" => "false".to_owned(),
                    other => quote(other),
                }
            } else if k == "arp_ip_target" {
                let items: Vec<String> = v
                    .split([',', ' '])
                    .filter(|t| !t.is_empty())
                    .map(quote)
                    .collect();
                format!("[{}]", items.join(", "))
            } else if !v.is_empty() && v.len() < 10 && v.bytes().all(|b| b.is_ascii_digit()) {
                v.clone()
            } else {
                quote(v)
            };
            let _ = writeln!(s, "{k} = {value}");
        }
        s
    }
}

/// A TOML basic string.
fn quote(s: &str) -> String {
    let mut q = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(q, "\\u{:04x}", c as u32);
            }
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

/// Settings that are the system's to configure on the bond, not lagd's.
fn address_reason(key: &str) -> Option<&'static str> {
    let k = key.to_ascii_lowercase();
    let addressing = [
        "ipaddr",
        "prefix",
        "netmask",
        "gateway",
        "dns",
        "bootproto",
        "dhcp",
        "address",
        "route",
        "ipv4",
        "ipv6",
        "defroute",
        "peerdns",
        "method",
        "nameserver",
        "domain",
        "search",
    ];
    if addressing.iter().any(|a| k.starts_with(a) || k.contains(a)) {
        return Some(
            "addresses, routes and DNS are set on the bond interface by the system, not by lagd",
        );
    }
    let boot = [
        "onboot",
        "autoconnect",
        "nm_controlled",
        "uuid",
        "id",
        "name",
        "type",
        "state",
        "userctl",
        "renderer",
        "version",
        "bonding_master",
        "zone",
    ];
    if boot.contains(&k.as_str()) {
        return Some("bookkeeping of the tool that owned the bond; lagd starts from its unit");
    }
    None
}

/// Checks a bond option with lagd's parser; a value lagd refuses becomes a dropped setting.
fn take_option(out: &mut Imported, key: &str, value: &str, origin: &str) {
    let mut probe = BondOptions::default();
    match probe.set(key, value) {
        Ok(()) => out.set(key, value),
        Err(e) => out.drop_setting(format!("{origin}: {}", e.reason)),
    }
}

// ---------------------------------------------------------------------------------------------
// ifcfg

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

fn import_ifcfg(files: &[(PathBuf, String)], want: Option<&str>) -> Result<Imported, ImportError> {
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

// ---------------------------------------------------------------------------------------------
// INI (NetworkManager keyfiles, systemd-networkd)

/// `(line, section, key, value)` of an INI file.
fn ini(path: &Path, text: &str) -> Result<Vec<(usize, String, String, String)>, ImportError> {
    let mut v = Vec::new();
    let mut section = String::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(s) = line.strip_prefix('[') {
            section = s
                .strip_suffix(']')
                .ok_or_else(|| error(path, Some(i + 1), format!("'{line}': section not closed")))?
                .to_owned();
            continue;
        }
        let (k, val) = line
            .split_once('=')
            .ok_or_else(|| error(path, Some(i + 1), format!("'{line}' is not key=value")))?;
        v.push((
            i + 1,
            section.clone(),
            k.trim().to_owned(),
            val.trim().to_owned(),
        ));
    }
    Ok(v)
}

type Ini = Vec<(usize, String, String, String)>;

fn ini_get<'a>(entries: &'a Ini, section: &str, key: &str) -> Option<&'a str> {
    entries
        .iter()
        .rev()
        .find(|(_, s, k, _)| s == section && k == key)
        .map(|(_, _, _, v)| v.as_str())
}

fn import_nm(files: &[(PathBuf, String)], want: Option<&str>) -> Result<Imported, ImportError> {
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

/// A systemd time span (`100ms`, `1s`, `2min`; a bare number is seconds) in `unit_ms`
/// milliseconds (1: ms, 1000: s).
fn timespan_ms(v: &str, bare_ms: bool) -> Option<u64> {
    let v = v.trim();
    let split = v
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let n: f64 = num.parse().ok()?;
    let scale = match unit.trim() {
        "" if bare_ms => 1.0,
        "" | "s" | "sec" | "second" | "seconds" => 1000.0,
        "ms" | "msec" => 1.0,
        "us" | "usec" => 0.001,
        "m" | "min" | "minute" | "minutes" => 60_000.0,
        _ => return None,
    };
    Some((n * scale).round() as u64)
}

fn yes_no(v: &str) -> Option<&'static str> {
    match v.to_ascii_lowercase().as_str() {
        "yes" | "true" | "on" | "1" => Some("1"),
        "no" | "false" | "off" | "0" => Some("0"),
        _ => None,
    }
}

fn import_networkd(
    files: &[(PathBuf, String)],
    want: Option<&str>,
) -> Result<Imported, ImportError> {
    let mut parsed = Vec::new();
    for (p, t) in files {
        parsed.push((p, ini(p, t)?));
    }
    let bonds: Vec<_> = parsed
        .iter()
        .filter(|(p, e)| {
            p.extension().is_some_and(|x| x == "netdev")
                && ini_get(e, "NetDev", "Kind") == Some("bond")
        })
        .filter(|(_, e)| want.is_none_or(|w| ini_get(e, "NetDev", "Name") == Some(w)))
        .collect();
    let (path, entries) = match bonds.as_slice() {
        [one] => one,
        [] => return Err(error(&files[0].0, None, "no .netdev with Kind=bond")),
        _ => {
            return Err(error(
                &files[0].0,
                None,
                "several bonds: name one with --bond",
            ));
        }
    };
    let mut out = Imported {
        bond: ini_get(entries, "NetDev", "Name")
            .ok_or_else(|| error(path, None, "[NetDev] Name is missing"))?
            .to_owned(),
        ..Imported::default()
    };
    for (line, section, k, v) in entries.iter() {
        let bad = |what: &str| error(path, Some(*line), format!("{k}: '{v}' is not {what}"));
        match (section.as_str(), k.as_str()) {
            ("NetDev", "Name" | "Kind" | "Description") => {}
            ("NetDev", "MTUBytes") => out.mtu = Some(v.parse().map_err(|_| bad("a number"))?),
            ("NetDev", "MACAddress") => out.mac = Some(v.clone()),
            ("Bond", key) => {
                let direct = match key {
                    "Mode" => Some("mode"),
                    "TransmitHashPolicy" => Some("xmit_hash_policy"),
                    "LACPTransmitRate" => Some("lacp_rate"),
                    "AdSelect" => Some("ad_select"),
                    "AdActorSystemPriority" => Some("ad_actor_sys_prio"),
                    "AdUserPortKey" => Some("ad_user_port_key"),
                    "AdActorSystem" => Some("ad_actor_system"),
                    "FailOverMACPolicy" => Some("fail_over_mac"),
                    "ARPValidate" => Some("arp_validate"),
                    "ARPAllTargets" => Some("arp_all_targets"),
                    "ARPMissedMax" => Some("arp_missed_max"),
                    "PrimaryReselectPolicy" => Some("primary_reselect"),
                    "ResendIGMP" => Some("resend_igmp"),
                    "PacketsPerSlave" => Some("packets_per_slave"),
                    "GratuitousARP" => Some("num_grat_arp"),
                    "MinLinks" => Some("min_links"),
                    _ => None,
                };
                let ms = match key {
                    "MIIMonitorSec" => Some("miimon"),
                    "UpDelaySec" => Some("updelay"),
                    "DownDelaySec" => Some("downdelay"),
                    "ARPIntervalSec" => Some("arp_interval"),
                    "PeerNotifyDelaySec" => Some("peer_notif_delay"),
                    _ => None,
                };
                let boolean = match key {
                    "AllSlavesActive" => Some("all_slaves_active"),
                    "DynamicTransmitLoadBalancing" => Some("tlb_dynamic_lb"),
                    _ => None,
                };
                let origin = format!("[Bond] {key}={v}");
                if let Some(o) = direct {
                    take_option(&mut out, o, v, &origin);
                } else if let Some(o) = ms {
                    let n = timespan_ms(v, false).ok_or_else(|| bad("a time span"))?;
                    take_option(&mut out, o, &n.to_string(), &origin);
                } else if let Some(o) = boolean {
                    let b = yes_no(v).ok_or_else(|| bad("a boolean"))?;
                    take_option(&mut out, o, b, &origin);
                } else if key == "LearnPacketIntervalSec" {
                    let n = timespan_ms(v, false).ok_or_else(|| bad("a time span"))?;
                    take_option(
                        &mut out,
                        "lp_interval",
                        &(n / 1000).max(1).to_string(),
                        &origin,
                    );
                } else if key == "ARPIPTargets" {
                    let t: Vec<&str> = v.split_whitespace().collect();
                    take_option(&mut out, "arp_ip_target", &t.join(","), &origin);
                } else {
                    out.drop_setting(format!("{origin}: not a bond setting lagd knows"));
                }
            }
            (_, key) => out.drop_setting(format!(
                "[{section}] {key}={v}: {}",
                address_reason(key).unwrap_or("not a bond setting lagd knows")
            )),
        }
    }
    for (p, e) in &parsed {
        if p.extension().is_none_or(|x| x != "network") {
            continue;
        }
        // The bond's own .network file: its addresses and routes are not lagd's to set.
        let names = ini_get(e, "Match", "Name").unwrap_or("");
        if names.split_whitespace().any(|n| n == out.bond) {
            for (_, section, k, v) in e {
                if section != "Match" {
                    out.drop_setting(format!(
                        "{}: [{section}] {k}={v}: {}",
                        p.display(),
                        address_reason(k).unwrap_or(
                            "the bond interface's own settings are the system's, not lagd's"
                        )
                    ));
                }
            }
            continue;
        }
        if ini_get(e, "Network", "Bond") != Some(out.bond.as_str()) {
            continue;
        }
        let names = ini_get(e, "Match", "Name").unwrap_or("");
        for n in names.split_whitespace() {
            if n.contains(['*', '?', '[']) {
                out.drop_setting(format!(
                    "{}: [Match] Name={n} is a pattern; lagd needs the member names: add them to members",
                    p.display()
                ));
            } else {
                out.add_member(n);
            }
        }
        if ini_get(e, "Network", "PrimarySlave").and_then(yes_no) == Some("1") {
            if let Some(n) = names.split_whitespace().next() {
                out.set("primary", n);
            }
        }
        for (_, section, k, v) in e {
            if (section == "Network" && !matches!(k.as_str(), "Bond" | "PrimarySlave"))
                || section == "Link"
            {
                out.drop_setting(format!(
                    "{}: [{section}] {k}={v}: member settings stay with the member's own configuration",
                    p.display()
                ));
            }
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// YAML (netplan, nmstate)

fn yaml_text(y: &Yaml) -> Option<String> {
    match y {
        Yaml::String(s) | Yaml::Real(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Boolean(b) => Some(if *b { "1" } else { "0" }.to_owned()),
        _ => None,
    }
}

fn load_yaml(path: &Path, text: &str) -> Result<Yaml, ImportError> {
    let mut docs = YamlLoader::load_from_str(text).map_err(|e| {
        error(
            path,
            Some(e.marker().line()),
            format!("not YAML: {}", e.info()),
        )
    })?;
    if docs.is_empty() {
        return Err(error(path, None, "empty YAML"));
    }
    Ok(docs.swap_remove(0))
}

fn import_netplan(
    files: &[(PathBuf, String)],
    want: Option<&str>,
) -> Result<Imported, ImportError> {
    let (path, text) = &files[0];
    let doc = load_yaml(path, text)?;
    let bonds = &doc["network"]["bonds"];
    let Some(map) = bonds.as_hash() else {
        return Err(error(path, None, "no network: bonds: here"));
    };
    let names: Vec<String> = map
        .keys()
        .filter_map(|k| k.as_str().map(str::to_owned))
        .collect();
    let name = match (want, names.as_slice()) {
        (Some(w), _) if names.iter().any(|n| n == w) => w.to_owned(),
        (Some(w), _) => return Err(error(path, None, format!("no bond '{w}' under bonds:"))),
        (None, [one]) => one.clone(),
        (None, _) => return Err(error(path, None, "several bonds: name one with --bond")),
    };
    let bond = &bonds[name.as_str()];
    let mut out = Imported {
        bond: name.clone(),
        ..Imported::default()
    };
    for (k, v) in bond.as_hash().into_iter().flatten() {
        let Some(k) = k.as_str() else { continue };
        match k {
            "interfaces" => {
                for m in v.as_vec().into_iter().flatten() {
                    if let Some(m) = m.as_str() {
                        out.add_member(m);
                    }
                }
            }
            "mtu" => {
                out.mtu = v.as_i64().and_then(|m| u32::try_from(m).ok());
                if out.mtu.is_none() {
                    return Err(error(
                        path,
                        None,
                        format!("bonds.{name}.mtu is not a number"),
                    ));
                }
            }
            "macaddress" => out.mac = yaml_text(v),
            "parameters" => {
                for (pk, pv) in v.as_hash().into_iter().flatten() {
                    let Some(pk) = pk.as_str() else { continue };
                    let origin = format!("parameters.{pk}");
                    let text = match pv {
                        Yaml::Array(a) => {
                            Some(a.iter().filter_map(yaml_text).collect::<Vec<_>>().join(","))
                        }
                        other => yaml_text(other),
                    };
                    let Some(text) = text else {
                        out.drop_setting(format!("{origin}: value not understood"));
                        continue;
                    };
                    let bad = || {
                        error(
                            path,
                            None,
                            format!("bonds.{name}.{origin}: '{text}' is not a time"),
                        )
                    };
                    let key = match pk {
                        "mode" => "mode",
                        "lacp-rate" => "lacp_rate",
                        "min-links" => "min_links",
                        "transmit-hash-policy" => "xmit_hash_policy",
                        "ad-select" => "ad_select",
                        "all-members-active" | "all-slaves-active" => "all_slaves_active",
                        "arp-ip-targets" => "arp_ip_target",
                        "arp-validate" => "arp_validate",
                        "arp-all-targets" => "arp_all_targets",
                        "fail-over-mac-policy" => "fail_over_mac",
                        "gratuitous-arp" | "gratuitious-arp" => "num_grat_arp",
                        "packets-per-member" | "packets-per-slave" => "packets_per_slave",
                        "primary-reselect-policy" => "primary_reselect",
                        "resend-igmp" => "resend_igmp",
                        "primary" => "primary",
                        "mii-monitor-interval"
                        | "arp-interval"
                        | "up-delay"
                        | "down-delay"
                        | "learn-packet-interval" => {
                            // netplan: milliseconds without a suffix; learn-packet-interval:
                            // seconds.
                            let seconds = pk == "learn-packet-interval";
                            let ms = timespan_ms(&text, !seconds).ok_or_else(bad)?;
                            let (key, value) = match pk {
                                "mii-monitor-interval" => ("miimon", ms),
                                "arp-interval" => ("arp_interval", ms),
                                "up-delay" => ("updelay", ms),
                                "down-delay" => ("downdelay", ms),
                                _ => ("lp_interval", (ms / 1000).max(1)),
                            };
                            take_option(&mut out, key, &value.to_string(), &origin);
                            continue;
                        }
                        _ => {
                            out.drop_setting(format!("{origin}: not a bond setting lagd knows"));
                            continue;
                        }
                    };
                    let text = if key == "all_slaves_active" {
                        yes_no(&text).unwrap_or("x").to_owned()
                    } else {
                        text
                    };
                    take_option(&mut out, key, &text, &origin);
                }
            }
            other => out.drop_setting(format!(
                "bonds.{name}.{other}: {}",
                address_reason(other).unwrap_or("not a bond setting lagd knows")
            )),
        }
    }
    Ok(out)
}

fn import_nmstate(
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

// ---------------------------------------------------------------------------------------------
// teamd

fn import_teamd(files: &[(PathBuf, String)]) -> Result<Imported, ImportError> {
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

// ---------------------------------------------------------------------------------------------

/// Reads a bond from `files` (all of one dialect; guessed from the first file when `dialect`
/// is `None`). `bond` picks one when the files define several.
pub fn import(
    dialect: Option<Dialect>,
    files: &[(PathBuf, String)],
    bond: Option<&str>,
) -> Result<(Dialect, Imported), ImportError> {
    let Some((first, text)) = files.first() else {
        return Err(error(Path::new("-"), None, "no files"));
    };
    let dialect = match dialect {
        Some(d) => d,
        None => Dialect::guess(first, text).ok_or_else(|| {
            error(
                first,
                None,
                "cannot tell the dialect: give --from ifcfg|nm|networkd|netplan|nmstate|teamd",
            )
        })?,
    };
    let mut out = match dialect {
        Dialect::Ifcfg => import_ifcfg(files, bond)?,
        Dialect::NmKeyfile => import_nm(files, bond)?,
        Dialect::Networkd => import_networkd(files, bond)?,
        Dialect::Netplan => import_netplan(files, bond)?,
        Dialect::Nmstate => import_nmstate(files, bond)?,
        Dialect::Teamd => import_teamd(files)?,
    };
    if out.members.is_empty() {
        return Err(error(
            first,
            None,
            format!(
                "bond '{}' has no members in these files (give the members' files too)",
                out.bond
            ),
        ));
    }
    // The mode first: lagd reads options in order, and mode decides what the others mean.
    out.options
        .sort_by_key(|(k, _)| if k == "mode" { 0 } else { 1 });
    Ok((dialect, out))
}

/// `lagctl import`.
pub fn main(args: ImportArgs) -> Result<(), CliError> {
    let mut files = Vec::new();
    for p in &args.files {
        let text = std::fs::read_to_string(p)
            .map_err(|e| CliError::Usage(format!("{}: cannot read: {e}", p.display())))?;
        files.push((p.clone(), text));
    }
    let dialect = args.from.as_deref().and_then(Dialect::parse);
    let (dialect, imported) = import(dialect, &files, args.bond.as_deref())
        .map_err(|e| CliError::Usage(e.to_string()))?;
    let toml = imported.to_toml(dialect, &args.files);
    // What lagd would make of it: refuse to write a configuration lagd refuses.
    Config::from_toml(&toml, None).map_err(|e| {
        CliError::Usage(format!(
            "the imported configuration is not one lagd accepts: {e}\n{toml}"
        ))
    })?;
    match &args.output {
        Some(p) => std::fs::write(p, toml.as_bytes()).map_err(CliError::Io),
        None => io::stdout()
            .write_all(toml.as_bytes())
            .map_err(CliError::Io),
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn time_spans() {
        assert_eq!(timespan_ms("100ms", false), Some(100));
        assert_eq!(timespan_ms("1s", false), Some(1000));
        assert_eq!(timespan_ms("2", false), Some(2000));
        assert_eq!(timespan_ms("2", true), Some(2));
        assert_eq!(timespan_ms("1.5s", false), Some(1500));
        assert_eq!(timespan_ms("1min", false), Some(60_000));
        assert_eq!(timespan_ms("fast", false), None);
        assert_eq!(timespan_ms("10 parsecs", false), None);
    }

    #[test]
    fn quoting() {
        assert_eq!(quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(quote("x\ny"), "\"x\\u000ay\"");
    }

    #[test]
    fn malformed_input_names_file_and_line() {
        let f = |name: &str, text: &str| vec![(PathBuf::from(name), text.to_owned())];
        let e = import(
            None,
            &f("b.netdev", "[NetDev]\nName=bond0\nKind=bond\n[Bond\n"),
            None,
        )
        .unwrap_err();
        assert_eq!(e.line, Some(4), "{e}");
        let e = import(
            None,
            &f(
                "b.netdev",
                "[NetDev]\nName=b\nKind=bond\n[Bond]\nMIIMonitorSec=soon\n",
            ),
            None,
        )
        .unwrap_err();
        assert_eq!(e.line, Some(5));
        assert!(e.message.contains("MIIMonitorSec"), "{e}");
        let e = import(None, &f("t.json", "{\"device\": "), None).unwrap_err();
        assert!(e.message.contains("not JSON"), "{e}");
        let e = import(None, &f("n.yaml", "network:\n  bonds: [\n"), None).unwrap_err();
        assert!(e.message.contains("not YAML"), "{e}");
        let e = import(None, &f("x.txt", "hello"), None).unwrap_err();
        assert!(e.message.contains("--from"), "{e}");
        let e = import(
            None,
            &f("ifcfg-bond0", "DEVICE=bond0\nBONDING_OPTS=\"mode=4\"\n"),
            None,
        )
        .unwrap_err();
        assert!(e.message.contains("no members"), "{e}");
    }
}
