//! Selection as the bond runs it: after every change of a member's state, the usable set, the
//! active member (with its failover announcement and `fail_over_mac`), the receive rules, the
//! members' weights as the mode sees them and the bond's carrier are brought up to date. The
//! rules themselves are in `select`; 802.3ad's engine decides through `ad`.

use super::event::BondEvent;
use super::member::MiiStatus;
use super::monitor;
use super::select::{self, Macs};
use super::state::Bond;
use crate::hash::MemberMod;
use crate::port::PortId;
use crate::time::Instant;

impl Bond {
    /// Recomputes the usable set, the active member, the receive rules and the bond carrier,
    /// and acts on what changed.
    pub(super) fn reselect(&mut self, now: Instant) {
        self.reselect_with(now, false);
    }

    /// [`reselect`](Self::reselect); with `forced`, as after a change of an option the driver
    /// reselects on (see [`select::Trigger`]).
    pub(super) fn reselect_with(&mut self, now: Instant, forced: bool) {
        // Nothing usable but a member coming back: use it now, updelay or not.
        if !self.ports.iter().any(|p| p.usable()) {
            if let Some(i) = self
                .ports
                .iter()
                .position(|p| p.mii == MiiStatus::GoingBack)
            {
                let port = PortId(i as u16);
                monitor::set_status(&mut self.ports, now, port, MiiStatus::Up, &mut self.events);
            }
        }
        if self.lacp.is_some() {
            self.report_links_to_lacp(now);
            self.sync_lacp(now);
            return;
        }
        let usable_changed = !select::usable_ports(&self.ports).eq(self.sel.usable.iter().copied());
        // Members usable now that were not: their link came up (the driver's trigger for a
        // reselection when one has a higher `prio` than the active member).
        let came_up: Vec<PortId> = if usable_changed {
            select::usable_ports(&self.ports)
                .filter(|p| !self.sel.usable.contains(p))
                .collect()
        } else {
            Vec::new()
        };
        if usable_changed {
            self.sel.usable.clear();
            self.sel.usable.extend(select::usable_ports(&self.ports));
            self.sel.usable_mod = MemberMod::new(self.sel.usable.len());
        }
        self.update_weighted(now);
        let trigger = select::Trigger {
            came_up: &came_up,
            forced,
        };
        let active = select::choose_active(&self.ports, &self.opts, &self.sel, trigger);
        if self.sel.force_primary && select::primary_up(&self.ports, &self.opts).is_some() {
            // Spent: the primary was up for this choice.
            self.sel.force_primary = false;
        }
        let active_changed = active != self.sel.active;
        if active_changed {
            self.switch_active(now, active);
        }
        self.after_selection(now, usable_changed, active_changed);
    }

    /// Makes `active` the active member: the event, the failover announcement and
    /// `fail_over_mac`.
    pub(super) fn switch_active(&mut self, now: Instant, active: Option<PortId>) {
        if self.opts.mode.uses_primary() {
            self.events.push_back(BondEvent::ActiveChanged {
                from: self.sel.active,
                to: active,
            });
        }
        if self.sel.active.is_some() && active.is_some() && self.opts.mode.uses_primary() {
            self.failovers += 1;
        }
        // A failover (not the first choice) is announced to the network.
        if self.sel.active.is_some()
            && active.is_some()
            && self.opts.mode.uses_primary()
            && (self.opts.num_grat_arp > 0 || self.opts.num_unsol_na > 0)
        {
            self.notify.start(now);
        }
        self.sel.active = active;
        let macs = Macs {
            bond: self.mac,
            ports: &self.ports,
            active,
        };
        if let Some(mac) =
            select::fail_over_mac(&self.opts, &macs, &mut self.member_macs, &mut self.events)
        {
            self.mac = mac;
        }
    }

    /// What follows a selection: the mode, IGMP replays, the carrier, the receive rules.
    pub(super) fn after_selection(
        &mut self,
        now: Instant,
        usable_changed: bool,
        active_changed: bool,
    ) {
        self.mode
            .selection_changed(now, &self.sel, usable_changed, active_changed);
        let igmp_port = select::igmp_member(self.opts.mode, &self.sel);
        if igmp_port != self.igmp_port {
            if self.igmp_port.is_some() && igmp_port.is_some() {
                self.igmp.schedule(now, self.opts.resend_igmp);
            }
            self.igmp_port = igmp_port;
        }
        self.set_carrier(!self.sel.usable.is_empty());
        if usable_changed || active_changed {
            self.refresh_rx_rules();
        }
    }

    pub(super) fn set_carrier(&mut self, carrier: bool) {
        if carrier != self.carrier {
            self.carrier = carrier;
            // The distribution sends nothing without carrier.
            self.generation += 1;
            self.events.push_back(BondEvent::Carrier { up: carrier });
        }
    }

    /// Recomputes who may deliver to the host, per member.
    pub(super) fn refresh_rx_rules(&mut self) {
        for i in 0..self.ports.len() {
            let port = PortId(i as u16);
            self.rx_rules[i] =
                select::rx_rule(&self.opts, port, self.sel.active, self.lacp.as_ref());
        }
        self.generation += 1;
    }

    /// Gives the mode the usable members and their weights, when those changed.
    pub(super) fn update_weighted(&mut self, now: Instant) {
        if !self.mode.weighs_members() {
            return;
        }
        let weigh = |p: PortId| (p, select::weight(&self.opts, &self.ports[p.index()].info));
        // Called on every timeout: compare first, so nothing is allocated unless something
        // changed.
        if self
            .sel
            .usable
            .iter()
            .map(|&p| weigh(p))
            .eq(self.weighted.iter().copied())
        {
            return;
        }
        let fresh: Vec<(PortId, u32)> = self.sel.usable.iter().map(|&p| weigh(p)).collect();
        self.mode.set_members(now, &fresh);
        self.weighted = fresh;
        self.generation += 1;
    }
}
