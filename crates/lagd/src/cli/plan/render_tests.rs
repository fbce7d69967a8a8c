//! The report renderers on plans built as the planner's own tests build them (the same
//! generators, `lagd_proto::plan::sample`): the terminal table and the HTML page say what the
//! plan holds.

use lagd_proto::hash::{HashPolicy, xmit_hash};
use lagd_proto::plan::report::Plan;
use lagd_proto::plan::{PlanConfig, PlanPolicy, plan_flows};

use lagd_proto::plan::sample::*;

use super::{html, text};

/// The terminal table of `plan`.
fn table(plan: &Plan, title: &str) -> String {
    let mut out = String::new();
    text::write_table(plan, title, &mut out).unwrap();
    out
}

#[test]
fn text_table_and_html_render_every_policy() {
    let frames = mixed_frames(2, 2000);
    let plan = plan_of(&frames, PlanConfig::new(2));
    let text = table(&plan, "mixed");
    for p in PlanPolicy::ALL {
        assert!(text.contains(p.name()), "{p} missing:\n{text}");
    }
    assert!(text.contains("Recommendation: "));
    assert!(text.contains("What if a member fails"));
    let html = html::render(&plan, "mixed <capture>");
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("mixed &lt;capture&gt;"));
    assert_eq!(html.matches("<svg").count(), PlanPolicy::ALL.len() + 7);
    assert!(!html.contains("http://") && !html.contains("https://"));
}

#[test]
fn bucket_tables_say_when_rebalancing_is_off_and_when_moves_were_forced() {
    // Rebalancing off.
    let t = skewed(60, 1, 1500, true);
    let off = plan_timed(&t, bucket_config(vec![L34, L34_BUCKETS], 0, vec![10.0; 2]));
    let text = table(&off, "off");
    assert!(text.contains("Bucket tables (rebalancing off):"), "{text}");

    // Elephants that never pause: after `force_after` (3) stuck passes the table moves a busy
    // bucket at once, and the report says so.
    let t = skewed(60, 1, 1500, false);
    let plan = plan_timed(
        &t,
        bucket_config(vec![L34, L34_BUCKETS], 5_000, vec![10.0; 2]),
    );
    let text = table(&plan, "never pausing");
    assert!(
        text.contains("busy buckets moved (brief reordering)"),
        "{text}"
    );
    assert!(text.contains("forced while busy"), "{text}");
}

#[test]
fn flow_list_bucket_tables_say_the_mix_is_replayed() {
    // Three elephants on member 0 (as in `skewed`) and mice, as a flow list without MACs.
    let mut text = String::from("src_ip,dst_ip,proto,src_port,dst_port,packets,bytes\n");
    let mut found = Vec::new();
    for port in 40_000u16.. {
        let mut f = frame_of(&format!("tcp 10.0.0.1:{port} > 10.0.0.2:5201"));
        f[..12].fill(0);
        let h = xmit_hash(HashPolicy::Layer34, &f);
        if h % 2 == 0 && !found.contains(&(h & 0xff)) {
            found.push(h & 0xff);
            text.push_str(&format!(
                "10.0.0.1,10.0.0.2,tcp,{port},5201,10000,15000000\n"
            ));
            if found.len() == 3 {
                break;
            }
        }
    }
    for j in 0..40 {
        text.push_str(&format!(
            "10.1.0.{j},10.2.0.1,udp,{},53,100,20000\n",
            5000 + j
        ));
    }
    let cfg = bucket_config(vec![L34, L34_BUCKETS], 10_000, vec![10.0; 2]);
    let plan = plan_flows(text.as_bytes(), cfg).unwrap();
    let out = table(&plan, "flows");
    assert!(out.contains("replayed once per interval"), "{out}");
}

#[test]
fn bucket_tables_without_timestamps_never_rebalance() {
    // Frames with no timestamps: every table sees time 0 and never rebalances.
    let mut cfg = PlanConfig::new(2);
    cfg.policies = PlanPolicy::ALL_WITH_BUCKETS.to_vec();
    let plan = plan_of(&mixed_frames(4, 500), cfg);
    let text = table(&plan, "t");
    assert!(text.contains("balance-tcp"), "{text}");
    assert!(text.contains("less than one interval"), "{text}");
}

#[test]
fn stripe_rows_and_cards_say_what_stripe_needs() {
    // One big TCP stream and a few mice: no hash policy can split the stream; stripe can.
    let mut frames = vec![frame_of("tcp 10.0.0.1:40000 > 10.0.0.2:5201"); 400];
    for f in &mut frames {
        f.resize(1514, 0);
    }
    for i in 0..20u16 {
        frames.insert(
            usize::from(i) * 19,
            frame_of(&format!("udp 10.0.0.1:{} > 10.0.0.3:53", 5000 + i)),
        );
    }
    let plan = plan_of(&frames, PlanConfig::new(2));
    let text = table(&plan, "elephant");
    let row = text.lines().find(|l| l.contains(" stripe ")).unwrap();
    assert!(
        row.ends_with("needs lagd mode=stripe at both ends"),
        "{row}"
    );
    let html = html::render(&plan, "elephant");
    assert!(html.contains("needs lagd mode=stripe at both ends"));
}
