//! `lagctl set`, `lagctl member`, `lagctl active` and `lagctl reload`: run-time changes to a running bond, sent
//! over its control socket (root only; see `lagd::control` for the protocol).

use std::io::{self, Write};
use std::path::PathBuf;

use super::CliError;
use super::show::{ShowArgs, socket_path_for};
use crate::control::{MemberAction, Request, request};

/// Arguments of `lagctl set`.
#[derive(Debug, Clone, clap::Args)]
pub struct SetArgs {
    /// `[BOND] KEY=VALUE...`: the bond (may be left out when only one runs in this network
    /// namespace) and the options to change, with the kernel's names. All or nothing; the
    /// kernel's rules for a live bond apply (mode and fail_over_mac only without members;
    /// lacp_rate, ad_select and the other IFDOWN options only on a bond that is down, which
    /// lagd's never is).
    #[arg(required = true, num_args = 1..)]
    pub args: Vec<String>,
    /// The control socket file, or @NAME for an abstract socket (default:
    /// /run/lagd/netns-N/BOND.sock, N this network namespace's inode).
    #[arg(long)]
    pub control: Option<PathBuf>,
}

/// Arguments of `lagctl member`.
#[derive(Debug, Clone, clap::Args)]
pub struct MemberArgs {
    /// `[BOND] ACTION MEMBER`, ACTION one of add, remove, disable, enable. `disable` keeps a
    /// member out of use as if it had no carrier (its link stays up); `remove` releases it.
    #[arg(required = true, num_args = 2..=3)]
    pub args: Vec<String>,
    /// The control socket file, or @NAME for an abstract socket (default:
    /// /run/lagd/netns-N/BOND.sock, N this network namespace's inode).
    #[arg(long)]
    pub control: Option<PathBuf>,
}

/// Arguments of `lagctl active`.
#[derive(Debug, Clone, clap::Args)]
pub struct ActiveArgs {
    /// `[BOND] MEMBER`: the member to make active now (active-backup and the other modes with
    /// an active member; as the kernel's active_slave).
    #[arg(required = true, num_args = 1..=2)]
    pub args: Vec<String>,
    /// The control socket file, or @NAME for an abstract socket (default:
    /// /run/lagd/netns-N/BOND.sock, N this network namespace's inode).
    #[arg(long)]
    pub control: Option<PathBuf>,
}

/// Arguments of `lagctl events`.
#[derive(Debug, Clone, clap::Args)]
pub struct EventsArgs {
    /// The bond; may be left out when only one lagd runs in this network namespace.
    pub bond: Option<String>,
    /// Print each event as a JSON line (fields: t, seconds since lagd started; event, one of
    /// link, active, carrier, mac, member-mac, lacp, lacp-partner, buckets, change; and the event's
    /// own).
    #[arg(long)]
    pub json: bool,
    /// The control socket file, or @NAME for an abstract socket (default:
    /// /run/lagd/netns-N/BOND.sock, N this network namespace's inode).
    #[arg(long)]
    pub control: Option<PathBuf>,
}

/// One event as a line of text.
fn event_text(v: &serde_json::Value) -> String {
    let s = |k: &str| match &v[k] {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => "none".to_owned(),
        other => other.to_string(),
    };
    let what = match v["event"].as_str().unwrap_or("") {
        "link" => format!("link {} {}", s("member"), s("status")),
        "active" => format!("active member {} -> {}", s("from"), s("to")),
        "carrier" => format!(
            "bond carrier {}",
            if v["up"] == true { "up" } else { "down" }
        ),
        "mac" => format!("bond MAC {}", s("mac")),
        "member-mac" => format!("member {} MAC {}", s("member"), s("mac")),
        "lacp" => {
            let names: Vec<String> = v["distributing"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|n| n.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            format!(
                "lacp distributing: {} (aggregator {})",
                names.join(" "),
                s("aggregator")
            )
        }
        "lacp-partner" => format!(
            "lacp partner of {}: system {} key {} port {}",
            s("member"),
            s("system"),
            s("key"),
            s("port")
        ),
        "change" => format!("change {}", s("what")),
        "buckets" => {
            let moved: Vec<String> = ["rebalance", "elephant", "member_left", "member_joined"]
                .into_iter()
                .filter(|r| v[*r].as_u64().is_some_and(|n| n > 0))
                .map(|r| format!("{} {r}", v[r]))
                .collect();
            format!(
                "buckets moved: {}; latest: {}",
                moved.join(", "),
                s("latest")
            )
        }
        other => format!("{other} {v}"),
    };
    format!("+{:.3}s {what}", v["t"].as_f64().unwrap_or(0.0))
}

/// `lagctl events`: prints the bond's events until interrupted or lagd stops.
pub fn events(args: EventsArgs) -> Result<(), CliError> {
    let endpoint = socket_path_for(&ShowArgs {
        bond: args.bond,
        json: args.json,
        control: args.control,
    })?;
    let mut out = io::stdout();
    let mut failed = None;
    crate::control::events(&endpoint, |v| {
        let line = if args.json {
            v.to_string()
        } else {
            event_text(&v)
        };
        match writeln!(out, "{line}").and_then(|()| out.flush()) {
            Ok(()) => true,
            Err(e) => {
                failed = Some(e);
                false
            }
        }
    })?;
    match failed {
        Some(e) => Err(CliError::Io(e)),
        None => Ok(()),
    }
}

/// Arguments of `lagctl reload`.
#[derive(Debug, Clone, clap::Args)]
pub struct ReloadArgs {
    /// The bond; may be left out when only one lagd runs in this network namespace.
    pub bond: Option<String>,
    /// The control socket file, or @NAME for an abstract socket (default:
    /// /run/lagd/netns-N/BOND.sock, N this network namespace's inode).
    #[arg(long)]
    pub control: Option<PathBuf>,
}

/// Options to set, as `(key, value)` pairs.
type Pairs = Vec<(String, String)>;

/// Splits `[BOND] KEY=VALUE...` into the bond and the pairs.
fn parse_set(args: &[String]) -> Result<(Option<String>, Pairs), CliError> {
    let (bond, pairs) = match args.first() {
        Some(first) if !first.contains('=') => (Some(first.clone()), &args[1..]),
        _ => (None, args),
    };
    if pairs.is_empty() {
        return Err(CliError::Usage("nothing to set: give KEY=VALUE".into()));
    }
    let pairs = pairs
        .iter()
        .map(|p| {
            p.split_once('=')
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .filter(|(k, _)| !k.is_empty())
                .ok_or_else(|| CliError::Usage(format!("'{p}': expected KEY=VALUE")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((bond, pairs))
}

/// Splits `[BOND] ACTION MEMBER`.
fn parse_member(args: &[String]) -> Result<(Option<String>, MemberAction, String), CliError> {
    let (bond, rest) = match args.len() {
        3 => (Some(args[0].clone()), &args[1..]),
        _ => (None, args),
    };
    let [action, member] = rest else {
        return Err(CliError::Usage("expected [BOND] ACTION MEMBER".into()));
    };
    let action = MemberAction::parse(action).ok_or_else(|| {
        CliError::Usage(format!(
            "'{action}': expected one of add, remove, disable, enable"
        ))
    })?;
    Ok((bond, action, member.clone()))
}

fn send(bond: Option<String>, control: Option<PathBuf>, req: &Request) -> Result<(), CliError> {
    let endpoint = socket_path_for(&ShowArgs {
        bond,
        json: false,
        control,
    })?;
    let reply = request(&endpoint, req)?;
    let mut out = io::stdout();
    let list = |key: &str| -> Vec<String> {
        reply[key]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let changed = list("changed");
    if changed.is_empty() {
        writeln!(out, "no change").map_err(CliError::Io)?;
    }
    for c in changed {
        writeln!(out, "changed: {c}").map_err(CliError::Io)?;
    }
    for w in list("warnings") {
        eprintln!("lagctl: warning: {w}");
    }
    Ok(())
}

/// `lagctl set`.
pub fn set(args: SetArgs) -> Result<(), CliError> {
    let (bond, options) = parse_set(&args.args)?;
    send(bond, args.control, &Request::Set { options })
}

/// `lagctl member`.
pub fn member(args: MemberArgs) -> Result<(), CliError> {
    let (bond, action, member) = parse_member(&args.args)?;
    send(bond, args.control, &Request::Member { member, action })
}

/// `lagctl active`.
pub fn active(args: ActiveArgs) -> Result<(), CliError> {
    let (bond, member) = match args.args.as_slice() {
        [bond, member] => (Some(bond.clone()), member.clone()),
        [member] => (None, member.clone()),
        _ => return Err(CliError::Usage("expected [BOND] MEMBER".into())),
    };
    send(bond, args.control, &Request::Active { member })
}

/// `lagctl reload`.
pub fn reload(args: ReloadArgs) -> Result<(), CliError> {
    send(args.bond, args.control, &Request::Reload)
}

#[cfg(test)]
mod test {
    use super::*;

    fn v(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn set_arguments() {
        let (b, p) = parse_set(&v(&["bond0", "miimon=50", "primary="])).unwrap();
        assert_eq!(b.as_deref(), Some("bond0"));
        assert_eq!(
            p,
            [
                ("miimon".to_owned(), "50".to_owned()),
                ("primary".to_owned(), String::new())
            ]
        );
        let (b, p) = parse_set(&v(&["miimon=50"])).unwrap();
        assert_eq!((b, p.len()), (None, 1));
        assert!(matches!(parse_set(&v(&["bond0"])), Err(CliError::Usage(_))));
        assert!(matches!(
            parse_set(&v(&["bond0", "miimon=1", "oops"])),
            Err(CliError::Usage(m)) if m.contains("'oops'")
        ));
    }

    #[test]
    fn event_lines() {
        let v = serde_json::json!({"t": 1.5, "event": "active", "from": "eth0", "to": null});
        assert_eq!(event_text(&v), "+1.500s active member eth0 -> none");
        let v = serde_json::json!({"t": 2.0, "event": "link", "member": "eth1", "status": "down"});
        assert_eq!(event_text(&v), "+2.000s link eth1 down");
        let v = serde_json::json!({"t": 0.25, "event": "carrier", "up": false});
        assert_eq!(event_text(&v), "+0.250s bond carrier down");
        let v = serde_json::json!({"t": 3.0, "event": "lacp", "distributing": ["eth0", "eth1"],
            "aggregator": 1});
        assert_eq!(
            event_text(&v),
            "+3.000s lacp distributing: eth0 eth1 (aggregator 1)"
        );
        let v = serde_json::json!({"t": 4.143, "event": "buckets", "rebalance": 1, "elephant": 0,
            "member_left": 0, "member_joined": 0,
            "latest": "rebalance: eth0 49.2% over mean: bucket 222 to eth1"});
        assert_eq!(
            event_text(&v),
            "+4.143s buckets moved: 1 rebalance; latest: rebalance: eth0 49.2% over mean: \
             bucket 222 to eth1"
        );
    }

    #[test]
    fn member_arguments() {
        let (b, a, m) = parse_member(&v(&["bond0", "disable", "eth1"])).unwrap();
        assert_eq!(
            (b.as_deref(), a, m.as_str()),
            (Some("bond0"), MemberAction::Disable, "eth1")
        );
        let (b, a, _) = parse_member(&v(&["add", "eth2"])).unwrap();
        assert_eq!((b, a), (None, MemberAction::Add));
        assert!(matches!(
            parse_member(&v(&["bond0", "explode", "eth1"])),
            Err(CliError::Usage(_))
        ));
    }
}
