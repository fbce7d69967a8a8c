//! The report renderers on plans built as the planner's own tests build them (the same
//! generators, `lagd_proto::plan::sample`): the terminal table and the HTML page say what the
//! plan holds.

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
    let text = skewed_flow_list();
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
    let frames = one_elephant_and_mice();
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
