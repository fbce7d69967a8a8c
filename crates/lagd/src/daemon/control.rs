//! The control socket: the server the daemon runs beside its loop, and the client `lagctl` uses.
//!
//! # Endpoint
//!
//! By default a bond's control socket is the file `BOND.sock` in its network namespace's
//! directory of `/run/lagd` (`/run/lagd/netns-INODE/`, see [`files`](super::files)): two bonds
//! called `bond0` in two namespaces each have their own, `ip netns exec B lagctl show bond0`
//! reaches B's, and only root can create a file there, so no other user can take the name
//! first. `--control PATH` (or `control = "PATH"` in the configuration file) asks for another
//! socket file, in a directory only root may write; a value that starts with `@` names an
//! abstract socket (any local user can bind an abstract name first: lagctl's check of the
//! server, below, then refuses the impostor, but lagd cannot start there).
//!
//! lagctl checks who serves a socket before it sends anything: the server's credentials
//! (`SO_PEERCRED`, recorded by the kernel when it listened) must be root's or lagctl's own
//! user's, or lagctl refuses, naming the pid and uid it found.
//!
//! # Wire protocol
//!
//! A client connects, writes one request line (at most [`MAX_REQUEST`] bytes with its `\n`,
//! within [`REQUEST_TIME`]) and reads one reply line; then the server closes the connection.
//! A request is a JSON object whose `cmd` names the command:
//!
//! ```text
//! {"cmd":"status"}                          -> the status document (lagd::status::Status)
//! {"cmd":"set","options":[["miimon","50"]]}  -> {"changed":[..],"warnings":[..]}
//! {"cmd":"member","member":"eth1","action":"disable"}   (add, remove, disable, enable)
//! {"cmd":"active","member":"eth1"}          (as the kernel's active_slave)
//! {"cmd":"reload"}                          -> {"changed":[..]} (lagd --config only)
//! {"cmd":"events"}                          -> {"subscribed":true}, then one line per event
//! ```
//!
//! The bare word `status` is accepted too. A reply is a JSON object: the status document, or
//! `{"error":"..."}`. An error never repeats more than the first 64 characters of a request.
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

use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::AsFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use tracing::{debug, warn};

use crate::status::Status;

/// The longest request accepted, in bytes, with its newline.
pub const MAX_REQUEST: usize = 64 * 1024;
/// How long a client has to send its whole request.
pub const REQUEST_TIME: Duration = Duration::from_secs(2);
/// How long a client has to take its whole reply.
pub const REPLY_TIME: Duration = Duration::from_secs(2);
/// How many clients are served at once, every kind together ([`Limits::DEFAULT`]'s sum).
pub const MAX_CLIENTS: usize = Limits::DEFAULT.total();
/// Most `key=value` pairs one `set` request may carry (the bonding options number fewer).
pub const MAX_OPTIONS: usize = 64;
/// How long a client thread waits for the loop's answer.
const LOOP_TIME: Duration = Duration::from_secs(5);
/// How much of a bad request an error repeats.
const ECHO: usize = 64;
/// Where a bond's control socket is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// The bond's default: the socket file `BOND.sock` in the network namespace's directory
    /// ([`files::netns_dir`](super::files::netns_dir)), found by the thread that uses it.
    Default(String),
    /// An abstract Unix socket (the name without the leading `@`), scoped to the network
    /// namespace.
    Abstract(String),
    /// A socket file.
    File(PathBuf),
}

impl Endpoint {
    /// The default endpoint of bond `bond`: `BOND.sock` in the network namespace's directory.
    pub fn default_for(bond: &str) -> Self {
        Self::Default(bond.to_owned())
    }

    /// An endpoint as the user writes it: `@NAME` is an abstract socket, anything else a file.
    pub fn parse(text: &str) -> Self {
        match text.strip_prefix('@') {
            Some(name) => Self::Abstract(name.to_owned()),
            None => Self::File(PathBuf::from(text)),
        }
    }

    /// The socket file (`None` for an abstract socket, or a default one where the namespace
    /// cannot be read).
    pub fn file(&self) -> Option<PathBuf> {
        match self {
            Self::Default(bond) => super::files::netns_dir()
                .ok()
                .map(|d| d.join(format!("{bond}.sock"))),
            Self::Abstract(_) => None,
            Self::File(path) => Some(path.clone()),
        }
    }

    /// Connects to the endpoint and checks who serves it: root, or this process's own user
    /// ([`check_server`]); anyone else is refused before a byte is sent.
    pub fn connect(&self) -> io::Result<UnixStream> {
        let stream = match self {
            Self::Abstract(name) => {
                UnixStream::connect_addr(&SocketAddr::from_abstract_name(name.as_bytes())?)?
            }
            Self::Default(_) | Self::File(_) => {
                let path = self.file().ok_or_else(|| {
                    io::Error::other("the network namespace (/proc/thread-self/ns/net)")
                })?;
                UnixStream::connect(path)?
            }
        };
        let server = lagd_sys::peer::peer_credentials(&stream)?;
        check_server(&server, lagd_sys::lock::effective_uid())
            .map_err(|e| io::Error::new(io::ErrorKind::PermissionDenied, e))?;
        Ok(stream)
    }
}

/// Whether a control socket's server, `server`, is one a client running as `me` may talk
/// to: root, or `me` itself (a user cannot be fooled by its own processes). The error names
/// the impostor.
pub fn check_server(server: &lagd_sys::peer::PeerCredentials, me: u32) -> Result<(), String> {
    if server.uid == 0 || server.uid == me {
        return Ok(());
    }
    Err(format!(
        "refusing to talk to it: it is served by pid {} as uid {}, not by root (lagd runs as \
         root; another user's process took the name)",
        server.pid, server.uid
    ))
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Abstract(name) => write!(f, "@{name}"),
            Self::File(path) => write!(f, "{}", path.display()),
            Self::Default(bond) => match self.file() {
                Some(path) => write!(f, "{}", path.display()),
                None => write!(f, "{}/netns-?/{bond}.sock", super::files::RUN_DIR),
            },
        }
    }
}

/// The bonds whose default control socket listens in this network namespace, sorted (read from
/// `/proc/net/unix`, which lists the reader's namespace only).
pub fn local_bonds() -> io::Result<Vec<String>> {
    let dir = super::files::netns_dir()?;
    let text = std::fs::read_to_string("/proc/net/unix")?;
    Ok(bonds_in_proc_net_unix(&text, &dir))
}

/// The bond names of listening `DIR/BOND.sock` sockets in the text of `/proc/net/unix`.
fn bonds_in_proc_net_unix(text: &str, dir: &Path) -> Vec<String> {
    let prefix = format!("{}/", dir.display());
    // Num RefCount Protocol Flags Type St Inode [Path]; Flags has __SO_ACCEPTCON (0x10000) for
    // a listening socket.
    let mut bonds: Vec<String> = text
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let flags = u32::from_str_radix(fields.get(3)?, 16).ok()?;
            let bond = fields
                .get(7)?
                .strip_prefix(prefix.as_str())?
                .strip_suffix(".sock")?;
            (flags & 0x1_0000 != 0 && !bond.is_empty() && !bond.contains('/'))
                .then(|| bond.to_owned())
        })
        .collect();
    bonds.sort();
    bonds.dedup();
    bonds
}

/// A request to the daemon.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Request {
    /// The status document.
    Status,
    /// Change bonding options, all or nothing, with the kernel's rules for a live bond.
    Set {
        /// `(key, value)` pairs, applied in order.
        options: Vec<(String, String)>,
    },
    /// Act on one member.
    Member {
        /// The member's interface name.
        member: String,
        /// What to do.
        action: MemberAction,
    },
    /// Make a member the active one (modes with an active member), as `active_slave` does.
    Active {
        /// The member's interface name.
        member: String,
    },
    /// Stream the bond's state changes, one JSON line each, until the client closes.
    Events,
    /// Read the configuration file again (lagd started with `--config`) and apply what changed.
    Reload,
    /// Hand the bond over to the lagd asking (a planned upgrade, `lagd --take-over`): the
    /// answer carries the descriptors that keep the kernel path forwarding (see
    /// [`handover`](super::handover)), and this lagd exits without undoing anything once the
    /// asker says it has adopted them.
    Handover,
}

/// What `lagctl member` does to a member.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MemberAction {
    /// Enslave an interface (as `ip link set IF master BOND`).
    Add,
    /// Release a member (it stays listed, `down`, as a removed interface does).
    Remove,
    /// Take the member out of use as if it had no carrier, leaving its link up.
    Disable,
    /// Undo `disable`: the member counts its carrier again.
    Enable,
}

impl MemberAction {
    /// The action by its name.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "add" => Some(Self::Add),
            "remove" => Some(Self::Remove),
            "disable" => Some(Self::Disable),
            "enable" => Some(Self::Enable),
            _ => None,
        }
    }
}

impl Request {
    /// Whether the request only reads (and may be sent by the `control_group`).
    pub fn read_only(&self) -> bool {
        match self {
            Self::Status | Self::Events => true,
            Self::Set { .. }
            | Self::Member { .. }
            | Self::Active { .. }
            | Self::Reload
            | Self::Handover => false,
        }
    }

    /// Parses one request line (without its newline). A member must be named as the kernel
    /// names interfaces ([`check_interface_name`](lagd_proto::port::check_interface_name)).
    pub fn parse(line: &str) -> Result<Self, String> {
        let line = line.trim();
        if line == "status" {
            return Ok(Self::Status);
        }
        let request: Self = serde_json::from_str(line).map_err(|e| {
            // serde's message may quote the request (an unknown command): both are cut short.
            format!(
                "bad request '{}': {}",
                shorten(line, ECHO),
                shorten(&e.to_string(), 3 * ECHO)
            )
        })?;
        match &request {
            Self::Member { member, .. } | Self::Active { member } => {
                lagd_proto::port::check_interface_name(member)
                    .map_err(|e| format!("bad request: {e}"))?;
            }
            Self::Set { options } => {
                if options.len() > MAX_OPTIONS {
                    return Err(format!(
                        "bad request: {} options, at most {MAX_OPTIONS} at once",
                        options.len()
                    ));
                }
            }
            Self::Status | Self::Events | Self::Reload | Self::Handover => {}
        }
        Ok(request)
    }
}

/// A request line longer than [`MAX_REQUEST`] bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooLong;

/// One request line gathered from the bytes a client writes, in whatever pieces they come:
/// everything up to the first newline, at most [`MAX_REQUEST`] bytes with it. The server's
/// reading threads feed it; it does no I/O.
#[derive(Clone, Debug, Default)]
pub struct RequestLine {
    line: Vec<u8>,
    complete: bool,
}

impl RequestLine {
    /// Takes the next bytes the client wrote. `Ok(true)`: the line is complete (the bytes after
    /// its newline are not looked at). A line that would pass [`MAX_REQUEST`] is refused
    /// before anything more is kept.
    pub fn push(&mut self, chunk: &[u8]) -> Result<bool, TooLong> {
        if self.complete {
            return Ok(true);
        }
        let end = chunk.iter().position(|&b| b == b'\n');
        let take = end.unwrap_or(chunk.len());
        if self.line.len() + take + usize::from(end.is_some()) > MAX_REQUEST {
            return Err(TooLong);
        }
        self.line.extend_from_slice(&chunk[..take]);
        self.complete = end.is_some();
        Ok(self.complete)
    }

    /// Whether no byte of a request came (a newline alone is an empty request).
    pub fn is_empty(&self) -> bool {
        self.line.is_empty() && !self.complete
    }

    /// The bytes of the line so far, without its newline.
    pub fn bytes(&self) -> &[u8] {
        &self.line
    }

    /// The line as text (bytes that are not UTF-8 are replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.line).into_owned()
    }
}

/// What the server makes of the bytes a client wrote before its newline or its end of
/// stream: the size limit, then [`Request::parse`]. The error is the message the client is sent
/// (in [`error_reply`]); it never repeats more than 64 characters of the request.
pub fn parse_request(bytes: &[u8]) -> Result<Request, String> {
    let mut line = RequestLine::default();
    line.push(bytes)
        .map_err(|TooLong| format!("request refused: longer than {MAX_REQUEST} bytes"))?;
    Request::parse(&line.text())
}

/// The first `max` characters of `text`, with "..." when there were more.
fn shorten(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text.to_owned(),
    }
}

/// An error reply line (without its newline).
pub fn error_reply(message: &str) -> String {
    serde_json::json!({ "error": message }).to_string()
}

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
                Err(e) if request == Request::Handover => {
                    warn!(
                        uid = peer.uid,
                        pid = peer.pid,
                        "control: a handover request refused: {e}"
                    );
                    error_reply(&e)
                }
                Err(e) => error_reply(&e),
                Ok(()) if request == Request::Handover => {
                    // The loop answers on the connection itself; a reply left for this thread
                    // is an error said before anything was handed over.
                    let reply = ask_loop_with(
                        request,
                        Some(stream.try_clone()?),
                        LOOP_TIME + super::handover::ADOPT_TIME,
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

/// Sends `request` on `stream` (connected to `endpoint`) and reads the first reply line, at
/// most `max` bytes. A server that refused the client before reading its request (busy) has
/// still said why: a failed write is reported only when no reply came. An `{"error":..}`
/// reply becomes an error.
fn first_reply<'a>(
    endpoint: &Endpoint,
    stream: &'a UnixStream,
    request: &Request,
    max: u64,
) -> Result<(BufReader<&'a UnixStream>, serde_json::Value)> {
    let mut line = serde_json::to_string(request)?;
    line.push('\n');
    let written = (&*stream).write_all(line.as_bytes());
    let mut reader = BufReader::new(stream);
    let mut reply = String::new();
    let read = (&mut reader).take(max).read_line(&mut reply);
    if reply.is_empty() {
        written.with_context(|| format!("sending the request to {endpoint}"))?;
        read.with_context(|| format!("reading the reply from {endpoint}"))?;
        bail!("{endpoint}: the connection was closed without a reply");
    }
    let value: serde_json::Value =
        serde_json::from_str(&reply).with_context(|| format!("bad reply from {endpoint}"))?;
    if let Some(e) = value.get("error").and_then(|e| e.as_str()) {
        bail!("{endpoint}: {e}");
    }
    Ok((reader, value))
}

/// Connects to `endpoint` ([`Endpoint::connect`], which checks who serves it).
fn connect(endpoint: &Endpoint) -> Result<UnixStream> {
    endpoint.connect().map_err(|e| match e.kind() {
        // The socket file's mode: root's, and control_group's where one is set.
        io::ErrorKind::PermissionDenied if e.raw_os_error() == Some(libc::EACCES) => {
            anyhow::anyhow!(
                "{endpoint}: permission denied (uid {}): the control socket is open to root, \
                 and to the bond's control_group for the status",
                lagd_sys::lock::effective_uid()
            )
        }
        _ => anyhow::Error::new(e).context(format!("no lagd answers on {endpoint}")),
    })
}

/// Sends `request` to the lagd at `endpoint` and returns its reply object (an `{"error":..}`
/// reply becomes an error).
pub fn request(endpoint: &Endpoint, request: &Request) -> Result<serde_json::Value> {
    let stream = connect(endpoint)?;
    stream.set_read_timeout(Some(LOOP_TIME + REQUEST_TIME))?;
    stream.set_write_timeout(Some(REQUEST_TIME))?;
    Ok(first_reply(endpoint, &stream, request, 64 << 20)?.1)
}

/// Subscribes to the events of the lagd at `endpoint` and hands each to `each` until it
/// returns `false` or lagd closes the connection.
pub fn events(endpoint: &Endpoint, mut each: impl FnMut(serde_json::Value) -> bool) -> Result<()> {
    let stream = connect(endpoint)?;
    stream.set_write_timeout(Some(REQUEST_TIME))?;
    // The acknowledgement.
    let (mut reader, _) = first_reply(endpoint, &stream, &Request::Events, 1 << 20)?;
    loop {
        let mut line = String::new();
        if (&mut reader).take(1 << 20).read_line(&mut line)? == 0 {
            return Ok(());
        }
        let value: serde_json::Value = serde_json::from_str(&line)
            .with_context(|| format!("bad event line from {endpoint}"))?;
        if let Some(e) = value.get("error").and_then(|e| e.as_str()) {
            bail!("{endpoint}: {e}");
        }
        if !each(value) {
            return Ok(());
        }
    }
}

/// Asks the lagd at `endpoint` for its status.
pub fn status_at(endpoint: &Endpoint) -> Result<Status> {
    let value = request(endpoint, &Request::Status)?;
    serde_json::from_value(value).with_context(|| format!("bad status from {endpoint}"))
}

/// Asks the lagd serving the socket file `path` for its status.
pub fn query_status(path: &Path) -> Result<Status> {
    status_at(&Endpoint::File(path.to_path_buf()))
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn endpoints() {
        let dir = crate::daemon::files::netns_dir().unwrap();
        let default = Endpoint::default_for("bond0");
        assert_eq!(default, Endpoint::Default("bond0".into()));
        assert_eq!(default.file(), Some(dir.join("bond0.sock")));
        assert_eq!(
            default.to_string(),
            dir.join("bond0.sock").display().to_string()
        );
        assert_eq!(Endpoint::parse("@x/y"), Endpoint::Abstract("x/y".into()));
        assert_eq!(Endpoint::parse("@x/y").file(), None);
        assert_eq!(
            Endpoint::parse("/run/a.sock"),
            Endpoint::File("/run/a.sock".into())
        );
    }

    #[test]
    fn lists_listening_lagd_sockets() {
        let dir = Path::new("/run/lagd/netns-7");
        let text = "Num       RefCount Protocol Flags    Type St Inode Path\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 100 /run/lagd/netns-7/bond1.sock\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 101 /run/lagd/netns-7/bond0.sock\n\
            0000000000000000: 00000003 00000000 00000000 0001 03 102 /run/lagd/netns-7/bond9.sock\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 103 /run/lagd/netns-8/bond2.sock\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 104 /run/lagd/bond3.sock\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 104 @lagd/bond4\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 104 /run/lagd/netns-7/b5.state\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 105\n";
        assert_eq!(bonds_in_proc_net_unix(text, dir), ["bond0", "bond1"]);
    }

    fn peer(pid: u32, uid: u32) -> lagd_sys::peer::PeerCredentials {
        creds(uid, uid, &[]).with_pid(pid)
    }

    #[test]
    fn a_server_not_run_by_root_is_refused_by_name() {
        assert!(check_server(&peer(10, 0), 0).is_ok());
        // A user's own processes cannot fool it.
        assert!(check_server(&peer(10, 1000), 1000).is_ok());
        let e = check_server(&peer(4321, 65534), 0).unwrap_err();
        assert!(e.contains("pid 4321") && e.contains("uid 65534"), "{e}");
        assert!(check_server(&peer(4321, 65534), 1000).is_err());
    }

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

    #[test]
    fn requests() {
        assert_eq!(Request::parse("status"), Ok(Request::Status));
        assert_eq!(Request::parse(r#"{"cmd":"status"}"#), Ok(Request::Status));
        let long = format!("{{\"cmd\":\"{}\"}}", "x".repeat(10_000));
        let e = Request::parse(&long).unwrap_err();
        assert!(e.len() < 400, "the error repeats the request: {e}");
        assert!(Request::parse(r#"{"cmd":"reboot"}"#).is_err());
        // Members are named as the kernel names interfaces.
        assert_eq!(
            Request::parse(r#"{"cmd":"member","member":"eth1","action":"add"}"#),
            Ok(Request::Member {
                member: "eth1".into(),
                action: MemberAction::Add
            })
        );
        for bad in [
            "../../etc",
            "",
            "a-name-longer-than-15",
            "eth 1",
            "..",
            r"eth1\u0000",
        ] {
            let line = format!(r#"{{"cmd":"member","member":"{bad}","action":"add"}}"#);
            assert!(Request::parse(&line).is_err(), "{line}");
            let line = format!(r#"{{"cmd":"active","member":"{bad}"}}"#);
            assert!(Request::parse(&line).is_err(), "{line}");
        }
        let many: Vec<_> = (0..=MAX_OPTIONS)
            .map(|i| (format!("k{i}"), "1".to_owned()))
            .collect();
        let line = serde_json::to_string(&Request::Set { options: many }).unwrap();
        assert!(Request::parse(&line).unwrap_err().contains("at most"));
    }

    #[test]
    fn request_lines() {
        // In pieces, up to the first newline; what follows it is not looked at.
        let mut line = RequestLine::default();
        assert!(line.is_empty());
        assert_eq!(line.push(b"{\"cmd\":"), Ok(false));
        assert_eq!(line.push(b"\"status\"}\nmore"), Ok(true));
        assert_eq!(line.push(b"x".repeat(MAX_REQUEST * 2).as_slice()), Ok(true));
        assert_eq!(line.text(), r#"{"cmd":"status"}"#);
        assert_eq!(parse_request(b"status\n{garbage"), Ok(Request::Status));
        // The limit counts the newline; nothing past it is kept.
        let mut line = RequestLine::default();
        assert_eq!(line.push(&vec![b' '; MAX_REQUEST - 1]), Ok(false));
        assert_eq!(line.push(b"\n"), Ok(true));
        let mut line = RequestLine::default();
        assert_eq!(line.push(&vec![b' '; MAX_REQUEST]), Ok(false));
        assert_eq!(line.push(b"\n"), Err(TooLong));
        assert_eq!(line.push(b" "), Err(TooLong));
        assert_eq!(line.bytes().len(), MAX_REQUEST);
        let e = parse_request(&vec![b'x'; MAX_REQUEST + 1]).unwrap_err();
        assert!(e.starts_with("request refused"), "{e}");
        // A newline alone is a request (a bad one); nothing at all is none.
        let mut line = RequestLine::default();
        assert_eq!(line.push(b"\n"), Ok(true));
        assert!(!line.is_empty());
        assert!(parse_request(b"\n").is_err());
        assert!(parse_request(b"\xff\xfe").is_err());
    }

    fn creds(uid: u32, gid: u32, groups: &[u32]) -> lagd_sys::peer::PeerCredentials {
        lagd_sys::peer::PeerCredentials {
            pid: 1,
            uid,
            gid,
            groups: groups.to_vec(),
        }
    }

    trait WithPid {
        fn with_pid(self, pid: u32) -> Self;
    }

    impl WithPid for lagd_sys::peer::PeerCredentials {
        fn with_pid(mut self, pid: u32) -> Self {
            self.pid = pid;
            self
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
