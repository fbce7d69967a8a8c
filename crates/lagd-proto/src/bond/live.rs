//! Changing options on a running bond, with the kernel driver's rules.
//!
//! The driver (`drivers/net/bonding/bond_options.c`) marks some options `NOSLAVES` (only
//! without members: `mode`, `fail_over_mac`) and some `IFDOWN` (only while the bond is down:
//! `lacp_rate`, `lacp_active`, `ad_select`, `ad_user_port_key`, `tlb_dynamic_lb`,
//! `coupled_control`); the rest change live. lagd always has members and keeps its bond up, so
//! it refuses the first two kinds, naming the rule. Of the live ones it applies those whose
//! state it can carry over without disturbing the members that stay (see [`liveness`]);
//! the others (lagd's own extensions that shape a mode's state from the start, and the 802.3ad
//! system identity) are refused with a request to restart.
//!
//! A change is all or nothing: every `key=value` is checked, the driver's cross-option rules run
//! ([`BondOptions::finish`](super::BondOptions::finish)), and only then does the bond take the new options.
//!
//! This module holds the rules and carries them out for [`Bond::change_options`],
//! [`Bond::reconfigure`] and [`Bond::set_active`]: the checks, and the state that depends on
//! the options brought up to date.

use super::mode::ModeState;
use super::monitor::ArpMonitor;
use super::options::{BondOptions, OptionError};
use super::select;
use super::state::Bond;
use crate::time::Instant;

/// When an option may change on a running bond.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    /// Now, without disturbing traffic.
    Live,
    /// Only while the bond has no members (the driver's `NOSLAVES`).
    NoMembers,
    /// Only while the bond is down (the driver's `IFDOWN`).
    BondDown,
    /// Not on a running lagd: restart it with the new value.
    Restart,
}

/// When option `key` may change on a running bond.
pub fn liveness(key: &str) -> Liveness {
    match key {
        "miimon" | "updelay" | "downdelay" | "peer_notif_delay" | "use_carrier" | "primary"
        | "primary_reselect" | "num_grat_arp" | "num_unsol_na" | "resend_igmp"
        | "all_slaves_active" | "arp_interval" | "arp_ip_target" | "ns_ip6_target"
        | "arp_validate" | "arp_all_targets" | "arp_missed_max" | "xmit_hash_policy"
        | "packets_per_slave" | "prio" | "actor_port_prio" => Liveness::Live,
        "mode" | "fail_over_mac" => Liveness::NoMembers,
        "lacp_rate" | "lacp_active" | "ad_select" | "ad_user_port_key" | "tlb_dynamic_lb"
        | "coupled_control" => Liveness::BondDown,
        _ => Liveness::Restart,
    }
}

/// What [`Bond::change_options`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OptionChange {
    /// The options whose value changed, as `key=value`, in the order given.
    pub changed: Vec<String>,
    /// What the driver's rules would log (rounded delays and the like).
    pub warnings: Vec<String>,
}

/// Why an option that is not [`Liveness::Live`] is refused.
fn refusal(how: Liveness) -> String {
    match how {
        Liveness::Live => String::new(),
        Liveness::NoMembers => "can only be changed while the bond has no members (the kernel's \
             rule); restart lagd with the new value"
            .into(),
        Liveness::BondDown => "the kernel changes it only while the bond is down, and lagd keeps \
             its bond up; restart lagd with the new value"
            .into(),
        Liveness::Restart => {
            "cannot be changed on a running lagd; restart it with the new value".into()
        }
    }
}

/// A value as a change log shows it.
struct Shown<'a, T>(&'a T);

impl<T: std::fmt::Debug> std::fmt::Display for Shown<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Plain words for the enums and numbers, `none` for an absent value.
        let text = format!("{:?}", self.0);
        let text = text
            .strip_prefix("Some(")
            .and_then(|t| t.strip_suffix(')'))
            .unwrap_or(&text);
        let text = if text == "None" { "none" } else { text };
        f.write_str(text.trim_matches('"'))
    }
}

impl Bond {
    /// `Bond::change_options`, once the call's time is taken.
    pub(super) fn apply_changes(
        &mut self,
        now: Instant,
        changes: &[(String, String)],
    ) -> Result<OptionChange, OptionError> {
        let mut opts = self.opts.clone();
        let mut changed = Vec::new();
        for (key, value) in changes {
            let before = opts.clone();
            opts.set(key, value)?;
            if opts == before {
                continue;
            }
            let refuse = |reason: String| OptionError {
                key: key.clone(),
                reason,
            };
            let how = liveness(key);
            if how != Liveness::Live {
                return Err(refuse(refusal(how)));
            }
            if key == "primary" && !value.is_empty() && self.port_by_name(value).is_none() {
                return Err(refuse(format!("'{value}' is not a member of the bond")));
            }
            // The driver sets these on a member; lagd names the members in the value.
            let named: Vec<&str> = match key.as_str() {
                "prio" => opts.prio.iter().map(|(m, _)| m.as_str()).collect(),
                "actor_port_prio" => opts
                    .actor_port_prio
                    .iter()
                    .map(|(m, _)| m.as_str())
                    .collect(),
                _ => Vec::new(),
            };
            if let Some(m) = named.iter().find(|m| self.port_by_name(m).is_none()) {
                return Err(refuse(format!("'{m}' is not a member of the bond")));
            }
            changed.push(format!("{key}={value}"));
        }
        let warnings = opts.finish()?;
        if changed.is_empty() {
            return Ok(OptionChange {
                changed,
                warnings: Vec::new(),
            });
        }
        self.apply_target(now, &opts)?;
        Ok(OptionChange { changed, warnings })
    }

    /// `Bond::reconfigure`, once the call's time is taken.
    pub(super) fn apply_target(
        &mut self,
        now: Instant,
        target: &BondOptions,
    ) -> Result<OptionChange, OptionError> {
        let cur = &self.opts;
        let mut probe = target.clone();
        let mut changed = Vec::new();
        macro_rules! live {
            ($($field:ident),*) => {$(
                if probe.$field != cur.$field {
                    changed.push(format!(
                        "{}: {} -> {}",
                        stringify!($field),
                        Shown(&cur.$field),
                        Shown(&probe.$field)
                    ));
                    probe.$field = cur.$field.clone();
                }
            )*};
        }
        live!(
            miimon,
            updelay,
            downdelay,
            peer_notif_delay,
            use_carrier,
            primary,
            primary_reselect,
            num_grat_arp,
            num_unsol_na,
            resend_igmp,
            all_slaves_active,
            arp_interval,
            arp_ip_target,
            ns_ip6_target,
            arp_validate,
            arp_all_targets,
            arp_missed_max,
            xmit_hash_policy,
            packets_per_slave,
            prio,
            actor_port_prio
        );
        probe.explicit_miimon = cur.explicit_miimon;
        // Which keys were given is bookkeeping for warnings, not an option.
        probe.given.clone_from(&cur.given);
        if probe != *cur {
            let differs = [
                ("mode", probe.mode != cur.mode),
                ("fail_over_mac", probe.fail_over_mac != cur.fail_over_mac),
                ("lacp_rate", probe.lacp_rate != cur.lacp_rate),
                ("lacp_active", probe.lacp_active != cur.lacp_active),
                ("ad_select", probe.ad_select != cur.ad_select),
                (
                    "ad_user_port_key",
                    probe.ad_user_port_key != cur.ad_user_port_key,
                ),
                ("tlb_dynamic_lb", probe.tlb_dynamic_lb != cur.tlb_dynamic_lb),
                (
                    "coupled_control",
                    probe.coupled_control != cur.coupled_control,
                ),
            ];
            let key = differs.iter().find(|d| d.1).map_or("options", |d| d.0);
            return Err(OptionError {
                key: key.to_owned(),
                reason: refusal(liveness(key)),
            });
        }
        if let Some(p) = &target.primary {
            if self.port_by_name(p).is_none() {
                return Err(OptionError {
                    key: "primary".into(),
                    reason: format!("'{p}' is not a member of the bond"),
                });
            }
        }
        if !changed.is_empty()
            || target.explicit_miimon != cur.explicit_miimon
            || target.given != cur.given
        {
            self.apply_options(now, target.clone());
        }
        Ok(OptionChange {
            changed,
            warnings: Vec::new(),
        })
    }

    /// `Bond::set_active`, once the call's time is taken.
    pub(super) fn make_active(&mut self, now: Instant, name: &str) -> Result<bool, String> {
        if !self.opts.mode.uses_primary() {
            return Err(format!("mode {} has no active member", self.opts.mode));
        }
        let port = self
            .port_by_name(name)
            .ok_or_else(|| format!("'{name}' is not a member of the bond"))?;
        if !self.ports[port.index()].usable() {
            return Err(format!("'{name}' is not usable (its link is not up)"));
        }
        if self.sel.active == Some(port) {
            return Ok(false);
        }
        // What the next selection would choose with `port` active: it must stay.
        let mut sel = self.sel.clone();
        sel.active = Some(port);
        if select::choose_active(&self.ports, &self.opts, &sel, select::Trigger::default())
            != Some(port)
        {
            let primary = self.opts.primary.as_deref().unwrap_or("?");
            return Err(format!(
                "the primary {primary} is up and would take over at once (primary_reselect={}); \
                 change primary instead",
                self.opts.primary_reselect
            ));
        }
        self.switch_active(now, Some(port));
        self.after_selection(now, false, true);
        Ok(true)
    }

    /// Takes `opts` (checked, finished, and differing from the current ones only in live
    /// options) and brings the state that depends on them up to date.
    pub(super) fn apply_options(&mut self, now: Instant, opts: BondOptions) {
        let old = std::mem::replace(&mut self.opts, opts);
        let policy_changed = old.xmit_hash_policy != self.opts.xmit_hash_policy
            || old.packets_per_slave != self.opts.packets_per_slave;
        let arp_changed = old.arp_interval != self.opts.arp_interval
            || old.arp_ip_target != self.opts.arp_ip_target
            || old.ns_ip6_target != self.opts.ns_ip6_target;
        if policy_changed {
            // The hash (or round-robin) state starts afresh over the same members.
            self.mode = ModeState::new(&self.opts, self.mac);
            self.mode.selection_changed(now, &self.sel, true, true);
            self.weighted.clear();
            self.update_weighted(now);
        }
        if arp_changed {
            self.arp = ArpMonitor::new(&self.opts);
        }
        if old.actor_port_prio != self.opts.actor_port_prio {
            self.set_lacp_priorities(now);
        }
        // The driver reselects when primary or primary_reselect is set, and when a member's
        // prio is set while no primary member is configured.
        let has_primary = self
            .opts
            .primary
            .as_deref()
            .is_some_and(|p| self.port_by_name(p).is_some());
        if old.primary != self.opts.primary && has_primary {
            // The driver's force_primary: a primary just named takes over once it is up.
            self.sel.force_primary = true;
        }
        let forced = old.primary != self.opts.primary
            || old.primary_reselect != self.opts.primary_reselect
            || (old.prio != self.opts.prio && !has_primary);
        // Primary, primary_reselect, prio, all_slaves_active and the delays take effect
        // through the next selection; the receive rules are recomputed whatever changed.
        self.reselect_with(now, forced);
        self.refresh_rx_rules();
    }
}

#[cfg(test)]
mod test {
    use crate::bond::{Bond, BondOptions};
    use crate::bond::{MiiStatus, PortId};
    use crate::time::Instant;

    /// A bond with two ports, eth0 and eth1, both up.
    fn bond(opts: &str) -> Bond {
        crate::bond::test::bond(opts, 2)
    }

    fn kv(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn live_options_apply_and_others_are_refused_unchanged() {
        let mut b = bond("mode=active-backup miimon=100");
        let before = b.options().clone();
        let t = Instant::from_millis(10);
        for (key, value, word) in [
            ("mode", "balance-rr", "no members"),
            ("fail_over_mac", "active", "no members"),
            ("lacp_rate", "fast", "down"),
            ("hash_seed", "7", "restart"),
            ("primary", "eth9", "not a member"),
            ("prio", "eth0:5,eth9:1", "not a member"),
        ] {
            let e = b.change_options(t, &kv(&[("miimon", "50"), (key, value)]));
            let e = e.unwrap_err();
            assert_eq!(e.key, key);
            assert!(e.reason.contains(word), "{e}");
            assert_eq!(b.options(), &before, "a refused change changed something");
        }
        // Unchanged values of any kind are accepted (a whole configuration applied again).
        let c = b
            .change_options(t, &kv(&[("mode", "active-backup"), ("miimon", "100")]))
            .unwrap();
        assert!(c.changed.is_empty());
        let c = b
            .change_options(t, &kv(&[("miimon", "50"), ("updelay", "120")]))
            .unwrap();
        assert_eq!(c.changed, ["miimon=50", "updelay=120"]);
        // The driver's rounding applies.
        assert_eq!(b.options().updelay, 100);
        assert!(c.warnings.iter().any(|w| w.contains("rounded")), "{c:?}");
    }

    #[test]
    fn primary_moves_the_active_member_now() {
        let mut b = bond("mode=active-backup miimon=100");
        assert_eq!(b.active(), Some(PortId(0)));
        let gen0 = b.distribution_generation();
        b.change_options(Instant::from_millis(5), &kv(&[("primary", "eth1")]))
            .unwrap();
        assert_eq!(b.active(), Some(PortId(1)));
        assert!(b.distribution_generation() > gen0);
        let mut saw = false;
        while let Some(ev) = b.poll_event() {
            if let crate::bond::BondEvent::ActiveChanged { to, .. } = ev {
                saw = to == Some(PortId(1));
            }
        }
        assert!(saw, "no ActiveChanged event");
    }

    #[test]
    fn hash_policy_changes_the_distribution_over_the_same_members() {
        let mut b = bond("mode=balance-xor xmit_hash_policy=layer2 miimon=100");
        let before = b.distribution();
        b.change_options(
            Instant::from_millis(5),
            &kv(&[("xmit_hash_policy", "layer3+4")]),
        )
        .unwrap();
        let after = b.distribution();
        assert_ne!(before, after);
        assert_eq!(b.usable(), [PortId(0), PortId(1)]);
        assert!(b.ports.iter().all(|p| p.mii == MiiStatus::Up && p.usable()));
    }

    #[test]
    fn reconfigure_takes_a_whole_target_or_nothing() {
        let mut b = bond("mode=active-backup miimon=100");
        let before = b.options().clone();
        let (target, _) = BondOptions::parse_opts("mode=balance-rr miimon=50").unwrap();
        let e = b.reconfigure(Instant::from_millis(1), &target).unwrap_err();
        assert_eq!(e.key, "mode");
        assert_eq!(b.options(), &before);
        let (target, _) =
            BondOptions::parse_opts("mode=active-backup miimon=50 primary=eth1 downdelay=100")
                .unwrap();
        let c = b.reconfigure(Instant::from_millis(1), &target).unwrap();
        assert_eq!(c.changed.len(), 3, "{c:?}");
        assert!(c.changed.contains(&"miimon: 100 -> 50".to_owned()), "{c:?}");
        assert!(
            c.changed.contains(&"primary: none -> eth1".to_owned()),
            "{c:?}"
        );
        assert_eq!(b.options(), &target);
        assert_eq!(b.active(), Some(PortId(1)));
        // The same target again changes nothing.
        assert!(
            b.reconfigure(Instant::from_millis(2), &target)
                .unwrap()
                .changed
                .is_empty()
        );
    }

    #[test]
    fn active_member_by_hand() {
        let mut b = bond("mode=active-backup miimon=100");
        assert_eq!(b.active(), Some(PortId(0)));
        assert_eq!(b.set_active(Instant::from_millis(1), "eth1"), Ok(true));
        assert_eq!(b.active(), Some(PortId(1)));
        // It stays through the next selections.
        b.handle_carrier(Instant::from_millis(2), PortId(0), true);
        assert_eq!(b.active(), Some(PortId(1)));
        assert_eq!(b.set_active(Instant::from_millis(3), "eth1"), Ok(false));
        assert!(b.set_active(Instant::from_millis(3), "eth7").is_err());
        // A member without carrier cannot be made active.
        b.handle_carrier(Instant::from_millis(4), PortId(0), false);
        let e = b.set_active(Instant::from_millis(5), "eth0").unwrap_err();
        assert!(e.contains("not usable"), "{e}");
        // A primary that would take over again is named.
        let mut b = bond("mode=active-backup miimon=100 primary=eth0");
        let e = b.set_active(Instant::from_millis(1), "eth1").unwrap_err();
        assert!(e.contains("primary eth0"), "{e}");
        // Modes without an active member refuse.
        let mut b = bond("mode=balance-xor miimon=100");
        assert!(b.set_active(Instant::from_millis(1), "eth1").is_err());
    }

    #[test]
    fn a_member_added_again_is_the_one_named() {
        let mut b = bond("mode=active-backup miimon=100");
        let t = Instant::from_millis(1);
        b.remove_port(t, PortId(1));
        let info = crate::bond::test::info("eth1", 2, 10_000);
        assert_eq!(b.add_port(t, info, true), PortId(2));
        assert_eq!(b.port_by_name("eth1"), Some(PortId(2)));
        b.change_options(t, &kv(&[("primary", "eth1")])).unwrap();
        assert_eq!(b.active(), Some(PortId(2)));
        // Clearing the primary reselects (the driver's rule): with every prio equal, the
        // first member that is up (Linux 6.0 and later).
        b.change_options(t, &kv(&[("primary", "")])).unwrap();
        assert_eq!(b.active(), Some(PortId(0)));
        assert_eq!(b.set_active(t, "eth0"), Ok(false));
        assert_eq!(b.set_active(t, "eth1"), Ok(true));
        assert_eq!(b.active(), Some(PortId(2)));
    }
}
