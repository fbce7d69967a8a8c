//! Reads every packet out of arbitrary bytes as a capture file: must never panic, must
//! terminate, and every error must name an offset inside the input.
#![no_main]

use lagd_proto::capture::CaptureReader;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let len = data.len() as u64;
    let mut reader = match CaptureReader::new(data) {
        Ok(r) => r,
        Err(e) => {
            assert!(e.offset <= len, "{e}");
            return;
        }
    };
    let mut packets = 0u64;
    let mut max_interface = None;
    loop {
        match reader.next_packet() {
            Ok(Some(p)) => {
                packets += 1;
                // Every packet record or block takes at least 12 bytes of input.
                assert!(packets * 12 <= len);
                assert!(p.data.len() as u64 <= len);
                max_interface = max_interface.max(Some(p.interface));
            }
            Ok(None) => break,
            Err(e) => {
                assert!(e.offset <= len, "{e}");
                break;
            }
        }
    }
    assert!(reader.offset() <= len);
    if let Some(i) = max_interface {
        assert!((i as usize) < reader.interfaces().len());
    }
    // Finished readers stay finished.
    assert!(matches!(reader.next_packet(), Ok(None)));
});
