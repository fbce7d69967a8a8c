//! Wire formats: zero-copy views over frames and `Repr`s that can be emitted.
//!
//! Every header follows one shape. `Packet<T: AsRef<[u8]>>` (or `Frame<T>`) is a view over a
//! buffer with getters; `new_checked` validates the length once, after which **no accessor
//! panics**. `new_unchecked` is for emitting into a buffer the caller sized with `buffer_len`.
//! A `Repr` holds only legal values, `parse`s from a checked view and `emit`s into a buffer of
//! exactly `buffer_len()` bytes without panicking.
//!
//! Parsing peer input never panics: malformed input is an [`Error`]. On-wire enumerations keep
//! values they do not know as `Unknown(raw)`, so nothing is rejected merely for being new.

pub mod arp;
mod common;
pub mod ethernet;
pub mod gre;
pub mod igmp;
pub mod ip;
pub mod ipv4;
pub mod ipv6;
pub mod l4;
pub mod mld;
pub mod ndisc;
pub mod slow;

pub use common::{Error, Result};
pub use ethernet::{EtherType, EthernetAddress, EthernetFrame, VlanTag};

pub(crate) use common::{be16, be32, enum_with_unknown, view_constructors};
