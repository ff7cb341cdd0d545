//! Timing, statistics, completion signals, result checks and the JSON line:
//! the Rust side of bench/harness/.

pub mod borrowed;
pub mod completion;
pub mod json_line;
pub mod process_usage;
pub mod statistics;
pub mod workload;
