//! Interruption and progress for a running lab: SIGINT/SIGTERM become an [`Interrupted`] error at
//! the next check or sleep, so every step unwinds through the cleanup guards; progress is one
//! updating line on standard error.

use std::fmt;
use std::io::{self, IsTerminal, Write};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Result;
use lagd_sys::poll::{Events, Interest, Poller, Signal, SignalFd};

/// The lab was stopped by a signal; everything it made has been (or is being) removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interrupted {
    /// The signal number.
    pub signal: i32,
}

impl fmt::Display for Interrupted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self.signal {
            s if s == Signal::INT.raw() => "SIGINT",
            s if s == Signal::TERM.raw() => "SIGTERM",
            _ => "a signal",
        };
        write!(f, "interrupted by {name}")
    }
}

impl std::error::Error for Interrupted {}

/// Signal watching and the progress line, shared by every step of a lab.
#[derive(Debug)]
pub struct Ctl {
    signals: Option<(SignalFd, Poller)>,
    progress: Progress,
}

impl Ctl {
    /// Blocks SIGINT and SIGTERM and watches them through a signalfd. Call it on the main thread
    /// before any other thread starts, so that every thread inherits the blocked mask (children
    /// started with `std::process::Command` get a clean mask back).
    pub fn with_signals(progress: Progress) -> Result<Self> {
        let fd = SignalFd::new(&[Signal::INT, Signal::TERM])?;
        let poller = Poller::new()?;
        poller.add(&fd, 1, Interest::READABLE)?;
        Ok(Self {
            signals: Some((fd, poller)),
            progress,
        })
    }

    /// No signal handling (library use and tests).
    pub fn without_signals(progress: Progress) -> Self {
        Self {
            signals: None,
            progress,
        }
    }

    /// Returns [`Interrupted`] if SIGINT or SIGTERM arrived.
    pub fn check(&self) -> Result<()> {
        if let Some((fd, _)) = &self.signals {
            if let Some(sig) = fd.read()? {
                self.progress.clear();
                return Err(Interrupted { signal: sig.raw() }.into());
            }
        }
        Ok(())
    }

    /// Sleeps for `d`, waking early with [`Interrupted`] if a signal arrives.
    pub fn sleep(&self, d: Duration) -> Result<()> {
        match &self.signals {
            Some((_, poller)) => {
                let mut events = Events::with_capacity(1);
                match poller.wait(&mut events, Some(d)) {
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e.into()),
                }
                self.check()?;
                self.progress.refresh();
                Ok(())
            }
            None => {
                thread::sleep(d);
                Ok(())
            }
        }
    }

    /// The progress line.
    pub fn progress(&self) -> &Progress {
        &self.progress
    }
}

/// One updating status line on standard error (phase and elapsed seconds). On a terminal it is
/// redrawn in place; otherwise each new phase is printed once on its own line.
#[derive(Debug)]
pub struct Progress {
    enabled: bool,
    tty: bool,
    start: Instant,
    state: Mutex<ProgressState>,
}

#[derive(Debug, Default)]
struct ProgressState {
    last_phase: String,
    last_clock: Option<(Duration, Duration)>,
    drawn: bool,
}

impl Progress {
    /// A progress line on standard error (`enabled = false`: silent).
    pub fn stderr(enabled: bool) -> Self {
        Self {
            enabled,
            tty: io::stderr().is_terminal(),
            start: Instant::now(),
            state: Mutex::new(ProgressState::default()),
        }
    }

    /// Redraws the current phase with the time elapsed so far (terminal only).
    pub fn refresh(&self) {
        let (phase, clock) = {
            let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
            if !st.drawn {
                return;
            }
            (st.last_phase.clone(), st.last_clock)
        };
        self.show(&phase, clock);
    }

    /// Shows a phase without a clock (`setting up lagd`).
    pub fn phase(&self, phase: &str) {
        self.show(phase, None);
    }

    /// Shows a phase with elapsed and total seconds (`traffic 3/10 s`).
    pub fn tick(&self, phase: &str, elapsed: Duration, total: Duration) {
        self.show(phase, Some((elapsed, total)));
    }

    fn show(&self, phase: &str, clock: Option<(Duration, Duration)>) {
        if !self.enabled {
            return;
        }
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let mut err = io::stderr().lock();
        if self.tty {
            let since = self.start.elapsed().as_secs();
            let line = match clock {
                Some((e, t)) => format!(
                    "lab [{since} s]: {phase} {}/{} s",
                    e.min(t).as_secs(),
                    t.as_secs()
                ),
                None => format!("lab [{since} s]: {phase}"),
            };
            let _ = write!(err, "\r\x1b[2K{line}");
            let _ = err.flush();
            st.drawn = true;
        } else if st.last_phase != phase {
            let _ = writeln!(err, "lab: {phase}");
        }
        st.last_phase = phase.to_string();
        st.last_clock = clock;
    }

    /// Erases the line (before printing results or an error).
    pub fn clear(&self) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if self.tty && st.drawn {
            let mut err = io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
            st.drawn = false;
        }
    }
}
