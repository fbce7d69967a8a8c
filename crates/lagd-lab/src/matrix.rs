//! Which client's traffic went over which member: with client hosts, a capture of the frame
//! headers on each of host A's members during the traffic (tcpdump, first 64 bytes), read back
//! and summed by client address, each way. A capture on the member sees what lagd sends, what
//! the kernel fast path sends, and what arrives before either takes it, so the matrix is what
//! crossed each link, whoever chose it: host A's bond going out, the switch coming back.

use std::fs::File;
use std::io::BufReader;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use lagd_proto::capture::CaptureReader;
use serde::Serialize;

use super::topology::{self, ProcessId, Side, Topology};

/// Bytes of each frame tcpdump keeps: Ethernet (and one VLAN tag) and the IPv4 addresses.
const SNAPLEN: &str = "64";
/// tcpdump's capture buffer, KiB: room for a burst while tcpdump waits for a CPU.
const BUFFER_KIB: &str = "32768";

/// One client's row of the matrix: bytes on each of host A's members, in member order.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClientMembers {
    /// `c0`, `c1`, ….
    pub client: String,
    /// The client's address.
    pub ip: String,
    /// Bytes host A sent to the client on each member (frames on the wire, headers included):
    /// host A's bond chose the member.
    pub tx_bytes: Vec<u64>,
    /// Bytes host A received from the client on each member: the switch chose the member.
    pub rx_bytes: Vec<u64>,
    /// `tx_bytes` as Mbit/s over the run.
    pub tx_mbps: Vec<f64>,
    /// `rx_bytes` as Mbit/s over the run.
    pub rx_mbps: Vec<f64>,
}

/// The captures running on host A's members.
pub struct MatrixCapture {
    processes: Vec<ProcessId>,
    files: Vec<PathBuf>,
}

/// Starts one tcpdump per member of host A (inside host A's namespace) and waits until each
/// listens.
pub fn start(topo: &mut Topology) -> Result<MatrixCapture> {
    topology::require_program("tcpdump", "tcpdump")?;
    let names: Vec<String> = topo.links().iter().map(|l| l.name.clone()).collect();
    let mut cap = MatrixCapture {
        processes: Vec::new(),
        files: Vec::new(),
    };
    for name in names {
        let file = topo.dir().join(format!("matrix-{name}.pcap"));
        let path = file.to_string_lossy().into_owned();
        let id = topo.spawn(
            Side::A,
            &format!("tcpdump-matrix-{name}"),
            Path::new("tcpdump"),
            &[
                "-i",
                &name,
                "-n",
                "-s",
                SNAPLEN,
                "-B",
                BUFFER_KIB,
                // Each frame handed over at once: with the default ring of blocks, the frames
                // in a block not yet full when tcpdump stops are never written.
                "--immediate-mode",
                "-U",
                "-w",
                &path,
            ],
        )?;
        cap.processes.push(id);
        cap.files.push(file);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    for &id in &cap.processes {
        while !topo.log_tail(id, 5).contains("listening on") {
            if let Some(status) = topo.try_wait(id)? {
                anyhow::bail!(
                    "tcpdump on a member exited ({status}) before listening: {}",
                    topo.log_tail(id, 5)
                );
            }
            if Instant::now() > deadline {
                anyhow::bail!("tcpdump on a member did not start listening within 10 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    Ok(cap)
}

/// Stops the captures and sums them: one row per client (`clients` in order, named `c0`, …),
/// bytes between `server` and that client on each member, Mbit/s over `seconds`.
pub fn finish(
    topo: &mut Topology,
    cap: MatrixCapture,
    server: Ipv4Addr,
    clients: &[Ipv4Addr],
    seconds: f64,
) -> Result<Vec<ClientMembers>> {
    for &id in &cap.processes {
        topo.stop(id);
    }
    let mut per_member = Vec::new();
    for file in &cap.files {
        let f = File::open(file).with_context(|| format!("opening {}", file.display()))?;
        let reader = CaptureReader::new(BufReader::new(f))
            .with_context(|| format!("reading {}", file.display()))?;
        per_member.push(sum_by_client(reader, server, clients)?);
    }
    Ok(rows(&per_member, clients, seconds))
}

/// Bytes `(to the client, from the client)` per client, from one member's capture.
pub fn sum_by_client<R: std::io::Read>(
    mut reader: CaptureReader<R>,
    server: Ipv4Addr,
    clients: &[Ipv4Addr],
) -> Result<Vec<(u64, u64)>> {
    let mut out = vec![(0u64, 0u64); clients.len()];
    while let Some(p) = reader.next_packet().context("reading a member's capture")? {
        let Some((src, dst)) = ipv4_addresses(p.data) else {
            continue;
        };
        let len = u64::from(p.orig_len);
        if src == server {
            if let Some(k) = clients.iter().position(|&c| c == dst) {
                out[k].0 += len;
            }
        } else if dst == server {
            if let Some(k) = clients.iter().position(|&c| c == src) {
                out[k].1 += len;
            }
        }
    }
    Ok(out)
}

/// The source and destination of an Ethernet frame carrying IPv4 (behind at most one VLAN
/// tag), if the captured bytes reach that far.
pub fn ipv4_addresses(frame: &[u8]) -> Option<(Ipv4Addr, Ipv4Addr)> {
    let mut at = 12;
    let mut ethertype = u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]);
    if ethertype == 0x8100 || ethertype == 0x88a8 {
        at += 4;
        ethertype = u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]);
    }
    if ethertype != 0x0800 {
        return None;
    }
    let ip = frame.get(at + 2..at + 22)?;
    if ip[0] >> 4 != 4 {
        return None;
    }
    let addr = |o: usize| Ipv4Addr::new(ip[o], ip[o + 1], ip[o + 2], ip[o + 3]);
    Some((addr(12), addr(16)))
}

/// The matrix from each member's per-client sums.
fn rows(per_member: &[Vec<(u64, u64)>], clients: &[Ipv4Addr], seconds: f64) -> Vec<ClientMembers> {
    let mbps = |b: u64| {
        if seconds > 0.0 {
            (b as f64 * 8.0 / seconds / 1e6 * 100.0).round() / 100.0
        } else {
            0.0
        }
    };
    clients
        .iter()
        .enumerate()
        .map(|(k, ip)| {
            let tx: Vec<u64> = per_member.iter().map(|m| m[k].0).collect();
            let rx: Vec<u64> = per_member.iter().map(|m| m[k].1).collect();
            ClientMembers {
                client: format!("c{k}"),
                ip: ip.to_string(),
                tx_mbps: tx.iter().map(|&b| mbps(b)).collect(),
                rx_mbps: rx.iter().map(|&b| mbps(b)).collect(),
                tx_bytes: tx,
                rx_bytes: rx,
            }
        })
        .collect()
}

#[cfg(test)]
mod test {
    use super::*;
    use lagd_proto::capture::{LINKTYPE_ETHERNET, PcapWriter};

    fn frame(src: Ipv4Addr, dst: Ipv4Addr, vlan: bool) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
        if vlan {
            f.extend_from_slice(&[0x81, 0x00, 0x00, 0x05]);
        }
        f.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, 6, 0, 0]);
        f.extend_from_slice(&src.octets());
        f.extend_from_slice(&dst.octets());
        f
    }

    #[test]
    fn sums_bytes_by_client_and_way() {
        let a: Ipv4Addr = "10.0.0.1".parse().unwrap();
        let c0: Ipv4Addr = "10.0.0.10".parse().unwrap();
        let c1: Ipv4Addr = "10.0.0.11".parse().unwrap();
        let other: Ipv4Addr = "10.0.0.99".parse().unwrap();
        let mut w = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET).unwrap();
        for (s, d, vlan) in [
            (a, c0, false),
            (a, c0, true),
            (c1, a, false),
            (other, a, false),
            (c0, c1, false),
        ] {
            w.write_packet(0, &frame(s, d, vlan)).unwrap();
        }
        // An ARP frame is not counted.
        let mut arp = vec![0xff; 12];
        arp.extend_from_slice(&[0x08, 0x06, 0, 1]);
        w.write_packet(0, &arp).unwrap();
        let bytes = w.into_inner();
        let r = CaptureReader::new(&bytes[..]).unwrap();
        let sums = sum_by_client(r, a, &[c0, c1]).unwrap();
        assert_eq!(sums, vec![(34 + 38, 0), (0, 34)]);
        let m = rows(&[sums, vec![(0, 0), (1_000_000, 0)]], &[c0, c1], 2.0);
        assert_eq!(m[0].tx_bytes, vec![72, 0]);
        assert_eq!(m[1].tx_bytes, vec![0, 1_000_000]);
        assert_eq!(m[1].rx_bytes, vec![34, 0]);
        assert_eq!(m[1].tx_mbps, vec![0.0, 4.0]);
    }

    #[test]
    fn short_or_foreign_frames_have_no_addresses() {
        assert_eq!(ipv4_addresses(&[0; 20]), None);
        let mut v6 = vec![0; 12];
        v6.extend_from_slice(&[0x86, 0xdd]);
        v6.extend_from_slice(&[0x60; 40]);
        assert_eq!(ipv4_addresses(&v6), None);
    }
}
