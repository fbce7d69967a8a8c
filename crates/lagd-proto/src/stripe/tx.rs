//! The sender: which member each frame goes out on, and its sequence number.
//!
//! Members are weighted by speed and frames are spread so that the **bytes** each member carries
//! track its weight: a smooth weighted round robin over bytes. Each member holds a credit (in
//! bytes times the total weight); every frame of `len` bytes adds `len × weight` to every
//! member's credit, goes to the member with the most credit, and takes `len × total weight` from
//! it. Credits always sum to zero, so no member runs ahead or behind its ideal share by more than
//! about one maximum-size frame, and consecutive frames alternate between members as finely as
//! the weights allow (a 10G and a 1G member get ten frames to one, interleaved, not in bursts).
//!
//! The member set can change at any time ([`StripeTx::set_members`]): a removed member's share
//! goes to the others with the very next frame, and the members that stay keep their credit, so
//! a change causes neither a stall nor a burst.

use crate::hash::{HashPolicy, xmit_hash};
use crate::port::PortId;

/// One member as the sender sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Member {
    port: PortId,
    /// Speed as given (Mb/s, 0 = unknown).
    speed: u32,
    /// The weight used (unknown speeds replaced).
    weight: u64,
    /// `(ideal bytes − sent bytes) × total weight`.
    credit: i128,
}

/// The striping sender: member choice by bytes and weights, and consecutive sequence numbers.
///
/// ```
/// use lagd_proto::port::PortId;
/// use lagd_proto::stripe::StripeTx;
///
/// let mut tx = StripeTx::new(0);
/// tx.set_members(&[(PortId(0), 10_000), (PortId(1), 1_000)]);
/// let mut bytes = [0u64; 2];
/// for i in 0..1100 {
///     let (port, seq) = tx.next(1500).unwrap();
///     assert_eq!(seq, i);
///     bytes[port.index()] += 1500;
/// }
/// assert_eq!(bytes, [1000 * 1500, 100 * 1500]);
/// ```
#[derive(Debug, Clone, Default)]
pub struct StripeTx {
    members: Vec<Member>,
    total_weight: u64,
    seq: u32,
}

impl StripeTx {
    /// A sender with no member whose first frame gets sequence number `first_seq`.
    pub fn new(first_seq: u32) -> Self {
        Self {
            members: Vec::new(),
            total_weight: 0,
            seq: first_seq,
        }
    }

    /// Sets the members frames may go out on, each with its speed in Mb/s, in the order ties are
    /// broken. A speed of 0 (unknown) counts as the slowest known speed among the members (all
    /// members equal if none is known). A port listed twice counts once (the first entry).
    ///
    /// Members that stay keep their standing, so calling this with an unchanged list is free
    /// and changes nothing.
    pub fn set_members(&mut self, members: &[(PortId, u32)]) {
        let same = self.members.len() == members.len()
            && self
                .members
                .iter()
                .zip(members)
                .all(|(m, &(port, speed))| m.port == port && m.speed == speed);
        if same {
            return;
        }
        let slowest = members
            .iter()
            .map(|&(_, s)| s)
            .filter(|&s| s > 0)
            .min()
            .unwrap_or(1);
        let old_total = self.total_weight;
        let mut next: Vec<Member> = Vec::with_capacity(members.len());
        for &(port, speed) in members {
            if next.iter().any(|m| m.port == port) {
                continue;
            }
            let credit = self
                .members
                .iter()
                .find(|m| m.port == port)
                .map_or(0, |m| m.credit);
            next.push(Member {
                port,
                speed,
                weight: u64::from(if speed == 0 { slowest } else { speed }),
                credit,
            });
        }
        let new_total: u64 = next.iter().map(|m| m.weight).sum();
        // Credits are in bytes × total weight: rescale to the new total, then re-centre so they
        // sum to zero again (a removed member's credit is shared out among those that stay).
        if old_total > 0 && new_total != old_total {
            for m in &mut next {
                m.credit = m.credit * i128::from(new_total) / i128::from(old_total);
            }
        }
        if let Ok(n) = i128::try_from(next.len())
            && n > 0
        {
            let sum: i128 = next.iter().map(|m| m.credit).sum();
            let share = sum / n;
            for m in &mut next {
                m.credit -= share;
            }
            next[0].credit -= sum - share * n;
        }
        self.members = next;
        self.total_weight = new_total;
    }

    /// The members and their speeds as last set (duplicates removed).
    pub fn members(&self) -> impl Iterator<Item = (PortId, u32)> + '_ {
        self.members.iter().map(|m| (m.port, m.speed))
    }

    /// Whether there is no member to send on.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The sequence number the next frame will get.
    pub fn next_seq(&self) -> u32 {
        self.seq
    }

    /// Chooses the member for a frame of `len` bytes and assigns it the next sequence number;
    /// `None` (and no sequence number used) if there is no member.
    pub fn next(&mut self, len: usize) -> Option<(PortId, u32)> {
        let port = self.choose(len)?;
        let seq = self.seq;
        self.seq = self.seq.wrapping_add(1);
        Some((port, seq))
    }

    /// Chooses the member for a frame of `len` bytes without using a sequence number.
    pub fn choose(&mut self, len: usize) -> Option<PortId> {
        if self.members.is_empty() {
            return None;
        }
        let len = i128::try_from(len).unwrap_or(i128::MAX).min(1 << 32);
        let mut best = 0;
        for i in 0..self.members.len() {
            let m = &mut self.members[i];
            m.credit += len * i128::from(m.weight);
            if self.members[i].credit > self.members[best].credit {
                best = i;
            }
        }
        let chosen = &mut self.members[best];
        chosen.credit -= len * i128::from(self.total_weight);
        Some(chosen.port)
    }
}

/// Bytes a kernel fast path sends through one slot of a [`slot_table`] before moving to the
/// next: 64 KiB, one TCP super-frame.
pub const SLOT_BYTES: u64 = 1 << 16;

/// The slots a kernel fast path stripes TCP through, for `members` (port, speed in Mb/s, as
/// [`StripeTx::set_members`] takes them): 256 slots, each naming a member, in the order the
/// sender's own credit rule would choose them for equal-sized frames. Each member gets slots
/// in proportion to its speed, interleaved. All `None` without members.
pub fn slot_table(members: &[(PortId, u32)]) -> [Option<PortId>; 256] {
    let mut tx = StripeTx::new(0);
    tx.set_members(members);
    let mut slots = [None; 256];
    for s in &mut slots {
        *s = tx.choose(SLOT_BYTES as usize);
    }
    slots
}

/// The slot of [`slot_table`] a kernel fast path takes for a frame when it has sent `sent`
/// bytes before it (its byte counter, which then grows by the frame's length).
pub fn slot_of(sent: u64) -> usize {
    ((sent / SLOT_BYTES) % 256) as usize
}

/// The hash that keeps a frame the kernel fast path does not stripe (anything
/// [`parse_segment`](super::tcp::parse_segment) does not take: UDP, ICMP, other EtherTypes)
/// on one member per flow: the kernel's layer3+4 (addresses and ports, addresses only for
/// fragments and ICMP, the MACs for what is not IP).
pub const FLOW_POLICY: HashPolicy = HashPolicy::Layer34;

/// The slot of [`slot_table`] that carries every frame of the flow whose [`FLOW_POLICY`] hash
/// is `hash`, on a kernel fast path: its low byte. Flows are spread over the members by their
/// share of the slots (their speed), and a flow's frames all take one member, in order, with
/// no sequence header (the peer's kernel path delivers them as they come).
pub fn flow_slot(hash: u32) -> usize {
    (hash & 0xff) as usize
}

/// The member a kernel fast path sends the non-TCP `frame` on with the slots `slots`
/// ([`slot_table`]): the one [`flow_slot`] names, `None` while it names none (the bond sends
/// the frame itself then).
pub fn flow_member(slots: &[Option<PortId>; 256], frame: &[u8]) -> Option<PortId> {
    slots[flow_slot(xmit_hash(FLOW_POLICY, frame))]
}

#[cfg(test)]
mod test {
    use super::*;
    use proptest::prelude::*;

    const MAX_FRAME: usize = 9_000;

    #[test]
    fn slot_tables_follow_the_speeds_interleaved() {
        let two = slot_table(&[(PortId(0), 1000), (PortId(1), 1000)]);
        for (i, s) in two.iter().enumerate() {
            assert_eq!(*s, Some(PortId((i % 2) as u16)), "slot {i}");
        }
        let mixed = slot_table(&[(PortId(2), 10_000), (PortId(5), 2_500), (PortId(7), 0)]);
        let count = |p: u16| mixed.iter().filter(|s| **s == Some(PortId(p))).count();
        // 10000 : 2500 : 2500 (unknown counts as the slowest) = 171 : 43 : 43, within one.
        assert!(count(2).abs_diff(171) <= 1, "{}", count(2));
        assert!(count(5).abs_diff(43) <= 1 && count(7).abs_diff(43) <= 1);
        // Interleaved: the fast member never waits more than one slot of each other member.
        for w in mixed.windows(3) {
            assert!(w.contains(&Some(PortId(2))), "{w:?}");
        }
        assert!(slot_table(&[]).iter().all(Option::is_none));
        assert_eq!(slot_of(0), 0);
        assert_eq!(slot_of(SLOT_BYTES - 1), 0);
        assert_eq!(slot_of(SLOT_BYTES * 257 + 5), 1);
    }

    /// A UDP datagram of `len` payload bytes from `sport` to port 53, IPv4.
    fn udp(sport: u16, len: usize) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00, 0x45, 0];
        f.extend_from_slice(&((28 + len) as u16).to_be_bytes());
        f.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
        f.extend_from_slice(&sport.to_be_bytes());
        f.extend_from_slice(&[0, 53]);
        f.extend_from_slice(&((8 + len) as u16).to_be_bytes());
        f.extend_from_slice(&[0, 0]);
        f.resize(f.len() + len, 0x5a);
        f
    }

    #[test]
    fn a_flow_keeps_its_member_and_flows_spread_by_the_slots() {
        let slots = slot_table(&[(PortId(0), 1000), (PortId(1), 1000)]);
        let mut per_member = [0usize; 2];
        for sport in 1000..1400u16 {
            let first = flow_member(&slots, &udp(sport, 10)).unwrap();
            for len in [0, 1, 100, 1400] {
                assert_eq!(
                    flow_member(&slots, &udp(sport, len)),
                    Some(first),
                    "{sport}"
                );
            }
            assert_eq!(
                Some(first),
                slots[flow_slot(xmit_hash(HashPolicy::Layer34, &udp(sport, 7)))]
            );
            per_member[usize::from(first.0)] += 1;
        }
        // 400 flows over two equal members: both take a fair share.
        assert!(per_member.iter().all(|&n| n > 150), "{per_member:?}");
        assert_eq!(flow_member(&slot_table(&[]), &udp(1, 1)), None);
    }

    /// Sends `lens` and checks every member's bytes stay within one maximum frame of its ideal
    /// share after every frame. Returns the bytes per port index.
    fn check_shares(tx: &mut StripeTx, lens: &[usize], max: usize) -> Vec<u64> {
        let members: Vec<(PortId, u32)> = tx.members().collect();
        let weights: Vec<u64> = {
            let slowest = members
                .iter()
                .map(|m| m.1)
                .filter(|&s| s > 0)
                .min()
                .unwrap_or(1);
            members
                .iter()
                .map(|m| u64::from(if m.1 == 0 { slowest } else { m.1 }))
                .collect()
        };
        let total_w: u64 = weights.iter().sum();
        let mut sent = vec![0u64; members.len()];
        let mut total = 0u64;
        for &len in lens {
            let (port, _) = tx.next(len).unwrap();
            let i = members.iter().position(|m| m.0 == port).unwrap();
            sent[i] += len as u64;
            total += len as u64;
            for (j, &w) in weights.iter().enumerate() {
                let ideal = total as f64 * w as f64 / total_w as f64;
                let dev = (sent[j] as f64 - ideal).abs();
                assert!(
                    dev <= max as f64 + 1e-6,
                    "member {j}: sent {} ideal {ideal:.1} (deviation {dev:.1} > {max})",
                    sent[j]
                );
            }
        }
        sent
    }

    #[test]
    fn equal_members_alternate() {
        let mut tx = StripeTx::new(5);
        tx.set_members(&[(PortId(0), 1000), (PortId(1), 1000)]);
        let ports: Vec<u16> = (0..6).map(|_| tx.next(100).unwrap().0.0).collect();
        assert_eq!(ports, [0, 1, 0, 1, 0, 1]);
        assert_eq!(tx.next_seq(), 11);
    }

    #[test]
    fn bytes_not_frames_are_balanced() {
        // One member gets the big frames' bytes, the other many small frames: bytes even.
        let mut tx = StripeTx::new(0);
        tx.set_members(&[(PortId(0), 1000), (PortId(1), 1000)]);
        let lens: Vec<usize> = (0..10_000)
            .map(|i| if i % 3 == 0 { 1500 } else { 64 })
            .collect();
        let sent = check_shares(&mut tx, &lens, 1500);
        let total: u64 = sent.iter().sum();
        assert!(sent[0].abs_diff(total / 2) <= 1500);
    }

    #[test]
    fn no_member_no_sequence() {
        let mut tx = StripeTx::new(u32::MAX);
        assert!(tx.is_empty());
        assert_eq!(tx.next(100), None);
        tx.set_members(&[(PortId(3), 0)]);
        assert_eq!(tx.next(100), Some((PortId(3), u32::MAX)));
        assert_eq!(tx.next(100), Some((PortId(3), 0)));
    }

    #[test]
    fn removal_moves_share_at_once_and_readding_rebalances() {
        let mut tx = StripeTx::new(0);
        tx.set_members(&[(PortId(0), 10_000), (PortId(1), 10_000), (PortId(2), 1_000)]);
        for _ in 0..1000 {
            tx.next(1500);
        }
        tx.set_members(&[(PortId(0), 10_000), (PortId(2), 1_000)]);
        for _ in 0..1000 {
            let (p, _) = tx.next(1500).unwrap();
            assert_ne!(p, PortId(1));
        }
        // From here on the shares follow the new weights within one frame.
        tx.set_members(&[(PortId(0), 10_000), (PortId(1), 10_000), (PortId(2), 1_000)]);
        let mut fresh = StripeTx::new(0);
        fresh.set_members(&[(PortId(0), 10_000), (PortId(1), 10_000), (PortId(2), 1_000)]);
        let mut sent = [0u64; 3];
        for _ in 0..2100 {
            sent[tx.next(1500).unwrap().0.index()] += 1500;
        }
        for (i, &w) in [10u64, 10, 1].iter().enumerate() {
            let ideal = 2100 * 1500 * w / 21;
            // Carried-over credit is bounded by a frame per member.
            assert!(sent[i].abs_diff(ideal) <= 3 * 1500, "{sent:?}");
        }
    }

    #[test]
    fn unknown_speed_counts_as_slowest() {
        let mut tx = StripeTx::new(0);
        tx.set_members(&[
            (PortId(0), 0),
            (PortId(1), 2000),
            (PortId(1), 9999),
            (PortId(2), 1000),
        ]);
        assert_eq!(
            tx.members().collect::<Vec<_>>(),
            [(PortId(0), 0), (PortId(1), 2000), (PortId(2), 1000)]
        );
        let sent = check_shares(&mut tx, &[1000; 400], 1000);
        assert_eq!(sent, [100_000, 200_000, 100_000]);
    }

    proptest! {
        #[test]
        fn shares_stay_within_one_max_frame(
            speeds in proptest::collection::vec(prop_oneof![Just(0u32), 1u32..400_000], 1..6),
            lens in proptest::collection::vec(prop_oneof![60usize..=MAX_FRAME, Just(60), Just(1514)], 1..800),
        ) {
            let mut tx = StripeTx::new(0);
            let members: Vec<(PortId, u32)> =
                speeds.iter().enumerate().map(|(i, &s)| (PortId(i as u16), s)).collect();
            tx.set_members(&members);
            let max = lens.iter().copied().max().unwrap();
            check_shares(&mut tx, &lens, max);
        }

        #[test]
        fn membership_changes_never_stall_and_rebalance(
            changes in proptest::collection::vec(
                (proptest::collection::vec(1u32..100_000, 1..5), proptest::collection::vec(60usize..1600, 1..200)),
                1..6,
            ),
        ) {
            let mut tx = StripeTx::new(0);
            let mut seq = 0u32;
            for (speeds, lens) in changes {
                let members: Vec<(PortId, u32)> =
                    speeds.iter().enumerate().map(|(i, &s)| (PortId(i as u16 * 2), s)).collect();
                tx.set_members(&members);
                for &len in &lens {
                    let (port, s) = tx.next(len).unwrap();
                    prop_assert_eq!(s, seq);
                    seq += 1;
                    prop_assert!(members.iter().any(|m| m.0 == port));
                }
            }
        }
    }
}
