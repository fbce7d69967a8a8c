//! Why planning failed ([`PlanError`]).

use core::fmt;

use super::csv;
use crate::capture::CaptureError;

/// Why planning failed.
#[derive(Debug)]
pub enum PlanError {
    /// The configuration is not usable.
    Config(String),
    /// The capture could not be read (the error names the byte offset).
    Capture(CaptureError),
    /// The flow list could not be read (the error names the line).
    Csv(csv::CsvError),
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Config(m) => f.write_str(m),
            Self::Capture(e) => write!(f, "capture {e}"),
            Self::Csv(e) => write!(f, "flow list {e}"),
        }
    }
}

impl std::error::Error for PlanError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Config(_) => None,
            Self::Capture(e) => Some(e),
            Self::Csv(e) => Some(e),
        }
    }
}
