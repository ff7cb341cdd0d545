//! tokio 1.24 as a peer: one multi-thread `Runtime` with `--threads` workers,
//! built as `#[tokio::main]` builds it (Builder::new_multi_thread with
//! worker_threads, enable_all), once per process.
//!
//! - Submit from outside: `Runtime::spawn`, onto the runtime's shared inject
//!   queue. Tasks are async blocks; their JoinHandle is dropped (detached)
//!   unless the workload joins them.
//! - Spawn from inside a task: `tokio::spawn`, into the worker's LIFO slot
//!   and local run queue (stolen by the others).
//! - Fork-join (fib): the child is a `tokio::spawn`ed task, the other half is
//!   awaited inline, then the child's JoinHandle is awaited: while the parent
//!   is suspended its worker runs other tasks. A recursive async fn needs a
//!   boxed future in Rust; that allocation is part of writing fib this way.
//!   Many children (fan_out, irregular_tree): one `tokio::spawn` each, their
//!   JoinHandles awaited one after another.
//! - Yield: `tokio::task::yield_now().await`.
//! - No join of two closures (`tokio::join!` polls both futures on one
//!   task, it does not fork): fib_join runs the spawn-and-await fib.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use tokio::runtime::{Builder, Runtime};
use tokio::task::JoinHandle;

use crate::harness::borrowed::Borrowed;
use crate::harness::completion::{Completion, CompletionCounter};
use crate::harness::workload::{
    expect_equal, milliseconds, nanoseconds_per, Instance, Repetition, RepetitionResult,
    WorkloadInstance,
};
use crate::parameters::irregular_tree::{
    child_count, child_seed, node_work, Subtree, MAX_CHILDREN,
};
use crate::parameters::nqueens::{safe_children, Board};
use crate::parameters::{
    chained_spawn, fan_out, fib, irregular_tree, nqueens, skynet, spawn_local, spawn_remote,
    yield_many,
};
use crate::probes::burst_memory::measure_burst_memory;
use crate::probes::idle_cpu::measure_idle_cpu;
use crate::probes::wake_latency::sample_wake_latency;
use crate::probes::Submit;

impl Submit for Runtime {
    fn submit<F: FnOnce() + Send + 'static>(&self, task: F) {
        self.spawn(async move { task() });
    }
}

/// The tokio implementation of `workload`, with its runtime built, or None
/// if there is none.
pub fn make_instance(workload: &str, worker_count: usize) -> Option<Box<dyn WorkloadInstance>> {
    let repetition: fn(&Runtime, usize) -> Repetition = match workload {
        "spawn_remote" => run_spawn_remote,
        "spawn_local" => run_spawn_local,
        "yield_many" => run_yield_many,
        "chained_spawn" => run_chained_spawn,
        // tokio has no fibers and no join of two closures: fib_fiber and
        // fib_join run its fib, as the C++ peers without them do.
        "fib" | "fib_fiber" | "fib_join" => run_fib,
        "fan_out" => run_fan_out,
        "irregular_tree" => run_irregular_tree,
        "skynet" => run_skynet,
        "nqueens" => run_nqueens,
        "wake_latency" => |runtime, _| Ok(sample_wake_latency(runtime)),
        "idle_cpu" => |runtime, _| Ok(measure_idle_cpu(runtime)),
        "spawn_burst_memory" => measure_burst_memory,
        // Channels and the async mutex (tokio::sync): tokio_toolkit.rs.
        other => crate::tokio_toolkit::repetition(other)?,
    };
    let executor = Builder::new_multi_thread()
        .worker_threads(worker_count)
        .enable_all()
        .build()
        .expect("cannot start the tokio runtime");
    Some(Box::new(Instance {
        executor,
        worker_count,
        repetition,
    }))
}

fn run_spawn_remote(runtime: &Runtime, _: usize) -> Repetition {
    let finished = CompletionCounter::new(spawn_remote::TASK_COUNT);
    // SAFETY: finished lives until wait() returned.
    let counter = unsafe { Borrowed::new(&finished) };
    let clock = Instant::now();
    for _ in 0..spawn_remote::TASK_COUNT {
        runtime.spawn(async move { counter.get().count_one() });
    }
    finished.wait();
    let elapsed = clock.elapsed();
    expect_equal("tasks run", spawn_remote::TASK_COUNT, finished.count())?;
    Ok(RepetitionResult::value(nanoseconds_per(
        elapsed,
        spawn_remote::TASK_COUNT,
    )))
}

fn run_spawn_local(runtime: &Runtime, _: usize) -> Repetition {
    let finished = CompletionCounter::new(spawn_local::TASK_COUNT);
    // SAFETY: finished lives until wait() returned.
    let counter = unsafe { Borrowed::new(&finished) };
    let clock = Instant::now();
    runtime.spawn(async move {
        for _ in 0..spawn_local::TASK_COUNT {
            tokio::spawn(async move { counter.get().count_one() });
        }
    });
    finished.wait();
    let elapsed = clock.elapsed();
    expect_equal("tasks run", spawn_local::TASK_COUNT, finished.count())?;
    Ok(RepetitionResult::value(nanoseconds_per(
        elapsed,
        spawn_local::TASK_COUNT,
    )))
}

fn run_yield_many(runtime: &Runtime, _: usize) -> Repetition {
    let finished = CompletionCounter::new(yield_many::TASK_COUNT);
    // SAFETY: finished lives until wait() returned.
    let counter = unsafe { Borrowed::new(&finished) };
    let clock = Instant::now();
    for _ in 0..yield_many::TASK_COUNT {
        runtime.spawn(async move {
            for _ in 0..yield_many::YIELDS_PER_TASK {
                tokio::task::yield_now().await;
            }
            counter.get().count_one();
        });
    }
    finished.wait();
    let elapsed = clock.elapsed();
    expect_equal("tasks finished", yield_many::TASK_COUNT, finished.count())?;
    Ok(RepetitionResult::value(nanoseconds_per(
        elapsed,
        yield_many::TOTAL_YIELDS,
    )))
}

/// Lives on the measuring thread's stack for one chain.
struct ChainProgress {
    tasks_run: AtomicUsize,
    last_task_ran: Completion<()>,
}

/// Link number `position` (1-based) of a chain: spawns the next one, or
/// wakes the measuring thread if it is the last.
fn run_link(progress: Borrowed<ChainProgress>, position: usize) {
    // Relaxed: the measuring thread reads the count only after the last
    // link's notify, which every increment happens before.
    progress.get().tasks_run.fetch_add(1, Ordering::Relaxed);
    if position == chained_spawn::CHAIN_LENGTH {
        progress.get().last_task_ran.notify(());
        return;
    }
    tokio::spawn(async move { run_link(progress, position + 1) });
}

fn run_chained_spawn(runtime: &Runtime, _: usize) -> Repetition {
    let clock = Instant::now();
    for _ in 0..chained_spawn::CHAIN_COUNT {
        let progress = ChainProgress {
            tasks_run: AtomicUsize::new(0),
            last_task_ran: Completion::new(),
        };
        // SAFETY: progress lives until the last link's notify was received.
        let shared = unsafe { Borrowed::new(&progress) };
        runtime.spawn(async move { run_link(shared, 1) });
        progress.last_task_ran.wait();
        expect_equal(
            "tasks in chain",
            chained_spawn::CHAIN_LENGTH,
            progress.tasks_run.load(Ordering::Relaxed),
        )?;
    }
    Ok(RepetitionResult::value(nanoseconds_per(
        clock.elapsed(),
        chained_spawn::TOTAL_SPAWNS,
    )))
}

type BoxedFib = Pin<Box<dyn Future<Output = u64> + Send>>;

/// fib(n - 1) is spawned as a task, fib(n - 2) awaited inline, then the
/// child is joined, as every C++ peer forks.
fn spawn_fib(n: u32) -> BoxedFib {
    Box::pin(async move {
        if n < 2 {
            return u64::from(n);
        }
        let child = tokio::spawn(spawn_fib(n - 1));
        let second = spawn_fib(n - 2).await;
        child.await.expect("a fib task panicked") + second
    })
}

fn run_fib(runtime: &Runtime, _: usize) -> Repetition {
    let computed = Completion::<u64>::new();
    // SAFETY: computed lives until wait() returned the value.
    let result = unsafe { Borrowed::new(&computed) };
    let clock = Instant::now();
    runtime.spawn(async move { result.get().notify(spawn_fib(fib::ARGUMENT).await) });
    let value = computed.wait();
    let elapsed = clock.elapsed();
    expect_equal("fib value", fib::EXPECTED_VALUE, value)?;
    Ok(RepetitionResult::value(milliseconds(elapsed)))
}

/// The root task: each round spawns one task per child, then awaits their
/// handles in turn and adds their values.
async fn fan_out_rounds() -> u64 {
    let mut children: Vec<JoinHandle<u64>> = Vec::with_capacity(fan_out::CHILDREN_PER_ROUND);
    let mut sum = 0_u64;
    for round in 0..fan_out::ROUNDS {
        let first_index = round * fan_out::CHILDREN_PER_ROUND;
        for offset in 0..fan_out::CHILDREN_PER_ROUND {
            children.push(tokio::spawn(async move {
                fan_out::child_value((first_index + offset) as u64)
            }));
        }
        for child in children.drain(..) {
            sum = sum.wrapping_add(child.await.expect("a fan_out child panicked"));
        }
    }
    sum
}

fn run_fan_out(runtime: &Runtime, _: usize) -> Repetition {
    let computed = Completion::<u64>::new();
    // SAFETY: computed lives until wait() returned the value.
    let result = unsafe { Borrowed::new(&computed) };
    let clock = Instant::now();
    runtime.spawn(async move { result.get().notify(fan_out_rounds().await) });
    let sum = computed.wait();
    let elapsed = clock.elapsed();
    expect_equal("sum of the children's values", fan_out::EXPECTED_SUM, sum)?;
    Ok(RepetitionResult::value(nanoseconds_per(
        elapsed,
        fan_out::CHILD_COUNT,
    )))
}

type BoxedSubtree = Pin<Box<dyn Future<Output = Subtree> + Send>>;

/// A node spawns children 1..c-1 as tasks, does its own busy loop, awaits
/// child 0 inline, then the others' handles in turn (the oneTBB peer's
/// order).
fn visit_node(seed: u64, depth: u32) -> BoxedSubtree {
    Box::pin(async move {
        let children = child_count(seed, depth);
        if children == 0 {
            return Subtree::EMPTY.under_node(node_work(seed));
        }
        let mut forked: [Option<JoinHandle<Subtree>>; MAX_CHILDREN] = Default::default();
        for (index, handle) in forked.iter_mut().enumerate().take(children).skip(1) {
            *handle = Some(tokio::spawn(visit_node(child_seed(seed, index), depth + 1)));
        }
        let value = node_work(seed);
        let mut below = visit_node(child_seed(seed, 0), depth + 1).await;
        for handle in forked.into_iter().flatten() {
            below = below.with(handle.await.expect("a tree task panicked"));
        }
        below.under_node(value)
    })
}

fn run_irregular_tree(runtime: &Runtime, _: usize) -> Repetition {
    let computed = Completion::<Subtree>::new();
    // SAFETY: computed lives until wait() returned the value.
    let result = unsafe { Borrowed::new(&computed) };
    let clock = Instant::now();
    runtime.spawn(async move {
        result
            .get()
            .notify(visit_node(irregular_tree::ROOT_SEED, 0).await)
    });
    let tree = computed.wait();
    let elapsed = clock.elapsed();
    expect_equal("tree total", irregular_tree::EXPECTED_TOTAL, tree.total)?;
    expect_equal("tree nodes", irregular_tree::EXPECTED_NODES, tree.nodes)?;
    Ok(RepetitionResult::value(milliseconds(elapsed)))
}

type BoxedCount = Pin<Box<dyn Future<Output = u64> + Send>>;

/// Children 0 .. FAN_OUT - 2 `tokio::spawn`ed, the last awaited inline,
/// then the handles awaited in turn, as the suite's libfork program forks.
fn skynet_node(number: u64, level: u32) -> BoxedCount {
    Box::pin(async move {
        if level == skynet::DEPTH {
            return number;
        }
        let stride = skynet::child_stride(level);
        let spawned: Vec<JoinHandle<u64>> = (0..skynet::FAN_OUT - 1)
            .map(|index| tokio::spawn(skynet_node(number + stride * index, level + 1)))
            .collect();
        let mut sum = skynet_node(number + stride * (skynet::FAN_OUT - 1), level + 1).await;
        for handle in spawned {
            sum += handle.await.expect("a skynet task panicked");
        }
        sum
    })
}

fn run_skynet(runtime: &Runtime, _: usize) -> Repetition {
    let computed = Completion::<u64>::new();
    // SAFETY: computed lives until wait() returned the value.
    let result = unsafe { Borrowed::new(&computed) };
    let clock = Instant::now();
    runtime.spawn(async move { result.get().notify(skynet_node(0, 0).await) });
    let sum = computed.wait();
    let elapsed = clock.elapsed();
    expect_equal("skynet sum", skynet::EXPECTED_SUM, sum)?;
    Ok(RepetitionResult::value(milliseconds(elapsed)))
}

/// One `tokio::spawn` per safe column of the next row, then the handles
/// awaited in turn, as the suite's libfork program forks.
fn count_solutions(placed: Board, row: usize) -> BoxedCount {
    Box::pin(async move {
        if row == nqueens::SIZE {
            return 1;
        }
        let (children, count) = safe_children(&placed, row);
        let spawned: Vec<JoinHandle<u64>> = children[..count]
            .iter()
            .map(|child| tokio::spawn(count_solutions(*child, row + 1)))
            .collect();
        let mut solutions = 0;
        for handle in spawned {
            solutions += handle.await.expect("an nqueens task panicked");
        }
        solutions
    })
}

fn run_nqueens(runtime: &Runtime, _: usize) -> Repetition {
    let computed = Completion::<u64>::new();
    // SAFETY: computed lives until wait() returned the value.
    let result = unsafe { Borrowed::new(&computed) };
    let clock = Instant::now();
    runtime.spawn(async move {
        result
            .get()
            .notify(count_solutions([0; nqueens::SIZE], 0).await)
    });
    let solutions = computed.wait();
    let elapsed = clock.elapsed();
    expect_equal("nqueens solutions", nqueens::EXPECTED_SOLUTIONS, solutions)?;
    Ok(RepetitionResult::value(milliseconds(elapsed)))
}
