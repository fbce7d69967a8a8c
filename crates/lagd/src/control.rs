//! The control socket as both ends see it: where a bond's socket is ([`Endpoint`]), the wire
//! protocol ([`Request`] and its replies), and the client (`lagctl`, the metrics exporter, and
//! a lagd taking a bond over in a planned upgrade). The server the daemon runs beside its loop
//! is [`crate::daemon::control`].
//!
//! # Endpoint
//!
//! By default a bond's control socket is the file `BOND.sock` in its network namespace's
//! directory of `/run/lagd` (`/run/lagd/netns-INODE/`, see [`files`](crate::files)): two bonds
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

use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::status::Status;

/// The longest request accepted, in bytes, with its newline.
pub const MAX_REQUEST: usize = 64 * 1024;
/// How long a client has to send its whole request.
pub const REQUEST_TIME: Duration = Duration::from_secs(2);
/// How long a client has to take its whole reply.
pub const REPLY_TIME: Duration = Duration::from_secs(2);
/// Most `key=value` pairs one `set` request may carry (the bonding options number fewer).
pub const MAX_OPTIONS: usize = 64;
/// How long the daemon's loop may take to answer a request (a client thread's wait).
pub const LOOP_TIME: Duration = Duration::from_secs(5);
/// How long a running lagd waits for the one it hands over to (`handover`) to say it has
/// adopted what it was given (and the new one for the old one's `bye`). The programs forward
/// meanwhile.
pub const ADOPT_TIME: Duration = Duration::from_secs(5);
/// How much of a bad request an error repeats.
const ECHO: usize = 64;
/// Where a bond's control socket is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// The bond's default: the socket file `BOND.sock` in the network namespace's directory
    /// ([`files::netns_dir`](crate::files::netns_dir)), found by the thread that uses it.
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
            Self::Default(bond) => crate::files::netns_dir()
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
                None => write!(f, "{}/netns-?/{bond}.sock", crate::files::RUN_DIR),
            },
        }
    }
}

/// The bonds whose default control socket listens in this network namespace, sorted (read from
/// `/proc/net/unix`, which lists the reader's namespace only).
pub fn local_bonds() -> io::Result<Vec<String>> {
    let dir = crate::files::netns_dir()?;
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
    /// [`handover`](crate::daemon::handover)), and this lagd exits without undoing anything once the
    /// asker says it has adopted them.
    Handover,
    /// Exit leaving the kernel path as it is (a restart under a service manager that keeps
    /// the descriptors: `lagctl stop --leave`, or `--unit` when a restart job runs): lagd
    /// answers `{"left":{"pid":N}}` and exits without undoing anything, as after `kill -9`;
    /// refused without a service manager's descriptor store (see
    /// [`handover`](crate::daemon::handover)).
    Leave,
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
            | Self::Handover
            | Self::Leave => false,
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
            Self::Status | Self::Events | Self::Reload | Self::Handover | Self::Leave => {}
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
        let dir = crate::files::netns_dir().unwrap();
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
        lagd_sys::peer::PeerCredentials {
            pid,
            uid,
            gid: uid,
            groups: Vec::new(),
        }
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
}
