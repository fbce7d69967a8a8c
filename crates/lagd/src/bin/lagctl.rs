//! `lagctl`: lagd's control and analysis tool.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};
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
    /// Show a running bond's status (as /proc/net/bonding/BOND reads), or JSON.
    Show(cli::show::ShowArgs),
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Hash(args) => cli::hash::main(args),
        Command::Show(args) => cli::show::main(args),
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
