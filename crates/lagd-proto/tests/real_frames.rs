//! Golden test: `xmit_hash` on real captured frames (plus a few hand-built ones) must equal the
//! values computed by the independent reference model `tools/hashref.py`, for every policy.
//!
//! The vectors live in `src/hash/testdata/real-frames.txt`; its header says how the frames were
//! captured and how to regenerate the expected values.  Every mismatch is reported (frame line,
//! description, policy, expected, got) before the test fails.

use lagd_proto::hash::{HashPolicy, xmit_hash};

/// The golden file, embedded at compile time.
const GOLDEN: &str = include_str!("../src/hash/testdata/real-frames.txt");

/// The six policies every vector line must carry, in file order.
const POLICIES: [&str; 6] = [
    "layer2",
    "layer2+3",
    "layer3+4",
    "encap2+3",
    "encap3+4",
    "vlan+srcmac",
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
