//! `lagctl`: lagd's control and analysis tool.
#![forbid(unsafe_code)]

use std::io::{self, BufWriter};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use lagd::cli::{self, EXIT_FAILURE, EXIT_USAGE};
use lagd_proto::hash::HashPolicy;

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
    Hash {
        /// Transmit hash policy: layer2, layer2+3, layer3+4, encap2+3, encap3+4, vlan+srcmac,
        /// ovs-slb or ovs-tcp.
        #[arg(long)]
        policy: HashPolicy,
        /// Number of bond members.
        #[arg(long, default_value_t = 2)]
        members: usize,
        /// Also print which fields fed each hash.
        #[arg(long)]
        explain: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Hash {
            policy,
            members,
            explain,
        } => {
            let args = cli::hash::HashArgs {
                policy,
                members,
                explain,
            };
            let stdout = io::stdout();
            cli::hash::run(args, io::stdin().lock(), BufWriter::new(stdout.lock())).map_err(|e| {
                match e {
                    cli::hash::HashError::Io(io) => (io, EXIT_FAILURE),
                    other => (io::Error::other(other.to_string()), EXIT_USAGE),
                }
            })
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // `lagctl hash < big | head` is not an error.
        Err((e, _)) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err((e, code)) => {
            eprintln!("lagctl: {e}");
            ExitCode::from(code as u8)
        }
    }
}
