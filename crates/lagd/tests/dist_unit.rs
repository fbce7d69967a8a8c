//! `dist/lagd@.service`: systemd accepts it (`systemd-analyze verify`), it runs the installed
//! lagd on /etc/lagd/%i.toml as a Type=notify service with a watchdog, its capability
//! bounding set holds what lagd keeps after start-up, and its descriptor store what lagd
//! stores.

use std::fs;
use std::process::Command;

use lagd_lab::topology::require_program;

const UNIT: &str = include_str!("../../../dist/lagd@.service");
const LAGD: &str = env!("CARGO_BIN_EXE_lagd");
const LAGCTL: &str = env!("CARGO_BIN_EXE_lagctl");

fn setting(key: &str) -> Vec<String> {
    UNIT.lines()
        .filter_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_unit_is_a_notify_service_with_a_watchdog_and_the_capabilities_lagd_keeps() {
    assert_eq!(setting("Type"), ["notify"]);
    assert_eq!(setting("WatchdogSec").len(), 1);
    assert_eq!(
        setting("ExecStart"),
        ["/usr/local/bin/lagd --config /etc/lagd/%i.toml"]
    );
    let caps = setting("CapabilityBoundingSet").join(" ");
    for cap in ["CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_BPF"] {
        assert!(caps.split(' ').any(|c| c == cap), "{cap} missing: {caps}");
    }
    assert!(!caps.contains("CAP_SYS_MODULE") && !caps.contains("CAP_DAC_OVERRIDE"));
    assert_eq!(setting("RuntimeDirectory"), ["lagd"]);
    // The store holds all lagd stores for the most members the kernel path takes.
    let store_max: Vec<usize> = setting("FileDescriptorStoreMax")
        .iter()
        .map(|v| v.parse().expect("a number"))
        .collect();
    assert_eq!(store_max.len(), 1, "{store_max:?}");
    assert!(
        store_max[0] >= lagd::daemon::handover::MOST_STORED,
        "FileDescriptorStoreMax={} holds less than the {} descriptors lagd may store",
        store_max[0],
        lagd::daemon::handover::MOST_STORED
    );
    // `systemctl restart` leaves the kernel path to the started lagd (lagctl stop).
    assert_eq!(
        setting("ExecStop"),
        ["/usr/local/bin/lagctl stop --unit %n %i"]
    );
}

#[test]
fn systemd_analyze_verifies_the_unit() {
    require_program("systemd-analyze", "systemd").unwrap();
    let dir = std::env::temp_dir().join(format!("lagd-unit-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    // The instance's configuration and the binaries where the unit expects them, in a scratch
    // directory: the unit's own paths with only these replaced.
    let config = dir.join("bond0.toml");
    fs::write(&config, "bond = \"bond0\"\nmembers = [\"eth1\"]\n").unwrap();
    let unit = UNIT
        .replace("/usr/local/bin/lagctl", LAGCTL)
        .replace("/usr/local/bin/lagd", LAGD)
        .replace("/etc/lagd/%i.toml", &config.to_string_lossy());
    let path = dir.join("lagd@bond0.service");
    fs::write(&path, unit).unwrap();
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&path)
        .output()
        .expect("systemd-analyze");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    fs::remove_dir_all(&dir).unwrap();
    // Lines about the host's own units (no systemd running here) are not about this one.
    let ours: Vec<&str> = text.lines().filter(|l| l.contains("lagd@")).collect();
    assert!(out.status.success() && ours.is_empty(), "{text}");
}
