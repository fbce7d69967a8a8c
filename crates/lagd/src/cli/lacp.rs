//! `lagctl lacp doctor [BOND]`: LACP state turned into plain-language causes.
//!
//! The diagnosis is a pure function of the status document ([`diagnose`]), so every rule is
//! tested on hand-built states, and on the states of real LACP engines (bonds wired together in
//! memory, in virtual time) converted as the daemon converts them; the command asks the running
//! lagd for its status.

use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::PathBuf;

use serde::Serialize;

use super::CliError;
use super::show::{ShowArgs, socket_path_for};
use crate::control::status_at;
use crate::status::{MemberStatus, Status};

/// `lagctl lacp ...`.
#[derive(Debug, Clone, clap::Args)]
pub struct LacpArgs {
    #[command(subcommand)]
    command: LacpCommand,
}

#[derive(Debug, Clone, clap::Subcommand)]
enum LacpCommand {
    /// Explain what is wrong with a bond's LACP, in plain language. Exit code 0 when LACP is
    /// healthy (members distribute; warnings may stand), 3 when it is not, 1 when lagd could not
    /// be asked, 2 for a usage error.
    Doctor {
        /// The bond; may be left out when only one lagd runs.
        bond: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// The control socket file, or @NAME for an abstract socket (default:
        /// /run/lagd/netns-N/BOND.sock, N this network namespace's inode).
        #[arg(long)]
        control: Option<PathBuf>,
    },
}

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Working as intended.
    Ok,
    /// Works, but not as configured or not as well as it could.
    Warning,
    /// Traffic is not aggregated as intended.
    Problem,
}

/// One diagnosis.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// How bad it is.
    pub severity: Severity,
    /// Short name of the cause (`no-partner`, `split-partners`, ...).
    pub cause: &'static str,
    /// The members concerned.
    pub members: Vec<String>,
    /// The cause and what to do, in one or two sentences.
    pub text: String,
}

fn has_bit(m: &MemberStatus, partner: bool, bit: &str) -> bool {
    m.lacp.as_ref().is_some_and(|l| {
        let info = if partner { &l.partner } else { &l.actor };
        info.state_names.iter().any(|n| n == bit)
    })
}

/// Diagnoses a bond's LACP from its status.
pub fn diagnose(s: &Status) -> Vec<Finding> {
    let mut out = Vec::new();
    let Some(lacp) = &s.lacp else {
        out.push(Finding {
            severity: Severity::Warning,
            cause: "not-802.3ad",
            members: Vec::new(),
            text: format!(
                "bond {} runs mode {}: LACP is not in use (mode=802.3ad enables it)",
                s.bond, s.mode
            ),
        });
        return out;
    };
    let members: Vec<&MemberStatus> = s.members.iter().filter(|m| m.lacp.is_some()).collect();
    let up: Vec<&MemberStatus> = members
        .iter()
        .copied()
        .filter(|m| m.mii_status == "up" || m.mii_status == "going down")
        .collect();
    for m in &members {
        if !up.iter().any(|u| u.name == m.name) {
            out.push(Finding {
                severity: Severity::Problem,
                cause: "link-down",
                members: vec![m.name.clone()],
                text: format!(
                    "{} has no link (MII status {}): check the cable and the switch port",
                    m.name, m.mii_status
                ),
            });
        }
    }
    // Members with link that never heard a LACPDU.
    let silent: Vec<&MemberStatus> = up
        .iter()
        .copied()
        .filter(|m| m.lacp.as_ref().is_some_and(|l| l.lacpdu_rx == 0))
        .collect();
    if !silent.is_empty() {
        let names: Vec<String> = silent.iter().map(|m| m.name.clone()).collect();
        let passive_passive = !lacp.lacp_active;
        out.push(Finding {
            severity: Severity::Problem,
            cause: if passive_passive {
                "passive-passive"
            } else {
                "no-partner"
            },
            members: names.clone(),
            text: if passive_passive {
                format!(
                    "no LACPDU was ever received on {} and this bond is passive (lacp_active \
                     off): if the partner is passive too, neither side starts; set lacp_active=on \
                     here or make the switch port LACP active",
                    names.join(", ")
                )
            } else {
                format!(
                    "no LACPDU was ever received on {}: the partner port does not speak LACP \
                     (a static LAG or a plain port), or something filters slow-protocol frames \
                     (01:80:c2:00:00:02); configure LACP on the switch port, or use \
                     balance-xor for a static LAG",
                    names.join(", ")
                )
            },
        });
    }
    // Members that heard LACP but stopped: the partner left LACP when it stopped on every
    // member with link, LACPDUs are lost on a link when it stopped on some.
    let stopped = |m: &&MemberStatus| {
        m.lacp.as_ref().is_some_and(|l| {
            l.lacpdu_rx > 0 && (l.rx_state == "EXPIRED" || l.rx_state == "DEFAULTED")
        })
    };
    let all_stopped = !up.is_empty() && up.iter().all(stopped);
    if all_stopped {
        let names: Vec<String> = up.iter().map(|m| m.name.clone()).collect();
        out.push(Finding {
            severity: Severity::Problem,
            cause: "partner-left-lacp",
            members: names.clone(),
            text: format!(
                "the partner spoke LACP and then stopped on every member ({}): it no longer \
                 runs LACP on these ports (reconfigured as a static LAG or plain ports) or it \
                 is down; no member is in an aggregate with it",
                names.join(", ")
            ),
        });
    }
    for m in up.iter().filter(|_| !all_stopped) {
        let l = m.lacp.as_ref().expect("filtered");
        if l.lacpdu_rx > 0 && (l.rx_state == "EXPIRED" || l.rx_state == "DEFAULTED") {
            out.push(Finding {
                severity: Severity::Problem,
                cause: "lacpdus-lost",
                members: vec![m.name.clone()],
                text: format!(
                    "{} heard the partner's LACPDUs ({} received) but none lately (receive \
                     machine {}): LACPDUs are lost on that link (errors, filtering, an overloaded \
                     partner) while its carrier is up; the link is out of the aggregate",
                    m.name, l.lacpdu_rx, l.rx_state
                ),
            });
        }
    }
    // Partners: which systems answer on which members.
    let mut systems: Vec<(String, Vec<String>)> = Vec::new();
    for m in &up {
        let l = m.lacp.as_ref().expect("filtered");
        if l.lacpdu_rx == 0 || l.partner.system_mac == "00:00:00:00:00:00" {
            continue;
        }
        match systems.iter_mut().find(|(s, _)| *s == l.partner.system_mac) {
            Some((_, v)) => v.push(m.name.clone()),
            None => systems.push((l.partner.system_mac.clone(), vec![m.name.clone()])),
        }
    }
    if systems.len() > 1 {
        let detail: Vec<String> = systems
            .iter()
            .map(|(sys, ms)| format!("{} to {sys}", ms.join(", ")))
            .collect();
        out.push(Finding {
            severity: Severity::Problem,
            cause: "split-partners",
            members: systems.iter().flat_map(|(_, m)| m.clone()).collect(),
            text: format!(
                "members are attached to different partner systems ({}): they cannot form one \
                 aggregate, so only one group carries traffic; cable all members to one switch \
                 or configure MLAG/stacking so both switches present one system id",
                detail.join("; ")
            ),
        });
    }
    // Same partner, different aggregators and different keys: a key mismatch. Only members
    // whose partner information is current count (a member that stopped hearing LACPDUs
    // leaves its aggregator with the keys unchanged).
    if let Some((sys, names)) = systems.first().filter(|_| systems.len() == 1) {
        let mut aggs: Vec<(Option<u16>, u16, u16, Vec<String>)> = Vec::new();
        let current = |m: &&&MemberStatus| m.lacp.as_ref().is_some_and(|l| l.rx_state == "CURRENT");
        for m in up
            .iter()
            .filter(|m| names.contains(&m.name))
            .filter(current)
        {
            let l = m.lacp.as_ref().expect("filtered");
            let key = (l.aggregator_id, l.actor.key, l.partner.key);
            match aggs.iter_mut().find(|a| (a.0, a.1, a.2) == key) {
                Some(a) => a.3.push(m.name.clone()),
                None => aggs.push((key.0, key.1, key.2, vec![m.name.clone()])),
            }
        }
        let keys_differ = aggs.iter().any(|a| (a.1, a.2) != (aggs[0].1, aggs[0].2));
        if aggs.len() > 1 && keys_differ {
            let detail: Vec<String> = aggs
                .iter()
                .map(|(_, ours, theirs, ms)| {
                    format!("{} (our key {ours}, partner key {theirs})", ms.join(", "))
                })
                .collect();
            out.push(Finding {
                severity: Severity::Problem,
                cause: "key-mismatch",
                members: aggs.iter().flat_map(|a| a.3.clone()).collect(),
                text: format!(
                    "members facing the same partner ({sys}) ended in different aggregators: {}; \
                     keys differ when link speeds or duplex differ, or when the switch puts the \
                     ports in different port-channels",
                    detail.join("; ")
                ),
            });
        }
    }
    // Churn.
    for m in &up {
        let l = m.lacp.as_ref().expect("filtered");
        if l.actor_churn_state == "churned" || l.partner_churn_state == "churned" {
            out.push(Finding {
                severity: Severity::Problem,
                cause: "churn",
                members: vec![m.name.clone()],
                text: format!(
                    "{}: {} churn (actor churned {} times, partner {}): the two ends did not \
                     reach synchronization within 60 s, typically a misconfigured partner \
                     (wrong port-channel, different key) or a flapping link",
                    m.name,
                    if l.actor_churn_state == "churned" {
                        "actor"
                    } else {
                        "partner"
                    },
                    l.actor_churned_count,
                    l.partner_churned_count
                ),
            });
        }
    }
    // Rate mismatch: what we ask for vs what the partner asks for. Only a CURRENT receive
    // machine holds the partner's own word: EXPIRED forces the partner's timeout bit to short
    // and DEFAULTED loads the administrative default (long), whatever the partner asked.
    let mismatch: Vec<String> = up
        .iter()
        .filter(|m| m.lacp.as_ref().is_some_and(|l| l.rx_state == "CURRENT"))
        .filter(|m| has_bit(m, false, "timeout") != has_bit(m, true, "timeout"))
        .map(|m| m.name.clone())
        .collect();
    if !mismatch.is_empty() {
        out.push(Finding {
            severity: Severity::Warning,
            cause: "rate-mismatch",
            members: mismatch.clone(),
            text: format!(
                "on {} this bond asks for the {} LACP rate and the partner for the other one: \
                 it works, but each side detects a dead link on its own schedule (3 s fast, \
                 90 s slow); set lacp_rate the same on both ends",
                mismatch.join(", "),
                lacp.lacp_rate
            ),
        });
    }
    if let Some(f) = &lacp.fallback_member {
        out.push(Finding {
            severity: Severity::Warning,
            cause: "fallback",
            members: vec![f.clone()],
            text: format!(
                "LACP fallback is active: no partner spoke LACP, so {f} carries all traffic as \
                 in active-backup"
            ),
        });
    }
    let distributing: Vec<String> = members
        .iter()
        .filter(|m| m.lacp.as_ref().is_some_and(|l| l.distributing))
        .map(|m| m.name.clone())
        .collect();
    if distributing.is_empty() && out.iter().all(|f| f.severity != Severity::Problem) {
        out.push(Finding {
            severity: Severity::Warning,
            cause: "not-distributing",
            members: Vec::new(),
            text: format!(
                "none of the {} members distributes yet: LACP is still negotiating (it takes \
                 about 2 s, the aggregate wait, after the partner answers); ask again in a few \
                 seconds",
                members.len()
            ),
        });
    }
    if !distributing.is_empty() && out.iter().all(|f| f.severity != Severity::Problem) {
        let partner = lacp
            .active_aggregator
            .as_ref()
            .map_or_else(|| "-".to_owned(), |a| a.partner_mac.clone());
        out.push(Finding {
            severity: Severity::Ok,
            cause: "healthy",
            members: distributing.clone(),
            text: format!(
                "LACP is healthy: {} of {} members distributing with partner {partner}",
                distributing.len(),
                members.len()
            ),
        });
    }
    out
}

/// Renders findings for a terminal.
pub fn render(bond: &str, findings: &[Finding]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "LACP doctor for {bond}:");
    for f in findings {
        let tag = match f.severity {
            Severity::Ok => "ok",
            Severity::Warning => "warning",
            Severity::Problem => "problem",
        };
        let _ = writeln!(s, "  [{tag}] {}", f.text);
    }
    s
}

/// `lagctl lacp`.
pub fn main(args: LacpArgs) -> Result<(), CliError> {
    let LacpCommand::Doctor {
        bond,
        json,
        control,
    } = args.command;
    let path = socket_path_for(&ShowArgs {
        bond,
        json,
        control,
    })?;
    let status = status_at(&path)?;
    let findings = diagnose(&status);
    let text = if json {
        serde_json::to_string_pretty(&findings).map_err(|e| CliError::Failed(e.into()))? + "\n"
    } else {
        render(&status.bond, &findings)
    };
    io::stdout()
        .write_all(text.as_bytes())
        .map_err(CliError::Io)?;
    if is_healthy(&findings) {
        Ok(())
    } else {
        Err(CliError::Unhealthy)
    }
}

/// Whether the findings say the bond's LACP is healthy: [`diagnose`] then names `healthy`
/// (warnings may stand beside it).
pub fn is_healthy(findings: &[Finding]) -> bool {
    findings.iter().any(|f| f.cause == "healthy")
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::status::{AggregatorStatus, LacpInfoStatus, LacpStatus, MemberLacp};

    fn info(sys: &str, key: u16, bits: &[&str]) -> LacpInfoStatus {
        LacpInfoStatus {
            system_priority: 65535,
            system_mac: sys.into(),
            key,
            port_priority: 255,
            port: 1,
            state: 0,
            state_names: bits.iter().map(|b| (*b).to_owned()).collect(),
        }
    }

    const FULL: &[&str] = &[
        "activity",
        "timeout",
        "aggregation",
        "synchronization",
        "collecting",
        "distributing",
    ];

    fn member(name: &str, partner: &str, agg: u16, rx: u64, rx_state: &str) -> MemberStatus {
        MemberStatus {
            name: name.into(),
            mii_status: "up".into(),
            speed_mbps: Some(10000),
            duplex: "full".into(),
            link_failure_count: 0,
            perm_hw_addr: "02:00:00:00:00:01".into(),
            active: true,
            lacp: Some(MemberLacp {
                aggregator_id: Some(agg),
                collecting: rx_state == "CURRENT",
                distributing: rx_state == "CURRENT",
                rx_state: rx_state.into(),
                mux_state: "COLLECTING_DISTRIBUTING".into(),
                selected: "SELECTED".into(),
                actor_churn_state: "none".into(),
                partner_churn_state: "none".into(),
                actor_churned_count: 0,
                partner_churned_count: 0,
                actor: info("02:aa:00:00:00:01", 15, FULL),
                partner: info(partner, 15, FULL),
                lacpdu_rx: rx,
                lacpdu_tx: 10,
                lacpdu_tx_errors: 0,
                marker_rx: 0,
                marker_response_tx: 0,
                illegal_rx: 0,
                unknown_rx: 0,
                marker_dropped: 0,
                rate_limited_rx: 0,
                foreign_rx: 0,
                socket_drops: 0,
                kernel_policed: 0,
            }),
            ..MemberStatus::default()
        }
    }

    fn status(members: Vec<MemberStatus>) -> Status {
        Status {
            version: "0".into(),
            bond: "bond0".into(),
            mac: "02:aa:00:00:00:01".into(),
            mode: "802.3ad".into(),
            mode_description: String::new(),
            xmit_hash_policy: Some("layer3+4".into()),
            xmit_hash_policy_number: Some(1),
            mii_status: "up".into(),
            miimon: 100,
            carrier_poll_ms: 10,
            updelay: 0,
            downdelay: 0,
            peer_notif_delay: 0,
            primary: None,
            primary_reselect: None,
            active: None,
            failovers: 0,
            warnings: Vec::new(),
            tx_dropped_no_member: 0,
            buckets: None,
            stripe: None,
            dataplane: Default::default(),
            disabled_members: Vec::new(),
            changes: Vec::new(),
            tables: Default::default(),
            arp_monitor: None,
            lacp: Some(LacpStatus {
                lacp_active: true,
                lacp_rate: "fast".into(),
                min_links: 0,
                ad_select: "stable".into(),
                system_priority: 65535,
                system_mac: "02:aa:00:00:00:01".into(),
                active_aggregator: Some(AggregatorStatus {
                    id: 1,
                    number_of_ports: 2,
                    actor_key: 15,
                    partner_key: 15,
                    partner_mac: "02:bb:00:00:00:01".into(),
                }),
                fallback_member: None,
                lacp_fallback_ms: 0,
            }),
            members,
        }
    }

    fn causes(s: &Status) -> Vec<&'static str> {
        diagnose(s).iter().map(|f| f.cause).collect()
    }

    const P1: &str = "02:bb:00:00:00:01";
    const P2: &str = "02:cc:00:00:00:01";

    #[test]
    fn healthy() {
        let s = status(vec![
            member("eth0", P1, 1, 5, "CURRENT"),
            member("eth1", P1, 1, 5, "CURRENT"),
        ]);
        let f = diagnose(&s);
        assert_eq!(causes(&s), ["healthy"]);
        assert!(f[0].text.contains("2 of 2"), "{}", f[0].text);
    }

    #[test]
    fn nothing_distributing_is_not_healthy() {
        // The first seconds: partner heard, nothing distributes yet.
        let mut a = member("eth0", P1, 1, 1, "CURRENT");
        let mut b = member("eth1", P1, 1, 1, "CURRENT");
        for m in [&mut a, &mut b] {
            let l = m.lacp.as_mut().unwrap();
            (l.collecting, l.distributing) = (false, false);
        }
        let s = status(vec![a, b]);
        let f = diagnose(&s);
        assert_eq!(causes(&s), ["not-distributing"]);
        assert!(!is_healthy(&f));
        let s = status(vec![
            member("eth0", P1, 1, 5, "CURRENT"),
            member("eth1", P1, 1, 5, "CURRENT"),
        ]);
        assert!(is_healthy(&diagnose(&s)));
    }

    #[test]
    fn a_partner_that_stops_speaking_lacp_is_named_not_a_key_mismatch() {
        // Both members heard LACPDUs, then none: each sits in an aggregator of its own with
        // the keys it had, which is no key mismatch.
        let s = status(vec![
            member("eth0", P1, 1, 7, "DEFAULTED"),
            member("eth1", P1, 2, 7, "DEFAULTED"),
        ]);
        let f = diagnose(&s);
        assert_eq!(causes(&s), ["partner-left-lacp"]);
        assert_eq!(f[0].members, ["eth0", "eth1"]);
        assert!(!is_healthy(&f));
        // Only one member stopped: LACPDUs are lost on that link.
        let s = status(vec![
            member("eth0", P1, 1, 7, "CURRENT"),
            member("eth1", P1, 2, 7, "EXPIRED"),
        ]);
        assert_eq!(causes(&s), ["lacpdus-lost"]);
    }

    #[test]
    fn partner_not_speaking_lacp_and_passive_passive() {
        let mut s = status(vec![
            member("eth0", "00:00:00:00:00:00", 1, 0, "DEFAULTED"),
            member("eth1", "00:00:00:00:00:00", 2, 0, "DEFAULTED"),
        ]);
        assert_eq!(causes(&s), ["no-partner"]);
        s.lacp.as_mut().unwrap().lacp_active = false;
        assert_eq!(causes(&s), ["passive-passive"]);
    }

    #[test]
    fn split_partners_and_key_mismatch() {
        let s = status(vec![
            member("eth0", P1, 1, 5, "CURRENT"),
            member("eth1", P2, 2, 5, "CURRENT"),
        ]);
        let f = diagnose(&s);
        assert_eq!(causes(&s), ["split-partners"]);
        assert!(
            f[0].text.contains(P1) && f[0].text.contains(P2),
            "{}",
            f[0].text
        );
        let mut slow = member("eth1", P1, 2, 5, "CURRENT");
        slow.lacp.as_mut().unwrap().actor.key = 9;
        let s = status(vec![member("eth0", P1, 1, 5, "CURRENT"), slow]);
        let f = diagnose(&s);
        assert_eq!(causes(&s), ["key-mismatch"]);
        assert!(f[0].text.contains("our key 9"), "{}", f[0].text);
    }

    #[test]
    fn lost_lacpdus_churn_rate_mismatch_link_down_fallback() {
        let s = status(vec![
            member("eth0", P1, 1, 5, "CURRENT"),
            member("eth1", P1, 1, 40, "EXPIRED"),
        ]);
        assert_eq!(causes(&s), ["lacpdus-lost"]);
        let mut churned = member("eth1", P1, 1, 5, "CURRENT");
        churned.lacp.as_mut().unwrap().partner_churn_state = "churned".into();
        let s = status(vec![member("eth0", P1, 1, 5, "CURRENT"), churned]);
        assert_eq!(causes(&s), ["churn"]);
        let mut slow = member("eth1", P1, 1, 5, "CURRENT");
        slow.lacp
            .as_mut()
            .unwrap()
            .partner
            .state_names
            .retain(|n| n != "timeout");
        let s = status(vec![member("eth0", P1, 1, 5, "CURRENT"), slow]);
        assert_eq!(causes(&s), ["rate-mismatch", "healthy"]);
        let mut down = member("eth1", P1, 1, 5, "CURRENT");
        down.mii_status = "down".into();
        let s = status(vec![member("eth0", P1, 1, 5, "CURRENT"), down]);
        assert_eq!(causes(&s), ["link-down"]);
        let mut s = status(vec![member("eth0", "00:00:00:00:00:00", 1, 0, "DEFAULTED")]);
        s.lacp.as_mut().unwrap().fallback_member = Some("eth0".into());
        assert_eq!(causes(&s), ["no-partner", "fallback"]);
    }

    /// `m` with the timeout bit of its actor (ours) or partner information cleared (long).
    fn long_timeout(mut m: MemberStatus, partner: bool) -> MemberStatus {
        let l = m.lacp.as_mut().unwrap();
        let info = if partner {
            &mut l.partner
        } else {
            &mut l.actor
        };
        info.state_names.retain(|n| n != "timeout");
        m
    }

    #[test]
    fn rate_mismatch_only_on_members_whose_partner_information_is_current() {
        // A slow bond whose partner is slow too: an expired member's partner timeout bit is
        // forced to short by the receive machine, which says nothing about the partner's rate.
        let slow = |name, rx, state| {
            long_timeout(long_timeout(member(name, P1, 1, rx, state), false), true)
        };
        let mut expired = slow("eth1", 40, "EXPIRED");
        expired.lacp.as_mut().unwrap().partner.state_names =
            FULL.iter().map(|b| (*b).to_owned()).collect();
        let mut s = status(vec![slow("eth0", 5, "CURRENT"), expired]);
        s.lacp.as_mut().unwrap().lacp_rate = "slow".into();
        assert_eq!(causes(&s), ["lacpdus-lost"]);
        // A fast bond with a defaulted member: the partner admin default is long (state 0).
        let mut defaulted = member("eth1", "00:00:00:00:00:00", 2, 40, "DEFAULTED");
        defaulted.lacp.as_mut().unwrap().partner.state_names.clear();
        let s = status(vec![member("eth0", P1, 1, 5, "CURRENT"), defaulted]);
        assert_eq!(causes(&s), ["lacpdus-lost"]);
        // A partner that really asks for the other rate, on a CURRENT member, is reported.
        for (ours_long, name) in [(false, "eth1"), (true, "eth0")] {
            let (a, b) = if ours_long {
                (
                    long_timeout(member("eth0", P1, 1, 5, "CURRENT"), false),
                    slow("eth1", 5, "CURRENT"),
                )
            } else {
                (
                    member("eth0", P1, 1, 5, "CURRENT"),
                    long_timeout(member("eth1", P1, 1, 5, "CURRENT"), true),
                )
            };
            let s = status(vec![a, b]);
            let f = diagnose(&s);
            assert_eq!(causes(&s), ["rate-mismatch", "healthy"]);
            assert_eq!(f[0].members, [name]);
        }
    }

    #[test]
    fn other_modes() {
        let mut s = status(vec![]);
        s.lacp = None;
        s.mode = "balance-xor".into();
        assert_eq!(causes(&s), ["not-802.3ad"]);
        assert!(render("bond0", &diagnose(&s)).contains("[warning]"));
    }

    /// The doctor on real LACP engines: `Bond`s wired port to port in memory, driven in
    /// virtual time as the daemon drives its bond, their state converted to a [`Status`]
    /// through the daemon's conversion ([`Status::from_snapshot`]).
    mod engines {
        use lagd_proto::bond::{Bond, BondOptions, NoDataplane, PortId, PortInfo};
        use lagd_proto::time::Instant;
        use lagd_proto::wire::EthernetAddress;

        use super::super::*;
        use super::causes;
        use crate::status::BondContext;

        /// Time step: as often as the daemon wakes at the least.
        const TICK_MS: u64 = 10;

        struct Wire {
            ends: [(usize, PortId); 2],
            /// Frames sent either way are lost.
            lossy: bool,
        }

        struct Net {
            now: u64,
            bonds: Vec<Bond>,
            wires: Vec<Wire>,
        }

        /// The system id (bond MAC) of bond `i`.
        fn system(i: usize) -> EthernetAddress {
            EthernetAddress([2, 0xa0 + i as u8, 0, 0, 0, 1])
        }

        impl Net {
            fn new() -> Self {
                Self {
                    now: 0,
                    bonds: Vec::new(),
                    wires: Vec::new(),
                }
            }

            /// A bond with `opts` and one member `ethN` per speed (Mb/s, full duplex, carrier).
            fn bond(&mut self, opts: &str, speeds: &[u32]) -> usize {
                let i = self.bonds.len();
                let (o, _) = BondOptions::parse_opts(opts).unwrap();
                let mut b = Bond::new(o, system(i));
                for (n, speed) in speeds.iter().enumerate() {
                    let info = PortInfo {
                        name: format!("eth{n}"),
                        perm_mac: EthernetAddress([2, 0xa0 + i as u8, 0, 0, 1, n as u8]),
                        speed_mbps: Some(*speed),
                        full_duplex: Some(true),
                    };
                    b.add_port(Instant::from_millis(self.now), info, true);
                }
                self.bonds.push(b);
                i
            }

            /// A cable between member `a.1` of bond `a.0` and member `b.1` of bond `b.0`.
            fn wire(&mut self, a: (usize, u16), b: (usize, u16)) -> usize {
                self.wires.push(Wire {
                    ends: [(a.0, PortId(a.1)), (b.0, PortId(b.1))],
                    lossy: false,
                });
                self.wires.len() - 1
            }

            /// Where a frame sent on `port` of `bond` arrives, unless it is lost.
            fn peer(&self, bond: usize, port: PortId) -> Option<(usize, PortId)> {
                let w = self.wires.iter().find(|w| w.ends.contains(&(bond, port)))?;
                let other = if w.ends[0] == (bond, port) { 1 } else { 0 };
                (!w.lossy).then_some(w.ends[other])
            }

            /// One tick: timers, then frames until nobody has anything to send (no latency).
            fn step(&mut self) {
                self.now += TICK_MS;
                let t = Instant::from_millis(self.now);
                for b in &mut self.bonds {
                    b.handle_timeout(t, &mut NoDataplane);
                }
                let mut buf = [0u8; 1600];
                for _ in 0..32 {
                    let mut frames = Vec::new();
                    for (i, b) in self.bonds.iter_mut().enumerate() {
                        // As the daemon: drain what the bond queued after each call.
                        while let Some(tx) = b.poll_transmit(t, &mut buf) {
                            frames.push((i, tx.port, buf[..tx.len].to_vec()));
                        }
                    }
                    if frames.is_empty() {
                        break;
                    }
                    for (i, port, frame) in frames {
                        if let Some((to, to_port)) = self.peer(i, port) {
                            self.bonds[to].handle_frame(t, to_port, &frame);
                        }
                    }
                }
                for b in &mut self.bonds {
                    while b.poll_event().is_some() {}
                }
            }

            fn run_until(&mut self, ms: u64) {
                while self.now < ms {
                    self.step();
                }
            }

            /// Runs until `cond` holds (returns the time) or `limit_ms` passes (panics).
            fn run_until_cond(&mut self, limit_ms: u64, cond: impl Fn(&Self) -> bool) -> u64 {
                while !cond(self) {
                    assert!(
                        self.now < limit_ms,
                        "condition not reached by {limit_ms} ms"
                    );
                    self.step();
                }
                self.now
            }

            /// Bond `i`'s status, converted by the daemon's own [`Status::from_snapshot`].
            fn status(&self, i: usize) -> Status {
                let b = &self.bonds[i];
                let ctx = BondContext {
                    version: "test".into(),
                    bond: format!("bond{i}"),
                    mac: b.mac().to_string(),
                    carrier_poll_ms: 10,
                    tx_dropped_no_member: 0,
                    lacp_fallback_ms: b.options().lacp_fallback,
                    now: Instant::from_millis(self.now),
                };
                Status::from_snapshot(&b.snapshot(ctx.now), ctx, |_, p, lacp| {
                    MemberStatus::from_snapshot(p, lacp, 0)
                })
            }

            fn rx_state(&self, bond: usize, member: usize) -> String {
                let s = self.status(bond);
                s.members[member].lacp.as_ref().unwrap().rx_state.clone()
            }
        }

        const FAST: &str = "mode=802.3ad lacp_rate=fast";
        const SLOW: &str = "mode=802.3ad lacp_rate=slow";

        /// Two bonds with `opts_a` and `opts_b`, wired member i to member i, 10G each.
        fn pair(opts_a: &str, opts_b: &str, links: usize) -> Net {
            let mut net = Net::new();
            let a = net.bond(opts_a, &vec![10_000; links]);
            let b = net.bond(opts_b, &vec![10_000; links]);
            for i in 0..links as u16 {
                net.wire((a, i), (b, i));
            }
            net
        }

        fn finding<'a>(f: &'a [Finding], cause: &str) -> &'a Finding {
            f.iter()
                .find(|f| f.cause == cause)
                .unwrap_or_else(|| panic!("no {cause} in {f:#?}"))
        }

        #[test]
        fn a_formed_pair_is_healthy() {
            let mut net = pair(FAST, FAST, 2);
            net.run_until(5_000);
            for b in 0..2 {
                let s = net.status(b);
                assert_eq!(causes(&s), ["healthy"], "bond {b}: {:#?}", diagnose(&s));
                let f = diagnose(&s);
                assert!(f[0].text.contains("2 of 2"), "{}", f[0].text);
                let partner = system(1 - b).to_string();
                assert!(f[0].text.contains(&partner), "{}", f[0].text);
            }
        }

        #[test]
        fn split_partners_from_members_cabled_to_two_systems() {
            let mut net = Net::new();
            let a = net.bond(FAST, &[10_000, 10_000]);
            let b = net.bond(FAST, &[10_000]);
            let c = net.bond(FAST, &[10_000]);
            net.wire((a, 0), (b, 0));
            net.wire((a, 1), (c, 0));
            net.run_until(10_000);
            let s = net.status(a);
            let f = diagnose(&s);
            assert_eq!(causes(&s), ["split-partners"], "{f:#?}");
            assert_eq!(f[0].members, ["eth0", "eth1"]);
            let (sb, sc) = (system(b).to_string(), system(c).to_string());
            assert!(
                f[0].text.contains(&format!("eth0 to {sb}"))
                    && f[0].text.contains(&format!("eth1 to {sc}")),
                "{}",
                f[0].text
            );
        }

        #[test]
        fn key_mismatch_then_churn_from_members_of_different_speeds() {
            // eth1 is 1G at both ends: key 9 against eth0's 15, so it cannot join eth0's
            // aggregator, waits as standby and never gets in sync.
            let mut net = Net::new();
            let a = net.bond(FAST, &[10_000, 1_000]);
            let b = net.bond(FAST, &[10_000, 1_000]);
            net.wire((a, 0), (b, 0));
            net.wire((a, 1), (b, 1));
            net.run_until(10_000);
            let s = net.status(a);
            let f = diagnose(&s);
            assert_eq!(causes(&s), ["key-mismatch"], "{f:#?}");
            assert_eq!(f[0].members, ["eth0", "eth1"]);
            assert!(
                f[0].text.contains("eth0 (our key 15, partner key 15)")
                    && f[0].text.contains("eth1 (our key 9, partner key 9)"),
                "{}",
                f[0].text
            );
            // 60 s out of sync: churn, on eth1 only.
            net.run_until(65_000);
            let s = net.status(a);
            let f = diagnose(&s);
            assert_eq!(causes(&s), ["key-mismatch", "churn"], "{f:#?}");
            let churn = finding(&f, "churn");
            assert_eq!(churn.members, ["eth1"]);
            assert!(churn.text.contains("actor churn"), "{}", churn.text);
        }

        #[test]
        fn passive_passive_and_no_partner_and_fallback() {
            let passive = "mode=802.3ad lacp_active=off lacp_rate=fast";
            let mut net = pair(passive, passive, 2);
            net.run_until(10_000);
            let s = net.status(0);
            assert_eq!(causes(&s), ["passive-passive"], "{:#?}", diagnose(&s));
            assert_eq!(diagnose(&s)[0].members, ["eth0", "eth1"]);
            // Passive against active forms.
            let mut net = pair(passive, FAST, 2);
            net.run_until(10_000);
            assert_eq!(causes(&net.status(0)), ["healthy"]);
            // An active bond facing a port without LACP (a static bond), with and without
            // the fallback.
            let mut net = pair(FAST, "mode=balance-xor", 2);
            net.run_until(10_000);
            let s = net.status(0);
            assert_eq!(causes(&s), ["no-partner"], "{:#?}", diagnose(&s));
            let mut net = pair(
                "mode=802.3ad lacp_rate=fast lacp_fallback=3000",
                "mode=balance-xor",
                2,
            );
            net.run_until(10_000);
            let s = net.status(0);
            assert_eq!(
                causes(&s),
                ["no-partner", "fallback"],
                "{:#?}",
                diagnose(&s)
            );
            assert_eq!(s.lacp.as_ref().unwrap().lacp_fallback_ms, 3000);
            assert_eq!(finding(&diagnose(&s), "fallback").members, ["eth0"]);
        }

        #[test]
        fn rate_mismatch_between_a_fast_and_a_slow_bond() {
            let mut net = pair(FAST, SLOW, 2);
            net.run_until(10_000);
            for (b, ours) in [(0, "fast"), (1, "slow")] {
                let s = net.status(b);
                let f = diagnose(&s);
                assert_eq!(causes(&s), ["rate-mismatch", "healthy"], "bond {b}: {f:#?}");
                assert_eq!(f[0].members, ["eth0", "eth1"]);
                assert!(
                    f[0].text.contains(&format!("the {ours} LACP rate")),
                    "{}",
                    f[0].text
                );
            }
        }

        #[test]
        fn an_expired_member_of_a_slow_bond_is_no_rate_mismatch() {
            let mut net = pair(SLOW, SLOW, 2);
            net.run_until(10_000);
            assert_eq!(causes(&net.status(0)), ["healthy"]);
            net.wires[1].lossy = true;
            net.run_until_cond(200_000, |n| n.rx_state(0, 1) == "EXPIRED");
            let s = net.status(0);
            // The receive machine forced the partner's timeout bit to short...
            let partner = &s.members[1].lacp.as_ref().unwrap().partner;
            assert!(
                partner.state_names.iter().any(|n| n == "timeout"),
                "{partner:?}"
            );
            // ... which is not the partner asking for the fast rate.
            let f = diagnose(&s);
            assert_eq!(causes(&s), ["lacpdus-lost"], "{f:#?}");
            assert_eq!(f[0].members, ["eth1"]);
        }

        #[test]
        fn a_defaulted_member_of_a_fast_bond_is_no_rate_mismatch() {
            let mut net = pair(FAST, FAST, 2);
            net.run_until(10_000);
            net.wires[1].lossy = true;
            net.run_until_cond(30_000, |n| n.rx_state(0, 1) == "DEFAULTED");
            let s = net.status(0);
            // The admin default the receive machine loaded asks for the long timeout...
            let partner = &s.members[1].lacp.as_ref().unwrap().partner;
            assert!(
                !partner.state_names.iter().any(|n| n == "timeout"),
                "{partner:?}"
            );
            // ... which is not the partner asking for the slow rate.
            let f = diagnose(&s);
            assert_eq!(causes(&s), ["lacpdus-lost"], "{f:#?}");
            assert_eq!(f[0].members, ["eth1"]);
        }
    }
}
