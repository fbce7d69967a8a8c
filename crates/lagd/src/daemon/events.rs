//! What happens to a running bond: carrier (polled and from rtnetlink), members that go away,
//! and after every wake the bond's frames sent and its events acted on (logged, the MACs set,
//! the TAP's carrier, the kernel path's table and heartbeat) and published to `lagctl events`.

use std::io;

use lagd_proto::bond::{BondEvent, FailOverMac, PortId};
use lagd_proto::time::Instant;
use lagd_sys::link::LinkEvent;
use tracing::{info, warn};

use super::kernel;
use super::restore::LacpRecord;
use super::setup::{Daemon, duplex};

impl Daemon {
    pub(super) fn poll_carrier(&mut self, now: Instant) {
        if let Some(k) = &mut self.kernel {
            if let Err(e) = k.note_received(now, &mut self.bond) {
                warn!("fast path counters: {e}");
            }
        }
        for i in 0..self.dp.io.members.len() {
            if self.dp.io.members[i].socket.is_none() {
                continue;
            }
            match self.link.carrier(&self.dp.io.members[i].name) {
                Ok(c) => {
                    let c = c && !self.disabled.contains(&i);
                    self.bond.handle_carrier(now, PortId(i as u16), c);
                    // At once, not after the wake's other work (see `after_wake`).
                    self.sync_kernel_table();
                }
                Err(e) if e.raw_os_error() == Some(19) || e.kind() == io::ErrorKind::NotFound => {
                    self.member_gone(now, i)
                }
                Err(e) => warn!(member = %self.dp.io.members[i].name, "carrier: {e}"),
            }
        }
    }

    fn member_gone(&mut self, now: Instant, i: usize) {
        warn!(member = %self.dp.io.members[i].name, "member interface removed");
        self.release_member(now, i);
    }

    /// Closes member `i`'s sockets and programs and marks it gone in the bond.
    pub(super) fn release_member(&mut self, now: Instant, i: usize) {
        let m = &mut self.dp.io.members[i];
        for c in m.control.take().into_iter().chain(m.partner.take()) {
            let _ = self.poller.delete(&c);
            m.counters.slow_socket_drops += c.statistics().map_or(0, |s| u64::from(s.drops));
        }
        m.partner_src = None;
        for s in m.socket.take().into_iter().chain(m.rx.drain(..)) {
            let _ = self.poller.delete(&s);
            m.counters.rx_socket_drops += s.statistics().map_or(0, |s| u64::from(s.drops));
        }
        m.isolation = None;
        if let Some(k) = &mut self.kernel {
            k.member_gone(i);
        }
        self.disabled.remove(&i);
        self.bond.remove_port(now, PortId(i as u16));
    }

    /// The position of the member whose interface is `ifindex`, if it is still there.
    fn present_member(&self, ifindex: u32) -> Option<usize> {
        self.dp
            .io
            .members
            .iter()
            .position(|m| m.ifindex == ifindex && m.socket.is_some())
    }

    pub(super) fn service_link_events(&mut self, now: Instant) {
        loop {
            match self.events.next_event() {
                Ok(Some(LinkEvent::Changed(s))) => {
                    if let Some(i) = self.present_member(s.ifindex) {
                        let c = s.up && s.carrier && !self.disabled.contains(&i);
                        self.bond.handle_carrier(now, PortId(i as u16), c);
                        // At once: the other events, frames and timers of this wake come
                        // first otherwise (once 40 ms in the 5.10 guest, a debug build).
                        self.sync_kernel_table();
                    }
                    if s.ifindex == self.tap_ifindex {
                        let running = s.up && s.carrier;
                        if running && !self.tap_running {
                            self.resolve_neighbours_again();
                        }
                        self.tap_running = running;
                    }
                }
                Ok(Some(LinkEvent::Removed(s))) => {
                    if let Some(i) = self.present_member(s.ifindex) {
                        self.member_gone(now, i);
                    }
                }
                Ok(Some(LinkEvent::Overrun)) => self.poll_carrier(now),
                Ok(None) => return,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    warn!("rtnetlink: {e}");
                    return;
                }
            }
        }
    }

    /// The bond's carrier is back (lagd turned it on, or the kernel reports the TAP running
    /// again after it re-enabled its queue): the host's neighbour entries that went on being
    /// resolved while it was off (a restart of lagd, every member down) are deleted, so that
    /// the next packet to each solicits at once instead of after the retransmit timer (a
    /// second by default).
    fn resolve_neighbours_again(&self) {
        match lagd_sys::link::flush_incomplete_neighbours(self.tap_ifindex) {
            Ok(0) => {}
            Ok(n) => info!(
                entries = n,
                "bond carrier back: neighbour entries still being resolved deleted (the next \
                 packet to each solicits at once)"
            ),
            Err(e) => warn!("neighbour entries of {}: {e}", self.config.bond),
        }
    }

    /// Sends an event line to every `lagctl events` client (those gone are dropped).
    pub(super) fn publish(&mut self, now: Instant, event: &str, mut fields: serde_json::Value) {
        if self.subscribers.is_empty() {
            return;
        }
        let t = now.saturating_since(Instant::ZERO).as_secs_f64();
        if let Some(map) = fields.as_object_mut() {
            map.insert("t".into(), serde_json::json!((t * 1000.0).round() / 1000.0));
            map.insert("event".into(), event.into());
        }
        let line = fields.to_string();
        self.subscribers.retain(|s| s.send(line.clone()).is_ok());
    }

    /// After every wake: the frames the bond queued go out, and its events are acted on.
    pub(super) fn after_wake(&mut self, now: Instant) {
        // Each member's confirmed LACP partner: its frames pass the kernel program's policer
        // (the table below) and have a socket of their own (further down).
        if let (Some(l), Some(k)) = (self.bond.lacp(), &mut self.kernel) {
            for i in 0..self.dp.io.members.len() {
                k.follow_partner(i, l.confirmed_partner_source(PortId(i as u16)).map(|m| m.0));
            }
        }
        // The programs follow the bond before anything else here: a member that lost its
        // carrier is out of the table they read before lagd logs, records or refilters
        // anything. Each frame they send meanwhile to that member is lost, and what follows
        // can be slow: attaching a socket filter (the partner sockets below) costs 4-19 ms on
        // Linux 5.10 (measured in a user-mode guest), two per member, which once kept a cut
        // member in the table for 30-90 ms.
        self.sync_kernel_table();
        self.dp.send_own(&mut self.bond, now);
        if let Some(l) = self.bond.lacp() {
            for i in 0..self.dp.io.members.len() {
                let src = l.confirmed_partner_source(PortId(i as u16)).map(|m| m.0);
                if let Err(e) = self.dp.follow_partner(i, src) {
                    warn!(member = %self.dp.io.members[i].name, "LACP partner socket: {e}");
                }
            }
        }
        while let Some(ev) = self.bond.poll_event() {
            if !self.subscribers.is_empty() {
                let name = |p: Option<PortId>| {
                    p.and_then(|p| self.dp.io.members.get(p.index()))
                        .map(|m| m.name.clone())
                };
                let (kind, fields) = match &ev {
                    BondEvent::Link { port, status } => (
                        "link",
                        serde_json::json!({ "member": name(Some(*port)), "status": status.to_string() }),
                    ),
                    BondEvent::ActiveChanged { from, to } => (
                        "active",
                        serde_json::json!({ "from": name(*from), "to": name(*to) }),
                    ),
                    BondEvent::MacChanged { mac } => {
                        ("mac", serde_json::json!({ "mac": mac.to_string() }))
                    }
                    BondEvent::MemberMac { port, mac } => (
                        "member-mac",
                        serde_json::json!({ "member": name(Some(*port)), "mac": mac.to_string() }),
                    ),
                    BondEvent::Carrier { up } => ("carrier", serde_json::json!({ "up": up })),
                    BondEvent::LacpPartner {
                        port,
                        system,
                        key,
                        partner_port,
                    } => (
                        "lacp-partner",
                        serde_json::json!({
                            "member": name(Some(*port)),
                            "system": (!system.is_zero()).then(|| system.to_string()),
                            "key": key,
                            "port": partner_port,
                        }),
                    ),
                };
                self.publish(now, kind, fields);
            }
            match ev {
                BondEvent::Link { port, status } => {
                    let name = self.dp.io.members[port.index()].name.clone();
                    info!(member = %name, %status, "link");
                    if status.usable() {
                        // Speed and duplex can change with the link (and feed LACP's key).
                        if let Ok(sd) = self.link.speed_duplex(&name) {
                            self.bond
                                .set_port_speed(now, port, sd.speed_mbps, duplex(sd.duplex));
                        }
                    }
                }
                BondEvent::ActiveChanged { from, to } => {
                    let name = |p: Option<PortId>| {
                        p.map_or("none", |p| self.dp.io.members[p.index()].name.as_str())
                    };
                    info!(from = name(from), to = name(to), "active member changed");
                }
                BondEvent::MacChanged { mac } => {
                    info!(%mac, "bond MAC follows the active member (fail_over_mac=active)");
                    match self.link.set_mac(&self.config.bond, mac.0) {
                        Ok(()) => self.mac = mac,
                        Err(e) => warn!("setting the MAC of {}: {e}", self.config.bond),
                    }
                }
                BondEvent::MemberMac { port, mac } => {
                    let name = &self.dp.io.members[port.index()].name;
                    info!(member = %name, %mac, "member MAC (fail_over_mac=follow)");
                    if let Err(e) = self.link.set_mac(name, mac.0) {
                        warn!(member = %name, "setting the MAC: {e}");
                    }
                }
                BondEvent::LacpPartner {
                    port,
                    system,
                    key,
                    partner_port,
                } => {
                    let name = &self.dp.io.members[port.index()].name;
                    if system.is_zero() {
                        info!(member = %name, "LACP partner: none");
                    } else {
                        info!(member = %name, %system, key, port = partner_port, "LACP partner");
                    }
                }
                BondEvent::Carrier { up } => {
                    info!(up, "bond carrier");
                    if let Err(e) = self.dp.io.tap.set_carrier(up) {
                        warn!("TAP carrier: {e}");
                    }
                    // Also here, not only when the kernel reports the TAP running again: a
                    // carrier off and on in quick succession (the bond forming just after a
                    // start) may reach rtnetlink as one change, or none, while a solicitation
                    // the host sent meanwhile was dropped.
                    if up {
                        self.resolve_neighbours_again();
                    }
                }
            }
        }
        // 802.3ad: which members distribute, in which aggregator, is LACP's decision, without a
        // bond event.
        let lacp_aggregator = self.bond.lacp().map(|l| l.active_aggregator().map(|a| a.0));
        if let Some(aggregator) = lacp_aggregator {
            if self.bond.usable() != self.distributing.0.as_slice()
                || aggregator != self.distributing.1
            {
                self.distributing = (self.bond.usable().to_vec(), aggregator);
                self.record_lacp_partners();
                let names: Vec<String> = self
                    .distributing
                    .0
                    .iter()
                    .filter_map(|p| self.dp.io.members.get(p.index()))
                    .map(|m| m.name.clone())
                    .collect();
                self.publish(
                    now,
                    "lacp",
                    serde_json::json!({ "distributing": names, "aggregator": aggregator }),
                );
            }
        }
        // Speed changes above may have queued frames (LACP recomputes a port's key).
        self.dp.send_own(&mut self.bond, now);
        if let Some(k) = &mut self.kernel {
            let due =
                self.timers
                    .kernel_due(now, kernel::BEAT_EVERY, self.bond.bucket_sample_interval());
            if due.beat {
                if let Err(e) = k.beat() {
                    warn!("fast path heartbeat: {e}");
                }
            }
            if due.sample {
                if let Err(e) = k.sample_buckets(now, &mut self.bond) {
                    warn!("fast path bucket loads: {e}");
                }
            }
        }
        // Again: the events above (a speed that changed a LACP key) and the bucket sample may
        // have moved the distribution since (nothing written when nothing changed).
        self.sync_kernel_table();
        self.publish_bucket_moves(now);
    }

    /// The kernel programs read the distribution as it now is (one map update, none when
    /// neither it nor a member's LACP partner changed since the last).
    fn sync_kernel_table(&mut self) {
        if let Some(k) = &mut self.kernel {
            if let Err(e) = k.sync(&self.bond) {
                warn!("fast path table: {e}");
            }
        }
    }

    /// Keeps the state file's list of members in sync with a partner up to date, so that a
    /// lagd started after this one is killed can resume them (see `Lacp::resume`).
    fn record_lacp_partners(&mut self) {
        let Some(l) = self.bond.lacp() else { return };
        let records = self
            .dp
            .io
            .members
            .iter()
            .enumerate()
            .filter_map(|(i, m)| {
                let p = l.synced_partner(PortId(i as u16))?;
                Some(LacpRecord::new(&m.name, p))
            })
            .collect();
        if let Err(e) = self.restore.record_lacp(records) {
            warn!("{e:#}");
        }
    }

    /// Streams the bucket moves made since the previous wake: how many per reason, and the
    /// latest in words (as `lagctl show` lists it).
    fn publish_bucket_moves(&mut self, now: Instant) {
        let Some((c, last)) = self.bond.bucket_moves() else {
            return;
        };
        let was = std::mem::replace(&mut self.bucket_moves, c);
        if c.moves() == was.moves() || self.subscribers.is_empty() {
            return;
        }
        let name = |p: PortId| {
            self.dp
                .io
                .members
                .get(p.index())
                .map_or_else(|| format!("#{}", p.index()), |m| m.name.clone())
        };
        let fields = serde_json::json!({
            "rebalance": c.moved_rebalance.saturating_sub(was.moved_rebalance),
            "elephant": c.moved_elephant.saturating_sub(was.moved_elephant),
            "member_left": c.moved_left.saturating_sub(was.moved_left),
            "member_joined": c.moved_joined.saturating_sub(was.moved_joined),
            "latest": last.map(|m| m.describe(name)),
        });
        self.publish(now, "buckets", fields);
    }

    /// `fail_over_mac=follow` changed member MACs: they get their own back when lagd stops.
    pub(super) fn restore_member_macs(&self) {
        if self.config.options.fail_over_mac != FailOverMac::Follow {
            return;
        }
        for ((_, info), m) in self.bond.ports().zip(&self.dp.io.members) {
            let own = info.perm_mac;
            if self.link.mac(&m.name).is_ok_and(|mac| mac != own.0) {
                if let Err(e) = self.link.set_mac(&m.name, own.0) {
                    warn!(member = %m.name, "restoring the MAC: {e}");
                }
            }
        }
    }
}
