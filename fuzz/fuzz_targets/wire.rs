//! Every wire view and Repr over arbitrary bytes, both as a whole Ethernet frame (following the
//! EtherType and protocol numbers) and as each header on its own: no panic, and a parsed Repr
//! emits without panicking into a buffer of its own `buffer_len`.
#![no_main]

use lagd_proto::wire::arp::{ArpPacket, ArpRepr};
use lagd_proto::wire::gre::{GrePacket, GreRepr};
use lagd_proto::wire::igmp::{GroupRecordRepr, IgmpPacket, IgmpRepr};
use lagd_proto::wire::ipv4::{Ipv4Packet, Ipv4Repr};
use lagd_proto::wire::ipv6::{Ipv6Packet, Ipv6Repr};
use lagd_proto::wire::l4::{IcmpPacket, IcmpRepr, SctpPacket, TcpPacket, TcpRepr, UdpPacket, UdpRepr};
use lagd_proto::wire::mld::{MldPacket, MldRepr};
use lagd_proto::wire::ndisc::{NdiscPacket, NdiscRepr};
use lagd_proto::wire::{EtherType, EthernetFrame};
use libfuzzer_sys::fuzz_target;

fn l4(proto: u8, b: &[u8]) {
    match proto {
        6 => {
            if let Ok(p) = TcpPacket::new_checked(b) {
                let _ = (p.src_port(), p.dst_port(), p.flags(), p.payload());
                if let Ok(r) = TcpRepr::parse(&p) {
                    let mut out = vec![0u8; r.buffer_len()];
                    r.emit(&mut TcpPacket::new_unchecked(&mut out[..]));
                }
            }
        }
        17 => {
            if let Ok(p) = UdpPacket::new_checked(b) {
                let _ = (p.src_port(), p.dst_port(), p.payload());
                if let Ok(r) = UdpRepr::parse(&p) {
                    let mut out = vec![0u8; r.buffer_len() + r.payload_len];
                    r.emit(&mut UdpPacket::new_unchecked(&mut out[..]));
                }
            }
        }
        132 => {
            if let Ok(p) = SctpPacket::new_checked(b) {
                let _ = (p.src_port(), p.dst_port(), p.verification_tag());
            }
        }
        1 | 58 => {
            if let Ok(p) = IcmpPacket::new_checked(b) {
                let _ = (p.msg_type(), p.code(), p.quoted());
                if let Ok(r) = IcmpRepr::parse(&p) {
                    let mut out = vec![0u8; r.buffer_len()];
                    r.emit(&mut IcmpPacket::new_unchecked(&mut out[..]));
                }
            }
        }
        2 => igmp(b),
        47 => {
            if let Ok(p) = GrePacket::new_checked(b) {
                let _ = (p.protocol_type(), p.header_len(), p.key(), p.sequence());
                if let Ok(r) = GreRepr::parse(&p) {
                    let mut out = vec![0u8; r.buffer_len()];
                    r.emit(&mut GrePacket::new_unchecked(&mut out[..]));
                }
            }
        }
        _ => {}
    }
    if proto == 58 {
        icmpv6(b);
    }
}

fn igmp(b: &[u8]) {
    if let Ok(p) = IgmpPacket::new_checked(b) {
        let _ = (p.group_addr(), p.query_v3(), p.query_source(0), p.verify_checksum());
        for r in p.records() {
            let _ = (r.source(0), GroupRecordRepr::parse(&r));
        }
        if let Ok(r) = IgmpRepr::parse(&p) {
            let mut out = vec![0u8; r.buffer_len()];
            r.emit(&mut IgmpPacket::new_unchecked(&mut out[..]));
        }
    }
}

/// MLD and neighbour discovery, inside ICMPv6.
fn icmpv6(b: &[u8]) {
    if let Ok(p) = MldPacket::new_checked(b) {
        let _ = (p.mcast_addr(), p.query_v2(), p.query_source(0));
        for r in p.records() {
            let _ = (r.source(0), GroupRecordRepr::parse(&r));
        }
        if let Ok(r) = MldRepr::parse(&p) {
            let mut out = vec![0u8; r.buffer_len()];
            r.emit(&mut MldPacket::new_unchecked(&mut out[..]));
        }
    }
    if let Ok(p) = NdiscPacket::new_checked(b) {
        let _ = (p.flags(), p.target_addr(), p.check_options());
        for o in p.options() {
            let _ = (o.option_type(), o.data(), o.ethernet_addr());
        }
        if let Ok(r) = NdiscRepr::parse(&p) {
            let mut out = vec![0u8; r.frame_len()];
            let a = p.target_addr();
            r.emit_frame(Default::default(), Default::default(), a, a, &mut out);
        }
    }
}

fn ipv4(b: &[u8]) {
    if let Ok(p) = Ipv4Packet::new_checked(b) {
        let _ = (p.src_addr(), p.dst_addr(), p.options(), p.verify_checksum());
        if let Ok(r) = Ipv4Repr::parse(&p) {
            let mut out = vec![0u8; r.buffer_len() + r.payload_len];
            r.emit(&mut Ipv4Packet::new_unchecked(&mut out[..]));
        }
        l4(p.next_header().into(), p.payload());
    }
}

fn ipv6(b: &[u8]) {
    if let Ok(p) = Ipv6Packet::new_checked(b) {
        let _ = (p.src_addr(), p.dst_addr(), p.flow_label());
        if let Ok(r) = Ipv6Repr::parse(&p) {
            let mut out = vec![0u8; r.buffer_len() + r.payload_len];
            r.emit(&mut Ipv6Packet::new_unchecked(&mut out[..]));
        }
        if let Ok(up) = p.upper_layer() {
            if !up.is_later_fragment() {
                if let Some(rest) = b.get(up.offset..) {
                    l4(up.next_header.into(), rest);
                }
            }
        }
    }
}

fn arp(b: &[u8]) {
    if let Ok(p) = ArpPacket::new_checked(b) {
        if let Ok(r) = ArpRepr::parse(&p) {
            let mut out = vec![0u8; r.frame_len()];
            r.emit_frame(&mut out);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    // As a frame.
    if let Ok(f) = EthernetFrame::new_checked(data) {
        if let Ok(w) = f.walk_tags::<4>() {
            let rest = &data[w.network_offset..];
            match w.ethertype {
                EtherType::Ipv4 => ipv4(rest),
                EtherType::Ipv6 => ipv6(rest),
                EtherType::Arp => arp(rest),
                _ => {}
            }
        }
    }
    // Each header on its own.
    ipv4(data);
    ipv6(data);
    arp(data);
    for proto in [1, 2, 6, 17, 47, 58, 132] {
        l4(proto, data);
    }
});
