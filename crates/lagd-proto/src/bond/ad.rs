//! 802.3ad: the bond's side of its [`Lacp`](crate::lacp::Lacp) engine. Members are reported to the engine as
//! their MII status makes them usable or not; the engine's events (who distributes and
//! collects, the aggregator's carrier, partner changes) come back into the selection.

use super::event::BondEvent;
use super::member::PortInfo;
use super::state::Bond;
use crate::hash::MemberMod;
use crate::lacp::{LacpEvent, PortParams};
use crate::port::PortId;
use crate::time::Instant;

impl Bond {
    /// Adds member `id` (just enslaved, described by `info`) to the LACP engine, with its
    /// `actor_port_prio`. Other modes: nothing.
    pub(super) fn add_lacp_port(&mut self, now: Instant, id: PortId, info: &PortInfo) {
        if let Some(l) = &mut self.lacp {
            let mut params = PortParams::new(
                info.perm_mac,
                info.speed_mbps.unwrap_or(0),
                info.full_duplex.unwrap_or(false),
            );
            params.port_priority = actor_port_prio(&self.opts.actor_port_prio, &info.name);
            // Port ids are enslave positions on both sides, so the add cannot collide.
            l.add_port(now, id, params).expect("fresh LACP port id");
        }
    }

    /// Gives every member the `actor_port_prio` the options name for it (255 if none), after
    /// the option changed at run time. Other modes: nothing.
    pub(super) fn set_lacp_priorities(&mut self, now: Instant) {
        let Some(l) = &mut self.lacp else { return };
        for (i, p) in self.ports.iter().enumerate() {
            let id = PortId(i as u16);
            if l.has_port(id) {
                let prio = actor_port_prio(&self.opts.actor_port_prio, &p.info.name);
                l.set_port_priority(now, id, prio);
            }
        }
        self.sync_lacp(now);
    }

    /// Tells the LACP engine about every member whose usability changed.
    pub(super) fn report_links_to_lacp(&mut self, now: Instant) {
        let Some(l) = &mut self.lacp else { return };
        for (i, p) in self.ports.iter().enumerate() {
            let up = p.usable();
            if self.lacp_link[i] != up {
                self.lacp_link[i] = up;
                l.handle_link(
                    now,
                    PortId(i as u16),
                    up,
                    p.info.speed_mbps.unwrap_or(0),
                    p.info.full_duplex.unwrap_or(false),
                );
            }
        }
    }

    /// Acts on the LACP engine's events: a distribution change (who distributes, who
    /// collects) recomputes the usable set and the receive rules; a carrier change sets the
    /// bond's carrier. The engine raises an event for every change of those.
    pub(super) fn sync_lacp(&mut self, now: Instant) {
        let Some(l) = &mut self.lacp else { return };
        let mut distribution = false;
        let mut carrier = None;
        while let Some(ev) = l.poll_event() {
            match ev {
                LacpEvent::DistributionChanged => distribution = true,
                LacpEvent::CarrierChanged { up } => carrier = Some(up),
                LacpEvent::PartnerChanged {
                    port,
                    system,
                    key,
                    partner_port,
                } => self.events.push_back(BondEvent::LacpPartner {
                    port,
                    system,
                    key,
                    partner_port,
                }),
                _ => {}
            }
        }
        if distribution {
            self.sel.usable.clear();
            self.sel.usable.extend(l.distributing_ports());
            self.sel.usable_mod = MemberMod::new(self.sel.usable.len());
            self.refresh_rx_rules();
        }
        if let Some(up) = carrier {
            self.set_carrier(up);
        }
        self.update_weighted(now);
    }
}

/// The `actor_port_prio` the option gives member `name`: its value, else the kernel's 255.
fn actor_port_prio(table: &[(String, u16)], name: &str) -> u16 {
    table
        .iter()
        .find(|(n, _)| n == name)
        .map_or(255, |(_, p)| *p)
}
