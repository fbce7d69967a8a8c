//! The timers of the standard, as deadlines.

use core::time::Duration;

use crate::time::Instant;

/// A timer of the standard, as a deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Timer(Option<Instant>);

impl Timer {
    /// A timer that is not running.
    pub(crate) const STOPPED: Self = Self(None);

    /// Starts (or restarts) the timer to expire `d` after `now`.
    pub(crate) fn start(&mut self, now: Instant, d: Duration) {
        self.0 = Some(now + d);
    }

    /// Stops the timer.
    pub(crate) fn stop(&mut self) {
        self.0 = None;
    }

    /// Whether the timer runs and has expired at `now`.
    pub(crate) fn expired(&self, now: Instant) -> bool {
        matches!(self.0, Some(t) if t <= now)
    }

    /// Whether the timer runs.
    pub(crate) fn is_running(&self) -> bool {
        self.0.is_some()
    }

    /// When it expires, if it runs.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.0
    }
}
