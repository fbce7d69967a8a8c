//! lagd glue (being written).
#![forbid(unsafe_code)]
