//! Packets and bytes ([`Load`]).

/// Packets and bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Load {
    /// Packets.
    pub packets: u64,
    /// Bytes.
    pub bytes: u64,
}

impl Load {
    /// Adds, saturating (a flow list may claim any counts).
    #[inline(always)]
    pub(super) fn add(&mut self, packets: u64, bytes: u64) {
        self.packets = self.packets.saturating_add(packets);
        self.bytes = self.bytes.saturating_add(bytes);
    }
}
