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
//! - `packet`: the members' packet sockets (`AF_PACKET`: data, slow protocols, LACP partner;
//!   three per member). What a member receives while no lagd reads waits in the sockets'
//!   queues (4 MB for data) instead of being lost; the next lagd takes each socket whose
//!   member, protocol and options match one it would open (`PacketSocket::adopt`), sets its
//!   filter as for a new one, reads the queue at once, and opens anew where none matches. On
//!   the kernel path the data socket only sends, and nothing waits in it. Kept open, they also
//!   spare a dying lagd their closing, which waits for an RCU grace period each (tens of
//!   milliseconds on a busy machine).
//! - `alive`: the programs' heartbeat map (`lagd_alive`, `lagd_sys::fastpath::Heartbeat`).
//!   The next lagd renews their deadline with it first thing, before its own programs load
//!   (over a second with the interpreter of a slow guest): a restart that begins within
//!   `kernel::ORPHAN_TIMEOUT` of the last lagd's last heartbeat loses nothing however long
//!   its start takes, where the programs would otherwise have taken the bond for abandoned
//!   in the middle of it (seen in the 5.10 guest: a restart that loaded for 2-3 s lost the
//!   frames of its last tens of milliseconds). It renews them once more when its own
//!   programs go in, and reads what they dropped while no lagd ran, with no capability.
//! - `log` (a planned upgrade only): the old lagd's standard error, where the new one's log
//!   goes once it has taken over.
//!
//! **A planned upgrade** (`lagctl upgrade`, which starts the new lagd with `--take-over`)
//! passes the same descriptors over the control socket instead of through a service manager:
//! the new lagd asks the running one for a `handover`; the running one lets go of its claims
//! and its control socket's name, answers with the descriptors (`SCM_RIGHTS`) and waits, still
//! renewing the programs' heartbeat, until the new one says `adopted` (within
//! [`ADOPT_TIME`]). It then answers `bye` and exits without undoing anything: the TAP, the
//! programs and the members stay as they are, now the new lagd's. When the new lagd closes the
//! connection first, or does not adopt in time, the running one takes its claims and its
//! control socket back and goes on. The state file carries the LACP partners over, as after a
//! crash.
//!
//! **Leaving** (`{"cmd":"leave"}`, `lagctl stop --leave`, or `lagctl stop --unit UNIT` when
//! the service manager runs a restart job for the unit: `systemctl restart` is a stop and a
//! start, and lagd cannot tell it from a stop by the signal): under a service manager's
//! descriptor store (which holds the TAP since lagd started), lagd stores its tcx links and
//! packet sockets once more, answers `{"left":{"pid":N}}` and exits without undoing anything, as after `kill -9`; the next lagd
//! adopts what the store hands it. Without a store (no `NOTIFY_SOCKET`) leaving is refused:
//! the TAP would lose its carrier and the tcx programs would go, with the members left as lagd
//! set them.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use lagd_sys::fastpath::{Heartbeat, MAX_MEMBERS, OrphanDrops};
use tracing::{info, warn};

use crate::control::{ADOPT_TIME, Endpoint, Request};

/// The name of the TAP's descriptor in the store.
pub const TAP: &str = "tap";
/// The name of the tcx links in the store.
pub const TCX: &str = "tcx";
/// The name of the members' data sockets in the store.
pub const PACKET: &str = "packet";
/// The name of the programs' heartbeat map in the store.
pub const ALIVE: &str = "alive";
/// The most descriptors lagd stores for a bond the kernel path can carry (up to
/// [`MAX_MEMBERS`] members): the TAP, a tcx link for the TAP's program and one per member,
/// the heartbeat map, and three packet sockets per member. The unit's
/// `FileDescriptorStoreMax=` must hold them: systemd closes what is stored beyond it.
pub const MOST_STORED: usize = 1 + (MAX_MEMBERS + 1) + 1 + 3 * MAX_MEMBERS;
/// The name of the old lagd's standard error in a planned upgrade.
pub const LOG: &str = "log";
/// How long the new lagd waits for the running one's descriptors.
const HANDOVER_REPLY_TIME: Duration = Duration::from_secs(5);

/// Descriptors a service manager passed at start, by name; those left untaken are closed when
/// this is dropped.
#[derive(Debug, Default)]
pub struct Passed {
    fds: Vec<(String, OwnedFd)>,
    /// The service manager of the lagd handing over (its socket and keep-alive interval).
    manager: Option<super::notify::Notifier>,
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
                Self { fds, manager: None }
            }
            Err(e) => {
                warn!("descriptors passed by the service manager: {e}; building anew");
                Self::default()
            }
        }
    }

    /// Asks the lagd answering at `endpoint` to hand its bond over (a planned upgrade): the
    /// descriptors it passes, by name, and the connection to tell it when they are adopted.
    pub fn take_over(endpoint: &Endpoint) -> Result<(Self, TakeOver)> {
        let stream = endpoint
            .connect()
            .with_context(|| format!("no lagd to take over from answers on {endpoint}"))?;
        let old = lagd_sys::peer::peer_credentials(&stream)?.pid;
        stream.set_write_timeout(Some(HANDOVER_REPLY_TIME))?;
        stream.set_read_timeout(Some(HANDOVER_REPLY_TIME + ADOPT_TIME))?;
        let mut line = serde_json::to_string(&Request::Handover)?;
        line.push('\n');
        (&stream)
            .write_all(line.as_bytes())
            .with_context(|| format!("asking {endpoint} for a handover"))?;
        let mut buf = vec![0u8; 4096];
        let (n, fds) = lagd_sys::fdpass::recv_with_fds(&stream, &mut buf, 64)
            .with_context(|| format!("waiting for {endpoint} to hand over"))?;
        let reply = parse_handover_reply(&buf[..n], fds.len())
            .with_context(|| format!("the handover from {endpoint}"))?;
        let manager = reply.manager.and_then(|(target, watchdog)| {
            super::notify::Notifier::new(std::ffi::OsStr::new(&target), watchdog)
                .map_err(|e| warn!("the running lagd's service manager {target}: {e}"))
                .ok()
        });
        let mut passed = Self {
            fds: reply.names.into_iter().zip(fds).collect(),
            manager,
        };
        let log = passed.take(LOG);
        let names: Vec<&str> = passed.fds.iter().map(|(n, _)| n.as_str()).collect();
        info!(
            pid = old,
            ?names,
            "descriptors handed over by the running lagd"
        );
        Ok((passed, TakeOver { stream, log, old }))
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

    /// The service manager of the lagd that handed over, if it ran under one: the new lagd
    /// talks to it in the old one's place.
    pub fn take_manager(&mut self) -> Option<super::notify::Notifier> {
        self.manager.take()
    }
}

impl Drop for Passed {
    fn drop(&mut self) {
        for (name, _) in &self.fds {
            info!(name, "a passed descriptor lagd does not use is closed");
        }
    }
}

/// The connection to the lagd a planned upgrade takes over from, until it has gone.
#[derive(Debug)]
pub struct TakeOver {
    stream: UnixStream,
    log: Option<OwnedFd>,
    old: u32,
}

impl TakeOver {
    /// The process id of the lagd being taken over from.
    pub fn old_pid(&self) -> u32 {
        self.old
    }

    /// Tells the old lagd that everything is adopted and waits for it to go (its `bye`, then
    /// its end of the connection closing as it exits); then this lagd's standard output and
    /// error go where the old one's went. An error: the old lagd gave up first (it goes on
    /// running the bond), and this one must not.
    pub fn adopted(self) -> Result<()> {
        let deadline = Instant::now() + ADOPT_TIME;
        self.stream.set_read_timeout(Some(ADOPT_TIME))?;
        (&self.stream)
            .write_all(b"adopted\n")
            .context("telling the old lagd the bond is adopted")?;
        let mut reader = BufReader::new(&self.stream);
        let mut line = String::new();
        (&mut reader)
            .take(64)
            .read_line(&mut line)
            .context("waiting for the old lagd to let go")?;
        if line.trim() != "bye" {
            bail!(
                "the old lagd (pid {}) did not let go (it gave up waiting, or ended): it keeps \
                 the bond",
                self.old
            );
        }
        // Its end closes when it has exited.
        let mut rest = Vec::new();
        let left = deadline.saturating_duration_since(Instant::now());
        self.stream
            .set_read_timeout(Some(left.max(Duration::from_millis(100))))?;
        if let Err(e) = reader.read_to_end(&mut rest) {
            warn!(
                pid = self.old,
                "the old lagd has not closed its end yet: {e}"
            );
        }
        // What this lagd logged so far went to `lagctl upgrade`; from here on, where the old
        // one logged.
        if let Some(log) = &self.log {
            if let Err(e) = lagd_sys::fdpass::redirect_stdout_stderr(log.as_fd()) {
                warn!("logging where the old lagd logged: {e}");
            }
        }
        info!(pid = self.old, "took over from the old lagd");
        Ok(())
    }
}

/// The names of the `count` descriptors that came with a handover reply `bytes` (one JSON
/// line: `{"handover":{"pid":N,"names":[..]}}`, or `{"error":".."}`).
/// What a running lagd's hand-over reply says: the descriptors' names, in order, and its
/// service manager's socket and keep-alive interval if it has one.
#[derive(Debug, PartialEq, Eq)]
struct Reply {
    names: Vec<String>,
    manager: Option<(String, Option<Duration>)>,
}

fn parse_handover_reply(bytes: &[u8], count: usize) -> Result<Reply> {
    let text = std::str::from_utf8(bytes).context("not UTF-8")?;
    let line = text.lines().next().unwrap_or_default();
    if line.is_empty() {
        bail!("the connection was closed without a reply");
    }
    let value: serde_json::Value = serde_json::from_str(line).context("a malformed reply")?;
    if let Some(e) = value.get("error").and_then(|e| e.as_str()) {
        bail!("refused: {e}");
    }
    let names: Vec<String> = value["handover"]["names"]
        .as_array()
        .context("a reply without names")?
        .iter()
        .map(|n| {
            n.as_str()
                .map(str::to_owned)
                .context("a name that is not a string")
        })
        .collect::<Result<_>>()?;
    if names.len() != count {
        bail!("{} names for {count} descriptors", names.len());
    }
    let manager = match value["handover"].get("manager") {
        None | Some(serde_json::Value::Null) => None,
        Some(m) => {
            let socket = m["socket"]
                .as_str()
                .context("a service manager without a socket")?;
            let watchdog = match &m["watchdog_us"] {
                serde_json::Value::Null => None,
                w => Some(Duration::from_micros(
                    w.as_u64()
                        .context("a watchdog interval that is not a number")?,
                )),
            };
            Some((socket.to_owned(), watchdog))
        }
    };
    Ok(Reply { names, manager })
}

/// The reply line a running lagd hands its descriptors over with (see
/// [`Passed::take_over`]), with its service manager (`manager`) if it runs under one.
pub fn handover_reply(names: &[&str], manager: Option<&super::notify::Notifier>) -> String {
    let manager = manager.map(|n| {
        serde_json::json!({
            "socket": n.target().to_string_lossy(),
            "watchdog_us": n.watchdog().map(|w| u64::try_from(w.as_micros()).unwrap_or(u64::MAX)),
        })
    });
    let mut line = serde_json::json!({
        "handover": { "pid": std::process::id(), "names": names, "manager": manager }
    })
    .to_string();
    line.push('\n');
    line
}

/// Takes the last lagd's heartbeat maps from `passed` and renews their deadline at once, to
/// `until_ns` (see [`ALIVE`]: the programs in its links and filters go on forwarding while this
/// lagd loads its own), unless it has passed already (they stay stopped until this lagd's
/// programs replace them), after logging what those programs dropped because no lagd renewed
/// it in time. Where none was passed (a store filled by an older lagd), what they dropped is
/// read through the tcx `links`, which needs `CAP_SYS_ADMIN`.
pub fn take_heartbeats(passed: &mut Passed, links: &[OwnedFd], until_ns: u64) -> Vec<Heartbeat> {
    let beats: Vec<Heartbeat> = passed
        .take_all(ALIVE)
        .into_iter()
        .filter_map(|fd| {
            Heartbeat::adopt(fd)
                .map_err(|e| warn!("a passed heartbeat map is not used: {e}"))
                .ok()
        })
        .collect();
    let drops = if beats.is_empty() {
        orphan_drops_of_links(links)
    } else {
        beats.iter().find_map(|b| {
            b.orphan_drops()
                .map_err(|e| warn!("the last lagd's heartbeat map: {e}"))
                .ok()
        })
    };
    renew_live(&beats, until_ns);
    if let Some(d) = drops.filter(|d| d.tap > 0 || d.members > 0) {
        warn!(
            host_frames = d.tap,
            member_frames = d.members,
            "no lagd ran for longer than the kernel path's bound: its programs dropped frames \
             until now"
        );
    }
    beats
}

/// Moves each of `beats`' deadlines to `until_ns` where it has not passed yet.
pub fn renew_live(beats: &[Heartbeat], until_ns: u64) {
    let now = lagd_sys::fastpath::monotonic_ns();
    for b in beats {
        match b.extend_if_live(now, until_ns) {
            Ok(true) => {}
            Ok(false) => info!(
                "the last lagd's programs had stopped (past the kernel path's bound): they stay \
                 stopped until this lagd's replace them"
            ),
            Err(e) => warn!("renewing the last lagd's heartbeat: {e}"),
        }
    }
}

/// What the programs behind tcx `links` dropped for want of a heartbeat. Reading it looks the
/// programs and maps up by id, which needs `CAP_SYS_ADMIN`: a lagd without it (the unit's
/// bounding set leaves it out) says once that it cannot tell.
fn orphan_drops_of_links(links: &[OwnedFd]) -> Option<OrphanDrops> {
    for l in links {
        match lagd_sys::fastpath::orphan_drops_of_link(l.as_fd()) {
            Ok(Some(d)) => return Some(d),
            Ok(None) => {}
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                info!(
                    "what the last lagd's programs dropped while no lagd ran is not known: \
                     {e} (reading it needs CAP_SYS_ADMIN)"
                );
                return None;
            }
            Err(e) => {
                warn!("the last lagd's programs: {e}");
                return None;
            }
        }
    }
    None
}

impl super::Daemon {
    /// Leaves the kernel path to the next lagd (see the module documentation): `Ok`, the reply
    /// is written on `stream` and this lagd must exit at once, undoing nothing; an error,
    /// nothing changed.
    pub(super) fn leave(&mut self, stream: &UnixStream) -> Result<(), String> {
        if self.notify.is_none() {
            return Err(
                "no service manager keeps this lagd's descriptors (no NOTIFY_SOCKET): \
                 leaving would take the TAP's carrier and the programs along; stop it with \
                 SIGTERM instead"
                    .into(),
            );
        }
        // The TAP went into the store when this lagd started (or was there already, adopted);
        // the links and sockets are stored as they are now.
        self.store_links();
        if let Some(n) = &self.notify {
            n.send("STOPPING=1");
        }
        let mut line = serde_json::json!({ "left": { "pid": std::process::id() } }).to_string();
        line.push('\n');
        let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
        if let Err(e) = (&*stream).write_all(line.as_bytes()) {
            // The asker went away: it learns from the control socket that lagd is gone.
            warn!("leave: the reply: {e}");
        }
        info!(
            "leaving the kernel path to the next lagd (its descriptors are in the store); exiting"
        );
        Ok(())
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn descriptors_are_taken_by_name_once() {
        let (a, b) = UnixStream::pair().unwrap();
        let mut p = Passed {
            fds: vec![
                ("tap".into(), OwnedFd::from(a)),
                ("x".into(), OwnedFd::from(b)),
            ],
            manager: None,
        };
        assert!(p.take_tap().is_some());
        assert!(p.take_tap().is_none());
        assert!(p.take("x").is_some());
        assert!(p.fds.is_empty());
    }

    #[test]
    fn handover_replies_name_each_descriptor() {
        let line = handover_reply(&["tap", "tcx", "log"], None);
        assert_eq!(
            parse_handover_reply(line.as_bytes(), 3).unwrap(),
            Reply {
                names: vec!["tap".into(), "tcx".into(), "log".into()],
                manager: None
            }
        );
        assert!(parse_handover_reply(line.as_bytes(), 2).is_err());
        let refused = parse_handover_reply(br#"{"error":"permission denied"}"#, 0).unwrap_err();
        assert!(
            refused.to_string().contains("permission denied"),
            "{refused}"
        );
        assert!(parse_handover_reply(b"", 0).is_err());
        assert!(parse_handover_reply(b"{\"handover\":{\"names\":[1]}}", 1).is_err());
    }

    #[test]
    fn handover_replies_carry_the_service_manager() {
        let n = crate::daemon::notify::Notifier::new(
            std::ffi::OsStr::new("/run/systemd/notify"),
            Some(Duration::from_secs(5)),
        )
        .unwrap();
        let line = handover_reply(&["tap"], Some(&n));
        assert_eq!(
            parse_handover_reply(line.as_bytes(), 1).unwrap().manager,
            Some((
                "/run/systemd/notify".to_owned(),
                Some(Duration::from_secs(5))
            ))
        );
        let n = crate::daemon::notify::Notifier::new(std::ffi::OsStr::new("@sm"), None).unwrap();
        let line = handover_reply(&["tap"], Some(&n));
        assert_eq!(
            parse_handover_reply(line.as_bytes(), 1).unwrap().manager,
            Some(("@sm".to_owned(), None))
        );
        for bad in [
            r#"{"handover":{"names":[],"manager":{}}}"#,
            r#"{"handover":{"names":[],"manager":{"socket":"/s","watchdog_us":"soon"}}}"#,
        ] {
            assert!(parse_handover_reply(bad.as_bytes(), 0).is_err(), "{bad}");
        }
    }
}
