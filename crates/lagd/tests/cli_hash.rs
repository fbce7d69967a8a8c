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

/// Runs `lagctl` and returns its standard output, failing the test unless it succeeded.
fn lagctl_ok(args: &[&str], stdin: &[u8]) -> String {
    let out = lagctl(args, stdin);
    assert!(
        out.status.success(),
        "lagctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs `lagctl`, expects a usage error (exit 2) and returns its standard output and error.
fn lagctl_usage_error(args: &[&str], stdin: &[u8]) -> (String, String) {
    let out = lagctl(args, stdin);
    assert_eq!(out.status.code(), Some(2), "lagctl {args:?}");
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
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
    let out = lagctl_ok(&["hash", "--policy", "layer3+4", "--members", "4"], &input);
    assert_eq!(out, want);
}

#[test]
fn one_line_per_frame_with_hash_and_member() {
    // Worked by hand in lagd-proto's hash tests: 10.0.0.1:1234 > 10.0.0.2:80 under layer3+4.
    let frame = "02000000000202000000000108004500002800000000400600000a0000010a00000204d20050\n";
    let out = lagctl_ok(
        &["hash", "--policy", "layer3+4", "--members", "2"],
        frame.as_bytes(),
    );
    assert_eq!(out, "0x29a9c0c2 0\n");
    let out = lagctl_ok(
        &["hash", "--policy", "layer2", "--members", "3"],
        frame.as_bytes(),
    );
    // 0x803 = 2051 = 3 * 683 + 2
    assert_eq!(out, "0x00000803 2\n");
}

#[test]
fn explain_lists_fields_under_each_frame() {
    let frame = "02000000000202000000000108004500002800000000400600000a0000010a00000204d20050\n";
    let text = lagctl_ok(
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
    let (out, err) = lagctl_usage_error(&["hash", "--policy", "layer2"], input);
    assert!(err.contains("line 4"), "{err}");
    // The frame before the bad line was still answered.
    assert_eq!(out.lines().count(), 1);

    let (_, err) = lagctl_usage_error(&["hash", "--policy", "layer2"], b"abc\n");
    assert!(err.contains("line 1") && err.contains("odd"), "{err}");
}

#[test]
fn unknown_policy_exits_2_and_lists_the_names() {
    let (_, err) = lagctl_usage_error(&["hash", "--policy", "layer3-4"], b"");
    assert!(
        err.contains("layer3-4") && err.contains("layer3+4"),
        "{err}"
    );
}

#[test]
fn zero_members_is_a_usage_error() {
    lagctl_usage_error(&["hash", "--policy", "layer2", "--members", "0"], b"");
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
        let out = lagctl_ok(&["hash", "--policy", p], b"00\n");
        assert_eq!(out.lines().count(), 1, "{p}");
    }
}

#[test]
fn a_line_that_is_not_utf8_names_the_line_and_exits_2() {
    // Line 3 holds a Latin-1 byte (0xe9): an error naming line 3, after line 2's answer.
    let input = b"# frames\n020000000002020000000001 0800\n02 00 \xe9\n020000000002\n";
    let (out, err) = lagctl_usage_error(&["hash", "--policy", "layer2"], input);
    assert!(
        err.contains("line 3") && err.contains("UTF-8") && err.contains("0xe9"),
        "{err}"
    );
    assert_eq!(out, "0x00000803 1\n");
}

/// `--explain` under ovs-tcp names every field that fed the hash, and says why fields count as
/// zero when Open vSwitch would refuse a header.
#[test]
fn explain_ovs_tcp_names_addresses_protocol_ports_and_fallbacks() {
    // 10.0.0.1:1234 > 10.0.0.2:80, TCP with a valid data offset.
    let tcp = "020000000002020000000001080045000028000000004006000\
               00a0000010a00000204d200500000000000000000500000000000000000";
    let ipv6 = "02000000000202000000000186dd60000000000811402001\
                0db8000000000000000000000001\
                20010db8000000000000000000000002\
                9c40003500080000";
    let input = format!(
        "{tcp}\n{}\n{}\n02000000000202000000000188cc\n",
        &tcp[..60],
        &ipv6[..100]
    );
    let text = lagctl_ok(
        &["hash", "--policy", "ovs-tcp", "--members", "2", "--explain"],
        input.as_bytes(),
    );
    let frames: Vec<&str> = text.split("  member:").collect();
    assert_eq!(frames.len(), 5, "{text}");
    // Whole frame: the addresses, the protocol and the ports.
    assert!(frames[0].contains("10.0.0.1 > 10.0.0.2"), "{text}");
    assert!(frames[0].contains("protocol: 6"), "{text}");
    assert!(frames[0].contains("1234 > 80"), "{text}");
    // IPv4 cut inside its header: why the addresses and protocol are 0.
    assert!(
        frames[1].contains("ipv4:") && frames[1].contains("addresses and protocol 0"),
        "{text}"
    );
    // IPv6 cut inside its fixed header: the same, for IPv6.
    assert!(
        frames[2].contains("ipv6:") && frames[2].contains("addresses and protocol 0"),
        "{text}"
    );
    // LLDP: not IP, a constant hash.
    assert!(frames[3].contains("not IP or ARP"), "{text}");
}
