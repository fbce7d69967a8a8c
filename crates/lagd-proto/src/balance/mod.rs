//! OVS-style 256-bucket distribution with load-based rebalancing, capacity weighting and
//! flowlet-safe moves.
//!
//! [`Buckets`] maps a frame's transmit hash to a member through a table of 256 buckets, as Open
//! vSwitch does for `balance-tcp`/`balance-slb` (and the kernel for `balance-tlb`): the hash
//! picks a bucket, the bucket names a member. Moving a bucket moves every flow in it, so the
//! table can be rebalanced by load without touching the hash. Like the rest of this crate it is
//! sans-IO: time is passed in, [`Buckets::poll_timeout`] says when the rebalancer wants to run,
//! [`Buckets::handle_timeout`] runs it.
//!
//! # The bucket of a hash
//! With [`BalanceConfig::seed`] 0 the bucket is the low 8 bits of the hash, as OVS's
//! `lb-output-action` and the kernel's TLB table do, so a bucket can be predicted from a hash
//! users compute elsewhere. Any other seed gives `((hash ^ seed) * 0x9e3779b1) >> 24` (a
//! multiplicative mix, so all 32 bits of the hash matter): two flows that share a low byte, and
//! hence a bucket, are separated by changing the seed. See [`bucket`].
//!
//! # Members and their weights
//! [`Buckets::set_members`] gives the usable members with their capacity in Mb/s (their link
//! speed, or any weight the user chooses). A weight of 0 means "unknown": if any member's weight
//! is unknown, every member is weighted equally, since a guess at the missing speed could be off
//! by a factor of 100. Every load comparison below is made **per unit of capacity**: a 10 Gb/s
//! member at 5 Gb/s and a 1 Gb/s member at 500 Mb/s are equally loaded.
//!
//! - **Initial assignment** (a bond with no member gets some): every bucket at once, member `i`
//!   gets its weighted share of the 256 buckets rounded by largest remainder, so every member is
//!   within one bucket of `256 * weight / total weight`. The buckets are interleaved: with equal
//!   weights and a power-of-two member count, bucket `b` goes to member `b % n`, which is the
//!   kernel's `hash % n` for seed 0.
//! - **A member leaves**: only its buckets move, at once (its frames have nowhere else to go),
//!   spread over the others: loaded buckets largest first, each to the member that ends least
//!   loaded per capacity; idle buckets to the member with the fewest buckets per capacity.
//!   Nothing else moves.
//! - **A member joins or returns**: it takes buckets from the members that hold more than their
//!   weighted share (the fullest first), until it has its own share, taking idle buckets first
//!   and the least loaded next. A bucket that has been idle for [`BalanceConfig::idle_gap`]
//!   moves at once; a busy one moves when its flows next pause for the idle gap, so no flow is
//!   reordered. Only buckets of other members move, and only to the newcomer (or to a member
//!   still filling from an earlier join or speed change). Filling stops when
//!   the share is reached, or when a whole rebalance interval passed without progress (buckets
//!   that never pause then stay where they are; the load rebalancer takes over).
//! - **A member's speed changes**: every member below its new share fills up the same way.
//!
//! # Load
//! Each bucket counts the bytes of its frames. At every rebalance the bucket's load, in bytes
//! per second, becomes the mean of its previous load and the rate of the interval just ended:
//! an exponentially decayed average that halves the weight of the past every interval (OVS
//! halves its bucket byte counters at every rebalance: the same decay). A member's load is the
//! sum of its buckets'. With rebalancing off, loads are not computed; the bytes counted since the
//! last membership change stand in for them when a leaving member's buckets are spread.
//!
//! # Rebalancing
//! Every [`BalanceConfig::rebalance_interval`] (0 = never), the rebalancer drops the moves it
//! planned at the last interval that have not happened yet and plans afresh:
//!
//! 1. **Filling**: members still filling (see above) plan their next buckets.
//! 2. **Load**, within a budget of [`BalanceConfig::max_moves`] moves per interval: while some
//!    member is overloaded (see the hysteresis below), the busiest one per capacity gives one
//!    bucket away, the acceptable move (bucket and receiver) that leaves the busier of the two
//!    least loaded per capacity, ties to the receiver that ends least loaded.
//!
//! The fair level a member is compared with is the mean load per capacity, water-filled: a
//! member whose elephant (below) alone is at least the fair share of the members left is set
//! aside with its load, and compared with the bond's plain mean, so that the members carrying
//! mice are balanced among themselves.
//!
//! **Elephants.** A bucket whose load alone is at least its member's fair share (the member's
//! capacity share of the bond's total load) is an elephant. While some member carries none, no
//! bucket moves to a member that carries one. Together with the choice of the best move this
//! gives:
//! - *isolation*: an overloaded member carrying an elephant gives its other loaded buckets,
//!   largest first, to members without elephants, until it carries the elephant alone or is no
//!   longer overloaded (an elephant at 1.05 times its fair share keeps mice worth up to 5 %
//!   beside it);
//! - *separation*: a member carrying two elephants while another carries none is overloaded by
//!   at least twice its fair share, and moving one elephant to the member without is its best
//!   move;
//! - an elephant itself moves only away from another elephant, or to a (faster) member where
//!   it is no elephant; otherwise moving it would only carry its problem elsewhere;
//! - *making room*: when no single move relieves a member carrying an elephant (typically an
//!   elephant alone on a slow member, while the fast members are full of mice), the elephant
//!   moves to the largest member where it is no elephant, after enough of that member's other
//!   loaded buckets have been sent elsewhere (the relieved member included). These moves are
//!   planned together, within the budget, and obey the rules below as one move: every member
//!   involved ends below the relieved member's load now. They may happen in any order, as each
//!   bucket reaches its idle gap, so the receiving member can be briefly busier.
//!
//! Idle buckets never move for load: they carry nothing and keep the weighted shares of buckets
//! intact for when they wake up. Moves off an elephant's member are logged as
//! [`MoveReason::Elephant`], the others as [`MoveReason::Rebalance`].
//!
//! Hysteresis, so that measurement noise moves nothing and no bucket ping-pongs:
//!
//! - A member is relieved only if it is more than [`BalanceConfig::min_overload_pct`] percent
//!   over the fair level **and** at least [`BalanceConfig::min_overload_rate`] bytes per second
//!   over its fair share. The absolute floor is why an idle bond (ARP, LLDP, keep-alives) never
//!   moves anything, and why an elephant hovering around its fair share does not send mice back
//!   and forth as it crosses the line.
//! - A bucket moves only if the move strictly lowers the busier of the two members' load per
//!   capacity. A move that leaves the receiver busier than the sender (an overshoot) must also
//!   close at least [`BalanceConfig::min_gain_pct`] percent of the gap between them: moving a
//!   bucket that just swaps the two members' roles is refused. Of the acceptable moves, the one
//!   that leaves the pair's busier member least loaded is made. Each move lowers the sorted
//!   vector of member loads lexicographically, so with steady traffic no sequence of moves can
//!   return to an earlier table: nothing moves back and forth.
//! - Traffic is not steady (and the decayed loads lag it), so as a safety net a bucket moved for
//!   load is not moved back to the member it left for [`RETURN_HOLD_INTERVALS`] intervals.
//!
//! Planned moves are **flowlet-safe**: a bucket moves when it has been idle for
//! [`BalanceConfig::idle_gap`], either at once when planned or on its first frame after such a
//! pause ([`Buckets::member_for`] applies it). A plan that has not happened by the next interval
//! is dropped and re-planned with fresh loads. Each bucket counts its pauses; load moves only
//! pick buckets that are idle now or paused at least once in the last interval, since a bucket
//! that never pauses cannot move without reordering and planning it would waste the budget
//! (joining members still plan busy buckets: they take them at their first pause).
//!
//! Some flows never pause (bulk TCP streams on a saturated link): when a member has stayed
//! overloaded for [`BalanceConfig::force_after`] rebalancing passes in a row and no flowlet-safe
//! move could relieve it, the next pass also moves busy buckets, at once. A moved stream may
//! then see one brief reordering, which TCP absorbs; a link that stays hot is worse. Zero turns
//! this off (strictly flowlet-safe).
//!
//! # Visibility
//! [`Buckets::snapshot`] gives the table, per-member loads and shares, counters and a bounded
//! log of recent moves with their reasons ([`MoveRecord`]) for `lagctl show`.
//!
//! # Defaults
//! See [`BalanceConfig::default`] for the values and why.
//!
//! # Cost
//! [`Buckets::member_for`] is a bucket lookup, one comparison with the bucket's idle time (past
//! it, the pause is counted and a pending move applies), and two stores (bytes and idle time):
//! no division, no allocation, no search. Rebalancing runs once per interval and costs
//! `O(max_moves * members^2 * 256)` at most.

use core::fmt;
use core::time::Duration;
use std::collections::VecDeque;

use crate::port::PortId;
use crate::time::Instant;

#[cfg(test)]
mod tests;

/// The number of buckets.
pub const BUCKETS: usize = 256;

/// The most members the table serves; members beyond it in [`Buckets::set_members`] are
/// ignored (with more members than buckets, some would get none anyway).
pub const MAX_MEMBERS: usize = BUCKETS;

/// How many [`MoveRecord`]s the snapshot keeps.
pub const MOVE_LOG_LEN: usize = 64;

/// No planned move.
const NO_PLAN: u16 = u16::MAX;

/// A bucket moved for load is not moved back to the member it left for this many rebalance
/// intervals.
pub const RETURN_HOLD_INTERVALS: u32 = 6;

/// Effective weights are capped here (16 Tb/s in Mb/s) so products stay far inside `u128`.
const MAX_WEIGHT: u64 = 1 << 24;

/// Bucket loads are capped here (about 280 TB/s) for the same reason.
const MAX_RATE: u64 = 1 << 48;

/// The bucket of `hash` under `seed`: the low 8 bits of the hash for seed 0, otherwise the top
/// 8 bits of `(hash ^ seed) * 0x9e3779b1` (Knuth's multiplicative hashing constant).
#[inline(always)]
pub const fn bucket(seed: u32, hash: u32) -> u8 {
    if seed == 0 {
        hash as u8
    } else {
        ((hash ^ seed).wrapping_mul(0x9e37_79b1) >> 24) as u8
    }
}

/// How the bucket table is balanced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BalanceConfig {
    /// How often the rebalancer runs; zero never rebalances by load (members leaving and
    /// joining still move buckets).
    pub rebalance_interval: Duration,
    /// Mixed into the bucket choice (see [`bucket`]); 0 uses the low 8 bits of the hash.
    pub seed: u32,
    /// A planned move happens only once the bucket has been idle this long, so the flows in it
    /// cannot be reordered. Zero moves at once.
    pub idle_gap: Duration,
    /// The most buckets the rebalancer moves per interval for load (elephants included).
    pub max_moves: u16,
    /// A member is relieved only when its load per capacity is more than this many percent over
    /// the fair level.
    pub min_overload_pct: u16,
    /// ... and at least this many bytes per second over its fair share.
    pub min_overload_rate: u64,
    /// Rebalancing passes in a row that found a member overloaded and could not relieve it with
    /// flowlet-safe moves, after which busy buckets move too (at once). 0: never.
    pub force_after: u32,
    /// A move that leaves the receiver busier than the sender must close at least this many
    /// percent of the gap between the two (loads per capacity).
    pub min_gain_pct: u16,
}

impl Default for BalanceConfig {
    /// - `rebalance_interval` 10 s: OVS's `bond-rebalance-interval` default and the kernel's
    ///   fixed TLB interval; long enough for the decayed loads to mean something.
    /// - `seed` 0: buckets are the low byte of the hash, as in OVS and the kernel.
    /// - `idle_gap` 50 ms: a move is safe once the older frames of the bucket have left the old
    ///   member, i.e. once the pause exceeds the difference of the two members' queueing delays.
    ///   A full 1000-frame transmit queue of 1514-byte frames drains in 12 ms at 1 Gb/s (1.2 ms
    ///   at 10 Gb/s), so 50 ms leaves a margin of four for gigabit members. It is short enough
    ///   that interactive and request/response flows pause that long all the time, and TCP bulk
    ///   flows do whenever they wait on the application or recover from loss. On 100 Mb/s
    ///   members with deep queues, raise it (a full queue takes 120 ms there).
    /// - `max_moves` 16: at most 1/16 of the table changes per interval, so a wrong decision
    ///   costs little and users see a calm table; 16 moves still fix a 2-member bond with two
    ///   misplaced elephants and a dozen mice in one interval.
    /// - `min_overload_pct` 10: a 10 s decayed average of bursty traffic wobbles by several
    ///   percent; moving buckets for less than 10 % is chasing noise.
    /// - `min_overload_rate` 125 000 B/s (1 Mb/s): an excess below 1 Mb/s matters on no link
    ///   lagd drives and is what an idle bond's background traffic looks like.
    /// - `force_after` 3: three passes (30 s by default) of an overload that only busy buckets
    ///   could relieve; long enough not to react to a burst, short enough that a hot link does
    ///   not stay hot for minutes.
    /// - `min_gain_pct` 20: an overshooting move must leave the receiver at least a fifth of the
    ///   gap below the sender's old load; anything closer is a role swap waiting to be undone
    ///   by the next wobble.
    fn default() -> Self {
        Self {
            rebalance_interval: Duration::from_secs(10),
            seed: 0,
            idle_gap: Duration::from_millis(50),
            max_moves: 16,
            min_overload_pct: 10,
            min_overload_rate: 125_000,
            force_after: 3,
            min_gain_pct: 20,
        }
    }
}

/// Why a bucket moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MoveReason {
    /// The first assignment of the table (the bond had no member).
    Initial,
    /// The bucket's member left.
    Left,
    /// A member joined for the first time and took its share.
    Joined,
    /// A member that had been a member before returned and took its share.
    Returned,
    /// Member speeds changed and a member below its new share took buckets.
    Reweighted,
    /// Load rebalancing: the sender was this many per mille over the fair level.
    Rebalance {
        /// The sender's overload, per mille over the fair level per unit of capacity.
        over_permille: u32,
    },
    /// Elephant handling: another bucket moved off a member carrying an elephant, or an
    /// elephant moved away from another elephant.
    Elephant,
}

/// A record of bucket moves in [`BucketsSnapshot::recent_moves`]. Consecutive moves with the
/// same time, reason and members are kept as one record (for a member filling up, whatever
/// members the buckets came from).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MoveRecord {
    /// When the move happened.
    pub at: Instant,
    /// Why.
    pub reason: MoveReason,
    /// The member the buckets left; `None` for the initial assignment, or when a member filling
    /// up took buckets from several members at once.
    pub from: Option<PortId>,
    /// The member the buckets went to; `None` when spread over several (a member leaving, the
    /// initial assignment).
    pub to: Option<PortId>,
    /// The (first) bucket moved.
    pub bucket: u8,
    /// How many buckets moved.
    pub buckets: u16,
}

impl MoveRecord {
    /// The record in words, with members named by `name` (e.g. their interface names).
    pub fn describe(&self, name: impl Fn(PortId) -> String) -> String {
        let opt = |p: Option<PortId>| p.map_or_else(|| "several members".to_owned(), &name);
        let what = if self.buckets == 1 {
            format!("bucket {}", self.bucket)
        } else {
            format!("{} buckets (first {})", self.buckets, self.bucket)
        };
        match self.reason {
            MoveReason::Initial => format!("initial assignment: {what}"),
            MoveReason::Left => {
                format!(
                    "member {} left: {what} spread over the others",
                    opt(self.from)
                )
            }
            MoveReason::Joined | MoveReason::Returned | MoveReason::Reweighted => {
                let verb = match self.reason {
                    MoveReason::Joined => "joined",
                    MoveReason::Returned => "returned",
                    _ => "reweighted",
                };
                format!(
                    "member {} {verb}: {what} from {}",
                    opt(self.to),
                    opt(self.from)
                )
            }
            MoveReason::Rebalance { over_permille } => format!(
                "rebalance: {} {}.{}% over mean: {what} to {}",
                opt(self.from),
                over_permille / 10,
                over_permille % 10,
                opt(self.to)
            ),
            MoveReason::Elephant => format!(
                "elephant isolated: {what} {} -> {}",
                opt(self.from),
                opt(self.to)
            ),
        }
    }
}

impl fmt::Display for MoveRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.at, self.describe(|p| format!("#{}", p.0)))
    }
}

/// Counters of the table's activity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BalanceCounters {
    /// Rebalance passes run.
    pub rebalances: u64,
    /// Moves planned (filling, elephants, load), whether they happened at once or waited.
    pub planned: u64,
    /// Planned moves that waited for their bucket's idle gap and then happened.
    pub deferred: u64,
    /// Moves of busy buckets made at once after a persistent overload (see
    /// [`BalanceConfig::force_after`]).
    pub forced: u64,
    /// Planned moves dropped before they happened (re-planned at the next interval, or made
    /// moot by a membership change).
    pub expired: u64,
    /// Buckets moved because their member left.
    pub moved_left: u64,
    /// Buckets moved to a member that joined, returned or got a larger share.
    pub moved_joined: u64,
    /// Buckets moved by load rebalancing.
    pub moved_rebalance: u64,
    /// Buckets moved by elephant handling.
    pub moved_elephant: u64,
}

impl BalanceCounters {
    /// Every bucket move made (the initial assignment is not a move).
    pub const fn moves(&self) -> u64 {
        self.moved_left + self.moved_joined + self.moved_rebalance + self.moved_elephant
    }
}

/// One member in [`BucketsSnapshot`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemberSnapshot {
    /// The member.
    pub port: PortId,
    /// Its weight as given (Mb/s, 0 = unknown).
    pub weight: u32,
    /// The weight used (all 1 when some weight is unknown).
    pub effective_weight: u32,
    /// Buckets it holds now.
    pub buckets: u16,
    /// Its weighted share of the 256 buckets.
    pub target_buckets: u16,
    /// Its load: the sum of its buckets' loads, bytes per second.
    pub load: u64,
    /// Its buckets' bytes in the last complete interval.
    pub last_interval_bytes: u64,
    /// Its load as a share of the bond's, per mille.
    pub load_permille: u32,
    /// Whether it is still taking buckets after joining or a speed change.
    pub filling: bool,
}

/// One bucket in [`BucketsSnapshot`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BucketSnapshot {
    /// The bucket.
    pub bucket: u8,
    /// Its member; `None` when the bond has no member.
    pub member: Option<PortId>,
    /// Its decayed load, bytes per second.
    pub load: u64,
    /// Its bytes in the last complete interval.
    pub last_interval_bytes: u64,
    /// Its bytes since the last rebalance (with rebalancing off: since the last membership
    /// change).
    pub bytes: u64,
    /// How often it paused for the idle gap in the last complete interval (each pause is a
    /// chance to move it without reordering).
    pub idle_gaps: u16,
    /// Where a planned move will take it at its next idle gap.
    pub pending: Option<PortId>,
    /// Why that move was planned.
    pub pending_reason: Option<MoveReason>,
    /// When its last frame was seen.
    pub last_seen: Option<Instant>,
}

/// Plain data for `lagctl show`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketsSnapshot {
    /// The configuration.
    pub config: BalanceConfig,
    /// When the rebalancer runs next; `None` if never.
    pub next_rebalance: Option<Instant>,
    /// Members, in the order given to [`Buckets::set_members`].
    pub members: Vec<MemberSnapshot>,
    /// All 256 buckets, in bucket order.
    pub buckets: Vec<BucketSnapshot>,
    /// Counters.
    pub counters: BalanceCounters,
    /// The most recent moves, oldest first (at most [`MOVE_LOG_LEN`]).
    pub recent_moves: Vec<MoveRecord>,
}

impl BucketsSnapshot {
    /// The busiest member's load per capacity over the mean, per mille (1000 = perfectly even);
    /// `None` without members or load.
    pub fn busiest_over_mean_permille(&self) -> Option<u32> {
        let total: u128 = self.members.iter().map(|m| u128::from(m.load)).sum();
        let wsum: u128 = self
            .members
            .iter()
            .map(|m| u128::from(m.effective_weight))
            .sum();
        if total == 0 || wsum == 0 {
            return None;
        }
        // max(load / w) / (total / wsum) = max(load * wsum / w) / total.
        let worst = self
            .members
            .iter()
            .map(|m| u128::from(m.load) * wsum * 1000 / u128::from(m.effective_weight.max(1)))
            .max()?;
        u32::try_from(worst / total).ok()
    }
}

/// What a forwarder outside the table (the kernel fast path) saw of one bucket since its
/// previous sample, for [`Buckets::absorb`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BucketSample {
    /// Bytes the bucket sent since the previous sample.
    pub bytes: u64,
    /// When it last sent; `None` if never.
    pub last: Option<Instant>,
}

/// One bucket as the hot path sees it.
#[derive(Debug, Clone, Copy)]
struct Hot {
    /// The member the bucket's frames go to.
    port: PortId,
    /// That member's index in `members`.
    member: u16,
    /// The index of the member a planned move goes to; `NO_PLAN` if none.
    pending: u16,
    /// Frames since the last rebalance that came after a pause of the idle gap.
    gaps: u16,
    /// Bytes since the last rebalance (since the last membership change with rebalancing off).
    bytes: u64,
    /// From when (microseconds) the bucket counts as idle: its last frame plus the idle gap;
    /// 0 when it has never seen a frame.
    idle_at: u64,
}

const HOT_INIT: Hot = Hot {
    port: PortId(0),
    member: 0,
    pending: NO_PLAN,
    gaps: 0,
    bytes: 0,
    idle_at: 0,
};

#[derive(Debug, Clone, Copy)]
struct Member {
    port: PortId,
    /// As given.
    weight: u32,
    /// As used.
    eff: u64,
    /// Weighted share of the buckets.
    target: u16,
    /// Taking buckets after joining, and why.
    filling: Option<MoveReason>,
    /// Its bucket count at the last rebalance while filling (`u16::MAX` before the first).
    fill_mark: u16,
}

/// A planning view: where each bucket will be once the planned moves happen.
struct Proj {
    /// The projected member of each bucket (`NO_PLAN` for a bucket with no member yet).
    member: [u16; BUCKETS],
    /// Buckets already planned in this pass.
    planned: [bool; BUCKETS],
    /// Projected load per member.
    load: Vec<u64>,
    /// Projected bucket count per member.
    count: Vec<u16>,
}

/// `a / wa < b / wb` for non-negative loads and positive weights.
#[inline]
fn less(a: u64, wa: u64, b: u64, wb: u64) -> bool {
    u128::from(a) * u128::from(wb) < u128::from(b) * u128::from(wa)
}

/// The 256-bucket table. See the [module documentation](self).
#[derive(Debug, Clone)]
pub struct Buckets {
    config: BalanceConfig,
    idle_gap_us: u64,
    hot: [Hot; BUCKETS],
    /// Decayed load per bucket, bytes per second.
    load: [u64; BUCKETS],
    /// Bytes per bucket in the last complete interval.
    last_bytes: [u64; BUCKETS],
    /// Pauses of the idle gap per bucket in the last complete interval.
    last_gaps: [u16; BUCKETS],
    /// Why each bucket's pending move was planned.
    reason: [MoveReason; BUCKETS],
    /// The member each bucket last left for load, and until when (microseconds) it may not
    /// return there.
    hold_from: [u16; BUCKETS],
    hold_until: [u64; BUCKETS],
    members: Vec<Member>,
    /// Every member ever seen, to tell a return from a first join.
    known: Vec<PortId>,
    next_rebalance: Option<Instant>,
    last_rebalance: Instant,
    counters: BalanceCounters,
    log: VecDeque<MoveRecord>,
    /// Rebalancing passes in a row that left an overload no flowlet-safe move relieved.
    stuck: u32,
    /// This pass moves busy buckets too.
    forcing: bool,
    /// When [`Buckets::absorb`] last ran (microseconds; 0: never).
    last_absorb: u64,
}

impl Buckets {
    /// An empty table (no member: [`Buckets::member_for`] gives `None`).
    pub fn new(config: BalanceConfig) -> Self {
        Self {
            config,
            idle_gap_us: u64::try_from(config.idle_gap.as_micros()).unwrap_or(u64::MAX),
            hot: [HOT_INIT; BUCKETS],
            load: [0; BUCKETS],
            last_bytes: [0; BUCKETS],
            last_gaps: [0; BUCKETS],
            reason: [MoveReason::Initial; BUCKETS],
            hold_from: [NO_PLAN; BUCKETS],
            hold_until: [0; BUCKETS],
            members: Vec::new(),
            known: Vec::new(),
            next_rebalance: None,
            last_rebalance: Instant::ZERO,
            counters: BalanceCounters::default(),
            log: VecDeque::with_capacity(MOVE_LOG_LEN),
            stuck: 0,
            forcing: false,
            last_absorb: 0,
        }
    }

    /// The configuration.
    pub const fn config(&self) -> &BalanceConfig {
        &self.config
    }

    /// The counters.
    pub const fn counters(&self) -> &BalanceCounters {
        &self.counters
    }

    /// The latest move recorded (see [`BucketsSnapshot::recent_moves`]), if any.
    pub fn last_move(&self) -> Option<&MoveRecord> {
        self.log.back()
    }

    /// The bucket of a frame with transmit hash `hash` (see [`bucket`]).
    #[inline(always)]
    pub const fn bucket_of(&self, hash: u32) -> u8 {
        bucket(self.config.seed, hash)
    }

    /// The member bucket `b` sends on now, without recording anything; `None` without members.
    pub fn member_of_bucket(&self, b: u8) -> Option<PortId> {
        (!self.members.is_empty()).then(|| self.hot[usize::from(b)].port)
    }

    /// The member a frame with transmit hash `hash` would go to now, without recording it (for
    /// explaining and planning; a pending move is not applied).
    pub fn member_of(&self, hash: u32) -> Option<PortId> {
        self.member_of_bucket(self.bucket_of(hash))
    }

    /// The members, in the order given.
    pub fn members(&self) -> impl Iterator<Item = PortId> + '_ {
        self.members.iter().map(|m| m.port)
    }

    /// **Hot path.** The member for a frame with transmit hash `hash` and `len` bytes: records
    /// the bytes and the time in the frame's bucket, and first applies the bucket's pending move
    /// if the bucket has been idle for the idle gap. `None` when there is no member.
    #[inline]
    pub fn member_for(&mut self, now: Instant, hash: u32, len: u32) -> Option<PortId> {
        if self.members.is_empty() {
            return None;
        }
        let i = usize::from(self.bucket_of(hash));
        let now = now.as_micros();
        if now >= self.hot[i].idle_at {
            // The bucket paused for the idle gap (or never sent): a flowlet boundary.
            self.hot[i].gaps = self.hot[i].gaps.saturating_add(1);
            if self.hot[i].pending != NO_PLAN {
                self.apply_deferred(i, now);
            }
        }
        let b = &mut self.hot[i];
        b.bytes = b.bytes.saturating_add(u64::from(len));
        b.idle_at = now.saturating_add(self.idle_gap_us);
        Some(b.port)
    }

    /// Takes in what a forwarder that reads this table but does not call
    /// [`Buckets::member_for`] (the kernel fast path) counted per bucket since its previous
    /// sample: the bytes, for the rebalancer; a bucket that sent again after being idle at the
    /// previous sample, as a pause; and a bucket idle now (its last frame older than the idle
    /// gap) takes its planned move at once, as [`Buckets::member_for`] would on its next frame.
    /// The forwarder then reads the table again ([`Buckets::member_of_bucket`]); the move
    /// counters tell it when the table changed.
    pub fn absorb(&mut self, now: Instant, samples: &[BucketSample; BUCKETS]) {
        if self.members.is_empty() {
            return;
        }
        let now = now.as_micros();
        for (i, s) in samples.iter().enumerate() {
            let h = &mut self.hot[i];
            if s.bytes > 0 {
                if h.idle_at <= self.last_absorb {
                    // Idle when last looked at (or never seen): its frames since came after a
                    // pause.
                    h.gaps = h.gaps.saturating_add(1);
                }
                h.bytes = h.bytes.saturating_add(s.bytes);
            }
            if let Some(last) = s.last {
                h.idle_at = h
                    .idle_at
                    .max(last.as_micros().saturating_add(self.idle_gap_us));
            }
            if now >= self.hot[i].idle_at && self.hot[i].pending != NO_PLAN {
                self.apply_deferred(i, now);
            }
        }
        self.last_absorb = now;
    }

    #[cold]
    #[inline(never)]
    fn apply_deferred(&mut self, i: usize, now: u64) {
        let to = self.hot[i].pending;
        self.counters.deferred += 1;
        self.apply(i, to, self.reason[i], now);
    }

    /// Moves bucket `i` to member slot `to` now and records it.
    fn apply(&mut self, i: usize, to: u16, reason: MoveReason, now: u64) {
        if matches!(reason, MoveReason::Rebalance { .. } | MoveReason::Elephant) {
            let hold = self
                .config
                .rebalance_interval
                .checked_mul(RETURN_HOLD_INTERVALS)
                .unwrap_or(Duration::MAX);
            self.hold_from[i] = self.hot[i].member;
            self.hold_until[i] = (Instant::from_micros(now) + hold).as_micros();
        }
        let from = self.members[usize::from(self.hot[i].member)].port;
        let to_port = self.members[usize::from(to)].port;
        let h = &mut self.hot[i];
        h.pending = NO_PLAN;
        h.member = to;
        h.port = to_port;
        self.count_move(reason, 1);
        self.record(MoveRecord {
            at: Instant::from_micros(now),
            reason,
            from: Some(from),
            to: Some(to_port),
            bucket: i as u8,
            buckets: 1,
        });
    }

    fn count_move(&mut self, reason: MoveReason, n: u64) {
        let c = &mut self.counters;
        match reason {
            MoveReason::Initial => {}
            MoveReason::Left => c.moved_left += n,
            MoveReason::Joined | MoveReason::Returned | MoveReason::Reweighted => {
                c.moved_joined += n;
            }
            MoveReason::Rebalance { .. } => c.moved_rebalance += n,
            MoveReason::Elephant => c.moved_elephant += n,
        }
    }

    /// Appends to the bounded log, merging with the last record when only the bucket differs
    /// (or, for a member filling up, the member the bucket came from). Never allocates once
    /// the log is full.
    fn record(&mut self, r: MoveRecord) {
        if let Some(last) = self.log.back_mut() {
            let filling = matches!(
                r.reason,
                MoveReason::Joined | MoveReason::Returned | MoveReason::Reweighted
            );
            if last.at == r.at
                && last.reason == r.reason
                && last.to == r.to
                && (last.from == r.from || filling)
                && last.buckets < u16::MAX
            {
                last.buckets += r.buckets;
                if last.from != r.from {
                    // A newcomer filling up from several members at once.
                    last.from = None;
                }
                return;
            }
        }
        if self.log.len() == MOVE_LOG_LEN {
            self.log.pop_front();
        }
        self.log.push_back(r);
    }

    /// The usable members and their weights (capacity in Mb/s; 0 = unknown, which weights all
    /// members equally). Call it when the set or a speed changes; a call that changes nothing
    /// moves nothing. Duplicates after the first occurrence of a port, and members beyond
    /// [`MAX_MEMBERS`], are ignored.
    ///
    /// A member that leaves: only its buckets move, at once, spread over the rest by load and
    /// weight. A member that joins or returns: idle buckets of others move to it at once, busy
    /// ones at their next idle gap, up to its weighted share. Initial assignment: proportional
    /// to weight, each member within 1 bucket of its ideal share.
    pub fn set_members(&mut self, now: Instant, members: &[(PortId, u32)]) {
        let now_us = now.as_micros();
        let mut list: Vec<(PortId, u32)> = Vec::with_capacity(members.len().min(MAX_MEMBERS));
        for &(p, w) in members {
            if list.len() < MAX_MEMBERS && !list.iter().any(|&(q, _)| q == p) {
                list.push((p, w));
            }
        }
        if !self.config.rebalance_interval.is_zero() && self.next_rebalance.is_none() {
            self.next_rebalance = Some(now + self.config.rebalance_interval);
            self.last_rebalance = now;
        }

        let any_unknown = list.iter().any(|&(_, w)| w == 0);
        let eff: Vec<u64> = list
            .iter()
            .map(|&(_, w)| {
                if any_unknown {
                    1
                } else {
                    u64::from(w).min(MAX_WEIGHT)
                }
            })
            .collect();
        let targets = apportion(&eff);

        let old = core::mem::take(&mut self.members);
        let map: Vec<Option<u16>> = old
            .iter()
            .map(|m| {
                list.iter()
                    .position(|&(p, _)| p == m.port)
                    .map(|i| i as u16)
            })
            .collect();
        let mut weights_changed = false;
        let mut joined = Vec::new();
        self.members = list
            .iter()
            .enumerate()
            .map(|(i, &(port, weight))| {
                let prev = old.iter().find(|m| m.port == port);
                match prev {
                    Some(m) => weights_changed |= m.eff != eff[i],
                    None => joined.push(i),
                }
                Member {
                    port,
                    weight,
                    eff: eff[i],
                    target: targets[i],
                    filling: prev.and_then(|m| m.filling),
                    fill_mark: prev.map_or(u16::MAX, |m| m.fill_mark),
                }
            })
            .collect();

        // Members that left: count their buckets for the log.
        let mut left: Vec<(PortId, u16, u8)> = Vec::new();
        for (slot, m) in old.iter().enumerate() {
            if map[slot].is_none() {
                let mut n = 0u16;
                let mut first = 0u8;
                for (b, h) in self.hot.iter().enumerate() {
                    if usize::from(h.member) == slot {
                        if n == 0 {
                            first = b as u8;
                        }
                        n += 1;
                    }
                }
                left.push((m.port, n, first));
            }
        }

        if self.members.is_empty() {
            // Nothing to move the buckets to: they wait for the next initial assignment.
            for (port, n, first) in left {
                self.record(MoveRecord {
                    at: now,
                    reason: MoveReason::Left,
                    from: Some(port),
                    to: None,
                    bucket: first,
                    buckets: n,
                });
            }
            self.drop_plans();
            return;
        }
        if old.is_empty() {
            self.initial(now_us);
            self.remember_members();
            return;
        }

        // Remap the table to the new member indices; collect orphans.
        let mut orphans = Vec::new();
        for from in &mut self.hold_from {
            if *from != NO_PLAN {
                *from = map[usize::from(*from)].unwrap_or(NO_PLAN);
            }
        }
        for (b, h) in self.hot.iter_mut().enumerate() {
            if h.pending != NO_PLAN {
                match map[usize::from(h.pending)] {
                    Some(s) => h.pending = s,
                    None => {
                        h.pending = NO_PLAN;
                        self.counters.expired += 1;
                    }
                }
            }
            match map[usize::from(h.member)] {
                Some(s) => h.member = s,
                None => {
                    if h.pending != NO_PLAN {
                        h.pending = NO_PLAN;
                        self.counters.expired += 1;
                    }
                    orphans.push(b);
                }
            }
        }
        if !orphans.is_empty() {
            self.spread(&orphans);
            for (port, n, first) in left {
                self.log_left(now_us, port, n, first);
            }
        }

        if weights_changed || !joined.is_empty() {
            self.drop_plans();
            let counts = self.counts();
            if weights_changed {
                for (m, &c) in self.members.iter_mut().zip(&counts) {
                    if c < m.target {
                        m.filling = Some(MoveReason::Reweighted);
                        m.fill_mark = u16::MAX;
                    }
                }
            }
            for &i in &joined {
                let port = self.members[i].port;
                let m = &mut self.members[i];
                m.filling = Some(if self.known.contains(&port) {
                    MoveReason::Returned
                } else {
                    MoveReason::Joined
                });
                m.fill_mark = u16::MAX;
            }
            let mut p = self.projection();
            self.plan_fill(now_us, &mut p);
        }
        let counts = self.counts();
        for (m, &c) in self.members.iter_mut().zip(&counts) {
            if c >= m.target {
                m.filling = None;
            }
        }
        if self.config.rebalance_interval.is_zero()
            && (weights_changed || !joined.is_empty() || !orphans.is_empty())
        {
            // Without rebalancing, bytes since the last membership change are the load.
            for h in &mut self.hot {
                h.bytes = 0;
            }
        }
        self.remember_members();
    }

    fn remember_members(&mut self) {
        for m in &self.members {
            if !self.known.contains(&m.port) {
                self.known.push(m.port);
            }
        }
    }

    fn log_left(&mut self, now: u64, port: PortId, n: u16, first: u8) {
        self.count_move(MoveReason::Left, u64::from(n));
        if n > 0 {
            self.record(MoveRecord {
                at: Instant::from_micros(now),
                reason: MoveReason::Left,
                from: Some(port),
                to: None,
                bucket: first,
                buckets: n,
            });
        }
    }

    /// Bucket counts per member, as the table is now.
    fn counts(&self) -> Vec<u16> {
        let mut c = vec![0u16; self.members.len()];
        for h in &self.hot {
            c[usize::from(h.member)] += 1;
        }
        c
    }

    fn drop_plans(&mut self) {
        for h in &mut self.hot {
            if h.pending != NO_PLAN {
                h.pending = NO_PLAN;
                self.counters.expired += 1;
            }
        }
    }

    /// The load used to place bucket `b`: its decayed rate, or with rebalancing off its bytes
    /// since the last membership change.
    fn load_of(&self, b: usize) -> u64 {
        if self.config.rebalance_interval.is_zero() {
            self.hot[b].bytes.min(MAX_RATE)
        } else {
            self.load[b]
        }
    }

    /// The first assignment: largest-remainder shares, interleaved.
    fn initial(&mut self, now: u64) {
        let n = self.members.len();
        let mut given = vec![0u16; n];
        for b in 0..BUCKETS {
            let k = b as i64 + 1;
            let mut best: Option<(usize, i64)> = None;
            for (i, m) in self.members.iter().enumerate() {
                if given[i] >= m.target {
                    continue;
                }
                // How far member i lags behind its share after k buckets (times 256).
                let lag = i64::from(m.target) * k - 256 * i64::from(given[i]);
                if best.is_none_or(|(_, l)| lag > l) {
                    best = Some((i, lag));
                }
            }
            // The targets sum to 256, so some member always lags.
            let i = best.map_or(0, |(i, _)| i);
            given[i] += 1;
            let h = &mut self.hot[b];
            h.member = i as u16;
            h.port = self.members[i].port;
            h.pending = NO_PLAN;
        }
        for m in &mut self.members {
            m.filling = None;
        }
        self.hold_from = [NO_PLAN; BUCKETS];
        self.record(MoveRecord {
            at: Instant::from_micros(now),
            reason: MoveReason::Initial,
            from: None,
            to: None,
            bucket: 0,
            buckets: BUCKETS as u16,
        });
    }

    /// Places the buckets of members that left, at once.
    fn spread(&mut self, orphans: &[usize]) {
        let n = self.members.len();
        let mut load = vec![0u64; n];
        let mut count = vec![0u64; n];
        for (b, h) in self.hot.iter().enumerate() {
            if !orphans.contains(&b) {
                let m = usize::from(if h.pending != NO_PLAN {
                    h.pending
                } else {
                    h.member
                });
                load[m] += self.load_of(b);
                count[m] += 1;
            }
        }
        let mut order: Vec<usize> = orphans.to_vec();
        order.sort_by_key(|&b| (core::cmp::Reverse(self.load_of(b)), b));
        for b in order {
            let x = self.load_of(b);
            let w = |i: usize| self.members[i].eff;
            let mut best = 0usize;
            for i in 1..n {
                let better = if x > 0 {
                    let (a, c) = (load[i] + x, load[best] + x);
                    less(a, w(i), c, w(best))
                        || (!less(c, w(best), a, w(i))
                            && less(count[i], w(i), count[best], w(best)))
                } else {
                    less(count[i] + 1, w(i), count[best] + 1, w(best))
                };
                if better {
                    best = i;
                }
            }
            load[best] += x;
            count[best] += 1;
            let h = &mut self.hot[b];
            h.member = best as u16;
            h.port = self.members[best].port;
            h.pending = NO_PLAN;
        }
    }

    /// The planning view of the table as it will be once the pending moves happen.
    fn projection(&self) -> Proj {
        let n = self.members.len();
        let mut p = Proj {
            member: [NO_PLAN; BUCKETS],
            planned: [false; BUCKETS],
            load: vec![0; n],
            count: vec![0; n],
        };
        for (b, h) in self.hot.iter().enumerate() {
            let m = if h.pending != NO_PLAN {
                p.planned[b] = true;
                h.pending
            } else {
                h.member
            };
            p.member[b] = m;
            p.load[usize::from(m)] += self.load_of(b);
            p.count[usize::from(m)] += 1;
        }
        p
    }

    /// Plans moving bucket `b` to member `to`; it happens at once if the bucket is idle.
    fn plan(&mut self, now: u64, p: &mut Proj, b: usize, to: u16, reason: MoveReason) {
        let x = self.load_of(b);
        let from = usize::from(p.member[b]);
        p.load[from] -= x;
        p.count[from] -= 1;
        p.load[usize::from(to)] += x;
        p.count[usize::from(to)] += 1;
        p.member[b] = to;
        p.planned[b] = true;
        if self.hot[b].member == to {
            if self.hot[b].pending != NO_PLAN {
                self.hot[b].pending = NO_PLAN;
                self.counters.expired += 1;
            }
            return;
        }
        self.counters.planned += 1;
        if self.forcing {
            self.counters.forced += 1;
        }
        if self.forcing || now >= self.hot[b].idle_at {
            self.apply(b, to, reason, now);
        } else {
            self.hot[b].pending = to;
            self.reason[b] = reason;
        }
    }

    /// Filling members take buckets from members above their share.
    fn plan_fill(&mut self, now: u64, p: &mut Proj) {
        loop {
            // The filling member furthest below its share.
            let mut gainer: Option<(usize, i32)> = None;
            for (i, m) in self.members.iter().enumerate() {
                if m.filling.is_some() {
                    let deficit = i32::from(m.target) - i32::from(p.count[i]);
                    if deficit > 0 && gainer.is_none_or(|(_, d)| deficit > d) {
                        gainer = Some((i, deficit));
                    }
                }
            }
            let Some((g, _)) = gainer else { break };
            // The member furthest above its share.
            let mut donor: Option<(usize, i32)> = None;
            for (i, m) in self.members.iter().enumerate() {
                let surplus = i32::from(p.count[i]) - i32::from(m.target);
                if i != g && surplus > 0 && donor.is_none_or(|(_, s)| surplus > s) {
                    donor = Some((i, surplus));
                }
            }
            let Some((d, _)) = donor else { break };
            // Its idle buckets first, then the least loaded; among equals, those in the
            // gainer's stripe (bucket % members == its position), so that equal members end up
            // interleaved as the initial assignment (and the kernel's hash % n) are: flows
            // whose hashes are consecutive land on different members.
            let n = self.members.len();
            let mut pick: Option<(usize, (bool, u64, bool))> = None;
            for b in 0..BUCKETS {
                if usize::from(p.member[b]) != d || p.planned[b] {
                    continue;
                }
                let key = (now < self.hot[b].idle_at, self.load_of(b), b % n != g);
                if pick.is_none_or(|(_, k)| key < k) {
                    pick = Some((b, key));
                }
            }
            let Some((b, _)) = pick else { break };
            let reason = self.members[g].filling.unwrap_or(MoveReason::Joined);
            self.plan(now, p, b, g as u16, reason);
        }
    }

    /// Whether a load move of bucket `b` can be expected to happen: it is idle now, or it
    /// paused for the idle gap at least once in the last interval. A bucket that never pauses
    /// cannot move without reordering, and planning it would waste the budget.
    fn movable(&self, now: u64, b: usize) -> bool {
        self.forcing || now >= self.hot[b].idle_at || self.last_gaps[b] > 0
    }

    /// Elephant flags and elephants per member, in the projection.
    fn elephants(&self, p: &Proj) -> ([bool; BUCKETS], Vec<u16>) {
        let total: u64 = p.load.iter().sum();
        let wsum: u64 = self.members.iter().map(|m| m.eff).sum();
        let mut flags = [false; BUCKETS];
        let mut per = vec![0u16; self.members.len()];
        if total == 0 {
            return (flags, per);
        }
        for (b, flag) in flags.iter_mut().enumerate() {
            let x = self.load_of(b);
            let m = usize::from(p.member[b]);
            // x >= total * w_m / wsum: at least the member's fair share.
            if x > 0
                && u128::from(x) * u128::from(wsum)
                    >= u128::from(total) * u128::from(self.members[m].eff)
            {
                *flag = true;
                per[m] += 1;
            }
        }
        (flags, per)
    }

    /// The fair level per capacity `(load, weight)` for members not set aside, water-filled:
    /// a member whose elephant alone is at least the others' mean is set aside with its load.
    fn fair_level(&self, p: &Proj, flags: &[bool; BUCKETS]) -> (u64, u64, Vec<bool>) {
        let n = self.members.len();
        let mut aside = vec![false; n];
        let mut left = n;
        loop {
            let l: u64 = (0..n).filter(|&i| !aside[i]).map(|i| p.load[i]).sum();
            let w: u64 = (0..n)
                .filter(|&i| !aside[i])
                .map(|i| self.members[i].eff)
                .sum();
            if left <= 1 {
                return (l, w, aside);
            }
            // An elephant at least the remaining fair share of its member: x >= l * w_m / w.
            let found = (0..BUCKETS).find(|&b| {
                let m = usize::from(p.member[b]);
                flags[b]
                    && !aside[m]
                    && u128::from(self.load_of(b)) * u128::from(w)
                        >= u128::from(l) * u128::from(self.members[m].eff)
            });
            match found {
                Some(b) => {
                    aside[usize::from(p.member[b])] = true;
                    left -= 1;
                }
                None => return (l, w, aside),
            }
        }
    }

    /// Load moves, elephant separation and isolation included: while some member is
    /// overloaded, the best acceptable move off the busiest such member.
    fn plan_load(&mut self, now: u64, p: &mut Proj, budget: &mut u16) {
        let pct = u128::from(self.config.min_overload_pct);
        let floor = u128::from(self.config.min_overload_rate);
        let gain = i128::from(self.config.min_gain_pct);
        while *budget > 0 {
            let (flags, per) = self.elephants(p);
            let (lvl_l, lvl_w, aside) = self.fair_level(p, &flags);
            let total: u64 = p.load.iter().sum();
            let wsum: u64 = self.members.iter().map(|m| m.eff).sum();
            if total == 0 {
                break;
            }
            // Overloaded members, busiest first, with their overload per mille.
            let mut senders: Vec<(usize, u32)> = Vec::new();
            for (s, &set_aside) in aside.iter().enumerate() {
                if self.members[s].filling.is_some() {
                    continue;
                }
                let (l, w) = if set_aside {
                    (total, wsum)
                } else {
                    (lvl_l, lvl_w)
                };
                let ls = u128::from(p.load[s]) * u128::from(w);
                let fair = u128::from(l) * u128::from(self.members[s].eff);
                if fair > 0 && ls * 100 > fair * (100 + pct) && ls - fair >= floor * u128::from(w) {
                    let over = ((ls - fair) * 1000 / fair).min(u128::from(u32::MAX)) as u32;
                    senders.push((s, over));
                }
            }
            senders.sort_by(|&(a, _), &(b, _)| {
                let (wa, wb) = (self.members[a].eff, self.members[b].eff);
                less(p.load[a], wa, p.load[b], wb)
                    .cmp(&less(p.load[b], wb, p.load[a], wa))
                    .then(a.cmp(&b))
            });
            let mut done = false;
            for &(s, over) in &senders {
                if let Some((b, d)) = self.best_move(now, p, s, (&flags, &per), gain) {
                    let reason = if per[s] > 0 && (!flags[b] || per[s] >= 2) {
                        MoveReason::Elephant
                    } else {
                        MoveReason::Rebalance {
                            over_permille: over,
                        }
                    };
                    self.plan(now, p, b, d as u16, reason);
                    *budget -= 1;
                    done = true;
                    break;
                }
                if per[s] > 0 {
                    if let Some(moves) = self.make_room(now, p, s, (&flags, &per), gain, *budget) {
                        let last = moves.len() - 1;
                        for (i, &(b, d)) in moves.iter().enumerate() {
                            let reason = if i == last {
                                MoveReason::Rebalance {
                                    over_permille: over,
                                }
                            } else {
                                MoveReason::Elephant
                            };
                            self.plan(now, p, b, d as u16, reason);
                        }
                        *budget -= moves.len() as u16;
                        done = true;
                        break;
                    }
                }
            }
            if !done {
                // Overloaded, and nothing flowlet-safe helps: count towards forcing.
                self.stuck = if senders.is_empty() {
                    0
                } else {
                    self.stuck + 1
                };
                return;
            }
        }
        self.stuck = 0;
    }

    /// For an overloaded member `s` that no single move relieves: moves an elephant of `s` to a
    /// larger member `d` where it is no elephant, after moving enough of `d`'s other loaded
    /// buckets elsewhere (`s` included) to make room. Every member involved ends below `s`'s load now, and the
    /// busiest of them closes `min_gain` of the gap between `s` and `d`, so this composite move
    /// obeys the same rules as a single one. Returns the moves, the elephant's last, within
    /// `budget`.
    fn make_room(
        &self,
        now: u64,
        p: &Proj,
        s: usize,
        (flags, per): (&[bool; BUCKETS], &[u16]),
        gain: i128,
        budget: u16,
    ) -> Option<Vec<(usize, usize)>> {
        let n = self.members.len();
        let total: u64 = p.load.iter().sum();
        let wsum: u64 = self.members.iter().map(|m| m.eff).sum();
        let (ls, ws) = (p.load[s], self.members[s].eff);
        let plain = |i: usize| per[i] == 0;
        let held = |b: usize, d: usize| self.hold_from[b] == d as u16 && now < self.hold_until[b];
        let mut elephants: Vec<usize> = (0..BUCKETS)
            .filter(|&b| {
                usize::from(p.member[b]) == s && flags[b] && !p.planned[b] && self.movable(now, b)
            })
            .collect();
        elephants.sort_by_key(|&b| (core::cmp::Reverse(self.load_of(b)), b));
        let mut hosts: Vec<usize> = (0..n)
            .filter(|&d| d != s && plain(d) && self.members[d].filling.is_none())
            .collect();
        hosts.sort_by_key(|&d| (core::cmp::Reverse(self.members[d].eff), d));
        for &e in &elephants {
            let x = self.load_of(e);
            for &d in &hosts {
                let wd = self.members[d].eff;
                // No elephant on d: x < total * wd / wsum.
                if held(e, d)
                    || u128::from(x) * u128::from(wsum) >= u128::from(total) * u128::from(wd)
                {
                    continue;
                }
                let ld = p.load[d];
                if !less(ld, wd, ls, ws) {
                    continue;
                }
                // The most d may carry before the elephant arrives:
                // 100 (ls/ws - (ld_f + x)/wd) >= gain (ls/ws - ld/wd), times ws * wd.
                let (lsw, ldw) = (
                    i128::from(ls) * i128::from(wd),
                    i128::from(ld) * i128::from(ws),
                );
                let room = (100 * lsw - gain * (lsw - ldw)) / (100 * i128::from(ws));
                let limit = room - i128::from(x) - 1;
                if limit < 0 {
                    continue;
                }
                let limit = limit as u64;
                // d's level once done, which every receiver of d's buckets must stay under.
                let (top, top_w) = (limit + x, wd);
                if less(top, top_w, ls - x, ws) {
                    // s would stay the busiest of them: not this way.
                    continue;
                }
                let mut load = p.load.clone();
                // s, without the elephant, may take some of d's buckets too.
                load[s] -= x;
                let mut moved: Vec<(usize, usize)> = Vec::new();
                let mut mice: Vec<usize> = (0..BUCKETS)
                    .filter(|&b| {
                        usize::from(p.member[b]) == d
                            && !p.planned[b]
                            && self.load_of(b) > 0
                            && self.movable(now, b)
                    })
                    .collect();
                mice.sort_by_key(|&b| (core::cmp::Reverse(self.load_of(b)), b));
                for &b in &mice {
                    if load[d] <= limit || moved.len() + 1 >= usize::from(budget) {
                        break;
                    }
                    let y = self.load_of(b);
                    // The receiver that ends least loaded, staying under d's final level.
                    let mut best: Option<usize> = None;
                    for r in 0..n {
                        if r == d
                            || (r != s && !plain(r))
                            || held(b, r)
                            || !less(load[r] + y, self.members[r].eff, top, top_w)
                        {
                            continue;
                        }
                        if best.is_none_or(|q| {
                            less(
                                load[r] + y,
                                self.members[r].eff,
                                load[q] + y,
                                self.members[q].eff,
                            )
                        }) {
                            best = Some(r);
                        }
                    }
                    if let Some(r) = best {
                        load[d] -= y;
                        load[r] += y;
                        moved.push((b, r));
                    }
                }
                if load[d] <= limit && moved.len() < usize::from(budget) {
                    moved.push((e, d));
                    return Some(moved);
                }
            }
        }
        None
    }

    /// The acceptable move of a loaded bucket off member `s` that leaves the pair's busier
    /// member least loaded (then the receiver least loaded), as `(bucket, receiver)`.
    /// Receivers carry no elephant while some member other than `s` carries none.
    fn best_move(
        &self,
        now: u64,
        p: &Proj,
        s: usize,
        (flags, per): (&[bool; BUCKETS], &[u16]),
        gain: i128,
    ) -> Option<(usize, usize)> {
        let n = self.members.len();
        let total: u64 = p.load.iter().sum();
        let wsum: u64 = self.members.iter().map(|m| m.eff).sum();
        let plain = (0..n).any(|i| i != s && per[i] == 0);
        let ws = self.members[s].eff;
        let ls = p.load[s];
        // (bucket, receiver, pair max, receiver after), loads as (num, den).
        type Best = (usize, usize, (u64, u64), (u64, u64));
        let mut best: Option<Best> = None;
        for d in 0..n {
            if d == s || (plain && per[d] > 0) {
                continue;
            }
            let wd = self.members[d].eff;
            let ld = p.load[d];
            if !less(ld, wd, ls, ws) {
                continue;
            }
            for (b, &elephant) in flags.iter().enumerate() {
                let x = self.load_of(b);
                if usize::from(p.member[b]) != s || p.planned[b] || x == 0 || !self.movable(now, b)
                {
                    continue;
                }
                if self.hold_from[b] == d as u16 && now < self.hold_until[b] {
                    continue;
                }
                // An elephant moves only away from another elephant, to a member where it is
                // none (x < total * wd / wsum), or to a faster member (where it weighs less:
                // the checks below make sure the pair ends better off); otherwise it would only
                // carry its problem elsewhere, and the others move off it instead.
                if elephant
                    && per[s] < 2
                    && wd <= ws
                    && u128::from(x) * u128::from(wsum) >= u128::from(total) * u128::from(wd)
                {
                    continue;
                }
                let (s2, d2) = (ls - x, ld + x);
                // The pair's busier member must end below the sender's load now.
                if !less(d2, wd, ls, ws) {
                    continue;
                }
                let overshoot = less(s2, ws, d2, wd);
                if overshoot {
                    // A role swap in disguise unless it closes min_gain of the gap:
                    // 100 (ls/ws - d2/wd) >= gain (ls/ws - ld/wd), times ws * wd.
                    let lhs =
                        100 * (i128::from(ls) * i128::from(wd) - i128::from(d2) * i128::from(ws));
                    let rhs =
                        gain * (i128::from(ls) * i128::from(wd) - i128::from(ld) * i128::from(ws));
                    if lhs < rhs {
                        continue;
                    }
                }
                let max = if overshoot { (d2, wd) } else { (s2, ws) };
                let after = (d2, wd);
                let better = best.is_none_or(|(_, _, m, a)| {
                    less(max.0, max.1, m.0, m.1)
                        || (!less(m.0, m.1, max.0, max.1) && less(after.0, after.1, a.0, a.1))
                });
                if better {
                    best = Some((b, d, max, after));
                }
            }
        }
        best.map(|(b, d, _, _)| (b, d))
    }

    /// When [`Buckets::handle_timeout`] must next run (the next rebalance); `None` if never.
    pub const fn poll_timeout(&self) -> Option<Instant> {
        self.next_rebalance
    }

    /// Runs the rebalancer if it is due.
    pub fn handle_timeout(&mut self, now: Instant) {
        let Some(next) = self.next_rebalance else {
            return;
        };
        if now < next {
            return;
        }
        let interval = self.config.rebalance_interval;
        let after = next + interval;
        self.next_rebalance = Some(if now >= after { now + interval } else { after });
        self.rebalance(now);
    }

    fn rebalance(&mut self, now: Instant) {
        let now_us = now.as_micros();
        let elapsed = now_us
            .saturating_sub(self.last_rebalance.as_micros())
            .max(1);
        self.last_rebalance = now;
        for b in 0..BUCKETS {
            let bytes = core::mem::take(&mut self.hot[b].bytes);
            self.last_bytes[b] = bytes;
            self.last_gaps[b] = core::mem::take(&mut self.hot[b].gaps);
            let rate = (u128::from(bytes) * 1_000_000 / u128::from(elapsed))
                .min(u128::from(MAX_RATE)) as u64;
            self.load[b] = (self.load[b] + rate) / 2;
        }
        self.counters.rebalances += 1;
        self.drop_plans();
        if self.members.is_empty() {
            return;
        }
        let counts = self.counts();
        for (m, &c) in self.members.iter_mut().zip(&counts) {
            if m.filling.is_some() {
                if c >= m.target || c == m.fill_mark {
                    m.filling = None;
                } else {
                    m.fill_mark = c;
                }
            }
        }
        if self.members.len() < 2 {
            return;
        }
        let mut p = self.projection();
        self.plan_fill(now_us, &mut p);
        let mut budget = self.config.max_moves;
        self.forcing = self.config.force_after > 0 && self.stuck >= self.config.force_after;
        self.plan_load(now_us, &mut p, &mut budget);
        self.forcing = false;
    }

    /// Plain data for `lagctl show`.
    pub fn snapshot(&self) -> BucketsSnapshot {
        let n = self.members.len();
        let mut load = vec![0u64; n];
        let mut last = vec![0u64; n];
        let counts = if n == 0 { Vec::new() } else { self.counts() };
        if n > 0 {
            for (b, h) in self.hot.iter().enumerate() {
                let m = usize::from(h.member);
                load[m] += self.load[b];
                last[m] += self.last_bytes[b];
            }
        }
        let total: u128 = load.iter().map(|&l| u128::from(l)).sum();
        let members = self
            .members
            .iter()
            .enumerate()
            .map(|(i, m)| MemberSnapshot {
                port: m.port,
                weight: m.weight,
                effective_weight: m.eff as u32,
                buckets: counts[i],
                target_buckets: m.target,
                load: load[i],
                last_interval_bytes: last[i],
                load_permille: (u128::from(load[i]) * 1000)
                    .checked_div(total)
                    .map_or(0, |x| x as u32),
                filling: m.filling.is_some() && counts[i] < m.target,
            })
            .collect();
        let buckets = self
            .hot
            .iter()
            .enumerate()
            .map(|(b, h)| {
                let pending = (n > 0 && h.pending != NO_PLAN)
                    .then(|| self.members[usize::from(h.pending)].port);
                BucketSnapshot {
                    bucket: b as u8,
                    member: (n > 0).then_some(h.port),
                    load: self.load[b],
                    last_interval_bytes: self.last_bytes[b],
                    bytes: h.bytes,
                    idle_gaps: self.last_gaps[b],
                    pending,
                    pending_reason: pending.map(|_| self.reason[b]),
                    last_seen: (h.idle_at != 0)
                        .then(|| Instant::from_micros(h.idle_at.saturating_sub(self.idle_gap_us))),
                }
            })
            .collect();
        BucketsSnapshot {
            config: self.config,
            next_rebalance: self.next_rebalance,
            members,
            buckets,
            counters: self.counters,
            recent_moves: self.log.iter().copied().collect(),
        }
    }
}

/// Largest-remainder shares of the 256 buckets for weights `w` (ties to the earlier member).
fn apportion(w: &[u64]) -> Vec<u16> {
    let total: u64 = w.iter().sum();
    if total == 0 {
        return vec![0; w.len()];
    }
    let n = BUCKETS as u64;
    let mut shares: Vec<u16> = w.iter().map(|&x| (x * n / total) as u16).collect();
    let given: u64 = shares.iter().map(|&s| u64::from(s)).sum();
    let mut order: Vec<usize> = (0..w.len()).collect();
    // Remainder of x * 256 / total, largest first.
    order.sort_by_key(|&i| (core::cmp::Reverse(w[i] * n % total), i));
    for &i in order.iter().take((n - given) as usize) {
        shares[i] += 1;
    }
    shares
}
