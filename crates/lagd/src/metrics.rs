//! Prometheus metrics: the [`Status`] document rendered in the exposition format, and the small
//! HTTP listener that serves it.
//!
//! The forwarding loop knows nothing of metrics. The listener is a thread of its own: per
//! scrape it asks the daemon's control socket for the status (as `lagctl show` does) and
//! renders it, so a slow or hostile scraper never costs the loop. Up to [`MAX_SCRAPERS`]
//! scrapers are served at once, each on a thread of its own, with a deadline for its whole
//! request head and another for taking its whole reply ([`CLIENT_TIMEOUT`] each, however the
//! bytes trickle in) and a size limit ([`MAX_REQUEST`]). When every slot is taken, a new
//! scraper takes the slot of the one that has waited longest without completing its request:
//! slow clients cost only their own slots, and a scraper that asks at once is always served.
//!
//! Who may scrape: anyone who can reach the address. That is Prometheus's model (the figures
//! are a bond's counters and states, nothing that changes it), and it is intended: over TCP,
//! loopback included, `control_group` does not apply; for metrics only some local users may
//! read, listen on a Unix socket (`unix:/PATH`, mode 0600, root's).
//!
//! Names follow the IEEE8023-LAG-MIB objects where one exists (`dot3adAggPortStatsLACPDUsRx`
//! is `lagd_agg_port_stats_lacpdus_rx_total`, `dot3adAggPortActorOperState` is
//! `lagd_agg_port_actor_oper_state`), and node_exporter's bonding collector's
//! `node_bonding_slaves` and `node_bonding_active` (label `master`) are served under their
//! own names, so dashboards and alerts written for kernel bonds keep working.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use lagd_proto::wire::slow::PortState;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tracing::{debug, info, warn};

use crate::control::{Endpoint, status_at};
use crate::status::Status;

/// The largest HTTP request head the listener reads; longer requests get 431.
pub const MAX_REQUEST: usize = 8192;
/// How long a scraper has to send its whole request head, and then to take its whole reply.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);
/// How many scrapers are served at once.
pub const MAX_SCRAPERS: usize = 64;
/// The content type of [`render`]'s output: Prometheus's text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
/// The content type of [`render_openmetrics`]'s output, for scrapers that ask for it.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Where the metrics listener listens (`metrics_listen` / `--metrics`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetricsListen {
    /// A TCP address.
    Tcp(SocketAddr),
    /// A Unix socket path (`unix:/run/lagd/bond0.metrics`).
    Unix(PathBuf),
}

impl MetricsListen {
    /// Parses `ADDR:PORT`, `[V6]:PORT` or `unix:PATH`. A TCP address must be loopback unless
    /// `allow_remote`: metrics tell the network's layout to whoever asks.
    pub fn parse(text: &str, allow_remote: bool) -> Result<Self, String> {
        let text = text.trim();
        if let Some(path) = text.strip_prefix("unix:") {
            if !path.starts_with('/') {
                return Err(format!("'{text}': a Unix socket needs an absolute path"));
            }
            return Ok(Self::Unix(PathBuf::from(path)));
        }
        let addr: SocketAddr = text.parse().map_err(|_| {
            format!("'{text}' is not ADDRESS:PORT ('127.0.0.1:9105', '[::1]:9105') or unix:PATH")
        })?;
        if addr.port() == 0 {
            return Err(format!("'{text}': give a port (not 0)"));
        }
        if !allow_remote && !addr.ip().is_loopback() {
            return Err(format!(
                "'{text}' is not a loopback address: metrics are served to the local host only \
                 unless metrics_allow_remote = true (--metrics-allow-remote)"
            ));
        }
        Ok(Self::Tcp(addr))
    }
}

impl std::fmt::Display for MetricsListen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Tcp(a) => write!(f, "{a}"),
            Self::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

type Labels = Vec<(String, String)>;

/// Registers metric families and fills them from the status.
struct Builder {
    reg: Registry,
}

impl Builder {
    fn counter(&mut self, name: &str, help: &str) -> Family<Labels, Counter> {
        let f = Family::<Labels, Counter>::default();
        self.reg.register(name, help, f.clone());
        f
    }

    fn gauge(&mut self, name: &str, help: &str) -> Family<Labels, Gauge> {
        let f = Family::<Labels, Gauge>::default();
        self.reg.register(name, help, f.clone());
        f
    }

    fn ratio(&mut self, name: &str, help: &str) -> Family<Labels, Gauge<f64, AtomicU64>> {
        let f = Family::<Labels, Gauge<f64, AtomicU64>>::default();
        self.reg.register(name, help, f.clone());
        f
    }
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Renders a bond's status as metrics in Prometheus's text format (version 0.0.4, what
/// `promtool check metrics` and node_exporter speak): [`render_openmetrics`] with each counter
/// family named by its samples' `_total` name and without the `# EOF` line.
pub fn render(s: &Status) -> String {
    openmetrics_to_text(&render_openmetrics(s))
}

/// Sorts the samples of each family (the client crate keeps them in hash order), so that two
/// scrapes list them alike.
fn sort_samples(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut samples: Vec<&str> = Vec::new();
    let flush = |out: &mut String, samples: &mut Vec<&str>| {
        samples.sort_unstable();
        for l in samples.drain(..) {
            out.push_str(l);
            out.push('\n');
        }
    };
    for line in text.lines() {
        if line.starts_with('#') {
            flush(&mut out, &mut samples);
            out.push_str(line);
            out.push('\n');
        } else {
            samples.push(line);
        }
    }
    flush(&mut out, &mut samples);
    out
}

/// Rewrites the OpenMetrics text the client crate encodes into Prometheus's text format: a
/// counter family `x` (samples `x_total`) becomes family `x_total`; `# UNIT` and `# EOF` lines,
/// which the older format lacks, are left out.
fn openmetrics_to_text(om: &str) -> String {
    let mut out = String::with_capacity(om.len());
    let mut help: Option<&str> = None;
    for line in om.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if line.starts_with("# HELP ") {
            if let Some(h) = help.replace(line) {
                out.push_str(h);
                out.push('\n');
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            let total = kind == "counter" && !name.ends_with("_total");
            if let Some(h) = help.take() {
                match (
                    total,
                    h.strip_prefix("# HELP ").and_then(|r| r.split_once(' ')),
                ) {
                    (true, Some((n, text))) => {
                        out.push_str(&format!("# HELP {n}_total {text}\n"));
                    }
                    _ => {
                        out.push_str(h);
                        out.push('\n');
                    }
                }
            }
            if total {
                out.push_str(&format!("# TYPE {name}_total {kind}\n"));
            } else {
                out.push_str(line);
                out.push('\n');
            }
            continue;
        }
        if let Some(h) = help.take() {
            out.push_str(h);
            out.push('\n');
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Renders a bond's status as metrics in the OpenMetrics text format (ending in `# EOF`).
pub fn render_openmetrics(s: &Status) -> String {
    let mut b = Builder {
        reg: Registry::default(),
    };
    let bond = s.bond.as_str();
    let bl = labels(&[("bond", bond)]);
    let ml = |m: &str| labels(&[("bond", bond), ("member", m)]);

    // node_exporter's bonding collector, same names and labels.
    let slaves = b.gauge(
        "node_bonding_slaves",
        "Number of configured slaves per bonding interface",
    );
    let active = b.gauge(
        "node_bonding_active",
        "Number of active slaves per bonding interface",
    );
    let up = s.members.iter().filter(|m| m.mii_status == "up").count() as i64;
    slaves
        .get_or_create(&labels(&[("master", bond)]))
        .set(s.members.len() as i64);
    active.get_or_create(&labels(&[("master", bond)])).set(up);

    b.gauge(
        "lagd_bond_info",
        "The bond's mode and hash policy (value 1)",
    )
    .get_or_create(&labels(&[
        ("bond", bond),
        ("mode", &s.mode),
        (
            "xmit_hash_policy",
            s.xmit_hash_policy.as_deref().unwrap_or(""),
        ),
        ("version", &s.version),
    ]))
    .set(1);
    b.gauge(
        "lagd_bond_up",
        "Whether the bond has carrier (1) or not (0)",
    )
    .get_or_create(&bl)
    .set(i64::from(s.mii_status == "up"));
    b.gauge("lagd_bond_members", "Members configured")
        .get_or_create(&bl)
        .set(s.members.len() as i64);
    b.gauge("lagd_bond_members_up", "Members whose link is up")
        .get_or_create(&bl)
        .set(up);
    let not_distributing = s
        .members
        .iter()
        .filter(|m| m.mii_status == "up" && m.lacp.as_ref().is_some_and(|l| !l.distributing))
        .count();
    b.gauge(
        "lagd_bond_members_up_not_distributing",
        "802.3ad: members whose link is up but that LACP does not let distribute (0 in other modes)",
    )
    .get_or_create(&bl)
    .set(not_distributing as i64);
    let path = b.gauge(
        "lagd_bond_dataplane_path",
        "Which path carries the data frames: kernel (the fast path's programs) or lagd (1 for the \
         one in use)",
    );
    for p in ["kernel", "lagd"] {
        path.get_or_create(&labels(&[("bond", bond), ("path", p)]))
            .set(i64::from(s.dataplane.path == p));
    }
    if let Some(a) = &s.dataplane.attach {
        let attach = b.gauge(
            "lagd_bond_fastpath_attach",
            "On the kernel path, how its programs are attached: tcx (links) or tc (clsact \
             filters), 1 for the one in use",
        );
        for how in ["tcx", "tc"] {
            attach
                .get_or_create(&labels(&[("bond", bond), ("attach", how)]))
                .set(i64::from(a == how));
        }
    }
    if s.primary_reselect.is_some() {
        let am = b.gauge(
            "lagd_bond_active_member",
            "Modes with an active member: 1 for the active member, 0 for the others",
        );
        for m in &s.members {
            am.get_or_create(&ml(&m.name))
                .set(i64::from(s.active.as_deref() == Some(m.name.as_str())));
        }
    }
    b.counter(
        "lagd_bond_failovers",
        "Times the active member moved from one member to another",
    )
    .get_or_create(&bl)
    .inc_by(s.failovers);
    b.counter(
        "lagd_bond_tx_dropped_no_member",
        "Frames from the host dropped because no member was usable",
    )
    .get_or_create(&bl)
    .inc_by(s.tx_dropped_no_member);
    b.gauge(
        "lagd_bond_warnings",
        "Configuration warnings lagd logged at start",
    )
    .get_or_create(&bl)
    .set(s.warnings.len() as i64);

    // Imbalance of what the members sent so far: busiest member over the mean of the members up.
    let sent: Vec<u64> = s
        .members
        .iter()
        .filter(|m| m.mii_status == "up")
        .map(|m| m.tx_bytes)
        .collect();
    let total: u64 = sent.iter().sum();
    if total > 0 {
        let mean = total as f64 / sent.len() as f64;
        let max = sent.iter().copied().max().unwrap_or(0) as f64;
        b.ratio(
            "lagd_bond_tx_bytes_imbalance_ratio",
            "Bytes sent since start by the busiest member over the mean of the members up (1: even)",
        )
        .get_or_create(&bl)
        .set(max / mean);
    }

    members(&mut b, s, &ml);
    if let Some(bk) = &s.buckets {
        if let Some(p) = bk.busiest_over_mean_permille {
            b.ratio(
                "lagd_bond_load_imbalance_ratio",
                "Buckets: the busiest member's recent load per capacity over the mean (1: even)",
            )
            .get_or_create(&bl)
            .set(f64::from(p) / 1000.0);
        }
        b.counter("lagd_bond_rebalances", "Rebalancing passes run")
            .get_or_create(&bl)
            .inc_by(bk.rebalances);
        let moves = b.counter("lagd_bond_bucket_moves", "Buckets moved, by reason");
        for (reason, n) in [
            ("rebalance", bk.moved_rebalance),
            ("elephant", bk.moved_elephant),
            ("member_left", bk.moved_left),
            ("member_joined", bk.moved_joined),
        ] {
            moves
                .get_or_create(&labels(&[("bond", bond), ("reason", reason)]))
                .inc_by(n);
        }
        b.counter(
            "lagd_bond_bucket_moves_deferred",
            "Moves that waited for their bucket's idle gap",
        )
        .get_or_create(&bl)
        .inc_by(bk.moves_deferred);
        b.counter(
            "lagd_bond_bucket_moves_forced",
            "Moves of busy buckets forced after a persistent overload",
        )
        .get_or_create(&bl)
        .inc_by(bk.moves_forced);
    }
    if let Some(st) = &s.stripe {
        b.counter("lagd_stripe_delivered", "Stripe: frames handed to the host")
            .get_or_create(&bl)
            .inc_by(st.delivered);
        b.counter(
            "lagd_stripe_reordered",
            "Stripe: frames that arrived out of order and were put back in order",
        )
        .get_or_create(&bl)
        .inc_by(st.reordered);
        let lost = b.counter(
            "lagd_stripe_skipped",
            "Stripe: frames given up on, by reason",
        );
        for (reason, n) in [
            ("lost", st.skipped_lost),
            ("timeout", st.skipped_timeout),
            ("buffer_full", st.skipped_full),
        ] {
            lost.get_or_create(&labels(&[("bond", bond), ("reason", reason)]))
                .inc_by(n);
        }
        b.counter(
            "lagd_stripe_late",
            "Stripe: frames that came after their gap was skipped",
        )
        .get_or_create(&bl)
        .inc_by(st.late);
        b.counter(
            "lagd_stripe_dropped",
            "Stripe: duplicates and stale frames dropped",
        )
        .get_or_create(&bl)
        .inc_by(st.dropped);
        b.counter(
            "lagd_stripe_resyncs",
            "Stripe: times the sequence restarted",
        )
        .get_or_create(&bl)
        .inc_by(st.resyncs);
        b.gauge(
            "lagd_stripe_held",
            "Stripe: frames held in the reorder buffer",
        )
        .get_or_create(&bl)
        .set(st.held as i64);
        let t = &st.tcp;
        let segs = b.counter(
            "lagd_stripe_tcp_segments",
            "Stripe: TCP segments received (ordered by their own sequence numbers), by outcome",
        );
        for (outcome, n) in [
            ("in_order", t.in_order),
            ("reordered", t.reordered),
            ("behind", t.behind),
            ("kernel", t.kernel_segments),
        ] {
            segs.get_or_create(&labels(&[("bond", bond), ("outcome", outcome)]))
                .inc_by(n);
        }
        let holes = b.counter(
            "lagd_stripe_tcp_skipped",
            "Stripe: TCP holes given up on, by reason",
        );
        for (reason, n) in [
            ("lost", t.skipped_lost),
            ("timeout", t.skipped_timeout),
            ("buffer_full", t.skipped_full),
        ] {
            holes
                .get_or_create(&labels(&[("bond", bond), ("reason", reason)]))
                .inc_by(n);
        }
        b.counter(
            "lagd_stripe_tcp_kernel_held",
            "Stripe: rounds of TCP segments that overtook another, sent back through their \
             member's receive queue by the kernel fast path until it passed",
        )
        .get_or_create(&bl)
        .inc_by(t.kernel_held);
        b.gauge(
            "lagd_stripe_tcp_held_bytes",
            "Stripe: bytes of TCP held for a missing predecessor",
        )
        .get_or_create(&bl)
        .set(t.held_bytes as i64);
        b.gauge("lagd_stripe_tcp_flows", "Stripe: TCP flows being ordered")
            .get_or_create(&bl)
            .set(t.flows as i64);
        b.gauge(
            "lagd_stripe_striping",
            "Stripe: whether frames are striped (1) or not (0)",
        )
        .get_or_create(&bl)
        .set(i64::from(st.striping));
    }
    if let Some(l) = &s.lacp {
        b.gauge(
            "lagd_agg_active_aggregator_id",
            "802.3ad: the active aggregator's id (0: none)",
        )
        .get_or_create(&bl)
        .set(l.active_aggregator.as_ref().map_or(0, |a| i64::from(a.id)));
        b.gauge(
            "lagd_agg_active_aggregator_ports",
            "802.3ad: ports in the active aggregator",
        )
        .get_or_create(&bl)
        .set(
            l.active_aggregator
                .as_ref()
                .map_or(0, |a| i64::from(a.number_of_ports)),
        );
        lacp_members(&mut b, s, &ml);
    }
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = encode(&mut out, &b.reg);
    sort_samples(&out)
}

/// Per-member traffic, drops and link metrics.
fn members(b: &mut Builder, s: &Status, ml: &dyn Fn(&str) -> Labels) {
    let up = b.gauge(
        "lagd_member_up",
        "Whether the member's link is up (1) or not (0)",
    );
    let carrier_state = b.gauge(
        "lagd_member_mii_status",
        "The member's link state (1 for the state it is in): up, going_down, down, going_back",
    );
    let active = b.gauge(
        "lagd_member_active",
        "Whether the member is the active one (modes with one) or usable (other modes)",
    );
    let speed = b.gauge(
        "lagd_member_speed_mbps",
        "The member's speed in Mb/s (when known)",
    );
    let failures = b.counter("lagd_member_link_failures", "Times the member went down");
    let rx_packets = b.counter("lagd_member_rx_packets", "Frames received");
    let rx_bytes = b.counter("lagd_member_rx_bytes", "Bytes received");
    let tx_packets = b.counter("lagd_member_tx_packets", "Frames sent");
    let tx_bytes = b.counter("lagd_member_tx_bytes", "Bytes sent");
    let kernel = b.counter(
        "lagd_member_kernel_packets",
        "Frames the kernel fast path carried (of the rx/tx packets), by direction",
    );
    let rx_dropped = b.counter(
        "lagd_member_rx_dropped",
        "Received frames dropped, by reason",
    );
    let tx_dropped = b.counter("lagd_member_tx_dropped", "Frames not sent, by reason");
    for m in &s.members {
        let l = ml(&m.name);
        up.get_or_create(&l).set(i64::from(m.mii_status == "up"));
        for state in ["up", "going down", "down", "going back"] {
            let mut sl = l.clone();
            sl.push(("state".into(), state.replace(' ', "_")));
            carrier_state
                .get_or_create(&sl)
                .set(i64::from(m.mii_status == state));
        }
        active.get_or_create(&l).set(i64::from(m.active));
        if let Some(sp) = m.speed_mbps {
            speed.get_or_create(&l).set(i64::from(sp));
        }
        failures
            .get_or_create(&l)
            .inc_by(u64::from(m.link_failure_count));
        rx_packets.get_or_create(&l).inc_by(m.rx_packets);
        rx_bytes.get_or_create(&l).inc_by(m.rx_bytes);
        tx_packets.get_or_create(&l).inc_by(m.tx_packets);
        tx_bytes.get_or_create(&l).inc_by(m.tx_bytes);
        for (dir, n) in [("rx", m.kernel_rx_packets), ("tx", m.kernel_tx_packets)] {
            let mut dl = l.clone();
            dl.push(("direction".into(), dir.into()));
            kernel.get_or_create(&dl).inc_by(n);
        }
        let mut reasons: Vec<(&str, u64)> =
            m.rx_dropped.iter().map(|(r, n)| (r.as_str(), *n)).collect();
        reasons.push(("socket_buffer_full", m.rx_socket_drops));
        // The same reason may come twice (lagd's and the fast path's): add them up.
        let mut summed: Vec<(&str, u64)> = Vec::new();
        for (r, n) in reasons {
            match summed.iter_mut().find(|(s, _)| *s == r) {
                Some(e) => e.1 += n,
                None => summed.push((r, n)),
            }
        }
        for (r, n) in summed {
            let mut rl = l.clone();
            rl.push(("reason".into(), r.to_owned()));
            rx_dropped.get_or_create(&rl).inc_by(n);
        }
        let mut tl = l.clone();
        tl.push(("reason".into(), "queue_full".into()));
        tx_dropped.get_or_create(&tl).inc_by(m.tx_dropped);
    }
}

/// Per-member 802.3ad metrics, named after IEEE8023-LAG-MIB's dot3adAggPort objects.
fn lacp_members(b: &mut Builder, s: &Status, ml: &dyn Fn(&str) -> Labels) {
    let lacpdus_rx = b.counter(
        "lagd_agg_port_stats_lacpdus_rx",
        "LACPDUs received (dot3adAggPortStatsLACPDUsRx)",
    );
    let lacpdus_tx = b.counter(
        "lagd_agg_port_stats_lacpdus_tx",
        "LACPDUs sent (dot3adAggPortStatsLACPDUsTx)",
    );
    let lacpdus_tx_errors = b.counter(
        "lagd_agg_port_stats_lacpdus_tx_errors",
        "LACPDUs the member's socket refused (counted in lacpdus_tx too)",
    );
    let marker_rx = b.counter(
        "lagd_agg_port_stats_marker_pdus_rx",
        "Marker PDUs received, information and responses (dot3adAggPortStatsMarkerPDUsRx)",
    );
    let marker_tx = b.counter(
        "lagd_agg_port_stats_marker_response_pdus_tx",
        "Marker response PDUs sent (dot3adAggPortStatsMarkerResponsePDUsTx)",
    );
    let unknown = b.counter(
        "lagd_agg_port_stats_unknown_rx",
        "Slow-protocol frames of unknown subtype received (dot3adAggPortStatsUnknownRx)",
    );
    let illegal = b.counter(
        "lagd_agg_port_stats_illegal_rx",
        "Invalid slow-protocol frames received (dot3adAggPortStatsIllegalRx)",
    );
    let actor_state = b.gauge(
        "lagd_agg_port_actor_oper_state",
        "The actor's state bits as a number (dot3adAggPortActorOperState)",
    );
    let partner_state = b.gauge(
        "lagd_agg_port_partner_oper_state",
        "The partner's state bits as a number (dot3adAggPortPartnerOperState)",
    );
    let actor_bits = b.gauge(
        "lagd_agg_port_actor_oper_state_bit",
        "Each of the actor's eight state bits by name (0 or 1)",
    );
    let partner_bits = b.gauge(
        "lagd_agg_port_partner_oper_state_bit",
        "Each of the partner's eight state bits by name (0 or 1)",
    );
    let selected = b.gauge(
        "lagd_agg_port_selected_agg_id",
        "The aggregator the port selected, 0 for none (dot3adAggPortSelectedAggID)",
    );
    let attached = b.gauge(
        "lagd_agg_port_attached_agg_id",
        "The aggregator the port is attached to, 0 for none (dot3adAggPortAttachedAggID)",
    );
    let distributing = b.gauge(
        "lagd_agg_port_distributing",
        "Whether LACP lets the port distribute (1) or not (0)",
    );
    let actor_churn = b.gauge(
        "lagd_agg_port_debug_actor_churn_state",
        "The actor churn machine's state, 1 for the one it is in (dot3adAggPortDebugActorChurnState)",
    );
    let partner_churn = b.gauge(
        "lagd_agg_port_debug_partner_churn_state",
        "The partner churn machine's state, 1 for the one it is in (dot3adAggPortDebugPartnerChurnState)",
    );
    let actor_churn_count = b.counter(
        "lagd_agg_port_debug_actor_churn_count",
        "Times the actor churn machine entered ACTOR_CHURN (dot3adAggPortDebugActorChurnCount)",
    );
    let partner_churn_count = b.counter(
        "lagd_agg_port_debug_partner_churn_count",
        "Times the partner churn machine entered PARTNER_CHURN (dot3adAggPortDebugPartnerChurnCount)",
    );
    for m in &s.members {
        let Some(l) = &m.lacp else { continue };
        let ls = ml(&m.name);
        lacpdus_rx.get_or_create(&ls).inc_by(l.lacpdu_rx);
        lacpdus_tx.get_or_create(&ls).inc_by(l.lacpdu_tx);
        lacpdus_tx_errors
            .get_or_create(&ls)
            .inc_by(l.lacpdu_tx_errors);
        marker_rx.get_or_create(&ls).inc_by(l.marker_rx);
        marker_tx.get_or_create(&ls).inc_by(l.marker_response_tx);
        unknown.get_or_create(&ls).inc_by(l.unknown_rx);
        illegal.get_or_create(&ls).inc_by(l.illegal_rx);
        actor_state.get_or_create(&ls).set(i64::from(l.actor.state));
        partner_state
            .get_or_create(&ls)
            .set(i64::from(l.partner.state));
        for (family, state) in [
            (&actor_bits, l.actor.state),
            (&partner_bits, l.partner.state),
        ] {
            for (bit, name) in PortState::NAMED {
                let mut bl = ls.clone();
                bl.push(("bit".into(), name.into()));
                family
                    .get_or_create(&bl)
                    .set(i64::from(state & bit.bits() != 0));
            }
        }
        let agg = l.aggregator_id.map_or(0, i64::from);
        selected.get_or_create(&ls).set(agg);
        attached
            .get_or_create(&ls)
            .set(if l.mux_state == "DETACHED" { 0 } else { agg });
        distributing
            .get_or_create(&ls)
            .set(i64::from(l.distributing));
        for (family, state) in [
            (&actor_churn, &l.actor_churn_state),
            (&partner_churn, &l.partner_churn_state),
        ] {
            for name in ["none", "monitoring", "churned"] {
                let mut cl = ls.clone();
                cl.push(("state".into(), name.into()));
                family.get_or_create(&cl).set(i64::from(state == name));
            }
        }
        actor_churn_count
            .get_or_create(&ls)
            .inc_by(u64::from(l.actor_churned_count));
        partner_churn_count
            .get_or_create(&ls)
            .inc_by(u64::from(l.partner_churned_count));
    }
}

/// A bound metrics listener, TCP or Unix.
#[derive(Debug)]
pub enum Listener {
    /// TCP.
    Tcp(TcpListener),
    /// A Unix socket.
    Unix(UnixListener),
}

/// Binds the metrics listener (before the daemon starts its loop, so a taken port is an error
/// at start). A Unix socket is created 0600 (root only), replacing a stale one (never one that
/// a process still serves).
pub fn bind(listen: &MetricsListen) -> Result<Listener> {
    match listen {
        MetricsListen::Tcp(a) => Ok(Listener::Tcp(
            TcpListener::bind(a).with_context(|| format!("metrics: binding {a}"))?,
        )),
        MetricsListen::Unix(p) => {
            if let Some(dir) = p.parent() {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("metrics: creating {}", dir.display()))?;
            }
            if p.exists() {
                if std::os::unix::net::UnixStream::connect(p).is_ok() {
                    anyhow::bail!(
                        "metrics: another process serves {} (stop it or choose another path)",
                        p.display()
                    );
                }
                std::fs::remove_file(p)
                    .with_context(|| format!("metrics: removing stale {}", p.display()))?;
            }
            let l = UnixListener::bind(p)
                .with_context(|| format!("metrics: binding {}", p.display()))?;
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o600))
                .with_context(|| format!("metrics: chmod {}", p.display()))?;
            Ok(Listener::Unix(l))
        }
    }
}

/// Serves metrics on `listener` from threads of their own, asking the control socket `control`
/// for the status on each scrape (see the module's documentation for the limits).
pub fn spawn(listener: Listener, control: Endpoint) -> io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("lagd-metrics".into())
        .spawn(move || {
            // Capabilities are per thread: this one and the scrapers' need none (its listener
            // is bound, and they ask the control socket as clients).
            if let Err(e) = lagd_sys::caps::keep_only(&[]) {
                warn!("metrics thread: could not drop capabilities: {e}");
            }
            serve(listener, control)
        })
}

/// One scraper's connection, TCP or Unix.
#[derive(Debug)]
enum Conn {
    Tcp(std::net::TcpStream),
    Unix(std::os::unix::net::UnixStream),
}

impl Conn {
    fn try_clone(&self) -> io::Result<Self> {
        Ok(match self {
            Self::Tcp(s) => Self::Tcp(s.try_clone()?),
            Self::Unix(s) => Self::Unix(s.try_clone()?),
        })
    }

    fn shutdown(&self) {
        let _ = match self {
            Self::Tcp(s) => s.shutdown(std::net::Shutdown::Both),
            Self::Unix(s) => s.shutdown(std::net::Shutdown::Both),
        };
    }

    fn set_timeouts(&self, t: Duration) -> io::Result<()> {
        match self {
            Self::Tcp(s) => {
                s.set_read_timeout(Some(t))?;
                s.set_write_timeout(Some(t))
            }
            Self::Unix(s) => {
                s.set_read_timeout(Some(t))?;
                s.set_write_timeout(Some(t))
            }
        }
    }
}

/// A scraper's connection with deadlines: its request head must come whole within
/// [`CLIENT_TIMEOUT`] of the accept, and the reply be taken whole within [`CLIENT_TIMEOUT`] of
/// the first byte written (each read or write waits only for what is left).
struct Deadlined<'a> {
    conn: &'a Conn,
    deadline: Instant,
    /// Set when the first reply byte is written: the request head was read (or given up on).
    replying: &'a AtomicBool,
}

impl Deadlined<'_> {
    fn left(&self) -> io::Result<Duration> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the scraper's time is up",
            ));
        }
        Ok(left)
    }
}

impl Read for Deadlined<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.conn.set_timeouts(self.left()?)?;
        match self.conn {
            Conn::Tcp(s) => (&*s).read(buf),
            Conn::Unix(s) => (&*s).read(buf),
        }
    }
}

impl Write for Deadlined<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if !self.replying.swap(true, Ordering::AcqRel) {
            self.deadline = Instant::now() + CLIENT_TIMEOUT;
        }
        self.conn.set_timeouts(self.left()?)?;
        match self.conn {
            Conn::Tcp(s) => (&*s).write(buf),
            Conn::Unix(s) => (&*s).write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A scraper being served: when it came, whether its request head is read, and a handle to
/// cut it off.
struct Scraper {
    id: u64,
    since: Instant,
    replying: Arc<AtomicBool>,
    conn: Conn,
}

/// The scrapers being served, at most [`MAX_SCRAPERS`].
#[derive(Default)]
struct Scrapers {
    next_id: u64,
    serving: Vec<Scraper>,
}

impl Scrapers {
    /// Makes room for one more: when full, cuts off the scraper that has waited longest
    /// without completing its request. `false`: every slot is replying, none can go.
    fn make_room(&mut self) -> bool {
        if self.serving.len() < MAX_SCRAPERS {
            return true;
        }
        let slowest = self
            .serving
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.replying.load(Ordering::Acquire))
            .min_by_key(|(_, s)| s.since)
            .map(|(k, _)| k);
        match slowest {
            Some(k) => {
                let s = self.serving.swap_remove(k);
                debug!("metrics: every slot taken; cutting off the slowest scraper");
                s.conn.shutdown();
                true
            }
            None => false,
        }
    }
}

fn serve(listener: Listener, control: Endpoint) {
    let accept = || -> io::Result<Conn> {
        match &listener {
            Listener::Tcp(l) => l.accept().map(|(c, _)| Conn::Tcp(c)),
            Listener::Unix(l) => l.accept().map(|(c, _)| Conn::Unix(c)),
        }
    };
    match &listener {
        Listener::Tcp(l) => {
            if let Ok(a) = l.local_addr() {
                info!("metrics on http://{a}/metrics");
            }
        }
        Listener::Unix(_) => info!("metrics on a Unix socket"),
    }
    let scrapers = Arc::new(Mutex::new(Scrapers::default()));
    loop {
        let conn = match accept() {
            Ok(c) => c,
            Err(e) => {
                warn!("metrics listener: {e}");
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        // A scraper thread that panicked left the list as it was: still right.
        let mut list = scrapers.lock().unwrap_or_else(|e| e.into_inner());
        if !list.make_room() {
            drop(list);
            busy(&conn);
            continue;
        }
        let Ok(handle) = conn.try_clone() else {
            continue;
        };
        let id = list.next_id;
        list.next_id += 1;
        let replying = Arc::new(AtomicBool::new(false));
        list.serving.push(Scraper {
            id,
            since: Instant::now(),
            replying: Arc::clone(&replying),
            conn: handle,
        });
        drop(list);
        let (scrapers_t, control_t) = (Arc::clone(&scrapers), control.clone());
        let spawned = std::thread::Builder::new()
            .name("lagd-scraper".into())
            .stack_size(256 * 1024)
            .spawn(move || {
                let stream = Deadlined {
                    conn: &conn,
                    deadline: Instant::now() + CLIENT_TIMEOUT,
                    replying: &replying,
                };
                if let Err(e) = answer(stream, &control_t) {
                    debug!("metrics client: {e}");
                }
                let mut list = scrapers_t.lock().unwrap_or_else(|e| e.into_inner());
                list.serving.retain(|s| s.id != id);
            });
        if let Err(e) = spawned {
            warn!("metrics scraper thread: {e}");
            let mut list = scrapers.lock().unwrap_or_else(|e| e.into_inner());
            list.serving.retain(|s| s.id != id);
        }
    }
}

/// Tells a scraper that every slot is replying to another (503), without waiting on it.
fn busy(conn: &Conn) {
    let body = "every metrics slot is busy; try again\n";
    let reply = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = conn.set_timeouts(Duration::from_millis(100));
    let _ = match conn {
        Conn::Tcp(s) => (&*s).write_all(reply.as_bytes()),
        Conn::Unix(s) => (&*s).write_all(reply.as_bytes()),
    };
}

/// What a request head asks for.
#[derive(Debug, PartialEq, Eq)]
enum Request {
    /// `GET /metrics` (`head`: `HEAD`), in OpenMetrics if the `Accept` header names it.
    Metrics {
        /// A `HEAD` request: the headers only.
        head: bool,
        /// The scraper accepts OpenMetrics.
        openmetrics: bool,
    },
    /// `GET /` or another path: not found.
    NotFound,
    /// Not GET or HEAD.
    BadMethod,
    /// Not HTTP.
    Malformed,
}

fn parse_request(head: &[u8]) -> Request {
    let Ok(text) = std::str::from_utf8(head) else {
        return Request::Malformed;
    };
    let line = text.lines().next().unwrap_or("");
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Request::Malformed;
    };
    if !version.starts_with("HTTP/1.") || parts.next().is_some() {
        return Request::Malformed;
    }
    let head = match method {
        "GET" => false,
        "HEAD" => true,
        _ => return Request::BadMethod,
    };
    let path = target.split('?').next().unwrap_or("");
    let openmetrics = text.lines().skip(1).any(|h| {
        h.split_once(':').is_some_and(|(k, v)| {
            k.trim().eq_ignore_ascii_case("accept") && v.contains("application/openmetrics-text")
        })
    });
    if path == "/metrics" {
        Request::Metrics { head, openmetrics }
    } else {
        Request::NotFound
    }
}

/// Reads a request head (up to [`MAX_REQUEST`] bytes, until the blank line) and answers it,
/// asking `control` for the status (as the server does for each scraper; public for the
/// `metrics_http` fuzz target).
///
/// # Errors
///
/// The stream's read or write error.
pub fn answer<S>(stream: S, control: &Endpoint) -> io::Result<()>
where
    S: Read + Write,
{
    let mut stream = stream;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    // Whether the head is complete; else whether it was too long (or cut short by the client).
    let head = loop {
        if buf.windows(4).any(|w| w == b"\r\n\r\n") || buf.windows(2).any(|w| w == b"\n\n") {
            break Ok(());
        }
        if buf.len() >= MAX_REQUEST {
            break Err(true);
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            break Err(false);
        }
        buf.extend_from_slice(&chunk[..n.min(MAX_REQUEST + 1024 - buf.len())]);
    };
    let reply = |stream: &mut S, code: &str, ctype: &str, body: &str, head: bool| {
        let h = format!(
            "HTTP/1.1 {code}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        stream.write_all(h.as_bytes())?;
        if !head {
            stream.write_all(body.as_bytes())?;
        }
        stream.flush()
    };
    const TEXT: &str = "text/plain; charset=utf-8";
    match head {
        Ok(()) => {}
        Err(true) => {
            return reply(
                &mut stream,
                "431 Request Header Fields Too Large",
                TEXT,
                "request too large\n",
                false,
            );
        }
        Err(false) => {
            return reply(
                &mut stream,
                "400 Bad Request",
                TEXT,
                "the request head ended before its blank line\n",
                false,
            );
        }
    }
    match parse_request(&buf) {
        Request::Metrics { head, openmetrics } => match status_at(control) {
            Ok(status) if openmetrics => reply(
                &mut stream,
                "200 OK",
                OPENMETRICS_CONTENT_TYPE,
                &render_openmetrics(&status),
                head,
            ),
            Ok(status) => reply(&mut stream, "200 OK", CONTENT_TYPE, &render(&status), head),
            Err(e) => reply(
                &mut stream,
                "503 Service Unavailable",
                TEXT,
                &format!("lagd did not answer its control socket: {e:#}\n"),
                head,
            ),
        },
        Request::NotFound => reply(
            &mut stream,
            "404 Not Found",
            TEXT,
            "metrics are at /metrics\n",
            false,
        ),
        Request::BadMethod => reply(
            &mut stream,
            "405 Method Not Allowed",
            TEXT,
            "only GET and HEAD\n",
            false,
        ),
        Request::Malformed => reply(
            &mut stream,
            "400 Bad Request",
            TEXT,
            "not an HTTP/1 request\n",
            false,
        ),
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn listen_addresses() {
        assert_eq!(
            MetricsListen::parse("127.0.0.1:9105", false).unwrap(),
            MetricsListen::Tcp("127.0.0.1:9105".parse().unwrap())
        );
        assert!(MetricsListen::parse("[::1]:9105", false).is_ok());
        let e = MetricsListen::parse("0.0.0.0:9105", false).unwrap_err();
        assert!(e.contains("not a loopback"), "{e}");
        assert!(MetricsListen::parse("0.0.0.0:9105", true).is_ok());
        assert_eq!(
            MetricsListen::parse("unix:/run/lagd/m.sock", false).unwrap(),
            MetricsListen::Unix("/run/lagd/m.sock".into())
        );
        assert!(MetricsListen::parse("unix:m.sock", false).is_err());
        assert!(MetricsListen::parse("localhost", false).is_err());
        assert!(MetricsListen::parse("127.0.0.1:0", false).is_err());
    }

    #[test]
    fn requests() {
        assert_eq!(
            parse_request(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
            Request::Metrics {
                head: false,
                openmetrics: false
            }
        );
        assert_eq!(
            parse_request(b"HEAD /metrics?x=1 HTTP/1.0\r\n\r\n"),
            Request::Metrics {
                head: true,
                openmetrics: false
            }
        );
        assert_eq!(
            parse_request(
                b"GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text;version=1.0.0,text/plain;q=0.5\r\n\r\n"
            ),
            Request::Metrics {
                head: false,
                openmetrics: true
            }
        );
        assert_eq!(parse_request(b"GET / HTTP/1.1\r\n\r\n"), Request::NotFound);
        assert_eq!(
            parse_request(b"POST /metrics HTTP/1.1\r\n\r\n"),
            Request::BadMethod
        );
        assert_eq!(parse_request(b"hello\r\n\r\n"), Request::Malformed);
        assert_eq!(
            parse_request(&[0xff, 0xfe, b'\n', b'\n']),
            Request::Malformed
        );
    }

    /// A stream that reads from a fixed request and records what is written.
    struct Fake {
        input: io::Cursor<Vec<u8>>,
        output: Vec<u8>,
    }

    impl Read for Fake {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.input.read(buf)
        }
    }

    impl Write for Fake {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.output.write(buf)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn exchange(request: &[u8]) -> String {
        let mut f = Fake {
            input: io::Cursor::new(request.to_vec()),
            output: Vec::new(),
        };
        answer(
            &mut f,
            &Endpoint::File("/nonexistent/lagd-metrics-test.sock".into()),
        )
        .unwrap();
        String::from_utf8(f.output).unwrap()
    }

    #[test]
    fn counters_get_their_total_name_in_the_text_format() {
        let om = "# HELP a_b Things.\n# TYPE a_b counter\na_b_total{x=\"1\"} 3\n\
                  # HELP g A gauge.\n# TYPE g gauge\ng 1.5\n# EOF\n";
        assert_eq!(
            openmetrics_to_text(om),
            "# HELP a_b_total Things.\n# TYPE a_b_total counter\na_b_total{x=\"1\"} 3\n\
             # HELP g A gauge.\n# TYPE g gauge\ng 1.5\n"
        );
    }

    #[test]
    fn a_served_unix_socket_is_not_taken_over() {
        let dir = std::env::temp_dir().join(format!("lagd-metrics-bind-{}", std::process::id()));
        let path = dir.join("m.sock");
        let listen = MetricsListen::Unix(path.clone());
        let first = bind(&listen).unwrap();
        let e = bind(&listen).unwrap_err();
        assert!(e.to_string().contains("another process serves"), "{e}");
        drop(first);
        // Stale now (nobody accepts): replaced.
        let again = bind(&listen).unwrap();
        drop(again);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn samples_are_sorted_within_their_family() {
        let text = "# TYPE a gauge\na{m=\"2\"} 1\na{m=\"1\"} 1\n# TYPE b gauge\nb 0\n# EOF\n";
        assert_eq!(
            sort_samples(text),
            "# TYPE a gauge\na{m=\"1\"} 1\na{m=\"2\"} 1\n# TYPE b gauge\nb 0\n# EOF\n"
        );
    }

    #[test]
    fn oversized_and_bad_requests_get_errors() {
        let mut big = b"GET /metrics HTTP/1.1\r\n".to_vec();
        big.extend(std::iter::repeat_n(b'a', MAX_REQUEST * 2));
        assert!(exchange(&big).starts_with("HTTP/1.1 431 "));
        assert!(exchange(b"GET /x HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404 "));
        assert!(exchange(b"PUT /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405 "));
        assert!(exchange(b"\x00\x01\n\n").starts_with("HTTP/1.1 400 "));
        // A head the client ends before its blank line is a bad request, not a long one.
        for cut in [&b""[..], b"GET /metrics HTTP/1.1\r\n", b"GET /metrics"] {
            let r = exchange(cut);
            assert!(r.starts_with("HTTP/1.1 400 "), "{r}");
        }
        // No lagd behind the control socket: the scraper learns it, nothing panics.
        let r = exchange(b"GET /metrics HTTP/1.1\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 503 "), "{r}");
        assert!(r.contains("did not answer"), "{r}");
    }
}
