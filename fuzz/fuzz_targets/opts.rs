//! Fuzz target: the kernel-style option string (`lagd --opts`, `BONDING_OPTS`).
//!
//! Arbitrary text goes through `BondOptions::parse_opts`. It must never panic; a rejected
//! string names a key; an accepted one prints (`to_opts`, what lagd logs at start) a string
//! that parses again to the same printed form (a fixed point). The same text is also applied
//! key by key with `set`, as a configuration file does: a failed `set` changes nothing.
#![no_main]

use lagd_proto::bond::BondOptions;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = core::str::from_utf8(data) else {
        return;
    };
    match BondOptions::parse_opts(text) {
        Ok((options, _warnings)) => {
            let printed = options.to_opts();
            let (again, _) = BondOptions::parse_opts(&printed)
                .unwrap_or_else(|e| panic!("{printed:?} (printed from {text:?}) fails: {e}"));
            assert_eq!(again.to_opts(), printed, "from {text:?}");
        }
        Err(e) => {
            // The error names what was given: a key from the text, never an invented one.
            assert!(
                text.contains(e.key.as_str()) || e.key.is_empty(),
                "{e} names a key not in {text:?}"
            );
            let _ = e.to_string();
        }
    }
    let mut options = BondOptions::default();
    for pair in text.split_whitespace() {
        let Some((key, value)) = pair.split_once('=') else {
            continue;
        };
        let before = options.clone();
        if options.set(key, value).is_err() {
            assert_eq!(
                options, before,
                "a failed set({key:?}, {value:?}) changed options"
            );
        }
    }
    let _ = options.finish();
});
