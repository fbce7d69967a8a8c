//! Bounds on the slow-protocol work one port can cause: how many received frames are parsed
//! and run through the machines, and how many Marker Responses are sent.
//!
//! 802.1AX lets a port *send* at most 3 LACPDUs per second (§6.4.16), and the Slow Protocols
//! (IEEE Std 802.3 Annex 43B) at most 10 frames per second per protocol; a Marker Generator
//! sends far fewer. Anything much faster on the receive side is a fault or an attack, and
//! parsing it costs the loop that also forwards data. So each port admits received
//! slow-protocol frames through token buckets, *before* parsing them, and drops (and counts)
//! the excess:
//!
//! - frames from the source MAC of the port's confirmed partner (two consecutive LACPDUs
//!   from that address naming the same partner system and port, and naming this port as
//!   their partner: a peer that hears us) have a bucket of their own,
//!   [`PARTNER_RATE`] per second, so a flood from other addresses cannot starve the real
//!   partner's LACPDUs;
//! - frames from any other address share [`OTHER_RATE`] per second.
//!
//! While a port's confirmed partner is current, a LACPDU from another address naming another
//! partner is held off (counted, not recorded) unless it is the second in a row from that
//! address naming the same system and port *and* names this port as its partner: a partner
//! that really replaces the old one (a cable moved behind a media converter, a peer rebooted
//! with a new system ID) hears our LACPDUs, repeats itself and takes over one exchange later,
//! while a flood never takes the port from its partner, not even one replaying a fixed set of
//! LACPDUs (whose sampling by the rate limits can line two identical ones up).
//!
//! Marker Responses are sent at most [`MARKER_RESPONSE_RATE`] per second per port (the rate
//! at which 802.1AX lets a Marker Generator send Marker PDUs), so a Marker flood is not
//! reflected onto the link; the Information PDUs beyond it are dropped and counted.

use core::time::Duration;

use crate::time::Instant;
use crate::wire::EthernetAddress;

/// Slow-protocol frames per second admitted from the confirmed partner's address (ten times
/// what a partner may legitimately send: 3 LACPDUs and a few Marker PDUs per second).
pub const PARTNER_RATE: u32 = 30;
/// Slow-protocol frames per second admitted from every other address of a port together.
pub const OTHER_RATE: u32 = 20;
/// Marker Responses per second a port sends at most.
pub const MARKER_RESPONSE_RATE: u32 = 5;

/// A token bucket: `rate` tokens per second, at most `rate` stored (a one-second burst).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TokenBucket {
    rate: u32,
    /// Tokens in millionths (so refills at microsecond resolution lose nothing).
    micro_tokens: u64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket.
    pub(crate) fn new(rate: u32) -> Self {
        Self {
            rate,
            micro_tokens: u64::from(rate) * 1_000_000,
            last: Instant::ZERO,
        }
    }

    /// Takes a token if one is left at `now`; false if the bucket is empty.
    pub(crate) fn take(&mut self, now: Instant) -> bool {
        let cap = u64::from(self.rate) * 1_000_000;
        let elapsed = now.saturating_since(self.last).min(Duration::from_secs(1));
        // micro-tokens gained: rate tokens/s × elapsed µs.
        let gained = u64::from(self.rate) * elapsed.as_micros() as u64;
        self.micro_tokens = (self.micro_tokens + gained).min(cap);
        if now > self.last {
            self.last = now;
        }
        if self.micro_tokens >= 1_000_000 {
            self.micro_tokens -= 1_000_000;
            true
        } else {
            false
        }
    }
}

/// The receive admission of one port.
#[derive(Debug, Clone)]
pub(crate) struct RxLimiter {
    partner_bucket: TokenBucket,
    other_bucket: TokenBucket,
    /// The confirmed partner's source MAC.
    trusted: Option<EthernetAddress>,
    /// The last LACPDU taken: its source MAC and the partner (system, port) it named.
    last: Option<(EthernetAddress, EthernetAddress, u16)>,
    /// The last LACPDU held off: source MAC, system, port.
    candidate: Option<(EthernetAddress, EthernetAddress, u16)>,
}

impl RxLimiter {
    pub(crate) fn new() -> Self {
        Self {
            partner_bucket: TokenBucket::new(PARTNER_RATE),
            other_bucket: TokenBucket::new(OTHER_RATE),
            trusted: None,
            last: None,
            candidate: None,
        }
    }

    /// Whether a LACPDU from `src` naming `system` and `port` is held off: the port's partner
    /// is current (`partner_current`) and came from the confirmed address, this one comes from
    /// another, and it is not the second in a row from there naming the same system and port
    /// that also names this port as its partner (`knows_us`).
    pub(crate) fn holds_off(
        &mut self,
        src: EthernetAddress,
        system: EthernetAddress,
        port: u16,
        knows_us: bool,
        partner_current: bool,
    ) -> bool {
        let Some(trusted) = self.trusted else {
            return false;
        };
        if !partner_current || src == trusted {
            self.candidate = None;
            return false;
        }
        let this = Some((src, system, port));
        if self.candidate == this && knows_us {
            self.candidate = None;
            false
        } else {
            self.candidate = this;
            true
        }
    }

    /// The confirmed partner's source MAC, if any.
    pub(crate) fn trusted(&self) -> Option<EthernetAddress> {
        self.trusted
    }

    /// The port lost its partner (timed out, link down): nobody is trusted any more.
    pub(crate) fn forget(&mut self) {
        self.trusted = None;
        self.last = None;
        self.candidate = None;
    }

    /// Whether a frame from `src` may be parsed at `now`.
    pub(crate) fn admit(&mut self, now: Instant, src: Option<EthernetAddress>) -> bool {
        if src.is_some() && src == self.trusted {
            self.partner_bucket.take(now)
        } else {
            self.other_bucket.take(now)
        }
    }

    /// A LACPDU from `src` naming itself `system` and `port` was taken; `knows_us` if its
    /// Partner TLV names this port. Two in a row from the same address naming the same system
    /// and port, the second knowing us, confirm that address.
    pub(crate) fn lacpdu(
        &mut self,
        src: EthernetAddress,
        system: EthernetAddress,
        port: u16,
        knows_us: bool,
    ) {
        let this = (src, system, port);
        if knows_us && self.last == Some(this) {
            self.trusted = Some(src);
        }
        self.last = Some(this);
    }
}

#[cfg(test)]
mod test {
    use super::*;

    fn ms(n: u64) -> Instant {
        Instant::from_millis(n)
    }

    #[test]
    fn bucket_allows_a_burst_then_its_rate() {
        let mut b = TokenBucket::new(10);
        let burst = (0..100).filter(|_| b.take(ms(1000))).count();
        assert_eq!(burst, 10);
        // Over the next second, one every 100 ms.
        let later = (1..=1000).filter(|&t| b.take(ms(1000 + t))).count();
        assert_eq!(later, 10);
        // Time going backwards (a caller bug) grants nothing and does not panic.
        assert!(!b.take(ms(5)));
    }

    #[test]
    fn confirmed_partner_is_not_starved_by_a_flood_from_elsewhere() {
        let partner = EthernetAddress([2, 0, 0, 0, 0, 1]);
        let attacker = EthernetAddress([2, 0, 0, 0, 0, 9]);
        let psys = EthernetAddress([2, 0, 0, 0, 0, 0x10]);
        let mut l = RxLimiter::new();
        assert!(l.admit(ms(0), Some(partner)));
        l.lacpdu(partner, psys, 1, true);
        assert_eq!(l.trusted, None, "one LACPDU confirms nothing");
        l.lacpdu(partner, psys, 1, true);
        assert_eq!(l.trusted, Some(partner));
        // 10 000 frames from another address in one second: only OTHER_RATE (+ burst) pass.
        let mut passed = 0;
        for i in 0..10_000u64 {
            let now = Instant::from_micros(1_000_000 + i * 100);
            passed += u32::from(l.admit(now, Some(attacker)));
            // The partner's LACPDU every 333 ms always passes.
            if i % 3330 == 0 {
                assert!(l.admit(now, Some(partner)), "partner starved at {now}");
            }
        }
        assert!(passed <= 2 * OTHER_RATE, "{passed}");
        // An attacker naming random partners never becomes trusted.
        for i in 0..10u16 {
            l.lacpdu(attacker, EthernetAddress([2, 0, 0, 0, 1, i as u8]), i, true);
        }
        // Nor one repeating a LACPDU that does not name us.
        for _ in 0..3 {
            l.lacpdu(attacker, psys, 7, false);
        }
        assert_eq!(l.trusted, Some(partner));
    }

    #[test]
    fn only_a_repeated_lacpdu_that_names_us_takes_over_from_the_confirmed_partner() {
        let partner = EthernetAddress([2, 0, 0, 0, 0, 1]);
        let other = EthernetAddress([2, 0, 0, 0, 0, 9]);
        let psys = EthernetAddress([2, 0, 0, 0, 0, 0x10]);
        let osys = EthernetAddress([2, 0, 0, 0, 0, 0x20]);
        let mut l = RxLimiter::new();
        l.lacpdu(partner, psys, 1, true);
        l.lacpdu(partner, psys, 1, true);
        // Nobody is held off while the partner is not current.
        assert!(!l.holds_off(other, osys, 4, false, false));
        // The same LACPDU over and over (a replayed flood) that does not name us: held off.
        for _ in 0..5 {
            assert!(l.holds_off(other, osys, 4, false, true));
        }
        // Once it names us, its repeat takes over...
        assert!(!l.holds_off(other, osys, 4, true, true));
        // ...but a single one naming us after another system's does not.
        assert!(l.holds_off(other, osys, 5, true, true));
        assert!(l.holds_off(other, osys, 4, true, true));
        // The confirmed partner's own are never held off, and reset the candidate.
        assert!(!l.holds_off(partner, psys, 1, true, true));
        assert!(l.holds_off(other, osys, 4, true, true));
    }
}
