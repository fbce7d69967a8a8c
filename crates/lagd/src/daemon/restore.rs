//! What lagd changes on the host, recorded before it changes it, and put back: when a start
//! fails half-way (everything this start did, in reverse), and when lagd stops (the members as
//! they were before any lagd drove them).
//!
//! - **Members.** Before a member is touched, its MTU, MAC, administrative state and the two
//!   sysctls [`quiet_stack`](lagd_sys::isolate::quiet_stack) sets are read. Promiscuous mode,
//!   the slow-protocols multicast membership and the tcx programs belong to descriptors the
//!   kernel releases when they close (even after `kill -9`); the rest is written back here.
//! - **The state file** (`<control socket file>` with the extension `.state`; with the default
//!   endpoint `/run/lagd/netns-N/BOND.state`, N the network namespace's inode) holds the
//!   members' original values while lagd runs. It is written new and renamed into place, never
//!   through a link, and read only when it is root's and nobody else may write it. It is removed
//!   on a clean stop; after `kill -9` it stays, and the next lagd for the bond takes the
//!   originals from it (not the values the killed lagd left), so its clean stop restores what
//!   the host had before.
//! - **Locks.** Each member, and the bond, is claimed by an `flock` on a file of the network
//!   namespace's directory (`/run/lagd/netns-N/BOND.lock`, `member-IFINDEX.lock`; see
//!   [`files`]): only root can create files there, so no other user can take a
//!   name first, and the kernel lets go of a lock when its lagd ends, however it ends: a
//!   second lagd for a member is refused, naming the member, and a killed lagd never leaves a
//!   stale lock.
//! - **The control socket file** is removed on every exit (by the control server); the TAP stays by design (the host's
//!   addresses and routes live on it, so a restarted lagd carries on where the last one stopped;
//!   `lagd --remove BOND` deletes it).

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use lagd_proto::wire::EthernetAddress;
use lagd_proto::wire::slow::{LacpInfo, PortState};
use lagd_sys::clsact::{Hook, QdiscRemoval};
use lagd_sys::isolate::StackSettings;
use lagd_sys::link::LinkControl;
use lagd_sys::tap::{Tap, TapOptions};
use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use crate::files::{self, Lock, write_atomically};

/// One member's settings that lagd changes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct MemberRecord {
    pub(crate) name: String,
    pub(crate) ifindex: u32,
    pub(crate) mtu: u32,
    pub(crate) mac: [u8; 6],
    pub(crate) up: bool,
    pub(crate) arp_ignore: String,
    pub(crate) disable_ipv6: Option<String>,
}

impl MemberRecord {
    /// Reads member `name`'s settings now.
    pub(crate) fn read(link: &LinkControl, name: &str) -> io::Result<Self> {
        let stack = StackSettings::read(name)?;
        Ok(Self {
            name: name.to_owned(),
            ifindex: link.ifindex(name)?,
            mtu: link.mtu(name)?,
            mac: link.mac(name)?,
            up: link.is_up(name)?,
            arp_ignore: stack.arp_ignore,
            disable_ipv6: stack.disable_ipv6,
        })
    }

    /// Writes the record back to the interface with the recorded index (under whatever name it
    /// has now). Each setting is written only if it differs; every failure is logged, and the
    /// remaining settings are still tried.
    fn apply(&self, link: &LinkControl) {
        let Ok(name) = link.name_of(self.ifindex) else {
            info!(member = %self.name, "gone; nothing to restore");
            return;
        };
        let stack = StackSettings {
            arp_ignore: self.arp_ignore.clone(),
            disable_ipv6: self.disable_ipv6.clone(),
        };
        if StackSettings::read(&name).ok().as_ref() != Some(&stack) {
            if let Err(e) = stack.restore(&name) {
                warn!(member = %name, "restoring sysctls: {e}");
            }
        }
        if link.mtu(&name).ok() != Some(self.mtu) {
            if let Err(e) = link.set_mtu(&name, self.mtu) {
                warn!(member = %name, "restoring MTU {}: {e}", self.mtu);
            }
        }
        if link.mac(&name).ok() != Some(self.mac) {
            if let Err(e) = link.set_mac(&name, self.mac) {
                warn!(member = %name, "restoring the MAC: {e}");
            }
        }
        if link.is_up(&name).ok() != Some(self.up) {
            if let Err(e) = link.set_up(&name, self.up) {
                warn!(member = %name, "restoring the administrative state: {e}");
            }
        }
    }
}

/// A member in sync with its LACP partner (802.3ad) and the partner's information as the
/// member recorded it, kept so that a lagd started after this one was killed can take up where
/// it left (see `Lacp::resume`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LacpRecord {
    pub(crate) member: String,
    system: [u8; 6],
    key: u16,
    port: u16,
    /// Absent in files of older versions, which resume without the partner's information.
    #[serde(default)]
    system_priority: Option<u16>,
    #[serde(default)]
    port_priority: Option<u16>,
    #[serde(default)]
    state: Option<u8>,
}

impl LacpRecord {
    pub(crate) fn new(member: &str, p: LacpInfo) -> Self {
        Self {
            member: member.to_owned(),
            system: p.system.0,
            key: p.key,
            port: p.port,
            system_priority: Some(p.system_priority),
            port_priority: Some(p.port_priority),
            state: Some(p.state.0),
        }
    }

    /// The partner's information; from an older file, its identity alone (no state bits).
    pub(crate) fn partner(&self) -> LacpInfo {
        let whole = self.system_priority.zip(self.port_priority).zip(self.state);
        LacpInfo {
            system_priority: whole.map_or(0, |((s, _), _)| s),
            system: EthernetAddress(self.system),
            key: self.key,
            port_priority: whole.map_or(0, |((_, p), _)| p),
            port: self.port,
            state: PortState(whole.map_or(0, |(_, s)| s)),
        }
    }
}

/// An interface whose clsact qdisc lagd added (to attach its programs as filters): deleted
/// when lagd stops, if no filter is left on it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ClsactRecord {
    pub(crate) name: String,
    pub(crate) ifindex: u32,
}

/// The state file's contents.
#[derive(Debug, Serialize, Deserialize)]
struct StateFile {
    bond: String,
    members: Vec<MemberRecord>,
    /// Members in sync with their LACP partner (absent in files of older versions).
    #[serde(default)]
    lacp: Vec<LacpRecord>,
    /// Interfaces whose clsact qdisc lagd added (absent in files of older versions).
    #[serde(default)]
    clsact: Vec<ClsactRecord>,
}

/// Where the state of the bond whose control socket is `control` is kept.
pub(crate) fn state_path(control: &Path) -> PathBuf {
    control.with_extension("state")
}

/// The claim name of the member whose interface index is `ifindex`.
fn member_claim(ifindex: u32) -> String {
    format!("member-{ifindex}")
}

/// Claims the bond and each member (by index) with locks in `dir`, the network namespace's
/// private directory; refuses, naming it, anything another lagd holds.
pub(crate) fn claim_all(dir: &Path, bond: &str, members: &[(String, u32)]) -> Result<Vec<Lock>> {
    let mut claims = Vec::new();
    match Lock::try_take(dir, bond).context("claiming the bond")? {
        Some(c) => claims.push(c),
        None => bail!(
            "bond '{bond}' is already run by another lagd in this network namespace (`lagctl \
             show {bond}` reaches it; stop it first)"
        ),
    }
    for (name, ifindex) in members {
        match Lock::try_take(dir, &member_claim(*ifindex))
            .with_context(|| format!("claiming member {name}"))?
        {
            Some(c) => claims.push(c),
            None => bail!("member '{name}' is already driven by another lagd"),
        }
    }
    Ok(claims)
}

/// What another lagd holds of the bond and `members` (by index) in the network namespace's
/// directory `dir`, as [`claim_all`] would refuse it, without keeping any claim (`lagd
/// --check`): one sentence per holding. Without the directory nobody holds anything, and it is
/// not made.
pub(crate) fn held_elsewhere(
    dir: &Path,
    bond: &str,
    members: &[(String, u32)],
) -> io::Result<Vec<String>> {
    let mut held = Vec::new();
    if !dir.is_dir() {
        return Ok(held);
    }
    if Lock::try_take(dir, bond)?.is_none() {
        held.push(format!(
            "bond '{bond}' is already run by another lagd in this network namespace"
        ));
    }
    for (name, ifindex) in members {
        if Lock::try_take(dir, &member_claim(*ifindex))?.is_none() {
            held.push(format!("member '{name}' is already driven by another lagd"));
        }
    }
    Ok(held)
}

/// How an existing TAP is put back when a start fails.
#[derive(Debug)]
enum TapUndo {
    /// This start created it: delete it.
    Delete(String),
    /// It was there: give it back its MAC and MTU.
    Reset {
        name: String,
        mac: [u8; 6],
        mtu: u32,
    },
}

/// Everything to undo, in the order it was done; undone in reverse when dropped (see the module
/// documentation). Until [`Restore::started`], a drop rolls a failed start back; after it, a
/// drop is a clean stop.
pub(crate) struct Restore {
    link: LinkControl,
    bond: String,
    started: bool,
    done: bool,
    claims: Vec<Lock>,
    created_dirs: Vec<PathBuf>,
    state: PathBuf,
    /// The state file's contents before this start (`None`: there was none).
    state_before: Option<Vec<u8>>,
    state_written: bool,
    /// Originals recovered from the state file of a lagd that did not stop cleanly.
    recovered: Vec<MemberRecord>,
    /// The members that lagd had in sync with their LACP partner.
    recovered_lacp: Vec<LacpRecord>,
    /// The members in sync with their LACP partner now, as last recorded.
    lacp: Vec<LacpRecord>,
    /// Interfaces whose clsact qdisc this lagd, or the killed one before it, added.
    clsact: Vec<ClsactRecord>,
    tap: Option<TapUndo>,
    /// Per member touched: its settings before this start, and the originals to restore on stop.
    members: Vec<(MemberRecord, MemberRecord)>,
}

impl Restore {
    /// Nothing done yet; `claims` are released last.
    pub(crate) fn new(
        link: LinkControl,
        bond: &str,
        control: &Path,
        claims: Vec<Lock>,
    ) -> Result<Self> {
        let state = state_path(control);
        let state_before = match files::open_trusted(&state)? {
            Some(mut f) => {
                let mut bytes = Vec::new();
                f.read_to_end(&mut bytes)
                    .with_context(|| format!("reading {}", state.display()))?;
                Some(bytes)
            }
            None => None,
        };
        let mut recovered = Vec::new();
        let mut recovered_lacp = Vec::new();
        let mut clsact = Vec::new();
        if let Some(bytes) = &state_before {
            match serde_json::from_slice::<StateFile>(bytes) {
                Ok(f) if f.bond == bond => {
                    info!(
                        file = %state.display(),
                        "a lagd for {bond} did not stop cleanly: the members' original \
                         settings recorded by it are restored when this one stops"
                    );
                    recovered = f.members;
                    recovered_lacp = f.lacp;
                    clsact = f.clsact;
                }
                Ok(f) => warn!(
                    "{} is about bond '{}', not '{bond}'; ignored",
                    state.display(),
                    f.bond
                ),
                Err(e) => warn!("{} is unreadable ({e}); ignored", state.display()),
            }
        }
        Ok(Self {
            link,
            bond: bond.to_owned(),
            started: false,
            done: false,
            claims,
            created_dirs: Vec::new(),
            state,
            state_before,
            state_written: false,
            recovered,
            recovered_lacp,
            lacp: Vec::new(),
            clsact,
            tap: None,
            members: Vec::new(),
        })
    }

    /// The directories this start made ([`files::private_dir`]'s lists): removed again on a
    /// failed start; a network namespace's directory also when lagd stops and it is empty.
    pub(crate) fn created_dirs(&mut self, dirs: Vec<PathBuf>) {
        self.created_dirs.extend(dirs);
    }

    /// The TAP `name` is about to be created or taken over: read what to put back.
    pub(crate) fn before_tap(&mut self, name: &str) {
        self.tap = Some(match (self.link.mac(name), self.link.mtu(name)) {
            (Ok(mac), Ok(mtu)) => TapUndo::Reset {
                name: name.to_owned(),
                mac,
                mtu,
            },
            _ => TapUndo::Delete(name.to_owned()),
        });
    }

    /// Reads member `name` before it is touched, and records its originals in the state file.
    pub(crate) fn before_member(&mut self, name: &str) -> Result<()> {
        self.before_members(std::slice::from_ref(&name))
    }

    /// [`Restore::before_member`] for each of `names`, with one write of the state file (each
    /// write waits for the disk: a start writes it once, before any member changes).
    pub(crate) fn before_members(&mut self, names: &[impl AsRef<str>]) -> Result<()> {
        for name in names {
            let name = name.as_ref();
            let now = MemberRecord::read(&self.link, name)
                .with_context(|| format!("reading the settings of member {name}"))?;
            let original = self
                .recovered
                .iter()
                .find(|r| r.name == now.name && r.ifindex == now.ifindex)
                .cloned()
                .unwrap_or_else(|| now.clone());
            self.members.push((now, original));
        }
        self.write_state()
    }

    fn write_state(&mut self) -> Result<()> {
        let file = StateFile {
            bond: self.bond.clone(),
            members: self.members.iter().map(|(_, o)| o.clone()).collect(),
            lacp: self.lacp.clone(),
            clsact: self.clsact.clone(),
        };
        let text = serde_json::to_vec_pretty(&file).context("state file")?;
        self.state_written = true;
        write_atomically(&self.state, &text)
            .with_context(|| format!("writing {}", self.state.display()))
    }

    /// The members the killed lagd before this one had in sync with their LACP partner.
    pub(crate) fn recovered_lacp(&self) -> &[LacpRecord] {
        &self.recovered_lacp
    }

    /// Records the members in sync with their LACP partner now (the state file is written
    /// when that changes).
    pub(crate) fn record_lacp(&mut self, records: Vec<LacpRecord>) -> Result<()> {
        if records == self.lacp {
            return Ok(());
        }
        self.lacp = records;
        self.write_state()
    }

    /// lagd added the clsact qdisc of interface `name` (to attach a program as a filter): it
    /// is deleted when lagd stops, if no filter is left on it, even after a `kill -9` and a
    /// restart (the state file keeps the record).
    pub(crate) fn record_clsact(&mut self, name: &str, ifindex: u32) -> Result<()> {
        let r = ClsactRecord {
            name: name.to_owned(),
            ifindex,
        };
        if self.clsact.contains(&r) {
            return Ok(());
        }
        self.clsact.push(r);
        self.write_state()
    }

    /// A member added at run time: claimed (refused, naming it, while another lagd drives it)
    /// and its settings recorded before anything on it changes.
    pub(crate) fn adopt_member(&mut self, name: &str, ifindex: u32) -> Result<()> {
        let dir = self
            .claims
            .first()
            .and_then(|c| c.path().parent())
            .map(Path::to_path_buf)
            .context("the bond holds no claim")?;
        let c = Lock::try_take(&dir, &member_claim(ifindex))
            .with_context(|| format!("claiming member {name}"))?
            .ok_or_else(|| anyhow::anyhow!("member '{name}' is already driven by another lagd"))?;
        self.claims.push(c);
        if let Err(e) = self.before_member(name) {
            self.claims.pop();
            return Err(e);
        }
        Ok(())
    }

    /// A member removed at run time (or whose addition failed): its settings go back now
    /// (the originals, or what it had just before when lagd is still starting), it leaves the
    /// state file and its claim is let go.
    pub(crate) fn release_member(&mut self, name: &str, ifindex: u32) {
        if let Some(k) = self.members.iter().rposition(|(b, _)| b.name == name) {
            let (before, original) = self.members.remove(k);
            let target = if self.started { &original } else { &before };
            target.apply(&self.link);
            if let Err(e) = self.write_state() {
                warn!("{e:#}");
            }
        }
        let claim = format!("{}.lock", member_claim(ifindex));
        self.claims
            .retain(|c| c.path().file_name().is_none_or(|n| *n != *claim));
    }

    /// Lets go of the claims on the bond and its members (a planned upgrade: the new lagd takes
    /// them); returns where they were, for [`Restore::reclaim`] should the upgrade fail.
    pub(crate) fn release_claims(&mut self) -> Vec<(PathBuf, String)> {
        let held = self
            .claims
            .iter()
            .filter_map(|c| {
                let dir = c.path().parent()?.to_path_buf();
                let name = c.path().file_stem()?.to_string_lossy().into_owned();
                Some((dir, name))
            })
            .collect();
        self.claims.clear();
        held
    }

    /// Takes the claims [`Restore::release_claims`] let go of again (the upgrade failed),
    /// waiting up to `wait` for a new lagd that failed to let go of them; a claim still held
    /// by another is logged and left.
    pub(crate) fn reclaim(&mut self, released: &[(PathBuf, String)], wait: std::time::Duration) {
        let deadline = std::time::Instant::now() + wait;
        for (dir, name) in released {
            loop {
                match Lock::try_take(dir, name) {
                    Ok(Some(lock)) => {
                        self.claims.push(lock);
                        break;
                    }
                    Ok(None) if std::time::Instant::now() < deadline => {
                        std::thread::sleep(std::time::Duration::from_millis(20));
                    }
                    Ok(None) => {
                        warn!("{name}: held by another process after a failed upgrade");
                        break;
                    }
                    Err(e) => {
                        warn!("{name}: claiming again after a failed upgrade: {e}");
                        break;
                    }
                }
            }
        }
    }

    /// The start succeeded: from now on a drop is a clean stop.
    pub(crate) fn started(&mut self) {
        self.started = true;
    }

    /// The members the lagd before this one recorded in the state file (killed, or handing
    /// over in a planned upgrade) that this one's configuration leaves out: each gets its
    /// original settings back, loses the last lagd's clsact filters (they stay on their hooks
    /// without any process: past the kernel path's bound they would drop all the member
    /// receives) and the clsact qdisc lagd added, as a member removed at run time does. The
    /// last lagd's tcx links on it are closed by the start itself (a link nobody adopts).
    /// A member another lagd has claimed since is left to it; the records go from the state
    /// file either way. Called once the bond is this lagd's (in a planned upgrade, after the
    /// old lagd let go: until then a failed handover leaves the old one the members as they
    /// were).
    pub(crate) fn give_back_left_out(&mut self) {
        let left_out: Vec<MemberRecord> = std::mem::take(&mut self.recovered)
            .into_iter()
            .filter(|r| !self.members.iter().any(|(now, _)| now.ifindex == r.ifindex))
            .collect();
        if left_out.is_empty() {
            return;
        }
        let dir = self
            .claims
            .first()
            .and_then(|c| c.path().parent())
            .map(Path::to_path_buf);
        for r in &left_out {
            let Ok(name) = self.link.name_of(r.ifindex) else {
                info!(member = %r.name, "left out of this configuration and gone: nothing to give back");
                continue;
            };
            // Held only while its settings are written: a lagd starting for it waits no longer.
            let claim = dir
                .as_deref()
                .map(|d| Lock::try_take(d, &member_claim(r.ifindex)));
            if !matches!(claim, Some(Ok(Some(_)))) {
                warn!(member = %name, "left out of this configuration, but claimed by another lagd: left to it");
                continue;
            }
            for hook in [Hook::Ingress, Hook::Egress] {
                match lagd_sys::clsact::remove_lagd_filters(r.ifindex, hook) {
                    Ok(0) => {}
                    Ok(n) => info!(member = %name, ?hook, "removed {n} filter(s) of the last lagd"),
                    Err(e) => warn!(member = %name, ?hook, "removing the last lagd's filters: {e}"),
                }
            }
            if let Some(k) = self.clsact.iter().position(|c| c.ifindex == r.ifindex) {
                let c = self.clsact.remove(k);
                if let Err(e) = lagd_sys::clsact::remove_qdisc_if_empty(c.ifindex) {
                    warn!(member = %name, "removing the clsact qdisc lagd added: {e}");
                }
            }
            r.apply(&self.link);
            info!(
                member = %name,
                "the last lagd drove this member, this configuration leaves it out: its \
                 original settings are back"
            );
        }
        if let Err(e) = self.write_state() {
            warn!("{e:#}");
        }
    }

    /// Undoes everything (once): the members' settings, the state file, the control socket
    /// file; on a failed start also the TAP and a directory this start created.
    pub(crate) fn finish(&mut self) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        for (before, original) in self.members.iter().rev() {
            let target = if self.started { original } else { before };
            target.apply(&self.link);
        }
        if self.started {
            // lagd's programs are detached by now: a qdisc lagd added goes if it is empty.
            for r in &self.clsact {
                if self.link.name_of(r.ifindex).ok().as_deref() != Some(r.name.as_str()) {
                    continue;
                }
                match lagd_sys::clsact::remove_qdisc_if_empty(r.ifindex) {
                    Ok(QdiscRemoval::Removed) => {
                        info!(interface = %r.name, "removed the clsact qdisc lagd added")
                    }
                    Ok(QdiscRemoval::Kept(filters)) => info!(
                        interface = %r.name,
                        filters,
                        "the clsact qdisc lagd added has filters of others now: kept"
                    ),
                    // Its last filter took it along when lagd detached (the usual clean stop).
                    Ok(QdiscRemoval::Absent) => {}
                    Err(e) => warn!(interface = %r.name, "removing the clsact qdisc: {e}"),
                }
            }
        }
        if self.state_written {
            let result = match (&self.state_before, self.started) {
                (Some(old), false) => write_atomically(&self.state, old),
                _ => fs::remove_file(&self.state),
            };
            if let Err(e) = result {
                warn!("{}: {e}", self.state.display());
            }
        }
        if !self.started {
            match self.tap.take() {
                Some(TapUndo::Delete(name)) if self.link.ifindex(&name).is_ok() => {
                    if let Err(e) = delete_tap(&name) {
                        warn!("removing {name}: {e:#}");
                    }
                }
                Some(TapUndo::Reset { name, mac, mtu }) => {
                    let _ = self.link.set_mtu(&name, mtu);
                    let _ = self.link.set_mac(&name, mac);
                }
                _ => {}
            }
        }
        // The locks go before their directory.
        let lock_dirs: Vec<PathBuf> = self
            .claims
            .iter()
            .filter_map(|c| c.path().parent().map(Path::to_path_buf))
            .collect();
        self.claims.clear();
        if !self.started {
            // A directory something else now uses stays.
            files::remove_created(&std::mem::take(&mut self.created_dirs));
        }
        // A namespace's directory once it holds no other bond's files.
        for d in lock_dirs
            .iter()
            .map(PathBuf::as_path)
            .chain(self.state.parent())
        {
            if d.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("netns-"))
            {
                let _ = fs::remove_dir(d);
            }
        }
    }
}

impl Drop for Restore {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Deletes the persistent TAP `name` (`lagd --remove`): attaches to it, clears persistence and
/// closes it. Refused while a lagd runs the bond.
pub fn remove_tap(name: &str) -> Result<()> {
    let dir = files::netns_dir().context("the network namespace (/proc/thread-self/ns/net)")?;
    let created = files::private_dir(&dir, true)?;
    let claim = Lock::try_take(&dir, name).context("claiming the bond")?;
    let removed = remove_unclaimed_tap(name, claim.is_some());
    drop(claim);
    files::remove_created(&created);
    removed
}

fn remove_unclaimed_tap(name: &str, claimed: bool) -> Result<()> {
    if !claimed {
        bail!("bond '{name}' is run by a lagd: stop it first");
    }
    let link = LinkControl::new().context("netlink/ioctl sockets")?;
    if link.ifindex(name).is_err() {
        bail!("there is no interface '{name}'");
    }
    delete_tap(name)
}

fn delete_tap(name: &str) -> Result<()> {
    let tap = Tap::create(
        name,
        TapOptions {
            vnet_hdr: false,
            multi_queue: false,
            persist: false,
            no_uso: false,
        },
    )
    .with_context(|| format!("'{name}' is not a TAP lagd can remove"))?;
    tap.set_persist(false)
        .with_context(|| format!("clearing persistence of {name}"))?;
    Ok(())
}

#[cfg(test)]
mod test {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("lagd-restore-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn the_state_file_sits_next_to_the_control_socket() {
        assert_eq!(
            state_path(Path::new("/run/lagd/bond0.sock")),
            Path::new("/run/lagd/bond0.state")
        );
        assert_eq!(
            state_path(Path::new("/tmp/ctl")),
            Path::new("/tmp/ctl.state")
        );
    }

    #[test]
    fn a_claim_is_refused_while_held_and_free_after() {
        let dir = scratch("claims");
        let held = claim_all(&dir, "b0", &[("m1".into(), 7)]).unwrap();
        let e = claim_all(&dir, "b0", &[]).unwrap_err().to_string();
        assert!(e.contains("'b0'") && e.contains("network namespace"), "{e}");
        let e = claim_all(&dir, "b1", &[("m1".into(), 7)])
            .unwrap_err()
            .to_string();
        assert!(e.contains("'m1'"), "{e}");
        drop(held);
        assert!(
            claim_all(&dir, "b1", &[("m1".into(), 7)]).is_ok(),
            "released"
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_state_file_of_another_user_is_refused() {
        let dir = scratch("foreign");
        let control = dir.join("b0.sock");
        fs::write(state_path(&control), br#"{"bond":"b0","members":[]}"#).unwrap();
        std::os::unix::fs::chown(state_path(&control), Some(65534), None).unwrap();
        let link = LinkControl::new().expect("netlink/ioctl sockets");
        let e = Restore::new(link, "b0", &control, Vec::new())
            .err()
            .expect("refused");
        assert!(format!("{e:#}").contains("uid 65534"), "{e:#}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_corrupt_or_foreign_state_file_is_ignored_and_left_alone() {
        let dir = scratch("corrupt");
        let control = dir.join("b0.sock");
        for text in [&b"{not json"[..], br#"{"bond":"other","members":[]}"#, b""] {
            fs::write(state_path(&control), text).unwrap();
            let link = LinkControl::new().expect("netlink/ioctl sockets");
            let mut r = Restore::new(link, "b0", &control, Vec::new()).expect("new");
            assert!(r.recovered.is_empty());
            r.finish();
            assert_eq!(fs::read(state_path(&control)).unwrap(), text, "untouched");
        }
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn lacp_partners_outlive_a_killed_lagd_in_the_state_file() {
        let dir = scratch("lacp");
        let control = dir.join("b0.sock");
        let link = || LinkControl::new().expect("netlink/ioctl sockets");
        let partner = LacpInfo {
            system_priority: 100,
            system: EthernetAddress([2, 0, 0, 0, 0, 9]),
            key: 17,
            port_priority: 255,
            port: 2,
            state: PortState(0x3d),
        };
        let mut r = Restore::new(link(), "b0", &control, Vec::new()).expect("new");
        assert!(r.recovered_lacp().is_empty());
        r.record_lacp(vec![LacpRecord::new("eth0", partner)])
            .unwrap();
        // Killed: nothing undone, the file stays for the next start.
        std::mem::forget(r);
        let mut r = Restore::new(link(), "b0", &control, Vec::new()).expect("new");
        assert_eq!(r.recovered_lacp().len(), 1);
        assert_eq!(r.recovered_lacp()[0].member, "eth0");
        assert_eq!(r.recovered_lacp()[0].partner(), partner);
        r.finish();
        // A record of an older version (identity only) resumes without the state bits.
        fs::write(
            state_path(&control),
            br#"{"bond":"b0","members":[],"lacp":[{"member":"eth1","system":[2,0,0,0,0,9],"key":17,"port":2}]}"#,
        )
        .unwrap();
        let mut r = Restore::new(link(), "b0", &control, Vec::new()).expect("new");
        let old = r.recovered_lacp()[0].partner();
        assert_eq!((old.system, old.key, old.port), (partner.system, 17, 2));
        assert_eq!(old.state, PortState(0));
        r.finish();
        // A file written before the records existed still gives back the members.
        fs::write(state_path(&control), br#"{"bond":"b0","members":[]}"#).unwrap();
        let mut r = Restore::new(link(), "b0", &control, Vec::new()).expect("new");
        assert!(r.recovered_lacp().is_empty());
        r.finish();
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_member_left_out_leaves_the_state_file() {
        let dir = scratch("left-out");
        let control = dir.join("b0.sock");
        // What a killed lagd recorded of a member this configuration leaves out (and that is
        // gone by now: nothing to write back, but nothing to keep either).
        fs::write(
            state_path(&control),
            br#"{"bond":"b0","members":[{"name":"lggone0","ifindex":4000000000,"mtu":1500,
                "mac":[2,0,0,0,0,1],"up":true,"arp_ignore":"0","disable_ipv6":"0"}],
                "clsact":[{"name":"lggone0","ifindex":4000000000}]}"#,
        )
        .unwrap();
        let link = LinkControl::new().expect("netlink/ioctl sockets");
        let mut r = Restore::new(link, "b0", &control, Vec::new()).expect("new");
        assert_eq!(r.recovered.len(), 1);
        r.started();
        r.give_back_left_out();
        let left: StateFile =
            serde_json::from_slice(&fs::read(state_path(&control)).unwrap()).unwrap();
        assert!(left.members.is_empty(), "{:?}", left.members);
        // Given back once: a second call finds nothing to do.
        assert!(r.recovered.is_empty());
        r.finish();
        assert!(
            !state_path(&control).exists(),
            "a clean stop removes the file"
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn recorded_sysctl_values_must_be_numbers() {
        let bad = StackSettings {
            arp_ignore: "1\n0".into(),
            disable_ipv6: None,
        };
        let e = bad.restore("lo").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
    }
}
