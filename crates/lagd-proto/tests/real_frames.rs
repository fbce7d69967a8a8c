//! Golden tests: `xmit_hash` on real captured frames (plus a few hand-built ones), whole and cut
//! at every length, must equal the values computed by the independent reference model
//! `tools/hashref.py`, for every policy (the kernel's six and Open vSwitch's two).
//!
//! The vectors live in `src/hash/testdata/real-frames.txt`; its header says how the frames were
//! captured and how to regenerate the expected values. `src/hash/testdata/prefixes.txt` holds
//! the hashes of every prefix of every frame (`tools/hashref.py prefixes real-frames.txt`).
//! Every mismatch is reported (frame line, description, policy, expected, got) before a test
//! fails.

use lagd_proto::hash::{HashPolicy, xmit_hash};

/// The golden file, embedded at compile time.
const GOLDEN: &str = include_str!("../src/hash/testdata/real-frames.txt");

/// Every frame of [`GOLDEN`] cut at every length, hashed by the reference model.
const PREFIXES: &str = include_str!("../src/hash/testdata/prefixes.txt");

/// The policies every vector line must carry, in file order.
const POLICIES: [&str; 8] = [
    "layer2",
    "layer2+3",
    "layer3+4",
    "encap2+3",
    "encap3+4",
    "vlan+srcmac",
    "ovs-slb",
    "ovs-tcp",
];

/// One parsed line of the golden file.
struct Vector {
    line: usize,
    frame: Vec<u8>,
    expected: Vec<(String, u32)>,
    description: String,
}

fn parse_hex(s: &str) -> Result<Vec<u8>, String> {
    if s.len() % 2 != 0 {
        return Err(format!("odd number of hex digits ({})", s.len()));
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).map_err(|e| format!("bad hex at {i}: {e}")))
        .collect()
}

fn parse_golden(text: &str) -> Result<Vec<Vector>, String> {
    let mut out = Vec::new();
    for (idx, raw) in text.lines().enumerate() {
        let line = idx + 1;
        let trimmed = raw.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let (body, description) = match trimmed.split_once('#') {
            Some((b, d)) => (b, d.trim().to_string()),
            None => (trimmed, String::new()),
        };
        let mut fields = body.split_whitespace();
        let hex = fields.next().ok_or_else(|| format!("line {line}: empty"))?;
        let frame = parse_hex(hex).map_err(|e| format!("line {line}: {e}"))?;
        let mut expected = Vec::new();
        for kv in fields {
            let (name, value) = kv
                .split_once('=')
                .ok_or_else(|| format!("line {line}: bad field {kv:?}"))?;
            let digits = value
                .strip_prefix("0x")
                .ok_or_else(|| format!("line {line}: value {value:?} lacks 0x"))?;
            let value = u32::from_str_radix(digits, 16)
                .map_err(|e| format!("line {line}: value {value:?}: {e}"))?;
            expected.push((name.to_string(), value));
        }
        let names: Vec<&str> = expected.iter().map(|(n, _)| n.as_str()).collect();
        if names != POLICIES {
            return Err(format!(
                "line {line}: expected the fields {POLICIES:?}, found {names:?}"
            ));
        }
        out.push(Vector {
            line,
            frame,
            expected,
            description,
        });
    }
    Ok(out)
}

#[test]
fn real_frames_match_reference_model() {
    let vectors = parse_golden(GOLDEN).unwrap_or_else(|e| panic!("golden file: {e}"));
    assert!(
        vectors.len() >= 100,
        "golden file has only {} vectors",
        vectors.len()
    );

    let mut mismatches = Vec::new();
    let mut checked = 0usize;
    for v in &vectors {
        for (name, want) in &v.expected {
            let policy: HashPolicy = name
                .parse()
                .unwrap_or_else(|_| panic!("HashPolicy does not parse {name:?}"));
            let got = xmit_hash(policy, &v.frame);
            checked += 1;
            if got != *want {
                mismatches.push(format!(
                    "line {:>3} {:<11} expected 0x{:08x} got 0x{:08x}  # {}",
                    v.line, name, want, got, v.description
                ));
            }
        }
    }
    if !mismatches.is_empty() {
        panic!(
            "{} of {} (frame, policy) hashes differ from tools/hashref.py:\n{}",
            mismatches.len(),
            checked,
            mismatches.join("\n")
        );
    }
}

/// A frame truncated at every length falls back exactly as the reference model says: the
/// kernel's fallbacks (layer2 formula, ports lost, hash 0 below an Ethernet header) and Open
/// vSwitch's (addresses and protocol 0 for a header its sanity checks refuse, ports 0 for a cut
/// transport header), for every stored real frame and every policy.
#[test]
fn every_prefix_of_every_real_frame_matches_reference_model() {
    let vectors = parse_golden(GOLDEN).unwrap_or_else(|e| panic!("golden file: {e}"));
    let mut by_line = std::collections::HashMap::new();
    for v in &vectors {
        by_line.insert(v.line, v);
    }
    let mut mismatches = Vec::new();
    let mut checked = 0usize;
    let mut covered = std::collections::HashSet::new();
    for (idx, raw) in PREFIXES.lines().enumerate() {
        let at = idx + 1;
        if raw.is_empty() || raw.starts_with('#') {
            continue;
        }
        let mut fields = raw.split_whitespace();
        let mut next = |what: &str| {
            fields
                .next()
                .unwrap_or_else(|| panic!("prefixes.txt line {at}: no {what}"))
        };
        let line: usize = next("frame line").parse().expect("frame line number");
        let len: usize = next("length").parse().expect("frame length");
        let name = next("policy");
        let policy: HashPolicy = name
            .parse()
            .unwrap_or_else(|_| panic!("prefixes.txt line {at}: policy {name:?}"));
        let v = by_line.get(&line).unwrap_or_else(|| {
            panic!(
                "prefixes.txt line {at}: real-frames.txt has no frame on line {line} (regenerate)"
            )
        });
        assert_eq!(
            v.frame.len(),
            len,
            "prefixes.txt line {at}: frame on line {line} changed length (regenerate)"
        );
        // Runs of "FROM:HASH": the hash of every prefix from FROM bytes to the next run.
        let runs: Vec<(usize, u32)> = fields
            .map(|r| {
                let (from, hash) = r.split_once(':').expect("FROM:HASH");
                let hash = hash.strip_prefix("0x").expect("0x");
                (
                    from.parse().expect("run start"),
                    u32::from_str_radix(hash, 16).expect("hex hash"),
                )
            })
            .collect();
        assert_eq!(runs.first().map(|r| r.0), Some(0), "prefixes.txt line {at}");
        for (i, &(from, want)) in runs.iter().enumerate() {
            let to = runs.get(i + 1).map_or(len, |r| r.0 - 1);
            for cut in from..=to {
                let got = xmit_hash(policy, &v.frame[..cut]);
                checked += 1;
                if got != want {
                    mismatches.push(format!(
                        "line {line:>3} cut at {cut:>4} {name:<11} expected 0x{want:08x} got 0x{got:08x}  # {}",
                        v.description
                    ));
                }
            }
        }
        covered.insert((line, name.to_string()));
    }
    assert_eq!(
        covered.len(),
        vectors.len() * POLICIES.len(),
        "prefixes.txt must cover every frame under every policy (regenerate)"
    );
    assert!(checked > 100_000, "only {checked} prefixes checked");
    if !mismatches.is_empty() {
        panic!(
            "{} of {} (prefix, policy) hashes differ from tools/hashref.py:\n{}",
            mismatches.len(),
            checked,
            mismatches.join("\n")
        );
    }
}

#[test]
fn policy_names_round_trip() {
    for name in POLICIES {
        assert!(
            name.parse::<HashPolicy>().is_ok(),
            "{name:?} must parse as a HashPolicy"
        );
    }
    assert!("layer4".parse::<HashPolicy>().is_err());
}
