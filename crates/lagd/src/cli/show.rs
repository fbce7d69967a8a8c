//! `lagctl show [BOND] [--json]`: a bond's status, as `/proc/net/bonding/BOND` reads, or JSON.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::CliError;
use crate::config::default_control_path;
use crate::daemon::query_status;

/// Arguments of `lagctl show`.
#[derive(Debug, Clone, clap::Args)]
pub struct ShowArgs {
    /// The bond; may be left out when only one lagd runs.
    pub bond: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// The control socket (default: /run/lagd/BOND.sock).
    #[arg(long)]
    pub control: Option<PathBuf>,
}

/// Which socket to ask: `--control`, the bond's default path, or the only one under /run/lagd.
fn socket_path(args: &ShowArgs, run_dir: &Path) -> Result<PathBuf, CliError> {
    if let Some(c) = &args.control {
        return Ok(c.clone());
    }
    if let Some(b) = &args.bond {
        return Ok(default_control_path(b));
    }
    let mut socks: Vec<PathBuf> = std::fs::read_dir(run_dir)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "sock"))
                .collect()
        })
        .unwrap_or_default();
    socks.sort();
    match socks.len() {
        0 => Err(CliError::Usage(format!(
            "no bond is running (no control socket in {})",
            run_dir.display()
        ))),
        1 => Ok(socks.remove(0)),
        _ => {
            let names: Vec<String> = socks
                .iter()
                .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
                .collect();
            Err(CliError::Usage(format!(
                "several bonds are running ({}): name one",
                names.join(", ")
            )))
        }
    }
}

/// The control socket `args` names (or the only running bond's).
pub fn socket_path_for(args: &ShowArgs) -> Result<PathBuf, CliError> {
    socket_path(args, Path::new("/run/lagd"))
}

/// `lagctl show`.
pub fn main(args: ShowArgs) -> Result<(), CliError> {
    let path = socket_path_for(&args)?;
    let status = query_status(&path)?;
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
    fn picks_the_socket() {
        let dir = std::env::temp_dir().join(format!("lagctl-show-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let args = |bond: Option<&str>| ShowArgs {
            bond: bond.map(str::to_owned),
            json: false,
            control: None,
        };
        assert!(
            matches!(socket_path(&args(None), &dir), Err(CliError::Usage(m)) if m.contains("no bond"))
        );
        std::fs::write(dir.join("bond0.sock"), "").unwrap();
        assert_eq!(
            socket_path(&args(None), &dir).unwrap(),
            dir.join("bond0.sock")
        );
        std::fs::write(dir.join("bond1.sock"), "").unwrap();
        let e = socket_path(&args(None), &dir).unwrap_err();
        assert!(e.to_string().contains("bond0, bond1"), "{e}");
        assert_eq!(
            socket_path(&args(Some("bond7")), &dir).unwrap(),
            PathBuf::from("/run/lagd/bond7.sock")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
