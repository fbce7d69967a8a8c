//! What the bond tells its driver about: link, active member, carrier and MAC changes.

use super::member::MiiStatus;
use crate::port::PortId;
use crate::wire::EthernetAddress;

/// Something the driver may want to log or act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BondEvent {
    /// A member's MII status changed.
    Link {
        /// The member.
        port: PortId,
        /// Its new status.
        status: MiiStatus,
    },
    /// The active member changed (modes with one: active-backup, balance-tlb, balance-alb).
    ActiveChanged {
        /// The previous active member.
        from: Option<PortId>,
        /// The new one.
        to: Option<PortId>,
    },
    /// The bond's own carrier changed.
    Carrier {
        /// Whether any member is usable.
        up: bool,
    },
    /// The bond's MAC changed (`fail_over_mac=active`: it follows the active member); the
    /// driver gives the host interface the new MAC.
    MacChanged {
        /// The new MAC.
        mac: EthernetAddress,
    },
    /// The LACP partner a member records changed (802.3ad): another system, key or port, or
    /// none (system all zeros: the partner timed out or the member was reset).
    LacpPartner {
        /// The member.
        port: PortId,
        /// The partner's system id (all zeros: none).
        system: EthernetAddress,
        /// The partner's operational key.
        key: u16,
        /// The partner's port number.
        partner_port: u16,
    },
    /// A member's interface should carry this MAC (`fail_over_mac=follow`: the active member
    /// takes the bond's MAC; the others keep distinct ones).
    MemberMac {
        /// The member.
        port: PortId,
        /// Its MAC.
        mac: EthernetAddress,
    },
}
