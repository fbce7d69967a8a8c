//! The bond's state as plain data for `lagctl show` ([`Bond::snapshot`](super::Bond::snapshot)).

use super::igmp;
use super::mode;
use super::options::Mode;
use super::select;
use super::snapshot::{ArpMonitorSnapshot, BondSnapshot, PortSnapshot, TablesSnapshot};
use super::state::Bond;
use crate::lacp::Lacp;
use crate::port::PortId;
use crate::time::Instant;

impl Bond {
    /// Plain-data state for status output.
    pub(super) fn build_snapshot(&self, now: Instant) -> BondSnapshot {
        let uses_primary = self.opts.mode.uses_primary();
        let active = self.sel.active;
        BondSnapshot {
            mode: self.opts.mode,
            xmit_hash_policy: (self.opts.mode.uses_hash()
                || (self.opts.mode == Mode::BalanceTlb && !self.opts.tlb_dynamic_lb))
                .then_some(self.opts.xmit_hash_policy),
            carrier: self.carrier,
            miimon: self.opts.miimon,
            updelay: self.opts.updelay,
            downdelay: self.opts.downdelay,
            peer_notif_delay: self.opts.peer_notif_delay,
            primary: uses_primary.then(|| self.opts.primary.clone()).flatten(),
            primary_reselect: uses_primary.then_some(self.opts.primary_reselect),
            active: if uses_primary {
                active.map(|a| self.ports[a.index()].info.name.clone())
            } else {
                None
            },
            lacp: self.lacp.as_ref().map(Lacp::snapshot),
            buckets: self.mode.buckets_snapshot(),
            failovers: self.failovers,
            arp_monitor: self.arp.as_ref().map(|_| ArpMonitorSnapshot {
                interval_ms: self.opts.arp_interval,
                missed_max: self.opts.arp_missed_max,
                validate: self.opts.arp_validate,
                all_targets: self.opts.arp_all_targets,
                ip_targets: self.opts.arp_ip_target.clone(),
                ns_targets: self.opts.ns_ip6_target.clone(),
            }),
            tables: TablesSnapshot {
                alb_clients: self.mode.rlb().map_or(0, |r| r.clients.len()),
                alb_clients_max: self.mode.rlb().map_or(0, |_| mode::alb::MAX_CLIENTS),
                alb_clients_evicted: self.mode.rlb().map_or(0, |r| r.evicted),
                igmp_groups: self.igmp.groups(),
                igmp_groups_max: igmp::MAX_GROUPS,
                igmp_groups_evicted: self.igmp.evicted,
            },
            stripe: self.mode.stripe().map(|s| s.snapshot(now)),
            ports: self
                .ports
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let id = PortId(i as u16);
                    PortSnapshot {
                        name: p.info.name.clone(),
                        mii: p.shown_status(),
                        speed_mbps: p.info.speed_mbps,
                        full_duplex: p.info.full_duplex,
                        link_failures: p.link_failures,
                        perm_mac: p.info.perm_mac,
                        prio: select::prio(&self.opts, &p.info.name),
                        active: if uses_primary {
                            active == Some(id)
                        } else if self.lacp.is_some() {
                            self.sel.usable.contains(&id)
                        } else {
                            p.usable()
                        },
                    }
                })
                .collect(),
        }
    }
}
