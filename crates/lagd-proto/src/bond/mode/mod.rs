//! The mode layer: each mode's state and its per-frame decisions, behind one enum.
//!
//! The bond above it keeps what every mode shares (members, link monitoring, selection of the
//! usable and active members, notifications); a mode sees the result of selection as a
//! [`Selection`] and decides, per host frame, where it goes. The modes:
//! - [`hashed`]: balance-xor, 802.3ad, balance-slb and balance-tcp: the policy's hash picks a
//!   usable member (modulo, or through the 256-bucket table);
//! - [`rr`](self::rr): balance-rr;
//! - [`tlb`]: balance-tlb and balance-alb (with [`alb`]'s receive balancing);
//! - [`stripe`]: stripe mode's engine;
//! - active-backup and broadcast need no state of their own.

pub(crate) mod alb;
pub(crate) mod hashed;
pub(crate) mod rr;
pub(crate) mod stripe;
pub(crate) mod tlb;

use super::options::{BondOptions, Mode};
use super::select::{Macs, Selection};
use super::verdict::{Dataplane, HostFrame, TxDrop, TxVerdict};
use crate::balance::{Buckets, BucketsSnapshot};
use crate::port::{PortId, Transmit};
use crate::time::Instant;
use crate::wire::EthernetAddress;
use crate::wire::ip::Ipv4Address;

/// One mode's state.
#[derive(Debug, Clone)]
pub(crate) enum ModeState {
    /// balance-rr.
    RoundRobin(rr::RoundRobin),
    /// active-backup: every frame on the active member.
    ActiveBackup,
    /// broadcast: every frame on every usable member.
    Broadcast,
    /// balance-xor, 802.3ad, balance-slb, balance-tcp.
    Hashed(hashed::Hashed),
    /// balance-tlb, balance-alb.
    Tlb(tlb::Tlb),
    /// stripe.
    Stripe(Box<stripe::StripeMode>),
}

impl ModeState {
    /// The state `opts.mode` starts with, for a bond whose MAC is `mac`.
    pub(crate) fn new(opts: &BondOptions, mac: EthernetAddress) -> Self {
        let policy = opts.mode.fixed_hash().unwrap_or(opts.xmit_hash_policy);
        let buckets = || {
            opts.uses_buckets()
                .then(|| Buckets::new(hashed::balance_config(opts)))
        };
        match opts.mode {
            Mode::BalanceRr => Self::RoundRobin(rr::RoundRobin::new(opts.packets_per_slave)),
            Mode::ActiveBackup => Self::ActiveBackup,
            Mode::Broadcast => Self::Broadcast,
            Mode::BalanceXor | Mode::Ieee8023ad | Mode::BalanceSlb | Mode::BalanceTcp => {
                Self::Hashed(hashed::Hashed::new(policy, buckets()))
            }
            Mode::BalanceTlb | Mode::BalanceAlb => Self::Tlb(tlb::Tlb::new(
                policy,
                buckets(),
                opts.mode == Mode::BalanceAlb,
                opts.lp_interval,
            )),
            Mode::Stripe => Self::Stripe(Box::new(stripe::StripeMode::new(mac))),
        }
    }

    /// Where a frame from the host goes (fixed up in place where the mode rewrites frames).
    pub(crate) fn transmit(
        &mut self,
        now: Instant,
        frame: &mut HostFrame<'_>,
        sel: &Selection,
        macs: &Macs<'_>,
        dp: &mut dyn Dataplane,
    ) -> TxVerdict {
        let port = |p: Option<PortId>| p.map_or(TxVerdict::Drop(TxDrop::NoMember), TxVerdict::Port);
        match self {
            Self::RoundRobin(rr) => port(rr.choose(frame.frame(), sel, macs.ports)),
            Self::ActiveBackup => port(sel.active),
            Self::Broadcast if sel.usable.is_empty() => TxVerdict::Drop(TxDrop::NoMember),
            Self::Broadcast => TxVerdict::All,
            Self::Hashed(h) => port(h.choose(now, frame.frame(), sel)),
            Self::Tlb(t) => {
                let chosen = t.choose(now, frame.frame(), sel);
                if let Some(p) = chosen {
                    t.fixup(p, frame.frame_mut(), macs);
                }
                port(chosen)
            }
            Self::Stripe(s) => s.transmit(frame, sel, dp),
        }
    }

    /// A frame received on `port` (at `buf[header_len..]`, behind the driver's header) that
    /// the mode takes itself instead of the bond's receive rules: stripe frames and, while
    /// striping, TCP segments (what they release goes to `dp`). Other modes take nothing.
    #[inline]
    pub(crate) fn take_received(
        &mut self,
        now: Instant,
        port: PortId,
        buf: &mut [u8],
        header_len: usize,
        dp: &mut dyn Dataplane,
    ) -> bool {
        match self {
            Self::Stripe(s) => s.receive(now, port, buf, header_len, dp),
            _ => false,
        }
    }

    /// Stripe: starts the engine afresh with `epoch` over `members`. Other modes: nothing.
    pub(crate) fn set_epoch(&mut self, now: Instant, epoch: u32, members: &[(PortId, u32)]) {
        if let Self::Stripe(s) = self {
            s.restart(now, epoch, members);
        }
    }

    /// Counts the mode's own changes of the distribution: bucket moves, stripe's slot table.
    pub(crate) fn version(&self) -> u64 {
        self.buckets().map_or(0, |b| b.counters().moves())
            + self.stripe().map_or(0, |s| s.engine.version())
    }

    /// balance-tlb/alb, for a frame the bond delivers to the host: a frame sent to a member's
    /// MAC gets the bond's MAC as destination, and in balance-alb the ARP of clients feeds
    /// receive balancing. Other modes: nothing to do.
    pub(crate) fn receive_fixup(
        &mut self,
        now: Instant,
        frame: &mut [u8],
        sel: &Selection,
        macs: &Macs<'_>,
        host_ipv4: Option<Ipv4Address>,
    ) {
        if let Self::Tlb(t) = self {
            t.receive_fixup(now, frame, sel, macs, host_ipv4);
        }
    }

    /// Gives the mode the usable members and their weights, when those changed.
    pub(crate) fn set_members(&mut self, now: Instant, weighted: &[(PortId, u32)]) {
        match self {
            Self::Hashed(h) => h.set_members(now, weighted),
            Self::Tlb(t) => t.set_members(now, weighted),
            Self::Stripe(s) => s.set_members(now, weighted),
            _ => {}
        }
    }

    /// Whether the mode weighs its members (buckets, stripe).
    pub(crate) fn weighs_members(&self) -> bool {
        match self {
            Self::Hashed(h) => h.buckets.is_some(),
            Self::Tlb(t) => t.buckets.is_some(),
            Self::Stripe(_) => true,
            _ => false,
        }
    }

    /// After selection changed the usable set or the active member.
    pub(crate) fn selection_changed(
        &mut self,
        now: Instant,
        sel: &Selection,
        usable_changed: bool,
        active_changed: bool,
    ) {
        if let Self::Tlb(t) = self {
            t.selection_changed(now, sel, usable_changed, active_changed);
        }
    }

    /// The mode's earliest deadline.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        match self {
            Self::Hashed(h) => h.buckets.as_ref().and_then(Buckets::poll_timeout),
            Self::Tlb(t) => t.poll_timeout(),
            Self::Stripe(s) => s.poll_timeout(),
            _ => None,
        }
    }

    /// Runs what is due at `now`.
    pub(crate) fn handle_timeout(&mut self, now: Instant, sel: &Selection, dp: &mut dyn Dataplane) {
        match self {
            Self::Hashed(h) => {
                if let Some(b) = &mut h.buckets {
                    b.handle_timeout(now);
                }
            }
            Self::Tlb(t) => t.handle_timeout(now, sel),
            Self::Stripe(s) => s.handle_timeout(now, dp),
            _ => {}
        }
    }

    /// The next frame the mode itself sends (stripe hellos, receive-balancing ARP, learning
    /// packets), written into `buf`.
    pub(crate) fn poll_transmit(
        &mut self,
        now: Instant,
        macs: &Macs<'_>,
        buf: &mut [u8],
    ) -> Option<Transmit> {
        match self {
            Self::Tlb(t) => t.poll_transmit(now, macs, buf),
            Self::Stripe(s) => s.poll_transmit(now, macs.ports, buf),
            _ => None,
        }
    }

    /// The bucket table, where buckets decide.
    pub(crate) fn buckets(&self) -> Option<&Buckets> {
        match self {
            Self::Hashed(h) => h.buckets.as_ref(),
            Self::Tlb(t) => t.buckets.as_ref(),
            _ => None,
        }
    }

    /// The bucket table of a hashing mode, where a table decides (balance-tlb's and
    /// balance-alb's too).
    pub(crate) fn hashed_buckets_mut(&mut self) -> Option<&mut Buckets> {
        match self {
            Self::Hashed(h) => h.buckets.as_mut(),
            Self::Tlb(t) => t.buckets.as_mut(),
            _ => None,
        }
    }

    /// The bucket table's snapshot, where buckets decide.
    pub(crate) fn buckets_snapshot(&self) -> Option<BucketsSnapshot> {
        self.buckets().map(Buckets::snapshot)
    }

    /// balance-alb's receive balancing (its client table).
    pub(crate) fn rlb(&self) -> Option<&alb::Rlb> {
        match self {
            Self::Tlb(t) => t.rlb.as_ref(),
            _ => None,
        }
    }

    /// Stripe mode's state.
    pub(crate) fn stripe(&self) -> Option<&stripe::StripeMode> {
        match self {
            Self::Stripe(s) => Some(s),
            _ => None,
        }
    }
}
