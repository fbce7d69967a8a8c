//! Fuzz target: the TOML configuration loader (`lagd --config`, `lagctl reload`).
//!
//! Arbitrary text goes through `Config::from_toml`. It must never panic. A refused file gives
//! an error whose line, when given, is a line of the file, and whose text names the file; an
//! accepted one has valid members and options that print (`to_opts`) and parse again.
#![no_main]

use std::path::Path;

use lagd::config::Config;
use lagd_proto::bond::BondOptions;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = core::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("/etc/lagd/fuzz.toml");
    match Config::from_toml(text, Some(path)) {
        Ok(config) => {
            assert!(!config.members.is_empty());
            let printed = config.options.to_opts();
            if let Err(e) = BondOptions::parse_opts(&printed) {
                panic!("{printed:?} (printed from an accepted file) fails: {e}");
            }
        }
        Err(e) => {
            if let Some(line) = e.line {
                let lines = text.matches('\n').count() + 1;
                assert!((1..=lines).contains(&line), "line {line} of {lines}: {e}");
            }
            let shown = e.to_string();
            assert!(shown.starts_with("/etc/lagd/fuzz.toml"), "{shown}");
        }
    }
});
