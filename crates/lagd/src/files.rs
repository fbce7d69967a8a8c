//! The files lagd keeps on the host, made so that no other local user can plant, take or
//! redirect them (see "Threat model" in `docs/design.md`):
//!
//! - **One directory per network namespace**, [`netns_dir`] (`/run/lagd/netns-INODE`), holds
//!   each bond's default control socket (`BOND.sock`), its state file (`BOND.state`) and the
//!   locks that claim the bond and its members (`BOND.lock`, `member-IFINDEX.lock`). Only root
//!   can create anything there: [`private_dir`] creates it 0755 and refuses a directory that is
//!   a link, belongs to another user, or that group or others may write.
//! - **Locks** ([`Lock`]) are `flock`s on files in that directory, released by the kernel when
//!   lagd ends, however it ends: nobody else can hold one first (nobody else can create the
//!   file), and a killed lagd leaves none held.
//! - **Files are created new** ([`create_new`]: `O_CREAT | O_EXCL | O_NOFOLLOW`, mode 0600) and
//!   opened without following a link ([`open_trusted`], which also refuses a file that another
//!   user owns or that others may write).

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// Where lagd keeps its files: one directory per network namespace below it.
pub const RUN_DIR: &str = "/run/lagd";

/// The directory of the calling thread's network namespace, `/run/lagd/netns-INODE` (the
/// thread's, not the process's: a thread may have entered another namespace).
pub fn netns_dir() -> io::Result<PathBuf> {
    let netns = fs::metadata("/proc/thread-self/ns/net")?.ino();
    Ok(Path::new(RUN_DIR).join(format!("netns-{netns}")))
}

/// Whether a file or directory owned by `uid` can be trusted by this process: its own, or
/// root's.
fn trusted_owner(uid: u32) -> bool {
    uid == 0 || uid == lagd_sys::lock::effective_uid()
}

/// Refuses `dir` unless it is a directory (not a link to one) owned by root or by lagd's own
/// user that neither group nor others may write: in any other, another user could plant a
/// link or a file where lagd writes, or take a name first.
pub fn check_private_dir(dir: &Path) -> Result<()> {
    let meta = fs::symlink_metadata(dir).with_context(|| format!("stat {}", dir.display()))?;
    if meta.file_type().is_symlink() {
        bail!(
            "{} is a symbolic link; lagd keeps its files only in a real directory",
            dir.display()
        );
    }
    if !meta.is_dir() {
        bail!("{} is not a directory", dir.display());
    }
    if !trusted_owner(meta.uid()) {
        bail!(
            "{} belongs to uid {}, not to root: another user could plant files where lagd \
             keeps its state and sockets; refusing it (use a directory only root can write, \
             such as {RUN_DIR})",
            dir.display(),
            meta.uid()
        );
    }
    if meta.mode() & 0o022 != 0 {
        bail!(
            "{} may be written by {} (mode {:o}): another user could plant files where lagd \
             keeps its state and sockets; refusing it (use a directory only root can write, \
             such as {RUN_DIR})",
            dir.display(),
            if meta.mode() & 0o002 != 0 {
                "every user"
            } else {
                "its group"
            },
            meta.mode() & 0o7777
        );
    }
    Ok(())
}

/// Makes sure `dir` exists and is private ([`check_private_dir`]): creates what is missing,
/// mode 0755 whatever the umask (with `parents` every missing level, else the last one only: a missing parent is
/// refused as a mistake). Returns the directories it created, outermost first.
pub fn private_dir(dir: &Path, parents: bool) -> Result<Vec<PathBuf>> {
    let mut missing: Vec<&Path> = dir
        .ancestors()
        .take_while(|d| !d.as_os_str().is_empty() && fs::symlink_metadata(d).is_err())
        .collect();
    if !parents && missing.len() > 1 {
        bail!("{} does not exist", missing[1].display());
    }
    missing.reverse();
    let mut created = Vec::new();
    for d in missing {
        match fs::DirBuilder::new().mode(0o755).create(d) {
            Ok(()) => {
                // 0755 whatever the umask: a control_group member must reach the socket.
                fs::set_permissions(d, fs::Permissions::from_mode(0o755))
                    .with_context(|| format!("chmod {}", d.display()))?;
                created.push(d.to_path_buf());
            }
            // Another lagd made it just now: checked below like any other.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e).with_context(|| format!("creating {}", d.display())),
        }
    }
    check_private_dir(dir)?;
    Ok(created)
}

/// Removes what [`private_dir`] created, innermost first, where it is empty again.
pub fn remove_created(created: &[PathBuf]) {
    for d in created.iter().rev() {
        let _ = fs::remove_dir(d);
    }
}

/// Creates `path` to write: a new file (`O_EXCL`: never one that is there, nor through a link
/// planted there, `O_NOFOLLOW`), mode 0600.
pub fn create_new(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// Opens `path` to read if it exists, never through a link, and refuses a file that is not
/// a regular file, belongs to another user than root or lagd's, or that others may write:
/// what it says would not be lagd's own.
pub fn open_trusted(path: &Path) -> Result<Option<File>> {
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => bail!(
            "{} is a symbolic link; refusing it (lagd never follows a link to its own files)",
            path.display()
        ),
        Err(e) => return Err(e).with_context(|| format!("opening {}", path.display())),
    };
    let meta = file
        .metadata()
        .with_context(|| format!("stat {}", path.display()))?;
    if !meta.is_file() {
        bail!("{} is not a regular file; refusing it", path.display());
    }
    if !trusted_owner(meta.uid()) || meta.mode() & 0o022 != 0 {
        bail!(
            "{} belongs to uid {} with mode {:o}: not a file lagd wrote (lagd's are root's, \
             0600); refusing to trust what it says (remove it if it is yours)",
            path.display(),
            meta.uid(),
            meta.mode() & 0o7777
        );
    }
    Ok(Some(file))
}

/// Writes `bytes` to `path` whole or not at all: into `PATH.tmp` created new ([`create_new`];
/// one left by a killed lagd, or planted, is unlinked first, never followed), synced, then
/// renamed over `path`.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut f = match create_new(&tmp) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            // unlink removes a link itself, not what it points to.
            fs::remove_file(&tmp)?;
            create_new(&tmp)?
        }
        other => other?,
    };
    f.write_all(bytes)?;
    f.sync_all()?;
    fs::rename(&tmp, path)
}

/// An exclusive claim on a name, held as long as the value lives: an `flock` on a file of a
/// private directory. Dropping it removes the file (while still holding the lock).
#[derive(Debug)]
pub struct Lock {
    path: PathBuf,
    file: File,
}

impl Lock {
    /// Claims `dir/NAME.lock` (`dir` must be private: [`private_dir`]). `Ok(None)`: another
    /// process holds it.
    pub fn try_take(dir: &Path, name: &str) -> io::Result<Option<Self>> {
        let path = dir.join(format!("{name}.lock"));
        // A holder that stops unlinks the file before it closes it: a lock taken on the old
        // file is worth nothing, so check that the name still leads to the locked file.
        for _ in 0..8 {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&path)?;
            if !lagd_sys::lock::try_lock_exclusive(&file)? {
                return Ok(None);
            }
            let held = file.metadata()?;
            match fs::symlink_metadata(&path) {
                Ok(now) if now.dev() == held.dev() && now.ino() == held.ino() => {
                    return Ok(Some(Self { path, file }));
                }
                _ => continue,
            }
        }
        Err(io::Error::other(format!(
            "{}: removed and made again while being claimed",
            path.display()
        )))
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        // Only our own file: a name whose file is another's now stays.
        if let (Ok(held), Ok(now)) = (self.file.metadata(), fs::symlink_metadata(&self.path)) {
            if held.dev() == now.dev() && held.ino() == now.ino() {
                let _ = fs::remove_file(&self.path);
            }
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("lagd-files-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        dir
    }

    #[test]
    fn the_namespace_directory_is_named_after_the_threads_namespace() {
        let dir = netns_dir().unwrap();
        let ino = fs::metadata("/proc/self/ns/net").unwrap().ino();
        assert_eq!(dir, Path::new(&format!("/run/lagd/netns-{ino}")));
    }

    #[test]
    fn directories_others_may_write_or_links_are_refused() {
        let dir = scratch("dirs");
        assert!(check_private_dir(&dir).is_ok());
        let open = dir.join("open");
        fs::create_dir(&open).unwrap();
        for mode in [0o777, 0o1777, 0o775] {
            fs::set_permissions(&open, fs::Permissions::from_mode(mode)).unwrap();
            let e = check_private_dir(&open).unwrap_err().to_string();
            assert!(e.contains("may be written by"), "{mode:o}: {e}");
        }
        let link = dir.join("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        let e = check_private_dir(&link).unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
        // Created 0755 whatever the umask allows more; a missing parent only with `parents`.
        let deep = dir.join("a/b/c");
        assert!(private_dir(&deep, false).is_err());
        assert!(!dir.join("a").exists());
        let made = private_dir(&deep, true).unwrap();
        assert_eq!(made, [dir.join("a"), dir.join("a/b"), deep.clone()]);
        assert!(private_dir(&deep, true).unwrap().is_empty());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_planted_link_is_never_followed() {
        let dir = scratch("links");
        let target = dir.join("precious");
        fs::write(&target, "keep me\n").unwrap();
        let state = dir.join("b0.state");
        std::os::unix::fs::symlink(&target, dir.join("b0.state.tmp")).unwrap();
        write_atomically(&state, b"{}").unwrap();
        assert_eq!(fs::read_to_string(&target).unwrap(), "keep me\n");
        assert_eq!(fs::read(&state).unwrap(), b"{}");
        // Reading through a link is refused, not followed.
        fs::remove_file(&state).unwrap();
        std::os::unix::fs::symlink(&target, &state).unwrap();
        let e = open_trusted(&state).unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
        // A file others may write is not trusted.
        fs::remove_file(&state).unwrap();
        fs::write(&state, "{}").unwrap();
        fs::set_permissions(&state, fs::Permissions::from_mode(0o666)).unwrap();
        let e = open_trusted(&state).unwrap_err().to_string();
        assert!(e.contains("refusing to trust"), "{e}");
        fs::set_permissions(&state, fs::Permissions::from_mode(0o600)).unwrap();
        assert!(open_trusted(&state).unwrap().is_some());
        assert!(open_trusted(&dir.join("none")).unwrap().is_none());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_lock_is_held_once_and_its_file_goes_with_it() {
        let dir = scratch("locks");
        let held = Lock::try_take(&dir, "bond0").unwrap().expect("free");
        assert!(held.path().exists());
        assert!(
            Lock::try_take(&dir, "bond0").unwrap().is_none(),
            "held twice"
        );
        let path = held.path().to_path_buf();
        drop(held);
        assert!(!path.exists(), "the lock file stays");
        assert!(Lock::try_take(&dir, "bond0").unwrap().is_some());
        // A link planted at the name is not followed.
        std::os::unix::fs::symlink(dir.join("elsewhere"), dir.join("m.lock")).unwrap();
        assert!(Lock::try_take(&dir, "m").is_err());
        assert!(!dir.join("elsewhere").exists());
        fs::remove_dir_all(&dir).unwrap();
    }
}
