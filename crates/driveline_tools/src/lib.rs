//! Tools for Driveline's developers: profiling targets (the binaries) and the fuzz harness.

pub mod fuzz;
