//! Two ends over simulated members: reordering paths, a path that dies without losing
//! carrier, a peer restart.

use super::*;

const MAC_A: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0xa]);
const MAC_B: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0xb]);

/// A frame on its way: (arrival time µs, to B?, member, bytes).
type Flight = (u64, bool, PortId, Vec<u8>);

struct Sim {
    a: Stripe,
    b: Stripe,
    /// One-way delay per member, µs.
    delay: [u64; 2],
    /// Whether each member carries frames (carrier stays up either way).
    works: [bool; 2],
    flights: Vec<Flight>,
    /// What B's host received: the host sequence numbers.
    got_b: Vec<u32>,
    sent_on: [u64; 2],
    now: u64,
    next_host: u32,
}

fn host_frame(n: u32) -> Vec<u8> {
    let mut f = vec![0u8; 8 + 1514];
    f[8..14].copy_from_slice(&MAC_B.0);
    f[14..20].copy_from_slice(&MAC_A.0);
    f[20..22].copy_from_slice(&[0x08, 0x00]);
    f[22..26].copy_from_slice(&n.to_be_bytes());
    f
}

impl Sim {
    fn new(epoch_b: u32) -> Self {
        let t = Instant::ZERO;
        let members = [(PortId(0), 10_000), (PortId(1), 10_000)];
        let mut a = Stripe::new(StripeConfig::default(), MAC_A, 0x0101_0101, t);
        let mut b = Stripe::new(StripeConfig::default(), MAC_B, epoch_b, t);
        a.set_members(t, &members);
        b.set_members(t, &members);
        Self {
            a,
            b,
            delay: [20, 700],
            works: [true, true],
            flights: Vec::new(),
            got_b: Vec::new(),
            sent_on: [0; 2],
            now: 0,
            next_host: 0,
        }
    }

    fn send(&mut self, to_b: bool, port: PortId, bytes: Vec<u8>) {
        if self.works[port.index()] {
            let at = self.now + self.delay[port.index()];
            self.flights.push((at, to_b, port, bytes));
        }
    }

    /// Runs until `until` µs, A sending one host frame every `gap` µs.
    fn run(&mut self, until: u64, gap: u64) {
        while self.now < until {
            let t = Instant::from_micros(self.now);
            // Hellos both ways.
            for to_b in [true, false] {
                let from = if to_b { &mut self.a } else { &mut self.b };
                let mut out = Vec::new();
                while let Some((port, h)) = from.poll_transmit(t) {
                    let mut f = vec![0u8; header::HELLO_FRAME_LEN];
                    h.emit_frame(if to_b { MAC_A } else { MAC_B }, &mut f)
                        .unwrap();
                    out.push((port, f));
                }
                for (port, f) in out {
                    self.send(to_b, port, f);
                }
            }
            // Until the peer is two-way the driver sends host frames as they are (not here).
            if self.now % gap == 0 && self.a.is_striping() {
                let mut buf = host_frame(self.next_host);
                self.next_host += 1;
                let (port, start) = self.a.transmit(&mut buf, 8, 1514).unwrap();
                self.sent_on[port.index()] += 1;
                self.send(true, port, buf[start..].to_vec());
            }
            let now = self.now;
            let (due, rest): (Vec<Flight>, Vec<Flight>) =
                self.flights.drain(..).partition(|f| f.0 <= now);
            self.flights = rest;
            let got = &mut self.got_b;
            let mut deliver = |f: &[u8]| {
                assert_eq!(&f[12..14], &[0x08, 0x00]);
                assert_eq!(f.len(), 1514);
                got.push(u32::from_be_bytes([f[14], f[15], f[16], f[17]]));
            };
            for (_, to_b, port, mut f) in due {
                let to = if to_b { &mut self.b } else { &mut self.a };
                to.handle_frame(t, port, &mut f, &mut deliver).unwrap();
            }
            self.a.poll(t, &mut |_| panic!("A receives no data"));
            self.b.poll(t, &mut deliver);
            self.now += 10;
        }
    }

    fn check_in_order(&self) {
        assert!(
            self.got_b.windows(2).all(|w| w[0] < w[1]),
            "out of order or duplicated"
        );
    }
}

#[test]
fn reordering_paths_are_hidden_from_the_host() {
    let mut sim = Sim::new(0x0202_0202);
    sim.run(10_000, 50);
    let warm = sim.sent_on;
    sim.run(200_000, 50);
    sim.check_in_order();
    assert!(sim.a.status(Instant::from_millis(200)).is_striping());
    assert_eq!(sim.a.tx().members().count(), 2);
    // 700 µs of skew at 20 000 frames/s: up to 14 frames held at a time, nothing lost.
    let c = *sim.b.rx().counters();
    assert_eq!(
        c.skipped_timeout + c.skipped_full + c.skipped_lost + c.late,
        0,
        "{c:?}"
    );
    assert!(c.reordered > 1000, "{c:?}");
    let in_flight = sim.flights.iter().filter(|f| f.1 && f.3.len() > 60).count() as u32;
    assert_eq!(
        sim.got_b.len() as u32 + in_flight + sim.b.rx().occupancy() as u32,
        sim.next_host
    );
    // Once both members are two-way, equal speeds get equal shares.
    assert!((sim.sent_on[0] - warm[0]).abs_diff(sim.sent_on[1] - warm[1]) <= 1);
}

#[test]
fn a_path_dying_without_carrier_is_taken_out_within_the_dead_time() {
    let mut sim = Sim::new(0x0202_0202);
    sim.run(100_000, 50);
    sim.works[1] = false;
    let sent_before = sim.sent_on;
    sim.run(500_000, 50);
    sim.check_in_order();
    let st = sim.a.status(Instant::from_micros(sim.now));
    assert_eq!(
        st.to_string(),
        "stripe peer 02:00:00:00:00:0b (epoch 02020202) speaks stripe on member 0; not on \
         member 1 (no hello heard)"
    );
    assert_eq!(
        sim.a.tx().members().collect::<Vec<_>>(),
        [(PortId(0), 10_000)]
    );
    // Member 1 was used for at most the dead time after its last hello (≤ 400 ms in all).
    let lost = sim.sent_on[1] - sent_before[1];
    assert!(lost > 0 && lost <= 4000, "{lost}");
    let c = *sim.b.rx().counters();
    assert!(
        c.skipped_timeout + c.skipped_full + c.skipped_lost >= lost - 20,
        "{c:?}"
    );
    // From then on, nothing more is lost.
    let skipped = c.skipped_timeout + c.skipped_full + c.skipped_lost;
    let got = sim.got_b.len();
    sim.run(700_000, 50);
    let c = *sim.b.rx().counters();
    assert_eq!(c.skipped_timeout + c.skipped_full + c.skipped_lost, skipped);
    assert!(sim.got_b.len() - got >= 3990);
    sim.check_in_order();
}

#[test]
fn a_receiver_restart_is_followed_at_once() {
    for epoch in [0x0202_0202, 0x0303_0301] {
        let mut sim = Sim::new(epoch);
        sim.run(100_000, 50);
        // A restarts: new epoch (same low byte as before for the second case), sequence from 0.
        let t = Instant::from_micros(sim.now);
        sim.a = Stripe::new(StripeConfig::default(), MAC_A, 0x0909_0901, t);
        sim.a
            .set_members(t, &[(PortId(0), 10_000), (PortId(1), 10_000)]);
        let before = sim.got_b.len();
        sim.run(200_000, 50);
        // Every frame after the restart reached B's host, in order, apart from a few that were
        // in flight when A restarted.
        let after: Vec<u32> = sim.got_b[before..].to_vec();
        assert!(after.len() >= 1950, "{}", after.len());
        assert!(sim.b.rx().counters().resyncs >= 1);
        assert!(sim.b.status(t).is_striping());
    }
}

#[test]
fn transmit_errors_use_no_sequence_number() {
    let mut s = Stripe::new(StripeConfig::default(), MAC_A, 1, Instant::ZERO);
    let mut buf = [0u8; 100];
    assert_eq!(s.transmit(&mut buf, 8, 60), Err(TransmitError::NoMember));
    s.set_members(Instant::ZERO, &[(PortId(4), 1000)]);
    assert!(!s.is_striping(), "no peer heard yet");
    assert_eq!(s.transmit(&mut buf, 8, 60), Err(TransmitError::NoMember));
    // A peer on member 4: hellos both ways until it is two-way.
    let t = Instant::ZERO;
    let mut peer = Stripe::new(StripeConfig::default(), MAC_B, 2, t);
    peer.set_members(t, &[(PortId(4), 1000)]);
    fn hellos(src: &mut Stripe, dst: &mut Stripe, mac: EthernetAddress) {
        while let Some((port, h)) = src.poll_transmit(Instant::ZERO) {
            let mut f = vec![0u8; header::HELLO_FRAME_LEN];
            h.emit_frame(mac, &mut f).unwrap();
            dst.handle_frame(Instant::ZERO, port, &mut f, &mut |_| ())
                .unwrap();
        }
    }
    for _ in 0..2 {
        hellos(&mut s, &mut peer, MAC_A);
        hellos(&mut peer, &mut s, MAC_B);
    }
    assert!(s.is_striping());
    assert_eq!(
        s.transmit(&mut buf, 7, 60),
        Err(TransmitError::Encap(EncapError::NoHeadroom))
    );
    assert_eq!(
        s.transmit(&mut buf, 8, 93),
        Err(TransmitError::Encap(EncapError::BadFrame))
    );
    assert_eq!(s.transmit(&mut buf, 8, 92), Ok((PortId(4), 0)));
    assert_eq!(s.tx().next_seq(), 1);
    assert_eq!(
        DataHeader::parse_frame(&buf),
        Ok(DataHeader {
            epoch_tag: 1,
            ethertype: wire::EtherType::Unknown(0),
            seq: 0
        })
    );
    // A frame that is not a stripe frame is an error for the caller to count.
    let mut junk = [0u8; 60];
    assert_eq!(
        s.handle_frame(Instant::ZERO, PortId(4), &mut junk, &mut |_| ()),
        Err(wire::Error::Unsupported)
    );
}

/// The deadlines a driver polls: a reorder hole is due within milliseconds, on its own
/// deadline ([`Stripe::poll_timeout`]); the transmit deadline ([`Stripe::transmit_timeout`], all
/// a bond needs to wake its own machines for) stays the next hello.
#[test]
fn a_reorder_hole_has_its_own_deadline_apart_from_hellos() {
    let mut sim = Sim::new(0x0202_0202);
    sim.run(10_000, 1_000);
    assert!(sim.a.is_striping() && sim.b.is_striping() && !sim.got_b.is_empty());
    // Let what is in flight arrive, then send two frames and lose the first.
    sim.run(12_000, 1_000_000);
    assert!(
        sim.flights.iter().all(|f| f.3.len() <= 60),
        "only hellos in flight"
    );
    let t = Instant::from_micros(sim.now);
    let hello = sim.b.transmit_timeout().unwrap();
    assert!(hello > t, "a hello is due later, not now");
    assert_eq!(sim.b.poll_timeout().map(|p| p >= t), Some(true));
    let mut frames = Vec::new();
    for _ in 0..2 {
        let mut buf = host_frame(sim.next_host);
        sim.next_host += 1;
        let (port, start) = sim.a.transmit(&mut buf, 8, 1514).unwrap();
        frames.push((port, buf[start..].to_vec()));
    }
    let (port, mut second) = frames.pop().unwrap();
    let mut got = Vec::new();
    sim.b
        .handle_frame(t, port, &mut second, &mut |f| got.push(f.len()))
        .unwrap();
    assert!(got.is_empty(), "held behind the hole");
    let hole = sim.b.poll_timeout().unwrap();
    assert!(
        hole < hello,
        "the hole ({hole:?}) is due before the hello ({hello:?})"
    );
    assert_eq!(
        sim.b.transmit_timeout(),
        Some(hello),
        "hellos are not moved"
    );
    // Polled at its deadline, the hole gives up and the held frame goes up.
    sim.b.poll(hole, &mut |f| got.push(f.len()));
    assert_eq!(got, vec![1514]);
}
