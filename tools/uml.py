#!/usr/bin/env python3
"""Runs a command as root inside another Linux kernel: Debian's user-mode-Linux (UML) builds.

    tools/uml.py list                      # the kernels, and which are installed
    tools/uml.py install [VERSION ...]     # fetch and unpack them (all three if none is named)
    tools/uml.py run VERSION [options] -- COMMAND [ARG ...]
    tools/uml.py testbin PACKAGE TEST      # build an integration test binary, print its path

For example, the fast path's hash tests in Debian 11's kernel:

    tools/uml.py run 5.10 -- $(tools/uml.py testbin lagd fastpath_hash) --test-threads=1

VERSION is 5.10 (Debian 11, bullseye), 6.1 (Debian 12, bookworm) or 6.12 (Debian 13, trixie),
or `all` to run the command in each in turn (exit code: the first that is not 0).
`run` installs the kernel if needed, boots it with the host's whole file system as its root
(hostfs, read-only), runs COMMAND as root in the guest and exits with COMMAND's exit code; its
output is the command's output. Options of `run`:

    --cwd DIR       the command's directory (default: the current one); mounted writable
    --rw DIR        another host directory the guest may write (repeatable)
    -e NAME[=VAL]   an environment variable for the command (NAME alone copies the host's)
    --mem SIZE      guest memory (default 2G)
    --timeout SEC   kill the guest after SEC seconds (default 900): exit code 124
    --modules LIST  kernel modules loaded before the command (comma-separated; default: ipv6,
                    8021q, bridge, vxlan, geneve, openvswitch, bonding, team and its modes, tun,
                    veth, dummy, macvlan, ifb, sch_ingress, cls_bpf, qdiscs and actions)
    --verbose       also print the kernel's boot and power-off messages
    --systemd       boot systemd as PID 1 (the host's /lib/systemd/systemd) and run COMMAND as
                    a service of it (`lagd-uml-command.service`, after basic.target, its
                    output on the console), so that it can use systemctl on a real systemd
    --keep          keep the run directory (the guest's init script and its dmesg)

Installing touches no host package state: each suite gets a private apt sources list, state and
cache under the cache directory (LAGD_UML_CACHE, default /var/cache/lagd-uml), `apt-get
download` fetches the user-mode-linux package from Debian's registry and `dpkg-deb -x` unpacks
it there. A kernel built against a newer glibc than the host's (trixie's) gets its suite's libc6
unpacked beside it, and its interpreter and library path pointed there (patchelf). Repeated
installs skip what is present.

With --systemd the guest's init mounts what it mounts otherwise (below), then tmpfs on
/var/tmp, /var/lib and /var/log (what systemd and a sandboxed service write to there), writes
two units to /run/systemd/system (a target, and the service that runs COMMAND and powers the
guest off as without --systemd) and executes systemd with `--unit=` that target. The root is
still the host's, read-only: systemd reads the host's units but changes none of its files.

Inside the guest: /proc, /sys, /dev (devtmpfs), /dev/pts, /dev/shm, bpffs on /sys/fs/bpf and
cgroup2 on /sys/fs/cgroup are mounted; /tmp, /run and /root are empty tmpfs; `modprobe` (on
PATH and as the kernel's module loader) finds the kernel's own modules under the cache; `lo`
is up. The guest has one CPU and no BPF JIT (programs run in the interpreter), and a system
call costs tens of microseconds: compare setups within one guest, not with the host.

Needs root (ptrace, hostfs of /), python3, apt-get and dpkg-deb, a C compiler (cc), kmod
(modprobe) and, for 6.12 on a glibc older than 2.38, patchelf. The UML kernels save a guest
thread's floating-point state with a buffer smaller than the XSAVE area of a host CPU with
AVX-512 or AMX, which the host kernel refuses; tools/uml-xstate.c, compiled into the cache and
preloaded into the UML kernel, fills the rest in (see there), and the guest's glibc is told not
to use AVX-512.
"""

import argparse
import fcntl
import hashlib
import json
import os
import re
import selectors
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
XSTATE_SOURCE = HERE / "uml-xstate.c"
MIRROR = os.environ.get("LAGD_UML_MIRROR", "http://deb.debian.org/debian")
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
PACKAGE = "user-mode-linux"

# Kernel series -> Debian suite whose user-mode-linux package carries it.
KERNELS = {"5.10": "bullseye", "6.1": "bookworm", "6.12": "trixie"}

DEFAULT_MODULES = [
    "ipv6", "8021q", "bridge", "vxlan", "geneve", "openvswitch", "bonding", "team", "team_mode_loadbalance", "team_mode_activebackup", "team_mode_roundrobin",
    "team_mode_broadcast", "tun", "veth", "dummy", "macvlan", "ifb", "sch_ingress", "cls_bpf",
    "act_gact", "act_mirred", "sch_netem", "sch_tbf", "sch_htb",
]
# Variables copied into the guest when set on the host (others need -e).
PASS_ENV = ["RUST_BACKTRACE", "RUST_LOG", "RUST_TEST_THREADS", "RUST_MIN_STACK", "NO_COLOR",
            "CARGO_TERM_COLOR"]
# glibc picks AVX-512 string routines on such CPUs; their upper registers are not switched
# between the threads of one guest process (tools/uml-xstate.c), so the guest does without.
GLIBC_TUNABLES = ("glibc.cpu.hwcaps=-AVX512F,-AVX512VL,-AVX512BW,-AVX512DQ,-AVX512CD,"
                  "-AVX512_VBMI,-AVX512_VBMI2,-AVX512_VNNI,-AVX512_BITALG,-AVX512_VPOPCNTDQ,"
                  "-AVX512_IFMA,-AVX512_BF16,-AVX512_FP16")
START = "::lagd-uml:start::"
END = "::lagd-uml:end::"
EXIT_TIMEOUT = 124
EXIT_GUEST = 125


def die(msg, code=2):
    print(f"uml: {msg}", file=sys.stderr)
    sys.exit(code)


def cache_root():
    return Path(os.environ.get("LAGD_UML_CACHE", "/var/cache/lagd-uml"))


def kernel_dir(version):
    return cache_root() / version


def check_version(version):
    if version not in KERNELS:
        die(f"unknown kernel {version!r}; known: {', '.join(KERNELS)}")


class Apt:
    """apt-get and apt-cache with a private sources list, state and cache for one suite."""

    def __init__(self, suite):
        self.base = cache_root() / "apt" / suite
        for d in ("state/lists/partial", "cache/archives/partial", "preferences.d"):
            (self.base / d).mkdir(parents=True, exist_ok=True)
        (self.base / "state/status").touch()
        (self.base / "sources.list").write_text(
            f"deb [signed-by={KEYRING}] {MIRROR} {suite} main\n")
        self.opts = [
            f"-oDir::Etc::SourceList={self.base}/sources.list",
            "-oDir::Etc::SourceParts=/dev/null",
            f"-oDir::Etc::Preferences={self.base}/preferences",
            f"-oDir::Etc::PreferencesParts={self.base}/preferences.d",
            f"-oDir::State={self.base}/state",
            f"-oDir::State::status={self.base}/state/status",
            f"-oDir::Cache={self.base}/cache",
            "-oAPT::Architecture=amd64",
            "-oAPT::Sandbox::User=root",
            "-oAcquire::IndexTargets::deb::DEP-11::DefaultEnabled=false",
            "-oAcquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false",
            "-oAcquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled=false",
            "-oAcquire::IndexTargets::deb::DEP-11-icons-hidpi::DefaultEnabled=false",
        ]

    def update(self):
        run_checked(["apt-get", "-qq", *self.opts, "update"])

    def field(self, package, name):
        out = run_checked(["apt-cache", *self.opts, "show", "--no-all-versions", package])
        m = re.search(rf"^{name}: (.*)$", out, re.M)
        return m.group(1).strip() if m else ""

    def download(self, package, into):
        run_checked(["apt-get", "-qq", *self.opts, "download", package], cwd=into)
        debs = sorted(Path(into).glob(f"{package}_*.deb"))
        if not debs:
            die(f"apt-get download {package} left no .deb in {into}")
        return debs[-1]


def run_checked(cmd, cwd=None):
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        die(f"{shlex.join(cmd)} failed ({r.returncode}):\n{r.stderr.strip()}")
    return r.stdout


def host_glibc():
    return os.confstr("CS_GNU_LIBC_VERSION").split()[-1]


def version_ge(a, b):
    return subprocess.run(["dpkg", "--compare-versions", a, "ge", b]).returncode == 0


class Lock:
    def __init__(self, path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.f = open(path, "w")

    def __enter__(self):
        fcntl.flock(self.f, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.f, fcntl.LOCK_UN)
        self.f.close()


def installed(version):
    d = kernel_dir(version)
    return (d / "ready").exists()


def install(version):
    check_version(version)
    with Lock(cache_root() / ".lock"):
        if installed(version):
            return
        t0 = time.monotonic()
        suite = KERNELS[version]
        d = kernel_dir(version)
        if d.exists():
            shutil.rmtree(d)
        (d / "debs").mkdir(parents=True)
        apt = Apt(suite)
        apt.update()
        deb = apt.download(PACKAGE, d / "debs")
        pkg_version = apt.field(PACKAGE, "Version")
        built_using = apt.field(PACKAGE, "Built-Using")
        run_checked(["dpkg-deb", "-x", str(deb), str(d / "root")])
        mods = sorted((d / "root/usr/lib/uml/modules").iterdir())
        if len(mods) != 1:
            die(f"{deb.name}: expected one module tree, found {[m.name for m in mods]}")
        release = mods[0].name
        if not release.startswith(version + "."):
            die(f"{deb.name} carries kernel {release}, not {version}")
        binary = d / "root/usr/bin/linux.uml"
        # The kernel's glibc: Depends: libc6 (>= X).
        m = re.search(r"libc6 \(>= ([^)]+)\)", apt.field(PACKAGE, "Depends"))
        need = m.group(1) if m else "0"
        if not version_ge(host_glibc(), need):
            if not shutil.which("patchelf"):
                die(f"kernel {version} needs glibc >= {need} (host has {host_glibc()}): "
                    "install patchelf so that it can run with its suite's libc6")
            libc_deb = apt.download("libc6", d / "debs")
            run_checked(["dpkg-deb", "-x", str(libc_deb), str(d / "libc")])
            libdir = d / "libc/usr/lib/x86_64-linux-gnu"
            run_checked(["patchelf", "--set-interpreter", str(libdir / "ld-linux-x86-64.so.2"),
                         "--set-rpath", str(libdir), str(binary)])
            note = f"libc6 {apt.field('libc6', 'Version')} from {suite}"
        else:
            note = "host glibc"
        # modprobe -d ROOT reads ROOT/lib/modules/RELEASE: a tree of one link.
        (d / "modroot/lib/modules").mkdir(parents=True)
        os.symlink(mods[0], d / f"modroot/lib/modules/{release}")
        (d / "info").write_text(
            f"package={PACKAGE} {pkg_version}\nsuite={suite}\nrelease={release}\n"
            f"built_using={built_using}\nglibc={note}\n")
        shutil.rmtree(d / "debs")
        (d / "ready").write_text("")
        print(f"uml: installed {version}: {PACKAGE} {pkg_version} ({suite}), kernel {release}, "
              f"{note}, {time.monotonic() - t0:.1f} s", file=sys.stderr)


def info(version):
    d = kernel_dir(version)
    out = {}
    if (d / "info").exists():
        for line in (d / "info").read_text().splitlines():
            k, _, v = line.partition("=")
            out[k] = v
    return out


def xstate_shim():
    """The preload library, compiled once per source version."""
    if not XSTATE_SOURCE.exists():
        die(f"{XSTATE_SOURCE} missing")
    tag = hashlib.sha256(XSTATE_SOURCE.read_bytes()).hexdigest()[:12]
    lib = cache_root() / f"uml-xstate-{tag}.so"
    if lib.exists():
        return lib
    cc = shutil.which("cc") or die("no C compiler (cc) for tools/uml-xstate.c")
    tmp = lib.with_suffix(f".{os.getpid()}.tmp")
    run_checked([cc, "-O2", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-o", str(tmp),
                 str(XSTATE_SOURCE)])
    os.replace(tmp, lib)
    return lib


def parse_env(items):
    env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"), "HOME": "/root",
           "LANG": "C.UTF-8", "TERM": "dumb", "GLIBC_TUNABLES": GLIBC_TUNABLES}
    for name in PASS_ENV:
        if name in os.environ:
            env[name] = os.environ[name]
    for item in items:
        name, eq, value = item.partition("=")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            die(f"-e {item!r}: not NAME or NAME=VALUE")
        if not eq:
            if name not in os.environ:
                die(f"-e {name}: not set on the host")
            value = os.environ[name]
        env[name] = value
    return env


def init_script(version, rundir, cwd, rw, env, modules, command, systemd=False):
    d = kernel_dir(version)
    q = shlex.quote
    release = info(version)["release"]
    modroot = d / "modroot"
    lines = [
        "#!/bin/sh",
        "# PID 1 of a lagd UML guest, written by tools/uml.py.",
        "export PATH=/usr/sbin:/usr/bin:/sbin:/bin",
        "m() { mount \"$@\" || echo \"uml: mount $* failed\"; }",
        "m -t proc proc /proc",
        "m -t sysfs sysfs /sys",
        "m -t devtmpfs devtmpfs /dev",
        "mkdir -p /dev/pts /dev/shm",
        "m -t devpts -o newinstance,ptmxmode=0666 devpts /dev/pts",
        "m -t tmpfs -o mode=1777 shm /dev/shm",
        "m -t tmpfs -o mode=1777 tmp /tmp",
        "m -t tmpfs -o mode=755 run /run",
        "m -t tmpfs -o mode=700 root /root",
        "m -t bpf bpf /sys/fs/bpf",
        "m -t cgroup2 cgroup2 /sys/fs/cgroup",
        "m -t debugfs debugfs /sys/kernel/debug 2>/dev/null",
        "mkdir -p /run/lagd-uml",
        f"m -t hostfs -o {rundir} hostfs /run/lagd-uml",
        f"[ \"$(uname -r)\" = {q(release)} ] || echo \"uml: kernel $(uname -r), expected {release}\"",
        # modprobe for the command (on PATH) and for the kernel's own module requests.
        "mkdir -p /run/lagd-uml-bin",
        "cat > /run/lagd-uml-bin/modprobe <<'EOF'",
        "#!/bin/sh",
        f"exec /sbin/modprobe -d {q(str(modroot))} \"$@\"",
        "EOF",
        "chmod 755 /run/lagd-uml-bin/modprobe",
        "echo /run/lagd-uml-bin/modprobe > /proc/sys/kernel/modprobe",
    ]
    for mod in modules:
        lines.append(f"/run/lagd-uml-bin/modprobe -q {q(mod)} || echo 'uml: no module {mod}'")
    for w in rw:
        lines.append(f"mkdir -p {q(w)} 2>/dev/null; m -t hostfs -o {w} hostfs {q(w)}")
    lines += [
        "echo lagd-uml > /proc/sys/kernel/hostname",
        "ip link set lo up 2>/dev/null",
        "ulimit -n 65536 2>/dev/null",
        "ulimit -l unlimited 2>/dev/null",
    ]
    body = []
    for k, v in env.items():
        if k == "PATH":
            v = "/run/lagd-uml-bin:" + v
        body.append(f"export {k}={q(v)}")
    body += [
        f"cd {q(cwd)} || {{ echo 'uml: cannot enter {cwd}'; echo 126 > /run/lagd-uml/rc; "
        "echo o > /proc/sysrq-trigger; sleep 30; }",
        f"echo {START}",
        f"{shlex.join(command)} </dev/null",
        "rc=$?",
        f"echo {END}",
        "echo $rc > /run/lagd-uml/rc",
        "dmesg > /run/lagd-uml/dmesg 2>/dev/null",
        "cd /",
    ]
    for w in reversed(rw):
        body.append(f"umount {q(w)} 2>/dev/null")
    body += [
        "sync",
        "umount /run/lagd-uml",
        "echo o > /proc/sysrq-trigger",
        "sleep 60",
    ]
    if not systemd:
        return "\n".join(lines + body) + "\n"
    # systemd as PID 1: the command runs as a service of a target of its own, which is all
    # systemd is asked to start. The units live in /run/systemd/system (the guest's tmpfs);
    # the root stays the host's, read-only, so nothing of the host's /etc or /var changes.
    # What systemd and a sandboxed service write outside /run gets a tmpfs of the guest's.
    lines += [
        "m -t tmpfs -o mode=1777 vartmp /var/tmp",
        "m -t tmpfs -o mode=755 varlib /var/lib",
        "m -t tmpfs -o mode=755 varlog /var/log",
        "mkdir -p /run/systemd/system",
        "cat > /run/lagd-uml-bin/command <<'LAGD_UML_EOF'",
        "#!/bin/sh",
        *body,
        "LAGD_UML_EOF",
        "chmod 755 /run/lagd-uml-bin/command",
        "cat > /run/systemd/system/lagd-uml.target <<'EOF'",
        "[Unit]",
        "Description=the command of a lagd UML guest",
        "Requires=lagd-uml-command.service",
        "After=lagd-uml-command.service",
        "EOF",
        "cat > /run/systemd/system/lagd-uml-command.service <<'EOF'",
        "[Unit]",
        "Description=the command of a lagd UML guest",
        "After=basic.target",
        "Requires=basic.target",
        "[Service]",
        "Type=exec",
        "ExecStart=/run/lagd-uml-bin/command",
        "StandardInput=null",
        "StandardOutput=tty",
        "StandardError=inherit",
        "TTYPath=/dev/console",
        "TimeoutStartSec=infinity",
        "EOF",
        "exec /lib/systemd/systemd --system --unit=lagd-uml.target --log-target=kmsg "
        "--show-status=0",
    ]
    return "\n".join(lines) + "\n"


def run(args):
    version = args.version
    install(version)
    command = args.command
    if not command:
        die("run: no command (tools/uml.py run VERSION -- COMMAND ...)")
    cwd = str(Path(args.cwd or os.getcwd()).resolve())
    rw = []
    for w in [cwd, *args.rw]:
        p = str(Path(w).resolve())
        if "," in p or not Path(p).is_dir():
            die(f"{p}: not a directory hostfs can mount (no commas)")
        if p != "/" and p not in rw:
            rw.append(p)
    env = parse_env(args.env)
    modules = [m for m in args.modules.split(",") if m] if args.modules is not None \
        else DEFAULT_MODULES
    shim = xstate_shim()
    d = kernel_dir(version)
    rundir = Path(tempfile.mkdtemp(prefix=f"lagd-uml-{version}-", dir="/tmp"))
    try:
        init = rundir / "init"
        init.write_text(init_script(version, rundir, cwd, rw, env, modules, command,
                                     args.systemd))
        init.chmod(0o755)
        umid = f"lagd-{version}-{os.getpid()}"
        cmdline = [
            str(d / "root/usr/bin/linux.uml"), f"mem={args.mem}", "root=/dev/root",
            "rootfstype=hostfs", "rootflags=/", "ro", f"init={init}", "con0=null,fd:1",
            "con=null", "ssl=null", f"umid={umid}", f"uml_dir={rundir}",
            "quiet" if not args.verbose else "loglevel=7",
        ]
        host_env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "TMPDIR": "/dev/shm",
                    "LD_PRELOAD": str(shim), "HOME": "/root"}
        return boot(cmdline, host_env, rundir, args.timeout, args.verbose, version)
    finally:
        if args.keep:
            print(f"uml: kept {rundir}", file=sys.stderr)
        else:
            shutil.rmtree(rundir, ignore_errors=True)


def run_all(args):
    """`run` in each kernel in turn; the first non-zero exit code, after a summary."""
    results = []
    for version in KERNELS:
        print(f"uml: --- Linux {version}", file=sys.stderr, flush=True)
        t0 = time.monotonic()
        args.version = version
        results.append((version, run(args), time.monotonic() - t0))
    for version, rc, took in results:
        print(f"uml: Linux {version}: exit code {rc}, {took:.1f} s", file=sys.stderr)
    return next((rc for _, rc, _ in results if rc != 0), 0)


def boot(cmdline, host_env, rundir, timeout, verbose, version):
    t0 = time.monotonic()
    proc = subprocess.Popen(cmdline, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env=host_env, cwd=rundir,
                            start_new_session=True)
    try:
        return supervise(proc, rundir, timeout, verbose, version, t0)
    finally:
        # However this ends (also Ctrl-C, or SIGTERM from a CI timeout), the guest goes: the
        # UML kernel and its helper processes are the session and process group it started.
        stop_guest(proc)


def stop_guest(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    # Its helper processes die with it; wait (briefly) until the group is gone.
    for _ in range(50):
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)


def supervise(proc, rundir, timeout, verbose, version, t0):
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    phase = "boot"  # boot -> command -> end
    boot_log = []
    pending = b""
    timed_out = False
    out = sys.stdout.buffer

    def emit(line):
        nonlocal phase
        text = line.replace(b"\r", b"")
        stripped = text.strip()
        if stripped == START.encode() and phase == "boot":
            phase = "command"
            return
        if stripped == END.encode() and phase == "command":
            phase = "end"
            return
        if phase == "command" or verbose:
            out.write(text)
            out.flush()
        elif phase == "boot":
            boot_log.append(text)

    while True:
        left = timeout - (time.monotonic() - t0)
        if left <= 0:
            timed_out = True
            break
        if not sel.select(timeout=min(left, 1.0)):
            if proc.poll() is not None:
                break
            continue
        chunk = os.read(proc.stdout.fileno(), 65536)
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            emit(line + b"\n")
    if pending:
        emit(pending + b"\n")
    stop_guest(proc)
    elapsed = time.monotonic() - t0
    if timed_out:
        print(f"uml: {version}: timed out after {timeout} s; guest killed", file=sys.stderr)
        return EXIT_TIMEOUT
    rc_file = rundir / "rc"
    if not rc_file.exists():
        if phase == "boot" and not verbose:
            sys.stderr.buffer.write(b"".join(boot_log[-40:]))
        print(f"uml: {version}: the guest stopped without the command's exit code "
              f"(reached: {phase})", file=sys.stderr)
        return EXIT_GUEST
    rc = int(rc_file.read_text().strip() or EXIT_GUEST)
    print(f"uml: {version}: exit code {rc}, {elapsed:.1f} s", file=sys.stderr)
    return rc


def cmd_testbin(args):
    """Builds integration test TEST of PACKAGE (cargo test --no-run) and prints its path."""
    cmd = ["cargo", "test", "-p", args.package, "--test", args.test, "--no-run",
           "--locked", "--message-format=json"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    paths = []
    for line in r.stdout.splitlines():
        try:
            m = json.loads(line)
        except ValueError:
            continue
        if (m.get("reason") == "compiler-artifact" and m.get("executable")
                and m["target"]["name"] == args.test):
            paths.append(m["executable"])
    if r.returncode != 0 or not paths:
        sys.stderr.write(r.stderr)
        die(f"{shlex.join(cmd[:-1])} built no test binary")
    print(paths[-1])
    return 0


def cmd_list(_args):
    for version, suite in KERNELS.items():
        if installed(version):
            i = info(version)
            state = f"installed: {i.get('package', '?')}, kernel {i.get('release', '?')}"
        else:
            state = "not installed"
        print(f"{version:5} {suite:9} {state}")
    return 0


def cmd_install(args):
    for version in args.versions or list(KERNELS):
        install(version)
    return 0


def on_sigterm(_signum, _frame):
    raise SystemExit(143)


def main():
    signal.signal(signal.SIGTERM, on_sigterm)
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="what", required=True)
    sub.add_parser("list", help="the kernels and which are installed")
    pi = sub.add_parser("install", help="fetch and unpack kernels")
    pi.add_argument("versions", nargs="*")
    pt = sub.add_parser("testbin", help="build an integration test binary, print its path")
    pt.add_argument("package")
    pt.add_argument("test")
    pr = sub.add_parser("run", help="run a command as root inside a kernel")
    pr.add_argument("version")
    pr.add_argument("--cwd")
    pr.add_argument("--rw", action="append", default=[])
    pr.add_argument("-e", "--env", action="append", default=[])
    pr.add_argument("--mem", default="2G")
    pr.add_argument("--timeout", type=float, default=900)
    pr.add_argument("--modules")
    pr.add_argument("--verbose", action="store_true")
    pr.add_argument("--systemd", action="store_true",
                    help="boot systemd as PID 1 and run the command as a service")
    pr.add_argument("--keep", action="store_true", help="keep the run directory (dmesg, init)")
    argv = sys.argv[1:]
    command = []
    if "--" in argv:
        at = argv.index("--")
        argv, command = argv[:at], argv[at + 1:]
    args = p.parse_args(argv)
    args.command = command
    if args.what == "testbin":
        return cmd_testbin(args)
    if os.geteuid() != 0:
        die("must run as root (the guest's hostfs root is the host's /, and ptrace)")
    if args.what == "run":
        if args.version == "all":
            return run_all(args)
        check_version(args.version)
        return run(args)
    if args.what == "install":
        for v in args.versions:
            check_version(v)
        return cmd_install(args)
    return cmd_list(args)


if __name__ == "__main__":
    sys.exit(main())
