//! One-shot "it is done" from a task to the thread that waits for it, and
//! the shared counter whose last increment signals it: the Rust versions of
//! bench/harness/completion_signal.hpp and completion_counter.hpp. The
//! waiter blocks on a condition variable; it never spins.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

/// Carries one value from the task that notifies to the thread that waits.
pub struct Completion<T> {
    value: Mutex<Option<T>>,
    delivered: Condvar,
}

impl<T> Completion<T> {
    pub fn new() -> Self {
        Self {
            value: Mutex::new(None),
            delivered: Condvar::new(),
        }
    }

    /// Notifies under the lock: the waiter cannot return from wait() (and
    /// free this object) until the notifier has stopped touching it.
    pub fn notify(&self, value: T) {
        let mut slot = self.value.lock().unwrap();
        *slot = Some(value);
        self.delivered.notify_one();
    }

    pub fn wait(&self) -> T {
        let mut slot = self.value.lock().unwrap();
        loop {
            if let Some(value) = slot.take() {
                return value;
            }
            slot = self.delivered.wait(slot).unwrap();
        }
    }
}

/// Counts finished tasks on one shared atomic; the task whose increment
/// reaches the expected count notifies the waiting thread.
pub struct CompletionCounter {
    expected: usize,
    count: AtomicUsize,
    all_done: Completion<()>,
}

impl CompletionCounter {
    pub fn new(expected: usize) -> Self {
        Self {
            expected,
            count: AtomicUsize::new(0),
            all_done: Completion::new(),
        }
    }

    pub fn count_one(&self) {
        // Read before the increment: once it is done the count may reach
        // `expected` and the waiter free this object.
        let expected = self.expected;
        // AcqRel, as in completion_counter.hpp: the increments are totally
        // ordered, exactly one sees expected - 1, and all of them happen
        // before the notify, so no task touches `count` after wait().
        if self.count.fetch_add(1, Ordering::AcqRel) + 1 == expected {
            self.all_done.notify(());
        }
    }

    pub fn wait(&self) {
        self.all_done.wait();
    }

    /// Valid after wait() returned.
    pub fn count(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }
}
