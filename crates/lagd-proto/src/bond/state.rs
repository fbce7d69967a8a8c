//! The [`Bond`] type's state: every field, shared by the files that implement it (the API in
//! `mod.rs`, the machinery in its sibling files by role).

use super::dedup::Dedup;
use std::collections::VecDeque;

use super::event::BondEvent;
use super::igmp::IgmpCache;
use super::member::Port;
use super::mode::ModeState;
use super::monitor::ArpMonitor;
use super::notify::{HostAddrs, Notify};
use super::options::BondOptions;
use super::select::{Macs, Selection};
use super::verdict::RxRule;
use crate::lacp::Lacp;
use crate::port::PortId;
use crate::wire::EthernetAddress;

/// A bond's decision state.
#[derive(Debug, Clone)]
pub struct Bond {
    pub(super) opts: BondOptions,
    pub(super) ports: Vec<Port>,
    /// What selection decided: the usable members, the active one.
    pub(super) sel: Selection,
    /// Per member: whether its frames reach the host.
    pub(super) rx_rules: Vec<RxRule>,
    pub(super) carrier: bool,
    /// The mode's own state.
    pub(super) mode: ModeState,
    /// 802.3ad: the LACP engine, and the link state last reported to it.
    pub(super) lacp: Option<Lacp>,
    pub(super) lacp_link: Vec<bool>,
    pub(super) events: VecDeque<BondEvent>,
    pub(super) mac: EthernetAddress,
    pub(super) addrs: HostAddrs,
    pub(super) notify: Notify,
    pub(super) arp: Option<ArpMonitor>,
    /// The host's multicast memberships, replayed after a failover (`resend_igmp`), and the
    /// member IGMP reports leave on, as last seen (a change is a failover).
    pub(super) igmp: IgmpCache,
    pub(super) igmp_port: Option<PortId>,
    /// Times the active member moved from one member to another.
    pub(super) failovers: u64,
    /// `fail_over_mac=follow`: the MAC each member's interface was last told to carry.
    pub(super) member_macs: Vec<EthernetAddress>,
    /// The members with their weights (speed in Mb/s, or `member_speed`), as last given to
    /// the mode.
    pub(super) weighted: Vec<(PortId, u32)>,
    /// Counts changes of the distribution (see [`Bond::distribution`]).
    pub(super) generation: u64,
    /// broadcast with `broadcast_dedup`: the frames the members delivered lately.
    pub(super) dedup: Dedup,
}

impl Bond {
    pub(super) fn macs(&self) -> Macs<'_> {
        Macs {
            bond: self.mac,
            ports: &self.ports,
            active: self.sel.active,
        }
    }
}
