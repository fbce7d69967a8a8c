//! The programs' clocks as lagd reads them, and which of them this kernel gives the programs.
//!
//! The programs read `CLOCK_MONOTONIC` exactly (`bpf_ktime_get_ns`) where a tick (1-10 ms)
//! would matter (stripe's hold of a segment that overtook another, the slow protocols' rate,
//! broadcast_dedup's 10 ms window, a bucket's 50 ms idle gap), and as of the last tick
//! (`bpf_ktime_get_coarse_ns`, no clock source read) for the heartbeat's deadline, judged in
//! seconds and checked on every frame. Linux 5.10 has no coarse helper; there [`fit_clock`] makes each
//! call of it one of the exact helper, the same clock, so the one build serves every kernel.

use std::sync::OnceLock;

use crate::isolate::{BPF_TCX_INGRESS, BpfInsn, CALL, load_program};

/// `BPF_FUNC_ktime_get_ns`: `CLOCK_MONOTONIC`.
const KTIME_GET_NS: i32 = 5;
/// `BPF_FUNC_ktime_get_coarse_ns` (Linux 5.11): `CLOCK_MONOTONIC` as of the last tick.
const KTIME_GET_COARSE_NS: i32 = 160;

/// Reads clock `id` in nanoseconds.
fn read(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable `timespec` for the call; both clocks read here
    // (CLOCK_MONOTONIC, CLOCK_MONOTONIC_COARSE) exist on every kernel lagd runs on.
    let rc = unsafe { libc::clock_gettime(id, &mut ts) };
    debug_assert_eq!(rc, 0);
    u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(ts.tv_nsec).unwrap_or(0)
}

/// `CLOCK_MONOTONIC` now, in nanoseconds: the programs' clock (`bpf_ktime_get_ns`), which their
/// timestamps (bucket loads, stripe slots, the heartbeat) are on. Where they read it as of the
/// last tick (the heartbeat), they see at most a tick less than this.
pub fn monotonic_ns() -> u64 {
    read(libc::CLOCK_MONOTONIC)
}

/// `CLOCK_MONOTONIC_COARSE` now, in nanoseconds: `CLOCK_MONOTONIC` as of the last tick, never
/// more than what a program reads after this call on either of its clocks (a deadline before
/// it has passed for the programs at once).
pub fn monotonic_coarse_ns() -> u64 {
    read(libc::CLOCK_MONOTONIC_COARSE)
}

/// Whether this kernel lets a tc program call `bpf_ktime_get_coarse_ns`: probed once per
/// process by loading `r0 = coarse clock; r0 = 0; exit`. A refused probe (no such helper, or
/// no privilege: then the programs' own load says why) leaves the exact clock.
pub(crate) fn coarse_clock_helper() -> bool {
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| {
        let probe = [
            BpfInsn::call(KTIME_GET_COARSE_NS),
            BpfInsn::mov_r0(0),
            BpfInsn::EXIT,
        ];
        load_program(
            &probe,
            b"lagd_clock",
            BPF_TCX_INGRESS,
            "the coarse clock probe",
        )
        .is_ok()
    })
}

/// Fits `insns` to a kernel with (`coarse`) or without the coarse clock helper: without it,
/// each call of that helper becomes a call of `bpf_ktime_get_ns`. Returns the calls changed.
/// Calls of the program's own functions (source 1) whose offset happens to be the helper's
/// number are left alone.
pub(crate) fn fit_clock(insns: &mut [BpfInsn], coarse: bool) -> usize {
    if coarse {
        return 0;
    }
    let mut changed = 0;
    for insn in insns.iter_mut() {
        if insn.code() == CALL && insn.src() == 0 && insn.imm() == KTIME_GET_COARSE_NS {
            insn.set_imm(KTIME_GET_NS);
            changed += 1;
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::super::programs;
    use super::*;

    fn insns(words: &[u64]) -> Vec<BpfInsn> {
        words
            .iter()
            .map(|w| BpfInsn::from_le_bytes(w.to_le_bytes()))
            .collect()
    }

    fn helper_calls(insns: &[BpfInsn], helper: i32) -> usize {
        insns
            .iter()
            .filter(|i| i.code() == CALL && i.src() == 0 && i.imm() == helper)
            .count()
    }

    #[test]
    fn without_the_coarse_helper_its_calls_become_exact_clock_calls() {
        for p in [
            &programs::TAP_EGRESS,
            &programs::MEMBER_INGRESS,
            &programs::MEMBER_INGRESS_NO_CAS,
        ] {
            let built = insns(p.insns);
            let coarse = helper_calls(&built, KTIME_GET_COARSE_NS);
            let exact = helper_calls(&built, KTIME_GET_NS);
            // Both programs check the heartbeat on the coarse clock.
            assert!(coarse > 0, "{}: no coarse clock call", p.name);
            let mut kept = built.clone();
            assert_eq!(fit_clock(&mut kept, true), 0);
            assert!(
                kept.iter()
                    .zip(&built)
                    .all(|(a, b)| a.imm() == b.imm() && a.code() == b.code())
            );
            let mut fitted = built.clone();
            assert_eq!(fit_clock(&mut fitted, false), coarse, "{}", p.name);
            assert_eq!(helper_calls(&fitted, KTIME_GET_COARSE_NS), 0);
            assert_eq!(helper_calls(&fitted, KTIME_GET_NS), exact + coarse);
            // Nothing else changed.
            let differ = fitted
                .iter()
                .zip(&built)
                .filter(|(a, b)| a.imm() != b.imm() || a.code() != b.code() || a.src() != b.src())
                .count();
            assert_eq!(differ, coarse, "{}", p.name);
        }
    }

    #[test]
    fn only_helper_calls_are_fitted() {
        // A helper call of the coarse clock, a call of the program's own function 160
        // instructions on (source 1), an ld_imm64 whose immediate is 160, and a call of
        // another helper.
        let call_fn = 0x0000_00a0_0000_1085_u64;
        let ld = 0x0000_00a0_0000_0118_u64;
        let mut prog = insns(&[0x0000_00a0_0000_0085, call_fn, ld, 0, 0x0000_0005_0000_0085]);
        assert_eq!(fit_clock(&mut prog, false), 1);
        assert_eq!(prog[0].imm(), KTIME_GET_NS);
        assert_eq!((prog[1].src(), prog[1].imm()), (1, 160));
        assert_eq!(prog[2].imm(), 160);
        assert_eq!(prog[4].imm(), KTIME_GET_NS);
    }
}
