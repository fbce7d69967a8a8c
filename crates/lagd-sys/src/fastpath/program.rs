//! What the build records of a program: its instructions, and the maps it references.

/// A map as the program source defines it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MapDef {
    pub(crate) map_type: u32,
    pub(crate) key_size: u32,
    pub(crate) value_size: u32,
    pub(crate) max_entries: u32,
    pub(crate) map_flags: u32,
}

/// The maps the programs reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MapId {
    /// The array-of-maps holding the current table.
    Tables,
    /// Per-CPU counters per member.
    Ports,
    /// Per-CPU load per bucket.
    Buckets,
    /// Stripe's per-CPU byte count that picks the slot.
    StripeTx,
    /// Stripe's receive side: per TCP flow slot, who delivers and the next sequence number.
    StripeRx,
    /// lagd's heartbeat (a deadline) and the frames dropped once it passed.
    Alive,
    /// broadcast_dedup: the frames the members delivered lately.
    Dedup,
}

/// A program as built: its instructions and which `ld_imm64` names which map.
#[derive(Debug)]
pub(crate) struct Program {
    pub(crate) name: &'static str,
    pub(crate) maps: &'static [(usize, MapId)],
    pub(crate) insns: &'static [u64],
}
