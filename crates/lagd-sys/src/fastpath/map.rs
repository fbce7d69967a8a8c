//! The `bpf()` calls on maps the fast path makes: create one as the programs' source defines it,
//! write and read one element, read a whole array at once.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use super::program::MapDef;
use crate::isolate::{BPF_MAP_CREATE, addr, sys_bpf, sys_bpf_int};

const BPF_MAP_LOOKUP_ELEM: libc::c_int = 1;
const BPF_MAP_UPDATE_ELEM: libc::c_int = 2;
const BPF_MAP_LOOKUP_BATCH: libc::c_int = 24;
/// The kernel's internal "operation not supported" (`ENOTSUPP`, 524), which `bpf()` returns for
/// map types without batch operations.
const ENOTSUPP: i32 = 524;

/// The `BPF_MAP_CREATE` member of `union bpf_attr`, through `map_name`, then zeroes.
#[repr(C, align(8))]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
    rest: [u32; 9],
}

const _: () = assert!(size_of::<MapCreateAttr>() == 80);

/// The `BPF_MAP_*_ELEM` member of `union bpf_attr`.
#[repr(C, align(8))]
#[derive(Default)]
struct MapElemAttr {
    map_fd: u32,
    pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

const _: () = assert!(size_of::<MapElemAttr>() == 32);

/// The `BPF_MAP_*_BATCH` member of `union bpf_attr`.
#[repr(C, align(8))]
#[derive(Default)]
struct MapBatchAttr {
    in_batch: u64,
    out_batch: u64,
    keys: u64,
    values: u64,
    count: u32,
    map_fd: u32,
    elem_flags: u64,
    flags: u64,
}

const _: () = assert!(size_of::<MapBatchAttr>() == 56);

pub(super) fn fd_u32(fd: &OwnedFd) -> u32 {
    // Descriptors are non-negative.
    fd.as_raw_fd() as u32
}

pub(super) fn map_create(def: &MapDef, name: &str, inner: Option<&OwnedFd>) -> io::Result<OwnedFd> {
    let mut map_name = [0u8; 16];
    let n = name.len().min(15);
    map_name[..n].copy_from_slice(&name.as_bytes()[..n]);
    let mut attr = MapCreateAttr {
        map_type: def.map_type,
        key_size: def.key_size,
        value_size: def.value_size,
        max_entries: def.max_entries,
        map_flags: def.map_flags,
        inner_map_fd: inner.map_or(0, fd_u32),
        map_name,
        ..MapCreateAttr::default()
    };
    // SAFETY: `attr` is a `MapCreateAttr` for BPF_MAP_CREATE and holds no user addresses.
    unsafe { sys_bpf(BPF_MAP_CREATE, &mut attr) }
        .map_err(|e| crate::error::annotate(e, "bpf(BPF_MAP_CREATE)", Some(name)))
}

pub(super) fn map_update(map: &OwnedFd, key: u32, value: &[u8]) -> io::Result<()> {
    let mut attr = MapElemAttr {
        map_fd: fd_u32(map),
        key: addr(&key),
        value: addr(value.as_ptr()),
        ..MapElemAttr::default()
    };
    // SAFETY: `attr` is a `MapElemAttr` for BPF_MAP_UPDATE_ELEM; `key` points to 4 bytes and
    // `value` to `value.len()` bytes, the map's value size (checked by the callers), both
    // borrowed for the call.
    unsafe { sys_bpf_int(BPF_MAP_UPDATE_ELEM, &mut attr) }
        .map(drop)
        .map_err(|e| crate::error::annotate(e, "bpf(BPF_MAP_UPDATE_ELEM)", None))
}

pub(super) fn map_lookup(map: &OwnedFd, key: u32, value: &mut [u8]) -> io::Result<()> {
    let mut attr = MapElemAttr {
        map_fd: fd_u32(map),
        key: addr(&key),
        value: addr(value.as_mut_ptr()),
        ..MapElemAttr::default()
    };
    // SAFETY: `attr` is a `MapElemAttr` for BPF_MAP_LOOKUP_ELEM; `key` points to 4 bytes and
    // `value` to `value.len()` writable bytes, at least the map's value size times the possible
    // CPUs for a per-CPU map (checked by the callers), both borrowed for the call.
    unsafe { sys_bpf_int(BPF_MAP_LOOKUP_ELEM, &mut attr) }
        .map(drop)
        .map_err(|e| crate::error::annotate(e, "bpf(BPF_MAP_LOOKUP_ELEM)", None))
}

/// Reads the values of keys `0..entries` of the array `map` in one call into `values`
/// (`entries` times the map's per-key value length). `Ok(false)` when the kernel has no batch
/// operations for the map (the caller reads key by key).
pub(super) fn map_lookup_all(map: &OwnedFd, entries: u32, values: &mut [u8]) -> io::Result<bool> {
    let mut keys = vec![0u32; entries as usize];
    let mut out_batch = 0u32;
    let mut attr = MapBatchAttr {
        out_batch: addr(&mut out_batch as *mut u32),
        keys: addr(keys.as_mut_ptr()),
        values: addr(values.as_mut_ptr()),
        count: entries,
        map_fd: fd_u32(map),
        ..MapBatchAttr::default()
    };
    // SAFETY: `attr` is a `MapBatchAttr` for BPF_MAP_LOOKUP_BATCH starting at the first key
    // (`in_batch` null): `out_batch` points to 4 writable bytes (an array's key), `keys` to
    // `entries` writable keys and `values` to `values.len()` writable bytes, which the callers
    // size as `entries` values of the map; all borrowed for the call.
    match unsafe { sys_bpf_int(BPF_MAP_LOOKUP_BATCH, &mut attr) } {
        Ok(_) => {}
        // The end of the map was reached within this batch: every key was read.
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EINVAL | ENOTSUPP | libc::EOPNOTSUPP)
            ) =>
        {
            return Ok(false);
        }
        Err(e) => return Err(crate::error::annotate(e, "bpf(BPF_MAP_LOOKUP_BATCH)", None)),
    }
    if attr.count != entries || keys.iter().enumerate().any(|(i, &k)| k as usize != i) {
        return Err(io::Error::other(format!(
            "bpf(BPF_MAP_LOOKUP_BATCH): {} of {entries} keys read",
            attr.count
        )));
    }
    Ok(true)
}
