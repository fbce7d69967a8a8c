//! The loop's deadlines, in one table: everything the loop does on a schedule has an entry
//! here, and the loop sleeps until the earliest ([`Timers::next_wake`]). Nothing else keeps a
//! "next time": the components that have deadlines of their own (the bond) report them through
//! their entry, and the daemon's own periodic work (carrier polls, the service manager's
//! watchdog, the kernel path's heartbeat and bucket samples) is armed and re-armed here.
//!
//! An entry is `None` when nothing is scheduled for it (no watchdog asked for, no kernel path,
//! a mode without buckets): it never wakes the loop.

use std::time::Duration;

use lagd_proto::time::{Instant, earliest};

/// What the loop wakes for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Timer {
    /// The bond's earliest deadline (`Bond::poll_timeout`: LACP, monitors, the mode's).
    Bond,
    /// The next carrier read of the members (every `min(miimon, 10)` ms).
    Carrier,
    /// The service manager's watchdog (`WATCHDOG=1`).
    Watchdog,
    /// The kernel programs' heartbeat (`kernel::BEAT_EVERY`).
    Heartbeat,
    /// The next read of the kernel programs' bucket loads, where buckets decide.
    BucketSample,
}

impl Timer {
    const COUNT: usize = 5;

    const fn slot(self) -> usize {
        match self {
            Self::Bond => 0,
            Self::Carrier => 1,
            Self::Watchdog => 2,
            Self::Heartbeat => 3,
            Self::BucketSample => 4,
        }
    }
}

/// The loop's deadlines by [`Timer`].
#[derive(Debug, Default)]
pub(crate) struct Timers {
    at: [Option<Instant>; Timer::COUNT],
}

/// What of the kernel path's periodic work is due at a wake ([`Timers::kernel_due`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct KernelDue {
    /// The heartbeat is to be renewed.
    pub(crate) beat: bool,
    /// The bucket loads are to be read.
    pub(crate) sample: bool,
}

impl Timers {
    /// Schedules `timer` at `at` (`None`: not at all).
    pub(crate) fn set(&mut self, timer: Timer, at: Option<Instant>) {
        self.at[timer.slot()] = at;
    }

    /// When `timer` is due (`None`: not scheduled).
    pub(crate) fn at(&self, timer: Timer) -> Option<Instant> {
        self.at[timer.slot()]
    }

    /// Whether `timer` is scheduled and due by `now`.
    pub(crate) fn is_due(&self, timer: Timer, now: Instant) -> bool {
        self.at(timer).is_some_and(|t| t <= now)
    }

    /// Whether `timer` is due by `now` or not scheduled yet (work to do at once, then every
    /// `every`): if so, schedules it `every` from `now`.
    pub(crate) fn fire(&mut self, timer: Timer, now: Instant, every: Duration) -> bool {
        if self.at(timer).is_some_and(|t| now < t) {
            return false;
        }
        self.set(timer, Some(now + every));
        true
    }

    /// The kernel path's periodic work at `now`: the heartbeat every `beat_every`, and the
    /// bucket loads every `sample_every` where buckets decide (`None`: no sample, and the
    /// entry no longer wakes the loop).
    pub(crate) fn kernel_due(
        &mut self,
        now: Instant,
        beat_every: Duration,
        sample_every: Option<Duration>,
    ) -> KernelDue {
        let beat = self.fire(Timer::Heartbeat, now, beat_every);
        let sample = match sample_every {
            Some(every) => self.fire(Timer::BucketSample, now, every),
            None => {
                self.set(Timer::BucketSample, None);
                false
            }
        };
        KernelDue { beat, sample }
    }

    /// The earliest deadline of all (`None`: nothing scheduled, wait for events only).
    pub(crate) fn next_wake(&self) -> Option<Instant> {
        earliest(self.at)
    }
}

#[cfg(test)]
mod test {
    use super::*;

    fn ms(n: u64) -> Instant {
        Instant::from_millis(n)
    }

    #[test]
    fn the_earliest_entry_is_the_next_wake_and_unscheduled_ones_never_are() {
        let mut t = Timers::default();
        assert_eq!(t.next_wake(), None);
        t.set(Timer::Carrier, Some(ms(110)));
        t.set(Timer::Bond, Some(ms(300)));
        assert_eq!(t.next_wake(), Some(ms(110)));
        t.set(Timer::Watchdog, Some(ms(50)));
        assert_eq!(t.next_wake(), Some(ms(50)));
        t.set(Timer::Watchdog, None);
        t.set(Timer::Bond, Some(ms(20)));
        assert_eq!(t.next_wake(), Some(ms(20)));
        assert!(t.is_due(Timer::Bond, ms(20)));
        assert!(!t.is_due(Timer::Carrier, ms(20)));
        assert!(
            !t.is_due(Timer::Watchdog, ms(1_000)),
            "not scheduled, never due"
        );
    }

    #[test]
    fn fire_runs_at_once_when_unscheduled_then_every_period_from_when_it_ran() {
        let mut t = Timers::default();
        let every = Duration::from_millis(10);
        assert!(t.fire(Timer::Carrier, ms(100), every));
        assert_eq!(t.at(Timer::Carrier), Some(ms(110)));
        assert!(!t.fire(Timer::Carrier, ms(109), every));
        assert_eq!(t.at(Timer::Carrier), Some(ms(110)));
        // A late wake re-arms from the wake, not from the missed deadline.
        assert!(t.fire(Timer::Carrier, ms(115), every));
        assert_eq!(t.at(Timer::Carrier), Some(ms(125)));
    }

    /// The defect this table fixed: the kernel path's bucket sample kept its own "next" out
    /// of the loop's wake time and waited for some other wake. Here the carrier poll and the
    /// heartbeat are later than the sample, and the sample alone wakes the loop, on time.
    #[test]
    fn the_kernel_bucket_sample_wakes_the_loop_on_its_own() {
        let mut t = Timers::default();
        let beat = Duration::from_millis(200);
        let sample = Some(Duration::from_millis(20));
        t.set(Timer::Carrier, Some(ms(1_050)));
        let due = t.kernel_due(ms(1_000), beat, sample);
        assert_eq!(
            due,
            KernelDue {
                beat: true,
                sample: true
            },
            "both at once at first"
        );
        assert_eq!(t.at(Timer::Heartbeat), Some(ms(1_200)));
        assert_eq!(t.next_wake(), Some(ms(1_020)), "the sample wakes the loop");
        let due = t.kernel_due(ms(1_020), beat, sample);
        assert_eq!(
            due,
            KernelDue {
                beat: false,
                sample: true
            }
        );
        assert_eq!(t.next_wake(), Some(ms(1_040)));
        // A wake for something else before the sample is due does not sample.
        let due = t.kernel_due(ms(1_030), beat, sample);
        assert_eq!(
            due,
            KernelDue {
                beat: false,
                sample: false
            }
        );
        assert_eq!(t.next_wake(), Some(ms(1_040)));
        // A mode without buckets: the sample no longer wakes the loop.
        let due = t.kernel_due(ms(1_040), beat, None);
        assert_eq!(
            due,
            KernelDue {
                beat: false,
                sample: false
            }
        );
        assert_eq!(t.at(Timer::BucketSample), None);
        assert_eq!(t.next_wake(), Some(ms(1_050)), "the carrier poll is next");
    }
}
