#!/usr/bin/env python3
"""Independent reference model (test oracle) of the Linux bonding transmit hash.

This file models ``bond_xmit_hash()`` of drivers/net/bonding/bond_main.c (v6.17 era) for the six
transmit hash policies -- layer2, layer2+3, layer3+4, encap2+3, encap3+4 and vlan+srcmac -- from
the team's notes (shared/research/linux-bonding.md, section 2) and the kernel sources they
describe.  It was written without looking at lagd's own implementation, so that the vectors it
produces are an independent check of ``lagd_proto::hash::xmit_hash``.

It also models Open vSwitch 3.1's two bond hashes (``ovs-slb``: ``hash_mac()`` of the source MAC
and VLAN; ``ovs-tcp``: the RSS hash the userspace datapath gives a packet, which balance-tcp's
``lb-output-action`` masks with 0xff), written from OVS's C sources (lib/hash.h, lib/packets.h,
lib/flow.c ``miniflow_extract()`` / ``miniflow_hash_5tuple()``, lib/dp-packet.h
``dp_packet_update_rss_hash_ipv{4,6}_tcp_udp()``) and checked against a running ovs-vswitchd
(crates/lagd/tests/ovs_hash.rs does that on every CI run).

It is run by hand (never by CI) to regenerate the golden files:

    tools/hashref.py pcap2hex CAPTURE.pcap            # one hex frame per line
    tools/hashref.py golden FRAMES.txt                # "HEX # desc" lines -> golden lines
    tools/hashref.py refresh GOLDEN.txt               # recompute a golden file in place
    tools/hashref.py prefixes GOLDEN.txt > PREFIXES   # every frame cut at every length
    tools/hashref.py members --policy layer3+4 --members 4 FRAMES.hex
    tools/hashref.py hash layer3+4 HEX                # one frame, one policy
    tools/hashref.py check GOLDEN.txt                 # recompute a golden file, report diffs
    tools/hashref.py selftest                         # properties stated in the notes

The golden files in use:

    crates/lagd-proto/src/hash/testdata/real-frames.txt      (refresh)
    crates/lagd-proto/src/hash/testdata/prefixes.txt         (prefixes real-frames.txt)

Standard library only.

The frame model (how a frame given to lagd maps to the kernel's sk_buff at the bond's
``ndo_start_xmit``):

* A bond advertises hardware VLAN insertion for 802.1Q and 802.1ad, so the **outermost** tag of a
  frame (TPID 0x8100 or 0x88a8) is metadata, not data: it is removed from the bytes the hash
  functions see and its full 16-bit TCI becomes ``skb->vlan_tci``.
* ``skb->protocol`` is the EtherType found at offset 12 of the remaining bytes (the inner
  EtherType; a second, in-band tag therefore makes it 0x8100/0x88a8) and the network header
  starts right after that 14-byte MAC header.
* There is no socket, so ``skb->l4_hash`` is never set and encap3+4 never takes the
  "return skb->hash" shortcut.
* A TIPC keep-alive message, for which the kernel uses a *random* key, gets key 0 here.
* All "native" 32-bit loads are little-endian (x86-64 / arm64).
"""

from __future__ import annotations

import struct
import sys
from dataclasses import dataclass, field
from typing import Optional

KERNEL_POLICIES = ("layer2", "layer2+3", "layer3+4", "encap2+3", "encap3+4", "vlan+srcmac")
OVS_POLICIES = ("ovs-slb", "ovs-tcp")
POLICIES = KERNEL_POLICIES + OVS_POLICIES

# EtherTypes
ETH_P_IP = 0x0800
ETH_P_ARP = 0x0806
ETH_P_RARP = 0x8035
ETH_P_8021Q = 0x8100
ETH_P_8021AD = 0x88A8
ETH_P_IPV6 = 0x86DD
ETH_P_PPP_SES = 0x8864
ETH_P_MPLS_UC = 0x8847
ETH_P_MPLS_MC = 0x8848
ETH_P_TIPC = 0x88CA
ETH_P_FCOE = 0x8906
ETH_P_BATMAN = 0x4305
ETH_P_1588 = 0x88F7
ETH_P_HSR = 0x892F
ETH_P_PRP = 0x88FB
ETH_P_CFM = 0x8902
ETH_P_TEB = 0x6558
GRE_PROTO_PPP = 0x880B

# IP protocol numbers
IPPROTO_HOPOPTS = 0
IPPROTO_ICMP = 1
IPPROTO_IPIP = 4
IPPROTO_TCP = 6
IPPROTO_UDP = 17
IPPROTO_DCCP = 33
IPPROTO_IPV6 = 41
IPPROTO_ROUTING = 43
IPPROTO_FRAGMENT = 44
IPPROTO_GRE = 47
IPPROTO_ESP = 50
IPPROTO_AH = 51
IPPROTO_ICMPV6 = 58
IPPROTO_DSTOPTS = 60
IPPROTO_SCTP = 132
IPPROTO_UDPLITE = 136
IPPROTO_MPLS = 137

# GRE flag bits (first 16-bit word, host order after reading big-endian)
GRE_CSUM = 0x8000
GRE_ROUTING = 0x4000
GRE_KEY = 0x2000
GRE_SEQ = 0x1000
GRE_ACK = 0x0080
GRE_VERSION = 0x0007

MAX_FLOW_DISSECT_HDRS = 15
TIPC_KEEPALIVE_MSG_MASK = 0x0E080000
PPP_IP, PPP_IPV6, PPP_MPLS_UC, PPP_MPLS_MC = 0x21, 0x57, 0x281, 0x283

ICMP_TYPES_WITH_ID = (0, 8, 13, 14, 128, 129)   # echo reply/request, timestamp(+reply), v6 echo
ICMPV4_ERRORS = (3, 4, 5, 11, 12)               # unreach, source quench, redirect, time exc., param
ICMPV6_ERRORS = (1, 2, 3, 4)                    # unreach, too big, time exceeded, param problem

M32 = 0xFFFFFFFF


# --------------------------------------------------------------------------------------------
# Small helpers: bounded reads ("__skb_header_pointer" returns NULL past the end)
# --------------------------------------------------------------------------------------------

def have(data: bytes, off: int, n: int) -> bool:
    """True when ``n`` bytes starting at ``off`` are inside the packet."""
    return off >= 0 and off + n <= len(data)


def be16(data: bytes, off: int) -> int:
    return (data[off] << 8) | data[off + 1]


def le32(data: bytes, off: int) -> int:
    """A native (little-endian) 32-bit load, as the kernel's memcpy into a u32 does."""
    return int.from_bytes(data[off:off + 4], "little")


def ipv6_addr_hash(data: bytes, off: int) -> int:
    """ipv6_addr_hash(): XOR of the four native 32-bit words of the address."""
    return le32(data, off) ^ le32(data, off + 4) ^ le32(data, off + 8) ^ le32(data, off + 12)


def proto_ports_offset(ip_proto: int) -> int:
    """Where the 4-byte "ports" word sits in the transport header, or -1 for none."""
    if ip_proto in (IPPROTO_TCP, IPPROTO_UDP, IPPROTO_DCCP, IPPROTO_ESP, IPPROTO_SCTP,
                    IPPROTO_UDPLITE):
        return 0          # source/destination ports (ESP: the SPI)
    if ip_proto == IPPROTO_AH:
        return 4          # AH: the SPI
    return -1


def get_ports(data: bytes, thoff: int, ip_proto: int) -> int:
    """skb_flow_get_ports(): native load of the ports word, 0 if none or truncated."""
    poff = proto_ports_offset(ip_proto & 0xFF)
    if poff >= 0 and have(data, thoff + poff, 4):
        return le32(data, thoff + poff)
    return 0


# --------------------------------------------------------------------------------------------
# The sk_buff as the bond sees it
# --------------------------------------------------------------------------------------------

@dataclass
class Skb:
    data: bytes                 # frame bytes from the MAC header on, outer tag removed
    protocol: int               # skb->protocol
    nhoff: int                  # network header offset into data
    vlan_tci: Optional[int]     # accelerated tag TCI, None when there is no tag


def skb_from_frame(frame: bytes) -> Skb:
    """Apply lagd's model: outermost 802.1Q/802.1ad tag -> accelerated tag (metadata)."""
    tci = None
    data = bytes(frame)
    # Only a whole tag (TCI and the EtherType it encloses, 18 bytes: the kernel's untagging
    # needs VLAN_ETH_HLEN) is lifted; a shorter frame keeps its tag in band (type = TPID).
    if len(data) >= 18 and be16(data, 12) in (ETH_P_8021Q, ETH_P_8021AD):
        tci = be16(data, 14)
        data = data[:12] + data[16:]
    proto = be16(data, 12) if len(data) >= 14 else 0
    return Skb(data=data, protocol=proto, nhoff=14, vlan_tci=tci)


@dataclass
class FlowKeys:
    """The parts of struct flow_keys that the bonding hash reads."""
    addr_type: Optional[str] = None   # "v4", "v6", "tipc" or None (no addresses)
    src: int = 0                      # flow_get_u32_src(): v4 word, folded v6, or TIPC key
    dst: int = 0                      # flow_get_u32_dst(): v4 word, folded v6, 0 for TIPC
    ports: int = 0                    # native ports word
    icmp_type: int = 0
    icmp_code: int = 0
    icmp_id: int = 0
    trace: list = field(default_factory=list)   # human-readable notes (for --explain)

    def set_v4(self, data: bytes, iph: int) -> None:
        self.addr_type = "v4"
        self.src = le32(data, iph + 12)
        self.dst = le32(data, iph + 16)

    def set_v6(self, data: bytes, iph: int) -> None:
        self.addr_type = "v6"
        self.src = ipv6_addr_hash(data, iph + 8)
        self.dst = ipv6_addr_hash(data, iph + 24)

    def icmp_word(self) -> int:
        """The flow_dissector_key_icmp struct {u8 type; u8 code; u16 id} loaded natively."""
        return self.icmp_type | (self.icmp_code << 8) | (self.icmp_id << 16)


def get_icmp_tci(data: bytes, thoff: int, keys: FlowKeys) -> None:
    """skb_flow_get_icmp_tci(): type, code and (for echo/timestamp types) the identifier.

    Needs the whole 8-byte ICMP header; leaves the key untouched otherwise.  An identifier of 0
    is replaced by 1 so that 0 keeps meaning "no identifier".
    """
    if not have(data, thoff, 8):
        return
    keys.icmp_type = data[thoff]
    keys.icmp_code = data[thoff + 1]
    if keys.icmp_type in ICMP_TYPES_WITH_ID:
        ident = be16(data, thoff + 4)
        keys.icmp_id = ident if ident else 1
    else:
        keys.icmp_id = 0


# --------------------------------------------------------------------------------------------
# Building blocks of __bond_xmit_hash
# --------------------------------------------------------------------------------------------

def eth_hash(skb: Skb) -> int:
    """bond_eth_hash(): dst[5] ^ src[5] ^ ethertype (host order); 0 if < 14 bytes."""
    d = skb.data
    if len(d) < 14:
        return 0
    return d[5] ^ d[11] ^ be16(d, 12)


def vlan_srcmac_hash(skb: Skb) -> int:
    """bond_vlan_srcmac_hash(): accelerated TCI ^ src[0..3] ^ src[3..6]; 0 if < 14 bytes."""
    d = skb.data
    if len(d) < 14:
        return 0
    vendor = (d[6] << 16) | (d[7] << 8) | d[8]
    dev = (d[9] << 16) | (d[10] << 8) | d[11]
    tci = skb.vlan_tci if skb.vlan_tci is not None else 0
    return tci ^ vendor ^ dev


def ip_fold(h: int, keys: FlowKeys, shift: bool) -> int:
    """bond_ip_hash(): mix in the address words, fold, and drop bit 0 for the 3+4 policies."""
    h = (h ^ keys.dst ^ keys.src) & M32
    h ^= h >> 16
    h ^= h >> 8
    return h >> 1 if shift else h


# --------------------------------------------------------------------------------------------
# The bond's own parser (layer2+3, layer3+4): bond_flow_dissect() / bond_flow_ip()
# --------------------------------------------------------------------------------------------

def bond_flow_ip(skb: Skb, keys: FlowKeys, nhoff: int, ip_proto: int, l34: bool):
    """Parse one IPv4/IPv6 header at nhoff (family from skb->protocol only).

    Returns (ok, nhoff, ip_proto).  IPv4: IHL is *not* validated, and fragments (MF or offset,
    first fragment included) leave ip_proto unchanged (so no ports).  IPv6: the fixed header's
    Next Header only, no extension-header walk.
    """
    d = skb.data
    if skb.protocol == ETH_P_IP:
        if not have(d, nhoff, 20):
            keys.trace.append("bond: IPv4 header truncated")
            return False, nhoff, ip_proto
        keys.set_v4(d, nhoff)
        ihl = d[nhoff] & 0x0F
        frag = be16(d, nhoff + 6) & 0x3FFF          # MF | fragment offset
        proto = d[nhoff + 9]
        nhoff += ihl * 4
        if not frag:
            ip_proto = proto
        else:
            keys.trace.append("bond: IPv4 fragment, no L4")
    elif skb.protocol == ETH_P_IPV6:
        if not have(d, nhoff, 40):
            keys.trace.append("bond: IPv6 header truncated")
            return False, nhoff, ip_proto
        keys.set_v6(d, nhoff)
        ip_proto = d[nhoff + 6]
        nhoff += 40
    else:
        keys.trace.append("bond: skb->protocol 0x%04x is not IP" % skb.protocol)
        return False, nhoff, ip_proto
    if l34 and ip_proto >= 0:
        keys.ports = get_ports(d, nhoff, ip_proto)
    return True, nhoff, ip_proto


def bond_dissect(skb: Skb, l34: bool) -> Optional[FlowKeys]:
    """bond_flow_dissect() for layer2+3 / layer3+4.  None means "use the layer2 formula"."""
    keys = FlowKeys()
    ok, nhoff, ip_proto = bond_flow_ip(skb, keys, skb.nhoff, -1, l34)
    if not ok:
        return None
    if ip_proto in (IPPROTO_ICMP, IPPROTO_ICMPV6):
        # Read type/code/id.  For an ICMP error, skip the 8-byte ICMP header and re-parse the
        # quoted packet (same family as skb->protocol): its addresses (and, for l34, its ports)
        # replace the outer ones.  The key keeps the error's type/code with id 0.
        get_icmp_tci(skb.data, nhoff, keys)
        errs = ICMPV4_ERRORS if ip_proto == IPPROTO_ICMP else ICMPV6_ERRORS
        if keys.icmp_type not in errs:
            return keys
        keys.trace.append("bond: ICMP error type %d, re-parsing the quoted header" % keys.icmp_type)
        ok, nhoff, ip_proto = bond_flow_ip(skb, keys, nhoff + 8, ip_proto, l34)
        if not ok:
            return None
    return keys


# --------------------------------------------------------------------------------------------
# The generic flow dissector (encap2+3, encap3+4): __skb_flow_dissect() with the bonding key set
# (control, basic, IPv4/IPv6 addrs, TIPC, ports, ICMP, VLAN, flow label, GRE key) and flags 0.
# --------------------------------------------------------------------------------------------

def ppp_proto_is_valid(proto: int) -> bool:
    return (proto & 0x0101) == 0x0001


def flow_dissect(skb: Skb) -> Optional[FlowKeys]:
    """Returns the keys, or None when the dissector reports failure (-> layer2 formula)."""
    d = skb.data
    keys = FlowKeys()
    proto = skb.protocol
    nhoff = skb.nhoff
    num_hdrs = 0
    ip_proto = 0
    vlan_level = 0          # 0 = no VLAN seen yet, 1 = outer seen, 2 = inner (C-VLAN) seen
    is_fragment = False

    def allowed() -> bool:
        nonlocal num_hdrs
        num_hdrs += 1
        return num_hdrs <= MAX_FLOW_DISSECT_HDRS

    while True:  # ---- proto_again ------------------------------------------------------------
        ret = "continue"
        if proto == ETH_P_IP:
            if not have(d, nhoff, 20) or (d[nhoff] & 0x0F) < 5:
                keys.trace.append("dissect: IPv4 truncated or IHL < 5")
                return None
            iph = nhoff
            nhoff += (d[iph] & 0x0F) * 4
            ip_proto = d[iph + 9]
            keys.set_v4(d, iph)
            if be16(d, iph + 6) & 0x3FFF:
                # Any fragment (the PARSE_1ST_FRAG flag is not passed): stop, no ports.
                is_fragment = True
                keys.trace.append("dissect: IPv4 fragment, stop")
                ret = "good"
        elif proto == ETH_P_IPV6:
            if not have(d, nhoff, 40):
                keys.trace.append("dissect: IPv6 truncated")
                return None
            ip_proto = d[nhoff + 6]
            keys.set_v6(d, nhoff)
            nhoff += 40
        elif proto in (ETH_P_8021Q, ETH_P_8021AD):
            if vlan_level == 0 and skb.vlan_tci is not None:
                # Quirk: the first VLAN step with an accelerated tag present stands for that tag;
                # it consumes nothing and continues with skb->protocol.
                proto = skb.protocol
            else:
                if not have(d, nhoff, 4):
                    return None
                proto = be16(d, nhoff + 2)
                nhoff += 4
            if vlan_level < 2:
                vlan_level += 1
            ret = "proto_again"
        elif proto == ETH_P_PPP_SES:
            if not have(d, nhoff, 8):
                return None
            if d[nhoff] != 0x11 or d[nhoff + 1] != 0:     # ver 1, type 1, code 0
                return None
            ppp = be16(d, nhoff + 6)
            if ppp & 0x0100:                               # compressed protocol field
                ppp >>= 8
                nhoff += 7
            else:
                nhoff += 8
            if ppp == PPP_IP:
                proto, ret = ETH_P_IP, "proto_again"
            elif ppp == PPP_IPV6:
                proto, ret = ETH_P_IPV6, "proto_again"
            elif ppp == PPP_MPLS_UC:
                proto, ret = ETH_P_MPLS_UC, "proto_again"
            elif ppp == PPP_MPLS_MC:
                proto, ret = ETH_P_MPLS_MC, "proto_again"
            elif ppp_proto_is_valid(ppp):
                ret = "good"
            else:
                return None
        elif proto == ETH_P_TIPC:
            if not have(d, nhoff, 16):
                return None
            w0 = be16(d, nhoff) << 16 | be16(d, nhoff + 2)
            keys.addr_type = "tipc"
            if (w0 & TIPC_KEEPALIVE_MSG_MASK) == TIPC_KEEPALIVE_MSG_MASK:
                keys.src = 0        # kernel: random key; lagd's model: 0
            else:
                keys.src = le32(d, nhoff + 12)   # 4th word (source node), native load
            keys.dst = 0
            ret = "good"
        elif proto in (ETH_P_MPLS_UC, ETH_P_MPLS_MC):
            ret = "good"            # no MPLS keys requested: stop without reading anything
        elif proto == ETH_P_FCOE:
            if len(d) - nhoff < 38:
                return None
            nhoff += 38
            ret = "good"
        elif proto in (ETH_P_ARP, ETH_P_RARP):
            ret = "good"            # no ARP key requested: stop without reading anything
        elif proto == ETH_P_BATMAN:
            # __skb_flow_dissect_batadv(): struct batadv_unicast_packet (packet_type, version,
            # ttl, ttvn, dest[6] = 10 bytes) + the inner struct ethhdr (14 bytes); only
            # BATADV_COMPAT_VERSION 15 with packet type BATADV_UNICAST (0x40) is entered.
            if not have(d, nhoff, 24) or d[nhoff + 1] != 15 or d[nhoff] != 0x40:
                return None
            proto = be16(d, nhoff + 22)
            nhoff += 24
            ret = "proto_again"
        elif proto == ETH_P_1588:
            if not have(d, nhoff, 34):
                return None
            nhoff += 34
            ret = "good"
        elif proto in (ETH_P_HSR, ETH_P_PRP):
            if not have(d, nhoff, 6):
                return None
            proto = be16(d, nhoff + 4)
            nhoff += 6
            ret = "proto_again"
        elif proto == ETH_P_CFM:
            ret = "good"            # no CFM key requested
        else:
            keys.trace.append("dissect: unknown ethertype 0x%04x" % proto)
            return None

        if ret == "good":
            return keys
        if ret == "proto_again":
            if allowed():
                continue
            return keys

        # ---- ip_proto_again --------------------------------------------------------------
        while True:
            ret = "continue"
            if ip_proto == IPPROTO_GRE:
                ret, proto, nhoff = dissect_gre(d, nhoff, keys)
            elif ip_proto in (IPPROTO_HOPOPTS, IPPROTO_ROUTING, IPPROTO_DSTOPTS):
                if proto == ETH_P_IPV6:
                    if not have(d, nhoff, 2):
                        ret = "bad"
                    else:
                        ip_proto = d[nhoff]
                        nhoff += (d[nhoff + 1] + 1) * 8
                        ret = "ipproto_again"
            elif ip_proto == IPPROTO_FRAGMENT:
                if proto == ETH_P_IPV6:
                    if not have(d, nhoff, 8):
                        ret = "bad"
                    else:
                        is_fragment = True      # first fragment included: stop, no ports
                        ip_proto = d[nhoff]
                        nhoff += 8
                        ret = "good"
            elif ip_proto == IPPROTO_IPIP:
                proto, ret = ETH_P_IP, "proto_again"
            elif ip_proto == IPPROTO_IPV6:
                proto, ret = ETH_P_IPV6, "proto_again"
            elif ip_proto == IPPROTO_MPLS:
                proto, ret = ETH_P_MPLS_UC, "proto_again"
            elif ip_proto in (IPPROTO_ICMP, IPPROTO_ICMPV6):
                get_icmp_tci(d, nhoff, keys)     # no error re-parse here

            # The ports key is (re)computed after every L4 step unless a fragment was seen.
            if not is_fragment:
                keys.ports = get_ports(d, nhoff, ip_proto)

            if ret == "proto_again":
                if allowed():
                    break                 # back to proto_again
                return keys
            if ret == "ipproto_again":
                if allowed():
                    continue
                return keys
            if ret == "bad":
                return None
            return keys                   # "good" or "continue"


def dissect_gre(d: bytes, nhoff: int, keys: FlowKeys):
    """__skb_flow_dissect_gre(): returns (ret, proto, nhoff)."""
    if not have(d, nhoff, 4):
        return "bad", 0, nhoff
    flags = be16(d, nhoff)
    gproto = be16(d, nhoff + 2)
    if flags & GRE_ROUTING:
        keys.trace.append("dissect: GRE with routing, stop")
        return "good", gproto, nhoff
    ver = flags & GRE_VERSION
    if ver > 1:
        return "good", gproto, nhoff
    if ver == 1 and not (gproto == GRE_PROTO_PPP and flags & GRE_KEY):
        return "good", gproto, nhoff
    off = 4
    if flags & GRE_CSUM:
        off += 4
    if flags & GRE_KEY:
        if not have(d, nhoff + off, 4):
            return "bad", gproto, nhoff
        off += 4
    if flags & GRE_SEQ:
        off += 4
    proto = gproto
    if ver == 0:
        if proto == ETH_P_TEB:
            if not have(d, nhoff + off, 14):
                return "bad", proto, nhoff
            proto = be16(d, nhoff + off + 12)
            off += 14
    else:
        if flags & GRE_ACK:
            off += 4
        if not have(d, nhoff + off, 4):
            return "bad", proto, nhoff
        ppp = be16(d, nhoff + off + 2)      # PPP_PROTOCOL(): bytes 2-3 of the 4-byte header
        if ppp == PPP_IP:
            proto = ETH_P_IP
        elif ppp == PPP_IPV6:
            proto = ETH_P_IPV6
        off += 4
    return "proto_again", proto, nhoff + off


# --------------------------------------------------------------------------------------------
# bond_xmit_hash
# --------------------------------------------------------------------------------------------

def xmit_hash_skb(policy: str, skb: Skb) -> int:
    if policy == "vlan+srcmac":
        return vlan_srcmac_hash(skb)
    if policy == "layer2":
        return eth_hash(skb)
    if policy in ("layer2+3", "layer3+4"):
        keys = bond_dissect(skb, policy == "layer3+4")
    elif policy in ("encap2+3", "encap3+4"):
        keys = flow_dissect(skb)
    else:
        raise ValueError("unknown policy %r" % policy)
    if keys is None:
        return eth_hash(skb)
    if policy in ("layer2+3", "encap2+3"):
        return ip_fold(eth_hash(skb), keys, shift=False)
    word = keys.icmp_word() if keys.icmp_id else keys.ports
    return ip_fold(word, keys, shift=True)


def xmit_hash(policy: str, frame: bytes) -> int:
    if policy == "ovs-slb":
        return ovs_slb(frame)
    if policy == "ovs-tcp":
        return ovs_tcp(frame)
    return xmit_hash_skb(policy, skb_from_frame(frame)) & M32


def all_hashes(frame: bytes) -> dict:
    return {p: xmit_hash(p, frame) for p in POLICIES}


# --------------------------------------------------------------------------------------------
# Open vSwitch 3.1 (generic x86-64 build: the portable murmur3 steps of lib/hash.h, no CRC32)
# --------------------------------------------------------------------------------------------

def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & M32


def ovs_hash_add(h: int, data: int) -> int:
    """hash_add() / mhash_add(): one MurmurHash3 block step."""
    data = (data * 0xCC9E2D51) & M32
    data = _rotl(data, 15)
    data = (data * 0x1B873593) & M32
    h ^= data
    h = _rotl(h, 13)
    return (h * 5 + 0xE6546B64) & M32


def ovs_hash_finish(h: int, final: int) -> int:
    """hash_finish(): MurmurHash3's finaliser after xoring in ``final``."""
    h ^= final
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & M32
    return h ^ (h >> 16)


def ovs_hash_mac(mac: bytes, vlan: int, basis: int = 0) -> int:
    """hash_mac(): hash_uint64_basis(vlan << 48 | mac, basis), the 64-bit value low word first."""
    x = (vlan & 0xFFFF) << 48 | int.from_bytes(mac, "big")
    h = ovs_hash_add(ovs_hash_add(basis, x & M32), x >> 32)
    return ovs_hash_finish(h, 8)


def ovs_slb(frame: bytes) -> int:
    """balance-slb: the source MAC and the VID of the outer tag (0 untagged)."""
    if len(frame) < 14:
        return ovs_hash_mac(bytes(6), 0)
    vid = 0
    if len(frame) >= 18 and be16(frame, 12) in (ETH_P_8021Q, ETH_P_8021AD):
        vid = be16(frame, 14) & 0x0FFF
    return ovs_hash_mac(frame[6:12], vid)


@dataclass
class OvsFlow:
    """The fields of OVS's struct flow that the 5-tuple hashes read (unset fields read 0)."""
    dl_type: Optional[int] = None     # None: shorter than an Ethernet header
    nw: tuple = (0, 0)                # nw_src, nw_dst as native loads (IPv4 and ARP)
    ipv6: tuple = (0,) * 8            # ipv6_src, ipv6_dst as eight native 32-bit words
    nw_proto: int = 0
    ports: int = 0                    # tp_src, tp_dst as one native load
    rss_proto: Optional[int] = None   # set when miniflow_extract() computed the RSS hash


OVS_VLAN_LIMIT = 1          # other_config:vlan-limit, default 1


def ovs_miniflow_extract(d: bytes) -> OvsFlow:
    """miniflow_extract() (lib/flow.c, OVS 3.1) reduced to the fields the hashes read."""
    fl = OvsFlow()
    size = len(d)
    if size < 14:
        return fl
    off = 12
    n = 0
    # parse_vlan(): at most vlan-limit tags, each needing 6 bytes (tag + next type) left.
    while n < OVS_VLAN_LIMIT and be16(d, off) in (ETH_P_8021Q, ETH_P_8021AD) and size - off >= 6:
        off += 4
        n += 1
    # parse_ethertype(): a value below 0x600 is an 802.3 length; only LLC/SNAP with OUI 0 and a
    # type >= 0x600 yields an EtherType, anything else is FLOW_DL_TYPE_NONE (0x5ff).
    dl_type = be16(d, off)
    off += 2
    if dl_type < 0x600:
        if have(d, off, 8) and d[off:off + 6] == b"\xaa\xaa\x03\x00\x00\x00" \
                and be16(d, off + 6) >= 0x600:
            dl_type = be16(d, off + 6)
            off += 8
        else:
            dl_type = 0x5FF
    fl.dl_type = dl_type
    if dl_type == ETH_P_IP:
        # ipv4_sanity_check(); then the packet is trimmed to the total length.
        if size - off < 20:
            return fl
        ihl = (d[off] & 0x0F) * 4
        if ihl < 20 or size - off < ihl:
            return fl
        tot = be16(d, off + 2)
        if tot > size - off or ihl > tot:
            return fl
        end = off + tot
        fl.nw = (le32(d, off + 12), le32(d, off + 16))
        fl.nw_proto = d[off + 9]
        later = (be16(d, off + 6) & 0x1FFF) != 0
        nxt = fl.nw_proto
        l4 = off + ihl
    elif dl_type == ETH_P_IPV6:
        # ipv6_sanity_check(); then the packet is trimmed to the payload length.
        if size - off < 40:
            return fl
        plen = be16(d, off + 4)
        if plen + 40 > size - off:
            return fl
        fl.ipv6 = tuple(le32(d, off + 8 + 4 * i) for i in range(8))
        nxt = d[off + 6]
        end = off + 40 + plen
        l4 = off + 40
        proto = nxt
        later = False
        # parse_ipv6_ext_hdrs__(): a failure leaves nw_proto unset (0).
        while proto in (IPPROTO_HOPOPTS, IPPROTO_ROUTING, IPPROTO_DSTOPTS, IPPROTO_AH,
                        IPPROTO_FRAGMENT):
            if end - l4 < 8:
                return fl
            if proto == IPPROTO_FRAGMENT:
                proto = d[l4]
                offlg = be16(d, l4 + 2)
                l4 += 8
                if offlg & 0xFFF8:
                    proto = IPPROTO_FRAGMENT      # a later fragment: nw_proto 44, no L4
                    later = True
                    break
                continue
            hlen = (d[l4 + 1] + 2) * 4 if proto == IPPROTO_AH else (d[l4 + 1] + 1) * 8
            proto = d[l4]
            if end - l4 < hlen:
                return fl
            l4 += hlen
        fl.nw_proto = proto
    elif dl_type == ETH_P_ARP:
        if not have(d, off, 28):
            return fl
        if be16(d, off) != 1 or be16(d, off + 2) != ETH_P_IP or d[off + 4] != 6 or d[off + 5] != 4:
            return fl
        fl.nw = (le32(d, off + 14), le32(d, off + 24))
        op = be16(d, off + 6)
        if op <= 0xFF:
            fl.nw_proto = op
        return fl
    else:
        return fl
    if later:
        return fl
    left = end - l4
    p = fl.nw_proto
    if p == IPPROTO_TCP:
        # The TCP data offset must cover the fixed header and fit.
        ok = left >= 20 and 20 <= (d[l4 + 12] >> 4) * 4 <= left
    elif p in (IPPROTO_UDP, IPPROTO_ICMP, IPPROTO_ICMPV6):
        ok = left >= 8
    elif p == IPPROTO_SCTP:
        ok = left >= 12
    else:
        ok = False
    if not ok:
        return fl
    if p in (IPPROTO_ICMP, IPPROTO_ICMPV6):
        fl.ports = d[l4] << 8 | d[l4 + 1] << 24     # htons(type), htons(code) in memory
    else:
        fl.ports = le32(d, l4)
    if p in (IPPROTO_TCP, IPPROTO_UDP):
        # dp_packet_update_rss_hash_ipv4/ipv6_tcp_udp(): addresses, the protocol byte of the
        # IP header itself (for IPv6 the fixed header's next header) and the ports.
        fl.rss_proto = nxt
    return fl


def ovs_tcp(frame: bytes) -> int:
    """balance-tcp: the packet's RSS hash in OVS's userspace datapath."""
    fl = ovs_miniflow_extract(frame)
    h = 0
    if fl.dl_type == ETH_P_IPV6:
        for w in fl.ipv6:
            h = ovs_hash_add(h, w)
    elif fl.dl_type in (ETH_P_IP, ETH_P_ARP):
        h = ovs_hash_add(ovs_hash_add(h, fl.nw[0]), fl.nw[1])
    else:
        return ovs_hash_finish(h, 42)
    if fl.rss_proto is not None:
        h = ovs_hash_add(ovs_hash_add(h, fl.rss_proto), fl.ports)
        return ovs_hash_finish(h, 42)
    # miniflow_hash_5tuple()
    h = ovs_hash_add(h, fl.nw_proto)
    if fl.nw_proto in (IPPROTO_TCP, IPPROTO_UDP, IPPROTO_SCTP, IPPROTO_ICMP, IPPROTO_ICMPV6):
        h = ovs_hash_add(h, fl.ports)
    return ovs_hash_finish(h, 42)


def ovs_hash_int(x: int, basis: int = 0) -> int:
    """hash_int(): what the datapath's hash action makes of an RSS hash (dp_hash)."""
    return ovs_hash_finish(ovs_hash_add(ovs_hash_add(x, 0), basis), 8)


# --------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------

def read_pcap(path: str) -> list:
    """Minimal classic-pcap reader (Ethernet link type), returns the frames as bytes."""
    with open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack("<I", data[:4])[0]
    if magic in (0xA1B2C3D4, 0xA1B23C4D):
        end = "<"
    elif magic in (0xD4C3B2A1, 0x4D3CB2A1):
        end = ">"
    else:
        raise SystemExit("%s: not a classic pcap file" % path)
    linktype = struct.unpack(end + "I", data[20:24])[0]
    if linktype != 1:
        raise SystemExit("%s: link type %d is not Ethernet" % (path, linktype))
    off, frames = 24, []
    while off + 16 <= len(data):
        incl = struct.unpack(end + "I", data[off + 8:off + 12])[0]
        frames.append(data[off + 16:off + 16 + incl])
        off += 16 + incl
    return frames


def parse_frame_lines(lines):
    """Yield (hex, comment) from lines of the form 'HEX [anything] [# comment]'."""
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        body, _, comment = line.partition("#")
        fields = body.split()
        yield fields[0], comment.strip()


def golden_line(hexstr: str, comment: str) -> str:
    h = all_hashes(bytes.fromhex(hexstr))
    parts = " ".join("%s=0x%08x" % (p, h[p]) for p in POLICIES)
    return "%s %s%s" % (hexstr, parts, ("  # " + comment) if comment else "")


def cmd_golden(args):
    src = open(args[0]) if args else sys.stdin
    for hexstr, comment in parse_frame_lines(src):
        print(golden_line(hexstr.lower(), comment))


def cmd_refresh(args):
    """Recomputes every vector line of a golden file in place, comments and blank lines kept."""
    path = args[0]
    out = []
    for raw in open(path):
        line = raw.rstrip("\n")
        if not line.strip() or line.lstrip().startswith("#"):
            out.append(line)
            continue
        body, _, comment = line.partition("#")
        out.append(golden_line(body.split()[0].lower(), comment.strip()))
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def cmd_prefixes(args):
    """Every vector of a golden file cut at every length 0..len, for every policy.

    One line per (frame, policy): "LINE LENGTH POLICY FROM:HASH ...", where LINE is the frame's
    line in the golden file, LENGTH its full length, and each FROM:HASH says that the prefixes
    of FROM bytes and more (up to the next FROM) hash to HASH.
    """
    path = args[0]
    print("# Every frame of %s cut at every length, hashed by tools/hashref.py." % path)
    print("# Regenerate: tools/hashref.py prefixes %s > THIS_FILE" % path)
    print("# LINE LENGTH POLICY FROM:HASH...  (prefixes of FROM bytes up to the next FROM hash to HASH)")
    for n, raw in enumerate(open(path), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        frame = bytes.fromhex(line.partition("#")[0].split()[0])
        for pol in POLICIES:
            runs = []
            last = None
            for cut in range(len(frame) + 1):
                h = xmit_hash(pol, frame[:cut])
                if h != last:
                    runs.append("%d:0x%08x" % (cut, h))
                    last = h
            print("%d %d %s %s" % (n, len(frame), pol, " ".join(runs)))


def cmd_check(args):
    bad = 0
    n = 0
    for raw in open(args[0]):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        body, _, comment = line.partition("#")
        fields = body.split()
        frame = bytes.fromhex(fields[0])
        n += 1
        for kv in fields[1:]:
            pol, _, val = kv.partition("=")
            got = xmit_hash(pol, frame)
            if got != int(val, 16):
                bad += 1
                print("MISMATCH %-11s model=0x%08x file=%s  # %s" % (pol, got, val, comment.strip()))
    print("%d frames, %d mismatches" % (n, bad))
    return 1 if bad else 0


def cmd_members(args):
    policy, members, files = "layer3+4", 4, []
    it = iter(args)
    for a in it:
        if a == "--policy":
            policy = next(it)
        elif a == "--members":
            members = int(next(it))
        else:
            files.append(a)
    src = open(files[0]) if files else sys.stdin
    for hexstr, _ in parse_frame_lines(src):
        h = xmit_hash(policy, bytes.fromhex(hexstr))
        print("0x%08x %d" % (h, h % members))


def cmd_pcap2hex(args):
    for path in args:
        for fr in read_pcap(path):
            print(fr.hex())


def cmd_hash(args):
    policy, hexstr = args[0], args[1]
    skb = skb_from_frame(bytes.fromhex(hexstr))
    print("0x%08x" % (xmit_hash_skb(policy, skb) & M32))
    if policy in ("layer2+3", "layer3+4"):
        keys = bond_dissect(skb, policy == "layer3+4")
    elif policy.startswith("encap"):
        keys = flow_dissect(skb)
    else:
        keys = None
    if keys is not None:
        print("  addr=%s src=0x%08x dst=0x%08x ports=0x%08x icmp=0x%08x" % (
            keys.addr_type, keys.src, keys.dst, keys.ports, keys.icmp_word()))
        for t in keys.trace:
            print("  " + t)


def cmd_selftest(_args):
    """Properties stated in the notes (section 2.5 / 2.7), as a sanity check of the model."""
    mac = bytes.fromhex("02000000000102000000000b")
    arp = mac + bytes.fromhex("0806") + bytes(28)
    e = eth_hash(skb_from_frame(arp))
    assert xmit_hash("layer2", arp) == e
    assert xmit_hash("layer2+3", arp) == e and xmit_hash("layer3+4", arp) == e
    assert xmit_hash("encap3+4", arp) == 0
    f = e ^ (e >> 16)
    assert xmit_hash("encap2+3", arp) == f ^ (f >> 8)
    mpls = mac + bytes.fromhex("8847") + bytes.fromhex("0001013f") + bytes(20)
    assert xmit_hash("encap3+4", mpls) == 0
    # vlan+srcmac uses the whole TCI (priority bits included)
    ip = bytes.fromhex("4500001c0000400040110000c0a80001c0a80002") + bytes(8)
    t0 = mac + bytes.fromhex("81000064") + bytes.fromhex("0800") + ip
    t5 = mac + bytes.fromhex("8100a064") + bytes.fromhex("0800") + ip
    assert xmit_hash("vlan+srcmac", t0) ^ xmit_hash("vlan+srcmac", t5) == 0xA000
    # an accelerated tag does not change layer2/2+3/3+4
    untagged = mac + bytes.fromhex("0800") + ip
    for p in ("layer2", "layer2+3", "layer3+4", "encap2+3", "encap3+4"):
        assert xmit_hash(p, t0) == xmit_hash(p, untagged), p
    # OVS: hash_add/hash_finish are MurmurHash3_x86_32's block step and finaliser (the
    # published vector for the key 0x87654321 with seed 0), and the 5-tuple hash ignores MACs.
    assert ovs_hash_finish(ovs_hash_add(0, 0x87654321), 4) == 0xF55B516B
    other_macs = bytes.fromhex("0a000000000b0a000000000c") + t0[12:]
    assert ovs_tcp(t0) == ovs_tcp(other_macs) and ovs_slb(t0) != ovs_slb(other_macs)
    print("selftest ok")


def main(argv):
    cmds = {"golden": cmd_golden, "check": cmd_check, "members": cmd_members,
            "refresh": cmd_refresh, "prefixes": cmd_prefixes,
            "pcap2hex": cmd_pcap2hex, "hash": cmd_hash, "selftest": cmd_selftest}
    if len(argv) < 2 or argv[1] not in cmds:
        print(__doc__)
        return 2
    return cmds[argv[1]](argv[2:]) or 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
