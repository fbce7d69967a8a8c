// SPDX-License-Identifier: MIT OR Apache-2.0
//
// lagd's kernel fast path: two tcx programs that forward data frames the way lagd's `Bond`
// decided, read from maps the daemon keeps in step with it. No decision is made here that the
// table does not spell out; the hash is the kernel bonding driver's, bit-exact with
// `lagd_proto::hash` (tested frame by frame through BPF_PROG_TEST_RUN).
//
//   lagd_tap_egress      on the bond's TAP, egress: a frame from the host goes to the member the
//                        table names (modulo, buckets, active, balance-rr's turn; stripe's
//                        slots, TCP's in turn, every other frame's by its flow; balance-tlb
//                        and balance-alb: the balanced frames by modulo or buckets, the rest
//                        on the active member, with the member's MAC as source off the active
//                        member) or a
//                        copy to every usable member (broadcast), or to lagd (TC_ACT_OK: the
//                        TAP's reader) for what only lagd handles.
//   lagd_member_ingress  on each member, ingress: a data frame the member may deliver goes to
//                        the TAP's ingress (the host stack), one it may not is dropped, slow
//                        protocols pass to lagd's own socket. Stripe: a TCP segment that is
//                        next in its flow's sequence goes to the TAP, one that overtook another
//                        goes round its member's queue until that one passed, and a flow with
//                        a hole that lasts goes to lagd, which puts it back in order (see
//                        lagd_stripe_rx); UDP, ICMP and every other frame that is not TCP
//                        came on its flow's one member and goes to the TAP.
//   lagd_member_ingress_no_cas
//                        the same without stripe's receiver, for kernels before 5.12: the
//                        receiver needs compare-and-swap (BPF atomics), which 5.10's verifier
//                        refuses ("BPF_STX uses reserved fields"). lagd-sys loads it where
//                        the kernel refuses lagd_member_ingress; it hands stripe's TCP to
//                        lagd, which orders the flows itself. (Not a tail call into an
//                        optional receiver: that panicked Debian's 6.12 kernel, interpreter
//                        only, in a test run.)
//
// Built with a pinned clang (bpf/build.py) into the instructions lagd-sys loads; no BTF, no
// libbpf: the maps are created by lagd-sys and their descriptors patched into the ld_imm64
// instructions the relocations name.
//
// What the programs share with lagd (the structures in the maps, stripe's receive states, the
// table's constants and rule and policy numbers) is defined in lagd_shared.h, from which
// build.py also generates lagd-sys's Rust types (crates/lagd-sys/src/fastpath/abi.rs).
//
// No loops: every loop has a constant bound and `#pragma unroll`, and build.py refuses a build
// whose instructions still hold a cycle. Bounded loops are verifiable since Linux 5.3, but the
// control-flow check of 5.10 and 6.1 refuses a loop that clang closes with a fall-through
// instead of a jump ("back-edge from insn X to Y"), before it simulates anything; loop-free
// programs load on every kernel from 5.10 (checked in user-mode Linux: tools/uml.py).

#include <linux/bpf.h>
#include <linux/pkt_cls.h>

#include "lagd_shared.h"

#define SEC(name) __attribute__((section(name), used))
#define INLINE static inline __attribute__((always_inline))

// Helpers, by number (enum bpf_func_id).
static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)BPF_FUNC_map_lookup_elem;
static __u64 (*bpf_ktime_get_ns)(void) = (void *)BPF_FUNC_ktime_get_ns;
// CLOCK_MONOTONIC as of the last tick: no clock source read, which on a VM can cost as much as
// the rest of a frame's checks. For the heartbeat, judged in seconds, where a tick (1-10 ms)
// does not matter (a bucket's idle gap, 50 ms, and the rest keep the exact clock). Linux 5.11
// has it; on 5.10 lagd's loader makes
// each call one to bpf_ktime_get_ns (lagd_sys::fastpath::clock), the same clock, read exactly.
static __u64 (*bpf_ktime_get_coarse_ns)(void) = (void *)BPF_FUNC_ktime_get_coarse_ns;
static long (*bpf_redirect)(__u32 ifindex, __u64 flags) = (void *)BPF_FUNC_redirect;
static long (*bpf_clone_redirect)(void *skb, __u32 ifindex, __u64 flags) =
    (void *)BPF_FUNC_clone_redirect;
static long (*bpf_skb_load_bytes)(const void *skb, __u32 off, void *to, __u32 len) =
    (void *)BPF_FUNC_skb_load_bytes;
static long (*bpf_skb_change_type)(void *skb, __u32 type) = (void *)BPF_FUNC_skb_change_type;
static __u32 (*bpf_get_prandom_u32)(void) = (void *)BPF_FUNC_get_prandom_u32;
static long (*bpf_skb_store_bytes)(void *skb, __u32 off, const void *from, __u32 len,
                                   __u64 flags) = (void *)BPF_FUNC_skb_store_bytes;

// IPv6 extension headers the balance-tcp hash walks before giving the frame to lagd.
#define MAX_EXT_HEADERS 24

// Slow-protocol frames from addresses other than a member's confirmed LACP partner reach
// lagd's socket at most this often per member and CPU (ten times what lagd itself admits,
// lagd_proto::lacp::limit::OTHER_RATE), in bursts of SLOW_BURST; the rest are dropped here,
// before any socket: a flood costs the tcx program and nothing more. The partner's own frames
// always pass (lagd's per-source buckets limit them).
#define SLOW_INTERVAL_NS 5000000ULL // 200 per second
#define SLOW_BURST 50

// Stripe's receive side (struct stripe_rx in lagd_shared.h): how long a hole may wait here
// (STRIPE_HOLD_NS, lagd_shared.h).
//
// Most holes are not holes: a member's frames are received on the CPU that queued them (veth,
// or a NIC's queues on their interrupts' CPUs), so segments the sender put on two CPUs, or on
// two members, race each other, and the one behind is in another CPU's queue until that CPU
// runs its receive work. A segment ahead of `next` of a flow that delivered within
// STRIPE_HOLD_NS therefore goes round again: to the end of this CPU's receive queue, through
// its member's ingress, where the program sees it once more after what was queued meanwhile
// (`held` counts the rounds). Only a flow that delivered nothing for that long (a segment
// lost, or a member slow or silent) goes to lagd, whose resequencer holds, times out and
// detects losses. The bound covers a CPU busy with other work for a while (the sending or the
// receiving application, on 2 CPUs): at 30 us lagd took 7.6 % of one unshaped stream's
// segments and gave up on 274 holes in 3 runs of 8 s, at 100 us 0.5 % and 39, with about one
// round per segment either way (bench/stripe.md). It stays short of links' skew (half a
// millisecond for a 64 KB frame at 1 Gbit/s), which is lagd's to absorb: over shaped links
// the longer bound costs more rounds (a round is half a microsecond of CPU) but no more CPU
// time that shows.

// Map definitions: what build.py records for lagd-sys, which creates the maps itself.
struct map_def {
    __u32 type;
    __u32 key_size;
    __u32 value_size;
    __u32 max_entries;
    __u32 flags;
};

struct map_def lagd_tables SEC("maps") = {
    .type = BPF_MAP_TYPE_ARRAY_OF_MAPS,
    .key_size = 4,
    .value_size = 4,
    .max_entries = 1,
};
struct map_def lagd_ports SEC("maps") = {
    .type = BPF_MAP_TYPE_PERCPU_ARRAY,
    .key_size = 4,
    .value_size = sizeof(struct port_counters),
    .max_entries = MAX_MEMBERS + 1, // the last: frames no member could take
};
struct map_def lagd_buckets SEC("maps") = {
    .type = BPF_MAP_TYPE_PERCPU_ARRAY,
    .key_size = 4,
    .value_size = sizeof(struct bucket_load),
    .max_entries = 256,
};
// This CPU's count for the TAP program's turns: stripe's bytes sent through its slots, or
// balance-rr's frames (a bond has one mode, so one count).
struct map_def lagd_stripe_tx SEC("maps") = {
    .type = BPF_MAP_TYPE_PERCPU_ARRAY,
    .key_size = 4,
    .value_size = 8,
    .max_entries = 1,
};
struct map_def lagd_stripe_rx SEC("maps") = {
    .type = BPF_MAP_TYPE_ARRAY,
    .key_size = 4,
    .value_size = sizeof(struct stripe_rx),
    .max_entries = STRIPE_RX_SLOTS,
    .flags = BPF_F_MMAPABLE,
};

// lagd's heartbeat and the frames dropped without it (enum alive_key).
struct map_def lagd_alive SEC("maps") = {
    .type = BPF_MAP_TYPE_ARRAY,
    .key_size = 4,
    .value_size = 8,
    .max_entries = ALIVE_ENTRIES,
};

// broadcast_dedup (FLAG_DEDUP): the frames members delivered lately, one slot per sum (enum
// dedup), direct-mapped: no locks and no allocation on the way of a frame.
struct dedup_slot {
    __u64 sum;    // the frame's sum
    __u64 at;     // when its first copy arrived (ns)
    __u32 copies; // copies arrived since, that one included (0: the slot is empty)
    __u32 pad;
};
struct map_def lagd_dedup SEC("maps") = {
    .type = BPF_MAP_TYPE_ARRAY,
    .key_size = 4,
    .value_size = sizeof(struct dedup_slot),
    .max_entries = DEDUP_SLOTS,
};
#define DEDUP_MUL 0x9e3779b97f4a7c15ULL // the sums' multiplier (enum dedup)

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define ETH_P_IP 0x0800
#define ETH_P_ARP 0x0806
#define ETH_P_8021Q 0x8100
#define ETH_P_8021AD 0x88a8
#define ETH_P_IPV6 0x86dd
#define ETH_P_SLOW 0x8809
#define ETH_P_STRIPE 0x88b5 // lagd_proto::stripe::header::ETHERTYPE

// Keeps the compiler from dropping a mask the verifier needs (it cannot bound `a % b` itself).
#define BOUND(x, mask) ({ __u32 _v = (x); asm volatile("" : "+r"(_v)); _v & (mask); })

INLINE __u16 be16(const __u8 *p) { return (__u16)p[0] << 8 | p[1]; }

INLINE __u32 be32(const __u8 *p) {
    return (__u32)p[0] << 24 | (__u32)p[1] << 16 | (__u32)p[2] << 8 | p[3];
}

INLINE __u32 le32(const __u8 *p) {
    return (__u32)p[0] | (__u32)p[1] << 8 | (__u32)p[2] << 16 | (__u32)p[3] << 24;
}

INLINE struct table *current_table(void) {
    __u32 zero = 0;
    void *inner = bpf_map_lookup_elem(&lagd_tables, &zero);
    if (!inner)
        return 0;
    return bpf_map_lookup_elem(inner, &zero);
}

// Whether lagd's heartbeat deadline (ALIVE_UNTIL) lies less than `margin_ns` ahead, or has
// passed; never before lagd set one. One array lookup and a compare.
INLINE int deadline_within(__u64 margin_ns) {
    __u32 key = ALIVE_UNTIL;
    __u64 *until = bpf_map_lookup_elem(&lagd_alive, &key);
    return until && bpf_ktime_get_coarse_ns() + margin_ns > *until;
}

// Whether lagd missed its heartbeat's deadline: it died and no lagd took the programs over
// within the bound lagd chose. The frame is then dropped and counted under `dropped`, so the
// host and the partner see no delivery instead of a table nobody keeps. The count is atomic
// (no fetch, which 5.10 accepts) and only taken once orphaned.
INLINE int orphaned(__u32 dropped) {
    if (!deadline_within(0))
        return 0;
    __u64 *count = bpf_map_lookup_elem(&lagd_alive, &dropped);
    if (count)
        __sync_fetch_and_add(count, 1);
    return 1;
}

// Whether lagd has not beaten for HEARTBEAT_AWAY_MS (lagd_shared.h): the deadline is less than
// the rest of the bound away. Asked only for the frames lagd handles while it runs.
INLINE int lagd_away(void) {
    return deadline_within((__u64)(HEARTBEAT_BOUND_MS - HEARTBEAT_AWAY_MS) * 1000000);
}

// The frame as the bond sees it (lagd_proto::hash's KernelView): an accelerated VLAN tag, or
// the outermost tag in the data, lifted out as metadata.
struct view {
    __u8 eth[14];
    __u32 len;
    __u32 nhoff;
    __u16 proto;
    __u16 tci;
    __u8 tagged;
};

INLINE void view_of(struct __sk_buff *skb, struct view *v) {
    v->len = skb->len;
    v->tagged = 0;
    v->tci = 0;
    v->nhoff = 14;
    v->proto = 0;
    if (bpf_skb_load_bytes(skb, 0, v->eth, 14) < 0)
        return; // shorter than an Ethernet header: every hash is 0
    v->proto = be16(&v->eth[12]);
    if (skb->vlan_present) {
        v->tagged = 1;
        v->tci = skb->vlan_tci;
        return;
    }
    if (v->len >= 18 && (v->proto == ETH_P_8021Q || v->proto == ETH_P_8021AD)) {
        // Only a whole tag (TCI and the EtherType it encloses) is lifted, as the kernel's
        // untagging needs 18 bytes; a shorter frame keeps the TPID as its type.
        __u8 tag[4] = {};
        bpf_skb_load_bytes(skb, 14, tag, 4);
        v->tagged = 1;
        v->tci = be16(&tag[0]);
        v->proto = be16(&tag[2]);
        v->nhoff = 18;
    }
}

// bond_eth_hash(): 0 when the MAC header (with the lifted tag) is not all there.
INLINE __u32 eth_hash(const struct view *v) {
    if (v->len < v->nhoff)
        return 0;
    return (__u32)v->eth[5] ^ v->eth[11] ^ v->proto;
}

// bond_vlan_srcmac_hash().
INLINE __u32 vlan_srcmac_hash(const struct view *v) {
    if (v->len < v->nhoff)
        return 0;
    const __u8 *s = &v->eth[6];
    __u32 vendor = (__u32)s[0] << 16 | (__u32)s[1] << 8 | s[2];
    __u32 dev = (__u32)s[3] << 16 | (__u32)s[4] << 8 | s[5];
    return (__u32)v->tci ^ vendor ^ dev;
}

INLINE __u32 rotl32(__u32 x, int r) { return x << r | x >> (32 - r); }

// Open vSwitch's mhash_add() (a murmur3 step) and hash_finish().
INLINE __u32 mhash_add(__u32 hash, __u32 data) {
    data *= 0xcc9e2d51u;
    data = rotl32(data, 15);
    data *= 0x1b873593u;
    hash ^= data;
    hash = rotl32(hash, 13);
    return hash * 5 + 0xe6546b64u;
}

INLINE __u32 mhash_finish(__u32 hash, __u32 fin) {
    hash ^= fin;
    hash ^= hash >> 16;
    hash *= 0x85ebca6bu;
    hash ^= hash >> 13;
    hash *= 0xc2b2ae35u;
    return hash ^ (hash >> 16);
}

// balance-slb: hash_mac(source MAC, VLAN id, 0), the VLAN from an accelerated tag or a whole
// tag in the data; a frame shorter than an Ethernet header hashes an all-zero MAC.
INLINE __u32 ovs_slb_hash(const struct view *v) {
    __u64 x = 0;
    if (v->len >= 14) {
        #pragma unroll
        for (int i = 6; i < 12; i++)
            x = x << 8 | v->eth[i];
        if (v->tagged && (v->nhoff == 14 || v->len >= 18))
            x |= (__u64)(v->tci & 0x0fff) << 48;
    }
    __u32 h = mhash_add(0, (__u32)x);
    h = mhash_add(h, (__u32)(x >> 32));
    return mhash_finish(h, 8);
}

// What OVS's miniflow_extract() leaves for the 5-tuple hash (lagd_proto::hash's ovs::Flow).
struct ovs_flow {
    __u32 v4[2];
    __u32 v6[8];
    __u32 ports;
    __u32 dl_type; // 0x10000: shorter than an Ethernet header
    __u8 proto;
    __u8 rss;      // the TCP/UDP RSS hash applies, with rss_proto
    __u8 rss_proto;
};

// parse_ipv6_ext_hdrs__(): from the header after the fixed one at *at, up to the payload's end.
// 1: *proto is the upper protocol at *at (44 and *later for a later fragment); 0: an extension
// header is cut; -1: more than MAX_EXT_HEADERS (lagd decides).
INLINE int ovs_ipv6_upper(struct __sk_buff *skb, __u32 *at, __u32 end, __u8 *proto, int *later) {
    #pragma unroll
    for (int i = 0; i <= MAX_EXT_HEADERS; i++) {
        __u8 p = *proto;
        if (p != 0 && p != 43 && p != 60 && p != 51 && p != 44)
            return 1;
        if (i == MAX_EXT_HEADERS)
            return -1;
        if (*at + 8 > end)
            return 0;
        __u8 h[4];
        if (bpf_skb_load_bytes(skb, *at, h, 4) < 0)
            return 0;
        __u32 len = p == 51 ? ((__u32)h[1] + 2) * 4 : p == 44 ? 8 : ((__u32)h[1] + 1) * 8;
        if (p == 44 && (be16(&h[2]) & 0xfff8)) {
            *proto = 44;
            *at += 8;
            *later = 1;
            return 1;
        }
        *proto = h[0];
        if (*at + len > end)
            return 0;
        *at += len;
    }
    return -1; // not reached
}

// miniflow_extract() of OVS 3.1 as far as the 5-tuple hash reads it; 0 when lagd must decide.
INLINE int ovs_extract(struct __sk_buff *skb, struct ovs_flow *f) {
    __u32 len = skb->len;
    __u8 h[40];
    if (len < 14) {
        f->dl_type = 0x10000;
        return 1;
    }
    __u32 at = 12;
    if (bpf_skb_load_bytes(skb, at, h, 2) < 0)
        return 0;
    // One tag is skipped (vlan-limit 1): an accelerated one, or one in the data if 6 bytes are.
    if (!skb->vlan_present && (be16(h) == ETH_P_8021Q || be16(h) == ETH_P_8021AD) &&
        len >= at + 6) {
        at += 4;
        if (bpf_skb_load_bytes(skb, at, h, 2) < 0)
            return 0;
    }
    __u32 dl_type = be16(h);
    at += 2;
    if (dl_type < 0x600) {
        dl_type = 0x05ff;
        if (at + 8 <= len && bpf_skb_load_bytes(skb, at, h, 8) == 0 && h[0] == 0xaa &&
            h[1] == 0xaa && h[2] == 3 && h[3] == 0 && h[4] == 0 && h[5] == 0 &&
            be16(&h[6]) >= 0x600) {
            dl_type = be16(&h[6]);
            at += 8;
        }
    }
    f->dl_type = dl_type;
    __u32 l4, end;
    int later = 0;
    if (dl_type == ETH_P_IP) {
        if (at + 20 > len || bpf_skb_load_bytes(skb, at, h, 20) < 0)
            return 1;
        __u32 hl = (h[0] & 0x0f) * 4;
        __u32 tot = be16(&h[2]);
        if (hl < 20 || at + hl > len || tot < hl || at + tot > len)
            return 1;
        f->v4[0] = le32(&h[12]);
        f->v4[1] = le32(&h[16]);
        f->proto = h[9];
        later = (be16(&h[6]) & 0x1fff) != 0;
        l4 = at + hl;
        end = at + tot;
    } else if (dl_type == ETH_P_IPV6) {
        if (at + 40 > len || bpf_skb_load_bytes(skb, at, h, 40) < 0)
            return 1;
        end = at + 40 + be16(&h[4]);
        if (end > len)
            return 1;
        #pragma unroll
        for (int w = 0; w < 8; w++)
            f->v6[w] = le32(&h[8 + 4 * w]);
        __u8 nxt = h[6];
        l4 = at + 40;
        __u8 p = nxt;
        int r = ovs_ipv6_upper(skb, &l4, end, &p, &later);
        if (r < 0)
            return 0;
        if (r == 0)
            return 1;
        f->proto = p;
        // The RSS hash reads the fixed header's own next-header field.
        f->rss_proto = nxt;
    } else if (dl_type == ETH_P_ARP) {
        if (at + 28 > len || bpf_skb_load_bytes(skb, at, h, 28) < 0)
            return 1;
        if (be16(&h[0]) != 1 || be16(&h[2]) != ETH_P_IP || h[4] != 6 || h[5] != 4)
            return 1;
        f->v4[0] = le32(&h[14]);
        f->v4[1] = le32(&h[24]);
        __u16 op = be16(&h[6]);
        f->proto = op <= 0xff ? (__u8)op : 0;
        return 1;
    } else {
        return 1;
    }
    if (later)
        return 1;
    __u32 avail = end > l4 ? end - l4 : 0;
    __u8 p = f->proto;
    int ok = 0;
    if (p == 6) {
        __u8 off = 0;
        if (bpf_skb_load_bytes(skb, l4 + 12, &off, 1) < 0)
            off = 0;
        __u32 o = (__u32)(off >> 4) * 4;
        ok = o >= 20 && o <= avail;
    } else if (p == 17 || p == 1 || p == 58) {
        ok = avail >= 8;
    } else if (p == 132) {
        ok = avail >= 12;
    }
    if (!ok)
        return 1;
    if (bpf_skb_load_bytes(skb, l4, h, 4) < 0)
        return 1;
    f->ports = (p == 1 || p == 58) ? (__u32)h[0] << 8 | (__u32)h[1] << 24 : le32(h);
    if (p == 6 || p == 17) {
        f->rss = 1;
        if (dl_type != ETH_P_IPV6)
            f->rss_proto = p;
    }
    return 1;
}

// balance-tcp: the hash OVS's userspace datapath keeps as the packet's RSS hash
// (lagd_proto::hash's ovs::tcp_hash). 0 when lagd must decide.
INLINE int ovs_tcp_hash(struct __sk_buff *skb, __u32 *out) {
    struct ovs_flow f = {};
    if (!ovs_extract(skb, &f))
        return 0;
    __u32 hash = 0;
    if (f.dl_type == ETH_P_IPV6) {
        #pragma unroll
        for (int w = 0; w < 8; w++)
            hash = mhash_add(hash, f.v6[w]);
    } else if (f.dl_type == ETH_P_IP || f.dl_type == ETH_P_ARP) {
        hash = mhash_add(mhash_add(hash, f.v4[0]), f.v4[1]);
    } else {
        *out = mhash_finish(hash, 42);
        return 1;
    }
    if (f.rss) {
        *out = mhash_finish(mhash_add(mhash_add(hash, f.rss_proto), f.ports), 42);
        return 1;
    }
    hash = mhash_add(hash, f.proto);
    __u8 p = f.proto;
    if (p != 6 && p != 17 && p != 132 && p != 1 && p != 58) {
        *out = mhash_finish(hash, 42);
        return 1;
    }
    *out = mhash_finish(mhash_add(hash, f.ports), 42);
    return 1;
}

struct flow {
    __u32 src;
    __u32 dst;
    __u32 ports;
    __u32 icmp;
};

// skb_flow_get_ports(): the first transport word (AH: at offset 4), little-endian, or 0.
INLINE __u32 get_ports(struct __sk_buff *skb, __u32 thoff, __u8 proto) {
    __u32 off;
    switch (proto) {
    case 6: case 17: case 33: case 50: case 132: case 136:
        off = 0;
        break;
    case 51:
        off = 4;
        break;
    default:
        return 0;
    }
    __u8 w[4];
    if (bpf_skb_load_bytes(skb, thoff + off, w, 4) < 0)
        return 0;
    return le32(w);
}

// skb_flow_get_icmp_tci(): type | code << 8 | id << 16 (id for echo and timestamp types, 0
// made 1), all zero when the 8-byte header is cut.
INLINE __u32 icmp_key(struct __sk_buff *skb, __u32 thoff) {
    __u8 h[8];
    if (bpf_skb_load_bytes(skb, thoff, h, 8) < 0)
        return 0;
    __u32 id = 0;
    switch (h[0]) {
    case 0: case 8: case 13: case 14: case 128: case 129:
        id = be16(&h[4]);
        if (id == 0)
            id = 1;
    }
    return (__u32)h[0] | (__u32)h[1] << 8 | id << 16;
}

// bond_flow_ip(): the IPv4 or IPv6 header at *nhoff, by the frame's (outer) protocol.
// *proto keeps its value for an IPv4 fragment, as the kernel's does.
INLINE int flow_ip(struct __sk_buff *skb, const struct view *v, struct flow *fk, __u32 *nhoff,
                   int *proto, int l34) {
    __u32 at = *nhoff;
    if (v->proto == ETH_P_IP) {
        __u8 ip[20];
        if (bpf_skb_load_bytes(skb, at, ip, 20) < 0)
            return 0;
        fk->src = le32(&ip[12]);
        fk->dst = le32(&ip[16]);
        *nhoff = at + (ip[0] & 0x0f) * 4;
        if (!(be16(&ip[6]) & 0x3fff))
            *proto = ip[9];
    } else if (v->proto == ETH_P_IPV6) {
        __u8 ip[40];
        if (bpf_skb_load_bytes(skb, at, ip, 40) < 0)
            return 0;
        fk->src = le32(&ip[8]) ^ le32(&ip[12]) ^ le32(&ip[16]) ^ le32(&ip[20]);
        fk->dst = le32(&ip[24]) ^ le32(&ip[28]) ^ le32(&ip[32]) ^ le32(&ip[36]);
        *nhoff = at + 40;
        *proto = ip[6];
    } else {
        return 0;
    }
    if (l34 && *proto >= 0)
        fk->ports = get_ports(skb, *nhoff, (__u8)*proto);
    return 1;
}

// bond_flow_dissect() for layer2+3 and layer3+4; an ICMP error is hashed by the packet it
// quotes.
INLINE int flow_dissect(struct __sk_buff *skb, const struct view *v, struct flow *fk, int l34) {
    __u32 nhoff = v->nhoff;
    int proto = -1;
    if (!flow_ip(skb, v, fk, &nhoff, &proto, l34))
        return 0;
    if (proto != 1 && proto != 58)
        return 1;
    fk->icmp = icmp_key(skb, nhoff);
    __u8 ty = (__u8)fk->icmp;
    int err = proto == 1 ? (ty == 3 || ty == 4 || ty == 5 || ty == 11 || ty == 12)
                         : (ty >= 1 && ty <= 4);
    if (!err)
        return 1;
    nhoff += 8;
    return flow_ip(skb, v, fk, &nhoff, &proto, l34);
}

// bond_xmit_hash() for the policies the fast path takes.
INLINE __u32 xmit_hash(struct __sk_buff *skb, const struct view *v, __u32 policy) {
    if (policy == POLICY_LAYER2)
        return eth_hash(v);
    if (policy == POLICY_VLAN_SRCMAC)
        return vlan_srcmac_hash(v);
    if (policy == POLICY_OVS_SLB)
        return ovs_slb_hash(v);
    int l34 = policy == POLICY_LAYER34;
    struct flow fk = {};
    if (!flow_dissect(skb, v, &fk, l34))
        return eth_hash(v);
    __u32 hash;
    if (!l34)
        hash = eth_hash(v);
    else if (fk.icmp >> 16)
        hash = fk.icmp;
    else
        hash = fk.ports;
    hash ^= fk.dst ^ fk.src;
    hash ^= hash >> 16;
    hash ^= hash >> 8;
    return l34 ? hash >> 1 : hash;
}

// The encap policies: __skb_flow_dissect() with the bonding key set, from the view's protocol
// at the network header, as lagd_proto::hash's KernelView::flow_dissect reads it. Each of
// ENCAP_STEPS rounds takes one step of that dissection: a network-layer header (`proto`, stage
// ENCAP_L3) or a transport-layer one (`ip_proto`, stage ENCAP_L4: GRE, IPv6 extension headers,
// IP-in-IP, ICMP, ports). A frame whose dissection needs more rounds, or meets a header
// this program does not walk (PPPoE, TIPC, batman-adv, HSR/PRP: rare on a bond), is left to
// lagd (0), whose hash is the reference; MAX_FLOW_DISSECT_HDRS (15) is never reached within
// ENCAP_STEPS rounds, so its cut-off needs no counting here. VXLAN and Geneve are UDP to the
// dissector (no flag asks it to look inside): their outer ports are the flow.
#define ENCAP_STEPS 6
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "encap_hash loads address words");
#define ENCAP_L3 0
#define ENCAP_L4 1
#define ENCAP_GOOD 2
#define ENCAP_BAD 3

// __skb_flow_dissect_gre(): GRE versions 0 and 1 (PPTP) without routing. Returns the next
// stage; for ENCAP_L3, *proto and *nhoff name the inner header.
INLINE int encap_gre(struct __sk_buff *skb, __u32 len, __u32 *nhoff, __u32 *proto) {
    __u32 at = *nhoff;
    __u8 h[4];
    if (at + 4 > len || bpf_skb_load_bytes(skb, at, h, 4) < 0)
        return ENCAP_BAD;
    __u32 flags = be16(&h[0]);
    if (flags & 0x4000) // routing
        return ENCAP_GOOD;
    __u32 version = flags & 7;
    if (version > 1)
        return ENCAP_GOOD;
    __u32 p = be16(&h[2]);
    if (version == 1 && !(p == 0x880b && (flags & 0x2000)))
        return ENCAP_GOOD;
    __u32 off = 4;
    if (flags & 0x8000) // checksum
        off += 4;
    if (flags & 0x2000) { // key
        if (at + off + 4 > len)
            return ENCAP_BAD;
        off += 4;
    }
    if (flags & 0x1000) // sequence
        off += 4;
    if (version == 0) {
        if (p == 0x6558) { // transparent Ethernet bridging: the inner EtherType
            if (at + off + 14 > len || bpf_skb_load_bytes(skb, at + off + 12, h, 2) < 0)
                return ENCAP_BAD;
            p = be16(&h[0]);
            off += 14;
        }
    } else {
        if (flags & 0x0080) // acknowledgment
            off += 4;
        if (at + off + 4 > len || bpf_skb_load_bytes(skb, at + off, h, 4) < 0)
            return ENCAP_BAD;
        __u32 ppp = be16(&h[2]);
        if (ppp == 0x0021)
            p = ETH_P_IP;
        else if (ppp == 0x0057)
            p = ETH_P_IPV6;
        off += 4;
    }
    *nhoff = at + off;
    *proto = p;
    return ENCAP_L3;
}

// bond_xmit_hash() under encap2+3 (l34 0) or encap3+4 (l34 1); 0 when lagd must hash.
// The transport word is read once, after the rounds: where the dissection stops at a
// transport header (`l4`), not a fragment, it is that header's ports (or ICMP key); every
// other stop leaves the kernel's ports at 0 (the last transport step before a network header
// is GRE or IP-in-IP, which have none).
INLINE int encap_hash(struct __sk_buff *skb, const struct view *v, int l34, __u32 *out) {
    struct flow fk = {};
    __u32 len = v->len, nhoff = v->nhoff, proto = v->proto, ip_proto = 0;
    int stage = ENCAP_L3, l4 = 0, vlan_depth = 0;
    // Loaded as words: an address word is the little-endian load of its four bytes (the
    // programs are little-endian, as lagd_proto's model).
    __u32 w[10];
    __u8 *h = (__u8 *)w;
    #pragma unroll
    for (int i = 0; i < ENCAP_STEPS; i++) {
        if (stage == ENCAP_L3) {
            if (proto == ETH_P_IP) {
                if (nhoff + 20 > len || bpf_skb_load_bytes(skb, nhoff, h, 20) < 0 ||
                    (h[0] & 0x0f) < 5) {
                    stage = ENCAP_BAD;
                    break;
                }
                nhoff += (h[0] & 0x0f) * 4;
                ip_proto = h[9];
                fk.src = w[3];
                fk.dst = w[4];
                // Any fragment, the first included: no ports.
                stage = (be16(&h[6]) & 0x3fff) ? ENCAP_GOOD : ENCAP_L4;
            } else if (proto == ETH_P_IPV6) {
                if (nhoff + 40 > len || bpf_skb_load_bytes(skb, nhoff, h, 40) < 0) {
                    stage = ENCAP_BAD;
                    break;
                }
                ip_proto = h[6];
                nhoff += 40;
                fk.src = w[2] ^ w[3] ^ w[4] ^ w[5];
                fk.dst = w[6] ^ w[7] ^ w[8] ^ w[9];
                stage = ENCAP_L4;
            } else if (proto == ETH_P_8021Q || proto == ETH_P_8021AD) {
                if (vlan_depth == 0 && v->tagged) {
                    // The first tag met is taken for the accelerated one: the dissection
                    // goes on at skb->protocol without consuming a header.
                    proto = v->proto;
                } else {
                    if (nhoff + 4 > len || bpf_skb_load_bytes(skb, nhoff, h, 4) < 0) {
                        stage = ENCAP_BAD;
                        break;
                    }
                    proto = be16(&h[2]);
                    nhoff += 4;
                }
                vlan_depth = 1;
            } else if (proto == 0x8847 || proto == 0x8848 || proto == ETH_P_ARP ||
                       proto == 0x8035 || proto == 0x8902) {
                // MPLS, ARP, RARP, CFM: no key bonding asks for; success.
                stage = ENCAP_GOOD;
            } else if (proto == 0x8906) { // FCoE
                stage = nhoff + 38 <= len ? ENCAP_GOOD : ENCAP_BAD;
            } else if (proto == 0x88f7) { // PTP over Ethernet
                stage = nhoff + 34 <= len ? ENCAP_GOOD : ENCAP_BAD;
            } else if (proto == 0x8864 || proto == 0x88ca || proto == 0x4305 ||
                       proto == 0x892f || proto == 0x88fb) {
                // PPPoE, TIPC, batman-adv, HSR/PRP: walked as the frame's first header
                // only (where they are met on a bond); deeper, lagd's.
                if (i != 0)
                    return 0;
                __u32 need = proto == 0x8864 ? 8 : proto == 0x88ca ? 16 : proto == 0x4305 ? 24 : 6;
                if (nhoff + need > len) {
                    stage = ENCAP_BAD;
                    break;
                }
                // Within the frame (checked above): the loads cannot fail.
                if (need == 24)
                    bpf_skb_load_bytes(skb, nhoff, h, 24);
                else if (need == 16)
                    bpf_skb_load_bytes(skb, nhoff, h, 16);
                else if (need == 8)
                    bpf_skb_load_bytes(skb, nhoff, h, 8);
                else
                    bpf_skb_load_bytes(skb, nhoff, h, 6);
                if (proto == 0x8864) {
                    // Version/type 1/1, code 0, then a PPP protocol maybe compressed to a byte.
                    __u32 ppp = be16(&h[6]);
                    if (h[0] != 0x11 || h[1] != 0) {
                        stage = ENCAP_BAD;
                        break;
                    }
                    if (ppp & 0x0100) {
                        ppp >>= 8;
                        nhoff += 7;
                    } else {
                        nhoff += 8;
                    }
                    if (ppp == 0x0021)
                        proto = ETH_P_IP;
                    else if (ppp == 0x0057)
                        proto = ETH_P_IPV6;
                    else if (ppp == 0x0281)
                        proto = 0x8847;
                    else if (ppp == 0x0283)
                        proto = 0x8848;
                    else
                        stage = (ppp & 0x0101) == 0x0001 ? ENCAP_GOOD : ENCAP_BAD;
                } else if (proto == 0x88ca) {
                    // TIPC: the source node word; keep-alives get the kernel's random key
                    // as lagd_proto's 0.
                    fk.src = (be32(h) & 0x0e080000) == 0x0e080000 ? 0 : w[3];
                    fk.dst = 0;
                    stage = ENCAP_GOOD;
                } else if (proto == 0x4305) {
                    // batman-adv: version 15 unicast only, to the inner EtherType.
                    if (h[1] != 15 || h[0] != 0x40) {
                        stage = ENCAP_BAD;
                        break;
                    }
                    proto = be16(&h[22]);
                    nhoff += 24;
                } else {
                    proto = be16(&h[4]); // HSR/PRP: a 6-byte tag
                    nhoff += 6;
                }
            } else {
                stage = ENCAP_BAD;
            }
        } else {
            if (ip_proto == 47) {
                stage = encap_gre(skb, len, &nhoff, &proto);
            } else if ((ip_proto == 0 || ip_proto == 43 || ip_proto == 60 || ip_proto == 44) &&
                       proto == ETH_P_IPV6) {
                if (nhoff + (ip_proto == 44 ? 8 : 2) > len ||
                    bpf_skb_load_bytes(skb, nhoff, h, 2) < 0) {
                    stage = ENCAP_BAD;
                    break;
                }
                if (ip_proto == 44) {
                    // A fragment header: no ports.
                    nhoff += 8;
                    stage = ENCAP_GOOD;
                } else {
                    nhoff += ((__u32)h[1] + 1) << 3;
                }
                ip_proto = h[0];
            } else if (ip_proto == 4 || ip_proto == 41) {
                proto = ip_proto == 4 ? ETH_P_IP : ETH_P_IPV6;
                stage = ENCAP_L3;
            } else if (ip_proto == 137) {
                proto = 0x8847;
                stage = ENCAP_L3;
            } else {
                l4 = 1;
                stage = ENCAP_GOOD;
            }
        }
        if (stage >= ENCAP_GOOD)
            break;
    }
    if (stage < ENCAP_GOOD)
        return 0; // deeper than ENCAP_STEPS: lagd's
    if (stage == ENCAP_BAD) {
        *out = eth_hash(v);
        return 1;
    }
    __u32 hash;
    if (!l34) {
        hash = eth_hash(v);
    } else if (!l4) {
        hash = 0;
    } else if (ip_proto == 1 || ip_proto == 58) {
        fk.icmp = icmp_key(skb, nhoff);
        hash = fk.icmp >> 16 ? fk.icmp : 0;
    } else {
        hash = get_ports(skb, nhoff, (__u8)ip_proto);
    }
    hash ^= fk.dst ^ fk.src;
    hash ^= hash >> 16;
    hash ^= hash >> 8;
    *out = l34 ? hash >> 1 : hash;
    return 1;
}

// lagd_proto::balance::bucket().
INLINE __u32 bucket_of(__u32 seed, __u32 hash) {
    if (seed == 0)
        return hash & 0xff;
    return ((hash ^ seed) * 0x9e3779b1u) >> 24;
}

// Frames lagd itself must see from the host: ARP and neighbour discovery (the bond learns its
// addresses), IGMP and MLD reports (replayed after a failover). ICMPv6 types 130-143, directly
// behind the IPv6 header or behind one hop-by-hop options header, where MLD travels (its router
// alert option: RFC 2710 and 3810; lagd_proto::bond::igmp reads it there).
INLINE int for_lagd(struct __sk_buff *skb, const struct view *v) {
    if (v->proto == ETH_P_ARP)
        return 1;
    if (v->proto == ETH_P_IP) {
        __u8 p;
        if (bpf_skb_load_bytes(skb, v->nhoff + 9, &p, 1) == 0 && p == 2)
            return 1;
    }
    if (v->proto == ETH_P_IPV6) {
        __u8 h[2], type;
        __u32 at = v->nhoff + 40;
        if (bpf_skb_load_bytes(skb, v->nhoff + 6, &h[0], 1) < 0)
            return 0;
        if (h[0] == 0) {
            // Hop-by-hop options: its next header, and its length in 8 bytes beyond the first 8.
            if (bpf_skb_load_bytes(skb, at, h, 2) < 0)
                return 0;
            at += 8 + (__u32)h[1] * 8;
        }
        if (h[0] == 58 && bpf_skb_load_bytes(skb, at, &type, 1) == 0 && type >= 130 && type <= 143)
            return 1;
    }
    return 0;
}

INLINE void count_tx(__u32 port, __u32 len) {
    struct port_counters *c = bpf_map_lookup_elem(&lagd_ports, &port);
    if (c) {
        c->tx_packets++;
        c->tx_bytes += len;
    }
}

// Whether a frame carries TCP in IPv4 (fragments included) or in IPv6 without extension
// headers: what broadcast sends in the order a receiving TCP needs.
INLINE int carries_tcp(struct __sk_buff *skb, const struct view *v) {
    __u8 next;
    if (v->proto == ETH_P_IP)
        return bpf_skb_load_bytes(skb, v->nhoff + 9, &next, 1) == 0 && next == 6;
    if (v->proto == ETH_P_IPV6)
        return bpf_skb_load_bytes(skb, v->nhoff + 6, &next, 1) == 0 && next == 6;
    return 0;
}

// Whether lagd's stripe sends the frame as TCP, with the checks of
// lagd_proto::stripe::tcp::parse_segment: IPv4 that is not a fragment or IPv6 without extension
// headers, behind at most one VLAN tag, lengths consistent, a whole TCP header.
INLINE int stripe_tcp(struct __sk_buff *skb, const struct view *v) {
    __u32 len = v->len, at = v->nhoff, l4, end;
    if (len < at)
        return 0;
    if (v->proto == ETH_P_IP) {
        __u8 ip[20];
        if (bpf_skb_load_bytes(skb, at, ip, 20) < 0)
            return 0;
        __u32 ihl = (ip[0] & 0x0f) * 4, total = be16(&ip[2]);
        if ((ip[0] >> 4) != 4 || ihl < 20 || total < ihl || at + total > len)
            return 0;
        if (ip[9] != 6 || (be16(&ip[6]) & 0x3fff))
            return 0;
        l4 = at + ihl;
        end = at + total;
    } else if (v->proto == ETH_P_IPV6) {
        __u8 ip[8];
        if (bpf_skb_load_bytes(skb, at, ip, 8) < 0)
            return 0;
        __u32 payload = be16(&ip[4]);
        if ((ip[0] >> 4) != 6 || ip[6] != 6 || at + 40 + payload > len)
            return 0;
        l4 = at + 40;
        end = payload ? at + 40 + payload : len;
    } else {
        return 0;
    }
    if (end < l4 + 20)
        return 0;
    __u8 off;
    if (bpf_skb_load_bytes(skb, l4 + 12, &off, 1) < 0)
        return 0;
    __u32 thl = (off >> 4) * 4;
    return thl >= 20 && l4 + thl <= end;
}

// Stripe: the slot of a TCP frame, from this CPU's byte count, NO_PORT when the slot names no
// member.
INLINE __u32 stripe_port(struct __sk_buff *skb, const struct table *t) {
    __u32 zero = 0;
    __u64 *bytes = bpf_map_lookup_elem(&lagd_stripe_tx, &zero);
    if (!bytes)
        return NO_PORT;
    __u32 slot = BOUND((__u32)(*bytes >> STRIPE_SLOT_SHIFT), 0xff);
    *bytes += skb->len;
    return t->bucket[slot];
}

// balance-rr (bond_xmit_roundrobin): the turn is this CPU's frame count (packets_per_slave 1),
// that count divided by packets_per_slave (N: N frames per member in turn), or a random number
// (0); the member is the first usable one from position turn % members on, over all the
// bond's members in enslave order, as the kernel's bond_get_slave_by_id walks them (rr_next
// holds that walk, computed by lagd for every table). The count is per CPU: a bond's frames
// sent from one CPU take exactly the kernel's turns; frames sent from several CPUs at once
// each follow their own CPU's count, so N frames per member in turn holds per CPU, not over
// the bond (one shared counter would need an atomic add on every frame, which 5.10's verifier
// refuses as a fetch, and would bounce a cache line between CPUs). The kernel's own counter is
// per CPU too since its bonding XDP work of 2021 (this_cpu_inc_return); older kernels keep one
// per bond, incremented without atomics. The count starts at 0 and takes the
// first turn, as lagd_proto's balance-rr does (the kernel's per-CPU increment-and-return starts
// the rotation one member later; over a stream that is the same spread). IGMP never gets here:
// it goes to lagd (for_lagd), which sends it on the first usable member as the kernel sends it
// on its active one (and so does the TAP's program while lagd is away).
INLINE __u32 rr_port(const struct table *t) {
    __u32 n = t->rr_members;
    if (n == 0 || n > MAX_MEMBERS)
        return NO_PORT;
    __u32 turn, per = t->rr_packets;
    if (per == 0) {
        turn = bpf_get_prandom_u32();
    } else {
        __u32 zero = 0;
        __u64 *count = bpf_map_lookup_elem(&lagd_stripe_tx, &zero);
        if (!count)
            return NO_PORT;
        turn = (__u32)*count;
        *count = turn + 1; // wraps at 2^32 as lagd_proto's u32 counter
        if (per > 1)
            turn /= per;
    }
    return t->rr_next[BOUND(turn % n, MAX_MEMBERS - 1)];
}

INLINE int mac_eq(const __u8 *a, const __u8 *b) {
    return a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3] && a[4] == b[4] &&
           a[5] == b[5];
}

// balance-tlb (FLAG_TLB), lagd_proto's tlb_balanced: a unicast IPv4 frame, or a unicast IPv6
// frame with its whole fixed header, is balanced by the table's rule; everything else goes on
// the active member (neighbour discovery, like ARP and IGMP, is lagd's: for_lagd; the TAP's
// program does not ask for those).
INLINE int tlb_balanced(const struct view *v) {
    if (v->len < 14 || (v->eth[0] & 1))
        return 0;
    if (v->proto == ETH_P_IP)
        return 1;
    return v->proto == ETH_P_IPV6 && v->len >= v->nhoff + 40;
}

// balance-alb (POLICY_ALB, lagd_proto's alb_hash): the byte-XOR of the destination address of
// IPv4 that is not IGMP nor to 255.255.255.255, and of IPv6 that is not to all nodes nor from
// `::` (neighbour discovery is lagd's and never asked for), neither to the broadcast MAC; 0
// for every other frame, which goes on the active member.
INLINE int alb_hash(struct __sk_buff *skb, const struct view *v, __u32 *hash) {
    const __u8 *d = v->eth;
    if (v->len < 14 || (d[0] & d[1] & d[2] & d[3] & d[4] & d[5]) == 0xff)
        return 0;
    if (v->proto == ETH_P_IP) {
        __u8 ip[20];
        if (bpf_skb_load_bytes(skb, v->nhoff, ip, 20) < 0)
            return 0;
        if (ip[9] == 2 || (ip[16] & ip[17] & ip[18] & ip[19]) == 0xff)
            return 0;
        *hash = ip[16] ^ ip[17] ^ ip[18] ^ ip[19];
        return 1;
    }
    if (v->proto != ETH_P_IPV6)
        return 0;
    __u8 ip[40];
    if (bpf_skb_load_bytes(skb, v->nhoff, ip, 40) < 0)
        return 0;
    if (d[0] == 0x33 && d[1] == 0x33 && d[2] == 0 && d[3] == 0 && d[4] == 0 && d[5] == 1)
        return 0;
    __u8 src = 0, x = 0;
    #pragma unroll
    for (int i = 0; i < 16; i++) {
        src |= ip[8 + i];
        x ^= ip[24 + i];
    }
    if (src == 0)
        return 0;
    *hash = x;
    return 1;
}

// balance-tlb (lagd_proto's Tlb::fixup): a frame leaving on another member than the active one
// with the bond's MAC as source (`from_bond`) carries that member's MAC instead, so the switch
// never sees the bond's MAC on two ports. Rewritten in place: the frame keeps its size (GSO
// intact).
INLINE void tlb_source(struct __sk_buff *skb, const struct table *t, int from_bond, __u32 port) {
    if (port >= MAX_MEMBERS || port == t->active || !from_bond)
        return;
    bpf_skb_store_bytes(skb, 6, t->wire_mac[port & (MAX_MEMBERS - 1)], 6, 0);
}

// The common frame's layer3+4 hash (common_send, below, says which frame that is), in the
// fewest instructions: balance-xor and 802.3ad with layer3+4 (and encap3+4, which comes to
// the same hash for this frame) are what most bonds run. Returns the frame's IP protocol (6
// or 17), 0 when it is not the common frame.
INLINE int plain_l34_hash(struct __sk_buff *skb, __u32 *out) {
    if (skb->vlan_present)
        return 0;
    const __u8 *p = (const __u8 *)(long)skb->data;
    const __u8 *end = (const __u8 *)(long)skb->data_end;
    if (p + 14 + 20 + 4 > end)
        return 0;
    __u16 type = *(const __u16 *)(p + 12);
    __u32 h;
    int l4;
    if (type == __builtin_bswap16(ETH_P_IP)) {
        // Version and IHL 0x45; flags and offset but DF zero (not a fragment).
        l4 = p[23];
        if (p[14] != 0x45 || (*(const __u16 *)(p + 20) & __builtin_bswap16(0x3fff)) ||
            (l4 != 6 && l4 != 17))
            return 0;
        h = *(const __u32 *)(p + 34) ^ *(const __u32 *)(p + 26) ^ *(const __u32 *)(p + 30);
    } else if (type == __builtin_bswap16(ETH_P_IPV6)) {
        if (p + 14 + 40 + 4 > end)
            return 0;
        l4 = p[20];
        if (l4 != 6 && l4 != 17)
            return 0;
        const __u32 *a = (const __u32 *)(p + 22);
        h = *(const __u32 *)(p + 54) ^ a[0] ^ a[1] ^ a[2] ^ a[3] ^ a[4] ^ a[5] ^ a[6] ^ a[7];
    } else {
        return 0;
    }
    h ^= h >> 16;
    h ^= h >> 8;
    *out = h >> 1;
    return l4;
}

// The member modulo or buckets picks for `hash` (NO_PORT if none), buckets counting the
// frame against its bucket for the rebalancer.
INLINE __u32 hashed_port(struct __sk_buff *skb, const struct table *t, __u32 hash) {
    if (t->rule == RULE_MODULO) {
        __u32 n = t->n_usable;
        if (n > 0 && n <= MAX_MEMBERS)
            return t->usable[BOUND(hash % n, MAX_MEMBERS - 1)];
        return NO_PORT;
    }
    __u32 b = BOUND(bucket_of(t->seed, hash), 0xff);
    // Read before the lookup: `b` passes through the stack to the helper, and 6.1's verifier
    // loses its bound there.
    __u32 port = t->bucket[b];
    struct bucket_load *l = bpf_map_lookup_elem(&lagd_buckets, &b);
    if (l) {
        l->bytes += skb->len;
        l->last_ns = bpf_ktime_get_ns();
    }
    return port;
}

// The frame to `port`, counted; dropped (counted against no member) when the table has no
// such member.
INLINE int send_to_port(struct __sk_buff *skb, const struct table *t, __u32 port) {
    skb->cb[1] = port;
    // BOUND: with balance-tlb's fallback to the active member the compiler proves the mask
    // redundant and drops it, in a form 5.10's and 6.1's verifiers cannot follow.
    if (port >= MAX_MEMBERS || t->ifindex[BOUND(port, MAX_MEMBERS - 1)] == 0) {
        count_tx(MAX_MEMBERS, skb->len);
        return TC_ACT_SHOT;
    }
    count_tx(port, skb->len);
    return bpf_redirect(t->ifindex[BOUND(port, MAX_MEMBERS - 1)], 0);
}

// Every rule but broadcast's and stripe's, once the frame's hash is known (or that it goes on
// the active member): the member, counted, and balance-tlb's source MAC (`from_bond`: the
// frame's source is the bond's MAC).
INLINE int balanced_send(struct __sk_buff *skb, const struct table *t, __u32 hash, int by_active,
                         int from_bond) {
    skb->cb[0] = hash;
    __u32 port = NO_PORT;
    if (by_active) {
        port = t->active;
    } else if (t->rule == RULE_MODULO || t->rule == RULE_BUCKETS) {
        port = hashed_port(skb, t, hash);
    } else if (t->rule == RULE_RR) {
        port = rr_port(t);
    }
    if (t->flags & FLAG_TLB) {
        // A balanced frame without a member goes on the active one (Tlb::choose).
        if (port >= MAX_MEMBERS)
            port = t->active;
        tlb_source(skb, t, from_bond, port);
    }
    return send_to_port(skb, t, port);
}

// The common frame, read straight from the packet (no helper call): an untagged IPv4 frame
// with a 20-byte header that is not a fragment, or an IPv6 frame without extension headers,
// carrying TCP or UDP whose ports are in the frame's linear data. None of lagd's frames (ARP,
// IGMP, ICMPv6) is TCP or UDP, so the general path (view_of, for_lagd, xmit_hash,
// tlb_balanced, alb_hash) would send it; for it that path's decision comes to what this
// computes from the words it loads: whether the frame goes on the active member, and the hash
// of the table's policy, which balanced_send then sends by. -1: any other frame, or a
// policy this does not compute here (vlan+srcmac, Open vSwitch's), which the general path
// takes. The layer3+4 hash by modulo or buckets without balance-tlb's rules comes first, in
// the fewest instructions (plain_l34_hash; the interpreter of a kernel without the BPF JIT
// charges every one). The loads are 4-byte aligned to the verifier's packet model
// (NET_IP_ALIGN 2).
INLINE int common_send(struct __sk_buff *skb, const struct table *t) {
    if (skb->vlan_present)
        return -1;
    const __u8 *p = (const __u8 *)(long)skb->data;
    const __u8 *end = (const __u8 *)(long)skb->data_end;
    if (p + 14 + 20 + 4 > end)
        return -1;
    __u32 policy = t->policy;
    int tlb = (t->flags & FLAG_TLB) != 0;
    if ((t->rule == RULE_MODULO || t->rule == RULE_BUCKETS) && !tlb &&
        (policy == POLICY_LAYER34 || policy == POLICY_ENCAP34)) {
        __u32 hash;
        if (!plain_l34_hash(skb, &hash))
            return -1;
        skb->cb[0] = hash;
        return send_to_port(skb, t, hashed_port(skb, t, hash));
    }
    __u16 type = *(const __u16 *)(p + 12);
    __u32 dst, addrs, ports, proto;
    if (type == __builtin_bswap16(ETH_P_IP)) {
        // Version and IHL 0x45; flags and offset but DF zero (not a fragment).
        if (p[14] != 0x45 || (*(const __u16 *)(p + 20) & __builtin_bswap16(0x3fff)) ||
            (p[23] != 6 && p[23] != 17))
            return -1;
        dst = *(const __u32 *)(p + 30);
        addrs = *(const __u32 *)(p + 26) ^ dst;
        ports = *(const __u32 *)(p + 34);
        proto = ETH_P_IP;
    } else if (type == __builtin_bswap16(ETH_P_IPV6)) {
        if (p + 14 + 40 + 4 > end || (p[20] != 6 && p[20] != 17))
            return -1;
        const __u32 *a = (const __u32 *)(p + 22);
        dst = a[4] ^ a[5] ^ a[6] ^ a[7]; // what ALB's byte-XOR folds is the same
        addrs = a[0] ^ a[1] ^ a[2] ^ a[3] ^ dst;
        ports = *(const __u32 *)(p + 54);
        proto = ETH_P_IPV6;
    } else {
        return -1;
    }
    int by_active = t->rule == RULE_ACTIVE;
    int from_bond = 0;
    if (tlb) {
        from_bond = mac_eq(p + 6, t->bond_mac);
        if (policy == POLICY_ALB) {
            // alb_hash: the byte-XOR of the destination address; none to the broadcast MAC,
            // to 255.255.255.255 (TCP and UDP are never IGMP), to all nodes
            // (33:33:00:00:00:01) or from `::`.
            const __u32 *a = (const __u32 *)(p + 22);
            int skip = (p[0] & p[1] & p[2] & p[3] & p[4] & p[5]) == 0xff ||
                       (proto == ETH_P_IP
                            ? dst == 0xffffffff
                            : (p[0] == 0x33 && p[1] == 0x33 && p[2] == 0 && p[3] == 0 &&
                               p[4] == 0 && p[5] == 1) ||
                                  (a[0] | a[1] | a[2] | a[3]) == 0);
            __u32 x = dst ^ (dst >> 16);
            return balanced_send(skb, t, skip ? 0 : (x ^ (x >> 8)) & 0xff, skip, from_bond);
        }
        by_active = p[0] & 1; // tlb_balanced: unicast (the IP header is all there)
    }
    if (by_active || t->rule == RULE_RR)
        return balanced_send(skb, t, 0, by_active, from_bond);
    // bond_xmit_hash: the ports or bond_eth_hash, then bond_ip_hash's folding. The encap
    // policies dissect the same headers here: TCP and UDP end their walk (VXLAN and Geneve
    // are UDP to it), and an IPv6 flow label does not stop it.
    __u32 h;
    int l34 = policy == POLICY_LAYER34 || policy == POLICY_ENCAP34;
    if (l34) {
        h = ports ^ addrs;
    } else if (policy == POLICY_LAYER2) {
        return balanced_send(skb, t, (__u32)p[5] ^ p[11] ^ proto, 0, from_bond);
    } else if (policy == POLICY_LAYER23 || policy == POLICY_ENCAP23) {
        h = (__u32)p[5] ^ p[11] ^ proto ^ addrs;
    } else {
        return -1;
    }
    h ^= h >> 16;
    h ^= h >> 8;
    return balanced_send(skb, t, l34 ? h >> 1 : h, 0, from_bond);
}

// Broadcast (RULE_ALL); `tcp`: the frame carries TCP.
INLINE int broadcast_send(struct __sk_buff *skb, const struct table *t, int tcp) {
    // The frame itself goes on the last usable member (tcx knows no "consumed" verdict,
    // and a drop would tell the sender, TCP, that it never left); every other member gets
    // a clone. With FLAG_DEFER_TCP_CLONES a TCP segment's clones go round their member's
    // receive path first (DEFERRED_COPY), so that the far end receives the segment itself
    // before them: the clone helper made the segment's own head private, and a busy
    // receiving TCP of 6.12 merges the next segment into an unshared duplicate that arrived
    // last (bench/kernels.md, "Broadcast on 6.12"). lagd sets the flag on kernels after
    // 6.1: on 5.10 the detour costs the receiver backlog drops and thousands of
    // retransmits, on 6.1 clones at once do as well ("Broadcast's TCP clones by kernel").
    // Other frames' clones leave at once (no such merging; the extra pass costs small
    // datagrams more than it is worth).
    __u32 n = t->n_usable;
    if (n == 0 || n > MAX_MEMBERS) {
        count_tx(MAX_MEMBERS, skb->len);
        return TC_ACT_SHOT;
    }
    __u64 how = 0;
    __u32 mark = skb->mark, cb3 = skb->cb[3], cb4 = skb->cb[4];
    if (n > 1 && tcp && (t->flags & FLAG_DEFER_TCP_CLONES)) {
        how = BPF_F_INGRESS;
        skb->mark = DEFERRED_COPY;
        skb->cb[4] = DEFERRED_COPY;
    }
    #pragma unroll
    for (__u32 i = 0; i < MAX_MEMBERS - 1; i++) {
        if (i + 1 >= n)
            break;
        __u32 port = t->usable[i] & (MAX_MEMBERS - 1);
        __u32 ifindex = t->ifindex[port];
        if (how)
            skb->cb[3] = DEFERRED_COPY ^ ifindex;
        if (ifindex != 0 && bpf_clone_redirect(skb, ifindex, how) == 0)
            count_tx(port, skb->len);
    }
    skb->mark = mark;
    skb->cb[3] = cb3;
    skb->cb[4] = cb4;
    __u32 last = t->usable[BOUND(n - 1, MAX_MEMBERS - 1)] & (MAX_MEMBERS - 1);
    skb->cb[1] = last;
    if (t->ifindex[last] == 0) {
        count_tx(MAX_MEMBERS, skb->len);
        return TC_ACT_SHOT;
    }
    count_tx(last, skb->len);
    return bpf_redirect(t->ifindex[last], 0);
}

SEC("tcx/egress")
int lagd_tap_egress(struct __sk_buff *skb) {
    if (orphaned(ALIVE_TAP_DROPPED))
        return TC_ACT_SHOT;
    struct table *t = current_table();
    if (!t || t->rule == RULE_LAGD)
        return TC_ACT_OK;
    if (t->rule == RULE_ALL) {
        // The common frame is TCP or UDP, never lagd's.
        __u32 hash;
        int l4 = plain_l34_hash(skb, &hash);
        if (l4)
            return broadcast_send(skb, t, l4 == 6);
    } else if (t->rule != RULE_STRIPE) {
        int verdict = common_send(skb, t);
        if (verdict >= 0)
            return verdict;
    }
    struct view v;
    view_of(skb, &v);
    // lagd's frames go to lagd; while it is away they take the data's way, as lagd would send
    // them, so that the host's neighbours still resolve during a restart.
    int away = 0;
    if (for_lagd(skb, &v)) {
        if (!lagd_away())
            return TC_ACT_OK;
        away = 1;
    }
    if (t->rule == RULE_STRIPE) {
        // TCP goes whole on its slot's member, the slots in turn; every other frame stays on
        // the slot its flow's layer3+4 hash names (lagd_proto::stripe::tx::flow_slot): one
        // member per flow, so that no flow is reordered and none needs lagd's numbering.
        __u32 port;
        if (stripe_tcp(skb, &v)) {
            port = stripe_port(skb, t);
        } else {
            __u32 hash = xmit_hash(skb, &v, POLICY_LAYER34);
            skb->cb[0] = hash;
            port = t->bucket[hash & 0xff];
        }
        skb->cb[1] = port;
        if (port >= MAX_MEMBERS || t->ifindex[port & (MAX_MEMBERS - 1)] == 0)
            return TC_ACT_OK;
        count_tx(port, skb->len);
        return bpf_redirect(t->ifindex[port & (MAX_MEMBERS - 1)], 0);
    }
    if (t->rule == RULE_ALL)
        return broadcast_send(skb, t, carries_tcp(skb, &v));
    __u32 hash = 0;
    int tlb = (t->flags & FLAG_TLB) != 0;
    if (away && t->rule == RULE_RR && v.proto == ETH_P_IP) {
        // IGMP, lagd's one IPv4 frame, on the first usable member, where lagd sends it in
        // balance-rr (lagd_proto's igmp_member); its ARP and neighbour discovery take turns.
        return send_to_port(skb, t, t->n_usable ? t->usable[0] : NO_PORT);
    }
    // balance-tlb and balance-alb send lagd's frames on the active member, unchanged: where
    // lagd balances one of them (unicast IGMP, unicast ICMPv6 other than neighbour discovery)
    // or crafts it (alb's ARP), the active member still delivers it while lagd is away.
    int by_active = t->rule == RULE_ACTIVE || (away && tlb);
    if (tlb && !away) {
        if (t->policy == POLICY_ALB)
            by_active = !alb_hash(skb, &v, &hash);
        else
            by_active = !tlb_balanced(&v);
    }
    if (!by_active && t->rule != RULE_RR && !(tlb && t->policy == POLICY_ALB)) {
        if (t->policy == POLICY_OVS_TCP) {
            if (!ovs_tcp_hash(skb, &hash))
                return TC_ACT_OK;
        } else if (t->policy == POLICY_ENCAP23 || t->policy == POLICY_ENCAP34) {
            if (!encap_hash(skb, &v, t->policy == POLICY_ENCAP34, &hash))
                return TC_ACT_OK;
        } else {
            hash = xmit_hash(skb, &v, t->policy);
        }
    }
    return balanced_send(skb, t, hash, by_active, v.len >= 14 && mac_eq(&v.eth[6], t->bond_mac));
}

// The slot of a flow's kernel words (lagd_proto::stripe::tcp::FlowKey::kernel_slot).
INLINE __u32 stripe_rx_slot(const __u32 *k) {
    __u32 h = 0x811c9dc5u;
    #pragma unroll
    for (int i = 0; i < 10; i++) {
        h = (h ^ k[i]) * 0x01000193u;
        h ^= h >> 15;
    }
    return h & (STRIPE_RX_SLOTS - 1);
}

#define TCP_FIN 0x01
#define TCP_SYN 0x02
#define TCP_RST 0x04

// A frame for lagd's stripe receiver: marked for another host, so that the member's own IP
// and ARP stacks drop it, while lagd's sockets (bound to its protocols, which see frames after
// this program, unlike ETH_P_ALL taps) receive it.
INLINE int stripe_to_lagd(struct __sk_buff *skb) {
    bpf_skb_change_type(skb, 3); // PACKET_OTHERHOST
    return TC_ACT_OK;
}

INLINE int stripe_deliver(struct __sk_buff *skb, const struct table *t, __u32 port) {
    struct port_counters *c = bpf_map_lookup_elem(&lagd_ports, &port);
    if (c) {
        c->rx_packets++;
        c->rx_bytes += skb->len;
    }
    return bpf_redirect(t->tap_ifindex, BPF_F_INGRESS);
}

// Stripe's receive side: an untagged unicast TCP segment without SYN, FIN or RST that is the
// next of a flow the program holds (lagd_stripe_rx) goes to the host, as does a pure ACK or a
// segment behind the next (retransmitted: the host's TCP drops what it has); a segment ahead
// of the next goes round its member's queue again while the flow is moving (STRIPE_HOLD_NS);
// everything else, and a segment ahead of a hole that lasted, goes to lagd.
INLINE int stripe_rx(struct __sk_buff *skb, const struct table *t, __u32 port) {
    __u8 eth[14];
    if (skb->vlan_present || bpf_skb_load_bytes(skb, 0, eth, 14) < 0)
        return stripe_to_lagd(skb);
    __u16 proto = be16(&eth[12]);
    if (proto == ETH_P_SLOW)
        return TC_ACT_OK;
    if ((eth[0] & 1) || !t->rx_unicast[port & (MAX_MEMBERS - 1)])
        return stripe_to_lagd(skb);
    __u32 key[10] = {};
    __u32 len = skb->len, l4, end;
    if (proto == ETH_P_IP) {
        __u8 ip[20];
        if (bpf_skb_load_bytes(skb, 14, ip, 20) < 0)
            return stripe_to_lagd(skb);
        __u32 ihl = (ip[0] & 0x0f) * 4, total = be16(&ip[2]);
        if ((ip[0] >> 4) != 4 || ihl < 20 || total < ihl || 14 + total > len || ip[9] != 6 ||
            (be16(&ip[6]) & 0x3fff))
            return stripe_to_lagd(skb);
        key[2] = 0xffff0000u;
        key[3] = (__u32)ip[12] | (__u32)ip[13] << 8 | (__u32)ip[14] << 16 | (__u32)ip[15] << 24;
        key[6] = 0xffff0000u;
        key[7] = (__u32)ip[16] | (__u32)ip[17] << 8 | (__u32)ip[18] << 16 | (__u32)ip[19] << 24;
        l4 = 14 + ihl;
        end = 14 + total;
    } else if (proto == ETH_P_IPV6) {
        __u8 ip[40];
        if (bpf_skb_load_bytes(skb, 14, ip, 40) < 0)
            return stripe_to_lagd(skb);
        __u32 payload = be16(&ip[4]);
        if ((ip[0] >> 4) != 6 || ip[6] != 6 || payload == 0 || 54 + payload > len)
            return stripe_to_lagd(skb);
        #pragma unroll
        for (int i = 0; i < 8; i++)
            key[i] = le32(&ip[8 + 4 * i]);
        key[9] = 0x8000;
        l4 = 54;
        end = 54 + payload;
    } else {
        return stripe_to_lagd(skb);
    }
    __u8 tcp[20];
    if (l4 + 20 > end || bpf_skb_load_bytes(skb, l4, tcp, 20) < 0)
        return stripe_to_lagd(skb);
    __u32 thl = (tcp[12] >> 4) * 4;
    if (thl < 20 || l4 + thl > end || (tcp[13] & (TCP_FIN | TCP_SYN | TCP_RST)))
        return stripe_to_lagd(skb);
    __u32 payload = end - l4 - thl;
    if (payload == 0)
        return stripe_deliver(skb, t, port);
    key[8] = (__u32)be16(&tcp[0]) | (__u32)be16(&tcp[2]) << 16;
    __u32 seq = be32(&tcp[4]);
    __u32 slot = stripe_rx_slot(key);
    struct stripe_rx *e = bpf_map_lookup_elem(&lagd_stripe_rx, &slot);
    if (!e)
        return stripe_to_lagd(skb);
    __u64 w = *(volatile __u64 *)&e->word;
    if (((w >> STRIPE_RX_STATE_SHIFT) & STRIPE_RX_STATE_MASK) != STRIPE_RX_KERNEL)
        return stripe_to_lagd(skb);
    #pragma unroll
    for (int i = 0; i < 10; i++)
        if (e->key[i] != key[i])
            return stripe_to_lagd(skb);
    __s32 ahead = (__s32)(seq - (__u32)w);
    if (ahead == 0) {
        __u64 next = (w & ~0xffffffffull) | (__u32)(seq + payload);
        if (__sync_val_compare_and_swap(&e->word, w, next) != w)
            return stripe_to_lagd(skb);
        e->last_ns = bpf_ktime_get_ns();
        __sync_fetch_and_add(&e->delivered, 1);
        __sync_fetch_and_add(&e->bytes, payload);
        return stripe_deliver(skb, t, port);
    }
    if (ahead < 0)
        return stripe_deliver(skb, t, port);
    // Ahead of next while the flow is moving: round again (see STRIPE_HOLD_NS).
    if (bpf_ktime_get_ns() - e->last_ns < (__u64)STRIPE_HOLD_NS) {
        __sync_fetch_and_add(&e->held, 1);
        return bpf_redirect(t->ifindex[port & (MAX_MEMBERS - 1)], BPF_F_INGRESS);
    }
    // A hole that lasted: lagd takes the flow (same next, next generation) and orders from
    // here.
    __u64 gen = ((w >> STRIPE_RX_GEN_SHIFT) + 1) & STRIPE_RX_GEN_MASK;
    __u64 lagd =
        (__u64)STRIPE_RX_LAGD << STRIPE_RX_STATE_SHIFT | gen << STRIPE_RX_GEN_SHIFT | (__u32)w;
    __sync_val_compare_and_swap(&e->word, w, lagd);
    return stripe_to_lagd(skb);
}

// The member the frame came in on (recorded in cb[1]), NO_PORT if none of the table's.
INLINE __u32 member_port(struct __sk_buff *skb, const struct table *t) {
    __u32 port = NO_PORT, in = skb->ingress_ifindex;
    // The table's unused entries are 0, which is no interface: one compare per entry.
    if (in != 0) {
        #pragma unroll
        for (__u32 i = 0; i < MAX_MEMBERS; i++) {
            if (t->ifindex[i] == in) {
                port = i;
                break;
            }
        }
    }
    skb->cb[1] = port;
    return port;
}

// A slow-protocol frame (LACP, Marker) on a member: to lagd's socket if it comes from the
// member's confirmed partner or the member's policer (GCRA, per CPU) lets it through.
INLINE int slow_frame(struct __sk_buff *skb, const struct table *t, const __u8 *eth) {
    __u32 port = member_port(skb, t);
    if (port >= MAX_MEMBERS)
        return TC_ACT_OK;
    const __u8 *p = t->slow_partner[port & (MAX_MEMBERS - 1)];
    if ((p[0] | p[1] | p[2] | p[3] | p[4] | p[5]) && eth[6] == p[0] && eth[7] == p[1] &&
        eth[8] == p[2] && eth[9] == p[3] && eth[10] == p[4] && eth[11] == p[5])
        return TC_ACT_OK;
    struct port_counters *c = bpf_map_lookup_elem(&lagd_ports, &port);
    if (!c)
        return TC_ACT_OK;
    __u64 now = bpf_ktime_get_ns();
    __u64 tat = c->slow_tat > now ? c->slow_tat : now;
    if (tat - now > SLOW_BURST * SLOW_INTERVAL_NS) {
        c->slow_policed++;
        return TC_ACT_SHOT;
    }
    c->slow_tat = tat + SLOW_INTERVAL_NS;
    return TC_ACT_OK;
}

// balance-tlb (lagd_proto's Tlb::receive_fixup): a unicast frame for a member's MAC reaches the
// host with the bond's MAC as destination (the host takes only frames to its own).
INLINE void tlb_destination(struct __sk_buff *skb, const struct table *t, const __u8 *eth) {
    if ((eth[0] & 1) || mac_eq(eth, t->bond_mac))
        return;
    #pragma unroll
    for (__u32 i = 0; i < MAX_MEMBERS; i++) {
        if (t->ifindex[i] != 0 && mac_eq(eth, t->wire_mac[i])) {
            bpf_skb_store_bytes(skb, 0, t->bond_mac, 6, 0);
            return;
        }
    }
}

// An untagged IPv6 frame at offset 14 is a neighbour solicitation or advertisement (ICMPv6
// types 135 and 136 right after the fixed header, as neighbour discovery sends them).
INLINE int is_ndisc(struct __sk_buff *skb) {
    __u8 next, type;
    return bpf_skb_load_bytes(skb, 14 + 6, &next, 1) == 0 && next == 58 &&
           bpf_skb_load_bytes(skb, 14 + 40, &type, 1) == 0 && (type == 135 || type == 136);
}

// Stripe: whether a frame from a member goes straight to the host as in the other modes (0),
// or is lagd's or the stripe receiver's (1, and 2 for ARP and neighbour discovery, which
// go to the host while lagd is away): stripe's own frames (numbered, hellos), ARP,
// neighbour discovery with ns_ip6_target (untagged, as in the other modes), and TCP (IPv4,
// fragments too, and IPv6 whose next header is TCP), which the sender striped. Every other
// frame (UDP, ICMP, IPv6 behind extension headers, other EtherTypes) came on its flow's one
// member (the sender's flow_slot) and needs no ordering. A tag the driver took out of the
// frame leaves the inner EtherType at 12; one left in the frame is looked behind (a second
// one is not: the sender stripes TCP behind one tag at most).
INLINE int stripe_ordered(struct __sk_buff *skb, const struct table *t, const __u8 *eth) {
    __u16 proto = be16(&eth[12]);
    __u32 l3 = 14;
    if (proto == ETH_P_8021Q || proto == ETH_P_8021AD) {
        __u8 inner[2];
        if (bpf_skb_load_bytes(skb, 16, inner, 2) < 0)
            return 0;
        proto = be16(inner);
        l3 = 18;
    }
    if (proto == ETH_P_STRIPE)
        return 1;
    if (proto == ETH_P_ARP)
        return 2;
    __u8 next;
    if (proto == ETH_P_IP)
        return bpf_skb_load_bytes(skb, l3 + 9, &next, 1) < 0 || next == 6;
    if (proto == ETH_P_IPV6) {
        if (bpf_skb_load_bytes(skb, l3 + 6, &next, 1) < 0 || next == 6)
            return 1;
        return l3 == 14 && !skb->vlan_present && (t->flags & FLAG_NDISC_TO_LAGD) && is_ndisc(skb)
                   ? 2
                   : 0;
    }
    return 0;
}

// Whether the frame is a copy of one another member delivered lately (enum dedup). The first
// copy is remembered, the next n_usable - 1 within the window are copies, and the last of them
// forgets it; an identical frame after them, or after the window, is a new one (a
// retransmission, or the next of a sender's identical frames). Two copies on two CPUs at once
// may both pass: the host then gets one twice, as without this. A frame too short to be a
// whole Ethernet header passes.
INLINE int duplicate(struct __sk_buff *skb, const struct table *t) {
    __u64 words[DEDUP_HEAD / 8];
    __builtin_memset(words, 0, sizeof(words));
    __u32 len = skb->len;
    __u32 n = len < DEDUP_HEAD ? len : DEDUP_HEAD;
    // Checked again after the compiler lost sight of it, for the verifier to see the bounds.
    asm volatile("" : "+r"(n));
    if (n < 14 || n > DEDUP_HEAD || bpf_skb_load_bytes(skb, 0, words, n) < 0)
        return 0;
    __u64 h = t->dedup_seed ^ (__u64)len << 32 ^ (skb->vlan_present ? 0x10000 | skb->vlan_tci : 0);
    #pragma unroll
    for (int i = 0; i < DEDUP_HEAD / 8; i++) {
        h = (h ^ words[i]) * DEDUP_MUL;
        h ^= h >> 29;
    }
    h ^= h >> 32;
    h *= DEDUP_MUL;
    h ^= h >> 29;
    __u32 key = h & (DEDUP_SLOTS - 1);
    struct dedup_slot *slot = bpf_map_lookup_elem(&lagd_dedup, &key);
    if (!slot)
        return 0;
    // The exact clock: the coarse one moves a tick at a time, and where a tick is 10 ms (HZ
    // 100, the user-mode-Linux guests' kernels) two copies microseconds apart on either side
    // of one would lie a whole window apart.
    __u64 now = bpf_ktime_get_ns();
    if (slot->copies && slot->sum == h && now - slot->at < DEDUP_WINDOW_NS &&
        slot->copies < t->n_usable) {
        // The last copy due empties the slot: an identical frame after it is new.
        __u32 copies = slot->copies + 1;
        slot->copies = copies < t->n_usable ? copies : 0;
        return 1;
    }
    // A new frame (or one whose copy was lost and whose window is over, or the bond has fewer
    // members now).
    if (t->n_usable > 1) {
        slot->sum = h;
        slot->at = now;
        slot->copies = 1;
    }
    return 0;
}

// A frame a member may deliver goes to the TAP's ingress (the host stack), one it may not (or,
// with FLAG_DEDUP, a copy of one delivered) is dropped; all counted. `dedup` is a constant:
// 0 where the rule cannot be broadcast's (stripe), so that branch carries no copy of
// duplicate().
INLINE int member_deliver(struct __sk_buff *skb, const struct table *t, __u32 port,
                          const __u8 *eth, const int dedup) {
    struct port_counters *c = bpf_map_lookup_elem(&lagd_ports, &port);
    __u8 ok = eth[0] & 1 ? t->rx_multicast[port & (MAX_MEMBERS - 1)]
                         : t->rx_unicast[port & (MAX_MEMBERS - 1)];
    if (!ok) {
        if (c)
            c->rx_dropped++;
        return TC_ACT_SHOT;
    }
    if (dedup && (t->flags & FLAG_DEDUP) && duplicate(skb, t)) {
        if (c)
            c->rx_duplicates++;
        return TC_ACT_SHOT;
    }
    if (c) {
        c->rx_packets++;
        c->rx_bytes += skb->len;
    }
    if (t->flags & FLAG_TLB)
        tlb_destination(skb, t, eth);
    return bpf_redirect(t->tap_ifindex, BPF_F_INGRESS);
}

// Both member programs; `receiver` is a constant, so each keeps only its own stripe branch.
INLINE int member_ingress(struct __sk_buff *skb, const int receiver) {
    // Broadcast's clone for this member, handed to its receive path by the TAP's program:
    // it leaves by the member now, whatever the table says by then (a frame from the wire
    // never carries the mark: the kernel clears marks between namespaces, and a NIC sets
    // none). Where the kernel cleared the mark on the way here too, the clone's control
    // block still holds the tag (a NIC's frames start with a zeroed one).
    if (skb->mark == DEFERRED_COPY ||
        (skb->cb[4] == DEFERRED_COPY && skb->cb[3] == (DEFERRED_COPY ^ skb->ifindex))) {
        skb->mark = 0;
        skb->cb[3] = 0;
        skb->cb[4] = 0;
        return bpf_redirect(skb->ifindex, 0);
    }
    struct table *t = current_table();
    if (!t || t->rule == RULE_LAGD)
        return TC_ACT_OK;
    if (t->rule == RULE_STRIPE) {
        __u32 port = member_port(skb, t);
        if (port >= MAX_MEMBERS)
            return stripe_to_lagd(skb);
        __u8 eth[14];
        if (bpf_skb_load_bytes(skb, 0, eth, 14) < 0)
            return stripe_to_lagd(skb);
        // A slow-protocol frame passes as it is, to lagd's socket (the receiver passes it
        // too).
        if (!skb->vlan_present && be16(&eth[12]) == ETH_P_SLOW)
            return TC_ACT_OK;
        int ordered = stripe_ordered(skb, t, eth);
        // ARP and neighbour discovery go to the host while lagd is away, as in the other modes.
        if (!ordered || (ordered == 2 && lagd_away()))
            return member_deliver(skb, t, port, eth, 0);
        if (receiver)
            return stripe_rx(skb, t, port);
        // No receiver on this kernel: lagd orders the flows.
        return stripe_to_lagd(skb);
    }
    // The Ethernet header straight from the packet when its linear data holds it (it always
    // does at ingress, where the MAC header was pulled); a copy otherwise.
    __u8 copy[14] __attribute__((aligned(4))); // aligned: the EtherType is read as a word
    const __u8 *eth = (const __u8 *)(long)skb->data;
    if (eth + 14 > (const __u8 *)(long)skb->data_end) {
        if (bpf_skb_load_bytes(skb, 0, copy, 14) < 0)
            return TC_ACT_SHOT;
        eth = copy;
    }
    // The EtherType as it lies in the frame (network order), one load.
    __u16 type = *(const __u16 *)(eth + 12);
    // LACPDUs and Markers go to lagd's slow-protocols socket, within the policer's rate.
    if (type == __builtin_bswap16(ETH_P_SLOW) && !skb->vlan_present)
        return slow_frame(skb, t, eth);
    // With the ARP monitor, ARP goes to lagd's socket too (the member's own stack ignores it:
    // arp_ignore=8). While lagd is away (lagd_away) it goes to the host, as without the
    // monitor, and so does neighbour discovery with ns_ip6_target.
    if ((t->flags & FLAG_ARP_TO_LAGD) && type == __builtin_bswap16(ETH_P_ARP) &&
        !skb->vlan_present && !lagd_away())
        return TC_ACT_OK;
    // With ns_ip6_target, neighbour solicitations and advertisements go there too (the
    // monitor validates them; the member's IPv6 is off, so its stack drops them).
    if ((t->flags & FLAG_NDISC_TO_LAGD) && type == __builtin_bswap16(ETH_P_IPV6) &&
        !skb->vlan_present && is_ndisc(skb) && !lagd_away())
        return TC_ACT_OK;
    __u32 port = member_port(skb, t);
    if (port >= MAX_MEMBERS)
        return TC_ACT_SHOT;
    return member_deliver(skb, t, port, eth, 1);
}

SEC("tcx/ingress")
int lagd_member_ingress(struct __sk_buff *skb) {
    if (orphaned(ALIVE_MEMBER_DROPPED))
        return TC_ACT_SHOT;
    return member_ingress(skb, 1);
}

SEC("tcx/ingress_no_cas")
int lagd_member_ingress_no_cas(struct __sk_buff *skb) {
    if (orphaned(ALIVE_MEMBER_DROPPED))
        return TC_ACT_SHOT;
    return member_ingress(skb, 0);
}
