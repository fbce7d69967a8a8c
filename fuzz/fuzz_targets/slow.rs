//! Fuzz target: Slow Protocols parsing (LACPDU, Marker PDU).
//!
//! Arbitrary bytes are parsed as a slow-protocol payload and as a whole Ethernet frame. Parsing
//! must never panic, and anything that parses as a LACPDU or Marker PDU must come back
//! unchanged from `emit` followed by `parse` (payload and frame forms).

#![no_main]

use lagd_proto::wire::EthernetAddress;
use lagd_proto::wire::slow::{LacpRepr, MarkerRepr, SlowPdu, is_slow_protocols_frame};
use libfuzzer_sys::fuzz_target;

fn round_trip(pdu: SlowPdu) {
    let src = EthernetAddress([0x02, 0, 0, 0, 0, 1]);
    match pdu {
        SlowPdu::Lacp(r) => {
            let mut payload = vec![0xa5; r.buffer_len()];
            r.emit(&mut payload);
            assert_eq!(LacpRepr::parse(&payload).as_ref(), Ok(&r));
            let mut frame = vec![0xa5; r.frame_len()];
            r.emit_frame(src, &mut frame);
            assert!(is_slow_protocols_frame(&frame));
            assert_eq!(&frame[14..], &payload[..]);
            assert_eq!(SlowPdu::parse_frame(&frame), Ok(SlowPdu::Lacp(r)));
        }
        SlowPdu::Marker(r) => {
            let mut payload = vec![0xa5; r.buffer_len()];
            r.emit(&mut payload);
            assert_eq!(MarkerRepr::parse(&payload), Ok(r));
            let mut frame = vec![0xa5; r.frame_len()];
            r.emit_frame(src, &mut frame);
            assert!(is_slow_protocols_frame(&frame));
            assert_eq!(SlowPdu::parse_frame(&frame), Ok(SlowPdu::Marker(r)));
        }
        SlowPdu::Unknown { subtype } => assert!(subtype != 1 && subtype != 2),
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(pdu) = SlowPdu::parse(data) {
        round_trip(pdu);
    }
    let _ = is_slow_protocols_frame(data);
    if let Ok(pdu) = SlowPdu::parse_frame(data) {
        round_trip(pdu);
    }
});
