//! balance-tlb and balance-alb: which frames are balanced, and receive load balancing (RLB).
//!
//! **Transmit.** Both modes send everything that is not balanced through the active member,
//! with the bond's MAC. balance-tlb balances unicast IPv4 and IPv6 (not neighbour discovery) by
//! the transmit hash policy; balance-alb balances IPv4 that is not broadcast or IGMP and IPv6
//! that is not to all nodes, not neighbour discovery and not from `::`, by a byte-XOR of the
//! destination address, as the Linux driver does. A balanced frame that leaves on another
//! member than the active one carries that member's own MAC as its source, so the switch never
//! sees the bond's MAC on two ports.
//!
//! **Receive (balance-alb, IPv4).** Clients learn the bond's address at a MAC of lagd's choice:
//! the ARP replies the host sends are rewritten to carry the MAC of the member chosen for that
//! client (the one with the fewest clients), and sent on it. When the host sends an ARP request,
//! the clients that hear it learn the bond's MAC again; when a member leaves or joins, clients
//! move. In each case lagd teaches the affected clients their member's MAC again, with two
//! unicast ARP *requests* for the client's own address (the driver sends replies, but Linux
//! ignores a reply that would change a neighbour entry changed less than `locktime`, 1 s, ago;
//! a request for its own address always updates it). Frames that arrive for a member's MAC are
//! handed to the host with the bond's MAC as destination.

use core::time::Duration;

use crate::port::PortId;
use crate::time::Instant;
use crate::wire::EthernetAddress;
use crate::wire::arp::{ArpOperation, ArpRepr};
use crate::wire::ethernet::{EtherType, EthernetFrame};
use crate::wire::ip::{IpProtocol, Ipv4Address};

/// The frame's EtherType and network-header offset, looking through one VLAN tag.
fn l3(frame: &[u8]) -> Option<(EtherType, usize)> {
    EthernetFrame::new_checked(frame).ok()?.type_after_one_tag()
}

/// Offsets in the IPv4 and IPv6 fixed headers that the balancing rules read. The kernel reads
/// them once the fixed header is there, whatever its length fields say, so these rules do too.
const IPV4_HEADER_LEN: usize = 20;
const IPV4_PROTOCOL: usize = 9;
const IPV4_DST: core::ops::Range<usize> = 16..20;
const IPV6_HEADER_LEN: usize = 40;
const IPV6_NEXT_HEADER: usize = 6;
const IPV6_SRC: core::ops::Range<usize> = 8..24;
const IPV6_DST: core::ops::Range<usize> = 24..40;

/// balance-tlb: whether the frame is balanced (unicast IPv4, or unicast IPv6 other than
/// neighbour discovery).
pub(crate) fn tlb_balanced(frame: &[u8]) -> bool {
    if frame.first().is_none_or(|b| b & 1 != 0) {
        return false;
    }
    match l3(frame) {
        Some((EtherType::Ipv4, _)) => true,
        Some((EtherType::Ipv6, at)) => frame
            .get(at..at + IPV6_HEADER_LEN)
            .is_some_and(|ip| !is_ipv6_nd_at(frame, at, ip)),
        _ => false,
    }
}

/// IPv6 neighbour solicitation or advertisement (ICMPv6 directly after the fixed header `ip`,
/// at `at` in `frame`).
fn is_ipv6_nd_at(frame: &[u8], at: usize, ip: &[u8]) -> bool {
    ip[IPV6_NEXT_HEADER] == u8::from(IpProtocol::Icmpv6)
        && matches!(frame.get(at + IPV6_HEADER_LEN), Some(135 | 136))
}

/// balance-alb: the bucket hash of a balanced frame (byte-XOR of the destination address), or
/// `None` when the frame goes through the active member.
pub(crate) fn alb_hash(frame: &[u8]) -> Option<u32> {
    let (ty, at) = l3(frame)?;
    let dst_mac = EthernetFrame::new_unchecked(frame).dst_addr();
    if dst_mac == EthernetAddress::BROADCAST {
        return None;
    }
    let dst = match ty {
        EtherType::Ipv4 => {
            let ip = frame.get(at..at + IPV4_HEADER_LEN)?;
            if ip[IPV4_PROTOCOL] == u8::from(IpProtocol::Igmp) || ip[IPV4_DST] == [0xff; 4] {
                return None;
            }
            &ip[IPV4_DST]
        }
        EtherType::Ipv6 => {
            let ip = frame.get(at..at + IPV6_HEADER_LEN)?;
            let all_nodes = dst_mac == EthernetAddress([0x33, 0x33, 0, 0, 0, 1]);
            if all_nodes || is_ipv6_nd_at(frame, at, ip) || ip[IPV6_SRC] == [0; 16] {
                return None;
            }
            &ip[IPV6_DST]
        }
        _ => return None,
    };
    Some(u32::from(dst.iter().fold(0u8, |h, b| h ^ b)))
}

/// ARP frames per client update (the driver's burst), in case one is lost.
const UPDATE_BURST: u8 = 2;

/// Between the frames of one update.
const UPDATE_SPACING: Duration = Duration::from_millis(200);

/// Delay before a client that just exchanged ARP with the host is taught its member, so the
/// teaching arrives after the host's own frames (a broadcast request leaves on another member).
const UPDATE_DELAY: Duration = Duration::from_millis(200);

/// Clients tracked; the oldest entry makes room beyond this (counted in
/// [`Rlb::evicted`]).
pub(crate) const MAX_CLIENTS: usize = 1024;

/// One RLB client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Client {
    /// Its address.
    pub(crate) ip: Ipv4Address,
    /// Its MAC, once heard (zero before).
    pub(crate) mac: EthernetAddress,
    /// The bond's address it talks to.
    pub(crate) server: Ipv4Address,
    /// The member it sends to.
    pub(crate) port: Option<PortId>,
    /// ARP replies still to send to teach it, and from when.
    updates: u8,
    due: Instant,
}

/// Receive load balancing: the client table and the updates it owes.
#[derive(Debug, Clone, Default)]
pub(crate) struct Rlb {
    pub(crate) clients: Vec<Client>,
    /// Clients dropped to make room for new ones (the table is full at [`MAX_CLIENTS`]).
    pub(crate) evicted: u64,
}

impl Rlb {
    /// The member with the fewest clients among `usable` (the first on ties).
    fn least_loaded(&self, usable: &[PortId]) -> Option<PortId> {
        usable
            .iter()
            .copied()
            .min_by_key(|p| self.clients.iter().filter(|c| c.port == Some(*p)).count())
    }

    /// Gives client `c` a member if it has none usable: the least loaded one.
    fn assign(&mut self, c: usize, usable: &[PortId]) {
        if self.clients[c].port.is_none_or(|p| !usable.contains(&p)) {
            self.clients[c].port = self.least_loaded(usable);
        }
    }

    fn entry(&mut self, ip: Ipv4Address, server: Ipv4Address) -> usize {
        let k = match self.clients.iter().position(|c| c.ip == ip) {
            Some(k) => k,
            None => {
                if self.clients.len() >= MAX_CLIENTS {
                    self.clients.remove(0);
                    self.evicted += 1;
                }
                self.clients.push(Client {
                    ip,
                    mac: EthernetAddress::ZERO,
                    server,
                    port: None,
                    updates: 0,
                    due: Instant::ZERO,
                });
                self.clients.len() - 1
            }
        };
        self.clients[k].server = server;
        k
    }

    /// An ARP frame from the host. Replies go on the member chosen for their client (assigned
    /// now if new); requests go on the active member, and the clients they reach are taught
    /// again shortly after. Returns the member, or `None` for the active member.
    pub(crate) fn host_arp(
        &mut self,
        now: Instant,
        arp: &ArpRepr,
        usable: &[PortId],
        active: Option<PortId>,
    ) -> Option<PortId> {
        let ArpRepr::EthernetIpv4 {
            operation,
            source_protocol_addr: server,
            target_hardware_addr: client_mac,
            target_protocol_addr: client_ip,
            ..
        } = *arp;
        match operation {
            ArpOperation::Reply if server != client_ip => {
                let k = self.entry(client_ip, server);
                if !client_mac.is_zero() {
                    self.clients[k].mac = client_mac;
                }
                self.assign(k, usable);
                self.clients[k].port
            }
            _ => {
                // A broadcast from the bond's MAC: every client of this address now sends to
                // the active member; those assigned elsewhere are taught again.
                if server != client_ip && !client_ip.0.iter().all(|&b| b == 0) {
                    self.entry(client_ip, server);
                }
                for c in &mut self.clients {
                    if c.server == server && c.port.is_some() && c.port != active {
                        c.updates = UPDATE_BURST;
                        c.due = now + UPDATE_DELAY;
                    }
                }
                None
            }
        }
    }

    /// An ARP frame received on a member: a client that speaks to one of the bond's addresses
    /// is learned (its MAC), given a member if it has none, and taught that member's MAC.
    pub(crate) fn member_arp(
        &mut self,
        now: Instant,
        arp: &ArpRepr,
        bond_ip: Option<Ipv4Address>,
        usable: &[PortId],
        active: Option<PortId>,
    ) {
        let ArpRepr::EthernetIpv4 {
            source_hardware_addr: mac,
            source_protocol_addr: ip,
            target_protocol_addr: target,
            ..
        } = *arp;
        let known = self.clients.iter().any(|c| c.ip == ip);
        if ip == target || mac.is_zero() || (!known && Some(target) != bond_ip) {
            return;
        }
        let k = self.entry(ip, target);
        self.clients[k].mac = mac;
        self.assign(k, usable);
        // Its request or reply went to the bond's MAC: it may believe the active member.
        let c = &mut self.clients[k];
        if c.port.is_some() && c.port != active {
            c.updates = UPDATE_BURST;
            c.due = now + UPDATE_DELAY;
        }
    }

    /// The usable members or the active one changed: clients of a member that left move to the
    /// least loaded ones; a member that joined takes clients until the counts are even. Moved
    /// clients are taught their new member's MAC.
    pub(crate) fn rebalance(&mut self, now: Instant, usable: &[PortId]) {
        for k in 0..self.clients.len() {
            if self.clients[k].port.is_some_and(|p| !usable.contains(&p)) {
                let to = self.least_loaded(usable);
                self.teach(k, to, now);
            }
        }
        if usable.len() < 2 {
            return;
        }
        loop {
            let count = |p: PortId| self.clients.iter().filter(|c| c.port == Some(p)).count();
            let (Some(&most), Some(&least)) = (
                usable.iter().max_by_key(|p| count(**p)),
                usable.iter().min_by_key(|p| count(**p)),
            ) else {
                return;
            };
            if count(most) <= count(least) + 1 {
                return;
            }
            let Some(k) = self.clients.iter().rposition(|c| c.port == Some(most)) else {
                return;
            };
            self.teach(k, Some(least), now);
        }
    }

    /// Every assigned client is taught its member's MAC again (the MACs moved).
    pub(crate) fn teach_all(&mut self, now: Instant) {
        for k in 0..self.clients.len() {
            let to = self.clients[k].port;
            self.teach(k, to, now);
        }
    }

    fn teach(&mut self, k: usize, to: Option<PortId>, now: Instant) {
        let c = &mut self.clients[k];
        c.port = to;
        if to.is_some() && !c.mac.is_zero() {
            c.updates = UPDATE_BURST;
            c.due = now;
        }
    }

    /// The next ARP reply owed to a client, if one is due: (member, server, client).
    pub(crate) fn poll_update(&mut self, now: Instant) -> Option<(PortId, Client)> {
        let c = self
            .clients
            .iter_mut()
            .find(|c| c.updates > 0 && c.due <= now && c.port.is_some() && !c.mac.is_zero())?;
        c.updates -= 1;
        let sent = c.clone();
        c.due = now + UPDATE_SPACING;
        Some((sent.port?, sent))
    }

    /// When an update is next due.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        self.clients
            .iter()
            .filter(|c| c.updates > 0 && c.port.is_some() && !c.mac.is_zero())
            .map(|c| c.due)
            .min()
    }
}

/// The driver's learning packet: a minimum-size frame from and to `mac` (EtherType 0x9000), so
/// the switch learns where `mac` lives. Returns its length (60).
pub(crate) fn emit_learning_packet(mac: EthernetAddress, buf: &mut [u8]) -> usize {
    let f = &mut buf[..60];
    f.fill(0);
    f[0..6].copy_from_slice(&mac.0);
    f[6..12].copy_from_slice(&mac.0);
    f[12..14].copy_from_slice(&[0x90, 0x00]);
    60
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(dst: [u8; 6], ty: u16, l3: &[u8]) -> Vec<u8> {
        let mut f = dst.to_vec();
        f.extend_from_slice(&[2, 0, 0, 0, 0, 1]);
        f.extend_from_slice(&ty.to_be_bytes());
        f.extend_from_slice(l3);
        f
    }

    fn ipv4(proto: u8, dst: [u8; 4]) -> Vec<u8> {
        let mut ip = vec![0x45, 0, 0, 20, 0, 0, 0, 0, 64, proto, 0, 0, 10, 0, 0, 1];
        ip.extend_from_slice(&dst);
        ip
    }

    fn ipv6(next: u8, src: [u8; 16], dst: [u8; 16], icmp_type: u8) -> Vec<u8> {
        let mut ip = vec![0x60, 0, 0, 0, 0, 8, next, 64];
        ip.extend_from_slice(&src);
        ip.extend_from_slice(&dst);
        ip.extend_from_slice(&[icmp_type, 0, 0, 0, 0, 0, 0, 0]);
        ip
    }

    const UNI: [u8; 6] = [2, 0, 0, 0, 0, 9];
    const A6: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    const B6: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x2f];

    #[test]
    fn tlb_balances_unicast_ip_only() {
        assert!(tlb_balanced(&frame(UNI, 0x0800, &ipv4(6, [10, 0, 0, 2]))));
        assert!(!tlb_balanced(&frame(
            [0xff; 6],
            0x0800,
            &ipv4(17, [255; 4])
        )));
        assert!(!tlb_balanced(&frame(
            [1, 0, 0x5e, 0, 0, 1],
            0x0800,
            &ipv4(17, [224, 0, 0, 1])
        )));
        assert!(!tlb_balanced(&frame(UNI, 0x0806, &[0; 28])));
        assert!(tlb_balanced(&frame(UNI, 0x86dd, &ipv6(6, A6, B6, 0))));
        assert!(!tlb_balanced(&frame(UNI, 0x86dd, &ipv6(58, A6, B6, 135))));
        assert!(tlb_balanced(&frame(UNI, 0x86dd, &ipv6(58, A6, B6, 128))));
        let mut tagged = frame(UNI, 0x8100, &[0, 7, 0x08, 0x00]);
        tagged.extend_from_slice(&ipv4(6, [10, 0, 0, 2]));
        assert!(tlb_balanced(&tagged));
        assert!(!tlb_balanced(&[]));
    }

    #[test]
    fn alb_hashes_the_destination_and_skips_what_the_driver_skips() {
        // 10 ^ 0 ^ 0 ^ 2 = 8.
        assert_eq!(
            alb_hash(&frame(UNI, 0x0800, &ipv4(6, [10, 0, 0, 2]))),
            Some(8)
        );
        assert_eq!(alb_hash(&frame(UNI, 0x0800, &ipv4(2, [10, 0, 0, 2]))), None);
        assert_eq!(alb_hash(&frame(UNI, 0x0800, &ipv4(17, [255; 4]))), None);
        assert_eq!(
            alb_hash(&frame([0xff; 6], 0x0800, &ipv4(17, [10, 0, 0, 255]))),
            None
        );
        // Multicast IPv4 is balanced (only broadcast is not), as in the driver.
        assert_eq!(
            alb_hash(&frame(
                [1, 0, 0x5e, 0, 0, 1],
                0x0800,
                &ipv4(17, [224, 0, 0, 1])
            )),
            Some(224 ^ 1)
        );
        assert_eq!(
            alb_hash(&frame(UNI, 0x86dd, &ipv6(6, A6, B6, 0))),
            Some(0xfd ^ 0x2f)
        );
        assert_eq!(alb_hash(&frame(UNI, 0x86dd, &ipv6(58, A6, B6, 136))), None);
        assert_eq!(
            alb_hash(&frame(UNI, 0x86dd, &ipv6(6, [0; 16], B6, 0))),
            None
        );
        assert_eq!(
            alb_hash(&frame(
                [0x33, 0x33, 0, 0, 0, 1],
                0x86dd,
                &ipv6(6, A6, B6, 0)
            )),
            None
        );
        assert_eq!(alb_hash(&frame(UNI, 0x0806, &[0; 28])), None);
        for len in 0..40 {
            let f = frame(UNI, 0x0800, &ipv4(6, [10, 0, 0, 2]));
            let _ = alb_hash(&f[..len.min(f.len())]);
            let _ = tlb_balanced(&f[..len.min(f.len())]);
        }
    }

    const SERVER: Ipv4Address = Ipv4Address([10, 0, 0, 1]);
    const BOND: EthernetAddress = EthernetAddress([2, 0xb0, 0, 0, 0, 1]);

    fn client(i: u8) -> (Ipv4Address, EthernetAddress) {
        (
            Ipv4Address([10, 0, 0, 10 + i]),
            EthernetAddress([2, 0xc0, 0, 0, 0, i]),
        )
    }

    fn reply_to(i: u8) -> ArpRepr {
        let (ip, mac) = client(i);
        ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Reply,
            source_hardware_addr: BOND,
            source_protocol_addr: SERVER,
            target_hardware_addr: mac,
            target_protocol_addr: ip,
        }
    }

    fn request_from(i: u8) -> ArpRepr {
        let (ip, mac) = client(i);
        ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Request,
            source_hardware_addr: mac,
            source_protocol_addr: ip,
            target_hardware_addr: EthernetAddress::ZERO,
            target_protocol_addr: SERVER,
        }
    }

    const P: [PortId; 3] = [PortId(0), PortId(1), PortId(2)];

    #[test]
    fn the_client_table_is_bounded_and_counts_what_it_drops() {
        let mut r = Rlb::default();
        let t = Instant::ZERO;
        let extra = 100;
        for i in 0..(MAX_CLIENTS + extra) as u32 {
            let [_, a, b, c] = i.to_be_bytes();
            let reply = ArpRepr::EthernetIpv4 {
                operation: ArpOperation::Reply,
                source_hardware_addr: BOND,
                source_protocol_addr: SERVER,
                target_hardware_addr: EthernetAddress([2, 0, 0, a, b, c]),
                target_protocol_addr: Ipv4Address([10, a + 1, b, c]),
            };
            r.host_arp(t, &reply, &P[..2], Some(P[0]));
        }
        assert_eq!(r.clients.len(), MAX_CLIENTS);
        assert_eq!(r.evicted, extra as u64);
        // The oldest went first: the newest are all there.
        let last = (MAX_CLIENTS + extra - 1) as u32;
        let [_, a, b, c] = last.to_be_bytes();
        assert!(
            r.clients
                .iter()
                .any(|k| k.ip == Ipv4Address([10, a + 1, b, c]))
        );
        assert!(!r.clients.iter().any(|k| k.ip == Ipv4Address([10, 1, 0, 0])));
    }

    #[test]
    fn replies_spread_clients_and_stick() {
        let mut r = Rlb::default();
        let t = Instant::ZERO;
        let got: Vec<_> = (0..6)
            .map(|i| r.host_arp(t, &reply_to(i), &P[..2], Some(P[0])))
            .collect();
        assert_eq!(
            got,
            [
                Some(P[0]),
                Some(P[1]),
                Some(P[0]),
                Some(P[1]),
                Some(P[0]),
                Some(P[1])
            ]
        );
        // A client keeps its member.
        assert_eq!(r.host_arp(t, &reply_to(1), &P[..2], Some(P[0])), Some(P[1]));
        assert_eq!(r.poll_update(t), None, "replies teach by themselves");
    }

    #[test]
    fn a_host_request_is_followed_by_updates_to_clients_off_the_active_member() {
        let mut r = Rlb::default();
        let t = Instant::from_secs(1);
        for i in 0..4 {
            r.host_arp(t, &reply_to(i), &P[..2], Some(P[0]));
        }
        let (ip, _) = client(9);
        let req = ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Request,
            source_hardware_addr: BOND,
            source_protocol_addr: SERVER,
            target_hardware_addr: EthernetAddress::ZERO,
            target_protocol_addr: ip,
        };
        assert_eq!(r.host_arp(t, &req, &P[..2], Some(P[0])), None);
        assert_eq!(r.poll_update(t), None, "not before the delay");
        assert_eq!(r.poll_timeout(), Some(t + UPDATE_DELAY));
        let mut sent = Vec::new();
        for later in [t + UPDATE_DELAY, t + UPDATE_DELAY + UPDATE_SPACING] {
            while let Some((port, c)) = r.poll_update(later) {
                sent.push((later, port, c.ip));
            }
        }
        // Clients 1 and 3 are on member 1: two requests each, spaced.
        let (c1, _) = client(1);
        let (c3, _) = client(3);
        let (t1, t2) = (t + UPDATE_DELAY, t + UPDATE_DELAY + UPDATE_SPACING);
        assert_eq!(
            sent,
            [
                (t1, P[1], c1),
                (t1, P[1], c3),
                (t2, P[1], c1),
                (t2, P[1], c3)
            ]
        );
    }

    #[test]
    fn clients_heard_on_a_member_are_learned_and_taught() {
        let mut r = Rlb::default();
        let t = Instant::ZERO;
        for i in 0..2 {
            r.member_arp(t, &request_from(i), Some(SERVER), &P[..2], Some(P[0]));
        }
        let (ip1, mac1) = client(1);
        assert_eq!(r.clients[1].mac, mac1);
        assert_eq!(
            r.poll_update(t),
            None,
            "not before the host's frames have gone"
        );
        let u: Vec<_> = core::iter::from_fn(|| r.poll_update(t + UPDATE_DELAY)).collect();
        assert_eq!(u.len(), 1);
        assert!(u.iter().all(|(p, c)| *p == P[1] && c.ip == ip1));
        assert_eq!(r.poll_timeout(), Some(t + UPDATE_DELAY + UPDATE_SPACING));
        // A frame for another address is not ours to learn.
        let ArpRepr::EthernetIpv4 {
            operation,
            source_hardware_addr,
            source_protocol_addr,
            target_hardware_addr,
            ..
        } = request_from(5);
        let other = ArpRepr::EthernetIpv4 {
            operation,
            source_hardware_addr,
            source_protocol_addr,
            target_hardware_addr,
            target_protocol_addr: Ipv4Address([10, 0, 0, 99]),
        };
        r.member_arp(t, &other, Some(SERVER), &P[..2], Some(P[0]));
        assert_eq!(r.clients.len(), 2);
    }

    #[test]
    fn members_leaving_and_joining_move_clients_evenly() {
        let mut r = Rlb::default();
        let t = Instant::ZERO;
        for i in 0..6 {
            r.host_arp(t, &reply_to(i), &P[..3], Some(P[0]));
        }
        let count = |r: &Rlb, p| r.clients.iter().filter(|c| c.port == Some(p)).count();
        assert_eq!(
            [count(&r, P[0]), count(&r, P[1]), count(&r, P[2])],
            [2, 2, 2]
        );
        r.rebalance(t, &[P[0], P[2]]);
        assert_eq!(
            [count(&r, P[0]), count(&r, P[1]), count(&r, P[2])],
            [3, 0, 3]
        );
        let moved: Vec<_> = core::iter::from_fn(|| r.poll_update(t)).collect();
        assert_eq!(moved.len(), 2, "the two moved clients, at once");
        r.rebalance(t, &P);
        assert_eq!(
            [count(&r, P[0]), count(&r, P[1]), count(&r, P[2])],
            [2, 2, 2]
        );
        let t = t + UPDATE_SPACING;
        let moved: Vec<_> = core::iter::from_fn(|| r.poll_update(t)).collect();
        assert_eq!(
            moved.len(),
            4,
            "the second frames of the first move, the first of this"
        );
        let t = t + UPDATE_SPACING;
        let moved: Vec<_> = core::iter::from_fn(|| r.poll_update(t)).collect();
        assert_eq!(moved.len(), 2);
        assert!(moved.iter().all(|(p, _)| *p == P[1]));
    }

    #[test]
    fn learning_packet_shape() {
        let mut buf = [0xaa; 64];
        assert_eq!(emit_learning_packet(BOND, &mut buf), 60);
        assert_eq!(buf[..6], BOND.0);
        assert_eq!(buf[6..12], BOND.0);
        assert_eq!(buf[12..14], [0x90, 0]);
        assert!(buf[14..60].iter().all(|&b| b == 0));
    }
}
