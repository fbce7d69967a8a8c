//! A seccomp filter that refuses the system calls a running network daemon never makes.
//!
//! After start-up lagd parses frames from the wire and requests from its control socket for the
//! rest of its life. [`deny`] installs a classic-BPF seccomp filter (`seccomp(2)`) on every thread
//! of the process that answers `EPERM` to a fixed list of system calls ([`DENIED`]): running
//! programs (`execve`), tracing or reading other processes, mounting, loading kernel modules or
//! kernels, rebooting, swap, the kernel keyring, changing the clock or the host name, new
//! namespaces, `io_uring`, `userfaultfd` and the like. Every other call is allowed.
//!
//! It is a deny list on purpose. The calls lagd makes at run time are many and some are rare
//! (re-attaching eBPF programs on a control `set`, enslaving a member added at run time,
//! writing its state file, serving metrics, netlink, fast-path map updates, restoring the
//! members at exit); an allow list that missed one would kill the daemon (or fail the call) on a
//! path no test walks. None of the denied calls is on any of those paths, and a refused one
//! fails with `EPERM` like any unprivileged attempt, rather than killing the process.
//!
//! The filter also answers `EPERM` to every call made through another system call ABI than
//! the one lagd is built for (the 32-bit `int 0x80` entry and x32 on x86-64), which would
//! otherwise let a call by another number slip past the list.
//!
//! [`deny`] sets `PR_SET_NO_NEW_PRIVS` first (as the kernel requires of an unprivileged
//! filter), so nothing lagd could still start would gain privileges either. A filter stays for
//! the life of the process and is inherited by its children; it cannot be removed.
//!
//! The program itself is built by [`program`], a pure function, and can be checked with
//! [`evaluate`], a small interpreter of the instructions it uses.

use std::io;

/// The system calls the filter refuses with `EPERM`, by name and number for this architecture
/// (x86-64 and AArch64; elsewhere [`deny`] installs nothing and says so).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub const DENIED: &[(&str, libc::c_long)] = &[
    // Running other programs.
    ("execve", libc::SYS_execve),
    ("execveat", libc::SYS_execveat),
    // Other processes' memory.
    ("ptrace", libc::SYS_ptrace),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    ("pidfd_getfd", libc::SYS_pidfd_getfd),
    ("kcmp", libc::SYS_kcmp),
    // The mount family and the file system's root.
    ("mount", libc::SYS_mount),
    ("umount2", libc::SYS_umount2),
    ("pivot_root", libc::SYS_pivot_root),
    ("chroot", libc::SYS_chroot),
    ("move_mount", libc::SYS_move_mount),
    ("open_tree", libc::SYS_open_tree),
    ("fsopen", libc::SYS_fsopen),
    ("fsconfig", libc::SYS_fsconfig),
    ("fsmount", libc::SYS_fsmount),
    ("fspick", libc::SYS_fspick),
    ("mount_setattr", libc::SYS_mount_setattr),
    ("open_by_handle_at", libc::SYS_open_by_handle_at),
    ("name_to_handle_at", libc::SYS_name_to_handle_at),
    ("quotactl", libc::SYS_quotactl),
    // Namespaces (a user namespace needs no privilege to make).
    ("unshare", libc::SYS_unshare),
    ("setns", libc::SYS_setns),
    // Kernels and kernel modules.
    ("kexec_load", libc::SYS_kexec_load),
    ("kexec_file_load", libc::SYS_kexec_file_load),
    ("init_module", libc::SYS_init_module),
    ("finit_module", libc::SYS_finit_module),
    ("delete_module", libc::SYS_delete_module),
    // The machine.
    ("reboot", libc::SYS_reboot),
    ("swapon", libc::SYS_swapon),
    ("swapoff", libc::SYS_swapoff),
    ("acct", libc::SYS_acct),
    ("syslog", libc::SYS_syslog),
    ("vhangup", libc::SYS_vhangup),
    ("sethostname", libc::SYS_sethostname),
    ("setdomainname", libc::SYS_setdomainname),
    ("settimeofday", libc::SYS_settimeofday),
    ("clock_settime", libc::SYS_clock_settime),
    ("clock_adjtime", libc::SYS_clock_adjtime),
    ("adjtimex", libc::SYS_adjtimex),
    // The kernel keyring.
    ("keyctl", libc::SYS_keyctl),
    ("add_key", libc::SYS_add_key),
    ("request_key", libc::SYS_request_key),
    // Execution domains, and interfaces with a history of kernel exploits that lagd never uses.
    ("personality", libc::SYS_personality),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("io_uring_enter", libc::SYS_io_uring_enter),
    ("io_uring_register", libc::SYS_io_uring_register),
    #[cfg(target_arch = "x86_64")]
    ("iopl", libc::SYS_iopl),
    #[cfg(target_arch = "x86_64")]
    ("ioperm", libc::SYS_ioperm),
    #[cfg(target_arch = "x86_64")]
    ("uselib", libc::SYS_uselib),
];

/// `AUDIT_ARCH_*` of the architecture lagd is built for: the value the kernel puts in
/// `seccomp_data.arch` for a call through the native ABI.
#[cfg(target_arch = "x86_64")]
pub const NATIVE_ARCH: u32 = 0xc000_003e;
/// `AUDIT_ARCH_*` of the architecture lagd is built for: the value the kernel puts in
/// `seccomp_data.arch` for a call through the native ABI.
#[cfg(target_arch = "aarch64")]
pub const NATIVE_ARCH: u32 = 0xc000_00b7;

/// `__X32_SYSCALL_BIT`: x32 calls arrive with the x86-64 arch value and this bit in the number.
#[cfg(target_arch = "x86_64")]
const X32_BIT: Option<u32> = Some(0x4000_0000);
#[cfg(target_arch = "aarch64")]
const X32_BIT: Option<u32> = None;

/// Offsets in `struct seccomp_data`: the call's number, then the ABI's `AUDIT_ARCH_*`.
const NR_OFFSET: u32 = 0;
const ARCH_OFFSET: u32 = 4;

// Classic BPF opcodes (linux/bpf_common.h).
const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const JGE_K: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

/// What the filter does with a call: let it run, or fail it with `errno`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// The call runs.
    Allow,
    /// The call fails with this errno, without running.
    Errno(u16),
}

impl Action {
    fn ret(self) -> u32 {
        match self {
            Self::Allow => libc::SECCOMP_RET_ALLOW,
            Self::Errno(e) => libc::SECCOMP_RET_ERRNO | u32::from(e),
        }
    }
}

/// One classic BPF instruction (`struct sock_filter`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insn {
    /// Opcode.
    pub code: u16,
    /// Instructions to skip when a jump's condition holds.
    pub jt: u8,
    /// Instructions to skip when it does not.
    pub jf: u8,
    /// The constant operand.
    pub k: u32,
}

impl Insn {
    const fn stmt(code: u16, k: u32) -> Self {
        Self {
            code,
            jt: 0,
            jf: 0,
            k,
        }
    }
}

/// Most numbers one program may deny: each test jumps forward to the shared `EPERM` return,
/// and a classic BPF jump reaches at most 255 instructions.
pub const MAX_DENIED: usize = 250;

/// The filter program: calls through another ABI than `arch` (or, with `x32_bit`, numbered
/// with that bit) and calls numbered in `denied` get `Errno(errno)`; everything else is
/// allowed.
///
/// # Errors
///
/// `InvalidInput` when `denied` holds more than [`MAX_DENIED`] numbers.
pub fn program(
    arch: u32,
    x32_bit: Option<u32>,
    denied: &[u32],
    errno: u16,
) -> io::Result<Vec<Insn>> {
    if denied.len() > MAX_DENIED {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} system calls to deny, at most {MAX_DENIED}",
                denied.len()
            ),
        ));
    }
    let refuse = Action::Errno(errno).ret();
    let mut p = vec![
        Insn::stmt(LD_W_ABS, ARCH_OFFSET),
        // The native ABI skips the refusal.
        Insn {
            code: JEQ_K,
            jt: 1,
            jf: 0,
            k: arch,
        },
        Insn::stmt(RET_K, refuse),
        Insn::stmt(LD_W_ABS, NR_OFFSET),
    ];
    // Tests left after this one, then the allow: the distance to the final refusal.
    let tests = denied.len() + usize::from(x32_bit.is_some());
    let mut left = tests;
    let mut jump = |p: &mut Vec<Insn>, code, k| {
        left -= 1;
        p.push(Insn {
            code,
            // `left` tests and the allow lie between this one and the refusal.
            jt: u8::try_from(left + 1).expect("at most MAX_DENIED tests"),
            jf: 0,
            k,
        });
    };
    if let Some(bit) = x32_bit {
        jump(&mut p, JGE_K, bit);
    }
    for &nr in denied {
        jump(&mut p, JEQ_K, nr);
    }
    p.push(Insn::stmt(RET_K, Action::Allow.ret()));
    p.push(Insn::stmt(RET_K, refuse));
    Ok(p)
}

/// What `program` does with a call numbered `nr` through ABI `arch`, by running its
/// instructions as the kernel would (the load, jump and return instructions [`program`] uses).
/// `None` for a program that uses anything else, reads outside `seccomp_data` or runs off its
/// end.
pub fn evaluate(program: &[Insn], arch: u32, nr: u32) -> Option<Action> {
    let mut acc = 0u32;
    let mut pc = 0usize;
    loop {
        let insn = program.get(pc)?;
        pc += 1;
        match insn.code {
            LD_W_ABS => {
                acc = match insn.k {
                    NR_OFFSET => nr,
                    ARCH_OFFSET => arch,
                    _ => return None,
                }
            }
            JEQ_K | JGE_K => {
                let hit = if insn.code == JEQ_K {
                    acc == insn.k
                } else {
                    acc >= insn.k
                };
                pc += usize::from(if hit { insn.jt } else { insn.jf });
            }
            RET_K => {
                return match insn.k {
                    libc::SECCOMP_RET_ALLOW => Some(Action::Allow),
                    k if k & 0xffff_0000 == libc::SECCOMP_RET_ERRNO => {
                        Some(Action::Errno((k & 0xffff) as u16))
                    }
                    _ => None,
                };
            }
            _ => return None,
        }
    }
}

/// lagd's filter: [`DENIED`] and every foreign ABI answered with `EPERM`.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub fn lagd_program() -> Vec<Insn> {
    let denied: Vec<u32> = DENIED.iter().map(|&(_, nr)| nr as u32).collect();
    program(NATIVE_ARCH, X32_BIT, &denied, libc::EPERM as u16).expect("DENIED is short")
}

/// `program` as the kernel takes it.
fn raw(program: &[Insn]) -> Vec<libc::sock_filter> {
    program
        .iter()
        .map(|i| libc::sock_filter {
            code: i.code,
            jt: i.jt,
            jf: i.jf,
            k: i.k,
        })
        .collect()
}

/// Installs `program` on every thread of the process (`SECCOMP_FILTER_FLAG_TSYNC`), after
/// setting `PR_SET_NO_NEW_PRIVS`. The filter is inherited by threads and children started
/// later and stays for the life of the process.
///
/// # Errors
///
/// The failing `prctl` or `seccomp`, named; when one thread could not take the filter, no
/// thread has it and the error names that thread.
pub fn install(program: &[Insn]) -> io::Result<()> {
    install_raw(&raw(program)).map_err(|(call, ret)| {
        if ret > 0 {
            io::Error::other(format!("seccomp: thread {ret} could not take the filter"))
        } else {
            crate::error::annotate(io::Error::from_raw_os_error(-ret as i32), call, None)
        }
    })
}

/// [`install`] without allocating (it may run in a forked child): the failing call and, for
/// `seccomp`, a positive thread id or the negated errno.
fn install_raw(filters: &[libc::sock_filter]) -> Result<(), (&'static str, libc::c_long)> {
    let errno = || -libc::c_long::from(io::Error::last_os_error().raw_os_error().unwrap_or(0));
    let Ok(len) = libc::c_ushort::try_from(filters.len()) else {
        return Err(("seccomp program length", -libc::c_long::from(libc::EINVAL)));
    };
    let prog = libc::sock_fprog {
        len,
        // The kernel only reads the instructions.
        filter: filters.as_ptr().cast_mut(),
    };
    // SAFETY: PR_SET_NO_NEW_PRIVS takes only integer arguments; no memory is passed.
    let ret = unsafe {
        libc::prctl(
            libc::PR_SET_NO_NEW_PRIVS,
            1 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    if ret != 0 {
        return Err(("prctl(PR_SET_NO_NEW_PRIVS)", errno()));
    }
    // SAFETY: seccomp(SECCOMP_SET_MODE_FILTER) reads one `sock_fprog` through the pointer and
    // `len` instructions through its `filter`; both point to live values (`prog`, `filters`)
    // of exactly those types for the duration of the call, and the kernel copies the program
    // (it never writes through `filter`).
    let ret = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER as libc::c_ulong,
            libc::SECCOMP_FILTER_FLAG_TSYNC,
            &raw const prog,
        )
    };
    match ret {
        0 => Ok(()),
        tid if tid > 0 => Err(("seccomp(SECCOMP_SET_MODE_FILTER)", tid)),
        _ => Err(("seccomp(SECCOMP_SET_MODE_FILTER)", errno())),
    }
}

/// Installs lagd's filter ([`lagd_program`]) on every thread of the process. Returns how many
/// system calls it refuses.
///
/// # Errors
///
/// As [`install`].
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub fn deny() -> io::Result<usize> {
    install(&lagd_program())?;
    Ok(DENIED.len())
}

/// On this architecture lagd has no list of system calls to deny: installs nothing.
///
/// # Errors
///
/// Always `Unsupported`.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub fn deny() -> io::Result<usize> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "no seccomp filter for this architecture",
    ))
}

#[cfg(test)]
mod test {
    use super::*;

    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    const EPERM: Action = Action::Errno(libc::EPERM as u16);

    #[test]
    fn the_program_refuses_the_list_and_foreign_abis_only() {
        let p = program(0xc000_003e, Some(0x4000_0000), &[59, 322, 101], 1).unwrap();
        let eperm = Action::Errno(1);
        for nr in [59, 322, 101] {
            assert_eq!(evaluate(&p, 0xc000_003e, nr), Some(eperm), "nr {nr}");
        }
        for nr in [0, 1, 58, 60, 100, 102, 321, 323, 0x3fff_ffff] {
            assert_eq!(
                evaluate(&p, 0xc000_003e, nr),
                Some(Action::Allow),
                "nr {nr}"
            );
        }
        // x32 numbers, and the i386 ABI (AUDIT_ARCH_I386), whatever the number.
        assert_eq!(evaluate(&p, 0xc000_003e, 0x4000_0000), Some(eperm));
        assert_eq!(evaluate(&p, 0xc000_003e, 0x4000_0000 | 1), Some(eperm));
        assert_eq!(evaluate(&p, 0x4000_0003, 3), Some(eperm));
        assert_eq!(evaluate(&p, 0x4000_0003, 59), Some(eperm));
    }

    #[test]
    fn the_program_without_an_x32_test_and_with_nothing_denied() {
        let p = program(0xc000_00b7, None, &[], 1).unwrap();
        assert_eq!(p.len(), 6);
        assert_eq!(evaluate(&p, 0xc000_00b7, 0x4000_0000), Some(Action::Allow));
        assert_eq!(evaluate(&p, 0xc000_003e, 1), Some(Action::Errno(1)));
    }

    #[test]
    fn the_longest_list_still_reaches_its_refusal() {
        let denied: Vec<u32> = (1000..1000 + MAX_DENIED as u32).collect();
        let p = program(7, Some(0x4000_0000), &denied, 13).unwrap();
        assert_eq!(evaluate(&p, 7, 1000), Some(Action::Errno(13)));
        assert_eq!(
            evaluate(&p, 7, 999 + MAX_DENIED as u32),
            Some(Action::Errno(13))
        );
        assert_eq!(evaluate(&p, 7, 999), Some(Action::Allow));
        assert!(program(7, None, &vec![1; MAX_DENIED + 1], 13).is_err());
    }

    #[test]
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    fn lagds_list() {
        let p = lagd_program();
        for &(name, nr) in DENIED {
            assert_eq!(evaluate(&p, NATIVE_ARCH, nr as u32), Some(EPERM), "{name}");
        }
        // What the daemon does at run time stays allowed.
        for nr in [
            libc::SYS_read,
            libc::SYS_write,
            libc::SYS_sendmmsg,
            libc::SYS_recvmmsg,
            libc::SYS_bpf,
            libc::SYS_ioctl,
            libc::SYS_socket,
            libc::SYS_openat,
            libc::SYS_renameat2,
            libc::SYS_clone3,
            libc::SYS_epoll_pwait,
            libc::SYS_exit_group,
            libc::SYS_capset,
            libc::SYS_prctl,
        ] {
            assert_eq!(
                evaluate(&p, NATIVE_ARCH, nr as u32),
                Some(Action::Allow),
                "{nr}"
            );
        }
        let mut names: Vec<_> = DENIED.iter().map(|d| d.0).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), DENIED.len(), "a call listed twice");
    }

    /// In a child process (a filter cannot be removed): installs lagd's filter and tries what
    /// it denies. The child reports through its exit status.
    #[test]
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    fn a_filtered_process_cannot_exec_or_unshare() {
        // Everything the child needs is made before the fork: it must not allocate (another
        // thread of the test process may hold the allocator's lock).
        let filters = raw(&lagd_program());
        let argv = [c"/bin/sh".as_ptr(), c"-c".as_ptr(), c"exit 42".as_ptr()];
        let argv = [argv[0], argv[1], argv[2], std::ptr::null()];
        let envp = [std::ptr::null::<libc::c_char>()];
        // SAFETY: fork takes nothing; the child only makes system calls and ends with `_exit`.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork: {}", io::Error::last_os_error());
        if pid == 0 {
            let code = child(&filters, &argv, &envp);
            // SAFETY: `_exit` ends the child without running the parent's exit handlers.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: waits for the child just forked; `status` is a live c_int.
        let ret = unsafe { libc::waitpid(pid, &raw mut status, 0) };
        assert_eq!(ret, pid, "waitpid: {}", io::Error::last_os_error());
        assert!(
            libc::WIFEXITED(status),
            "the child died: status {status:#x}"
        );
        let code = libc::WEXITSTATUS(status);
        let what = [
            "",
            "installing the filter failed",
            "execve failed otherwise than with EPERM",
            "unshare(CLONE_NEWUSER) ran or failed otherwise than with EPERM",
            "getpid was refused",
            "no_new_privs is not set",
        ];
        let what = what
            .get(code as usize)
            .copied()
            .unwrap_or("execve ran /bin/sh");
        assert_eq!(code, 0, "{what} (exit {code})");
    }

    /// The child's part: 0 when every check passed, else the number of the first that failed.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    fn child(
        filters: &[libc::sock_filter],
        argv: &[*const libc::c_char; 4],
        envp: &[*const libc::c_char; 1],
    ) -> i32 {
        if install_raw(filters).is_err() {
            return 1;
        }
        // SAFETY: execve with a NUL-terminated path and NULL-terminated argv and envp arrays
        // that live until the call returns (it only returns on failure).
        unsafe { libc::execve(argv[0], argv.as_ptr(), envp.as_ptr()) };
        // SAFETY: errno is the calling thread's; reading it through its location is sound.
        if unsafe { *libc::__errno_location() } != libc::EPERM {
            return 2;
        }
        // SAFETY: unshare takes only flags.
        let ret = unsafe { libc::unshare(libc::CLONE_NEWUSER) };
        // SAFETY: as above.
        if ret == 0 || unsafe { *libc::__errno_location() } != libc::EPERM {
            return 3;
        }
        // SAFETY: getpid takes nothing and cannot fail.
        if unsafe { libc::getpid() } <= 0 {
            return 4;
        }
        // SAFETY: PR_GET_NO_NEW_PRIVS takes only integer arguments.
        let nnp = unsafe { libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) };
        if nnp != 1 {
            return 5;
        }
        0
    }
}
