//! What one workload's implementation on one peer provides: a repetition
//! that returns its measurement or the mismatch it found
//! (bench/workloads/registry.hpp, bench/harness/result_check.hpp).

use std::fmt::Display;
use std::time::Duration;

pub struct RepetitionResult {
    pub value: f64,
    pub p99: Option<f64>,
    pub other_threads: Option<f64>,
}

impl RepetitionResult {
    pub fn value(value: f64) -> Self {
        Self {
            value,
            p99: None,
            other_threads: None,
        }
    }
}

/// A workload computed a wrong count or value.
pub struct ResultMismatch(pub String);

pub type Repetition = Result<RepetitionResult, ResultMismatch>;

pub trait WorkloadInstance {
    /// One repetition; its result checked.
    fn run_once(&mut self) -> Repetition;
}

/// An executor created once and the repetition a workload runs on it.
pub struct Instance<E> {
    pub executor: E,
    pub worker_count: usize,
    pub repetition: fn(&E, usize) -> Repetition,
}

impl<E> WorkloadInstance for Instance<E> {
    fn run_once(&mut self) -> Repetition {
        (self.repetition)(&self.executor, self.worker_count)
    }
}

pub fn expect_equal<T: PartialEq + Display>(
    what: &str,
    expected: T,
    actual: T,
) -> Result<(), ResultMismatch> {
    if expected == actual {
        Ok(())
    } else {
        Err(ResultMismatch(format!(
            "{what}: expected {expected}, got {actual}"
        )))
    }
}

pub fn nanoseconds_per(elapsed: Duration, count: usize) -> f64 {
    elapsed.as_nanos() as f64 / count as f64
}

pub fn milliseconds(elapsed: Duration) -> f64 {
    elapsed.as_secs_f64() * 1e3
}

pub fn microseconds(elapsed: Duration) -> f64 {
    elapsed.as_secs_f64() * 1e6
}
