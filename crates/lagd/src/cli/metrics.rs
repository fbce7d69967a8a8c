//! `lagctl metrics [BOND]`: a running bond's metrics in the Prometheus exposition format, as
//! lagd's metrics listener serves them (whether or not the listener is on).

use std::io::{self, Write};
use std::path::PathBuf;

use super::CliError;
use super::show::{ShowArgs, socket_path_for};
use crate::control::status_at;

/// Arguments of `lagctl metrics`.
#[derive(Debug, Clone, clap::Args)]
pub struct MetricsArgs {
    /// The bond; may be left out when only one lagd runs.
    pub bond: Option<String>,
    /// The control socket (default: /run/lagd/BOND.sock).
    #[arg(long)]
    pub control: Option<PathBuf>,
    /// Print the OpenMetrics text format instead of Prometheus's (0.0.4).
    #[arg(long)]
    pub openmetrics: bool,
}

/// `lagctl metrics`.
pub fn main(args: MetricsArgs) -> Result<(), CliError> {
    let path = socket_path_for(&ShowArgs {
        bond: args.bond,
        json: false,
        control: args.control,
    })?;
    let status = status_at(&path)?;
    let text = if args.openmetrics {
        crate::metrics::render_openmetrics(&status)
    } else {
        crate::metrics::render(&status)
    };
    io::stdout()
        .write_all(text.as_bytes())
        .map_err(CliError::Io)
}
