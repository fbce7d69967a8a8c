//! lagd's system interface (being written).
