//! A reference that a task which must be `'static` (rayon's `spawn`,
//! tokio's `spawn`) may carry.

/// Shares `&T` with tasks without reference counting, as the C++ peers
/// capture their counters and signals by reference: an `Arc` would add two
/// locked read-modify-writes per task that no C++ peer pays.
pub struct Borrowed<T> {
    referent: *const T,
}

impl<T> Clone for Borrowed<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Borrowed<T> {}

// SAFETY: a Borrowed<T> is a &T, which may cross threads when T is Sync.
unsafe impl<T: Sync> Send for Borrowed<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for Borrowed<T> {}

impl<T> Borrowed<T> {
    /// # Safety
    /// The caller keeps `referent` alive until every task holding a copy
    /// has finished touching it: the measuring thread waits for the
    /// completion the last task signals, and no task touches the referent
    /// after its part of that signal (see Completion::notify and
    /// CompletionCounter::count_one).
    pub unsafe fn new(referent: &T) -> Self {
        Self { referent }
    }

    pub fn get(&self) -> &T {
        // SAFETY: alive, by the contract of `new`.
        unsafe { &*self.referent }
    }
}
