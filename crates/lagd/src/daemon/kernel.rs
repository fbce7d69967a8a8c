//! The kernel fast path as the daemon runs it: the tcx programs attached to the TAP and the
//! members, and the table they read kept equal to the bond's distribution.
//!
//! The decisions stay in `lagd-proto`: [`Bond::kernel_refusal`] says whether the programs can
//! forward as the bond decides, [`Bond::distribution`] is what they read. This module only
//! translates that table into the programs' terms and swaps it in whole whenever its generation
//! changes (a member up or down, a failover, a LACP change), so a failover is one map update.

use std::io;
use std::time::Duration;

use lagd_proto::balance::BucketSample;
use lagd_proto::bond::{
    Bond, DistributionTable, FastPathAttach, FastPathMode, FastPathReads, PortId, TxRule,
};
use lagd_proto::hash::HashPolicy;
use lagd_proto::stripe::{FlowKey, OrderedRx};
use lagd_proto::time::Instant;
use lagd_sys::clsact::Attach;
use lagd_sys::fastpath::{
    Attachment, FastPath, Heartbeat, MAX_MEMBERS, NO_PORT, PortCounters, Rule, STRIPE_RX_SLOTS,
    StripeRxTable, Table, TlbMacs, abi, monotonic_ns,
};
use lagd_sys::isolate::TcxUnavailable;

/// The failed call and its errno of a [`TcxUnavailable`] error (for the status line).
pub(crate) fn tcx_errno(e: &io::Error) -> String {
    match TcxUnavailable::of(e) {
        Some(t) => format!("{}: {}", t.call(), io::Error::from_raw_os_error(t.errno())),
        None => e.to_string(),
    }
}

/// Attaches with `attach` as `how` says: tcx or tc only, or (auto) tcx and, where the kernel
/// has no tcx ([`TcxUnavailable`]), tc. Returns what `attach` made and why that attachment, for
/// the status and the log. Any other error is returned as it is (no fallback: a missing
/// privilege is no reason to try the other way).
pub(crate) fn attach_as<T>(
    how: FastPathAttach,
    mut attach: impl FnMut(Attach) -> io::Result<T>,
) -> io::Result<(T, String)> {
    match how {
        FastPathAttach::Tcx => attach(Attach::Tcx).map(|t| (t, "fastpath_attach=tcx".into())),
        FastPathAttach::Tc => attach(Attach::Tc).map(|t| (t, "fastpath_attach=tc".into())),
        FastPathAttach::Auto => match attach(Attach::Tcx) {
            Ok(t) => Ok((t, "fastpath_attach=auto, the kernel has tcx".into())),
            Err(e) if TcxUnavailable::of(&e).is_some() => {
                attach(Attach::Tc).map(|t| (t, format!("tcx not available ({})", tcx_errno(&e))))
            }
            Err(e) => Err(e),
        },
    }
}

/// The programs' number for `policy` (`enum policy` in `bpf/lagd_shared.h`: the kernel's, or
/// lagd's for the OVS hashes); the programs compute every policy.
fn policy_number(policy: HashPolicy) -> u32 {
    match policy {
        HashPolicy::Layer2 => abi::POLICY_LAYER2,
        HashPolicy::Layer34 => abi::POLICY_LAYER34,
        HashPolicy::Layer23 => abi::POLICY_LAYER23,
        HashPolicy::Encap23 => abi::POLICY_ENCAP23,
        HashPolicy::Encap34 => abi::POLICY_ENCAP34,
        HashPolicy::VlanSrcMac => abi::POLICY_VLAN_SRCMAC,
        HashPolicy::OvsSlb => abi::POLICY_OVS_SLB,
        HashPolicy::OvsTcp => abi::POLICY_OVS_TCP,
    }
}

// What lagd-proto's stripe computes for the programs is sized as the header sizes it.
const _: () = assert!(lagd_proto::stripe::tx::SLOT_BYTES == 1 << abi::STRIPE_SLOT_SHIFT);
const _: () = assert!(lagd_proto::stripe::tcp::KERNEL_SLOTS == STRIPE_RX_SLOTS);

/// How long the programs forward after lagd's last heartbeat: past it they take lagd for gone
/// (killed, and no lagd took the programs over) and drop every frame, so the host and the
/// partner find the bond delivering nothing rather than a table nobody keeps. The LACP short
/// timeout: by then a partner at the fast rate has taken the members out of its aggregate
/// anyway, and a restart within it loses nothing (see docs/design.md, "While lagd is away").
/// The programs' `HEARTBEAT_BOUND_MS` (`bpf/lagd_shared.h`).
pub(crate) const ORPHAN_TIMEOUT: Duration = Duration::from_millis(abi::HEARTBEAT_BOUND_MS as u64);
/// How often lagd renews the heartbeat (the loop wakes for it): well inside
/// [`ORPHAN_TIMEOUT`], so that only a lagd that stopped running misses it, and inside
/// `HEARTBEAT_AWAY_MS`, after which the programs take lagd for away and handle its frames
/// (the host's ARP and neighbour discovery) themselves.
pub(crate) const BEAT_EVERY: Duration = Duration::from_millis(200);
const _: () = assert!(abi::HEARTBEAT_AWAY_MS < abi::HEARTBEAT_BOUND_MS);
const _: () = assert!(4 * BEAT_EVERY.as_millis() <= abi::HEARTBEAT_AWAY_MS as u128);

/// The programs, loaded, and (once [`Kernel::go_live`] ran) attached, and the generation of
/// the table they read.
///
/// Start-up keeps one order: [`Choice::decide`] loads the programs (nothing attached), each
/// member opened is recorded ([`Kernel::attach_member`]), then [`Kernel::go_live`] writes the
/// first real table and only then attaches the TAP's program and the members'. A hook thus
/// never runs these programs with an empty table: on a restart or an upgrade the earlier
/// lagd's program (in the tcx link this one updates, or the clsact filter it replaces) keeps
/// forwarding with the earlier table until the new program takes its place.
pub(crate) struct Kernel {
    fp: FastPath,
    /// The last lagd's heartbeat maps, passed by the service manager: renewed until this
    /// lagd's programs have taken the hooks (see [`Kernel::inherit`]).
    inherited: Vec<Heartbeat>,
    tap: Option<Attachment>,
    /// How the programs are to be attached (`fastpath_attach`).
    how: FastPathAttach,
    /// How the programs are attached, and why (`None` until [`Kernel::go_live`]).
    attach: Option<(Attach, String)>,
    /// Per member position, its program (`None`: not attached yet, or the member is gone).
    members: Vec<Option<Attachment>>,
    tap_ifindex: u32,
    ifindexes: Vec<u32>,
    generation: Option<u64>,
    /// Per member position, its confirmed LACP partner's MAC (see `follow_partner`).
    slow_partners: [Option<[u8; 6]>; MAX_MEMBERS],
    /// `slow_partners` changed since the table was last written.
    partners_changed: bool,
    /// The bond's and the members' MACs the table was last written with (balance-tlb's
    /// rewrites; they can change without the distribution's generation).
    macs: Option<TlbMacs>,
    /// The programs' bucket byte counters at the last sample (they only grow).
    bucket_bytes: Vec<u64>,
    /// What the members' program hands lagd instead of forwarding it, fixed at start
    /// ([`Bond::fast_path_reads`]): the members' ARP (the ARP monitor runs, and every frame
    /// the programs see on a member counts as heard; or balance-alb learns its clients from
    /// them), and with a receiver that orders TCP ([`StripeRx`]) what it does not deliver.
    reads: FastPathReads,
    /// The table last written sends the members' neighbour solicitations and advertisements
    /// to lagd ([`Bond::wants_member_ndisc`]; they follow the options, live).
    ndisc: bool,
    /// Per member position: frames the members' program saw (delivered or dropped) when last
    /// read, for the ARP monitor.
    rx_seen: Vec<u64>,
    /// Broadcast: this kernel's TCP wants its clones deferred
    /// ([`lagd_sys::fastpath::defer_tcp_clones_on`] of the running release).
    defer_tcp_clones: bool,
}

/// Stripe's receive table shared with the members' program, by flow: the protocol on its
/// slots is lagd-sys's ([`StripeRxTable`]); this names the slot and key words of a flow.
pub(crate) struct StripeRx {
    table: StripeRxTable,
}

impl StripeRx {
    /// The slot of `key` and its key words; `None` for a flow the program never delivers (it
    /// takes untagged frames only).
    fn slot(key: &FlowKey) -> Option<(usize, [u32; 10])> {
        (key.tag & 0x0fff == 0).then(|| (key.kernel_slot(), key.kernel_words()))
    }

    /// Segments the program delivered, and rounds it sent segments ahead of a hole back
    /// through their member's queue, through every slot.
    pub(crate) fn totals(&self) -> (u64, u64) {
        self.table.totals()
    }
}

/// The receive table is the bond's ordered receive path: stripe's TCP resequencer takes flows
/// from the program and hands them back through it.
impl OrderedRx for StripeRx {
    /// The program stops delivering `key`; the next sequence number if it was delivering it.
    fn take_over(&mut self, key: &FlowKey) -> Option<u32> {
        let (slot, words) = Self::slot(key)?;
        self.table.take_over(slot, &words)
    }

    /// The program delivers `key` from `next` on, if its slot is the flow's, free, or idle.
    fn hand_back(&mut self, key: &FlowKey, next: u32) -> bool {
        Self::slot(key).is_some_and(|(slot, words)| self.table.hand_back(slot, &words, next))
    }
}

/// Which path the daemon takes, decided before any member is touched.
pub(crate) enum Choice {
    /// The kernel programs, loaded and attached to the TAP.
    Kernel(Box<Kernel>),
    /// Every frame through lagd, and why.
    Lagd(String),
}

impl Choice {
    /// Decides the path for `bond` (no member added yet) over `members` members and the TAP
    /// `tap_ifindex`: the kernel where `fastpath` and the bond allow it and the programs load
    /// and attach. `Err` only with `fastpath=on`, naming what stands in the way.
    pub(crate) fn decide(bond: &Bond, members: usize, tap_ifindex: u32) -> Result<Self, String> {
        let mode = bond.options().fastpath;
        if mode == FastPathMode::Off {
            return Ok(Self::Lagd("fastpath=off".into()));
        }
        let refusal = if members > MAX_MEMBERS {
            Some(format!("more than {MAX_MEMBERS} members"))
        } else {
            bond.kernel_refusal(MAX_MEMBERS).map(str::to_owned)
        };
        let attempt = match refusal {
            Some(r) => Err(r),
            None => Kernel::start(
                tap_ifindex,
                bond.fast_path_reads(),
                bond.options().fastpath_attach,
            )
            .map_err(|e| format!("the kernel programs could not be loaded or attached: {e}")),
        };
        match (attempt, mode) {
            (Ok(k), _) => Ok(Self::Kernel(Box::new(k))),
            (Err(why), FastPathMode::On) => Err(format!("fastpath=on: {why}")),
            (Err(why), _) => Ok(Self::Lagd(why)),
        }
    }
}

impl Kernel {
    fn start(tap_ifindex: u32, reads: FastPathReads, how: FastPathAttach) -> io::Result<Self> {
        // Every frame to lagd until the first real table ([`Kernel::go_live`] writes it before
        // anything is attached; this one is only what a map never written would read). It goes
        // in while the programs are verified: putting a table into the programs' map costs an
        // RCU grace period (10-20 ms here), which a restart would otherwise wait for with the
        // bond down; the first real one is then written into it in place (`sync`).
        let fp = FastPath::load_with_table(&Table::lagd_only(tap_ifindex))?;
        // The heartbeat before anything is attached: programs put into an earlier lagd's links
        // (or filters) forward at once, and must not find their deadline passed.
        fp.set_alive_until(alive_until())?;
        Ok(Self {
            fp,
            inherited: Vec::new(),
            how,
            attach: None,
            tap: None,
            members: Vec::new(),
            tap_ifindex,
            ifindexes: Vec::new(),
            generation: None,
            slow_partners: [None; MAX_MEMBERS],
            partners_changed: false,
            macs: None,
            bucket_bytes: vec![0; 256],
            reads,
            ndisc: false,
            rx_seen: Vec::new(),
            defer_tcp_clones: lagd_sys::fastpath::defer_tcp_clones_on(
                std::fs::read_to_string("/proc/sys/kernel/osrelease")
                    .unwrap_or_default()
                    .trim(),
            ),
        })
    }

    /// Renews the heartbeat (the loop does, every [`BEAT_EVERY`]: `Timer::Heartbeat`): the
    /// programs forward until [`ORPHAN_TIMEOUT`] from now.
    pub(crate) fn beat(&mut self) -> io::Result<()> {
        self.fp.set_alive_until(alive_until())
    }

    /// Takes the last lagd's heartbeat maps (renewed already, before these programs loaded):
    /// [`Kernel::go_live`] renews them once more before it attaches anything, since the
    /// programs that read them forward until then, and lets go of them once these programs
    /// have taken every hook.
    pub(crate) fn inherit(&mut self, heartbeats: Vec<Heartbeat>) {
        self.inherited = heartbeats;
    }

    /// The heartbeat map of these programs, for the service manager's store.
    pub(crate) fn heartbeat(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(self.fp.heartbeat())
    }

    /// The tcx links of the TAP's and the members' programs (for the service manager's store).
    pub(crate) fn tcx_links(&self) -> impl Iterator<Item = std::os::fd::BorrowedFd<'_>> {
        self.tap
            .iter()
            .chain(self.members.iter().flatten())
            .filter_map(Attachment::tcx_link)
    }

    /// How the programs are attached, and why (`None` before [`Kernel::go_live`]).
    pub(crate) fn attachment(&self) -> Option<(Attach, &str)> {
        self.attach.as_ref().map(|(a, why)| (*a, why.as_str()))
    }

    /// Writes `bond`'s table (every configured member recorded by [`Kernel::attach_member`],
    /// its port in the bond, LACP resumed), then attaches the TAP's program and each member's,
    /// in that order. Until then the hooks run what they had: nothing on a fresh start (the
    /// host's frames queue on the TAP for lagd, the members' go to their stacks, as the table
    /// that sent every frame to lagd did before), the earlier lagd's programs with its table on
    /// a restart or an upgrade. An error fails the start (what was attached is in `self`, and
    /// detached when it is dropped with the rest of the failed start).
    pub(crate) fn go_live(&mut self, bond: &Bond) -> io::Result<()> {
        // The last lagd's programs forward until these take their hooks (members' set-up and
        // the first table's write came after the start renewed their deadline).
        super::handover::renew_live(&self.inherited, alive_until());
        // Writes only what the last wake's sync has not written yet (or failed to): the first
        // table was never written before (`generation` starts out `None`).
        self.sync(bond)?;
        let tap_ifindex = self.tap_ifindex;
        let (tap, why) = attach_as(self.how, |a| self.fp.attach_tap(tap_ifindex, a))?;
        if tap.replaced() > 0 {
            tracing::info!(
                "the TAP's egress had {} filter(s) of an earlier lagd: replaced",
                tap.replaced()
            );
        }
        let how = tap.how();
        self.attach = Some((how, why));
        self.tap = Some(tap);
        for i in 0..self.ifindexes.len() {
            let ifindex = self.ifindexes[i];
            if ifindex != 0 && self.members[i].is_none() {
                self.members[i] = Some(self.attach_one(ifindex, how)?);
            }
        }
        // Every hook runs these programs now.
        self.inherited.clear();
        Ok(())
    }

    /// Whether attaching the TAP's program added its clsact qdisc, and the member positions
    /// where attaching added theirs.
    pub(crate) fn added_qdiscs(&self) -> (bool, Vec<usize>) {
        let members = self
            .members
            .iter()
            .enumerate()
            .filter(|(_, a)| a.as_ref().is_some_and(Attachment::added_qdisc))
            .map(|(i, _)| i)
            .collect();
        (self.tap_added_qdisc(), members)
    }

    fn attach_one(&self, ifindex: u32, how: Attach) -> io::Result<Attachment> {
        let a = self.fp.attach_member(ifindex, how)?;
        if a.replaced() > 0 {
            tracing::info!(
                ifindex,
                "replaced a filter of an earlier lagd on the member's ingress"
            );
        }
        Ok(a)
    }

    /// Whether attaching the TAP's program added the TAP's clsact qdisc.
    pub(crate) fn tap_added_qdisc(&self) -> bool {
        self.tap.as_ref().is_some_and(Attachment::added_qdisc)
    }

    /// Whether attaching member `port`'s program added its clsact qdisc.
    pub(crate) fn member_added_qdisc(&self, port: usize) -> bool {
        self.members
            .get(port)
            .and_then(Option::as_ref)
            .is_some_and(Attachment::added_qdisc)
    }

    /// Detaches every program now (clsact filters are deleted), reporting what failed.
    pub(crate) fn detach(&mut self) -> Vec<String> {
        let mut failed = Vec::new();
        for a in self.members.drain(..).flatten().chain(self.tap.take()) {
            let ifindex = a.ifindex();
            if let Err(e) = a.detach() {
                failed.push(format!("ifindex {ifindex}: {e}"));
            }
        }
        failed
    }

    /// The member at position `ifindexes.len()`: before [`Kernel::go_live`] it is recorded,
    /// and go_live attaches its program after writing the table; after it (a member added at
    /// run time) the program is attached now, and the table that names the member is written
    /// right after, by the next [`Kernel::sync`] (the loop's, at once): the member's port joins
    /// the bond only once its sockets are open, after this, so no earlier table could name it.
    /// Until then the program drops the member's data frames (it finds no position for them)
    /// and passes its LACPDUs to lagd: nothing is lost there that the partner meant to
    /// deliver, since no hook had a program (or an earlier lagd's table) for a new member.
    pub(crate) fn attach_member(&mut self, ifindex: u32) -> io::Result<()> {
        let a = match &self.attach {
            Some((how, _)) => Some(self.attach_one(ifindex, *how)?),
            None => None,
        };
        self.members.push(a);
        self.ifindexes.push(ifindex);
        // The table names the members' interfaces: write it again.
        self.generation = None;
        Ok(())
    }

    /// The member at `port` is gone: its program is detached and the table forgets it.
    /// Lets go of the member programs from position `len` on (a member whose set-up failed
    /// after its program was attached), so that positions stay those of the bond's ports.
    pub(crate) fn truncate(&mut self, len: usize) {
        self.members.truncate(len);
        self.ifindexes.truncate(len);
        self.generation = None;
    }

    pub(crate) fn member_gone(&mut self, port: usize) {
        if let Some(m) = self.members.get_mut(port) {
            *m = None;
        }
        if let Some(i) = self.ifindexes.get_mut(port) {
            *i = 0;
        }
        self.generation = None;
    }

    /// Where a table of buckets decides, reads what the programs counted per bucket (the loop
    /// does, every [`Bond::bucket_sample_interval`]: `Timer::BucketSample`) and gives it to the
    /// bond, which rebalances on it and moves buckets that went idle (then [`Kernel::sync`]
    /// swaps the moved table in).
    pub(crate) fn sample_buckets(&mut self, now: Instant, bond: &mut Bond) -> io::Result<()> {
        let loads = self.fp.bucket_loads()?;
        let mono_now = monotonic_ns();
        let mut samples = [BucketSample::default(); 256];
        for ((s, l), prev) in samples.iter_mut().zip(&loads).zip(&mut self.bucket_bytes) {
            s.bytes = l.bytes.wrapping_sub(*prev);
            *prev = l.bytes;
            if l.last_ns > 0 {
                let age_us = mono_now.saturating_sub(l.last_ns) / 1000;
                s.last = Some(Instant::from_micros(now.as_micros().saturating_sub(age_us)));
            }
        }
        bond.absorb_bucket_loads(now, &samples);
        Ok(())
    }

    /// What the members' program hands lagd: the protocols lagd reads on the members, and
    /// whether the program orders TCP ([`Kernel::stripe_rx`]).
    pub(crate) fn reads(&self) -> FastPathReads {
        self.reads
    }

    /// With a receiver that orders TCP: the receive table shared with the members' program.
    pub(crate) fn stripe_rx(&self) -> io::Result<Option<StripeRx>> {
        if !self.reads.ordered_tcp {
            return Ok(None);
        }
        if let Some(why) = self.fp.stripe_receiver_refused() {
            // The members' program without the receiver runs: it hands lagd every segment.
            return Err(io::Error::other(format!(
                "the kernel refused the members' program with stripe's receiver (BPF \
                 compare-and-swap needs Linux 5.12), lagd orders every flow: {why}"
            )));
        }
        Ok(Some(StripeRx {
            table: self.fp.stripe_rx()?,
        }))
    }

    /// With the ARP monitor: tells the bond which members received frames since the last call
    /// (any frame counts where `arp_validate` neither validates nor filters, see
    /// [`Bond::note_received_elsewhere`]).
    pub(crate) fn note_received(&mut self, now: Instant, bond: &mut Bond) -> io::Result<()> {
        if !self.reads.member_arp {
            return Ok(());
        }
        let counters = self.fp.port_counters()?;
        self.rx_seen.resize(self.ifindexes.len(), 0);
        for (i, (seen, c)) in self.rx_seen.iter_mut().zip(&counters).enumerate() {
            let total = c
                .rx_packets
                .wrapping_add(c.rx_dropped)
                .wrapping_add(c.rx_duplicates);
            if total != *seen {
                *seen = total;
                bond.note_received_elsewhere(now, PortId(i as u16));
            }
        }
        Ok(())
    }

    /// Member `i`'s confirmed LACP partner is now `src` (`None`: none): its slow-protocol
    /// frames pass the member's policer unlimited once the next [`sync`](Self::sync) writes the
    /// table.
    pub(crate) fn follow_partner(&mut self, i: usize, src: Option<[u8; 6]>) {
        if let Some(slot) = self.slow_partners.get_mut(i)
            && *slot != src
        {
            *slot = src;
            self.partners_changed = true;
        }
    }

    /// Swaps in the bond's distribution, with the members' confirmed LACP partners, when
    /// either changed since the last call.
    pub(crate) fn sync(&mut self, bond: &Bond) -> io::Result<bool> {
        let generation = bond.distribution_generation();
        let macs = self.macs_of(bond);
        let ndisc = self.reads.member_arp && bond.wants_member_ndisc();
        if self.generation == Some(generation)
            && !self.partners_changed
            && self.macs.as_ref() == Some(&macs)
            && self.ndisc == ndisc
        {
            return Ok(false);
        }
        let mut table = self.table(&bond.distribution());
        table.slow_partner = self.slow_partners;
        table.ndisc_to_lagd = ndisc;
        if table.tlb.is_some() {
            table.tlb = Some(macs.clone());
        }
        if self.tap.is_none() && self.members.iter().all(Option::is_none) {
            // Nothing runs the programs yet (before `go_live`): no reader can see the table
            // half written, and the write waits for no grace period.
            self.fp.rewrite_table_unattached(&table)?;
        } else {
            self.fp.set_table(&table)?;
        }
        self.generation = Some(generation);
        self.partners_changed = false;
        self.macs = Some(macs);
        self.ndisc = ndisc;
        Ok(true)
    }

    /// The bond's MAC and each member's as the network sees it (balance-tlb's rewrites).
    fn macs_of(&self, bond: &Bond) -> TlbMacs {
        let mut wire = [[0; 6]; MAX_MEMBERS];
        for (i, m) in wire.iter_mut().enumerate().take(self.ifindexes.len()) {
            *m = bond.wire_mac(PortId(i as u16)).0;
        }
        TlbMacs {
            bond: bond.mac().0,
            wire,
        }
    }

    /// The programs' table for `d` (balance-tlb's MACs left zero: [`sync`](Self::sync) writes
    /// them).
    fn table(&self, d: &DistributionTable) -> Table {
        let mut t = Table::lagd_only(self.tap_ifindex);
        t.arp_to_lagd = self.reads.member_arp;
        t.defer_tcp_clones = self.defer_tcp_clones;
        t.dedup = d.dedup;
        let port = |p: PortId| u8::try_from(p.0).unwrap_or(NO_PORT);
        match &d.tx {
            TxRule::Modulo(policy) => {
                t.rule = Rule::Modulo;
                t.policy = policy_number(*policy);
            }
            TxRule::Buckets {
                policy,
                seed,
                table,
            } => {
                t.rule = Rule::Buckets;
                t.policy = policy_number(*policy);
                t.seed = *seed;
                for (slot, member) in t.buckets.iter_mut().zip(table) {
                    *slot = member.map_or(NO_PORT, port);
                }
            }
            TxRule::Active => t.rule = Rule::Active,
            TxRule::All => t.rule = Rule::All,
            TxRule::Stripe { slots } => {
                t.rule = Rule::Stripe;
                for (slot, member) in t.buckets.iter_mut().zip(slots) {
                    *slot = member.map_or(NO_PORT, port);
                }
            }
            TxRule::RoundRobin { packets_per_slave } => {
                t.rule = Rule::RoundRobin;
                t.rr_packets = u32::from(*packets_per_slave);
                let members = d.rx.len().min(MAX_MEMBERS);
                t.rr_members = members as u32;
                for (i, next) in t.rr_next.iter_mut().enumerate().take(members) {
                    *next = d.rr_member(i as u32).map_or(NO_PORT, port);
                }
            }
            TxRule::Tlb {
                policy,
                alb,
                seed,
                buckets,
            } => {
                t.policy = if *alb {
                    abi::POLICY_ALB
                } else {
                    policy_number(*policy)
                };
                t.seed = *seed;
                t.rule = match buckets {
                    Some(table) => {
                        for (slot, member) in t.buckets.iter_mut().zip(table) {
                            *slot = member.map_or(NO_PORT, port);
                        }
                        Rule::Buckets
                    }
                    None => Rule::Modulo,
                };
                t.tlb = Some(TlbMacs {
                    bond: [0; 6],
                    wire: [[0; 6]; MAX_MEMBERS],
                });
            }
        }
        t.active = d.active.map(port);
        t.usable = d.usable.iter().map(|&p| port(p)).collect();
        for (i, &ifindex) in self.ifindexes.iter().enumerate().take(MAX_MEMBERS) {
            t.ifindex[i] = ifindex;
        }
        for rx in &d.rx {
            let i = usize::from(rx.port.0);
            if i < MAX_MEMBERS {
                t.rx_unicast[i] = rx.unicast;
                t.rx_multicast[i] = rx.multicast;
            }
        }
        t
    }

    /// The programs' counters per member position (then the frames no member could take).
    pub(crate) fn counters(&self) -> io::Result<Vec<PortCounters>> {
        self.fp.port_counters()
    }
}

/// The heartbeat's deadline from now, on the programs' clock.
pub(crate) fn alive_until() -> u64 {
    let bound = u64::try_from(ORPHAN_TIMEOUT.as_nanos()).unwrap_or(u64::MAX);
    monotonic_ns().saturating_add(bound)
}

#[cfg(test)]
mod test {
    use super::*;

    /// An attach that fails for the ways in `fails` with `err`, and records what was tried.
    fn attempt(
        fails: &[Attach],
        err: impl Fn() -> io::Error,
    ) -> (
        impl FnMut(Attach) -> io::Result<Attach>,
        std::rc::Rc<std::cell::RefCell<Vec<Attach>>>,
    ) {
        let tried = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let log = tried.clone();
        let fails = fails.to_vec();
        let f = move |a: Attach| {
            log.borrow_mut().push(a);
            if fails.contains(&a) {
                Err(err())
            } else {
                Ok(a)
            }
        };
        (f, tried)
    }

    fn no_tcx() -> io::Error {
        TcxUnavailable::error(
            io::Error::from_raw_os_error(22), // EINVAL
            "bpf(BPF_LINK_CREATE)",
            "ifindex 3",
        )
    }

    #[test]
    fn auto_takes_tcx_where_there_is_tcx_and_tc_where_not() {
        let (f, tried) = attempt(&[], no_tcx);
        let (a, why) = attach_as(FastPathAttach::Auto, f).unwrap();
        assert_eq!(
            (a, why.as_str()),
            (Attach::Tcx, "fastpath_attach=auto, the kernel has tcx")
        );
        assert_eq!(*tried.borrow(), [Attach::Tcx]);

        let (f, tried) = attempt(&[Attach::Tcx], no_tcx);
        let (a, why) = attach_as(FastPathAttach::Auto, f).unwrap();
        assert_eq!(a, Attach::Tc);
        assert!(
            why.starts_with("tcx not available (bpf(BPF_LINK_CREATE): "),
            "{why}"
        );
        assert!(why.contains("os error 22"), "{why}");
        assert_eq!(*tried.borrow(), [Attach::Tcx, Attach::Tc]);
    }

    #[test]
    fn only_a_missing_tcx_falls_back_and_explicit_choices_never_do() {
        // No privilege: no fallback, the error as it was.
        let eperm = || io::Error::from_raw_os_error(1); // EPERM
        let (f, tried) = attempt(&[Attach::Tcx], eperm);
        let e = attach_as(FastPathAttach::Auto, f).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(1));
        assert_eq!(*tried.borrow(), [Attach::Tcx]);
        // tcx asked for and missing: an error, tc not tried.
        let (f, tried) = attempt(&[Attach::Tcx], no_tcx);
        let e = attach_as(FastPathAttach::Tcx, f).unwrap_err();
        assert!(TcxUnavailable::of(&e).is_some(), "{e}");
        assert_eq!(*tried.borrow(), [Attach::Tcx]);
        // tc asked for: tc only.
        let (f, tried) = attempt(&[], no_tcx);
        let (a, why) = attach_as(FastPathAttach::Tc, f).unwrap();
        assert_eq!((a, why.as_str()), (Attach::Tc, "fastpath_attach=tc"));
        assert_eq!(*tried.borrow(), [Attach::Tc]);
    }
}
