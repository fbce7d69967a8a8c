//! How a subcommand fails: the error type and the exit codes it maps to.

use std::fmt;
use std::io;

/// Exit code for a usage or input error (bad flag, bad policy, bad input line, bad config).
pub const EXIT_USAGE: u8 = 2;
/// Exit code for an operational failure.
pub const EXIT_FAILURE: u8 = 1;
/// Exit code for a diagnosis that found the bond unhealthy (`lagctl lacp doctor`).
pub const EXIT_UNHEALTHY: u8 = 3;
/// Exit code for a conversion that was written but left out settings that change the bond's
/// behaviour (`lagctl import`, `lagctl export`).
pub const EXIT_LOSSY: u8 = 4;

/// Why a subcommand failed, which decides the exit code.
#[derive(Debug)]
pub enum CliError {
    /// The user's input or arguments are wrong: exit code 2.
    Usage(String),
    /// Reading or writing failed: exit code 1, except a broken pipe, which is not an error.
    Io(io::Error),
    /// Anything else that went wrong while working: exit code 1.
    Failed(anyhow::Error),
    /// The subcommand ran and found the bond unhealthy (`lagctl lacp doctor`): exit code 3.
    Unhealthy,
    /// The conversion was written but lost settings that change behaviour (listed in the
    /// message): exit code 4.
    Lossy(String),
}

impl CliError {
    /// The process exit code for this error (`None`: exit successfully, e.g. broken pipe).
    pub fn exit_code(&self) -> Option<u8> {
        match self {
            Self::Usage(_) => Some(EXIT_USAGE),
            Self::Io(e) if e.kind() == io::ErrorKind::BrokenPipe => None,
            Self::Io(_) | Self::Failed(_) => Some(EXIT_FAILURE),
            Self::Unhealthy => Some(EXIT_UNHEALTHY),
            Self::Lossy(_) => Some(EXIT_LOSSY),
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Usage(m) => f.write_str(m),
            Self::Io(e) => write!(f, "{e}"),
            Self::Failed(e) => write!(f, "{e:#}"),
            Self::Unhealthy => f.write_str("not healthy (see the findings above)"),
            Self::Lossy(m) => f.write_str(m),
        }
    }
}

impl From<anyhow::Error> for CliError {
    fn from(e: anyhow::Error) -> Self {
        Self::Failed(e)
    }
}
