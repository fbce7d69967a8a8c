//! What the last lagd for this bond left running and handed over through the service manager's
//! descriptor store (see [`notify`](super::notify)): lagd takes each descriptor it can use by
//! its name, checks that it is what it would have opened itself, and rebuilds only what is
//! missing or different. Names lagd stores:
//!
//! - `tap`: the TAP's descriptor (its carrier stays on while one is open).
//! - `tcx`: the tcx links of the programs (the fast path's, and the members' ingress drops):
//!   while one is open its program stays attached and forwards with the last table (for
//!   `kernel::ORPHAN_TIMEOUT` after the last heartbeat; then it drops every frame). The next
//!   lagd puts its own programs into them in one step (`BPF_LINK_UPDATE`, see
//!   `lagd_sys::isolate::offer_tcx_links`) and closes those it does not need. clsact filters
//!   need no descriptor: they stay on their hooks, and the next lagd replaces them in place.

use std::os::fd::OwnedFd;

use tracing::{info, warn};

/// The name of the TAP's descriptor in the store.
pub const TAP: &str = "tap";
/// The name of the tcx links in the store.
pub const TCX: &str = "tcx";

/// Descriptors a service manager passed at start, by name; those left untaken are closed when
/// this is dropped.
#[derive(Debug, Default)]
pub struct Passed {
    fds: Vec<(String, OwnedFd)>,
}

impl Passed {
    /// The descriptors the service manager passed to this process (none without
    /// `LISTEN_FDS`). A malformed environment is logged and ignored: lagd then builds all.
    pub fn from_env() -> Self {
        match lagd_sys::fdpass::take_listen_fds() {
            Ok(fds) => {
                if !fds.is_empty() {
                    let names: Vec<&str> = fds.iter().map(|(n, _)| n.as_str()).collect();
                    info!(?names, "descriptors passed by the service manager");
                }
                Self { fds }
            }
            Err(e) => {
                warn!("descriptors passed by the service manager: {e}; building anew");
                Self::default()
            }
        }
    }

    /// Takes the first descriptor named `name`.
    pub fn take(&mut self, name: &str) -> Option<OwnedFd> {
        let k = self.fds.iter().position(|(n, _)| n == name)?;
        Some(self.fds.remove(k).1)
    }

    /// Takes every descriptor named `name`.
    pub fn take_all(&mut self, name: &str) -> Vec<OwnedFd> {
        let (named, rest) = std::mem::take(&mut self.fds)
            .into_iter()
            .partition(|(n, _)| n == name);
        self.fds = rest;
        named.into_iter().map(|(_, fd)| fd).collect::<Vec<_>>()
    }

    /// Takes the TAP's descriptor.
    pub fn take_tap(&mut self) -> Option<OwnedFd> {
        self.take(TAP)
    }
}

impl Drop for Passed {
    fn drop(&mut self) {
        for (name, _) in &self.fds {
            info!(name, "a passed descriptor lagd does not use is closed");
        }
    }
}

/// Logs what the last lagd's programs dropped because no lagd renewed their heartbeat in
/// time (`kernel::ORPHAN_TIMEOUT`), read through its tcx `links` before they are taken over:
/// the frames the bond did not carry between the bound and this start.
pub fn report_orphan_drops(links: &[OwnedFd]) {
    use std::os::fd::AsFd;
    let drops =
        links.iter().find_map(
            |l| match lagd_sys::fastpath::orphan_drops_of_link(l.as_fd()) {
                Ok(d) => d,
                Err(e) => {
                    warn!("the last lagd's programs: {e}");
                    None
                }
            },
        );
    if let Some(d) = drops.filter(|d| d.tap > 0 || d.members > 0) {
        warn!(
            host_frames = d.tap,
            member_frames = d.members,
            "no lagd ran for longer than the kernel path's bound: its programs dropped frames \
             until now"
        );
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn descriptors_are_taken_by_name_once() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut p = Passed {
            fds: vec![
                ("tap".into(), OwnedFd::from(a)),
                ("x".into(), OwnedFd::from(b)),
            ],
        };
        assert!(p.take_tap().is_some());
        assert!(p.take_tap().is_none());
        assert!(p.take("x").is_some());
        assert!(p.fds.is_empty());
    }
}
