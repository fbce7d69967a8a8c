//! `resend_igmp`: the host's multicast membership reports, replayed after a failover.
//!
//! The Linux driver asks the bond's own IP stack to report its groups again after the active
//! member changes, so IGMP/MLD-snooping switches learn them on the new port. lagd cannot ask the
//! host's stack, so it keeps the last membership report the host sent per group (IGMPv1/v2/v3
//! and MLDv1/v2, untagged or behind one VLAN tag), forgets a group the host leaves, and sends
//! the kept reports again on the new active member, `resend_igmp` times 200 ms apart.

use core::time::Duration;

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

fn v4_group(g: &[u8]) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..4].copy_from_slice(g);
    k
}

/// Classifies IGMP and MLD frames; `None` for anything else.
fn membership(frame: &[u8]) -> Option<Membership> {
    let (ty, at) = match frame.get(12..14)? {
        [0x81, 0x00] | [0x88, 0xa8] => (frame.get(16..18)?, 18),
        t => (t, 14),
    };
    match ty {
        [0x08, 0x00] => {
            let ihl = usize::from(frame.get(at)? & 0x0f) * 4;
            if *frame.get(at + 9)? != 2 || ihl < 20 {
                return None;
            }
            let igmp = frame.get(at + ihl..)?;
            match *igmp.first()? {
                0x12 | 0x16 => Some(Membership::Join(v4_group(igmp.get(4..8)?))),
                0x17 => Some(Membership::Leave(v4_group(igmp.get(4..8)?))),
                0x22 => {
                    // IGMPv3: the first record decides; INCLUDE with no sources is a leave.
                    let rec = igmp.get(8..16)?;
                    let sources = u16::from_be_bytes([rec[2], rec[3]]);
                    let group = v4_group(&rec[4..8]);
                    if matches!(rec[0], 1 | 3) && sources == 0 {
                        Some(Membership::Leave(group))
                    } else {
                        Some(Membership::Join(group))
                    }
                }
                _ => None,
            }
        }
        [0x86, 0xdd] => {
            // MLD travels behind a hop-by-hop options header (router alert).
            let ip = frame.get(at..at + 40)?;
            let (mut next, mut off) = (ip[6], at + 40);
            if next == 0 {
                next = *frame.get(off)?;
                off += (usize::from(*frame.get(off + 1)?) + 1) * 8;
            }
            if next != 58 {
                return None;
            }
            let icmp = frame.get(off..)?;
            let group = |g: &[u8]| -> Option<[u8; 16]> { g.try_into().ok() };
            match *icmp.first()? {
                131 => Some(Membership::Join(group(icmp.get(8..24)?)?)),
                132 => Some(Membership::Leave(group(icmp.get(8..24)?)?)),
                143 => {
                    let rec = icmp.get(8..28)?;
                    let sources = u16::from_be_bytes([rec[2], rec[3]]);
                    let g = group(&rec[4..20])?;
                    if matches!(rec[0], 1 | 3) && sources == 0 {
                        Some(Membership::Leave(g))
                    } else {
                        Some(Membership::Join(g))
                    }
                }
                _ => None,
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
        // Membership reports go to multicast MACs only.
        if frame.first().is_none_or(|b| b & 1 == 0) {
            return;
        }
        match membership(frame) {
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
