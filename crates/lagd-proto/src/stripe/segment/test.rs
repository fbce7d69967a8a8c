use super::*;
use proptest::prelude::*;

/// Ones'-complement sum, written independently of `wire::ip::checksum`.
fn ones_sum(parts: &[&[u8]]) -> u16 {
    let mut sum: u64 = 0;
    for part in parts {
        for (i, b) in part.iter().enumerate() {
            sum += if i % 2 == 0 {
                u64::from(*b) << 8
            } else {
                u64::from(*b)
            };
        }
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// A TCP super-frame as the host's stack hands it to the TAP, and its request.
#[derive(Debug, Clone)]
struct Super {
    frame: Vec<u8>,
    gso: GsoInfo,
    l3: usize,
    l4: usize,
    payload: Vec<u8>,
}

const SEQ0: u32 = 0xffff_f000;
const IDENT0: u16 = 0xfff0;

fn pseudo(v4: bool, l3: &[u8], tcp_len: usize) -> Vec<u8> {
    let mut p = Vec::new();
    if v4 {
        p.extend_from_slice(&l3[12..20]);
        p.extend_from_slice(&[0, 6]);
        p.extend_from_slice(&(tcp_len as u16).to_be_bytes());
    } else {
        p.extend_from_slice(&l3[8..40]);
        p.extend_from_slice(&(tcp_len as u32).to_be_bytes());
        p.extend_from_slice(&[0, 0, 0, 6]);
    }
    p
}

fn build(
    v4: bool,
    vlan: bool,
    ip_opt_words: usize,
    tcp_opt_words: usize,
    payload: Vec<u8>,
    flags: u8,
    mss: u16,
) -> Super {
    let mut f = vec![0x02, 0xaa, 0, 0, 0, 2, 0x02, 0xbb, 0, 0, 0, 1];
    if vlan {
        f.extend_from_slice(&[0x81, 0x00, 0x20, 0x64]);
    }
    f.extend_from_slice(if v4 { &[0x08, 0x00] } else { &[0x86, 0xdd] });
    let l3 = f.len();
    let tcp_hl = 20 + 4 * tcp_opt_words;
    if v4 {
        let ihl = 5 + ip_opt_words;
        let total = ihl * 4 + tcp_hl + payload.len();
        f.extend_from_slice(&[0x40 | ihl as u8, 0x02]);
        f.extend_from_slice(&(total as u16).to_be_bytes());
        f.extend_from_slice(&IDENT0.to_be_bytes());
        f.extend_from_slice(&[0x40, 0x00, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
        for _ in 0..ip_opt_words {
            f.extend_from_slice(&[1, 1, 1, 1]); // NOPs
        }
        let c = !ones_sum(&[&f[l3..]]);
        f[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
    } else {
        f.extend_from_slice(&[0x60, 0x01, 0x23, 0x45]);
        f.extend_from_slice(&((tcp_hl + payload.len()) as u16).to_be_bytes());
        f.extend_from_slice(&[6, 64]);
        f.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        f.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    }
    let l4 = f.len();
    f.extend_from_slice(&[0x9c, 0x40, 0x14, 0x51]);
    f.extend_from_slice(&SEQ0.to_be_bytes());
    f.extend_from_slice(&0x0102_0304u32.to_be_bytes());
    f.extend_from_slice(&[(tcp_hl as u8 / 4) << 4, flags, 0xff, 0xff, 0, 0, 0, 0]);
    for w in 0..tcp_opt_words {
        f.extend_from_slice(&[1, 1, 1, w as u8]);
    }
    f.extend_from_slice(&payload);
    // NEEDS_CSUM: the checksum field holds the (uncomplemented) pseudo-header sum.
    let tcp_len = f.len() - l4;
    let ps = ones_sum(&[&pseudo(v4, &f[l3..], tcp_len)]);
    f[l4 + 16..l4 + 18].copy_from_slice(&ps.to_be_bytes());
    let gso = GsoInfo {
        kind: if v4 { GsoKind::TcpV4 } else { GsoKind::TcpV6 },
        ecn: flags & 0x80 != 0,
        gso_size: mss,
        hdr_len: (l4 + tcp_hl) as u16,
        needs_csum: true,
        csum_start: l4 as u16,
        csum_offset: 16,
    };
    Super {
        frame: f,
        gso,
        l3,
        l4,
        payload,
    }
}

fn run(s: &Super, headroom: usize) -> Result<Vec<Vec<u8>>, SegmentError> {
    let mut buf = vec![0xeeu8; 70_000];
    let mut segs = Vec::new();
    let n = segment(&s.frame, &s.gso, &mut buf, headroom, |seg| {
        assert!(
            seg[..headroom].iter().all(|&b| b == 0xee),
            "headroom touched"
        );
        segs.push(seg[headroom..].to_vec());
    })?;
    assert_eq!(n, segs.len());
    Ok(segs)
}

/// Checks every segment independently and returns the payload they carry, in order.
fn check(s: &Super, segs: &[Vec<u8>]) -> Vec<u8> {
    let v4 = s.gso.kind == GsoKind::TcpV4;
    let mss = usize::from(s.gso.gso_size);
    let tcp_hl = usize::from(s.frame[s.l4 + 12] >> 4) * 4;
    let hdr_end = s.l4 + tcp_hl;
    let want = s.payload.len().div_ceil(mss).max(1);
    assert_eq!(segs.len(), want);
    let flags0 = s.frame[s.l4 + 13];
    let mut payload = Vec::new();
    for (i, seg) in segs.iter().enumerate() {
        let last = i + 1 == segs.len();
        assert!(seg.len() <= hdr_end + mss);
        // Ethernet header and tags unchanged.
        assert_eq!(&seg[..s.l3], &s.frame[..s.l3]);
        let ip = &seg[s.l3..];
        if v4 {
            let ihl = usize::from(ip[0] & 0xf) * 4;
            assert_eq!(usize::from(u16::from_be_bytes([ip[2], ip[3]])), ip.len());
            assert_eq!(
                u16::from_be_bytes([ip[4], ip[5]]),
                IDENT0.wrapping_add(i as u16)
            );
            assert_eq!(ones_sum(&[&ip[..ihl]]), 0xffff, "IPv4 header checksum");
            // Everything else in the IP header is the original's.
            assert_eq!(&ip[6..10], &s.frame[s.l3 + 6..s.l3 + 10]);
            assert_eq!(&ip[12..ihl], &s.frame[s.l3 + 12..s.l3 + ihl]);
        } else {
            assert_eq!(
                usize::from(u16::from_be_bytes([ip[4], ip[5]])),
                ip.len() - 40
            );
            assert_eq!(&ip[..4], &s.frame[s.l3..s.l3 + 4]);
            assert_eq!(&ip[6..40], &s.frame[s.l3 + 6..s.l3 + 40]);
        }
        let tcp = &seg[s.l4..];
        let ps = pseudo(v4, ip, tcp.len());
        assert_eq!(ones_sum(&[&ps, tcp]), 0xffff, "TCP checksum of segment {i}");
        let seq = u32::from_be_bytes([tcp[4], tcp[5], tcp[6], tcp[7]]);
        assert_eq!(seq, SEQ0.wrapping_add((i * mss) as u32));
        let mut want_flags = flags0;
        if !last {
            want_flags &= !0x09;
        }
        if i > 0 {
            want_flags &= !0x80;
        }
        assert_eq!(tcp[13], want_flags, "flags of segment {i}");
        // Ports, ack, offset, window, urgent and options unchanged.
        assert_eq!(&tcp[..4], &s.frame[s.l4..s.l4 + 4]);
        assert_eq!(&tcp[8..13], &s.frame[s.l4 + 8..s.l4 + 13]);
        assert_eq!(&tcp[14..16], &s.frame[s.l4 + 14..s.l4 + 16]);
        assert_eq!(&tcp[18..tcp_hl], &s.frame[s.l4 + 18..hdr_end]);
        payload.extend_from_slice(&tcp[tcp_hl..]);
    }
    payload
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
}

#[test]
fn ipv4_and_ipv6_with_and_without_vlan() {
    for v4 in [true, false] {
        for vlan in [false, true] {
            // PSH|ACK|CWR|FIN, timestamps, 64000 bytes at MSS 1448.
            let s = build(v4, vlan, 0, 3, pattern(64_000), 0x99, 1448);
            let segs = run(&s, 8).unwrap();
            assert_eq!(segs.len(), 45);
            assert_eq!(check(&s, &segs), s.payload);
            assert_eq!(segment_count(&s.frame, &s.gso).map(|c| c.0), Ok(45));
        }
    }
}

#[test]
fn exact_multiple_single_segment_and_empty_payload() {
    for (len, mss, n) in [(2896, 1448, 2), (100, 1448, 1), (0, 1448, 1), (1, 1, 1)] {
        let s = build(true, false, 1, 0, pattern(len), 0x18, mss);
        let segs = run(&s, 0).unwrap();
        assert_eq!(segs.len(), n);
        assert_eq!(check(&s, &segs), s.payload);
    }
}

#[test]
fn errors_emit_nothing() {
    let good = build(true, true, 0, 0, pattern(3000), 0x18, 1000);
    let mut called = false;
    let mut out = |_: &mut [u8]| called = true;
    let mut buf = [0u8; 2000];
    let mut zero = good.clone();
    zero.gso.gso_size = 0;
    assert_eq!(
        segment(&zero.frame, &zero.gso, &mut buf, 0, &mut out),
        Err(SegmentError::Malformed)
    );
    let mut wrong = good.clone();
    wrong.gso.kind = GsoKind::TcpV6;
    assert_eq!(
        segment(&wrong.frame, &wrong.gso, &mut buf, 0, &mut out),
        Err(SegmentError::Malformed)
    );
    for kind in [GsoKind::None, GsoKind::Other(3), GsoKind::Other(5)] {
        let mut other = good.clone();
        other.gso.kind = kind;
        assert_eq!(
            segment(&other.frame, &other.gso, &mut buf, 0, &mut out),
            Err(SegmentError::Unsupported)
        );
    }
    let mut udp = good.clone();
    udp.frame[udp.l3 + 9] = 17;
    assert_eq!(
        segment(&udp.frame, &udp.gso, &mut buf, 0, &mut out),
        Err(SegmentError::Malformed)
    );
    let mut frag = good.clone();
    frag.frame[frag.l3 + 6] = 0x20; // MF
    assert_eq!(
        segment(&frag.frame, &frag.gso, &mut buf, 0, &mut out),
        Err(SegmentError::Malformed)
    );
    let mut hbh = build(false, false, 0, 0, pattern(3000), 0x18, 1000);
    hbh.frame[hbh.l3 + 6] = 0;
    assert_eq!(
        segment(&hbh.frame, &hbh.gso, &mut buf, 0, &mut out),
        Err(SegmentError::Unsupported)
    );
    // 1000 bytes of payload + 58 of headers need 1058 bytes after the headroom.
    assert_eq!(
        segment(&good.frame, &good.gso, &mut buf[..1065], 8, &mut out),
        Err(SegmentError::BufferTooSmall)
    );
    assert_eq!(
        segment(
            &good.frame,
            &good.gso,
            &mut buf[..1058],
            usize::MAX,
            &mut out
        ),
        Err(SegmentError::BufferTooSmall)
    );
    assert!(!called);
    assert_eq!(
        segment(&good.frame, &good.gso, &mut buf[..1066], 8, |_| ()),
        Ok(3)
    );
}

#[test]
fn truncation_at_every_length_is_an_error() {
    for v4 in [true, false] {
        let s = build(v4, true, 1, 2, pattern(300), 0x18, 100);
        let mut buf = [0u8; 1000];
        for n in 0..s.frame.len() {
            let got = segment(&s.frame[..n], &s.gso, &mut buf, 0, |_| panic!("emitted"));
            assert!(got.is_err(), "length {n}");
        }
        // Trailing bytes past the IP length (padding) are not payload.
        let mut padded = s.frame.clone();
        padded.extend_from_slice(&[0xff; 5]);
        let padded = Super {
            frame: padded,
            ..s.clone()
        };
        assert_eq!(check(&padded, &run(&padded, 0).unwrap()), s.payload);
    }
}

#[test]
fn from_virtio_decodes_the_header() {
    let g = GsoInfo::from_virtio(1, 0x81, 66, 1448, 34, 16);
    assert_eq!(
        g,
        GsoInfo {
            kind: GsoKind::TcpV4,
            ecn: true,
            gso_size: 1448,
            hdr_len: 66,
            needs_csum: true,
            csum_start: 34,
            csum_offset: 16,
        }
    );
    assert!(g.is_gso());
    assert_eq!(GsoInfo::from_virtio(0, 4, 0, 0, 0, 0).kind, GsoKind::TcpV6);
    assert_eq!(
        GsoInfo::from_virtio(0, 5, 0, 0, 0, 0).kind,
        GsoKind::Other(5)
    );
    assert!(!GsoInfo::from_virtio(2, 0, 0, 0, 0, 0).is_gso());
    assert!(!GsoInfo::from_virtio(2, 0, 0, 0, 0, 0).needs_csum);
}

#[test]
fn complete_checksum_of_tcp_and_udp_frames() {
    for v4 in [true, false] {
        let s = build(v4, true, 0, 0, pattern(333), 0x18, 1448);
        let mut f = s.frame.clone();
        complete_checksum(&mut f, s.l4, 16).unwrap();
        let ps = pseudo(v4, &f[s.l3..], f.len() - s.l4);
        assert_eq!(ones_sum(&[&ps, &f[s.l4..]]), 0xffff);
        // As UDP: length 8 + payload, pseudo-header sum in the field.
        let mut u = s.frame[..s.l4].to_vec();
        let data = pattern(41);
        u.extend_from_slice(&[0x30, 0x39, 0x00, 0x35]);
        u.extend_from_slice(&((8 + data.len()) as u16).to_be_bytes());
        u.extend_from_slice(&[0, 0]);
        u.extend_from_slice(&data);
        let mut ps = pseudo(v4, &u[s.l3..], u.len() - s.l4);
        if v4 {
            ps[9] = 17;
        } else {
            ps[39] = 17;
        }
        let partial = ones_sum(&[&ps]);
        u[s.l4 + 6..s.l4 + 8].copy_from_slice(&partial.to_be_bytes());
        complete_checksum(&mut u, s.l4, 6).unwrap();
        assert_eq!(ones_sum(&[&ps, &u[s.l4..]]), 0xffff);
        assert_ne!(&u[s.l4 + 6..s.l4 + 8], &[0, 0]);
    }
    let mut f = [0u8; 20];
    assert_eq!(complete_checksum(&mut f, 10, 8), Ok(()));
    assert_eq!(&f[18..], &[0xff, 0xff], "zero is sent as 0xffff");
    assert_eq!(
        complete_checksum(&mut f, 10, 9),
        Err(SegmentError::Malformed)
    );
    assert_eq!(
        complete_checksum(&mut f, 21, 0),
        Err(SegmentError::Malformed)
    );
    assert_eq!(
        complete_checksum(&mut f, usize::MAX, 1),
        Err(SegmentError::Malformed)
    );
    assert_eq!(
        complete_checksum(&mut f, 0, usize::MAX - 1),
        Err(SegmentError::Malformed)
    );
}

proptest! {
    #[test]
    fn segments_reassemble_and_verify(
        v4 in any::<bool>(),
        vlan in any::<bool>(),
        ip_opts in 0usize..3,
        tcp_opts in 0usize..11,
        len in 0usize..20_000,
        mss in 1u16..3000,
        flags in any::<u8>(),
        headroom in 0usize..16,
    ) {
        let s = build(v4, vlan, ip_opts, tcp_opts, pattern(len), flags, mss);
        let segs = run(&s, headroom).unwrap();
        prop_assert_eq!(check(&s, &segs), s.payload);
    }

    #[test]
    fn never_panics_on_any_input(
        bytes in proptest::collection::vec(any::<u8>(), 0..200),
        flags in any::<u8>(), gso_type in any::<u8>(), mss in any::<u16>(),
        start in any::<u16>(), offset in any::<u16>(), headroom in 0usize..300,
        ipv4 in any::<bool>(),
    ) {
        let mut f = bytes.clone();
        if f.len() > 14 {
            f[12..14].copy_from_slice(if ipv4 { &[0x08, 0x00] } else { &[0x86, 0xdd] });
            f[14] = if ipv4 { 0x45 } else { 0x60 };
        }
        let gso = GsoInfo::from_virtio(flags, gso_type, 0, mss, start, offset);
        let mut buf = [0u8; 256];
        for frame in [&bytes, &f] {
            let _ = segment(frame, &gso, &mut buf, headroom, |_| ());
            let _ = segment_count(frame, &gso);
            let _ = complete_checksum(&mut frame.clone(), usize::from(start), usize::from(offset));
        }
    }
}
