//! `resend_igmp`: the host's multicast membership reports, replayed after a failover.
//!
//! The Linux driver asks the bond's own IP stack to report its groups again after the active
//! member changes, so IGMP/MLD-snooping switches learn them on the new port. lagd cannot ask the
//! host's stack, so it keeps the last membership report the host sent per group (IGMPv1/v2/v3
//! and MLDv1/v2, untagged or behind one VLAN tag), forgets a group the host leaves, and sends
//! the kept reports again on the new active member, `resend_igmp` times 200 ms apart.

use core::time::Duration;

use crate::wire::igmp::{GroupRecordRepr, GroupRecords, IgmpPacket, IgmpRepr, RecordAddress};
use crate::wire::ip::{IpProtocol, Ipv4Address, Ipv6Address};
use crate::wire::ipv4::Ipv4Packet;
use crate::wire::ipv6::{self, Ipv6Packet};
use crate::wire::mld::{MldMessage, MldPacket};
use crate::wire::{EtherType, EthernetFrame};

/// Groups remembered; the oldest makes room beyond this (counted in
/// [`IgmpCache::evicted`]).
pub(crate) const MAX_GROUPS: usize = 64;

/// A report frame longer than this is not kept (reports are small).
const MAX_REPORT: usize = 1514;

/// The spacing of the resend rounds (the driver's).
pub(crate) const RESEND_SPACING: Duration = Duration::from_millis(200);

/// What a frame from the host says about a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Membership {
    /// A report: the host is (or stays) a member of the group.
    Join([u8; 16]),
    /// The host left the group.
    Leave([u8; 16]),
}

fn v4_group(g: Ipv4Address) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..4].copy_from_slice(&g.0);
    k
}

/// What the first record of an IGMPv3 or MLDv2 report says: INCLUDE with no sources is a
/// leave, anything else a join.
fn first_record<A: RecordAddress>(
    mut records: GroupRecords<'_, A>,
    key: impl Fn(A) -> [u8; 16],
) -> Option<Membership> {
    let rec = GroupRecordRepr::parse(&records.next()?).ok()?;
    let group = key(rec.group_addr);
    Some(if rec.is_leave() {
        Membership::Leave(group)
    } else {
        Membership::Join(group)
    })
}

/// Classifies IGMP and MLD frames, untagged or behind one VLAN tag; `None` for anything else.
fn membership(eth: EthernetFrame<&[u8]>) -> Option<Membership> {
    let (ty, at) = eth.type_after_one_tag()?;
    let l3 = eth.into_inner().get(at..)?;
    match ty {
        EtherType::Ipv4 => {
            let ip = Ipv4Packet::new_checked(l3).ok()?;
            if ip.next_header() != IpProtocol::Igmp {
                return None;
            }
            let igmp = IgmpPacket::new_checked(ip.payload()).ok()?;
            match IgmpRepr::parse(&igmp).ok()? {
                IgmpRepr::MembershipReport { group_addr, .. } => {
                    Some(Membership::Join(v4_group(group_addr)))
                }
                IgmpRepr::LeaveGroup { group_addr } => {
                    Some(Membership::Leave(v4_group(group_addr)))
                }
                IgmpRepr::MembershipReportV3 { .. } => first_record(igmp.records(), v4_group),
                IgmpRepr::MembershipQuery { .. } => None,
            }
        }
        EtherType::Ipv6 => {
            // MLD travels behind a hop-by-hop options header (router alert).
            let ip = Ipv6Packet::new_checked(l3).ok()?;
            let up = ip.upper_layer().ok()?;
            if up.next_header != IpProtocol::Icmpv6 || up.is_later_fragment() {
                return None;
            }
            let icmp = ip
                .payload()
                .get(up.offset.checked_sub(ipv6::HEADER_LEN)?..)?;
            let mld = MldPacket::new_checked(icmp).ok()?;
            match mld.msg_type() {
                MldMessage::ReportV1 => Some(Membership::Join(mld.mcast_addr().0)),
                MldMessage::Done => Some(Membership::Leave(mld.mcast_addr().0)),
                MldMessage::ReportV2 => first_record(mld.records(), |a: Ipv6Address| a.0),
                MldMessage::Query | MldMessage::Unknown(_) => None,
            }
        }
        _ => None,
    }
}

/// The reports kept, and the resend rounds under way.
#[derive(Debug, Clone, Default)]
pub(crate) struct IgmpCache {
    reports: Vec<([u8; 16], Vec<u8>)>,
    /// Rounds left and when the next is due.
    rounds: Option<(u8, crate::time::Instant)>,
    /// Reports of the round being sent (indexes into `reports`).
    pending: Vec<usize>,
    /// Groups forgotten to make room for new ones (the cache is full at [`MAX_GROUPS`]).
    pub(crate) evicted: u64,
}

impl IgmpCache {
    /// Looks at a frame from the host; cheap for anything but IGMP/MLD.
    #[inline]
    pub(crate) fn learn(&mut self, frame: &[u8]) {
        let Ok(eth) = EthernetFrame::new_checked(frame) else {
            return;
        };
        // Membership reports go to multicast MACs only.
        if !eth.dst_addr().is_multicast() {
            return;
        }
        match membership(eth) {
            Some(Membership::Join(g)) if frame.len() <= MAX_REPORT => {
                match self.reports.iter_mut().find(|(k, _)| *k == g) {
                    Some((_, f)) => {
                        f.clear();
                        f.extend_from_slice(frame);
                    }
                    None => {
                        if self.reports.len() >= MAX_GROUPS {
                            self.reports.remove(0);
                            self.pending.clear();
                            self.evicted += 1;
                        }
                        self.reports.push((g, frame.to_vec()));
                    }
                }
            }
            Some(Membership::Leave(g)) => {
                if let Some(k) = self.reports.iter().position(|(x, _)| *x == g) {
                    self.reports.remove(k);
                    self.pending.clear();
                }
            }
            _ => {}
        }
    }

    /// Groups currently kept.
    pub(crate) fn groups(&self) -> usize {
        self.reports.len()
    }

    /// Starts `count` resend rounds now (a failover happened).
    pub(crate) fn schedule(&mut self, now: crate::time::Instant, count: u8) {
        self.rounds = (count > 0 && !self.reports.is_empty()).then_some((count, now));
        self.pending.clear();
    }

    /// The next report to send, copied into `buf`; `None` when nothing is due.
    pub(crate) fn poll(&mut self, now: crate::time::Instant, buf: &mut [u8]) -> Option<usize> {
        if self.pending.is_empty() {
            let (left, due) = self.rounds?;
            if now < due {
                return None;
            }
            self.pending.extend((0..self.reports.len()).rev());
            self.rounds = (left > 1).then(|| (left - 1, now + RESEND_SPACING));
        }
        let k = self.pending.pop()?;
        let f = &self.reports.get(k)?.1;
        let len = f.len().min(buf.len());
        buf[..len].copy_from_slice(&f[..len]);
        Some(len)
    }

    /// When the next round is due.
    pub(crate) fn poll_timeout(&self) -> Option<crate::time::Instant> {
        if !self.pending.is_empty() {
            return Some(crate::time::Instant::ZERO);
        }
        self.rounds.map(|(_, t)| t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Instant;

    fn igmp(ty: u8, group: [u8; 4], extra: &[u8]) -> Vec<u8> {
        let mut f = vec![1, 0, 0x5e, 0, 0, 0x16, 2, 0, 0, 0, 0, 1, 8, 0];
        f.extend_from_slice(&[0x46, 0, 0, 32, 0, 0, 0, 0, 1, 2, 0, 0, 10, 0, 0, 1]);
        f.extend_from_slice(&[224, 0, 0, 22, 0x94, 4, 0, 0]);
        f.push(ty);
        f.extend_from_slice(&[0, 0, 0]);
        f.extend_from_slice(&group);
        f.extend_from_slice(extra);
        f
    }

    /// IGMPv3 report with one record of `kind` for `group` and `sources` sources.
    fn v3(kind: u8, group: [u8; 4], sources: u16) -> Vec<u8> {
        let mut f = igmp(0x22, [0, 0, 0, 1], &[]);
        f.extend_from_slice(&[kind, 0]);
        f.extend_from_slice(&sources.to_be_bytes());
        f.extend_from_slice(&group);
        for _ in 0..sources {
            f.extend_from_slice(&[10, 0, 0, 9]);
        }
        // The IPv4 total length covers the records.
        let total = (f.len() - 14) as u16;
        f[16..18].copy_from_slice(&total.to_be_bytes());
        f
    }

    fn mld(ty: u8, group: [u8; 16]) -> Vec<u8> {
        let mut f = vec![0x33, 0x33, 0, 0, 0, 0x16, 2, 0, 0, 0, 0, 1, 0x86, 0xdd];
        f.extend_from_slice(&[0x60, 0, 0, 0, 0, 32, 0, 1]);
        f.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        f.extend_from_slice(&[0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x16]);
        f.extend_from_slice(&[58, 0, 5, 2, 0, 0, 1, 0]); // hop-by-hop: router alert
        f.extend_from_slice(&[ty, 0, 0, 0, 0, 0, 0, 0]);
        f.extend_from_slice(&group);
        f
    }

    const G1: [u8; 4] = [239, 1, 1, 1];
    const G2: [u8; 4] = [239, 1, 1, 2];

    #[test]
    fn reports_are_kept_per_group_and_leaves_forget() {
        let mut c = IgmpCache::default();
        c.learn(&igmp(0x16, G1, &[]));
        c.learn(&igmp(0x16, G1, &[]));
        c.learn(&v3(4, G2, 0)); // CHANGE_TO_EXCLUDE {}: join
        assert_eq!(c.groups(), 2);
        c.learn(&igmp(0x17, G1, &[]));
        assert_eq!(c.groups(), 1);
        c.learn(&v3(3, G2, 0)); // CHANGE_TO_INCLUDE {}: leave
        assert_eq!(c.groups(), 0);
        c.learn(&v3(3, G2, 1)); // INCLUDE with a source: a member
        assert_eq!(c.groups(), 1);
        let g6 = [0xff, 0x15, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7];
        c.learn(&mld(131, g6));
        assert_eq!(c.groups(), 2);
        c.learn(&mld(132, g6));
        assert_eq!(c.groups(), 1);
        // Unicast or other traffic is ignored; truncations never panic.
        let r = igmp(0x16, G1, &[]);
        let mut uni = r.clone();
        uni[0] = 2;
        c.learn(&uni);
        assert_eq!(c.groups(), 1);
        for len in 0..r.len() {
            c.learn(&r[..len]);
            let m = mld(143, g6);
            c.learn(&m[..len.min(m.len())]);
        }
    }

    /// `frame` behind VLAN tags with these TPIDs.
    fn tagged(frame: &[u8], tpids: &[u16]) -> Vec<u8> {
        let mut f = frame[..12].to_vec();
        for t in tpids {
            f.extend_from_slice(&t.to_be_bytes());
            f.extend_from_slice(&[0, 10]);
        }
        f.extend_from_slice(&frame[12..]);
        f
    }

    #[test]
    fn one_vlan_tag_is_looked_through_and_mldv2_records_count() {
        let mut c = IgmpCache::default();
        let r = igmp(0x16, G1, &[]);
        c.learn(&tagged(&r, &[0x8100]));
        c.learn(&tagged(&igmp(0x16, G2, &[]), &[0x88a8]));
        assert_eq!(c.groups(), 2);
        // A second tag is not looked through (as before the views): no group learned.
        c.learn(&tagged(&igmp(0x16, [239, 3, 3, 3], &[]), &[0x88a8, 0x8100]));
        assert_eq!(c.groups(), 2);
        // MLDv2: the first record decides, INCLUDE {} is a leave.
        let g6 = [0xff, 0x15, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9];
        let v2 = |kind: u8| {
            let mut f = mld(143, [0; 16]);
            f[14 + 4..14 + 6].copy_from_slice(&36u16.to_be_bytes()); // payload length
            f[14 + 48 + 7] = 1; // one record
            f.truncate(14 + 48 + 8);
            f.extend_from_slice(&[kind, 0, 0, 0]);
            f.extend_from_slice(&g6);
            f
        };
        c.learn(&v2(4));
        assert_eq!(c.groups(), 3);
        c.learn(&v2(3));
        assert_eq!(c.groups(), 2);
    }

    #[test]
    fn the_group_cache_is_bounded_and_counts_what_it_drops() {
        let mut c = IgmpCache::default();
        for i in 0..(MAX_GROUPS + 10) as u16 {
            let [a, b] = i.to_be_bytes();
            c.learn(&igmp(0x16, [239, 2, a, b], &[]));
        }
        assert_eq!(c.groups(), MAX_GROUPS);
        assert_eq!(c.evicted, 10);
        // A report for a group kept replaces it: nothing more is dropped.
        c.learn(&igmp(0x16, [239, 2, 0, 20], &[]));
        assert_eq!((c.groups(), c.evicted), (MAX_GROUPS, 10));
    }

    #[test]
    fn resend_rounds_are_spaced() {
        let mut c = IgmpCache::default();
        c.learn(&igmp(0x16, G1, &[]));
        c.learn(&igmp(0x16, G2, &[]));
        let mut buf = [0u8; 1600];
        assert_eq!(c.poll(Instant::ZERO, &mut buf), None);
        let t = Instant::from_secs(5);
        c.schedule(t, 2);
        let mut sent = Vec::new();
        let mut now = t;
        for _ in 0..20 {
            while c.poll(now, &mut buf).is_some() {
                sent.push((now, buf[14 + 24 + 7]));
            }
            now += Duration::from_millis(50);
        }
        assert_eq!(
            sent,
            [
                (t, 1),
                (t, 2),
                (t + RESEND_SPACING, 1),
                (t + RESEND_SPACING, 2)
            ]
        );
        assert_eq!(c.poll_timeout(), None);
        // Nothing kept: nothing scheduled.
        let mut empty = IgmpCache::default();
        empty.schedule(t, 3);
        assert_eq!(empty.poll_timeout(), None);
    }
}
