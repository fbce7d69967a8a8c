//! The control socket's server, beside the daemon's loop. The endpoint, the wire protocol and
//! the client are [`crate::control`]'s.
//!
//! # Who may ask
//!
//! The server reads the client's credentials from the kernel (`SO_PEERCRED`). Root (uid 0) may
//! send every command; a client whose group (primary or supplementary) is the configured
//! `control_group` may ask for the status only; everyone else is refused.
//!
//! The credentials are read when a connection is accepted, before it takes a slot: a client
//! that may send nothing at all is told so and closed at once.
//!
//! # Never stalling the bond, nor locking root out
//!
//! Clients are served on threads of their own, never in the forwarding loop: a thread accepts,
//! reads the request with a deadline and a size limit, hands it to the loop over a channel
//! (waking it with one byte on a socket pair) and writes the reply with a deadline. The loop's
//! part is to answer what is queued without ever blocking. Slots are counted per kind of client
//! ([`Limits`]): root has a reserve no other user can take; each other user has a few slots of
//! its own within a shared pool; `events` subscriptions, which stay open, are counted apart
//! from requests, per user too. A client past its limit is told the server is busy and closed;
//! one that sends no complete request within [`REQUEST_TIME`] is closed.

use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use tracing::{debug, warn};

use crate::control::{
    ADOPT_TIME, Endpoint, LOOP_TIME, MAX_REQUEST, REPLY_TIME, REQUEST_TIME, Request, RequestLine,
    TooLong, error_reply,
};

/// How many clients are served at once, every kind together ([`Limits::DEFAULT`]'s sum).
pub const MAX_CLIENTS: usize = Limits::DEFAULT.total();

/// A request waiting for the loop's answer.
pub(crate) struct Pending {
    /// What the client asks.
    pub(crate) request: Request,
    reply: mpsc::Sender<String>,
    /// For `handover`: the client's connection, which the loop answers on itself (the
    /// descriptors go with the answer).
    pub(crate) stream: Option<UnixStream>,
}

impl Pending {
    /// For `events`: acknowledges the subscription and returns the channel the event lines go
    /// to (the client's thread writes them; a send fails once the client is gone).
    pub(crate) fn subscribe(self) -> mpsc::Sender<String> {
        let _ = self.reply.send(r#"{"subscribed":true}"#.to_owned());
        self.reply
    }

    /// Sends the reply line (without its newline) to the client's thread.
    pub(crate) fn answer(self, reply: String) {
        // The thread gave up waiting: nobody to tell.
        let _ = self.reply.send(reply);
    }
}

/// The server side: the loop's end of the channel from the client threads.
pub(crate) struct Server {
    /// Readable when requests are queued.
    wake: UnixStream,
    requests: mpsc::Receiver<Pending>,
    /// The socket file to remove when the daemon stops (its device and inode, so that a file
    /// someone else put there since is left alone).
    file: Option<(PathBuf, u64, u64)>,
}

/// Who may open the control socket beyond root, and for what.
#[derive(Clone, Copy, Debug)]
struct Access {
    /// Members of this group may ask for the status.
    status_group: Option<u32>,
}

impl Access {
    /// Whether `peer` may send anything at all (root, or a member of the status group).
    fn admits(&self, peer: &lagd_sys::peer::PeerCredentials) -> Result<(), String> {
        self.check(peer, &Request::Status)
    }

    fn check(
        &self,
        peer: &lagd_sys::peer::PeerCredentials,
        request: &Request,
    ) -> Result<(), String> {
        if peer.uid == 0 {
            return Ok(());
        }
        if !request.read_only() {
            return Err(format!(
                "permission denied: only root may change the bond (uid {})",
                peer.uid
            ));
        }
        match self.status_group {
            Some(g) if peer.gid == g || peer.groups.contains(&g) => Ok(()),
            Some(g) => Err(format!(
                "permission denied: the status is open to root and group {g} only (uid {})",
                peer.uid
            )),
            None => Err(format!(
                "permission denied: only root may use the control socket (uid {}; see control_group)",
                peer.uid
            )),
        }
    }
}

impl Server {
    /// Binds `endpoint` and starts the accepting thread. Refuses if another lagd answers there,
    /// and never removes a file at a socket path unless it is a socket nobody answers on.
    /// `status_group` may ask for the status (a socket file is then group-readable by it).
    pub(crate) fn start(endpoint: &Endpoint, status_group: Option<u32>) -> Result<Self> {
        let (listener, file) = match endpoint {
            Endpoint::Abstract(name) => {
                let addr = SocketAddr::from_abstract_name(name.as_bytes())
                    .with_context(|| format!("control socket name {endpoint}"))?;
                let listener = UnixListener::bind_addr(&addr).map_err(|e| {
                    if e.kind() == io::ErrorKind::AddrInUse {
                        anyhow::anyhow!(
                            "another process already holds the abstract socket {endpoint} in \
                             this network namespace (another lagd, or any local user: abstract \
                             names have no owner; leave out --control for the default socket, \
                             which only root can create)"
                        )
                    } else {
                        anyhow::Error::new(e).context(format!("binding {endpoint}"))
                    }
                })?;
                (listener, None)
            }
            Endpoint::Default(_) | Endpoint::File(_) => {
                let path = &endpoint
                    .file()
                    .context("the network namespace's directory")?;
                let listener = bind_file(path, status_group)?;
                let meta = std::fs::symlink_metadata(path)
                    .with_context(|| format!("stat {}", path.display()))?;
                (listener, Some((path.clone(), meta.dev(), meta.ino())))
            }
        };
        let (wake, wake_tx) = UnixStream::pair().context("control wake pair")?;
        wake.set_nonblocking(true)?;
        wake_tx.set_nonblocking(true)?;
        let (tx, requests) = mpsc::channel();
        let access = Access { status_group };
        std::thread::Builder::new()
            .name("lagd-control".into())
            .spawn(move || {
                // Capabilities are per thread, and this one (with the client threads it starts)
                // needs none: it reads requests and writes replies on sockets already open.
                if let Err(e) = lagd_sys::caps::keep_only(&[]) {
                    warn!("control thread: could not drop capabilities: {e}");
                }
                accept_loop(listener, tx, wake_tx, access)
            })
            .context("control thread")?;
        Ok(Self {
            wake,
            requests,
            file,
        })
    }

    /// Takes the socket file out of the way for a planned upgrade (renamed beside itself, so
    /// that the new lagd binds the endpoint while this one's listener still exists); returns
    /// the hidden name, to put back with [`Server::unhide`]. Abstract endpoints cannot be.
    pub(crate) fn hide(&self) -> Result<PathBuf, String> {
        let Some((path, ..)) = &self.file else {
            return Err(
                "a planned upgrade needs a control socket file (an abstract socket's name \
                 cannot be passed on while its listener lives)"
                    .into(),
            );
        };
        let mut hidden = path.clone().into_os_string();
        hidden.push(".handover");
        let hidden = PathBuf::from(hidden);
        std::fs::rename(path, &hidden).map_err(|e| format!("renaming {}: {e}", path.display()))?;
        Ok(hidden)
    }

    /// Puts the socket file hidden by [`Server::hide`] back (the upgrade failed).
    pub(crate) fn unhide(&self, hidden: &Path) {
        if let Some((path, ..)) = &self.file {
            if let Err(e) = std::fs::rename(hidden, path) {
                warn!("putting the control socket {} back: {e}", path.display());
            }
        }
    }

    /// The descriptor the loop polls: readable when requests wait.
    pub(crate) fn wake_fd(&self) -> impl AsFd + '_ {
        &self.wake
    }

    /// The next queued request, if any (never blocks). Call until `None` after every wake.
    pub(crate) fn next(&mut self) -> Option<Pending> {
        // Clear the wake bytes first: a request queued after this read wakes the loop again.
        let mut buf = [0u8; 64];
        while matches!((&self.wake).read(&mut buf), Ok(n) if n > 0) {}
        self.requests.try_recv().ok()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some((path, dev, ino)) = &self.file {
            let ours = std::fs::symlink_metadata(path)
                .is_ok_and(|m| m.file_type().is_socket() && m.dev() == *dev && m.ino() == *ino);
            if ours {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

/// Binds a socket file (mode 0600, or 0660 with `group` as its group).
/// Its directory is there and checked already (`Restore::control_dir`).
fn bind_file(path: &Path, group: Option<u32>) -> Result<UnixListener> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if !meta.file_type().is_socket() => bail!(
            "control socket {}: the path exists and is not a socket; refusing to replace it \
             (remove it or give another --control PATH)",
            path.display()
        ),
        Ok(_) => {
            if UnixStream::connect(path).is_ok() {
                bail!(
                    "another lagd is already serving {} (stop it first)",
                    path.display()
                );
            }
            std::fs::remove_file(path)
                .with_context(|| format!("removing stale {}", path.display()))?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("stat {}", path.display())),
    }
    let listener =
        UnixListener::bind(path).with_context(|| format!("binding {}", path.display()))?;
    let mode = if group.is_some() { 0o660 } else { 0o600 };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("chmod {}", path.display()))?;
    if let Some(g) = group {
        std::os::unix::fs::chown(path, None, Some(g))
            .with_context(|| format!("chown {} to group {g}", path.display()))?;
    }
    Ok(listener)
}

/// How many clients of each kind are served at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Root's requests: a reserve no other user can take (the service manager is root too).
    pub root: usize,
    /// Root's `events` subscriptions.
    pub root_events: usize,
    /// Every other user's requests together.
    pub others: usize,
    /// One other user's requests.
    pub per_user: usize,
    /// Every other user's `events` subscriptions together.
    pub others_events: usize,
    /// One other user's `events` subscriptions.
    pub per_user_events: usize,
}

impl Limits {
    /// The limits the server applies.
    pub const DEFAULT: Self = Self {
        root: 64,
        root_events: 16,
        others: 32,
        per_user: 4,
        others_events: 16,
        per_user_events: 2,
    };

    /// Every slot of every kind.
    pub const fn total(&self) -> usize {
        self.root + self.root_events + self.others + self.others_events
    }
}

/// The slots in use, per kind and per user.
#[derive(Debug, Default)]
struct InUse {
    root: usize,
    root_events: usize,
    others: usize,
    others_events: usize,
    /// Per user other than root: (requests, subscriptions).
    per_user: std::collections::HashMap<u32, (usize, usize)>,
}

/// The server's slots: taken when a client is accepted, given back when its thread ends.
#[derive(Debug)]
struct Slots {
    limits: Limits,
    in_use: std::sync::Mutex<InUse>,
}

/// A slot one client holds; given back when dropped.
#[derive(Debug)]
struct Slot {
    slots: Arc<Slots>,
    uid: u32,
    events: bool,
}

impl Slots {
    fn new(limits: Limits) -> Arc<Self> {
        Arc::new(Self {
            limits,
            in_use: std::sync::Mutex::new(InUse::default()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, InUse> {
        // A client thread that panicked left the counts as they were: still right.
        self.in_use.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A request slot for a client of user `uid`, or the reason it is busy.
    fn admit(self: &Arc<Self>, uid: u32) -> Result<Slot, String> {
        let l = self.limits;
        let mut u = self.lock();
        if uid == 0 {
            if u.root >= l.root {
                return Err(format!(
                    "busy: root's {} connections are all in use; try again",
                    l.root
                ));
            }
            u.root += 1;
        } else {
            let mine = u.per_user.get(&uid).map_or(0, |c| c.0);
            if mine >= l.per_user {
                return Err(format!(
                    "busy: uid {uid} already has {mine} requests open (at most {}); try again",
                    l.per_user
                ));
            }
            if u.others >= l.others {
                return Err(format!(
                    "busy: {} clients other than root are being served; try again",
                    l.others
                ));
            }
            u.others += 1;
            u.per_user.entry(uid).or_default().0 += 1;
        }
        Ok(Slot {
            slots: Arc::clone(self),
            uid,
            events: false,
        })
    }

    fn release(&self, uid: u32, events: bool) {
        let mut u = self.lock();
        match (uid, events) {
            (0, false) => u.root -= 1,
            (0, true) => u.root_events -= 1,
            (_, false) => {
                u.others -= 1;
                Self::forget(&mut u, uid, |c| c.0 -= 1);
            }
            (_, true) => {
                u.others_events -= 1;
                Self::forget(&mut u, uid, |c| c.1 -= 1);
            }
        }
    }

    /// Applies `change` to `uid`'s counts, dropping the entry once both are zero (the map
    /// holds only users with a connection open).
    fn forget(u: &mut InUse, uid: u32, change: impl FnOnce(&mut (usize, usize))) {
        if let Some(c) = u.per_user.get_mut(&uid) {
            change(c);
            if *c == (0, 0) {
                u.per_user.remove(&uid);
            }
        }
    }
}

impl Slot {
    /// Trades this request slot for a subscription slot (the request was `events`), or says
    /// why there is none (this slot is given back either way).
    fn into_events(self) -> Result<Self, String> {
        let l = self.slots.limits;
        let uid = self.uid;
        let slots = Arc::clone(&self.slots);
        drop(self);
        let mut u = slots.lock();
        if uid == 0 {
            if u.root_events >= l.root_events {
                return Err(format!(
                    "busy: root already has {} event subscriptions open",
                    l.root_events
                ));
            }
            u.root_events += 1;
        } else {
            let mine = u.per_user.get(&uid).map_or(0, |c| c.1);
            if mine >= l.per_user_events {
                return Err(format!(
                    "busy: uid {uid} already has {mine} event subscriptions open (at most {})",
                    l.per_user_events
                ));
            }
            if u.others_events >= l.others_events {
                return Err(format!(
                    "busy: {} event subscriptions of users other than root are open",
                    l.others_events
                ));
            }
            u.others_events += 1;
            u.per_user.entry(uid).or_default().1 += 1;
        }
        drop(u);
        Ok(Self {
            slots,
            uid,
            events: true,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.release(self.uid, self.events);
    }
}

/// Tells a client it is refused (without waiting on it: the reply is short and the socket's
/// buffer empty) and closes the connection.
fn refuse(stream: UnixStream, reason: &str) {
    let _ = stream.set_nonblocking(true);
    let _ = (&stream).write_all(format!("{}\n", error_reply(reason)).as_bytes());
    let _ = stream.shutdown(std::net::Shutdown::Write);
}

fn accept_loop(
    listener: UnixListener,
    tx: mpsc::Sender<Pending>,
    wake: UnixStream,
    access: Access,
) {
    let wake = Arc::new(wake);
    let slots = Slots::new(Limits::DEFAULT);
    loop {
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) => {
                warn!("control socket: {e}");
                // EMFILE and the like: do not spin.
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        // Who it is, before it takes anything: a client that may send nothing is refused now.
        let peer = match lagd_sys::peer::peer_credentials(&stream) {
            Ok(p) => p,
            Err(e) => {
                debug!("control client: {e}");
                continue;
            }
        };
        if let Err(e) = access.admits(&peer) {
            refuse(stream, &e);
            continue;
        }
        let slot = match slots.admit(peer.uid) {
            Ok(s) => s,
            Err(e) => {
                refuse(stream, &e);
                continue;
            }
        };
        let (tx, wake) = (tx.clone(), Arc::clone(&wake));
        let spawned = std::thread::Builder::new()
            .name("lagd-client".into())
            .stack_size(256 * 1024)
            .spawn(move || {
                if let Err(e) = serve(&stream, &tx, &wake, access, &peer, slot) {
                    debug!("control client: {e}");
                }
            });
        if let Err(e) = spawned {
            warn!("control client thread: {e}");
        }
    }
}

/// Serves one client on its own thread, holding `slot` until it is done.
fn serve(
    stream: &UnixStream,
    tx: &mpsc::Sender<Pending>,
    wake: &UnixStream,
    access: Access,
    peer: &lagd_sys::peer::PeerCredentials,
    slot: Slot,
) -> io::Result<()> {
    let reply = match read_request(stream) {
        Ok(None) => return Ok(()),
        Ok(Some(line)) => match Request::parse(&line) {
            Err(e) => error_reply(&e),
            Ok(request) => match access.check(peer, &request) {
                Err(e) if matches!(request, Request::Handover | Request::Leave) => {
                    warn!(
                        uid = peer.uid,
                        pid = peer.pid,
                        "control: a {} request refused: {e}",
                        if request == Request::Leave {
                            "leave"
                        } else {
                            "handover"
                        }
                    );
                    error_reply(&e)
                }
                Err(e) => error_reply(&e),
                Ok(()) if matches!(request, Request::Handover | Request::Leave) => {
                    // The loop answers on the connection itself; a reply left for this thread
                    // is an error said before anything was handed over.
                    let reply = ask_loop_with(
                        request,
                        Some(stream.try_clone()?),
                        LOOP_TIME + ADOPT_TIME,
                        tx,
                        wake,
                    );
                    if reply.is_empty() {
                        return Ok(());
                    }
                    reply
                }
                Ok(()) if request == Request::Events => match slot.into_events() {
                    Ok(slot) => return stream_events(stream, tx, wake, slot),
                    Err(e) => error_reply(&e),
                },
                Ok(()) => ask_loop(request, tx, wake),
            },
        },
        Err(RequestError::TooLong) => {
            error_reply(&format!("request refused: longer than {MAX_REQUEST} bytes"))
        }
        Err(RequestError::TooSlow) => error_reply(&format!(
            "request refused: not complete within {} s",
            REQUEST_TIME.as_secs()
        )),
        Err(RequestError::Io(e)) => return Err(e),
    };
    write_reply(stream, &reply)
}

/// Subscribes to the loop's events and writes each line to the client until it goes away (a
/// write that does not complete within [`REPLY_TIME`] ends the subscription too).
/// `_slot` is the subscription's, held until it ends.
fn stream_events(
    stream: &UnixStream,
    tx: &mpsc::Sender<Pending>,
    wake: &UnixStream,
    _slot: Slot,
) -> io::Result<()> {
    let (reply_tx, reply_rx) = mpsc::channel();
    if tx
        .send(Pending {
            request: Request::Events,
            reply: reply_tx,
            stream: None,
        })
        .is_err()
    {
        return write_reply(stream, &error_reply("the daemon is stopping"));
    }
    let _ = (&*wake).write(&[1]);
    loop {
        match reply_rx.recv_timeout(Duration::from_secs(1)) {
            Ok(line) => write_reply(stream, &line)?,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if peer_closed(stream)? {
                    return Ok(());
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
        }
    }
}

/// Whether the client closed its end (it sends nothing after its request).
fn peer_closed(stream: &UnixStream) -> io::Result<bool> {
    stream.set_nonblocking(true)?;
    let mut byte = [0u8; 1];
    let closed = match (&*stream).read(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => false,
        Err(_) => true,
    };
    stream.set_nonblocking(false)?;
    Ok(closed)
}

fn ask_loop(request: Request, tx: &mpsc::Sender<Pending>, wake: &UnixStream) -> String {
    ask_loop_with(request, None, LOOP_TIME, tx, wake)
}

/// Queues `request` (with the client's connection `stream`, for a request the loop answers on
/// it) and waits up to `wait` for the loop's reply.
fn ask_loop_with(
    request: Request,
    stream: Option<UnixStream>,
    wait: Duration,
    tx: &mpsc::Sender<Pending>,
    wake: &UnixStream,
) -> String {
    let (reply_tx, reply_rx) = mpsc::channel();
    if tx
        .send(Pending {
            request,
            reply: reply_tx,
            stream,
        })
        .is_err()
    {
        return error_reply("the daemon is stopping");
    }
    // A full pair means the loop has a wake pending already.
    let _ = (&*wake).write(&[1]);
    reply_rx
        .recv_timeout(wait)
        .unwrap_or_else(|_| error_reply("the daemon did not answer in time"))
}

enum RequestError {
    TooLong,
    TooSlow,
    Io(io::Error),
}

/// Reads one request line within [`REQUEST_TIME`] and [`MAX_REQUEST`] bytes. `None`: the client
/// closed without sending anything.
fn read_request(stream: &UnixStream) -> Result<Option<String>, RequestError> {
    let deadline = Instant::now() + REQUEST_TIME;
    let mut line = RequestLine::default();
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(RequestError::TooSlow);
        }
        stream
            .set_read_timeout(Some(left))
            .map_err(RequestError::Io)?;
        let n = match (&*stream).read(&mut buf) {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(RequestError::TooSlow);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(RequestError::Io(e)),
        };
        let complete = line
            .push(&buf[..n])
            .map_err(|TooLong| RequestError::TooLong)?;
        if complete || n == 0 {
            if line.is_empty() {
                return Ok(None);
            }
            return Ok(Some(line.text()));
        }
    }
}

/// Writes the reply line within [`REPLY_TIME`].
fn write_reply(stream: &UnixStream, reply: &str) -> io::Result<()> {
    let deadline = Instant::now() + REPLY_TIME;
    let mut data = Vec::with_capacity(reply.len() + 1);
    data.extend_from_slice(reply.as_bytes());
    data.push(b'\n');
    let mut sent = 0;
    while sent < data.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "client did not take its reply",
            ));
        }
        stream.set_write_timeout(Some(left))?;
        match (&*stream).write(&data[sent..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => sent += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn root_keeps_its_slots_whatever_others_hold() {
        let l = Limits::DEFAULT;
        let slots = Slots::new(l);
        // Other users fill their pool, a few slots each.
        let mut held = Vec::new();
        for uid in 1000.. {
            match slots.admit(uid) {
                Ok(s) => held.push(s),
                Err(e) => {
                    assert!(e.starts_with("busy:"), "{e}");
                    break;
                }
            }
            if held.len() > l.total() {
                panic!("no limit");
            }
        }
        assert_eq!(held.len(), l.others);
        // One user alone cannot take more than its share.
        drop(held);
        let mine: Vec<_> = (0..l.per_user).map(|_| slots.admit(7).unwrap()).collect();
        let e = slots.admit(7).unwrap_err();
        assert!(e.contains("uid 7"), "{e}");
        assert!(slots.admit(8).is_ok());
        // Root is served all the while.
        let root: Vec<_> = (0..l.root).map(|_| slots.admit(0).unwrap()).collect();
        assert!(slots.admit(0).is_err(), "root's reserve has a bound too");
        drop(root);
        assert!(slots.admit(0).is_ok());
        // Subscriptions are counted apart, per user: a request slot is traded for one.
        drop(mine);
        let subs: Vec<_> = (0..l.per_user_events)
            .map(|_| slots.admit(7).unwrap().into_events().unwrap())
            .collect();
        let e = slots.admit(7).unwrap().into_events().unwrap_err();
        assert!(e.contains("event subscriptions"), "{e}");
        // ... and leave the request slots free.
        let requests: Vec<_> = (0..l.per_user).map(|_| slots.admit(7).unwrap()).collect();
        assert_eq!(slots.lock().per_user[&7], (l.per_user, l.per_user_events));
        drop((subs, requests));
        assert!(
            slots.lock().per_user.is_empty(),
            "counts kept for gone clients"
        );
        let u = slots.lock();
        assert_eq!(
            (u.root, u.others, u.root_events, u.others_events),
            (0, 0, 0, 0)
        );
    }

    fn creds(uid: u32, gid: u32, groups: &[u32]) -> lagd_sys::peer::PeerCredentials {
        lagd_sys::peer::PeerCredentials {
            pid: 1,
            uid,
            gid,
            groups: groups.to_vec(),
        }
    }

    #[test]
    fn access() {
        let none = Access { status_group: None };
        let group = Access {
            status_group: Some(50),
        };
        assert!(none.check(&creds(0, 0, &[]), &Request::Status).is_ok());
        assert!(none.check(&creds(1000, 50, &[]), &Request::Status).is_err());
        assert!(group.check(&creds(1000, 50, &[]), &Request::Status).is_ok());
        assert!(
            group
                .check(&creds(1000, 1000, &[7, 50]), &Request::Status)
                .is_ok()
        );
        assert!(
            group
                .check(&creds(1000, 1000, &[7]), &Request::Status)
                .is_err()
        );
    }
}
