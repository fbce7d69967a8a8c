//! `lagctl show [BOND] [--json]`: a bond's status, as `/proc/net/bonding/BOND` reads, or JSON.

use std::io::{self, Write};
use std::path::PathBuf;

use super::CliError;
use crate::config::default_control;
use crate::control::{Endpoint, local_bonds, status_at};

/// Arguments of `lagctl show`.
#[derive(Debug, Clone, clap::Args)]
pub struct ShowArgs {
    /// The bond; may be left out when only one lagd runs.
    pub bond: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// The control socket file, or @NAME for an abstract socket (default:
    /// /run/lagd/netns-N/BOND.sock, N this network namespace's inode).
    #[arg(long)]
    pub control: Option<PathBuf>,
}

/// Which endpoint to ask: `--control`, the bond's default, or the only bond with a default
/// endpoint in this network namespace (`bonds` lists them).
fn choose_endpoint(
    args: &ShowArgs,
    bonds: impl FnOnce() -> io::Result<Vec<String>>,
) -> Result<Endpoint, CliError> {
    if let Some(c) = &args.control {
        return Ok(Endpoint::parse(&c.to_string_lossy()));
    }
    if let Some(b) = &args.bond {
        return Ok(default_control(b));
    }
    let mut bonds =
        bonds().map_err(|e| CliError::Failed(anyhow::anyhow!("/proc/net/unix: {e}")))?;
    match bonds.len() {
        0 => Err(CliError::Usage(
            "no bond is running in this network namespace (no socket listens in its directory \
             of /run/lagd; a lagd with --control PATH needs --control PATH here too)"
                .to_owned(),
        )),
        1 => Ok(default_control(&bonds.remove(0))),
        _ => Err(CliError::Usage(format!(
            "several bonds are running in this network namespace ({}): name one",
            bonds.join(", ")
        ))),
    }
}

/// The control endpoint `args` names (or the only running bond's in this network namespace).
pub fn socket_path_for(args: &ShowArgs) -> Result<Endpoint, CliError> {
    choose_endpoint(args, local_bonds)
}

/// `lagctl show`.
pub fn main(args: ShowArgs) -> Result<(), CliError> {
    let path = socket_path_for(&args)?;
    let status = status_at(&path)?;
    let text = if args.json {
        serde_json::to_string_pretty(&status).map_err(|e| CliError::Failed(e.into()))? + "\n"
    } else {
        status.render()
    };
    io::stdout()
        .write_all(text.as_bytes())
        .map_err(CliError::Io)
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn picks_the_endpoint() {
        let args = |bond: Option<&str>, control: Option<&str>| ShowArgs {
            bond: bond.map(str::to_owned),
            json: false,
            control: control.map(PathBuf::from),
        };
        let listed = |names: &[&str]| {
            let v: Vec<String> = names.iter().map(|s| s.to_string()).collect();
            move || Ok(v)
        };
        let e = choose_endpoint(&args(None, None), listed(&[])).unwrap_err();
        assert!(
            matches!(&e, CliError::Usage(m) if m.contains("no bond")),
            "{e}"
        );
        assert_eq!(
            choose_endpoint(&args(None, None), listed(&["bond0"])).unwrap(),
            Endpoint::Default("bond0".into())
        );
        let e = choose_endpoint(&args(None, None), listed(&["bond0", "bond1"])).unwrap_err();
        assert!(e.to_string().contains("bond0, bond1"), "{e}");
        assert_eq!(
            choose_endpoint(&args(Some("bond7"), None), listed(&["bond0"])).unwrap(),
            Endpoint::Default("bond7".into())
        );
        assert_eq!(
            choose_endpoint(&args(Some("bond7"), Some("/tmp/x.sock")), listed(&[])).unwrap(),
            Endpoint::File("/tmp/x.sock".into())
        );
    }
}
