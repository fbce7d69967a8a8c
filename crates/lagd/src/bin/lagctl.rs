//! lagctl (being written).
fn main() {}
