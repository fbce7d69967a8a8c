//! The planner's IPFIX reader on arbitrary bytes: never a panic. The input is read as a
//! message twice (templates the first pass learns apply to the second), then split where
//! its own length fields say, as a stream of messages; the plan finishes and its report
//! renders. A message refused changes nothing: the counters say so.
#![no_main]

use lagd_proto::plan::ipfix::IpfixDecoder;
use lagd_proto::plan::{PlanConfig, Planner};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut planner = Planner::new(PlanConfig::new(2)).expect("valid config");
    let mut dec = IpfixDecoder::new();
    for _ in 0..2 {
        let before = planner.stats().packets;
        if dec.add_message(&mut planner, 1, data).is_err() {
            assert_eq!(planner.stats().packets, before, "a refused message planned traffic");
        }
    }
    let mut rest = data;
    while rest.len() >= 4 {
        let len = usize::from(u16::from_be_bytes([rest[2], rest[3]])).clamp(4, rest.len());
        let _ = dec.add_message(&mut planner, 2, &rest[..len]);
        rest = &rest[len..];
    }
    let x = planner.stats().ipfix.expect("messages counted");
    assert!(x.malformed <= x.messages);
    let plan = planner.finish();
    let mut s = String::new();
    let _ = lagd::cli::plan::text::write_table(&plan, "fuzz", &mut s);
});
