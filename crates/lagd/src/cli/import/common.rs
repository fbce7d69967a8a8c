//! What every dialect's reader shares: the imported bond and what was dropped, errors, the
//! host's interfaces for members named by pattern, MAC or driver, and the small parsers (INI,
//! YAML, time spans, booleans) several formats use.

pub(super) use std::fmt::Write as _;
pub(super) use std::path::{Path, PathBuf};

pub(super) use lagd_proto::bond::BondOptions;
pub(super) use yaml_rust2::{Yaml, YamlLoader};

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
    pub(super) refused_mode: Option<String>,
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

pub(super) fn error(file: &Path, line: Option<usize>, message: impl Into<String>) -> ImportError {
    ImportError {
        file: file.to_path_buf(),
        line,
        message: message.into(),
    }
}

impl Imported {
    pub(super) fn set(&mut self, key: &str, value: impl Into<String>) {
        let value = value.into();
        match self.options.iter_mut().find(|(k, _)| k == key) {
            Some(e) => e.1 = value,
            None => self.options.push((key.to_owned(), value)),
        }
    }

    pub(super) fn get(&self, key: &str) -> Option<&str> {
        self.options
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// A setting that does not carry over and whose loss changes the bond's behaviour.
    pub(super) fn drop_setting(&mut self, what: impl Into<String>) {
        self.dropped.push(Dropped {
            what: what.into(),
            changes_behaviour: true,
        });
    }

    /// A setting that stays the system's (addresses, routes, bookkeeping): not lagd's to
    /// carry, and leaving it out of lagd's file changes nothing about the bond.
    pub(super) fn drop_system(&mut self, what: impl Into<String>) {
        self.dropped.push(Dropped {
            what: what.into(),
            changes_behaviour: false,
        });
    }

    /// A setting dropped with the reason [`system_reason`] gives for `key`, or as one lagd does
    /// not know (which may change behaviour).
    pub(super) fn drop_unknown(&mut self, what: impl std::fmt::Display, key: &str) {
        match system_reason(key) {
            Some(r) => self.drop_system(format!("{what}: {r}")),
            None => self.drop_setting(format!("{what}: not a bond setting lagd knows")),
        }
    }

    pub(super) fn note(&mut self, what: impl Into<String>) {
        self.notes.push(what.into());
    }

    /// Whether something that changes the bond's behaviour did not carry over.
    pub fn loses_behaviour(&self) -> bool {
        self.dropped.iter().any(|d| d.changes_behaviour)
    }

    /// NetworkManager's bond default (also for ifcfg files and nmstate, which NetworkManager
    /// applies): `miimon=100` unless the profile sets miimon or ARP monitoring.
    pub(super) fn networkmanager_defaults(&mut self, tool: &str) {
        let arp = self.get("arp_interval").is_some_and(|v| v != "0");
        if self.get("miimon").is_none() && !arp {
            self.set("miimon", "100");
            self.note(format!(
                "miimon=100: {tool} sets neither miimon nor ARP monitoring, and NetworkManager \
                 then monitors with miimon=100 (the kernel's and lagd's default is 0)"
            ));
        }
    }

    pub(super) fn add_member(&mut self, m: &str) {
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
pub(super) fn quote(s: &str) -> String {
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
pub(super) fn system_reason(key: &str) -> Option<&'static str> {
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
pub(super) fn glob_match(pattern: &str, name: &str) -> bool {
    pub(super) fn at(p: &[char], n: &[char]) -> bool {
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
pub(super) fn is_pattern(name: &str) -> bool {
    name.contains(['*', '?', '['])
}

/// How a file names a member when not by interface name.
#[derive(Debug, Clone, Copy)]
pub(super) enum Selector<'a> {
    /// A shell-style pattern of interface names.
    Name(&'a str),
    /// The interface's MAC.
    Mac(&'a str),
    /// The interface's driver (a pattern).
    Driver(&'a str),
}

/// The interfaces of `host` that every selector matches, by name. The bond's members are fixed
/// at import: an interface that appears later is not added, as the source tool would.
pub(super) fn resolve_on_host(host: &[HostLink], selectors: &[Selector<'_>]) -> Vec<String> {
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
pub(super) fn take_option(out: &mut Imported, key: &str, value: &str, origin: &str) {
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
pub(super) fn ini(
    path: &Path,
    text: &str,
) -> Result<Vec<(usize, String, String, String)>, ImportError> {
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

pub(super) type Ini = Vec<(usize, String, String, String)>;

pub(super) fn ini_get<'a>(entries: &'a Ini, section: &str, key: &str) -> Option<&'a str> {
    entries
        .iter()
        .rev()
        .find(|(_, s, k, _)| s == section && k == key)
        .map(|(_, _, _, v)| v.as_str())
}

/// A systemd time span (`100ms`, `1s`, `2min`; a bare number is seconds, or milliseconds with
/// `bare_ms`) in milliseconds.
pub(super) fn timespan_ms(v: &str, bare_ms: bool) -> Option<u64> {
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

pub(super) fn yes_no(v: &str) -> Option<&'static str> {
    match v.to_ascii_lowercase().as_str() {
        "yes" | "true" | "on" | "1" => Some("1"),
        "no" | "false" | "off" | "0" => Some("0"),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// YAML (netplan, nmstate)

pub(super) fn yaml_text(y: &Yaml) -> Option<String> {
    match y {
        Yaml::String(s) | Yaml::Real(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Boolean(b) => Some(if *b { "1" } else { "0" }.to_owned()),
        _ => None,
    }
}

pub(super) fn load_yaml(path: &Path, text: &str) -> Result<Yaml, ImportError> {
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

    pub(super) fn parse(s: &str) -> Option<Self> {
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
