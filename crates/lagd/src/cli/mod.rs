//! `lagctl` subcommands. Each module holds its clap arguments, a `main` that the binary calls,
//! and the logic as functions over readers and writers, so tests can drive it without a process.

pub mod control;
mod error;
pub mod explain;
pub mod export;
pub mod hash;
pub mod import;
pub mod lacp;
pub mod metrics;
pub mod plan;
pub mod show;
pub mod stop;
pub mod upgrade;

pub use error::{CliError, EXIT_FAILURE, EXIT_LOSSY, EXIT_UNHEALTHY, EXIT_USAGE};
