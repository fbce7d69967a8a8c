//! The planner's sFlow v5 datagram reader on arbitrary bytes: never a panic; a datagram it
//! reads plans (sampling rates capped low here, so a run stays fast) and its report renders.
#![no_main]

use lagd_proto::plan::sflow::read_datagram;
use lagd_proto::plan::{PlanConfig, Planner};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut rates = Vec::new();
    if read_datagram(data, |h| rates.push(h.sampling_rate)).is_err() {
        return;
    }
    let mut planner = Planner::new(PlanConfig::new(2)).expect("valid config");
    if rates.iter().all(|&r| r <= 64) {
        planner
            .add_sflow_datagram(data)
            .expect("read once, reads again");
    }
    let plan = planner.finish();
    let mut s = String::new();
    let _ = lagd::cli::plan::text::write_table(&plan, "fuzz", &mut s);
});
