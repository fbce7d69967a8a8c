//! The kernel fast path as the daemon runs it: the tcx programs attached to the TAP and the
//! members, and the table they read kept equal to the bond's distribution.
//!
//! The decisions stay in `lagd-proto`: [`Bond::kernel_refusal`] says whether the programs can
//! forward as the bond decides, [`Bond::distribution`] is what they read. This module only
//! translates that table into the programs' terms and swaps it in whole whenever its generation
//! changes (a member up or down, a failover, a LACP change), so a failover is one map update.

use std::io;

use lagd_proto::bond::{Bond, DistributionTable, FastPathMode, TxRule};
use lagd_sys::fastpath::{Attachment, FastPath, MAX_MEMBERS, NO_PORT, PortCounters, Rule, Table};

/// The programs, loaded and attached, and the generation of the table they read.
pub(crate) struct Kernel {
    fp: FastPath,
    _tap: Attachment,
    members: Vec<Option<Attachment>>,
    tap_ifindex: u32,
    ifindexes: Vec<u32>,
    generation: Option<u64>,
}

/// Which path the daemon takes, decided before any member is touched.
pub(crate) enum Choice {
    /// The kernel programs, loaded and attached to the TAP.
    Kernel(Box<Kernel>),
    /// Every frame through lagd, and why.
    Lagd(String),
}

impl Choice {
    /// Decides the path for `bond` (no member added yet) over `members` members and the TAP
    /// `tap_ifindex`: the kernel where `fastpath` and the bond allow it and the programs load
    /// and attach. `Err` only with `fastpath=on`, naming what stands in the way.
    pub(crate) fn decide(bond: &Bond, members: usize, tap_ifindex: u32) -> Result<Self, String> {
        let mode = bond.options().fastpath;
        if mode == FastPathMode::Off {
            return Ok(Self::Lagd("fastpath=off".into()));
        }
        let refusal = if members > MAX_MEMBERS {
            Some(format!("more than {MAX_MEMBERS} members"))
        } else {
            bond.kernel_refusal(MAX_MEMBERS).map(str::to_owned)
        };
        let attempt = match refusal {
            Some(r) => Err(r),
            None => Kernel::start(tap_ifindex)
                .map_err(|e| format!("the kernel programs could not be loaded or attached: {e}")),
        };
        match (attempt, mode) {
            (Ok(k), _) => Ok(Self::Kernel(Box::new(k))),
            (Err(why), FastPathMode::On) => Err(format!("fastpath=on: {why}")),
            (Err(why), _) => Ok(Self::Lagd(why)),
        }
    }
}

impl Kernel {
    fn start(tap_ifindex: u32) -> io::Result<Self> {
        let fp = FastPath::load()?;
        // Until the first table every frame goes to lagd.
        fp.set_table(&Table::lagd_only(tap_ifindex))?;
        let tap = fp.attach_tap(tap_ifindex)?;
        Ok(Self {
            fp,
            _tap: tap,
            members: Vec::new(),
            tap_ifindex,
            ifindexes: Vec::new(),
            generation: None,
        })
    }

    /// Attaches the members' program to the member at position `ifindexes.len()`.
    pub(crate) fn attach_member(&mut self, ifindex: u32) -> io::Result<()> {
        let a = self.fp.attach_member(ifindex)?;
        self.members.push(Some(a));
        self.ifindexes.push(ifindex);
        // The table names the members' interfaces: write it again.
        self.generation = None;
        Ok(())
    }

    /// The member at `port` is gone: its program is detached and the table forgets it.
    /// Lets go of the member programs from position `len` on (a member whose set-up failed
    /// after its program was attached), so that positions stay those of the bond's ports.
    pub(crate) fn truncate(&mut self, len: usize) {
        self.members.truncate(len);
        self.ifindexes.truncate(len);
        self.generation = None;
    }

    pub(crate) fn member_gone(&mut self, port: usize) {
        if let Some(m) = self.members.get_mut(port) {
            *m = None;
        }
        if let Some(i) = self.ifindexes.get_mut(port) {
            *i = 0;
        }
        self.generation = None;
    }

    /// Swaps in the bond's distribution when it changed since the last call.
    pub(crate) fn sync(&mut self, bond: &Bond) -> io::Result<bool> {
        let generation = bond.distribution_generation();
        if self.generation == Some(generation) {
            return Ok(false);
        }
        let table = self.table(&bond.distribution());
        self.fp.set_table(&table)?;
        self.generation = Some(generation);
        Ok(true)
    }

    /// The programs' table for `d`.
    fn table(&self, d: &DistributionTable) -> Table {
        let mut t = Table::lagd_only(self.tap_ifindex);
        let port = |p: lagd_proto::bond::PortId| u8::try_from(p.0).unwrap_or(NO_PORT);
        match &d.tx {
            TxRule::Modulo(policy) => {
                t.rule = Rule::Modulo;
                t.policy = u32::from(policy.kernel_value().unwrap_or(0));
            }
            TxRule::Active => t.rule = Rule::Active,
            // Refused before the programs were loaded (Bond::kernel_refusal); lagd decides.
            TxRule::Buckets { .. } | TxRule::All | TxRule::PerFrame => t.rule = Rule::Lagd,
        }
        t.active = d.active.map(port);
        t.usable = d.usable.iter().map(|&p| port(p)).collect();
        for (i, &ifindex) in self.ifindexes.iter().enumerate().take(MAX_MEMBERS) {
            t.ifindex[i] = ifindex;
        }
        for rx in &d.rx {
            let i = usize::from(rx.port.0);
            if i < MAX_MEMBERS {
                t.rx_unicast[i] = rx.unicast;
                t.rx_multicast[i] = rx.multicast;
            }
        }
        t
    }

    /// The programs' counters per member position (then the frames no member could take).
    pub(crate) fn counters(&self) -> io::Result<Vec<PortCounters>> {
        self.fp.port_counters()
    }
}
