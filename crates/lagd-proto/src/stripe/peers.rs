//! Peer liveness: which members have a lagd in stripe mode at the other end, in both directions.
//!
//! Every member sends a hello every [`PeersConfig::hello_interval`] (100 ms by default) carrying
//! our bond identity and epoch, the member's index and speed, and an *echo* of the last hello
//! heard from the peer on that member. A member is **two-way** while the peer's hellos are heard
//! on it (the last one less than `dead_intervals` of the peer's own interval ago: 300 ms by
//! default) and the peer's last hello echoes us (our identity, our current epoch and this very
//! member), that is the peer hears us on it too. Only two-way members are striped over: a member
//! that fails in one direction only, or a path that is cut behind a switch with the carrier
//! still up, is taken out within `dead_intervals` hello intervals.
//!
//! A change in what we hear on a member (first hello, new peer, new epoch) sends a hello on it at
//! once, so two ends come up two-way within one round trip instead of one interval.
//!
//! Why 100 ms and 3 intervals: a member that silently stops carrying frames loses its share of
//! every stream until it is taken out, and TCP over a bond that loses 1/n of its frames collapses,
//! so detection must be well under a second (LACP's 3 s is far too slow here). Carrier loss is
//! already handled by the bond within `miimon`; hellos cover what carrier does not see. Ten
//! 60-byte frames a second per member cost nothing.

use core::fmt;
use core::time::Duration;

use crate::port::PortId;
use crate::time::{Instant, earliest};
use crate::wire::EthernetAddress;

use super::header::{Echo, HelloRepr};

/// Hello interval by default: 100 ms.
pub const DEFAULT_HELLO_INTERVAL: Duration = Duration::from_millis(100);
/// A member is dead after this many of the peer's intervals without a hello, by default.
pub const DEFAULT_DEAD_INTERVALS: u32 = 3;

/// Hello timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeersConfig {
    /// How often each member sends a hello (at least 1 ms; advertised in whole milliseconds).
    pub hello_interval: Duration,
    /// How many of the peer's (advertised) intervals may pass without a hello.
    pub dead_intervals: u32,
}

impl Default for PeersConfig {
    fn default() -> Self {
        Self {
            hello_interval: DEFAULT_HELLO_INTERVAL,
            dead_intervals: DEFAULT_DEAD_INTERVALS,
        }
    }
}

/// What is known of the stripe peer on one member.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PeerState {
    /// No hello heard recently.
    NotHeard,
    /// The peer is heard but does not (yet) hear us on this member.
    OneWay,
    /// Both ends hear each other: the member is striped over.
    TwoWay,
    /// A two-way peer, but not the one the other members reach: not striped over.
    OtherPeer,
}

impl PeerState {
    /// A short lower-case name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::NotHeard => "not heard",
            Self::OneWay => "one-way",
            Self::TwoWay => "two-way",
            Self::OtherPeer => "other peer",
        }
    }
}

impl fmt::Display for PeerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a hello changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct HelloEvent {
    /// The peer's epoch changed (it restarted): `(old, new)`.
    pub peer_restarted: Option<(u32, u32)>,
    /// The member's [`PeerState`] changed.
    pub state_changed: bool,
}

#[derive(Debug, Clone, Copy)]
struct Heard {
    at: Instant,
    hello: HelloRepr,
}

#[derive(Debug, Clone, Copy)]
struct Member {
    port: PortId,
    speed: u32,
    next_hello: Instant,
    heard: Option<Heard>,
}

/// Hello state of every member. See the [module documentation](self).
#[derive(Debug, Clone)]
pub struct Peers {
    config: PeersConfig,
    bond: EthernetAddress,
    epoch: u32,
    started: Instant,
    members: Vec<Member>,
    /// The last hello heard on any member, and when.
    last_heard: Option<(Instant, EthernetAddress, u32)>,
    /// The peer's identity and epoch before it last restarted: its hellos are ignored.
    retired: Option<(EthernetAddress, u32)>,
}

impl Peers {
    /// Hello state for our bond `bond` (its MAC) started at `now` with `epoch` (random per start).
    pub fn new(config: PeersConfig, bond: EthernetAddress, epoch: u32, now: Instant) -> Self {
        let hello_interval = config.hello_interval.max(Duration::from_millis(1));
        Self {
            config: PeersConfig {
                hello_interval,
                dead_intervals: config.dead_intervals.max(1),
            },
            bond,
            epoch,
            started: now,
            members: Vec::new(),
            last_heard: None,
            retired: None,
        }
    }

    /// Our epoch.
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// Sets the members that send and hear hellos (those with carrier), with their speeds in
    /// Mb/s. A new member sends a hello at once; a removed member forgets its peer.
    pub fn set_members(&mut self, now: Instant, members: &[(PortId, u32)]) {
        let mut next = Vec::with_capacity(members.len());
        for &(port, speed) in members {
            if next.iter().any(|m: &Member| m.port == port) {
                continue;
            }
            let m = match self.members.iter().find(|m| m.port == port) {
                Some(m) => Member { speed, ..*m },
                None => Member {
                    port,
                    speed,
                    next_hello: now,
                    heard: None,
                },
            };
            next.push(m);
        }
        self.members = next;
    }

    /// Takes a hello heard on `port` at `now`. Hellos on a port that is not a member, or that
    /// come from our own bond (a loop), are ignored.
    pub fn handle_hello(&mut self, now: Instant, port: PortId, hello: &HelloRepr) -> HelloEvent {
        let mut event = HelloEvent::default();
        if hello.bond == self.bond {
            return event;
        }
        if self.retired == Some((hello.bond, hello.epoch)) {
            // A straggler from before the peer restarted.
            return event;
        }
        let Some(i) = self.members.iter().position(|m| m.port == port) else {
            return event;
        };
        let before = self.state(now, port);
        if let Some((_, bond, epoch)) = self.last_heard
            && bond == hello.bond
            && epoch != hello.epoch
        {
            // The peer restarted: what other members heard from its previous run is void.
            event.peer_restarted = Some((epoch, hello.epoch));
            self.retired = Some((bond, epoch));
            for m in &mut self.members {
                if m.heard
                    .is_some_and(|h| h.hello.bond == bond && h.hello.epoch == epoch)
                {
                    m.heard = None;
                }
            }
        }
        self.last_heard = Some((now, hello.bond, hello.epoch));
        let old_echo = self.echo_of(now, &self.members[i]);
        self.members[i].heard = Some(Heard {
            at: now,
            hello: *hello,
        });
        if self.echo_of(now, &self.members[i]) != old_echo {
            // Tell the peer at once that we hear it (or hear something new).
            self.members[i].next_hello = now;
        }
        event.state_changed = self.state(now, port) != before;
        event
    }

    /// Forgets the peers not heard for their dead time at `now`; true if a member's state
    /// changed. Call it when [`poll_timeout`](Self::poll_timeout) is due.
    pub fn handle_timeout(&mut self, now: Instant) -> bool {
        let mut changed = false;
        for i in 0..self.members.len() {
            let m = self.members[i];
            if m.heard.is_some() && self.alive(now, &m).is_none() {
                self.members[i].heard = None;
                changed = true;
            }
        }
        changed
    }

    /// The next hello due at `now`, on which member; the caller emits it
    /// ([`HelloRepr::emit_frame`]) and asks again until `None`.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<(PortId, HelloRepr)> {
        let i = self.members.iter().position(|m| m.next_hello <= now)?;
        let echo = self.echo_of(now, &self.members[i]);
        let m = &mut self.members[i];
        m.next_hello = now + self.config.hello_interval;
        Some((
            m.port,
            HelloRepr {
                epoch: self.epoch,
                bond: self.bond,
                member: m.port.0,
                speed_mbps: m.speed,
                interval_ms: u16::try_from(self.config.hello_interval.as_millis())
                    .unwrap_or(u16::MAX),
                echo,
            },
        ))
    }

    /// When the next hello is due (the transmit side only: no liveness deadline).
    pub fn transmit_timeout(&self) -> Option<Instant> {
        self.members.iter().map(|m| m.next_hello).min()
    }

    /// The next time something is due: a hello to send ([`poll_transmit`](Self::poll_transmit)),
    /// or a peer to declare dead ([`handle_timeout`](Self::handle_timeout)).
    pub fn poll_timeout(&self) -> Option<Instant> {
        earliest(self.members.iter().flat_map(|m| {
            let dead = m.heard.map(|h| h.at + self.dead_time(&h.hello));
            [Some(m.next_hello), dead]
        }))
    }

    /// The state of member `port` at `now` (`NotHeard` if it is not a member).
    pub fn state(&self, now: Instant, port: PortId) -> PeerState {
        let Some(m) = self.members.iter().find(|m| m.port == port) else {
            return PeerState::NotHeard;
        };
        let Some(h) = self.alive(now, m) else {
            return PeerState::NotHeard;
        };
        if !self.hears_us(m, &h.hello) {
            return PeerState::OneWay;
        }
        match self.peer(now) {
            Some((bond, epoch)) if bond != h.hello.bond || epoch != h.hello.epoch => {
                PeerState::OtherPeer
            }
            _ => PeerState::TwoWay,
        }
    }

    /// The peer being striped to: the identity and epoch of the two-way peer on the first
    /// member (in member order) that has one.
    pub fn peer(&self, now: Instant) -> Option<(EthernetAddress, u32)> {
        self.members.iter().find_map(|m| {
            let h = self.alive(now, m)?;
            self.hears_us(m, &h.hello)
                .then_some((h.hello.bond, h.hello.epoch))
        })
    }

    /// The two-way members at `now`, in member order.
    pub fn two_way(&self, now: Instant) -> impl Iterator<Item = PortId> + '_ {
        self.members
            .iter()
            .filter(move |m| self.state(now, m.port) == PeerState::TwoWay)
            .map(|m| m.port)
    }

    /// Everything [`Display`](fmt::Display)able about the peer at `now`.
    pub fn status(&self, now: Instant) -> PeersStatus {
        let members = self
            .members
            .iter()
            .map(|m| {
                let heard = self.alive(now, m).map(|h| h.hello);
                MemberStatus {
                    port: m.port,
                    state: self.state(now, m.port),
                    peer_member: heard.map(|h| h.member),
                    peer_speed_mbps: heard.map(|h| h.speed_mbps),
                }
            })
            .collect();
        let silent_for = match self.last_heard {
            Some((at, ..)) => now.saturating_since(at),
            None => now.saturating_since(self.started),
        };
        PeersStatus {
            peer: self.peer(now),
            heard: self.last_heard.map(|(_, bond, epoch)| (bond, epoch)),
            silent_for,
            grace: self.dead_time_default(),
            members,
        }
    }

    fn dead_time_default(&self) -> Duration {
        self.config.hello_interval * self.config.dead_intervals
    }

    fn dead_time(&self, hello: &HelloRepr) -> Duration {
        let interval = match hello.interval_ms {
            0 => self.config.hello_interval,
            ms => Duration::from_millis(u64::from(ms)),
        };
        interval * self.config.dead_intervals
    }

    fn alive(&self, now: Instant, m: &Member) -> Option<Heard> {
        m.heard.filter(|h| now < h.at + self.dead_time(&h.hello))
    }

    fn hears_us(&self, m: &Member, hello: &HelloRepr) -> bool {
        hello.echo
            == Some(Echo {
                bond: self.bond,
                epoch: self.epoch,
                member: m.port.0,
            })
    }

    fn echo_of(&self, now: Instant, m: &Member) -> Option<Echo> {
        self.alive(now, m).map(|h| Echo {
            bond: h.hello.bond,
            epoch: h.hello.epoch,
            member: h.hello.member,
        })
    }
}

/// One member's line of [`PeersStatus`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemberStatus {
    /// The member.
    pub port: PortId,
    /// Its state.
    pub state: PeerState,
    /// The peer's index of the member at the other end, if heard.
    pub peer_member: Option<u16>,
    /// The speed the peer reports for its end, if heard.
    pub peer_speed_mbps: Option<u32>,
}

/// The peer as the daemon logs and shows it.
///
/// Its [`Display`](fmt::Display) names members `member N`; [`with_names`](Self::with_names)
/// uses interface names instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeersStatus {
    /// The peer striped to (identity, epoch), if any member is two-way.
    pub peer: Option<(EthernetAddress, u32)>,
    /// The last peer heard on any member (identity, epoch), however long ago.
    pub heard: Option<(EthernetAddress, u32)>,
    /// How long no hello has been heard on any member (since start if never).
    pub silent_for: Duration,
    /// How long a silence is normal (one dead time); after it, silence is an error.
    pub grace: Duration,
    /// Every member.
    pub members: Vec<MemberStatus>,
}

impl PeersStatus {
    /// Whether some member is striped over.
    pub fn is_striping(&self) -> bool {
        self.members.iter().any(|m| m.state == PeerState::TwoWay)
    }

    /// The error to report, if there is one: no stripe peer heard on any member for longer
    /// than the grace time.
    pub fn error(&self) -> Option<String> {
        let all_silent = self.members.iter().all(|m| m.state == PeerState::NotHeard);
        (all_silent && self.silent_for >= self.grace).then(|| {
            format!(
                "no stripe peer heard on any member for {} s: is the other end running lagd \
                 mode=stripe?",
                self.silent_for.as_secs()
            )
        })
    }

    /// Displays the status with `names[port index]` for member names (falling back to
    /// `member N`).
    pub fn with_names<'a, S: AsRef<str>>(&'a self, names: &'a [S]) -> impl fmt::Display + 'a {
        Named {
            status: self,
            names,
        }
    }

    fn write(&self, f: &mut fmt::Formatter<'_>, name: &dyn Fn(PortId) -> String) -> fmt::Result {
        if let Some(e) = self.error() {
            return f.write_str(&e);
        }
        let list = |state: PeerState| {
            self.members
                .iter()
                .filter(|m| m.state == state)
                .map(|m| name(m.port))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self.peer {
            Some((bond, epoch)) => {
                write!(
                    f,
                    "stripe peer {bond} (epoch {epoch:08x}) speaks stripe on {}",
                    list(PeerState::TwoWay)
                )?;
            }
            None => match self.heard {
                Some((bond, _)) if self.members.iter().any(|m| m.state == PeerState::OneWay) => {
                    write!(
                        f,
                        "stripe peer {bond} heard on {} but it does not hear us",
                        list(PeerState::OneWay)
                    )?;
                    return Ok(());
                }
                _ => {
                    return write!(
                        f,
                        "waiting for a stripe peer ({} ms)",
                        self.silent_for.as_millis()
                    );
                }
            },
        }
        for (state, what) in [
            (PeerState::OneWay, "heard but not hearing us"),
            (PeerState::NotHeard, "no hello heard"),
            (PeerState::OtherPeer, "another stripe peer"),
        ] {
            let l = list(state);
            if !l.is_empty() {
                write!(f, "; not on {l} ({what})")?;
            }
        }
        Ok(())
    }
}

impl fmt::Display for PeersStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, &|p| format!("member {}", p.0))
    }
}

struct Named<'a, S> {
    status: &'a PeersStatus,
    names: &'a [S],
}

impl<S: AsRef<str>> fmt::Display for Named<'_, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.status.write(f, &|p| match self.names.get(p.index()) {
            Some(n) => n.as_ref().to_owned(),
            None => format!("member {}", p.0),
        })
    }
}

#[cfg(test)]
mod test {
    use super::*;

    const A: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0xa]);
    const B: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0xb]);

    fn ms(v: u64) -> Instant {
        Instant::from_millis(v)
    }

    /// Sends every due hello of `from` to `to`, member i to member i; returns how many.
    fn exchange(now: Instant, from: &mut Peers, to: &mut Peers) -> usize {
        let mut n = 0;
        while let Some((port, h)) = from.poll_transmit(now) {
            to.handle_hello(now, port, &h);
            n += 1;
        }
        n
    }

    fn pair() -> (Peers, Peers) {
        let mut a = Peers::new(PeersConfig::default(), A, 0x1111, ms(0));
        let mut b = Peers::new(PeersConfig::default(), B, 0x2222, ms(0));
        let members = [(PortId(0), 10_000), (PortId(1), 1_000)];
        a.set_members(ms(0), &members);
        b.set_members(ms(0), &members);
        (a, b)
    }

    #[test]
    fn two_ends_come_up_two_way_within_a_round_trip() {
        let (mut a, mut b) = pair();
        assert_eq!(a.state(ms(0), PortId(0)), PeerState::NotHeard);
        assert_eq!(exchange(ms(0), &mut a, &mut b), 2);
        assert_eq!(b.state(ms(0), PortId(0)), PeerState::OneWay);
        // b answers at once (its echo changed), and so does a in turn.
        assert_eq!(exchange(ms(0), &mut b, &mut a), 2);
        assert_eq!(a.state(ms(0), PortId(0)), PeerState::TwoWay);
        assert_eq!(exchange(ms(1), &mut a, &mut b), 2);
        assert_eq!(b.two_way(ms(1)).collect::<Vec<_>>(), [PortId(0), PortId(1)]);
        assert_eq!(a.peer(ms(1)), Some((B, 0x2222)));
        // Nothing more until the interval.
        assert_eq!(exchange(ms(2), &mut a, &mut b), 0);
        // a answered b's first hello at 1 ms: its next is due at 101 ms.
        assert_eq!(a.poll_timeout(), Some(ms(101)));
        let s = a.status(ms(2));
        assert!(s.is_striping());
        assert_eq!(
            s.to_string(),
            "stripe peer 02:00:00:00:00:0b (epoch 00002222) speaks stripe on member 0, member 1"
        );
        assert_eq!(
            s.with_names(&["eth0", "eth1"]).to_string(),
            "stripe peer 02:00:00:00:00:0b (epoch 00002222) speaks stripe on eth0, eth1"
        );
    }

    #[test]
    fn a_silent_member_dies_after_three_intervals() {
        let (mut a, mut b) = pair();
        for t in (0..=200).step_by(100) {
            exchange(ms(t), &mut a, &mut b);
            exchange(ms(t), &mut b, &mut a);
        }
        assert_eq!(a.two_way(ms(200)).count(), 2);
        // From 300 ms on, b's member 1 hellos are lost (its transmit side broke).
        for t in (300..=600).step_by(100) {
            exchange(ms(t), &mut a, &mut b);
            while let Some((port, h)) = b.poll_transmit(ms(t)) {
                if port == PortId(0) {
                    a.handle_hello(ms(t), port, &h);
                }
            }
        }
        // Last heard on member 1 at 200 ms: dead at 500 ms.
        assert_eq!(a.state(ms(499), PortId(1)), PeerState::TwoWay);
        assert_eq!(a.state(ms(500), PortId(1)), PeerState::NotHeard);
        assert!(a.poll_timeout().unwrap() <= ms(500));
        assert!(a.handle_timeout(ms(600)));
        assert!(!a.handle_timeout(ms(600)));
        assert_eq!(a.poll_timeout(), Some(ms(700)));
        // b still hears a on member 1, but a's echo there is gone: b sees one-way.
        assert_eq!(b.state(ms(600), PortId(1)), PeerState::OneWay);
        assert_eq!(b.two_way(ms(600)).collect::<Vec<_>>(), [PortId(0)]);
        assert_eq!(
            a.status(ms(600)).with_names(&["eth0", "eth1"]).to_string(),
            "stripe peer 02:00:00:00:00:0b (epoch 00002222) speaks stripe on eth0; not on eth1 \
             (no hello heard)"
        );
        assert_eq!(
            b.status(ms(600)).to_string(),
            "stripe peer 02:00:00:00:00:0a (epoch 00001111) speaks stripe on member 0; not on \
             member 1 (heard but not hearing us)"
        );
    }

    #[test]
    fn no_peer_is_a_clear_error_after_the_grace_time() {
        let mut a = Peers::new(PeersConfig::default(), A, 1, ms(0));
        a.set_members(ms(0), &[(PortId(0), 1000)]);
        assert_eq!(
            a.status(ms(100)).to_string(),
            "waiting for a stripe peer (100 ms)"
        );
        assert_eq!(a.status(ms(100)).error(), None);
        let s = a.status(ms(5000));
        assert_eq!(
            s.error().as_deref(),
            Some(
                "no stripe peer heard on any member for 5 s: is the other end running lagd \
                 mode=stripe?"
            )
        );
        assert_eq!(s.to_string(), s.error().unwrap());
        assert!(!s.is_striping());
    }

    #[test]
    fn a_restart_is_reported_and_needs_a_new_echo() {
        let (mut a, mut b) = pair();
        exchange(ms(0), &mut a, &mut b);
        exchange(ms(0), &mut b, &mut a);
        exchange(ms(0), &mut a, &mut b);
        assert_eq!(b.two_way(ms(0)).count(), 2);
        // a restarts with a new epoch.
        let mut a2 = Peers::new(PeersConfig::default(), A, 0x3333, ms(50));
        a2.set_members(ms(50), &[(PortId(0), 10_000), (PortId(1), 1_000)]);
        let (port, h) = a2.poll_transmit(ms(50)).unwrap();
        let ev = b.handle_hello(ms(50), port, &h);
        assert_eq!(ev.peer_restarted, Some((0x1111, 0x3333)));
        assert!(ev.state_changed);
        assert_eq!(b.state(ms(50), PortId(0)), PeerState::OneWay);
        // Member 1's hello from the old run is void at once.
        assert_eq!(b.state(ms(50), PortId(1)), PeerState::NotHeard);
        assert_eq!(b.peer(ms(50)), None);
        exchange(ms(50), &mut a2, &mut b);
        exchange(ms(50), &mut b, &mut a2);
        exchange(ms(50), &mut a2, &mut b);
        assert_eq!(b.peer(ms(50)), Some((A, 0x3333)));
        assert_eq!(b.two_way(ms(50)).count(), 2);
        // A late hello of the old run changes nothing.
        let (port, h) = a.poll_transmit(ms(100)).unwrap();
        assert_eq!(b.handle_hello(ms(60), port, &h), HelloEvent::default());
        assert_eq!(b.peer(ms(60)), Some((A, 0x3333)));
    }

    #[test]
    fn crossed_members_and_loops_are_not_two_way() {
        let (mut a, mut b) = pair();
        // Member i of a reaches member 1 - i of b: the echoes name the wrong member.
        for _ in 0..3 {
            while let Some((port, h)) = a.poll_transmit(ms(0)) {
                b.handle_hello(ms(0), PortId(1 - port.0), &h);
            }
            while let Some((port, h)) = b.poll_transmit(ms(0)) {
                a.handle_hello(ms(0), PortId(1 - port.0), &h);
            }
        }
        assert_eq!(
            a.two_way(ms(0)).count(),
            2,
            "crossed cables are fine: echo is per member"
        );
        // Our own hello looped back is ignored.
        let (port, h) = a.poll_transmit(ms(100)).unwrap();
        assert_eq!(a.handle_hello(ms(100), port, &h), HelloEvent::default());
        // A hello on a port that is not a member is ignored.
        let (_, h) = b.poll_transmit(ms(100)).unwrap();
        a.handle_hello(ms(100), PortId(9), &h);
        assert_eq!(a.state(ms(100), PortId(9)), PeerState::NotHeard);
    }

    #[test]
    fn another_peer_on_a_member_is_not_striped_over() {
        let (mut a, mut b) = pair();
        let mut c = Peers::new(
            PeersConfig::default(),
            EthernetAddress([2, 0, 0, 0, 0, 0xc]),
            5,
            ms(0),
        );
        c.set_members(ms(0), &[(PortId(0), 1000), (PortId(1), 1000)]);
        for _ in 0..3 {
            while let Some((port, h)) = a.poll_transmit(ms(0)) {
                if port == PortId(0) {
                    b.handle_hello(ms(0), port, &h);
                } else {
                    c.handle_hello(ms(0), port, &h);
                }
            }
            while let Some((port, h)) = b.poll_transmit(ms(0)) {
                if port == PortId(0) {
                    a.handle_hello(ms(0), port, &h);
                }
            }
            while let Some((port, h)) = c.poll_transmit(ms(0)) {
                if port == PortId(1) {
                    a.handle_hello(ms(0), port, &h);
                }
            }
        }
        assert_eq!(a.state(ms(0), PortId(0)), PeerState::TwoWay);
        assert_eq!(a.state(ms(0), PortId(1)), PeerState::OtherPeer);
        assert_eq!(
            a.status(ms(0)).to_string(),
            "stripe peer 02:00:00:00:00:0b (epoch 00002222) speaks stripe on member 0; not on \
             member 1 (another stripe peer)"
        );
    }
}
