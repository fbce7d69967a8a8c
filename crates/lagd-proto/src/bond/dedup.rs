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
//!   timestamp or IPv4 identification differs, is not taken for one);
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
//! - at most [`ENTRIES`] frames whose copies are due are remembered; the oldest go first (their
//!   copies then reach the host, as without this).
//! - on lagd's own path a frame is also a copy when it comes within [`NEAR`] (256) frames of
//!   the first, however late. lagd judges a frame when it reads it, not when it arrived, and a
//!   sending lagd puts the copies out in separate system calls; on a loaded one-CPU guest the
//!   receiving lagd read 40 % of a datagram train's copies more than 10 ms after their first
//!   (CI's 5.10 guest with two others beside it), a few frames later. The kernel path needs
//!   no such rule: the programs see a frame as it arrives, and the sending program clones a
//!   frame in one run.
//!
//! The kernel path's members' program does the same (`bpf/lagd_shared.h`, `enum dedup`, with
//! the same three numbers, which lagd's tests hold to these).

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use crate::time::Instant;

/// Bytes of a frame compared.
pub const HEAD: usize = 96;
/// How long after a frame's first copy another is taken for a copy.
pub const WINDOW: Duration = Duration::from_millis(10);
/// Frames whose copies are due, at most.
pub const ENTRIES: usize = 8192;
/// On lagd's path a copy also counts as one within this many frames of the first, however long
/// after it (see the module documentation).
pub const NEAR: u64 = 256;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    len: u32,
    head: [u8; HEAD],
}

impl Key {
    fn of(frame: &[u8]) -> Self {
        let mut head = [0; HEAD];
        let n = frame.len().min(HEAD);
        head[..n].copy_from_slice(&frame[..n]);
        Self {
            len: u32::try_from(frame.len()).unwrap_or(u32::MAX),
            head,
        }
    }
}

#[derive(Debug, Clone)]
struct Seen {
    at: Instant,
    /// The frame's number among those judged (`Dedup::judged` then).
    nth: u64,
    copies: usize,
}

/// The frames delivered lately (see the [module documentation](self)).
#[derive(Clone, Default)]
pub struct Dedup {
    seen: HashMap<Key, Seen>,
    /// When each entry of `seen` was (re)started and its number, oldest first; an entry
    /// restarted since has a later record, and only its latest removes it.
    order: VecDeque<(Instant, u64, Key)>,
    /// Frames judged so far.
    judged: u64,
}

impl Dedup {
    /// Whether `frame`, received at `now` on a bond with `usable` usable members, is a copy of
    /// a frame already delivered (drop it) rather than a frame to deliver (remembered).
    pub fn is_copy(&mut self, now: Instant, frame: &[u8], usable: usize) -> bool {
        if self.order.capacity() == 0 {
            // Room for the bound from the first frame on: the receive path allocates no more.
            self.seen.reserve(ENTRIES + 1);
            self.order.reserve(ENTRIES + 1);
        }
        self.judged += 1;
        let judged = self.judged;
        let recent =
            |at: Instant, nth: u64| now.saturating_since(at) < WINDOW || judged - nth <= NEAR;
        while let Some(&(at, nth, _)) = self.order.front() {
            if recent(at, nth) && self.order.len() <= ENTRIES {
                break;
            }
            if let Some((_, nth, key)) = self.order.pop_front()
                && self.seen.get(&key).is_some_and(|s| s.nth == nth)
            {
                self.seen.remove(&key);
            }
        }
        let key = Key::of(frame);
        let fresh = Seen {
            at: now,
            nth: judged,
            copies: 1,
        };
        if let Some(s) = self.seen.get_mut(&key) {
            if recent(s.at, s.nth) && s.copies < usable {
                s.copies += 1;
                if s.copies >= usable {
                    self.seen.remove(&key);
                }
                return true;
            }
            *s = fresh;
        } else if usable > 1 {
            self.seen.insert(key.clone(), fresh);
        } else {
            return false;
        }
        self.order.push_back((now, judged, key));
        false
    }

    /// Frames remembered now.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// Whether none is remembered.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }
}

impl core::fmt::Debug for Dedup {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Dedup")
            .field("remembered", &self.seen.len())
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
    fn memory_stays_bounded_and_old_frames_are_forgotten() {
        let mut d = Dedup::default();
        for i in 0..(3 * ENTRIES) as u64 {
            let mut f = vec![0; 80];
            f[..8].copy_from_slice(&i.to_ne_bytes());
            assert!(!d.is_copy(T0, &f, 2));
            assert!(d.len() <= ENTRIES + 1, "{}", d.len());
        }
        // Once the window passed, the next frame forgets every older one but the last NEAR.
        assert!(!d.is_copy(T0 + WINDOW, &frame(9, 80), 2));
        assert_eq!(d.len() as u64, NEAR + 1);
    }
}
