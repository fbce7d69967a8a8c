//! The Selection Logic (IEEE Std 802.1AX-2014 §6.4.14), and the choice of the active aggregator.
//!
//! **Selecting an aggregator for a port.** The bond has one aggregator per port (ids 1, 2, …
//! in `add_port` order, as Linux). A port that is UNSELECTED, whose Mux machine is DETACHED and
//! that has carrier is given an aggregator:
//!
//! 1. it joins an aggregator already in use whose ports have the same actor key and the same
//!    partner (system priority, system, key) — the same Link Aggregation Group — provided the
//!    partner is known (non-zero system) and neither the aggregator nor the port is Individual;
//! 2. otherwise it takes a free aggregator: its own if free, else the free one with the lowest
//!    id; the aggregator takes the port's key and partner.
//!
//! A port is Individual when the partner says so (Aggregation bit clear — the partner
//! defaults say so too, and LACP_DISABLED clears it). Ports whose partner is unknown therefore
//! never share an aggregator.
//!
//! **The active aggregator** (`ad_select`, as the Linux bonding driver): the candidates are the
//! aggregators with at least one selected port with carrier. Going through them in id order,
//! starting from the current active one if it is still a candidate, a candidate replaces the
//! best so far if it is
//!
//! 1. not Individual where the best is;
//! 2. else has a partner (non-zero system) where the best has none;
//! 3. else, by policy — `actor_port_prio` (Linux 6.18): the larger sum of the ports'
//!    `actor_port_prio` values, ties as `count`; `count`: more ports, ties by bandwidth;
//!    `stable` and `bandwidth`: more bandwidth (the sum of the ports' speeds).
//!
//! Ports, bandwidth and priorities count the aggregator's ports that have carrier. Note that
//! under `actor_port_prio` the larger number wins (the kernel's rule), where LACP itself
//! prefers the lower port priority. Ties keep the earlier best. With `stable`, the current active aggregator stays while it is
//! a candidate and it has a partner or neither it nor the best has one (unless its key is 0
//! and the best's is not).
//!
//! The choice is made again whenever the machines run, so a port priority changed at run time
//! takes effect at once; the kernel makes it at its next selection (a member's link change,
//! one selected or released), which its own selftest causes by setting a member down and up.
//!
//! Ports selected to the active aggregator are SELECTED; ports selected to any other are
//! STANDBY: a bond forwards over one aggregator, so the others must not attach (their Mux
//! machines wait in WAITING, out of sync, and take over as soon as their aggregator becomes
//! the active one).

use super::config::AdSelect;
use super::port::Port;
use super::state::{MuxState, Selected};
use crate::port::{AggregatorId, PortId};
use crate::wire::EthernetAddress;
use crate::wire::slow::PortState;

/// An aggregator: the Link Aggregation Group its ports share.
#[derive(Debug, Clone)]
pub(crate) struct Aggregator {
    pub(crate) id: AggregatorId,
    /// The port this aggregator came with.
    pub(crate) owner: PortId,
    pub(crate) actor_key: u16,
    pub(crate) partner_system_priority: u16,
    pub(crate) partner_system: EthernetAddress,
    pub(crate) partner_key: u16,
    pub(crate) individual: bool,
}

impl Aggregator {
    pub(crate) fn new(id: AggregatorId, owner: PortId) -> Self {
        Self {
            id,
            owner,
            actor_key: 0,
            partner_system_priority: 0,
            partner_system: EthernetAddress::ZERO,
            partner_key: 0,
            individual: false,
        }
    }

    fn take(&mut self, port: &Port) {
        self.actor_key = port.key;
        self.partner_system_priority = port.partner.system_priority;
        self.partner_system = port.partner.system;
        self.partner_key = port.partner.key;
        self.individual = individual(port);
    }

    fn admits(&self, port: &Port) -> bool {
        !self.individual
            && !individual(port)
            && !port.partner.system.is_zero()
            && self.actor_key == port.key
            && self.partner_system_priority == port.partner.system_priority
            && self.partner_system == port.partner.system
            && self.partner_key == port.partner.key
    }
}

fn individual(port: &Port) -> bool {
    !port.lacp_enabled
        || !port.actor_state.contains(PortState::AGGREGATION)
        || !port.partner.state.contains(PortState::AGGREGATION)
}

/// Runs the Selection Logic and the active-aggregator choice; true if anything changed.
pub(crate) fn run(
    ports: &mut [Port],
    aggs: &mut [Aggregator],
    active: &mut Option<AggregatorId>,
    policy: AdSelect,
) -> bool {
    let mut changed = false;
    // An UNSELECTED port leaves its aggregator once its Mux machine has detached it.
    for p in ports.iter_mut() {
        if p.selected == Selected::Unselected
            && p.mux.state == MuxState::Detached
            && p.aggregator.is_some()
        {
            p.aggregator = None;
            changed = true;
        }
    }
    for i in 0..ports.len() {
        let chosen = {
            let p = &ports[i];
            if p.selected != Selected::Unselected
                || p.mux.state != MuxState::Detached
                || !p.port_enabled
                || p.aggregator.is_some()
            {
                continue;
            }
            let in_use = |a: &Aggregator| ports.iter().any(|q| q.aggregator == Some(a.id));
            match aggs.iter().position(|a| in_use(a) && a.admits(p)) {
                Some(k) => Some((k, false)),
                None => aggs
                    .iter()
                    .position(|a| a.owner == p.id && !in_use(a))
                    .or_else(|| {
                        aggs.iter()
                            .enumerate()
                            .filter(|(_, a)| !in_use(a))
                            .min_by_key(|(_, a)| a.id)
                            .map(|(k, _)| k)
                    })
                    .map(|k| (k, true)),
            }
        };
        if let Some((k, fresh)) = chosen {
            if fresh {
                aggs[k].take(&ports[i]);
            }
            ports[i].aggregator = Some(aggs[k].id);
            ports[i].selected = Selected::Standby;
            changed = true;
        }
    }
    let best = choose_active(ports, aggs, *active, policy);
    if best != *active {
        *active = best;
        changed = true;
    }
    for p in ports.iter_mut() {
        if p.selected == Selected::Unselected {
            continue;
        }
        let want = if p.aggregator.is_some() && p.aggregator == *active {
            Selected::Selected
        } else {
            Selected::Standby
        };
        if p.selected != want {
            p.selected = want;
            changed = true;
        }
    }
    changed
}

/// Ready for `agg`: every port waiting to attach to it has `ready_N`.
pub(crate) fn ready(ports: &[Port], agg: Option<AggregatorId>) -> bool {
    agg.is_some()
        && ports
            .iter()
            .filter(|q| {
                q.aggregator == agg
                    && q.selected != Selected::Unselected
                    && q.mux.state == MuxState::Waiting
            })
            .all(|q| q.ready_n)
}

/// Drops the aggregator `id` (its owner port left the bond). If other ports share it, the
/// group moves, as it is, to a free aggregator (as Linux does): the ports keep their state and
/// traffic is not disturbed; only the aggregator id changes.
pub(crate) fn remove_aggregator(
    ports: &mut [Port],
    aggs: &mut Vec<Aggregator>,
    active: &mut Option<AggregatorId>,
    id: AggregatorId,
) {
    let Some(pos) = aggs.iter().position(|a| a.id == id) else {
        return;
    };
    let old = aggs.remove(pos);
    let moved_to = if ports.iter().any(|p| p.aggregator == Some(id)) {
        // The group uses one aggregator for k ports; the others use at most one each, so with
        // one aggregator per remaining port a free one always exists.
        let free = aggs
            .iter_mut()
            .filter(|a| !ports.iter().any(|p| p.aggregator == Some(a.id)))
            .min_by_key(|a| a.id);
        free.map(|a| {
            let owner = a.owner;
            *a = Aggregator {
                id: a.id,
                owner,
                ..old
            };
            a.id
        })
    } else {
        None
    };
    for p in ports.iter_mut() {
        if p.aggregator == Some(id) {
            match moved_to {
                Some(to) => p.aggregator = Some(to),
                None => p.selected = Selected::Unselected,
            }
        }
    }
    if *active == Some(id) {
        *active = moved_to;
    }
}

/// What the active-aggregator choice compares.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    id: AggregatorId,
    individual: bool,
    has_partner: bool,
    key: u16,
    ports: usize,
    bandwidth: u64,
    /// The sum of the ports' `actor_port_prio` values.
    priority: u64,
}

fn candidates(ports: &[Port], aggs: &[Aggregator]) -> Vec<Candidate> {
    let mut out: Vec<Candidate> = aggs
        .iter()
        .filter_map(|a| {
            let members = ports.iter().filter(|p| {
                p.aggregator == Some(a.id) && p.port_enabled && p.selected != Selected::Unselected
            });
            let (n, bw, prio) = members.fold((0usize, 0u64, 0u64), |(n, bw, prio), p| {
                (
                    n + 1,
                    bw + u64::from(p.speed_mbps),
                    prio + u64::from(p.priority),
                )
            });
            (n > 0).then_some(Candidate {
                id: a.id,
                individual: a.individual,
                has_partner: !a.partner_system.is_zero(),
                key: a.actor_key,
                ports: n,
                bandwidth: bw,
                priority: prio,
            })
        })
        .collect();
    out.sort_by_key(|c| c.id);
    out
}

/// Whether `c` replaces `best` (rules 1–3 of the module docs).
fn better(c: &Candidate, best: &Candidate, policy: AdSelect) -> bool {
    if c.individual != best.individual {
        return !c.individual;
    }
    if c.has_partner != best.has_partner {
        return c.has_partner;
    }
    match policy {
        AdSelect::ActorPortPrio if c.priority != best.priority => c.priority > best.priority,
        AdSelect::Count | AdSelect::ActorPortPrio if c.ports != best.ports => c.ports > best.ports,
        _ => c.bandwidth > best.bandwidth,
    }
}

fn choose_active(
    ports: &[Port],
    aggs: &[Aggregator],
    current: Option<AggregatorId>,
    policy: AdSelect,
) -> Option<AggregatorId> {
    let cands = candidates(ports, aggs);
    let current = cands.iter().find(|c| Some(c.id) == current).copied();
    let mut best = current.or_else(|| cands.first().copied())?;
    for c in &cands {
        if better(c, &best, policy) {
            best = *c;
        }
    }
    if let (AdSelect::Stable, Some(cur)) = (policy, current) {
        if (cur.has_partner || !best.has_partner) && !(cur.key == 0 && best.key != 0) {
            best = cur;
        }
    }
    Some(best.id)
}

#[cfg(test)]
mod test {
    use super::*;

    fn cand(id: u16, individual: bool, partner: bool, ports: usize, bw: u64) -> Candidate {
        Candidate {
            id: AggregatorId(id),
            individual,
            has_partner: partner,
            key: 15,
            ports,
            bandwidth: bw,
            priority: 255 * ports as u64,
        }
    }

    fn with_prio(c: Candidate, priority: u64) -> Candidate {
        Candidate { priority, ..c }
    }

    #[test]
    fn aggregation_beats_individual_then_partner_beats_none() {
        let lag = cand(2, false, true, 1, 1_000);
        let ind = cand(1, true, true, 4, 40_000);
        assert!(better(&lag, &ind, AdSelect::Bandwidth));
        assert!(!better(&ind, &lag, AdSelect::Count));
        let lonely = cand(3, false, false, 4, 40_000);
        assert!(better(&lag, &lonely, AdSelect::Count));
    }

    #[test]
    fn count_and_bandwidth_rank_differently() {
        let two_slow = cand(1, false, true, 2, 2_000);
        let one_fast = cand(2, false, true, 1, 10_000);
        assert!(better(&two_slow, &one_fast, AdSelect::Count));
        assert!(better(&one_fast, &two_slow, AdSelect::Bandwidth));
        assert!(better(&one_fast, &two_slow, AdSelect::Stable));
        // Count ties go to bandwidth; bandwidth ties keep the best.
        let two_fast = cand(3, false, true, 2, 20_000);
        assert!(better(&two_fast, &two_slow, AdSelect::Count));
        assert!(!better(
            &cand(4, false, true, 2, 2_000),
            &two_slow,
            AdSelect::Bandwidth
        ));
    }

    #[test]
    fn actor_port_prio_the_larger_sum_wins_whatever_count_or_bandwidth() {
        let many = with_prio(cand(1, false, true, 3, 30_000), 30);
        let one = with_prio(cand(2, false, true, 1, 1_000), 1000);
        assert!(better(&one, &many, AdSelect::ActorPortPrio));
        assert!(!better(&many, &one, AdSelect::ActorPortPrio));
        // The other policies do not look at the priorities.
        assert!(better(&many, &one, AdSelect::Count));
        assert!(better(&many, &one, AdSelect::Bandwidth));
    }

    #[test]
    fn actor_port_prio_ties_go_to_count_then_bandwidth_then_the_earlier() {
        let two = with_prio(cand(1, false, true, 2, 2_000), 510);
        let three = with_prio(cand(2, false, true, 3, 3_000), 510);
        assert!(better(&three, &two, AdSelect::ActorPortPrio));
        assert!(!better(&two, &three, AdSelect::ActorPortPrio));
        let slow = with_prio(cand(3, false, true, 2, 2_000), 510);
        let fast = with_prio(cand(4, false, true, 2, 20_000), 510);
        assert!(better(&fast, &slow, AdSelect::ActorPortPrio));
        assert!(!better(&slow, &fast, AdSelect::ActorPortPrio));
        // All equal: the best so far stays.
        assert!(!better(&two, &slow, AdSelect::ActorPortPrio));
        assert!(!better(&slow, &two, AdSelect::ActorPortPrio));
    }

    #[test]
    fn actor_port_prio_comes_after_individual_and_partner() {
        let lag = with_prio(cand(1, false, true, 1, 1_000), 1);
        let ind = with_prio(cand(2, true, true, 1, 1_000), 65_535);
        let lonely = with_prio(cand(3, false, false, 1, 1_000), 65_535);
        assert!(!better(&ind, &lag, AdSelect::ActorPortPrio));
        assert!(!better(&lonely, &lag, AdSelect::ActorPortPrio));
        assert!(better(&lag, &ind, AdSelect::ActorPortPrio));
        assert!(better(&lag, &lonely, AdSelect::ActorPortPrio));
    }
}
