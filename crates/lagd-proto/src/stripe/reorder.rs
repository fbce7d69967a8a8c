//! The receiver: puts striped frames back in sequence order before they reach the host.
//!
//! [`Reorder`] keeps a window of [`ReorderConfig::slots`] sequence numbers starting at the next
//! one to deliver. A frame that arrives in order goes to the host at once (no copy into the
//! buffer), followed by any held frames it unblocks. A frame ahead of a missing one is copied
//! into a pre-allocated slot and waits. Nothing is allocated per frame.
//!
//! A missing frame is given up on (its gap *skipped*) when:
//! - every member the peer stripes over ([`Reorder::set_lanes`]) has brought a later frame:
//!   each member delivers its frames in the order they were sent (a link is FIFO), so a frame
//!   none of them still has in flight is lost (the rule of multilink PPP, RFC 1990). This
//!   catches losses at once, however slowly the frames are read, and never gives up on a frame
//!   that is merely late;
//! - a frame that arrived after it has waited [`ReorderConfig::timeout`] (the fallback, for a
//!   member that went silent): every frame leaves the buffer at most `timeout` after it arrived;
//! - or a frame arrives too far ahead for the window: the window slides forward, delivering the
//!   held frames and skipping the holes it passes (*buffer-full* skips).
//!
//! A frame that arrives after its gap was skipped (*late*) is delivered at once, out of order,
//! by default ([`ReorderConfig::deliver_late`]): TCP accepts it as an out-of-order segment that
//! fills a hole, which ends the duplicate ACKs and, if the sender already retransmitted, lets it
//! undo the window reduction (DSACK); dropping it would force a retransmission instead. A
//! bitmap of the last `8 × slots` sequence numbers tells late frames from duplicates, which are
//! dropped. Frames older than that bitmap cannot be told apart and are dropped as *stale*.
//!
//! The sender restarting (a new lagd, sequence numbers from anywhere) is noticed three ways and
//! resynchronises instead of stalling: the data header's epoch tag changes (frames still tagged
//! with the previous epoch are dropped as stale), a jump of 2^20 sequence numbers or more ahead,
//! or nothing but stale frames ([`RESYNC_STALE`] at least) for a whole timeout. Resynchronising
//! delivers the held frames in order and takes the new frame as the start of the sequence;
//! [`Reorder::restart`] does the same on request (the peer's hello showed a new epoch whose tag
//! happens to equal the old one's). The very first frame received also starts the sequence:
//! frames a little behind it are delivered as late.
//!
//! Memory: `slots × max_frame_len` bytes of frame slots (4.5 MiB by default), allocated once in
//! [`Reorder::new`]. Frames reach the host through a `deliver` callback, in sequence order.

use std::collections::VecDeque;

use core::time::Duration;

use crate::time::Instant;
use crate::wire;

use super::header;

/// How long a frame waits for a missing predecessor by default: 3 ms.
///
/// Long enough to absorb the skew between members (serialisation of a jumbo frame at 1 Gb/s is
/// 72 µs per hop; switch queues add up to a few hundred µs to ms), short enough to be noise next
/// to what TCP itself waits on a loss (Linux's minimum RTO is 200 ms, and recovery takes at
/// least a round trip anyway). At 10 Gb/s and up the window fills before the timeout expires,
/// so there losses are skipped by the buffer-full rule in well under a millisecond.
///
/// With lanes ([`Reorder::set_lanes`]) losses are found without waiting, and the timeout only
/// matters when a member goes silent without its carrier dropping (until its peer's hellos
/// time out) — or when the receiving lagd is slow to read a member, which the timeout must not
/// mistake for loss; hence 3 ms rather than less.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(3);
/// Window size by default: 512 frames (0.6 ms of full-size frames at 10 Gb/s).
pub const DEFAULT_SLOTS: usize = 512;
/// The longest host frame held by default: 9216 bytes, the usual jumbo maximum.
pub const DEFAULT_MAX_FRAME_LEN: usize = 9216;
/// A jump this far ahead (in sequence numbers) is a restart, not a loss.
pub const RESYNC_JUMP: u32 = 1 << 20;
/// This many stale frames in a row, over at least the timeout, are a restart (the sender went
/// back in sequence, or drew its previous epoch tag again).
pub const RESYNC_STALE: u32 = 16;

/// Sizing and timing of a [`Reorder`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReorderConfig {
    /// Frames the window holds (rounded up to a power of two, at least 2).
    pub slots: usize,
    /// The longest host frame that can be held (longer frames are delivered if in order,
    /// dropped otherwise). The buffer pre-allocates `slots × max_frame_len` bytes.
    pub max_frame_len: usize,
    /// How long a frame waits for a missing predecessor.
    pub timeout: Duration,
    /// Deliver frames that arrive after their gap was skipped (true) or drop them.
    pub deliver_late: bool,
    /// Skip timed-out gaps in [`push`](Reorder::push) too (true), or only in
    /// [`poll`](Reorder::poll). A driver that reads several members in turn sets false and
    /// polls only once it has read every member dry: a frame that waits in another member's
    /// socket while this one is read is not late, and the time it waits there says nothing
    /// about the link.
    pub expire_on_push: bool,
}

impl Default for ReorderConfig {
    fn default() -> Self {
        Self {
            slots: DEFAULT_SLOTS,
            max_frame_len: DEFAULT_MAX_FRAME_LEN,
            timeout: DEFAULT_TIMEOUT,
            deliver_late: true,
            expire_on_push: true,
        }
    }
}

/// What the receiver has done since it was created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReorderCounters {
    /// Frames handed to the host (in order, or late).
    pub delivered: u64,
    /// Frames that waited in the buffer for a predecessor.
    pub held: u64,
    /// Frames that arrived after a later frame and were still put back in order.
    pub reordered: u64,
    /// Frames that arrived after their gap had been skipped (delivered if `deliver_late`).
    pub late: u64,
    /// Frames already delivered or already held: dropped.
    pub duplicates: u64,
    /// Frames too old to be told from duplicates, or of the sender's previous epoch: dropped.
    pub stale: u64,
    /// Sequence numbers given up on after the timeout (frames lost, or later than the timeout).
    pub skipped_timeout: u64,
    /// Sequence numbers given up on because every member had brought a later frame (lost).
    pub skipped_lost: u64,
    /// The timeout in force, µs, once a late frame made it grow (0 before: the configured one).
    pub timeout_us: u64,
    /// Sequence numbers given up on because a frame arrived beyond the window.
    pub skipped_full: u64,
    /// Frames longer than `max_frame_len` that would have had to wait: dropped.
    pub oversize: u64,
    /// Times the sequence was taken up afresh (sender restarted).
    pub resyncs: u64,
    /// The most frames held at once.
    pub max_occupancy: usize,
}

/// What became of one arriving frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Arrival {
    /// The next in sequence: delivered now (with the held frames it unblocked).
    InOrder,
    /// Ahead of a missing frame: held.
    Held,
    /// Its gap had been skipped: delivered now, out of order (or dropped, see `deliver_late`).
    Late,
    /// Already delivered or held: dropped.
    Duplicate,
    /// Too old to tell, or from the sender's previous epoch: dropped.
    Stale,
    /// Too long to hold: dropped.
    Oversize,
    /// The sequence was taken up afresh at this frame (delivered).
    Resync,
}

#[derive(Debug, Clone)]
struct Slot {
    buf: Vec<u8>,
    seq: u32,
    used: bool,
}

/// The reorder buffer. See the [module documentation](self).
#[derive(Debug, Clone)]
pub struct Reorder {
    config: ReorderConfig,
    slots: Vec<Slot>,
    /// `slots.len() - 1` (a power of two minus one).
    mask: u32,
    /// The next sequence number to deliver; `None` before the first frame or after a restart.
    next: Option<u32>,
    /// The highest sequence number received since the last (re)start.
    highest: u32,
    /// Frames held.
    occupancy: usize,
    /// (arrival, seq) of held frames in arrival order; entries of frames no longer held are
    /// dropped lazily from the front.
    arrivals: VecDeque<(Instant, u32)>,
    /// One bit per sequence number behind `next`: delivered (1) or skipped (0).
    history: Vec<u64>,
    history_mask: u32,
    epoch_tag: Option<u8>,
    prev_epoch_tag: Option<u8>,
    stale_run: u32,
    stale_since: Instant,
    counters: ReorderCounters,
    /// The members the peer stripes over, and the latest sequence number each brought since
    /// the sequence (re)started.
    lanes: Vec<(u16, Option<u32>)>,
    /// The timeout in force: [`ReorderConfig::timeout`], doubled (up to [`MAX_TIMEOUT`]) each
    /// time a frame turns out late, halved back after [`TIMEOUT_CALM`] deliveries without one.
    timeout: Duration,
    calm: u32,
}

/// The adaptive timeout's ceiling.
pub const MAX_TIMEOUT: Duration = Duration::from_millis(64);
/// In-order deliveries without a late frame before the timeout halves again.
pub const TIMEOUT_CALM: u32 = 100_000;

impl Reorder {
    /// A receiver with all its memory allocated.
    pub fn new(config: ReorderConfig) -> Self {
        let n = config.slots.clamp(2, 1 << 24).next_power_of_two();
        let history_bits = (n * 8).max(64);
        let config = ReorderConfig { slots: n, ..config };
        Self {
            slots: (0..n)
                .map(|_| Slot {
                    buf: Vec::with_capacity(config.max_frame_len),
                    seq: 0,
                    used: false,
                })
                .collect(),
            mask: (n - 1) as u32,
            next: None,
            highest: 0,
            occupancy: 0,
            arrivals: VecDeque::with_capacity(2 * n),
            history: vec![0; history_bits / 64],
            history_mask: (history_bits - 1) as u32,
            epoch_tag: None,
            prev_epoch_tag: None,
            stale_run: 0,
            stale_since: Instant::ZERO,
            counters: ReorderCounters::default(),
            lanes: Vec::new(),
            timeout: config.timeout,
            calm: 0,
            config,
        }
    }

    /// The configuration in use (`slots` rounded).
    pub fn config(&self) -> &ReorderConfig {
        &self.config
    }

    /// The counters.
    pub fn counters(&self) -> &ReorderCounters {
        &self.counters
    }

    /// Frames held now.
    pub fn occupancy(&self) -> usize {
        self.occupancy
    }

    /// The next sequence number to deliver, once the first frame has been seen.
    pub fn next_seq(&self) -> Option<u32> {
        self.next
    }

    /// The epoch tag of the frames being accepted, once the first frame has been seen.
    pub fn epoch_tag(&self) -> Option<u8> {
        self.epoch_tag
    }

    /// The members (by number) the peer stripes over. A member that joins counts once it has
    /// brought a frame; until every member has, only the timeout skips gaps.
    pub fn set_lanes(&mut self, members: &[u16]) {
        self.lanes.retain(|(m, _)| members.contains(m));
        for &m in members {
            if !self.lanes.iter().any(|(x, _)| *x == m) {
                self.lanes.push((m, None));
            }
        }
    }

    /// Like [`push_frame`](Self::push_frame), for a frame that arrived on member `lane`: the
    /// lane rule (module documentation) skips the gaps every member has gone past.
    pub fn push_frame_on<F: FnMut(&[u8])>(
        &mut self,
        now: Instant,
        lane: u16,
        frame: &mut [u8],
        deliver: &mut F,
    ) -> wire::Result<Arrival> {
        let h = header::decapsulate(frame)?;
        let arrival = self.accept(
            now,
            h.seq,
            h.epoch_tag,
            &frame[header::HEADER_LEN..],
            deliver,
        );
        if matches!(arrival, Arrival::Resync) {
            for l in &mut self.lanes {
                l.1 = None;
            }
        }
        if !matches!(arrival, Arrival::Stale | Arrival::Duplicate) {
            if let Some(l) = self.lanes.iter_mut().find(|(m, _)| *m == lane) {
                let newer = l.1.is_none_or(|last| (h.seq.wrapping_sub(last) as i32) > 0);
                if newer {
                    l.1 = Some(h.seq);
                }
            }
            self.skip_passed(deliver);
        }
        if self.config.expire_on_push {
            self.expire(now, deliver);
        } else {
            self.drain(deliver);
        }
        Ok(arrival)
    }

    /// The lane rule: the holes before the oldest of the members' latest frames are lost.
    fn skip_passed<F: FnMut(&[u8])>(&mut self, deliver: &mut F) {
        let Some(next) = self.next else { return };
        if self.occupancy == 0 || self.lanes.is_empty() {
            return;
        }
        let mut passed: Option<u32> = None;
        for &(_, last) in &self.lanes {
            let Some(last) = last else { return };
            let ahead = last.wrapping_sub(next);
            if ahead > RESYNC_JUMP {
                // This member's latest is behind the window: it has nothing newer to say.
                return;
            }
            passed = Some(passed.map_or(ahead, |p| p.min(ahead)));
        }
        let Some(ahead) = passed else { return };
        while let Some(n) = self.next {
            if n.wrapping_sub(next) >= ahead {
                break;
            }
            if !self.step(deliver) {
                self.counters.skipped_lost += 1;
            }
        }
        self.drain(deliver);
    }

    /// Takes a whole stripe data frame (as received on a member), decapsulates it in place and
    /// handles it as [`push`](Self::push) does.
    ///
    /// An error (the frame is not a well-formed stripe data frame) leaves everything untouched;
    /// the caller counts it.
    pub fn push_frame<F: FnMut(&[u8])>(
        &mut self,
        now: Instant,
        frame: &mut [u8],
        deliver: &mut F,
    ) -> wire::Result<Arrival> {
        let h = header::decapsulate(frame)?;
        Ok(self.push(
            now,
            h.seq,
            h.epoch_tag,
            &frame[header::HEADER_LEN..],
            deliver,
        ))
    }

    /// Takes the host frame `frame` with sequence number `seq` and epoch tag `epoch_tag`,
    /// arrived at `now`. Frames that can go to the host now, this one included, are passed to
    /// `deliver` in sequence order (a late frame on its own, out of order); gaps whose timeout
    /// is due at `now` are skipped too.
    pub fn push<F: FnMut(&[u8])>(
        &mut self,
        now: Instant,
        seq: u32,
        epoch_tag: u8,
        frame: &[u8],
        deliver: &mut F,
    ) -> Arrival {
        let arrival = self.accept(now, seq, epoch_tag, frame, deliver);
        if self.config.expire_on_push {
            self.expire(now, deliver);
        }
        arrival
    }

    fn accept<F: FnMut(&[u8])>(
        &mut self,
        now: Instant,
        seq: u32,
        epoch_tag: u8,
        frame: &[u8],
        deliver: &mut F,
    ) -> Arrival {
        let mut resync = false;
        match self.epoch_tag {
            Some(t) if t == epoch_tag => {}
            Some(t) => {
                // Stragglers of the previous epoch are dropped, unless they keep coming: then
                // the sender restarted again and drew the old tag.
                if self.prev_epoch_tag == Some(epoch_tag) && !self.stale_run_ends(now) {
                    return Arrival::Stale;
                }
                self.flush(deliver);
                self.prev_epoch_tag = Some(t);
                self.next = None;
                resync = true;
            }
            None => {}
        }
        self.epoch_tag = Some(epoch_tag);
        let next = match self.next {
            Some(n) => n,
            None => {
                if resync {
                    self.counters.resyncs += 1;
                }
                self.start_at(seq);
                seq
            }
        };
        let d = seq.wrapping_sub(next) as i32;
        if d < 0 {
            let back = d.unsigned_abs();
            if back <= self.history_mask + 1 {
                self.stale_run = 0;
                if self.was_delivered(seq) {
                    self.counters.duplicates += 1;
                    return Arrival::Duplicate;
                }
                self.counters.late += 1;
                // The gap was given up on too soon: the members' skew is longer than thought.
                self.timeout = (self.timeout * 2).min(MAX_TIMEOUT.max(self.config.timeout));
                self.calm = 0;
                self.counters.timeout_us = self.timeout.as_micros() as u64;
                if self.config.deliver_late {
                    self.set_delivered(seq, true);
                    self.counters.delivered += 1;
                    deliver(frame);
                }
                return Arrival::Late;
            }
            if !self.stale_run_ends(now) {
                return Arrival::Stale;
            }
            self.resync(seq, deliver);
            resync = true;
        } else if d as u32 >= RESYNC_JUMP {
            self.resync(seq, deliver);
            resync = true;
        } else if d as usize >= self.slots.len() {
            let start = seq.wrapping_sub(self.mask);
            self.advance_to(start, deliver);
        }
        self.stale_run = 0;
        let next = self.next.unwrap_or(seq);
        let in_order_or = |a| if resync { Arrival::Resync } else { a };
        let reordered = !resync && (seq.wrapping_sub(self.highest) as i32) < 0;
        if !reordered {
            self.highest = seq;
        }
        if seq == next {
            if reordered {
                self.counters.reordered += 1;
            }
            if self.timeout > self.config.timeout {
                self.calm += 1;
                if self.calm >= TIMEOUT_CALM {
                    self.calm = 0;
                    self.timeout = (self.timeout / 2).max(self.config.timeout);
                    self.counters.timeout_us = self.timeout.as_micros() as u64;
                }
            }
            self.counters.delivered += 1;
            deliver(frame);
            self.set_delivered(seq, true);
            self.next = Some(seq.wrapping_add(1));
            self.drain(deliver);
            return in_order_or(Arrival::InOrder);
        }
        let slot = &mut self.slots[(seq & self.mask) as usize];
        if slot.used && slot.seq == seq {
            self.counters.duplicates += 1;
            return Arrival::Duplicate;
        }
        if frame.len() > self.config.max_frame_len {
            self.counters.oversize += 1;
            return Arrival::Oversize;
        }
        if reordered {
            self.counters.reordered += 1;
        }
        slot.buf.clear();
        slot.buf.extend_from_slice(frame);
        slot.seq = seq;
        slot.used = true;
        self.occupancy += 1;
        self.counters.held += 1;
        self.counters.max_occupancy = self.counters.max_occupancy.max(self.occupancy);
        if self.arrivals.len() == self.arrivals.capacity() {
            self.trim_arrivals_all();
        }
        self.arrivals.push_back((now, seq));
        Arrival::Held
    }

    /// Skips the gaps whose timeout is due at `now`, delivering the frames held behind them.
    /// Returns the number of frames delivered.
    pub fn poll<F: FnMut(&[u8])>(&mut self, now: Instant, deliver: &mut F) -> usize {
        let before = self.counters.delivered;
        self.expire(now, deliver);
        (self.counters.delivered - before) as usize
    }

    /// When [`poll`](Self::poll) has something to do: the time the oldest held frame has waited
    /// the timeout. `None` while nothing is held.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.occupancy == 0 {
            return None;
        }
        self.arrivals
            .iter()
            .find(|&&(_, seq)| self.is_held(seq))
            .map(|&(t, _)| t + self.timeout)
    }

    /// Forgets the sequence (the sender restarted): the held frames are delivered in order and
    /// the next frame to arrive starts the sequence afresh, whatever its epoch tag.
    pub fn restart<F: FnMut(&[u8])>(&mut self, deliver: &mut F) {
        self.flush(deliver);
        self.next = None;
        self.epoch_tag = None;
        self.prev_epoch_tag = None;
        self.counters.resyncs += 1;
    }

    /// Counts a stale frame; true when the run of stale frames shows the sender restarted:
    /// [`RESYNC_STALE`] of them in a row (this one included), over at least the timeout, with
    /// no other frame in between. (A slow member's stragglers come in bursts, between frames of
    /// the other members; a restarted sender's frames are all stale.) That last frame is then
    /// not counted as stale.
    fn stale_run_ends(&mut self, now: Instant) -> bool {
        if self.stale_run == 0 {
            self.stale_since = now;
        }
        self.stale_run = self.stale_run.saturating_add(1);
        if self.stale_run >= RESYNC_STALE && now >= self.stale_since + self.config.timeout {
            return true;
        }
        self.counters.stale += 1;
        false
    }

    fn resync<F: FnMut(&[u8])>(&mut self, seq: u32, deliver: &mut F) {
        self.flush(deliver);
        self.start_at(seq);
        self.counters.resyncs += 1;
    }

    fn start_at(&mut self, seq: u32) {
        self.next = Some(seq);
        self.highest = seq;
        self.stale_run = 0;
        // Nothing behind the new start was delivered: frames up to the history's length behind
        // it are taken as late, not as duplicates.
        self.history.fill(0);
    }

    fn is_held(&self, seq: u32) -> bool {
        let s = &self.slots[(seq & self.mask) as usize];
        s.used && s.seq == seq
    }

    fn was_delivered(&self, seq: u32) -> bool {
        let bit = seq & self.history_mask;
        self.history[(bit / 64) as usize] & (1 << (bit % 64)) != 0
    }

    fn set_delivered(&mut self, seq: u32, delivered: bool) {
        let bit = seq & self.history_mask;
        let word = &mut self.history[(bit / 64) as usize];
        if delivered {
            *word |= 1 << (bit % 64);
        } else {
            *word &= !(1 << (bit % 64));
        }
    }

    /// Delivers the held frame at `next` if there is one, and moves `next` on either way.
    fn step<F: FnMut(&[u8])>(&mut self, deliver: &mut F) -> bool {
        let Some(next) = self.next else {
            return false;
        };
        let slot = &mut self.slots[(next & self.mask) as usize];
        let held = slot.used && slot.seq == next;
        if held {
            slot.used = false;
            self.occupancy -= 1;
            self.counters.delivered += 1;
            deliver(&slot.buf);
        }
        self.set_delivered(next, held);
        self.next = Some(next.wrapping_add(1));
        held
    }

    /// Delivers held frames while they are next in sequence.
    fn drain<F: FnMut(&[u8])>(&mut self, deliver: &mut F) {
        while let Some(next) = self.next {
            if !self.is_held(next) {
                break;
            }
            self.step(deliver);
        }
        if self.occupancy == 0 {
            self.arrivals.clear();
        }
    }

    /// Moves the window's start to `target`, delivering held frames and skipping holes
    /// (counted as buffer-full skips).
    fn advance_to<F: FnMut(&[u8])>(&mut self, target: u32, deliver: &mut F) {
        while let Some(next) = self.next {
            let left = target.wrapping_sub(next);
            if left == 0 || left > RESYNC_JUMP {
                break;
            }
            if self.occupancy == 0 && left > self.history_mask {
                // A long run of holes: the whole history becomes "skipped".
                self.history.fill(0);
                self.counters.skipped_full += u64::from(left);
                self.next = Some(target);
                break;
            }
            if !self.step(deliver) {
                self.counters.skipped_full += 1;
            }
        }
        self.drain(deliver);
    }

    /// Skips due gaps: while the oldest held frame has waited the timeout, the holes before it
    /// are given up on.
    fn expire<F: FnMut(&[u8])>(&mut self, now: Instant, deliver: &mut F) {
        loop {
            self.drain(deliver);
            if self.occupancy == 0 {
                return;
            }
            while let Some(&(_, seq)) = self.arrivals.front() {
                if self.is_held(seq) {
                    break;
                }
                self.arrivals.pop_front();
            }
            let Some(&(arrived, _)) = self.arrivals.front() else {
                return;
            };
            if now < arrived + self.timeout {
                return;
            }
            // Skip up to the next held frame; the loop's drain delivers it.
            while let Some(next) = self.next {
                if self.is_held(next) {
                    break;
                }
                self.step(deliver);
                self.counters.skipped_timeout += 1;
            }
        }
    }

    /// Delivers every held frame in sequence order (holes are not counted: the sequence is
    /// about to start afresh).
    fn flush<F: FnMut(&[u8])>(&mut self, deliver: &mut F) {
        if let Some(next) = self.next {
            for i in 0..=self.mask {
                if self.occupancy == 0 {
                    break;
                }
                let seq = next.wrapping_add(i);
                let slot = &mut self.slots[(seq & self.mask) as usize];
                if slot.used && slot.seq == seq {
                    slot.used = false;
                    self.occupancy -= 1;
                    self.counters.delivered += 1;
                    deliver(&slot.buf);
                }
            }
        }
        for s in &mut self.slots {
            s.used = false;
        }
        self.occupancy = 0;
        self.arrivals.clear();
    }

    fn trim_arrivals_all(&mut self) {
        let (slots, mask) = (&self.slots, self.mask);
        self.arrivals.retain(|&(_, seq)| {
            let s = &slots[(seq & mask) as usize];
            s.used && s.seq == seq
        });
    }
}

#[cfg(test)]
mod test;
