//! `lagd`: the link aggregation daemon.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser};
use lagd::config::Config;
use lagd::daemon::{Daemon, StartError};

/// Userspace link aggregation: presents a bond as a TAP interface and drives its members.
///
/// Either `--config FILE` or `--bond NAME --members A,B --opts "mode=... miimon=..."`, where
/// `--opts` takes the kernel's bonding options verbatim (as BONDING_OPTS or NetworkManager's
/// bond.options).
///
/// When lagd stops (SIGTERM, SIGINT, an error) the members get back the MTU, MAC, sysctls and
/// up/down state they had before; the bond's TAP stays, with the host's addresses on it, until
/// `lagd --remove BOND`.
#[derive(Parser, Debug)]
#[command(name = "lagd", version)]
struct Args {
    /// TOML configuration file (the bond, members, options, MAC, MTU and control socket are
    /// then the file's to say: the flags for them are refused beside it).
    #[arg(long, conflicts_with_all = ["bond", "members", "opts", "mac", "mtu", "control", "metrics"])]
    config: Option<PathBuf>,
    /// Bond (TAP) interface name.
    #[arg(long, required_unless_present_any = ["config", "remove", "generate_into"])]
    bond: Option<String>,
    /// Member interfaces, comma-separated, in enslave order.
    #[arg(long, required_unless_present_any = ["config", "remove", "generate_into"])]
    members: Option<String>,
    /// Delete the bond's TAP, which stays when lagd stops (refused while a lagd runs it).
    #[arg(
        long,
        value_name = "BOND",
        conflicts_with_all = ["config", "bond", "members", "opts", "mac", "mtu", "control"]
    )]
    remove: Option<String>,
    /// Write the man page and shell completions into this directory (packaging).
    #[arg(long, hide = true, value_name = "DIR", exclusive = true)]
    generate_into: Option<PathBuf>,
    /// Bonding options with the kernel's names, e.g. "mode=balance-xor xmit_hash_policy=layer3+4".
    #[arg(long, default_value = "")]
    opts: String,
    /// The bond's MAC (default: the first member's permanent MAC).
    #[arg(long)]
    mac: Option<String>,
    /// MTU for the bond and every member (default: the first member's MTU).
    #[arg(long)]
    mtu: Option<u32>,
    /// Control socket file (default: the abstract socket @lagd/BOND, one per network
    /// namespace); a value starting with @ names an abstract socket.
    #[arg(long)]
    control: Option<PathBuf>,
    /// A group (name or id) whose members may read the status on the control socket (changes
    /// stay root's). In a --config file: control_group.
    #[arg(long, conflicts_with = "config")]
    control_group: Option<String>,
    /// Serve Prometheus metrics at http://ADDR/metrics (`127.0.0.1:9105`, `[::1]:9105`) or
    /// on a Unix socket (`unix:/run/lagd/bond0.metrics`). Off by default.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<String>,
    /// Allow a --metrics address that is not loopback.
    #[arg(long, requires = "metrics")]
    metrics_allow_remote: bool,
    /// Run without the seccomp filter lagd installs once the bond is up (it refuses exec,
    /// ptrace, mount, module loading and other calls a running lagd never makes; see
    /// docs/design.md, "Privileges").
    #[arg(long)]
    no_seccomp: bool,
    /// Check the configuration against this host and exit, changing nothing: the members
    /// exist and are free, the options are consistent, the bond's name is free (or lagd's
    /// TAP), and whether the kernel fast path will carry the data frames. Prints one finding
    /// a line; exit code 0, or 1 when a finding is an error (a bad configuration included).
    #[arg(long, conflicts_with_all = ["remove", "generate_into"])]
    check: bool,
    /// Take the bond over from the lagd running it (a planned upgrade; `lagctl upgrade` starts
    /// the new lagd so): the running one hands over its TAP, programs and members over the
    /// control socket and exits without undoing anything, so the kernel path forwards on.
    #[arg(long, conflicts_with_all = ["remove", "generate_into", "check"])]
    take_over: bool,
    /// Log level: error, warn, info, debug or trace.
    #[arg(long, default_value = "info")]
    log_level: tracing::Level,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(dir) = &args.generate_into {
        return match lagd::generate::write_all(Args::command(), dir) {
            Ok(_) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("lagd: writing into {}: {e}", dir.display());
                ExitCode::from(1)
            }
        };
    }
    tracing_subscriber::fmt()
        .with_max_level(args.log_level)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    if let Some(bond) = &args.remove {
        return match lagd::daemon::restore::remove_tap(bond) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("lagd: {e:#}");
                ExitCode::from(1)
            }
        };
    }
    let config = match &args.config {
        Some(path) => Config::from_file(path),
        None => Config::from_args(
            args.bond.as_deref().unwrap_or_default(),
            args.members.as_deref().unwrap_or_default(),
            &args.opts,
            args.mac.as_deref(),
            args.mtu,
            args.control.as_deref(),
        ),
    };
    let config = config.and_then(|mut c| {
        if let Some(g) = &args.control_group {
            c.control_group = Some(lagd::config::resolve_group(g).map_err(|message| {
                lagd::config::ConfigError {
                    file: None,
                    line: None,
                    key: Some("--control-group".into()),
                    message,
                }
            })?);
        }
        if let Some(m) = &args.metrics {
            c.set_metrics(m, args.metrics_allow_remote)?;
        }
        Ok(c)
    });
    if args.check {
        let findings = match &config {
            Ok(c) => lagd::check::check(c),
            Err(e) => vec![lagd::check::Finding {
                severity: lagd::check::Severity::Error,
                text: e.to_string(),
            }],
        };
        for f in &findings {
            println!("{f}");
        }
        return if lagd::check::failed(&findings) {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        };
    }
    let config = match config {
        Ok(c) => c,
        Err(e) => {
            eprintln!("lagd: {e}");
            return ExitCode::from(2);
        }
    };
    // The launcher first, while lagd holds nothing it must not pass on (a service manager's
    // descriptors are closed in it) and has one thread: SIGUSR2 asks it to run lagctl upgrade.
    let launcher = fork_launcher(&config);
    let (passed, take_over) = if args.take_over {
        match lagd::daemon::handover::Passed::take_over(&config.control) {
            Ok((p, t)) => (p, Some(t)),
            Err(e) => {
                eprintln!("lagd: taking over: {e:#}");
                return ExitCode::from(1);
            }
        }
    } else {
        (lagd::daemon::handover::Passed::from_env(), None)
    };
    let mut daemon = match Daemon::start(config, passed) {
        Ok(d) => d,
        Err(StartError::Config(m)) => {
            eprintln!("lagd: {m}");
            return ExitCode::from(2);
        }
        Err(StartError::System(e)) => {
            eprintln!("lagd: {e:#}");
            return ExitCode::from(1);
        }
    };
    if let Some(t) = take_over {
        if let Err(e) = t.adopted() {
            eprintln!("lagd: taking over: {e:#}");
            // Undoing nothing: what it would undo is the old lagd's again.
            std::process::exit(1);
        }
    }
    match launcher {
        Ok(l) => {
            let pid = l.pid();
            match daemon.set_launcher(l) {
                Ok(()) => tracing::info!(pid, "launcher for SIGUSR2's upgrade"),
                Err(e) => tracing::warn!("no launcher: {e:#}; SIGUSR2 does not upgrade"),
            }
        }
        Err(e) => tracing::warn!("no launcher: {e}; SIGUSR2 does not upgrade"),
    }
    // The bond is up: from here on lagd parses frames from the wire, with only what it needs.
    match lagd::daemon::keep_needed_capabilities() {
        Ok(kept) => tracing::info!(kept = kept.join(","), "capabilities dropped"),
        Err(e) => tracing::warn!("could not drop capabilities: {e}"),
    }
    if args.no_seccomp {
        tracing::info!("no seccomp filter (--no-seccomp)");
    } else {
        match lagd::daemon::install_seccomp_filter() {
            Ok(denied) => tracing::info!(denied, "seccomp filter installed"),
            Err(e) => tracing::warn!("could not install the seccomp filter: {e}"),
        }
    }
    match daemon.run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lagd: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// Forks the launcher ([`lagd_sys::launcher`]) that runs `lagctl upgrade` for this bond on
/// SIGUSR2: the `lagctl` beside this lagd's binary, with the control socket file this lagd
/// serves (the bond's name for the default one).
fn fork_launcher(config: &Config) -> std::io::Result<lagd_sys::launcher::Launcher> {
    let exe = std::env::current_exe()?;
    let lagctl = exe.with_file_name("lagctl");
    let mut args: Vec<std::ffi::OsString> = vec!["upgrade".into()];
    match &config.control {
        lagd::control::Endpoint::File(path) => {
            args.push("--control".into());
            args.push(path.into());
        }
        _ => args.push(config.bond.clone().into()),
    }
    lagd_sys::launcher::Launcher::fork(lagctl, args)
}
