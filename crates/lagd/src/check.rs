//! `lagd --check` and `lagctl import --check`: a configuration against this host, changing
//! nothing. The checks are those `Daemon::start` makes before its first change (the members
//! exist, the bond is not a member, the MTU fits a TAP, no other lagd holds the bond or a
//! member) plus what would make a start fail or behave other than meant: an interface of the
//! bond's name that is not a TAP, a member enslaved elsewhere, a member without carrier, and
//! whether the kernel fast path will carry the data frames (and if not, why). The kernel
//! programs are loaded to see that they can be, and unloaded at once; the claims another lagd
//! would hold are asked for and let go at once; nothing is attached, no interface is touched.

use std::fmt;
use std::path::Path;

use lagd_proto::bond::{Bond, FastPathMode};
use lagd_proto::wire::EthernetAddress;
use lagd_sys::fastpath::{FastPath, MAX_MEMBERS};
use lagd_sys::link::LinkControl;

use crate::config::Config;
use crate::daemon::TAP_MAX_MTU;

/// How much a finding matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// What lagd will do (the data path, a default it takes).
    Info,
    /// lagd starts, but not as the configuration may mean (a member without carrier, an
    /// option the mode ignores).
    Warning,
    /// lagd would refuse to start, or would fight another owner of an interface.
    Error,
}

/// One finding of the check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// How much it matters.
    pub severity: Severity,
    /// What was found.
    pub text: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tag = match self.severity {
            Severity::Info => "ok",
            Severity::Warning => "warning",
            Severity::Error => "error",
        };
        write!(f, "{tag}: {}", self.text)
    }
}

/// Whether any finding is an error (the check's exit code is then 1).
pub fn failed(findings: &[Finding]) -> bool {
    findings.iter().any(|f| f.severity == Severity::Error)
}

fn sys(name: &str, leaf: &str) -> std::path::PathBuf {
    Path::new("/sys/class/net").join(name).join(leaf)
}

/// Checks `config` against this host (network namespace). Reads only.
pub fn check(config: &Config) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut push = |severity, text: String| out.push(Finding { severity, text });
    for w in &config.warnings {
        push(Severity::Warning, w.clone());
    }
    if lagd_sys::lock::effective_uid() != 0 {
        push(
            Severity::Warning,
            "not running as root: lagd needs root (or CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF) \
             to start, and some checks below may read less"
                .into(),
        );
    }
    let link = match LinkControl::new() {
        Ok(l) => l,
        Err(e) => {
            push(Severity::Error, format!("netlink/ioctl sockets: {e}"));
            return out;
        }
    };
    // The members, as Daemon::start finds them.
    let mut found = Vec::new();
    for name in &config.members {
        match link.ifindex(name) {
            Ok(i) => found.push((name.clone(), i)),
            Err(_) => push(
                Severity::Error,
                format!("member '{name}': no such interface in this network namespace"),
            ),
        }
    }
    if config.members.contains(&config.bond) {
        push(
            Severity::Error,
            format!("'{}' is the bond itself and a member", config.bond),
        );
    }
    for (name, _) in &found {
        if let Ok(master) = std::fs::read_link(sys(name, "master")) {
            let master = master
                .file_name()
                .map(|m| m.to_string_lossy().into_owned())
                .unwrap_or_default();
            push(
                Severity::Error,
                format!(
                    "member '{name}' is enslaved to '{master}' (a kernel bond, bridge or team): \
                     release it first (ip link set {name} nomaster)"
                ),
            );
        }
        match link.carrier(name) {
            Ok(true) => {}
            Ok(false) => push(
                Severity::Warning,
                format!("member '{name}' has no carrier now (lagd brings it up; check the cable)"),
            ),
            Err(e) => push(Severity::Warning, format!("member '{name}': carrier: {e}")),
        }
    }
    // The bond's own interface: absent (lagd creates its TAP), or a TAP lagd kept.
    if link.ifindex(&config.bond).is_ok() {
        if sys(&config.bond, "bonding").exists() {
            push(
                Severity::Error,
                format!(
                    "'{}' is a kernel bond: delete it (ip link del {}) before lagd takes the name",
                    config.bond, config.bond
                ),
            );
        } else if sys(&config.bond, "tun_flags").exists() {
            push(
                Severity::Info,
                format!(
                    "'{}' exists as a TAP (kept by an earlier lagd): lagd takes it up again",
                    config.bond
                ),
            );
        } else {
            push(
                Severity::Error,
                format!(
                    "an interface '{}' exists and is not a TAP: lagd cannot create its bond \
                     under that name",
                    config.bond
                ),
            );
        }
    }
    let held = crate::files::netns_dir()
        .and_then(|dir| crate::daemon::restore::held_elsewhere(&dir, &config.bond, &found));
    match held {
        Ok(held) => {
            for h in held {
                push(Severity::Error, h);
            }
        }
        Err(e) => push(
            Severity::Warning,
            format!("could not ask for other lagds: {e}"),
        ),
    }
    // MTU: the file's, or the first member's.
    let mtu = config
        .mtu
        .or_else(|| found.first().and_then(|(n, _)| link.mtu(n).ok()));
    if let Some(m) = mtu {
        if m > TAP_MAX_MTU {
            push(
                Severity::Error,
                format!("mtu {m} is more than the bond's TAP can take ({TAP_MAX_MTU})"),
            );
        }
    }
    // The data path.
    let mac = config.mac.unwrap_or_else(|| {
        found
            .first()
            .and_then(|(n, _)| link.permanent_mac(n).ok())
            .map_or(EthernetAddress([2, 0, 0, 0, 0, 1]), EthernetAddress)
    });
    let bond = Bond::new(config.options.clone(), mac);
    let mode = config.options.fastpath;
    let refusal = if config.members.len() > MAX_MEMBERS {
        Some(format!("more than {MAX_MEMBERS} members"))
    } else {
        bond.kernel_refusal(MAX_MEMBERS).map(str::to_owned)
    };
    let why = match (mode, refusal) {
        (FastPathMode::Off, _) => Some("fastpath=off".to_owned()),
        (_, Some(r)) => Some(r),
        (_, None) => match FastPath::load() {
            Ok(programs) => {
                drop(programs);
                None
            }
            Err(e) => Some(format!("the kernel programs cannot be loaded here: {e}")),
        },
    };
    match (why, mode) {
        (None, _) => push(
            Severity::Info,
            format!(
                "data path: the kernel's (tcx programs forward mode {}; lagd decides)",
                config.options.mode
            ),
        ),
        (Some(why), FastPathMode::On) => push(
            Severity::Error,
            format!("fastpath=on, but the kernel path cannot carry this bond: {why}"),
        ),
        (Some(why), _) => push(
            Severity::Info,
            format!("data path: lagd carries the data frames itself ({why})"),
        ),
    }
    if found.len() == config.members.len() {
        push(
            Severity::Info,
            format!(
                "members {} exist; bond {} with {}",
                config.members.join(", "),
                config.bond,
                config.options.to_opts()
            ),
        );
    }
    out
}
