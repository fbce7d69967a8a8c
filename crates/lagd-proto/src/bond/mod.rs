//! The bond: members, link monitoring, and the per-frame decisions of each mode.
//!
//! [`Bond`] is sans-IO. The driver tells it what it sees (`handle_carrier` after each carrier
//! poll, `handle_frame` for each slow-protocols frame, `handle_timeout` when
//! [`Bond::poll_timeout`] is due) and hands it every frame: a frame from the host to
//! [`Bond::transmit`], which answers with a [`TxVerdict`], a frame from a member to
//! [`Bond::receive`], which answers with an [`RxVerdict`]. The driver applies verdicts without
//! knowing the mode; both per-frame calls are allocation-free. After each wake the driver
//! drains [`Bond::poll_transmit`] (the bond's own frames) and [`Bond::poll_event`].
//!
//! # Shape
//! - this file: the API, [`Bond`]'s public methods; `state` holds its fields, and the files
//!   below implement what the methods do, by role;
//! - `tx`, `rx`: a host frame's way out (and the bond's own frames drained), a member's frame's
//!   way in;
//! - `timers`: every deadline, the earliest of them, and what runs when they are due;
//! - `reselect`: selection as the bond runs it after each change (usable and active members,
//!   receive rules, weights, carrier); `ad`: 802.3ad's LACP engine hooked into it;
//! - [`verdict`]: the per-frame contract ([`TxVerdict`], [`RxVerdict`], [`Dataplane`]);
//! - `member`, `monitor`: members and link monitoring (miimon delays, the ARP monitor);
//! - `select`: the usable and active members, receive rules, LACP's decisions, `fail_over_mac`;
//! - `notify`, `igmp`: what the bond tells the network after a failover;
//! - `mode`: each mode's state and per-frame decisions, behind one enum (stripe mode's glue
//!   lives in `mode::stripe` alone);
//! - [`distribution`]: the distribution as plain data ([`Bond::distribution`]);
//! - [`live`]: option changes on a running bond ([`Bond::change_options`]);
//! - `snapshot`, `status`: plain-data state for `lagctl show`, and how the bond fills it in.
//!
//! # Timers
//! [`Bond::poll_timeout`] is the earliest of every deadline: `updelay`/`downdelay` waits, the
//! ARP monitor's round, announcement rounds, the LACP machines' timers, IGMP replays, the
//! mode's own (bucket rebalancing, learning packets, client updates, stripe's hellos, reorder
//! gaps and peer liveness). The machines run inside the `handle_*` calls; `poll_transmit` only
//! drains what they queued.
//!
//! Link monitoring follows the driver's `miimon` semantics: a member whose carrier drops goes
//! `going down` for `downdelay` and then `down` (one link failure counted); a member whose
//! carrier returns goes `going back` for `updelay` and then `up`. When no member is up, the first
//! member going back is used at once (the driver ignores `updelay` then, and so does lagd).
//!
//! After an active-backup failover the bond announces itself on the new active member with
//! `num_grat_arp` gratuitous ARPs and as many unsolicited IPv6 neighbour advertisements (one per
//! address, to all nodes, with the Override flag; `num_unsol_na` is the same number under
//! another name, as in the driver), `peer_notif_delay` apart (one
//! `miimon` interval when 0), so switches and neighbours relearn where the bond's MAC lives. The
//! bond's addresses are learned from the ARP and neighbour-discovery frames the host sends
//! (in [`Bond::transmit`]); lagd needs no address configuration of its own.
//!
//! The ARP monitor (`arp_interval`, `arp_ip_target`, `arp_validate`, `arp_all_targets`,
//! `arp_missed_max`) probes each target every interval with an ARP request from the bond's MAC
//! and learned address: on every member in the load-balancing modes, on the active member in
//! active-backup. A member that has heard nothing for `arp_missed_max` intervals (one more for a
//! backup) is taken out as `down`, even with carrier up; traffic it hears brings it back.
//! IPv6 targets (`ns_ip6_target`) are probed the same way with neighbour solicitations, and
//! with validation a neighbour solicitation or advertisement from a target counts for it.
//! `arp_validate` follows the driver: `active`/`backup`/`all` validate on the active member,
//! the backups, or both (in active-backup the active member is the one in use; in the other
//! modes every member is active until the monitor takes it out, which makes it a backup). A
//! member that validates counts only ARP from a target to the bond's address, for that target;
//! a validating backup trusts instead the bond's own probes to a target, heard through the
//! switch (the target's replies go to the active member, and prove nothing about a backup's
//! path). A member that does not validate counts any frame, or with `filter`,
//! `filter_active` and `filter_backup` any ARP or IPv6 frame. With `arp_all_targets=all`
//! every target must have been heard. Unlike the driver, which stops
//! reading carrier when ARP monitoring is on, lagd still takes a member without carrier out.
//!
//! In 802.3ad mode the bond owns a [`Lacp`] engine: members are reported to it as their MII
//! status makes them usable or not, slow-protocol frames go to it ([`Bond::handle_frame`]), its
//! LACPDUs come out of [`Bond::poll_transmit`], and it decides which members distribute (the
//! hash picks among them, in enslave order) and collect (frames from other members are dropped);
//! the bond's carrier follows its `min_links`.
//!
//! Modes implemented here: balance-rr (`packets_per_slave`), active-backup (`primary`,
//! `primary_reselect`, `all_slaves_active`), balance-xor (every hash policy) and broadcast.
//! 802.3ad. balance-tlb and balance-alb come with the balancers.

mod ad;
pub mod dedup;
pub mod distribution;
mod event;
mod igmp;
pub mod live;
mod member;
mod mode;
mod monitor;
mod notify;
pub mod options;
mod reselect;
mod rx;
mod select;
mod snapshot;
mod state;
mod status;
mod timers;
mod tx;
pub mod verdict;

use std::collections::VecDeque;
use std::time::Duration;

use crate::balance::{BalanceCounters, BucketSample, MoveRecord};
use crate::lacp::Lacp;
use crate::time::Instant;
use crate::wire::EthernetAddress;
use crate::wire::ip::{Ipv4Address, Ipv6Address};
use live::OptionChange;
use mode::ModeState;
use monitor::ArpMonitor;
use notify::{HostAddrs, Notify};
use select::Selection;
use verdict::RxRule;

pub use crate::port::{PortId, Transmit};
pub use distribution::{DistributionTable, MemberRx, TxRule};
pub use event::BondEvent;
pub use member::{MiiStatus, PortInfo};
pub use options::{
    BondOptions, Distribution, FailOverMac, FastPathAttach, FastPathMode, Mode, OptionError,
    PrimaryReselect,
};
pub use snapshot::{
    ArpMonitorSnapshot, BondSnapshot, PortSnapshot, StripeSnapshot, TablesSnapshot,
};
pub use state::Bond;

/// What a kernel fast path must hand the bond from its members ([`Bond::fast_path_reads`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FastPathReads {
    /// The EtherTypes the bond reads on its members: what the programs pass on rather than
    /// forward (the members' ARP, and neighbour discovery when the programs pass it, for the
    /// ARP monitor and balance-alb; every frame a receiver that orders TCP does not deliver).
    pub protocols: &'static [u16],
    /// The members' untagged ARP frames go to the bond (the ARP monitor, balance-alb).
    pub member_arp: bool,
    /// The members' program delivers TCP in sequence itself and hands the bond the rest
    /// (stripe's receiver, where the kernel has it).
    pub ordered_tcp: bool,
}
pub use verdict::{
    DRIVER_HEADROOM, Dataplane, DropReason, HostFrame, RxVerdict, TX_HEADROOM, TxDrop, TxVerdict,
};

/// A [`Dataplane`] that drops what it is given: for simulations and tools that run a bond
/// without data frames (LACP, link monitoring).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoDataplane;

impl Dataplane for NoDataplane {
    fn send(&mut self, _: PortId, _: &mut [u8], _: usize, _: usize) -> bool {
        false
    }

    fn deliver(&mut self, _: &[u8]) {}
}

impl Bond {
    /// A bond with no members yet, whose interface has MAC `mac`.
    pub fn new(opts: BondOptions, mac: EthernetAddress) -> Self {
        // The option parser enforces the ranges LacpConfig::validate checks.
        let lacp = opts.mode.uses_lacp().then(|| {
            Lacp::new(select::lacp_config(&opts), mac).expect("validated bonding options")
        });
        Self {
            mode: ModeState::new(&opts, mac),
            arp: ArpMonitor::new(&opts),
            lacp,
            lacp_link: Vec::new(),
            sel: Selection::default(),
            rx_rules: Vec::new(),
            carrier: false,
            events: VecDeque::new(),
            mac,
            addrs: HostAddrs::default(),
            notify: Notify::default(),
            igmp: igmp::IgmpCache::default(),
            igmp_port: None,
            failovers: 0,
            member_macs: Vec::new(),
            weighted: Vec::new(),
            generation: 0,
            dedup: dedup::Dedup::default(),
            ports: Vec::new(),
            opts,
        }
    }

    /// The options in force.
    pub fn options(&self) -> &BondOptions {
        &self.opts
    }

    /// Adds a member with its current carrier. A member with carrier starts `up` (the driver
    /// does not apply `updelay` at enslave time).
    pub fn add_port(&mut self, now: Instant, info: PortInfo, carrier: bool) -> PortId {
        let id = PortId(self.ports.len() as u16);
        let info_name = info.name.clone();
        let port = member::Port::new(now, info, carrier);
        self.events.push_back(BondEvent::Link {
            port: id,
            status: port.mii,
        });
        self.add_lacp_port(now, id, &port.info);
        self.member_macs.push(port.info.perm_mac);
        self.ports.push(port);
        self.lacp_link.push(false);
        self.rx_rules.push(RxRule::default());
        if self.opts.primary.as_deref() == Some(info_name.as_str()) && self.opts.mode.uses_primary()
        {
            // The driver's force_primary: an enslaved primary takes over once it is up.
            self.sel.force_primary = true;
        }
        self.reselect(now);
        self.refresh_rx_rules();
        id
    }

    /// Gives the bond a slow-protocols frame (LACPDU, Marker) received on `port`. In modes
    /// without LACP it is ignored (the data path drops such frames: [`DropReason::SlowProtocols`]).
    pub fn handle_frame(&mut self, now: Instant, port: PortId, frame: &[u8]) {
        if let Some(l) = &mut self.lacp {
            l.handle_frame(now, port, frame);
            self.sync_lacp(now);
        }
    }

    /// Updates a member's speed and duplex (after a link change).
    pub fn set_port_speed(
        &mut self,
        now: Instant,
        port: PortId,
        speed_mbps: Option<u32>,
        full_duplex: Option<bool>,
    ) {
        let info = &mut self.ports[port.index()].info;
        if info.speed_mbps == speed_mbps && info.full_duplex == full_duplex {
            return;
        }
        info.speed_mbps = speed_mbps;
        info.full_duplex = full_duplex;
        self.update_weighted(now);
        if self.lacp_link.get(port.index()) == Some(&true) {
            // Report the new speed: LACP recomputes the port's key.
            self.lacp_link[port.index()] = false;
            self.reselect(now);
        }
    }

    /// Before the daemon stops: in 802.3ad mode every member's farewell LACPDU (Synchronization,
    /// Collecting, Distributing and Aggregation cleared) is queued; send them from
    /// [`Bond::poll_transmit`] so the partner stops using the links at once.
    pub fn shutdown(&mut self, now: Instant) {
        if let Some(l) = &mut self.lacp {
            for i in 0..self.ports.len() {
                let p = PortId(i as u16);
                if l.has_port(p) {
                    l.remove_port(now, p);
                }
            }
        }
    }

    /// The LACP engine, in 802.3ad mode.
    pub fn lacp(&self) -> Option<&Lacp> {
        self.lacp.as_ref()
    }

    /// After a restart of the daemon: `port` was in sync with `partner` under the previous
    /// run (see [`Lacp::resume`]). Other modes: nothing.
    pub fn resume_lacp(&mut self, port: PortId, partner: crate::wire::slow::LacpInfo) {
        if let Some(l) = &mut self.lacp {
            l.resume(port, partner);
        }
    }

    /// `broadcast_dedup`: keys the sums by which copies are told ([`dedup::sum`]) with `seed`
    /// (random per start of the daemon); the distribution table carries it to the kernel path,
    /// so that both take the same frames for copies. Call before the first frame.
    pub fn set_dedup_seed(&mut self, seed: u64) {
        self.dedup = dedup::Dedup::with_seed(seed);
        self.generation += 1;
    }

    /// Stripe mode: starts the engine afresh with `epoch` (random per start of the daemon, so
    /// the peer can tell a restart). Call once, before the first frame. Other modes: nothing.
    pub fn set_stripe_epoch(&mut self, now: Instant, epoch: u32) {
        self.mode.set_epoch(now, epoch, &self.weighted);
    }

    /// Marks a member as gone (its interface was deleted): it stays in the table, `down`.
    pub fn remove_port(&mut self, now: Instant, port: PortId) {
        let p = &mut self.ports[port.index()];
        p.carrier = false;
        if p.mii != MiiStatus::Down {
            if p.mii.usable() {
                p.link_failures += 1;
            }
            p.mii = MiiStatus::Down;
            self.events.push_back(BondEvent::Link {
                port,
                status: MiiStatus::Down,
            });
        }
        self.reselect(now);
    }

    /// The member named `name`.
    /// A member removed and added again is listed twice: the latest is the one in use.
    pub fn port_by_name(&self, name: &str) -> Option<PortId> {
        self.ports
            .iter()
            .rposition(|p| p.info.name == name)
            .map(|i| PortId(i as u16))
    }

    /// Members in enslave order.
    pub fn ports(&self) -> impl Iterator<Item = (PortId, &PortInfo)> {
        self.ports
            .iter()
            .enumerate()
            .map(|(i, p)| (PortId(i as u16), &p.info))
    }

    /// Records a carrier reading of `port` (each poll, or a link event).
    pub fn handle_carrier(&mut self, now: Instant, port: PortId, carrier: bool) {
        monitor::carrier_changed(
            &mut self.ports,
            &self.opts,
            now,
            port,
            carrier,
            &mut self.events,
        );
        self.reselect(now);
    }

    /// Runs everything that is due at `now` (see [`Bond::poll_timeout`]). What a stripe
    /// reorder buffer gives up waiting for is delivered through `dp`.
    pub fn handle_timeout(&mut self, now: Instant, dp: &mut dyn Dataplane) {
        self.run_timers(now, dp);
    }

    /// Whether the ARP monitor runs.
    pub fn arp_monitoring(&self) -> bool {
        self.arp.is_some()
    }

    /// What a kernel fast path forwarding this bond's data frames must hand it from the
    /// members instead (beside slow-protocol frames, always), fixed when the fast path starts:
    /// the daemon opens its member sockets for [`FastPathReads::protocols`] and asks the
    /// programs for what the bond needs without naming its mode.
    pub fn fast_path_reads(&self) -> FastPathReads {
        // IPv4, IPv6, ARP and stripe's own (`wire::EtherType`, `stripe::header::ETHERTYPE`:
        // the test of this function checks the numbers).
        const ORDERED: [u16; 4] = [0x0800, 0x86dd, 0x0806, 0x88b5];
        const MONITOR: [u16; 2] = [0x0806, 0x86dd];
        if self.opts.mode == Mode::Stripe {
            FastPathReads {
                protocols: &ORDERED,
                member_arp: self.wants_member_arp(),
                ordered_tcp: true,
            }
        } else if self.wants_member_arp() {
            FastPathReads {
                protocols: &MONITOR,
                member_arp: true,
                ordered_tcp: false,
            }
        } else {
            FastPathReads {
                protocols: &[],
                member_arp: false,
                ordered_tcp: false,
            }
        }
    }

    /// Whether the bond must see the ARP frames its members receive: the ARP monitor's, and
    /// balance-alb's receive balancing (it learns the clients from them). A fast path passes
    /// them to the bond.
    pub fn wants_member_arp(&self) -> bool {
        self.arp_monitoring() || self.opts.mode == Mode::BalanceAlb
    }

    /// Whether the bond must see the neighbour solicitations and advertisements its members
    /// receive: the ARP monitor's IPv6 targets (`ns_ip6_target`) with `arp_validate`, which
    /// counts, on the members it validates on, only the targets' solicitations and
    /// advertisements as signs of life.
    /// Without validation any frame counts, and a fast path reports them with
    /// [`Bond::note_received_elsewhere`].
    pub fn wants_member_ndisc(&self) -> bool {
        self.arp.is_some()
            && !self.opts.ns_ip6_target.is_empty()
            && self.opts.arp_validate != options::ArpValidate::None
    }

    /// Frames arrived on `port` that a forwarder outside the bond (the kernel fast path)
    /// delivered or dropped without showing them to [`Bond::receive`]: for the ARP monitor on
    /// a member where any frame is a sign of life (`arp_validate` neither validates on it nor
    /// filters; the ARP frames the other values count still come through [`Bond::receive`]).
    pub fn note_received_elsewhere(&mut self, now: Instant, port: PortId) {
        if self.arp.is_some() {
            let active = self.sel.active;
            ArpMonitor::note_rx_elsewhere(&mut self.ports, &self.opts, active, now, port);
        }
    }

    /// When [`handle_timeout`](Self::handle_timeout) should next run: the earliest deadline of
    /// every timer the bond has (its own, the LACP machines', the mode's).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.next_deadline()
    }

    /// A frame from the host: the bond learns from it (its own addresses, the host's
    /// multicast memberships), chooses where it goes, and fixes it up in place. Frames the
    /// bond makes of it (stripe segments) go to `dp`. Allocation-free.
    #[inline]
    pub fn transmit(
        &mut self,
        now: Instant,
        frame: &mut HostFrame<'_>,
        dp: &mut dyn Dataplane,
    ) -> TxVerdict {
        self.transmit_frame(now, frame, dp)
    }

    /// A frame received on `port`: whether the host gets it (fixed up in place), or the bond
    /// took it (stripe frames, whose released frames go to `dp`). Slow-protocols frames are
    /// dropped here: they reach the bond through [`Bond::handle_frame`]. Allocation-free.
    #[inline]
    pub fn receive(
        &mut self,
        now: Instant,
        port: PortId,
        frame: &mut [u8],
        dp: &mut dyn Dataplane,
    ) -> RxVerdict {
        self.receive_with_header(now, port, frame, 0, dp)
    }

    /// [`Bond::receive`] for a frame behind a driver header: `buf[..header_len]` is the header
    /// the member's socket gave (offload information), the frame follows. Frames the bond
    /// delivers itself (stripe mode's reordered TCP) keep the header
    /// ([`Dataplane::deliver_with_header`]); on [`RxVerdict::Deliver`] the caller delivers
    /// `buf` as fixed up in place.
    #[inline]
    pub fn receive_with_header(
        &mut self,
        now: Instant,
        port: PortId,
        buf: &mut [u8],
        header_len: usize,
        dp: &mut dyn Dataplane,
    ) -> RxVerdict {
        self.receive_frame(now, port, buf, header_len, dp)
    }

    /// The bond's IPv6 addresses as learned from the host.
    pub fn host_ipv6(&self) -> &[Ipv6Address] {
        &self.addrs.ipv6
    }

    /// The bond's IPv4 address as learned from the host, if any.
    pub fn host_ipv4(&self) -> Option<Ipv4Address> {
        self.addrs.ipv4
    }

    /// The next frame the bond itself wants sent (LACPDUs, ARP probes, gratuitous ARPs and
    /// neighbour advertisements after a failover, receive-balancing ARP, learning packets,
    /// replayed IGMP/MLD reports, stripe hellos), written into `buf` (at least 1514 bytes: a
    /// replayed report is as long as the host's). A pure drain of what the `handle_*` calls
    /// queued: call after each of them (or once per wake) until `None`. `now` is the time of
    /// the latest of those calls (what is due by then is sent).
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        self.next_own_frame(now, buf)
    }

    /// The next event, oldest first.
    pub fn poll_event(&mut self) -> Option<BondEvent> {
        self.events.pop_front()
    }

    /// The MAC a member shows the network: the bond's on the active member; its own on the
    /// others, except that the member whose own MAC is the bond's uses the active member's own
    /// MAC instead (the driver swaps the two), so no MAC is on two ports.
    pub fn wire_mac(&self, port: PortId) -> EthernetAddress {
        self.macs().wire_mac(port)
    }

    /// Plain-data state for status output, as of `now` (stripe's peer ages).
    pub fn snapshot(&self, now: Instant) -> BondSnapshot {
        self.build_snapshot(now)
    }

    /// The distribution as plain data (see [`DistributionTable`]).
    pub fn distribution(&self) -> DistributionTable {
        self.distribution_with(self.carrier)
    }

    /// The distribution as it is, or as it would be with the bond's carrier `carrier`.
    fn distribution_with(&self, carrier: bool) -> DistributionTable {
        DistributionTable::new(
            self.distribution_generation(),
            &self.opts,
            &self.mode,
            &self.sel,
            &self.rx_rules,
            carrier,
            self.dedup.seed(),
        )
    }

    /// Why a kernel fast path cannot carry this bond's data frames (`None`: it can): what the
    /// distribution table cannot express ([`DistributionTable::kernel_refusal`]). With the ARP
    /// monitor the fast path must give lagd the members' ARP frames (and, where
    /// [`Bond::wants_member_ndisc`], their neighbour discovery) and report other frames with
    /// [`Bond::note_received_elsewhere`].
    pub fn kernel_refusal(&self, max_members: usize) -> Option<&'static str> {
        // What the mode needs once it has carrier (the daemon asks before any member is up).
        self.distribution_with(true).kernel_refusal(max_members)
    }

    /// Where a kernel fast path forwards through the bucket table ([`TxRule::Buckets`]): takes
    /// in what it counted per bucket since its previous call, in place of the per-frame
    /// accounting [`Bond::transmit`] does (see [`Buckets::absorb`]): the rebalancer sees the
    /// load and a planned move happens once its bucket is idle. The fast path then re-reads
    /// [`Bond::distribution`] when [`Bond::distribution_generation`] changed. Nothing happens
    /// in other modes.
    ///
    /// [`Buckets::absorb`]: crate::balance::Buckets::absorb
    pub fn absorb_bucket_loads(&mut self, now: Instant, samples: &[BucketSample; 256]) {
        if let Some(b) = self.mode.hashed_buckets_mut() {
            b.absorb(now, samples);
        }
    }

    /// How often a kernel fast path forwarding through the bucket table should call
    /// [`Bond::absorb_bucket_loads`]: half the idle gap (a planned move waits at most that long
    /// past its bucket's pause), within 10 to 100 ms; `None` when no table of buckets decides.
    pub fn bucket_sample_interval(&self) -> Option<Duration> {
        let gap = match &self.mode {
            ModeState::Hashed(h) => h.buckets.as_ref()?.config().idle_gap,
            ModeState::Tlb(t) => t.buckets.as_ref()?.config().idle_gap,
            _ => return None,
        };
        Some((gap / 2).clamp(Duration::from_millis(10), Duration::from_millis(100)))
    }

    /// The bucket table's move counters and its latest move, when a table of buckets decides
    /// (cheap: for following moves as they happen).
    pub fn bucket_moves(&self) -> Option<(BalanceCounters, Option<MoveRecord>)> {
        let b = self.mode.buckets()?;
        Some((*b.counters(), b.last_move().copied()))
    }

    /// The generation of [`Bond::distribution`]: cheap, to tell whether the table changed.
    pub fn distribution_generation(&self) -> u64 {
        self.generation + self.mode.version()
    }

    /// The bond's MAC (it changes with `fail_over_mac=active`).
    pub fn mac(&self) -> EthernetAddress {
        self.mac
    }

    /// Whether any member is usable (802.3ad: as `min_links` asks).
    pub fn carrier(&self) -> bool {
        self.carrier
    }

    /// The active member (modes with one).
    pub fn active(&self) -> Option<PortId> {
        self.sel.active
    }

    /// Usable members in enslave order (where [`TxVerdict::All`] sends).
    pub fn usable(&self) -> &[PortId] {
        &self.sel.usable
    }
}

#[cfg(test)]
mod test;

/// Run-time changes of options and of the active member (the rules and their work are in
/// [`live`]).
impl Bond {
    /// Changes options on the running bond: every `(key, value)` in order, all or nothing. A
    /// key whose value does not change is accepted whatever its [`Liveness`](live::Liveness) (so a whole
    /// configuration can be applied again); a key that changes must be [`Liveness::Live`](live::Liveness::Live).
    pub fn change_options(
        &mut self,
        now: Instant,
        changes: &[(String, String)],
    ) -> Result<OptionChange, OptionError> {
        self.apply_changes(now, changes)
    }

    /// Takes the options `target` (checked and finished, e.g. a configuration file read again)
    /// where they differ from the current ones only in [`Liveness::Live`](live::Liveness::Live) options; otherwise
    /// changes nothing and names an option that differs. Returns the live options that changed.
    pub fn reconfigure(
        &mut self,
        now: Instant,
        target: &BondOptions,
    ) -> Result<OptionChange, OptionError> {
        self.apply_target(now, target)
    }

    /// Makes member `name` the active one now, as the kernel's `active_slave` does: modes with
    /// an active member only, and the member must be usable. Refused when a primary that is up
    /// would take over again at once (`primary_reselect=always`): change `primary` instead.
    /// Returns whether the active member changed.
    pub fn set_active(&mut self, now: Instant, name: &str) -> Result<bool, String> {
        self.make_active(now, name)
    }
}
