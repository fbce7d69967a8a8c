//! lagd's glue: the command-line front ends of `lagd` and `lagctl`.
//!
//! The decisions live in `lagd-proto` (pure) and the system calls in `lagd-sys`; this crate
//! wires them to users: argument parsing, input/output formats and exit codes.
#![forbid(unsafe_code)]

pub mod check;
pub mod cli;
pub mod config;
pub mod control;
pub mod daemon;
pub mod files;
pub mod generate;
pub mod metrics;
pub mod status;
