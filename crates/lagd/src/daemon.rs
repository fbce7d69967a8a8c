//! The daemon's event loop: the only place that reads the clock and owns descriptors.
//!
//! One thread, one epoll set (measured best on 2 cores: see `shared/research/dataplane-limits.md`):
//! - the bond's TAP (`IFF_VNET_HDR`, TSO/GSO/checksum offloads): frames from the host go to the
//!   member [`Bond::tx_choice`] names, 64 KB GSO frames and their `virtio_net_hdr` untouched;
//! - one AF_PACKET socket per member (`PACKET_VNET_HDR`, `PACKET_IGNORE_OUTGOING`): frames go to
//!   the TAP when [`Bond::rx_verdict`] says so;
//! - carrier is read every `min(miimon, 10)` ms with `ETHTOOL_GLINK` (immediate), and rtnetlink
//!   link events trigger an extra read at once (they can arrive ~1 s late: the kernel's linkwatch);
//! - a Unix control socket answers `status` with the JSON [`Status`];
//! - SIGTERM/SIGINT end the loop cleanly: the TAP's carrier goes off and stays (the TAP is
//!   persistent, so a restarted lagd finds the host's configuration intact).
//!
//! Members are kept from their own kernel stack (which would otherwise answer ARP for the bond's
//! address with the member's MAC): a tcx ingress program drops every frame after AF_PACKET has
//! seen it, and IPv6 is disabled and `arp_ignore=8` set on the member.

use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::time::{Duration, Instant as StdInstant};

use anyhow::{Context, Result, bail};
use lagd_proto::bond::{
    Bond, BondEvent, DropReason, FailOverMac, Mode, PortId, PortInfo, RxVerdict, TxChoice,
};
use lagd_proto::stripe::Stripe;
use lagd_proto::stripe::header::{HEADER_LEN as STRIPE_HEADER, is_stripe_frame};
use lagd_proto::stripe::segment::{GsoInfo, complete_checksum, segment};
use lagd_proto::time::Instant;
use lagd_proto::wire::EthernetAddress;
use lagd_sys::isolate::{IngressDrop, quiet_stack};
use lagd_sys::link::{Duplex, LinkControl, LinkEvent, LinkEvents};
use lagd_sys::packet::{Membership, PacketOptions, PacketSocket};
use lagd_sys::poll::{Events, Interest, Poller, Signal, SignalFd};
use lagd_sys::tap::{Tap, TapOptions};
use lagd_sys::vnet::VirtioNetHdr;
use tracing::{debug, info, warn};

use crate::config::Config;
use crate::status::{
    BondContext, BucketMemberStatus, BucketStatus, BucketsStatus, FailureCount, MemberStatus,
    Status, StripeStatus,
};

const VNET_HDR: usize = 10;
/// A 64 KB GSO frame plus its header, with room to spare.
const BUF_LEN: usize = 65536 + VNET_HDR + 64;
/// Frames handled per readiness event before looking at the other descriptors.
const BATCH: usize = 64;
const SOCKET_BUFFER: usize = 4 << 20;

const TOKEN_TAP: u64 = 0;
const TOKEN_SIGNAL: u64 = 1;
const TOKEN_CONTROL: u64 = 2;
const TOKEN_LINK: u64 = 3;
const TOKEN_MEMBER: u64 = 100;
/// Member control sockets (slow protocols), serviced before anything else.
const TOKEN_CONTROL_SOCKET: u64 = 10_000;
/// At most one warning per member per interval about LACPDUs its socket refused.
const LACPDU_WARN_INTERVAL: Duration = Duration::from_secs(10);

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

#[derive(Default)]
struct Counters {
    rx_packets: u64,
    rx_bytes: u64,
    tx_packets: u64,
    tx_bytes: u64,
    rx_dropped: [u64; DropReason::ALL.len()],
    tx_dropped: u64,
    rx_socket_drops: u64,
    /// LACPDUs the member's control socket refused (the engine counts them as sent).
    lacpdu_tx_errors: FailureCount,
}

struct Member {
    name: String,
    ifindex: u32,
    socket: Option<PacketSocket>,
    /// Slow-protocols frames in (on their own socket, so a busy data socket cannot starve
    /// LACP), and every frame the bond sends itself out (no virtio_net_hdr).
    control: Option<PacketSocket>,
    _isolation: Option<IngressDrop>,
    counters: Counters,
}

/// A running bond.
pub struct Daemon {
    config: Config,
    bond: Bond,
    mac: EthernetAddress,
    tap: Tap,
    members: Vec<Member>,
    link: LinkControl,
    events: LinkEvents,
    poller: Poller,
    signals: SignalFd,
    control: UnixListener,
    epoch: StdInstant,
    carrier_poll: Duration,
    tx_dropped_no_member: u64,
    /// balance-tlb/alb: delivered frames go through [`Bond::rx_fixup`].
    rewrites_rx: bool,
    /// Stripe mode: host frames are segmented, numbered and encapsulated; 0x88b5 frames from
    /// members go through the reorder buffer.
    stripe: bool,
    /// Stripe mode: where super-frames are segmented, and where frames for the TAP get their
    /// `virtio_net_hdr`.
    seg_buf: Vec<u8>,
    deliver_buf: Vec<u8>,
    /// Stripe mode: host frames that could not be striped (malformed super-frames).
    stripe_tx_errors: u64,
    /// Stripe mode: 0x88b5 frames that did not parse.
    stripe_rx_errors: u64,
    buf: Vec<u8>,
    /// The ready descriptors of one wake, reused so the loop does not allocate.
    tokens: Vec<u64>,
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
                no_uso: config.options.mode == Mode::Stripe,
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
        let member_mtu = if config.options.mode == Mode::Stripe {
            let want = mtu + STRIPE_HEADER as u32;
            let raised = config.members.iter().all(|m| link.set_mtu(m, want).is_ok());
            if raised {
                want
            } else {
                let lowered = mtu - STRIPE_HEADER as u32;
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
        let mut members = Vec::new();
        for (name, &ifindex) in config.members.iter().zip(&found) {
            members.push(Self::open_member(
                &link, &mut bond, epoch, name, ifindex, member_mtu,
            )?);
        }
        bond.set_stripe_epoch(now_since(epoch), random_u32());

        let control = bind_control(&config.control)?;
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
        let mode = config.options.mode;
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
            tap,
            members,
            link,
            events,
            poller,
            signals,
            control,
            epoch,
            carrier_poll,
            tx_dropped_no_member: 0,
            rewrites_rx: matches!(mode, Mode::BalanceTlb | Mode::BalanceAlb),
            stripe: mode == Mode::Stripe,
            seg_buf: vec![0; BUF_LEN],
            deliver_buf: vec![0; BUF_LEN],
            stripe_tx_errors: 0,
            stripe_rx_errors: 0,
            buf: vec![0; BUF_LEN],
            tokens: Vec::with_capacity(16),
        };
        d.handle_bond_events();
        Ok(d)
    }

    fn open_member(
        link: &LinkControl,
        bond: &mut Bond,
        epoch: StdInstant,
        name: &str,
        ifindex: u32,
        mtu: u32,
    ) -> Result<Member> {
        link.set_mtu(name, mtu)
            .with_context(|| format!("setting MTU {mtu} on member {name}"))?;
        quiet_stack(name).with_context(|| format!("sysctls of member {name}"))?;
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
        link.set_up(name, true)
            .with_context(|| format!("bringing member {name} up"))?;
        let socket = PacketSocket::bind(ifindex, member_data_socket())
            .with_context(|| format!("packet socket on member {name}"))?;
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
            _isolation: isolation,
            counters: Counters::default(),
        })
    }

    fn now(&self) -> Instant {
        now_since(self.epoch)
    }

    /// Runs until SIGTERM or SIGINT.
    pub fn run(mut self) -> Result<()> {
        let mut ready = Events::with_capacity(16);
        let mut next_poll = self.now();
        loop {
            let now = self.now();
            let stripe_due = self.bond.stripe().and_then(Stripe::poll_timeout);
            let wake = [self.bond.poll_timeout(), stripe_due]
                .into_iter()
                .flatten()
                .fold(next_poll, Instant::min);
            self.poller
                .wait(&mut ready, Some(wake.saturating_since(now)))
                .context("epoll_wait")?;
            // A member socket left with frames to read this round (its batch ran out).
            let mut backlog = false;
            let mut tokens = std::mem::take(&mut self.tokens);
            tokens.clear();
            tokens.extend(ready.iter().map(|e| e.token()));
            // Slow protocols first: LACP timing must not suffer from a saturated dataplane.
            tokens.sort_unstable_by_key(|&t| std::cmp::Reverse(t >= TOKEN_CONTROL_SOCKET));
            for &token in &tokens {
                match token {
                    TOKEN_TAP => self.service_tap(),
                    TOKEN_SIGNAL => {
                        if let Some(sig) = self.signals.read().context("signalfd read")? {
                            info!(?sig, "stopping");
                            let _ = self.tap.set_carrier(false);
                            let now = self.now();
                            self.bond.shutdown(now);
                            self.handle_bond_events();
                            self.restore_member_macs();
                            return Ok(());
                        }
                    }
                    TOKEN_CONTROL => self.service_control(),
                    TOKEN_LINK => self.service_link_events(),
                    t if t >= TOKEN_CONTROL_SOCKET => {
                        self.service_control_socket((t - TOKEN_CONTROL_SOCKET) as usize)
                    }
                    t => backlog |= self.service_member((t - TOKEN_MEMBER) as usize),
                }
            }
            self.tokens = tokens;
            let now = self.now();
            if now >= next_poll {
                self.poll_carrier(now);
                next_poll = now + self.carrier_poll;
            }
            if self.bond.poll_timeout().is_some_and(|t| t <= now) {
                self.bond.handle_timeout(now);
            }
            // Stripe's reorder gaps and peer liveness, on their own deadline. A gap times out
            // only once every member has been read dry: a frame still in a socket is not lost.
            let stripe_due = self.bond.stripe().and_then(Stripe::poll_timeout);
            if !backlog && stripe_due.is_some_and(|t| t <= now) {
                self.poll_stripe(now);
            }
            self.handle_bond_events();
        }
    }

    fn service_tap(&mut self) {
        if self.stripe {
            return self.service_tap_stripe();
        }
        // One clock read per batch: bucket loads, receive-balancing timing.
        let now = self.now();
        for _ in 0..BATCH {
            let Some(n) = read_tap(&self.tap, &mut self.buf) else {
                return;
            };
            if n <= VNET_HDR {
                continue;
            }
            let frame_len = (n - VNET_HDR) as u64;
            self.bond.learn_from_host(&self.buf[VNET_HDR..n]);
            match self.bond.tx_choice(now, &self.buf[VNET_HDR..n]) {
                TxChoice::Port(p) => {
                    self.bond.tx_fixup(p, &mut self.buf[VNET_HDR..n]);
                    send(&mut self.members[p.index()], &self.buf[..n], frame_len);
                }
                TxChoice::All => {
                    for &p in self.bond.usable() {
                        send(&mut self.members[p.index()], &self.buf[..n], frame_len);
                    }
                }
                TxChoice::Drop => self.tx_dropped_no_member += 1,
            }
        }
    }

    /// Stripe mode: each host frame (super-frames segmented first, partial checksums
    /// completed) is numbered and encapsulated in place and sent on the member the stripe
    /// engine chose, with an empty `virtio_net_hdr`. The TAP is read at offset 8 so the
    /// Ethernet header can move down for the stripe header without a copy.
    fn service_tap_stripe(&mut self) {
        // One clock read per batch, as in `service_tap`.
        let now = self.now();
        for _ in 0..BATCH {
            let Some(n) = read_tap(&self.tap, &mut self.buf[STRIPE_HEADER..]) else {
                return;
            };
            if n <= VNET_HDR {
                continue;
            }
            let len = n - VNET_HDR;
            let Some(h) = VirtioNetHdr::from_bytes(&self.buf[STRIPE_HEADER..FRAME]) else {
                continue;
            };
            self.bond.learn_from_host(&self.buf[FRAME..FRAME + len]);
            let gso = GsoInfo::from_virtio(
                h.flags,
                h.gso_type,
                h.hdr_len,
                h.gso_size,
                h.csum_start,
                h.csum_offset,
            );
            let Some(stripe) = self.bond.stripe_mut().filter(|s| s.is_striping()) else {
                // No stripe peer (yet): the frame goes as it is, on the bond's active member,
                // so the bond still carries traffic while the status names the problem.
                match self.bond.tx_choice(now, &self.buf[FRAME..FRAME + len]) {
                    TxChoice::Port(p) => send(
                        &mut self.members[p.index()],
                        &self.buf[STRIPE_HEADER..STRIPE_HEADER + n],
                        len as u64,
                    ),
                    _ => self.tx_dropped_no_member += 1,
                }
                continue;
            };
            let members = &mut self.members;
            let mut failed = 0u64;
            if gso.is_gso() {
                let frame = &self.buf[FRAME..FRAME + len];
                let r = segment(frame, &gso, &mut self.seg_buf, FRAME, |seg| {
                    let len = seg.len() - FRAME;
                    failed += u64::from(!send_striped(stripe, members, seg, len));
                });
                if r.is_err() {
                    failed += 1;
                }
            } else {
                let frame = &mut self.buf[FRAME..FRAME + len];
                if gso.needs_csum
                    && complete_checksum(frame, gso.csum_start.into(), gso.csum_offset.into())
                        .is_err()
                {
                    failed += 1;
                } else {
                    failed += u64::from(!send_striped(stripe, members, &mut self.buf, len));
                }
            }
            self.stripe_tx_errors += failed;
        }
    }

    /// Stripe mode: gaps whose timeout passed, silent peers.
    fn poll_stripe(&mut self, now: Instant) {
        let (tap, out) = (&self.tap, &mut self.deliver_buf);
        if let Some(stripe) = self.bond.stripe_mut() {
            stripe.poll(now, &mut |f| to_tap(tap, out, f));
        }
    }

    /// Reads up to a batch from member `i`; true if frames may be left (the batch ran out).
    fn service_member(&mut self, i: usize) -> bool {
        let port = PortId(i as u16);
        // One clock read per batch is precise enough for the ARP monitor's intervals.
        let now =
            (self.bond.arp_monitoring() || self.rewrites_rx || self.stripe).then(|| self.now());
        for _ in 0..BATCH {
            let m = &mut self.members[i];
            let Some(socket) = &m.socket else {
                return false;
            };
            let meta = match socket.recv_from(&mut self.buf) {
                Ok(meta) => meta,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // ENETDOWN once after the member went down; carrier polling handles the rest.
                Err(_) => return false,
            };
            if meta.len <= VNET_HDR {
                continue;
            }
            let frame = &self.buf[VNET_HDR..meta.len];
            if let Some(now) = now {
                self.bond.note_rx(now, port, frame);
            }
            m.counters.rx_packets += 1;
            m.counters.rx_bytes += frame.len() as u64;
            if self.stripe && is_stripe_frame(frame) {
                let (tap, out) = (&self.tap, &mut self.deliver_buf);
                let now = now.unwrap_or(Instant::ZERO);
                if let Some(stripe) = self.bond.stripe_mut() {
                    let frame = &mut self.buf[VNET_HDR..meta.len];
                    if stripe
                        .handle_frame(now, port, frame, &mut |f| to_tap(tap, out, f))
                        .is_err()
                    {
                        self.stripe_rx_errors += 1;
                    }
                }
                continue;
            }
            match self.bond.rx_verdict(port, frame) {
                RxVerdict::Deliver => {
                    if let (true, Some(now)) = (self.rewrites_rx, now) {
                        self.bond.rx_fixup(now, &mut self.buf[VNET_HDR..meta.len]);
                    }
                    // EIO while the bond is administratively down: the host does not want it.
                    let _ = self.tap.write(&self.buf[..meta.len]);
                }
                RxVerdict::Drop(reason) => {
                    let k = DropReason::ALL
                        .iter()
                        .position(|r| *r == reason)
                        .unwrap_or(0);
                    m.counters.rx_dropped[k] += 1;
                }
            }
        }
        true
    }

    fn service_control_socket(&mut self, i: usize) {
        let mut frame = [0u8; 1600];
        for _ in 0..BATCH {
            let Some(c) = &self.members[i].control else {
                return;
            };
            match c.recv(&mut frame) {
                Ok(n) => {
                    let now = self.now();
                    self.bond.handle_frame(now, PortId(i as u16), &frame[..n]);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return,
            }
        }
    }

    fn poll_carrier(&mut self, now: Instant) {
        for i in 0..self.members.len() {
            if self.members[i].socket.is_none() {
                continue;
            }
            match self.link.carrier(&self.members[i].name) {
                Ok(c) => self.bond.handle_carrier(now, PortId(i as u16), c),
                Err(e) if e.raw_os_error() == Some(19) || e.kind() == io::ErrorKind::NotFound => {
                    self.member_gone(now, i)
                }
                Err(e) => warn!(member = %self.members[i].name, "carrier: {e}"),
            }
        }
    }

    fn member_gone(&mut self, now: Instant, i: usize) {
        let m = &mut self.members[i];
        if let Some(c) = m.control.take() {
            let _ = self.poller.delete(&c);
        }
        if let Some(s) = m.socket.take() {
            let _ = self.poller.delete(&s);
            m.counters.rx_socket_drops += s.statistics().map_or(0, |s| u64::from(s.drops));
        }
        m._isolation = None;
        warn!(member = %m.name, "member interface removed");
        self.bond.remove_port(now, PortId(i as u16));
    }

    fn service_link_events(&mut self) {
        loop {
            match self.events.next_event() {
                Ok(Some(LinkEvent::Changed(s))) => {
                    if let Some(i) = self.members.iter().position(|m| m.ifindex == s.ifindex) {
                        if self.members[i].socket.is_some() {
                            let now = self.now();
                            self.bond
                                .handle_carrier(now, PortId(i as u16), s.up && s.carrier);
                        }
                    }
                }
                Ok(Some(LinkEvent::Removed(s))) => {
                    if let Some(i) = self.members.iter().position(|m| m.ifindex == s.ifindex) {
                        if self.members[i].socket.is_some() {
                            let now = self.now();
                            self.member_gone(now, i);
                        }
                    }
                }
                Ok(Some(LinkEvent::Overrun)) => {
                    let now = self.now();
                    self.poll_carrier(now);
                }
                Ok(None) => return,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    warn!("rtnetlink: {e}");
                    return;
                }
            }
        }
    }

    fn handle_bond_events(&mut self) {
        // Frames the bond sends itself: LACPDUs, Marker responses, ARP probes, gratuitous ARPs.
        let now = self.now();
        let mut frame = [0u8; 1600];
        // Only when something is due: the LACP engine runs its machines on every call.
        let due = self.bond.poll_timeout().is_some_and(|t| t <= now);
        while let Some(tx) = due
            .then(|| self.bond.poll_transmit(now, &mut frame))
            .flatten()
        {
            let m = &mut self.members[tx.port.index()];
            let sent = match &m.control {
                Some(c) => c.send(&frame[..tx.len]).map(drop),
                None => Err(io::ErrorKind::NotConnected.into()),
            };
            let Err(e) = sent else { continue };
            if !is_lacpdu(&frame[..tx.len]) {
                debug!(member = %m.name, "control frame not sent: {e}");
                continue;
            }
            // The engine counted it as sent: count the failure for `lagctl show`, and log it at
            // most every LACPDU_WARN_INTERVAL per member, with how many failed since.
            if let Some(failed) = m
                .counters
                .lacpdu_tx_errors
                .record(now, LACPDU_WARN_INTERVAL)
            {
                let total = m.counters.lacpdu_tx_errors.total();
                warn!(member = %m.name, failed, total, "LACPDU not sent: {e}");
            }
        }
        while let Some(ev) = self.bond.poll_event() {
            match ev {
                BondEvent::Link { port, status } => {
                    let name = self.members[port.index()].name.clone();
                    info!(member = %name, %status, "link");
                    if status.usable() {
                        // Speed and duplex can change with the link (and feed LACP's key).
                        if let Ok(sd) = self.link.speed_duplex(&name) {
                            self.bond
                                .set_port_speed(now, port, sd.speed_mbps, duplex(sd.duplex));
                        }
                    }
                }
                BondEvent::ActiveChanged { .. } if !self.config.options.mode.uses_primary() => {}
                BondEvent::ActiveChanged { from, to } => info!(
                    from = from.map_or("none", |p| self.members[p.index()].name.as_str()),
                    to = to.map_or("none", |p| self.members[p.index()].name.as_str()),
                    "active member changed"
                ),
                BondEvent::MacChanged { mac } => {
                    info!(%mac, "bond MAC follows the active member (fail_over_mac=active)");
                    match self.link.set_mac(&self.config.bond, mac.0) {
                        Ok(()) => self.mac = mac,
                        Err(e) => warn!("setting the MAC of {}: {e}", self.config.bond),
                    }
                }
                BondEvent::MemberMac { port, mac } => {
                    let name = &self.members[port.index()].name;
                    info!(member = %name, %mac, "member MAC (fail_over_mac=follow)");
                    if let Err(e) = self.link.set_mac(name, mac.0) {
                        warn!(member = %name, "setting the MAC: {e}");
                    }
                }
                BondEvent::Carrier { up } => {
                    info!(up, "bond carrier");
                    if let Err(e) = self.tap.set_carrier(up) {
                        warn!("TAP carrier: {e}");
                    }
                }
            }
        }
    }

    /// `fail_over_mac=follow` changed member MACs: they get their own back when lagd stops.
    fn restore_member_macs(&self) {
        if self.config.options.fail_over_mac != FailOverMac::Follow {
            return;
        }
        for ((_, info), m) in self.bond.ports().zip(&self.members) {
            let own = info.perm_mac;
            if self.link.mac(&m.name).is_ok_and(|mac| mac != own.0) {
                if let Err(e) = self.link.set_mac(&m.name, own.0) {
                    warn!(member = %m.name, "restoring the MAC: {e}");
                }
            }
        }
    }

    fn service_control(&mut self) {
        loop {
            match self.control.accept() {
                Ok((stream, _)) => {
                    if let Err(e) = self.answer(stream) {
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

    fn answer(&mut self, stream: UnixStream) -> io::Result<()> {
        stream.set_nonblocking(false)?;
        stream.set_read_timeout(Some(Duration::from_millis(500)))?;
        stream.set_write_timeout(Some(Duration::from_millis(500)))?;
        let mut line = String::new();
        BufReader::new(&stream).read_line(&mut line)?;
        let reply = match line.trim() {
            "status" => serde_json::to_string(&self.status()).map_err(io::Error::other)?,
            other => {
                serde_json::json!({ "error": format!("unknown request '{other}'") }).to_string()
            }
        };
        let mut w = &stream;
        w.write_all(reply.as_bytes())?;
        w.write_all(b"\n")
    }

    /// The status document `lagctl show` prints.
    pub fn status(&mut self) -> Status {
        let snap = self.bond.snapshot();
        let now = self.now();
        let buckets = snap.buckets.as_ref().map(|b| {
            let name = |p: PortId| {
                self.members
                    .get(p.index())
                    .map_or_else(|| format!("#{}", p.0), |m| m.name.clone())
            };
            BucketsStatus {
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
                            pending: k.pending.map(name),
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
                            m.describe(name)
                        )
                    })
                    .collect(),
            }
        });
        let stripe = snap.stripe.as_ref().map(|st| {
            let names: Vec<&str> = self.members.iter().map(|m| m.name.as_str()).collect();
            let r = &st.reorder;
            StripeStatus {
                peer: st.peers.with_names(&names).to_string(),
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
                dropped: r.duplicates + r.stale + r.oversize + self.stripe_rx_errors,
                resyncs: r.resyncs,
                held: st.held_now,
                max_held: r.max_occupancy,
            }
        });
        let ctx = BondContext {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            bond: self.config.bond.clone(),
            mac: self.mac.to_string(),
            carrier_poll_ms: self.carrier_poll.as_millis() as u32,
            tx_dropped_no_member: self.tx_dropped_no_member,
            lacp_fallback_ms: self.config.options.lacp_fallback,
        };
        let members = &mut self.members;
        let status = Status::from_snapshot(&snap, ctx, |i, p, lacp| {
            let Some(m) = members.get_mut(i) else {
                return MemberStatus::from_snapshot(p, lacp, 0);
            };
            if let Some(s) = &m.socket {
                // PACKET_STATISTICS resets on read: accumulate.
                m.counters.rx_socket_drops += s.statistics().map_or(0, |s| u64::from(s.drops));
            }
            let c = &m.counters;
            MemberStatus {
                rx_packets: c.rx_packets,
                rx_bytes: c.rx_bytes,
                tx_packets: c.tx_packets,
                tx_bytes: c.tx_bytes,
                rx_dropped: DropReason::ALL
                    .iter()
                    .zip(c.rx_dropped)
                    .map(|(r, n)| (r.as_str().to_owned(), n))
                    .collect(),
                tx_dropped: c.tx_dropped,
                rx_socket_drops: c.rx_socket_drops,
                ..MemberStatus::from_snapshot(p, lacp, c.lacpdu_tx_errors.total())
            }
        });
        Status {
            buckets,
            stripe,
            ..status
        }
    }
}

/// Whether a frame the bond sends is a LACPDU (slow protocols, subtype 1).
fn is_lacpdu(frame: &[u8]) -> bool {
    frame.get(12..15) == Some(&[0x88, 0x09, 1][..])
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

/// Where a host frame sits in a stripe-mode buffer: after room for the stripe header and the
/// `virtio_net_hdr` the TAP wrote.
const FRAME: usize = STRIPE_HEADER + VNET_HDR;

/// How a member's data socket is opened: 64 KiB GSO frames behind a `virtio_net_hdr` pass
/// through untouched, lagd's own transmissions are not received back, and 4 MiB buffers absorb
/// bursts while the loop serves the other sockets. The dataplane benchmark's bare relay
/// (`examples/bare_relay.rs`) opens its members with these options too.
pub fn member_data_socket() -> PacketOptions {
    PacketOptions {
        vnet_hdr: true,
        ignore_outgoing: true,
        rcvbuf: Some(SOCKET_BUFFER),
        sndbuf: Some(SOCKET_BUFFER),
        ..PacketOptions::default()
    }
}

/// One frame from the TAP into `buf`; `None` when there is nothing more to read now.
fn read_tap(tap: &Tap, buf: &mut [u8]) -> Option<usize> {
    loop {
        match tap.read(buf) {
            Ok(n) => return Some(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return None,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                warn!("reading the TAP: {e}");
                return None;
            }
        }
    }
}

/// Stripes the host frame at `buf[FRAME..FRAME + len]` in place and sends it, behind an empty
/// `virtio_net_hdr`, on the member the stripe engine chose; false if it could not.
fn send_striped(stripe: &mut Stripe, members: &mut [Member], buf: &mut [u8], len: usize) -> bool {
    let Ok((port, start)) = stripe.transmit(buf, FRAME, len) else {
        return false;
    };
    buf[start - VNET_HDR..start].fill(0);
    let out = &buf[start - VNET_HDR..start + len + STRIPE_HEADER];
    send(
        &mut members[port.index()],
        out,
        (len + STRIPE_HEADER) as u64,
    );
    true
}

/// Writes a host frame to the TAP behind an empty `virtio_net_hdr` (copied into `out`).
fn to_tap(tap: &Tap, out: &mut [u8], frame: &[u8]) {
    let Some(dst) = out.get_mut(VNET_HDR..VNET_HDR + frame.len()) else {
        return;
    };
    dst.copy_from_slice(frame);
    out[..VNET_HDR].fill(0);
    // EIO while the bond is administratively down: the host does not want it.
    let _ = tap.write(&out[..VNET_HDR + frame.len()]);
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

fn send(m: &mut Member, buf: &[u8], frame_len: u64) {
    let Some(s) = &m.socket else {
        m.counters.tx_dropped += 1;
        return;
    };
    match s.send(buf) {
        Ok(_) => {
            m.counters.tx_packets += 1;
            m.counters.tx_bytes += frame_len;
        }
        // A full queue (or a member going down) drops the frame, as a full qdisc would.
        Err(_) => m.counters.tx_dropped += 1,
    }
}

/// Binds the control socket (root only, 0600), refusing if another lagd answers on it.
fn bind_control(path: &Path) -> Result<UnixListener> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            bail!(
                "another lagd is already serving {} (stop it first)",
                path.display()
            );
        }
        std::fs::remove_file(path).with_context(|| format!("removing stale {}", path.display()))?;
    }
    let listener =
        UnixListener::bind(path).with_context(|| format!("binding {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("chmod {}", path.display()))?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// Asks the lagd serving `path` for its status.
pub fn query_status(path: &Path) -> Result<Status> {
    let stream = UnixStream::connect(path)
        .with_context(|| format!("no lagd answers on {}", path.display()))?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    let mut w = &stream;
    w.write_all(b"status\n")?;
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line)?;
    serde_json::from_str(&line).with_context(|| format!("bad reply from {}", path.display()))
}
