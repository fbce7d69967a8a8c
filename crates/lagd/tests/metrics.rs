//! Metrics from running bonds: lagd serves them over HTTP (TCP or a Unix socket), `lagctl
//! metrics` prints them, Prometheus's own `promtool check metrics` accepts them, and they follow
//! the bond (a member down, a failover, a member up but not distributing). Also the start-up
//! warnings that `lagctl show` displays. Needs root and network namespaces; fails (never skips)
//! without them.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use lagd::control::query_status;
use lagd_lab::topology::{ProcessId, Side, Topology, is_root, require_program};

const LAGD: &str = env!("CARGO_BIN_EXE_lagd");
const LAGCTL: &str = env!("CARGO_BIN_EXE_lagctl");

/// Starts lagd in `side` as bond `bond` over every link with `opts` and `extra` arguments, and
/// waits (up to 10 s) until its control socket answers.
fn start(
    topo: &mut Topology,
    side: Side,
    bond: &str,
    opts: &str,
    extra: &[&str],
) -> (ProcessId, PathBuf) {
    let members = topo.member_list();
    let control = topo.dir().join(format!("{bond}.sock"));
    let control_s = control.to_string_lossy().into_owned();
    let mut args = vec![
        "--bond",
        bond,
        "--members",
        &members,
        "--opts",
        opts,
        "--control",
        &control_s,
    ];
    args.extend_from_slice(extra);
    let id = topo
        .spawn(
            side,
            &format!("lagd-{}", side.letter()),
            Path::new(LAGD),
            &args,
        )
        .expect("start lagd");
    let deadline = Instant::now() + Duration::from_secs(10);
    while query_status(&control).is_err() {
        assert!(
            Instant::now() < deadline,
            "lagd did not come up:\n{}",
            topo.log_tail(id, 20)
        );
        thread::sleep(Duration::from_millis(50));
    }
    (id, control)
}

/// An HTTP GET of `/metrics` over `stream`: the status line and the body.
fn http_get(mut stream: impl Read + Write) -> (String, String) {
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: lagd\r\n\r\n")
        .unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    let (head, body) = reply.split_once("\r\n\r\n").expect("an HTTP reply");
    (
        head.lines().next().unwrap_or("").to_owned(),
        body.to_owned(),
    )
}

/// Scrapes metrics from a Unix socket.
fn scrape_unix(path: &Path) -> String {
    let s = UnixStream::connect(path).expect("connect to the metrics socket");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let (status, body) = http_get(s);
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    body
}

/// The value of the sample `name` whose labels include every pair of `labels`.
fn value(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let (series, v) = l.rsplit_once(' ')?;
        let (n, rest) = series.split_once('{').unwrap_or((series, "}"));
        if n != name {
            return None;
        }
        let set = rest.strip_suffix('}')?;
        let all = labels
            .iter()
            .all(|(k, want)| set.split(',').any(|p| p == format!("{k}=\"{want}\"")));
        all.then(|| v.parse().ok()).flatten()
    })
}

/// Runs `promtool check metrics` on `text`; panics with its findings unless it passes.
fn promtool_accepts(text: &str) {
    require_program("promtool", "prometheus").unwrap();
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool check metrics: {}\n{}{}\n--- metrics:\n{text}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Scrapes until `ok` holds for the metrics (up to `within`); returns the last scrape.
fn wait_metrics(path: &Path, within: Duration, what: &str, ok: impl Fn(&str) -> bool) -> String {
    let t = Instant::now();
    loop {
        let m = scrape_unix(path);
        if ok(&m) {
            return m;
        }
        assert!(
            t.elapsed() < within,
            "{what} not seen within {within:?}:\n{m}"
        );
        thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn lacp_bond_metrics_follow_the_bond_and_pass_promtool() {
    assert!(is_root(), "network namespace tests need root");
    require_program("promtool", "prometheus").unwrap();
    let mut topo = Topology::create(3).expect("create topology");
    let links: Vec<String> = topo.links().iter().map(|l| l.name.clone()).collect();
    let opts = "mode=802.3ad lacp_rate=fast miimon=100 xmit_hash_policy=layer3+4";
    let bond_a = format!("{}ba", topo.tag());
    let bond_b = format!("{}bb", topo.tag());
    let metrics_a = topo.dir().join("a.metrics");
    let unix_a = format!("unix:{}", metrics_a.display());
    let (lagd_b, _) = start(
        &mut topo,
        Side::B,
        &bond_b,
        opts,
        &["--metrics", "127.0.0.1:9105"],
    );
    let (_, control_a) = start(&mut topo, Side::A, &bond_a, opts, &["--metrics", &unix_a]);

    let m = wait_metrics(
        &metrics_a,
        Duration::from_secs(20),
        "3 members distributing, as their partner says too",
        // The partner's bits are those of its latest LACPDU, which may come a moment after
        // this side's aggregator took the member.
        |m| {
            value(m, "lagd_agg_active_aggregator_ports", &[]) == Some(3.0)
                && links.iter().all(|l| {
                    let b = [("member", l.as_str()), ("bit", "distributing")];
                    value(m, "lagd_agg_port_partner_oper_state_bit", &b) == Some(1.0)
                })
        },
    );
    promtool_accepts(&m);
    let master = [("master", bond_a.as_str())];
    assert_eq!(value(&m, "node_bonding_slaves", &master), Some(3.0));
    assert_eq!(value(&m, "node_bonding_active", &master), Some(3.0));
    assert_eq!(value(&m, "lagd_bond_up", &[]), Some(1.0));
    assert_eq!(
        value(&m, "lagd_bond_members_up_not_distributing", &[]),
        Some(0.0)
    );
    let agg = value(&m, "lagd_agg_active_aggregator_id", &[]).unwrap();
    assert!(agg > 0.0);
    for l in &links {
        let member = [("member", l.as_str())];
        assert!(value(&m, "lagd_agg_port_stats_lacpdus_rx_total", &member).unwrap() > 0.0);
        assert!(value(&m, "lagd_agg_port_stats_lacpdus_tx_total", &member).unwrap() > 0.0);
        assert_eq!(
            value(&m, "lagd_agg_port_selected_agg_id", &member),
            Some(agg)
        );
        assert_eq!(
            value(&m, "lagd_agg_port_attached_agg_id", &member),
            Some(agg)
        );
        for bit in [
            "activity",
            "timeout",
            "aggregation",
            "synchronization",
            "distributing",
        ] {
            let b = [("member", l.as_str()), ("bit", bit)];
            assert_eq!(
                value(&m, "lagd_agg_port_actor_oper_state_bit", &b),
                Some(1.0),
                "actor {bit} on {l}"
            );
            assert_eq!(
                value(&m, "lagd_agg_port_partner_oper_state_bit", &b),
                Some(1.0),
                "partner {bit} on {l}"
            );
        }
        let none = [("member", l.as_str()), ("state", "none")];
        assert_eq!(
            value(&m, "lagd_agg_port_debug_actor_churn_state", &none),
            Some(1.0)
        );
        assert_eq!(value(&m, "lagd_member_up", &member), Some(1.0));
    }
    let path = [("path", "lagd")];
    let kernel = [("path", "kernel")];
    let on_path = value(&m, "lagd_bond_dataplane_path", &path).unwrap()
        + value(&m, "lagd_bond_dataplane_path", &kernel).unwrap();
    assert_eq!(on_path, 1.0, "exactly one path carries the frames");
    // On the kernel path its attachment is named; on lagd's there is none.
    let attach: Vec<Option<f64>> = ["tcx", "tc"]
        .iter()
        .map(|a| value(&m, "lagd_bond_fastpath_attach", &[("attach", a)]))
        .collect();
    if value(&m, "lagd_bond_dataplane_path", &kernel) == Some(1.0) {
        assert!(
            attach == [Some(1.0), Some(0.0)] || attach == [Some(0.0), Some(1.0)],
            "exactly one attachment: {attach:?}"
        );
    } else {
        assert_eq!(attach, [None, None]);
    }

    // The other end serves over TCP, on loopback in its own namespace.
    let body = topo
        .in_ns(Side::B, || {
            let s = TcpStream::connect("127.0.0.1:9105").expect("connect to B's metrics");
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            http_get(s)
        })
        .unwrap();
    assert_eq!(body.0, "HTTP/1.1 200 OK");
    assert_eq!(
        value(
            &body.1,
            "node_bonding_slaves",
            &[("master", bond_b.as_str())]
        ),
        Some(3.0)
    );
    promtool_accepts(&body.1);

    // `lagctl metrics` prints the same families.
    let out = Command::new(LAGCTL)
        .args(["metrics", "--control"])
        .arg(&control_a)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8(out.stdout).unwrap();
    assert_eq!(value(&printed, "node_bonding_slaves", &master), Some(3.0));
    promtool_accepts(&printed);

    // A member down: one fewer active, its link failure counted.
    topo.set_link_down(Side::B, 0).unwrap();
    let m = wait_metrics(&metrics_a, Duration::from_secs(10), "member 0 down", |m| {
        value(m, "node_bonding_active", &master) == Some(2.0)
    });
    let m0 = [("member", links[0].as_str())];
    assert_eq!(value(&m, "lagd_member_up", &m0), Some(0.0));
    assert_eq!(
        value(
            &m,
            "lagd_member_mii_status",
            &[("member", &links[0]), ("state", "down")]
        ),
        Some(1.0)
    );
    assert_eq!(value(&m, "lagd_member_link_failures_total", &m0), Some(1.0));
    assert_eq!(value(&m, "node_bonding_slaves", &master), Some(3.0));

    // A member whose carrier stays up but whose LACPDUs are lost: up, not distributing (the
    // case node_exporter's "bond degraded" alert does not see: its slaves are all up).
    let lost = topo.drop_slow_protocols(&links[2]).unwrap();
    let m = wait_metrics(
        &metrics_a,
        Duration::from_secs(15),
        "member 2 up but not distributing",
        |m| value(m, "lagd_bond_members_up_not_distributing", &[]) == Some(1.0),
    );
    let m2 = [("member", links[2].as_str())];
    assert_eq!(value(&m, "lagd_member_up", &m2), Some(1.0));
    assert_eq!(value(&m, "lagd_agg_port_distributing", &m2), Some(0.0));
    assert_eq!(value(&m, "node_bonding_active", &master), Some(2.0));
    promtool_accepts(&m);
    drop(lost);

    // The partner gone (host B's lagd stops; it gives member 0 back its carrier as it found
    // it, and no link loses carrier): once its information times out, every member is up but
    // none distributes, the bond is down, and node_exporter's gauges (slaves up) are blind to it.
    let m = wait_metrics(&metrics_a, Duration::from_secs(15), "member 2 back", |m| {
        value(m, "lagd_bond_members_up_not_distributing", &[]) == Some(0.0)
    });
    assert_eq!(value(&m, "lagd_bond_up", &[]), Some(1.0));
    let events = EventStream::start(&control_a);
    topo.stop(lagd_b);
    let m = wait_metrics(
        &metrics_a,
        Duration::from_secs(15),
        "the partner gone",
        |m| value(m, "lagd_bond_members_up_not_distributing", &[]) == Some(3.0),
    );
    promtool_accepts(&m);
    assert_eq!(value(&m, "lagd_bond_up", &[]), Some(0.0));
    assert_eq!(value(&m, "node_bonding_active", &master), Some(3.0));
    assert_eq!(
        value(&m, "lagd_agg_active_aggregator_ports", &[]).unwrap_or(0.0),
        0.0,
        "no port aggregates"
    );
    for l in &links {
        let member = [("member", l.as_str())];
        assert_eq!(value(&m, "lagd_member_up", &member), Some(1.0), "{l}");
        assert_eq!(value(&m, "lagd_agg_port_distributing", &member), Some(0.0));
        let sync = [("member", l.as_str()), ("bit", "synchronization")];
        assert_eq!(
            value(&m, "lagd_agg_port_partner_oper_state_bit", &sync),
            Some(0.0),
            "{l}: no partner in sync"
        );
    }
    // `lagctl events` told: the partner of each member gone, and nothing distributing.
    let mut partners_gone = Vec::new();
    let mut distributing = None;
    let t = Instant::now();
    let none = serde_json::json!([]);
    while partners_gone.len() < links.len() || distributing.as_ref() != Some(&none) {
        let v = events.next(Duration::from_secs(5));
        match v["event"].as_str() {
            Some("lacp-partner") if v["system"].is_null() => {
                partners_gone.push(v["member"].as_str().unwrap().to_owned());
            }
            Some("lacp") => {
                assert!(v.get("aggregator").is_some(), "{v}");
                distributing = Some(v["distributing"].clone());
            }
            _ => {}
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{partners_gone:?} {distributing:?}"
        );
    }
    partners_gone.sort();
    assert_eq!(partners_gone, links);
    topo.teardown().unwrap();
}

#[test]
fn active_backup_failover_in_metrics_and_warnings_in_show() {
    assert!(is_root(), "network namespace tests need root");
    require_program("promtool", "prometheus").unwrap();
    let mut topo = Topology::create(2).expect("create topology");
    let links: Vec<String> = topo.links().iter().map(|l| l.name.clone()).collect();
    let bond_b = format!("{}bb", topo.tag());
    start(
        &mut topo,
        Side::B,
        &bond_b,
        "mode=active-backup miimon=50",
        &[],
    );
    // Host A's options hurt twice: no link monitoring, and a hash policy the mode ignores.
    let bond_a = format!("{}ba", topo.tag());
    let metrics_a = topo.dir().join("a.metrics");
    let unix_a = format!("unix:{}", metrics_a.display());
    let (_, control_a) = start(
        &mut topo,
        Side::A,
        &bond_a,
        "mode=active-backup xmit_hash_policy=layer3+4",
        &["--metrics", &unix_a],
    );
    let show = Command::new(LAGCTL)
        .args(["show", "--control"])
        .arg(&control_a)
        .output()
        .unwrap();
    assert!(show.status.success());
    let text = String::from_utf8(show.stdout).unwrap();
    let warnings: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("Warning: "))
        .collect();
    assert_eq!(warnings.len(), 2, "{text}");
    assert!(warnings[0].contains("without link monitoring"), "{text}");
    assert!(
        warnings[1].contains("xmit_hash_policy is ignored in mode active-backup"),
        "{text}"
    );
    let control_b = topo.dir().join(format!("{bond_b}.sock"));
    let show_b = Command::new(LAGCTL)
        .args(["show", "--control"])
        .arg(&control_b)
        .output()
        .unwrap();
    let text_b = String::from_utf8(show_b.stdout).unwrap();
    assert!(
        !text_b.contains("Warning"),
        "a clean config warns of nothing:\n{text_b}"
    );

    let m = scrape_unix(&metrics_a);
    promtool_accepts(&m);
    let m0 = [("member", links[0].as_str())];
    let m1 = [("member", links[1].as_str())];
    assert_eq!(value(&m, "lagd_bond_warnings", &[]), Some(2.0));
    assert_eq!(value(&m, "lagd_bond_failovers_total", &[]), Some(0.0));
    assert_eq!(value(&m, "lagd_bond_active_member", &m0), Some(1.0));
    assert_eq!(value(&m, "lagd_bond_active_member", &m1), Some(0.0));

    // The active member's link goes down: the other takes over, counted once.
    topo.set_link_down(Side::B, 0).unwrap();
    let m = wait_metrics(&metrics_a, Duration::from_secs(10), "failover", |m| {
        value(m, "lagd_bond_failovers_total", &[]) == Some(1.0)
    });
    assert_eq!(value(&m, "lagd_bond_active_member", &m0), Some(0.0));
    assert_eq!(value(&m, "lagd_bond_active_member", &m1), Some(1.0));
    assert_eq!(
        value(&m, "node_bonding_active", &[("master", bond_a.as_str())]),
        Some(1.0)
    );
    promtool_accepts(&m);
    topo.teardown().unwrap();
}

#[test]
fn bad_metrics_addresses_are_refused_at_start() {
    // Refused while reading the configuration: no root, no interface needed.
    for (addr, word) in [
        ("0.0.0.0:9105", "not a loopback address"),
        ("localhost", "is not ADDRESS:PORT"),
        ("unix:relative.sock", "absolute path"),
    ] {
        let out = Command::new(LAGD)
            .args(["--bond", "mtest0", "--members", "mtest1", "--metrics", addr])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{addr}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--metrics") && err.contains(word),
            "{addr}: {err}"
        );
    }
    let out = Command::new(LAGD)
        .args(["--metrics-allow-remote", "--bond", "b", "--members", "m"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "--metrics-allow-remote needs --metrics"
    );
}

/// lagd against Open vSwitch's LACP (balance-tcp, fast): the partner's state bits in the
/// metrics are what OVS sends, and a member down shows.
#[test]
fn metrics_against_open_vswitch() {
    use lagd_lab::dataplane::{OVS_BALANCE_TCP_FAST_LACP, start_ovs_bond};
    assert!(is_root(), "the Open vSwitch tests need root");
    require_program("promtool", "prometheus").unwrap();
    let mut topo = Topology::create(2).expect("create topology");
    let links: Vec<String> = topo.links().iter().map(|l| l.name.clone()).collect();
    let bridge = format!("{}br", topo.tag());
    let ovs = start_ovs_bond(&mut topo, Side::B, &bridge, &OVS_BALANCE_TCP_FAST_LACP)
        .expect("start Open vSwitch with its bond");
    let bond = format!("{}ba", topo.tag());
    let metrics = topo.dir().join("a.metrics");
    let unix = format!("unix:{}", metrics.display());
    start(
        &mut topo,
        Side::A,
        &bond,
        "mode=802.3ad lacp_rate=fast xmit_hash_policy=layer3+4",
        &["--metrics", &unix],
    );
    let m = wait_metrics(
        &metrics,
        Duration::from_secs(30),
        "aggregated with OVS",
        |m| value(m, "lagd_agg_active_aggregator_ports", &[]) == Some(2.0),
    );
    promtool_accepts(&m);
    for l in &links {
        assert!(value(&m, "lagd_agg_port_stats_lacpdus_rx_total", &[("member", l)]).unwrap() > 0.0);
        for bit in [
            "activity",
            "timeout",
            "aggregation",
            "synchronization",
            "collecting",
            "distributing",
        ] {
            assert_eq!(
                value(
                    &m,
                    "lagd_agg_port_partner_oper_state_bit",
                    &[("member", l), ("bit", bit)]
                ),
                Some(1.0),
                "OVS's {bit} on {l}"
            );
        }
        assert_eq!(
            value(
                &m,
                "lagd_agg_port_partner_oper_state_bit",
                &[("member", l), ("bit", "defaulted")]
            ),
            Some(0.0)
        );
    }
    topo.set_link_down(Side::B, 1).unwrap();
    let m = wait_metrics(&metrics, Duration::from_secs(10), "member 1 down", |m| {
        value(m, "node_bonding_active", &[("master", bond.as_str())]) == Some(1.0)
    });
    assert_eq!(
        value(&m, "lagd_agg_active_aggregator_ports", &[]),
        Some(1.0)
    );
    assert_eq!(
        value(
            &m,
            "lagd_member_link_failures_total",
            &[("member", &links[1])]
        ),
        Some(1.0)
    );
    promtool_accepts(&m);
    drop(ovs);
    topo.teardown().unwrap();
}

mod common;

/// layer2 hashing towards one peer: every frame takes the same member, and `lagctl show` says
/// so once the counters show it (a warning the configuration alone cannot give).
#[test]
fn layer2_towards_a_single_peer_is_warned_at_run_time() {
    use std::net::UdpSocket;
    assert!(is_root(), "network namespace tests need root");
    let mut topo = Topology::create(2).expect("create topology");
    let opts = "mode=balance-xor miimon=100 xmit_hash_policy=layer2";
    let bonds = [format!("{}ba", topo.tag()), format!("{}bb", topo.tag())];
    let (_, control_b) = start(&mut topo, Side::B, &bonds[1], opts, &[]);
    let (_, control_a) = start(&mut topo, Side::A, &bonds[0], opts, &[]);
    let addrs = common::address_bonds(&topo, &bonds);
    let show = |control: &Path| {
        let out = Command::new(LAGCTL)
            .args(["show", "--control"])
            .arg(control)
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    assert!(
        !show(&control_a).contains("Warning"),
        "{}",
        show(&control_a)
    );
    let peer = (addrs[1], 9);
    topo.in_ns(Side::A, || {
        let sock = UdpSocket::bind("0.0.0.0:0").unwrap();
        for i in 0..3000 {
            let _ = sock.send_to(&[0u8; 64], peer);
            if i % 100 == 0 {
                thread::sleep(Duration::from_millis(5));
            }
        }
    })
    .unwrap();
    let t = Instant::now();
    loop {
        let text = show(&control_a);
        if let Some(w) = text
            .lines()
            .find(|l| l.starts_with("Warning: layer2 hashing sent"))
        {
            assert!(w.contains("2 members usable"), "{w}");
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "no run-time warning:\n{text}"
        );
        thread::sleep(Duration::from_millis(100));
    }
    // The receiving end sent next to nothing: no warning there.
    assert!(
        !show(&control_b).contains("Warning"),
        "{}",
        show(&control_b)
    );
    topo.teardown().unwrap();
}

/// A scraper that connects and says nothing, or sends too much, costs the metrics thread at
/// most its time limit and never the bond: the control socket answers meanwhile, the stalled
/// scraper is cut off, and the next scrape works.
#[test]
fn stalled_and_oversized_scrapers_do_not_stall_lagd() {
    use lagd::metrics::{CLIENT_TIMEOUT, MAX_REQUEST};
    assert!(is_root(), "network namespace tests need root");
    let mut topo = Topology::create(1).expect("create topology");
    let bond = format!("{}ba", topo.tag());
    let metrics = topo.dir().join("a.metrics");
    let unix = format!("unix:{}", metrics.display());
    let (_, control) = start(
        &mut topo,
        Side::A,
        &bond,
        "mode=active-backup miimon=100",
        &["--metrics", &unix],
    );
    let mut stalled = UnixStream::connect(&metrics).unwrap();
    let t = Instant::now();
    for _ in 0..5 {
        query_status(&control).expect("the control socket answers during a stalled scrape");
    }
    assert!(
        t.elapsed() < CLIENT_TIMEOUT,
        "status queries waited on the scraper: {:?}",
        t.elapsed()
    );
    // The stalled scraper is cut off after the time limit (generous bound: a slow machine).
    stalled.set_read_timeout(Some(CLIENT_TIMEOUT * 4)).unwrap();
    let mut rest = Vec::new();
    stalled
        .read_to_end(&mut rest)
        .expect("the stalled scraper is cut off (end of stream) within 4 time limits");
    assert!(rest.is_empty(), "a request never sent got an answer");
    assert!(scrape_unix(&metrics).contains("node_bonding_slaves"));

    // An oversized request gets 431, and lagd goes on.
    let mut big = UnixStream::connect(&metrics).unwrap();
    big.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut req = b"GET /metrics HTTP/1.1\r\nX: ".to_vec();
    req.extend(std::iter::repeat_n(b'a', MAX_REQUEST * 4));
    let _ = big.write_all(&req);
    let mut reply = String::new();
    let _ = big.read_to_string(&mut reply);
    assert!(reply.starts_with("HTTP/1.1 431 "), "{reply}");
    assert!(scrape_unix(&metrics).contains("node_bonding_slaves"));
    query_status(&control).unwrap();
    topo.teardown().unwrap();
}

/// The bucket modes' and stripe mode's own families, from running bonds, through promtool.
#[test]
fn bucket_and_stripe_metrics() {
    assert!(is_root(), "network namespace tests need root");
    require_program("promtool", "prometheus").unwrap();
    let mut topo = Topology::create(2).expect("create topology");
    let metrics = topo.dir().join("a.metrics");
    let unix = format!("unix:{}", metrics.display());
    let families = |m: &str| -> Vec<String> {
        m.lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split(' ').next())
            .map(str::to_owned)
            .collect()
    };
    let mut started = Vec::new();
    for (mode, want) in [
        (
            "mode=balance-slb miimon=100",
            &[
                "lagd_bond_bucket_moves_total",
                "lagd_bond_rebalances_total",
                "lagd_bond_bucket_moves_deferred_total",
            ][..],
        ),
        (
            "mode=stripe miimon=100",
            &[
                "lagd_stripe_delivered_total",
                "lagd_stripe_reordered_total",
                "lagd_stripe_skipped_total",
                "lagd_stripe_held",
            ][..],
        ),
    ] {
        for (id, _) in started.drain(..) {
            topo.stop(id);
        }
        let tag = if mode.contains("stripe") { "s" } else { "k" };
        let bond_b = format!("{}{tag}b", topo.tag());
        let bond_a = format!("{}{tag}a", topo.tag());
        started.push(start(&mut topo, Side::B, &bond_b, mode, &[]));
        started.push(start(
            &mut topo,
            Side::A,
            &bond_a,
            mode,
            &["--metrics", &unix],
        ));
        let m = scrape_unix(&metrics);
        promtool_accepts(&m);
        let have = families(&m);
        for f in want {
            assert!(have.iter().any(|h| h == f), "{mode}: no {f} in\n{m}");
        }
        if mode.contains("slb") {
            for reason in ["rebalance", "elephant", "member_left", "member_joined"] {
                assert!(
                    value(&m, "lagd_bond_bucket_moves_total", &[("reason", reason)]).is_some(),
                    "{reason}"
                );
            }
            assert!(!have.iter().any(|h| h.starts_with("lagd_stripe")));
        } else {
            assert!(!have.iter().any(|h| h.starts_with("lagd_bond_bucket")));
        }
    }
    topo.teardown().unwrap();
}

fn median_us(mut v: Vec<Duration>) -> u128 {
    v.sort();
    v[v.len() / 2].as_micros()
}

/// The ping round-trip times (µs) of `count` pings from host A to `to`, 10 ms apart.
fn ping_rtts(topo: &Topology, to: std::net::Ipv4Addr, count: u32) -> Vec<Duration> {
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            topo.ns(Side::A),
            "ping",
            "-n",
            "-i",
            "0.01",
            "-c",
        ])
        .arg(count.to_string())
        .arg(to.to_string())
        .output()
        .expect("ping");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split("time=").nth(1))
        .filter_map(|t| t.split(' ').next()?.parse::<f64>().ok())
        .map(|ms| Duration::from_secs_f64(ms / 1000.0))
        .collect()
}

/// What a scrape costs (bench/metrics.md): a status query (the baseline every scrape includes)
/// against a whole scrape, and ping through the bond while nothing scrapes against while a
/// scraper scrapes back to back. Run as root:
/// `cargo test --release -p lagd --test metrics -- --ignored --nocapture bench_scrape`.
#[test]
#[ignore = "benchmark: run by hand, figures in bench/metrics.md"]
fn bench_scrape() {
    assert!(is_root(), "network namespace tests need root");
    println!(
        "| path | round | status query | scrape | ping, no scraper | ping, scraper back to back |"
    );
    println!("|---|---|---|---|---|---|");
    for fastpath in ["auto", "off"] {
        bench_scrape_on(fastpath);
    }
}

fn bench_scrape_on(fastpath: &str) {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let mut topo = Topology::create(2).expect("create topology");
    let opts = format!(
        "mode=802.3ad lacp_rate=fast miimon=100 xmit_hash_policy=layer3+4 fastpath={fastpath}"
    );
    let opts = opts.as_str();
    let bonds = [format!("{}ba", topo.tag()), format!("{}bb", topo.tag())];
    let metrics = topo.dir().join("a.metrics");
    let unix = format!("unix:{}", metrics.display());
    start(&mut topo, Side::B, &bonds[1], opts, &[]);
    let (_, control) = start(&mut topo, Side::A, &bonds[0], opts, &["--metrics", &unix]);
    wait_metrics(&metrics, Duration::from_secs(20), "aggregated", |m| {
        value(m, "lagd_agg_active_aggregator_ports", &[]) == Some(2.0)
    });
    let addrs = common::address_bonds(&topo, &bonds);
    ping_rtts(&topo, addrs[1], 5);
    let rounds = 3;
    let mut rows: Vec<[u128; 4]> = Vec::new();
    let mut scrapes_during = 0;
    for _ in 0..rounds {
        let status: Vec<Duration> = (0..200)
            .map(|_| {
                let t = Instant::now();
                query_status(&control).unwrap();
                t.elapsed()
            })
            .collect();
        let scrape: Vec<Duration> = (0..200)
            .map(|_| {
                let t = Instant::now();
                scrape_unix(&metrics);
                t.elapsed()
            })
            .collect();
        let quiet = ping_rtts(&topo, addrs[1], 200);
        let stop = Arc::new(AtomicBool::new(false));
        let count = Arc::new(AtomicU64::new(0));
        let scraper = {
            let (stop, count, metrics) = (stop.clone(), count.clone(), metrics.clone());
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    scrape_unix(&metrics);
                    count.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        let busy = ping_rtts(&topo, addrs[1], 200);
        stop.store(true, Ordering::Relaxed);
        scraper.join().unwrap();
        scrapes_during += count.load(Ordering::Relaxed);
        rows.push([
            median_us(status),
            median_us(scrape),
            median_us(quiet),
            median_us(busy),
        ]);
    }
    let path = query_status(&control).unwrap().dataplane.path;
    for (i, r) in rows.iter().enumerate() {
        println!(
            "| {path} | {} | {} µs | {} µs | {} µs | {} µs |",
            i + 1,
            r[0],
            r[1],
            r[2],
            r[3]
        );
    }
    let m = scrape_unix(&metrics);
    println!(
        "{path}: scrapes during the busy pings: {scrapes_during}; one scrape: {} bytes, {} samples",
        m.len(),
        m.lines().filter(|l| !l.starts_with('#')).count()
    );
    topo.teardown().unwrap();
}

/// Bucket moves by reason, as the counters move: four equal UDP flows, three of whose buckets
/// start on one member and one on the other, never pause; with `distribution=buckets` the
/// rebalancer moves one of the three (no flow is an elephant: each is half a member's fair
/// share), so `lagd_bond_bucket_moves_total{reason="rebalance"}` rises while the elephant count
/// stays 0. Then a member going down moves its buckets (`member_left`) and coming back moves
/// some back (`member_joined`). Every scrape passes promtool and agrees with the status, and
/// `lagctl events` streams the same moves.
#[test]
fn bucket_moves_by_reason_follow_the_rebalancer() {
    use std::net::{SocketAddrV4, UdpSocket};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use lagd_proto::hash::{HashPolicy, xmit_hash};

    assert!(is_root(), "network namespace tests need root");
    require_program("promtool", "prometheus").unwrap();
    let mut topo = Topology::create(2).expect("create topology");
    let bond_a = format!("{}ba", topo.tag());
    let bond_b = format!("{}bb", topo.tag());
    start(
        &mut topo,
        Side::B,
        &bond_b,
        "mode=balance-xor xmit_hash_policy=layer3+4 miimon=100",
        &[],
    );
    let metrics = topo.dir().join("a.metrics");
    let unix = format!("unix:{}", metrics.display());
    let (_, control) = start(
        &mut topo,
        Side::A,
        &bond_a,
        "mode=balance-xor xmit_hash_policy=layer3+4 miimon=100 distribution=buckets \
         rebalance_interval=1000 rebalance_force_after=2",
        &["--metrics", &unix],
    );
    let [a, b] = common::address_bonds(&topo, &[bond_a.clone(), bond_b]);
    let moves = |m: &str, reason: &str| {
        value(m, "lagd_bond_bucket_moves_total", &[("reason", reason)])
            .unwrap_or_else(|| panic!("no bucket moves for {reason} in\n{m}"))
    };
    // The scrape's counters are the status's.
    let agrees = |m: &str| {
        let s = query_status(&control).unwrap();
        let bk = s.buckets.unwrap();
        for (reason, n) in [
            ("rebalance", bk.moved_rebalance),
            ("elephant", bk.moved_elephant),
            ("member_left", bk.moved_left),
            ("member_joined", bk.moved_joined),
        ] {
            assert!(
                moves(m, reason) <= n as f64,
                "{reason}: {n} in the status\n{m}"
            );
        }
    };
    let m = scrape_unix(&metrics);
    promtool_accepts(&m);
    // Members coming up one after the other at start move buckets too (member_joined).
    for reason in ["rebalance", "elephant"] {
        assert_eq!(moves(&m, reason), 0.0, "{reason} before any traffic");
    }
    let left_at_start = moves(&m, "member_left");
    let events = EventStream::start(&control);

    // Three source ports whose buckets (hash & 0xff) differ but share a member, and one on the
    // other member.
    let s = query_status(&control).unwrap();
    let owner = |k: u32| {
        s.buckets
            .as_ref()
            .unwrap()
            .buckets
            .iter()
            .find(|x| u32::from(x.bucket) == k)
            .unwrap()
            .member
            .clone()
    };
    let first = s.members[0].name.clone();
    let (mut crowded, mut alone, mut buckets) = (Vec::new(), Vec::new(), Vec::new());
    for p in 42_000u16..43_000 {
        let k = xmit_hash(HashPolicy::Layer34, &common::udp_frame(a, b, p, 9)) & 0xff;
        if buckets.contains(&k) {
            continue;
        }
        let list = if owner(k) == first {
            &mut crowded
        } else {
            &mut alone
        };
        if list.len() < if owner(k) == first { 3 } else { 1 } {
            list.push(p);
            buckets.push(k);
        }
    }
    assert_eq!((crowded.len(), alone.len()), (3, 1), "{buckets:?}");
    let sockets: Vec<UdpSocket> = topo
        .in_ns(Side::A, || {
            crowded
                .iter()
                .chain(&alone)
                .map(|&p| UdpSocket::bind(SocketAddrV4::new(a, p)).expect("bind"))
                .collect()
        })
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let senders: Vec<_> = sockets
        .into_iter()
        .map(|s| {
            let stop = stop.clone();
            thread::spawn(move || {
                // About 22 Mbit/s each: two datagrams every millisecond, no pause.
                let payload = [0u8; 1400];
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..2 {
                        let _ = s.send_to(&payload, SocketAddrV4::new(b, 9));
                    }
                    thread::sleep(Duration::from_millis(1));
                }
            })
        })
        .collect();
    let rebalanced = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        wait_metrics(&metrics, Duration::from_secs(20), "a rebalance move", |m| {
            moves(m, "rebalance") >= 1.0
        })
    }));
    stop.store(true, Ordering::Relaxed);
    for s in senders {
        s.join().unwrap();
    }
    let m = rebalanced.unwrap_or_else(|e| std::panic::resume_unwind(e));
    promtool_accepts(&m);
    agrees(&m);
    assert_eq!(moves(&m, "elephant"), 0.0, "no flow is an elephant\n{m}");
    // The rebalancer's view of the load is there while the flows run (busiest over mean: 1 or
    // more).
    let ratio = value(&m, "lagd_bond_load_imbalance_ratio", &[]);
    assert!(ratio.is_some_and(|r| r >= 1.0), "{ratio:?}\n{m}");
    assert_eq!(moves(&m, "member_left"), left_at_start);
    let s = query_status(&control).unwrap();
    let bk = s.buckets.as_ref().unwrap();
    assert!(
        bk.recent_moves.iter().any(|r| r.contains("rebalance:")),
        "{:?}",
        bk.recent_moves
    );
    let on_second: f64 = bk.members[1].buckets.into();
    assert!(on_second > 0.0);
    let ev = events.next_buckets("rebalance", Duration::from_secs(5));
    assert!(
        ev["latest"]
            .as_str()
            .is_some_and(|l| l.starts_with("rebalance:")),
        "{ev}"
    );
    println!(
        "rebalance moves {} (forced {}), recent: {:?}",
        moves(&m, "rebalance"),
        bk.moves_forced,
        bk.recent_moves
    );

    // The second member goes down: all its buckets move for that reason, and back when it
    // returns.
    let left_before = moves(&m, "member_left");
    let joined_before = moves(&m, "member_joined");
    topo.set_link_down(Side::A, 1).unwrap();
    let m = wait_metrics(
        &metrics,
        Duration::from_secs(10),
        "member_left moves",
        |m| moves(m, "member_left") > left_before,
    );
    promtool_accepts(&m);
    agrees(&m);
    assert_eq!(moves(&m, "member_left") - left_before, on_second, "{m}");
    println!("member_left moves {on_second} (the buckets the member held)");
    let ev = events.next_buckets("member_left", Duration::from_secs(5));
    assert_eq!(ev["member_left"].as_f64(), Some(on_second), "{ev}");
    topo.ip(Side::A, &["link", "set", &topo.links()[1].name, "up"])
        .unwrap();
    let m = wait_metrics(
        &metrics,
        Duration::from_secs(10),
        "member_joined moves",
        |m| moves(m, "member_joined") > joined_before,
    );
    promtool_accepts(&m);
    agrees(&m);
    topo.teardown().unwrap();
}

/// `lagctl events --json` running against a lagd, its lines read on a thread of their own.
struct EventStream {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<serde_json::Value>,
}

impl EventStream {
    /// Subscribes to the events of the lagd behind `control`.
    fn start(control: &Path) -> Self {
        let mut child = Command::new(LAGCTL)
            .args(["events", "--json", "--control"])
            .arg(control)
            .stdout(Stdio::piped())
            .spawn()
            .expect("lagctl events");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let v = serde_json::from_str(&line).expect("a JSON event line");
                if tx.send(v).is_err() {
                    return;
                }
            }
        });
        Self { child, lines }
    }

    /// The next event, within `within`.
    fn next(&self, within: Duration) -> serde_json::Value {
        self.lines
            .recv_timeout(within)
            .unwrap_or_else(|_| panic!("no event within {within:?}"))
    }

    /// The next `buckets` event that counts moves for `reason`, within `within`.
    fn next_buckets(&self, reason: &str, within: Duration) -> serde_json::Value {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let v = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no buckets event for {reason} within {within:?}"));
            if v["event"] == "buckets" && v[reason].as_u64().is_some_and(|n| n > 0) {
                return v;
            }
        }
    }
}

impl Drop for EventStream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
