//! `canopy_rust_peers timer_storm --timers N [--threads T]`: bench/io/timer_bench.cpp's
//! `--test storm` on tokio, printing the same JSON line (bench/io_bench.py
//! runs it beside Canopy and Asio, one process per run so that the peak
//! resident set is this run's own).
//!
//! N tasks `Runtime::spawn`ed from the main thread onto a multi-thread
//! runtime of T workers (enable_all, as `#[tokio::main]`), each
//! `tokio::time::sleep_until(now + length).await` with the length uniform in
//! 0..=1000 ms (splitmix64 from seed 1: the C++ peers' sequence); the odd
//! ones are `JoinHandle::abort()`ed one batch of 1024 spawns later, as the
//! Canopy peer cancels. Lateness = the instant the task runs again - the
//! deadline, for each sleep that fired; p50/p99/max, time from the first
//! spawn until the last sleep fired, peak resident set (VmHWM), how long the
//! spawning took and the p99 of the sleeps whose deadline came after it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use tokio::runtime::Builder;

const MAX_LENGTH_US: u64 = 1_000_000;
const CANCEL_BATCH: usize = 1024;

struct Shared {
    lengths: Vec<Duration>,
    // One slot per task, written by that task only, read after every task
    // ended (the counter's last decrement, then the mutex).
    lateness_ns: Vec<AtomicUsize>,
    woke_ns: Vec<AtomicUsize>,
    remaining: AtomicUsize,
    done: Mutex<bool>,
    done_signal: Condvar,
    origin: Instant,
}

/// Ends the task's count however the task ends (fired, or dropped by abort).
struct Guard<'a>(&'a Shared);

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        if self.0.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            let mut done = self.0.done.lock().unwrap();
            *done = true;
            self.0.done_signal.notify_all();
        }
    }
}

fn lengths(count: usize) -> Vec<Duration> {
    let mut seed: u64 = 1;
    (0..count)
        .map(|_| {
            seed = seed.wrapping_add(0x9e3779b97f4a7c15);
            let mut z = seed;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
            z ^= z >> 31;
            Duration::from_micros(z % (MAX_LENGTH_US + 1))
        })
        .collect()
}

fn peak_resident_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("VmHWM:"))
                .and_then(|line| line[6..].trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[(q * (sorted.len() - 1) as f64) as usize]
}

const NOT_FIRED: usize = usize::MAX;

pub fn run(arguments: &[String]) -> u8 {
    let mut timers: usize = 100_000;
    let mut threads: usize = 2;
    let mut remaining = arguments.iter();
    while let Some(option) = remaining.next() {
        let value = remaining
            .next()
            .and_then(|v| v.parse::<usize>().ok())
            .filter(|v| *v > 0);
        match (option.as_str(), value) {
            ("--timers", Some(v)) => timers = v,
            ("--threads", Some(v)) => threads = v,
            _ => {
                eprintln!("canopy_rust_peers: usage: timer_storm --timers N [--threads T]");
                return 2;
            }
        }
    }
    let runtime = Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .expect("tokio runtime");
    // Leaked for 'static tasks: one per process.
    let shared: &'static Shared = Box::leak(Box::new(Shared {
        lengths: lengths(timers),
        lateness_ns: (0..timers).map(|_| AtomicUsize::new(NOT_FIRED)).collect(),
        woke_ns: (0..timers).map(|_| AtomicUsize::new(0)).collect(),
        remaining: AtomicUsize::new(timers),
        done: Mutex::new(false),
        done_signal: Condvar::new(),
        origin: Instant::now(),
    }));
    let start = Instant::now();
    let mut batch = Vec::with_capacity(CANCEL_BATCH);
    let mut previous: Vec<tokio::task::JoinHandle<()>> = Vec::with_capacity(CANCEL_BATCH);
    for index in 0..timers {
        // Outside the async block: an abort that comes before the task's
        // first poll drops it with the future.
        let guard = Guard(shared);
        batch.push(runtime.spawn(async move {
            let _guard = guard;
            let deadline = Instant::now() + shared.lengths[index];
            tokio::time::sleep_until(deadline.into()).await;
            let now = Instant::now();
            shared.lateness_ns[index].store(
                now.duration_since(deadline).as_nanos() as usize,
                Ordering::Relaxed,
            );
            shared.woke_ns[index].store(
                now.duration_since(shared.origin).as_nanos() as usize,
                Ordering::Relaxed,
            );
        }));
        if batch.len() == CANCEL_BATCH || index + 1 == timers {
            for handle in previous.iter().skip(1).step_by(2) {
                handle.abort();
            }
            previous.clear(); // dropped handles: detached
            std::mem::swap(&mut previous, &mut batch);
        }
    }
    for handle in previous.iter().skip(1).step_by(2) {
        handle.abort();
    }
    previous.clear();
    let spawned = Instant::now();
    {
        let mut done = shared.done.lock().unwrap();
        while !*done {
            done = shared.done_signal.wait(done).unwrap();
        }
    }
    let start_ns = start.duration_since(shared.origin).as_nanos() as usize;
    let spawned_ns = spawned.duration_since(shared.origin).as_nanos() as usize;
    let mut fired = Vec::with_capacity(timers);
    let mut after_spawn = Vec::new();
    let mut last_ns = 0usize;
    for index in 0..timers {
        let late = shared.lateness_ns[index].load(Ordering::Relaxed);
        if late != NOT_FIRED {
            let woke = shared.woke_ns[index].load(Ordering::Relaxed);
            fired.push(late as f64 / 1000.0);
            last_ns = last_ns.max(woke);
            if woke.saturating_sub(late) >= spawned_ns {
                after_spawn.push(late as f64 / 1000.0);
            }
        }
    }
    fired.sort_by(|a, b| a.partial_cmp(b).unwrap());
    after_spawn.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let peak = peak_resident_kib();
    println!(
        "{{\"peer\":\"tokio\",\"workload\":\"timer_storm\",\"timers\":{timers},\"threads\":{threads},\
         \"fired\":{},\"p50_us\":{:.1},\"p99_us\":{:.1},\"max_us\":{:.1},\"all_fired_ms\":{:.1},\
         \"peak_rss_mib\":{:.1},\"spawn_ms\":{:.1},\"p99_after_spawn_us\":{:.1}}}",
        fired.len(),
        percentile(&fired, 0.5),
        percentile(&fired, 0.99),
        fired.last().copied().unwrap_or(0.0),
        last_ns.saturating_sub(start_ns) as f64 / 1e6,
        peak as f64 / 1024.0,
        spawned_ns.saturating_sub(start_ns) as f64 / 1e6,
        percentile(&after_spawn, 0.99)
    );
    drop(runtime);
    0
}
