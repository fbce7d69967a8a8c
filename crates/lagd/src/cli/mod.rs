//! `lagctl` subcommands, each a pure-ish function over readers and writers so tests can drive
//! them without a process, plus the exit-code convention shared by the binaries.

pub mod hash;

/// Exit code for a usage or input error (bad flag, bad policy, bad input line).
pub const EXIT_USAGE: i32 = 2;
/// Exit code for an operational failure.
pub const EXIT_FAILURE: i32 = 1;
