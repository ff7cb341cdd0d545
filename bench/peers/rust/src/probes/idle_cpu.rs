//! bench/workloads/idle_cpu/idle_probe.hpp: run one task, then the CPU time
//! the process spends while this thread sleeps for the idle period.

use super::Submit;
use crate::harness::borrowed::Borrowed;
use crate::harness::completion::Completion;
use crate::harness::process_usage::{other_threads_cpu_time, process_cpu_time};
use crate::harness::workload::{milliseconds, RepetitionResult};
use crate::parameters::idle_cpu::IDLE_PERIOD;

pub fn measure_idle_cpu<S: Submit>(executor: &S) -> RepetitionResult {
    let task_ran = Completion::<()>::new();
    // SAFETY: task_ran lives until wait() returned.
    let ran = unsafe { Borrowed::new(&task_ran) };
    executor.submit(move || ran.get().notify(()));
    task_ran.wait();

    // The other threads' window encloses the process's: reading /proc costs
    // this thread tens of microseconds, so it stays outside.
    let others_before = other_threads_cpu_time();
    let cpu_before = process_cpu_time();
    std::thread::sleep(IDLE_PERIOD);
    let cpu_spent = process_cpu_time() - cpu_before;
    let others_spent = other_threads_cpu_time() - others_before;
    let idle_seconds = IDLE_PERIOD.as_secs_f64();
    RepetitionResult {
        value: milliseconds(cpu_spent) / idle_seconds,
        p99: None,
        other_threads: Some(milliseconds(others_spent) / idle_seconds),
    }
}
