//! `lagctl import FILE...`: reads a bond defined for another tool and writes lagd's TOML, with
//! a comment line for each setting that does not carry over and why.
//!
//! Dialects: ifcfg (`BONDING_OPTS`, members by `MASTER=`), NetworkManager keyfiles (`[bond]`,
//! members by `master=`/`controller=`), systemd-networkd (`.netdev` `[Bond]` and the `.network`
//! files with `Bond=`), netplan (`bonds:`), nmstate (`link-aggregation`, also inside Kubernetes
//! NodeNetworkConfigurationPolicies), teamd JSON (runners mapped to bonding modes as libteam's
//! team2bond does; NetworkManager and ifcfg team profiles carry the same JSON) and Debian's
//! ifupdown/ifupdown2 `/etc/network/interfaces` (with `source`).
//! Where the source tool's defaults differ from lagd's (NetworkManager's miimon, teamd's
//! tx_hash), the import writes the tool's, with a `# note:` line.
//!
//! A setting that does not carry over gets a `# not carried over:` line; one whose loss changes
//! the bond's behaviour is marked `[changes behaviour]` and makes the exit code 4 (the file is
//! still written). Addresses, routes and the tool's bookkeeping stay the system's and are only
//! listed. The result is checked with lagd's own
//! configuration loader before it is printed: an import that lagd would refuse is an error.

use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use lagd_proto::bond::BondOptions;
use yaml_rust2::{Yaml, YamlLoader};

use super::CliError;
use crate::config::Config;

mod ifcfg;
mod ifupdown;
mod netplan;
mod networkd;
mod nm;
mod nmstate;
mod teamd;

/// Arguments of `lagctl import`.
#[derive(Debug, Clone, clap::Args)]
pub struct ImportArgs {
    /// The files defining the bond and its members (the bond's file and its members' files).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// The dialect (default: guessed from the file names and contents).
    #[arg(long, value_parser = ["ifcfg", "nm", "networkd", "netplan", "nmstate", "teamd", "ifupdown"])]
    pub from: Option<String>,
    /// The bond to import when the files define several.
    #[arg(long)]
    pub bond: Option<String>,
    /// Write the TOML to this file instead of standard output.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Also check the imported configuration against this host as `lagd --check` does
    /// (findings on standard error; exit code 1 when one is an error). Changes nothing.
    #[arg(long)]
    pub check: bool,
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
    /// Debian's ifupdown and ifupdown2 (`/etc/network/interfaces`).
    Ifupdown,
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
            Self::Ifupdown => "ifupdown",
        }
    }

    /// Every dialect.
    pub const ALL: [Self; 7] = [
        Self::Ifcfg,
        Self::NmKeyfile,
        Self::Networkd,
        Self::Netplan,
        Self::Nmstate,
        Self::Teamd,
        Self::Ifupdown,
    ];

    fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.name() == s)
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
                let top = text.lines().find(|l| {
                    let l = l.trim();
                    !l.is_empty() && !l.starts_with('#') && l != "---"
                })?;
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
        let in_interfaces_d = path
            .parent()
            .and_then(Path::file_name)
            .is_some_and(|d| d == "interfaces.d");
        let iface_line = text.lines().any(|l| {
            let l = l.trim_start();
            l.starts_with("iface ")
                || l.starts_with("source ")
                || l.starts_with("source-directory ")
        });
        if name == "interfaces" || (in_interfaces_d && iface_line) {
            return Some(Self::Ifupdown);
        }
        if text.trim_start().starts_with('{') {
            return Some(Self::Teamd);
        }
        if text.lines().any(|l| l.trim() == "[connection]") {
            return Some(Self::NmKeyfile);
        }
        if iface_line {
            return Some(Self::Ifupdown);
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
    pub dropped: Vec<Dropped>,
    /// What the import decided that the files do not say: the source tool's defaults applied
    /// where lagd's differ, members resolved on this host.
    pub notes: Vec<String>,
    /// A mode lagd (and the source tool) refuses: the import fails rather than run another.
    refused_mode: Option<String>,
}

/// A setting that does not carry over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropped {
    /// The setting and why it does not carry over.
    pub what: String,
    /// Whether leaving it out changes how the bond behaves (as opposed to what stays the
    /// system's: addresses, routes, the source tool's bookkeeping).
    pub changes_behaviour: bool,
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

    fn get(&self, key: &str) -> Option<&str> {
        self.options
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// A setting that does not carry over and whose loss changes the bond's behaviour.
    fn drop_setting(&mut self, what: impl Into<String>) {
        self.dropped.push(Dropped {
            what: what.into(),
            changes_behaviour: true,
        });
    }

    /// A setting that stays the system's (addresses, routes, bookkeeping): not lagd's to
    /// carry, and leaving it out of lagd's file changes nothing about the bond.
    fn drop_system(&mut self, what: impl Into<String>) {
        self.dropped.push(Dropped {
            what: what.into(),
            changes_behaviour: false,
        });
    }

    /// A setting dropped with the reason [`system_reason`] gives for `key`, or as one lagd does
    /// not know (which may change behaviour).
    fn drop_unknown(&mut self, what: impl std::fmt::Display, key: &str) {
        match system_reason(key) {
            Some(r) => self.drop_system(format!("{what}: {r}")),
            None => self.drop_setting(format!("{what}: not a bond setting lagd knows")),
        }
    }

    fn note(&mut self, what: impl Into<String>) {
        self.notes.push(what.into());
    }

    /// Whether something that changes the bond's behaviour did not carry over.
    pub fn loses_behaviour(&self) -> bool {
        self.dropped.iter().any(|d| d.changes_behaviour)
    }

    /// NetworkManager's bond default (also for ifcfg files and nmstate, which NetworkManager
    /// applies): `miimon=100` unless the profile sets miimon or ARP monitoring.
    fn networkmanager_defaults(&mut self, tool: &str) {
        let arp = self.get("arp_interval").is_some_and(|v| v != "0");
        if self.get("miimon").is_none() && !arp {
            self.set("miimon", "100");
            self.note(format!(
                "miimon=100: {tool} sets neither miimon nor ARP monitoring, and NetworkManager \
                 then monitors with miimon=100 (the kernel's and lagd's default is 0)"
            ));
        }
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
            let mark = if d.changes_behaviour {
                " [changes behaviour]"
            } else {
                ""
            };
            let _ = writeln!(s, "# not carried over: {}{mark}", d.what);
        }
        for n in &self.notes {
            let _ = writeln!(s, "# note: {n}");
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
            } else if k == "arp_ip_target" || k == "ns_ip6_target" {
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

/// Why a setting of the bond is the system's, not lagd's, or `None` when it is not one of
/// those: addressing (addresses, routes, DNS, DHCP, router advertisements) and the source
/// tool's bookkeeping. Keys are compared without case, `-` and `_`, and by whole word or known
/// prefix (a `mac-address-denylist` is not an address).
fn system_reason(key: &str) -> Option<&'static str> {
    let k: String = key
        .chars()
        .filter(|c| !matches!(c, '-' | '_'))
        .map(|c| c.to_ascii_lowercase())
        .collect();
    // Numbered or suffixed forms: IPADDR0, address1, GATEWAY6, DNS2, dhcp4-overrides.
    let prefixes = [
        "ipaddr",
        "prefix",
        "netmask",
        "gateway",
        "dns",
        "dhcp",
        "ipv4",
        "ipv6",
        "route",
        "address",
        "nameserver",
        "domain",
        "defroute",
        "peerdns",
        "peerroutes",
        "linklocal",
        "acceptra",
        "ipforward",
        "ipmasquerade",
        "routingpolicy",
        "broadcast",
    ];
    let exact = [
        "bootproto",
        "method",
        "search",
        "mdns",
        "llmnr",
        "ntp",
        "ntpservers",
    ];
    let is_mac = k.starts_with("mac") || k.contains("macaddress") || k.starts_with("hwaddr");
    if !is_mac
        && (exact.contains(&k.as_str())
            || prefixes.iter().any(|a| {
                k.starts_with(a)
                    && k[a.len()..]
                        .chars()
                        .all(|c| c.is_ascii_digit() || c.is_ascii_alphabetic())
            }))
    {
        return Some(
            "addresses, routes and DNS are set on the bond interface by the system, not by lagd",
        );
    }
    let boot = [
        "onboot",
        "autoconnect",
        "autoconnectports",
        "autoconnectslaves",
        "autoconnectpriority",
        "nmcontrolled",
        "uuid",
        "id",
        "name",
        "type",
        "state",
        "userctl",
        "renderer",
        "version",
        "bondingmaster",
        "zone",
        "description",
        "timestamp",
        "permissions",
        "optional",
        "requiredforonline",
        "activationpolicy",
        "activationmode",
        "proxymethod",
        "browseronly",
        "startmode",
    ];
    if boot.contains(&k.as_str()) {
        return Some("bookkeeping of the tool that owned the bond; lagd starts from its unit");
    }
    None
}

/// Checks a bond option with lagd's parser; a value lagd refuses becomes a dropped setting.
/// An interface of this host, for members a file names by pattern, MAC or driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostLink {
    /// The interface name.
    pub name: String,
    /// Its MAC (lower case), when it has one.
    pub mac: Option<String>,
    /// Its driver's name, when sysfs tells.
    pub driver: Option<String>,
}

/// This network namespace's interfaces, from `/sys/class/net` (reading only). Empty when sysfs
/// cannot be read.
pub fn host_links() -> Vec<HostLink> {
    let Ok(dir) = std::fs::read_dir("/sys/class/net") else {
        return Vec::new();
    };
    let mut links: Vec<HostLink> = dir
        .flatten()
        .map(|e| {
            let path = e.path();
            let mac = std::fs::read_to_string(path.join("address"))
                .ok()
                .map(|m| m.trim().to_ascii_lowercase())
                .filter(|m| !m.is_empty());
            let driver = std::fs::read_link(path.join("device/driver"))
                .ok()
                .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()));
            HostLink {
                name: e.file_name().to_string_lossy().into_owned(),
                mac,
                driver,
            }
        })
        .collect();
    links.sort_by(|a, b| a.name.cmp(&b.name));
    links
}

/// Whether `name` matches the shell-style `pattern` (`*`, `?`, `[a-z]`, `[!0-9]`).
fn glob_match(pattern: &str, name: &str) -> bool {
    fn at(p: &[char], n: &[char]) -> bool {
        match p.first() {
            None => n.is_empty(),
            Some('*') => (0..=n.len()).any(|i| at(&p[1..], &n[i..])),
            Some('?') => !n.is_empty() && at(&p[1..], &n[1..]),
            Some('[') => {
                let Some(close) = p.iter().skip(1).position(|&c| c == ']').map(|i| i + 1) else {
                    return n.first() == Some(&'[') && at(&p[1..], &n[1..]);
                };
                let Some(&c) = n.first() else { return false };
                let mut set = &p[1..close];
                let negate = matches!(set.first(), Some('!' | '^'));
                if negate {
                    set = &set[1..];
                }
                let mut hit = false;
                let mut i = 0;
                while i < set.len() {
                    if i + 2 < set.len() && set[i + 1] == '-' {
                        hit |= set[i] <= c && c <= set[i + 2];
                        i += 3;
                    } else {
                        hit |= set[i] == c;
                        i += 1;
                    }
                }
                hit != negate && at(&p[close + 1..], &n[1..])
            }
            Some(&c) => n.first() == Some(&c) && at(&p[1..], &n[1..]),
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    at(&p, &n)
}

/// Whether a name is a pattern rather than an interface name.
fn is_pattern(name: &str) -> bool {
    name.contains(['*', '?', '['])
}

/// How a file names a member when not by interface name.
#[derive(Debug, Clone, Copy)]
enum Selector<'a> {
    /// A shell-style pattern of interface names.
    Name(&'a str),
    /// The interface's MAC.
    Mac(&'a str),
    /// The interface's driver (a pattern).
    Driver(&'a str),
}

/// The interfaces of `host` that every selector matches, by name. The bond's members are fixed
/// at import: an interface that appears later is not added, as the source tool would.
fn resolve_on_host(host: &[HostLink], selectors: &[Selector<'_>]) -> Vec<String> {
    host.iter()
        .filter(|l| {
            selectors.iter().all(|s| match *s {
                Selector::Name(p) => glob_match(p, &l.name),
                Selector::Mac(m) => l.mac.as_deref() == Some(m.to_ascii_lowercase().as_str()),
                Selector::Driver(d) => l.driver.as_deref().is_some_and(|x| glob_match(d, x)),
            })
        })
        .map(|l| l.name.clone())
        .collect()
}

/// A mode lagd refuses fails the import (the bond would run another mode); any other refused
/// value is a dropped setting that changes behaviour.
fn take_option(out: &mut Imported, key: &str, value: &str, origin: &str) {
    let mut probe = BondOptions::default();
    match probe.set(key, value) {
        Ok(()) => out.set(key, value),
        Err(e) if key == "mode" => {
            out.refused_mode.get_or_insert_with(|| {
                format!(
                    "{origin}: '{value}' is not a bonding mode ({}); the bond would run another \
                 mode, so nothing is imported",
                    e.reason
                )
            });
        }
        Err(e) => out.drop_setting(format!("{origin}: {}", e.reason)),
    }
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

/// A systemd time span (`100ms`, `1s`, `2min`; a bare number is seconds, or milliseconds with
/// `bare_ms`) in milliseconds.
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

// ---------------------------------------------------------------------------------------------

/// Reads a bond from `files` (all of one dialect; guessed from the first file when `dialect`
/// is `None`). `bond` picks one when the files define several. Members given by pattern, MAC or
/// driver are resolved against this host's interfaces.
pub fn import(
    dialect: Option<Dialect>,
    files: &[(PathBuf, String)],
    bond: Option<&str>,
) -> Result<(Dialect, Imported), ImportError> {
    import_on(dialect, files, bond, &host_links())
}

/// [`import`], resolving members given by pattern, MAC or driver against `host`.
pub fn import_on(
    dialect: Option<Dialect>,
    files: &[(PathBuf, String)],
    bond: Option<&str>,
    host: &[HostLink],
) -> Result<(Dialect, Imported), ImportError> {
    let Some((first, text)) = files.first() else {
        return Err(error(Path::new("-"), None, "no files"));
    };
    let dialect = match dialect {
        Some(d) => d,
        None => match Dialect::guess(first, text) {
            Some(d) => d,
            None => {
                return Err(error(
                    first,
                    None,
                    match unsupported(text) {
                        Some(what) => format!("{what}: this format is not supported"),
                        None => format!(
                            "cannot tell the dialect: give --from {}",
                            Dialect::ALL.map(Dialect::name).join("|")
                        ),
                    },
                ));
            }
        },
    };
    let mut out = match dialect {
        Dialect::Ifcfg => ifcfg::import_ifcfg(files, bond)?,
        Dialect::NmKeyfile => nm::import_nm(files, bond)?,
        Dialect::Networkd => networkd::import_networkd(files, bond, host)?,
        Dialect::Netplan => netplan::import_netplan(files, bond, host)?,
        Dialect::Nmstate => nmstate::import_nmstate(files, bond)?,
        Dialect::Teamd => teamd::import_teamd(files)?,
        Dialect::Ifupdown => ifupdown::import_ifupdown(files, bond, host)?,
    };
    if let Some(m) = out.refused_mode.take() {
        return Err(error(first, None, m));
    }
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

/// Formats that hold bonds but that lagctl import does not read, recognised by their text.
fn unsupported(text: &str) -> Option<&'static str> {
    let has = |w: &str| text.lines().any(|l| l.trim_start().starts_with(w));
    if has("ifconfig_lagg") || has("cloned_interfaces=\"lagg") {
        Some("FreeBSD rc.conf lagg interfaces")
    } else if text.contains("ovs-vsctl") || text.contains("add-bond") {
        Some("Open vSwitch bonds (ovs-vsctl add-bond)")
    } else if has("set interfaces bonding") || has("set interfaces aggregated-ethernet") {
        Some("a router's bonding commands (VyOS/Junos set interfaces)")
    } else if has("New-NetLbfoTeam") {
        Some("Windows NIC teaming (New-NetLbfoTeam)")
    } else {
        None
    }
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
    let config = Config::from_toml(&toml, None).map_err(|e| {
        CliError::Usage(format!(
            "the imported configuration is not one lagd accepts: {e}\n{toml}"
        ))
    })?;
    let findings = if args.check {
        crate::check::check(&config)
    } else {
        Vec::new()
    };
    match &args.output {
        Some(p) => std::fs::write(p, toml.as_bytes()).map_err(CliError::Io)?,
        None => io::stdout()
            .write_all(toml.as_bytes())
            .map_err(CliError::Io)?,
    }
    for f in &findings {
        eprintln!("{f}");
    }
    if crate::check::failed(&findings) {
        return Err(CliError::Failed(anyhow::anyhow!(
            "written, but the check against this host found errors (above)"
        )));
    }
    lossy_result(&imported)
}

/// `Err(Lossy)` naming what changes behaviour when the import lost it, else `Ok`.
fn lossy_result(imported: &Imported) -> Result<(), CliError> {
    let lost: Vec<&str> = imported
        .dropped
        .iter()
        .filter(|d| d.changes_behaviour)
        .map(|d| d.what.as_str())
        .collect();
    if lost.is_empty() {
        return Ok(());
    }
    Err(CliError::Lossy(format!(
        "written, but {} setting(s) that change the bond's behaviour did not carry over:\n  {}",
        lost.len(),
        lost.join("\n  ")
    )))
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
    fn system_settings_and_patterns() {
        for key in [
            "IPADDR0", "address1", "Address", "GATEWAY", "dhcp4", "DNS2", "method",
        ] {
            assert!(system_reason(key).unwrap().contains("addresses"), "{key}");
        }
        // A MAC (or a MAC denylist) is not an address; a hash policy is not a prefix.
        for key in [
            "MACAddress",
            "mac-address-denylist",
            "HWADDR",
            "xmit_hash_policy",
        ] {
            assert!(system_reason(key).is_none(), "{key}");
        }
        assert!(glob_match("enp1s0f*", "enp1s0f1"));
        assert!(glob_match("eth[0-3]", "eth2") && !glob_match("eth[!0-3]", "eth2"));
        assert!(!glob_match("enp1s0f?", "enp1s0f10"));
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
