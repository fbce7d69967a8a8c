//! What the reader, the formats and the writers share: link types, limits, byte-order reads,
//! the container format and timestamp units.

/// `LINKTYPE_ETHERNET`: IEEE 802.3 Ethernet frames.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// `LINKTYPE_RAW`: raw IPv4 or IPv6 packets, no link-layer header.
pub const LINKTYPE_RAW: u32 = 101;
/// `LINKTYPE_LINUX_SLL`: Linux "cooked" capture, version 1.
pub const LINKTYPE_LINUX_SLL: u32 = 113;
/// `LINKTYPE_LINUX_SLL2`: Linux "cooked" capture, version 2.
pub const LINKTYPE_LINUX_SLL2: u32 = 276;

/// The name tcpdump and the pcap registry give a link type (`ETHERNET`, `LINUX_SLL`, `IPNET`...),
/// or `None` for one this table does not know.
pub const fn linktype_name(linktype: u32) -> Option<&'static str> {
    Some(match linktype {
        0 => "NULL",
        1 => "ETHERNET",
        6 => "IEEE802_5",
        8 => "SLIP",
        9 => "PPP",
        10 => "FDDI",
        50 => "PPP_HDLC",
        51 => "PPP_ETHER",
        101 => "RAW",
        104 => "C_HDLC",
        105 => "IEEE802_11",
        107 => "FRELAY",
        108 => "LOOP",
        113 => "LINUX_SLL",
        119 => "PRISM_HEADER",
        127 => "IEEE802_11_RADIOTAP",
        143 => "DOCSIS",
        163 => "IEEE802_11_AVS",
        192 => "PPI",
        195 => "IEEE802_15_4_WITHFCS",
        201 => "BLUETOOTH_HCI_H4_WITH_PHDR",
        220 => "USB_LINUX_MMAPPED",
        226 => "IPNET",
        227 => "CAN_SOCKETCAN",
        228 => "IPV4",
        229 => "IPV6",
        239 => "NFLOG",
        276 => "LINUX_SLL2",
        _ => return None,
    })
}

/// The largest pcapng block the reader accepts, and the most a classic pcap file's snaplen can
/// raise its record limit to (256 MiB).
///
/// 256 MiB is far above the packets real capture tools write, yet still catches a corrupt
/// length field. The buffer only grows as data actually arrives, so a bogus length in a short
/// file does not allocate the full amount.
pub const MAX_RECORD_LEN: u32 = 256 << 20;

/// The captured length up to which a classic pcap record is accepted whatever the file's
/// snaplen (262144, libpcap's `MAXIMUM_SNAPLEN` and Wireshark's `WTAP_MAX_PACKET_SIZE_STANDARD`).
///
/// A record is corrupt, as libpcap and Wireshark judge it, when its captured length exceeds
/// both this and the snaplen of the file header: some writers produce records longer than the
/// snaplen they declared, but never beyond the tools' maximum, so a longer one means the
/// record header is damaged (and the rest of the file cannot be framed).
pub const MAX_SNAPLEN: u32 = 262_144;

/// The most pcapng interfaces (summed over all sections) the reader keeps track of.
pub const MAX_INTERFACES: usize = 65_536;

pub(super) const NANOS_PER_SEC: u64 = 1_000_000_000;

#[inline(always)]
pub(super) fn rd16(b: &[u8], at: usize, big_endian: bool) -> u16 {
    let a = [b[at], b[at + 1]];
    if big_endian {
        u16::from_be_bytes(a)
    } else {
        u16::from_le_bytes(a)
    }
}

#[inline(always)]
pub(super) fn rd32(b: &[u8], at: usize, big_endian: bool) -> u32 {
    let a = [b[at], b[at + 1], b[at + 2], b[at + 3]];
    if big_endian {
        u32::from_be_bytes(a)
    } else {
        u32::from_le_bytes(a)
    }
}

#[inline(always)]
pub(super) fn rd64(b: &[u8], at: usize, big_endian: bool) -> u64 {
    let hi = u64::from(rd32(b, at, big_endian));
    let lo = u64::from(rd32(b, at + 4, big_endian));
    if big_endian {
        (hi << 32) | lo
    } else {
        (lo << 32) | hi
    }
}

/// The container format of a capture file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CaptureFormat {
    /// Classic libpcap format.
    Pcap {
        /// Timestamps are in nanoseconds (magic `0xa1b23c4d`) rather than microseconds.
        nanos: bool,
        /// The file is big-endian.
        big_endian: bool,
    },
    /// pcapng (the byte order may change from section to section).
    PcapNg,
}

/// The unit of an interface's timestamps (pcapng `if_tsresol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TsResolution {
    /// One tick is 10^-n seconds.
    Decimal(u8),
    /// One tick is 2^-n seconds.
    Binary(u8),
}

impl TsResolution {
    /// Microseconds, the pcapng default and classic pcap's usual unit.
    pub const MICROS: Self = Self::Decimal(6);
    /// Nanoseconds.
    pub const NANOS: Self = Self::Decimal(9);

    /// Decodes an `if_tsresol` option byte: the top bit selects base 2, the rest is the
    /// exponent.
    pub const fn from_if_tsresol(raw: u8) -> Self {
        if raw & 0x80 != 0 {
            Self::Binary(raw & 0x7f)
        } else {
            Self::Decimal(raw)
        }
    }

    /// Encodes as an `if_tsresol` option byte, or `None` if the exponent exceeds 127.
    pub const fn to_if_tsresol(self) -> Option<u8> {
        match self {
            Self::Decimal(n) if n < 0x80 => Some(n),
            Self::Binary(n) if n < 0x80 => Some(n | 0x80),
            _ => None,
        }
    }

    /// Converts a count of ticks to nanoseconds, rounding down and saturating at `u64::MAX`.
    #[inline]
    pub fn to_nanos(self, ticks: u64) -> u64 {
        match self {
            Self::Decimal(9) => ticks,
            Self::Decimal(6) => ticks.saturating_mul(1000),
            Self::Decimal(n) if n <= 9 => ticks.saturating_mul(10u64.pow(9 - u32::from(n))),
            // 10^19 is the largest power of ten in a u64; beyond it every u64 rounds to 0.
            Self::Decimal(n) if n - 9 <= 19 => ticks / 10u64.pow(u32::from(n - 9)),
            Self::Decimal(_) => 0,
            Self::Binary(n) => {
                // ticks * 10^9 < 2^94, so the product fits; n <= 255 would not all shift.
                let v = (u128::from(ticks) * u128::from(NANOS_PER_SEC))
                    .checked_shr(u32::from(n))
                    .unwrap_or(0);
                u64::try_from(v).unwrap_or(u64::MAX)
            }
        }
    }

    /// Converts nanoseconds to a count of ticks, rounding down and saturating at `u64::MAX`.
    pub fn from_nanos(self, nanos: u64) -> u64 {
        match self {
            Self::Decimal(9) => nanos,
            Self::Decimal(6) => nanos / 1000,
            Self::Decimal(n) if n <= 9 => nanos / 10u64.pow(9 - u32::from(n)),
            Self::Decimal(n) if n - 9 <= 19 => nanos.saturating_mul(10u64.pow(u32::from(n - 9))),
            Self::Decimal(_) => {
                if nanos == 0 {
                    0
                } else {
                    u64::MAX
                }
            }
            Self::Binary(n) => {
                let bits = 64 - nanos.leading_zeros();
                if nanos == 0 {
                    0
                } else if bits + u32::from(n) > 127 {
                    u64::MAX
                } else {
                    let v = (u128::from(nanos) << n) / u128::from(NANOS_PER_SEC);
                    u64::try_from(v).unwrap_or(u64::MAX)
                }
            }
        }
    }
}
