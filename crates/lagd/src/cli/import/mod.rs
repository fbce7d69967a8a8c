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

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::CliError;
use crate::config::Config;

mod common;
mod ifcfg;
mod ifupdown;
mod netplan;
mod networkd;
mod nm;
mod nmstate;
mod teamd;

use common::*;
pub use common::{Dialect, Dropped, HostLink, ImportError, Imported, host_links};

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
