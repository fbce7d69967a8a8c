//! A member as the bond sees it: what the driver told it, and its link state.

use core::fmt;

use crate::time::Instant;
use crate::wire::EthernetAddress;

/// A member's link state as `/proc/net/bonding` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MiiStatus {
    /// Carrier up and usable.
    Up,
    /// Carrier lost, waiting out `downdelay`; still usable.
    GoingDown,
    /// Not usable.
    Down,
    /// Carrier back, waiting out `updelay`; not yet usable.
    GoingBack,
}

impl MiiStatus {
    /// The driver's wording.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Up => "up",
            Self::GoingDown => "going down",
            Self::Down => "down",
            Self::GoingBack => "going back",
        }
    }

    /// Whether frames may be sent on the member.
    pub const fn usable(self) -> bool {
        matches!(self, Self::Up | Self::GoingDown)
    }
}

impl fmt::Display for MiiStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the driver knows about a member when it joins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortInfo {
    /// Interface name.
    pub name: String,
    /// Permanent MAC.
    pub perm_mac: EthernetAddress,
    /// Speed in Mb/s, if known.
    pub speed_mbps: Option<u32>,
    /// Full duplex, if known.
    pub full_duplex: Option<bool>,
}

#[derive(Debug, Clone)]
pub(crate) struct Port {
    pub(crate) info: PortInfo,
    pub(crate) mii: MiiStatus,
    pub(crate) carrier: bool,
    /// When the current `going down` / `going back` began.
    pub(crate) since: Instant,
    pub(crate) link_failures: u32,
    /// ARP monitor: when each target was last heard on this member (any frame counts for all
    /// targets without validation): the `arp_ip_target`s first, then from
    /// [`MAX_ARP_TARGETS`] on the `ns_ip6_target`s.
    pub(crate) arp_heard: [Instant; 2 * MAX_ARP_TARGETS],
    /// ARP monitor: the member is taken out for silence.
    pub(crate) arp_down: bool,
}

/// The driver's limit on `arp_ip_target` (and on `ns_ip6_target`).
pub(crate) const MAX_ARP_TARGETS: usize = 16;

impl Port {
    pub(crate) fn usable(&self) -> bool {
        self.mii.usable() && !self.arp_down
    }

    /// The status to show: a member the ARP monitor took out reads `down`.
    pub(crate) fn shown_status(&self) -> MiiStatus {
        if self.arp_down {
            MiiStatus::Down
        } else {
            self.mii
        }
    }
}

impl Port {
    /// A member that joins at `now` with `carrier`: `up` at once with carrier (the driver does
    /// not apply `updelay` at enslave time), `down` without.
    pub(crate) fn new(now: Instant, info: PortInfo, carrier: bool) -> Self {
        Self {
            info,
            mii: if carrier {
                MiiStatus::Up
            } else {
                MiiStatus::Down
            },
            carrier,
            since: now,
            link_failures: 0,
            arp_heard: [now; 2 * MAX_ARP_TARGETS],
            arp_down: false,
        }
    }
}
