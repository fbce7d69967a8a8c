//! `broadcast_dedup`: the receive side of a bond whose far end sends every frame on each link.
//!
//! Each frame then arrives once per member, and the kernel bond hands the host every copy: ping
//! reports `DUP!`, a UDP receiver counts each datagram twice, and TCP answers each duplicate
//! segment with an immediate ACK (a D-SACK), which doubles the ACKs that cross the bond and costs
//! a single stream a quarter of its rate. With `broadcast_dedup` a member does not deliver a
//! frame that is a copy of one another member delivered:
//!
//! - two frames are copies when they have the same length and the same first [`HEAD`] bytes
//!   (96: up to TCP's timestamps behind an IPv6 header, so that a retransmission, whose
//!   timestamp or IPv4 identification differs, is not taken for one), as told by a keyed 64-bit
//!   sum of those ([`sum`]; the key is random per lagd, so that no sender can aim two frames at
//!   one sum);
//! - the first to arrive is delivered and remembered; the next `usable - 1` within [`WINDOW`]
//!   of it are copies, dropped and counted, and the last of them forgets it. An identical frame
//!   after them is a new frame (a retransmission that repeats the original byte for byte, or
//!   the next of a sender's identical frames), and so is one after the window (a copy was
//!   lost);
//! - the window is long (10 ms) because it only matters when a copy is lost: copies through
//!   two switches can be a millisecond apart, and lagd's own path in a one-CPU guest saw them
//!   that far apart too. What a lost copy can cost: the frame's next identical
//!   transmission within the window is taken for the copy (and the one after it delivered),
//!   which only matters if the host's stack dropped the copy it was given;
//! - frames are remembered in [`SLOTS`] slots, one per sum (`sum % SLOTS`): a frame whose slot
//!   holds another frame with copies still due takes it over, and that frame's copies then
//!   reach the host, as without this. Copies follow their frame closely, so few frames are
//!   waiting for theirs at any time, and the memory is fixed (reserved on the first frame);
//! - on lagd's own path a frame is also a copy when it comes within [`NEAR`] (256) frames of
//!   the first, however late. lagd judges a frame when it reads it, not when it arrived, and a
//!   sending lagd puts the copies out in separate system calls; on a loaded one-CPU guest the
//!   receiving lagd read 40 % of a datagram train's copies more than 10 ms after their first
//!   (CI's 5.10 guest with two others beside it), a few frames later. The kernel path needs
//!   no such rule: the programs see a frame as it arrives, and the sending program clones a
//!   frame in one run.
//!
//! The kernel path's members' program does the same (`bpf/lagd_shared.h`, `enum dedup`, with
//! the same numbers and sum, which lagd's tests hold to these, frame by frame).

use std::time::Duration;

use crate::time::Instant;

/// Bytes of a frame summed.
pub const HEAD: usize = 96;
/// How long after a frame's first copy another is taken for a copy.
pub const WINDOW: Duration = Duration::from_millis(10);
/// Slots: frames whose copies are due, at most (a power of two).
pub const SLOTS: usize = 8192;
/// On lagd's path a copy also counts as one within this many frames of the first, however long
/// after it (see the module documentation).
pub const NEAR: u64 = 256;
/// The sum's multiplier: 2^64 over the golden ratio (odd).
pub const MUL: u64 = 0x9e37_79b9_7f4a_7c15;

/// The 64-bit sum of `frame` keyed with `seed`, `tag` being its accelerated VLAN tag with bit
/// 16 set (0 for none; lagd's sockets hand lagd the tag inside the frame): the programs' sum
/// (`bpf/lagd_shared.h`, enum dedup). Its slot is `sum % SLOTS`.
pub fn sum(seed: u64, frame: &[u8], tag: u32) -> u64 {
    let mut head = [0u8; HEAD];
    let n = frame.len().min(HEAD);
    head[..n].copy_from_slice(&frame[..n]);
    let len = u64::from(u32::try_from(frame.len()).unwrap_or(u32::MAX));
    let mut h = seed ^ len << 32 ^ u64::from(tag);
    for word in head.chunks_exact(8) {
        let w = u64::from_le_bytes(word.try_into().unwrap_or_default());
        h = (h ^ w).wrapping_mul(MUL);
        h ^= h >> 29;
    }
    h ^= h >> 32;
    h = h.wrapping_mul(MUL);
    h ^ h >> 29
}

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    /// The frame's sum.
    sum: u64,
    at: Instant,
    /// The frame's number among those judged (`Dedup::judged` then).
    nth: u64,
    /// Copies arrived since, that one included (0: the slot is empty).
    copies: usize,
}

/// The frames delivered lately (see the [module documentation](self)).
#[derive(Clone, Default)]
pub struct Dedup {
    seed: u64,
    /// [`SLOTS`] of them once a frame was judged.
    slots: Vec<Slot>,
    /// Frames judged so far.
    judged: u64,
}

impl Dedup {
    /// A table whose sums are keyed with `seed` (random per lagd).
    pub fn with_seed(seed: u64) -> Self {
        Self {
            seed,
            ..Self::default()
        }
    }

    /// The sums' key.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Whether `frame`, received at `now` on a bond with `usable` usable members, is a copy of
    /// a frame already delivered (drop it) rather than a frame to deliver (remembered). A frame
    /// shorter than an Ethernet header is never a copy.
    pub fn is_copy(&mut self, now: Instant, frame: &[u8], usable: usize) -> bool {
        self.judged += 1;
        if frame.len() < 14 {
            return false;
        }
        if self.slots.is_empty() {
            self.slots = vec![Slot::default(); SLOTS];
        }
        let h = sum(self.seed, frame, 0);
        let judged = self.judged;
        let slot = &mut self.slots[h as usize % SLOTS];
        let recent = now.saturating_since(slot.at) < WINDOW || judged - slot.nth <= NEAR;
        if slot.copies > 0 && slot.sum == h && recent && slot.copies < usable {
            slot.copies += 1;
            if slot.copies >= usable {
                slot.copies = 0;
            }
            return true;
        }
        if usable > 1 {
            *slot = Slot {
                sum: h,
                at: now,
                nth: judged,
                copies: 1,
            };
        }
        false
    }

    /// Frames remembered now (a walk over every slot).
    pub fn len(&self) -> usize {
        self.slots.iter().filter(|s| s.copies > 0).count()
    }

    /// Whether none is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl core::fmt::Debug for Dedup {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Dedup")
            .field("remembered", &self.len())
            .finish()
    }
}

#[cfg(test)]
mod test {
    use super::*;

    fn frame(seq: u8, len: usize) -> Vec<u8> {
        let mut f = vec![0xab; len];
        f[60] = seq;
        f
    }

    const T0: Instant = Instant::from_micros(1_000);

    #[test]
    fn the_first_copy_is_delivered_and_the_others_of_usable_are_not() {
        let mut d = Dedup::default();
        let f = frame(1, 1500);
        assert!(!d.is_copy(T0, &f, 3));
        assert!(d.is_copy(T0 + Duration::from_micros(5), &f, 3));
        assert!(d.is_copy(T0 + Duration::from_micros(9), &f, 3));
        // The last copy due forgot it: a fourth identical frame with three members is a new
        // frame (a retransmission).
        assert!(d.is_empty());
        assert!(!d.is_copy(T0 + Duration::from_micros(20), &f, 3));
        assert!(d.is_copy(T0 + Duration::from_micros(25), &f, 3));
    }

    #[test]
    fn with_one_usable_member_nothing_is_a_copy() {
        let mut d = Dedup::default();
        let f = frame(1, 100);
        for us in 0..5 {
            assert!(!d.is_copy(T0 + Duration::from_micros(us), &f, 1));
        }
        assert!(d.is_empty(), "nothing to remember");
        // Remembered while two were usable; one left: the identical frame is a new one.
        assert!(!d.is_copy(T0, &f, 2));
        assert!(!d.is_copy(T0, &f, 1));
    }

    #[test]
    fn after_the_window_an_identical_frame_is_new() {
        let mut d = Dedup::default();
        let f = frame(1, 100);
        assert!(!d.is_copy(T0, &f, 2));
        for i in 0..NEAR {
            assert!(!d.is_copy(T0, &frame(2, 101 + i as usize), 2));
        }
        // Its copy was lost: the identical frame a window and NEAR frames later is delivered.
        assert!(!d.is_copy(T0 + WINDOW, &f, 2));
        assert!(d.is_copy(T0 + WINDOW + Duration::from_micros(1), &f, 2));
    }

    #[test]
    fn a_copy_late_but_within_near_frames_is_a_copy() {
        let mut d = Dedup::default();
        let f = frame(1, 100);
        assert!(!d.is_copy(T0, &f, 2));
        let late = T0 + WINDOW * 3;
        for i in 0..NEAR - 2 {
            assert!(!d.is_copy(late, &frame(2, 100 + i as usize), 2));
        }
        assert!(d.is_copy(late, &f, 2), "the frame's copy, NEAR frames on");
        // Past both bounds it is a new frame.
        assert!(!d.is_copy(late, &f, 2));
        for i in 0..NEAR {
            assert!(!d.is_copy(late, &frame(3, 100 + i as usize), 2));
        }
        assert!(
            !d.is_copy(late + WINDOW, &f, 2),
            "more than NEAR frames and WINDOW on"
        );
    }

    #[test]
    fn frames_differing_in_their_head_or_length_are_not_copies() {
        let mut d = Dedup::default();
        let (a, b) = (frame(1, 200), frame(2, 200));
        assert!(!d.is_copy(T0, &a, 2));
        assert!(!d.is_copy(T0, &b, 2));
        let mut longer = a.clone();
        longer.push(0);
        assert!(!d.is_copy(T0, &longer, 2));
        // Past HEAD bytes only the length tells: a frame of the same length is a copy.
        let mut tail = a.clone();
        tail[HEAD + 10] ^= 1;
        assert!(d.is_copy(T0, &tail, 2));
        // A frame shorter than HEAD is compared whole.
        let (s1, mut s2) = (frame(1, 64), frame(1, 64));
        s2[63] ^= 1;
        assert!(!d.is_copy(T0, &s1, 2));
        assert!(!d.is_copy(T0, &s2, 2));
        assert!(d.is_copy(T0, &s2, 2));
    }

    #[test]
    fn a_frame_on_a_slot_whose_copies_are_due_takes_it_over() {
        let mut d = Dedup::with_seed(0x1234_5678_9abc_def0);
        let a = frame(1, 120);
        let slot_of = |f: &[u8]| sum(d.seed(), f, 0) as usize % SLOTS;
        // Another frame on a's slot (one in SLOTS of them, about).
        let b = (0..=u16::MAX)
            .map(|i| {
                let mut f = frame(2, 120);
                f[30..32].copy_from_slice(&i.to_be_bytes());
                f
            })
            .find(|f| slot_of(f) == slot_of(&a))
            .expect("a frame on the same slot");
        assert!(!d.is_copy(T0, &a, 2));
        assert!(!d.is_copy(T0, &b, 2), "b is new, and takes the slot");
        assert!(!d.is_copy(T0, &a, 2), "a's copy reaches the host");
        assert!(
            d.is_copy(T0, &a, 2),
            "a, remembered again, has its copy taken"
        );
        assert_eq!(d.len(), 0);
    }

    #[test]
    fn the_sum_takes_the_key_the_length_the_tag_and_the_head_only() {
        let f = frame(1, 200);
        let h = sum(7, &f, 0);
        assert_ne!(h, sum(8, &f, 0), "the key");
        assert_ne!(h, sum(7, &f, 0x1_0005), "the tag");
        assert_ne!(h, sum(7, &f[..199], 0), "the length");
        let mut past = f.clone();
        past[HEAD] ^= 1;
        assert_eq!(h, sum(7, &past, 0), "past the head");
        let mut inside = f.clone();
        inside[HEAD - 1] ^= 1;
        assert_ne!(h, sum(7, &inside, 0), "the head's last byte");
        // Zeros past a short frame's end: the length keeps it apart from a longer frame.
        let short = vec![0u8; 20];
        assert_ne!(sum(7, &short, 0), sum(7, &[0u8; 21], 0));
    }

    #[test]
    fn frames_shorter_than_an_ethernet_header_are_never_copies() {
        let mut d = Dedup::default();
        let f = [1u8; 13];
        assert!(!d.is_copy(T0, &f, 2));
        assert!(!d.is_copy(T0, &f, 2));
    }
}
