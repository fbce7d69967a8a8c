//! Link control frames ([`ControlKind`]): Slow Protocols (LACP, Marker), MAC Control (pause),
//! LLDP, spanning tree and the other frames to the IEEE 802.1 reserved link-local addresses
//! (`01:80:c2:00:00:00` to `01:80:c2:00:00:0f`).
//!
//! These frames belong to one link, not to the bond's traffic: a bond never hashes them (LACPDUs
//! and Markers are sent by the 802.3ad machine of each member on that member; pause frames are
//! made and eaten by the MAC of each port; LLDP and spanning tree agents talk on each port), so
//! the planner counts them apart ([`ControlCounts`]) and ranks no policy with them.

use core::fmt;

use super::load::Load;

/// A kind of link control frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ControlKind {
    /// Slow Protocols, subtype 1 (EtherType 0x8809): an LACPDU.
    Lacp,
    /// Slow Protocols, subtype 2: a Marker PDU.
    Marker,
    /// Other Slow Protocols (OAM, ESMC...).
    OtherSlow,
    /// MAC Control (EtherType 0x8808): pause and priority flow control.
    Pause,
    /// LLDP (EtherType 0x88cc).
    Lldp,
    /// Spanning tree BPDUs (LLC 0x42 to `01:80:c2:00:00:00`).
    Stp,
    /// Any other frame to a reserved link-local address `01:80:c2:00:00:0x` (802.1X, GARP...).
    LinkLocal,
}

impl ControlKind {
    /// Every kind, in report order.
    pub const ALL: [Self; 7] = [
        Self::Lacp,
        Self::Marker,
        Self::OtherSlow,
        Self::Pause,
        Self::Lldp,
        Self::Stp,
        Self::LinkLocal,
    ];

    /// A short name (`lacp`, `marker`, `slow-other`, `pause`, `lldp`, `stp`, `link-local`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Lacp => "lacp",
            Self::Marker => "marker",
            Self::OtherSlow => "slow-other",
            Self::Pause => "pause",
            Self::Lldp => "lldp",
            Self::Stp => "stp",
            Self::LinkLocal => "link-local",
        }
    }

    /// What the frame is, in words.
    pub const fn describe(self) -> &'static str {
        match self {
            Self::Lacp => "an LACPDU (Slow Protocols, EtherType 0x8809, subtype 1)",
            Self::Marker => "a LACP Marker PDU (Slow Protocols, EtherType 0x8809, subtype 2)",
            Self::OtherSlow => "a Slow Protocols frame (EtherType 0x8809: OAM, ESMC...)",
            Self::Pause => "a MAC Control frame (EtherType 0x8808: pause, priority flow control)",
            Self::Lldp => "an LLDP frame (EtherType 0x88cc)",
            Self::Stp => "a spanning tree BPDU (LLC 0x42 to 01:80:c2:00:00:00)",
            Self::LinkLocal => "a frame to an IEEE 802.1 link-local address (01:80:c2:00:00:0x)",
        }
    }

    /// How each bonding mode sends it (none of them hashes it).
    pub const fn how_sent(self) -> &'static str {
        match self {
            Self::Lacp | Self::Marker => {
                "not hashed: the 802.3ad machine of each member sends its own on that member \
                 (lagd and the kernel alike), and no other mode sends any; a Marker response \
                 leaves on the member the Marker came in on"
            }
            Self::OtherSlow => {
                "not hashed: a Slow Protocols frame belongs to one link and is sent on it by \
                 that link's agent, in every mode"
            }
            Self::Pause => {
                "not hashed: pause frames are made and consumed by each port's MAC, below the \
                 bond, in every mode"
            }
            Self::Lldp | Self::Stp | Self::LinkLocal => {
                "not hashed as bond traffic: link-local frames describe one link, so their \
                 agents (lldpd, a bridge's STP) send them on each member port; a bridge never \
                 forwards them, and in every mode they are not traffic a policy spreads"
            }
        }
    }
}

impl fmt::Display for ControlKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The IEEE 802.1 reserved group addresses `01:80:c2:00:00:00` to `..:0f`, which bridges do
/// not forward.
fn link_local(dst: &[u8]) -> bool {
    dst.len() >= 6 && dst[..5] == [0x01, 0x80, 0xc2, 0x00, 0x00] && dst[5] <= 0x0f
}

/// The kind of link control frame `frame` (an Ethernet frame from the destination MAC on) is,
/// if it is one. Slow Protocols, MAC Control and LLDP are known by their EtherType (untagged:
/// they are never tagged); other frames by a link-local destination.
pub fn classify(frame: &[u8]) -> Option<ControlKind> {
    if frame.len() < 14 {
        return None;
    }
    let ethertype = u16::from_be_bytes([frame[12], frame[13]]);
    match ethertype {
        0x8809 => {
            return Some(match frame.get(14) {
                Some(1) => ControlKind::Lacp,
                Some(2) => ControlKind::Marker,
                _ => ControlKind::OtherSlow,
            });
        }
        0x8808 => return Some(ControlKind::Pause),
        0x88cc => return Some(ControlKind::Lldp),
        _ => {}
    }
    if !link_local(frame) {
        return None;
    }
    // An 802.3 length field and LLC DSAP/SSAP 0x42: a BPDU.
    if ethertype <= 1500 && frame.get(14) == Some(&0x42) && frame.get(15) == Some(&0x42) {
        return Some(ControlKind::Stp);
    }
    Some(ControlKind::LinkLocal)
}

/// Control frames counted apart, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ControlCounts {
    /// Per kind, in [`ControlKind::ALL`] order.
    pub by_kind: [Load; 7],
}

impl ControlCounts {
    /// Counts one frame of `kind`.
    pub(super) fn add(&mut self, kind: ControlKind, bytes: u64) {
        let i = ControlKind::ALL
            .iter()
            .position(|k| *k == kind)
            .unwrap_or(0);
        self.by_kind[i].add(1, bytes);
    }

    /// The frames and bytes of `kind`.
    pub fn get(&self, kind: ControlKind) -> Load {
        ControlKind::ALL
            .iter()
            .position(|k| *k == kind)
            .map_or_else(Load::default, |i| self.by_kind[i])
    }

    /// All control frames.
    pub fn total(&self) -> Load {
        let mut t = Load::default();
        for l in &self.by_kind {
            t.add(l.packets, l.bytes);
        }
        t
    }

    /// The kinds seen, with their counts.
    pub fn seen(&self) -> impl Iterator<Item = (ControlKind, Load)> + '_ {
        ControlKind::ALL
            .iter()
            .zip(&self.by_kind)
            .filter(|(_, l)| l.packets > 0)
            .map(|(k, l)| (*k, *l))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(dst: [u8; 6], ethertype: u16, payload: &[u8]) -> Vec<u8> {
        let mut f = dst.to_vec();
        f.extend_from_slice(&[2, 0, 0, 0, 0, 1]);
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    const SLOW: [u8; 6] = [0x01, 0x80, 0xc2, 0, 0, 0x02];

    #[test]
    fn kinds_by_ethertype_and_address() {
        assert_eq!(
            classify(&frame(SLOW, 0x8809, &[1, 1])),
            Some(ControlKind::Lacp)
        );
        assert_eq!(
            classify(&frame(SLOW, 0x8809, &[2, 1])),
            Some(ControlKind::Marker)
        );
        assert_eq!(
            classify(&frame(SLOW, 0x8809, &[3])),
            Some(ControlKind::OtherSlow)
        );
        assert_eq!(
            classify(&frame(SLOW, 0x8809, &[])),
            Some(ControlKind::OtherSlow)
        );
        let pause = [0x01, 0x80, 0xc2, 0, 0, 0x01];
        assert_eq!(
            classify(&frame(pause, 0x8808, &[0, 1])),
            Some(ControlKind::Pause)
        );
        let lldp = [0x01, 0x80, 0xc2, 0, 0, 0x0e];
        assert_eq!(
            classify(&frame(lldp, 0x88cc, &[2, 7])),
            Some(ControlKind::Lldp)
        );
        let stp = [0x01, 0x80, 0xc2, 0, 0, 0];
        assert_eq!(
            classify(&frame(stp, 38, &[0x42, 0x42, 3])),
            Some(ControlKind::Stp)
        );
        let eapol = [0x01, 0x80, 0xc2, 0, 0, 0x03];
        assert_eq!(
            classify(&frame(eapol, 0x888e, &[1])),
            Some(ControlKind::LinkLocal)
        );
        // Not link-local: 01:80:c2:00:00:10 and above, ordinary multicast, unicast, runts.
        assert_eq!(
            classify(&frame([0x01, 0x80, 0xc2, 0, 0, 0x10], 0x0800, &[])),
            None
        );
        assert_eq!(
            classify(&frame([0x01, 0, 0x5e, 0, 0, 1], 0x0800, &[0x45])),
            None
        );
        assert_eq!(classify(&frame([2, 0, 0, 0, 0, 2], 0x0800, &[0x45])), None);
        assert_eq!(classify(&SLOW), None);
        // A tagged frame to a link-local address is link-local too.
        assert_eq!(
            classify(&frame(stp, 0x8100, &[0, 5, 0x08, 0])),
            Some(ControlKind::LinkLocal)
        );
    }

    #[test]
    fn counts_by_kind() {
        let mut c = ControlCounts::default();
        c.add(ControlKind::Lacp, 124);
        c.add(ControlKind::Lacp, 124);
        c.add(ControlKind::Lldp, 60);
        assert_eq!(
            c.get(ControlKind::Lacp),
            Load {
                packets: 2,
                bytes: 248
            }
        );
        assert_eq!(
            c.total(),
            Load {
                packets: 3,
                bytes: 308
            }
        );
        let seen: Vec<ControlKind> = c.seen().map(|(k, _)| k).collect();
        assert_eq!(seen, [ControlKind::Lacp, ControlKind::Lldp]);
    }
}
