//! The status document `lagd` serves and `lagctl show` prints: JSON for scripts, and the shape
//! users know from `/proc/net/bonding/BOND` for people.

use std::fmt::Write as _;
use std::time::Duration;

use lagd_proto::balance::BucketsSnapshot;
use lagd_proto::bond::{
    ArpMonitorSnapshot, BondSnapshot, PortSnapshot, StripeSnapshot, TablesSnapshot,
};
use lagd_proto::lacp::{LacpPortSnapshot, LacpSnapshot};
use lagd_proto::port::PortId;
use lagd_proto::time::Instant;
use lagd_proto::wire::slow::LacpInfo;
use serde::{Deserialize, Serialize};

/// A bond's status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// lagd's version.
    pub version: String,
    /// The bond interface.
    pub bond: String,
    /// The bond's MAC.
    pub mac: String,
    /// Mode name (`balance-xor`).
    pub mode: String,
    /// Mode as `/proc/net/bonding` words it.
    pub mode_description: String,
    /// Hash policy, for modes that hash.
    pub xmit_hash_policy: Option<String>,
    /// The kernel's number of the hash policy.
    pub xmit_hash_policy_number: Option<u8>,
    /// `up` or `down`: whether the bond has carrier.
    pub mii_status: String,
    /// `miimon` in ms.
    pub miimon: u32,
    /// How often lagd reads member carrier, in ms.
    pub carrier_poll_ms: u32,
    /// `updelay` in ms.
    pub updelay: u32,
    /// `downdelay` in ms.
    pub downdelay: u32,
    /// `peer_notif_delay` in ms.
    pub peer_notif_delay: u32,
    /// Primary member (modes with an active member).
    pub primary: Option<String>,
    /// `primary_reselect` (modes with an active member).
    pub primary_reselect: Option<String>,
    /// The active member (modes with one).
    pub active: Option<String>,
    /// Times the active member moved from one member to another (modes with one).
    #[serde(default)]
    pub failovers: u64,
    /// Combinations of options that hurt (the warnings lagd logged at start).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Frames from the host dropped because no member was usable.
    pub tx_dropped_no_member: u64,
    /// 802.3ad: what `/proc/net/bonding` shows in its `802.3ad info` section.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lacp: Option<LacpStatus>,
    /// Bucketed distribution (balance-slb, balance-tcp, `distribution=buckets`, dynamic tlb/alb).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buckets: Option<BucketsStatus>,
    /// Stripe mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stripe: Option<StripeStatus>,
    /// Which path carries the data frames, and why.
    #[serde(default)]
    pub dataplane: DataplaneStatus,
    /// Members disabled with `lagctl member BOND NAME disable` (kept out as if without carrier).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disabled_members: Vec<String>,
    /// The run-time changes made since lagd started (`lagctl set`, `lagctl member`, reloads),
    /// oldest first, each `+SECONDS what` (seconds since start); the latest 32.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<String>,
    /// The tables keyed by what peers and the host send: sizes, bounds, evictions.
    #[serde(default)]
    pub tables: TablesStatus,
    /// The ARP monitor (IPv4 and IPv6 targets), when it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arp_monitor: Option<ArpMonitorStatus>,
    /// Members in enslave order.
    pub members: Vec<MemberStatus>,
}

/// The bond's tables keyed by what arrives in frames, each bounded (the oldest entry makes
/// room): how full, the bound, and how many entries were dropped.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TablesStatus {
    /// balance-alb clients tracked.
    pub alb_clients: u64,
    /// The bound on balance-alb clients (0 in other modes).
    pub alb_clients_max: u64,
    /// balance-alb clients dropped to make room.
    pub alb_clients_evicted: u64,
    /// Multicast groups kept for `resend_igmp`.
    pub igmp_groups: u64,
    /// The bound on groups.
    pub igmp_groups_max: u64,
    /// Groups dropped to make room.
    pub igmp_groups_evicted: u64,
}

impl TablesStatus {
    /// From the bond's snapshot.
    pub fn from_snapshot(t: &TablesSnapshot) -> Self {
        Self {
            alb_clients: t.alb_clients as u64,
            alb_clients_max: t.alb_clients_max as u64,
            alb_clients_evicted: t.alb_clients_evicted,
            igmp_groups: t.igmp_groups as u64,
            igmp_groups_max: t.igmp_groups_max as u64,
            igmp_groups_evicted: t.igmp_groups_evicted,
        }
    }
}

/// The ARP monitor's settings: `arp_interval`, `arp_missed_max`, `arp_validate`,
/// `arp_all_targets`, and the targets it probes (`arp_ip_target` with ARP, `ns_ip6_target`
/// with neighbour solicitations).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArpMonitorStatus {
    /// `arp_interval` in ms.
    pub interval_ms: u32,
    /// `arp_missed_max`.
    pub missed_max: u8,
    /// `arp_validate`.
    pub validate: String,
    /// `arp_all_targets`.
    pub all_targets: String,
    /// IPv4 targets.
    pub ip_targets: Vec<String>,
    /// IPv6 targets.
    pub ns_ip6_targets: Vec<String>,
}

impl ArpMonitorStatus {
    /// From the bond's snapshot.
    pub fn from_snapshot(a: &ArpMonitorSnapshot) -> Self {
        Self {
            interval_ms: a.interval_ms,
            missed_max: a.missed_max,
            validate: a.validate.name().to_owned(),
            all_targets: a.all_targets.name().to_owned(),
            ip_targets: a.ip_targets.iter().map(ToString::to_string).collect(),
            ns_ip6_targets: a.ns_targets.iter().map(ToString::to_string).collect(),
        }
    }
}

/// Which path carries the bond's data frames.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataplaneStatus {
    /// `kernel` (the tcx fast path forwards, lagd decides) or `lagd` (every frame through lagd).
    pub path: String,
    /// Why the path is what it is (`fastpath=off`, what the kernel cannot do, an error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// On the kernel path, how its programs are attached: `tcx` (tcx links) or `tc` (filters
    /// on the clsact qdisc).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attach: Option<String>,
    /// Why that attachment (`fastpath_attach=tc`, `tcx not available (...)`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attach_reason: Option<String>,
    /// On lagd's path, how the members are kept off their own stacks, and why (`tcx ingress
    /// drop (...)`, `tc (clsact) ingress drop (...)`, `sysctls only, ...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<String>,
}

/// The bond's 802.3ad state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LacpStatus {
    /// `lacp_active`.
    pub lacp_active: bool,
    /// `lacp_rate`: `slow` or `fast`.
    pub lacp_rate: String,
    /// `min_links`.
    pub min_links: u32,
    /// `ad_select`.
    pub ad_select: String,
    /// System priority.
    pub system_priority: u16,
    /// System MAC address.
    pub system_mac: String,
    /// The active aggregator, if any.
    pub active_aggregator: Option<AggregatorStatus>,
    /// The member carrying traffic in LACP fallback (active-backup), if the fallback is on.
    pub fallback_member: Option<String>,
    /// lagd's `lacp_fallback` in ms: how long without any partner before falling back (0: off).
    #[serde(default)]
    pub lacp_fallback_ms: u32,
}

/// The bucket table, as Open vSwitch's `bond/show` shows it, and what the rebalancer did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketsStatus {
    /// Rebalancing interval in ms (0: never).
    pub rebalance_interval_ms: u32,
    /// Time to the next rebalancing, in ms.
    pub next_rebalance_in_ms: Option<u64>,
    /// The busiest member's load per capacity over the mean, per mille (1000: even).
    pub busiest_over_mean_permille: Option<u32>,
    /// Rebalancing passes run.
    pub rebalances: u64,
    /// Buckets moved, by cause.
    pub moved_rebalance: u64,
    /// Buckets moved to isolate or separate elephants.
    pub moved_elephant: u64,
    /// Buckets moved because their member left.
    pub moved_left: u64,
    /// Buckets moved to a member that joined or returned.
    pub moved_joined: u64,
    /// Moves that waited for their bucket's idle gap (no reordering).
    pub moves_deferred: u64,
    /// Moves of busy buckets forced after a persistent overload.
    pub moves_forced: u64,
    /// Per member.
    pub members: Vec<BucketMemberStatus>,
    /// Every bucket with a member.
    pub buckets: Vec<BucketStatus>,
    /// The most recent moves, oldest first, in words.
    pub recent_moves: Vec<String>,
}

/// A member in [`BucketsStatus`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketMemberStatus {
    /// Interface name.
    pub name: String,
    /// Weight used (Mb/s).
    pub weight: u32,
    /// Buckets held.
    pub buckets: u16,
    /// Buckets it should hold by weight.
    pub target_buckets: u16,
    /// Load, bytes per second (decayed).
    pub load_bytes_per_s: u64,
    /// Share of the bond's load, per mille.
    pub load_permille: u32,
}

/// A bucket in [`BucketsStatus`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketStatus {
    /// Bucket number (0–255).
    pub bucket: u8,
    /// Its member.
    pub member: String,
    /// Load, bytes per second (decayed).
    pub load_bytes_per_s: u64,
    /// Where a planned move takes it at its next idle gap.
    pub pending: Option<String>,
}

/// Stripe mode's peer and reorder buffer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StripeStatus {
    /// The peer situation in words (which members speak stripe).
    pub peer: String,
    /// The error to act on, if any (no stripe peer heard).
    pub error: Option<String>,
    /// Whether frames are striped over at least one member.
    pub striping: bool,
    /// Frames handed to the host.
    pub delivered: u64,
    /// Frames that arrived out of order and were put back in order.
    pub reordered: u64,
    /// Frames given up on because every member had gone past them (lost).
    pub skipped_lost: u64,
    /// Frames given up on after the timeout (lost, or slower than the timeout).
    pub skipped_timeout: u64,
    /// The receiver's timeout now, µs (it grows when frames turn out late).
    pub timeout_us: u64,
    /// Frames given up on because the buffer was full.
    pub skipped_full: u64,
    /// Frames that came after their gap was skipped.
    pub late: u64,
    /// Duplicates and stale frames dropped.
    pub dropped: u64,
    /// Times the sequence restarted (peer restart).
    pub resyncs: u64,
    /// Frames held now, and at most.
    pub held: usize,
    /// The most frames held at once.
    pub max_held: usize,
    /// TCP, put back in order by its own sequence numbers.
    #[serde(default)]
    pub tcp: StripeTcpStatus,
}

/// Stripe mode's TCP resequencer (TCP crosses without the stripe header).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StripeTcpStatus {
    /// Segments (or GRO super-frames) received.
    pub segments: u64,
    /// Of those, in order on arrival (or without payload).
    pub in_order: u64,
    /// Held for a predecessor, then delivered in order.
    pub reordered: u64,
    /// Behind the expected sequence number (retransmissions), delivered at once.
    pub behind: u64,
    /// Of those, segments whose hole had been given up on by timeout.
    pub late: u64,
    /// Holes given up on because every member had gone past them (lost).
    pub skipped_lost: u64,
    /// Holes given up on after the timeout.
    pub skipped_timeout: u64,
    /// Holes given up on because the flow or the table held too much.
    pub skipped_full: u64,
    /// Flows whose sequence restarted (SYN, or a jump of 2^30).
    pub resyncs: u64,
    /// Flows tracked now.
    pub flows: usize,
    /// Flows evicted for room.
    pub flows_evicted: u64,
    /// Bytes held now.
    pub held_bytes: usize,
    /// The most bytes held at once.
    pub max_held_bytes: usize,
    /// The hole timeout now, µs.
    pub timeout_us: u64,
    /// Kernel path: segments the members' program delivered in order itself (none of them
    /// reached lagd, or the counts above).
    #[serde(default)]
    pub kernel_segments: u64,
    /// Kernel path: rounds of segments that had overtaken another sent back through their
    /// member's receive queue until it passed (a hole that lasts goes to lagd).
    #[serde(default)]
    pub kernel_held: u64,
    /// Kernel path: flows lagd took from the program at a hole.
    #[serde(default)]
    pub taken_over: u64,
    /// Kernel path: flows lagd handed (back) to the program once it held nothing of them.
    #[serde(default)]
    pub handed_back: u64,
}

/// The active aggregator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AggregatorStatus {
    /// Aggregator ID.
    pub id: u16,
    /// Ports distributing through it.
    pub number_of_ports: u32,
    /// Actor key.
    pub actor_key: u16,
    /// Partner key.
    pub partner_key: u16,
    /// Partner MAC address (system id).
    pub partner_mac: String,
}

/// One side's LACP information for a member, as a LACPDU carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LacpInfoStatus {
    /// System priority.
    pub system_priority: u16,
    /// System MAC address.
    pub system_mac: String,
    /// Key.
    pub key: u16,
    /// Port priority.
    pub port_priority: u16,
    /// Port number.
    pub port: u16,
    /// State bits as a number (as `/proc/net/bonding` prints them).
    pub state: u8,
    /// State bits by name.
    pub state_names: Vec<String>,
}

/// A member's 802.3ad state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberLacp {
    /// The aggregator it is selected to.
    pub aggregator_id: Option<u16>,
    /// Whether LACP lets it collect.
    pub collecting: bool,
    /// Whether LACP lets it distribute.
    pub distributing: bool,
    /// Receive machine state.
    pub rx_state: String,
    /// Mux machine state.
    pub mux_state: String,
    /// Selection state.
    pub selected: String,
    /// Actor churn state (`/proc` words: monitoring, churned, none).
    pub actor_churn_state: String,
    /// Partner churn state.
    pub partner_churn_state: String,
    /// Times the actor churned.
    pub actor_churned_count: u32,
    /// Times the partner churned.
    pub partner_churned_count: u32,
    /// Our LACPDU information.
    pub actor: LacpInfoStatus,
    /// The partner's, as in use.
    pub partner: LacpInfoStatus,
    /// LACPDUs received.
    pub lacpdu_rx: u64,
    /// LACPDUs sent.
    pub lacpdu_tx: u64,
    /// LACPDUs the member's socket refused (queue full, link gone): not on the wire, though
    /// counted in `lacpdu_tx`.
    #[serde(default)]
    pub lacpdu_tx_errors: u64,
    /// Marker PDUs received (information and responses).
    pub marker_rx: u64,
    /// Marker responses sent.
    pub marker_response_tx: u64,
    /// Invalid slow-protocol frames received.
    pub illegal_rx: u64,
    /// Slow-protocol frames of unknown subtype received.
    pub unknown_rx: u64,
    /// Marker Information PDUs not answered (over the response rate limit).
    #[serde(default)]
    pub marker_dropped: u64,
    /// Slow-protocol frames dropped unparsed, over the member's receive budget.
    #[serde(default)]
    pub rate_limited_rx: u64,
    /// LACPDUs from another address naming another partner, held off while the confirmed
    /// partner was current.
    #[serde(default)]
    pub foreign_rx: u64,
    /// Slow-protocol frames the kernel dropped before lagd read them (socket buffer full).
    #[serde(default)]
    pub socket_drops: u64,
    /// Slow-protocol frames the fast path's member program dropped before any socket: not
    /// from the confirmed partner, over its policer's rate (200 per second per CPU).
    #[serde(default)]
    pub kernel_policed: u64,
}

/// One member's status. The default is a member with no name, nothing known of its link, and
/// zero counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberStatus {
    /// Interface name.
    pub name: String,
    /// `up`, `going down`, `down` or `going back`.
    pub mii_status: String,
    /// Speed in Mb/s, if known.
    pub speed_mbps: Option<u32>,
    /// `full`, `half` or `unknown`.
    pub duplex: String,
    /// Times the member went down.
    pub link_failure_count: u32,
    /// Permanent MAC.
    pub perm_hw_addr: String,
    /// The active member (or usable, in modes without one).
    pub active: bool,
    /// Its `prio` (the kernel shows it in `ip -d link`, not in /proc/net/bonding).
    #[serde(default)]
    pub prio: i32,
    /// Frames received.
    pub rx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Frames sent.
    pub tx_packets: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Received frames dropped, by reason.
    pub rx_dropped: Vec<(String, u64)>,
    /// Frames the member's socket refused (queue full).
    pub tx_dropped: u64,
    /// Frames the kernel dropped before lagd read them (socket buffer full).
    pub rx_socket_drops: u64,
    /// Of `tx_packets`, those the kernel fast path sent (the rest went through lagd).
    #[serde(default)]
    pub kernel_tx_packets: u64,
    /// Of `rx_packets`, those the kernel fast path delivered (the rest went through lagd).
    #[serde(default)]
    pub kernel_rx_packets: u64,
    /// 802.3ad: the member's LACP state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lacp: Option<MemberLacp>,
}

/// A failure counter for the status document, with a limit on how often it is logged.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FailureCount {
    total: u64,
    /// When the last report was due, and `total` then.
    reported: Option<(Instant, u64)>,
}

impl FailureCount {
    /// Counts one failure at `now`. Returns how many failures (this one included) happened
    /// since the last report if a report is due: at the first failure, then at the first one
    /// at least `every` after the last report; `None` otherwise.
    pub fn record(&mut self, now: Instant, every: Duration) -> Option<u64> {
        self.total += 1;
        if self.reported.is_some_and(|(at, _)| now < at + every) {
            return None;
        }
        let since = self.total - self.reported.map_or(0, |(_, n)| n);
        self.reported = Some((now, self.total));
        Some(since)
    }

    /// Failures counted so far.
    pub fn total(&self) -> u64 {
        self.total
    }
}

/// What the status document says of a bond beyond the bond engine's snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BondContext {
    /// lagd's version.
    pub version: String,
    /// The bond interface.
    pub bond: String,
    /// The bond's MAC.
    pub mac: String,
    /// How often lagd reads member carrier, in ms.
    pub carrier_poll_ms: u32,
    /// Frames from the host dropped because no member was usable.
    pub tx_dropped_no_member: u64,
    /// The configured `lacp_fallback` (ms, 0: off).
    pub lacp_fallback_ms: u32,
    /// The time of the snapshot (the bond's clock): deadlines are shown relative to it.
    pub now: Instant,
}

impl Status {
    /// A bond's status from the bond engine's snapshot and what `ctx` says beyond it. Member `i`
    /// (in enslave order) is `member(i, port, lacp_port)`, given the engines' snapshots of it
    /// (see [`MemberStatus::from_snapshot`]).
    pub fn from_snapshot(
        snap: &BondSnapshot,
        ctx: BondContext,
        mut member: impl FnMut(usize, &PortSnapshot, Option<&LacpPortSnapshot>) -> MemberStatus,
    ) -> Self {
        Self {
            version: ctx.version,
            bond: ctx.bond,
            mac: ctx.mac,
            mode: snap.mode.name().to_owned(),
            mode_description: snap.mode.description().to_owned(),
            xmit_hash_policy: snap.xmit_hash_policy.map(|p| p.name().to_owned()),
            xmit_hash_policy_number: snap.xmit_hash_policy.and_then(|p| p.kernel_value()),
            mii_status: if snap.carrier { "up" } else { "down" }.to_owned(),
            miimon: snap.miimon,
            carrier_poll_ms: ctx.carrier_poll_ms,
            updelay: snap.updelay,
            downdelay: snap.downdelay,
            peer_notif_delay: snap.peer_notif_delay,
            primary: snap.primary.clone(),
            primary_reselect: snap.primary_reselect.map(|r| r.name().to_owned()),
            active: snap.active.clone(),
            failovers: snap.failovers,
            warnings: Vec::new(),
            tx_dropped_no_member: ctx.tx_dropped_no_member,
            lacp: snap.lacp.as_ref().map(|l| {
                LacpStatus::from_snapshot(l, ctx.lacp_fallback_ms, |p| {
                    snap.ports[usize::from(p.0)].name.clone()
                })
            }),
            buckets: snap.buckets.as_ref().map(|b| {
                BucketsStatus::from_snapshot(b, ctx.now, |p| {
                    snap.ports
                        .get(p.index())
                        .map_or_else(|| format!("#{}", p.0), |m| m.name.clone())
                })
            }),
            dataplane: DataplaneStatus::default(),
            disabled_members: Vec::new(),
            changes: Vec::new(),
            tables: TablesStatus::from_snapshot(&snap.tables),
            arp_monitor: snap
                .arp_monitor
                .as_ref()
                .map(ArpMonitorStatus::from_snapshot),
            stripe: snap.stripe.as_ref().map(|st| {
                let names: Vec<&str> = snap.ports.iter().map(|p| p.name.as_str()).collect();
                StripeStatus::from_snapshot(st, &names)
            }),
            members: snap
                .ports
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let lacp = snap.lacp.as_ref().and_then(|l| l.ports.get(i));
                    member(i, p, lacp)
                })
                .collect(),
        }
    }
}

impl BucketsStatus {
    /// The bucket table's status from its snapshot taken at `now`; members named by `name`.
    pub fn from_snapshot(
        b: &BucketsSnapshot,
        now: Instant,
        name: impl Fn(PortId) -> String,
    ) -> Self {
        Self {
            rebalance_interval_ms: b.config.rebalance_interval.as_millis() as u32,
            next_rebalance_in_ms: b
                .next_rebalance
                .map(|t| t.saturating_since(now).as_millis() as u64),
            busiest_over_mean_permille: b.busiest_over_mean_permille(),
            rebalances: b.counters.rebalances,
            moved_rebalance: b.counters.moved_rebalance,
            moved_elephant: b.counters.moved_elephant,
            moved_left: b.counters.moved_left,
            moved_joined: b.counters.moved_joined,
            moves_deferred: b.counters.deferred,
            moves_forced: b.counters.forced,
            members: b
                .members
                .iter()
                .map(|m| BucketMemberStatus {
                    name: name(m.port),
                    weight: m.effective_weight,
                    buckets: m.buckets,
                    target_buckets: m.target_buckets,
                    load_bytes_per_s: m.load,
                    load_permille: m.load_permille,
                })
                .collect(),
            buckets: b
                .buckets
                .iter()
                .filter_map(|k| {
                    Some(BucketStatus {
                        bucket: k.bucket,
                        member: name(k.member?),
                        load_bytes_per_s: k.load,
                        pending: k.pending.map(&name),
                    })
                })
                .collect(),
            recent_moves: b
                .recent_moves
                .iter()
                .map(|m| {
                    format!(
                        "{:.3} s {}",
                        m.at.as_micros() as f64 / 1e6,
                        m.describe(&name)
                    )
                })
                .collect(),
        }
    }
}

impl StripeStatus {
    /// Stripe mode's status from the bond's snapshot; members named by `names`.
    pub fn from_snapshot(st: &StripeSnapshot, names: &[&str]) -> Self {
        let r = &st.reorder;
        Self {
            peer: st.peers.with_names(names).to_string(),
            error: st.peers.error(),
            striping: st.peers.is_striping(),
            delivered: r.delivered,
            reordered: r.reordered,
            skipped_lost: r.skipped_lost,
            skipped_timeout: r.skipped_timeout,
            timeout_us: r
                .timeout_us
                .max(lagd_proto::stripe::reorder::DEFAULT_TIMEOUT.as_micros() as u64),
            skipped_full: r.skipped_full,
            late: r.late,
            dropped: r.duplicates + r.stale + r.oversize + st.rx_errors,
            resyncs: r.resyncs,
            held: st.held_now,
            max_held: r.max_occupancy,
            tcp: StripeTcpStatus {
                segments: st.tcp.segments,
                in_order: st.tcp.in_order,
                reordered: st.tcp.reordered,
                behind: st.tcp.behind,
                late: st.tcp.late,
                skipped_lost: st.tcp.skipped_lost,
                skipped_timeout: st.tcp.skipped_timeout,
                skipped_full: st.tcp.skipped_full,
                resyncs: st.tcp.resyncs,
                flows: st.tcp_flows,
                flows_evicted: st.tcp.flows_evicted,
                held_bytes: st.tcp_held_bytes,
                max_held_bytes: st.tcp.max_held_bytes,
                timeout_us: st.tcp.timeout_us,
                kernel_segments: 0,
                kernel_held: 0,
                taken_over: st.tcp.taken_over,
                handed_back: st.tcp.handed_back,
            },
        }
    }
}

impl MemberStatus {
    /// A member's status from the bond engine's snapshot of its port, the LACP engine's
    /// (802.3ad), and the LACPDUs its socket refused. The traffic counters, which lagd keeps
    /// outside the engines, are zero.
    pub fn from_snapshot(
        p: &PortSnapshot,
        lacp: Option<&LacpPortSnapshot>,
        lacpdu_tx_errors: u64,
    ) -> Self {
        Self {
            name: p.name.clone(),
            mii_status: p.mii.as_str().to_owned(),
            speed_mbps: p.speed_mbps,
            duplex: match p.full_duplex {
                Some(true) => "full",
                Some(false) => "half",
                None => "unknown",
            }
            .to_owned(),
            link_failure_count: p.link_failures,
            perm_hw_addr: p.perm_mac.to_string(),
            active: p.active,
            prio: p.prio,
            lacp: lacp.map(|l| MemberLacp::from_snapshot(l, lacpdu_tx_errors)),
            ..Self::default()
        }
    }
}

impl LacpStatus {
    /// The bond-level 802.3ad status from the LACP engine's snapshot and the configured
    /// `lacp_fallback` (ms, 0: off); `name` gives a member's interface name from its LACP port id
    /// (the daemon uses member indices as port ids).
    pub fn from_snapshot(
        l: &LacpSnapshot,
        lacp_fallback_ms: u32,
        name: impl Fn(PortId) -> String,
    ) -> Self {
        Self {
            lacp_active: l.lacp_active,
            lacp_rate: l.lacp_rate.as_str().to_owned(),
            min_links: l.min_links,
            ad_select: l.ad_select.as_str().to_owned(),
            system_priority: l.system_priority,
            system_mac: l.system.to_string(),
            active_aggregator: l.active_aggregator_info().map(|a| AggregatorStatus {
                id: a.id.0,
                number_of_ports: a.enabled_ports,
                actor_key: a.actor_key,
                partner_key: a.partner_key,
                partner_mac: a.partner_system.to_string(),
            }),
            fallback_member: l.fallback_active.map(name),
            lacp_fallback_ms,
        }
    }
}

impl LacpInfoStatus {
    /// One side's information as a LACPDU carries it.
    pub fn from_info(i: &LacpInfo) -> Self {
        Self {
            system_priority: i.system_priority,
            system_mac: i.system.to_string(),
            key: i.key,
            port_priority: i.port_priority,
            port: i.port,
            state: i.state.bits(),
            state_names: i.state.names().map(str::to_owned).collect(),
        }
    }
}

impl MemberLacp {
    /// A member's 802.3ad status from the LACP engine's snapshot of its port, and the LACPDUs
    /// its socket refused (the engine does not know).
    pub fn from_snapshot(p: &LacpPortSnapshot, lacpdu_tx_errors: u64) -> Self {
        Self {
            aggregator_id: p.aggregator.map(|a| a.0),
            collecting: p.collecting,
            distributing: p.distributing,
            rx_state: p.rx.as_str().to_owned(),
            mux_state: p.mux.as_str().to_owned(),
            selected: p.selected.as_str().to_owned(),
            actor_churn_state: p.actor_churn.proc_name().to_owned(),
            partner_churn_state: p.partner_churn.proc_name().to_owned(),
            actor_churned_count: p.actor_churn_count,
            partner_churned_count: p.partner_churn_count,
            actor: LacpInfoStatus::from_info(&p.actor),
            partner: LacpInfoStatus::from_info(&p.partner),
            lacpdu_rx: p.counters.lacpdu_rx,
            lacpdu_tx: p.counters.lacpdu_tx,
            lacpdu_tx_errors,
            marker_rx: p.counters.marker_rx + p.counters.marker_response_rx,
            marker_response_tx: p.counters.marker_response_tx,
            illegal_rx: p.counters.illegal_rx,
            unknown_rx: p.counters.unknown_rx,
            marker_dropped: p.counters.marker_dropped,
            rate_limited_rx: p.counters.rate_limited_rx,
            foreign_rx: p.counters.foreign_rx,
            socket_drops: 0,
            kernel_policed: 0,
        }
    }
}

/// Frames a bond must have sent before [`Status::runtime_warnings`] judges their spread.
pub const SPREAD_MIN_FRAMES: u64 = 1000;

impl Status {
    /// Warnings the running bond's counters reveal: layer2 hashing that sent (nearly) every
    /// frame on one member while others were usable, the sign of traffic towards a single peer
    /// MAC (a router), which layer2 always hashes to the same member.
    pub fn runtime_warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if self.xmit_hash_policy.as_deref() == Some("layer2") {
            let usable: Vec<&MemberStatus> = self
                .members
                .iter()
                .filter(|m| m.mii_status == "up" && m.lacp.as_ref().is_none_or(|l| l.distributing))
                .collect();
            let total: u64 = usable.iter().map(|m| m.tx_packets).sum();
            if let Some(busiest) = usable.iter().max_by_key(|m| m.tx_packets) {
                if usable.len() >= 2
                    && total >= SPREAD_MIN_FRAMES
                    && busiest.tx_packets.saturating_mul(100) >= total.saturating_mul(99)
                {
                    w.push(format!(
                        "layer2 hashing sent {} of {total} frames on {} with {} members usable: \
                         traffic towards a single peer MAC (a router) always takes one member; \
                         xmit_hash_policy=layer3+4 (or layer2+3) spreads it",
                        busiest.tx_packets,
                        busiest.name,
                        usable.len()
                    ));
                }
            }
        }
        w
    }
}

impl Status {
    /// Renders the `/proc/net/bonding/BOND` layout, plus lagd's per-member counters.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "Ethernet Channel Bonding Driver: lagd v{}", self.version);
        let _ = writeln!(s);
        for w in &self.warnings {
            let _ = writeln!(s, "Warning: {w}");
        }
        if !self.warnings.is_empty() {
            let _ = writeln!(s);
        }
        let _ = writeln!(s, "Bonding Mode: {}", self.mode_description);
        if !self.dataplane.path.is_empty() {
            match &self.dataplane.reason {
                Some(r) => {
                    let _ = writeln!(s, "Dataplane: {} ({r})", self.dataplane.path);
                }
                None => {
                    let _ = writeln!(s, "Dataplane: {}", self.dataplane.path);
                }
            }
            if let Some(a) = &self.dataplane.attach {
                let how = if a == "tc" { "tc (clsact)" } else { a.as_str() };
                match &self.dataplane.attach_reason {
                    Some(r) => {
                        let _ = writeln!(s, "Kernel path attachment: {how} ({r})");
                    }
                    None => {
                        let _ = writeln!(s, "Kernel path attachment: {how}");
                    }
                }
            }
            if let Some(i) = &self.dataplane.isolation {
                let _ = writeln!(s, "Member isolation: {i}");
            }
        }
        if let (Some(p), Some(n)) = (&self.xmit_hash_policy, self.xmit_hash_policy_number) {
            let _ = writeln!(s, "Transmit Hash Policy: {p} ({n})");
        }
        if let Some(reselect) = &self.primary_reselect {
            let primary = self.primary.as_deref().unwrap_or("None");
            if self.primary.is_some() {
                let _ = writeln!(s, "Primary Slave: {primary} (primary_reselect {reselect})");
            } else {
                let _ = writeln!(s, "Primary Slave: None");
            }
            let _ = writeln!(
                s,
                "Currently Active Slave: {}",
                self.active.as_deref().unwrap_or("None")
            );
            let _ = writeln!(s, "Failovers: {}", self.failovers);
        }
        let _ = writeln!(s, "MII Status: {}", self.mii_status);
        let _ = writeln!(s, "MII Polling Interval (ms): {}", self.miimon);
        let _ = writeln!(s, "Up Delay (ms): {}", self.updelay);
        let _ = writeln!(s, "Down Delay (ms): {}", self.downdelay);
        let _ = writeln!(s, "Peer Notification Delay (ms): {}", self.peer_notif_delay);
        let _ = writeln!(s, "Carrier Poll Interval (ms): {}", self.carrier_poll_ms);
        if let Some(a) = &self.arp_monitor {
            let _ = writeln!(s, "ARP Polling Interval (ms): {}", a.interval_ms);
            let _ = writeln!(s, "ARP Missed Max: {}", a.missed_max);
            let _ = writeln!(
                s,
                "ARP Validate: {} (arp_all_targets {})",
                a.validate, a.all_targets
            );
            let _ = writeln!(
                s,
                "ARP IP target/s (n.n.n.n form): {}",
                a.ip_targets.join(",")
            );
            let _ = writeln!(
                s,
                "NS IPv6 target/s (xx::xx form): {}",
                a.ns_ip6_targets.join(",")
            );
        }
        let _ = writeln!(
            s,
            "TX Dropped (no usable member): {}",
            self.tx_dropped_no_member
        );
        let t = &self.tables;
        if t.alb_clients_max > 0 {
            let _ = writeln!(
                s,
                "ALB Clients: {} (max {}, {} evicted)",
                t.alb_clients, t.alb_clients_max, t.alb_clients_evicted
            );
        }
        if t.igmp_groups > 0 || t.igmp_groups_evicted > 0 {
            let _ = writeln!(
                s,
                "Multicast Groups Kept: {} (max {}, {} evicted)",
                t.igmp_groups, t.igmp_groups_max, t.igmp_groups_evicted
            );
        }
        if let Some(l) = &self.lacp {
            self.render_lacp(&mut s, l);
        }
        if let Some(st) = &self.stripe {
            let _ = writeln!(s, "Stripe peer: {}", st.peer);
            if let Some(e) = &st.error {
                let _ = writeln!(s, "Stripe error: {e}");
            }
            match self.dataplane.path.as_str() {
                "kernel" => {
                    let _ = writeln!(
                        s,
                        "Stripe in the kernel: TCP striped over the members; other frames \
                         (UDP, ICMP, ...) on one member per flow (layer3+4 hash), not \
                         numbered; lagd numbers ARP, IGMP, neighbour discovery and MLD"
                    );
                }
                "lagd" => {
                    let _ = writeln!(
                        s,
                        "Stripe through lagd: TCP striped and ordered; every other frame \
                         numbered and striped"
                    );
                }
                _ => {}
            }
            let _ = writeln!(
                s,
                "Stripe reorder: delivered {}, reordered {}, lost {} (all members past) {} \
                 (timeout {} us) {} (buffer full), late {}, dropped {}, resyncs {}, held {} (max {})",
                st.delivered,
                st.reordered,
                st.skipped_lost,
                st.skipped_timeout,
                st.timeout_us,
                st.skipped_full,
                st.late,
                st.dropped,
                st.resyncs,
                st.held,
                st.max_held
            );
            let t = &st.tcp;
            let _ = writeln!(
                s,
                "Stripe TCP order: segments {}, in order {}, reordered {}, behind {} (late {}), \
                 lost {} (all members past) {} (timeout {} us) {} (buffer full), resyncs {}, \
                 flows {} (evicted {}), held {} B (max {} B)",
                t.segments,
                t.in_order,
                t.reordered,
                t.behind,
                t.late,
                t.skipped_lost,
                t.skipped_timeout,
                t.timeout_us,
                t.skipped_full,
                t.resyncs,
                t.flows,
                t.flows_evicted,
                t.held_bytes,
                t.max_held_bytes
            );
            if t.kernel_segments + t.taken_over + t.handed_back > 0 {
                let _ = writeln!(
                    s,
                    "Stripe TCP in the kernel: segments delivered {}, rounds held {}, flows \
                     taken at a hole {}, handed back {}",
                    t.kernel_segments, t.kernel_held, t.taken_over, t.handed_back
                );
            }
        }
        if let Some(b) = &self.buckets {
            self.render_buckets(&mut s, b);
        }
        if !self.disabled_members.is_empty() {
            let _ = writeln!(s, "Disabled Slaves: {}", self.disabled_members.join(" "));
        }
        if !self.changes.is_empty() {
            let _ = writeln!(s, "Changes:");
            for c in &self.changes {
                let _ = writeln!(s, "  {c}");
            }
        }
        // The kernel's file has no prio (only `ip -d link` shows it): lagd adds the line when
        // some member has one.
        let prio = self.members.iter().any(|m| m.prio != 0);
        for m in &self.members {
            let _ = writeln!(s);
            let _ = writeln!(s, "Slave Interface: {}", m.name);
            let _ = writeln!(s, "MII Status: {}", m.mii_status);
            match m.speed_mbps {
                Some(v) => {
                    let _ = writeln!(s, "Speed: {v} Mbps");
                }
                None => {
                    let _ = writeln!(s, "Speed: Unknown");
                }
            }
            let _ = writeln!(s, "Duplex: {}", m.duplex);
            let _ = writeln!(s, "Link Failure Count: {}", m.link_failure_count);
            let _ = writeln!(s, "Permanent HW addr: {}", m.perm_hw_addr);
            let _ = writeln!(s, "Slave queue ID: 0");
            if prio {
                let _ = writeln!(s, "Prio: {}", m.prio);
            }
            let _ = writeln!(s, "RX: {} packets, {} bytes", m.rx_packets, m.rx_bytes);
            let _ = writeln!(s, "TX: {} packets, {} bytes", m.tx_packets, m.tx_bytes);
            let drops: Vec<String> = m
                .rx_dropped
                .iter()
                .map(|(reason, n)| format!("{reason} {n}"))
                .collect();
            let _ = writeln!(
                s,
                "Drops: rx {} (socket {}), tx busy {}",
                if drops.is_empty() {
                    "none".to_owned()
                } else {
                    drops.join(", ")
                },
                m.rx_socket_drops,
                m.tx_dropped
            );
            if let Some(l) = &m.lacp {
                match l.aggregator_id {
                    Some(id) => {
                        let _ = writeln!(s, "Aggregator ID: {id}");
                    }
                    None => {
                        let _ = writeln!(s, "Aggregator ID: N/A");
                    }
                }
                let _ = writeln!(s, "Actor Churn State: {}", l.actor_churn_state);
                let _ = writeln!(s, "Partner Churn State: {}", l.partner_churn_state);
                let _ = writeln!(s, "Actor Churned Count: {}", l.actor_churned_count);
                let _ = writeln!(s, "Partner Churned Count: {}", l.partner_churned_count);
                for (title, key, info) in [
                    ("details actor lacp pdu:", "port key", &l.actor),
                    ("details partner lacp pdu:", "oper key", &l.partner),
                ] {
                    let _ = writeln!(s, "{title}");
                    let _ = writeln!(s, "    system priority: {}", info.system_priority);
                    let _ = writeln!(s, "    system mac address: {}", info.system_mac);
                    let _ = writeln!(s, "    {key}: {}", info.key);
                    let _ = writeln!(s, "    port priority: {}", info.port_priority);
                    let _ = writeln!(s, "    port number: {}", info.port);
                    let _ = writeln!(
                        s,
                        "    port state: {} ({})",
                        info.state,
                        info.state_names.join(" ")
                    );
                }
                let _ = writeln!(
                    s,
                    "LACP machines: rx {}, mux {}, {}",
                    l.rx_state, l.mux_state, l.selected
                );
                let _ = writeln!(
                    s,
                    "LACPDUs: rx {} tx {} ({} not sent), markers rx {} responses tx {}, \
                     illegal {}, unknown {}",
                    l.lacpdu_rx,
                    l.lacpdu_tx,
                    l.lacpdu_tx_errors,
                    l.marker_rx,
                    l.marker_response_tx,
                    l.illegal_rx,
                    l.unknown_rx
                );
                let _ = writeln!(
                    s,
                    "Slow protocols dropped: rate-limited {}, foreign held off {}, markers \
                     unanswered {}, socket {}, kernel policer {}",
                    l.rate_limited_rx,
                    l.foreign_rx,
                    l.marker_dropped,
                    l.socket_drops,
                    l.kernel_policed
                );
            }
        }
        s
    }
}

impl Status {
    /// The `802.3ad info` section, line for line as `/proc/net/bonding` prints it (the
    /// CAP_NET_ADMIN variant, with the system and the active aggregator), then lagd's fallback.
    fn render_lacp(&self, s: &mut String, l: &LacpStatus) {
        let _ = writeln!(s);
        let _ = writeln!(s, "802.3ad info");
        let _ = writeln!(
            s,
            "LACP active: {}",
            if l.lacp_active { "on" } else { "off" }
        );
        let _ = writeln!(s, "LACP rate: {}", l.lacp_rate);
        let _ = writeln!(s, "Min links: {}", l.min_links);
        let _ = writeln!(
            s,
            "Aggregator selection policy (ad_select): {}",
            l.ad_select
        );
        let _ = writeln!(s, "System priority: {}", l.system_priority);
        let _ = writeln!(s, "System MAC address: {}", l.system_mac);
        match &l.active_aggregator {
            Some(a) => {
                let _ = writeln!(s, "Active Aggregator Info:");
                let _ = writeln!(s, "\tAggregator ID: {}", a.id);
                let _ = writeln!(s, "\tNumber of ports: {}", a.number_of_ports);
                let _ = writeln!(s, "\tActor Key: {}", a.actor_key);
                let _ = writeln!(s, "\tPartner Key: {}", a.partner_key);
                let _ = writeln!(s, "\tPartner Mac Address: {}", a.partner_mac);
            }
            None => {
                let _ = writeln!(s, "bond {} has no active aggregator", self.bond);
            }
        }
        match (&l.fallback_member, l.lacp_fallback_ms) {
            (Some(m), ms) => {
                let _ = writeln!(
                    s,
                    "LACP Fallback (lacp_fallback {ms} ms): active, {m} carries traffic as in \
                     active-backup"
                );
            }
            (None, 0) => {
                let _ = writeln!(s, "LACP Fallback (lacp_fallback): off");
            }
            (None, ms) => {
                let _ = writeln!(s, "LACP Fallback (lacp_fallback {ms} ms): inactive");
            }
        }
    }

    /// The bucket table in the shape of Open vSwitch's `bond/show`: per member its buckets with
    /// load, then the rebalancer's recent moves.
    fn render_buckets(&self, s: &mut String, b: &BucketsStatus) {
        let _ = writeln!(s);
        let next = b
            .next_rebalance_in_ms
            .map_or_else(|| "never".to_owned(), |ms| format!("in {ms} ms"));
        let _ = writeln!(
            s,
            "Bucket Distribution: 256 buckets, rebalance interval {} ms, next rebalance {next}",
            b.rebalance_interval_ms
        );
        if let Some(p) = b.busiest_over_mean_permille {
            let _ = writeln!(
                s,
                "Load Imbalance (busiest/mean): {}.{:03}",
                p / 1000,
                p % 1000
            );
        }
        let _ = writeln!(
            s,
            "Bucket Moves: rebalance {}, elephant {}, member left {}, member joined {} \
             ({} waited for an idle gap, {} forced; {} rebalancings)",
            b.moved_rebalance,
            b.moved_elephant,
            b.moved_left,
            b.moved_joined,
            b.moves_deferred,
            b.moves_forced,
            b.rebalances
        );
        for m in &b.members {
            let _ = writeln!(
                s,
                "member {}: weight {}, {} buckets (target {}), load {} kB/s ({}.{}%)",
                m.name,
                m.weight,
                m.buckets,
                m.target_buckets,
                m.load_bytes_per_s / 1000,
                m.load_permille / 10,
                m.load_permille % 10
            );
            for k in b
                .buckets
                .iter()
                .filter(|k| k.member == m.name && (k.load_bytes_per_s > 0 || k.pending.is_some()))
            {
                let pending = k
                    .pending
                    .as_deref()
                    .map(|p| format!(", moving to {p} at its next idle gap"))
                    .unwrap_or_default();
                let _ = writeln!(
                    s,
                    "  hash {}: {} kB/s load{pending}",
                    k.bucket,
                    k.load_bytes_per_s / 1000
                );
            }
        }
        if !b.recent_moves.is_empty() {
            let _ = writeln!(s, "Recent Bucket Moves:");
            for m in &b.recent_moves {
                let _ = writeln!(s, "  {m}");
            }
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    fn sample() -> Status {
        Status {
            version: "0.1.0".into(),
            bond: "bond0".into(),
            mac: "02:00:00:00:00:01".into(),
            mode: "active-backup".into(),
            mode_description: "fault-tolerance (active-backup)".into(),
            xmit_hash_policy: None,
            xmit_hash_policy_number: None,
            mii_status: "up".into(),
            miimon: 100,
            carrier_poll_ms: 10,
            updelay: 200,
            downdelay: 0,
            peer_notif_delay: 0,
            primary: Some("eth1".into()),
            primary_reselect: Some("always".into()),
            active: Some("eth1".into()),
            failovers: 3,
            warnings: vec!["lacp_rate=slow: example".into()],
            tx_dropped_no_member: 0,
            lacp: None,
            buckets: None,
            stripe: None,
            dataplane: DataplaneStatus::default(),
            disabled_members: Vec::new(),
            changes: Vec::new(),
            tables: TablesStatus {
                igmp_groups: 3,
                igmp_groups_max: 64,
                igmp_groups_evicted: 1,
                ..TablesStatus::default()
            },
            arp_monitor: Some(ArpMonitorStatus {
                interval_ms: 200,
                missed_max: 2,
                validate: "all".into(),
                all_targets: "any".into(),
                ip_targets: vec!["192.0.2.1".into()],
                ns_ip6_targets: vec!["2001:db8::1".into(), "fe80::1".into()],
            }),
            members: vec![MemberStatus {
                name: "eth1".into(),
                mii_status: "up".into(),
                speed_mbps: Some(10000),
                duplex: "full".into(),
                link_failure_count: 2,
                perm_hw_addr: "02:00:00:00:00:02".into(),
                active: true,
                prio: 0,
                rx_packets: 5,
                rx_bytes: 500,
                tx_packets: 6,
                tx_bytes: 600,
                rx_dropped: vec![("inactive_member".into(), 3)],
                tx_dropped: 0,
                rx_socket_drops: 0,
                kernel_tx_packets: 0,
                kernel_rx_packets: 0,
                lacp: None,
            }],
        }
    }

    #[test]
    fn renders_how_the_programs_are_attached() {
        let kernel = Status {
            dataplane: DataplaneStatus {
                path: "kernel".into(),
                reason: None,
                attach: Some("tc".into()),
                attach_reason: Some("tcx not available (bpf(BPF_LINK_CREATE): EINVAL)".into()),
                isolation: None,
            },
            ..sample()
        };
        let text = kernel.render();
        assert!(
            text.lines().any(|l| l
                == "Kernel path attachment: tc (clsact) (tcx not available \
                    (bpf(BPF_LINK_CREATE): EINVAL))"),
            "{text}"
        );
        assert!(!text.contains("Member isolation"), "{text}");
        let json = serde_json::to_value(&kernel).unwrap();
        assert_eq!(json["dataplane"]["attach"], "tc");
        assert_eq!(json["dataplane"].get("isolation"), None);
        let back: Status = serde_json::from_value(json).unwrap();
        assert_eq!(back.dataplane, kernel.dataplane);
        let lagd = Status {
            dataplane: DataplaneStatus {
                path: "lagd".into(),
                reason: Some("fastpath=off".into()),
                attach: None,
                attach_reason: None,
                isolation: Some("tcx ingress drop (fastpath_attach=tcx)".into()),
            },
            ..sample()
        };
        let text = lagd.render();
        assert!(
            text.lines()
                .any(|l| l == "Member isolation: tcx ingress drop (fastpath_attach=tcx)"),
            "{text}"
        );
        assert!(!text.contains("Kernel path attachment"), "{text}");
    }

    #[test]
    fn renders_the_proc_net_bonding_shape() {
        let text = sample().render();
        let want = [
            "Bonding Mode: fault-tolerance (active-backup)",
            "Primary Slave: eth1 (primary_reselect always)",
            "Currently Active Slave: eth1",
            "Failovers: 3",
            "Warning: lacp_rate=slow: example",
            "MII Status: up",
            "MII Polling Interval (ms): 100",
            "Up Delay (ms): 200",
            "Slave Interface: eth1",
            "Speed: 10000 Mbps",
            "Duplex: full",
            "Link Failure Count: 2",
            "Permanent HW addr: 02:00:00:00:00:02",
            "Drops: rx inactive_member 3 (socket 0), tx busy 0",
            "Multicast Groups Kept: 3 (max 64, 1 evicted)",
            "ARP Polling Interval (ms): 200",
            "ARP Missed Max: 2",
            "ARP Validate: all (arp_all_targets any)",
            "ARP IP target/s (n.n.n.n form): 192.0.2.1",
            "NS IPv6 target/s (xx::xx form): 2001:db8::1,fe80::1",
        ];
        for line in want {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
        assert!(!text.contains("Transmit Hash Policy"));
        // No member has a prio: no line for it (the kernel's file never has one).
        assert!(!text.contains("Prio:"), "{text}");
        let mut with_prio = sample();
        with_prio.members[0].prio = -50;
        let text_prio = with_prio.render();
        assert!(text_prio.lines().any(|l| l == "Prio: -50"), "{text_prio}");
        // Not balance-alb: no client table.
        assert!(!text.contains("ALB Clients"));
        // Without the ARP monitor, none of its lines.
        let quiet = Status {
            arp_monitor: None,
            ..sample()
        };
        assert!(!quiet.render().contains("ARP"), "{}", quiet.render());
    }

    #[test]
    fn renders_stripe_reorder_and_tcp_lines_whole() {
        let mut s = sample();
        s.mode = "stripe".into();
        s.stripe = Some(StripeStatus {
            peer: "m0, m1".into(),
            error: None,
            striping: true,
            delivered: 1,
            reordered: 2,
            skipped_lost: 3,
            skipped_timeout: 4,
            timeout_us: 3000,
            skipped_full: 5,
            late: 6,
            dropped: 7,
            resyncs: 8,
            held: 9,
            max_held: 10,
            tcp: StripeTcpStatus {
                segments: 11,
                in_order: 12,
                reordered: 13,
                behind: 14,
                late: 15,
                skipped_lost: 16,
                skipped_timeout: 17,
                skipped_full: 18,
                resyncs: 19,
                flows: 20,
                flows_evicted: 21,
                held_bytes: 22,
                max_held_bytes: 23,
                timeout_us: 6000,
                kernel_segments: 24,
                kernel_held: 25,
                taken_over: 26,
                handed_back: 27,
            },
        });
        s.dataplane.path = "lagd".into();
        assert!(
            s.render().lines().any(|l| l
                == "Stripe through lagd: TCP striped and ordered; every other frame numbered \
                    and striped"),
            "{}",
            s.render()
        );
        s.dataplane.path = "kernel".into();
        let text = s.render();
        assert!(!text.contains("Stripe through lagd"), "{text}");
        for line in [
            "Stripe peer: m0, m1",
            "Stripe in the kernel: TCP striped over the members; other frames (UDP, ICMP, ...) \
             on one member per flow (layer3+4 hash), not numbered; lagd numbers ARP, IGMP, \
             neighbour discovery and MLD",
            "Stripe reorder: delivered 1, reordered 2, lost 3 (all members past) 4 (timeout 3000 \
             us) 5 (buffer full), late 6, dropped 7, resyncs 8, held 9 (max 10)",
            "Stripe TCP order: segments 11, in order 12, reordered 13, behind 14 (late 15), lost \
             16 (all members past) 17 (timeout 6000 us) 18 (buffer full), resyncs 19, flows 20 \
             (evicted 21), held 22 B (max 23 B)",
            "Stripe TCP in the kernel: segments delivered 24, rounds held 25, flows taken at a \
             hole 26, handed back 27",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
    }

    #[test]
    fn layer2_towards_one_peer_warns_at_run_time() {
        let mut s = sample();
        s.mode = "balance-xor".into();
        s.xmit_hash_policy = Some("layer2".into());
        let mut other = s.members[0].clone();
        other.name = "eth0".into();
        s.members.push(other);
        s.members[0].tx_packets = 5000;
        s.members[1].tx_packets = 10;
        let w = s.runtime_warnings();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("5000 of 5010 frames on eth1"), "{w:?}");
        // Spread traffic, another policy, one usable member or too few frames: no warning.
        let mut spread = s.clone();
        spread.members[1].tx_packets = 3000;
        assert!(spread.runtime_warnings().is_empty());
        let mut l34 = s.clone();
        l34.xmit_hash_policy = Some("layer3+4".into());
        assert!(l34.runtime_warnings().is_empty());
        let mut one = s.clone();
        one.members[1].mii_status = "down".into();
        assert!(one.runtime_warnings().is_empty());
        let mut few = s.clone();
        few.members[0].tx_packets = 500;
        few.members[1].tx_packets = 0;
        assert!(few.runtime_warnings().is_empty());
    }

    /// An 802.3ad bond with one member in an aggregator of two ports.
    fn lacp_sample() -> Status {
        let info = |sys: &str, port| LacpInfoStatus {
            system_priority: 65535,
            system_mac: sys.into(),
            key: 15,
            port_priority: 255,
            port,
            state: 63,
            state_names: vec!["activity".into(), "timeout".into()],
        };
        let mut s = sample();
        s.mode = "802.3ad".into();
        s.mode_description = "IEEE 802.3ad Dynamic link aggregation".into();
        s.xmit_hash_policy = Some("layer3+4".into());
        s.xmit_hash_policy_number = Some(1);
        s.primary = None;
        s.primary_reselect = None;
        s.active = None;
        s.lacp = Some(LacpStatus {
            lacp_active: true,
            lacp_rate: "fast".into(),
            min_links: 2,
            ad_select: "bandwidth".into(),
            system_priority: 100,
            system_mac: "02:aa:00:00:00:01".into(),
            active_aggregator: Some(AggregatorStatus {
                id: 3,
                number_of_ports: 2,
                actor_key: 15,
                partner_key: 9,
                partner_mac: "02:bb:00:00:00:01".into(),
            }),
            fallback_member: None,
            lacp_fallback_ms: 0,
        });
        s.members[0].lacp = Some(MemberLacp {
            aggregator_id: Some(3),
            collecting: true,
            distributing: true,
            rx_state: "CURRENT".into(),
            mux_state: "COLLECTING_DISTRIBUTING".into(),
            selected: "SELECTED".into(),
            actor_churn_state: "none".into(),
            partner_churn_state: "none".into(),
            actor_churned_count: 0,
            partner_churned_count: 0,
            actor: info("02:aa:00:00:00:01", 1),
            partner: info("02:bb:00:00:00:01", 7),
            lacpdu_rx: 4,
            lacpdu_tx: 5,
            lacpdu_tx_errors: 2,
            marker_rx: 0,
            marker_response_tx: 0,
            illegal_rx: 0,
            unknown_rx: 0,
            marker_dropped: 3,
            rate_limited_rx: 40,
            foreign_rx: 2,
            socket_drops: 5,
            kernel_policed: 7,
        });
        s
    }

    /// `n` lines of `text` from the one equal to `first`.
    fn block<'a>(text: &'a str, first: &str, n: usize) -> Vec<&'a str> {
        let lines: Vec<&str> = text.lines().collect();
        let at = lines
            .iter()
            .position(|l| *l == first)
            .unwrap_or_else(|| panic!("no {first:?} in\n{text}"));
        lines[at..(at + n).min(lines.len())].to_vec()
    }

    #[test]
    fn renders_the_802_3ad_info_section_as_the_kernel_does() {
        let text = lacp_sample().render();
        let want = [
            "802.3ad info",
            "LACP active: on",
            "LACP rate: fast",
            "Min links: 2",
            "Aggregator selection policy (ad_select): bandwidth",
            "System priority: 100",
            "System MAC address: 02:aa:00:00:00:01",
            "Active Aggregator Info:",
            "\tAggregator ID: 3",
            "\tNumber of ports: 2",
            "\tActor Key: 15",
            "\tPartner Key: 9",
            "\tPartner Mac Address: 02:bb:00:00:00:01",
            "LACP Fallback (lacp_fallback): off",
        ];
        assert_eq!(block(&text, "802.3ad info", want.len()), want, "{text}");
        // A blank line before it, and it is part of the bond section (before any member).
        let lines: Vec<&str> = text.lines().collect();
        let info = lines.iter().position(|l| *l == "802.3ad info").unwrap();
        assert_eq!(lines[info - 1], "");
        let slave = lines
            .iter()
            .position(|l| l.starts_with("Slave Interface:"))
            .unwrap();
        assert!(info < slave, "{text}");
        // The member's own 802.3ad lines are still there, with the LACPDUs not sent.
        assert!(text.lines().any(|l| l == "Aggregator ID: 3"), "{text}");
        assert!(
            text.lines().any(|l| l
                == "LACPDUs: rx 4 tx 5 (2 not sent), markers rx 0 responses tx 0, illegal 0, \
                    unknown 0"),
            "{text}"
        );
        // And what was dropped before or instead of an answer.
        assert!(
            text.lines().any(|l| l
                == "Slow protocols dropped: rate-limited 40, foreign held off 2, markers \
                    unanswered 3, socket 5, kernel policer 7"),
            "{text}"
        );
        // Other modes have no such section.
        assert!(!sample().render().contains("802.3ad info"));
    }

    #[test]
    fn renders_no_active_aggregator_passive_and_fallback_states() {
        let mut s = lacp_sample();
        let l = s.lacp.as_mut().unwrap();
        l.lacp_active = false;
        l.lacp_rate = "slow".into();
        l.active_aggregator = None;
        l.lacp_fallback_ms = 5000;
        let text = s.render();
        assert_eq!(
            block(&text, "LACP active: off", 8),
            [
                "LACP active: off",
                "LACP rate: slow",
                "Min links: 2",
                "Aggregator selection policy (ad_select): bandwidth",
                "System priority: 100",
                "System MAC address: 02:aa:00:00:00:01",
                "bond bond0 has no active aggregator",
                "LACP Fallback (lacp_fallback 5000 ms): inactive",
            ],
            "{text}"
        );
        assert!(!text.contains("Active Aggregator Info"), "{text}");
        s.lacp.as_mut().unwrap().fallback_member = Some("eth1".into());
        let text = s.render();
        assert!(
            text.lines().any(|l| l
                == "LACP Fallback (lacp_fallback 5000 ms): active, eth1 carries traffic as in \
                    active-backup"),
            "{text}"
        );
    }

    #[test]
    fn failures_are_reported_at_most_once_per_interval_with_the_count_since() {
        let every = Duration::from_secs(10);
        let at = Instant::from_millis;
        let mut f = FailureCount::default();
        assert_eq!(f.total(), 0);
        assert_eq!(f.record(at(1_000), every), Some(1));
        assert_eq!(f.record(at(1_001), every), None);
        assert_eq!(f.record(at(10_999), every), None);
        // Due again 10 s after the last report: the three failures since it.
        assert_eq!(f.record(at(11_000), every), Some(3));
        assert_eq!(f.record(at(12_000), every), None);
        assert_eq!(f.total(), 5);
        // A failure long after the last report is reported at once, alone.
        assert_eq!(f.record(at(100_000), every), Some(2));
        assert_eq!(f.record(at(200_000), every), Some(1));
        assert_eq!(f.total(), 7);
    }

    #[test]
    fn json_round_trip() {
        let s = sample();
        let json = serde_json::to_string(&s).unwrap();
        assert!(json.contains("\"mii_status\":\"up\""));
        let back: Status = serde_json::from_str(&json).unwrap();
        assert_eq!(back, s);
        let s = lacp_sample();
        let json = serde_json::to_string(&s).unwrap();
        assert!(json.contains("\"lacp_fallback_ms\":0"), "{json}");
        let back: Status = serde_json::from_str(&json).unwrap();
        assert_eq!(back, s);
        assert!(json.contains("\"lacpdu_tx_errors\":2"), "{json}");
        // A status from a lagd without the newer fields still reads (as zero).
        let old = json
            .replace(",\"lacp_fallback_ms\":0", "")
            .replace(",\"lacpdu_tx_errors\":2", "");
        let mut want = s.clone();
        want.members[0].lacp.as_mut().unwrap().lacpdu_tx_errors = 0;
        assert_eq!(serde_json::from_str::<Status>(&old).unwrap(), want);
    }
}
