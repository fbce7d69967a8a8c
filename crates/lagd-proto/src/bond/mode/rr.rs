//! balance-rr: the kernel's `bond_rr_gen_slave_id` and its walk to a usable member.

use crate::bond::member::Port;
use crate::bond::select::Selection;
use crate::port::PortId;
use crate::wire::ipv4::is_igmp;

/// balance-rr's counters.
#[derive(Debug, Clone)]
pub(crate) struct RoundRobin {
    packets_per_slave: u16,
    counter: u32,
    rng: u32,
}

impl RoundRobin {
    /// With `packets_per_slave` (0: a random member per frame).
    pub(crate) fn new(packets_per_slave: u16) -> Self {
        Self {
            packets_per_slave,
            counter: 0,
            rng: 0x9e37_79b9,
        }
    }

    /// `packets_per_slave`.
    pub(crate) fn packets_per_slave(&self) -> u16 {
        self.packets_per_slave
    }

    /// The member for `frame`; `None` when no member is usable.
    pub(crate) fn choose(
        &mut self,
        frame: &[u8],
        sel: &Selection,
        ports: &[Port],
    ) -> Option<PortId> {
        let first = *sel.usable.first()?;
        // IGMP always leaves on the active (first usable) member.
        if is_igmp(frame) {
            return Some(first);
        }
        let value = match self.packets_per_slave {
            0 => {
                // xorshift32: any member per frame, as the driver's prandom.
                let mut x = self.rng;
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                self.rng = x;
                x
            }
            1 => {
                let v = self.counter;
                self.counter = v.wrapping_add(1);
                v
            }
            n => {
                let v = self.counter;
                self.counter = v.wrapping_add(1);
                v / u32::from(n)
            }
        };
        let n = ports.len();
        let start = value as usize % n;
        (0..n)
            .map(|k| (start + k) % n)
            .find(|&i| ports[i].usable())
            .map(|i| PortId(i as u16))
    }
}
