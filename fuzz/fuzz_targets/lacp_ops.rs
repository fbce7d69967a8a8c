//! Fuzz target: an arbitrary sequence of operations on a two-port LACP engine.
//!
//! The input is decoded byte by byte (no `arbitrary`): a config byte, then operations — link
//! changes, time advances, arbitrary frames, LACPDUs and Marker PDUs built from the input
//! (sometimes describing the engine correctly, sometimes from its own system id), transmit
//! drains, port removal and re-addition, event polls and snapshots. Nothing may panic, and
//! after every operation:
//!
//! - no port is Distributing while its partner is out of sync in the engine's view;
//! - `poll_timeout` is never in the past, and after draining `poll_transmit` it is in the
//!   future (a driver following it never spins);
//! - every transmitted frame is a valid Slow Protocols PDU from the port's MAC.

#![no_main]

use core::time::Duration;

use lagd_proto::lacp::{AdSelect, Lacp, LacpConfig, LacpRate, MAX_FRAME_LEN, PortId, PortParams};
use lagd_proto::time::Instant;
use lagd_proto::wire::EthernetAddress;
use lagd_proto::wire::slow::{
    LacpInfo, LacpRepr, MarkerKind, MarkerRepr, PortState, SlowPdu, is_slow_protocols_frame,
};
use libfuzzer_sys::fuzz_target;

const SYSTEM: EthernetAddress = EthernetAddress([0x02, 0xaa, 0, 0, 0, 1]);
const PARTNER: EthernetAddress = EthernetAddress([0x02, 0xbb, 0, 0, 0, 1]);
const SPEEDS: [u32; 6] = [0, 10, 100, 1_000, 10_000, 100_000];

struct Input<'a>(&'a [u8]);

impl<'a> Input<'a> {
    fn u8(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }

    fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.u8().unwrap_or(0), self.u8().unwrap_or(0)])
    }

    fn take(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.0.len());
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        head
    }
}

fn port_mac(port: PortId) -> EthernetAddress {
    EthernetAddress([0x02, 0xaa, 0, 0, 1, port.0 as u8])
}

fn lacpdu_frame(repr: &LacpRepr) -> Vec<u8> {
    let mut f = vec![0; repr.frame_len()];
    repr.emit_frame(EthernetAddress([0x02, 0xbb, 0, 0, 1, 1]), &mut f);
    f
}

fn check(lacp: &Lacp, now: Instant) {
    for p in lacp.snapshot().ports {
        if p.actor.state.contains(PortState::DISTRIBUTING) {
            assert!(
                p.partner.state.contains(PortState::SYNCHRONIZATION),
                "port {} distributes with its partner out of sync",
                p.port
            );
        }
    }
    if let Some(t) = lacp.poll_timeout() {
        assert!(t >= now, "poll_timeout {t} before now {now}");
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let flags = input.u8().unwrap_or(0);
    let cfg = LacpConfig {
        lacp_rate: if flags & 1 != 0 {
            LacpRate::Fast
        } else {
            LacpRate::Slow
        },
        lacp_active: flags & 2 == 0,
        coupled_control: flags & 4 == 0,
        ad_select: match (flags >> 3) & 3 {
            0 => AdSelect::Stable,
            1 => AdSelect::Bandwidth,
            _ => AdSelect::Count,
        },
        min_links: u32::from((flags >> 5) & 3),
        fallback: (flags & 0x80 != 0).then(|| Duration::from_millis(2_500)),
        ..LacpConfig::default()
    };
    let mut lacp = Lacp::new(cfg, SYSTEM).expect("valid config");
    let mut now = Instant::ZERO;
    let ports = [PortId(0), PortId(1)];
    for p in ports {
        lacp.add_port(now, p, PortParams::new(port_mac(p), 10_000, true))
            .expect("new port");
    }
    let mut buf = [0u8; MAX_FRAME_LEN];
    while let Some(op) = input.u8() {
        let port = ports[usize::from(op >> 7)];
        let present = lacp.has_port(port);
        match op & 7 {
            0 if present => {
                let x = input.u8().unwrap_or(0);
                let speed = SPEEDS[usize::from(x >> 2) % SPEEDS.len()];
                lacp.handle_link(now, port, x & 1 != 0, speed, x & 2 == 0);
            }
            1 => {
                // Up to 262 s, to reach the long timeouts and churn.
                now += Duration::from_millis(u64::from(input.u16()) * 4);
                lacp.handle_timeout(now);
            }
            2 if present => {
                let len = usize::from(input.u8().unwrap_or(0));
                let frame = input.take(len);
                lacp.handle_frame(now, port, frame);
            }
            3 if present => {
                let state = input.u8().unwrap_or(0);
                let how = input.u8().unwrap_or(0);
                let us = lacp
                    .snapshot()
                    .port(port)
                    .map(|p| p.actor)
                    .unwrap_or_default();
                let mut partner = if how & 1 != 0 {
                    us
                } else {
                    LacpInfo::default()
                };
                partner.state = PortState(input.u8().unwrap_or(0));
                let repr = LacpRepr {
                    actor: LacpInfo {
                        system_priority: 65535,
                        system: match (how >> 1) & 3 {
                            0 | 1 => PARTNER,
                            2 => SYSTEM,
                            _ => EthernetAddress([0x02, 0xbb, 0, 0, 0, how]),
                        },
                        key: if how & 8 != 0 { input.u16() } else { 15 },
                        port_priority: 255,
                        port: u16::from(how >> 4),
                        state: PortState(state),
                    },
                    partner,
                    ..LacpRepr::default()
                };
                lacp.handle_frame(now, port, &lacpdu_frame(&repr));
            }
            4 if present => {
                let kind = MarkerKind::from(input.u8().unwrap_or(1) % 4);
                let m = MarkerRepr {
                    kind,
                    requester_port: input.u16(),
                    requester_system: PARTNER,
                    transaction_id: u32::from(input.u16()),
                };
                let mut f = vec![0; m.frame_len()];
                m.emit_frame(PARTNER, &mut f);
                lacp.handle_frame(now, port, &f);
            }
            5 => {
                while let Some(tx) = lacp.poll_transmit(now, &mut buf) {
                    let frame = &buf[..tx.len];
                    assert!(is_slow_protocols_frame(frame));
                    assert_eq!(&frame[6..12], port_mac(tx.port).as_bytes());
                    match SlowPdu::parse_frame(frame) {
                        Ok(SlowPdu::Lacp(r)) => assert_eq!(r.actor.system, SYSTEM),
                        Ok(SlowPdu::Marker(m)) => assert_eq!(m.kind, MarkerKind::Response),
                        other => panic!("sent something odd: {other:?}"),
                    }
                }
                if let Some(t) = lacp.poll_timeout() {
                    assert!(t > now, "nothing left to send, yet poll_timeout is now");
                }
            }
            6 => {
                if present {
                    lacp.remove_port(now, port);
                } else {
                    let _ = lacp.add_port(now, port, PortParams::new(port_mac(port), 1_000, true));
                }
            }
            7 => {
                while lacp.poll_event().is_some() {}
                let s = lacp.snapshot();
                assert_eq!(s.carrier, lacp.carrier());
                let _ = lacp.distributing_ports().count();
                let _ = lacp.fallback_active();
            }
            _ => {}
        }
        check(&lacp, now);
    }
});
