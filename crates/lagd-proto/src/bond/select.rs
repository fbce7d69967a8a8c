//! Selection rules: which member is active, who may deliver to the host, what a member weighs,
//! and `fail_over_mac`. In 802.3ad the LACP engine decides who distributes and collects;
//! elsewhere a member's link state does, with the driver's `bond_find_best_slave` for the
//! active member. The bond applies these rules whenever a member's state changes.

use core::time::Duration;

use super::event::BondEvent;
use super::member::{MiiStatus, Port, PortInfo};
use super::monitor::Events;
use super::options::{BondOptions, FailOverMac, Mode, PrimaryReselect};
use super::verdict::{DropReason, RxRule};
use crate::hash::MemberMod;
use crate::lacp::{Lacp, LacpConfig};
use crate::port::PortId;
use crate::wire::EthernetAddress;

/// What selection decided, as every mode reads it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Selection {
    /// Usable members in enslave order: what a hash picks among.
    pub(crate) usable: Vec<PortId>,
    /// `hash % usable.len()`, prepared.
    pub(crate) usable_mod: Option<MemberMod>,
    /// The active member (modes with one; in 802.3ad, none).
    pub(crate) active: Option<PortId>,
    /// The driver's `force_primary`: the primary was just enslaved or named, and takes over
    /// the next time it is up whatever `primary_reselect` says (once).
    pub(crate) force_primary: bool,
}

impl Selection {
    /// The member `hash` picks among the usable ones, modulo their number.
    pub(crate) fn by_hash(&self, hash: u32) -> Option<PortId> {
        self.usable_mod.map(|m| self.usable[m.index(hash)])
    }
}

/// The MACs a frame fix-up needs: the bond's own, and each member's as the network sees it.
pub(crate) struct Macs<'a> {
    /// The bond's MAC.
    pub(crate) bond: EthernetAddress,
    /// The members.
    pub(crate) ports: &'a [Port],
    /// The active member.
    pub(crate) active: Option<PortId>,
}

impl Macs<'_> {
    /// The MAC member `port` shows the network: the bond's on the active member; its own on the
    /// others, except that the member whose own MAC is the bond's uses the active member's own
    /// MAC instead (the driver swaps the two), so no MAC is on two ports.
    pub(crate) fn wire_mac(&self, port: PortId) -> EthernetAddress {
        if Some(port) == self.active {
            return self.bond;
        }
        let own = self.ports[port.index()].info.perm_mac;
        match self.active {
            Some(a) if own == self.bond => self.ports[a.index()].info.perm_mac,
            _ => own,
        }
    }
}

/// The LACP configuration the bonding options describe.
pub(crate) fn lacp_config(o: &BondOptions) -> LacpConfig {
    LacpConfig {
        lacp_rate: o.lacp_rate,
        lacp_active: o.lacp_active,
        ad_select: o.ad_select,
        ad_actor_sys_prio: o.ad_actor_sys_prio,
        ad_actor_system: o.ad_actor_system.unwrap_or(EthernetAddress::ZERO),
        ad_user_port_key: o.ad_user_port_key,
        min_links: o.min_links,
        coupled_control: o.coupled_control,
        fallback: (o.lacp_fallback > 0).then(|| Duration::from_millis(o.lacp_fallback.into())),
        aggregate_wait: Duration::from_millis(o.lacp_aggregate_wait.into()),
        rejoin_hold: Duration::from_millis(o.lacp_rejoin_hold.into()),
    }
}

/// The usable members, in enslave order.
pub(crate) fn usable_ports(ports: &[Port]) -> impl Iterator<Item = PortId> + '_ {
    ports
        .iter()
        .enumerate()
        .filter(|(_, p)| p.usable())
        .map(|(i, _)| PortId(i as u16))
}

/// What set a selection off. The driver picks a new active member only on some events (its
/// calls of `bond_select_active_slave`); with per-member `prio` the choice depends on whether
/// one of them happened, so the bond says which.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Trigger<'a> {
    /// Members that have just become usable (their link came up).
    pub(crate) came_up: &'a [PortId],
    /// An option the driver reselects on changed (`primary`, `primary_reselect`, and `prio`
    /// when no primary is set).
    pub(crate) forced: bool,
}

/// Member `name`'s `prio` (0 unless configured, and in modes without an active member).
pub(crate) fn prio(opts: &BondOptions, name: &str) -> i32 {
    if !opts.mode.uses_primary() {
        return 0;
    }
    opts.prio
        .iter()
        .find(|(n, _)| n == name)
        .map_or(0, |(_, p)| *p)
}

/// The driver's `bond_find_best_slave` with `primary_reselect` and per-member `prio` (Linux
/// 6.0 and later):
///
/// - the primary, when it is up and the policy lets it take over;
/// - else, when the driver would reselect now (see [`Trigger`]: no usable active member, a
///   member came up with a higher `prio` than the active one's, or a reselecting option
///   changed), the up member with the highest `prio` (the first in enslave order on a tie):
///   it replaces a usable active member as `primary_reselect` allows (`always`: yes; `better`:
///   if faster; `failure`: no);
/// - else the current active member while usable, else the first usable member.
///
/// With no `prio` configured every member has 0, and this is what kernels before 6.0 do.
pub(crate) fn choose_active(
    ports: &[Port],
    opts: &BondOptions,
    sel: &Selection,
    trigger: Trigger<'_>,
) -> Option<PortId> {
    let current = sel.active.filter(|&a| ports[a.index()].usable());
    let primary = primary_up(ports, opts);
    let take = |p: PortId| match (opts.primary_reselect, current) {
        (_, None) => true,
        (PrimaryReselect::Always, _) => true,
        (PrimaryReselect::Better, Some(c)) => {
            better(&ports[p.index()].info, &ports[c.index()].info)
        }
        (PrimaryReselect::Failure, Some(c)) => c == p,
    };
    if let Some(p) = primary {
        if sel.force_primary || take(p) {
            return Some(p);
        }
        return current.or_else(|| sel.usable.first().copied());
    }
    let prio_of = |p: PortId| prio(opts, &ports[p.index()].info.name);
    let due = trigger.forced
        || current.is_none()
        || trigger
            .came_up
            .iter()
            .any(|&p| current.is_some_and(|c| prio_of(p) > prio_of(c)));
    if due {
        let mut best: Option<PortId> = None;
        for (i, _) in ports.iter().enumerate().filter(|(_, p)| up(p)) {
            let p = PortId(i as u16);
            if best.is_none_or(|b| prio_of(p) > prio_of(b)) {
                best = Some(p);
            }
        }
        if let Some(b) = best.filter(|&b| Some(b) != current) {
            if take(b) {
                return Some(b);
            }
        }
    }
    current.or_else(|| sel.usable.first().copied())
}

/// The driver's BOND_LINK_UP: not coming back, not going down, not out by the ARP monitor.
fn up(p: &Port) -> bool {
    p.mii == MiiStatus::Up && !p.arp_down
}

/// The primary member, when one is configured, a member, and up.
pub(crate) fn primary_up(ports: &[Port], opts: &BondOptions) -> Option<PortId> {
    opts.primary
        .as_deref()
        // The latest member of that name (one removed and added again is listed twice).
        .and_then(|n| ports.iter().rposition(|p| p.info.name == n))
        .map(|i| PortId(i as u16))
        .filter(|&p| up(&ports[p.index()]))
}

/// Whether `a` is faster (then: full duplex where `b` is not) than `b`.
fn better(a: &PortInfo, b: &PortInfo) -> bool {
    let sa = a.speed_mbps.unwrap_or(0);
    let sb = b.speed_mbps.unwrap_or(0);
    sa > sb || (sa == sb && a.full_duplex == Some(true) && b.full_duplex != Some(true))
}

/// Whether member `port`'s frames reach the host: in 802.3ad when it collects or is attached
/// in sync to the active aggregator ([`Lacp::accepts_from`]); with an active
/// member (without `all_slaves_active`) only from it, except that balance-tlb and balance-alb
/// take unicast on every member: alb's clients send to the member they were taught, and a peer
/// that is itself a tlb/alb bond (no switch between) sends to the bond's MAC over whichever
/// member its hash picks, so refusing unicast there (as the kernel's tlb does) drops every
/// flow that hashes off the active member. Broadcast and multicast, which a switch floods to
/// every member, stay on the active member. balance-slb faces a switch without a LAG, which
/// floods to every member, so broadcast and multicast are taken on the active member only (as
/// Open vSwitch does).
pub(crate) fn rx_rule(
    opts: &BondOptions,
    port: PortId,
    active: Option<PortId>,
    lacp: Option<&Lacp>,
) -> RxRule {
    let mode = opts.mode;
    let is_active = active == Some(port);
    if let Some(l) = lacp {
        if l.accepts_from(port) {
            RxRule::ACCEPT
        } else {
            RxRule::drop_all(DropReason::NotCollecting)
        }
    } else if mode == Mode::BalanceSlb && !is_active {
        RxRule {
            unicast: None,
            multicast: Some(DropReason::InactiveMember),
        }
    } else if mode.uses_primary() && !opts.all_slaves_active && !is_active {
        RxRule {
            unicast: (!matches!(mode, Mode::BalanceTlb | Mode::BalanceAlb))
                .then_some(DropReason::InactiveMember),
            multicast: Some(DropReason::InactiveMember),
        }
    } else {
        RxRule::ACCEPT
    }
}

/// A member's weight: `member_speed` if configured, else its reported speed (0: unknown).
pub(crate) fn weight(opts: &BondOptions, info: &PortInfo) -> u32 {
    opts.member_speed
        .iter()
        .find(|(n, _)| *n == info.name)
        .map(|(_, s)| *s)
        .or(info.speed_mbps)
        .unwrap_or(0)
}

/// The member IGMP leaves on: the active one, or in balance-rr the first usable one. Other
/// modes hash IGMP like any frame, and a failover there has no single new port.
pub(crate) fn igmp_member(mode: Mode, sel: &Selection) -> Option<PortId> {
    match mode {
        Mode::BalanceRr => sel.usable.first().copied(),
        m if m.uses_primary() => sel.active,
        _ => None,
    }
}

/// `fail_over_mac` after the active member changed (active-backup only, as the driver). With
/// `active`, the bond's new MAC (the active member's own) is returned; with `follow`, members
/// whose MAC must change are told so through `events`.
pub(crate) fn fail_over_mac(
    opts: &BondOptions,
    macs: &Macs<'_>,
    member_macs: &mut [EthernetAddress],
    events: &mut Events,
) -> Option<EthernetAddress> {
    if opts.mode != Mode::ActiveBackup {
        return None;
    }
    match opts.fail_over_mac {
        FailOverMac::None => None,
        FailOverMac::Active => {
            let mac = macs.ports[macs.active?.index()].info.perm_mac;
            (mac != macs.bond && !mac.is_zero()).then(|| {
                events.push_back(BondEvent::MacChanged { mac });
                mac
            })
        }
        FailOverMac::Follow => {
            for (i, old) in member_macs.iter_mut().enumerate() {
                let port = PortId(i as u16);
                let mac = macs.wire_mac(port);
                if *old != mac {
                    *old = mac;
                    events.push_back(BondEvent::MemberMac { port, mac });
                }
            }
            None
        }
    }
}
