//! `lagd`'s command line, refused before anything is touched (no root needed).

use std::process::Command;

const LAGD: &str = env!("CARGO_BIN_EXE_lagd");

#[test]
fn flags_the_config_file_decides_are_refused_beside_it() {
    for (flag, value) in [
        ("--mtu", "9000"),
        ("--control", "/tmp/never.sock"),
        ("--mac", "02:00:00:00:00:01"),
        ("--bond", "bond9"),
    ] {
        let out = Command::new(LAGD)
            .args(["--config", "/nonexistent/lagd.toml", flag, value])
            .output()
            .expect("run lagd");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag}: {err}");
        assert!(
            err.contains("--config") && err.contains(flag),
            "{flag}: {err}"
        );
    }
}
