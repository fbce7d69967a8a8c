//! What every wire format shares: the error type, the macros that declare on-wire enumerations
//! and view constructors, and big-endian readers.

use core::fmt;

/// Why a frame or file could not be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// The buffer ends before the header (or a length field) says it should.
    Truncated,
    /// A field holds a value the format forbids.
    Malformed,
    /// Well-formed, but of a kind this code does not handle.
    Unsupported,
}

impl Error {
    /// A short lower-case name, stable enough to use as a metric label.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Truncated => "truncated",
            Self::Malformed => "malformed",
            Self::Unsupported => "unsupported",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::error::Error for Error {}

/// The result of a wire operation.
pub type Result<T> = core::result::Result<T, Error>;

/// Declares an on-wire enumeration with an `Unknown(raw)` variant and `From` conversions both
/// ways, so unrecognised values survive a parse/emit round trip.
macro_rules! enum_with_unknown {
    (
        $(#[$enum_attr:meta])*
        pub enum $name:ident($ty:ty) {
            $( $(#[$variant_attr:meta])* $variant:ident = $value:expr ),+ $(,)?
        }
    ) => {
        $(#[$enum_attr])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name {
            $( $(#[$variant_attr])* $variant ),*,
            /// A value this code does not know, kept as it was on the wire.
            Unknown($ty),
        }

        impl ::core::convert::From<$ty> for $name {
            fn from(value: $ty) -> Self {
                match value {
                    $( $value => Self::$variant ),*,
                    other => Self::Unknown(other),
                }
            }
        }

        impl ::core::convert::From<$name> for $ty {
            fn from(value: $name) -> Self {
                match value {
                    $( $name::$variant => $value ),*,
                    $name::Unknown(other) => other,
                }
            }
        }
    };
}
pub(crate) use enum_with_unknown;

/// The constructors every view shares: `new_unchecked`, `new_checked` (through the view's own
/// `check_len`) and `into_inner`. The view is a struct with one field, `buffer: T`.
macro_rules! view_constructors {
    ($name:ident) => {
        impl<T: AsRef<[u8]>> $name<T> {
            /// Wraps a buffer without checking it (for emitting into a buffer the caller sized).
            pub const fn new_unchecked(buffer: T) -> Self {
                Self { buffer }
            }

            /// Wraps a buffer, checking it with [`check_len`](Self::check_len): after that no
            /// accessor panics.
            pub fn new_checked(buffer: T) -> $crate::wire::Result<Self> {
                let view = Self::new_unchecked(buffer);
                view.check_len()?;
                Ok(view)
            }

            /// The underlying buffer.
            pub fn into_inner(self) -> T {
                self.buffer
            }
        }
    };
}
pub(crate) use view_constructors;

/// Reads a big-endian `u16` at `at`; the caller has checked the length.
#[inline(always)]
pub(crate) fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Reads a big-endian `u32` at `at`; the caller has checked the length.
#[inline(always)]
pub(crate) fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
