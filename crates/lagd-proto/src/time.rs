//! Time as the pure core sees it: a point given by the caller, never read from a clock.
//!
//! [`Instant`] counts microseconds from an arbitrary epoch the caller chooses (the daemon uses
//! a monotonic clock, tests start at 0, the planner uses capture timestamps). Durations are
//! `core::time::Duration`.

use core::fmt;
use core::ops::{Add, AddAssign, Sub};
use core::time::Duration;

/// A point in time, in microseconds since the caller's epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

impl Instant {
    /// The epoch.
    pub const ZERO: Self = Self(0);

    /// `us` microseconds after the epoch.
    pub const fn from_micros(us: u64) -> Self {
        Self(us)
    }

    /// `ms` milliseconds after the epoch.
    pub const fn from_millis(ms: u64) -> Self {
        Self(ms.saturating_mul(1000))
    }

    /// `s` seconds after the epoch.
    pub const fn from_secs(s: u64) -> Self {
        Self(s.saturating_mul(1_000_000))
    }

    /// Microseconds since the epoch.
    pub const fn as_micros(self) -> u64 {
        self.0
    }

    /// Milliseconds since the epoch (rounded down).
    pub const fn as_millis(self) -> u64 {
        self.0 / 1000
    }

    /// The time from `earlier` to `self`, zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Self) -> Duration {
        Duration::from_micros(self.0.saturating_sub(earlier.0))
    }
}

/// The earliest of some deadlines, `None` where none is set: how each layer folds the
/// `poll_timeout`s of its parts, in one list (a new timer is one more entry).
pub fn earliest(deadlines: impl IntoIterator<Item = Option<Instant>>) -> Option<Instant> {
    deadlines.into_iter().flatten().min()
}

impl Add<Duration> for Instant {
    type Output = Self;
    fn add(self, d: Duration) -> Self {
        Self(
            self.0
                .saturating_add(u64::try_from(d.as_micros()).unwrap_or(u64::MAX)),
        )
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl Sub for Instant {
    type Output = Duration;
    /// The time between two instants, saturating at zero.
    fn sub(self, earlier: Self) -> Duration {
        self.saturating_since(earlier)
    }
}

impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:06}s", self.0 / 1_000_000, self.0 % 1_000_000)
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn arithmetic_saturates_and_converts() {
        let t = Instant::from_millis(1500);
        assert_eq!(t.as_micros(), 1_500_000);
        assert_eq!(t + Duration::from_millis(500), Instant::from_secs(2));
        assert_eq!(Instant::from_secs(2) - t, Duration::from_millis(500));
        assert_eq!(t - Instant::from_secs(2), Duration::ZERO);
        assert_eq!(
            Instant::from_micros(u64::MAX) + Duration::from_secs(1),
            Instant::from_micros(u64::MAX)
        );
        assert_eq!(t.to_string(), "1.500000s");
    }

    #[test]
    fn earliest_skips_unset_deadlines() {
        assert_eq!(earliest([None, None]), None);
        let (a, b) = (Instant::from_millis(7), Instant::from_millis(3));
        assert_eq!(earliest([Some(a), None, Some(b)]), Some(b));
        assert_eq!(earliest([Some(a)]), Some(a));
    }
}
