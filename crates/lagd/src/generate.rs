//! Man pages and shell completions generated from the binaries' clap definitions, so that they
//! never disagree with `--help`: `lagd --generate-into DIR` and `lagctl generate DIR` (both
//! hidden) write them into `DIR`:
//!
//! - `PROG.8`, and for a program with subcommands `PROG-SUB.8` for each (with its options);
//! - `PROG.bash`, `_PROG` (zsh) and `PROG.fish`.
//!
//! Where they go when installed is in the README ("Running as a service").

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use clap_complete::Shell;

/// Writes the man pages and completions of `cmd` (named as the program) into `dir`, which must
/// exist; returns the files written.
pub fn write_all(mut cmd: clap::Command, dir: &Path) -> io::Result<Vec<PathBuf>> {
    cmd.build();
    let name = cmd.get_name().to_owned();
    let mut written = Vec::new();
    let mut create = |file: String, f: &mut dyn FnMut(&mut dyn Write) -> io::Result<()>| {
        let path = dir.join(file);
        let mut out = BufWriter::new(File::create(&path)?);
        f(&mut out)?;
        out.flush()?;
        written.push(path);
        io::Result::Ok(())
    };
    create(format!("{name}.8"), &mut |out| {
        clap_mangen::Man::new(cmd.clone()).section("8").render(out)
    })?;
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        let page = format!("{name}-{}", sub.get_name());
        let sub = sub.clone().name(page.clone());
        create(format!("{page}.8"), &mut |out| {
            clap_mangen::Man::new(sub.clone()).section("8").render(out)
        })?;
    }
    for (shell, file) in [
        (Shell::Bash, format!("{name}.bash")),
        (Shell::Zsh, format!("_{name}")),
        (Shell::Fish, format!("{name}.fish")),
    ] {
        create(file, &mut |out| {
            clap_complete::generate(shell, &mut cmd.clone(), name.clone(), out);
            Ok(())
        })?;
    }
    Ok(written)
}
