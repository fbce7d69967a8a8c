//! Hash vectors worked by hand from the kernel's formulas, the kernel's quirks one by one, and
//! property tests. `testdata/` beside this file holds real captured frames.

use super::*;
use proptest::prelude::*;

const DST: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
const SRC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];

fn eth(ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&DST);
    f.extend_from_slice(&SRC);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// Inserts a tag (TPID, TCI) after the MAC addresses.
fn tagged(mut frame: Vec<u8>, tpid: u16, tci: u16) -> Vec<u8> {
    let mut tag = tpid.to_be_bytes().to_vec();
    tag.extend_from_slice(&tci.to_be_bytes());
    frame.splice(12..12, tag);
    frame
}

fn ipv4(src: [u8; 4], dst: [u8; 4], proto: u8, frag: u16, payload: &[u8]) -> Vec<u8> {
    let total = 20 + payload.len() as u16;
    let mut h = vec![0x45, 0];
    h.extend_from_slice(&total.to_be_bytes());
    h.extend_from_slice(&[0x12, 0x34]);
    h.extend_from_slice(&frag.to_be_bytes());
    h.extend_from_slice(&[64, proto, 0, 0]);
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    h.extend_from_slice(payload);
    h
}

fn ipv6(src: &str, dst: &str, next: u8, payload: &[u8]) -> Vec<u8> {
    let s: std::net::Ipv6Addr = src.parse().unwrap();
    let d: std::net::Ipv6Addr = dst.parse().unwrap();
    let mut h = vec![0x60, 0, 0, 0];
    h.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    h.extend_from_slice(&[next, 64]);
    h.extend_from_slice(&s.octets());
    h.extend_from_slice(&d.octets());
    h.extend_from_slice(payload);
    h
}

/// A transport header with ports and `extra` bytes of zero after them (20 for TCP-sized).
fn l4(sport: u16, dport: u16, len: usize) -> Vec<u8> {
    let mut h = sport.to_be_bytes().to_vec();
    h.extend_from_slice(&dport.to_be_bytes());
    h.resize(len, 0);
    h
}

const A: [u8; 4] = [10, 0, 0, 1];
const B: [u8; 4] = [10, 0, 0, 2];

fn tcp_frame() -> Vec<u8> {
    eth(0x0800, &ipv4(A, B, 6, 0, &l4(1234, 80, 20)))
}

// Worked by hand (see the module doc of `hash` for the formulas):
//   E = dst[5] ^ src[5] ^ type = 0x02 ^ 0x01 ^ 0x0800 = 0x0803
//   src word = LE(10,0,0,1) = 0x0100000a, dst word = LE(10,0,0,2) = 0x0200000a, xor = 0x03000000
//   ports word for 1234 > 80 = LE(04 d2 00 50) = 0x5000d204
//   layer2+3: h = 0x0803 ^ 0x03000000 = 0x03000803; h ^= h>>16 -> 0x03000b03;
//             h ^= h>>8 -> 0x03030b08
//   layer3+4: h = 0x5000d204 ^ 0x03000000 = 0x5300d204; h ^= h>>16 -> 0x53008104;
//             h ^= h>>8 -> 0x53538185; h >>= 1 -> 0x29a9c0c2
#[test]
fn ipv4_tcp_by_hand() {
    let f = tcp_frame();
    assert_eq!(xmit_hash(HashPolicy::Layer2, &f), 0x0803);
    assert_eq!(xmit_hash(HashPolicy::Layer23, &f), 0x0303_0b08);
    assert_eq!(xmit_hash(HashPolicy::Layer34, &f), 0x29a9_c0c2);
    // Without tunnels the flow dissector finds the same fields.
    assert_eq!(xmit_hash(HashPolicy::Encap23, &f), 0x0303_0b08);
    assert_eq!(xmit_hash(HashPolicy::Encap34, &f), 0x29a9_c0c2);
    assert_eq!(member_index(0x29a9_c0c2, 2), Some(0));
    assert_eq!(member_index(0x29a9_c0c2, 3), Some(0x29a9_c0c2 % 3));
    assert_eq!(member_index(7, 0), None);
}

// IPv6 2001:db8::1 > 2001:db8:0:1::53, UDP 40000 > 53:
//   src word = 0x20010db8 words LE: 0xb80d0120 ^ 0 ^ 0 ^ 0x01000000 = 0xb90d0120
//   dst word = 0xb80d0120 ^ 0x01000000(the :1 word LE) ^ 0 ^ 0x53000000 = 0xea0d0120
//   ports = LE(9c 40 00 35) = 0x3500409c
//   layer3+4: fold(0x3500409c ^ 0xb90d0120 ^ 0xea0d0120) >> 1 = 0x3333135d
//   layer2+3: E = 0x02 ^ 0x01 ^ 0x86dd = 0x86de; fold(0x86de ^ 0x53000000) = 0x5353d50b
#[test]
fn ipv6_udp_by_hand() {
    let f = eth(
        0x86dd,
        &ipv6("2001:db8::1", "2001:db8:0:1::53", 17, &l4(40000, 53, 8)),
    );
    assert_eq!(xmit_hash(HashPolicy::Layer34, &f), 0x3333_135d);
    assert_eq!(xmit_hash(HashPolicy::Encap34, &f), 0x3333_135d);
    assert_eq!(xmit_hash(HashPolicy::Layer23, &f), 0x5353_d50b);
    assert_eq!(xmit_hash(HashPolicy::Layer2, &f), 0x86de);
}

// ICMP echo id 0x1234: the ICMP word 8 | 0 << 8 | 0x1234 << 16 = 0x12340008 replaces the ports:
//   fold(0x12340008 ^ 0x03000000) >> 1 = 0x08929296
#[test]
fn icmp_echo_uses_identifier() {
    let mut echo = vec![8, 0, 0, 0, 0x12, 0x34, 0, 1];
    let f = eth(0x0800, &ipv4(A, B, 1, 0, &echo));
    assert_eq!(xmit_hash(HashPolicy::Layer34, &f), 0x0892_9296);
    assert_eq!(xmit_hash(HashPolicy::Encap34, &f), 0x0892_9296);
    // An identifier of 0 counts as 1.
    echo[4] = 0;
    echo[5] = 0;
    let zero = eth(0x0800, &ipv4(A, B, 1, 0, &echo));
    echo[5] = 1;
    let one = eth(0x0800, &ipv4(A, B, 1, 0, &echo));
    assert_eq!(
        xmit_hash(HashPolicy::Layer34, &zero),
        xmit_hash(HashPolicy::Layer34, &one)
    );
    // layer2+3 ignores ICMP entirely.
    assert_eq!(xmit_hash(HashPolicy::Layer23, &f), 0x0303_0b08);
    // Types without an identifier (here 9, router advertisement) use the (zero) ports word.
    let ra = eth(0x0800, &ipv4(A, B, 1, 0, &[9, 0, 0, 0, 0x12, 0x34, 0, 1]));
    assert_eq!(xmit_hash(HashPolicy::Layer34, &ra), 0x0181_8181);
}

#[test]
fn icmp_error_hashes_with_quoted_flow() {
    let quoted = ipv4(A, B, 17, 0, &l4(1234, 80, 8));
    let mut unreach = vec![3, 3, 0, 0, 0, 0, 0, 0];
    unreach.extend_from_slice(&quoted);
    let router = [10, 0, 0, 254];
    let f = eth(0x0800, &ipv4(router, A, 1, 0, &unreach));
    // Addresses and ports come from the quoted packet: the same hash as the flow itself.
    assert_eq!(xmit_hash(HashPolicy::Layer34, &f), 0x29a9_c0c2);
    assert_eq!(xmit_hash(HashPolicy::Layer23, &f), 0x0303_0b08);
    // The flow dissector does not re-parse: it hashes the outer addresses and no ports.
    let outer = fold_words(0, le(router) ^ le(A), true);
    assert_eq!(xmit_hash(HashPolicy::Encap34, &f), outer);
    // A quote cut below 20 bytes makes the bond's parser fail: layer2 formula.
    let short = eth(0x0800, &ipv4(router, A, 1, 0, &unreach[..8 + 19]));
    assert_eq!(xmit_hash(HashPolicy::Layer34, &short), 0x0803);
    assert_eq!(xmit_hash(HashPolicy::Layer23, &short), 0x0803);
}

fn le(a: [u8; 4]) -> u32 {
    u32::from_le_bytes(a)
}

fn fold_words(l4: u32, addrs: u32, shift: bool) -> u32 {
    let mut h = l4 ^ addrs;
    h ^= h >> 16;
    h ^= h >> 8;
    if shift { h >> 1 } else { h }
}

#[test]
fn fragments_lose_ports_first_fragment_too() {
    let whole = tcp_frame();
    let first = eth(0x0800, &ipv4(A, B, 6, 0x2000, &l4(1234, 80, 20)));
    let later = eth(0x0800, &ipv4(A, B, 6, 0x00b9, &l4(1234, 80, 20)));
    let df_only = eth(0x0800, &ipv4(A, B, 6, 0x4000, &l4(1234, 80, 20)));
    let no_ports = 0x0181_8181; // fold(0x03000000) >> 1
    for p in [HashPolicy::Layer34, HashPolicy::Encap34] {
        assert_eq!(xmit_hash(p, &first), no_ports, "{p}");
        assert_eq!(xmit_hash(p, &later), no_ports, "{p}");
        assert_eq!(
            xmit_hash(p, &df_only),
            xmit_hash(p, &whole),
            "{p}: DF is no fragment"
        );
    }
}

#[test]
fn ipv6_extension_headers() {
    // Hop-by-hop (8 bytes) then UDP.
    let mut ext = vec![17, 0, 1, 4, 0, 0, 0, 0];
    ext.extend_from_slice(&l4(40000, 53, 8));
    let f = eth(0x86dd, &ipv6("2001:db8::1", "2001:db8:0:1::53", 0, &ext));
    let plain = eth(
        0x86dd,
        &ipv6("2001:db8::1", "2001:db8:0:1::53", 17, &l4(40000, 53, 8)),
    );
    // The bond's parser looks at the fixed header's next header only: no ports.
    let addrs = 0xb90d_0120 ^ 0xea0d_0120;
    assert_eq!(
        xmit_hash(HashPolicy::Layer34, &f),
        fold_words(0, addrs, true)
    );
    // The flow dissector walks the extension header and keeps the ports.
    assert_eq!(
        xmit_hash(HashPolicy::Encap34, &f),
        xmit_hash(HashPolicy::Layer34, &plain)
    );
    // A fragment header stops the dissector without ports.
    let mut frag = vec![17, 0, 0, 0, 0, 0, 0, 1];
    frag.extend_from_slice(&l4(40000, 53, 8));
    let f = eth(0x86dd, &ipv6("2001:db8::1", "2001:db8:0:1::53", 44, &frag));
    assert_eq!(
        xmit_hash(HashPolicy::Encap34, &f),
        fold_words(0, addrs, true)
    );
}

#[test]
fn esp_and_ah_spi_are_the_ports() {
    let spi = [0xde, 0xad, 0xbe, 0xef];
    let mut esp = spi.to_vec();
    esp.resize(16, 0);
    let f = eth(0x0800, &ipv4(A, B, 50, 0, &esp));
    assert_eq!(
        xmit_hash(HashPolicy::Layer34, &f),
        fold_words(le(spi), 0x0300_0000, true)
    );
    let mut ah = vec![4, 4, 0, 0];
    ah.extend_from_slice(&spi);
    ah.resize(24, 0);
    let f = eth(0x0800, &ipv4(A, B, 51, 0, &ah));
    assert_eq!(
        xmit_hash(HashPolicy::Layer34, &f),
        fold_words(le(spi), 0x0300_0000, true)
    );
}

#[test]
fn accelerated_vlan_tag_is_ignored_except_by_vlan_srcmac() {
    let plain = tcp_frame();
    let tagged_frame = tagged(tcp_frame(), 0x8100, 0x0064);
    for p in [
        HashPolicy::Layer2,
        HashPolicy::Layer23,
        HashPolicy::Layer34,
        HashPolicy::Encap23,
        HashPolicy::Encap34,
    ] {
        assert_eq!(xmit_hash(p, &tagged_frame), xmit_hash(p, &plain), "{p}");
    }
    // 802.1ad outer tag: the same.
    let ad = tagged(tcp_frame(), 0x88a8, 0x0064);
    assert_eq!(xmit_hash(HashPolicy::Layer34, &ad), 0x29a9_c0c2);
}

// vlan+srcmac with source 52:54:00:12:34:56: 0x525400 ^ 0x123456 = 0x406056, then ^ TCI.
#[test]
fn vlan_srcmac_by_hand() {
    let mut f = tcp_frame();
    f[6..12].copy_from_slice(&[0x52, 0x54, 0x00, 0x12, 0x34, 0x56]);
    assert_eq!(xmit_hash(HashPolicy::VlanSrcMac, &f), 0x0040_6056);
    let t = tagged(f.clone(), 0x8100, 0x0064);
    assert_eq!(xmit_hash(HashPolicy::VlanSrcMac, &t), 0x0040_6032);
    // Priority bits are part of the TCI and change the hash.
    let t = tagged(f.clone(), 0x8100, 0xa064);
    assert_eq!(xmit_hash(HashPolicy::VlanSrcMac, &t), 0x0040_c032);
    // An in-band inner tag is ignored: only the outer (accelerated) TCI counts.
    let qinq = tagged(tagged(f, 0x8100, 0x0005), 0x88a8, 0x0064);
    assert_eq!(xmit_hash(HashPolicy::VlanSrcMac, &qinq), 0x0040_6032);
}

#[test]
fn qinq_inner_tag_is_in_band() {
    let qinq = tagged(tagged(tcp_frame(), 0x8100, 0x0005), 0x88a8, 0x0064);
    // skb->protocol is 0x8100: the bond's parser gives up, layer2 formula with type 0x8100.
    let e = 0x02 ^ 0x01 ^ 0x8100;
    assert_eq!(xmit_hash(HashPolicy::Layer2, &qinq), e);
    assert_eq!(xmit_hash(HashPolicy::Layer23, &qinq), e);
    assert_eq!(xmit_hash(HashPolicy::Layer34, &qinq), e);
    // The flow dissector walks through the in-band tag to the flow.
    assert_eq!(xmit_hash(HashPolicy::Encap34, &qinq), 0x29a9_c0c2);
    assert_eq!(
        xmit_hash(HashPolicy::Encap23, &qinq),
        fold_words(e, 0x0300_0000, false)
    );
}

#[test]
fn arp_and_mpls_under_each_policy() {
    let arp = eth(0x0806, &[0u8; 28]);
    let e = 0x02 ^ 0x01 ^ 0x0806;
    assert_eq!(xmit_hash(HashPolicy::Layer2, &arp), e);
    assert_eq!(xmit_hash(HashPolicy::Layer23, &arp), e);
    assert_eq!(xmit_hash(HashPolicy::Layer34, &arp), e);
    // The dissector succeeds without addresses: encap2+3 folds E, encap3+4 is exactly 0.
    assert_eq!(
        xmit_hash(HashPolicy::Encap23, &arp),
        fold_words(e, 0, false)
    );
    assert_eq!(xmit_hash(HashPolicy::Encap23, &arp), 0x080d);
    assert_eq!(xmit_hash(HashPolicy::Encap34, &arp), 0);
    let mpls = eth(0x8847, &[0, 0, 0x11, 0x40]);
    assert_eq!(xmit_hash(HashPolicy::Encap34, &mpls), 0);
    // An EtherType the dissector does not know: layer2 formula.
    let lldp = eth(0x88cc, &[0u8; 30]);
    assert_eq!(xmit_hash(HashPolicy::Encap34, &lldp), 0x02 ^ 0x01 ^ 0x88cc);
}

#[test]
fn tunnels_under_encap_policies() {
    let inner_ip = ipv4([192, 168, 7, 1], [192, 168, 9, 2], 6, 0, &l4(5555, 443, 20));
    let inner_frame = eth(0x0800, &inner_ip);
    // IP-in-IP: the inner addresses and ports replace the outer ones.
    let ipip = eth(0x0800, &ipv4(A, B, 4, 0, &inner_ip));
    assert_eq!(
        xmit_hash(HashPolicy::Encap34, &ipip),
        xmit_hash(HashPolicy::Layer34, &inner_frame)
    );
    // The bond's own parser sees only the outer header (protocol 4 has no ports).
    assert_eq!(xmit_hash(HashPolicy::Layer34, &ipip), 0x0181_8181);
    // GRE (key + sequence) carrying Ethernet (TEB).
    let mut gre = vec![0x30, 0x00, 0x65, 0x58, 0, 0, 0, 42, 0, 0, 0, 1];
    gre.extend_from_slice(&inner_frame);
    let f = eth(0x0800, &ipv4(A, B, 47, 0, &gre));
    assert_eq!(
        xmit_hash(HashPolicy::Encap34, &f),
        xmit_hash(HashPolicy::Layer34, &inner_frame)
    );
    // encap2+3 keeps the outer Ethernet E with the inner addresses.
    let inner_addrs = le([192, 168, 7, 1]) ^ le([192, 168, 9, 2]);
    assert_eq!(
        xmit_hash(HashPolicy::Encap23, &f),
        fold_words(0x0803, inner_addrs, false)
    );
    // GRE with the routing bit: stop with the outer addresses.
    let mut routed = gre.clone();
    routed[0] |= 0x40;
    let f = eth(0x0800, &ipv4(A, B, 47, 0, &routed));
    assert_eq!(xmit_hash(HashPolicy::Encap34, &f), 0x0181_8181);
    // GRE with an unknown inner protocol: the dissector fails, layer2 formula.
    let mut odd = gre.clone();
    odd[2..4].copy_from_slice(&[0x12, 0x34]);
    let f = eth(0x0800, &ipv4(A, B, 47, 0, &odd));
    assert_eq!(xmit_hash(HashPolicy::Encap34, &f), 0x0803);
    // UDP tunnels (VXLAN) are not entered: outer addresses and outer ports.
    let mut vxlan = l4(49152, 4789, 16);
    vxlan.extend_from_slice(&inner_frame);
    let f = eth(0x0800, &ipv4(A, B, 17, 0, &vxlan));
    assert_eq!(
        xmit_hash(HashPolicy::Encap34, &f),
        xmit_hash(HashPolicy::Layer34, &f)
    );
}

#[test]
fn ihl_below_five() {
    let mut ip = ipv4(A, B, 6, 0, &l4(1234, 80, 20));
    ip[0] = 0x40; // IHL 0
    let f = eth(0x0800, &ip);
    // The bond's parser proceeds: the "ports" are the first IP header bytes.
    let ports = le([ip[0], ip[1], ip[2], ip[3]]);
    assert_eq!(
        xmit_hash(HashPolicy::Layer34, &f),
        fold_words(ports, 0x0300_0000, true)
    );
    // The dissector refuses it: layer2 formula.
    assert_eq!(xmit_hash(HashPolicy::Encap34, &f), 0x0803);
}

/// Cutting a frame at every length gives exactly the kernel's fallbacks.
#[test]
fn truncation_falls_back_like_the_kernel() {
    let f = tcp_frame(); // 14 + 20 + 20 bytes
    for len in 0..=f.len() {
        let cut = &f[..len];
        let (l2, l23, l34) = match len {
            0..14 => (0, 0, 0),
            14..34 => (0x0803, 0x0803, 0x0803),
            34..38 => (0x0803, 0x0303_0b08, 0x0181_8181),
            _ => (0x0803, 0x0303_0b08, 0x29a9_c0c2),
        };
        assert_eq!(xmit_hash(HashPolicy::Layer2, cut), l2, "len {len}");
        assert_eq!(xmit_hash(HashPolicy::Layer23, cut), l23, "len {len}");
        assert_eq!(xmit_hash(HashPolicy::Layer34, cut), l34, "len {len}");
        assert_eq!(xmit_hash(HashPolicy::Encap23, cut), l23, "len {len}");
        assert_eq!(xmit_hash(HashPolicy::Encap34, cut), l34, "len {len}");
        let vsm = if len < 14 {
            0
        } else {
            0x0002_0000 ^ 0x0000_0001
        };
        assert_eq!(xmit_hash(HashPolicy::VlanSrcMac, cut), vsm, "len {len}");
    }
}

/// A frame that ends inside its 802.1Q/802.1ad tag, or right after the TCI before the
/// EtherType it encloses, is not untagged (the kernel needs the whole 18-byte header): it
/// keeps its tag in band and every kernel policy hashes the 14-byte header with the TPID as
/// its type; from 18 bytes on, the tag is lifted and the inner EtherType counts.
#[test]
fn a_tag_cut_short_stays_in_band() {
    for tpid in [ETH_P_8021Q, ETH_P_8021AD] {
        let f = tagged(tcp_frame(), tpid, 0x2005);
        for len in 14..f.len() {
            let cut = &f[..len];
            let eth = if len < 18 {
                u32::from(tpid) ^ 0x02 ^ 0x01
            } else {
                0x0800 ^ 0x02 ^ 0x01
            };
            assert_eq!(
                xmit_hash(HashPolicy::Layer2, cut),
                eth,
                "{tpid:04x} len {len}"
            );
            if len < 18 {
                for p in [
                    HashPolicy::Layer23,
                    HashPolicy::Layer34,
                    HashPolicy::Encap23,
                    HashPolicy::Encap34,
                ] {
                    assert_eq!(xmit_hash(p, cut), eth, "{p} {tpid:04x} len {len}");
                }
            }
            // vlan+srcmac sees the TCI only once the tag is lifted.
            let tci = if len < 18 { 0 } else { 0x2005 };
            assert_eq!(
                xmit_hash(HashPolicy::VlanSrcMac, cut),
                tci ^ 0x0002_0000 ^ 0x0000_0001,
                "{tpid:04x} len {len}"
            );
        }
    }
}

/// The 2017 ">> 1" exists because Linux prefers even ephemeral ports: flows differing only in
/// the lowest bit must still spread under layer3+4 but not be split by it.
#[test]
fn even_ports_spread_under_layer34() {
    let mut members = [0usize; 2];
    for sport in (40000u16..40400).step_by(2) {
        let f = eth(0x0800, &ipv4(A, B, 6, 0, &l4(sport, 5201, 20)));
        members[member_index(xmit_hash(HashPolicy::Layer34, &f), 2).unwrap()] += 1;
    }
    assert!(members[0] > 50 && members[1] > 50, "{members:?}");
}

// MurmurHash3_x86_32 reference values (the published test vectors of the algorithm): OVS's
// portable hash_add/hash_finish are its block step and finaliser, so lagd's own two steps must
// reproduce them.
#[test]
fn ovs_murmur_steps_match_reference_vectors() {
    let murmur = |key: u32, seed: u32| ovs::hash_finish(ovs::hash_add(seed, key), 4);
    assert_eq!(murmur(0x8765_4321, 0), 0xf55b_516b);
    assert_eq!(murmur(0x8765_4321, 0x5082_edee), 0x2362_f9de);
    assert_eq!(murmur(0, 0), 0x2362_f9de);
    assert_eq!(ovs::hash_finish(1, 0), 0x514e_28b7);
}

#[test]
fn ovs_slb_uses_source_mac_and_vid_only() {
    let f = tcp_frame();
    let h = xmit_hash(HashPolicy::OvsSlb, &f);
    assert_eq!(h, ovs::hash_mac(SRC, 0, 0));
    // Destination and L3 do not matter.
    let other = eth(0x86dd, &[0u8; 40]);
    assert_eq!(xmit_hash(HashPolicy::OvsSlb, &other), h);
    // VID matters, priority bits do not.
    let t = tagged(tcp_frame(), 0x8100, 0x0064);
    let tp = tagged(tcp_frame(), 0x8100, 0xe064);
    assert_eq!(
        xmit_hash(HashPolicy::OvsSlb, &t),
        ovs::hash_mac(SRC, 100, 0)
    );
    assert_eq!(
        xmit_hash(HashPolicy::OvsSlb, &t),
        xmit_hash(HashPolicy::OvsSlb, &tp)
    );
    assert_ne!(xmit_hash(HashPolicy::OvsSlb, &t), h);
}

/// A TCP header with a valid data offset (5 words): OVS reads no ports from one without.
fn tcp_hdr(sport: u16, dport: u16) -> Vec<u8> {
    let mut h = l4(sport, dport, 20);
    h[12] = 0x50;
    h
}

#[test]
fn ovs_tcp_uses_the_five_tuple() {
    let f = eth(0x0800, &ipv4(A, B, 6, 0, &tcp_hdr(1234, 80)));
    let h = xmit_hash(HashPolicy::OvsTcp, &f);
    // MACs and one VLAN tag do not matter.
    let mut g = tagged(f.clone(), 0x8100, 7);
    g[5] = 0x99;
    assert_eq!(xmit_hash(HashPolicy::OvsTcp, &g), h);
    // Each of proto, addresses and ports does.
    let other_port = eth(0x0800, &ipv4(A, B, 6, 0, &tcp_hdr(1235, 80)));
    let other_proto = eth(0x0800, &ipv4(A, B, 17, 0, &tcp_hdr(1234, 80)));
    let other_addr = eth(0x0800, &ipv4(A, [10, 0, 0, 3], 6, 0, &tcp_hdr(1234, 80)));
    for o in [other_port, other_proto, other_addr] {
        assert_ne!(xmit_hash(HashPolicy::OvsTcp, &o), h);
    }
    // Later fragments have no ports; a cut TCP header, or one whose data offset is below 5
    // words, has none either.
    let later = eth(0x0800, &ipv4(A, B, 6, 0x0010, &tcp_hdr(1234, 80)));
    let cut = eth(0x0800, &ipv4(A, B, 6, 0, &l4(1234, 80, 12)));
    let no_offset = eth(0x0800, &ipv4(A, B, 6, 0, &l4(1234, 80, 20)));
    assert_eq!(
        xmit_hash(HashPolicy::OvsTcp, &later),
        xmit_hash(HashPolicy::OvsTcp, &cut)
    );
    assert_eq!(
        xmit_hash(HashPolicy::OvsTcp, &no_offset),
        xmit_hash(HashPolicy::OvsTcp, &cut)
    );
    assert_ne!(xmit_hash(HashPolicy::OvsTcp, &cut), h);
}

/// What a running Open vSwitch 3.1 showed (crates/lagd/tests/ovs_hash.rs checks it on every
/// run), written out with OVS's hash steps.
#[test]
fn ovs_tcp_follows_open_vswitch_quirks() {
    let words = |f: &[u8], at: usize, n: usize| -> Vec<u32> {
        (0..n).map(|i| le32(f, at + 4 * i)).collect::<Vec<_>>()
    };
    let five = |addrs: &[u32], proto: u8, ports: Option<u32>| {
        let mut h = 0;
        for &w in addrs {
            h = ovs::hash_add(h, w);
        }
        h = ovs::hash_add(h, u32::from(proto));
        if let Some(p) = ports {
            h = ovs::hash_add(h, p);
        }
        ovs::hash_finish(h, 42)
    };
    let udp = l4(4000, 5000, 8);
    let ports = le32(&udp, 0);
    // IPv6 UDP behind a hop-by-hop header: the RSS hash OVS computes for TCP and UDP reads the
    // fixed header's next-header field (0), with the UDP ports.
    let mut hbh = vec![17, 0, 1, 4, 0, 0, 0, 0];
    hbh.extend_from_slice(&udp);
    let f = eth(0x86dd, &ipv6("2001:db8::1", "2001:db8::2", 0, &hbh));
    let addrs = words(&f, 22, 8);
    assert_eq!(
        xmit_hash(HashPolicy::OvsTcp, &f),
        five(&addrs, 0, Some(ports))
    );
    // ICMPv6 behind the same header: miniflow_hash_5tuple(), the walked protocol (58).
    let mut hbh6 = vec![58, 0, 1, 4, 0, 0, 0, 0];
    hbh6.extend_from_slice(&[128, 0, 0, 0, 0, 7, 0, 1]);
    let f = eth(0x86dd, &ipv6("2001:db8::1", "2001:db8::2", 0, &hbh6));
    assert_eq!(
        xmit_hash(HashPolicy::OvsTcp, &f),
        five(&addrs, 58, Some(128 << 8))
    );
    // A later IPv6 fragment: protocol 44, no ports.
    let mut frag = vec![17, 0, 0x05, 0xa8, 0, 0, 0, 1];
    frag.extend_from_slice(&udp);
    let f = eth(0x86dd, &ipv6("2001:db8::1", "2001:db8::2", 44, &frag));
    assert_eq!(xmit_hash(HashPolicy::OvsTcp, &f), five(&addrs, 44, None));
    // A payload length beyond the frame: OVS refuses the header (eight zero address words,
    // protocol 0), like a header cut short.
    let mut f = eth(0x86dd, &ipv6("2001:db8::1", "2001:db8::2", 17, &udp));
    f[19] += 1;
    assert_eq!(xmit_hash(HashPolicy::OvsTcp, &f), five(&[0; 8], 0, None));
    assert_eq!(
        xmit_hash(HashPolicy::OvsTcp, &f[..14 + 39]),
        five(&[0; 8], 0, None)
    );
    // Only one VLAN tag is parsed (vlan-limit 1): QinQ is not IP to OVS.
    let qinq = tagged(
        tagged(eth(0x0800, &ipv4(A, B, 17, 0, &udp)), 0x8100, 5),
        0x88a8,
        100,
    );
    assert_eq!(
        xmit_hash(HashPolicy::OvsTcp, &qinq),
        ovs::hash_finish(0, 42)
    );
    // LLC/SNAP with OUI 0 carries an EtherType: the same hash as Ethernet II.
    let ip = ipv4(A, B, 17, 0, &udp);
    let mut snap = DST.to_vec();
    snap.extend_from_slice(&SRC);
    snap.extend_from_slice(&(8 + ip.len() as u16).to_be_bytes());
    snap.extend_from_slice(&[0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00]);
    snap.extend_from_slice(&ip);
    assert_eq!(
        xmit_hash(HashPolicy::OvsTcp, &snap),
        xmit_hash(HashPolicy::OvsTcp, &eth(0x0800, &ip))
    );
    assert_eq!(
        xmit_hash(HashPolicy::OvsTcp, &snap),
        five(&[le(A), le(B)], 17, Some(ports))
    );
}

#[test]
fn specialised_hashers_agree() {
    let frames = [
        tcp_frame(),
        tagged(tcp_frame(), 0x8100, 9),
        eth(0x0806, &[1; 28]),
    ];
    for p in HashPolicy::ALL {
        for f in &frames {
            assert_eq!(hasher(p)(f), xmit_hash(p, f), "{p}");
        }
    }
}

#[test]
fn policy_names_and_numbers() {
    for p in HashPolicy::ALL {
        assert_eq!(p.name().parse::<HashPolicy>(), Ok(p));
    }
    assert_eq!(HashPolicy::from_kernel_value(1), Some(HashPolicy::Layer34));
    assert_eq!(HashPolicy::from_kernel_value(2), Some(HashPolicy::Layer23));
    assert_eq!(HashPolicy::from_kernel_value(6), None);
    let e = "layer3-4".parse::<HashPolicy>().unwrap_err();
    assert!(e.to_string().contains("layer3+4"), "{e}");
    assert!("Layer2".parse::<HashPolicy>().is_err());
}

#[test]
fn explain_names_the_fields() {
    let mut ex = Explain::default();
    let h = xmit_hash_traced(HashPolicy::Layer34, &tcp_frame(), &mut ex);
    assert_eq!(h, 0x29a9_c0c2);
    let text: Vec<String> = ex.notes.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    let text = text.join("\n");
    assert!(text.contains("10.0.0.1 > 10.0.0.2"), "{text}");
    assert!(text.contains("1234 > 80"), "{text}");
    let mut ex = Explain::default();
    xmit_hash_traced(HashPolicy::Layer34, &eth(0x0806, &[0; 28]), &mut ex);
    assert!(ex.notes.iter().any(|(k, _)| *k == "fallback"), "{ex:?}");
}

fn explain_text(p: HashPolicy, f: &[u8]) -> String {
    let mut ex = Explain::default();
    xmit_hash_traced(p, f, &mut ex);
    let text: Vec<String> = ex.notes.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    text.join("\n")
}

/// ovs-tcp's explanation names every field that fed the hash, and each fallback says why a
/// field counts as zero.
#[test]
fn explain_ovs_tcp_names_every_field_and_fallback() {
    let f = eth(0x0800, &ipv4(A, B, 6, 0, &tcp_hdr(1234, 80)));
    let text = explain_text(HashPolicy::OvsTcp, &f);
    for want in ["10.0.0.1 > 10.0.0.2", "protocol: 6", "1234 > 80"] {
        assert!(text.contains(want), "{want:?} missing from:\n{text}");
    }
    // IPv6 UDP, and behind a hop-by-hop header (the protocol word OVS hashes is then 0).
    let udp = l4(40000, 53, 8);
    let v6 = eth(0x86dd, &ipv6("2001:db8::1", "2001:db8::2", 17, &udp));
    let text = explain_text(HashPolicy::OvsTcp, &v6);
    for want in ["2001:db8::1 > 2001:db8::2", "protocol: 17", "40000 > 53"] {
        assert!(text.contains(want), "{want:?} missing from:\n{text}");
    }
    let mut hbh = vec![17, 0, 1, 4, 0, 0, 0, 0];
    hbh.extend_from_slice(&udp);
    let text = explain_text(
        HashPolicy::OvsTcp,
        &eth(0x86dd, &ipv6("2001:db8::1", "2001:db8::2", 0, &hbh)),
    );
    assert!(
        text.contains("protocol: 0 (the IPv6 header's next-header"),
        "{text}"
    );
    assert!(text.contains("40000 > 53"), "{text}");
    // Each early return says what happened.
    let cases: [(&[u8], &str); 7] = [
        (&f[..10], "shorter than an Ethernet header"),
        (&f[..30], "addresses and protocol 0"),
        (&v6[..14 + 39], "addresses and protocol 0"),
        (&f[..14 + 20 + 10], "total length 40 beyond the frame"),
        (&v6[..14 + 40 + 4], "payload length beyond the frame"),
        (&eth(0x88cc, &[0; 20]), "not IP or ARP"),
        (&eth(0x0806, &[0; 28]), "not Ethernet/IPv4 ARP"),
    ];
    for (frame, want) in cases {
        let text = explain_text(HashPolicy::OvsTcp, frame);
        assert!(
            text.contains(want),
            "{} bytes: {want:?} missing from:\n{text}",
            frame.len()
        );
    }
    // A cut transport header: the protocol, and why there are no ports.
    let cut = eth(0x0800, &ipv4(A, B, 17, 0, &udp[..6]));
    let text = explain_text(HashPolicy::OvsTcp, &cut);
    assert!(
        text.contains("10.0.0.1 > 10.0.0.2") && text.contains("header cut: ports 0"),
        "{text}"
    );
}

proptest! {
    /// Every policy hashes alike with and without a trace, and explains something whatever
    /// the bytes (an early return that forgets its note leaves `--explain` empty).
    #[test]
    fn no_policy_panics_on_any_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        for p in HashPolicy::ALL {
            let h = xmit_hash(p, &bytes);
            let mut ex = Explain::default();
            prop_assert_eq!(xmit_hash_traced(p, &bytes, &mut ex), h);
            prop_assert!(!ex.notes.is_empty(), "{} explained nothing", p);
        }
    }

    #[test]
    fn structured_garbage_never_panics(
        ethertype in prop::sample::select(vec![0x0800u16, 0x86dd, 0x8100, 0x88a8, 0x8864, 0x88ca, 0x892f]),
        proto in prop::sample::select(vec![0u8, 1, 4, 6, 17, 41, 43, 44, 47, 50, 51, 58, 60]),
        tail in proptest::collection::vec(any::<u8>(), 0..120),
    ) {
        let mut payload = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, proto];
        payload.extend_from_slice(&tail);
        let f = eth(ethertype, &payload);
        for p in HashPolicy::ALL {
            let _ = xmit_hash(p, &f);
        }
    }

    #[test]
    fn layer34_never_depends_on_macs(sport: u16, dport: u16, d5: u8, s5: u8) {
        let mut f = eth(0x0800, &ipv4(A, B, 6, 0, &l4(sport, dport, 20)));
        let h = xmit_hash(HashPolicy::Layer34, &f);
        f[5] = d5;
        f[11] = s5;
        prop_assert_eq!(xmit_hash(HashPolicy::Layer34, &f), h);
    }
}

#[test]
fn member_mod_equals_modulo() {
    assert_eq!(MemberMod::new(0), None);
    for n in [
        1usize,
        2,
        3,
        4,
        5,
        7,
        8,
        16,
        255,
        256,
        1000,
        65_535,
        1 << 20,
    ] {
        let m = MemberMod::new(n).unwrap();
        assert_eq!(m.members(), n);
        for h in [
            0u32,
            1,
            2,
            3,
            0x29a9_c0c2,
            u32::MAX,
            u32::MAX - 1,
            1 << 31,
            0xdead_beef,
        ] {
            assert_eq!(Some(m.index(h)), member_index(h, n), "{h} % {n}");
        }
    }
}

proptest! {
    #[test]
    fn member_mod_matches_modulo_everywhere(h: u32, n in 1usize..100_000) {
        prop_assert_eq!(Some(MemberMod::new(n).unwrap().index(h)), member_index(h, n));
    }
}
