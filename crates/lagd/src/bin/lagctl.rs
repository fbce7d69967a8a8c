//! `lagctl`: lagd's control and analysis tool.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};
use lagd::cli;

/// lagd's control and analysis tool.
#[derive(Parser, Debug)]
#[command(name = "lagctl", version, about)]
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
    /// LACP diagnosis: `lagctl lacp doctor [BOND]`.
    Lacp(cli::lacp::LacpArgs),
    /// Two namespaces joined by shaped veth links, a bond at both ends, TCP through it.
    Lab(Box<cli::lab::LabArgs>),
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
        Command::Lacp(args) => cli::lacp::main(args),
        Command::Lab(args) => cli::lab::main(*args),
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
