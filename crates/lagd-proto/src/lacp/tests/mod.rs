//! Tests that span the machines.
//!
//! - [`script`]: helpers for "at t=X receive this LACPDU, expect that one" tests against one
//!   bond.
//! - [`Sim`]: a virtual-time network of bonds joined by links, each with carrier, a loss flag
//!   per direction and a latency, plus a tamper hook that rewrites LACPDUs in flight. It can
//!   check the safety invariant after every event.
//! - `scenario`: the scenarios of issue 4 on two (or three) bonds.
//! - `prop`: property tests over random event sequences.

mod prop;
mod scenario;

use core::time::Duration;

use super::{
    Lacp, LacpConfig, LacpEvent, LacpSnapshot, MAX_FRAME_LEN, MuxState, PortId, PortParams,
};
use crate::time::Instant;
use crate::wire::EthernetAddress;
use crate::wire::slow::{LacpInfo, LacpRepr, PortState, SlowPdu};

/// Helpers for scripted single-bond tests.
pub(crate) mod script {
    use super::*;
    use crate::wire::slow::LacpInfo;

    /// The system id of the bond under test.
    pub(crate) const A_SYS: EthernetAddress = EthernetAddress([0x02, 0xaa, 0, 0, 0, 1]);
    /// The system id of the scripted partner.
    pub(crate) const B_SYS: EthernetAddress = EthernetAddress([0x02, 0xbb, 0, 0, 0, 1]);

    /// `ms` milliseconds after the epoch.
    pub(crate) const fn at(ms: u64) -> Instant {
        Instant::from_millis(ms)
    }

    /// The MAC of port `i` of the bond under test.
    pub(crate) const fn port_mac(i: u8) -> EthernetAddress {
        EthernetAddress([0x02, 0xaa, 0, 0, 1, i])
    }

    /// A bond with ports `PortId(0..n)` (10G full duplex, link down), added at t=0.
    pub(crate) fn bond(cfg: LacpConfig, n: u8) -> Lacp {
        let mut l = Lacp::new(cfg, A_SYS).expect("valid config");
        for i in 0..n {
            l.add_port(
                Instant::ZERO,
                PortId(u16::from(i)),
                PortParams::new(port_mac(i), 10_000, true),
            )
            .expect("new port");
        }
        l
    }

    /// A LACPDU from the scripted partner's port `port` (key 15, priorities 65535 / 255),
    /// describing us as `partner` (all zero if `None`).
    pub(crate) fn partner_pdu(port: u16, state: PortState, partner: Option<LacpInfo>) -> LacpRepr {
        LacpRepr {
            actor: LacpInfo {
                system_priority: 65535,
                system: B_SYS,
                key: 15,
                port_priority: 255,
                port,
                state,
            },
            partner: partner.unwrap_or_default(),
            ..LacpRepr::default()
        }
    }

    /// The LACPDU as a frame from the partner.
    pub(crate) fn frame(pdu: &LacpRepr) -> Vec<u8> {
        let mut f = vec![0; pdu.frame_len()];
        pdu.emit_frame(EthernetAddress([0x02, 0xbb, 0, 0, 1, 0]), &mut f);
        f
    }

    /// Every frame the bond sends at `t`, parsed.
    pub(crate) fn drain_all(l: &mut Lacp, t: Instant) -> Vec<(PortId, SlowPdu)> {
        let mut buf = [0u8; MAX_FRAME_LEN];
        let mut out = Vec::new();
        while let Some(tx) = l.poll_transmit(t, &mut buf) {
            let pdu = SlowPdu::parse_frame(&buf[..tx.len]).expect("we send valid PDUs");
            out.push((tx.port, pdu));
        }
        out
    }

    /// Every LACPDU the bond sends at `t` (other PDUs are dropped).
    pub(crate) fn drain(l: &mut Lacp, t: Instant) -> Vec<(PortId, LacpRepr)> {
        drain_all(l, t)
            .into_iter()
            .filter_map(|(p, pdu)| match pdu {
                SlowPdu::Lacp(r) => Some((p, r)),
                _ => None,
            })
            .collect()
    }
}

/// One end of a link: a port of a bond.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct End {
    /// Index of the bond in [`Sim::bonds`].
    pub(crate) bond: usize,
    /// The port.
    pub(crate) port: PortId,
}

/// A cable between two ports.
#[derive(Debug, Clone)]
pub(crate) struct Link {
    pub(crate) ends: [End; 2],
    pub(crate) up: bool,
    /// `loss[i]`: frames sent from `ends[i]` are lost.
    pub(crate) loss: [bool; 2],
    pub(crate) latency: Duration,
    pub(crate) speed_mbps: u32,
}

/// What became of a frame a bond sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fate {
    /// In flight, to arrive at this time (if the link stays up).
    Sent(Instant),
    /// Dropped by the loss flag.
    Lost,
    /// The link was down, or the port has no link.
    NoLink,
}

/// A frame a bond sent, as the sim saw it (after tampering).
#[derive(Debug, Clone)]
pub(crate) struct Sent {
    pub(crate) at: Instant,
    pub(crate) from: End,
    pub(crate) pdu: SlowPdu,
    pub(crate) fate: Fate,
}

/// A frame delivered to a bond.
#[derive(Debug, Clone)]
pub(crate) struct Received {
    pub(crate) at: Instant,
    pub(crate) to: End,
    pub(crate) pdu: SlowPdu,
}

/// What the tamper hook is told about a LACPDU in flight.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Flight {
    pub(crate) link: usize,
    pub(crate) from_bond: usize,
}

/// Rewrites a LACPDU in flight.
pub(crate) type Tamper = Box<dyn FnMut(Flight, &mut LacpRepr)>;

struct InFlight {
    deliver_at: Instant,
    seq: u64,
    link: usize,
    to: usize,
    frame: Vec<u8>,
}

/// A virtual-time network of bonds.
pub(crate) struct Sim {
    pub(crate) now: Instant,
    pub(crate) bonds: Vec<Lacp>,
    pub(crate) links: Vec<Link>,
    pub(crate) tamper: Option<Tamper>,
    /// Every frame sent, in order.
    pub(crate) sent: Vec<Sent>,
    /// Every frame delivered, in order.
    pub(crate) received: Vec<Received>,
    /// Check the invariant (see [`Sim::check_invariant`]) after every event.
    pub(crate) check: bool,
    flights: Vec<InFlight>,
    seq: u64,
    steps: u64,
    /// Per bond, what a driver that re-reads the engine only when it raises an event (as
    /// `Bond` does) believes.
    views: Vec<EventView>,
    /// Per bond, the events drained since the last [`Sim::take_events`].
    events: Vec<Vec<LacpEvent>>,
}

/// The dataplane's decisions as last read after an event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct EventView {
    distributing: Vec<PortId>,
    collecting: Vec<PortId>,
    carrier: bool,
}

impl EventView {
    fn read(l: &Lacp) -> Self {
        Self {
            distributing: l.distributing_ports().collect(),
            collecting: l
                .snapshot()
                .ports
                .iter()
                .map(|p| p.port)
                .filter(|&p| l.is_collecting(p))
                .collect(),
            carrier: l.carrier(),
        }
    }
}

/// The default link latency.
pub(crate) const LATENCY: Duration = Duration::from_millis(1);

impl Sim {
    /// No bonds, no links, t=0, invariant checked.
    pub(crate) fn new() -> Self {
        Self {
            now: Instant::ZERO,
            bonds: Vec::new(),
            links: Vec::new(),
            tamper: None,
            sent: Vec::new(),
            received: Vec::new(),
            check: true,
            flights: Vec::new(),
            seq: 0,
            steps: 0,
            views: Vec::new(),
            events: Vec::new(),
        }
    }

    /// The system id of bond `i` (02:ss:00:00:00:01 with ss = 0xa0 + i).
    pub(crate) fn system_of(i: usize) -> EthernetAddress {
        EthernetAddress([0x02, 0xa0 + u8::try_from(i).unwrap(), 0, 0, 0, 1])
    }

    /// Adds a bond with no ports; returns its index.
    pub(crate) fn add_bond(&mut self, cfg: LacpConfig) -> usize {
        let i = self.bonds.len();
        self.bonds
            .push(Lacp::new(cfg, Self::system_of(i)).expect("valid config"));
        self.views.push(EventView::default());
        self.events.push(Vec::new());
        i
    }

    /// Joins port `a` of bond `a.0` and port `b` of bond `b.0` (adding the ports), link down.
    pub(crate) fn connect(&mut self, a: (usize, u16), b: (usize, u16), speed_mbps: u32) -> usize {
        let ends = [a, b].map(|(bond, port)| End {
            bond,
            port: PortId(port),
        });
        for e in ends {
            let mut mac = self.bonds[e.bond].system().0;
            mac[4] = 1;
            mac[5] = u8::try_from(e.port.0).unwrap();
            self.bonds[e.bond]
                .add_port(
                    self.now,
                    e.port,
                    PortParams::new(EthernetAddress(mac), speed_mbps, true),
                )
                .expect("new port");
        }
        self.links.push(Link {
            ends,
            up: false,
            loss: [false; 2],
            latency: LATENCY,
            speed_mbps,
        });
        self.links.len() - 1
    }

    /// Two bonds joined by `n` 10G links, port i to port i; links down.
    pub(crate) fn pair(a: LacpConfig, b: LacpConfig, n: u16) -> Self {
        let mut sim = Self::new();
        sim.add_bond(a);
        sim.add_bond(b);
        for i in 0..n {
            sim.connect((0, i), (1, i), 10_000);
        }
        sim
    }

    /// Brings link `i` up at the current time (both ends learn at once).
    pub(crate) fn link_up(&mut self, i: usize) {
        self.set_link(i, true);
    }

    /// Takes link `i` down at the current time.
    pub(crate) fn link_down(&mut self, i: usize) {
        self.set_link(i, false);
    }

    /// Every link up.
    pub(crate) fn all_links_up(&mut self) {
        for i in 0..self.links.len() {
            self.link_up(i);
        }
    }

    fn set_link(&mut self, i: usize, up: bool) {
        self.links[i].up = up;
        let speed = self.links[i].speed_mbps;
        for e in self.links[i].ends {
            if self.bonds[e.bond].has_port(e.port) {
                self.bonds[e.bond].handle_link(self.now, e.port, up, speed, true);
            }
        }
        self.collect();
        self.check_if_asked();
    }

    /// Sets the speed link `i` reports (applied at its next `link_up`).
    pub(crate) fn set_speed(&mut self, i: usize, speed_mbps: u32) {
        self.links[i].speed_mbps = speed_mbps;
    }

    /// Loss on link `i`, both directions.
    pub(crate) fn set_loss(&mut self, i: usize, on: bool) {
        self.links[i].loss = [on; 2];
    }

    /// Loss on link `i` for frames sent from end `from` (0 or 1).
    pub(crate) fn set_loss_from(&mut self, i: usize, from: usize, on: bool) {
        self.links[i].loss[from] = on;
    }

    /// Replaces bond `i` by a fresh one with another system id (a reboot), with the same
    /// ports; ports whose link is up come up at once.
    pub(crate) fn reboot(&mut self, i: usize, cfg: LacpConfig, system: EthernetAddress) {
        self.reboot_resumed(i, cfg, system, &[]);
    }

    /// [`reboot`](Self::reboot), the new bond [`resume`](Lacp::resume)d with `records` before
    /// it sends anything (as the daemon does).
    pub(crate) fn reboot_resumed(
        &mut self,
        i: usize,
        cfg: LacpConfig,
        system: EthernetAddress,
        records: &[(PortId, LacpInfo)],
    ) {
        let mut fresh = Lacp::new(cfg, system).expect("valid config");
        for (li, link) in self.links.iter().enumerate() {
            for e in link.ends.iter().filter(|e| e.bond == i) {
                let mut mac = system.0;
                mac[4] = 1;
                mac[5] = u8::try_from(e.port.0).unwrap();
                fresh
                    .add_port(
                        self.now,
                        e.port,
                        PortParams::new(EthernetAddress(mac), link.speed_mbps, true),
                    )
                    .expect("new port");
                if self.links[li].up {
                    fresh.handle_link(self.now, e.port, true, link.speed_mbps, true);
                }
            }
        }
        for &(port, info) in records {
            fresh.resume(port, info);
        }
        self.bonds[i] = fresh;
        self.views[i] = EventView::default();
        self.collect();
        self.check_if_asked();
    }

    /// Puts `frame` on link `link` towards end `to`, as if sent now by the other end.
    pub(crate) fn inject(&mut self, link: usize, to: usize, frame: Vec<u8>) {
        self.seq += 1;
        self.flights.push(InFlight {
            deliver_at: self.now + self.links[link].latency,
            seq: self.seq,
            link,
            to,
            frame,
        });
    }

    /// When something next happens: a delivery or a bond's timer.
    pub(crate) fn next_event(&self) -> Option<Instant> {
        let flight = self.flights.iter().map(|f| f.deliver_at).min();
        let timer = self.bonds.iter().filter_map(Lacp::poll_timeout).min();
        [flight, timer]
            .into_iter()
            .flatten()
            .min()
            .map(|t| t.max(self.now))
    }

    /// Moves to `t` (not before now): delivers what is due, runs the timers, sends.
    pub(crate) fn step_at(&mut self, t: Instant) {
        assert!(t >= self.now, "time goes forward");
        self.steps += 1;
        assert!(self.steps < 5_000_000, "the simulation does not settle");
        self.now = t;
        loop {
            let due = self
                .flights
                .iter()
                .enumerate()
                .filter(|(_, f)| f.deliver_at <= t)
                .min_by_key(|(_, f)| (f.deliver_at, f.seq))
                .map(|(k, _)| k);
            let Some(k) = due else { break };
            let f = self.flights.remove(k);
            let link = &self.links[f.link];
            let to = link.ends[f.to];
            if !link.up || !self.bonds[to.bond].has_port(to.port) {
                continue;
            }
            self.bonds[to.bond].handle_frame(t, to.port, &f.frame);
            if let Ok(pdu) = SlowPdu::parse_frame(&f.frame) {
                self.received.push(Received { at: t, to, pdu });
            }
        }
        for b in &mut self.bonds {
            b.handle_timeout(t);
        }
        self.collect();
        self.check_if_asked();
    }

    /// Steps to the next event if it is not after `deadline`; false if there is none.
    pub(crate) fn step_until(&mut self, deadline: Instant) -> bool {
        match self.next_event() {
            Some(t) if t <= deadline => {
                self.step_at(t);
                true
            }
            _ => false,
        }
    }

    /// Runs every event up to and including `t`, and ends at `t`.
    pub(crate) fn run_until(&mut self, t: Instant) {
        while self.step_until(t) {}
        if t > self.now {
            self.step_at(t);
        }
    }

    /// Runs until `cond` holds (checked after every event) or `deadline`; returns the first
    /// time it holds. State only changes at events, so that time is exact.
    pub(crate) fn run_until_cond(
        &mut self,
        deadline: Instant,
        cond: impl Fn(&Self) -> bool,
    ) -> Option<Instant> {
        loop {
            if cond(self) {
                return Some(self.now);
            }
            if !self.step_until(deadline) {
                if deadline > self.now {
                    self.step_at(deadline);
                }
                return cond(self).then_some(self.now);
            }
        }
    }

    fn collect(&mut self) {
        let mut buf = [0u8; MAX_FRAME_LEN];
        for bi in 0..self.bonds.len() {
            while let Some(tx) = self.bonds[bi].poll_transmit(self.now, &mut buf) {
                let frame = buf[..tx.len].to_vec();
                self.send(bi, tx.port, frame);
            }
        }
    }

    fn send(&mut self, bond: usize, port: PortId, mut frame: Vec<u8>) {
        let from = End { bond, port };
        let found = self
            .links
            .iter()
            .enumerate()
            .find_map(|(li, l)| l.ends.iter().position(|e| *e == from).map(|k| (li, k)));
        let fate = match found {
            Some((li, _)) if !self.links[li].up => Fate::NoLink,
            None => Fate::NoLink,
            Some((li, k)) if self.links[li].loss[k] => Fate::Lost,
            Some((li, k)) => {
                if let (Some(tamper), Ok(mut pdu)) =
                    (self.tamper.as_mut(), LacpRepr::parse_frame(&frame))
                {
                    let before = pdu.clone();
                    tamper(
                        Flight {
                            link: li,
                            from_bond: bond,
                        },
                        &mut pdu,
                    );
                    if pdu != before {
                        let src = EthernetAddress::from_bytes(&frame[6..12]);
                        frame = vec![0; pdu.frame_len()];
                        pdu.emit_frame(src, &mut frame);
                    }
                }
                let deliver_at = self.now + self.links[li].latency;
                self.seq += 1;
                self.flights.push(InFlight {
                    deliver_at,
                    seq: self.seq,
                    link: li,
                    to: 1 - k,
                    frame: frame.clone(),
                });
                Fate::Sent(deliver_at)
            }
        };
        let pdu = SlowPdu::parse_frame(&frame).expect("bonds send valid PDUs");
        self.sent.push(Sent {
            at: self.now,
            from,
            pdu,
            fate,
        });
    }

    fn check_if_asked(&mut self) {
        self.check_events();
        if self.check {
            self.check_invariant();
        }
    }

    /// Every change of the dataplane's decisions raised an event: a driver that re-reads
    /// them only after an event agrees with the engine.
    fn check_events(&mut self) {
        for (bi, b) in self.bonds.iter_mut().enumerate() {
            let mut any = false;
            while let Some(ev) = b.poll_event() {
                self.events[bi].push(ev);
                any = true;
            }
            if any {
                self.views[bi] = EventView::read(b);
            }
            assert_eq!(
                self.views[bi],
                EventView::read(b),
                "bond {bi}: a change raised no event (at {})",
                self.now
            );
        }
    }

    /// The safety invariant, for every port of every bond: a port whose Mux machine
    /// distributes has its Distributing bit set and a partner in sync in our view (and, with
    /// independent control, a collecting partner); with the fallback off, the dataplane sends
    /// on exactly the ports whose Mux machine distributes and whose partner collects.
    pub(crate) fn check_invariant(&self) {
        for (bi, b) in self.bonds.iter().enumerate() {
            let s = b.snapshot();
            for p in &s.ports {
                let mux_dist = matches!(
                    p.mux,
                    MuxState::CollectingDistributing | MuxState::Distributing
                );
                let bit = p.actor.state.contains(PortState::DISTRIBUTING);
                assert_eq!(mux_dist, bit, "bond {bi} port {}: mux/bit mismatch", p.port);
                if bit {
                    assert!(
                        p.partner.state.contains(PortState::SYNCHRONIZATION),
                        "bond {bi} port {} distributes with its partner out of sync at {}",
                        p.port,
                        self.now
                    );
                    assert!(
                        p.up,
                        "bond {bi} port {} distributes without carrier",
                        p.port
                    );
                    assert_eq!(
                        p.aggregator, s.active_aggregator,
                        "bond {bi} port {} distributes outside the active aggregator",
                        p.port
                    );
                    if !s.coupled_control {
                        assert!(p.partner.state.contains(PortState::COLLECTING));
                    }
                }
                if s.fallback_active.is_none() {
                    let partner_collects = p.partner.state.contains(PortState::COLLECTING);
                    assert_eq!(
                        p.distributing,
                        bit && partner_collects,
                        "bond {bi} port {}",
                        p.port
                    );
                }
            }
        }
    }

    /// The events bond `b` raised since the last call.
    pub(crate) fn take_events(&mut self, b: usize) -> Vec<LacpEvent> {
        std::mem::take(&mut self.events[b])
    }

    /// Bond `b`'s snapshot.
    pub(crate) fn snap(&self, b: usize) -> LacpSnapshot {
        self.bonds[b].snapshot()
    }

    /// Whether every port of bond `b` distributes.
    pub(crate) fn all_distributing(&self, b: usize) -> bool {
        let bond = &self.bonds[b];
        bond.ports().all(|p| bond.is_distributing(p))
    }

    /// The ports of bond `b` that distribute.
    pub(crate) fn distributing(&self, b: usize) -> Vec<u16> {
        self.bonds[b].distributing_ports().map(|p| p.0).collect()
    }

    /// Times LACPDUs were delivered to `(bond, port)`.
    pub(crate) fn lacpdus_received(&self, bond: usize, port: u16) -> Vec<Instant> {
        self.received
            .iter()
            .filter(|r| r.to.bond == bond && r.to.port == PortId(port))
            .filter(|r| matches!(r.pdu, SlowPdu::Lacp(_)))
            .map(|r| r.at)
            .collect()
    }

    /// Times `(bond, port)` sent a LACPDU.
    pub(crate) fn lacpdus_sent(&self, bond: usize, port: u16) -> Vec<Instant> {
        self.sent
            .iter()
            .filter(|s| s.from.bond == bond && s.from.port == PortId(port))
            .filter(|s| matches!(s.pdu, SlowPdu::Lacp(_)))
            .map(|s| s.at)
            .collect()
    }
}
