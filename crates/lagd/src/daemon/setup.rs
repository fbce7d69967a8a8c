//! Setting a bond up: the [`Daemon`] and what it holds, the checks before any change, the
//! changes (each recorded for the undo first), the members opened and the kernel path made
//! live; and the hardening once it runs (capabilities, seccomp).

use std::collections::{BTreeSet, VecDeque};
use std::io;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant as StdInstant};

use anyhow::{Context, Result};
use lagd_proto::bond::FastPathAttach;
use lagd_proto::bond::{Bond, NoDataplane, PortId, PortInfo, Transmit};
use lagd_proto::time::Instant;
use lagd_proto::wire::EthernetAddress;
use lagd_proto::wire::slow::{LacpInfo, LacpRepr};
use lagd_sys::isolate::{IngressDrop, quiet_stack};
use lagd_sys::link::{Duplex, LinkControl, LinkEvents};
use lagd_sys::packet::{Membership, PacketOptions, PacketSocket};
use lagd_sys::poll::{Interest, Poller, Signal, SignalFd};
use lagd_sys::tap::{Tap, TapOptions};
use tracing::{info, warn};

use super::dataplane::{Dataplane, Member, member_data_socket};
use super::kernel::{Choice, Kernel};
use super::notify::Notifier;
use super::restore::Restore;
use super::timers::Timers;
use super::{control, handover, kernel, restore};
use crate::config::Config;
use crate::files;
use crate::metrics;

pub(super) const TOKEN_TAP: u64 = 0;
pub(super) const TOKEN_SIGNAL: u64 = 1;
pub(super) const TOKEN_CONTROL: u64 = 2;
pub(super) const TOKEN_LINK: u64 = 3;
/// The launcher's answers (SIGUSR2's upgrade).
pub(super) const TOKEN_LAUNCHER: u64 = 4;
pub(super) const TOKEN_MEMBER: u64 = 100;
/// Member control sockets (slow protocols), serviced before anything else.
pub(super) const TOKEN_CONTROL_SOCKET: u64 = 10_000;
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
    pub(super) config: Config,
    pub(super) bond: Bond,
    pub(super) mac: EthernetAddress,
    pub(super) dp: Dataplane,
    pub(super) link: LinkControl,
    pub(super) events: LinkEvents,
    pub(super) poller: Poller,
    pub(super) signals: SignalFd,
    pub(super) control: control::Server,
    /// The metrics listener, until `run` hands it to its thread.
    pub(super) metrics: Option<metrics::Listener>,
    pub(super) epoch: StdInstant,
    pub(super) carrier_poll: Duration,
    /// Every deadline the loop wakes for.
    pub(super) timers: Timers,
    /// The ready descriptors of one wake, reused so the loop does not allocate.
    pub(super) tokens: Vec<u64>,
    /// The kernel fast path, when it carries the data frames.
    pub(super) kernel: Option<Box<Kernel>>,
    /// Why lagd carries the data frames itself (`None`: the kernel does).
    pub(super) dataplane_reason: Option<String>,
    /// Members disabled by `lagctl member BOND NAME disable` (by position).
    pub(super) disabled: BTreeSet<usize>,
    /// The run-time changes made (the latest [`MAX_CHANGES`]), for the status.
    pub(super) changes: VecDeque<String>,
    /// `lagctl events` clients: each event line goes to every one.
    pub(super) subscribers: Vec<std::sync::mpsc::Sender<String>>,
    /// 802.3ad: the members distributing and the active aggregator as last published.
    pub(super) distributing: (Vec<PortId>, Option<u16>),
    /// The TAP's interface index.
    pub(super) tap_ifindex: u32,
    /// Whether the TAP was up with its carrier on in the last link event about it.
    pub(super) tap_running: bool,
    /// The bucket table's move counters as last seen (for the `buckets` event).
    pub(super) bucket_moves: lagd_proto::balance::BalanceCounters,
    /// The service manager, when lagd runs as a `Type=notify` service.
    pub(super) notify: Option<Notifier>,
    /// Whether the TAP's descriptor is the last lagd's (adopted): the service manager's store
    /// holds it already, and lagd does not store it again. A manager that cannot tell two
    /// descriptors of one open file apart (systemd on a kernel without `kcmp`) would keep
    /// another copy at every restart, until `FileDescriptorStoreMax=` refuses what matters.
    pub(super) tap_adopted: bool,
    /// The launcher forked at lagd's start, which runs `lagctl upgrade` on SIGUSR2.
    pub(super) launcher: Option<lagd_sys::launcher::Launcher>,
    /// What to put back when lagd stops. Last, so that it runs after every descriptor above
    /// (member sockets, tcx links) is closed.
    pub(super) restore: Restore,
}

/// How many run-time changes the status lists.
pub(super) const MAX_CHANGES: usize = 32;

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
        let signals = SignalFd::new(&[Signal::TERM, Signal::INT, Signal::HUP, Signal::USR2])
            .context("signalfd")?;
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
        undo.before_members(&config.members)?;
        let tap_options = TapOptions {
            vnet_hdr: true,
            multi_queue: false,
            persist: true,
            // Stripe mode segments super-frames itself, and only TCP ones.
            no_uso: config.options.mode.segments_in_software(),
        };
        // The last lagd's tcx links, for the programs attached below to go into in one step.
        let links = passed.take_all(handover::TCX);
        // Its programs' heartbeat, renewed before anything else: they forward while this lagd
        // loads its own.
        let inherited = handover::take_heartbeats(&mut passed, &links, kernel::alive_until());
        lagd_sys::isolate::offer_tcx_links(links);
        let mut tap_adopted = false;
        let tap = match passed.take_tap() {
            // The last lagd's descriptor, from the service manager: the TAP never lost its
            // carrier, and the host never noticed the change of process.
            Some(fd) => match Tap::adopt(fd, &config.bond, tap_options) {
                Ok(t) => {
                    info!("took over the TAP {} from the last lagd", config.bond);
                    tap_adopted = true;
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
        // Before anything reads the bond's distribution: the kernel path's table carries the key.
        bond.set_dedup_seed(random_u64());
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
        // The last lagd's member data sockets: each one whose member and options match what
        // open_member would bind is used as is, with the frames queued on it meanwhile.
        let mut sockets = passed.take_all(handover::PACKET);
        let passed_sockets = sockets.len();
        // The slow-protocols sockets before the programs load (over a second in a slow guest):
        // a restart that resumes LACP tells the partners so at once, from them.
        let mut slow = Vec::new();
        for (name, &ifindex) in config.members.iter().zip(found) {
            slow.push(Some(open_slow(&mut sockets, name, ifindex)?));
        }
        if bond.lacp().is_some() && !undo.recovered_lacp().is_empty() {
            announce_resumed(&link, &config, mac, epoch, &slow, undo.recovered_lacp());
        }
        let (mut kernel, dataplane_reason) =
            match Choice::decide(&bond, config.members.len(), tap_ifindex) {
                Ok(Choice::Kernel(k)) => (Some(k), None),
                Ok(Choice::Lagd(why)) => (None, Some(why)),
                Err(e) => return Err(StartError::Config(e)),
            };
        if let Some(k) = kernel.as_mut() {
            k.inherit(inherited);
        }
        let mut members = Vec::new();
        for ((name, &ifindex), slow) in config.members.iter().zip(found).zip(&mut slow) {
            let m = Self::open_member(
                &link,
                &mut bond,
                epoch,
                name,
                ifindex,
                member_mtu,
                kernel.as_deref_mut(),
                &mut sockets,
                slow.take(),
            )?;
            // The kernel path's programs are attached later (Kernel::go_live).
            if m.isolation.as_ref().is_some_and(IngressDrop::added_qdisc) {
                undo.record_clsact(name, ifindex)?;
            }
            members.push(m);
        }
        if passed_sockets > 0 {
            info!(
                "took over {} of {passed_sockets} member sockets from the last lagd (the rest \
                 closed)",
                passed_sockets - sockets.len()
            );
            sockets.clear();
        }
        bond.set_stripe_epoch(now_since(epoch), random_u32());
        for (member, partner) in resume_recorded(&mut bond, undo.recovered_lacp()) {
            info!(
                %member,
                system = %partner.system,
                key = partner.key,
                port = partner.port,
                "LACP: the last lagd did not stop cleanly; the member takes up with this \
                 partner where it left (no aggregate wait)"
            );
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
            // A lagd that takes over from one under a service manager talks to that manager
            // in its place (the old one tells it the new main process).
            notify: passed.take_manager().or_else(Notifier::from_env),
            tap_adopted,
            launcher: None,
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

    /// Opens member `name`: its MTU, sysctls, isolation (or the kernel path's program), its
    /// sockets, and its port in the bond. Its sockets are taken from `passed` (the last lagd's,
    /// see [`handover::PACKET`]) where one there is bound to it with the options it would be
    /// opened with ([`PacketSocket::adopt`]): the frames the member received while no lagd
    /// read them are then still queued on them. `slow` is its slow-protocols sockets if
    /// [`open_slow`] opened them already.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn open_member(
        link: &LinkControl,
        bond: &mut Bond,
        epoch: StdInstant,
        name: &str,
        ifindex: u32,
        mtu: u32,
        kernel: Option<&mut Kernel>,
        passed: &mut Vec<OwnedFd>,
        slow: Option<SlowSockets>,
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
        let socket = packet_socket(passed, ifindex, data_options)
            .with_context(|| format!("packet socket on member {name}"))?;
        // Slow-protocols frames are read on their own socket: the data socket never sees them.
        socket
            .exclude_ethertype(lagd_sys::packet::ETH_P_SLOW)
            .with_context(|| format!("socket filter on member {name}"))?;
        let SlowSockets { control, partner } = match slow {
            Some(s) => s,
            None => open_slow(passed, name, ifindex)?,
        };
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
        let (info, carrier) = port_info(link, name);
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

    pub(super) fn now(&self) -> Instant {
        now_since(self.epoch)
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

/// A member's slow-protocols sockets: LACPDUs and the bond's other own frames leave on
/// `control`, which reads every slow-protocols frame until there is a confirmed partner;
/// `partner` then reads that partner's alone (see `Dataplane::follow_partner`).
pub(super) struct SlowSockets {
    control: PacketSocket,
    partner: PacketSocket,
}

/// Opens member `name`'s [`SlowSockets`], or takes them from `passed` as [`packet_socket`] does.
fn open_slow(passed: &mut Vec<OwnedFd>, name: &str, ifindex: u32) -> Result<SlowSockets> {
    let control = packet_socket(
        passed,
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
    // A socket taken over may have been the last lagd's partner socket: no filter, as a
    // new one (the confirmed partner's filter comes with Dataplane::follow_partner).
    .and_then(|c| c.detach_filter().map(|()| c))
    .with_context(|| format!("slow-protocols socket on member {name}"))?;
    control
        .add_membership(Membership::Multicast(
            lagd_sys::packet::SLOW_PROTOCOLS_MULTICAST,
        ))
        .with_context(|| format!("slow-protocols multicast on member {name}"))?;
    // The confirmed LACP partner's frames, once there is one (Dataplane::follow_partner);
    // nothing until then.
    let partner = packet_socket(
        passed,
        ifindex,
        PacketOptions {
            protocol: lagd_sys::packet::ETH_P_SLOW,
            ignore_outgoing: true,
            ..PacketOptions::default()
        },
    )
    .and_then(|p| p.filter_source(None, true).map(|()| p))
    .with_context(|| format!("LACP partner socket on member {name}"))?;
    Ok(SlowSockets { control, partner })
}

/// What the bond needs to know of member `name` to add its port, and its carrier.
fn port_info(link: &LinkControl, name: &str) -> (PortInfo, bool) {
    let perm = link.permanent_mac(name).unwrap_or([0; 6]);
    let sd = link.speed_duplex(name).ok();
    let info = PortInfo {
        name: name.to_owned(),
        perm_mac: EthernetAddress(perm),
        speed_mbps: sd.and_then(|s| s.speed_mbps),
        full_duplex: sd.and_then(|s| duplex(s.duplex)),
    };
    (info, link.carrier(name).unwrap_or(false))
}

/// Resumes LACP on each member of `bond` that `records` (the last lagd's state file) names
/// with its partner; returns those members and partners.
fn resume_recorded(bond: &mut Bond, records: &[restore::LacpRecord]) -> Vec<(String, LacpInfo)> {
    if bond.lacp().is_none() {
        return Vec::new();
    }
    let mut resumed = Vec::new();
    for r in records {
        if let Some(port) = bond.port_by_name(&r.member) {
            let partner = r.partner();
            bond.resume_lacp(port, partner);
            resumed.push((r.member.clone(), partner));
        }
    }
    resumed
}

/// A restart that resumes LACP tells each partner at once that nothing changed. Without this
/// the first LACPDU leaves from the main loop, after the programs are loaded and the members
/// opened: 1.1 s in a one-CPU guest without a JIT, which with the supervisor's delay and up
/// to a second since the last lagd's last LACPDU outlived a partner's 3 s expiry (fast rate).
/// A bond built for this alone, with the members' ports and the recorded partners, makes the
/// LACPDUs the real one will (same options, ports in the same order); they leave on `slow`'s
/// control sockets now. A member it fails on is told by the main loop, as before.
fn announce_resumed(
    link: &LinkControl,
    config: &Config,
    mac: EthernetAddress,
    epoch: StdInstant,
    slow: &[Option<SlowSockets>],
    records: &[restore::LacpRecord],
) {
    let now = now_since(epoch);
    let mut bond = Bond::new(config.options.clone(), mac);
    for name in &config.members {
        let (info, carrier) = port_info(link, name);
        bond.add_port(now, info, carrier);
    }
    if resume_recorded(&mut bond, records).is_empty() {
        return;
    }
    if bond.poll_timeout().is_some_and(|t| t <= now) {
        bond.handle_timeout(now, &mut NoDataplane);
    }
    let mut frame = [0u8; 1600];
    while let Some(Transmit { port, len }) = bond.poll_transmit(now, &mut frame) {
        // LACPDUs alone: the bond's other own frames (announcements) are the real one's.
        let (Some(s), Ok(pdu)) = (
            slow.get(port.index()).and_then(Option::as_ref),
            LacpRepr::parse_frame(&frame[..len]),
        ) else {
            continue;
        };
        let member = &config.members[port.index()];
        match s.control.send(&frame[..len]) {
            Ok(_) => info!(
                %member,
                state = %pdu.actor.state,
                "LACP: the partner is told at once that this member resumes"
            ),
            Err(e) => warn!(%member, "LACPDU on resuming not sent: {e}"),
        }
    }
}

/// A packet socket bound to `ifindex` with `options`: one of the last lagd's from `passed`
/// (see [`handover::PACKET`]) bound to the same interface and protocol, if it has the same
/// options ([`PacketSocket::adopt`]; one that differs is closed), else a new one.
fn packet_socket(
    passed: &mut Vec<OwnedFd>,
    ifindex: u32,
    options: PacketOptions,
) -> io::Result<PacketSocket> {
    use std::os::fd::AsFd;
    let found = passed.iter().position(|fd| {
        PacketSocket::bound(fd.as_fd()).ok().flatten() == Some((ifindex, options.protocol))
    });
    if let Some(k) = found {
        match PacketSocket::adopt(passed.swap_remove(k), ifindex, options) {
            Ok(s) => return Ok(s),
            Err(e) => warn!("{e}; opening a new one"),
        }
    }
    PacketSocket::bind(ifindex, options)
}

pub(super) fn duplex(d: Duplex) -> Option<bool> {
    match d {
        Duplex::Full => Some(true),
        Duplex::Half => Some(false),
        Duplex::Unknown => None,
    }
}

fn now_since(epoch: StdInstant) -> Instant {
    Instant::from_micros(epoch.elapsed().as_micros() as u64)
}

/// A random 32-bit value (stripe epochs): [`random_u64`]'s low half.
fn random_u32() -> u32 {
    random_u64() as u32
}

/// A random 64-bit value (stripe epochs, broadcast_dedup's key): std's per-process random
/// hasher keys, the pid and the time.
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(t.as_nanos());
    }
    h.finish()
}
