//! The handles every layer of lagd-proto shares: a member port, an aggregator, and a frame to
//! send. They sit at the bottom of the crate: this module imports nothing of lagd-proto, so any
//! module can name a member without importing the bond, the LACP engine or the balancers.

use core::fmt;

/// Checks an interface name by the kernel's rules (`dev_valid_name`): 1 to 15 bytes, not `.`
/// or `..`, no `/`, `:`, white space or NUL. The error says so, quoting at most 32 characters
/// of the name.
pub fn check_interface_name(name: &str) -> Result<(), String> {
    if name.is_empty()
        || name.len() > 15
        || name.contains(['/', ':', '\0'])
        || name.contains(char::is_whitespace)
        || name == "."
        || name == ".."
    {
        let shown: String = name.escape_debug().take(32).collect();
        Err(format!(
            "'{shown}' is not a valid interface name (1 to 15 characters, no '/', ':' or spaces)"
        ))
    } else {
        Ok(())
    }
}

/// A member port: its position in the bond's enslave order (also the index of its per-port
/// arrays in every engine).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PortId(pub u16);

impl PortId {
    /// The index into per-port arrays.
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for PortId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// An aggregator of a bond. Ids are 1, 2, … in `add_port` order (one aggregator per port).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct AggregatorId(pub u16);

impl fmt::Display for AggregatorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A frame an engine wrote into the caller's buffer: send `buf[..len]` on `port`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// The member to send it on.
    pub port: PortId,
    /// The frame's length in the buffer.
    pub len: usize,
}

#[cfg(test)]
mod test {
    use super::check_interface_name;

    #[test]
    fn interface_names_by_the_kernels_rules() {
        for good in [
            "eth0",
            "a",
            "enp3s0f1.100",
            "bond-0_x@y",
            "123456789012345",
            "...",
        ] {
            assert_eq!(check_interface_name(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            ".",
            "..",
            "../etc",
            "a/b",
            "eth0:1",
            "eth 0",
            "eth\t0",
            "eth\n",
            "a\0b",
            "1234567890123456",
        ] {
            assert!(check_interface_name(bad).is_err(), "{bad:?}");
        }
        // A long name is quoted short.
        let e = check_interface_name(&"x".repeat(10_000)).unwrap_err();
        assert!(e.len() < 120, "{e}");
    }
}
