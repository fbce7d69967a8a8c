//! Stripe's receive table, shared with the members' program, and the protocol lagd follows
//! on it: per TCP flow slot, whether the program delivers the flow (segments in sequence go
//! straight to the host) or lagd does (the program passes everything of it on, since lagd
//! holds segments behind a hole), and the next sequence number the host expects. The program
//! only ever advances `next` of a flow it delivers, or hands the flow to lagd; lagd takes a
//! flow over ([`StripeRxTable::take_over`]) when it must order it, hands it back
//! ([`StripeRxTable::hand_back`]) when it holds nothing of it, and claims free or idle slots
//! for the flows it sees. Every change is a compare-and-swap of the slot's word with a new
//! generation (`enum stripe_rx_word` in bpf/lagd_shared.h), so neither side acts on a word
//! the other changed. The daemon names flows and slots; the words and their states live here.

use std::io;
use std::mem::offset_of;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

use super::clock::monotonic_ns;
use super::{abi, programs};

/// A slot whose flow nobody delivered or handed over for this long may take another flow.
pub const RX_IDLE_NS: u64 = 1_000_000_000;

/// Who owns a slot (`enum stripe_rx_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxState {
    /// No flow.
    Free,
    /// The program delivers the flow.
    Kernel,
    /// lagd orders the flow; the program passes it all on.
    Lagd,
    /// lagd is writing the slot's key; the program leaves it alone.
    Claim,
    /// A value no side writes (a corrupt word); treated as taken.
    Other(u8),
}

impl RxState {
    fn bits(self) -> u64 {
        u64::from(match self {
            Self::Free => abi::STRIPE_RX_FREE,
            Self::Kernel => abi::STRIPE_RX_KERNEL,
            Self::Lagd => abi::STRIPE_RX_LAGD,
            Self::Claim => abi::STRIPE_RX_CLAIM,
            Self::Other(b) => u32::from(b),
        })
    }

    fn of_bits(b: u64) -> Self {
        match u32::try_from(b).unwrap_or(u32::MAX) {
            abi::STRIPE_RX_FREE => Self::Free,
            abi::STRIPE_RX_KERNEL => Self::Kernel,
            abi::STRIPE_RX_LAGD => Self::Lagd,
            abi::STRIPE_RX_CLAIM => Self::Claim,
            other => Self::Other(other as u8),
        }
    }
}

/// A slot's word, decoded: state, generation and the next sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxWord {
    /// Who owns the slot.
    pub state: RxState,
    /// Bumped by every change (16 bits, wrapping).
    pub generation: u16,
    /// The next sequence number the host expects of the slot's flow.
    pub next: u32,
}

impl RxWord {
    /// The word as stored.
    pub fn encode(self) -> u64 {
        self.state.bits() << abi::STRIPE_RX_STATE_SHIFT
            | u64::from(self.generation) << abi::STRIPE_RX_GEN_SHIFT
            | u64::from(self.next)
    }

    /// A stored word, decoded.
    pub fn decode(w: u64) -> Self {
        Self {
            state: RxState::of_bits(
                (w >> abi::STRIPE_RX_STATE_SHIFT) & u64::from(abi::STRIPE_RX_STATE_MASK),
            ),
            generation: ((w >> abi::STRIPE_RX_GEN_SHIFT) & u64::from(abi::STRIPE_RX_GEN_MASK))
                as u16,
            next: w as u32,
        }
    }

    /// This word's successor: `state`, the next generation, expecting `next`.
    fn then(self, state: RxState, next: u32) -> Self {
        Self {
            state,
            generation: self.generation.wrapping_add(1),
            next,
        }
    }
}

/// Flow slots in stripe's receive table ([`abi::STRIPE_RX_SLOTS`]).
pub const STRIPE_RX_SLOTS: usize = abi::STRIPE_RX_SLOTS as usize;
/// Bytes per entry of stripe's receive table (`struct stripe_rx`).
const STRIPE_RX_ENTRY: usize = abi::StripeRx::SIZE;
const _: () = assert!(programs::STRIPE_RX_DEF.value_size as usize == STRIPE_RX_ENTRY);
// The key words [`StripeRxTable::key`] reads and writes are `struct stripe_rx`'s.
const _: fn(abi::StripeRx) -> [u32; 10] = |e| e.key;
const _: () = assert!(programs::STRIPE_RX_DEF.max_entries as usize == STRIPE_RX_SLOTS);

/// Stripe's receive table as lagd sees it: the array map `lagd_stripe_rx` mapped into memory,
/// shared with the members' program (which changes an entry's word only by compare-and-swap,
/// so lagd does the same). Every access goes through atomics: the program may write any entry
/// at any time.
pub struct StripeRxTable {
    base: std::ptr::NonNull<u8>,
    len: usize,
}

impl std::fmt::Debug for StripeRxTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StripeRxTable")
            .field("len", &self.len)
            .finish()
    }
}

impl StripeRxTable {
    pub(super) fn map(fd: &OwnedFd) -> io::Result<Self> {
        // SAFETY: sysconf has no memory effects.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        let page = usize::try_from(page).unwrap_or(4096).max(1);
        let len = (STRIPE_RX_SLOTS * STRIPE_RX_ENTRY).div_ceil(page) * page;
        // SAFETY: a new shared mapping of `len` bytes of the map's values (the kernel checks
        // that the map is mmapable and that `len` fits); no existing memory is touched.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(crate::error::annotate(
                io::Error::last_os_error(),
                "mmap",
                Some("lagd_stripe_rx"),
            ));
        }
        let base =
            std::ptr::NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap"))?;
        Ok(Self { base, len })
    }

    fn u64_at(&self, slot: usize, off: usize) -> &std::sync::atomic::AtomicU64 {
        let at = (slot % STRIPE_RX_SLOTS) * STRIPE_RX_ENTRY + off;
        assert!(at + 8 <= self.len && at % 8 == 0);
        // SAFETY: `at` is inside the mapping and 8-aligned (both asserted), and the mapping
        // lives as long as `self`; the memory is shared with the kernel program, which is why
        // it is only ever accessed atomically.
        unsafe {
            &*self
                .base
                .as_ptr()
                .add(at)
                .cast::<std::sync::atomic::AtomicU64>()
        }
    }

    fn u32_at(&self, slot: usize, off: usize) -> &std::sync::atomic::AtomicU32 {
        let at = (slot % STRIPE_RX_SLOTS) * STRIPE_RX_ENTRY + off;
        assert!(at + 4 <= self.len && at % 4 == 0);
        // SAFETY: as in `u64_at`, for 4 aligned bytes.
        unsafe {
            &*self
                .base
                .as_ptr()
                .add(at)
                .cast::<std::sync::atomic::AtomicU32>()
        }
    }

    /// Slot `slot`'s word: next sequence number (bits 0-31), generation (32-47), state (48-55).
    pub fn word(&self, slot: usize) -> &std::sync::atomic::AtomicU64 {
        self.u64_at(slot, offset_of!(abi::StripeRx, word))
    }

    /// When the slot's flow was last delivered or handed over (`CLOCK_MONOTONIC` ns).
    pub fn last_ns(&self, slot: usize) -> &std::sync::atomic::AtomicU64 {
        self.u64_at(slot, offset_of!(abi::StripeRx, last_ns))
    }

    /// The slot's flow key words.
    pub fn key(&self, slot: usize) -> [u32; 10] {
        std::array::from_fn(|i| {
            self.u32_at(slot, offset_of!(abi::StripeRx, key) + 4 * i)
                .load(Acquire)
        })
    }

    /// Writes the slot's flow key words (only while the slot's state keeps the program off it).
    pub fn set_key(&self, slot: usize, key: &[u32; 10]) {
        for (i, k) in key.iter().enumerate() {
            self.u32_at(slot, offset_of!(abi::StripeRx, key) + 4 * i)
                .store(*k, Release);
        }
    }

    /// Segments and payload bytes the program delivered through the slot.
    pub fn delivered(&self, slot: usize) -> (u64, u64) {
        (
            self.u64_at(slot, offset_of!(abi::StripeRx, delivered))
                .load(Relaxed),
            self.u64_at(slot, offset_of!(abi::StripeRx, bytes))
                .load(Relaxed),
        )
    }

    /// Rounds the program sent segments of the slot's flow that were ahead of the next in
    /// sequence, while the flow was moving, back through their member's queue (each time it
    /// saw one again counts).
    pub fn held(&self, slot: usize) -> u64 {
        self.u64_at(slot, offset_of!(abi::StripeRx, held))
            .load(Relaxed)
    }
}

impl Drop for StripeRxTable {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, of `len` bytes, unmapped once; no reference into
        // it outlives `self` (they borrow it).
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

impl StripeRxTable {
    /// The program stops delivering the flow whose key words are `key` (in `slot`); returns
    /// the next sequence number if the program or lagd was delivering it (`None`: the slot
    /// holds another flow, or none).
    pub fn take_over(&self, slot: usize, key: &[u32; 10]) -> Option<u32> {
        let word = self.word(slot);
        loop {
            let w = word.load(Acquire);
            let d = RxWord::decode(w);
            if !matches!(d.state, RxState::Kernel | RxState::Lagd) || self.key(slot) != *key {
                return None;
            }
            if d.state == RxState::Lagd {
                return Some(d.next);
            }
            let taken = d.then(RxState::Lagd, d.next).encode();
            if word.compare_exchange(w, taken, AcqRel, Acquire).is_ok() {
                self.last_ns(slot).store(monotonic_ns(), Relaxed);
                return Some(d.next);
            }
        }
    }

    /// The program delivers the flow `key` from `next` on, if `slot` is the flow's (and lagd
    /// holds it), free, or idle for [`RX_IDLE_NS`]; returns whether it now does.
    pub fn hand_back(&self, slot: usize, key: &[u32; 10], next: u32) -> bool {
        let word = self.word(slot);
        loop {
            let w = word.load(Acquire);
            let d = RxWord::decode(w);
            let now = monotonic_ns();
            if d.state != RxState::Free && self.key(slot) == *key {
                if d.state != RxState::Lagd {
                    return false;
                }
                let given = d.then(RxState::Kernel, next).encode();
                if word.compare_exchange(w, given, AcqRel, Acquire).is_ok() {
                    self.last_ns(slot).store(now, Relaxed);
                    return true;
                }
                continue;
            }
            let last = self.last_ns(slot).load(Relaxed);
            if d.state != RxState::Free && now.saturating_sub(last) < RX_IDLE_NS {
                return false;
            }
            // Claim the slot: the program leaves a slot alone unless it is KERNEL, so the key
            // can be written before the flow is handed over.
            let claim = d.then(RxState::Claim, 0);
            if word
                .compare_exchange(w, claim.encode(), AcqRel, Acquire)
                .is_err()
            {
                continue;
            }
            self.set_key(slot, key);
            self.last_ns(slot).store(now, Relaxed);
            word.store(claim.then(RxState::Kernel, next).encode(), Release);
            return true;
        }
    }

    /// Segments the program delivered, and rounds it sent segments ahead of a hole back
    /// through their member's queue, through every slot.
    pub fn totals(&self) -> (u64, u64) {
        (0..STRIPE_RX_SLOTS).fold((0, 0), |(delivered, held), s| {
            (delivered + self.delivered(s).0, held + self.held(s))
        })
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn words_encode_and_decode_as_the_header_lays_them_out() {
        let w = RxWord {
            state: RxState::Lagd,
            generation: 0xbeef,
            next: 0x1234_5678,
        };
        let raw = w.encode();
        assert_eq!(
            raw >> abi::STRIPE_RX_STATE_SHIFT,
            u64::from(abi::STRIPE_RX_LAGD)
        );
        assert_eq!((raw >> abi::STRIPE_RX_GEN_SHIFT) & 0xffff, 0xbeef);
        assert_eq!(raw as u32, 0x1234_5678);
        assert_eq!(RxWord::decode(raw), w);
        for state in [
            RxState::Free,
            RxState::Kernel,
            RxState::Claim,
            RxState::Other(9),
        ] {
            let w = RxWord { state, ..w };
            assert_eq!(RxWord::decode(w.encode()), w);
        }
        // The generation wraps.
        let next = RxWord {
            generation: u16::MAX,
            ..w
        }
        .then(RxState::Kernel, 7);
        assert_eq!(
            (next.generation, next.next, next.state),
            (0, 7, RxState::Kernel)
        );
    }
}
