//! `lagctl hash` as a user runs it: the real binary, golden output, errors and exit codes.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn lagctl(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lagctl"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start lagctl");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

#[test]
fn golden_layer34_four_members() {
    let input = std::fs::read(data("frames.hex")).unwrap();
    let want = std::fs::read_to_string(data("frames.layer3+4.4.golden")).unwrap();
    let out = lagctl(&["hash", "--policy", "layer3+4", "--members", "4"], &input);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8(out.stdout).unwrap(), want);
}

#[test]
fn one_line_per_frame_with_hash_and_member() {
    // Worked by hand in lagd-proto's hash tests: 10.0.0.1:1234 > 10.0.0.2:80 under layer3+4.
    let frame = "02000000000202000000000108004500002800000000400600000a0000010a00000204d20050\n";
    let out = lagctl(
        &["hash", "--policy", "layer3+4", "--members", "2"],
        frame.as_bytes(),
    );
    assert!(out.status.success());
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "0x29a9c0c2 0\n");
    let out = lagctl(
        &["hash", "--policy", "layer2", "--members", "3"],
        frame.as_bytes(),
    );
    // 0x803 = 2051 = 3 * 683 + 2
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "0x00000803 2\n");
}

#[test]
fn explain_lists_fields_under_each_frame() {
    let frame = "02000000000202000000000108004500002800000000400600000a0000010a00000204d20050\n";
    let out = lagctl(
        &[
            "hash",
            "--policy",
            "layer3+4",
            "--members",
            "2",
            "--explain",
        ],
        frame.as_bytes(),
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "0x29a9c0c2 0");
    assert!(lines[1..].iter().all(|l| l.starts_with("  ")), "{text}");
    assert!(text.contains("10.0.0.1 > 10.0.0.2"), "{text}");
    assert!(text.contains("1234 > 80"), "{text}");
    assert!(text.contains("% 2 = 0"), "{text}");
}

#[test]
fn bad_hex_names_the_line_and_exits_2() {
    let input = b"# frames\n\n020000000002\n0200000000zz\n";
    let out = lagctl(&["hash", "--policy", "layer2"], input);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("line 4"), "{err}");
    // The frame before the bad line was still answered.
    assert_eq!(String::from_utf8(out.stdout).unwrap().lines().count(), 1);

    let out = lagctl(&["hash", "--policy", "layer2"], b"abc\n");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("line 1") && err.contains("odd"), "{err}");
}

#[test]
fn unknown_policy_exits_2_and_lists_the_names() {
    let out = lagctl(&["hash", "--policy", "layer3-4"], b"");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("layer3-4") && err.contains("layer3+4"),
        "{err}"
    );
}

#[test]
fn zero_members_is_a_usage_error() {
    let out = lagctl(&["hash", "--policy", "layer2", "--members", "0"], b"");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn every_policy_name_is_accepted() {
    for p in [
        "layer2",
        "layer2+3",
        "layer3+4",
        "encap2+3",
        "encap3+4",
        "vlan+srcmac",
        "ovs-slb",
        "ovs-tcp",
    ] {
        let out = lagctl(&["hash", "--policy", p], b"00\n");
        assert!(out.status.success(), "{p}");
        assert_eq!(
            String::from_utf8(out.stdout).unwrap().lines().count(),
            1,
            "{p}"
        );
    }
}
