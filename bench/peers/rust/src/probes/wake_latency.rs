//! bench/workloads/wake_latency/latency_sampler.hpp: after the executor idled,
//! submit one task at a time and read how long it took to start. The thread
//! sleeps through each interval and never spins.

use std::time::Instant;

use super::Submit;
use crate::harness::borrowed::Borrowed;
use crate::harness::completion::Completion;
use crate::harness::statistics::percentile;
use crate::harness::workload::{microseconds, RepetitionResult};
use crate::parameters::wake_latency::{IDLE_BEFORE, SAMPLE_COUNT, SAMPLE_INTERVAL};

pub fn sample_wake_latency<S: Submit>(executor: &S) -> RepetitionResult {
    std::thread::sleep(IDLE_BEFORE);
    let mut latencies_us = Vec::with_capacity(SAMPLE_COUNT);
    for _ in 0..SAMPLE_COUNT {
        let task_started = Completion::<Instant>::new();
        // SAFETY: task_started lives until wait() returned its value.
        let started = unsafe { Borrowed::new(&task_started) };
        let submitted = Instant::now();
        executor.submit(move || started.get().notify(Instant::now()));
        std::thread::sleep(SAMPLE_INTERVAL);
        latencies_us.push(microseconds(task_started.wait() - submitted));
    }
    RepetitionResult {
        value: percentile(&latencies_us, 0.50),
        p99: Some(percentile(&latencies_us, 0.99)),
        other_threads: None,
    }
}
