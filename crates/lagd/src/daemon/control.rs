//! The control socket: the server side the daemon's loop calls when a client connects, and the
//! client `lagctl` uses.

use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::status::Status;

/// Binds the control socket (root only, 0600), refusing if another lagd answers on it.
pub(crate) fn bind(path: &Path) -> Result<UnixListener> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            bail!(
                "another lagd is already serving {} (stop it first)",
                path.display()
            );
        }
        std::fs::remove_file(path).with_context(|| format!("removing stale {}", path.display()))?;
    }
    let listener =
        UnixListener::bind(path).with_context(|| format!("binding {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("chmod {}", path.display()))?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// Answers one client: reads its request line and writes the reply. `status` is asked for the
/// status document when the request is `status`.
pub(crate) fn answer(stream: UnixStream, status: impl FnOnce() -> Status) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_millis(500)))?;
    stream.set_write_timeout(Some(Duration::from_millis(500)))?;
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line)?;
    let reply = match line.trim() {
        "status" => serde_json::to_string(&status()).map_err(io::Error::other)?,
        other => serde_json::json!({ "error": format!("unknown request '{other}'") }).to_string(),
    };
    let mut w = &stream;
    w.write_all(reply.as_bytes())?;
    w.write_all(b"\n")
}

/// Asks the lagd serving `path` for its status.
pub fn query_status(path: &Path) -> Result<Status> {
    let stream = UnixStream::connect(path)
        .with_context(|| format!("no lagd answers on {}", path.display()))?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    let mut w = &stream;
    w.write_all(b"status\n")?;
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line)?;
    serde_json::from_str(&line).with_context(|| format!("bad reply from {}", path.display()))
}
