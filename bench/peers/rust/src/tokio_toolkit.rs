//! The task toolkit workloads (issue 31) on tokio 1.24's `sync` module, run
//! on the runtime `tokio_peer` builds (Builder::new_multi_thread with
//! `--threads` workers). The shapes are those of
//! bench/workloads/{channel_ping_pong,channel_throughput,mutex_contention}:
//!
//! - channel_ping_pong: two `tokio::sync::mpsc::channel(1)`, one each way;
//!   the driver task sends and awaits the echo, the echo task sends back what
//!   it receives until the driver drops its Sender (Canopy's driver calls
//!   close()).
//! - channel_throughput: one `mpsc::channel(1024)`, four producer tasks
//!   with a clone of the Sender each, one consumer task; the channel closes
//!   when the last Sender is dropped.
//! - mutex_contention: 64 tasks take one `tokio::sync::Mutex<u64>` (a FIFO
//!   lock built on tokio's batch semaphore, as Canopy's mutex is FIFO) and
//!   increment the value it guards.
//!
//! Every task is `Runtime::spawn`ed from the measuring thread, as Canopy's
//! are `spawn_detached` from it, and the shared state is borrowed, not
//! reference counted (harness/borrowed.rs says why).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use tokio::runtime::Runtime;
use tokio::sync::{mpsc, Mutex};

use crate::harness::borrowed::Borrowed;
use crate::harness::completion::CompletionCounter;
use crate::harness::workload::{expect_equal, nanoseconds_per, Repetition, RepetitionResult};
use crate::parameters::{channel_ping_pong, channel_throughput, mutex_contention};

/// The repetition of a toolkit workload, or None if `workload` is not one.
pub fn repetition(workload: &str) -> Option<fn(&Runtime, usize) -> Repetition> {
    match workload {
        "channel_ping_pong" => Some(run_channel_ping_pong),
        "channel_throughput" => Some(run_channel_throughput),
        "mutex_contention" => Some(run_mutex_contention),
        _ => None,
    }
}

/// What the tasks report: each field written by one task before its
/// count_one(), read after wait(). Relaxed: the counter's AcqRel increments
/// and the notify order the writes before the read.
struct Outcome {
    first: AtomicU64,
    second: AtomicU64,
    finished: CompletionCounter,
}

impl Outcome {
    fn new(tasks: usize) -> Self {
        Self {
            first: AtomicU64::new(0),
            second: AtomicU64::new(0),
            finished: CompletionCounter::new(tasks),
        }
    }
}

fn run_channel_ping_pong(runtime: &Runtime, _: usize) -> Repetition {
    // first: the driver's sum of the echoes; second: the echo task's count.
    let outcome = Outcome::new(2);
    // SAFETY: outcome lives until wait() returned.
    let shared = unsafe { Borrowed::new(&outcome) };
    let (ping_sender, mut ping_receiver) = mpsc::channel::<u64>(1);
    let (pong_sender, mut pong_receiver) = mpsc::channel::<u64>(1);
    let clock = Instant::now();
    runtime.spawn(async move {
        let mut echoes = 0_u64;
        while let Some(value) = ping_receiver.recv().await {
            if pong_sender.send(value).await.is_err() {
                break;
            }
            echoes += 1;
        }
        shared.get().second.store(echoes, Ordering::Relaxed);
        shared.get().finished.count_one();
    });
    runtime.spawn(async move {
        let mut sum = 0_u64;
        for value in 0..channel_ping_pong::ROUND_TRIPS as u64 {
            if ping_sender.send(value).await.is_err() {
                break;
            }
            match pong_receiver.recv().await {
                Some(echo) => sum += echo,
                None => break,
            }
        }
        drop(ping_sender); // ends the echo task's loop
        shared.get().first.store(sum, Ordering::Relaxed);
        shared.get().finished.count_one();
    });
    outcome.finished.wait();
    let elapsed = clock.elapsed();
    expect_equal(
        "round trips echoed",
        channel_ping_pong::ROUND_TRIPS as u64,
        outcome.second.load(Ordering::Relaxed),
    )?;
    expect_equal(
        "sum of the echoes",
        channel_ping_pong::EXPECTED_SUM,
        outcome.first.load(Ordering::Relaxed),
    )?;
    Ok(RepetitionResult::value(nanoseconds_per(
        elapsed,
        channel_ping_pong::ROUND_TRIPS,
    )))
}

fn run_channel_throughput(runtime: &Runtime, _: usize) -> Repetition {
    // first: the consumer's count; second: its wrapping sum of the values.
    let outcome = Outcome::new(channel_throughput::PRODUCER_COUNT + 1);
    // SAFETY: outcome lives until wait() returned.
    let shared = unsafe { Borrowed::new(&outcome) };
    let (sender, mut receiver) = mpsc::channel::<u64>(channel_throughput::CAPACITY);
    let clock = Instant::now();
    for producer in 0..channel_throughput::PRODUCER_COUNT as u64 {
        let sender = sender.clone();
        runtime.spawn(async move {
            let first = producer * channel_throughput::MESSAGES_PER_PRODUCER as u64;
            for value in first..first + channel_throughput::MESSAGES_PER_PRODUCER as u64 {
                if sender.send(value).await.is_err() {
                    break;
                }
            }
            drop(sender); // the last one closes the channel
            shared.get().finished.count_one();
        });
    }
    drop(sender);
    runtime.spawn(async move {
        let mut received = 0_u64;
        let mut sum = 0_u64;
        while let Some(value) = receiver.recv().await {
            received += 1;
            sum = sum.wrapping_add(value);
        }
        shared.get().first.store(received, Ordering::Relaxed);
        shared.get().second.store(sum, Ordering::Relaxed);
        shared.get().finished.count_one();
    });
    outcome.finished.wait();
    let elapsed = clock.elapsed();
    expect_equal(
        "messages received",
        channel_throughput::MESSAGE_COUNT as u64,
        outcome.first.load(Ordering::Relaxed),
    )?;
    expect_equal(
        "sum of the messages",
        channel_throughput::EXPECTED_SUM,
        outcome.second.load(Ordering::Relaxed),
    )?;
    Ok(RepetitionResult::value(nanoseconds_per(
        elapsed,
        channel_throughput::MESSAGE_COUNT,
    )))
}

/// Lives on the measuring thread's stack for one repetition.
struct ContentionRun {
    counter: Mutex<u64>,
    finished: CompletionCounter,
}

fn run_mutex_contention(runtime: &Runtime, _: usize) -> Repetition {
    let run = ContentionRun {
        counter: Mutex::new(0),
        finished: CompletionCounter::new(mutex_contention::TASK_COUNT),
    };
    // SAFETY: run lives until wait() returned.
    let shared = unsafe { Borrowed::new(&run) };
    let clock = Instant::now();
    for _ in 0..mutex_contention::TASK_COUNT {
        runtime.spawn(async move {
            for _ in 0..mutex_contention::LOCKS_PER_TASK {
                *shared.get().counter.lock().await += 1;
            }
            shared.get().finished.count_one();
        });
    }
    run.finished.wait();
    let elapsed = clock.elapsed();
    let acquired = *run
        .counter
        .try_lock()
        .expect("every task has finished with the mutex");
    expect_equal(
        "acquisitions",
        mutex_contention::ACQUISITIONS as u64,
        acquired,
    )?;
    Ok(RepetitionResult::value(nanoseconds_per(
        elapsed,
        mutex_contention::ACQUISITIONS,
    )))
}
