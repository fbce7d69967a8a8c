//! The planner's report as one self-contained HTML page: inline CSS and SVG, no scripts, no
//! external assets, so it can be mailed or attached to a ticket and opened anywhere.
//!
//! The page leads with the recommendation, then one card per policy (ranked) with a bar per
//! member: bar height is the member's share of the bytes, the dashed line is the fair share,
//! and a bar turns amber, then red, as its member carries more than the fair share. A bucket
//! policy's card also says what its table did (rebalances, moves, first and last interval).

use core::fmt::{self, Write};

use super::text::{describe_rebalancing, human_count};
use lagd_proto::plan::report::{Distribution, Plan, human_bytes};

/// Escapes text for HTML element content and attribute values.
fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '&' => o.push_str("&amp;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

const CSS: &str = r#"
:root { --ink: #1d2330; --muted: #5b6472; --line: #d9dee7; --good: #2f9e6e; --warn: #e0a030;
        --bad: #d8483b; --accent: #2f6fdb; --card: #ffffff; --bg: #f3f5f9; }
* { box-sizing: border-box; }
body { margin: 0; padding: 28px 32px; background: var(--bg); color: var(--ink);
       font: 14px/1.45 -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 28px 0 10px; }
.sub { color: var(--muted); margin-bottom: 18px; }
.rec { background: var(--card); border-left: 6px solid var(--good); border-radius: 8px;
       padding: 14px 18px; box-shadow: 0 1px 3px rgba(0,0,0,.08); }
.rec b { font-size: 18px; color: var(--good); }
.rec .note { color: var(--muted); margin-top: 6px; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(340px, 1fr)); gap: 14px; }
.card { background: var(--card); border-radius: 8px; padding: 12px 14px 8px;
        box-shadow: 0 1px 3px rgba(0,0,0,.08); border-top: 4px solid var(--line); }
.card.best { border-top-color: var(--good); }
.card h3 { margin: 0; font-size: 16px; display: flex; justify-content: space-between; }
.card h3 .rank { color: var(--muted); font-weight: normal; font-size: 13px; }
.stats { color: var(--muted); font-size: 12.5px; margin: 2px 0 4px; }
.stats b { color: var(--ink); }
.risk { color: var(--bad); font-size: 12.5px; min-height: 18px; }
svg text { font: 11px sans-serif; fill: var(--muted); }
svg .val { fill: var(--ink); font-weight: 600; }
table { border-collapse: collapse; background: var(--card); border-radius: 8px; overflow: hidden;
        box-shadow: 0 1px 3px rgba(0,0,0,.08); }
th, td { padding: 5px 10px; border-bottom: 1px solid var(--line); text-align: right; }
th { background: #e8ecf3; font-weight: 600; }
td.l, th.l { text-align: left; }
td.hot { color: var(--bad); font-weight: 600; }
.finding { background: var(--card); border-left: 5px solid var(--warn); border-radius: 6px;
           padding: 8px 12px; margin-bottom: 8px; box-shadow: 0 1px 2px rgba(0,0,0,.06); }
.finding .field { font-weight: 600; }
.finding .advice { color: var(--muted); }
.foot { color: var(--muted); font-size: 12px; margin-top: 26px; }
code { font: 12.5px ui-monospace, Menlo, Consolas, monospace; }
"#;

/// Colour of a bar carrying `share` of the bytes when the fair share is `fair`.
fn bar_colour(share: f64, fair: f64) -> &'static str {
    let r = if fair > 0.0 { share / fair } else { 1.0 };
    if r <= 1.1 {
        "#2f9e6e"
    } else if r <= 1.4 {
        "#e0a030"
    } else {
        "#d8483b"
    }
}

/// An SVG bar chart of the bytes per member.
fn bars(d: &Distribution, w: u32, h: u32, out: &mut String) -> fmt::Result {
    let n = d.members.len().max(1);
    let total = d.bytes();
    let fair = 1.0 / n as f64;
    let top = 18.0;
    let base = f64::from(h) - 18.0;
    let plot = base - top;
    // Scale so the fair share sits at half height unless a bar is taller than twice it.
    let max_share = d
        .members
        .iter()
        .map(|m| {
            if total > 0 {
                m.bytes as f64 / total as f64
            } else {
                0.0
            }
        })
        .fold(fair * 2.0, f64::max)
        .min(1.0);
    // Bars use the width but a right margin, where the fair-share label goes.
    let slot = (f64::from(w) - 58.0) / n as f64;
    let bw = (slot * 0.7).max(2.0);
    write!(
        out,
        r#"<svg width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" aria-label="bytes per member">"#
    )?;
    write!(
        out,
        r##"<line x1="0" y1="{base}" x2="{w}" y2="{base}" stroke="#b8c0cc"/>"##
    )?;
    for (i, m) in d.members.iter().enumerate() {
        let share = if total > 0 {
            m.bytes as f64 / total as f64
        } else {
            0.0
        };
        let bh = (share / max_share * plot).max(if m.bytes > 0 { 1.0 } else { 0.0 });
        let x = slot * i as f64 + (slot - bw) / 2.0;
        write!(
            out,
            r#"<rect x="{x:.1}" y="{:.1}" width="{bw:.1}" height="{bh:.1}" rx="2" fill="{}"><title>member {}: {} packets, {}, {} flows</title></rect>"#,
            base - bh,
            bar_colour(share, fair),
            m.index,
            m.packets,
            esc(&human_bytes(m.bytes)),
            m.flows
        )?;
        if n <= 16 {
            write!(
                out,
                r#"<text class="val" x="{:.1}" y="{:.1}" text-anchor="middle">{:.0}%</text>"#,
                x + bw / 2.0,
                base - bh - 4.0,
                share * 100.0
            )?;
            write!(
                out,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">m{}</text>"#,
                x + bw / 2.0,
                base + 13.0,
                m.index
            )?;
        }
    }
    let fy = base - fair / max_share * plot;
    write!(
        out,
        r##"<line x1="0" y1="{fy:.1}" x2="{w}" y2="{fy:.1}" stroke="#2f6fdb" stroke-dasharray="5 4"/><text x="{w}" y="{:.1}" text-anchor="end" fill="#2f6fdb">fair share</text></svg>"##,
        fy - 4.0
    )
}

/// Renders `plan` as a complete HTML document titled after `title` (the input's name).
pub fn render(plan: &Plan, title: &str) -> String {
    let mut o = String::with_capacity(64 * 1024);
    // Writing into a String cannot fail.
    let _ = write_page(plan, title, &mut o);
    o
}

fn write_page(plan: &Plan, title: &str, o: &mut String) -> fmt::Result {
    let n = plan.members();
    let inp = &plan.input;
    write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>lagd plan: {}</title><style>{CSS}</style></head><body>",
        esc(title)
    )?;
    let speeds: Vec<String> = plan.speeds_gbps.iter().map(|s| format!("{s}")).collect();
    write!(
        o,
        "<h1>Bond plan for <code>{}</code></h1><div class=\"sub\">{} packets, {}, {} flows{} &middot; {n} member{} ({} Gbit/s)</div>",
        esc(title),
        human_count(inp.packets),
        human_bytes(inp.bytes),
        human_count(plan.flows),
        if inp.untracked.packets > 0 {
            format!(
                " (+ {} packets of untracked flows)",
                human_count(inp.untracked.packets)
            )
        } else {
            String::new()
        },
        if n == 1 { "" } else { "s" },
        esc(&speeds.join(" + "))
    )?;

    match &plan.recommendation {
        Some(r) => {
            write!(
                o,
                "<div class=\"rec\">Recommended: <b>{}</b><div>{}</div>",
                esc(r.policy.name()),
                esc(&r.reason)
            )?;
            if let Some(note) = &r.note {
                write!(o, "<div class=\"note\">{}</div>", esc(note))?;
            }
            for st in &r.settings {
                if let Some(v) = &st.value {
                    write!(
                        o,
                        "<div class=\"note\">{}: <code>{}</code></div>",
                        esc(st.target),
                        esc(v)
                    )?;
                }
            }
            o.push_str("</div>");
        }
        None if !plan.sample.too_small.is_empty() => write!(
            o,
            "<div class=\"rec\">Too small to judge: {}. Nothing to recommend.</div>",
            esc(&plan.sample.too_small.join("; "))
        )?,
        None => o.push_str(
            "<div class=\"rec\">No data traffic in the input: nothing to recommend.</div>",
        ),
    }

    o.push_str("<h2>Bytes per member, by policy (best first)</h2><div class=\"grid\">");
    for p in &plan.policies {
        let best = plan
            .recommendation
            .as_ref()
            .is_some_and(|r| r.policy == p.policy);
        write!(
            o,
            "<div class=\"card{}\"><h3>{}<span class=\"rank\">#{}</span></h3><div class=\"stats\">imbalance <b>{:.2}</b> &middot; bond delivers <b>{:.1}</b> of {:.1} Gbit/s</div>",
            if best { " best" } else { "" },
            esc(p.policy.name()),
            p.rank,
            p.dist.imbalance,
            p.dist.throughput_bound_gbps,
            p.dist.speed_gbps()
        )?;
        if let Some(why) = &p.cannot_judge {
            write!(o, "<div class=\"stats\">{}</div>", esc(why))?;
        }
        bars(&p.dist, 320, 150, o)?;
        if let Some(r) = &p.rebalancing {
            write!(
                o,
                "<div class=\"stats\">buckets: {}</div>",
                esc(&describe_rebalancing(r))
            )?;
        }
        let mut risk = Vec::new();
        if let Some(r) = p.reorder.filter(|r| r.packets > 0) {
            risk.push(format!(
                "{:.0}% of packets may arrive out of order",
                r.share * 100.0
            ));
        }
        if let Some(need) = p.policy.needs() {
            risk.push(need.to_owned());
        }
        if p.split_flows > 0 {
            risk.push(format!("{} flows split over members", p.split_flows));
        }
        if let Some(f) = p.rebalancing.as_ref().map(|r| r.counters.forced) {
            if f > 0 {
                risk.push(format!("{f} busy buckets moved (brief reordering)"));
            }
        }
        for c in &p.collisions {
            let ids: Vec<String> = c.elephants.iter().map(|i| format!("#{}", i + 1)).collect();
            risk.push(format!("elephants {} share m{}", ids.join(" + "), c.member));
        }
        write!(
            o,
            "<div class=\"risk\">{}</div></div>",
            esc(&risk.join("; "))
        )?;
    }
    o.push_str("</div>");

    if !plan.findings.is_empty() {
        o.push_str("<h2>Findings</h2>");
        for f in &plan.findings {
            let names: Vec<&str> = f.policies.iter().map(|p| p.name()).collect();
            write!(
                o,
                "<div class=\"finding\"><span class=\"field\">{}</span>{}: {}<div class=\"advice\">{}</div></div>",
                esc(&f.field),
                if names.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", esc(&names.join(", ")))
                },
                esc(&f.message),
                esc(&f.advice)
            )?;
        }
    }

    if !plan.elephants.is_empty() {
        o.push_str("<h2>Largest flows</h2><table><tr><th>#</th><th class=\"l\">flow</th><th>packets</th><th>bytes</th><th>share</th></tr>");
        for (i, e) in plan.elephants.iter().enumerate() {
            write!(
                o,
                "<tr><td>{}</td><td class=\"l\"><code>{}</code></td><td>{}</td><td>{}</td><td>{:.1}%</td></tr>",
                i + 1,
                esc(&e.key.to_string()),
                e.packets,
                esc(&human_bytes(e.bytes)),
                if inp.bytes > 0 {
                    e.bytes as f64 * 100.0 / inp.bytes as f64
                } else {
                    0.0
                }
            )?;
        }
        o.push_str("</table>");
    }

    if let Some(first) = plan.policies.first().filter(|p| !p.sweep.is_empty()) {
        o.push_str("<h2>What if the bond had more or fewer members</h2><table><tr><th class=\"l\">policy</th>");
        for s in &first.sweep {
            write!(o, "<th>{} members</th>", s.members)?;
        }
        o.push_str("</tr>");
        for p in &plan.policies {
            write!(o, "<tr><td class=\"l\">{}</td>", esc(p.policy.name()))?;
            for s in &p.sweep {
                write!(
                    o,
                    "<td{}>{:.2} &middot; {:.1} Gbit/s</td>",
                    if s.imbalance > 1.4 {
                        " class=\"hot\""
                    } else {
                        ""
                    },
                    s.imbalance,
                    s.throughput_bound_gbps
                )?;
            }
            o.push_str("</tr>");
        }
        o.push_str("</table>");
    }

    let rec = plan
        .recommendation
        .as_ref()
        .and_then(|r| plan.policy(r.policy))
        .filter(|p| !p.failures.is_empty());
    if let Some(p) = rec {
        write!(
            o,
            "<h2>What if a member fails ({})</h2><table><tr><th class=\"l\">failed</th><th>imbalance</th><th>Gbit/s</th><th>flows moved</th><th>of them from healthy members</th><th>bytes moved</th><th class=\"l\">largest flows moving</th></tr>",
            esc(p.policy.name())
        )?;
        for f in &p.failures {
            write!(
                o,
                "<tr><td class=\"l\">m{}</td><td>{:.2}</td><td>{:.1}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td></tr>",
                f.failed,
                f.dist.imbalance,
                f.dist.throughput_bound_gbps,
                f.flows_moved,
                f.collateral_flows,
                esc(&human_bytes(f.bytes_moved)),
                f.elephants_moved
                    .iter()
                    .map(|i| format!("#{}", i + 1))
                    .collect::<Vec<_>>()
                    .join(" ")
            )?;
        }
        o.push_str("</table>");
    }

    if !plan.return_path.is_empty() {
        o.push_str("<h2>Return path: the switch's hash</h2><div class=\"sub\">Switch hashes are proprietary; each option is modelled as a generic XOR fold of the fields it names.</div><div class=\"grid\">");
        for r in &plan.return_path {
            let yours = r.hash == plan.switch_hash;
            write!(
                o,
                "<div class=\"card{}\"><h3>{}<span class=\"rank\">{}</span></h3><div class=\"stats\">imbalance <b>{:.2}</b></div>",
                if yours { " best" } else { "" },
                esc(r.hash.name()),
                if yours { "yours" } else { "" },
                r.dist.imbalance
            )?;
            bars(&r.dist, 320, 120, o)?;
            o.push_str("</div>");
        }
        o.push_str("</div>");
    }

    o.push_str("<div class=\"foot\">Generated by <code>lagctl plan</code> with lagd's own transmit hash code (bit-exact with the Linux bonding driver). Bars: share of bytes per member; dashed line: fair share.</div></body></html>\n");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        assert_eq!(
            esc("tcp a:1 > b:2 & \"x\""),
            "tcp a:1 &gt; b:2 &amp; &quot;x&quot;"
        );
    }
}
