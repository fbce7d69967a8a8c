//! Every eBPF program lagd has loads on the running kernel, attached nowhere: the fast path's
//! TAP program, its members' program with and without stripe's receiver, and member
//! isolation's drop programs. Prints each program's result (with `--nocapture`) and, for one
//! the kernel refuses, the verifier's log. The members' program with stripe's receiver needs
//! BPF compare-and-swap (Linux 5.12): before that it must be refused and the one without it
//! load; from 5.12 on, every program must load. The kernel matrix (tools/uml.py) runs this in
//! Linux 5.10, 6.1 and 6.12.
//!
//! It runs under a memlock limit of 64 KiB, systemd's default for services before version 253
//! (Debian 11's): kernels before 5.11 charge maps and programs to that limit, and lagd-sys must
//! raise it rather than fail to create the maps.

/// The running kernel's release and its (major, minor).
fn kernel() -> (String, (u32, u32)) {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").expect("kernel release");
    let release = release.trim().to_owned();
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let version = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (release, version)
}

#[test]
fn every_program_loads_on_this_kernel() {
    assert!(
        lagd_lab::topology::is_root(),
        "loading eBPF programs needs root (CI runs as root)"
    );
    let (release, version) = kernel();
    let service_default = libc::rlimit {
        rlim_cur: 64 << 10,
        rlim_max: 64 << 10,
    };
    // SAFETY: a valid `rlimit` the kernel only reads; this binary's only test sets it.
    assert_eq!(
        unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &service_default) },
        0,
        "set RLIMIT_MEMLOCK to 64 KiB"
    );
    let checks = lagd_sys::fastpath::load_check()
        .expect("create the fast path's maps under a 64 KiB memlock limit");
    let mut wrong = Vec::new();
    for c in &checks {
        match &c.result {
            Ok(()) => println!(
                "{release}: {} ({} instructions): loaded",
                c.name, c.instructions
            ),
            Err(e) => println!(
                "{release}: {} ({} instructions): refused: {e}",
                c.name, c.instructions
            ),
        }
        let must_load = c.name != "lagd_member_ingress" || version >= (5, 12);
        if must_load && c.result.is_err() {
            wrong.push(format!("{} refused", c.name));
        }
        if !must_load && c.result.is_ok() {
            wrong.push(format!(
                "{} loaded on {release}, which has no BPF compare-and-swap",
                c.name
            ));
        }
    }
    let names: Vec<&str> = checks.iter().map(|c| c.name).collect();
    assert_eq!(
        names,
        [
            "lagd_tap_egress",
            "lagd_member_ingress",
            "lagd_member_ingress_no_cas",
            "lagd_ingr_drop",
            "lagd_slow_drop"
        ]
    );
    assert!(wrong.is_empty(), "on {release}: {}", wrong.join("; "));
}
