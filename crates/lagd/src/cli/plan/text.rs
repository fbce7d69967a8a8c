//! The planner's report for a terminal ([`write_table`]): the policy table, the
//! recommendation, findings, elephants, tunnels, the bucket tables and the what-ifs; and the
//! one line that says what a bucket policy's table did ([`describe_rebalancing`]), which the
//! HTML report shows too.

use core::fmt::{self, Write as _};
use core::time::Duration;

use lagd_proto::capture::linktype_name;
use lagd_proto::plan::apply::applied_name;
use lagd_proto::plan::ipfix::IpfixStats;
use lagd_proto::plan::report::{Plan, Rebalancing, human_bytes};
use lagd_proto::plan::{InterfaceFrames, InterfaceNaming};

/// A count as `12.3k` / `4.5M` when large.
pub fn human_count(c: u64) -> String {
    match c {
        0..10_000 => c.to_string(),
        10_000..10_000_000 => format!("{:.1}k", c as f64 / 1e3),
        _ => format!("{:.1}M", c as f64 / 1e6),
    }
}

fn pct(part: u64, total: u64) -> String {
    if total == 0 {
        "-".into()
    } else {
        format!("{:.1}%", part as f64 * 100.0 / total as f64)
    }
}

/// The link control frames counted apart, one line per kind seen.
fn write_control(plan: &Plan, out: &mut dyn fmt::Write) -> fmt::Result {
    let c = &plan.input.control;
    let total = c.total();
    if total.packets == 0 {
        return Ok(());
    }
    writeln!(
        out,
        "Link control frames, not hashed and not planned: {} frames, {}",
        total.packets,
        human_bytes(total.bytes)
    )?;
    for (kind, l) in c.seen() {
        writeln!(
            out,
            "  {:<10} {:>7} frames  {}",
            kind.name(),
            l.packets,
            kind.how_sent()
        )?;
    }
    Ok(())
}

/// What the IPFIX input held, and what flow records cannot tell.
fn write_ipfix(x: &IpfixStats, out: &mut dyn fmt::Write) -> fmt::Result {
    writeln!(
        out,
        "IPFIX: {} messages ({} unreadable, dropped), {} templates, {} records: {} planned; not planned: {} without IP addresses, {} without counts, {} options records, {} before their template; {} other packets skipped.",
        x.messages,
        x.malformed,
        x.templates,
        x.records,
        x.planned,
        x.without_ip,
        x.without_counts,
        x.options_records,
        x.no_template,
        x.other_packets
    )?;
    if x.other_direction > 0 {
        writeln!(
            out,
            "  {} records of the other flow direction not planned: the exporter reported those packets where they entered and again where they left; each is counted once (--ipfix-direction chooses).",
            x.other_direction
        )?;
    }
    if x.l3_octets > 0 {
        writeln!(
            out,
            "  {} records gave IP octets only: their bytes are those plus an Ethernet header per packet.",
            x.l3_octets
        )?;
    }
    match x.rate_range {
        Some((lo, hi)) if hi > 1 => {
            let rates = if lo == hi {
                format!("1 in {lo}")
            } else {
                format!("1 in {lo} to 1 in {hi}")
            };
            writeln!(
                out,
                "  Sampled {rates}: counts scaled; from {} sampled packets a share is within ±{:.1}% of itself (95%, 196*sqrt(1/n)%).",
                x.sampled_packets,
                x.share_error() * 100.0
            )?;
        }
        _ => {}
    }
    if x.unsampled > 0 {
        writeln!(
            out,
            "  {} records came with no sampling rate: their counts are taken as every packet. If the exporter samples 1 in N without saying so (Open vSwitch's default is 1 in 400 and it does not export it), every count is N times too small; the shares stand, within ±{:.1}% of themselves (95%) for the {} packets counted.",
            x.unsampled,
            lagd_proto::plan::sflow::SflowStats::share_error(x.sampled_packets) * 100.0,
            x.sampled_packets
        )?;
    }
    writeln!(
        out,
        "  Flow records sum each flow: packet sizes, order and timing are not known (balance-rr and stripe take a flow's packets back to back at its mean size, bucket policies a steady mix), nor an ICMP echo's identifier (layer3+4 hashes it: all ICMP between two hosts is one flow here)."
    )
}

/// How the report names capture interface `i`: `ifindex 7`, or `interface 1 (bond0)`.
pub fn interface_label(plan: &Plan, i: u32) -> String {
    match plan.input.interfaces.naming {
        Some(InterfaceNaming::Ifindex) => format!("ifindex {i}"),
        _ => match plan.interface_names.iter().find(|(n, _)| *n == i) {
            Some((_, name)) => format!("interface {i} ({name})"),
            None => format!("interface {i}"),
        },
    }
}

/// Which interface's copies were kept, when the capture records interfaces and held some
/// frame twice.
fn write_interfaces(plan: &Plan, out: &mut dyn fmt::Write) -> fmt::Result {
    let ifs = &plan.input.interfaces;
    if plan.input.duplicates == 0 || ifs.seen().is_empty() {
        return Ok(());
    }
    let how = match ifs.naming {
        Some(InterfaceNaming::Ifindex) => {
            "by the interface index the cooked v2 capture records (`ip -o link` on the capturing host names them)"
        }
        _ => "by capture interface",
    };
    writeln!(out, "Copies kept and dropped, {how}:")?;
    let mut rows: Vec<(String, InterfaceFrames)> = ifs
        .seen()
        .iter()
        .map(|f| (interface_label(plan, f.interface), *f))
        .collect();
    if ifs.other.kept + ifs.other.dropped > 0 {
        rows.push(("other interfaces".into(), ifs.other));
    }
    for (label, f) in rows {
        let what = if f.dropped == 0 {
            "all its frames kept"
        } else if f.kept == 0 {
            "every frame a second copy"
        } else if f.kept >= f.dropped {
            "mostly kept"
        } else {
            "mostly second copies"
        };
        writeln!(
            out,
            "  {label:<24} {:>8} frames kept {:>8} copies dropped  ({what})",
            f.kept, f.dropped
        )?;
    }
    Ok(())
}

/// Renders the report for a terminal: the policy table, the recommendation, findings,
/// elephants and the what-ifs. `title` names the input.
pub fn write_table(plan: &Plan, title: &str, out: &mut dyn fmt::Write) -> fmt::Result {
    let n = plan.members();
    let inp = &plan.input;
    let speeds: Vec<String> = plan.speeds_gbps.iter().map(|s| format!("{s}")).collect();
    writeln!(
        out,
        "{title}: {} packets, {}, {} flows{}; {n} member{} ({} Gbit/s)",
        inp.packets,
        human_bytes(inp.bytes),
        plan.flows,
        if inp.untracked.packets > 0 {
            format!(
                " (+ other flows: {} packets, {})",
                inp.untracked.packets,
                human_bytes(inp.untracked.bytes)
            )
        } else {
            String::new()
        },
        if n == 1 { "" } else { "s" },
        speeds.join(" + ")
    )?;
    if let Some(lt) = inp.skipped_linktype {
        writeln!(
            out,
            "Link type {lt} ({}) is not readable as Ethernet: {} frames skipped.",
            linktype_name(lt).unwrap_or("unknown"),
            inp.skipped
        )?;
    }
    write_control(plan, out)?;
    if let Some(sf) = inp.sflow {
        let (lo, hi) = sf.rate_range.unwrap_or((0, 0));
        let rates = if lo == hi {
            format!("1 in {lo}")
        } else {
            format!("1 in {lo} to 1 in {hi}")
        };
        writeln!(
            out,
            "sFlow: {} datagrams, {} flow samples ({rates}) scaled to the packets above; {} other samples and {} other packets skipped.",
            sf.datagrams, sf.samples, sf.skipped_samples, sf.other_packets
        )?;
        // The busiest member of the best policy carries this share of the samples.
        let busiest = plan.policies.first().map_or(1.0, |p| {
            let d = &p.dist;
            let total = d.bytes().max(1) as f64;
            d.members[d.busiest()].bytes as f64 / total
        });
        let n = (sf.samples as f64 * busiest).round() as u64;
        writeln!(
            out,
            "Sampling widens the error: a share estimated from n samples is within 196*sqrt(1/n)% of itself (95%): ±{:.1}% for the busiest member's share here (n = {n}), ±{:.1}% for the total.",
            lagd_proto::plan::sflow::SflowStats::share_error(n) * 100.0,
            lagd_proto::plan::sflow::SflowStats::share_error(sf.samples) * 100.0
        )?;
    }
    if let Some(x) = inp.ipfix {
        write_ipfix(&x, out)?;
    }
    if inp.duplicates > 0 {
        writeln!(
            out,
            "{} frames seen twice (on the bond and on a member: tcpdump -i any, or a capture of several interfaces) were counted once, as the first copy.",
            inp.duplicates
        )?;
    }
    write_interfaces(plan, out)?;
    if !plan.sample.too_small.is_empty() {
        writeln!(
            out,
            "Too small to judge: {}.",
            plan.sample.too_small.join("; ")
        )?;
    }
    writeln!(out)?;

    if inp.packets == 0 {
        // No data traffic: no table of zeros.
        return match &plan.recommendation {
            None if inp.control.total().packets > 0 => writeln!(
                out,
                "Recommendation: none (only link control frames in the input, which no policy hashes)"
            ),
            _ => writeln!(out, "Recommendation: none (no traffic in the input)"),
        };
    }
    // The policy table: share of bytes per member (up to 8 members shown).
    let shown = n.min(8);
    let w = plan
        .policies
        .iter()
        .map(|p| p.policy.name().len())
        .fold(12, usize::max);
    let mut header = format!(
        "{:<4} {:<w$} {:>9} {:>10}",
        "rank", "policy", "imbalance", "Gbit/s"
    );
    for i in 0..shown {
        write!(header, " {:>7}", format!("m{i}"))?;
    }
    if n > shown {
        header.push_str("     ...");
    }
    header.push_str("  risk");
    writeln!(out, "{header}")?;
    for p in &plan.policies {
        if let Some(why) = &p.cannot_judge {
            writeln!(out, "{:<4} {:<w$} {why}", "-", p.policy.name())?;
            continue;
        }
        let total = p.dist.bytes();
        let mut line = format!(
            "{:<4} {:<w$} {:>9.2} {:>10.1}",
            p.rank,
            p.policy.name(),
            p.dist.imbalance,
            p.dist.throughput_bound_gbps
        );
        for m in p.dist.members.iter().take(shown) {
            write!(line, " {:>7}", pct(m.bytes, total))?;
        }
        if n > shown {
            line.push_str("     ...");
        }
        let mut risk = Vec::new();
        if let Some(r) = p.reorder.filter(|r| r.packets > 0) {
            risk.push(format!("reorders {:.0}% of packets", r.share * 100.0));
        }
        if let Some(need) = p.policy.needs() {
            risk.push(need.to_owned());
        }
        if p.split_flows > 0 {
            risk.push(format!("{} split flows", p.split_flows));
        }
        if let Some(f) = p.rebalancing.as_ref().map(|r| r.counters.forced) {
            if f > 0 {
                risk.push(format!("{f} busy buckets moved (brief reordering)"));
            }
        }
        for c in &p.collisions {
            let ids: Vec<String> = c.elephants.iter().map(|i| format!("#{}", i + 1)).collect();
            risk.push(format!("elephants {} on m{}", ids.join("+"), c.member));
        }
        if risk.is_empty() {
            line.push_str("  -");
        } else {
            write!(line, "  {}", risk.join("; "))?;
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    writeln!(out)?;

    match &plan.recommendation {
        Some(r) => {
            writeln!(out, "Recommendation: {}", r.policy)?;
            writeln!(out, "  {}", r.reason)?;
            if let Some(note) = &r.note {
                writeln!(out, "  Note: {note}")?;
            }
        }
        None if !plan.sample.too_small.is_empty() => {
            writeln!(
                out,
                "Recommendation: none: the input is too small to judge (see above)."
            )?;
            if let Some(p) = plan.sample.best_in_sample {
                writeln!(
                    out,
                    "  Best on this sample alone: {} ({}); capture more traffic to confirm it.",
                    p,
                    applied_name(p)
                )?;
            }
        }
        None if inp.control.total().packets > 0 => writeln!(
            out,
            "Recommendation: none (only link control frames in the input, which no policy hashes)"
        )?,
        None => writeln!(out, "Recommendation: none (no traffic in the input)")?,
    }
    if let Some(c) = &plan.sample.confidence {
        writeln!(
            out,
            "  Confidence: {}: the best hash policy in {} of {} halves of the flows (bound {:.0}-{:.0}% of the bond's speed over the halves).",
            c.level,
            c.agreeing,
            c.halves,
            c.bound_range.0 * 100.0,
            c.bound_range.1 * 100.0
        )?;
    }
    if let Some(r) = &plan.recommendation {
        writeln!(out, "  To apply it:")?;
        for st in &r.settings {
            match (&st.value, &st.note) {
                (Some(v), Some(n)) => writeln!(out, "    {:<13} {v}  ({n})", st.target)?,
                (Some(v), None) => writeln!(out, "    {:<13} {v}", st.target)?,
                (None, Some(n)) => writeln!(out, "    {:<13} not possible: {n}", st.target)?,
                (None, None) => {}
            }
        }
    }

    if !plan.findings.is_empty() {
        writeln!(out)?;
        writeln!(out, "Findings:")?;
        for f in &plan.findings {
            let who = if f.policies.is_empty() {
                String::new()
            } else {
                let names: Vec<&str> = f.policies.iter().map(|p| p.name()).collect();
                format!(" [{}]", names.join(", "))
            };
            writeln!(out, "  - {}{who}: {}", f.field, f.message)?;
            writeln!(out, "    Advice: {}", f.advice)?;
        }
    }

    if !plan.elephants.is_empty() {
        writeln!(out)?;
        writeln!(out, "Largest flows:")?;
        for (i, e) in plan.elephants.iter().enumerate() {
            writeln!(
                out,
                "  #{:<3} {:>7} {:>10} {:>9} pkts  {}",
                i + 1,
                pct(e.bytes, inp.bytes),
                human_bytes(e.bytes),
                e.packets,
                e.key
            )?;
        }
    }

    if !plan.tunnels.is_empty() {
        writeln!(out)?;
        writeln!(out, "Tunnels:")?;
        for t in &plan.tunnels {
            writeln!(
                out,
                "  {:<10} {:>7} of bytes, {} outer flows, {}{} inner flows",
                t.tunnel.name(),
                pct(t.bytes, inp.bytes),
                t.outer_flows,
                if t.inner_capped { ">" } else { "" },
                t.inner_flows
            )?;
        }
    }

    write_rebalancing(plan, w, out)?;

    // What-if: member counts.
    if let Some(first) = plan.policies.first().filter(|p| !p.sweep.is_empty()) {
        writeln!(out)?;
        writeln!(
            out,
            "What if the bond had more or fewer members (imbalance):"
        )?;
        let mut h = format!("  {:<w$}", "policy");
        for s in &first.sweep {
            write!(h, " {:>7}", format!("{}x", s.members))?;
        }
        writeln!(out, "{h}")?;
        for p in &plan.policies {
            let mut line = format!("  {:<w$}", p.policy.name());
            for s in &p.sweep {
                write!(line, " {:>7.2}", s.imbalance)?;
            }
            writeln!(out, "{line}")?;
        }
    }

    // What-if: a member fails, for the recommended policy.
    let rec = plan
        .recommendation
        .as_ref()
        .and_then(|r| plan.policy(r.policy))
        .filter(|p| !p.failures.is_empty());
    if let Some(p) = rec {
        writeln!(out)?;
        let when = if p.rebalancing.is_some() {
            "; only its buckets move, at the start"
        } else {
            ""
        };
        writeln!(out, "What if a member fails ({}{when}):", p.policy)?;
        for f in &p.failures {
            write!(
                out,
                "  m{} down: imbalance {:.2}, {:.1} Gbit/s; {} flows move ({} of bytes)",
                f.failed,
                f.dist.imbalance,
                f.dist.throughput_bound_gbps,
                f.flows_moved,
                pct(f.bytes_moved, inp.bytes)
            )?;
            if f.collateral_flows > 0 {
                write!(out, ", {} of them from healthy members", f.collateral_flows)?;
            }
            if !f.elephants_moved.is_empty() {
                let ids: Vec<String> = f
                    .elephants_moved
                    .iter()
                    .map(|i| format!("#{}", i + 1))
                    .collect();
                write!(out, "; largest flows moving: {}", ids.join(" "))?;
            }
            writeln!(out)?;
        }
    }

    if let Some(first) = plan.return_path.first() {
        writeln!(out)?;
        writeln!(
            out,
            "Return path (switch hash modelled as a generic XOR fold; vendor hashes differ):"
        )?;
        for r in &plan.return_path {
            let mark = if r.hash == first.hash && r.hash == plan.switch_hash {
                " <- yours"
            } else {
                ""
            };
            let total = r.dist.bytes();
            let shares: Vec<String> = r
                .dist
                .members
                .iter()
                .take(8)
                .map(|m| pct(m.bytes, total))
                .collect();
            writeln!(
                out,
                "  {:<12} imbalance {:>5.2}  [{}]{mark}",
                r.hash.name(),
                r.dist.imbalance,
                shares.join(" ")
            )?;
        }
    }
    if inp.rebuilt_ethernet > 0 || inp.skipped > 0 {
        writeln!(out)?;
        if inp.rebuilt_ethernet > 0 {
            writeln!(
                out,
                "Note: {} frames had no Ethernet header (raw IP or Linux cooked capture); their MACs are unknown.",
                inp.rebuilt_ethernet
            )?;
        }
        if inp.skipped > 0 {
            writeln!(
                out,
                "Note: {} frames of unsupported link types were skipped.",
                inp.skipped
            )?;
        }
    }
    Ok(())
}

/// The bucket policies' section: per policy, the moves and the imbalance of the first and
/// last rebalance intervals. `w` is the policy column's width.
fn write_rebalancing(plan: &Plan, w: usize, out: &mut dyn fmt::Write) -> fmt::Result {
    let mut rows = plan
        .policies
        .iter()
        .filter_map(|p| p.rebalancing.as_ref().map(|r| (p.policy, r)))
        .peekable();
    let Some((_, first)) = rows.peek() else {
        return Ok(());
    };
    writeln!(out)?;
    if first.interval.is_zero() {
        writeln!(out, "Bucket tables (rebalancing off):")?;
    } else {
        writeln!(
            out,
            "Bucket tables (rebalanced every {}; imbalance: busiest member's bytes per unit of speed over the mean):",
            seconds(first.interval)
        )?;
    }
    if first.replayed {
        writeln!(
            out,
            "  (a flow list has no timing: the mix is replayed once per interval until the table settles)"
        )?;
    }
    for (policy, r) in rows {
        writeln!(out, "  {:<w$}  {}", policy.name(), describe_rebalancing(r))?;
    }
    Ok(())
}

/// A duration as `10 s`, `2.5 s` or `250 ms`.
fn seconds(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms} ms")
    } else if ms % 1000 == 0 {
        format!("{} s", ms / 1000)
    } else {
        format!("{} s", ms as f64 / 1000.0)
    }
}

/// What a bucket policy's table did, in one line: rebalances, bucket moves by reason, and the
/// first and last intervals' imbalance.
pub fn describe_rebalancing(r: &Rebalancing) -> String {
    let c = &r.counters;
    let intervals = |k: u64| {
        if r.replayed {
            format!("{k} interval{} replayed", if k == 1 { "" } else { "s" })
        } else {
            format!("{k} rebalance{}", if k == 1 { "" } else { "s" })
        }
    };
    let imbalance = match (r.first_interval_imbalance, r.last_interval_imbalance) {
        (Some(a), Some(b)) if r.intervals >= 2 => {
            format!("imbalance {a:.2} in the first interval, {b:.2} in the last")
        }
        (Some(a), _) => format!("imbalance {a:.2} in the only complete interval"),
        _ => "no complete interval with traffic".to_owned(),
    };
    if r.interval.is_zero() {
        return "rebalancing off: every bucket stays where it was first put".to_owned();
    }
    let runs = if r.replayed {
        intervals(r.intervals)
    } else {
        intervals(c.rebalances)
    };
    if !r.replayed && c.rebalances == 0 {
        return format!(
            "no rebalance: the input spans less than one interval ({})",
            seconds(r.interval)
        );
    }
    let mut moves = format!(
        "{} bucket move{}",
        c.moves(),
        if c.moves() == 1 { "" } else { "s" }
    );
    let mut why = Vec::new();
    if c.moved_rebalance > 0 {
        why.push(format!("{} for load", c.moved_rebalance));
    }
    if c.moved_elephant > 0 {
        why.push(format!("{} around elephants", c.moved_elephant));
    }
    if c.moved_left + c.moved_joined > 0 {
        why.push(format!("{} for members", c.moved_left + c.moved_joined));
    }
    if !why.is_empty() {
        let mut how = String::new();
        if c.deferred > 0 {
            write!(how, "; {} waited for an idle gap", c.deferred).expect("a String");
        }
        if c.forced > 0 {
            write!(how, "; {} forced while busy", c.forced).expect("a String");
        }
        write!(moves, " ({}{how})", why.join(", ")).expect("a String");
    }
    format!("{runs}, {moves}; {imbalance}")
}
