//! Fuzz target: `lagctl import`'s dialect readers (ifcfg, NetworkManager keyfiles,
//! systemd-networkd, netplan, nmstate, teamd, ifupdown; ifupdown's `source` lines may read
//! files, which it only reads).
//!
//! The first byte picks the dialect (or lets `import` guess it); the rest is split into up to
//! four files at each `\0`, named as that dialect names them (`#` numbers the others).
//! Reading must never panic, and a bond read is written as TOML (`to_toml`) and checked by
//! lagd's loader without one.
#![no_main]

use std::path::PathBuf;

use lagd::cli::import::{Dialect, import};
use lagd::config::Config;
use libfuzzer_sys::fuzz_target;

const DIALECTS: [(Option<Dialect>, &str, &str); 8] = [
    (Some(Dialect::Ifcfg), "ifcfg-bond0", "ifcfg-eth#"),
    (
        Some(Dialect::NmKeyfile),
        "bond0.nmconnection",
        "eth#.nmconnection",
    ),
    (Some(Dialect::Networkd), "10-bond0.netdev", "2#-eth.network"),
    (Some(Dialect::Netplan), "01-bond.yaml", "0#-more.yaml"),
    (Some(Dialect::Nmstate), "bond.yml", "more#.yml"),
    (Some(Dialect::Teamd), "team0.conf", "team#.conf"),
    (Some(Dialect::Ifupdown), "interfaces", "interfaces.d/bond#"),
    (None, "bond0.conf", "eth#"),
];

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = core::str::from_utf8(rest) else {
        return;
    };
    let (dialect, first, others) = DIALECTS[usize::from(pick) % DIALECTS.len()];
    let files: Vec<(PathBuf, String)> = text
        .split('\0')
        .take(4)
        .enumerate()
        .map(|(i, t)| {
            let name = if i == 0 {
                first.to_owned()
            } else {
                others.replace('#', &i.to_string())
            };
            (PathBuf::from(name), t.to_owned())
        })
        .collect();
    let bond = (pick & 0x80 != 0).then_some("bond0");
    if let Ok((dialect, imported)) = import(dialect, &files, bond) {
        let sources: Vec<PathBuf> = files.iter().map(|(p, _)| p.clone()).collect();
        let toml = imported.to_toml(dialect, &sources);
        // What `lagctl import` does next: lagd's own loader checks the result.
        let _ = Config::from_toml(&toml, None);
    }
});
