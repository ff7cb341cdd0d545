//! bench/workloads/spawn_burst_memory/burst_probe.hpp and worker_gate.hpp:
//! with every worker held in a blocker task, submit TASK_COUNT tasks and
//! read how much the resident set grew while all of them are pending.

use std::sync::{Arc, Condvar, Mutex};

use super::Submit;
use crate::harness::borrowed::Borrowed;
use crate::harness::completion::CompletionCounter;
use crate::harness::process_usage::{resident_bytes, return_free_heap_pages};
use crate::harness::workload::{expect_equal, Repetition, RepetitionResult};
use crate::parameters::spawn_burst_memory::TASK_COUNT;

/// Holds every worker inside one blocker task each until it opens. Blockers
/// share ownership of it: one may still be leaving hold_here() after the
/// measuring thread is done with it.
struct WorkerGate {
    workers: usize,
    state: Mutex<GateState>,
    all_held: Condvar,
    opened: Condvar,
}

struct GateState {
    held: usize,
    open: bool,
}

impl WorkerGate {
    fn new(workers: usize) -> Self {
        Self {
            workers,
            state: Mutex::new(GateState {
                held: 0,
                open: false,
            }),
            all_held: Condvar::new(),
            opened: Condvar::new(),
        }
    }

    /// Called by each blocker task: blocks its worker thread.
    fn hold_here(&self) {
        let mut state = self.state.lock().unwrap();
        state.held += 1;
        if state.held == self.workers {
            self.all_held.notify_one();
        }
        while !state.open {
            state = self.opened.wait(state).unwrap();
        }
    }

    fn wait_until_all_held(&self) {
        let mut state = self.state.lock().unwrap();
        while state.held < self.workers {
            state = self.all_held.wait(state).unwrap();
        }
    }

    fn open(&self) {
        self.state.lock().unwrap().open = true;
        self.opened.notify_all();
    }
}

pub fn measure_burst_memory<S: Submit>(executor: &S, worker_count: usize) -> Repetition {
    let gate = Arc::new(WorkerGate::new(worker_count));
    for _ in 0..worker_count {
        let gate = Arc::clone(&gate);
        executor.submit(move || gate.hold_here());
    }
    gate.wait_until_all_held();

    return_free_heap_pages();
    let resident_before = resident_bytes();
    let finished = CompletionCounter::new(TASK_COUNT);
    // SAFETY: finished lives until wait() returned.
    let counter = unsafe { Borrowed::new(&finished) };
    for _ in 0..TASK_COUNT {
        executor.submit(move || counter.get().count_one());
    }
    let resident_with_all_pending = resident_bytes();

    gate.open();
    finished.wait();
    expect_equal("tasks run", TASK_COUNT, finished.count())?;

    let growth = resident_with_all_pending.saturating_sub(resident_before);
    Ok(RepetitionResult::value(growth as f64 / TASK_COUNT as f64))
}
