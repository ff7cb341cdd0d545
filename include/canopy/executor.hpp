// <canopy/executor.hpp> — the executor: a pool of worker threads that runs
// tasks, and the calls that start and wait for them.
//
//   canopy::executor pool;                           // one worker per hardware thread
//   canopy::join_handle<int> answer = pool.spawn([] { return 42; });
//   int value = answer.get();                       // 42, or rethrows
//   pool.shutdown();                                 // drain, join the workers
//
// Who may call: every member of canopy::executor from any thread, tasks
// included, except shutdown() and the destructor (not on one of its own
// workers) and the host's run functions (not inside one of its tasks).
// get(), wait_for() and wait_until() on a handle block the calling thread:
// on a worker thread they throw std::system_error(errc::worker_thread)
// instead (co_await the handle inside a task).
// Errors: spawn after shutdown() throws canopy::spawn_error(errc::shut_down);
// at capacity spawn blocks (outside a worker) or throws errc::at_capacity (on
// a worker), try_spawn returns the error instead; an invalid
// executor_config throws std::invalid_argument naming the field, and so does
// a null function pointer or empty std::function given to a spawn verb or
// post() (naming the verb); a task's
// exception is rethrown by get(), or goes to
// executor_config::on_detached_exception when nobody joins it (not after a
// cancel). Every spawned task runs or is destroyed at shutdown; either way
// its destructor runs and its handle reports the outcome (task_cancelled).
//
// Reference (namespace canopy):
//   executor(), executor(executor_config): starts config.worker_count
//     workers (default: one per hardware thread; 0: a host-driven executor,
//     docs/embedding.md). Not copyable.
//   spawn(fn or task) -> join_handle<R>: fn a callable, a canopy::task<T>
//     or canopy::fiber(fn). Blocks at capacity (off a worker; with
//     worker_count = 0 it runs the executor's tasks meanwhile, as get()
//     does, unless a host is running it), throws
//     spawn_error(errc::at_capacity) on a worker, errc::shut_down after
//     shutdown() began.
//   try_spawn(fn or task) -> spawn_attempt<handle>: never blocks nor throws
//     for capacity or shutdown; `if (attempt)` then attempt.handle, else
//     attempt.error (errc::at_capacity, errc::shut_down).
//   spawn_detached(fn or task): no handle; errors as spawn; the task's
//     exception goes to executor_config::on_detached_exception.
//   post(fn): fn runs as a task on the host thread (the next run_* call
//     there); errors as spawn_detached. A posted task no host ran is run by
//     shutdown() (drain) or dropped (cancel_pending).
//   run_once(), run_until_idle(), run_for(d), run_until(t), run() -> how
//     many task runs the calling thread made (the host role; 0 once
//     shutdown() began). Not inside one of its tasks
//     (errc::worker_thread); one host thread at a time (errc::host_busy).
//   notify_fd() -> int: readable while the host has work (poll it).
//   shutdown(): stops spawns, then per executor_config::on_shutdown (drain:
//     runs every runnable task, destroys the suspended ones; cancel_pending:
//     destroys every task not running), joins the workers. Once only (a
//     second call returns); the destructor calls it. On one of its own
//     workers: std::system_error(errc::worker_thread).
//   stats() -> executor_stats (per worker counters, live_tasks, capacity,
//     dropped_tasks, sleeping_workers); worker_count(); capacity().
//   executor_config: worker_count (0..1024), signals_per_leaf, max_leaves
//     (capacity: max_leaves * signals_per_leaf * 64 tasks), initial_leaves,
//     idle_yield_rounds, pin_workers / worker_cpus, on_shutdown
//     (shutdown_policy::drain or cancel_pending), on_detached_exception
//     (default: print to stderr; called on a worker), driver (a reactor:
//     io::with_reactor), driver_poll_interval, trace_path,
//     trace_events_per_worker (docs/tracing.md). Checked once, at the
//     executor's construction: std::invalid_argument naming the field.
//   join_handle<T> (move-only, one thread at a time; may outlive the
//     executor):
//     get() -> T: blocks until the task ends; rethrows its exception;
//       task_cancelled if it was destroyed without completing (cancelled,
//       or dropped at shutdown). On a worker: errc::worker_thread (co_await
//       the handle in a task instead).
//     wait_for(d), wait_until(t) -> bool (ended): same thread rule; zero or
//       past only polls. ready() never blocks; valid().
//     cancel() -> bool (the request came before the task completed): a
//       task not yet started never runs; a suspended one is destroyed at
//       once (its destructors run; a fiber's stack unwinds); a running one
//       at its next suspension (a plain callable that started runs to its
//       end), as is one whose channel send a receiver took before the
//       cancel landed, or whose race a contender won with a value (it
//       resumes with that); one queued for the host
//       (resume_on_host) when a host next runs, on the host thread
//       (include/canopy/task.hpp). get() then throws task_cancelled.
//     detach(), or dropping the handle: the task runs on, its result is
//       discarded, its exception goes to on_detached_exception (unless it
//       was cancelled).
//     With worker_count = 0, get() and wait_*() from another thread run
//     the executor's tasks while they wait, unless a host is running it.
//   errc (shut_down, at_capacity, cancelled, worker_thread, host_busy),
//   std::error_code-compatible; spawn_error and task_cancelled derive from
//   std::system_error.
// The host role (docs/embedding.md): with worker_count = 0 the host thread
// runs every task; with owned workers it runs only what is pinned to it
// (post, resume_on_host), except in run(), where it is one more worker.
// While a joiner (get(), wait_*(), canopy::join) borrows the host role,
// run_once and run_until_idle return 0 and run_for, run_until and run wait,
// within their time, for it to be handed back.
// Scheduling: a task spawned or woken on a worker runs on that worker next
// (its LIFO slot), after at most the rest of the task that made it
// runnable (and one more task when the worker took 16 such tasks in a
// row), unless an idle awake worker steals it first; no sleeping worker is
// woken for it. A task that yields waits for at most one other task of its
// worker before any worker may take it.
#pragma once

#include "detail/executor/config.hpp"
#include "detail/executor/errors.hpp"
#include "detail/executor/executor.hpp"
#include "detail/executor/join_handle.hpp"
#include "detail/executor/stats.hpp"
