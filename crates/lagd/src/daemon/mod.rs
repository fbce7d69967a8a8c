//! The daemon: the only place that reads the clock and owns descriptors, in three roles:
//! - this file, the event loop: one thread, one epoll set (measured best on 2 cores: see
//!   `shared/research/dataplane-limits.md`), the clock read once per wake, link monitoring and
//!   the bond's events;
//! - [`dataplane`]: the TAP and the members' sockets. Every frame from the host goes to
//!   [`Bond::transmit`], every frame from a member to [`Bond::receive`], and the dataplane
//!   applies the verdict without knowing the mode (64 KB GSO frames and their
//!   `virtio_net_hdr` pass untouched);
//! - [`control`]: the control socket, server and client;
//!
//! and the mapping of the bond's state to the status document is in [`crate::status`]. What
//! the loop does:
//! - carrier is read every `min(miimon, 10)` ms with `ETHTOOL_GLINK` (immediate), and rtnetlink
//!   link events trigger an extra read at once (they can arrive ~1 s late: the kernel's linkwatch);
//! - a Unix control socket (`/run/lagd/netns-N/BOND.sock` by default, per network namespace) answers
//!   `status` with the JSON [`Status`]; its clients are served on threads of their own
//!   ([`control`]), and the loop only answers the requests they queue, never blocking;
//! - SIGTERM/SIGINT end the loop cleanly: the TAP's carrier goes off and stays (the TAP is
//!   persistent, so a restarted lagd finds the host's configuration intact), and [`restore`]
//!   puts the members back as they were before lagd (also on an error, and, via its state
//!   file, after a `kill -9` once the next lagd for the bond stops);
//! - [`notify`]: `READY=1`, `STATUS=` and the watchdog for a `Type=notify` systemd service.
//!
//! Members are kept from their own kernel stack (which would otherwise answer ARP for the bond's
//! address with the member's MAC): a tcx ingress program drops every frame after AF_PACKET has
//! seen it, and IPv6 is disabled and `arp_ignore=8` set on the member.

pub mod control;
pub mod dataplane;
pub mod handover;
mod kernel;
pub mod notify;
pub mod restore;
mod timers;

use std::collections::{BTreeSet, VecDeque};
use std::io;
use std::time::{Duration, Instant as StdInstant};

use anyhow::{Context, Result};
use lagd_proto::bond::FastPathAttach;
use lagd_proto::bond::{Bond, BondEvent, FailOverMac, PortId, PortInfo};
use lagd_proto::time::Instant;
use lagd_proto::wire::EthernetAddress;
use lagd_sys::isolate::{IngressDrop, quiet_stack};
use lagd_sys::link::{Duplex, LinkControl, LinkEvent, LinkEvents};
use lagd_sys::packet::{Membership, PacketOptions, PacketSocket};
use lagd_sys::poll::{Events, Interest, Poller, Signal, SignalFd};
use lagd_sys::tap::{Tap, TapOptions};
use tracing::{info, warn};

use crate::config::Config;
use crate::files;
use crate::metrics;
use crate::status::{BondContext, DataplaneStatus, Status};
pub use dataplane::member_data_socket;
use dataplane::{Dataplane, Member};
use kernel::{Choice, Kernel};
use lagd_sys::fastpath::MAX_MEMBERS;
use notify::Notifier;
use restore::{LacpRecord, Restore};
use timers::{Timer, Timers};

const TOKEN_TAP: u64 = 0;
const TOKEN_SIGNAL: u64 = 1;
const TOKEN_CONTROL: u64 = 2;
const TOKEN_LINK: u64 = 3;
const TOKEN_MEMBER: u64 = 100;
/// Member control sockets (slow protocols), serviced before anything else.
const TOKEN_CONTROL_SOCKET: u64 = 10_000;
/// The largest MTU a TAP takes (65535 less its Ethernet header).
pub const TAP_MAX_MTU: u32 = 65535 - 14;

/// Why the daemon could not start: a configuration problem (exit code 2) or anything else.
#[derive(Debug)]
pub enum StartError {
    /// The configuration names something that does not exist or cannot be used.
    Config(String),
    /// A system call failed.
    System(anyhow::Error),
}

impl From<anyhow::Error> for StartError {
    fn from(e: anyhow::Error) -> Self {
        Self::System(e)
    }
}

impl From<io::Error> for StartError {
    fn from(e: io::Error) -> Self {
        Self::System(e.into())
    }
}

/// A running bond.
pub struct Daemon {
    config: Config,
    bond: Bond,
    mac: EthernetAddress,
    dp: Dataplane,
    link: LinkControl,
    events: LinkEvents,
    poller: Poller,
    signals: SignalFd,
    control: control::Server,
    /// The metrics listener, until `run` hands it to its thread.
    metrics: Option<metrics::Listener>,
    epoch: StdInstant,
    carrier_poll: Duration,
    /// Every deadline the loop wakes for.
    timers: Timers,
    /// The ready descriptors of one wake, reused so the loop does not allocate.
    tokens: Vec<u64>,
    /// The kernel fast path, when it carries the data frames.
    kernel: Option<Box<Kernel>>,
    /// Why lagd carries the data frames itself (`None`: the kernel does).
    dataplane_reason: Option<String>,
    /// Members disabled by `lagctl member BOND NAME disable` (by position).
    disabled: BTreeSet<usize>,
    /// The run-time changes made (the latest [`MAX_CHANGES`]), for the status.
    changes: VecDeque<String>,
    /// `lagctl events` clients: each event line goes to every one.
    subscribers: Vec<std::sync::mpsc::Sender<String>>,
    /// 802.3ad: the members distributing and the active aggregator as last published.
    distributing: (Vec<PortId>, Option<u16>),
    /// The TAP's interface index.
    tap_ifindex: u32,
    /// Whether the TAP was up with its carrier on in the last link event about it.
    tap_running: bool,
    /// The bucket table's move counters as last seen (for the `buckets` event).
    bucket_moves: lagd_proto::balance::BalanceCounters,
    /// The service manager, when lagd runs as a `Type=notify` service.
    notify: Option<Notifier>,
    /// What to put back when lagd stops. Last, so that it runs after every descriptor above
    /// (member sockets, tcx links) is closed.
    restore: Restore,
}

/// How many run-time changes the status lists.
const MAX_CHANGES: usize = 32;

impl Daemon {
    /// Sets the bond up: TAP, members, control socket.
    ///
    /// Everything that can be checked is checked before the first change (the members exist,
    /// the MTU fits a TAP, no other lagd drives the bond or a member, the control socket is
    /// free); a later failure undoes, in reverse, everything this start did, so a refused
    /// start leaves the host as it found it. See [`restore`] for what is put back when lagd
    /// stops.
    ///
    /// `passed` holds what the last lagd left running ([`handover::Passed::from_env`] from a
    /// service manager, or [`handover::Passed::take_over`] in a planned upgrade).
    pub fn start(config: Config, passed: handover::Passed) -> Result<Self, StartError> {
        let link = LinkControl::new().context("netlink/ioctl sockets")?;
        let mut found = Vec::new();
        for name in &config.members {
            match link.ifindex(name) {
                Ok(i) => found.push(i),
                Err(_) => {
                    return Err(StartError::Config(format!(
                        "'members': interface '{name}' does not exist"
                    )));
                }
            }
        }
        if config.members.contains(&config.bond) {
            return Err(StartError::Config(format!(
                "'members': '{}' is the bond itself",
                config.bond
            )));
        }
        // Signals are blocked before any thread is spawned (threads inherit the mask; see
        // SignalFd): SIGTERM or SIGHUP must reach the loop, not kill the process in a control
        // thread.
        let signals =
            SignalFd::new(&[Signal::TERM, Signal::INT, Signal::HUP]).context("signalfd")?;
        let first = &config.members[0];
        let mac = match config.mac {
            Some(m) => m,
            None => EthernetAddress(
                link.permanent_mac(first)
                    .with_context(|| format!("MAC of {first}"))?,
            ),
        };
        let mtu = match config.mtu {
            Some(m) => m,
            None => link.mtu(first).with_context(|| format!("MTU of {first}"))?,
        };
        if mtu > TAP_MAX_MTU {
            return Err(StartError::Config(format!(
                "'mtu': {mtu} is more than the bond's TAP can take ({TAP_MAX_MTU})"
            )));
        }
        let named: Vec<(String, u32)> = config.members.iter().cloned().zip(found.clone()).collect();
        // The network namespace's directory holds the locks that claim the bond and its
        // members, and, for the default endpoint, the control socket and the state file: bonds
        // of one name in two namespaces keep apart, and only root can create anything there.
        // The members' original settings are kept beside a control socket file the user
        // named, in a directory only root may write (checked before anything in it is read).
        let netns_dir =
            files::netns_dir().context("the network namespace (/proc/thread-self/ns/net)")?;
        let anchor = config
            .control
            .file()
            .unwrap_or_else(|| netns_dir.join(format!("{}.sock", config.bond)));
        let mut made = Vec::new();
        let undo = (|| {
            made.extend(files::private_dir(&netns_dir, true)?);
            if let Some(dir) = anchor.parent().filter(|d| !d.as_os_str().is_empty()) {
                made.extend(
                    files::private_dir(dir, false)
                        .with_context(|| format!("control socket {}", anchor.display()))?,
                );
            }
            let claims = restore::claim_all(&netns_dir, &config.bond, &named)?;
            let link = LinkControl::new().context("netlink/ioctl sockets")?;
            Restore::new(link, &config.bond, &anchor, claims)
        })();
        let mut undo = match undo {
            Ok(u) => u,
            Err(e) => {
                files::remove_created(&made);
                return Err(e.into());
            }
        };
        undo.created_dirs(made);
        // The control endpoint before any change: a second lagd on the same endpoint is refused
        // here (one for the same bond or a member already was, by its claims).
        let control = control::Server::start(&config.control, config.control_group)?;
        Self::set_up(
            undo, config, link, control, signals, passed, &found, mac, mtu,
        )
    }

    /// The changes, after every check: each one is recorded in `undo` before it is made.
    #[allow(clippy::too_many_arguments)]
    fn set_up(
        mut undo: Restore,
        config: Config,
        link: LinkControl,
        control: control::Server,
        signals: SignalFd,
        mut passed: handover::Passed,
        found: &[u32],
        mac: EthernetAddress,
        mtu: u32,
    ) -> Result<Self, StartError> {
        for w in &config.warnings {
            warn!("{w}");
        }
        undo.before_tap(&config.bond);
        for name in &config.members {
            undo.before_member(name)?;
        }
        let tap_options = TapOptions {
            vnet_hdr: true,
            multi_queue: false,
            persist: true,
            // Stripe mode segments super-frames itself, and only TCP ones.
            no_uso: config.options.mode.segments_in_software(),
        };
        // The last lagd's tcx links, for the programs attached below to go into in one step.
        let links = passed.take_all(handover::TCX);
        handover::report_orphan_drops(&links);
        lagd_sys::isolate::offer_tcx_links(links);
        let tap = match passed.take_tap() {
            // The last lagd's descriptor, from the service manager: the TAP never lost its
            // carrier, and the host never noticed the change of process.
            Some(fd) => match Tap::adopt(fd, &config.bond, tap_options) {
                Ok(t) => {
                    info!("took over the TAP {} from the last lagd", config.bond);
                    t
                }
                Err(e) => {
                    warn!("the passed TAP descriptor is not adopted ({e}); opening the TAP");
                    Tap::create(&config.bond, tap_options)
                        .with_context(|| format!("creating TAP {}", config.bond))?
                }
            },
            None => Tap::create(&config.bond, tap_options)
                .with_context(|| format!("creating TAP {}", config.bond))?,
        };
        // A restarted lagd finds the TAP as it left it: setting the same MAC again would still
        // tell the kernel the address changed, and it would flush the host's neighbours.
        if link.mac(&config.bond).ok() != Some(mac.0) {
            link.set_mac(&config.bond, mac.0)
                .with_context(|| format!("setting the MAC of {}", config.bond))?;
        }
        link.set_mtu(&config.bond, mtu)
            .with_context(|| format!("setting the MTU of {}", config.bond))?;

        let epoch = StdInstant::now();
        let mut bond = Bond::new(config.options.clone(), mac);
        // Stripe mode adds a header to every frame: the members carry 8 bytes more than the
        // bond (raised MTU), or, where a member cannot, the bond carries 8 bytes less.
        let overhead = config.options.mode.encap_overhead();
        let member_mtu = if overhead > 0 {
            let want = mtu + overhead;
            let raised = config.members.iter().all(|m| link.set_mtu(m, want).is_ok());
            if raised {
                want
            } else {
                let lowered = mtu - overhead;
                warn!(
                    "stripe: a member refused MTU {want}; the bond's MTU is lowered to {lowered}"
                );
                link.set_mtu(&config.bond, lowered)
                    .with_context(|| format!("setting the MTU of {}", config.bond))?;
                mtu
            }
        } else {
            mtu
        };
        let tap_ifindex = link
            .ifindex(&config.bond)
            .with_context(|| format!("index of {}", config.bond))?;
        let (mut kernel, dataplane_reason) =
            match Choice::decide(&bond, config.members.len(), tap_ifindex) {
                Ok(Choice::Kernel(k)) => (Some(k), None),
                Ok(Choice::Lagd(why)) => (None, Some(why)),
                Err(e) => return Err(StartError::Config(e)),
            };
        let mut members = Vec::new();
        for (name, &ifindex) in config.members.iter().zip(found) {
            let m = Self::open_member(
                &link,
                &mut bond,
                epoch,
                name,
                ifindex,
                member_mtu,
                kernel.as_deref_mut(),
            )?;
            // The kernel path's programs are attached later (Kernel::go_live).
            if m.isolation.as_ref().is_some_and(IngressDrop::added_qdisc) {
                undo.record_clsact(name, ifindex)?;
            }
            members.push(m);
        }
        bond.set_stripe_epoch(now_since(epoch), random_u32());
        if bond.lacp().is_some() {
            for r in undo.recovered_lacp() {
                if let Some(port) = bond.port_by_name(&r.member) {
                    let partner = r.partner();
                    info!(
                        member = %r.member,
                        system = %partner.system,
                        key = partner.key,
                        port = partner.port,
                        "LACP: the last lagd did not stop cleanly; the member takes up with \
                         this partner where it left (no aggregate wait)"
                    );
                    bond.resume_lacp(port, partner);
                }
            }
        }

        let metrics = config.metrics.as_ref().map(metrics::bind).transpose()?;
        let poller = Poller::new().context("epoll")?;
        let mut events = LinkEvents::new().context("rtnetlink")?;
        events.request_dump().context("rtnetlink dump")?;
        poller.add(&tap, TOKEN_TAP, Interest::READABLE)?;
        poller.add(&signals, TOKEN_SIGNAL, Interest::READABLE)?;
        poller.add(&control.wake_fd(), TOKEN_CONTROL, Interest::READABLE)?;
        poller.add(&events, TOKEN_LINK, Interest::READABLE)?;
        for (i, m) in members.iter().enumerate() {
            for s in m.readers() {
                poller.add(s, TOKEN_MEMBER + i as u64, Interest::READABLE)?;
            }
            for c in m.control.iter().chain(&m.partner) {
                poller.add(c, TOKEN_CONTROL_SOCKET + i as u64, Interest::READABLE)?;
            }
        }
        let miimon = config.options.miimon;
        let carrier_poll =
            Duration::from_millis(if miimon > 0 { miimon.min(10) } else { 10 }.into());
        info!(
            bond = %config.bond,
            mac = %mac,
            mtu,
            members = ?config.members,
            opts = %config.options.to_opts(),
            "bond started"
        );
        let mut dp = Dataplane::new(tap, members);
        dp.io.stripe_rx = match kernel.as_deref().map(Kernel::stripe_rx).transpose() {
            Ok(t) => t.flatten(),
            Err(e) => {
                // Without the table the members' program delivers nothing itself: every TCP
                // segment comes to lagd, which orders it as on its own path.
                warn!("stripe receive table: {e}");
                None
            }
        };
        let mut d = Self {
            config,
            bond,
            mac,
            dp,
            link,
            events,
            poller,
            signals,
            control,
            metrics,
            epoch,
            carrier_poll,
            timers: Timers::default(),
            tokens: Vec::with_capacity(16),
            kernel,
            dataplane_reason,
            disabled: BTreeSet::new(),
            changes: VecDeque::new(),
            subscribers: Vec::new(),
            distributing: (Vec::new(), None),
            tap_ifindex,
            tap_running: false,
            bucket_moves: Default::default(),
            notify: Notifier::from_env(),
            restore: undo,
        };
        d.go_live(found)?;
        d.restore.started();
        let unused = lagd_sys::isolate::close_unadopted();
        if unused > 0 {
            info!("{unused} tcx link(s) of the last lagd were not needed: closed");
        }
        let now = d.now();
        d.after_wake(now);
        // Attaching turned the TAP's carrier on; it stays on only if the bond is up already, so
        // a restart shows the host one carrier change fewer (off and on again) than before.
        if !d.bond.carrier() {
            if let Err(e) = d.dp.io.tap.set_carrier(false) {
                warn!("TAP carrier: {e}");
            }
        }
        Ok(d)
    }

    /// The last step of a start: the kernel path goes live, with every member open, its port
    /// in the bond and LACP resumed. The bond's machines run once (a member whose LACP partner
    /// the last lagd recorded is back in the aggregate), the first table is written, and only
    /// then are the programs attached ([`Kernel::go_live`]): on a restart or an upgrade the
    /// earlier lagd's programs forward until these take their hooks. An error fails the start
    /// (rolled back as any other: the programs attached so far are detached when the kernel
    /// path is dropped, and a clsact qdisc an attach added is recorded first).
    fn go_live(&mut self, found: &[u32]) -> Result<(), StartError> {
        if self.kernel.is_some() {
            let now = self.now();
            if self.bond.poll_timeout().is_some_and(|t| t <= now) {
                self.bond.handle_timeout(now, &mut self.dp.io);
            }
            self.after_wake(now);
        }
        if let Some(k) = self.kernel.as_deref_mut() {
            let live = k.go_live(&self.bond);
            let (tap_qdisc, member_qdiscs) = k.added_qdiscs();
            if tap_qdisc {
                self.restore
                    .record_clsact(&self.config.bond, self.tap_ifindex)?;
            }
            for i in member_qdiscs {
                self.restore
                    .record_clsact(&self.config.members[i], found[i])?;
            }
            live.context("attaching the fast path programs")?;
            let usable = self.bond.distribution().usable.len();
            if let Some((how, why)) = k.attachment() {
                info!(
                    "dataplane: kernel (fast path attached with {how}: {why}; lagd decides; \
                     the first table distributes to {usable} of {} members)",
                    self.config.members.len()
                );
            }
        } else {
            info!(
                "dataplane: lagd ({})",
                self.dataplane_reason.as_deref().unwrap_or("")
            );
        }
        Ok(())
    }

    fn open_member(
        link: &LinkControl,
        bond: &mut Bond,
        epoch: StdInstant,
        name: &str,
        ifindex: u32,
        mtu: u32,
        kernel: Option<&mut Kernel>,
    ) -> Result<Member> {
        link.set_mtu(name, mtu)
            .with_context(|| format!("setting MTU {mtu} on member {name}"))?;
        quiet_stack(name).with_context(|| format!("sysctls of member {name}"))?;
        let mut isolation_why = String::new();
        // With the kernel path the members' program isolates the member (every frame is
        // delivered to the TAP, dropped, or a slow-protocols frame for lagd's socket), and the
        // data socket only sends: bound to no protocol, it receives nothing, so no frame the
        // program redirected is copied to lagd.
        let (isolation, data_options, rx_protocols): (_, _, &[u16]) = match kernel {
            Some(k) => {
                k.attach_member(ifindex)
                    .with_context(|| format!("fast path program on member {name}"))?;
                let send_only = PacketOptions {
                    protocol: 0,
                    ..member_data_socket()
                };
                // What the program passes on is read on sockets bound to those protocols
                // (Bond::fast_path_reads), which see a frame only if the program did not
                // redirect it (an ETH_P_ALL socket sees all).
                let rx: &[u16] = k.reads().protocols;
                (None, send_only, rx)
            }
            None => {
                let (isolation, why) = isolate(name, ifindex, bond.options().fastpath_attach);
                isolation_why = why;
                (isolation, member_data_socket(), &[])
            }
        };
        link.set_up(name, true)
            .with_context(|| format!("bringing member {name} up"))?;
        let socket = PacketSocket::bind(ifindex, data_options)
            .with_context(|| format!("packet socket on member {name}"))?;
        // Slow-protocols frames are read on their own socket: the data socket never sees them.
        socket
            .exclude_ethertype(lagd_sys::packet::ETH_P_SLOW)
            .with_context(|| format!("socket filter on member {name}"))?;
        let control = PacketSocket::bind(
            ifindex,
            PacketOptions {
                protocol: lagd_sys::packet::ETH_P_SLOW,
                ignore_outgoing: true,
                // TC_PRIO_CONTROL, as the kernel sends LACPDUs: a priority-aware qdisc
                // (pfifo_fast, prio, mqprio) sends them, and the bond's other own frames, ahead
                // of the bulk data saturating the member.
                priority: Some(lagd_sys::packet::TC_PRIO_CONTROL),
                ..PacketOptions::default()
            },
        )
        .with_context(|| format!("slow-protocols socket on member {name}"))?;
        control
            .add_membership(Membership::Multicast(
                lagd_sys::packet::SLOW_PROTOCOLS_MULTICAST,
            ))
            .with_context(|| format!("slow-protocols multicast on member {name}"))?;
        // The confirmed LACP partner's frames, once there is one (Dataplane::follow_partner);
        // nothing until then.
        let partner = PacketSocket::bind(
            ifindex,
            PacketOptions {
                protocol: lagd_sys::packet::ETH_P_SLOW,
                ignore_outgoing: true,
                ..PacketOptions::default()
            },
        )
        .and_then(|p| p.filter_source(None, true).map(|()| p))
        .with_context(|| format!("LACP partner socket on member {name}"))?;
        // Promiscuous: a physical NIC must accept frames for the bond's MAC. Undone when the
        // socket closes.
        socket
            .add_membership(Membership::Promisc)
            .with_context(|| format!("promiscuous mode on member {name}"))?;
        let rx = rx_protocols
            .iter()
            .map(|&protocol| {
                PacketSocket::bind(
                    ifindex,
                    PacketOptions {
                        protocol,
                        ..member_data_socket()
                    },
                )
                .with_context(|| format!("packet socket for 0x{protocol:04x} on member {name}"))
            })
            .collect::<Result<Vec<_>>>()?;
        let perm = link.permanent_mac(name).unwrap_or([0; 6]);
        let sd = link.speed_duplex(name).ok();
        let carrier = link.carrier(name).unwrap_or(false);
        let info = PortInfo {
            name: name.to_owned(),
            perm_mac: EthernetAddress(perm),
            speed_mbps: sd.and_then(|s| s.speed_mbps),
            full_duplex: sd.and_then(|s| duplex(s.duplex)),
        };
        bond.add_port(now_since(epoch), info, carrier);
        Ok(Member {
            name: name.to_owned(),
            ifindex,
            socket: Some(socket),
            rx,
            control: Some(control),
            partner: Some(partner),
            partner_src: None,
            isolation,
            isolation_why,
            counters: Default::default(),
        })
    }

    fn now(&self) -> Instant {
        now_since(self.epoch)
    }

    /// Runs until SIGTERM or SIGINT. The clock is read once per wake, right after it; the
    /// next wake is the earliest deadline in the timer table (`timers`): the bond's, the
    /// next carrier poll, the watchdog's, the kernel path's heartbeat and bucket sample.
    pub fn run(mut self) -> Result<()> {
        if let Some(l) = self.metrics.take() {
            metrics::spawn(l, self.config.control.clone()).context("metrics thread")?;
        }
        let mut ready = Events::with_capacity(16);
        let mut now = self.now();
        self.timers.set(Timer::Carrier, Some(now));
        self.notify_ready();
        if let Some(n) = &self.notify {
            // Kept by the service manager: after a crash, the next lagd takes it over and the
            // TAP never loses its carrier.
            n.store_fds(handover::TAP, &[std::os::fd::AsFd::as_fd(&self.dp.io.tap)]);
        }
        self.store_links();
        self.restore.give_back_left_out();
        let watchdog = self.notify.as_ref().and_then(Notifier::watchdog);
        self.timers.set(Timer::Watchdog, watchdog.map(|_| now));
        loop {
            self.timers.set(Timer::Bond, self.bond.poll_timeout());
            let wake = self.timers.next_wake();
            self.poller
                .wait(&mut ready, wake.map(|t| t.saturating_since(now)))
                .context("epoll_wait")?;
            now = self.now();
            let mut tokens = std::mem::take(&mut self.tokens);
            tokens.clear();
            tokens.extend(ready.iter().map(|e| e.token()));
            // Slow protocols first: LACP timing must not suffer from a saturated dataplane.
            tokens.sort_unstable_by_key(|&t| std::cmp::Reverse(t >= TOKEN_CONTROL_SOCKET));
            // Whether every member socket was read dry (a batch that ran out leaves frames).
            self.dp.io.drained = true;
            for &token in &tokens {
                match token {
                    TOKEN_TAP => self.dp.service_tap(&mut self.bond, now),
                    TOKEN_SIGNAL => {
                        if let Some(sig) = self.signals.read().context("signalfd read")? {
                            if sig == Signal::HUP {
                                match self.reload(now) {
                                    Ok(changed) => info!(?changed, "SIGHUP: reloaded"),
                                    Err(e) => warn!("SIGHUP: reload refused: {e}"),
                                }
                                self.store_links();
                                continue;
                            }
                            info!(?sig, "stopping");
                            if let Some(n) = &self.notify {
                                // A clean stop: the bond goes down, nothing to hand over.
                                n.remove_fds(handover::TAP);
                                n.remove_fds(handover::TCX);
                                n.send("STOPPING=1");
                            }
                            let _ = self.dp.io.tap.set_carrier(false);
                            self.bond.shutdown(now);
                            self.after_wake(now);
                            self.restore_member_macs();
                            self.detach_programs();
                            return Ok(());
                        }
                    }
                    TOKEN_CONTROL => self.service_control(now),
                    TOKEN_LINK => self.service_link_events(now),
                    t if t >= TOKEN_CONTROL_SOCKET => {
                        let i = (t - TOKEN_CONTROL_SOCKET) as usize;
                        self.dp.service_slow(&mut self.bond, i, now);
                    }
                    t => {
                        let i = (t - TOKEN_MEMBER) as usize;
                        if self.dp.service_member(&mut self.bond, i, now) {
                            self.dp.io.drained = false;
                        }
                    }
                }
            }
            self.tokens = tokens;
            if let Some(every) = watchdog {
                if self.timers.is_due(Timer::Watchdog, now) {
                    if let Some(n) = &self.notify {
                        n.send("WATCHDOG=1");
                    }
                    self.timers.set(Timer::Watchdog, Some(now + every));
                }
            }
            if self.timers.fire(Timer::Carrier, now, self.carrier_poll) {
                self.poll_carrier(now);
            }
            // Events above may have moved the bond's deadline.
            self.timers.set(Timer::Bond, self.bond.poll_timeout());
            if self.timers.is_due(Timer::Bond, now) {
                self.bond.handle_timeout(now, &mut self.dp.io);
            }
            self.after_wake(now);
        }
    }

    /// Detaches lagd's programs from the TAP and the members now (clsact filters outlive lagd
    /// unless deleted), logging what could not be deleted.
    fn detach_programs(&mut self) {
        if let Some(k) = &mut self.kernel {
            for e in k.detach() {
                warn!("detaching the fast path: {e}");
            }
        }
        for m in &mut self.dp.io.members {
            if let Some(d) = m.isolation.take() {
                if let Err(e) = d.detach() {
                    warn!(member = %m.name, "detaching the ingress drop: {e}");
                }
            }
        }
    }

    /// The tcx links that keep lagd's programs attached (the fast path's and the members'
    /// ingress drops).
    fn tcx_links(&self) -> Vec<std::os::fd::BorrowedFd<'_>> {
        self.kernel
            .iter()
            .flat_map(|k| k.tcx_links())
            .chain(
                self.dp
                    .io
                    .members
                    .iter()
                    .filter_map(|m| m.isolation.as_ref()?.tcx_link()),
            )
            .collect()
    }

    /// A planned upgrade (see [`handover`]): lets go of the claims and the control socket's
    /// name, passes the TAP, the tcx links and the log on `stream`, and waits for the new lagd
    /// to adopt them. `Ok`: it has, and this lagd must exit without undoing anything. An
    /// error: nothing was handed over for good; the claims and the socket are back.
    fn hand_over(&mut self, stream: &std::os::unix::net::UnixStream) -> Result<u32, String> {
        use std::io::{BufRead, Read, Write};
        use std::os::fd::AsFd;
        let new = lagd_sys::peer::peer_credentials(stream)
            .map(|p| p.pid)
            .unwrap_or(0);
        let hidden = self.control.hide()?;
        let released = self.restore.release_claims();
        let mut names = vec![handover::TAP];
        let mut fds = vec![self.dp.io.tap.as_fd()];
        for l in self.tcx_links() {
            names.push(handover::TCX);
            fds.push(l);
        }
        let stderr = io::stderr();
        names.push(handover::LOG);
        fds.push(stderr.as_fd());
        info!(pid = new, ?names, "handing the bond over to a new lagd");
        let sent = lagd_sys::fdpass::send_with_fds(
            stream,
            handover::handover_reply(&names).as_bytes(),
            &fds,
        )
        .map_err(|e| format!("passing the descriptors: {e}"));
        drop(fds);
        // Until the new lagd has put its programs into the links, the programs forward with
        // this one's table: their heartbeat is renewed while waiting.
        let deadline = StdInstant::now() + crate::control::ADOPT_TIME;
        let mut line = String::new();
        let adopted = sent.and_then(|_| {
            let mut reader = io::BufReader::new(stream);
            loop {
                // At most every 100 ms (the read's timeout below).
                if let Some(k) = &mut self.kernel {
                    if let Err(e) = k.beat() {
                        warn!("fast path heartbeat: {e}");
                    }
                }
                let left = deadline.saturating_duration_since(StdInstant::now());
                if left.is_zero() {
                    return Err(format!(
                        "the new lagd did not adopt the bond within {} s",
                        crate::control::ADOPT_TIME.as_secs()
                    ));
                }
                let _ = stream.set_read_timeout(Some(left.min(Duration::from_millis(100))));
                match (&mut reader).take(64).read_line(&mut line) {
                    Ok(0) => return Err("the new lagd ended before it adopted the bond".into()),
                    Ok(_) if line.ends_with('\n') => break,
                    Ok(_) if line.len() > 64 => {
                        return Err("the new lagd sent a line longer than 64 bytes".into());
                    }
                    Ok(_) => {}
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                        ) => {}
                    Err(e) => return Err(format!("the new lagd's connection: {e}")),
                }
            }
            if line.trim() != "adopted" {
                return Err(format!("the new lagd said '{}'", line.trim()));
            }
            let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
            (&*stream)
                .write_all(b"bye\n")
                .map_err(|e| format!("the new lagd's connection: {e}"))
        });
        match adopted {
            Ok(()) => {
                let _ = std::fs::remove_file(&hidden);
                Ok(new)
            }
            Err(e) => {
                self.control.unhide(&hidden);
                self.restore.reclaim(&released, Duration::from_secs(2));
                Err(e)
            }
        }
    }

    /// Hands the service manager the tcx links that keep the programs attached (the set it
    /// held before is replaced: a link lagd let go of must not stay attached through the
    /// store). After a crash the next lagd adopts them, and the programs go on forwarding with
    /// the last table until it does (within `kernel::ORPHAN_TIMEOUT`; past it they drop).
    fn store_links(&self) {
        let Some(n) = &self.notify else {
            return;
        };
        let links = self.tcx_links();
        n.remove_fds(handover::TCX);
        if !links.is_empty() {
            n.store_fds(handover::TCX, &links);
        }
    }

    /// Tells the service manager the bond is up (the control socket answers from now on).
    fn notify_ready(&self) {
        if let Some(n) = &self.notify {
            let path = if self.kernel.is_some() {
                "kernel"
            } else {
                "lagd"
            };
            n.send(&format!(
                "READY=1\nSTATUS=bond {} over {} (dataplane: {path})\nMAINPID={}",
                self.config.bond,
                self.config.members.join(","),
                std::process::id()
            ));
        }
    }

    fn poll_carrier(&mut self, now: Instant) {
        if let Some(k) = &mut self.kernel {
            if let Err(e) = k.note_received(now, &mut self.bond) {
                warn!("fast path counters: {e}");
            }
        }
        for i in 0..self.dp.io.members.len() {
            if self.dp.io.members[i].socket.is_none() {
                continue;
            }
            match self.link.carrier(&self.dp.io.members[i].name) {
                Ok(c) => {
                    let c = c && !self.disabled.contains(&i);
                    self.bond.handle_carrier(now, PortId(i as u16), c)
                }
                Err(e) if e.raw_os_error() == Some(19) || e.kind() == io::ErrorKind::NotFound => {
                    self.member_gone(now, i)
                }
                Err(e) => warn!(member = %self.dp.io.members[i].name, "carrier: {e}"),
            }
        }
    }

    fn member_gone(&mut self, now: Instant, i: usize) {
        warn!(member = %self.dp.io.members[i].name, "member interface removed");
        self.release_member(now, i);
    }

    /// Closes member `i`'s sockets and programs and marks it gone in the bond.
    fn release_member(&mut self, now: Instant, i: usize) {
        let m = &mut self.dp.io.members[i];
        for c in m.control.take().into_iter().chain(m.partner.take()) {
            let _ = self.poller.delete(&c);
            m.counters.slow_socket_drops += c.statistics().map_or(0, |s| u64::from(s.drops));
        }
        m.partner_src = None;
        for s in m.socket.take().into_iter().chain(m.rx.drain(..)) {
            let _ = self.poller.delete(&s);
            m.counters.rx_socket_drops += s.statistics().map_or(0, |s| u64::from(s.drops));
        }
        m.isolation = None;
        if let Some(k) = &mut self.kernel {
            k.member_gone(i);
        }
        self.disabled.remove(&i);
        self.bond.remove_port(now, PortId(i as u16));
    }

    /// The position of the member whose interface is `ifindex`, if it is still there.
    fn present_member(&self, ifindex: u32) -> Option<usize> {
        self.dp
            .io
            .members
            .iter()
            .position(|m| m.ifindex == ifindex && m.socket.is_some())
    }

    fn service_link_events(&mut self, now: Instant) {
        loop {
            match self.events.next_event() {
                Ok(Some(LinkEvent::Changed(s))) => {
                    if let Some(i) = self.present_member(s.ifindex) {
                        let c = s.up && s.carrier && !self.disabled.contains(&i);
                        self.bond.handle_carrier(now, PortId(i as u16), c);
                    }
                    if s.ifindex == self.tap_ifindex {
                        let running = s.up && s.carrier;
                        if running && !self.tap_running {
                            self.resolve_neighbours_again();
                        }
                        self.tap_running = running;
                    }
                }
                Ok(Some(LinkEvent::Removed(s))) => {
                    if let Some(i) = self.present_member(s.ifindex) {
                        self.member_gone(now, i);
                    }
                }
                Ok(Some(LinkEvent::Overrun)) => self.poll_carrier(now),
                Ok(None) => return,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    warn!("rtnetlink: {e}");
                    return;
                }
            }
        }
    }

    /// The bond's carrier is back (lagd turned it on, or the kernel reports the TAP running
    /// again after it re-enabled its queue): the host's neighbour entries that went on being
    /// resolved while it was off (a restart of lagd, every member down) are deleted, so that
    /// the next packet to each solicits at once instead of after the retransmit timer (a
    /// second by default).
    fn resolve_neighbours_again(&self) {
        match lagd_sys::link::flush_incomplete_neighbours(self.tap_ifindex) {
            Ok(0) => {}
            Ok(n) => info!(
                entries = n,
                "bond carrier back: neighbour entries still being resolved deleted (the next \
                 packet to each solicits at once)"
            ),
            Err(e) => warn!("neighbour entries of {}: {e}", self.config.bond),
        }
    }

    /// Sends an event line to every `lagctl events` client (those gone are dropped).
    fn publish(&mut self, now: Instant, event: &str, mut fields: serde_json::Value) {
        if self.subscribers.is_empty() {
            return;
        }
        let t = now.saturating_since(Instant::ZERO).as_secs_f64();
        if let Some(map) = fields.as_object_mut() {
            map.insert("t".into(), serde_json::json!((t * 1000.0).round() / 1000.0));
            map.insert("event".into(), event.into());
        }
        let line = fields.to_string();
        self.subscribers.retain(|s| s.send(line.clone()).is_ok());
    }

    /// After every wake: the frames the bond queued go out, and its events are acted on.
    fn after_wake(&mut self, now: Instant) {
        self.dp.send_own(&mut self.bond, now);
        // Each member's confirmed LACP partner: its frames have a socket of their own and pass
        // the kernel program's policer.
        if let Some(l) = self.bond.lacp() {
            for i in 0..self.dp.io.members.len() {
                let src = l.confirmed_partner_source(PortId(i as u16)).map(|m| m.0);
                if let Some(k) = &mut self.kernel {
                    k.follow_partner(i, src);
                }
                if let Err(e) = self.dp.follow_partner(i, src) {
                    warn!(member = %self.dp.io.members[i].name, "LACP partner socket: {e}");
                }
            }
        }
        while let Some(ev) = self.bond.poll_event() {
            if !self.subscribers.is_empty() {
                let name = |p: Option<PortId>| {
                    p.and_then(|p| self.dp.io.members.get(p.index()))
                        .map(|m| m.name.clone())
                };
                let (kind, fields) = match &ev {
                    BondEvent::Link { port, status } => (
                        "link",
                        serde_json::json!({ "member": name(Some(*port)), "status": status.to_string() }),
                    ),
                    BondEvent::ActiveChanged { from, to } => (
                        "active",
                        serde_json::json!({ "from": name(*from), "to": name(*to) }),
                    ),
                    BondEvent::MacChanged { mac } => {
                        ("mac", serde_json::json!({ "mac": mac.to_string() }))
                    }
                    BondEvent::MemberMac { port, mac } => (
                        "member-mac",
                        serde_json::json!({ "member": name(Some(*port)), "mac": mac.to_string() }),
                    ),
                    BondEvent::Carrier { up } => ("carrier", serde_json::json!({ "up": up })),
                    BondEvent::LacpPartner {
                        port,
                        system,
                        key,
                        partner_port,
                    } => (
                        "lacp-partner",
                        serde_json::json!({
                            "member": name(Some(*port)),
                            "system": (!system.is_zero()).then(|| system.to_string()),
                            "key": key,
                            "port": partner_port,
                        }),
                    ),
                };
                self.publish(now, kind, fields);
            }
            match ev {
                BondEvent::Link { port, status } => {
                    let name = self.dp.io.members[port.index()].name.clone();
                    info!(member = %name, %status, "link");
                    if status.usable() {
                        // Speed and duplex can change with the link (and feed LACP's key).
                        if let Ok(sd) = self.link.speed_duplex(&name) {
                            self.bond
                                .set_port_speed(now, port, sd.speed_mbps, duplex(sd.duplex));
                        }
                    }
                }
                BondEvent::ActiveChanged { from, to } => {
                    let name = |p: Option<PortId>| {
                        p.map_or("none", |p| self.dp.io.members[p.index()].name.as_str())
                    };
                    info!(from = name(from), to = name(to), "active member changed");
                }
                BondEvent::MacChanged { mac } => {
                    info!(%mac, "bond MAC follows the active member (fail_over_mac=active)");
                    match self.link.set_mac(&self.config.bond, mac.0) {
                        Ok(()) => self.mac = mac,
                        Err(e) => warn!("setting the MAC of {}: {e}", self.config.bond),
                    }
                }
                BondEvent::MemberMac { port, mac } => {
                    let name = &self.dp.io.members[port.index()].name;
                    info!(member = %name, %mac, "member MAC (fail_over_mac=follow)");
                    if let Err(e) = self.link.set_mac(name, mac.0) {
                        warn!(member = %name, "setting the MAC: {e}");
                    }
                }
                BondEvent::LacpPartner {
                    port,
                    system,
                    key,
                    partner_port,
                } => {
                    let name = &self.dp.io.members[port.index()].name;
                    if system.is_zero() {
                        info!(member = %name, "LACP partner: none");
                    } else {
                        info!(member = %name, %system, key, port = partner_port, "LACP partner");
                    }
                }
                BondEvent::Carrier { up } => {
                    info!(up, "bond carrier");
                    if let Err(e) = self.dp.io.tap.set_carrier(up) {
                        warn!("TAP carrier: {e}");
                    }
                    // Also here, not only when the kernel reports the TAP running again: a
                    // carrier off and on in quick succession (the bond forming just after a
                    // start) may reach rtnetlink as one change, or none, while a solicitation
                    // the host sent meanwhile was dropped.
                    if up {
                        self.resolve_neighbours_again();
                    }
                }
            }
        }
        // 802.3ad: which members distribute, in which aggregator, is LACP's decision, without a
        // bond event.
        let lacp_aggregator = self.bond.lacp().map(|l| l.active_aggregator().map(|a| a.0));
        if let Some(aggregator) = lacp_aggregator {
            if self.bond.usable() != self.distributing.0.as_slice()
                || aggregator != self.distributing.1
            {
                self.distributing = (self.bond.usable().to_vec(), aggregator);
                self.record_lacp_partners();
                let names: Vec<String> = self
                    .distributing
                    .0
                    .iter()
                    .filter_map(|p| self.dp.io.members.get(p.index()))
                    .map(|m| m.name.clone())
                    .collect();
                self.publish(
                    now,
                    "lacp",
                    serde_json::json!({ "distributing": names, "aggregator": aggregator }),
                );
            }
        }
        // Speed changes above may have queued frames (LACP recomputes a port's key).
        self.dp.send_own(&mut self.bond, now);
        // The kernel programs read the distribution as it now is (one map update).
        if let Some(k) = &mut self.kernel {
            let due =
                self.timers
                    .kernel_due(now, kernel::BEAT_EVERY, self.bond.bucket_sample_interval());
            if due.beat {
                if let Err(e) = k.beat() {
                    warn!("fast path heartbeat: {e}");
                }
            }
            if due.sample {
                if let Err(e) = k.sample_buckets(now, &mut self.bond) {
                    warn!("fast path bucket loads: {e}");
                }
            }
            if let Err(e) = k.sync(&self.bond) {
                warn!("fast path table: {e}");
            }
        }
        self.publish_bucket_moves(now);
    }

    /// Keeps the state file's list of members in sync with a partner up to date, so that a
    /// lagd started after this one is killed can resume them (see `Lacp::resume`).
    fn record_lacp_partners(&mut self) {
        let Some(l) = self.bond.lacp() else { return };
        let records = self
            .dp
            .io
            .members
            .iter()
            .enumerate()
            .filter_map(|(i, m)| {
                let p = l.synced_partner(PortId(i as u16))?;
                Some(LacpRecord::new(&m.name, p))
            })
            .collect();
        if let Err(e) = self.restore.record_lacp(records) {
            warn!("{e:#}");
        }
    }

    /// Streams the bucket moves made since the previous wake: how many per reason, and the
    /// latest in words (as `lagctl show` lists it).
    fn publish_bucket_moves(&mut self, now: Instant) {
        let Some((c, last)) = self.bond.bucket_moves() else {
            return;
        };
        let was = std::mem::replace(&mut self.bucket_moves, c);
        if c.moves() == was.moves() || self.subscribers.is_empty() {
            return;
        }
        let name = |p: PortId| {
            self.dp
                .io
                .members
                .get(p.index())
                .map_or_else(|| format!("#{}", p.index()), |m| m.name.clone())
        };
        let fields = serde_json::json!({
            "rebalance": c.moved_rebalance.saturating_sub(was.moved_rebalance),
            "elephant": c.moved_elephant.saturating_sub(was.moved_elephant),
            "member_left": c.moved_left.saturating_sub(was.moved_left),
            "member_joined": c.moved_joined.saturating_sub(was.moved_joined),
            "latest": last.map(|m| m.describe(name)),
        });
        self.publish(now, "buckets", fields);
    }

    /// `fail_over_mac=follow` changed member MACs: they get their own back when lagd stops.
    fn restore_member_macs(&self) {
        if self.config.options.fail_over_mac != FailOverMac::Follow {
            return;
        }
        for ((_, info), m) in self.bond.ports().zip(&self.dp.io.members) {
            let own = info.perm_mac;
            if self.link.mac(&m.name).is_ok_and(|mac| mac != own.0) {
                if let Err(e) = self.link.set_mac(&m.name, own.0) {
                    warn!(member = %m.name, "restoring the MAC: {e}");
                }
            }
        }
    }

    /// Answers the requests the control threads queued. Never blocks: the clients' reading and
    /// writing happen on their threads.
    fn service_control(&mut self, now: Instant) {
        while let Some(mut pending) = self.control.next() {
            if pending.request == crate::control::Request::Events {
                self.subscribers.push(pending.subscribe());
                continue;
            }
            if let Some(stream) = pending.stream.take() {
                if pending.request == crate::control::Request::Leave {
                    match self.leave(&stream) {
                        Ok(()) => std::process::exit(0),
                        Err(e) => pending.answer(crate::control::error_reply(&e)),
                    }
                    continue;
                }
                match self.hand_over(&stream) {
                    Ok(new) => {
                        // The new lagd owns the TAP, the programs and the members now: this
                        // one ends as if killed, undoing nothing (no member restored, no
                        // carrier off, no program detached).
                        info!(pid = new, "handed the bond over; exiting");
                        std::process::exit(0);
                    }
                    Err(e) => {
                        warn!("planned upgrade: {e}; this lagd keeps the bond");
                        self.record(now, format!("upgrade failed: {e}"));
                        pending.answer(crate::control::error_reply(&e));
                    }
                }
                continue;
            }
            let reply = match self.handle_request(now, &pending.request) {
                Ok(v) => v.to_string(),
                Err(e) => crate::control::error_reply(&e),
            };
            // Members added or removed (also by a reload): their links in the store follow.
            if matches!(
                pending.request,
                crate::control::Request::Member { .. } | crate::control::Request::Reload
            ) {
                self.store_links();
            }
            pending.answer(reply);
        }
    }

    fn handle_request(
        &mut self,
        now: Instant,
        request: &crate::control::Request,
    ) -> Result<serde_json::Value, String> {
        use crate::control::{MemberAction, Request};
        match request {
            // Taken in service_control.
            Request::Events => Err("events: not a single request".into()),
            Request::Handover | Request::Leave => Err("not a single request".into()),
            Request::Status => serde_json::to_value(self.status_at(now)).map_err(|e| e.to_string()),
            Request::Set { options } => {
                let mut trial = self.bond.clone();
                let change = trial
                    .change_options(now, options)
                    .map_err(|e| e.to_string())?;
                self.take_options(trial)?;
                for w in &change.warnings {
                    warn!("{w}");
                }
                if !change.changed.is_empty() {
                    self.record(now, format!("set {}", change.changed.join(" ")));
                }
                Ok(serde_json::json!({
                    "changed": change.changed,
                    "warnings": change.warnings,
                }))
            }
            Request::Active { member } => {
                self.member_index(member)?;
                let changed = self.bond.set_active(now, member)?;
                if changed {
                    self.record(now, format!("active {member}"));
                }
                let changed: Vec<String> = if changed {
                    vec![format!("active {member}")]
                } else {
                    Vec::new()
                };
                Ok(serde_json::json!({ "changed": changed }))
            }
            Request::Reload => {
                let changed = self.reload(now)?;
                Ok(serde_json::json!({ "changed": changed }))
            }
            Request::Member { member, action } => {
                match action {
                    MemberAction::Add => self.add_member(now, member)?,
                    MemberAction::Remove => {
                        let i = self.member_index(member)?;
                        self.release_member(now, i);
                        let ifindex = self.dp.io.members[i].ifindex;
                        self.restore.release_member(member, ifindex);
                        self.config.members.retain(|m| m != member);
                    }
                    MemberAction::Disable => {
                        let i = self.member_index(member)?;
                        self.disabled.insert(i);
                        self.bond.handle_carrier(now, PortId(i as u16), false);
                    }
                    MemberAction::Enable => {
                        let i = self.member_index(member)?;
                        self.disabled.remove(&i);
                        let c = self.link.carrier(member).unwrap_or(false);
                        self.bond.handle_carrier(now, PortId(i as u16), c);
                    }
                }
                let word = serde_json::to_value(action).map_err(|e| e.to_string())?;
                let word = word.as_str().unwrap_or("?").to_owned();
                self.record(now, format!("member {member} {word}"));
                Ok(serde_json::json!({ "changed": [format!("{member} {word}")] }))
            }
        }
    }

    /// Takes `trial` (this bond with changed options) as the bond, unless the kernel fast path
    /// carries the frames and could not carry them so.
    fn take_options(&mut self, trial: Bond) -> Result<(), String> {
        if let Some(k) = &self.kernel {
            let why = trial.kernel_refusal(MAX_MEMBERS).or_else(|| {
                (trial.fast_path_reads() != k.reads()).then_some(
                    "what the members' program hands lagd is set when it starts: the members' \
                     ARP frames reach lagd only when the ARP monitor or balance-alb ran from \
                     the start",
                )
            });
            if let Some(why) = why {
                return Err(format!(
                    "the kernel fast path carries this bond and cannot with this change ({why}); \
                     restart lagd with the new value"
                ));
            }
        }
        self.bond = trial;
        self.config.options = self.bond.options().clone();
        let miimon = self.config.options.miimon;
        self.carrier_poll =
            Duration::from_millis(if miimon > 0 { miimon.min(10) } else { 10 }.into());
        Ok(())
    }

    /// Logs a run-time change and keeps it for the status.
    fn record(&mut self, now: Instant, what: String) {
        info!(change = %what, "control");
        if self.changes.len() == MAX_CHANGES {
            self.changes.pop_front();
        }
        let secs = now.saturating_since(Instant::ZERO).as_secs_f64();
        self.changes.push_back(format!("+{secs:.1}s {what}"));
        self.publish(now, "change", serde_json::json!({ "what": what }));
    }

    /// Reads the configuration file again and applies what changed (options the kernel lets
    /// change on a live bond); anything else is refused and nothing changes.
    fn reload(&mut self, now: Instant) -> Result<Vec<String>, String> {
        let Some(file) = self.config.file.clone() else {
            return Err("lagd was started without --config: there is no file to reload".into());
        };
        let new = Config::from_file(&file).map_err(|e| e.to_string())?;
        let old = &self.config;
        let fixed = [
            ("bond", new.bond != old.bond),
            ("mac", new.mac != old.mac),
            ("mtu", new.mtu != old.mtu),
            ("control", new.control != old.control),
            ("control_group", new.control_group != old.control_group),
        ];
        if let Some((key, _)) = fixed.iter().find(|f| f.1) {
            return Err(format!(
                "{}: '{key}' changed; it takes a restart of lagd (nothing was changed)",
                file.display()
            ));
        }
        let (add, remove): (Vec<String>, Vec<String>) = (
            new.members
                .iter()
                .filter(|m| !old.members.contains(m))
                .cloned()
                .collect(),
            old.members
                .iter()
                .filter(|m| !new.members.contains(m))
                .cloned()
                .collect(),
        );
        let mut trial = self.bond.clone();
        let change = trial
            .reconfigure(now, &new.options)
            .map_err(|e| format!("{}: {e} (nothing was changed)", file.display()))?;
        for name in &add {
            self.link
                .ifindex(name)
                .map_err(|_| format!("{}: member '{name}' does not exist", file.display()))?;
        }
        self.take_options(trial)?;
        let mut changed = change.changed;
        for name in &remove {
            if let Ok(i) = self.member_index(name) {
                self.release_member(now, i);
            }
            changed.push(format!("member {name} removed"));
        }
        self.config.members.retain(|m| !remove.contains(m));
        for name in &add {
            match self.add_member(now, name) {
                Ok(()) => changed.push(format!("member {name} added")),
                Err(e) => changed.push(format!("member {name} not added: {e}")),
            }
        }
        if !changed.is_empty() {
            self.record(now, format!("reload: {}", changed.join(", ")));
        }
        Ok(changed)
    }

    /// The position of the present member `name`.
    fn member_index(&self, name: &str) -> Result<usize, String> {
        self.dp
            .io
            .members
            .iter()
            .position(|m| m.name == name && m.socket.is_some())
            .ok_or_else(|| format!("'{name}' is not a member of {}", self.config.bond))
    }

    /// Enslaves interface `name` as start-up does (the fast path's member program included).
    fn add_member(&mut self, now: Instant, name: &str) -> Result<(), String> {
        if self.member_index(name).is_ok() {
            return Err(format!(
                "'{name}' is already a member of {}",
                self.config.bond
            ));
        }
        if name == self.config.bond {
            return Err(format!("'{name}' is the bond itself"));
        }
        let ifindex = self
            .link
            .ifindex(name)
            .map_err(|_| format!("interface '{name}' does not exist"))?;
        let i = self.dp.io.members.len();
        if self.kernel.is_some() && i >= MAX_MEMBERS {
            return Err(format!(
                "the kernel fast path carries at most {MAX_MEMBERS} members (removed ones count)"
            ));
        }
        // The members carry the bond's MTU, plus stripe's header.
        let bond_mtu = self
            .link
            .mtu(&self.config.bond)
            .map_err(|e| format!("MTU of {}: {e}", self.config.bond))?;
        let mtu = bond_mtu + self.config.options.mode.encap_overhead();
        // Claimed and its settings recorded first: another lagd's member is refused, and
        // lagd's stop gives this one back what it had.
        self.restore
            .adopt_member(name, ifindex)
            .map_err(|e| format!("{e:#}"))?;
        let opened = Self::open_member(
            &self.link,
            &mut self.bond,
            self.epoch,
            name,
            ifindex,
            mtu,
            self.kernel.as_deref_mut(),
        );
        let member = match opened {
            Ok(m) => m,
            Err(e) => {
                // A program attached before the failure is let go: positions stay aligned.
                if let Some(k) = &mut self.kernel {
                    k.truncate(i);
                }
                self.restore.release_member(name, ifindex);
                return Err(format!("{e:#}"));
            }
        };
        let added = member
            .isolation
            .as_ref()
            .is_some_and(IngressDrop::added_qdisc)
            || self
                .kernel
                .as_ref()
                .is_some_and(|k| k.member_added_qdisc(i));
        if added {
            if let Err(e) = self.restore.record_clsact(name, ifindex) {
                warn!(member = name, "{e:#}");
            }
        }
        let token_ok = member
            .readers()
            .try_for_each(|s| {
                self.poller
                    .add(s, TOKEN_MEMBER + i as u64, Interest::READABLE)
            })
            .and_then(|()| {
                member
                    .control
                    .iter()
                    .chain(&member.partner)
                    .try_for_each(|c| {
                        self.poller
                            .add(c, TOKEN_CONTROL_SOCKET + i as u64, Interest::READABLE)
                    })
            });
        self.dp.io.members.push(member);
        self.config.members.push(name.to_owned());
        if let Err(e) = token_ok {
            self.release_member(now, i);
            self.restore.release_member(name, ifindex);
            return Err(format!("polling member {name}: {e}"));
        }
        Ok(())
    }

    /// The status document `lagctl show` prints.
    pub fn status(&mut self) -> Status {
        let now = self.now();
        self.status_at(now)
    }

    fn status_at(&mut self, now: Instant) -> Status {
        let snap = self.bond.snapshot(now);
        let ctx = BondContext {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            bond: self.config.bond.clone(),
            mac: self.mac.to_string(),
            carrier_poll_ms: self.carrier_poll.as_millis() as u32,
            tx_dropped_no_member: self.dp.tx_dropped_no_member,
            lacp_fallback_ms: self.config.options.lacp_fallback,
            now,
        };
        let dp = &mut self.dp;
        let mut status =
            Status::from_snapshot(&snap, ctx, |i, p, lacp| dp.member_status(i, p, lacp));
        status.dataplane = DataplaneStatus {
            path: if self.kernel.is_some() {
                "kernel"
            } else {
                "lagd"
            }
            .to_owned(),
            reason: self.dataplane_reason.clone(),
            attach: self
                .kernel
                .as_ref()
                .and_then(|k| k.attachment())
                .map(|(a, _)| a.name().to_owned()),
            attach_reason: self
                .kernel
                .as_ref()
                .and_then(|k| k.attachment())
                .map(|(_, why)| why.to_owned()),
            isolation: self
                .dp
                .io
                .members
                .iter()
                .find(|m| m.socket.is_some() && !m.isolation_why.is_empty())
                .map(|m| m.isolation_why.clone()),
        };
        status.disabled_members = self
            .disabled
            .iter()
            .map(|&i| self.dp.io.members[i].name.clone())
            .collect();
        status.changes = self.changes.iter().cloned().collect();
        status.warnings = self.config.warnings.clone();
        // What the kernel programs carried counts as the members' traffic too.
        if let Some(counters) = self.kernel.as_ref().map(|k| k.counters()) {
            match counters {
                Ok(c) => {
                    for (m, k) in status.members.iter_mut().zip(&c) {
                        m.tx_packets += k.tx_packets;
                        m.tx_bytes += k.tx_bytes;
                        m.rx_packets += k.rx_packets;
                        m.rx_bytes += k.rx_bytes;
                        m.kernel_tx_packets = k.tx_packets;
                        m.kernel_rx_packets = k.rx_packets;
                        m.rx_dropped
                            .push(("not_delivering".to_owned(), k.rx_dropped));
                        m.rx_dropped
                            .push(("slow_policed".to_owned(), k.slow_policed));
                        if let Some(l) = &mut m.lacp {
                            l.kernel_policed = k.slow_policed;
                        }
                    }
                    if let Some(none) = c.get(MAX_MEMBERS) {
                        status.tx_dropped_no_member += none.tx_packets;
                    }
                }
                Err(e) => warn!("fast path counters: {e}"),
            }
        }
        if let (Some(rx), Some(st)) = (&self.dp.io.stripe_rx, status.stripe.as_mut()) {
            (st.tcp.kernel_segments, st.tcp.kernel_held) = rx.totals();
        }
        let runtime = status.runtime_warnings();
        status.warnings.extend(runtime);
        status
    }
}

/// Drops every capability lagd no longer needs once the bond is up: it keeps `CAP_NET_ADMIN`
/// (links, tcx, sysctls, and restoring the members at exit), `CAP_NET_RAW` (member sockets) and
/// `CAP_BPF` (`CAP_SYS_ADMIN` on a kernel without it) for the fast path. Returns the names of
/// the capabilities kept. Call it from the daemon's only thread, after [`Daemon::start`].
pub fn keep_needed_capabilities() -> io::Result<Vec<String>> {
    use lagd_sys::caps::{self, Cap};
    let bpf = if caps::last_cap()? >= Cap::BPF.0 {
        Cap::BPF
    } else {
        Cap::SYS_ADMIN
    };
    let keep = [Cap::NET_ADMIN, Cap::NET_RAW, bpf];
    let after = caps::keep_only(&keep)?;
    Ok(keep
        .iter()
        .filter(|&&c| after.has(c))
        .map(|c| c.name())
        .collect())
}

/// Installs the seccomp filter ([`lagd_sys::seccomp`]) on every thread of lagd: once the bond
/// is up, the system calls a running lagd never makes (exec, ptrace, mount, module loading,
/// reboot, the keyring, new namespaces and the like) fail with `EPERM`, and no program lagd
/// could start would gain privileges (`no_new_privs`). Returns how many calls it refuses. Call
/// it after [`Daemon::start`] and [`keep_needed_capabilities`].
pub fn install_seccomp_filter() -> io::Result<usize> {
    lagd_sys::seccomp::deny()
}

/// Attaches the ingress drop that keeps member `name`'s own stack off its frames, with tcx or
/// on the clsact qdisc as `how` says (auto: tcx where the kernel has it); returns it (`None`:
/// only the sysctls guard the member, warned) and how and why, for the status.
fn isolate(name: &str, ifindex: u32, how: FastPathAttach) -> (Option<IngressDrop>, String) {
    let attempt = kernel::attach_as(how, |a| IngressDrop::attach_with(ifindex, a));
    match attempt {
        Ok((d, why)) => {
            let text = format!("{} ingress drop ({why})", d.how());
            info!(member = name, "isolation: {text}");
            if d.replaced() > 0 {
                info!(
                    member = name,
                    "replaced {} filter(s) of an earlier lagd on the member's ingress",
                    d.replaced()
                );
            }
            (Some(d), text)
        }
        Err(e) => {
            warn!(
                member = name,
                "no ingress drop ({e}); relying on arp_ignore/disable_ipv6"
            );
            (None, format!("sysctls only, no ingress drop ({e})"))
        }
    }
}

fn duplex(d: Duplex) -> Option<bool> {
    match d {
        Duplex::Full => Some(true),
        Duplex::Half => Some(false),
        Duplex::Unknown => None,
    }
}

fn now_since(epoch: StdInstant) -> Instant {
    Instant::from_micros(epoch.elapsed().as_micros() as u64)
}

/// A random 32-bit value (stripe epochs): std's per-process random hasher keys, the pid and
/// the time.
fn random_u32() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(t.as_nanos());
    }
    h.finish() as u32
}
