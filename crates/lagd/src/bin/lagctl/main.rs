//! `lagctl`: lagd's control and analysis tool.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};
use lagd::cli;

mod lab;

/// lagd's control and analysis tool.
///
/// show, set, member, active, reload, events, lacp and upgrade talk to a running lagd over its control socket: by
/// default the abstract Unix socket @lagd/BOND of the current network namespace (lagd
/// --control PATH: give lagctl --control PATH too). One JSON request line, one JSON reply line:
/// {"cmd":"status"}, {"cmd":"set","options":[["miimon","50"]]},
/// {"cmd":"member","member":"eth1","action":"disable"}, {"cmd":"active","member":"eth1"},
/// {"cmd":"reload"}, {"cmd":"events"} (then one JSON line per event); errors come back as
/// {"error":"..."}. Requests are limited to 64 KiB and 2 s; only root may change anything, and
/// lagd's control_group may read the status.
#[derive(Parser, Debug)]
#[command(name = "lagctl", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Hash frames (hex, one per line on stdin) and print the member each would use.
    Hash(cli::hash::HashArgs),
    /// Predict from a capture or flow list how each policy spreads the traffic over the bond.
    Plan(Box<cli::plan::PlanArgs>),
    /// Say which member a flow (or frame) uses under each policy, and why.
    Explain(cli::explain::ExplainArgs),
    /// Show a running bond's status (as /proc/net/bonding/BOND reads), or JSON.
    Show(cli::show::ShowArgs),
    /// Change options of a running bond: `lagctl set [BOND] KEY=VALUE...` (root only).
    Set(cli::control::SetArgs),
    /// Add, remove, disable or enable a member: `lagctl member [BOND] ACTION MEMBER` (root only).
    Member(cli::control::MemberArgs),
    /// Make a member the active one now: `lagctl active [BOND] MEMBER` (root only).
    Active(cli::control::ActiveArgs),
    /// Stream a bond's state changes (links, active member, carrier, LACP, run-time changes).
    Events(cli::control::EventsArgs),
    /// Make lagd read its --config file again and apply what changed (as SIGHUP does).
    Reload(cli::control::ReloadArgs),
    /// Upgrade a running lagd without losing a frame on the kernel path: start the new binary
    /// (`--binary`, default the running one's file as it is on disk now) with the running
    /// one's arguments; it takes the bond over and the old one exits (root only).
    Upgrade(cli::upgrade::UpgradeArgs),
    /// Stop leaving the kernel path to the next lagd: `--unit UNIT` (systemd's `ExecStop=`)
    /// when a restart job runs for the unit, `--leave` always (root only; refused unless a
    /// service manager keeps lagd's descriptors).
    Stop(cli::stop::StopArgs),
    /// Read a bond defined for ifcfg, NetworkManager, systemd-networkd, netplan, nmstate,
    /// teamd or ifupdown (/etc/network/interfaces) and write lagd's TOML (with what does not
    /// carry over, and why; exit code 4 when that changes the bond's behaviour).
    Import(cli::import::ImportArgs),
    /// Write a lagd TOML configuration as the kernel bond's for netplan, NetworkManager,
    /// nmstate, systemd-networkd or ifupdown (exit code 4 when something does not carry over).
    Export(cli::export::ExportArgs),
    /// Print a running bond's metrics in the Prometheus text format.
    Metrics(cli::metrics::MetricsArgs),
    /// LACP diagnosis: `lagctl lacp doctor [BOND]`.
    Lacp(cli::lacp::LacpArgs),
    /// Two namespaces joined by shaped veth links, a bond at both ends, TCP through it.
    Lab(Box<lab::LabArgs>),
    /// Write the man pages and shell completions into a directory (packaging).
    #[command(hide = true)]
    Generate {
        /// The directory.
        dir: std::path::PathBuf,
    },
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Hash(args) => cli::hash::main(args),
        Command::Plan(args) => cli::plan::main(*args),
        Command::Explain(args) => cli::explain::main(args),
        Command::Show(args) => cli::show::main(args),
        Command::Set(args) => cli::control::set(args),
        Command::Member(args) => cli::control::member(args),
        Command::Active(args) => cli::control::active(args),
        Command::Events(args) => cli::control::events(args),
        Command::Reload(args) => cli::control::reload(args),
        Command::Upgrade(args) => cli::upgrade::main(args),
        Command::Stop(args) => cli::stop::main(args),
        Command::Import(args) => cli::import::main(args),
        Command::Export(args) => cli::export::main(args),
        Command::Metrics(args) => cli::metrics::main(args),
        Command::Lacp(args) => cli::lacp::main(args),
        Command::Lab(args) => lab::main(*args),
        Command::Generate { dir } => {
            return match lagd::generate::write_all(Cli::command(), &dir) {
                Ok(_) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("lagctl: writing into {}: {e}", dir.display());
                    ExitCode::FAILURE
                }
            };
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => match e.exit_code() {
            None => ExitCode::SUCCESS,
            Some(code) => {
                eprintln!("lagctl: {e}");
                ExitCode::from(code)
            }
        },
    }
}
