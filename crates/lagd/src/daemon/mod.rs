//! The daemon: the only place that reads the clock and owns descriptors. Its files, by role:
//! - `setup`: the [`Daemon`] and what it holds, [`Daemon::start`] (the checks, the changes
//!   recorded for the undo, the members opened, the kernel path made live) and the hardening
//!   once it runs (capabilities, seccomp);
//! - this file, the event loop ([`Daemon::run`]): one thread, one epoll set (measured best on
//!   2 cores: see `shared/research/dataplane-limits.md`), the clock read once per wake, the
//!   next wake from the timer table (`timers`), and the stop;
//! - `events`: what happens to a running bond: carrier and link events, members gone, and
//!   after every wake the bond's frames and events acted on and published;
//! - `requests`: the control requests the loop answers (status, options, members, reload,
//!   the planned upgrade's hand-over), and SIGUSR2's upgrade through the launcher;
//! - [`dataplane`]: the TAP and the members' sockets. Every frame from the host goes to
//!   [`Bond::transmit`](lagd_proto::bond::Bond::transmit), every frame from a member to
//!   [`Bond::receive`](lagd_proto::bond::Bond::receive), and the dataplane applies the verdict
//!   without knowing the mode (64 KB GSO frames and their `virtio_net_hdr` pass untouched);
//! - `kernel`: the kernel fast path, when it carries the data frames;
//! - [`control`]: the control socket, server and client;
//!
//! and the mapping of the bond's state to the status document is in [`crate::status`]. What
//! the loop does:
//! - carrier is read every `min(miimon, 10)` ms with `ETHTOOL_GLINK` (immediate), and rtnetlink
//!   link events trigger an extra read at once (they can arrive ~1 s late: the kernel's linkwatch);
//! - a Unix control socket (`/run/lagd/netns-N/BOND.sock` by default, per network namespace) answers
//!   `status` with the JSON [`Status`](crate::status::Status); its clients are served on
//!   threads of their own ([`control`]), and the loop only answers the requests they queue
//!   (`requests`), never blocking;
//! - SIGTERM/SIGINT end the loop cleanly: the TAP's carrier goes off and stays (the TAP is
//!   persistent, so a restarted lagd finds the host's configuration intact), and [`restore`]
//!   puts the members back as they were before lagd (also on an error, and, via its state
//!   file, after a `kill -9` once the next lagd for the bond stops);
//! - [`notify`]: `READY=1`, `STATUS=` and the watchdog for a `Type=notify` systemd service.
//!
//! Members are kept from their own kernel stack (which would otherwise answer ARP for the bond's
//! address with the member's MAC): a tcx ingress program drops every frame after AF_PACKET has
//! seen it, and IPv6 is disabled and `arp_ignore=8` set on the member.

pub mod control;
pub mod dataplane;
mod events;
pub mod handover;
mod kernel;
pub mod notify;
mod requests;
pub mod restore;
mod setup;
mod timers;

use anyhow::{Context, Result};
use lagd_sys::poll::{Events, Signal};
use tracing::{info, warn};

use crate::metrics;
pub use dataplane::member_data_socket;
use notify::Notifier;
pub use setup::{
    Daemon, StartError, TAP_MAX_MTU, install_seccomp_filter, keep_needed_capabilities,
};
use setup::{
    TOKEN_CONTROL, TOKEN_CONTROL_SOCKET, TOKEN_LAUNCHER, TOKEN_LINK, TOKEN_MEMBER, TOKEN_SIGNAL,
    TOKEN_TAP,
};
use timers::Timer;

impl Daemon {
    /// Runs until SIGTERM or SIGINT. The clock is read once per wake, right after it; the
    /// next wake is the earliest deadline in the timer table (`timers`): the bond's, the
    /// next carrier poll, the watchdog's, the kernel path's heartbeat and bucket sample.
    pub fn run(mut self) -> Result<()> {
        if let Some(l) = self.metrics.take() {
            metrics::spawn(l, self.config.control.clone()).context("metrics thread")?;
        }
        let mut ready = Events::with_capacity(16);
        let mut now = self.now();
        self.timers.set(Timer::Carrier, Some(now));
        self.notify_ready();
        if let Some(n) = self.notify.as_ref().filter(|_| !self.tap_adopted) {
            // Kept by the service manager: after a crash, the next lagd takes it over and the
            // TAP never loses its carrier. An adopted TAP is in the store already.
            n.store_fds(handover::TAP, &[std::os::fd::AsFd::as_fd(&self.dp.io.tap)]);
        }
        self.store_links();
        self.restore.give_back_left_out();
        let watchdog = self.notify.as_ref().and_then(Notifier::watchdog);
        self.timers.set(Timer::Watchdog, watchdog.map(|_| now));
        loop {
            self.timers.set(Timer::Bond, self.bond.poll_timeout());
            let wake = self.timers.next_wake();
            self.poller
                .wait(&mut ready, wake.map(|t| t.saturating_since(now)))
                .context("epoll_wait")?;
            now = self.now();
            let mut tokens = std::mem::take(&mut self.tokens);
            tokens.clear();
            tokens.extend(ready.iter().map(|e| e.token()));
            // Slow protocols first: LACP timing must not suffer from a saturated dataplane.
            tokens.sort_unstable_by_key(|&t| std::cmp::Reverse(t >= TOKEN_CONTROL_SOCKET));
            // Whether every member socket was read dry (a batch that ran out leaves frames).
            self.dp.io.drained = true;
            for &token in &tokens {
                match token {
                    TOKEN_TAP => self.dp.service_tap(&mut self.bond, now),
                    TOKEN_SIGNAL => {
                        if let Some(sig) = self.signals.read().context("signalfd read")? {
                            if sig == Signal::USR2 {
                                self.upgrade_on_signal();
                                continue;
                            }
                            if sig == Signal::HUP {
                                match self.reload(now) {
                                    Ok(changed) => info!(?changed, "SIGHUP: reloaded"),
                                    Err(e) => warn!("SIGHUP: reload refused: {e}"),
                                }
                                self.store_links();
                                continue;
                            }
                            info!(?sig, "stopping");
                            if let Some(n) = &self.notify {
                                // A clean stop: the bond goes down, nothing to hand over.
                                n.remove_fds(handover::TAP);
                                n.remove_fds(handover::TCX);
                                n.remove_fds(handover::ALIVE);
                                n.remove_fds(handover::PACKET);
                                n.send("STOPPING=1");
                            }
                            let _ = self.dp.io.tap.set_carrier(false);
                            self.bond.shutdown(now);
                            self.after_wake(now);
                            self.restore_member_macs();
                            self.detach_programs();
                            return Ok(());
                        }
                    }
                    TOKEN_LAUNCHER => self.service_launcher(),
                    TOKEN_CONTROL => self.service_control(now),
                    TOKEN_LINK => self.service_link_events(now),
                    t if t >= TOKEN_CONTROL_SOCKET => {
                        let i = (t - TOKEN_CONTROL_SOCKET) as usize;
                        self.dp.service_slow(&mut self.bond, i, now);
                    }
                    t => {
                        let i = (t - TOKEN_MEMBER) as usize;
                        if self.dp.service_member(&mut self.bond, i, now) {
                            self.dp.io.drained = false;
                        }
                    }
                }
            }
            self.tokens = tokens;
            if let Some(every) = watchdog {
                if self.timers.is_due(Timer::Watchdog, now) {
                    if let Some(n) = &self.notify {
                        n.send("WATCHDOG=1");
                    }
                    self.timers.set(Timer::Watchdog, Some(now + every));
                }
            }
            if self.timers.fire(Timer::Carrier, now, self.carrier_poll) {
                self.poll_carrier(now);
            }
            // Events above may have moved the bond's deadline.
            self.timers.set(Timer::Bond, self.bond.poll_timeout());
            if self.timers.is_due(Timer::Bond, now) {
                self.bond.handle_timeout(now, &mut self.dp.io);
            }
            self.after_wake(now);
        }
    }

    /// Detaches lagd's programs from the TAP and the members now (clsact filters outlive lagd
    /// unless deleted), logging what could not be deleted.
    fn detach_programs(&mut self) {
        if let Some(k) = &mut self.kernel {
            for e in k.detach() {
                warn!("detaching the fast path: {e}");
            }
        }
        for m in &mut self.dp.io.members {
            if let Some(d) = m.isolation.take() {
                if let Err(e) = d.detach() {
                    warn!(member = %m.name, "detaching the ingress drop: {e}");
                }
            }
        }
    }

    /// The tcx links that keep lagd's programs attached (the fast path's and the members'
    /// ingress drops).
    fn tcx_links(&self) -> Vec<std::os::fd::BorrowedFd<'_>> {
        self.kernel
            .iter()
            .flat_map(|k| k.tcx_links())
            .chain(
                self.dp
                    .io
                    .members
                    .iter()
                    .filter_map(|m| m.isolation.as_ref()?.tcx_link()),
            )
            .collect()
    }

    /// Hands the service manager the tcx links that keep the programs attached (the set it
    /// held before is replaced: a link lagd let go of must not stay attached through the
    /// store). After a crash the next lagd adopts them, and the programs go on forwarding with
    /// the last table until it does (within `kernel::ORPHAN_TIMEOUT`; past it they drop),
    /// and it renews that bound as it starts through the programs' heartbeat map, stored too.
    ///
    /// The members' packet sockets go with them (the set held before replaced likewise): the
    /// next lagd reads what the members received meanwhile from their queues, and a dying
    /// lagd closes none (each close waits for the kernel's network RCU grace period).
    fn store_links(&self) {
        let Some(n) = &self.notify else {
            return;
        };
        let links = self.tcx_links();
        n.remove_fds(handover::TCX);
        if !links.is_empty() {
            n.store_fds(handover::TCX, &links);
        }
        // The programs' heartbeat map, for the next lagd to renew while it loads its own.
        n.remove_fds(handover::ALIVE);
        if let Some(k) = &self.kernel {
            n.store_fds(handover::ALIVE, &[k.heartbeat()]);
        }
        let sockets = self.member_sockets();
        n.remove_fds(handover::PACKET);
        if !sockets.is_empty() {
            n.store_fds(handover::PACKET, &sockets);
        }
    }

    /// The members' packet sockets: data, slow protocols and partner (see
    /// [`handover::PACKET`]).
    fn member_sockets(&self) -> Vec<std::os::fd::BorrowedFd<'_>> {
        self.dp
            .io
            .members
            .iter()
            .flat_map(|m| [&m.socket, &m.control, &m.partner])
            .filter_map(|s| s.as_ref().map(std::os::fd::AsFd::as_fd))
            .collect()
    }

    /// Tells the service manager the bond is up (the control socket answers from now on).
    fn notify_ready(&self) {
        if let Some(n) = &self.notify {
            let path = if self.kernel.is_some() {
                "kernel"
            } else {
                "lagd"
            };
            n.send(&format!(
                "READY=1\nSTATUS=bond {} over {} (dataplane: {path})\nMAINPID={}",
                self.config.bond,
                self.config.members.join(","),
                std::process::id()
            ));
        }
    }
}
