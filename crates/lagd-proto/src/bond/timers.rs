//! The bond's timers: every deadline it keeps (`updelay`/`downdelay` waits, the ARP monitor's
//! round, announcement rounds, the LACP machines, IGMP replays, the mode's own), the earliest
//! of them ([`Bond::poll_timeout`](super::Bond::poll_timeout)), and what runs when they are
//! due ([`Bond::handle_timeout`](super::Bond::handle_timeout)).

use super::monitor;
use super::state::Bond;
use super::verdict::Dataplane;
use crate::lacp::Lacp;
use crate::time::{Instant, earliest};

impl Bond {
    /// Runs every machine whose deadline is due at `now`, then selection.
    pub(super) fn run_timers(&mut self, now: Instant, dp: &mut dyn Dataplane) {
        monitor::run_delays(&mut self.ports, &self.opts, now, &mut self.events);
        if let Some(a) = &mut self.arp {
            a.round(
                &mut self.ports,
                &self.opts,
                self.sel.active,
                now,
                &mut self.events,
            );
        }
        if let Some(l) = &mut self.lacp {
            l.handle_timeout(now);
        }
        self.mode.handle_timeout(now, &self.sel, dp);
        self.notify.handle_timeout(now, &self.opts, &self.addrs);
        self.reselect(now);
    }

    /// The earliest deadline of every timer.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        earliest([
            monitor::delays_timeout(&self.ports, &self.opts),
            self.notify.poll_timeout(),
            self.arp.as_ref().map(|a| a.next),
            self.lacp.as_ref().and_then(Lacp::poll_timeout),
            self.igmp_port.and_then(|_| self.igmp.poll_timeout()),
            self.mode.poll_timeout(),
        ])
    }
}
