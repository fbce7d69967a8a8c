//! Programs on the clsact qdisc: direct-action `cls_bpf` filters attached over rtnetlink, for
//! kernels without tcx (before Linux 6.6), or where asked to (`fastpath_attach=tc`).
//!
//! tcx links ([`crate::isolate`], [`crate::fastpath`]) belong to a descriptor: the kernel detaches
//! the program when it closes, even after `kill -9`. A `cls_bpf` filter does not: once added it
//! stays on the interface until someone deletes it, whatever happens to the process that added
//! it. So lagd marks its filters and cleans up after itself:
//!
//! * **Its own priority and handles.** Every lagd filter sits at priority [`PRIO`] (the lowest a
//!   filter can be given, so it runs before any other filter of the hook, as lagd's tcx programs
//!   run in front), protocol `ETH_P_ALL`, with a handle in lagd's range ([`HANDLE_BASE`] plus a
//!   small number per program) and its program's name as `TCA_BPF_NAME` (`lagd_...`). Filters of
//!   other priorities, other handles or other names are never touched: a foreign `cls_bpf`
//!   filter may share priority 1 with lagd's (same kind and protocol) and keeps running after
//!   lagd's. A foreign filter of another kind or protocol at priority 1 makes the kernel refuse
//!   lagd's (`EINVAL`), which is reported, not worked around.
//! * **The qdisc.** [`TcFilter::attach`] adds the clsact qdisc if the interface has none and
//!   remembers that it did; [`TcFilter::detach`] (or dropping the value) deletes lagd's filter and
//!   then the qdisc only if lagd added it and no filter of anyone is left on either hook.
//! * **Leftovers.** Before it adds its filter, [`TcFilter::attach`] deletes every lagd filter
//!   already on that hook of the interface (a `kill -9` left it, or the previous lagd ran with
//!   another program there), recognised by priority, handle range and name in a filter dump;
//!   [`remove_lagd_filters`] does only that, for interfaces lagd attaches to with tcx.
//!
//! A filter also runs the program when its descriptor is closed (the filter holds the program),
//! so the programs' maps live as long as the filter: after `kill -9` the TAP's program goes on
//! forwarding with the last table until the next lagd replaces it, or until the heartbeat the
//! programs check runs out (see [`crate::fastpath::FastPath::set_alive_until`]), after which
//! it drops every frame.
//!
//! Like the rest of this crate, everything acts on the calling thread's network namespace at the
//! time the value is made; the rtnetlink socket is kept, so a [`TcFilter`] can be dropped from any
//! thread.

use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use crate::error;
use crate::link::{NLA_TYPE_MASK, Reply, RouteQuery, align4, u16_at, u32_at};

/// `TC_H_CLSACT` (equal to `TC_H_INGRESS`): the clsact qdisc's parent.
const TC_H_CLSACT: u32 = 0xffff_fff1;
/// The clsact qdisc's own handle, `ffff:`.
const CLSACT_HANDLE: u32 = 0xffff_0000;
/// `TC_H_MIN_INGRESS` and `TC_H_MIN_EGRESS`: the minor numbers of clsact's two hooks.
const TC_H_MIN_INGRESS: u32 = 0xfff2;
const TC_H_MIN_EGRESS: u32 = 0xfff3;
/// `RTM_*QDISC` and `RTM_*TFILTER` message types.
const RTM_NEWQDISC: u16 = 36;
const RTM_DELQDISC: u16 = 37;
const RTM_NEWTFILTER: u16 = 44;
const RTM_DELTFILTER: u16 = 45;
const RTM_GETTFILTER: u16 = 46;
/// `struct tcmsg`: family, two pad bytes, ifindex, handle, parent, info.
const TCMSG_LEN: usize = 20;
/// `TCA_KIND` and `TCA_OPTIONS`.
const TCA_KIND: u16 = 1;
const TCA_OPTIONS: u16 = 2;
/// `TCA_BPF_*` inside `TCA_OPTIONS` of a `bpf` filter.
const TCA_BPF_FD: u16 = 6;
const TCA_BPF_NAME: u16 = 7;
const TCA_BPF_FLAGS: u16 = 8;
/// `TCA_BPF_FLAG_ACT_DIRECT`: the program's return value is the action (direct action).
const TCA_BPF_FLAG_ACT_DIRECT: u32 = 1;
/// `NLA_F_NESTED`.
const NLA_F_NESTED: u16 = 1 << 15;
/// `ETH_P_ALL`, as `tcm_info`'s low half holds it (network byte order).
const PROTOCOL_ALL: u16 = 0x0003u16.to_be();

/// The priority of every lagd filter: 1, the lowest there is (0 asks the kernel to pick one).
pub const PRIO: u16 = 1;
/// lagd's filter handles are `HANDLE_BASE + n`, `n` below 256.
pub const HANDLE_BASE: u32 = 0x1a9d_0000;
/// The prefix of every lagd program name (`TCA_BPF_NAME`).
pub const NAME_PREFIX: &str = "lagd_";

/// How a lagd program is attached to its interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Attach {
    /// A tcx link (`BPF_LINK_CREATE`, Linux 6.6+), detached when its descriptor closes.
    Tcx,
    /// A direct-action `cls_bpf` filter on the clsact qdisc, deleted by lagd (this module).
    Tc,
}

impl Attach {
    /// `tcx` or `tc`, as `fastpath_attach` spells them.
    pub fn name(self) -> &'static str {
        match self {
            Self::Tcx => "tcx",
            Self::Tc => "tc",
        }
    }
}

impl fmt::Display for Attach {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Tcx => f.write_str("tcx"),
            Self::Tc => f.write_str("tc (clsact)"),
        }
    }
}

/// One of clsact's two hooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Hook {
    /// Frames the interface receives (`tc filter ... ingress`).
    Ingress,
    /// Frames the interface sends (`tc filter ... egress`).
    Egress,
}

impl Hook {
    fn parent(self) -> u32 {
        (TC_H_CLSACT & 0xffff_0000)
            | match self {
                Self::Ingress => TC_H_MIN_INGRESS,
                Self::Egress => TC_H_MIN_EGRESS,
            }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Ingress => "ingress",
            Self::Egress => "egress",
        }
    }
}

/// A filter as a dump of one hook shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterInfo {
    /// Its priority.
    pub prio: u16,
    /// Its protocol, in host byte order (`0x0003`: all).
    pub protocol: u16,
    /// Its handle.
    pub handle: u32,
    /// Its kind (`bpf`, `matchall`, `u32`, ...).
    pub kind: String,
    /// A `bpf` filter's `TCA_BPF_NAME`, if it has one.
    pub bpf_name: Option<String>,
}

impl FilterInfo {
    /// Whether it is one of lagd's filters: priority [`PRIO`], a handle of lagd's range, kind
    /// `bpf` and a program name starting with [`NAME_PREFIX`].
    pub fn is_lagd(&self) -> bool {
        self.prio == PRIO
            && self.handle & 0xffff_ff00 == HANDLE_BASE
            && self.kind == "bpf"
            && self
                .bpf_name
                .as_deref()
                .is_some_and(|n| n.starts_with(NAME_PREFIX))
    }
}

/// A lagd program attached as a direct-action `cls_bpf` filter to one hook of one interface.
/// Dropping it deletes the filter (and the clsact qdisc, if lagd added it and it is left empty);
/// use [`TcFilter::detach`] to see errors.
#[derive(Debug)]
pub struct TcFilter {
    route: Option<RouteQuery>,
    ifindex: u32,
    hook: Hook,
    handle: u32,
    added_qdisc: bool,
    replaced: usize,
}

impl TcFilter {
    /// Attaches the loaded `SCHED_CLS` program `prog` to hook `hook` of interface `ifindex` in
    /// the calling thread's namespace, as filter [`HANDLE_BASE`] + `slot` at priority [`PRIO`]
    /// named `name` (which must start with [`NAME_PREFIX`]), in direct-action mode. Adds the
    /// clsact qdisc if there is none, and first deletes any lagd filter already on the hook.
    ///
    /// # Errors
    ///
    /// `InvalidInput` for a name that is not lagd's; the failing rtnetlink request with its
    /// errno otherwise (`EPERM` without `CAP_NET_ADMIN`, `ENODEV` for no such interface,
    /// `EINVAL` when a foreign filter of another kind holds priority 1, `EOPNOTSUPP` on a
    /// kernel without clsact or `cls_bpf`).
    pub fn attach(
        prog: BorrowedFd<'_>,
        ifindex: u32,
        hook: Hook,
        slot: u8,
        name: &str,
    ) -> io::Result<Self> {
        if !name.starts_with(NAME_PREFIX) || name.len() > 255 || name.contains('\0') {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("filter name {name:?} is not a lagd program name"),
            ));
        }
        let mut route = RouteQuery::new()?;
        let added_qdisc = add_clsact(&mut route, ifindex)?;
        let mut filter = Self {
            route: Some(route),
            ifindex,
            hook,
            handle: HANDLE_BASE | u32::from(slot),
            added_qdisc,
            replaced: 0,
        };
        // On failure `filter` drops: the qdisc goes again if this call added it.
        let route = filter.route.as_mut().expect("route");
        // A filter an earlier lagd left in this slot is replaced in place, in one step (the
        // kernel swaps the program under RCU: no frame passes the hook without one, which is
        // what makes a restart seamless); lagd's filters in other slots go.
        let (deleted, in_place) = remove_lagd(route, ifindex, hook, Some(filter.handle))?;
        filter.replaced = deleted + usize::from(in_place);
        add_filter(route, ifindex, hook, filter.handle, prog, name, in_place)?;
        Ok(filter)
    }

    /// The interface the filter is on.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The hook it is on.
    pub fn hook(&self) -> Hook {
        self.hook
    }

    /// How many lagd filters [`TcFilter::attach`] found on the hook and deleted first (left by
    /// an earlier lagd).
    pub fn replaced(&self) -> usize {
        self.replaced
    }

    /// Whether [`TcFilter::attach`] added the clsact qdisc.
    pub fn added_qdisc(&self) -> bool {
        self.added_qdisc
    }

    /// Deletes the filter, then the clsact qdisc if lagd added it and no filter is left on it.
    /// An interface or qdisc that is gone already is no error.
    pub fn detach(mut self) -> io::Result<()> {
        self.remove()
    }

    fn remove(&mut self) -> io::Result<()> {
        let Some(mut route) = self.route.take() else {
            return Ok(());
        };
        del_filter(&mut route, self.ifindex, self.hook, self.handle)?;
        if self.added_qdisc {
            let left = dump(&mut route, self.ifindex, Hook::Ingress)?.len()
                + dump(&mut route, self.ifindex, Hook::Egress)?.len();
            if left == 0 {
                del_clsact(&mut route, self.ifindex)?;
            }
        }
        Ok(())
    }
}

impl Drop for TcFilter {
    fn drop(&mut self) {
        // Best effort: the caller who wants the error calls `detach`.
        let _ = self.remove();
    }
}

/// The filters on hook `hook` of interface `ifindex` (none when it has no clsact qdisc).
pub fn filters(ifindex: u32, hook: Hook) -> io::Result<Vec<FilterInfo>> {
    dump(&mut RouteQuery::new()?, ifindex, hook)
}

/// What [`remove_qdisc_if_empty`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QdiscRemoval {
    /// The qdisc was there with no filter on it, and is deleted.
    Removed,
    /// The qdisc stays: this many filters (of anyone) are on its hooks.
    Kept(usize),
    /// There is no clsact qdisc on the interface (already deleted, or never added).
    Absent,
}

/// Deletes the clsact qdisc of interface `ifindex` if no filter of anyone is left on it.
/// For a qdisc lagd added before it was killed (lagd's state file says so): a [`TcFilter`]
/// that finds a qdisc there does not count it as its own. An interface with no clsact qdisc,
/// or none at all, is no error.
pub fn remove_qdisc_if_empty(ifindex: u32) -> io::Result<QdiscRemoval> {
    let mut route = RouteQuery::new()?;
    let left = dump(&mut route, ifindex, Hook::Ingress)?.len()
        + dump(&mut route, ifindex, Hook::Egress)?.len();
    if left > 0 {
        return Ok(QdiscRemoval::Kept(left));
    }
    match del_clsact_strict(&mut route, ifindex) {
        Ok(()) => Ok(QdiscRemoval::Removed),
        // No clsact qdisc there (ENOENT, or EINVAL: an interface without an ingress queue).
        Err(e) if matches!(error::errno(&e), Some(libc::ENOENT | libc::EINVAL)) => {
            Ok(QdiscRemoval::Absent)
        }
        Err(e) => Err(e),
    }
}

/// Deletes every lagd filter (see [`FilterInfo::is_lagd`]) on hook `hook` of interface
/// `ifindex`; returns how many. Filters that are not lagd's stay, and so does the qdisc.
pub fn remove_lagd_filters(ifindex: u32, hook: Hook) -> io::Result<usize> {
    remove_lagd(&mut RouteQuery::new()?, ifindex, hook, None).map(|(n, _)| n)
}

/// Deletes lagd's filters on the hook but the one with handle `keep`; returns how many it
/// deleted and whether `keep` is there.
fn remove_lagd(
    route: &mut RouteQuery,
    ifindex: u32,
    hook: Hook,
    keep: Option<u32>,
) -> io::Result<(usize, bool)> {
    let lagd: Vec<FilterInfo> = dump(route, ifindex, hook)?
        .into_iter()
        .filter(FilterInfo::is_lagd)
        .collect();
    let mut kept = false;
    let mut deleted = 0;
    for f in &lagd {
        if Some(f.handle) == keep {
            kept = true;
        } else {
            del_filter(route, ifindex, hook, f.handle)?;
            deleted += 1;
        }
    }
    Ok((deleted, kept))
}

/// Appends attribute `ty` with `data`, padded to 4 bytes.
fn put_attr(msg: &mut Vec<u8>, ty: u16, data: &[u8]) {
    let len = 4 + data.len();
    msg.extend_from_slice(&(len as u16).to_ne_bytes());
    msg.extend_from_slice(&ty.to_ne_bytes());
    msg.extend_from_slice(data);
    msg.resize(align4(msg.len()), 0);
}

/// A string attribute, NUL-terminated.
fn put_str(msg: &mut Vec<u8>, ty: u16, s: &str) {
    let mut data = s.as_bytes().to_vec();
    data.push(0);
    put_attr(msg, ty, &data);
}

/// A `tcmsg` request; `attrs` follow the header, the length is filled in.
fn tc_request(
    ty: u16,
    flags: u16,
    seq: u32,
    ifindex: u32,
    handle: u32,
    parent: u32,
    info: u32,
) -> Vec<u8> {
    let mut msg = vec![0u8; 16 + TCMSG_LEN];
    msg[4..6].copy_from_slice(&ty.to_ne_bytes());
    msg[6..8].copy_from_slice(&flags.to_ne_bytes());
    msg[8..12].copy_from_slice(&seq.to_ne_bytes());
    // tcm_family AF_UNSPEC, padding.
    msg[20..24].copy_from_slice(&ifindex.to_ne_bytes());
    msg[24..28].copy_from_slice(&handle.to_ne_bytes());
    msg[28..32].copy_from_slice(&parent.to_ne_bytes());
    msg[32..36].copy_from_slice(&info.to_ne_bytes());
    msg
}

fn finish(mut msg: Vec<u8>) -> Vec<u8> {
    let len = msg.len() as u32;
    msg[0..4].copy_from_slice(&len.to_ne_bytes());
    msg
}

const ACK: u16 = (libc::NLM_F_REQUEST | libc::NLM_F_ACK) as u16;

/// `tcm_info` of a lagd filter: priority in the high half, protocol in the low one.
fn lagd_info() -> u32 {
    u32::from(PRIO) << 16 | u32::from(PROTOCOL_ALL)
}

fn subject(ifindex: u32, hook: Option<Hook>) -> String {
    match hook {
        Some(h) => format!("ifindex {ifindex} {}", h.name()),
        None => format!("ifindex {ifindex}"),
    }
}

/// Adds the clsact qdisc; `Ok(false)` if the interface has one already.
fn add_clsact(route: &mut RouteQuery, ifindex: u32) -> io::Result<bool> {
    let flags = ACK | (libc::NLM_F_CREATE | libc::NLM_F_EXCL) as u16;
    let seq = route.next_seq();
    let mut msg = tc_request(
        RTM_NEWQDISC,
        flags,
        seq,
        ifindex,
        CLSACT_HANDLE,
        TC_H_CLSACT,
        0,
    );
    put_str(&mut msg, TCA_KIND, "clsact");
    let msg = finish(msg);
    match route.exchange(&msg, "RTM_NEWQDISC clsact", &[], |r| {
        matches!(r, Reply::Ack).then_some(())
    }) {
        Ok(()) => Ok(true),
        Err(e) if error::errno(&e) == Some(libc::EEXIST) => Ok(false),
        Err(e) => Err(with_subject(e, &subject(ifindex, None))),
    }
}

fn del_clsact(route: &mut RouteQuery, ifindex: u32) -> io::Result<()> {
    match del_clsact_strict(route, ifindex) {
        Err(e) if matches!(error::errno(&e), Some(libc::ENOENT | libc::EINVAL)) => Ok(()),
        other => other,
    }
}

/// Deletes the clsact qdisc; an interface that is gone is no error, a missing qdisc is.
fn del_clsact_strict(route: &mut RouteQuery, ifindex: u32) -> io::Result<()> {
    let seq = route.next_seq();
    let mut msg = tc_request(
        RTM_DELQDISC,
        ACK,
        seq,
        ifindex,
        CLSACT_HANDLE,
        TC_H_CLSACT,
        0,
    );
    put_str(&mut msg, TCA_KIND, "clsact");
    let msg = finish(msg);
    route
        .exchange(&msg, "RTM_DELQDISC clsact", &[libc::ENODEV], |r| {
            matches!(r, Reply::Ack).then_some(())
        })
        .map_err(|e| with_subject(e, &subject(ifindex, None)))
}

fn add_filter(
    route: &mut RouteQuery,
    ifindex: u32,
    hook: Hook,
    handle: u32,
    prog: BorrowedFd<'_>,
    name: &str,
    replace: bool,
) -> io::Result<()> {
    let fd = u32::try_from(prog.as_raw_fd()).map_err(|_| io::Error::other("negative fd"))?;
    // Without NLM_F_EXCL the kernel changes a filter that has the handle already.
    let flags = if replace {
        ACK | (libc::NLM_F_CREATE | libc::NLM_F_REPLACE) as u16
    } else {
        ACK | (libc::NLM_F_CREATE | libc::NLM_F_EXCL) as u16
    };
    let seq = route.next_seq();
    let mut msg = tc_request(
        RTM_NEWTFILTER,
        flags,
        seq,
        ifindex,
        handle,
        hook.parent(),
        lagd_info(),
    );
    put_str(&mut msg, TCA_KIND, "bpf");
    let mut opts = Vec::new();
    put_attr(&mut opts, TCA_BPF_FD, &fd.to_ne_bytes());
    put_str(&mut opts, TCA_BPF_NAME, name);
    put_attr(
        &mut opts,
        TCA_BPF_FLAGS,
        &TCA_BPF_FLAG_ACT_DIRECT.to_ne_bytes(),
    );
    put_attr(&mut msg, TCA_OPTIONS | NLA_F_NESTED, &opts);
    let msg = finish(msg);
    route
        .exchange(&msg, "RTM_NEWTFILTER bpf", &[], |r| {
            matches!(r, Reply::Ack).then_some(())
        })
        .map_err(|e| with_subject(e, &format!("{} ({name})", subject(ifindex, Some(hook)))))
}

fn del_filter(route: &mut RouteQuery, ifindex: u32, hook: Hook, handle: u32) -> io::Result<()> {
    // A handle of 0 would delete every filter of the priority: never send one.
    if handle == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "filter handle 0",
        ));
    }
    let seq = route.next_seq();
    let mut msg = tc_request(
        RTM_DELTFILTER,
        ACK,
        seq,
        ifindex,
        handle,
        hook.parent(),
        lagd_info(),
    );
    put_str(&mut msg, TCA_KIND, "bpf");
    let msg = finish(msg);
    route
        .exchange(
            &msg,
            "RTM_DELTFILTER bpf",
            // Gone already: the interface, its qdisc, or the filter.
            &[libc::ENOENT, libc::ENODEV, libc::EINVAL],
            |r| matches!(r, Reply::Ack).then_some(()),
        )
        .map_err(|e| with_subject(e, &subject(ifindex, Some(hook))))
}

fn dump(route: &mut RouteQuery, ifindex: u32, hook: Hook) -> io::Result<Vec<FilterInfo>> {
    let flags = (libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16;
    let seq = route.next_seq();
    let msg = finish(tc_request(
        RTM_GETTFILTER,
        flags,
        seq,
        ifindex,
        0,
        hook.parent(),
        0,
    ));
    let mut found = Vec::new();
    route
        .exchange(&msg, "RTM_GETTFILTER", &[], |r| {
            match r {
                Reply::Message(ty, _) if ty == libc::NLMSG_DONE as u16 => {
                    return Some(std::mem::take(&mut found));
                }
                Reply::Message(RTM_NEWTFILTER, payload) => {
                    if let Some(f) = parse_filter(payload) {
                        found.push(f);
                    }
                }
                _ => {}
            }
            None
        })
        .map_err(|e| with_subject(e, &subject(ifindex, Some(hook))))
}

/// The attributes of `b` as (type without flags, value); stops at the first malformed one.
fn attrs(mut b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        let len = usize::from(u16_at(b, 0)?);
        let ty = u16_at(b, 2)? & NLA_TYPE_MASK;
        if len < 4 || len > b.len() {
            b = &[];
            return None;
        }
        let value = &b[4..len];
        b = b.get(align4(len)..).unwrap_or(&[]);
        Some((ty, value))
    })
}

fn c_string(v: &[u8]) -> String {
    let end = v.iter().position(|&c| c == 0).unwrap_or(v.len());
    String::from_utf8_lossy(&v[..end]).into_owned()
}

/// An `RTM_NEWTFILTER` payload describing one filter; `None` for a malformed message and for
/// the message that only names a priority's classifier (handle 0).
fn parse_filter(payload: &[u8]) -> Option<FilterInfo> {
    let handle = u32_at(payload, 8)?;
    let info = u32_at(payload, 16)?;
    if handle == 0 {
        return None;
    }
    let mut kind = String::new();
    let mut bpf_name = None;
    for (ty, value) in attrs(payload.get(TCMSG_LEN..)?) {
        match ty {
            TCA_KIND => kind = c_string(value),
            TCA_OPTIONS => {
                for (t, v) in attrs(value) {
                    if t == TCA_BPF_NAME {
                        bpf_name = Some(c_string(v));
                    }
                }
            }
            _ => {}
        }
    }
    Some(FilterInfo {
        prio: (info >> 16) as u16,
        protocol: u16::from_be(info as u16),
        handle,
        kind,
        bpf_name,
    })
}

/// `e` with `subject` added to its message, keeping its kind and errno.
fn with_subject(e: io::Error, subject: &str) -> io::Error {
    match e
        .get_ref()
        .and_then(|i| i.downcast_ref::<error::SyscallError>())
    {
        Some(s) => {
            let errno = s.errno();
            let call = s.call();
            error::annotate(io::Error::from_raw_os_error(errno), call, Some(subject))
        }
        None => io::Error::new(e.kind(), format!("{e} ({subject})")),
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::link::NLMSG_HDR_LEN;

    #[test]
    fn a_filter_request_parses_back_as_lagds() {
        let mut msg = tc_request(RTM_NEWTFILTER, 0, 1, 7, HANDLE_BASE | 2, 0, lagd_info());
        put_str(&mut msg, TCA_KIND, "bpf");
        let mut opts = Vec::new();
        put_attr(&mut opts, TCA_BPF_FD, &5u32.to_ne_bytes());
        put_str(&mut opts, TCA_BPF_NAME, "lagd_tap_egress");
        put_attr(&mut opts, TCA_OPTIONS | NLA_F_NESTED, &[]);
        put_attr(&mut msg, TCA_OPTIONS | NLA_F_NESTED, &opts);
        let msg = finish(msg);
        assert_eq!(msg.len() % 4, 0);
        assert_eq!(u32_at(&msg, 0), Some(msg.len() as u32));
        let f = parse_filter(&msg[NLMSG_HDR_LEN..]).expect("a filter");
        assert_eq!(
            f,
            FilterInfo {
                prio: 1,
                protocol: 3,
                handle: HANDLE_BASE | 2,
                kind: "bpf".into(),
                bpf_name: Some("lagd_tap_egress".into()),
            }
        );
        assert!(f.is_lagd());
        // Anyone else's: another priority, handle, kind or name.
        for other in [
            FilterInfo {
                prio: 2,
                ..f.clone()
            },
            FilterInfo {
                handle: 1,
                ..f.clone()
            },
            FilterInfo {
                kind: "matchall".into(),
                ..f.clone()
            },
            FilterInfo {
                bpf_name: Some("cilium".into()),
                ..f.clone()
            },
            FilterInfo {
                bpf_name: None,
                ..f.clone()
            },
        ] {
            assert!(!other.is_lagd(), "{other:?}");
        }
    }

    #[test]
    fn parents_and_info() {
        assert_eq!(Hook::Ingress.parent(), 0xffff_fff2);
        assert_eq!(Hook::Egress.parent(), 0xffff_fff3);
        // prio 1, protocol ETH_P_ALL as `tc` writes it (htons(3)).
        assert_eq!(lagd_info() >> 16, 1);
        assert_eq!((lagd_info() as u16).to_ne_bytes(), [0, 3]);
    }

    #[test]
    fn garbage_never_panics() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut buf = [0u8; 64];
        for _ in 0..20_000 {
            for b in buf.iter_mut() {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                *b = state as u8;
            }
            for cut in [0, 8, 19, 20, 24, 40, 64] {
                let _ = parse_filter(&buf[..cut]);
            }
        }
    }
}
