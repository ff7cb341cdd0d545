//! rayon 1.6 as a peer: one `rayon::ThreadPool` with `--threads` workers
//! (ThreadPoolBuilder::num_threads), made once per process.
//!
//! - Submit from outside: `ThreadPool::spawn`, onto the pool's shared
//!   injector queue.
//! - Spawn from inside a worker: `rayon::spawn`, onto that worker's own deque
//!   (taken back LIFO by its owner, stolen FIFO by the others).
//! - Fork-join: `rayon::join(a, b)` runs `a` inline and offers `b` to thieves
//!   on the worker's deque; if nobody stole `b`, the worker pops and runs it
//!   itself, otherwise it runs other work until `b` is done. The measuring
//!   thread enters with `ThreadPool::install`, which injects the closure and
//!   blocks until it has returned on a worker.
//! - Many children at once (fan_out): `rayon::scope`, one `Scope::spawn`
//!   per child, each writing its own slot; the scope returns when all ran.
//! - No yield: rayon 1.6 has no `yield_now` (rayon-core 1.11 added one), so
//!   yield_many is not implemented for rayon.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use rayon::{ThreadPool, ThreadPoolBuilder};

use crate::harness::borrowed::Borrowed;
use crate::harness::completion::{Completion, CompletionCounter};
use crate::harness::workload::{
    expect_equal, milliseconds, nanoseconds_per, Instance, Repetition, RepetitionResult,
    WorkloadInstance,
};
use crate::parameters::irregular_tree::{child_count, child_seed, node_work, Subtree};
use crate::parameters::nqueens::{safe_children, Board};
use crate::parameters::{
    chained_spawn, fan_out, fib, fib_join, irregular_tree, nqueens, skynet, spawn_local,
    spawn_remote,
};
use crate::probes::burst_memory::measure_burst_memory;
use crate::probes::idle_cpu::measure_idle_cpu;
use crate::probes::wake_latency::sample_wake_latency;
use crate::probes::Submit;

impl Submit for ThreadPool {
    fn submit<F: FnOnce() + Send + 'static>(&self, task: F) {
        self.spawn(task);
    }
}

/// The rayon implementation of `workload`, with its pool made, or None if
/// there is none.
pub fn make_instance(workload: &str, worker_count: usize) -> Option<Box<dyn WorkloadInstance>> {
    let repetition: fn(&ThreadPool, usize) -> Repetition = match workload {
        "spawn_remote" => run_spawn_remote,
        "spawn_local" => run_spawn_local,
        "chained_spawn" => run_chained_spawn,
        // rayon has no fibers: fib_fiber runs its fib, as the C++ peers do.
        "fib" | "fib_fiber" => run_fib,
        "fib_join" => run_fib_join,
        "fan_out" => run_fan_out,
        "irregular_tree" => run_irregular_tree,
        "skynet" => run_skynet,
        "nqueens" => run_nqueens,
        "wake_latency" => |pool, _| Ok(sample_wake_latency(pool)),
        "idle_cpu" => |pool, _| Ok(measure_idle_cpu(pool)),
        "spawn_burst_memory" => measure_burst_memory,
        _ => return None,
    };
    let executor = ThreadPoolBuilder::new()
        .num_threads(worker_count)
        .build()
        .expect("cannot start the rayon thread pool");
    Some(Box::new(Instance {
        executor,
        worker_count,
        repetition,
    }))
}

fn run_spawn_remote(pool: &ThreadPool, _: usize) -> Repetition {
    let finished = CompletionCounter::new(spawn_remote::TASK_COUNT);
    // SAFETY: finished lives until wait() returned.
    let counter = unsafe { Borrowed::new(&finished) };
    let clock = Instant::now();
    for _ in 0..spawn_remote::TASK_COUNT {
        pool.spawn(move || counter.get().count_one());
    }
    finished.wait();
    let elapsed = clock.elapsed();
    expect_equal("tasks run", spawn_remote::TASK_COUNT, finished.count())?;
    Ok(RepetitionResult::value(nanoseconds_per(
        elapsed,
        spawn_remote::TASK_COUNT,
    )))
}

fn run_spawn_local(pool: &ThreadPool, _: usize) -> Repetition {
    let finished = CompletionCounter::new(spawn_local::TASK_COUNT);
    // SAFETY: finished lives until wait() returned.
    let counter = unsafe { Borrowed::new(&finished) };
    let clock = Instant::now();
    pool.spawn(move || {
        for _ in 0..spawn_local::TASK_COUNT {
            rayon::spawn(move || counter.get().count_one());
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
    rayon::spawn(move || run_link(progress, position + 1));
}

fn run_chained_spawn(pool: &ThreadPool, _: usize) -> Repetition {
    let clock = Instant::now();
    for _ in 0..chained_spawn::CHAIN_COUNT {
        let progress = ChainProgress {
            tasks_run: AtomicUsize::new(0),
            last_task_ran: Completion::new(),
        };
        // SAFETY: progress lives until the last link's notify was received.
        let shared = unsafe { Borrowed::new(&progress) };
        pool.spawn(move || run_link(shared, 1));
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

/// fib(n - 1) is offered to thieves and fib(n - 2) computed inline, as every
/// C++ peer forks: join's second closure is the one other workers may take.
fn join_fib(n: u32) -> u64 {
    if n < 2 {
        return u64::from(n);
    }
    let (second, first) = rayon::join(|| join_fib(n - 2), || join_fib(n - 1));
    first + second
}

fn run_fib(pool: &ThreadPool, _: usize) -> Repetition {
    let clock = Instant::now();
    let value = pool.install(|| join_fib(fib::ARGUMENT));
    let elapsed = clock.elapsed();
    expect_equal("fib value", fib::EXPECTED_VALUE, value)?;
    Ok(RepetitionResult::value(milliseconds(elapsed)))
}

/// fib_join's shape (fib_join/parameters.hpp): join's first closure,
/// fib(n - 1), runs on this thread, the second is offered to thieves. This
/// is fib as rayon's documentation writes it.
fn join_fib_first_inline(n: u32) -> u64 {
    if n < 2 {
        return u64::from(n);
    }
    let (first, second) = rayon::join(
        || join_fib_first_inline(n - 1),
        || join_fib_first_inline(n - 2),
    );
    first + second
}

fn run_fib_join(pool: &ThreadPool, _: usize) -> Repetition {
    let clock = Instant::now();
    let value = pool.install(|| join_fib_first_inline(fib_join::ARGUMENT));
    let elapsed = clock.elapsed();
    expect_equal("fib value", fib_join::EXPECTED_VALUE, value)?;
    Ok(RepetitionResult::value(milliseconds(elapsed)))
}

/// The root task: each round forks one child per slot and waits for the
/// whole scope, then adds the round's values.
fn fan_out_rounds() -> u64 {
    let mut values = vec![0_u64; fan_out::CHILDREN_PER_ROUND];
    let mut sum = 0_u64;
    for round in 0..fan_out::ROUNDS {
        let first_index = round * fan_out::CHILDREN_PER_ROUND;
        rayon::scope(|scope| {
            for (offset, slot) in values.iter_mut().enumerate() {
                scope.spawn(move |_| *slot = fan_out::child_value((first_index + offset) as u64));
            }
        });
        sum = values
            .iter()
            .fold(sum, |sum, value| sum.wrapping_add(*value));
    }
    sum
}

fn run_fan_out(pool: &ThreadPool, _: usize) -> Repetition {
    let clock = Instant::now();
    let sum = pool.install(fan_out_rounds);
    let elapsed = clock.elapsed();
    expect_equal("sum of the children's values", fan_out::EXPECTED_SUM, sum)?;
    Ok(RepetitionResult::value(nanoseconds_per(
        elapsed,
        fan_out::CHILD_COUNT,
    )))
}

/// A node offers children 1..c-1 to thieves, then does its own busy loop
/// and child 0 on this thread, and joins (as the oneTBB peer does).
fn visit_node(seed: u64, depth: u32) -> Subtree {
    let children = child_count(seed, depth);
    if children == 0 {
        return Subtree::EMPTY.under_node(node_work(seed));
    }
    let ((value, first_child), others) = rayon::join(
        || (node_work(seed), visit_node(child_seed(seed, 0), depth + 1)),
        || visit_children(seed, depth, 1, children - 1),
    );
    first_child.with(others).under_node(value)
}

/// Children first..first + count of the node (seed, depth), in parallel:
/// halves joined recursively, so count - 1 of them are offered to thieves
/// and one runs on this thread (what a parallel iterator over the children
/// does, without its splitting heuristics).
fn visit_children(seed: u64, depth: u32, first: usize, count: usize) -> Subtree {
    match count {
        0 => Subtree::EMPTY,
        1 => visit_node(child_seed(seed, first), depth + 1),
        _ => {
            let half = count / 2;
            let (left, right) = rayon::join(
                || visit_children(seed, depth, first, half),
                || visit_children(seed, depth, first + half, count - half),
            );
            left.with(right)
        }
    }
}

fn run_irregular_tree(pool: &ThreadPool, _: usize) -> Repetition {
    let clock = Instant::now();
    let tree = pool.install(|| visit_node(irregular_tree::ROOT_SEED, 0));
    let elapsed = clock.elapsed();
    expect_equal("tree total", irregular_tree::EXPECTED_TOTAL, tree.total)?;
    expect_equal("tree nodes", irregular_tree::EXPECTED_NODES, tree.nodes)?;
    Ok(RepetitionResult::value(milliseconds(elapsed)))
}

/// The children numbered first .. last - 1 of a skynet node, halved by
/// nested `rayon::join`s (the first half inline, the second offered to
/// thieves): fan_out - 1 forks per node, as the suite's libfork program has.
fn skynet_children(number: u64, stride: u64, level: u32, first: u64, last: u64) -> u64 {
    if last - first == 1 {
        return skynet_node(number + stride * first, level + 1);
    }
    let middle = first + (last - first) / 2;
    let (low, high) = rayon::join(
        || skynet_children(number, stride, level, first, middle),
        || skynet_children(number, stride, level, middle, last),
    );
    low + high
}

fn skynet_node(number: u64, level: u32) -> u64 {
    if level == skynet::DEPTH {
        return number;
    }
    skynet_children(
        number,
        skynet::child_stride(level),
        level,
        0,
        skynet::FAN_OUT,
    )
}

fn run_skynet(pool: &ThreadPool, _: usize) -> Repetition {
    let clock = Instant::now();
    let sum = pool.install(|| skynet_node(0, 0));
    let elapsed = clock.elapsed();
    expect_equal("skynet sum", skynet::EXPECTED_SUM, sum)?;
    Ok(RepetitionResult::value(milliseconds(elapsed)))
}

/// The safe children of one nqueens node, halved by nested `rayon::join`s:
/// one fork per child beyond the first, as in skynet.
fn nqueens_children(children: &[Board], row: usize) -> u64 {
    if children.len() == 1 {
        return count_solutions(&children[0], row);
    }
    let (low, high) = children.split_at(children.len() / 2);
    let (first, second) = rayon::join(
        || nqueens_children(low, row),
        || nqueens_children(high, row),
    );
    first + second
}

fn count_solutions(placed: &Board, row: usize) -> u64 {
    if row == nqueens::SIZE {
        return 1;
    }
    let (children, count) = safe_children(placed, row);
    if count == 0 {
        return 0;
    }
    nqueens_children(&children[..count], row + 1)
}

fn run_nqueens(pool: &ThreadPool, _: usize) -> Repetition {
    let clock = Instant::now();
    let solutions = pool.install(|| count_solutions(&[0; nqueens::SIZE], 0));
    let elapsed = clock.elapsed();
    expect_equal("nqueens solutions", nqueens::EXPECTED_SOLUTIONS, solutions)?;
    Ok(RepetitionResult::value(milliseconds(elapsed)))
}
