//! lagd's heartbeat to its programs: the `lagd_alive` map, held by descriptor.
//!
//! Both programs read a deadline from it at their entry and, once it has passed, drop every
//! frame and count it there (`bpf/fastpath.c`, `orphaned`). The lagd that loaded them renews
//! it from its loop. A descriptor of the map outlives that lagd in the service manager's
//! store, so the next lagd can renew the deadline of programs it is about to replace
//! ([`Heartbeat::adopt`]) and read what they dropped while no lagd ran, with no capability
//! (looking a map up by its id needs `CAP_SYS_ADMIN`; a descriptor handed over does not).

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use super::map::{map_create, map_lookup, map_update};
use super::program::MapDef;
use super::{abi, programs};
use crate::isolate::{BpfInfo, object_info};

/// The map's name, as the kernel reports it.
const NAME: &[u8] = b"lagd_alive";

/// Frames lagd's programs dropped because lagd's heartbeat ran out (`lagd_alive`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OrphanDrops {
    /// Host frames the TAP's program dropped.
    pub tap: u64,
    /// Frames the members' program dropped.
    pub members: u64,
}

/// `struct bpf_map_info` up to its name.
#[repr(C, align(8))]
#[derive(Default)]
pub(super) struct MapInfo {
    map_type: u32,
    id: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    name: [u8; 16],
}

// SAFETY: integer fields only, `struct bpf_map_info`'s prefix.
unsafe impl BpfInfo for MapInfo {}

impl MapInfo {
    /// Its name, up to the first NUL.
    fn name(&self) -> &[u8] {
        self.name.split(|&b| b == 0).next().unwrap_or(&[])
    }

    /// Whether this is a `lagd_alive` map as the programs' source defines it.
    pub(super) fn is_heartbeat(&self) -> bool {
        let MapDef {
            map_type,
            key_size,
            value_size,
            max_entries,
            ..
        } = programs::ALIVE_DEF;
        self.name() == NAME
            && (
                self.map_type,
                self.key_size,
                self.value_size,
                self.max_entries,
            ) == (map_type, key_size, value_size, max_entries)
    }
}

/// One set of programs' `lagd_alive` map: the deadline they forward until and what they
/// dropped after it.
#[derive(Debug)]
pub struct Heartbeat {
    pub(super) map: OwnedFd,
}

impl Heartbeat {
    /// Creates the map with no deadline (`u64::MAX`): the programs forward until the owner sets
    /// one.
    pub(super) fn create() -> io::Result<Self> {
        let map = map_create(&programs::ALIVE_DEF, "lagd_alive", None)?;
        map_update(&map, abi::ALIVE_UNTIL, &u64::MAX.to_ne_bytes())?;
        Ok(Self { map })
    }

    /// Takes `fd`, a descriptor of another lagd's `lagd_alive` (from the service manager's
    /// store, or a planned upgrade's handover).
    ///
    /// # Errors
    /// `InvalidInput` when `fd` is not a map of that name and shape; `bpf()` errors reading
    /// its information (`EINVAL`: not a BPF object at all).
    pub fn adopt(fd: OwnedFd) -> io::Result<Self> {
        let mut info = MapInfo::default();
        object_info(fd.as_fd(), &mut info)?;
        if !info.is_heartbeat() {
            let name = String::from_utf8_lossy(info.name()).into_owned();
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("map {name:?} is not lagd's heartbeat map"),
            ));
        }
        Ok(Self { map: fd })
    }

    /// Sets the deadline: the programs forward until `until_ns` (`CLOCK_MONOTONIC`
    /// nanoseconds, [`super::monotonic_ns`]'s clock, which they read as of the last tick where
    /// the kernel lets them: up to a tick after the deadline) and drop every frame after it,
    /// counted in [`Heartbeat::orphan_drops`].
    pub fn set_until(&self, until_ns: u64) -> io::Result<()> {
        map_update(&self.map, abi::ALIVE_UNTIL, &until_ns.to_ne_bytes())
    }

    /// Moves the deadline to `until_ns` if it has not passed at `now_ns` (same clock), and says
    /// whether it did: programs that already took their lagd for gone stay stopped (a lagd
    /// that takes them over late does not revive them with a table nobody kept), the others
    /// forward on.
    pub fn extend_if_live(&self, now_ns: u64, until_ns: u64) -> io::Result<bool> {
        if self.until()? <= now_ns {
            return Ok(false);
        }
        self.set_until(until_ns)?;
        Ok(true)
    }

    /// The deadline as the programs read it.
    pub fn until(&self) -> io::Result<u64> {
        let mut v = [0u8; 8];
        map_lookup(&self.map, abi::ALIVE_UNTIL, &mut v)?;
        Ok(u64::from_ne_bytes(v))
    }

    /// Frames the programs dropped because the deadline had passed (since they were loaded).
    pub fn orphan_drops(&self) -> io::Result<OrphanDrops> {
        let mut tap = [0u8; 8];
        let mut members = [0u8; 8];
        map_lookup(&self.map, abi::ALIVE_TAP_DROPPED, &mut tap)?;
        map_lookup(&self.map, abi::ALIVE_MEMBER_DROPPED, &mut members)?;
        Ok(OrphanDrops {
            tap: u64::from_ne_bytes(tap),
            members: u64::from_ne_bytes(members),
        })
    }
}

impl AsFd for Heartbeat {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.map.as_fd()
    }
}

#[cfg(test)]
mod test {
    use super::*;

    /// Only a map named `lagd_alive` of the programs' shape is adopted. Needs root (`bpf()`).
    #[test]
    fn adopt_takes_only_a_heartbeat_map() {
        assert!(
            crate::lock::effective_uid() == 0,
            "creating BPF maps needs root: run the tests as root (CI does)"
        );
        let h = Heartbeat::create().expect("create lagd_alive");
        assert_eq!(h.until().unwrap(), u64::MAX, "no deadline at first");
        let dup = h.as_fd().try_clone_to_owned().unwrap();
        let adopted = Heartbeat::adopt(dup).expect("lagd_alive is adopted");
        adopted.set_until(42).unwrap();
        assert_eq!(h.until().unwrap(), 42, "one map through both descriptors");

        let ports = map_create(&programs::PORTS_DEF, "lagd_ports", None).unwrap();
        let e = Heartbeat::adopt(ports).expect_err("lagd_ports is no heartbeat");
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
        assert!(e.to_string().contains("\"lagd_ports\""), "{e}");

        // The name alone does not make it one: the shape must be the programs'.
        let def = MapDef {
            max_entries: programs::ALIVE_DEF.max_entries + 1,
            ..programs::ALIVE_DEF
        };
        let impostor = map_create(&def, "lagd_alive", None).unwrap();
        let e = Heartbeat::adopt(impostor).expect_err("another shape is no heartbeat");
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
    }
}
