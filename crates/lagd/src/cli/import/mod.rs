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

mod ifcfg;
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
        Dialect::Ifcfg => ifcfg::import_ifcfg(files, bond)?,
        Dialect::NmKeyfile => nm::import_nm(files, bond)?,
        Dialect::Networkd => networkd::import_networkd(files, bond)?,
        Dialect::Netplan => netplan::import_netplan(files, bond)?,
        Dialect::Nmstate => nmstate::import_nmstate(files, bond)?,
        Dialect::Teamd => teamd::import_teamd(files)?,
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
