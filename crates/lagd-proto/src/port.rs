//! The handles every layer of lagd-proto shares: a member port, an aggregator, and a frame to
//! send. They sit at the bottom of the crate: this module imports nothing of lagd-proto, so any
//! module can name a member without importing the bond, the LACP engine or the balancers.

use core::fmt;

/// A member port: its position in the bond's enslave order (also the index of its per-port
/// arrays in every engine).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PortId(pub u16);

impl PortId {
    /// The index into per-port arrays.
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for PortId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// An aggregator of a bond. Ids are 1, 2, … in `add_port` order (one aggregator per port).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct AggregatorId(pub u16);

impl fmt::Display for AggregatorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A frame an engine wrote into the caller's buffer: send `buf[..len]` on `port`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// The member to send it on.
    pub port: PortId,
    /// The frame's length in the buffer.
    pub len: usize,
}
