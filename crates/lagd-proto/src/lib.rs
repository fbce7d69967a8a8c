//! lagd's pure protocol core.
//!
//! This crate **never makes a syscall, never reads the clock and never spawns a thread**. Time,
//! when a component needs it, is passed in by the caller; frames are byte slices the caller owns.
//! That keeps every decision lagd makes testable without a kernel, and lets the planner run the
//! very code the daemon runs.
//!
//! # Overview
//! - [`wire`]: zero-copy views and `Repr`s over the frame formats lagd reads or writes:
//!   Ethernet with 802.1Q/802.1ad tags, ARP, IPv4, IPv6, the transport headers the hash policies
//!   look at, IGMP, MLD and neighbour discovery (what the bond learns from and announces), GRE,
//!   and the slow protocols (LACPDU and Marker PDU).
//! - [`capture`]: capture files: streaming pcap/pcapng reading whose errors name the byte
//!   offset, and pcap/pcapng writing.
//! - [`hash`]: every transmit hash policy, bit-exact with the Linux bonding driver, plus the
//!   Open vSwitch `balance-slb` and `balance-tcp` hashes, and the member choice.
//! - [`stripe`]: stripe mode, for when both ends run lagd: one stream spread over every member
//!   by speed and put back in order at the receiver (sequence header, hellos, reorder buffer,
//!   software TCP segmentation).
//! - [`balance`]: OVS-style 256-bucket distribution with load-based rebalancing, capacity
//!   weighting and flowlet-safe moves.
//!
//! # Example: emit and parse a LACPDU
//! ```
//! use lagd_proto::wire::slow::{LacpRepr, LacpInfo, PortState};
//! use lagd_proto::wire::EthernetAddress;
//!
//! let repr = LacpRepr {
//!     actor: LacpInfo {
//!         system_priority: 65535,
//!         system: EthernetAddress([0x02, 0, 0, 0, 0, 1]),
//!         key: 15,
//!         port_priority: 255,
//!         port: 1,
//!         state: PortState::ACTIVITY | PortState::TIMEOUT | PortState::AGGREGATION,
//!     },
//!     ..LacpRepr::default()
//! };
//! let mut frame = vec![0u8; repr.frame_len()];
//! repr.emit_frame(EthernetAddress([0x02, 0, 0, 0, 0, 1]), &mut frame);
//! assert_eq!(LacpRepr::parse_frame(&frame).unwrap(), repr);
//! ```
#![forbid(unsafe_code)]

pub mod balance;
pub mod bond;
pub mod capture;
pub mod hash;
pub mod lacp;
pub mod plan;
pub mod port;
pub mod stripe;
pub mod time;
pub mod wire;
