//! `lagctl export --to DIALECT CONFIG`: a lagd TOML configuration as the kernel bond's
//! configuration for netplan, NetworkManager keyfiles, nmstate, systemd-networkd or ifupdown,
//! so a bond can move back to the kernel with the same behaviour. The option names are the
//! kernel's already; each dialect gets its own spellings and units, the inverse of what
//! `lagctl import` reads, so import after export gives the same bond.
//!
//! What the kernel or the tool cannot express (lagd's own options, an option the tool has no
//! key for) becomes a `# not carried over:` line, and the exit code 4. The bond's addresses are
//! not in lagd's file: the output leaves them to be added.

use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use lagd_proto::bond::{BondOptions, Mode};

use super::CliError;
use crate::config::Config;

/// Arguments of `lagctl export`.
#[derive(Debug, Clone, clap::Args)]
pub struct ExportArgs {
    /// lagd's TOML configuration.
    pub config: PathBuf,
    /// The dialect to write.
    #[arg(long, value_parser = ["netplan", "nm", "nmstate", "networkd", "ifupdown"])]
    pub to: String,
    /// Write the file(s) into this directory (created if missing) instead of standard output,
    /// where each file starts with a `# ---- file: NAME ----` line.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
}

/// Options only lagd has: no kernel bond, and so no tool, can express them.
const LAGD_ONLY: [&str; 11] = [
    "lacp_fallback",
    "lacp_aggregate_wait",
    "lacp_rejoin_hold",
    "distribution",
    "fastpath",
    "rebalance_interval",
    "rebalance_idle_gap",
    "rebalance_max_moves",
    "rebalance_force_after",
    "hash_seed",
    "member_speed",
];

/// Every option's value as the kernel's text (lists comma-separated), in the order of
/// [`lagd_proto::bond::options::OPTION_NAMES`].
fn values(o: &BondOptions) -> Vec<(&'static str, String)> {
    let list = |v: Vec<String>| v.join(",");
    let b = |v: bool| if v { "1" } else { "0" }.to_owned();
    let per = |v: &[(String, u32)]| list(v.iter().map(|(m, p)| format!("{m}:{p}")).collect());
    vec![
        ("mode", o.mode.to_string()),
        ("miimon", o.miimon.to_string()),
        ("updelay", o.updelay.to_string()),
        ("downdelay", o.downdelay.to_string()),
        ("peer_notif_delay", o.peer_notif_delay.to_string()),
        ("xmit_hash_policy", o.xmit_hash_policy.to_string()),
        ("packets_per_slave", o.packets_per_slave.to_string()),
        ("primary", o.primary.clone().unwrap_or_default()),
        ("primary_reselect", o.primary_reselect.to_string()),
        ("fail_over_mac", o.fail_over_mac.to_string()),
        ("num_grat_arp", o.num_grat_arp.to_string()),
        ("num_unsol_na", o.num_unsol_na.to_string()),
        ("all_slaves_active", b(o.all_slaves_active)),
        ("resend_igmp", o.resend_igmp.to_string()),
        ("arp_interval", o.arp_interval.to_string()),
        (
            "arp_ip_target",
            list(o.arp_ip_target.iter().map(|t| t.to_string()).collect()),
        ),
        (
            "ns_ip6_target",
            list(o.ns_ip6_target.iter().map(|t| t.to_string()).collect()),
        ),
        ("arp_validate", o.arp_validate.to_string()),
        ("arp_all_targets", o.arp_all_targets.to_string()),
        ("arp_missed_max", o.arp_missed_max.to_string()),
        ("tlb_dynamic_lb", b(o.tlb_dynamic_lb)),
        ("lp_interval", o.lp_interval.to_string()),
        ("lacp_rate", o.lacp_rate.to_string()),
        ("lacp_active", b(o.lacp_active)),
        ("ad_select", o.ad_select.to_string()),
        ("ad_actor_sys_prio", o.ad_actor_sys_prio.to_string()),
        (
            "ad_actor_system",
            o.ad_actor_system.map(|m| m.to_string()).unwrap_or_default(),
        ),
        ("ad_user_port_key", o.ad_user_port_key.to_string()),
        ("min_links", o.min_links.to_string()),
        ("coupled_control", b(o.coupled_control)),
        ("use_carrier", b(o.use_carrier)),
        ("lacp_fallback", o.lacp_fallback.to_string()),
        ("lacp_aggregate_wait", o.lacp_aggregate_wait.to_string()),
        ("lacp_rejoin_hold", o.lacp_rejoin_hold.to_string()),
        (
            "actor_port_prio",
            list(
                o.actor_port_prio
                    .iter()
                    .map(|(m, p)| format!("{m}:{p}"))
                    .collect(),
            ),
        ),
        (
            "prio",
            list(o.prio.iter().map(|(m, p)| format!("{m}:{p}")).collect()),
        ),
        ("distribution", o.distribution.to_string()),
        ("fastpath", o.fastpath.to_string()),
        ("rebalance_interval", o.rebalance_interval.to_string()),
        ("rebalance_idle_gap", o.rebalance_idle_gap.to_string()),
        ("rebalance_max_moves", o.rebalance_max_moves.to_string()),
        ("rebalance_force_after", o.rebalance_force_after.to_string()),
        ("hash_seed", o.hash_seed.to_string()),
        ("member_speed", per(&o.member_speed)),
    ]
}

/// A configuration in another tool's terms: its files, and what did not carry over.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Exported {
    /// `(file name, text)`, the bond's file first.
    pub files: Vec<(String, String)>,
    /// What the tool cannot express, each with why (every one changes behaviour).
    pub dropped: Vec<String>,
}

/// The dialect's key for kernel option `key`, `None` when it has none.
fn key_in(dialect: &str, key: &str) -> Option<String> {
    // Per-member options are set on the member in these tools, not written as bond options.
    if LAGD_ONLY.contains(&key) || matches!(key, "actor_port_prio" | "prio" | "coupled_control") {
        return None;
    }
    match dialect {
        "nm" | "nmstate" => Some(key.to_owned()),
        "ifupdown" => Some(format!("bond-{}", key.replace('_', "-"))),
        "netplan" => Some(
            match key {
                "mode" => "mode",
                "lacp_rate" => "lacp-rate",
                "min_links" => "min-links",
                "xmit_hash_policy" => "transmit-hash-policy",
                "ad_select" => "ad-select",
                "all_slaves_active" => "all-members-active",
                "arp_ip_target" => "arp-ip-targets",
                "arp_validate" => "arp-validate",
                "arp_all_targets" => "arp-all-targets",
                "fail_over_mac" => "fail-over-mac-policy",
                "num_grat_arp" => "gratuitous-arp",
                "packets_per_slave" => "packets-per-member",
                "primary_reselect" => "primary-reselect-policy",
                "resend_igmp" => "resend-igmp",
                "primary" => "primary",
                "miimon" => "mii-monitor-interval",
                "arp_interval" => "arp-interval",
                "updelay" => "up-delay",
                "downdelay" => "down-delay",
                "lp_interval" => "learn-packet-interval",
                _ => return None,
            }
            .to_owned(),
        ),
        "networkd" => Some(
            match key {
                "mode" => "Mode",
                "xmit_hash_policy" => "TransmitHashPolicy",
                "lacp_rate" => "LACPTransmitRate",
                "ad_select" => "AdSelect",
                "ad_actor_sys_prio" => "AdActorSystemPriority",
                "ad_user_port_key" => "AdUserPortKey",
                "ad_actor_system" => "AdActorSystem",
                "fail_over_mac" => "FailOverMACPolicy",
                "arp_validate" => "ARPValidate",
                "arp_all_targets" => "ARPAllTargets",
                "arp_missed_max" => "ARPMissedMax",
                "primary_reselect" => "PrimaryReselectPolicy",
                "resend_igmp" => "ResendIGMP",
                "packets_per_slave" => "PacketsPerSlave",
                "num_grat_arp" => "GratuitousARP",
                "min_links" => "MinLinks",
                "miimon" => "MIIMonitorSec",
                "updelay" => "UpDelaySec",
                "downdelay" => "DownDelaySec",
                "arp_interval" => "ARPIntervalSec",
                "peer_notif_delay" => "PeerNotifyDelaySec",
                "all_slaves_active" => "AllSlavesActive",
                "tlb_dynamic_lb" => "DynamicTransmitLoadBalancing",
                "lp_interval" => "LearnPacketIntervalSec",
                "arp_ip_target" => "ARPIPTargets",
                // The primary is the member's .network PrimarySlave=.
                "primary" => "primary",
                _ => return None,
            }
            .to_owned(),
        ),
        _ => None,
    }
}

/// Builds `dialect`'s files for `config`. A mode only lagd has is an error.
pub fn export(config: &Config, dialect: &str) -> Result<Exported, String> {
    let o = &config.options;
    if matches!(o.mode, Mode::BalanceSlb | Mode::BalanceTcp | Mode::Stripe) {
        return Err(format!(
            "mode {} is lagd's own: a kernel bond has no such mode, so there is nothing to \
             export it as",
            o.mode
        ));
    }
    let defaults = values(&BondOptions::default());
    let mut dropped = Vec::new();
    // The options whose value is not the kernel's default, mode first; NetworkManager (and
    // nmstate through it) default miimon to 100, so it is always written for them.
    let mut opts: Vec<(String, String, &'static str)> = Vec::new();
    for ((key, value), (_, default)) in values(o).into_iter().zip(defaults) {
        let needed = value != default
            || key == "mode"
            || (key == "miimon" && matches!(dialect, "nm" | "nmstate"));
        // NetworkManager (1.44) sets prio on each port: its port files carry it (nmstate: its
        // ports-config, each port's priority). The driver's
        // num_unsol_na is num_grat_arp under another name: written once, as num_grat_arp.
        if !needed
            || (key == "prio" && matches!(dialect, "nm" | "nmstate"))
            || (key == "num_unsol_na" && o.num_unsol_na == o.num_grat_arp)
        {
            continue;
        }
        // netplan's ad-select and networkd's AdSelect= take stable, bandwidth and count;
        // Linux 6.18's actor_port_prio came after them.
        if key == "ad_select"
            && value == "actor_port_prio"
            && matches!(dialect, "netplan" | "networkd")
        {
            dropped.push(format!(
                "ad_select=actor_port_prio: {dialect} takes only stable, bandwidth and count \
                 (the bond would select as with stable, the default, not by the members' \
                 actor_port_prio)"
            ));
            continue;
        }
        match key_in(dialect, key) {
            Some(k) => opts.push((k, value, key)),
            None => dropped.push(format!(
                "{key}={value}: {}",
                if LAGD_ONLY.contains(&key) {
                    "lagd's own option; the kernel bond has none".to_owned()
                } else {
                    format!("{dialect} has no setting for it")
                }
            )),
        }
    }
    // lagd's broadcast hands the host one copy of each frame (on by default); the kernel's
    // hands it one per member.
    if o.mode == Mode::Broadcast && o.broadcast_dedup {
        dropped.push(
            "broadcast_dedup=1: lagd's own option; the kernel bond has none (its host receives \
             each frame once per member)"
                .to_owned(),
        );
    }
    let bond = &config.bond;
    let members = &config.members;
    let mut files = Vec::new();
    let head = |s: &mut String, dropped: &[String]| {
        let _ = writeln!(s, "# Exported by lagctl export from lagd's configuration.");
        for d in dropped {
            let _ = writeln!(s, "# not carried over: {d}");
        }
        let _ = writeln!(
            s,
            "# The bond's addresses are not in lagd's configuration: add them here."
        );
    };
    match dialect {
        "netplan" => {
            let mut s = String::new();
            head(&mut s, &dropped);
            let _ = writeln!(s, "network:\n  version: 2\n  ethernets:");
            for m in members {
                let _ = writeln!(s, "    {}: {{}}", yaml_str(m));
            }
            let _ = writeln!(s, "  bonds:\n    {}:", yaml_str(bond));
            let list: Vec<String> = members.iter().map(|m| yaml_str(m)).collect();
            let _ = writeln!(s, "      interfaces: [{}]", list.join(", "));
            if let Some(m) = config.mtu {
                let _ = writeln!(s, "      mtu: {m}");
            }
            if let Some(m) = config.mac {
                let _ = writeln!(s, "      macaddress: \"{m}\"");
            }
            let _ = writeln!(s, "      parameters:");
            for (k, v, kernel) in &opts {
                let v = match *kernel {
                    "arp_ip_target" => format!(
                        "[{}]",
                        v.split(',').map(yaml_str).collect::<Vec<_>>().join(", ")
                    ),
                    "all_slaves_active" => (v == "1").to_string(),
                    // Milliseconds without a suffix; learn-packet-interval in seconds.
                    _ => yaml_str(v),
                };
                let _ = writeln!(s, "        {k}: {v}");
            }
            files.push((format!("90-lagd-{bond}.yaml"), s));
        }
        "nm" => {
            let mut s = String::new();
            head(&mut s, &dropped);
            let _ = writeln!(
                s,
                "[connection]\nid={bond}\ntype=bond\ninterface-name={bond}\n\n[bond]"
            );
            for (k, v, _) in &opts {
                let _ = writeln!(s, "{k}={v}");
            }
            if config.mtu.is_some() || config.mac.is_some() {
                let _ = writeln!(s, "\n[ethernet]");
                if let Some(m) = config.mtu {
                    let _ = writeln!(s, "mtu={m}");
                }
                if let Some(m) = config.mac {
                    let _ = writeln!(s, "cloned-mac-address={m}");
                }
            }
            files.push((format!("{bond}.nmconnection"), s));
            for m in members {
                let mut port = format!(
                    "[connection]\nid={bond}-port-{m}\ntype=ethernet\ninterface-name={m}\n\
                     controller={bond}\nport-type=bond\n"
                );
                if let Some((_, p)) = o.prio.iter().find(|(n, _)| n == m) {
                    let _ = write!(port, "\n[bond-port]\nprio={p}\n");
                }
                files.push((format!("{bond}-port-{m}.nmconnection"), port));
            }
        }
        "nmstate" => {
            let mut s = String::new();
            head(&mut s, &dropped);
            let _ = writeln!(
                s,
                "interfaces:\n- name: {}\n  type: bond\n  state: up",
                yaml_str(bond)
            );
            if let Some(m) = config.mtu {
                let _ = writeln!(s, "  mtu: {m}");
            }
            if let Some(m) = config.mac {
                let _ = writeln!(s, "  mac-address: \"{m}\"");
            }
            let mode = opts.iter().find(|(k, _, _)| k == "mode").map(|o| &o.1);
            let _ = writeln!(
                s,
                "  link-aggregation:\n    mode: {}\n    port:",
                yaml_str(mode.map_or("balance-rr", String::as_str))
            );
            for m in members {
                let _ = writeln!(s, "    - {}", yaml_str(m));
            }
            let _ = writeln!(s, "    options:");
            for (k, v, kernel) in opts.iter().filter(|(k, _, _)| k != "mode") {
                let v = if BondOptions::takes_boolean(kernel) {
                    (v == "1").to_string()
                } else {
                    yaml_str(v)
                };
                let _ = writeln!(s, "      {k}: {v}");
            }
            if !o.prio.is_empty() {
                let _ = writeln!(s, "    ports-config:");
                for (m, p) in &o.prio {
                    let _ = writeln!(s, "    - name: {}\n      priority: {p}", yaml_str(m));
                }
            }
            for m in members {
                let _ = writeln!(s, "- name: {}\n  type: ethernet\n  state: up", yaml_str(m));
            }
            files.push((format!("{bond}.yml"), s));
        }
        "networkd" => {
            let mut s = String::new();
            head(&mut s, &dropped);
            let _ = writeln!(s, "[NetDev]\nName={bond}\nKind=bond");
            if let Some(m) = config.mtu {
                let _ = writeln!(s, "MTUBytes={m}");
            }
            if let Some(m) = config.mac {
                let _ = writeln!(s, "MACAddress={m}");
            }
            let _ = writeln!(s, "\n[Bond]");
            let mut primary = None;
            for (k, v, kernel) in &opts {
                let v = match *kernel {
                    "primary" => {
                        primary = Some(v.clone());
                        continue;
                    }
                    "miimon" | "updelay" | "downdelay" | "arp_interval" | "peer_notif_delay" => {
                        format!("{v}ms")
                    }
                    "lp_interval" => format!("{v}s"),
                    "all_slaves_active" | "tlb_dynamic_lb" => {
                        if v == "1" { "yes" } else { "no" }.to_owned()
                    }
                    "arp_ip_target" => v.replace(',', " "),
                    _ => v.clone(),
                };
                let _ = writeln!(s, "{k}={v}");
            }
            files.push((format!("25-{bond}.netdev"), s));
            if let Some(p) = primary.as_ref().filter(|p| !members.contains(p)) {
                files[0].1.insert_str(
                    0,
                    &format!(
                        "# not carried over: primary={p}: not a member, and networkd names the \
                         primary in a member's .network\n"
                    ),
                );
                dropped.push(format!("primary={p}: not a member"));
            }
            for m in members {
                let mut n = format!("[Match]\nName={m}\n\n[Network]\nBond={bond}\n");
                if primary.as_ref() == Some(m) {
                    n.push_str("PrimarySlave=yes\n");
                }
                files.push((format!("30-{bond}-{m}.network"), n));
            }
        }
        "ifupdown" => {
            let mut s = String::new();
            head(&mut s, &dropped);
            for m in members {
                let _ = writeln!(s, "iface {m} inet manual\n");
            }
            let _ = writeln!(
                s,
                "auto {bond}\niface {bond} inet manual\n    bond-slaves {}",
                members.join(" ")
            );
            for (k, v, kernel) in &opts {
                let v = match *kernel {
                    "arp_ip_target" | "ns_ip6_target" => v.replace(',', " "),
                    _ => v.clone(),
                };
                let _ = writeln!(s, "    {k} {v}");
            }
            if let Some(m) = config.mtu {
                let _ = writeln!(s, "    mtu {m}");
            }
            if let Some(m) = config.mac {
                let _ = writeln!(s, "    hwaddress ether {m}");
            }
            files.push(("interfaces".to_owned(), s));
        }
        other => return Err(format!("unknown dialect '{other}'")),
    }
    Ok(Exported { files, dropped })
}

/// A YAML scalar: plain when it cannot be read as anything else, else double-quoted.
fn yaml_str(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '+'))
        && !s.starts_with(['-', '.'])
        && s.parse::<f64>().is_err()
        && !matches!(
            s.to_ascii_lowercase().as_str(),
            "true" | "false" | "yes" | "no" | "on" | "off" | "null" | "y" | "n"
        );
    let numeric = !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if plain || numeric {
        s.to_owned()
    } else {
        format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
    }
}

/// `lagctl export`.
pub fn main(args: ExportArgs) -> Result<(), CliError> {
    let config = Config::from_file(&args.config).map_err(|e| CliError::Usage(e.to_string()))?;
    let out = export(&config, &args.to).map_err(CliError::Usage)?;
    match &args.output {
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(CliError::Io)?;
            // NetworkManager loads only keyfiles that only root can read; netplan warns about
            // files others can read.
            let private = matches!(args.to.as_str(), "nm" | "netplan");
            for (name, text) in &out.files {
                write_file(&dir.join(name), text, private)?;
            }
        }
        None => {
            let mut s = String::new();
            for (name, text) in &out.files {
                let _ = writeln!(s, "# ---- file: {name} ----");
                s.push_str(text);
            }
            io::stdout().write_all(s.as_bytes()).map_err(CliError::Io)?;
        }
    }
    if out.dropped.is_empty() {
        return Ok(());
    }
    Err(CliError::Lossy(format!(
        "written, but {} setting(s) that change the bond's behaviour did not carry over:\n  {}",
        out.dropped.len(),
        out.dropped.join("\n  ")
    )))
}

fn write_file(path: &Path, text: &str, private: bool) -> Result<(), CliError> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let fail = |e: io::Error| CliError::Usage(format!("{}: cannot write: {e}", path.display()));
    let mode = if private { 0o600 } else { 0o644 };
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(path)
        .map_err(fail)?;
    // A file that was there keeps its mode through open: set it.
    f.set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(fail)?;
    f.write_all(text.as_bytes()).map_err(fail)
}
