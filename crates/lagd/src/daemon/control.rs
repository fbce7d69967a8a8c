//! The control socket: the server the daemon runs beside its loop, and the client `lagctl` uses.
//!
//! # Endpoint
//!
//! By default a bond's control socket is the abstract Unix socket `@lagd/BOND`: abstract names
//! belong to the network namespace, so two bonds called `bond0` in two namespaces each have
//! their own, and `ip netns exec B lagctl show bond0` reaches B's. `--control PATH` (or
//! `control = "PATH"` in the configuration file) asks for a socket file instead; a value that
//! starts with `@` names an abstract socket.
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
//! # Never stalling the bond
//!
//! Clients are served on threads of their own, never in the forwarding loop: a thread accepts
//! (at most [`MAX_CLIENTS`] at once; more are told the server is busy and closed), reads the
//! request with a deadline and a size limit, hands it to the loop over a channel (waking it with
//! one byte on a socket pair) and writes the reply with a deadline. The loop's part is to answer
//! what is queued without ever blocking.

use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::AsFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
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
/// How many clients are served at once.
pub const MAX_CLIENTS: usize = 64;
/// Most `key=value` pairs one `set` request may carry (the bonding options number fewer).
pub const MAX_OPTIONS: usize = 64;
/// How long a client thread waits for the loop's answer.
const LOOP_TIME: Duration = Duration::from_secs(5);
/// How much of a bad request an error repeats.
const ECHO: usize = 64;
/// The prefix of the default, abstract, control sockets.
const ABSTRACT_PREFIX: &str = "lagd/";

/// Where a bond's control socket is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// An abstract Unix socket (the name without the leading `@`), scoped to the network
    /// namespace.
    Abstract(String),
    /// A socket file.
    File(PathBuf),
}

impl Endpoint {
    /// The default endpoint of bond `bond`: the abstract socket `@lagd/BOND`.
    pub fn default_for(bond: &str) -> Self {
        Self::Abstract(format!("{ABSTRACT_PREFIX}{bond}"))
    }

    /// An endpoint as the user writes it: `@NAME` is an abstract socket, anything else a file.
    pub fn parse(text: &str) -> Self {
        match text.strip_prefix('@') {
            Some(name) => Self::Abstract(name.to_owned()),
            None => Self::File(PathBuf::from(text)),
        }
    }

    /// Connects to the endpoint.
    pub fn connect(&self) -> io::Result<UnixStream> {
        match self {
            Self::Abstract(name) => {
                UnixStream::connect_addr(&SocketAddr::from_abstract_name(name.as_bytes())?)
            }
            Self::File(path) => UnixStream::connect(path),
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Abstract(name) => write!(f, "@{name}"),
            Self::File(path) => write!(f, "{}", path.display()),
        }
    }
}

/// The bonds whose default control socket listens in this network namespace, sorted (read from
/// `/proc/net/unix`, which lists the reader's namespace only).
pub fn local_bonds() -> io::Result<Vec<String>> {
    let text = std::fs::read_to_string("/proc/net/unix")?;
    Ok(bonds_in_proc_net_unix(&text))
}

/// The bond names of listening `@lagd/BOND` sockets in the text of `/proc/net/unix`.
fn bonds_in_proc_net_unix(text: &str) -> Vec<String> {
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
                .strip_prefix('@')?
                .strip_prefix(ABSTRACT_PREFIX)?;
            (flags & 0x1_0000 != 0 && !bond.is_empty()).then(|| bond.to_owned())
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
            Self::Set { .. } | Self::Member { .. } | Self::Active { .. } | Self::Reload => false,
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
            Self::Status | Self::Events | Self::Reload => {}
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
                            "another lagd already serves the control socket {endpoint} in this \
                             network namespace (stop it, or give this bond another name or \
                             --control PATH)"
                        )
                    } else {
                        anyhow::Error::new(e).context(format!("binding {endpoint}"))
                    }
                })?;
                (listener, None)
            }
            Endpoint::File(path) => {
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
fn bind_file(path: &Path, group: Option<u32>) -> Result<UnixListener> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
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

fn accept_loop(
    listener: UnixListener,
    tx: mpsc::Sender<Pending>,
    wake: UnixStream,
    access: Access,
) {
    let wake = Arc::new(wake);
    let clients = Arc::new(AtomicUsize::new(0));
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
        if clients.load(Ordering::Acquire) >= MAX_CLIENTS {
            let _ = stream.set_nonblocking(true);
            let reply = error_reply(&format!(
                "busy: {MAX_CLIENTS} clients are being served; try again"
            ));
            let _ = (&stream).write_all(format!("{reply}\n").as_bytes());
            continue;
        }
        clients.fetch_add(1, Ordering::AcqRel);
        let (tx, wake, count) = (tx.clone(), Arc::clone(&wake), Arc::clone(&clients));
        let spawned = std::thread::Builder::new()
            .name("lagd-client".into())
            .stack_size(256 * 1024)
            .spawn(move || {
                if let Err(e) = serve(&stream, &tx, &wake, access) {
                    debug!("control client: {e}");
                }
                count.fetch_sub(1, Ordering::AcqRel);
            });
        if let Err(e) = spawned {
            clients.fetch_sub(1, Ordering::AcqRel);
            warn!("control client thread: {e}");
        }
    }
}

/// Serves one client on its own thread.
fn serve(
    stream: &UnixStream,
    tx: &mpsc::Sender<Pending>,
    wake: &UnixStream,
    access: Access,
) -> io::Result<()> {
    let reply = match read_request(stream) {
        Ok(None) => return Ok(()),
        Ok(Some(line)) => match Request::parse(&line) {
            Err(e) => error_reply(&e),
            Ok(request) => {
                let peer = lagd_sys::peer::peer_credentials(stream)?;
                match access.check(&peer, &request) {
                    Err(e) => error_reply(&e),
                    Ok(()) if request == Request::Events => {
                        return stream_events(stream, tx, wake);
                    }
                    Ok(()) => ask_loop(request, tx, wake),
                }
            }
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
fn stream_events(
    stream: &UnixStream,
    tx: &mpsc::Sender<Pending>,
    wake: &UnixStream,
) -> io::Result<()> {
    let (reply_tx, reply_rx) = mpsc::channel();
    if tx
        .send(Pending {
            request: Request::Events,
            reply: reply_tx,
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
    let (reply_tx, reply_rx) = mpsc::channel();
    if tx
        .send(Pending {
            request,
            reply: reply_tx,
        })
        .is_err()
    {
        return error_reply("the daemon is stopping");
    }
    // A full pair means the loop has a wake pending already.
    let _ = (&*wake).write(&[1]);
    reply_rx
        .recv_timeout(LOOP_TIME)
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

/// Sends `request` to the lagd at `endpoint` and returns its reply object (an `{"error":..}`
/// reply becomes an error).
pub fn request(endpoint: &Endpoint, request: &Request) -> Result<serde_json::Value> {
    let stream = endpoint
        .connect()
        .with_context(|| format!("no lagd answers on {endpoint}"))?;
    stream.set_read_timeout(Some(LOOP_TIME + REQUEST_TIME))?;
    stream.set_write_timeout(Some(REQUEST_TIME))?;
    let mut line = serde_json::to_string(request)?;
    line.push('\n');
    (&stream).write_all(line.as_bytes())?;
    let mut reply = String::new();
    BufReader::new(&stream)
        .take(64 << 20)
        .read_line(&mut reply)?;
    let value: serde_json::Value =
        serde_json::from_str(&reply).with_context(|| format!("bad reply from {endpoint}"))?;
    if let Some(e) = value.get("error").and_then(|e| e.as_str()) {
        bail!("{endpoint}: {e}");
    }
    Ok(value)
}

/// Subscribes to the events of the lagd at `endpoint` and hands each to `each` until it
/// returns `false` or lagd closes the connection.
pub fn events(endpoint: &Endpoint, mut each: impl FnMut(serde_json::Value) -> bool) -> Result<()> {
    let stream = endpoint
        .connect()
        .with_context(|| format!("no lagd answers on {endpoint}"))?;
    stream.set_write_timeout(Some(REQUEST_TIME))?;
    let mut line = serde_json::to_string(&Request::Events)?;
    line.push('\n');
    (&stream).write_all(line.as_bytes())?;
    let mut reader = BufReader::new(&stream);
    let mut first = true;
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
        if std::mem::take(&mut first) {
            continue;
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
        assert_eq!(
            Endpoint::default_for("bond0"),
            Endpoint::Abstract("lagd/bond0".into())
        );
        assert_eq!(Endpoint::default_for("bond0").to_string(), "@lagd/bond0");
        assert_eq!(Endpoint::parse("@x/y"), Endpoint::Abstract("x/y".into()));
        assert_eq!(
            Endpoint::parse("/run/a.sock"),
            Endpoint::File("/run/a.sock".into())
        );
    }

    #[test]
    fn lists_listening_lagd_sockets() {
        let text = "Num       RefCount Protocol Flags    Type St Inode Path\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 100 @lagd/bond1\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 101 @lagd/bond0\n\
            0000000000000000: 00000003 00000000 00000000 0001 03 102 @lagd/bond9\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 103 @other/bond2\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 104 /run/lagd/bond3.sock\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 105\n";
        assert_eq!(bonds_in_proc_net_unix(text), ["bond0", "bond1"]);
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
