//! `lagctl explain`: which member one flow uses, and why.
//!
//! Give a frame as hex (white space allowed) or a flow as
//! `--flow 'tcp 10.0.0.1:5000 > 10.0.0.2:80'` (see `lagd_proto::plan::flow::parse_flow_spec`:
//! MACs, VLAN and ICMP fields may follow). For each policy asked for, the output names the
//! fields that fed the hash (the daemon's own tracing, `xmit_hash_traced`), the hash, and the
//! member `hash % members`; for a bucket policy, the bucket and its member as the daemon's
//! table is first assigned. A link control frame (LACPDU, Marker, pause, LLDP, STP, other
//! frames to `01:80:c2:00:00:0x`) is hashed by no policy: the output says so, and how each mode
//! sends it.

use std::fmt::Write as _;
use std::io::{self, Write};

use super::CliError;
use super::hash::parse_hex_line;
use lagd_proto::balance::{self, BalanceConfig, Buckets};
use lagd_proto::bond::PortId;
use lagd_proto::hash::{Explain, member_index, xmit_hash_traced};
use lagd_proto::plan::PlanPolicy;
use lagd_proto::plan::control::classify;
use lagd_proto::plan::flow::{extract, parse_flow_spec};

/// What `lagctl explain` was asked to do.
#[derive(Debug, Clone, clap::Args)]
pub struct ExplainArgs {
    /// Policy: `all` (the hash policies, balance-rr and stripe), a hash policy (layer2,
    /// layer2+3, layer3+4, encap2+3, encap3+4, vlan+srcmac, ovs-slb, ovs-tcp), balance-rr,
    /// stripe, or a bucket policy: balance-tcp, balance-slb, or a hash policy followed by
    /// +buckets (e.g. layer3+4+buckets); comma-separated lists work too.
    #[arg(long, default_value = "all")]
    pub policy: String,
    /// Number of bond members.
    #[arg(long, default_value_t = 2)]
    pub members: usize,
    /// The flow, e.g. 'tcp 10.0.0.1:5000 > 10.0.0.2:80 [src-mac M] [dst-mac M] [vlan N]'.
    #[arg(long, conflicts_with = "frame")]
    pub flow: Option<String>,
    /// A frame as hex, from the destination MAC on (white space ignored).
    #[arg(value_name = "FRAME-HEX", num_args = 1.., required_unless_present = "flow")]
    pub frame: Vec<String>,
}

/// `lagctl explain` to stdout.
pub fn main(args: ExplainArgs) -> Result<(), CliError> {
    let text = run(&args).map_err(CliError::Usage)?;
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes()).map_err(CliError::Io)?;
    out.flush().map_err(CliError::Io)
}

/// The explanation as text, or a usage error.
pub fn run(args: &ExplainArgs) -> Result<String, String> {
    if args.members == 0 {
        return Err("--members must be at least 1".into());
    }
    let policies: Vec<PlanPolicy> = if args.policy.trim() == "all" {
        PlanPolicy::ALL.to_vec()
    } else {
        args.policy
            .split(',')
            .map(|p| p.trim().parse())
            .collect::<Result<_, _>>()?
    };
    let mut frame = Vec::new();
    let mut out = String::new();
    match &args.flow {
        Some(spec) => {
            let rec = parse_flow_spec(spec).map_err(|e| e.to_string())?;
            rec.write_frame(&mut frame);
            let _ = writeln!(out, "flow: {}", extract(&frame).key);
            let _ = writeln!(
                out,
                "  as the frame {} > {} ({} bytes of headers): {}",
                rec.src_mac,
                rec.dst_mac,
                frame.len(),
                hex(&frame)
            );
        }
        None => {
            parse_hex_line(&args.frame.join(""), &mut frame)?;
            if frame.is_empty() {
                return Err("empty frame".into());
            }
            let _ = writeln!(out, "flow: {}", extract(&frame).key);
        }
    }
    let n = args.members;
    if let Some(kind) = classify(&frame) {
        // A link control frame: no policy hashes it.
        let _ = writeln!(
            out,
            "{} is a link control frame: it is not hashed, by any policy.",
            capitalized(kind.describe())
        );
        let _ = writeln!(out, "  {}.", kind.how_sent());
        for p in policies {
            let _ = writeln!(out, "{p}: not hashed (no member is chosen by the policy)");
        }
        return Ok(out);
    }
    for p in policies {
        match p {
            PlanPolicy::Hash(h) => {
                let mut ex = Explain::default();
                let hash = xmit_hash_traced(h, &frame, &mut ex);
                let member = member_index(hash, n).unwrap_or(0);
                let _ = writeln!(out, "{h}: member {member} of {n}");
                for (field, value) in &ex.notes {
                    let _ = writeln!(out, "  {field}: {value}");
                }
                let _ = writeln!(out, "  hash 0x{hash:08x} % {n} = {member}");
            }
            PlanPolicy::RoundRobin => {
                let _ = writeln!(
                    out,
                    "balance-rr: no fixed member: packet i of the bond leaves on member i % {n}, so this flow's packets take turns over all {n} members (and may be reordered)"
                );
            }
            PlanPolicy::Stripe => {
                let _ = writeln!(
                    out,
                    "stripe: no fixed member: frames go over all {n} members by bytes, weighted by speed, and the lagd at the other end puts them back in order (needs lagd mode=stripe at both ends)"
                );
            }
            PlanPolicy::Buckets(h) => {
                let mut ex = Explain::default();
                let hash = xmit_hash_traced(h, &frame, &mut ex);
                // The daemon's defaults: hash_seed 0, equal members, as first assigned.
                let config = BalanceConfig::default();
                let b = balance::bucket(config.seed, hash);
                let mut table = Buckets::new(config);
                let members: Vec<(PortId, u32)> = (0..n.min(balance::MAX_MEMBERS))
                    .map(|i| (PortId(i as u16), 0))
                    .collect();
                table.set_members(lagd_proto::time::Instant::ZERO, &members);
                let member = table.member_of_bucket(b).map_or(0, |m| m.0);
                let _ = writeln!(
                    out,
                    "{p}: bucket {b}, on member {member} of {n} as the table is first assigned (the rebalancer moves buckets by load)"
                );
                for (field, value) in &ex.notes {
                    let _ = writeln!(out, "  {field}: {value}");
                }
                let _ = writeln!(out, "  {h} hash 0x{hash:08x}: bucket {b} (its low byte)");
            }
        }
    }
    Ok(out)
}

fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

fn hex(b: &[u8]) -> String {
    b.iter().fold(String::new(), |mut s, x| {
        let _ = write!(s, "{x:02x}");
        s
    })
}

#[cfg(test)]
mod test {
    use super::*;

    fn args(policy: &str, flow: Option<&str>, frame: &[&str]) -> ExplainArgs {
        ExplainArgs {
            policy: policy.into(),
            members: 2,
            flow: flow.map(Into::into),
            frame: frame.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn flow_and_frame_give_the_same_answer() {
        let a = run(&args(
            "layer3+4",
            Some("tcp 10.0.0.1:1234 > 10.0.0.2:80"),
            &[],
        ))
        .unwrap();
        // The hand-worked vector of the hash tests: 0x29a9c0c2, member 0 of 2.
        assert!(a.contains("layer3+4: member 0 of 2"), "{a}");
        assert!(a.contains("hash 0x29a9c0c2 % 2 = 0"), "{a}");
        let frame =
            "020000000002020000000001 0800 4500002800000000400600000a0000010a00000204d20050";
        let b = run(&args("layer3+4", None, &[frame])).unwrap();
        assert!(b.contains("hash 0x29a9c0c2 % 2 = 0"), "{b}");
        assert!(
            b.starts_with("flow: tcp 10.0.0.1:1234 > 10.0.0.2:80"),
            "{b}"
        );
    }

    #[test]
    fn control_frames_are_not_hashed() {
        // An LACPDU (Slow Protocols, subtype 1) and an LLDP frame.
        let lacp = "0180c2000002 020000000001 8809 0101";
        let a = run(&args("all", None, &[lacp])).unwrap();
        assert!(a.contains("An LACPDU"), "{a}");
        assert!(a.contains("not hashed"), "{a}");
        assert!(a.contains("802.3ad machine of each member"), "{a}");
        assert!(!a.contains("hash 0x"), "{a}");
        assert_eq!(a.matches(": not hashed (no member").count(), 10, "{a}");
        let lldp = "0180c200000e 020000000001 88cc 0207";
        let b = run(&args("layer3+4", None, &[lldp])).unwrap();
        assert!(
            b.contains("LLDP") && b.contains("layer3+4: not hashed"),
            "{b}"
        );
        // Ordinary multicast is hashed.
        let mc = "01005e000001 020000000001 0800 4500";
        assert!(
            run(&args("layer2", None, &[mc]))
                .unwrap()
                .contains("hash 0x")
        );
    }

    #[test]
    fn errors_are_plain() {
        assert!(run(&args("layer9", Some("tcp 1.1.1.1:1 > 2.2.2.2:2"), &[])).is_err());
        assert!(run(&args("all", Some("tcp 1.1.1.1:1 2.2.2.2:2"), &[])).is_err());
        assert!(
            run(&args("all", None, &["abc"]))
                .unwrap_err()
                .contains("odd")
        );
        let all = run(&args("all", Some("udp 1.1.1.1:1 > 2.2.2.2:2"), &[])).unwrap();
        assert!(all.contains("balance-rr: no fixed member"));
        assert!(all.contains("stripe: no fixed member"));
        assert_eq!(all.matches(": member ").count(), 8);
    }
}
