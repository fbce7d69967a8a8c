//! The I/O layer against the real kernel: TAP, AF_PACKET, link control, rtnetlink events, epoll
//! and network namespaces, each test in namespaces of its own (see `lab`).
//!
//! Needs root. Run with `cargo test -p lagd-sys -- --test-threads=1 --nocapture` to see the
//! measured figures each test prints.

mod lab;

use std::io::{self, IoSlice, IoSliceMut};
use std::time::{Duration, Instant};

use lab::{Lab, TEST_ETHERTYPE, ethertype, frame, median, recv_matching, wait_readable};
use lagd_sys::link::{self, Duplex, LinkControl, LinkEvent, LinkEvents};
use lagd_sys::netns::NetNs;
use lagd_sys::packet::{
    BATCH_MAX, ETH_P_SLOW, Membership, PacketOptions, PacketSocket, PacketType, RecvMeta,
    SLOW_PROTOCOLS_MULTICAST,
};
use lagd_sys::poll::{Events, Interest, Poller};
use lagd_sys::tap::{Tap, TapOptions};
use lagd_sys::vnet::VirtioNetHdr;

const OTHER_HOST: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x99];
const SECOND: Duration = Duration::from_secs(1);

fn vnet_opts() -> PacketOptions {
    PacketOptions {
        vnet_hdr: true,
        ignore_outgoing: true,
        rcvbuf: Some(4 << 20),
        sndbuf: Some(4 << 20),
        ..PacketOptions::default()
    }
}

fn with_plain_hdr(frame: &[u8]) -> Vec<u8> {
    let mut out = VirtioNetHdr::default().to_bytes().to_vec();
    out.extend_from_slice(frame);
    out
}

/// Two namespaces joined by `va` (ns 0) — `vb` (ns 1).
fn veth_lab() -> Lab {
    let lab = Lab::new(2);
    lab.veth(0, "va", 1, "vb");
    lab
}

#[test]
fn tap_with_vnet_hdr_passes_frames_both_ways() {
    let lab = Lab::new(1);
    let (tap, sock, tap_mac) = lab.run_in(0, || {
        let tap = Tap::create(
            "lt0",
            TapOptions {
                vnet_hdr: true,
                ..TapOptions::default()
            },
        )?;
        link::set_up("lt0", true)?;
        let sock = PacketSocket::bind_name("lt0", vnet_opts())?;
        Ok((tap, sock, link::mac("lt0")?))
    });
    assert_eq!(tap.name(), "lt0");
    assert_eq!(tap.vnet_hdr_len(), VirtioNetHdr::LEN);
    let off = tap.offloads();
    assert!(
        off.csum && off.tso4 && off.tso6 && off.tso_ecn,
        "offloads refused: {off:?}"
    );
    eprintln!("TAP offloads accepted: {off:?}");
    let features = lab.ip(0, &["-d", "link", "show", "lt0"]);
    assert!(features.contains("tun type tap"), "{features}");

    // Host-bound direction: a frame written into the TAP is received on the device, where a
    // packet socket sees it with its (plain) virtio_net_hdr.
    let inbound = frame(
        tap_mac,
        [0x02, 0, 0, 0, 0, 1],
        TEST_ETHERTYPE,
        b"written into the tap",
    );
    assert_eq!(
        tap.write(&with_plain_hdr(&inbound)).unwrap(),
        VirtioNetHdr::LEN + inbound.len()
    );
    let (got, meta) = recv_matching(&sock, SECOND, |f| f == inbound.as_slice())
        .expect("frame written to TAP not seen");
    assert_eq!(meta.pkttype, PacketType::Host);
    assert_eq!(meta.protocol, TEST_ETHERTYPE);
    let hdr = VirtioNetHdr::from_bytes(&got).unwrap();
    assert!(!hdr.is_gso(), "{hdr:?}");

    // Bond-bound direction: a frame sent on the device comes out of the TAP descriptor.
    let outbound = frame(
        [0x02, 0, 0, 0, 0, 1],
        tap_mac,
        TEST_ETHERTYPE,
        b"read from the tap",
    );
    sock.send(&with_plain_hdr(&outbound)).unwrap();
    let mut buf = vec![0u8; 70_000];
    let deadline = Instant::now() + SECOND;
    let got = loop {
        match tap.read(&mut buf) {
            Ok(n) if buf[VirtioNetHdr::LEN..n] == outbound[..] => break buf[..n].to_vec(),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                assert!(
                    Instant::now() < deadline,
                    "frame sent on the TAP device never came out of it"
                );
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => panic!("tap read: {e}"),
        }
    };
    assert_eq!(
        VirtioNetHdr::from_bytes(&got).map(|h| h.is_gso()),
        Some(false)
    );

    // The vectored forms, with the header kept apart.
    let hdr = VirtioNetHdr::default().to_bytes();
    let n = tap
        .write_vectored(&[IoSlice::new(&hdr), IoSlice::new(&inbound)])
        .unwrap();
    assert_eq!(n, hdr.len() + inbound.len());
    assert!(recv_matching(&sock, SECOND, |f| f == inbound.as_slice()).is_some());
    sock.send(&with_plain_hdr(&outbound)).unwrap();
    let mut head = [0u8; VirtioNetHdr::LEN];
    let mut body = vec![0u8; 2048];
    let deadline = Instant::now() + SECOND;
    loop {
        match tap.read_vectored(&mut [IoSliceMut::new(&mut head), IoSliceMut::new(&mut body)]) {
            Ok(n) if body[..n - VirtioNetHdr::LEN] == outbound[..] => break,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                assert!(Instant::now() < deadline, "vectored read saw nothing");
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => panic!("tap readv: {e}"),
        }
    }
}

#[test]
fn tap_persist_carrier_and_queues() {
    let lab = Lab::new(1);
    let first_index = lab.run_in(0, || {
        let tap = Tap::create(
            "lt1",
            TapOptions {
                vnet_hdr: true,
                multi_queue: true,
                persist: true,
                no_uso: false,
            },
        )?;
        let second = tap.attach_queue()?;
        assert_eq!(second.name(), "lt1");
        link::ifindex("lt1")
    });
    // Both queues are closed now; a persistent device stays.
    let (tap, again_index) = lab.run_in(0, || {
        let again = link::ifindex("lt1")?;
        let tap = Tap::create(
            "lt1",
            TapOptions {
                vnet_hdr: true,
                multi_queue: true,
                persist: false,
                no_uso: false,
            },
        )?;
        link::set_up("lt1", true)?;
        Ok((tap, again))
    });
    assert_eq!(
        first_index, again_index,
        "re-attaching must find the same device"
    );

    let ctl = lab.run_in(0, LinkControl::new);
    assert!(ctl.carrier("lt1").unwrap(), "attached, up TAP has carrier");
    tap.set_carrier(false).unwrap();
    assert!(
        !ctl.carrier("lt1").unwrap(),
        "TUNSETCARRIER off not visible"
    );
    tap.set_carrier(true).unwrap();
    assert!(ctl.carrier("lt1").unwrap(), "TUNSETCARRIER on not visible");
    let sd = ctl.speed_duplex("lt1").unwrap();
    eprintln!("TAP speed/duplex: {sd:?}");
    assert_eq!(sd.duplex, Duplex::Full);

    let plain = lab.run_in(0, || Tap::create("lt2", TapOptions::default()));
    assert_eq!(plain.vnet_hdr_len(), 0);
    assert_eq!(plain.offloads(), Default::default());
    assert_eq!(
        plain.attach_queue().unwrap_err().kind(),
        io::ErrorKind::InvalidInput,
        "single-queue TAP must refuse attach_queue"
    );

    tap.set_persist(false).unwrap();
    drop(tap);
    drop(plain);
    let gone = lab.run_in(0, || {
        Ok(match link::ifindex("lt1") {
            Ok(i) => Err(i),
            Err(e) => Ok(lagd_sys::errno(&e)),
        })
    });
    assert_eq!(
        gone,
        Ok(Some(libc::ENODEV)),
        "non-persistent TAP must vanish with its last queue"
    );
}

#[test]
fn veth_single_frames_directions_and_truncation() {
    let lab = veth_lab();
    let (sa, sa_all, va_mac) = lab.run_in(0, || {
        let quiet = PacketSocket::bind_name(
            "va",
            PacketOptions {
                ignore_outgoing: true,
                ..PacketOptions::default()
            },
        )?;
        let all = PacketSocket::bind_name("va", PacketOptions::default())?;
        Ok((quiet, all, link::mac("va")?))
    });
    let (sb, vb_mac) = lab.run_in(1, || {
        Ok((
            PacketSocket::bind_name("vb", PacketOptions::default())?,
            link::mac("vb")?,
        ))
    });
    assert_eq!(sa.vnet_hdr_len(), 0);

    let payload: Vec<u8> = (0..200u8).collect();
    let f = frame(vb_mac, va_mac, TEST_ETHERTYPE, &payload);
    assert_eq!(sa.send(&f).unwrap(), f.len());
    let (got, meta) =
        recv_matching(&sb, SECOND, |x| x == f.as_slice()).expect("frame not received on the peer");
    assert_eq!(got, f);
    assert_eq!(
        meta,
        RecvMeta {
            len: f.len(),
            truncated: false,
            pkttype: PacketType::Host,
            protocol: TEST_ETHERTYPE
        }
    );

    // Without PACKET_IGNORE_OUTGOING a socket sees its interface's own transmissions.
    let (_, meta) =
        recv_matching(&sa_all, SECOND, |x| x == f.as_slice()).expect("outgoing copy not seen");
    assert_eq!(meta.pkttype, PacketType::Outgoing);
    // With it, nothing.
    let mut buf = [0u8; 2048];
    assert_eq!(
        sa.recv(&mut buf).unwrap_err().kind(),
        io::ErrorKind::WouldBlock
    );

    // A broadcast frame, received into a buffer too small for it.
    let b = frame([0xff; 6], va_mac, TEST_ETHERTYPE, &payload);
    sa.send(&b).unwrap();
    assert!(wait_readable(&sb, SECOND));
    let mut small = [0u8; 64];
    let meta = loop {
        let meta = sb.recv_from(&mut small).unwrap();
        if ethertype(&small) == Some(TEST_ETHERTYPE) {
            break meta;
        }
    };
    assert_eq!(meta.len, 64);
    assert!(meta.truncated);
    assert_eq!(meta.pkttype, PacketType::Broadcast);
    assert_eq!(small[..], b[..64]);
}

#[test]
fn veth_batch_of_64_frames() {
    let lab = veth_lab();
    let (sa, va_mac) = lab.run_in(0, || {
        Ok((
            PacketSocket::bind_name(
                "va",
                PacketOptions {
                    ignore_outgoing: true,
                    sndbuf: Some(4 << 20),
                    ..PacketOptions::default()
                },
            )?,
            link::mac("va")?,
        ))
    });
    let sb = lab.run_in(1, || {
        PacketSocket::bind_name(
            "vb",
            PacketOptions {
                protocol: TEST_ETHERTYPE,
                rcvbuf: Some(4 << 20),
                ..PacketOptions::default()
            },
        )
    });
    let _ = sb.statistics().unwrap(); // reset

    const N: usize = 64;
    assert_eq!(N, BATCH_MAX);
    let frames: Vec<Vec<u8>> = (0..N)
        .map(|i| {
            let mut payload = vec![i as u8; 100 + i];
            payload[..4].copy_from_slice(&(i as u32).to_be_bytes());
            frame(OTHER_HOST, va_mac, TEST_ETHERTYPE, &payload)
        })
        .collect();
    let slices: Vec<IoSlice<'_>> = frames.iter().map(|f| IoSlice::new(f)).collect();
    let mut sent = 0;
    let t0 = Instant::now();
    while sent < N {
        match sa.send_batch(&slices[sent..]) {
            Ok(n) => sent += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
            Err(e) => panic!("sendmmsg: {e}"),
        }
        assert!(t0.elapsed() < SECOND, "sendmmsg stalled at {sent}");
    }

    let mut storage = vec![[0u8; 2048]; N];
    let mut received: Vec<Vec<u8>> = Vec::new();
    let mut calls = 0;
    let deadline = Instant::now() + 2 * SECOND;
    while received.len() < N {
        let mut bufs: Vec<IoSliceMut<'_>> =
            storage.iter_mut().map(|b| IoSliceMut::new(b)).collect();
        let mut meta = [RecvMeta::default(); N];
        match sb.recv_batch(&mut bufs, &mut meta) {
            Ok(n) => {
                calls += 1;
                drop(bufs);
                for (m, b) in meta[..n].iter().zip(&storage) {
                    assert!(!m.truncated);
                    assert_eq!(m.pkttype, PacketType::OtherHost);
                    received.push(b[..m.len].to_vec());
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let left = deadline.saturating_duration_since(Instant::now());
                assert!(
                    wait_readable(&sb, left),
                    "only {} of {N} frames arrived",
                    received.len()
                );
            }
            Err(e) => panic!("recvmmsg: {e}"),
        }
    }
    assert_eq!(received, frames, "frames lost, reordered or altered");
    let stats = sb.statistics().unwrap();
    assert_eq!((stats.packets, stats.drops), (N as u32, 0), "{stats:?}");
    assert_eq!(
        sb.statistics().unwrap().packets,
        0,
        "PACKET_STATISTICS resets on read"
    );
    eprintln!("batch: {N} frames sent with sendmmsg, received with {calls} recvmmsg call(s)");
}

fn checksum(data: &[u8], initial: u32) -> u32 {
    let mut sum = initial;
    for chunk in data.chunks(2) {
        let word = u16::from_be_bytes([chunk[0], *chunk.get(1).unwrap_or(&0)]);
        sum += u32::from(word);
    }
    sum
}

fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// A TCP/IPv4 super-frame the way the host stack hands one to a TSO device: IP header complete,
/// TCP checksum field holding the pseudo-header sum (`CHECKSUM_PARTIAL`).
fn tcp_super_frame(dst: [u8; 6], src: [u8; 6], payload: &[u8]) -> Vec<u8> {
    let (saddr, daddr) = ([10, 200, 0, 1], [10, 200, 0, 2]);
    let tcp_len = 20 + payload.len();
    let mut ip = vec![0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&((20 + tcp_len) as u16).to_be_bytes());
    ip[4..6].copy_from_slice(&0x1234u16.to_be_bytes());
    ip[6] = 0x40; // DF
    ip[8] = 64;
    ip[9] = 6;
    ip[12..16].copy_from_slice(&saddr);
    ip[16..20].copy_from_slice(&daddr);
    let c = !fold(checksum(&ip, 0));
    ip[10..12].copy_from_slice(&c.to_be_bytes());

    let mut tcp = vec![0u8; 20];
    tcp[0..2].copy_from_slice(&40000u16.to_be_bytes());
    tcp[2..4].copy_from_slice(&5201u16.to_be_bytes());
    tcp[4..8].copy_from_slice(&1_000_000u32.to_be_bytes());
    tcp[8..12].copy_from_slice(&1u32.to_be_bytes());
    tcp[12] = 5 << 4;
    tcp[13] = 0x18; // PSH|ACK
    tcp[14..16].copy_from_slice(&65535u16.to_be_bytes());
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&saddr);
    pseudo.extend_from_slice(&daddr);
    pseudo.extend_from_slice(&[0, 6]);
    pseudo.extend_from_slice(&(tcp_len as u16).to_be_bytes());
    let partial = fold(checksum(&pseudo, 0));
    tcp[16..18].copy_from_slice(&partial.to_be_bytes());

    let mut l3 = ip;
    l3.extend_from_slice(&tcp);
    l3.extend_from_slice(payload);
    frame(dst, src, 0x0800, &l3)
}

#[test]
fn veth_gso_64k_tcp_super_frame() {
    const MSS: usize = 1448;
    const SEGMENTS: usize = 45;
    let lab = veth_lab();
    let (sa, va_mac) = lab.run_in(0, || {
        Ok((
            PacketSocket::bind_name("va", vnet_opts())?,
            link::mac("va")?,
        ))
    });
    let sb = lab.run_in(1, || PacketSocket::bind_name("vb", vnet_opts()));

    let payload: Vec<u8> = (0..MSS * SEGMENTS).map(|i| (i * 7 % 251) as u8).collect();
    let f = tcp_super_frame(OTHER_HOST, va_mac, &payload);
    let hdr = VirtioNetHdr {
        flags: VirtioNetHdr::F_NEEDS_CSUM,
        gso_type: VirtioNetHdr::GSO_TCPV4,
        hdr_len: 54,
        gso_size: MSS as u16,
        csum_start: 34,
        csum_offset: 16,
    };
    let mut out = hdr.to_bytes().to_vec();
    out.extend_from_slice(&f);
    assert!(out.len() > 65_000 && f.len() - 14 <= 65_535);
    assert_eq!(
        sa.send(&out).unwrap(),
        out.len(),
        "a GSO super-frame must be accepted whole"
    );

    // Collect IPv4 frames until the whole payload is accounted for.
    let mut pieces: Vec<(VirtioNetHdr, Vec<u8>)> = Vec::new();
    let mut got_payload = 0;
    while got_payload < payload.len() {
        let (buf, meta) = recv_matching(&sb, SECOND, |x| ethertype(x) == Some(0x0800))
            .unwrap_or_else(|| {
                panic!(
                    "only {got_payload} of {} payload bytes arrived in {} frame(s)",
                    payload.len(),
                    pieces.len()
                )
            });
        assert!(!meta.truncated);
        let h = VirtioNetHdr::from_bytes(&buf).unwrap();
        let l2 = buf[VirtioNetHdr::LEN..].to_vec();
        got_payload += l2.len() - 54;
        pieces.push((h, l2));
    }
    assert_eq!(got_payload, payload.len());
    if pieces.len() == 1 {
        let (h, l2) = &pieces[0];
        eprintln!(
            "GSO on veth: one {}-byte super-frame arrived intact, vnet header {h:?}",
            l2.len() + VirtioNetHdr::LEN
        );
        assert_eq!(h.gso_kind(), VirtioNetHdr::GSO_TCPV4);
        assert_eq!(usize::from(h.gso_size), MSS);
        assert_eq!(l2[54..], payload[..]);
        assert_eq!(l2[..34], f[..34], "Ethernet and IP headers changed");
    } else {
        eprintln!(
            "GSO on veth: the super-frame arrived as {} segments",
            pieces.len()
        );
        let mut joined = Vec::new();
        for (h, l2) in &pieces {
            assert!(!h.is_gso());
            assert!(l2.len() - 54 <= MSS);
            joined.extend_from_slice(&l2[54..]);
        }
        assert_eq!(joined, payload);
    }
}

/// `UDP_SEGMENT` (linux/udp.h); not exported by the libc crate for glibc targets.
const UDP_SEGMENT: libc::c_int = 103;

#[test]
fn tap_offloads_carry_gso_super_frames_both_ways() {
    const GSO_SIZE: usize = 1400;
    const SEGMENTS: usize = 10;
    let lab = Lab::new(1);
    let (tap, sock) = lab.run_in(0, || {
        let tap = Tap::create(
            "lt3",
            TapOptions {
                vnet_hdr: true,
                ..TapOptions::default()
            },
        )?;
        link::set_up("lt3", true)?;
        let sock = PacketSocket::bind_name("lt3", vnet_opts())?;
        Ok((tap, sock))
    });
    assert!(
        tap.offloads().uso4,
        "this kernel (6.18) should accept USO: {:?}",
        tap.offloads()
    );
    lab.ip(0, &["addr", "add", "10.201.0.1/24", "dev", "lt3"]);
    lab.ip(
        0,
        &[
            "neigh",
            "add",
            "10.201.0.2",
            "lladdr",
            "02:00:00:00:00:02",
            "dev",
            "lt3",
            "nud",
            "permanent",
        ],
    );

    // Host to bond: one UDP send with UDP_SEGMENT makes a USO super-frame; a TAP that announced
    // USO must get it whole, with its virtio_net_hdr describing the segmentation.
    let payload = vec![0x5a_u8; GSO_SIZE * SEGMENTS];
    lab.run_in(0, || {
        let udp = std::net::UdpSocket::bind("10.201.0.1:0")?;
        let gso = GSO_SIZE as libc::c_int;
        // SAFETY: setsockopt reads one c_int from `gso`, which lives across the call; the
        // descriptor is owned by `udp` and open.
        let ret = unsafe {
            libc::setsockopt(
                std::os::fd::AsRawFd::as_raw_fd(&udp),
                libc::SOL_UDP,
                UDP_SEGMENT,
                std::ptr::from_ref(&gso).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if ret != 0 {
            return Err(io::Error::last_os_error());
        }
        udp.send_to(&payload, "10.201.0.2:9").map(drop)
    });
    let mut buf = vec![0u8; 70_000];
    let mut frames = Vec::new();
    let mut udp_bytes = 0;
    let deadline = Instant::now() + SECOND;
    while udp_bytes < payload.len() {
        match tap.read(&mut buf) {
            Ok(n) => {
                let l2 = &buf[VirtioNetHdr::LEN..n];
                // IPv4 (no options) carrying UDP.
                if ethertype(l2) == Some(0x0800) && l2[23] == 17 {
                    udp_bytes += l2.len() - 14 - 20 - 8;
                    frames.push((VirtioNetHdr::from_bytes(&buf).unwrap(), l2.len()));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                assert!(
                    Instant::now() < deadline,
                    "only {udp_bytes} UDP bytes left through the TAP"
                );
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => panic!("tap read: {e}"),
        }
    }
    eprintln!(
        "host -> TAP, UDP_SEGMENT send of {} B: {} frame(s): {frames:?}",
        payload.len(),
        frames.len()
    );
    assert_eq!(
        frames.len(),
        1,
        "USO super-frame was segmented before the TAP"
    );
    let (h, len) = frames[0];
    assert_eq!(h.gso_kind(), VirtioNetHdr::GSO_UDP_L4);
    assert_eq!(usize::from(h.gso_size), GSO_SIZE);
    assert_eq!(
        h.flags & VirtioNetHdr::F_NEEDS_CSUM,
        VirtioNetHdr::F_NEEDS_CSUM
    );
    assert_eq!(len, 14 + 20 + 8 + payload.len());

    // Bond to host: a TCP super-frame written into the TAP enters the stack whole.
    let tcp_payload: Vec<u8> = (0..1448 * 20).map(|i| i as u8).collect();
    let f = tcp_super_frame(OTHER_HOST, [0x02, 0, 0, 0, 0, 2], &tcp_payload);
    let hdr = VirtioNetHdr {
        flags: VirtioNetHdr::F_NEEDS_CSUM,
        gso_type: VirtioNetHdr::GSO_TCPV4,
        hdr_len: 54,
        gso_size: 1448,
        csum_start: 34,
        csum_offset: 16,
    };
    let mut out = hdr.to_bytes().to_vec();
    out.extend_from_slice(&f);
    assert_eq!(tap.write(&out).unwrap(), out.len());
    let (got, meta) = recv_matching(&sock, SECOND, |x| {
        ethertype(x) == Some(0x0800) && x[23] == 6
    })
    .expect("TCP super-frame written into the TAP not seen on the device");
    let seen = VirtioNetHdr::from_bytes(&got).unwrap();
    eprintln!(
        "TAP write of a {}-byte TCP super-frame: seen on the device as {} bytes, {seen:?}",
        out.len(),
        meta.len
    );
    assert_eq!(got[VirtioNetHdr::LEN..], f[..]);
    assert_eq!(seen.gso_kind(), VirtioNetHdr::GSO_TCPV4);
}

#[test]
fn carrier_follows_peer_within_milliseconds() {
    let lab = veth_lab();
    let ctl_a = lab.run_in(0, LinkControl::new);
    let ctl_b = lab.run_in(1, LinkControl::new);
    assert!(ctl_a.carrier("va").unwrap());

    let poll_until = |want: bool| -> Duration {
        let t0 = Instant::now();
        while ctl_a.carrier("va").unwrap() != want {
            assert!(t0.elapsed() < SECOND, "carrier of va never became {want}");
        }
        t0.elapsed()
    };
    let (mut downs, mut ups) = (Vec::new(), Vec::new());
    for _ in 0..20 {
        ctl_b.set_up("vb", false).unwrap();
        downs.push(poll_until(false));
        assert!(!ctl_b.is_up("vb").unwrap());
        ctl_b.set_up("vb", true).unwrap();
        ups.push(poll_until(true));
        assert!(ctl_b.is_up("vb").unwrap());
    }
    let (down_max, up_max) = (*downs.iter().max().unwrap(), *ups.iter().max().unwrap());
    eprintln!(
        "carrier via ETHTOOL_GLINK after the peer's SIOCSIFFLAGS returned, 20 cycles: down median {:?} max {:?}, up median {:?} max {:?}",
        median(&mut downs),
        down_max,
        median(&mut ups),
        up_max
    );
    assert!(
        down_max < Duration::from_millis(50),
        "carrier loss seen late: {down_max:?}"
    );
    assert!(
        up_max < Duration::from_millis(50),
        "carrier return seen late: {up_max:?}"
    );

    // RTM_GETLINK answers from the same kernel state, so it is just as immediate.
    ctl_b.set_up("vb", false).unwrap();
    let st = ctl_a.state("va").unwrap();
    assert!(st.up && !st.carrier, "{st:?}");
    ctl_b.set_up("vb", true).unwrap();
    poll_until(true);
    let st = ctl_a.state("va").unwrap();
    assert!(st.up && st.carrier, "{st:?}");

    // Our own side administratively down reads as no carrier too.
    ctl_a.set_up("va", false).unwrap();
    assert!(!ctl_a.carrier("va").unwrap());
    ctl_a.set_up("va", true).unwrap();
    poll_until(true);
}

#[test]
fn link_facts_and_control_on_veth() {
    let lab = veth_lab();
    let ctl = lab.run_in(0, LinkControl::new);

    let index = ctl.ifindex("va").unwrap();
    assert_eq!(ctl.name_of(index).unwrap(), "va");
    let st = ctl.state("va").unwrap();
    assert_eq!(
        (st.ifindex, st.name.as_str(), st.up, st.carrier),
        (index, "va", true, true)
    );
    let st = ctl.state("lo").unwrap();
    assert_eq!((st.name.as_str(), st.up), ("lo", true));
    assert_eq!(
        lagd_sys::errno(&ctl.ifindex("nope0").unwrap_err()),
        Some(libc::ENODEV)
    );
    assert_eq!(
        ctl.ifindex("much-too-long-name").unwrap_err().kind(),
        io::ErrorKind::InvalidInput
    );

    let sd = ctl.speed_duplex("va").unwrap();
    eprintln!("veth speed/duplex: {sd:?}");
    assert_eq!(sd.speed_mbps, Some(10_000));
    assert_eq!(sd.duplex, Duplex::Full);

    assert_eq!(ctl.mtu("va").unwrap(), 1500);
    ctl.set_mtu("va", 9000).unwrap();
    assert_eq!(ctl.mtu("va").unwrap(), 9000);
    assert!(lab.ip(0, &["link", "show", "va"]).contains("mtu 9000"));

    let mac = ctl.mac("va").unwrap();
    assert_eq!(
        ctl.permanent_mac("va").unwrap(),
        mac,
        "veth has no burned-in address: falls back to the current one"
    );
    let new_mac = [0x02, 0x1a, 0x9d, 0x00, 0x00, 0x42];
    ctl.set_up("va", false).unwrap();
    ctl.set_mac("va", new_mac).unwrap();
    ctl.set_up("va", true).unwrap();
    assert_eq!(ctl.mac("va").unwrap(), new_mac);
    assert!(
        lab.ip(0, &["link", "show", "va"])
            .contains("02:1a:9d:00:00:42")
    );

    ctl.set_promisc("va", true).unwrap();
    assert!(lab.ip(0, &["link", "show", "va"]).contains("PROMISC"));
    ctl.set_promisc("va", false).unwrap();
    assert!(!lab.ip(0, &["link", "show", "va"]).contains("PROMISC"));
    assert!(ctl.is_up("va").unwrap());

    // The free functions follow the calling thread's namespace.
    let (free_index, free_mac) = lab.run_in(0, || Ok((link::ifindex("va")?, link::mac("va")?)));
    assert_eq!((free_index, free_mac), (index, new_mac));
}

/// Waits for a link event satisfying `want`, for at most `timeout`.
fn wait_event(
    events: &mut LinkEvents,
    timeout: Duration,
    want: impl Fn(&LinkEvent) -> bool,
) -> Option<Duration> {
    let poller = Poller::new().unwrap();
    poller.add(&*events, 0, Interest::READABLE).unwrap();
    let mut ready = Events::with_capacity(1);
    let t0 = Instant::now();
    loop {
        while let Some(ev) = events.next_event().unwrap() {
            if want(&ev) {
                return Some(t0.elapsed());
            }
        }
        let left = timeout.saturating_sub(t0.elapsed());
        if left.is_zero() {
            return None;
        }
        poller.wait(&mut ready, Some(left)).unwrap();
    }
}

#[test]
fn link_events_report_admin_down_carrier_loss_and_removal() {
    let lab = veth_lab();
    let (mut events, ctl_a) = lab.run_in(0, || Ok((LinkEvents::new()?, LinkControl::new()?)));
    let ctl_b = lab.run_in(1, LinkControl::new);
    let va = ctl_a.ifindex("va").unwrap();
    let is_va = move |ev: &LinkEvent, up: bool, carrier: bool| matches!(ev, LinkEvent::Changed(s) if s.ifindex == va && s.name == "va" && s.up == up && s.carrier == carrier);

    // A dump lists every link, loopback included.
    events.request_dump().unwrap();
    assert!(
        wait_event(&mut events, SECOND, |ev| is_va(ev, true, true)).is_some(),
        "dump lacks va"
    );

    ctl_a.set_up("va", false).unwrap();
    let admin = wait_event(&mut events, 3 * SECOND, |ev| is_va(ev, false, false))
        .expect("no event for va going down");
    ctl_a.set_up("va", true).unwrap();
    assert!(
        wait_event(&mut events, 3 * SECOND, |ev| is_va(ev, true, true)).is_some(),
        "no event for va coming back"
    );

    // Carrier loss caused by the peer: this is the event the kernel's linkwatch may hold back.
    ctl_b.set_up("vb", false).unwrap();
    let carrier = wait_event(&mut events, 3 * SECOND, |ev| is_va(ev, true, false))
        .expect("no event for va losing carrier");
    ctl_b.set_up("vb", true).unwrap();
    let back = wait_event(&mut events, 3 * SECOND, |ev| is_va(ev, true, true))
        .expect("no event for va regaining carrier");

    // Removal.
    let tap = lab.run_in(0, || Tap::create("lt9", TapOptions::default()));
    let lt9 = ctl_a.ifindex("lt9").unwrap();
    drop(tap);
    let removed = wait_event(
        &mut events,
        3 * SECOND,
        |ev| matches!(ev, LinkEvent::Removed(s) if s.ifindex == lt9 && s.name == "lt9"),
    )
    .expect("no RTM_DELLINK for the TAP");
    eprintln!(
        "rtnetlink latency: admin down {admin:?}, peer carrier loss {carrier:?}, carrier back {back:?}, removal {removed:?}"
    );
}

#[test]
fn epoll_wakes_on_readable_packet_socket_and_reports_netdown() {
    let lab = veth_lab();
    let (sa, va_mac) = lab.run_in(0, || {
        Ok((
            PacketSocket::bind_name(
                "va",
                PacketOptions {
                    ignore_outgoing: true,
                    ..PacketOptions::default()
                },
            )?,
            link::mac("va")?,
        ))
    });
    let (sb, ctl_b) = lab.run_in(1, || {
        Ok((
            PacketSocket::bind_name(
                "vb",
                PacketOptions {
                    protocol: TEST_ETHERTYPE,
                    ..PacketOptions::default()
                },
            )?,
            LinkControl::new()?,
        ))
    });
    let poller = Poller::new().unwrap();
    poller.add(&sb, 7, Interest::READABLE).unwrap();
    let mut events = Events::with_capacity(8);
    assert_eq!(poller.wait(&mut events, Some(Duration::ZERO)).unwrap(), 0);

    let f = frame(OTHER_HOST, va_mac, TEST_ETHERTYPE, b"wake up");
    let t0 = Instant::now();
    sa.send(&f).unwrap();
    assert_eq!(poller.wait(&mut events, Some(SECOND)).unwrap(), 1);
    let woke = t0.elapsed();
    let ev = events.iter().next().unwrap();
    assert_eq!(ev.token(), 7);
    assert!(ev.is_readable() && !ev.is_error());
    let mut buf = [0u8; 2048];
    let n = sb.recv(&mut buf).unwrap();
    assert_eq!(buf[..n], f[..]);
    assert_eq!(
        poller.wait(&mut events, Some(Duration::ZERO)).unwrap(),
        0,
        "level-triggered: drained means quiet"
    );
    eprintln!("epoll woke {woke:?} after send");

    // The bound interface going down: an error event, ENETDOWN once, then the socket recovers.
    ctl_b.set_up("vb", false).unwrap();
    assert_eq!(poller.wait(&mut events, Some(SECOND)).unwrap(), 1);
    assert!(events.iter().next().unwrap().is_error());
    assert_eq!(
        sb.recv(&mut buf).unwrap_err().raw_os_error(),
        Some(libc::ENETDOWN)
    );
    assert_eq!(
        sb.recv(&mut buf).unwrap_err().kind(),
        io::ErrorKind::WouldBlock
    );
    ctl_b.set_up("vb", true).unwrap();
    let ctl_a = lab.run_in(0, LinkControl::new);
    let t0 = Instant::now();
    while !ctl_a.carrier("va").unwrap() {
        assert!(t0.elapsed() < SECOND);
    }
    sa.send(&f).unwrap();
    assert!(
        recv_matching(&sb, SECOND, |x| x == f.as_slice()).is_some(),
        "socket dead after the interface came back"
    );
}

#[test]
fn slow_protocols_multicast_and_promisc_memberships() {
    let lab = veth_lab();
    let (sa, va_mac) = lab.run_in(0, || {
        Ok((
            PacketSocket::bind_name(
                "va",
                PacketOptions {
                    ignore_outgoing: true,
                    ..PacketOptions::default()
                },
            )?,
            link::mac("va")?,
        ))
    });
    let slow = lab.run_in(1, || {
        PacketSocket::bind_name(
            "vb",
            PacketOptions {
                protocol: ETH_P_SLOW,
                ..PacketOptions::default()
            },
        )
    });
    let maddr = || lab.ip(1, &["maddr", "show", "dev", "vb"]);
    assert!(!maddr().contains("01:80:c2:00:00:02"));
    slow.add_membership(Membership::Multicast(SLOW_PROTOCOLS_MULTICAST))
        .unwrap();
    assert!(
        maddr().contains("01:80:c2:00:00:02"),
        "membership not on vb:\n{}",
        maddr()
    );

    // An LACPDU-shaped frame arrives on the ETH_P_SLOW socket; other protocols do not.
    let mut lacpdu = vec![0u8; 110];
    lacpdu[0] = 0x01; // subtype LACP
    lacpdu[1] = 0x01; // version
    let other = frame(SLOW_PROTOCOLS_MULTICAST, va_mac, TEST_ETHERTYPE, &lacpdu);
    let f = frame(SLOW_PROTOCOLS_MULTICAST, va_mac, ETH_P_SLOW, &lacpdu);
    sa.send(&other).unwrap();
    sa.send(&f).unwrap();
    let (got, meta) =
        recv_matching(&slow, SECOND, |_| true).expect("slow-protocols frame not received");
    assert_eq!(got, f, "the ETH_P_SLOW socket got something else first");
    assert_eq!(meta.pkttype, PacketType::Multicast);
    assert_eq!(meta.protocol, ETH_P_SLOW);

    slow.drop_membership(Membership::Multicast(SLOW_PROTOCOLS_MULTICAST))
        .unwrap();
    assert!(!maddr().contains("01:80:c2:00:00:02"));

    // Promiscuity through a membership is counted and released with the socket.
    let promiscuity = || {
        let out = lab.ip(1, &["-d", "link", "show", "vb"]);
        out.split("promiscuity ")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .unwrap()
            .to_string()
    };
    assert_eq!(promiscuity(), "0");
    slow.add_membership(Membership::Promisc).unwrap();
    assert_eq!(promiscuity(), "1");
    drop(slow);
    assert_eq!(promiscuity(), "0", "membership outlived its socket");
}

#[test]
fn netns_enter_thread_leaves_the_caller_alone() {
    let lab = veth_lab();
    let own = || std::fs::read_link("/proc/thread-self/ns/net").unwrap();
    let before = own();
    let inside = lab.run_in(0, || Ok(own()));
    assert_ne!(inside, before);
    assert_eq!(own(), before, "the calling thread moved");
    let expected = std::fs::read_link(format!("/proc/{}/ns/net", std::process::id())).unwrap();
    assert_eq!(before, expected);

    // va exists only inside (the root namespace has no such interface, or a different one).
    let inside_index = lab.run_in(0, || link::ifindex("va"));
    assert!(inside_index > 0);
    let inside_mac = lab.run_in(0, || link::mac("va"));
    match link::ifindex("va") {
        Err(e) => assert_eq!(lagd_sys::errno(&e), Some(libc::ENODEV)),
        Ok(_) => assert_ne!(
            link::mac("va").ok(),
            Some(inside_mac),
            "the caller saw the namespace's va"
        ),
    }

    let missing = NetNs::enter_thread("lsys-no-such-namespace", || ()).unwrap_err();
    assert_eq!(missing.kind(), io::ErrorKind::NotFound);
    assert_eq!(
        NetNs::open("../etc").unwrap_err().kind(),
        io::ErrorKind::InvalidInput
    );

    let ns = NetNs::open(lab.ns(0)).unwrap();
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        ns.run(|| panic!("deliberate panic inside the namespace thread (this test expects it)"))
    }));
    assert!(panicked.is_err(), "a panic inside must reach the caller");
}

/// A TAP descriptor passed to another process keeps the device's carrier: adopted there (the
/// name and flags checked), it carries on; closed everywhere, the carrier goes.
#[test]
fn an_adopted_tap_keeps_its_carrier_and_a_wrong_one_is_refused() {
    use std::os::fd::{AsFd, OwnedFd};
    use std::os::unix::net::UnixDatagram;
    let lab = Lab::new(1);
    lab.run_in(0, || -> io::Result<()> {
        let opts = TapOptions {
            vnet_hdr: true,
            persist: true,
            ..TapOptions::default()
        };
        let tap = Tap::create("lt9", opts)?;
        link::set_up("lt9", true)?;
        let control = LinkControl::new()?;
        assert!(control.carrier("lt9")?, "a TAP with a reader has carrier");
        // Through a socket, as the service manager's store does.
        let (a, b) = UnixDatagram::pair()?;
        lagd_sys::fdpass::send_with_fds(&a, b"FDSTORE=1\nFDNAME=tap", &[tap.as_fd()])?;
        let mut buf = [0u8; 64];
        let (_, mut fds) = lagd_sys::fdpass::recv_with_fds(&b, &mut buf, 1)?;
        let passed: OwnedFd = fds.remove(0);
        let again = passed.try_clone()?;
        drop(tap);
        assert!(
            control.carrier("lt9")?,
            "the passed descriptor keeps the carrier"
        );
        // The wrong name or header flag is refused, not adopted.
        let Err(e) = Tap::adopt(again, "lt8", opts) else {
            panic!("adopted under another name")
        };
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
        let plain = TapOptions {
            vnet_hdr: false,
            ..opts
        };
        let Err(e) = Tap::adopt(passed.try_clone()?, "lt9", plain) else {
            panic!("adopted with other flags")
        };
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
        let adopted = Tap::adopt(passed, "lt9", opts)?;
        assert!(control.carrier("lt9")?);
        assert_eq!(adopted.vnet_hdr_len(), VirtioNetHdr::LEN);
        adopted.set_persist(false)?;
        drop(adopted);
        assert!(
            control.ifindex("lt9").is_err(),
            "not persistent: gone with its last descriptor"
        );
        Ok(())
    });
}
