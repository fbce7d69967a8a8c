//! The planner: frames -> flows -> per-member load -> report.
//!
//! Given real traffic (a pcap/pcapng capture, or a flow list), the planner predicts how each
//! transmit policy would spread it over the bond's members, and why. It runs **the daemon's own
//! hash code** ([`crate::hash::hasher`] and the kernel's `hash % members`), so a prediction
//! cannot drift from what lagd (or the kernel, whose hashes lagd matches bit for bit) does.
//!
//! # What it computes
//! For each [`PlanPolicy`]: per member the packets, bytes and flows; the imbalance (busiest
//! member's bytes over the mean); the throughput bound (the bond's rate for this traffic mix
//! when the member with the most bytes per unit of speed saturates first); the elephant flows
//! that share a member; flows split over members (round-robin reordering, or fragments under
//! `layer3+4`); the same for other member counts and with each member failed; and the switch's
//! return path under generic switch hashes ([`switch`]). [`report::Plan`] holds the result,
//! ranked, with a recommendation and [`findings`] that name the field behind a pathology.
//!
//! # Model
//! - Members are chosen as the kernel does for `balance-xor` and `802.3ad`: `hash % n`. When a
//!   member fails, the kernel indexes the remaining members with `hash % (n - 1)`, so flows on
//!   healthy members move too; the planner reports them as collateral moves.
//! - `ovs-slb` and `ovs-tcp` use the same `hash % n` (see [`crate::hash`]: lagd's deterministic
//!   starting point, not OVS's live, rebalanced bucket map). On failure OVS moves only the failed
//!   member's buckets; the planner models that as: a flow on the failed member moves to the
//!   survivor `(hash & 0xff) % (n - 1)`, every other flow stays.
//! - Bucket policies (`balance-tcp`, `balance-slb`, `layer3+4+buckets`...: lagd's 256-bucket
//!   table, rebalanced by load and weighted by member speed) run the daemon's own
//!   [`crate::balance::Buckets`] frame by frame at the capture's timestamps; see [`buckets`]
//!   for how captures, flow lists, the sweep and failures are modelled.
//! - `balance-rr` sends packet `i` (in input order) on member `i % n`, as the daemon's and the
//!   kernel's counter does (IGMP excepted: it leaves on the first member without taking a
//!   turn). A packet leaving on another member than the previous packet of its flow may
//!   overtake it or be overtaken: the planner counts those as at risk of reordering. For a
//!   flow list, where packet order is unknown, each flow's packets are taken to be back to
//!   back. When a member fails the counter still runs over all `n` members and a turn that
//!   falls on the failed one goes to the next usable member (the daemon's `rr_choice`, the
//!   kernel's `bond_get_slave_by_id`), so the member after it carries a double share; the
//!   flows that move are those with a packet on the failed member, and none other.
//! - `stripe` (lagd's `mode=stripe`, which needs lagd at both ends) runs the daemon's own
//!   striping sender ([`crate::stripe::StripeTx`]: frames over the members by bytes, weighted
//!   by speed) over the input; the receiving lagd puts frames back in order, so it has no
//!   reordering risk. It ranks with the others but is recommended only when no policy that
//!   works against any peer was evaluated; otherwise the recommendation notes what it would
//!   deliver. See [`stripe`].
//! - Not modelled as such: `balance-tlb`/`balance-alb`. Dynamic `balance-tlb` spreads unicast
//!   IP through the same bucket table as `HASH+buckets` (whose figures then apply to that
//!   traffic) and sends the rest on its active member, which the planner does not model.
//! - Bytes are whole frames as on the wire (a capture's original length, not the captured
//!   part). Frames of other link types are given an Ethernet header first: raw IP gets zero
//!   MACs, Linux cooked captures get their source MAC and a zero destination; when most of the
//!   input lacks a MAC a policy hashes, that policy is marked as one the input cannot judge
//!   ([`report::PolicyPlan::cannot_judge`]), ranked last and never recommended. A Linux cooked
//!   capture (`tcpdump -i any`) holds a bond's frames twice, on the bond and on a member: the
//!   second copy of a frame (equal bytes within 20 ms; for SLL2 on another interface) is
//!   dropped and counted ([`InputStats::duplicates`]); so is a frame a pcapng capture of
//!   several Ethernet interfaces (the bond and a member) holds on two of them.
//! - Link control frames (LACP, Marker, pause, LLDP, STP, other frames to
//!   `01:80:c2:00:00:0x`: [`control`]) are not bond traffic: counted apart by kind, never
//!   hashed or ranked.
//! - Flow samples and records: sFlow v5 raw packet headers ([`sflow`]) are replayed as frames,
//!   scaled by their sampling rate; IPFIX records ([`ipfix`]) are flows like a CSV flow list's
//!   rows, scaled by the rate the exporter states; both reports state the sampling error.
//! - The report judges its own input ([`report::SampleVerdict`]): too few packets, flows or
//!   seconds and it recommends nothing and says why; otherwise the recommendation of a hash
//!   policy carries a confidence from the ranking redone on halves of the flows, and ends with
//!   the settings that apply it ([`apply`]).
//!
//! # Cost and memory
//! Each frame is parsed once into a [`flow::FlowKey`]. A frame that is **simple** (see
//! [`flow`]: TCP or UDP over IPv4/IPv6, at most one VLAN tag, no fragment) hashes, under every
//! policy, as a function of its key alone, so the planner hashes a flow's first simple frame
//! and adds the others to its counters (a run of back-to-back frames of one flow costs a single
//! table lookup); every other frame is hashed on its own. `balance-rr` is kept for all member
//! counts at once in tables indexed by the input position modulo their common multiple.
//! Bucket policies cannot fold a flow's frames together (the member depends on when a frame
//! is sent), so each frame goes through each of their tables; the hash comes from the flow's
//! entry like the others', and nothing is allocated per frame.
//! Flows are kept in a table of at most [`PlanConfig::max_flows`] entries. Frames of flows
//! beyond the cap are still hashed and counted exactly in every per-member figure; they only
//! miss from the flow counts, elephants and flow moves, and the report gives their packets and
//! bytes as "other flows". Nothing else grows with the input.
//!
//! A table slot is 153 bytes (a 56-byte key, a 96-byte entry, a control byte). The table
//! (hashbrown) keeps between 1.14 and 2.3 slots per flow, doubling when it is 7/8 full, and
//! holds the old and the new slots while it doubles; the pathology detectors then sort one
//! 40-byte row per flow. So the peak is 300 to 600 bytes per flow, by where the flow count
//! falls between powers of two: measured (peak RSS of `lagctl plan`, every default policy,
//! `bench/plan.md`) 144 MB for 400,000 flows and 273 MB at the default cap,
//! [`DEFAULT_MAX_FLOWS`] = 917,504 = 7/8 of 2^20, the most a table of 2^20 slots holds (a cap
//! of 1,000,000 doubled the table for the last 8 % of flows: 494 MB).

pub mod apply;
pub mod buckets;
mod config;
pub mod control;
pub mod csv;
mod error;
pub mod findings;
mod finish;
pub mod flow;
mod hist;
mod input;
pub mod ipfix;
mod load;
mod planner;
mod policy;
pub mod report;
mod rr;
#[cfg(any(test, feature = "sample"))]
pub mod sample;
pub mod sflow;
pub mod stripe;
pub mod switch;

pub use config::{DEFAULT_MAX_FLOWS, MAX_FAILURE_MEMBERS, MAX_MEMBERS, PlanConfig};
pub use error::PlanError;
pub use input::{
    InputStats, InterfaceCopies, InterfaceFrames, InterfaceNaming, MAX_COPY_INTERFACES,
};
pub use load::Load;
pub use planner::{Planner, plan_capture, plan_flows};
pub use policy::PlanPolicy;

#[cfg(test)]
mod tests;
