//! Notifications: what the bond tells the network after a failover.
//!
//! The bond learns its own addresses from the ARP and neighbour-discovery frames the host sends
//! ([`HostAddrs::learn`]); lagd needs no address configuration of its own. After an
//! active-backup failover it sends `num_grat_arp` gratuitous ARPs and `num_unsol_na`
//! unsolicited IPv6 neighbour advertisements (one per address, to all nodes, Override set) on
//! the new active member, `peer_notif_delay` apart, so switches and neighbours relearn where the
//! bond's MAC lives. The host's IGMP/MLD reports are replayed too (`resend_igmp`, in
//! [`igmp`](super::igmp)).

use core::time::Duration;

use super::options::BondOptions;
use crate::port::{PortId, Transmit};
use crate::time::Instant;
use crate::wire::EthernetAddress;
use crate::wire::arp::{ArpPacket, ArpRepr};
use crate::wire::ethernet::{EtherType, EthernetFrame};
use crate::wire::ip::{IpProtocol, Ipv4Address, Ipv6Address};
use crate::wire::ipv6::Ipv6Packet;
use crate::wire::ndisc::{self, NdiscMessage, NdiscPacket, NdiscRepr, NeighborFlags};

/// How many IPv6 addresses of the bond lagd announces.
const MAX_ANNOUNCED_IPV6: usize = 4;

/// The bond's addresses, as learned from the host's own frames.
#[derive(Debug, Clone, Default)]
pub(crate) struct HostAddrs {
    pub(crate) ipv4: Option<Ipv4Address>,
    /// At most [`MAX_ANNOUNCED_IPV6`].
    pub(crate) ipv6: Vec<Ipv6Address>,
}

impl HostAddrs {
    /// Learns from a frame the host sends from the bond's MAC: an ARP frame carries the bond's
    /// IPv4 address as sender; a neighbour solicitation or advertisement one of its IPv6
    /// addresses as source (not `::`, as in duplicate-address detection).
    pub(crate) fn learn(&mut self, eth: &EthernetFrame<&[u8]>) {
        match eth.ethertype() {
            EtherType::Arp => {
                if let Ok(arp) = ArpPacket::new_checked(eth.payload()) {
                    let spa = arp.source_protocol_addr();
                    if spa.0 != [0; 4] {
                        self.ipv4 = Some(spa);
                    }
                }
            }
            EtherType::Ipv6 => {
                let Ok(ip) = Ipv6Packet::new_checked(eth.payload()) else {
                    return;
                };
                let nd = ip.next_header() == IpProtocol::Icmpv6
                    && NdiscPacket::new_checked(ip.payload()).is_ok_and(|nd| {
                        matches!(
                            nd.msg_type(),
                            NdiscMessage::NeighborSolicit | NdiscMessage::NeighborAdvert
                        )
                    });
                let addr = ip.src_addr();
                if nd
                    && addr.0 != [0; 16]
                    && !self.ipv6.contains(&addr)
                    && self.ipv6.len() < MAX_ANNOUNCED_IPV6
                {
                    self.ipv6.push(addr);
                }
            }
            _ => {}
        }
    }
}

/// One announcement frame of a notification round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Announce {
    GratuitousArp(Ipv4Address),
    UnsolicitedNa(Ipv6Address),
}

/// The announcement rounds after a failover: the next round's number (0-based) and when it is
/// due; the frames of the round being sent.
#[derive(Debug, Clone, Default)]
pub(crate) struct Notify {
    next: Option<(u8, Instant)>,
    queue: Vec<Announce>,
}

impl Notify {
    /// A failover at `now`: the rounds start afresh.
    pub(crate) fn start(&mut self, now: Instant) {
        self.next = Some((0, now));
        self.queue.clear();
    }

    /// When the next round is due.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        self.next.map(|(_, t)| t)
    }

    /// Queues the round that is due at `now`: a gratuitous ARP while rounds < `num_grat_arp`,
    /// an unsolicited NA per address while rounds < `num_unsol_na`.
    pub(crate) fn handle_timeout(&mut self, now: Instant, opts: &BondOptions, addrs: &HostAddrs) {
        let Some((round, due)) = self.next else {
            return;
        };
        if now < due {
            return;
        }
        if round < opts.num_grat_arp {
            if let Some(ip) = addrs.ipv4 {
                self.queue.push(Announce::GratuitousArp(ip));
            }
        }
        if round < opts.num_unsol_na {
            self.queue
                .extend(addrs.ipv6.iter().map(|a| Announce::UnsolicitedNa(*a)));
        }
        let rounds = opts.num_grat_arp.max(opts.num_unsol_na);
        self.next = (round + 1 < rounds).then(|| (round + 1, now + spacing(opts)));
    }

    /// The next announcement, on the active member, written into `buf`. Without an active
    /// member the rounds end.
    pub(crate) fn poll_transmit(
        &mut self,
        active: Option<PortId>,
        mac: EthernetAddress,
        buf: &mut [u8],
    ) -> Option<Transmit> {
        let announce = self.queue.pop()?;
        let Some(port) = active else {
            self.queue.clear();
            self.next = None;
            return None;
        };
        let len = match announce {
            Announce::GratuitousArp(ip) => {
                let arp = ArpRepr::gratuitous(mac, ip);
                let len = arp.frame_len();
                arp.emit_frame(&mut buf[..len]);
                len
            }
            Announce::UnsolicitedNa(addr) => emit_unsolicited_na(mac, addr, buf),
        };
        Some(Transmit { port, len })
    }
}

/// The spacing of announcement rounds: `peer_notif_delay`, else one `miimon` interval, else
/// 100 ms.
fn spacing(opts: &BondOptions) -> Duration {
    let ms = match (opts.peer_notif_delay, opts.miimon) {
        (0, 0) => 100,
        (0, m) => m,
        (d, _) => d,
    };
    Duration::from_millis(ms.into())
}

/// Writes an unsolicited neighbour advertisement for `addr` at `mac` (RFC 4861 §7.2.6): from
/// the address to all nodes (ff02::1, 33:33:00:00:00:01), hop limit 255, Override set,
/// Solicited clear, with the target link-layer address option. Returns the frame length (86).
pub(crate) fn emit_unsolicited_na(
    mac: EthernetAddress,
    addr: Ipv6Address,
    buf: &mut [u8],
) -> usize {
    let na = NdiscRepr::NeighborAdvert {
        flags: NeighborFlags::OVERRIDE,
        target_addr: addr,
        lladdr: Some(mac),
    };
    let all_nodes = ndisc::ALL_NODES;
    na.emit_frame(mac, ndisc::multicast_mac(all_nodes), addr, all_nodes, buf);
    na.frame_len()
}
