//! The planner's flow-list reader and flow-description parser on arbitrary bytes: never a
//! panic, and every row read plans, and its report renders (`lagctl plan`'s table and HTML),
//! without one.
#![no_main]

use lagd_proto::plan::csv::FlowListReader;
use lagd_proto::plan::flow::parse_flow_spec;
use lagd_proto::plan::{PlanConfig, Planner};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = core::str::from_utf8(data) {
        let _ = parse_flow_spec(text);
    }
    let Ok(mut rows) = FlowListReader::new(data) else {
        return;
    };
    let mut planner = Planner::new(PlanConfig::new(3)).expect("valid config");
    for _ in 0..10_000 {
        match rows.next_flow() {
            Ok(Some(rec)) => planner.add_flow(&rec),
            Ok(None) | Err(_) => break,
        }
    }
    let plan = planner.finish();
    let mut s = String::new();
    let _ = lagd::cli::plan::text::write_table(&plan, "fuzz", &mut s);
    let _ = lagd::cli::plan::html::render(&plan, "fuzz");
});
