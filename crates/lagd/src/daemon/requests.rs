//! What the control socket asks of a running bond: the status, option changes, members added,
//! removed, disabled and enabled, a reload of the configuration file, and the planned upgrade's
//! hand-over. The control threads queue the requests; the loop answers them here, never
//! blocking. Also SIGUSR2's planned upgrade, which the launcher forked at lagd's start runs
//! (`lagctl upgrade`, which then asks for the hand-over here).

use std::io;
use std::time::{Duration, Instant as StdInstant};

use anyhow::Context;
use lagd_proto::bond::{Bond, PortId};
use lagd_proto::time::Instant;
use lagd_sys::fastpath::MAX_MEMBERS;
use lagd_sys::isolate::IngressDrop;
use lagd_sys::poll::Interest;
use tracing::{info, warn};

use super::handover;
use super::setup::{Daemon, MAX_CHANGES, TOKEN_CONTROL_SOCKET, TOKEN_LAUNCHER, TOKEN_MEMBER};
use crate::config::Config;
use crate::status::{BondContext, DataplaneStatus, Status};

impl Daemon {
    /// Hands the daemon the launcher forked at lagd's start ([`lagd_sys::launcher`]): SIGUSR2
    /// then asks it to run `lagctl upgrade` for this bond.
    pub fn set_launcher(&mut self, launcher: lagd_sys::launcher::Launcher) -> anyhow::Result<()> {
        self.poller
            .add(&launcher.answers_fd(), TOKEN_LAUNCHER, Interest::READABLE)
            .context("epoll: the launcher's pipe")?;
        self.launcher = Some(launcher);
        Ok(())
    }

    /// SIGUSR2: a planned upgrade, as `lagctl upgrade` for this bond would start it (the
    /// launcher runs it; lagd itself cannot start a program). The running lagd hands the bond
    /// over through the control socket as for lagctl, or keeps it when the upgrade fails;
    /// the launcher's answer is logged when it comes.
    pub(super) fn upgrade_on_signal(&mut self) {
        let Some(l) = self.launcher.as_mut() else {
            warn!("SIGUSR2: no upgrade: lagd has no launcher (see the start's log)");
            return;
        };
        let command = l
            .command()
            .iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ");
        match l.ask() {
            Ok(()) => info!("SIGUSR2: upgrading: the launcher runs {command}"),
            Err(e) => {
                warn!("SIGUSR2: no upgrade: the launcher is gone ({e})");
                self.drop_launcher();
            }
        }
    }

    /// The launcher's answers: what the upgrade it ran came to.
    pub(super) fn service_launcher(&mut self) {
        let Some(l) = self.launcher.as_mut() else {
            return;
        };
        match l.answers() {
            Ok(lines) => {
                for line in lines {
                    let (status, said) = line.split_once('\t').unwrap_or((&line, ""));
                    if status == "ok" {
                        info!("SIGUSR2: the upgrade succeeded: {said}");
                    } else {
                        warn!(
                            "SIGUSR2: the upgrade failed ({status}); this lagd keeps the bond. {said}"
                        );
                    }
                }
            }
            Err(e) => {
                warn!("the launcher: {e}; SIGUSR2 no longer upgrades");
                self.drop_launcher();
            }
        }
    }

    fn drop_launcher(&mut self) {
        if let Some(l) = self.launcher.take() {
            let _ = self.poller.delete(&l.answers_fd());
        }
    }

    /// Answers the requests the control threads queued. Never blocks: the clients' reading and
    /// writing happen on their threads.
    pub(super) fn service_control(&mut self, now: Instant) {
        while let Some(mut pending) = self.control.next() {
            if pending.request == crate::control::Request::Events {
                self.subscribers.push(pending.subscribe());
                continue;
            }
            if let Some(stream) = pending.stream.take() {
                if pending.request == crate::control::Request::Leave {
                    match self.leave(&stream) {
                        Ok(()) => std::process::exit(0),
                        Err(e) => pending.answer(crate::control::error_reply(&e)),
                    }
                    continue;
                }
                match self.hand_over(&stream) {
                    Ok(new) => {
                        // The new lagd owns the TAP, the programs and the members now: this
                        // one ends as if killed, undoing nothing (no member restored, no
                        // carrier off, no program detached).
                        info!(pid = new, "handed the bond over; exiting");
                        std::process::exit(0);
                    }
                    Err(e) => {
                        warn!("planned upgrade: {e}; this lagd keeps the bond");
                        self.record(now, format!("upgrade failed: {e}"));
                        pending.answer(crate::control::error_reply(&e));
                    }
                }
                continue;
            }
            let reply = match self.handle_request(now, &pending.request) {
                Ok(v) => v.to_string(),
                Err(e) => crate::control::error_reply(&e),
            };
            // Members added or removed (also by a reload): their links in the store follow.
            if matches!(
                pending.request,
                crate::control::Request::Member { .. } | crate::control::Request::Reload
            ) {
                self.store_links();
            }
            pending.answer(reply);
        }
    }

    /// A planned upgrade (see [`handover`]): lets go of the claims and the control socket's
    /// name, passes the TAP, the tcx links and the log on `stream`, and waits for the new lagd
    /// to adopt them. `Ok`: it has, and this lagd must exit without undoing anything. An
    /// error: nothing was handed over for good; the claims and the socket are back.
    fn hand_over(&mut self, stream: &std::os::unix::net::UnixStream) -> Result<u32, String> {
        use std::io::{BufRead, Read, Write};
        use std::os::fd::AsFd;
        let new = lagd_sys::peer::peer_credentials(stream)
            .map(|p| p.pid)
            .unwrap_or(0);
        let hidden = self.control.hide()?;
        let released = self.restore.release_claims();
        let mut names = vec![handover::TAP];
        let mut fds = vec![self.dp.io.tap.as_fd()];
        for l in self.tcx_links() {
            names.push(handover::TCX);
            fds.push(l);
        }
        if let Some(k) = &self.kernel {
            names.push(handover::ALIVE);
            fds.push(k.heartbeat());
        }
        for s in self.member_sockets() {
            names.push(handover::PACKET);
            fds.push(s);
        }
        let stderr = io::stderr();
        names.push(handover::LOG);
        fds.push(stderr.as_fd());
        info!(pid = new, ?names, "handing the bond over to a new lagd");
        let sent = lagd_sys::fdpass::send_with_fds(
            stream,
            handover::handover_reply(&names, self.notify.as_ref()).as_bytes(),
            &fds,
        )
        .map_err(|e| format!("passing the descriptors: {e}"));
        drop(fds);
        // Until the new lagd has put its programs into the links, the programs forward with
        // this one's table: their heartbeat is renewed while waiting.
        let deadline = StdInstant::now() + crate::control::ADOPT_TIME;
        let mut line = String::new();
        let mut told_manager = false;
        let adopted = sent.and_then(|_| {
            let mut reader = io::BufReader::new(stream);
            loop {
                // At most every 100 ms (the read's timeout below).
                if let Some(k) = &mut self.kernel {
                    if let Err(e) = k.beat() {
                        warn!("fast path heartbeat: {e}");
                    }
                }
                let left = deadline.saturating_duration_since(StdInstant::now());
                if left.is_zero() {
                    return Err(format!(
                        "the new lagd did not adopt the bond within {} s",
                        crate::control::ADOPT_TIME.as_secs()
                    ));
                }
                let _ = stream.set_read_timeout(Some(left.min(Duration::from_millis(100))));
                match (&mut reader).take(64).read_line(&mut line) {
                    Ok(0) => return Err("the new lagd ended before it adopted the bond".into()),
                    Ok(_) if line.ends_with('\n') => break,
                    Ok(_) if line.len() > 64 => {
                        return Err("the new lagd sent a line longer than 64 bytes".into());
                    }
                    Ok(_) => {}
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                        ) => {}
                    Err(e) => return Err(format!("the new lagd's connection: {e}")),
                }
            }
            if line.trim() != "adopted" {
                return Err(format!("the new lagd said '{}'", line.trim()));
            }
            // The new lagd is the service's main process from now on (see `notify`).
            if let Some(n) = self.notify.as_ref().filter(|_| new != 0) {
                n.send(&format!("MAINPID={new}"));
                told_manager = true;
            }
            let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
            (&*stream)
                .write_all(b"bye\n")
                .map_err(|e| format!("the new lagd's connection: {e}"))
        });
        match adopted {
            Ok(()) => {
                let _ = std::fs::remove_file(&hidden);
                Ok(new)
            }
            Err(e) => {
                if let Some(n) = self.notify.as_ref().filter(|_| told_manager) {
                    n.send(&format!("MAINPID={}", std::process::id()));
                }
                self.control.unhide(&hidden);
                self.restore.reclaim(&released, Duration::from_secs(2));
                self.dp.refilter();
                Err(e)
            }
        }
    }

    fn handle_request(
        &mut self,
        now: Instant,
        request: &crate::control::Request,
    ) -> Result<serde_json::Value, String> {
        use crate::control::{MemberAction, Request};
        match request {
            // Taken in service_control.
            Request::Events => Err("events: not a single request".into()),
            Request::Handover | Request::Leave => Err("not a single request".into()),
            Request::Status => serde_json::to_value(self.status_at(now)).map_err(|e| e.to_string()),
            Request::Set { options } => {
                let mut trial = self.bond.clone();
                let change = trial
                    .change_options(now, options)
                    .map_err(|e| e.to_string())?;
                self.take_options(trial)?;
                for w in &change.warnings {
                    warn!("{w}");
                }
                if !change.changed.is_empty() {
                    self.record(now, format!("set {}", change.changed.join(" ")));
                }
                Ok(serde_json::json!({
                    "changed": change.changed,
                    "warnings": change.warnings,
                }))
            }
            Request::Active { member } => {
                self.member_index(member)?;
                let changed = self.bond.set_active(now, member)?;
                if changed {
                    self.record(now, format!("active {member}"));
                }
                let changed: Vec<String> = if changed {
                    vec![format!("active {member}")]
                } else {
                    Vec::new()
                };
                Ok(serde_json::json!({ "changed": changed }))
            }
            Request::Reload => {
                let changed = self.reload(now)?;
                Ok(serde_json::json!({ "changed": changed }))
            }
            Request::Member { member, action } => {
                match action {
                    MemberAction::Add => self.add_member(now, member)?,
                    MemberAction::Remove => {
                        let i = self.member_index(member)?;
                        self.release_member(now, i);
                        let ifindex = self.dp.io.members[i].ifindex;
                        self.restore.release_member(member, ifindex);
                        self.config.members.retain(|m| m != member);
                    }
                    MemberAction::Disable => {
                        let i = self.member_index(member)?;
                        self.disabled.insert(i);
                        self.bond.handle_carrier(now, PortId(i as u16), false);
                    }
                    MemberAction::Enable => {
                        let i = self.member_index(member)?;
                        self.disabled.remove(&i);
                        let c = self.link.carrier(member).unwrap_or(false);
                        self.bond.handle_carrier(now, PortId(i as u16), c);
                    }
                }
                let word = serde_json::to_value(action).map_err(|e| e.to_string())?;
                let word = word.as_str().unwrap_or("?").to_owned();
                self.record(now, format!("member {member} {word}"));
                Ok(serde_json::json!({ "changed": [format!("{member} {word}")] }))
            }
        }
    }

    /// Takes `trial` (this bond with changed options) as the bond, unless the kernel fast path
    /// carries the frames and could not carry them so.
    fn take_options(&mut self, trial: Bond) -> Result<(), String> {
        if let Some(k) = &self.kernel {
            let why = trial.kernel_refusal(MAX_MEMBERS).or_else(|| {
                (trial.fast_path_reads() != k.reads()).then_some(
                    "what the members' program hands lagd is set when it starts: the members' \
                     ARP frames reach lagd only when the ARP monitor or balance-alb ran from \
                     the start",
                )
            });
            if let Some(why) = why {
                return Err(format!(
                    "the kernel fast path carries this bond and cannot with this change ({why}); \
                     restart lagd with the new value"
                ));
            }
        }
        self.bond = trial;
        self.config.options = self.bond.options().clone();
        let miimon = self.config.options.miimon;
        self.carrier_poll =
            Duration::from_millis(if miimon > 0 { miimon.min(10) } else { 10 }.into());
        Ok(())
    }

    /// Logs a run-time change and keeps it for the status.
    fn record(&mut self, now: Instant, what: String) {
        info!(change = %what, "control");
        if self.changes.len() == MAX_CHANGES {
            self.changes.pop_front();
        }
        let secs = now.saturating_since(Instant::ZERO).as_secs_f64();
        self.changes.push_back(format!("+{secs:.1}s {what}"));
        self.publish(now, "change", serde_json::json!({ "what": what }));
    }

    /// Reads the configuration file again and applies what changed (options the kernel lets
    /// change on a live bond); anything else is refused and nothing changes.
    pub(super) fn reload(&mut self, now: Instant) -> Result<Vec<String>, String> {
        let Some(file) = self.config.file.clone() else {
            return Err("lagd was started without --config: there is no file to reload".into());
        };
        let new = Config::from_file(&file).map_err(|e| e.to_string())?;
        let old = &self.config;
        let fixed = [
            ("bond", new.bond != old.bond),
            ("mac", new.mac != old.mac),
            ("mtu", new.mtu != old.mtu),
            ("control", new.control != old.control),
            ("control_group", new.control_group != old.control_group),
        ];
        if let Some((key, _)) = fixed.iter().find(|f| f.1) {
            return Err(format!(
                "{}: '{key}' changed; it takes a restart of lagd (nothing was changed)",
                file.display()
            ));
        }
        let (add, remove): (Vec<String>, Vec<String>) = (
            new.members
                .iter()
                .filter(|m| !old.members.contains(m))
                .cloned()
                .collect(),
            old.members
                .iter()
                .filter(|m| !new.members.contains(m))
                .cloned()
                .collect(),
        );
        let mut trial = self.bond.clone();
        let change = trial
            .reconfigure(now, &new.options)
            .map_err(|e| format!("{}: {e} (nothing was changed)", file.display()))?;
        for name in &add {
            self.link
                .ifindex(name)
                .map_err(|_| format!("{}: member '{name}' does not exist", file.display()))?;
        }
        self.take_options(trial)?;
        let mut changed = change.changed;
        for name in &remove {
            if let Ok(i) = self.member_index(name) {
                self.release_member(now, i);
            }
            changed.push(format!("member {name} removed"));
        }
        self.config.members.retain(|m| !remove.contains(m));
        for name in &add {
            match self.add_member(now, name) {
                Ok(()) => changed.push(format!("member {name} added")),
                Err(e) => changed.push(format!("member {name} not added: {e}")),
            }
        }
        if !changed.is_empty() {
            self.record(now, format!("reload: {}", changed.join(", ")));
        }
        Ok(changed)
    }

    /// The position of the present member `name`.
    fn member_index(&self, name: &str) -> Result<usize, String> {
        self.dp
            .io
            .members
            .iter()
            .position(|m| m.name == name && m.socket.is_some())
            .ok_or_else(|| format!("'{name}' is not a member of {}", self.config.bond))
    }

    /// Enslaves interface `name` as start-up does (the fast path's member program included).
    fn add_member(&mut self, now: Instant, name: &str) -> Result<(), String> {
        if self.member_index(name).is_ok() {
            return Err(format!(
                "'{name}' is already a member of {}",
                self.config.bond
            ));
        }
        if name == self.config.bond {
            return Err(format!("'{name}' is the bond itself"));
        }
        let ifindex = self
            .link
            .ifindex(name)
            .map_err(|_| format!("interface '{name}' does not exist"))?;
        let i = self.dp.io.members.len();
        if self.kernel.is_some() && i >= MAX_MEMBERS {
            return Err(format!(
                "the kernel fast path carries at most {MAX_MEMBERS} members (removed ones count)"
            ));
        }
        // The members carry the bond's MTU, plus stripe's header.
        let bond_mtu = self
            .link
            .mtu(&self.config.bond)
            .map_err(|e| format!("MTU of {}: {e}", self.config.bond))?;
        let mtu = bond_mtu + self.config.options.mode.encap_overhead();
        // Claimed and its settings recorded first: another lagd's member is refused, and
        // lagd's stop gives this one back what it had.
        self.restore
            .adopt_member(name, ifindex)
            .map_err(|e| format!("{e:#}"))?;
        let opened = Self::open_member(
            &self.link,
            &mut self.bond,
            self.epoch,
            name,
            ifindex,
            mtu,
            self.kernel.as_deref_mut(),
            &mut Vec::new(),
            None,
        );
        let member = match opened {
            Ok(m) => m,
            Err(e) => {
                // A program attached before the failure is let go: positions stay aligned.
                if let Some(k) = &mut self.kernel {
                    k.truncate(i);
                }
                self.restore.release_member(name, ifindex);
                return Err(format!("{e:#}"));
            }
        };
        let added = member
            .isolation
            .as_ref()
            .is_some_and(IngressDrop::added_qdisc)
            || self
                .kernel
                .as_ref()
                .is_some_and(|k| k.member_added_qdisc(i));
        if added {
            if let Err(e) = self.restore.record_clsact(name, ifindex) {
                warn!(member = name, "{e:#}");
            }
        }
        let token_ok = member
            .readers()
            .try_for_each(|s| {
                self.poller
                    .add(s, TOKEN_MEMBER + i as u64, Interest::READABLE)
            })
            .and_then(|()| {
                member
                    .control
                    .iter()
                    .chain(&member.partner)
                    .try_for_each(|c| {
                        self.poller
                            .add(c, TOKEN_CONTROL_SOCKET + i as u64, Interest::READABLE)
                    })
            });
        self.dp.io.members.push(member);
        self.config.members.push(name.to_owned());
        if let Err(e) = token_ok {
            self.release_member(now, i);
            self.restore.release_member(name, ifindex);
            return Err(format!("polling member {name}: {e}"));
        }
        Ok(())
    }

    /// The status document `lagctl show` prints.
    pub fn status(&mut self) -> Status {
        let now = self.now();
        self.status_at(now)
    }

    fn status_at(&mut self, now: Instant) -> Status {
        let snap = self.bond.snapshot(now);
        let ctx = BondContext {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            bond: self.config.bond.clone(),
            mac: self.mac.to_string(),
            carrier_poll_ms: self.carrier_poll.as_millis() as u32,
            tx_dropped_no_member: self.dp.tx_dropped_no_member,
            lacp_fallback_ms: self.config.options.lacp_fallback,
            now,
        };
        let dp = &mut self.dp;
        let mut status =
            Status::from_snapshot(&snap, ctx, |i, p, lacp| dp.member_status(i, p, lacp));
        status.dataplane = DataplaneStatus {
            path: if self.kernel.is_some() {
                "kernel"
            } else {
                "lagd"
            }
            .to_owned(),
            reason: self.dataplane_reason.clone(),
            attach: self
                .kernel
                .as_ref()
                .and_then(|k| k.attachment())
                .map(|(a, _)| a.name().to_owned()),
            attach_reason: self
                .kernel
                .as_ref()
                .and_then(|k| k.attachment())
                .map(|(_, why)| why.to_owned()),
            isolation: self
                .dp
                .io
                .members
                .iter()
                .find(|m| m.socket.is_some() && !m.isolation_why.is_empty())
                .map(|m| m.isolation_why.clone()),
        };
        status.disabled_members = self
            .disabled
            .iter()
            .map(|&i| self.dp.io.members[i].name.clone())
            .collect();
        status.changes = self.changes.iter().cloned().collect();
        status.warnings = self.config.warnings.clone();
        // What the kernel programs carried counts as the members' traffic too.
        if let Some(counters) = self.kernel.as_ref().map(|k| k.counters()) {
            match counters {
                Ok(c) => {
                    for (m, k) in status.members.iter_mut().zip(&c) {
                        m.tx_packets += k.tx_packets;
                        m.tx_bytes += k.tx_bytes;
                        m.rx_packets += k.rx_packets;
                        m.rx_bytes += k.rx_bytes;
                        m.kernel_tx_packets = k.tx_packets;
                        m.kernel_rx_packets = k.rx_packets;
                        m.rx_dropped
                            .push(("not_delivering".to_owned(), k.rx_dropped));
                        m.rx_dropped
                            .push(("slow_policed".to_owned(), k.slow_policed));
                        // Copies lagd's path dropped are under the same reason: one count.
                        let duplicate = lagd_proto::bond::verdict::DropReason::Duplicate.as_str();
                        match m.rx_dropped.iter_mut().find(|(r, _)| r == duplicate) {
                            Some((_, n)) => *n += k.rx_duplicates,
                            None => m.rx_dropped.push((duplicate.to_owned(), k.rx_duplicates)),
                        }
                        if let Some(l) = &mut m.lacp {
                            l.kernel_policed = k.slow_policed;
                        }
                    }
                    if let Some(none) = c.get(MAX_MEMBERS) {
                        status.tx_dropped_no_member += none.tx_packets;
                    }
                }
                Err(e) => warn!("fast path counters: {e}"),
            }
        }
        if let (Some(rx), Some(st)) = (&self.dp.io.stripe_rx, status.stripe.as_mut()) {
            (st.tcp.kernel_segments, st.tcp.kernel_held) = rx.totals();
        }
        let runtime = status.runtime_warnings();
        status.warnings.extend(runtime);
        status
    }
}
