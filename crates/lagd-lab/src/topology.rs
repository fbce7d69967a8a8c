//! The lab's network: two network namespaces ("hosts" A and B) joined by veth links, optional
//! tc shaping on both ends of every link, and every process started inside them.
//!
//! All names carry a per-lab tag made of the process id and a random number, so several labs can
//! run at once. [`Topology`] removes everything it made when dropped, also after an error, a
//! panic or an interruption: it stops the processes it started (by their ids), then deletes the
//! namespaces (which takes the veths with them) and its scratch directory.

use std::collections::hash_map::RandomState;
use std::fs::{self, File};
use std::hash::{BuildHasher, Hasher};
use std::io;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result, bail, ensure};
use lagd_sys::clsact::Attach;
use lagd_sys::isolate::{SlowProtocolsEgressDrop, TcxUnavailable};
use lagd_sys::netns::NetNs;
use lagd_sys::packet::{PacketOptions, PacketSocket};
use serde::Deserialize;

/// The start of every lab namespace name: `lagdlab-<pid>-<tag>-a` and `…-b`.
pub const NAMESPACE_PREFIX: &str = "lagdlab-";

/// How long a process gets to exit after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// tc tbf burst, as measured best on this kind of machine (a smaller burst makes tbf segment GSO
/// packets and costs about 2 %).
pub const TBF_BURST: &str = "256kb";

/// One of the two hosts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// Host A: the traffic sender.
    A,
    /// Host B: the traffic receiver.
    B,
}

impl Side {
    /// `"a"` or `"b"`.
    pub fn letter(self) -> &'static str {
        match self {
            Self::A => "a",
            Self::B => "b",
        }
    }
}

/// A veth link between the hosts. Both ends carry the same name, each in its own namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    /// The interface name at both ends.
    pub name: String,
}

/// A link rate for tc tbf, as tc spells it (`1gbit`, `100mbit`), or unlimited.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rate {
    text: String,
    bits_per_second: u64,
}

impl Rate {
    /// Parses `0` (unlimited) or a number with a tc unit: `bit`, `kbit`, `mbit`, `gbit`, `tbit`
    /// (decimal multiples) or `bps`, `kbps`, `mbps`, `gbps` (bytes per second).
    pub fn parse(text: &str) -> Result<Self, String> {
        let t = text.trim().to_ascii_lowercase();
        let split = t
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let value: f64 = num
            .parse()
            .map_err(|_| format!("rate {text:?}: expected a number with a unit, like 1gbit"))?;
        let scale: f64 = match unit {
            "" if value == 0.0 => 0.0,
            "bit" => 1.0,
            "kbit" => 1e3,
            "mbit" => 1e6,
            "gbit" => 1e9,
            "tbit" => 1e12,
            "bps" => 8.0,
            "kbps" => 8e3,
            "mbps" => 8e6,
            "gbps" => 8e9,
            _ => {
                return Err(format!(
                    "rate {text:?}: unit must be bit, kbit, mbit, gbit, tbit, bps, kbps, mbps or gbps (or 0 for unlimited)"
                ));
            }
        };
        let bits = value * scale;
        if !bits.is_finite() || bits < 0.0 {
            return Err(format!("rate {text:?} is out of range"));
        }
        if bits > 0.0 && bits < 8_000.0 {
            return Err(format!("rate {text:?} is too low for tbf (at least 8kbit)"));
        }
        Ok(Self {
            text: if bits == 0.0 { "0".into() } else { t },
            bits_per_second: bits as u64,
        })
    }

    /// True for `--rate 0`: no shaping.
    pub fn is_unlimited(&self) -> bool {
        self.bits_per_second == 0
    }

    /// Bits per second (0 = unlimited).
    pub fn bits_per_second(&self) -> u64 {
        self.bits_per_second
    }

    /// The rate as tc reads it.
    pub fn as_tc(&self) -> &str {
        &self.text
    }
}

/// Kernel counters of one interface.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Frames sent.
    pub tx_packets: u64,
    /// Frames received.
    pub rx_packets: u64,
}

impl Counters {
    /// `self - before`, saturating (counters only grow unless the interface was recreated).
    pub fn since(self, before: Self) -> Self {
        Self {
            tx_bytes: self.tx_bytes.saturating_sub(before.tx_bytes),
            rx_bytes: self.rx_bytes.saturating_sub(before.rx_bytes),
            tx_packets: self.tx_packets.saturating_sub(before.tx_packets),
            rx_packets: self.rx_packets.saturating_sub(before.rx_packets),
        }
    }
}

/// A process the lab started; stopped (SIGTERM, then SIGKILL) when the lab ends.
#[derive(Debug)]
struct Managed {
    label: String,
    child: Child,
    log: PathBuf,
    out: PathBuf,
    exited: Option<ExitStatus>,
}

/// Handle to a process started with [`Topology::spawn`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessId(usize);

/// The two hosts, their links and everything running in them. Dropping it removes all of it.
#[derive(Debug)]
pub struct Topology {
    tag: String,
    prefix: String,
    namespaces: Vec<String>,
    links: Vec<Link>,
    subnet: [u8; 2],
    dir: PathBuf,
    processes: Vec<Managed>,
    pidfiles: Vec<PathBuf>,
    extra_files: Vec<PathBuf>,
    /// Every veth end as (namespace, interface): what [`Topology::shape`] and
    /// [`Topology::set_mtu`] act on.
    ends: Vec<(String, String)>,
    /// The switch namespaces, in order (none when the hosts are back to back).
    switches: Vec<String>,
    /// The client hosts.
    clients: Vec<Client>,
}

/// A client host: a namespace of its own with one veth link to the switch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Client {
    /// Its namespace.
    pub ns: String,
    /// Its end of the link (inside `ns`).
    pub dev: String,
    /// The switch's end of the link (inside the first switch's namespace).
    pub port: String,
}

/// How the links run between host A and host B.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fabric {
    /// Back to back: each link is one veth pair between the hosts.
    Direct,
    /// Every link goes through one switch namespace: link `i` is a veth from host A to the
    /// switch (its end there named `<tag>a<i>`) and one from the switch to host B (`<tag>b<i>`).
    Switch,
    /// Link `i` goes through its own switch namespace (seed 004's two switches).
    SwitchPerLink,
}

impl Topology {
    /// Creates namespaces `lagdlab-<pid>-<tag>-a` and `-b` (IPv6 off, loopback up) joined by
    /// `links` veth pairs named `<tag>m<i>`, all up, unshaped and without addresses.
    pub fn create(links: usize) -> Result<Self> {
        Self::create_with(links, Fabric::Direct)
    }

    /// Like [`Topology::create`], with the links running through switch namespaces
    /// (`<prefix>-s<k>`) as `fabric` says. A switch namespace holds only the link ends; what
    /// joins them (a bridge, a port-channel) is the caller's to make. The member ends in the
    /// hosts carry the same names as with [`Fabric::Direct`].
    pub fn create_with(links: usize, fabric: Fabric) -> Result<Self> {
        let r = random_u64();
        let tag = format!("lg{:06x}", r & 0xff_ffff);
        let prefix = format!("{NAMESPACE_PREFIX}{}-{tag}", std::process::id());
        let dir = std::env::temp_dir().join(&prefix);
        // A private /24 inside 10/8, different per lab (only ever used inside the namespaces).
        let subnet = [(r >> 24) as u8, (r >> 32) as u8];
        let mut topo = Self {
            tag,
            prefix,
            namespaces: Vec::new(),
            links: Vec::new(),
            subnet,
            dir,
            processes: Vec::new(),
            pidfiles: Vec::new(),
            extra_files: Vec::new(),
            ends: Vec::new(),
            switches: Vec::new(),
            clients: Vec::new(),
        };
        fs::create_dir_all(&topo.dir)
            .with_context(|| format!("creating {}", topo.dir.display()))?;
        for side in [Side::A, Side::B] {
            topo.add_namespace(side.letter())?;
        }
        let ns_a = topo.ns(Side::A).to_string();
        let ns_b = topo.ns(Side::B).to_string();
        let switches = match fabric {
            Fabric::Direct => 0,
            Fabric::Switch => 1,
            Fabric::SwitchPerLink => links,
        };
        for k in 0..switches {
            let ns = topo.add_namespace(&format!("s{k}"))?;
            topo.switches.push(ns);
        }
        for i in 0..links {
            let name = format!("{}m{i}", topo.tag);
            topo.links.push(Link { name: name.clone() });
            if switches == 0 {
                topo.veth(&ns_a, &name, &ns_b, &name)?;
            } else {
                let sw = topo.switches[i % switches].clone();
                let (ta, tb) = (format!("{}a{i}", topo.tag), format!("{}b{i}", topo.tag));
                topo.veth(&ns_a, &name, &sw, &ta)?;
                topo.veth(&ns_b, &name, &sw, &tb)?;
            }
        }
        topo.wait_running()?;
        Ok(topo)
    }

    /// Waits until every link end is running: the kernel marks a veth end's operational state
    /// (`IFF_RUNNING`, `state UP`) asynchronously after both ends come up, so a caller that
    /// compares or uses link state right after creation would otherwise race with it.
    fn wait_running(&self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut namespaces: Vec<&str> = self.ends.iter().map(|(ns, _)| ns.as_str()).collect();
        namespaces.sort_unstable();
        namespaces.dedup();
        loop {
            let mut waiting = Vec::new();
            for ns in &namespaces {
                let listing = run("ip", &["-n", ns, "-o", "link", "show"])?;
                for (_, end) in self.ends.iter().filter(|(n, _)| n == ns) {
                    let running = listing.lines().any(|l| {
                        let name = l.split(": ").nth(1).unwrap_or("");
                        name.split('@').next() == Some(end.as_str())
                            && l.contains(" state UP ")
                            && !l.contains("NO-CARRIER")
                    });
                    if !running {
                        waiting.push(format!("{ns}/{end}"));
                    }
                }
            }
            if waiting.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "link ends not running 10 s after creation: {}",
                    waiting.join(", ")
                );
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// A veth pair `a` (in namespace `ns_a`) ↔ `b` (in `ns_b`), both ends up and registered
    /// for shaping and MTU.
    fn veth(&mut self, ns_a: &str, a: &str, ns_b: &str, b: &str) -> Result<()> {
        run(
            "ip",
            &[
                "-n", ns_a, "link", "add", a, "type", "veth", "peer", "name", b, "netns", ns_b,
            ],
        )?;
        self.ends.push((ns_a.to_string(), a.to_string()));
        self.ends.push((ns_b.to_string(), b.to_string()));
        run("ip", &["-n", ns_a, "link", "set", a, "up"])?;
        run("ip", &["-n", ns_b, "link", "set", b, "up"])?;
        Ok(())
    }

    /// Adds client host `<prefix>-c<k>` with one veth link (`<tag>k<k>` inside it) to the
    /// first switch (`<tag>c<k>` there, not yet attached to anything). Needs a switch.
    pub fn add_client(&mut self) -> Result<Client> {
        let sw = self
            .switches
            .first()
            .cloned()
            .context("client hosts need a switch")?;
        let k = self.clients.len();
        let ns = self.add_namespace(&format!("c{k}"))?;
        let (dev, port) = (format!("{}k{k}", self.tag), format!("{}c{k}", self.tag));
        self.veth(&ns, &dev, &sw, &port)?;
        let client = Client { ns, dev, port };
        self.clients.push(client.clone());
        Ok(client)
    }

    /// The switch namespaces (empty when the hosts are back to back).
    pub fn switches(&self) -> &[String] {
        &self.switches
    }

    /// The client hosts, in order.
    pub fn clients(&self) -> &[Client] {
        &self.clients
    }

    /// Sets the MTU of every veth end (hosts, switches, clients).
    pub fn set_mtu(&self, mtu: u32) -> Result<()> {
        let m = mtu.to_string();
        for (ns, dev) in &self.ends {
            run("ip", &["-n", ns, "link", "set", dev, "mtu", &m])?;
        }
        Ok(())
    }

    /// Bytes received, summed over every interface end in the switch namespaces: what crossed
    /// the switches (0 without one).
    pub fn switch_rx_bytes(&self) -> Result<u64> {
        let mut total = 0;
        for (ns, dev) in &self.ends {
            if self.switches.contains(ns) {
                total += link_counters(ns, dev)?.rx_bytes;
            }
        }
        Ok(total)
    }

    /// Creates one more namespace, `<prefix>-<suffix>` (IPv6 off, loopback up), removed with
    /// the lab; returns its name. The hosts A and B are the first two.
    pub fn add_namespace(&mut self, suffix: &str) -> Result<String> {
        let name = format!("{}-{suffix}", self.prefix);
        run("ip", &["netns", "add", &name])?;
        // Registered right away, so that Drop removes it whatever fails next.
        self.namespaces.push(name.clone());
        in_named_ns(&name, || -> io::Result<()> {
            for scope in ["all", "default"] {
                match fs::write(format!("/proc/sys/net/ipv6/conf/{scope}/disable_ipv6"), "1") {
                    // A kernel without IPv6 sends no IPv6 noise either.
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    other => other?,
                }
            }
            Ok(())
        })?
        .context("disabling IPv6 in the lab namespace")?;
        run("ip", &["-n", &name, "link", "set", "lo", "up"])?;
        Ok(name)
    }

    /// The per-lab tag (`lg` + 6 hex digits) that starts every interface name.
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// `lagdlab-<pid>-<tag>`: the start of both namespace names.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The namespace of a host.
    pub fn ns(&self, side: Side) -> &str {
        match side {
            Side::A => &self.namespaces[0],
            Side::B => &self.namespaces[1],
        }
    }

    /// The veth links.
    pub fn links(&self) -> &[Link] {
        &self.links
    }

    /// Every link end of a host (the ends have the same names in both hosts), comma-separated,
    /// as lagd's `--members` takes them.
    pub fn member_list(&self) -> String {
        let names: Vec<&str> = self.links.iter().map(|l| l.name.as_str()).collect();
        names.join(",")
    }

    /// The lab's scratch directory (logs, OVS databases, tool output); removed on drop.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Address `10.s.t.host` in the lab's private /24.
    pub fn address(&self, host: u8) -> Ipv4Addr {
        Ipv4Addr::new(10, self.subnet[0], self.subnet[1], host)
    }

    /// Address `10.(s^0x80).t.host`: the overlay's inner /24, apart from the outer one.
    pub fn overlay_address(&self, host: u8) -> Ipv4Addr {
        Ipv4Addr::new(10, self.subnet[0] ^ 0x80, self.subnet[1], host)
    }

    /// Runs `ip -n <ns> ARGS` and returns its standard output.
    pub fn ip(&self, side: Side, args: &[&str]) -> Result<String> {
        let mut full = vec!["-n", self.ns(side)];
        full.extend_from_slice(args);
        run("ip", &full)
    }

    /// Shapes every veth end (hosts, switches, clients) with `tc tbf rate R burst 256kb latency 10ms` (nothing for
    /// an unlimited rate).
    pub fn shape(&self, rate: &Rate) -> Result<()> {
        if rate.is_unlimited() {
            return Ok(());
        }
        for (ns, dev) in &self.ends {
            run(
                "tc",
                &[
                    "-n",
                    ns,
                    "qdisc",
                    "replace",
                    "dev",
                    dev,
                    "root",
                    "tbf",
                    "rate",
                    rate.as_tc(),
                    "burst",
                    TBF_BURST,
                    "latency",
                    "10ms",
                ],
            )?;
        }
        Ok(())
    }

    /// Sets a per-namespace sysctl, e.g. `net/ipv4/conf/X/arp_ignore`.
    pub fn sysctl(&self, side: Side, key: &str, value: &str) -> Result<()> {
        let path = format!("/proc/sys/{key}");
        self.in_ns(side, || fs::write(&path, value))?
            .with_context(|| format!("writing {path} in {}", self.ns(side)))
    }

    /// Runs `f` on a thread inside the host's namespace. Sockets it creates stay there.
    pub fn in_ns<T: Send>(&self, side: Side, f: impl FnOnce() -> T + Send) -> Result<T> {
        in_named_ns(self.ns(side), f)
    }

    /// Kernel counters of the links' ends in one host, in link order (from `ip -s -j link`).
    pub fn member_counters(&self, side: Side) -> Result<Vec<Counters>> {
        let out = self.ip(side, &["-s", "-j", "link", "show"])?;
        let all: Vec<IpLink> = serde_json::from_str(&out).context("parsing `ip -s -j link`")?;
        self.links
            .iter()
            .map(|link| {
                let found = all
                    .iter()
                    .find(|l| l.ifname == link.name)
                    .with_context(|| format!("{} is missing in {}", link.name, self.ns(side)))?;
                let s = found.stats64.as_ref().with_context(|| {
                    format!("no statistics for {} in {}", link.name, self.ns(side))
                })?;
                Ok(Counters {
                    tx_bytes: s.tx.bytes,
                    rx_bytes: s.rx.bytes,
                    tx_packets: s.tx.packets,
                    rx_packets: s.rx.packets,
                })
            })
            .collect()
    }

    /// Drops every frame on both ends of link `link` (tc `pfifo limit 0` as the root qdisc; the
    /// kernel here has no netem or drop action) while carrier stays up, or lifts that. For a
    /// link that loses only its LACPDUs, see [`Topology::drop_slow_protocols`].
    pub fn drop_link_traffic(&self, link: &str, on: bool) -> Result<()> {
        for side in [Side::A, Side::B] {
            let ns = self.ns(side);
            let mut args = vec!["-n", ns, "qdisc"];
            if on {
                args.extend(["add", "dev", link, "root", "pfifo", "limit", "0"]);
            } else {
                args.extend(["del", "dev", link, "root"]);
            }
            run("tc", &args)?;
        }
        Ok(())
    }

    /// Drops only slow-protocol frames (EtherType 0x8809: LACPDUs, Marker PDUs) in both
    /// directions of link `link`, while every other frame still crosses it and carrier stays up:
    /// a [`SlowProtocolsEgressDrop`] (an eBPF program at tcx egress, or as a clsact filter on
    /// a kernel without tcx) on each end. The kernel here has no `act_gact` drop action and no
    /// nftables, hence the eBPF program.
    ///
    /// The drop lasts as long as the returned value: drop it to lift the drop. A frame dropped
    /// at egress never reaches the wire, so a capture on either end does not show it, and its
    /// sender's `send` fails with `ENOBUFS`.
    pub fn drop_slow_protocols(&self, link: &str) -> Result<SlowProtocolsDrop> {
        let mut ends = Vec::with_capacity(2);
        for side in [Side::A, Side::B] {
            let end = self
                .in_ns(side, || {
                    let ifindex = lagd_sys::link::ifindex(link)?;
                    match SlowProtocolsEgressDrop::attach(ifindex) {
                        Err(e) if TcxUnavailable::of(&e).is_some() => {
                            SlowProtocolsEgressDrop::attach_with(ifindex, Attach::Tc)
                        }
                        other => other,
                    }
                })?
                .with_context(|| {
                    format!(
                        "attaching the slow-protocols drop to {link} in {}",
                        self.ns(side)
                    )
                })?;
            ends.push(end);
        }
        Ok(SlowProtocolsDrop { _ends: ends })
    }

    /// Sends `count` probe frames (EtherType 0x88b6, IEEE 802's local experimental EtherType 2,
    /// with a random tag) from host A's end of `link` on a packet socket and returns how many
    /// arrive at host B's end, read with an `ETH_P_ALL` packet socket there. Such a socket sees
    /// a frame before tc ingress, so lagd's own ingress drop on a member does not hide it. Shows
    /// whether a link still carries data, whatever the bonds at its ends make of it.
    pub fn probe_link(&self, link: &str, count: u32) -> Result<u32> {
        const PROBE_TYPE: [u8; 2] = [0x88, 0xb6];
        let receiver = self
            .in_ns(Side::B, || {
                PacketSocket::bind_name(link, PacketOptions::default())
            })?
            .with_context(|| format!("probe receiver on {link} in {}", self.ns(Side::B)))?;
        let sender = self
            .in_ns(Side::A, || {
                PacketSocket::bind_name(
                    link,
                    PacketOptions {
                        ignore_outgoing: true,
                        ..PacketOptions::default()
                    },
                )
            })?
            .with_context(|| format!("probe sender on {link} in {}", self.ns(Side::A)))?;
        let tag = random_u64().to_be_bytes();
        let frame = |seq: u32| {
            // Locally administered unicast addresses no lab interface has.
            let mut f = vec![0x02, 0x6c, 0x61, 0x67, 0x64, 0xfe];
            f.extend_from_slice(&[0x02, 0x6c, 0x61, 0x67, 0x64, 0xff]);
            f.extend_from_slice(&PROBE_TYPE);
            f.extend_from_slice(&tag);
            f.extend_from_slice(&seq.to_be_bytes());
            f.resize(60, 0);
            f
        };
        let mut seen = vec![false; count as usize];
        let mut buf = vec![0u8; 65536];
        let mut drain = |seen: &mut [bool]| -> Result<()> {
            loop {
                match receiver.recv(&mut buf) {
                    Ok(n) => {
                        let f = &buf[..n];
                        if n >= 26 && f[12..14] == PROBE_TYPE && f[14..22] == tag {
                            let seq = u32::from_be_bytes([f[22], f[23], f[24], f[25]]);
                            if let Some(s) = seen.get_mut(seq as usize) {
                                *s = true;
                            }
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e).context("probe receive"),
                }
            }
        };
        for seq in 0..count {
            sender
                .send(&frame(seq))
                .with_context(|| format!("sending probe {seq} on {link}"))?;
            thread::sleep(Duration::from_millis(2));
            drain(&mut seen)?;
        }
        let deadline = Instant::now() + Duration::from_secs(1);
        while seen.iter().any(|s| !s) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
            drain(&mut seen)?;
        }
        Ok(seen.iter().filter(|s| **s).count() as u32)
    }

    /// Starts a tcpdump of slow-protocol frames (EtherType 0x8809) on host `side`'s end of every
    /// link, one capture file per link, and waits until each is listening. A capture on one end
    /// holds what that end sent and what it received. Stop it with
    /// [`Topology::stop_capture`] before reading the files; the files go with the lab.
    pub fn capture_slow_protocols(&mut self, side: Side) -> Result<SlowCapture> {
        let mut capture = SlowCapture {
            files: Vec::new(),
            processes: Vec::new(),
        };
        let links: Vec<String> = self.links.iter().map(|l| l.name.clone()).collect();
        for (i, link) in links.iter().enumerate() {
            let file = self.dir.join(format!("slow-{}-{i}.pcap", side.letter()));
            let file_s = file.to_string_lossy().into_owned();
            let id = self.spawn(
                side,
                &format!("tcpdump-slow-{}-{i}", side.letter()),
                Path::new("tcpdump"),
                // Immediate mode: each frame is handed over (and, with -U, written) as it
                // arrives, so stopping tcpdump loses none still waiting in a capture block.
                &[
                    "-i",
                    link,
                    "-n",
                    "--immediate-mode",
                    "-U",
                    "-w",
                    &file_s,
                    "ether",
                    "proto",
                    "0x8809",
                ],
            )?;
            capture.files.push(file);
            capture.processes.push(id);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        for &id in &capture.processes {
            while !self.log_tail(id, 5).contains("listening on") {
                if let Some(status) = self.try_wait(id)? {
                    bail!(
                        "tcpdump exited ({status}) before listening: {}",
                        self.log_tail(id, 5)
                    );
                }
                ensure!(
                    Instant::now() < deadline,
                    "tcpdump did not start listening within 10 s: {}",
                    self.log_tail(id, 5)
                );
                thread::sleep(Duration::from_millis(20));
            }
        }
        Ok(capture)
    }

    /// Stops a capture's tcpdumps (SIGTERM: each writes out what it holds and exits).
    pub fn stop_capture(&mut self, capture: &SlowCapture) {
        for &id in &capture.processes {
            self.stop(id);
        }
    }

    /// Takes one end of a link down (the other end then loses carrier).
    pub fn set_link_down(&self, side: Side, link: usize) -> Result<()> {
        let name = self.links[link].name.clone();
        self.ip(side, &["link", "set", &name, "down"]).map(drop)
    }

    /// Cuts link `link` as host A sees it: its far end goes down (host B's end back to back,
    /// the switch's end through a switch), so host A's member loses carrier.
    pub fn cut_link(&self, link: usize) -> Result<()> {
        if self.switches.is_empty() {
            return self.set_link_down(Side::B, link);
        }
        let ns = &self.switches[link % self.switches.len()];
        let end = format!("{}a{link}", self.tag);
        run("ip", &["-n", ns, "link", "set", &end, "down"]).map(drop)
    }

    /// Starts `program ARGS` inside a host's namespace (`ip netns exec`), with standard input
    /// closed, standard output going to `<dir>/<label>.out` and standard error to
    /// `<dir>/<label>.log`. The process is stopped when the lab ends, if it has not exited by
    /// then.
    pub fn spawn(
        &mut self,
        side: Side,
        label: &str,
        program: &Path,
        args: &[&str],
    ) -> Result<ProcessId> {
        self.spawn_with_env(side, label, program, args, &[])
    }

    /// [`Topology::spawn`] with extra environment variables.
    pub fn spawn_with_env(
        &mut self,
        side: Side,
        label: &str,
        program: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Result<ProcessId> {
        let ns = self.ns(side).to_string();
        self.spawn_in(&ns, label, program, args, env)
    }

    /// [`Topology::spawn_with_env`] in any of the lab's namespaces (a switch, a client).
    pub fn spawn_in(
        &mut self,
        ns: &str,
        label: &str,
        program: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Result<ProcessId> {
        let log = self.dir.join(format!("{label}.log"));
        let out_path = self.dir.join(format!("{label}.out"));
        let err = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let out =
            File::create(&out_path).with_context(|| format!("creating {}", out_path.display()))?;
        let child = Command::new("ip")
            .args(["netns", "exec", ns])
            .args(unblock_signals())
            .arg(program)
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .with_context(|| format!("starting {} in {ns}", program.display()))?;
        self.processes.push(Managed {
            label: label.to_string(),
            child,
            log,
            out: out_path,
            exited: None,
        });
        Ok(ProcessId(self.processes.len() - 1))
    }

    /// The exit status of a started process, if it has exited.
    pub fn try_wait(&mut self, id: ProcessId) -> Result<Option<ExitStatus>> {
        let p = &mut self.processes[id.0];
        if p.exited.is_none() {
            p.exited = p.child.try_wait()?;
        }
        Ok(p.exited)
    }

    /// The process id of a started process (`ip netns exec` and `env` exec the program, so it
    /// is the program's own).
    pub fn pid(&self, id: ProcessId) -> u32 {
        self.processes[id.0].child.id()
    }

    /// Sends signal `sig` (`INT`, `TERM`, `KILL`, ...) to a started process that has not been
    /// waited for.
    pub fn signal(&mut self, id: ProcessId, sig: &str) -> Result<()> {
        if self.try_wait(id)?.is_some() {
            bail!("{} has already exited", self.processes[id.0].label);
        }
        signal(self.pid(id), sig)
    }

    /// Waits up to `timeout` for a started process to exit; its status, or `None` if it still
    /// runs.
    pub fn wait_exit(&mut self, id: ProcessId, timeout: Duration) -> Result<Option<ExitStatus>> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.try_wait(id)? {
                return Ok(Some(s));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Where a started process's standard output goes.
    pub fn out_path(&self, id: ProcessId) -> &Path {
        &self.processes[id.0].out
    }

    /// The last `lines` lines of a started process's standard error, for error messages.
    pub fn log_tail(&self, id: ProcessId, lines: usize) -> String {
        let text = fs::read_to_string(&self.processes[id.0].log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Stops a started process: SIGTERM, then SIGKILL after a grace period.
    pub fn stop(&mut self, id: ProcessId) {
        stop_child(&mut self.processes[id.0]);
    }

    /// Registers a pid file written by a daemon that detached itself (Open vSwitch): the daemon
    /// is stopped when the lab ends.
    pub fn adopt_pidfile(&mut self, path: PathBuf) {
        self.pidfiles.push(path);
    }

    /// Registers a file outside the scratch directory (a control socket) to remove at the end.
    pub fn remove_at_end(&mut self, path: PathBuf) {
        self.extra_files.push(path);
    }

    /// Stops everything and removes the namespaces, reporting the first failure. Drop does the
    /// same but can only print failures.
    pub fn teardown(mut self) -> Result<()> {
        let problems = self.cleanup();
        match problems.first() {
            None => Ok(()),
            Some(p) => bail!("lab cleanup: {p}"),
        }
    }

    fn cleanup(&mut self) -> Vec<String> {
        let mut problems = Vec::new();
        for p in &mut self.processes {
            stop_child(p);
        }
        for pidfile in std::mem::take(&mut self.pidfiles) {
            if let Some(pid) = fs::read_to_string(&pidfile)
                .ok()
                .and_then(|s| s.trim().parse::<u32>().ok())
            {
                stop_pid(pid);
            }
        }
        // Anything else still inside our own namespaces was started by this lab (tools that
        // double-forked): stop it by id before the namespaces go.
        for ns in &self.namespaces {
            if let Ok(out) = run("ip", &["netns", "pids", ns]) {
                let me = std::process::id();
                for pid in out.split_whitespace().filter_map(|p| p.parse::<u32>().ok()) {
                    if pid != me {
                        stop_pid(pid);
                    }
                }
            }
        }
        for ns in std::mem::take(&mut self.namespaces) {
            if let Err(e) = run("ip", &["netns", "del", &ns]) {
                problems.push(format!("{e:#}"));
            }
        }
        for f in std::mem::take(&mut self.extra_files) {
            let _ = fs::remove_file(f);
        }
        if self.dir.exists() {
            if let Err(e) = fs::remove_dir_all(&self.dir) {
                problems.push(format!("removing {}: {e}", self.dir.display()));
            }
        }
        problems
    }
}

/// LACPDU loss on one link, made by [`Topology::drop_slow_protocols`]; dropping the value lifts
/// it (both eBPF programs are detached).
#[derive(Debug)]
pub struct SlowProtocolsDrop {
    /// Held only to be closed on drop, which detaches the programs.
    _ends: Vec<SlowProtocolsEgressDrop>,
}

/// Slow-protocol captures on one host's end of every link, made by
/// [`Topology::capture_slow_protocols`].
#[derive(Debug)]
pub struct SlowCapture {
    files: Vec<PathBuf>,
    processes: Vec<ProcessId>,
}

impl SlowCapture {
    /// The capture files, in link order.
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        for p in self.cleanup() {
            eprintln!("lagctl lab: cleanup: {p}");
        }
    }
}

fn stop_child(p: &mut Managed) {
    if p.exited.is_some() {
        return;
    }
    if let Ok(Some(status)) = p.child.try_wait() {
        p.exited = Some(status);
        return;
    }
    let _ = signal(p.child.id(), "TERM");
    let deadline = Instant::now() + STOP_GRACE;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = p.child.try_wait() {
            p.exited = Some(status);
            return;
        }
        thread::sleep(Duration::from_millis(20));
    }
    eprintln!(
        "lagctl lab: {} did not stop on SIGTERM within {:?}; killing it",
        p.label, STOP_GRACE
    );
    let _ = p.child.kill();
    p.exited = p.child.wait().ok();
}

/// SIGTERM, then SIGKILL, to a process that is not our child (a detached daemon).
fn stop_pid(pid: u32) {
    let alive = || Path::new(&format!("/proc/{pid}")).exists() && !is_zombie(pid);
    if !alive() {
        return;
    }
    let _ = signal(pid, "TERM");
    let deadline = Instant::now() + STOP_GRACE;
    while Instant::now() < deadline {
        if !alive() {
            return;
        }
        thread::sleep(Duration::from_millis(20));
    }
    let _ = signal(pid, "KILL");
}

fn is_zombie(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            // The state follows the command name in parentheses.
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
                .unwrap_or(false)
        })
        .unwrap_or(true)
}

/// Sends a signal by name (`TERM`, `KILL`) with the shell's built-in `kill`, which every system
/// has (procps's `kill` may be missing on a minimal one).
fn signal(pid: u32, sig: &str) -> Result<()> {
    run("sh", &["-c", r#"kill -s "$0" "$1""#, sig, &pid.to_string()]).map(drop)
}

/// Runs `f` on a thread inside the namespace `ns` (one of the lab's). Sockets it creates stay
/// there.
pub fn in_named_ns<T: Send>(ns: &str, f: impl FnOnce() -> T + Send) -> Result<T> {
    NetNs::open(ns)
        .and_then(|n| n.run(f))
        .with_context(|| format!("entering namespace {ns}"))
}

/// Runs a command and returns its standard output; an error carries its standard error.
pub fn run(cmd: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(cmd)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {cmd} (is it installed? the lab needs root)"))?;
    if !out.status.success() {
        bail!(
            "`{cmd} {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A command prefix that starts the program with SIGINT and SIGTERM unblocked.
///
/// The lab blocks those signals in all its threads (it reads them from a signalfd), and a child
/// inherits the blocked mask across exec, so a child started directly would ignore SIGTERM.
/// GNU `env --default-signal` unblocks them and resets their handlers before exec. Empty if this
/// `env` lacks the option (the lab then falls back to SIGKILL after the grace period).
pub fn unblock_signals() -> &'static [&'static str] {
    static PREFIX: OnceLock<Vec<&'static str>> = OnceLock::new();
    PREFIX.get_or_init(|| {
        let args = ["env", "--default-signal=INT,TERM"];
        let works = Command::new(args[0])
            .args(&args[1..])
            .arg("true")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if works { args.to_vec() } else { Vec::new() }
    })
}

/// What the LACPDUs one bond member sent must carry, taken from lagd's status (what
/// `lagctl show --json` prints for the member: its `perm_hw_addr` and its `lacp`'s `actor` and
/// `partner`): every one its source MAC and the actor's identity (system priority and MAC, key,
/// port priority and number); the last one also the actor's current state bits Activity to
/// Distributing ([`ANNOUNCED_STATE_BITS`]) and the partner's identity.
///
/// Not compared, because 802.1AX does not send a LACPDU when they change, so the last LACPDU
/// may carry older values: the actor's Defaulted and Expired bits (set and cleared by the
/// receive machine, which does not set NTT; a member that goes from EXPIRED to DEFAULTED with a
/// silent partner keeps Expired set in its last LACPDU until the next periodic one, 30 s on),
/// and the partner's state (a partner's own state change does not make lagd send; only a change
/// in how the partner sees lagd does).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LacpduExpectation {
    /// The member's permanent MAC: the LACPDUs' source address.
    pub src_mac: String,
    /// The actor information lagd reports for the member.
    pub actor: LacpInfoExpectation,
    /// The partner information lagd reports for the member.
    pub partner: LacpInfoExpectation,
}

/// One side's LACP information as lagd's status reports it (the fields of an `actor` or
/// `partner` object in `lagctl show --json`, without the state's names).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LacpInfoExpectation {
    /// System priority.
    pub system_priority: u16,
    /// System MAC address, as lagd prints it.
    pub system_mac: String,
    /// Key.
    pub key: u16,
    /// Port priority.
    pub port_priority: u16,
    /// Port number.
    pub port: u16,
    /// State bits as a number.
    pub state: u8,
}

/// The actor state bits the last LACPDU always carries as they are now: Synchronization,
/// Collecting and Distributing, whose every change (by the mux machine) makes lagd send at once
/// (802.1AX's NTT), and Activity, Timeout and Aggregation, which come from lagd's configuration
/// and do not change while it runs.
pub const ANNOUNCED_STATE_BITS: u8 = 0x3f;

/// One side's information in a LACPDU, as tshark prints it.
#[derive(Debug, Default, PartialEq, Eq)]
struct DecodedInfo {
    system_priority: u16,
    system: String,
    key: u16,
    port_priority: u16,
    port: u16,
    state: u8,
}

impl DecodedInfo {
    /// The identity fields that differ from `want`, named.
    fn identity_mismatches(&self, want: &LacpInfoExpectation) -> Vec<String> {
        let mut bad = Vec::new();
        let mut check = |name: &str, got: String, want: String| {
            if !got.eq_ignore_ascii_case(&want) {
                bad.push(format!("{name} {got} (lagd reports {want})"));
            }
        };
        check(
            "system priority",
            self.system_priority.to_string(),
            want.system_priority.to_string(),
        );
        check("system", self.system.clone(), want.system_mac.clone());
        check("key", self.key.to_string(), want.key.to_string());
        check(
            "port priority",
            self.port_priority.to_string(),
            want.port_priority.to_string(),
        );
        check("port", self.port.to_string(), want.port.to_string());
        bad
    }
}

/// The value of the first line of `block` (one frame of `tshark -V` output) that reads
/// `KEY: VALUE`, leading white space ignored.
fn tshark_field<'a>(block: &'a str, key: &str) -> Result<&'a str> {
    block
        .lines()
        .find_map(|l| {
            l.trim_start()
                .strip_prefix(key)
                .and_then(|rest| rest.strip_prefix(": "))
        })
        .with_context(|| format!("no `{key}` line"))
}

/// One side's information from a frame of `tshark -V` output; `who` is `Actor` or `Partner`.
fn decode_info(block: &str, who: &str) -> Result<DecodedInfo> {
    let number = |key: &str| -> Result<u16> {
        let v = tshark_field(block, &format!("{who} {key}"))?;
        v.trim()
            .parse()
            .with_context(|| format!("{who} {key}: {v:?} is not a number"))
    };
    // tshark names the system field differently for the two sides.
    let system_key = if who == "Actor" {
        "Actor System ID"
    } else {
        "Partner System"
    };
    let system = tshark_field(block, system_key)?;
    // `02:00:00:00:00:01 (02:00:00:00:00:01)`, or `Vendor_00:00:01 (…)` with name resolution:
    // the address in parentheses if there is one.
    let system = match system.split_once('(') {
        Some((_, rest)) => rest.trim_end_matches(')').to_owned(),
        None => system.split_whitespace().next().unwrap_or("").to_owned(),
    };
    let state = tshark_field(block, &format!("{who} State"))?;
    let state_hex = state.split(',').next().unwrap_or("").trim();
    let state = u8::from_str_radix(state_hex.trim_start_matches("0x"), 16)
        .with_context(|| format!("{who} State: {state:?}"))?;
    Ok(DecodedInfo {
        system_priority: number("System Priority")?,
        system,
        key: number("Key")?,
        port_priority: number("Port Priority")?,
        port: number("Port")?,
        state,
    })
}

/// Checks with Wireshark's dissector, in `tshark -V`, every frame sent from `expect.src_mac` in
/// the capture `capture`: each must decode as a LACPv1 LACPDU (`eth:ethertype:slow:lacp`) with
/// no malformed mark and no expert information of any severity, carry the actor identity lagd
/// reports, and the last one the actor state (the bits lagd announces at once) and partner
/// identity lagd reports (see [`LacpduExpectation`]). Returns how many frames there were (0 is
/// not an error here).
///
/// The first problem is the error, with the frame's whole decode.
pub fn check_lacpdus_with_tshark(capture: &Path, expect: &LacpduExpectation) -> Result<usize> {
    let filter = format!("eth.src == {}", expect.src_mac);
    let capture_s = capture.to_string_lossy().into_owned();
    let text = run("tshark", &["-n", "-r", &capture_s, "-Y", &filter, "-V"])
        .with_context(|| format!("decoding {}", capture.display()))?;
    // A frame's decode starts with an unindented `Frame N: …` line.
    let mut frames: Vec<String> = Vec::new();
    for line in text.lines() {
        if line.starts_with("Frame ") {
            frames.push(String::new());
        }
        match frames.last_mut() {
            Some(f) => {
                f.push_str(line);
                f.push('\n');
            }
            None if line.trim().is_empty() => {}
            None => bail!("unexpected tshark output before the first frame: {line}"),
        }
    }
    let count = frames.len();
    for (i, block) in frames.iter().enumerate() {
        let first = block.lines().next().unwrap_or("");
        let problem =
            |what: String| anyhow::anyhow!("{}: {first}: {what}\n{block}", capture.display());
        let protocols = tshark_field(block.as_str(), "[Protocols in frame").unwrap_or("");
        if protocols != "eth:ethertype:slow:lacp]" {
            return Err(problem(format!("not a LACPDU (protocols {protocols:?})")));
        }
        if let Some(line) = block
            .lines()
            .find(|l| l.contains("Malformed") || l.contains("Expert Info"))
        {
            return Err(problem(format!("tshark flags it: {}", line.trim())));
        }
        let version = tshark_field(block, "LACP Version").map_err(|e| problem(e.to_string()))?;
        if version != "0x01" {
            return Err(problem(format!("LACP version {version}, not 1")));
        }
        let actor = decode_info(block, "Actor").map_err(|e| problem(format!("{e:#}")))?;
        let partner = decode_info(block, "Partner").map_err(|e| problem(format!("{e:#}")))?;
        let mut bad: Vec<String> = actor
            .identity_mismatches(&expect.actor)
            .into_iter()
            .map(|m| format!("actor {m}"))
            .collect();
        if i + 1 == count {
            if actor.state & ANNOUNCED_STATE_BITS != expect.actor.state & ANNOUNCED_STATE_BITS {
                bad.push(format!(
                    "last LACPDU's actor state 0x{:02x} (lagd reports 0x{:02x})",
                    actor.state, expect.actor.state
                ));
            }
            bad.extend(
                partner
                    .identity_mismatches(&expect.partner)
                    .into_iter()
                    .map(|m| format!("last LACPDU's partner {m}")),
            );
        }
        if !bad.is_empty() {
            return Err(problem(format!(
                "fields differ from lagd's status: {}",
                bad.join(", ")
            )));
        }
    }
    Ok(count)
}

/// Whether this process runs as root (effective uid 0, from `/proc/self/status`): the lab and
/// every network-namespace test need it.
pub fn is_root() -> bool {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|e| e == "0"))
        })
        .unwrap_or(false)
}

/// True if `program` is found in `PATH`.
pub fn in_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|d| d.join(program).is_file()))
        .unwrap_or(false)
}

/// Ok if `program` is on PATH; otherwise an error naming it and the Debian `package` that has
/// it. Run before a program is started inside a namespace: `ip netns exec NS PROGRAM` only
/// fails with exit code 255, which reads as the network being broken.
pub fn require_program(program: &str, package: &str) -> Result<()> {
    if in_path(program) {
        Ok(())
    } else {
        bail!("{program} is not installed: `apt-get install {package}` (.ci/run installs it)")
    }
}

/// A random number, different for every call (no external randomness crate needed).
pub fn random_u64() -> u64 {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let mut h = RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u64(CALLS.fetch_add(1, Ordering::Relaxed));
    if let Ok(t) = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH) {
        h.write_u128(t.as_nanos());
    }
    h.finish()
}

/// Kernel counters of interface `dev` in namespace `ns`.
pub fn link_counters(ns: &str, dev: &str) -> Result<Counters> {
    let out = run("ip", &["-n", ns, "-s", "-j", "link", "show", "dev", dev])?;
    let all: Vec<IpLink> = serde_json::from_str(&out).context("parsing `ip -s -j link`")?;
    let s = all
        .first()
        .and_then(|l| l.stats64.as_ref())
        .with_context(|| format!("no statistics for {dev} in {ns}"))?;
    Ok(Counters {
        tx_bytes: s.tx.bytes,
        rx_bytes: s.rx.bytes,
        tx_packets: s.tx.packets,
        rx_packets: s.rx.packets,
    })
}

/// The MTU of interface `dev` in namespace `ns`.
pub fn link_mtu(ns: &str, dev: &str) -> Result<u32> {
    let out = run("ip", &["-n", ns, "-j", "link", "show", "dev", dev])?;
    let v: serde_json::Value = serde_json::from_str(&out).context("parsing `ip -j link`")?;
    v.get(0)
        .and_then(|l| l.get("mtu"))
        .and_then(serde_json::Value::as_u64)
        .map(|m| m as u32)
        .with_context(|| format!("no MTU for {dev} in {ns}"))
}

/// The interface that holds IPv4 address `ip` in namespace `ns`, and its MAC.
pub fn interface_with_address(ns: &str, ip: Ipv4Addr) -> Result<(String, String)> {
    let out = run("ip", &["-n", ns, "-j", "addr", "show"])?;
    let all: Vec<IpAddrEntry> = serde_json::from_str(&out).context("parsing `ip -j addr`")?;
    let want = ip.to_string();
    all.into_iter()
        .find(|l| l.addr_info.iter().any(|a| a.local == want))
        .map(|l| (l.ifname, l.address.unwrap_or_default()))
        .with_context(|| format!("no interface holds {ip} in {ns}"))
}

#[derive(Deserialize)]
struct IpAddrEntry {
    ifname: String,
    address: Option<String>,
    #[serde(default)]
    addr_info: Vec<IpAddrInfo>,
}

#[derive(Deserialize)]
struct IpAddrInfo {
    #[serde(default)]
    local: String,
}

#[derive(Deserialize)]
struct IpLink {
    ifname: String,
    stats64: Option<IpStats>,
}

#[derive(Deserialize)]
struct IpStats {
    rx: IpDir,
    tx: IpDir,
}

#[derive(Deserialize)]
struct IpDir {
    bytes: u64,
    packets: u64,
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn rates_parse_like_tc() {
        assert_eq!(
            Rate::parse("1gbit").unwrap().bits_per_second(),
            1_000_000_000
        );
        assert_eq!(
            Rate::parse("100mbit").unwrap().bits_per_second(),
            100_000_000
        );
        assert_eq!(
            Rate::parse("2.5Gbit").unwrap().bits_per_second(),
            2_500_000_000
        );
        assert_eq!(Rate::parse("1mbps").unwrap().bits_per_second(), 8_000_000);
        assert!(Rate::parse("0").unwrap().is_unlimited());
        assert_eq!(Rate::parse("2.5Gbit").unwrap().as_tc(), "2.5gbit");
        assert!(Rate::parse("fast").is_err());
        assert!(
            Rate::parse("10").is_err(),
            "a bare number is ambiguous in tc"
        );
        assert!(Rate::parse("1xbit").is_err());
        assert!(Rate::parse("100bit").is_err());
    }

    #[test]
    fn counters_subtract() {
        let a = Counters {
            tx_bytes: 10,
            rx_bytes: 5,
            tx_packets: 2,
            rx_packets: 1,
        };
        let b = Counters {
            tx_bytes: 30,
            rx_bytes: 5,
            tx_packets: 4,
            rx_packets: 0,
        };
        assert_eq!(
            b.since(a),
            Counters {
                tx_bytes: 20,
                rx_bytes: 0,
                tx_packets: 2,
                rx_packets: 0
            }
        );
    }

    #[test]
    fn random_numbers_differ() {
        assert_ne!(random_u64(), random_u64());
    }
}
