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
//! - a Unix control socket answers `status` with the JSON [`Status`];
//! - SIGTERM/SIGINT end the loop cleanly: the TAP's carrier goes off and stays (the TAP is
//!   persistent, so a restarted lagd finds the host's configuration intact).
//!
//! Members are kept from their own kernel stack (which would otherwise answer ARP for the bond's
//! address with the member's MAC): a tcx ingress program drops every frame after AF_PACKET has
//! seen it, and IPv6 is disabled and `arp_ignore=8` set on the member.

pub mod control;
pub mod dataplane;
mod kernel;

use std::io;
use std::os::unix::net::UnixListener;
use std::time::{Duration, Instant as StdInstant};

use anyhow::{Context, Result};
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
use crate::status::{BondContext, DataplaneStatus, Status};
pub use control::query_status;
pub use dataplane::member_data_socket;
use dataplane::{Dataplane, Member};
use kernel::{Choice, Kernel};
use lagd_sys::fastpath::MAX_MEMBERS;

const TOKEN_TAP: u64 = 0;
const TOKEN_SIGNAL: u64 = 1;
const TOKEN_CONTROL: u64 = 2;
const TOKEN_LINK: u64 = 3;
const TOKEN_MEMBER: u64 = 100;
/// Member control sockets (slow protocols), serviced before anything else.
const TOKEN_CONTROL_SOCKET: u64 = 10_000;

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
    control: UnixListener,
    epoch: StdInstant,
    carrier_poll: Duration,
    /// The ready descriptors of one wake, reused so the loop does not allocate.
    tokens: Vec<u64>,
    /// The kernel fast path, when it carries the data frames.
    kernel: Option<Box<Kernel>>,
    /// Why lagd carries the data frames itself (`None`: the kernel does).
    dataplane_reason: Option<String>,
}

impl Daemon {
    /// Sets the bond up: TAP, members, control socket. Nothing is left half-done on error
    /// except a TAP created for the bond (persistent by design).
    pub fn start(config: Config) -> Result<Self, StartError> {
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
        for w in &config.warnings {
            warn!("{w}");
        }
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
        let tap = Tap::create(
            &config.bond,
            TapOptions {
                vnet_hdr: true,
                multi_queue: false,
                persist: true,
                // Stripe mode segments super-frames itself, and only TCP ones.
                no_uso: config.options.mode.segments_in_software(),
            },
        )
        .with_context(|| format!("creating TAP {}", config.bond))?;
        link.set_mac(&config.bond, mac.0)
            .with_context(|| format!("setting the MAC of {}", config.bond))?;
        link.set_mtu(&config.bond, mtu)
            .with_context(|| format!("setting the MTU of {}", config.bond))?;
        tap.set_carrier(false).context("TAP carrier")?;

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
        match &dataplane_reason {
            None => info!("dataplane: kernel (tcx fast path; lagd decides)"),
            Some(why) => info!("dataplane: lagd ({why})"),
        }
        let mut members = Vec::new();
        for (name, &ifindex) in config.members.iter().zip(&found) {
            members.push(Self::open_member(
                &link,
                &mut bond,
                epoch,
                name,
                ifindex,
                member_mtu,
                kernel.as_deref_mut(),
            )?);
        }
        bond.set_stripe_epoch(now_since(epoch), random_u32());

        let control = control::bind(&config.control)?;
        let poller = Poller::new().context("epoll")?;
        let signals = SignalFd::new(&[Signal::TERM, Signal::INT]).context("signalfd")?;
        let mut events = LinkEvents::new().context("rtnetlink")?;
        events.request_dump().context("rtnetlink dump")?;
        poller.add(&tap, TOKEN_TAP, Interest::READABLE)?;
        poller.add(&signals, TOKEN_SIGNAL, Interest::READABLE)?;
        poller.add(&control, TOKEN_CONTROL, Interest::READABLE)?;
        poller.add(&events, TOKEN_LINK, Interest::READABLE)?;
        for (i, m) in members.iter().enumerate() {
            if let Some(s) = &m.socket {
                poller.add(s, TOKEN_MEMBER + i as u64, Interest::READABLE)?;
            }
            if let Some(c) = &m.control {
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
        let mut d = Self {
            config,
            bond,
            mac,
            dp: Dataplane::new(tap, members),
            link,
            events,
            poller,
            signals,
            control,
            epoch,
            carrier_poll,
            tokens: Vec::with_capacity(16),
            kernel,
            dataplane_reason,
        };
        let now = d.now();
        d.after_wake(now);
        Ok(d)
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
        // With the kernel path the members' program isolates the member (every frame is
        // delivered to the TAP, dropped, or a slow-protocols frame for lagd's socket), and the
        // data socket only sends: bound to no protocol, it receives nothing, so no frame the
        // program redirected is copied to lagd.
        let (isolation, data_options) = match kernel {
            Some(k) => {
                k.attach_member(ifindex)
                    .with_context(|| format!("fast path program on member {name}"))?;
                let send_only = PacketOptions {
                    protocol: 0,
                    ..member_data_socket()
                };
                (None, send_only)
            }
            None => {
                let isolation = match IngressDrop::attach(ifindex) {
                    Ok(d) => Some(d),
                    Err(e) => {
                        warn!(
                            member = name,
                            "no tcx ingress drop ({e}); relying on arp_ignore/disable_ipv6"
                        );
                        None
                    }
                };
                (isolation, member_data_socket())
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
        // Promiscuous: a physical NIC must accept frames for the bond's MAC. Undone when the
        // socket closes.
        socket
            .add_membership(Membership::Promisc)
            .with_context(|| format!("promiscuous mode on member {name}"))?;
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
            control: Some(control),
            isolation,
            counters: Default::default(),
        })
    }

    fn now(&self) -> Instant {
        now_since(self.epoch)
    }

    /// Runs until SIGTERM or SIGINT. The clock is read once per wake, right after it; the
    /// next wake is the bond's earliest deadline or the next carrier poll.
    pub fn run(mut self) -> Result<()> {
        let mut ready = Events::with_capacity(16);
        let mut now = self.now();
        let mut next_poll = now;
        loop {
            let wake = self
                .bond
                .poll_timeout()
                .map_or(next_poll, |t| t.min(next_poll));
            self.poller
                .wait(&mut ready, Some(wake.saturating_since(now)))
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
                            info!(?sig, "stopping");
                            let _ = self.dp.io.tap.set_carrier(false);
                            self.bond.shutdown(now);
                            self.after_wake(now);
                            self.restore_member_macs();
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
            if now >= next_poll {
                self.poll_carrier(now);
                next_poll = now + self.carrier_poll;
            }
            if self.bond.poll_timeout().is_some_and(|t| t <= now) {
                self.bond.handle_timeout(now, &mut self.dp.io);
            }
            self.after_wake(now);
        }
    }

    fn poll_carrier(&mut self, now: Instant) {
        for i in 0..self.dp.io.members.len() {
            if self.dp.io.members[i].socket.is_none() {
                continue;
            }
            match self.link.carrier(&self.dp.io.members[i].name) {
                Ok(c) => self.bond.handle_carrier(now, PortId(i as u16), c),
                Err(e) if e.raw_os_error() == Some(19) || e.kind() == io::ErrorKind::NotFound => {
                    self.member_gone(now, i)
                }
                Err(e) => warn!(member = %self.dp.io.members[i].name, "carrier: {e}"),
            }
        }
    }

    fn member_gone(&mut self, now: Instant, i: usize) {
        let m = &mut self.dp.io.members[i];
        if let Some(c) = m.control.take() {
            let _ = self.poller.delete(&c);
            m.counters.slow_socket_drops += c.statistics().map_or(0, |s| u64::from(s.drops));
        }
        if let Some(s) = m.socket.take() {
            let _ = self.poller.delete(&s);
            m.counters.rx_socket_drops += s.statistics().map_or(0, |s| u64::from(s.drops));
        }
        m.isolation = None;
        if let Some(k) = &mut self.kernel {
            k.member_gone(i);
        }
        warn!(member = %m.name, "member interface removed");
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
                        self.bond
                            .handle_carrier(now, PortId(i as u16), s.up && s.carrier);
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

    /// After every wake: the frames the bond queued go out, and its events are acted on.
    fn after_wake(&mut self, now: Instant) {
        self.dp.send_own(&mut self.bond, now);
        while let Some(ev) = self.bond.poll_event() {
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
                }
            }
        }
        // Speed changes above may have queued frames (LACP recomputes a port's key).
        self.dp.send_own(&mut self.bond, now);
        // The kernel programs read the distribution as it now is (one map update).
        if let Some(k) = &mut self.kernel {
            if let Err(e) = k.sync(&self.bond) {
                warn!("fast path table: {e}");
            }
        }
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

    fn service_control(&mut self, now: Instant) {
        loop {
            match self.control.accept() {
                Ok((stream, _)) => {
                    let status = || self.status_at(now);
                    if let Err(e) = control::answer(stream, status) {
                        warn!("control client: {e}");
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    warn!("control socket: {e}");
                    return;
                }
            }
        }
    }

    /// The status document `lagctl show` prints.
    pub fn status(&mut self) -> Status {
        let now = self.now();
        self.status_at(now)
    }

    fn status_at(&mut self, now: Instant) -> Status {
        let snap = self.bond.snapshot();
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
        };
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
                    }
                    if let Some(none) = c.get(MAX_MEMBERS) {
                        status.tx_dropped_no_member += none.tx_packets;
                    }
                }
                Err(e) => warn!("fast path counters: {e}"),
            }
        }
        status
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
