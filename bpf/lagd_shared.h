// SPDX-License-Identifier: MIT OR Apache-2.0
//
// What lagd's kernel programs (bpf/fastpath.c) and lagd share: the structures in the maps
// both sides read or write, the states of stripe's receive table, and the constants and
// numbers either side must agree on. Nothing else belongs here; what only the programs use
// stays in fastpath.c.
//
// bpf/build.py compiles this header on its own, reads the compiler's layout back (BTF) and
// generates crates/lagd-sys/src/fastpath/abi.rs from it: a #[repr(C)] Rust struct per
// structure, with the compiler's size and every field's offset asserted at compile time and
// its byte encoding at those offsets, and a u32 constant per enumerator. CI runs
// `python3 bpf/build.py --check`, which fails when the two differ.
//
// Rules for this file (build.py refuses what breaks them): every constant is an enumerator of
// a named enum, not a macro (BTF holds no macros), with a value that fits a u32; every
// structure is named and holds only integers and arrays of them (no bit fields, pointers or
// unions). A comment on a field's or enumerator's line, or the comment lines right above a
// structure or enum, becomes its documentation in Rust.

#ifndef LAGD_SHARED_H
#define LAGD_SHARED_H

#include <linux/types.h>

// The table's dimensions.
enum lagd_limits {
    MAX_MEMBERS = 16, // members a table holds (the kernel bond has no such limit)
    NO_PORT = 0xff,   // "no member" in the table's port fields and in cb[1]
};

// The tag on broadcast's clones while they go round a member's receive path (the TAP's
// program hands them there, the members' program sends them out): `skb->mark`, and, for the
// kernels that clear the mark when a frame enters a receive path within its namespace (5.10
// as Debian 11 first shipped it: `skb_scrub_packet` always cross-namespace there), `cb[4]`
// with `cb[3]` the same value XOR the member's interface index.
enum lagd_marks {
    DEFERRED_COPY = 0x6c616764, // 'lagd'; never on a frame from the wire
};

// How the TAP's program chooses a host frame's member (`table.rule`).
enum rule {
    RULE_LAGD = 0,    // every frame to lagd (the userspace path decides)
    RULE_MODULO = 1,  // usable[hash % n_usable]
    RULE_BUCKETS = 2, // bucket[bucket(seed, hash)]
    RULE_ACTIVE = 3,  // the active member
    RULE_ALL = 4,     // a copy on every usable member (broadcast)
    RULE_STRIPE = 5,  // TCP through bucket[] as slots (STRIPE_SLOT_SHIFT); the rest by flow
    RULE_RR = 6,      // balance-rr: rr_next[turn % rr_members], a turn per rr_packets frames
};

// The hash (`table.policy`): xmit_hash_policy, the kernel's numbers, then lagd's own.
enum policy {
    POLICY_LAYER2 = 0,
    POLICY_LAYER34 = 1,
    POLICY_LAYER23 = 2,
    POLICY_ENCAP23 = 3,
    POLICY_ENCAP34 = 4,
    POLICY_VLAN_SRCMAC = 5,
    POLICY_OVS_SLB = 16, // Open vSwitch balance-slb: hash_mac(source MAC, VLAN, 0)
    POLICY_OVS_TCP = 17, // Open vSwitch balance-tcp: its userspace datapath's 5-tuple hash
    POLICY_ALB = 18,     // balance-alb (with FLAG_TLB): byte-XOR of the IP destination
};

// Bits of `table.flags`.
enum table_flags {
    FLAG_ARP_TO_LAGD = 1, // the members' untagged ARP goes to lagd (the ARP monitor's socket)
    FLAG_TLB = 2,         // balance-tlb: hash only unicast IP (rest on the active member); MACs per member
    FLAG_NDISC_TO_LAGD = 4, // the members' untagged neighbour solicitations and advertisements go to
                            // lagd (the IPv6 half of the ARP monitor, ns_ip6_target)
    FLAG_DEFER_TCP_CLONES = 8, // broadcast: a TCP segment's clones go round their member's receive
                               // path before they leave (the segment itself arrives first)
    FLAG_DEDUP = 16, // broadcast_dedup: a frame another member delivered lately is not delivered again
};

// broadcast_dedup: the far end sends every frame on each link, so each reaches the host once per
// member. A member delivers a frame unless a frame with the same sum (below) arrived less than
// DEDUP_WINDOW_NS before and fewer copies of it than the bond has usable members arrived since
// (lagd_proto's bond::dedup does the same on lagd's path, where it has the module
// documentation, and also takes a frame within 256 of the first for a copy: lagd judges frames
// when it reads them, not when they arrived).
// The sum of a frame: h = seed ^ len << 32 ^ tag (the accelerated VLAN tag with bit 16 set, 0
// for none); then for each of the 12 little-endian 64-bit words of its first DEDUP_HEAD bytes
// (zeros past its end): h = (h ^ word) * M, h ^= h >> 29; then h ^= h >> 32, h *= M,
// h ^= h >> 29, and that is the sum. M is 0x9e3779b97f4a7c15, 2^64 over the golden ratio
// (DEDUP_MUL in fastpath.c, dedup::MUL in lagd_proto). A frame's slot in lagd_dedup is
// sum % DEDUP_SLOTS; a frame that lands on a slot whose copies are still due replaces it
// (those copies then reach the host, as without this).
enum dedup {
    DEDUP_HEAD = 96,            // bytes of the frame summed (headers to TCP's timestamps in IPv6)
    DEDUP_WINDOW_NS = 10000000, // 10 ms: how long a frame's copies are waited for
    DEDUP_SLOTS = 8192,         // slots of lagd_dedup (a power of two)
};

// The distribution, one value of the inner map (swapped whole through the outer map
// lagd_tables). Written by lagd only; read by both programs.
struct table {
    __u32 rule;                        // RULE_*
    __u32 policy;                      // POLICY_*
    __u32 seed;                        // the bucket seed
    __u32 n_usable;                    // entries of usable[]
    __u32 tap_ifindex;                 // the TAP's interface (where members deliver)
    __u32 active;                      // port id, NO_PORT for none
    __u32 ifindex[MAX_MEMBERS];        // port id -> member ifindex (0: none)
    __u8 usable[MAX_MEMBERS];          // usable port ids in order
    __u8 bucket[256];                  // bucket -> port id (NO_PORT: none); stripe's slots
    __u8 rx_unicast[MAX_MEMBERS];      // 1: the member's unicast frames reach the host
    __u8 rx_multicast[MAX_MEMBERS];    // 1: the member's broadcast and multicast reach the host
    __u32 flags;                       // FLAG_*
    __u8 slow_partner[MAX_MEMBERS][6]; // the member's confirmed LACP partner's MAC (0: none)
    __u32 rr_packets;                  // balance-rr: packets_per_slave (0: a random member per frame)
    __u32 rr_members;                  // balance-rr: the bond's members, usable or not
    __u8 rr_next[MAX_MEMBERS];         // balance-rr: position -> the first usable member from there on
    __u8 bond_mac[6];                  // FLAG_TLB: the bond's MAC
    __u8 wire_mac[MAX_MEMBERS][6];     // FLAG_TLB: the member's MAC as the network sees it
    __u64 dedup_seed;                  // FLAG_DEDUP: the sums' key (random per lagd)
};

// The keys of lagd_alive, an array of __u64: lagd's heartbeat, and what the programs dropped
// because it ran out. lagd writes ALIVE_UNTIL only (a deadline: its clock now plus the orphan
// bound, renewed from its loop); the programs count the rest. They compare the deadline with
// CLOCK_MONOTONIC as of the last tick, so they take lagd for gone up to a tick after it.
enum alive_key {
    ALIVE_UNTIL = 0,          // CLOCK_MONOTONIC ns after which the programs take lagd for gone
    ALIVE_TAP_DROPPED = 1,    // host frames the TAP's program dropped after the deadline
    ALIVE_MEMBER_DROPPED = 2, // frames the members' program dropped after the deadline
    ALIVE_ENTRIES = 3,        // entries of lagd_alive
};

// The heartbeat's times, in milliseconds. lagd writes its clock now plus HEARTBEAT_BOUND_MS
// (every 200 ms). A deadline less than HEARTBEAT_BOUND_MS - HEARTBEAT_AWAY_MS away means no
// lagd has beaten for HEARTBEAT_AWAY_MS: lagd is away (killed or restarting), and the frames
// only lagd handles while it runs (the host's ARP, neighbour discovery, IGMP and MLD; with the
// ARP or NS monitor, the members' ARP or neighbour discovery) take the data's way instead, so
// that neighbours keep resolving while the data goes on.
enum heartbeat_ms {
    HEARTBEAT_BOUND_MS = 3000, // from the last heartbeat to the deadline
    HEARTBEAT_AWAY_MS = 1000,  // without a heartbeat for this long, lagd is away
};

// Per member and CPU, one value of lagd_ports (MAX_MEMBERS + 1 entries, the last for frames
// no member could take). Written by the programs; lagd reads and sums them over CPUs.
struct port_counters {
    __u64 tx_packets;   // frames the TAP's program sent on the member
    __u64 tx_bytes;     // their bytes
    __u64 rx_packets;   // frames the member's program delivered to the host
    __u64 rx_bytes;     // their bytes
    __u64 rx_dropped;   // frames the member's program dropped (the member may not deliver them)
    __u64 rx_duplicates; // frames it dropped as copies of one another member delivered (FLAG_DEDUP)
    __u64 slow_policed; // slow-protocol frames dropped here (not from the partner, over the rate)
    __u64 slow_tat;     // the slow-protocol policer's theoretical arrival time (ns)
};

// Per bucket and CPU, one value of lagd_buckets: what the rebalancer reads. Written by the
// TAP's program; lagd reads it.
struct bucket_load {
    __u64 bytes;   // bytes sent through the bucket
    __u64 last_ns; // when the bucket last sent (CLOCK_MONOTONIC ns, 0: never)
};

// Stripe's sender: bytes sent through one slot of `table.bucket` before the next
// (lagd_proto::stripe::tx::SLOT_BYTES), and the flow slots of its receive table
// (lagd_proto::stripe::tcp::KERNEL_SLOTS).
enum stripe_dims {
    STRIPE_SLOT_SHIFT = 16, // log2 of the bytes per slot
    STRIPE_RX_SLOTS = 1024, // entries of lagd_stripe_rx
};

// How long stripe's receive side holds a TCP segment that overtook another (fastpath.c,
// stripe_rx: it goes round its member's queue while its flow delivered within this long),
// in ns. lagd's tests judge the program's rounds by it.
enum stripe_hold {
    STRIPE_HOLD_NS = 100000, // 100 us
};

// Stripe's receive side, one entry of lagd_stripe_rx per TCP flow slot
// (lagd_proto::stripe::tcp::FlowKey's kernel_slot): the program delivers a flow's segment when
// it is the next in sequence and lagd does not hold the flow, so the host sees the flow in
// order whoever delivers. `word` is shared with lagd through a mapping of the array and only
// changed by compare-and-swap: bits 0-31 the next sequence number the host expects, 32-47 a
// generation (every change of state or owner counts), 48-55 the state. The program only writes
// a word in state KERNEL: it advances `next` by what it delivered, or hands the flow to lagd
// (state LAGD) on a segment ahead of `next`; lagd hands it back (KERNEL) when it holds
// nothing, and claims free or long-idle slots for new flows (CLAIM while it writes the key).
enum stripe_rx_state {
    STRIPE_RX_FREE = 0,   // no flow
    STRIPE_RX_KERNEL = 1, // the program delivers the flow
    STRIPE_RX_LAGD = 2,   // lagd holds the flow; the program passes it all on
    STRIPE_RX_CLAIM = 3,  // lagd writes the key; the program keeps off
};

// Where the parts of `stripe_rx.word` lie (the next sequence number is bits 0-31).
enum stripe_rx_word {
    STRIPE_RX_GEN_SHIFT = 32,   // the generation's lowest bit
    STRIPE_RX_GEN_MASK = 0xffff, // the generation, shifted down
    STRIPE_RX_STATE_SHIFT = 48, // the state's lowest bit
    STRIPE_RX_STATE_MASK = 0xff, // the state, shifted down
};

// One flow slot of stripe's receive table (see enum stripe_rx_state). lagd maps the array and
// reads and writes its entries atomically, the program with atomics where lagd writes too.
struct stripe_rx {
    __u64 word;      // next, generation and state (enum stripe_rx_word)
    __u64 last_ns;   // when the program last delivered (or lagd took or gave the flow)
    __u32 key[10];   // FlowKey's kernel words: source, destination, ports, tag
    __u64 delivered; // segments the program delivered
    __u64 bytes;     // their payload bytes
    __u64 held;      // rounds of segments ahead of `next` put back on their member's queue
};

#endif
