//! Every transmit hash policy over arbitrary bytes: no panic, and the traced path (used by
//! `--explain`) computes the same hash as the fast path.
#![no_main]

use lagd_proto::hash::{Explain, HashPolicy, member_index, xmit_hash, xmit_hash_traced};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for policy in HashPolicy::ALL {
        let h = xmit_hash(policy, data);
        let mut explain = Explain::default();
        assert_eq!(xmit_hash_traced(policy, data, &mut explain), h);
        assert!(member_index(h, 3).unwrap() < 3);
    }
});
