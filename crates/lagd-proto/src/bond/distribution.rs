//! The distribution as plain data: everything that decides a data frame's member and whether a
//! member's frames reach the host, with a generation number that changes whenever any of it
//! changes. The userspace path decides from the same state; a kernel fast path and the planner
//! read this copy of it.

use super::mode::ModeState;
use super::options::{BondOptions, Mode};
use super::select::Selection;
use super::verdict::RxRule;
use crate::balance::bucket;
use crate::hash::HashPolicy;
use crate::port::PortId;
use crate::stripe::tx::slot_table;

/// How the member of a data frame from the host is chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxRule {
    /// The policy's hash, modulo the number of usable members, indexes
    /// [`DistributionTable::usable`].
    Modulo(HashPolicy),
    /// The policy's hash picks one of 256 buckets (with `seed`), each assigned to a member.
    Buckets {
        /// The hash policy.
        policy: HashPolicy,
        /// The bucket seed (`hash_seed`).
        seed: u32,
        /// Bucket -> member, 256 entries (`None` without members).
        table: Vec<Option<PortId>>,
    },
    /// Every frame on [`DistributionTable::active`].
    Active,
    /// Every frame on every usable member.
    All,
    /// Stripe: TCP frames go through 256 slots in turn, [`SLOT_BYTES`] per slot (a kernel
    /// program keeps the byte count), each slot naming a member ([`slot_table`]); every other
    /// frame (UDP, ICMP, other EtherTypes) stays on the member of its flow's slot
    /// ([`flow_member`]: one member per flow, unnumbered, so never reordered); a `None` slot
    /// (no stripe peer yet) and the frames the bond must send itself (ARP, IGMP, neighbour
    /// discovery and MLD) go to the bond, which numbers them. The bond itself, without a
    /// kernel fast path, numbers every frame that is not TCP and stripes it.
    ///
    /// [`SLOT_BYTES`]: crate::stripe::tx::SLOT_BYTES
    /// [`slot_table`]: crate::stripe::tx::slot_table
    /// [`flow_member`]: crate::stripe::tx::flow_member
    Stripe {
        /// Slot -> member, 256 entries.
        slots: Vec<Option<PortId>>,
    },
    /// balance-rr: turn `k` (the `k`-th frame, or the `k / packets_per_slave`-th run of
    /// frames; a random number with 0) goes to [`DistributionTable::rr_member`]`(k)`; IGMP goes
    /// to the bond itself, which sends it on the active member. A kernel program keeps the
    /// count.
    RoundRobin {
        /// `packets_per_slave` (0: a random member per frame).
        packets_per_slave: u16,
    },
    /// balance-tlb and balance-alb: a balanced frame (balance-tlb: unicast IPv4, unicast IPv6
    /// other than neighbour discovery, by the policy's hash; balance-alb: see `alb`) goes to
    /// the member its hash picks, through the 256 buckets with
    /// `seed` (`tlb_dynamic_lb=1`: the load assignment the rebalancer keeps) or modulo the
    /// usable members (`tlb_dynamic_lb=0`), and to [`DistributionTable::active`] where that
    /// names none; every other frame goes on the active member. A frame leaving on another
    /// member than the active one with the bond's MAC as source carries that member's MAC
    /// ([`Bond::wire_mac`]), and a unicast frame received for a member's MAC reaches the host
    /// with the bond's MAC as destination. ARP stays with the bond itself (balance-alb's
    /// receive balancing: replies crafted per client, learning from the members' ARP).
    ///
    /// [`Bond::wire_mac`]: super::Bond::wire_mac
    Tlb {
        /// The hash policy (balance-tlb's; balance-alb's hash is its own).
        policy: HashPolicy,
        /// balance-alb: IPv4 that is not IGMP nor to the broadcast address and IPv6 that is not
        /// to all nodes nor from `::` are balanced, by the byte-XOR of the destination address
        /// (`lagd_proto`'s alb hash); frames to the broadcast MAC are not.
        alb: bool,
        /// The bucket seed (`hash_seed`).
        seed: u32,
        /// Bucket -> member, 256 entries (`None` without members); `None` with
        /// `tlb_dynamic_lb=0`.
        buckets: Option<Vec<Option<PortId>>>,
    },
}

/// Whether frames received on a member reach the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemberRx {
    /// The member.
    pub port: PortId,
    /// Unicast frames are delivered.
    pub unicast: bool,
    /// Broadcast and multicast frames are delivered.
    pub multicast: bool,
}

/// See the [module documentation](self).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DistributionTable {
    /// Changes whenever anything below changes (it only grows).
    pub generation: u64,
    /// The bond's mode.
    pub mode: Mode,
    /// How a data frame's member is chosen.
    pub tx: TxRule,
    /// Usable members in enslave order (802.3ad: the distributing ones).
    pub usable: Vec<PortId>,
    /// The active member, in modes with one.
    pub active: Option<PortId>,
    /// Per member, in enslave order: whether its frames reach the host.
    pub rx: Vec<MemberRx>,
    /// A member does not deliver a copy of a frame another member delivered (broadcast with
    /// `broadcast_dedup`: [`super::dedup`]): the key of the sums that tell copies
    /// ([`super::dedup::sum`]).
    pub dedup: Option<u64>,
}

impl DistributionTable {
    /// The table of a bond in `mode` whose mode state is `state`, with selection `sel` and
    /// receive rules `rx` (per member, in enslave order). Without `carrier` nothing is sent:
    /// the active member's rule with no active member.
    pub(crate) fn new(
        generation: u64,
        opts: &BondOptions,
        state: &ModeState,
        sel: &Selection,
        rx: &[RxRule],
        carrier: bool,
        dedup_seed: u64,
    ) -> Self {
        let tx = match state {
            _ if !carrier => TxRule::Active,
            ModeState::Hashed(h) => match &h.buckets {
                Some(b) => TxRule::Buckets {
                    policy: h.policy,
                    seed: opts.hash_seed,
                    table: (0..=255u8).map(|k| b.member_of_bucket(k)).collect(),
                },
                None => TxRule::Modulo(h.policy),
            },
            ModeState::ActiveBackup => TxRule::Active,
            ModeState::Broadcast => TxRule::All,
            ModeState::Stripe(s) => TxRule::Stripe {
                slots: slot_table(&s.engine.tx().members().collect::<Vec<_>>()).to_vec(),
            },
            ModeState::RoundRobin(rr) => TxRule::RoundRobin {
                packets_per_slave: rr.packets_per_slave(),
            },
            ModeState::Tlb(t) => TxRule::Tlb {
                policy: t.policy,
                alb: t.rlb.is_some(),
                seed: opts.hash_seed,
                buckets: t
                    .buckets
                    .as_ref()
                    .map(|b| (0..=255u8).map(|k| b.member_of_bucket(k)).collect()),
            },
        };
        Self {
            generation,
            mode: opts.mode,
            tx,
            usable: sel.usable.clone(),
            active: sel.active.filter(|_| carrier),
            rx: rx
                .iter()
                .enumerate()
                .map(|(i, r)| MemberRx {
                    port: PortId(i as u16),
                    unicast: r.unicast.is_none(),
                    multicast: r.multicast.is_none(),
                })
                .collect(),
            dedup: (opts.mode == Mode::Broadcast && opts.broadcast_dedup).then_some(dedup_seed),
        }
    }

    /// Why a kernel fast path cannot forward as this table decides (`None`: it can): the
    /// members must be at most `max_members`; the programs hold every rule (tlb/alb's load
    /// assignment included) and compute every hash policy.
    pub fn kernel_refusal(&self, max_members: usize) -> Option<&'static str> {
        (self.rx.len() > max_members).then_some("more members than the kernel table holds")
    }

    /// The member a data frame whose policy hash is `hash` goes to, where the table alone
    /// decides ([`TxRule::Modulo`], [`TxRule::Buckets`], [`TxRule::Active`]; a balanced frame
    /// of [`TxRule::Tlb`]); `None` where no member is usable or the rule is another. A kernel
    /// program reading the same table makes the same choice.
    pub fn member_for_hash(&self, hash: u32) -> Option<PortId> {
        match &self.tx {
            TxRule::Modulo(_) => {
                let n = u32::try_from(self.usable.len()).ok().filter(|&n| n > 0)?;
                Some(self.usable[(hash % n) as usize])
            }
            TxRule::Buckets { seed, table, .. } => table[usize::from(bucket(*seed, hash))],
            TxRule::Active => self.active,
            TxRule::Tlb { seed, buckets, .. } => {
                let by_hash = match buckets {
                    Some(table) => table[usize::from(bucket(*seed, hash))],
                    None => u32::try_from(self.usable.len())
                        .ok()
                        .filter(|&n| n > 0)
                        .map(|n| self.usable[(hash % n) as usize]),
                };
                by_hash.or(self.active)
            }
            TxRule::All | TxRule::Stripe { .. } | TxRule::RoundRobin { .. } => None,
        }
    }

    /// balance-rr's member for turn `turn`: the first usable member from position
    /// `turn % members` on (all the bond's members in enslave order, round from the last to
    /// the first), as the kernel's walk from a failed member's turn; `None` when none is usable.
    pub fn rr_member(&self, turn: u32) -> Option<PortId> {
        let n = self.rx.len();
        if n == 0 {
            return None;
        }
        let start = turn as usize % n;
        (0..n)
            .map(|k| PortId(((start + k) % n) as u16))
            .find(|p| self.usable.contains(p))
    }
}
