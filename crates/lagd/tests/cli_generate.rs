//! `lagd --generate-into DIR` and `lagctl generate DIR`: the man pages name every flag `--help`
//! shows (each lagctl subcommand's in its own page), and the completions offer them.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const LAGD: &str = env!("CARGO_BIN_EXE_lagd");
const LAGCTL: &str = env!("CARGO_BIN_EXE_lagctl");

fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program).args(args).output().expect("run");
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every `--long-flag` in a `--help` text.
fn long_flags(help: &str) -> BTreeSet<String> {
    help.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|w| w.starts_with("--") && w.len() > 2 && w.as_bytes()[2].is_ascii_lowercase())
        .map(str::to_owned)
        .collect()
}

/// A man page as text: roff's escaped minus signs made plain.
fn page(dir: &Path, name: &str) -> String {
    fs::read_to_string(dir.join(name))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .replace("\\-", "-")
}

fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lagd-generate-{tag}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

#[test]
fn lagd_man_page_and_completions_name_every_flag() {
    let dir = scratch("lagd");
    run(LAGD, &["--generate-into", dir.to_str().expect("utf-8")]);
    let flags = long_flags(&run(LAGD, &["--help"]));
    for f in ["--bond", "--members", "--remove", "--config"] {
        assert!(flags.contains(f), "--help lacks {f}: {flags:?}");
    }
    let man = page(&dir, "lagd.8");
    assert!(
        man.starts_with(".ie") || man.contains(".TH lagd 8"),
        "{man}"
    );
    for file in ["lagd.bash", "_lagd", "lagd.fish"] {
        let text = fs::read_to_string(dir.join(file)).expect(file);
        for f in &flags {
            // fish lists long options without their dashes (`-l bond`).
            let fish = format!("-l {}", &f[2..]);
            assert!(
                text.contains(f.as_str()) || text.contains(&fish),
                "{file} lacks {f}"
            );
        }
    }
    for f in &flags {
        assert!(man.contains(f.as_str()), "lagd.8 lacks {f}");
    }
    assert!(!man.contains("--generate-into"), "hidden flags stay hidden");
    fs::remove_dir_all(&dir).expect("cleanup");
}

#[test]
fn lagctl_pages_name_every_subcommand_flag() {
    let dir = scratch("lagctl");
    run(LAGCTL, &["generate", dir.to_str().expect("utf-8")]);
    let main = page(&dir, "lagctl.8");
    let subcommands = ["hash", "plan", "explain", "show", "lacp", "lab"];
    for sub in subcommands {
        assert!(main.contains(sub), "lagctl.8 lacks {sub}");
        let man = page(&dir, &format!("lagctl-{sub}.8"));
        let flags = long_flags(&run(LAGCTL, &[sub, "--help"]));
        assert!(flags.contains("--help"), "{sub}: {flags:?}");
        for f in &flags {
            assert!(man.contains(f.as_str()), "lagctl-{sub}.8 lacks {f}");
        }
    }
    assert!(!dir.join("lagctl-generate.8").exists(), "hidden subcommand");
    let bash = fs::read_to_string(dir.join("lagctl.bash")).expect("bash");
    for sub in subcommands {
        assert!(bash.contains(sub), "lagctl.bash lacks {sub}");
    }
    fs::remove_dir_all(&dir).expect("cleanup");
}
