//! The dataplane benchmark's floor under lagd: a bare TAP ↔ AF_PACKET relay with no bonding
//! logic at all, to measure what a userspace dataplane of lagd's shape costs on a machine.
//!
//! It opens the TAP and the member sockets exactly as lagd does (`IFF_VNET_HDR` with offloads,
//! `PACKET_VNET_HDR`, 4 MiB socket buffers, the tcx ingress drop and quiet sysctls on members),
//! then loops on one thread: frames read from the TAP go to member `layer3+4 hash % n`, frames
//! received on any member are written to the TAP. No carrier monitoring, no status, no LACP, no
//! counters. `bench/dataplane.sh` runs it through `lagctl lab --relay PATH` in the same run as
//! lagd, so the difference between the two is what lagd's own work costs.
//!
//! ```sh
//! cargo build --release -p lagd --example bare_relay
//! target/release/examples/bare_relay --tap bond0 --members veth0,veth1
//! ```

use std::io;

use anyhow::{Context, Result, bail};
use lagd::daemon::member_data_socket;
use lagd_proto::hash::{HashPolicy, MemberMod, xmit_hash};
use lagd_sys::isolate::{IngressDrop, quiet_stack};
use lagd_sys::link::LinkControl;
use lagd_sys::packet::PacketSocket;
use lagd_sys::poll::{Events, Interest, Poller, Signal, SignalFd};
use lagd_sys::tap::{Tap, TapOptions};
use lagd_sys::vnet::VirtioNetHdr;

/// Frames moved per readiness event and socket before looking at the others (as lagd).
const BATCH: usize = 64;
/// A 64 KiB GSO frame behind its `virtio_net_hdr`.
const BUF_LEN: usize = 65536 + 64;
const TOKEN_TAP: u64 = 0;
const TOKEN_SIGNAL: u64 = 1;
const TOKEN_MEMBER: u64 = 2;

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let (mut tap_name, mut members) = (None, None);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--tap" => tap_name = args.next(),
            "--members" => members = args.next(),
            other => bail!("unknown argument {other:?} (usage: --tap NAME --members A,B)"),
        }
    }
    let (Some(tap_name), Some(members)) = (tap_name, members) else {
        bail!("usage: bare_relay --tap NAME --members A,B");
    };
    let members: Vec<&str> = members.split(',').collect();

    let link = LinkControl::new().context("netlink/ioctl sockets")?;
    let tap = Tap::create(
        &tap_name,
        TapOptions {
            vnet_hdr: true,
            multi_queue: false,
            persist: false,
            no_uso: false,
        },
    )
    .with_context(|| format!("creating TAP {tap_name}"))?;
    let mac = link.permanent_mac(members[0]).context("member MAC")?;
    link.set_mac(&tap_name, mac).context("TAP MAC")?;
    let poller = Poller::new().context("epoll")?;
    let signals = SignalFd::new(&[Signal::TERM, Signal::INT]).context("signalfd")?;
    poller.add(&tap, TOKEN_TAP, Interest::READABLE)?;
    poller.add(&signals, TOKEN_SIGNAL, Interest::READABLE)?;
    let mut sockets = Vec::new();
    let mut isolation = Vec::new();
    for (i, name) in members.iter().enumerate() {
        let ifindex = link
            .ifindex(name)
            .with_context(|| format!("member {name}"))?;
        quiet_stack(name).with_context(|| format!("sysctls of {name}"))?;
        isolation.push(IngressDrop::attach(ifindex).with_context(|| format!("tcx on {name}"))?);
        link.set_up(name, true)?;
        let s = PacketSocket::bind(ifindex, member_data_socket())
            .with_context(|| format!("packet socket on {name}"))?;
        poller.add(&s, TOKEN_MEMBER + i as u64, Interest::READABLE)?;
        sockets.push(s);
    }
    let pick = MemberMod::new(sockets.len()).context("no members")?;
    tap.set_carrier(true)?;
    eprintln!("bare_relay: {tap_name} over {members:?}");

    let mut buf = vec![0u8; BUF_LEN];
    let mut ready = Events::with_capacity(16);
    loop {
        poller.wait(&mut ready, None)?;
        for token in ready.iter().map(|e| e.token()) {
            match token {
                TOKEN_SIGNAL => return Ok(()),
                TOKEN_TAP => {
                    for _ in 0..BATCH {
                        let Some(n) = again(tap.read(&mut buf))? else {
                            break;
                        };
                        let h = xmit_hash(HashPolicy::Layer34, &buf[VirtioNetHdr::LEN..n]);
                        let _ = sockets[pick.index(h)].send(&buf[..n]);
                    }
                }
                t => {
                    let s = &sockets[(t - TOKEN_MEMBER) as usize];
                    for _ in 0..BATCH {
                        let Some(meta) = again(s.recv_from(&mut buf))? else {
                            break;
                        };
                        let _ = tap.write(&buf[..meta.len]);
                    }
                }
            }
        }
    }
}

/// `Some(value)`, or `None` when the socket has nothing more to read now.
fn again<T>(r: io::Result<T>) -> Result<Option<T>> {
    Ok(lagd_sys::nothing_now(r)?)
}
