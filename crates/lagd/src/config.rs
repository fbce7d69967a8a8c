//! The daemon's configuration: from the command line (`--bond --members --opts`, with the
//! kernel's option string verbatim) or from a TOML file.
//!
//! A file looks like this; `[options]` takes every bonding option by its kernel name:
//!
//! ```toml
//! bond = "bond0"
//! members = ["eth0", "eth1"]
//! # mac = "02:00:00:00:00:01"   # default: the first member's permanent MAC
//! # mtu = 9000                  # default: the first member's MTU; applied to every member
//! # control = "/run/lagd/bond0.sock" # default: /run/lagd/netns-N/bond0.sock (per netns)
//! # control_group = "adm"            # this group may read the status (default: root only)
//! # metrics_listen = "127.0.0.1:9105" # Prometheus metrics (off by default; or "unix:/PATH")
//! # metrics_allow_remote = false      # a non-loopback metrics_listen needs this set to true
//!
//! [options]
//! mode = "802.3ad"
//! miimon = 100
//! xmit_hash_policy = "layer3+4"
//! ```
//!
//! Every error names the key, and for files the line; a bad configuration changes nothing.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use lagd_proto::bond::BondOptions;
use lagd_proto::wire::EthernetAddress;
use serde::Deserialize;
use toml::Spanned;

pub use crate::control::Endpoint;

/// Where `lagd` listens for `lagctl` by default: the abstract socket `@lagd/<bond>`, which
/// belongs to the network namespace.
pub fn default_control(bond: &str) -> Endpoint {
    Endpoint::default_for(bond)
}

/// The id of group `name` (a name in `/etc/group`, or a number).
pub fn resolve_group(name: &str) -> Result<u32, String> {
    if let Ok(gid) = name.parse::<u32>() {
        return Ok(gid);
    }
    let groups =
        std::fs::read_to_string("/etc/group").map_err(|e| format!("reading /etc/group: {e}"))?;
    groups
        .lines()
        .filter_map(|l| {
            let mut f = l.split(':');
            let n = f.next()?;
            let gid = f.nth(1)?.parse::<u32>().ok()?;
            (n == name).then_some(gid)
        })
        .next()
        .ok_or_else(|| format!("no group '{name}' in /etc/group"))
}

use crate::metrics::MetricsListen;

/// A validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// The bond (TAP) interface name.
    pub bond: String,
    /// Member interface names, in enslave order.
    pub members: Vec<String>,
    /// The bonding options.
    pub options: BondOptions,
    /// The bond's MAC, if configured.
    pub mac: Option<EthernetAddress>,
    /// The MTU for the bond and its members, if configured.
    pub mtu: Option<u32>,
    /// The control socket.
    pub control: Endpoint,
    /// The group that may read the status on the control socket (besides root).
    pub control_group: Option<u32>,
    /// The file the configuration came from (what SIGHUP and `lagctl reload` read again).
    pub file: Option<PathBuf>,
    /// Where to serve Prometheus metrics (off when `None`).
    pub metrics: Option<MetricsListen>,
    /// Warnings the options produced (the kernel would log them), and lagd's about
    /// combinations that hurt.
    pub warnings: Vec<String>,
}

/// A configuration error: the key, the line (files only) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file, if the configuration came from one.
    pub file: Option<PathBuf>,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// The key concerned, when known.
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(file) = &self.file {
            write!(f, "{}", file.display())?;
            if let Some(line) = self.line {
                write!(f, ":{line}")?;
            }
            f.write_str(": ")?;
        }
        if let Some(key) = &self.key {
            if !self.message.starts_with("option '") {
                write!(f, "'{key}': ")?;
            }
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigError {}

fn check_ifname(name: &str) -> Result<(), String> {
    lagd_proto::port::check_interface_name(name)
}

fn validate_members(members: &[String]) -> Result<(), String> {
    if members.is_empty() {
        return Err("at least one member is needed".into());
    }
    for (i, m) in members.iter().enumerate() {
        check_ifname(m)?;
        if members[..i].contains(m) {
            return Err(format!("'{m}' is listed twice"));
        }
    }
    Ok(())
}

impl Config {
    /// Builds a configuration from command-line values.
    pub fn from_args(
        bond: &str,
        members: &str,
        opts: &str,
        mac: Option<&str>,
        mtu: Option<u32>,
        control: Option<&Path>,
    ) -> Result<Self, ConfigError> {
        let err = |key: &str, message: String| ConfigError {
            file: None,
            line: None,
            key: Some(key.to_owned()),
            message,
        };
        check_ifname(bond).map_err(|m| err("--bond", m))?;
        let members: Vec<String> = members
            .split(',')
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .map(str::to_owned)
            .collect();
        validate_members(&members).map_err(|m| err("--members", m))?;
        if members.iter().any(|m| m == bond) {
            return Err(err("--members", format!("'{bond}' is the bond itself")));
        }
        let (options, mut warnings) = BondOptions::parse_opts(opts).map_err(|e| ConfigError {
            file: None,
            line: None,
            key: Some(e.key.clone()),
            message: e.to_string(),
        })?;
        warnings.extend(options.member_warnings(&members));
        let mac = mac
            .map(|m| parse_mac(m).map_err(|e| err("--mac", e)))
            .transpose()?;
        Self::check_mtu(mtu).map_err(|m| err("--mtu", m))?;
        Ok(Self {
            control: control.map_or_else(
                || default_control(bond),
                |c| Endpoint::parse(&c.to_string_lossy()),
            ),
            control_group: None,
            file: None,
            bond: bond.to_owned(),
            members,
            options,
            mac,
            mtu,
            metrics: None,
            warnings,
        })
    }

    /// Serves metrics on `addr` (`--metrics`): loopback or a Unix socket unless
    /// `allow_remote`.
    pub fn set_metrics(&mut self, addr: &str, allow_remote: bool) -> Result<(), ConfigError> {
        self.metrics =
            Some(
                MetricsListen::parse(addr, allow_remote).map_err(|message| ConfigError {
                    file: None,
                    line: None,
                    key: Some("--metrics".to_owned()),
                    message,
                })?,
            );
        Ok(())
    }

    fn check_mtu(mtu: Option<u32>) -> Result<(), String> {
        match mtu {
            Some(m) if !(68..=65535).contains(&m) => {
                Err(format!("{m} is out of range (68 to 65535)"))
            }
            _ => Ok(()),
        }
    }

    /// Reads a TOML configuration file.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: Some(path.to_path_buf()),
            line: None,
            key: None,
            message: format!("cannot read: {e}"),
        })?;
        Self::from_toml(&text, Some(path))
    }

    /// Parses TOML text (`file` names it in errors).
    pub fn from_toml(text: &str, file: Option<&Path>) -> Result<Self, ConfigError> {
        let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
        let err = |span: Option<std::ops::Range<usize>>, key: &str, message: String| ConfigError {
            file: file.map(Path::to_path_buf),
            line: span.map(|s| line_of(s.start)),
            key: (!key.is_empty()).then(|| key.to_owned()),
            message,
        };
        let raw: RawConfig = toml::from_str(text).map_err(|e| {
            let message = e.message().trim().to_owned();
            let named = message.split('`').nth(1).filter(|_| {
                message.starts_with("unknown field") || message.starts_with("missing field")
            });
            // A value of the wrong type: the key is what its line assigns.
            let assigned = e.span().and_then(|sp| {
                let start = text[..sp.start.min(text.len())]
                    .rfind('\n')
                    .map_or(0, |i| i + 1);
                let line = text[start..].lines().next()?;
                let key = line.split_once('=')?.0.trim();
                (!key.is_empty() && !key.starts_with('[')).then_some(key)
            });
            err(e.span(), named.or(assigned).unwrap_or(""), message.clone())
        })?;
        check_ifname(raw.bond.get_ref()).map_err(|m| err(Some(raw.bond.span()), "bond", m))?;
        validate_members(raw.members.get_ref())
            .map_err(|m| err(Some(raw.members.span()), "members", m))?;
        let mut options = BondOptions::default();
        for (key, value) in &raw.options {
            let text = match value.get_ref() {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Boolean(b) if BondOptions::takes_boolean(key) => {
                    u8::from(*b).to_string()
                }
                toml::Value::Boolean(b) => {
                    return Err(err(
                        Some(value.span()),
                        key,
                        format!(
                            "option '{key}': {b} is not a value of this option (only on/off options take true or false)"
                        ),
                    ));
                }
                toml::Value::Array(items) => items
                    .iter()
                    .map(|v| match v {
                        toml::Value::String(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join(","),
                // A per-member table: `actor_port_prio = { eth0 = 100 }`.
                toml::Value::Table(t) => t
                    .iter()
                    .map(|(member, v)| format!("{member}:{v}"))
                    .collect::<Vec<_>>()
                    .join(","),
                other => {
                    return Err(err(
                        Some(value.span()),
                        key,
                        format!("option '{key}': unsupported value {other}"),
                    ));
                }
            };
            options
                .set(key, &text)
                .map_err(|e| err(Some(value.span()), key, e.to_string()))?;
        }
        let mut warnings = options.finish().map_err(|e| {
            let span = raw.options.get(&e.key).map(Spanned::span);
            err(span, &e.key.clone(), e.to_string())
        })?;
        warnings.extend(options.member_warnings(raw.members.get_ref()));
        let allow_remote = raw
            .metrics_allow_remote
            .as_ref()
            .is_some_and(|a| *a.get_ref());
        let metrics = match &raw.metrics_listen {
            Some(m) => Some(
                MetricsListen::parse(m.get_ref(), allow_remote)
                    .map_err(|e| err(Some(m.span()), "metrics_listen", e))?,
            ),
            None => None,
        };
        let mac = match &raw.mac {
            Some(m) => Some(parse_mac(m.get_ref()).map_err(|e| err(Some(m.span()), "mac", e))?),
            None => None,
        };
        let mtu = match &raw.mtu {
            Some(m) => {
                let v = u32::try_from(*m.get_ref()).unwrap_or(0);
                Self::check_mtu(Some(v)).map_err(|e| err(Some(m.span()), "mtu", e))?;
                Some(v)
            }
            None => None,
        };
        let control_group = match &raw.control_group {
            Some(g) => Some(
                resolve_group(g.get_ref()).map_err(|e| err(Some(g.span()), "control_group", e))?,
            ),
            None => None,
        };
        let bond = raw.bond.into_inner();
        Ok(Self {
            control: raw.control.map_or_else(
                || default_control(&bond),
                |c| Endpoint::parse(&c.into_inner().to_string_lossy()),
            ),
            control_group,
            file: file.map(Path::to_path_buf),
            bond,
            members: raw.members.into_inner(),
            options,
            mac,
            mtu,
            metrics,
            warnings,
        })
    }
}

fn parse_mac(text: &str) -> Result<EthernetAddress, String> {
    let mac: EthernetAddress = text
        .parse()
        .map_err(|_| format!("'{text}' is not a MAC address (aa:bb:cc:dd:ee:ff)"))?;
    if mac.is_multicast() || mac.is_zero() {
        return Err(format!(
            "'{text}' cannot be an interface MAC (multicast or zero)"
        ));
    }
    Ok(mac)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    bond: Spanned<String>,
    members: Spanned<Vec<String>>,
    mac: Option<Spanned<String>>,
    mtu: Option<Spanned<i64>>,
    control: Option<Spanned<PathBuf>>,
    control_group: Option<Spanned<String>>,
    metrics_listen: Option<Spanned<String>>,
    metrics_allow_remote: Option<Spanned<bool>>,
    #[serde(default)]
    options: BTreeMap<String, Spanned<toml::Value>>,
}

#[cfg(test)]
mod test {
    use super::*;
    use lagd_proto::bond::Mode;
    use lagd_proto::hash::HashPolicy;

    #[test]
    fn command_line() {
        let c = Config::from_args(
            "bond0",
            "veth1,veth2",
            "mode=balance-xor xmit_hash_policy=layer3+4 miimon=100",
            None,
            None,
            None,
        )
        .unwrap();
        assert_eq!(c.members, ["veth1", "veth2"]);
        assert_eq!(c.options.mode, Mode::BalanceXor);
        assert_eq!(c.control, Endpoint::Default("bond0".into()));
        assert_eq!(c.control_group, None);
        let e = Config::from_args("bond0", "veth1", "miimon=x", None, None, None).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("miimon"));
        assert!(e.to_string().contains("option 'miimon'"), "{e}");
        let e = Config::from_args("bond0", "", "", None, None, None).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("--members"));
        let e = Config::from_args("bond0", "a,a", "", None, None, None).unwrap_err();
        assert!(e.message.contains("twice"), "{e}");
        let e =
            Config::from_args("bond0", "a", "", Some("01:00:00:00:00:01"), None, None).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("--mac"));
        assert!(Config::from_args("bond0", "a", "", None, Some(20), None).is_err());
        assert!(Config::from_args("a-very-long-bond-name", "a", "", None, None, None).is_err());
    }

    const GOOD: &str = r#"
bond = "bond0"
members = ["eth0", "eth1"]
mtu = 9000

[options]
mode = "active-backup"
miimon = 100
primary = "eth1"
all_slaves_active = true
arp_ip_target = ["10.0.0.1", "10.0.0.2"]
actor_port_prio = { eth0 = 100, eth1 = 200 }
"#;

    #[test]
    fn toml_file() {
        let c = Config::from_toml(GOOD, None).unwrap();
        assert_eq!(c.options.mode, Mode::ActiveBackup);
        assert_eq!(c.options.primary.as_deref(), Some("eth1"));
        assert!(c.options.all_slaves_active);
        assert_eq!(c.options.arp_ip_target.len(), 2);
        assert_eq!(
            c.options.actor_port_prio,
            [("eth0".to_owned(), 100), ("eth1".to_owned(), 200)]
        );
        assert_eq!(c.mtu, Some(9000));
        assert_eq!(c.options.xmit_hash_policy, HashPolicy::Layer2);
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        // Warnings that need the member list.
        let c = Config::from_toml(
            &GOOD.replace("primary = \"eth1\"", "primary = \"eth3\""),
            None,
        )
        .unwrap();
        assert!(
            c.warnings
                .iter()
                .any(|w| w.contains("primary 'eth3' is not a member")),
            "{:?}",
            c.warnings
        );
        let c = Config::from_args(
            "b0",
            "e0,e1",
            "mode=802.3ad lacp_rate=fast min_links=3",
            None,
            None,
            None,
        )
        .unwrap();
        assert!(
            c.warnings
                .iter()
                .any(|w| w.contains("min_links=3 is above the member count (2)")),
            "{:?}",
            c.warnings
        );
    }

    #[test]
    fn control_endpoint_and_group() {
        let c = Config::from_toml(GOOD, Some(Path::new("/etc/lagd/b.toml"))).unwrap();
        assert_eq!(c.control, Endpoint::Default("bond0".into()));
        assert_eq!(c.control_group, None);
        assert_eq!(c.file.as_deref(), Some(Path::new("/etc/lagd/b.toml")));
        let text = GOOD.replace(
            "mtu = 9000",
            "mtu = 9000\ncontrol = \"/run/x.sock\"\ncontrol_group = \"root\"",
        );
        let c = Config::from_toml(&text, None).unwrap();
        assert_eq!(c.control, Endpoint::File("/run/x.sock".into()));
        assert_eq!(c.control_group, Some(0));
        let text = GOOD.replace("mtu = 9000", "mtu = 9000\ncontrol = \"@mine/x\"");
        let c = Config::from_toml(&text, None).unwrap();
        assert_eq!(c.control, Endpoint::Abstract("mine/x".into()));
        let text = GOOD.replace(
            "mtu = 9000",
            "mtu = 9000\ncontrol_group = \"no-such-group-x\"",
        );
        let e = Config::from_toml(&text, None).unwrap_err();
        assert_eq!(
            (e.key.as_deref(), e.line),
            (Some("control_group"), Some(5)),
            "{e}"
        );
        assert_eq!(resolve_group("4242"), Ok(4242));
    }

    #[test]
    fn toml_errors_name_key_and_line() {
        let path = Path::new("/etc/lagd/bond0.toml");
        let bad_value = GOOD.replace("miimon = 100", "miimon = \"often\"");
        let e = Config::from_toml(&bad_value, Some(path)).unwrap_err();
        assert_eq!((e.key.as_deref(), e.line), (Some("miimon"), Some(8)), "{e}");
        assert!(
            e.to_string()
                .starts_with("/etc/lagd/bond0.toml:8: option 'miimon'"),
            "{e}"
        );

        let unknown_option = GOOD.replace("miimon = 100", "miimonn = 100");
        let e = Config::from_toml(&unknown_option, None).unwrap_err();
        assert_eq!(
            (e.key.as_deref(), e.line),
            (Some("miimonn"), Some(8)),
            "{e}"
        );

        let unknown_key = GOOD.replace("mtu = 9000", "mtuu = 9000");
        let e = Config::from_toml(&unknown_key, None).unwrap_err();
        assert_eq!((e.key.as_deref(), e.line), (Some("mtuu"), Some(4)), "{e}");

        let syntax = GOOD.replace("mtu = 9000", "mtu = ");
        let e = Config::from_toml(&syntax, None).unwrap_err();
        assert_eq!(e.line, Some(4), "{e}");

        let missing = GOOD.replace("bond = \"bond0\"\n", "");
        let e = Config::from_toml(&missing, None).unwrap_err();
        assert!(e.to_string().contains("bond"), "{e}");

        let refused = GOOD
            .replace("active-backup", "802.3ad")
            .replace("miimon = 100", "arp_interval = 100");
        let e = Config::from_toml(&refused, None).unwrap_err();
        assert_eq!(
            (e.key.as_deref(), e.line),
            (Some("arp_interval"), Some(8)),
            "{e}"
        );

        // metrics_listen: loopback unless metrics_allow_remote, errors at its line.
        let remote = GOOD.replace("mtu = 9000", "metrics_listen = \"0.0.0.0:9105\"");
        let e = Config::from_toml(&remote, None).unwrap_err();
        assert_eq!(
            (e.key.as_deref(), e.line),
            (Some("metrics_listen"), Some(4)),
            "{e}"
        );
        assert!(e.message.contains("loopback"), "{e}");
        let allowed = GOOD.replace(
            "mtu = 9000",
            "metrics_listen = \"0.0.0.0:9105\"\nmetrics_allow_remote = true",
        );
        assert_eq!(
            Config::from_toml(&allowed, None).unwrap().metrics,
            Some(MetricsListen::Tcp("0.0.0.0:9105".parse().unwrap()))
        );
        assert_eq!(Config::from_toml(GOOD, None).unwrap().metrics, None);

        // `miimon = true` is no 1 ms poll: only on/off options take a boolean.
        let boolean = GOOD.replace("miimon = 100", "miimon = true");
        let e = Config::from_toml(&boolean, None).unwrap_err();
        assert_eq!((e.key.as_deref(), e.line), (Some("miimon"), Some(8)), "{e}");
        // An on/off option does (GOOD has `all_slaves_active = true`).
        assert!(
            Config::from_toml(GOOD, None)
                .unwrap()
                .options
                .all_slaves_active
        );

        // A top-level value of the wrong type names its key and line.
        let wrong_type = GOOD.replace("mtu = 9000", "mtu = \"9000\"");
        let e = Config::from_toml(&wrong_type, None).unwrap_err();
        assert_eq!((e.key.as_deref(), e.line), (Some("mtu"), Some(4)), "{e}");

        // A primary with white space in it is no interface name (and would not survive the
        // option string lagd logs).
        let tab = GOOD.replace("primary = \"eth1\"", "primary = \"eth\\t1\"");
        let e = Config::from_toml(&tab, None).unwrap_err();
        assert_eq!(
            (e.key.as_deref(), e.line),
            (Some("primary"), Some(9)),
            "{e}"
        );

        let bad_mtu = GOOD.replace("mtu = 9000", "mtu = 70000");
        let e = Config::from_toml(&bad_mtu, None).unwrap_err();
        assert_eq!((e.key.as_deref(), e.line), (Some("mtu"), Some(4)), "{e}");
    }
}
