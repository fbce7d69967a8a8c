//! Process capabilities: which ones the process has, and keeping only some of them.
//!
//! lagd starts with every capability root has, needs most of them only while it sets the bond
//! up, and then parses frames from the wire for the rest of its life. [`keep_only`] shrinks the
//! effective, permitted, inheritable, ambient and bounding sets to a given list, so that a bug in
//! the frame parsers cannot be used to do more than the daemon's own job (for example write
//! files it does not own, load kernel modules or trace processes).
//!
//! Capabilities are per thread in Linux; [`keep_only`] changes the calling thread's sets only
//! (the bounding set too). Call it from the only thread, before any other thread is started, as
//! the daemon does.

use std::io;

/// A capability, by its number in `linux/capability.h`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cap(pub u32);

impl Cap {
    /// `CAP_DAC_OVERRIDE`.
    pub const DAC_OVERRIDE: Self = Self(1);
    /// `CAP_NET_BIND_SERVICE`.
    pub const NET_BIND_SERVICE: Self = Self(10);
    /// `CAP_NET_ADMIN`: interface configuration, tcx attach, network sysctls.
    pub const NET_ADMIN: Self = Self(12);
    /// `CAP_NET_RAW`: `AF_PACKET` sockets.
    pub const NET_RAW: Self = Self(13);
    /// `CAP_SYS_ADMIN`: `bpf()` on kernels without `CAP_BPF`, and much else.
    pub const SYS_ADMIN: Self = Self(21);
    /// `CAP_BPF` (Linux 5.8+): loading programs and creating maps.
    pub const BPF: Self = Self(39);

    /// The capability's name as `capabilities(7)` spells it, or `cap_N` for one this list does
    /// not know.
    pub fn name(self) -> String {
        const NAMES: [&str; 41] = [
            "cap_chown",
            "cap_dac_override",
            "cap_dac_read_search",
            "cap_fowner",
            "cap_fsetid",
            "cap_kill",
            "cap_setgid",
            "cap_setuid",
            "cap_setpcap",
            "cap_linux_immutable",
            "cap_net_bind_service",
            "cap_net_broadcast",
            "cap_net_admin",
            "cap_net_raw",
            "cap_ipc_lock",
            "cap_ipc_owner",
            "cap_sys_module",
            "cap_sys_rawio",
            "cap_sys_chroot",
            "cap_sys_ptrace",
            "cap_sys_pacct",
            "cap_sys_admin",
            "cap_sys_boot",
            "cap_sys_nice",
            "cap_sys_resource",
            "cap_sys_time",
            "cap_sys_tty_config",
            "cap_mknod",
            "cap_lease",
            "cap_audit_write",
            "cap_audit_control",
            "cap_setfcap",
            "cap_mac_override",
            "cap_mac_admin",
            "cap_syslog",
            "cap_wake_alarm",
            "cap_block_suspend",
            "cap_audit_read",
            "cap_perfmon",
            "cap_bpf",
            "cap_checkpoint_restore",
        ];
        NAMES
            .get(self.0 as usize)
            .map_or_else(|| format!("cap_{}", self.0), |n| (*n).to_owned())
    }
}

/// `_LINUX_CAPABILITY_VERSION_3`: two 32-bit words per set.
const VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct Header {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Data {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// The calling thread's effective, permitted and inheritable sets, as bit masks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CapSets {
    /// Effective set.
    pub effective: u64,
    /// Permitted set.
    pub permitted: u64,
    /// Inheritable set.
    pub inheritable: u64,
}

impl CapSets {
    /// Whether `cap` is in the effective set.
    pub fn has(&self, cap: Cap) -> bool {
        cap.0 < 64 && self.effective & (1 << cap.0) != 0
    }
}

/// The calling thread's capability sets (`capget`).
///
/// # Errors
///
/// The `capget` error.
pub fn current() -> io::Result<CapSets> {
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let mut data = [Data::default(); 2];
    // SAFETY: capget writes one header and, for version 3, two `Data` structures through the
    // pointers, which point to live values of exactly those types for the duration of the call.
    let ret = unsafe { libc::syscall(libc::SYS_capget, &raw mut header, data.as_mut_ptr()) };
    if ret != 0 {
        return Err(crate::error::annotate(
            io::Error::last_os_error(),
            "capget",
            None,
        ));
    }
    let join = |f: fn(&Data) -> u32| u64::from(f(&data[0])) | (u64::from(f(&data[1])) << 32);
    Ok(CapSets {
        effective: join(|d| d.effective),
        permitted: join(|d| d.permitted),
        inheritable: join(|d| d.inheritable),
    })
}

/// The highest capability number the running kernel knows (`/proc/sys/kernel/cap_last_cap`).
///
/// # Errors
///
/// The read error, or `InvalidData` when the file does not hold a number.
pub fn last_cap() -> io::Result<u32> {
    let path = "/proc/sys/kernel/cap_last_cap";
    let text =
        std::fs::read_to_string(path).map_err(|e| crate::error::annotate(e, "read", Some(path)))?;
    text.trim()
        .parse()
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, format!("{path}: {text:?}")))
}

/// Keeps only `keep` (those of them the thread has) in the calling thread's effective and
/// permitted sets; empties the inheritable and ambient sets and drops every other capability
/// from the bounding set. Returns the sets afterwards.
///
/// Dropping from the bounding set needs `CAP_SETPCAP`, so that happens first, while the thread
/// still has it; a thread without it keeps its bounding set (nothing it could regain from it
/// anyway: the permitted set is what limits it).
///
/// # Errors
///
/// The failing `prctl` or `capset`, named.
pub fn keep_only(keep: &[Cap]) -> io::Result<CapSets> {
    let mask = keep
        .iter()
        .filter(|c| c.0 < 64)
        .fold(0u64, |m, c| m | (1 << c.0));
    let before = current()?;
    let last = last_cap()?.min(63);
    if before.has(Cap(8)) {
        for cap in 0..=last {
            if mask & (1 << cap) != 0 {
                continue;
            }
            // SAFETY: PR_CAPBSET_DROP takes the capability number by value; no memory is passed.
            let ret = unsafe {
                libc::prctl(
                    libc::PR_CAPBSET_DROP,
                    libc::c_ulong::from(cap),
                    0 as libc::c_ulong,
                    0 as libc::c_ulong,
                    0 as libc::c_ulong,
                )
            };
            // EINVAL: a capability this kernel does not have.
            if ret != 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL) {
                return Err(crate::error::annotate(
                    io::Error::last_os_error(),
                    "prctl(PR_CAPBSET_DROP)",
                    None,
                ));
            }
        }
    }
    // SAFETY: PR_CAP_AMBIENT_CLEAR_ALL takes only integer arguments; no memory is passed.
    let ret = unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    // EINVAL: a kernel before 4.3, which has no ambient set.
    if ret != 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL) {
        return Err(crate::error::annotate(
            io::Error::last_os_error(),
            "prctl(PR_CAP_AMBIENT_CLEAR_ALL)",
            None,
        ));
    }
    let permitted = before.permitted & mask;
    let effective = before.effective & mask;
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let data = [
        Data {
            effective: effective as u32,
            permitted: permitted as u32,
            inheritable: 0,
        },
        Data {
            effective: (effective >> 32) as u32,
            permitted: (permitted >> 32) as u32,
            inheritable: 0,
        },
    ];
    // SAFETY: capset reads one header and, for version 3, two `Data` structures through the
    // pointers, which point to live values of exactly those types for the duration of the call.
    let ret = unsafe { libc::syscall(libc::SYS_capset, &raw mut header, data.as_ptr()) };
    if ret != 0 {
        return Err(crate::error::annotate(
            io::Error::last_os_error(),
            "capset",
            None,
        ));
    }
    current()
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(Cap::NET_ADMIN.name(), "cap_net_admin");
        assert_eq!(Cap::BPF.name(), "cap_bpf");
        assert_eq!(Cap(60).name(), "cap_60");
    }

    #[test]
    fn current_reads_the_thread_sets() {
        let sets = current().expect("capget");
        // The permitted set bounds the effective one.
        assert_eq!(sets.effective & !sets.permitted, 0);
    }

    #[test]
    fn keep_only_on_a_thread_of_its_own() {
        // Capabilities are per thread: a fresh thread drops, the test process keeps its own.
        let (after, main_after) = std::thread::spawn(|| {
            let before = current().expect("capget");
            let after = keep_only(&[Cap::NET_RAW]).expect("keep_only");
            (after, before)
        })
        .join()
        .expect("thread");
        assert_eq!(after.effective & !(1 << Cap::NET_RAW.0), 0);
        assert_eq!(after.permitted & !(1 << Cap::NET_RAW.0), 0);
        assert_eq!(after.inheritable, 0);
        assert_eq!(
            after.has(Cap::NET_RAW),
            main_after.has(Cap::NET_RAW),
            "a capability in the list stays"
        );
        assert_eq!(
            current().expect("capget").effective,
            main_after.effective,
            "the calling thread of the test is untouched"
        );
    }
}
