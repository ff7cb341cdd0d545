//! bench/harness/process_usage.cpp: CPU time of the process and of its other
//! threads, resident set, and handing free heap pages back.

use std::fs;
use std::time::Duration;

fn to_duration(time: libc::timeval) -> Duration {
    Duration::from_secs(time.tv_sec as u64) + Duration::from_micros(time.tv_usec as u64)
}

/// User + system time of every thread of the process (getrusage).
pub fn process_cpu_time() -> Duration {
    // SAFETY: getrusage fills the zeroed struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        panic!("getrusage(RUSAGE_SELF) failed");
    }
    to_duration(usage.ru_utime) + to_duration(usage.ru_stime)
}

/// Time on the CPU of every thread but the calling one, from
/// /proc/self/task/*/schedstat.
pub fn other_threads_cpu_time() -> Duration {
    // SAFETY: gettid has no preconditions.
    let calling_thread = unsafe { libc::gettid() }.to_string();
    let mut total = Duration::ZERO;
    let tasks = fs::read_dir("/proc/self/task").expect("cannot open /proc/self/task");
    for entry in tasks.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == calling_thread {
            continue;
        }
        // schedstat: time on the CPU (ns), time waiting to run, time slices.
        // A thread that exited after read_dir saw it has none.
        if let Ok(text) = fs::read_to_string(format!("/proc/self/task/{name}/schedstat")) {
            if let Some(Ok(nanoseconds)) = text.split_whitespace().next().map(str::parse::<u64>) {
                total += Duration::from_nanos(nanoseconds);
            }
        }
    }
    total
}

/// The resident set from /proc/self/statm.
pub fn resident_bytes() -> usize {
    let statm = fs::read_to_string("/proc/self/statm").expect("cannot read /proc/self/statm");
    let resident_pages: usize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|pages| pages.parse().ok())
        .expect("/proc/self/statm has no resident page count");
    // SAFETY: sysconf has no preconditions.
    resident_pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize
}

/// Hands memory glibc malloc kept from earlier work back to the system
/// (Rust's global allocator is glibc malloc here).
pub fn return_free_heap_pages() {
    // SAFETY: malloc_trim has no preconditions.
    unsafe { libc::malloc_trim(0) };
}
