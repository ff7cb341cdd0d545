// <canopy/task.hpp> — C++20 coroutines as tasks.
//
//   canopy::task<long> fib(int n) {
//     if (n < 2) co_return n;
//     auto left = canopy::spawn(fib(n - 1));   // a child task (inside a task)
//     auto right = canopy::spawn(fib(n - 2));
//     co_return co_await left + co_await right;
//   }
//   long value = canopy::block_on(pool, fib(30));   // from a thread outside the pool
//
// Canopy's awaitables are for canopy::task only; another library's standard
// awaitable may be co_awaited too (its resumption becomes a wake). A user
// awaiter that wraps one of Canopy's declares `using canopy_awaiter = void;`
// (docs/coroutines.md, "Composing awaitables").
//
// Reference (namespace canopy):
//   task<T>: a lazy coroutine, move-only; creating one runs nothing. co_await
//     runs it inline in the awaiting task (no spawn) and consumes it; an
//     exception leaving its body is rethrown at that co_await (or by the
//     joiner when spawned). Spawning an empty task: std::invalid_argument.
//   pool.spawn(task) -> join_handle<T> (any thread; the executor's rules,
//     <canopy/executor.hpp>); try_spawn, spawn_detached likewise.
//   spawn(task) -> join_handle<T>, try_spawn(task) -> spawn_attempt,
//     spawn_detached(task): only inside a running task (a coroutine, fiber
//     or callable of an executor), on the same executor; outside one
//     std::logic_error ("... outside a running task: use executor::spawn
//     from other threads"). At capacity spawn throws
//     spawn_error(errc::at_capacity) (it never blocks a worker); after
//     shutdown began, errc::shut_down.
//   join_handle<T> (<canopy/executor.hpp>: get, wait_for, ready, cancel,
//     detach, id, core; task_handle<T> is another name for it).
//     co_await handle (inside a task): waits without holding a worker,
//     once per handle; returns the value,
//     rethrows the exception, task_cancelled if the child was destroyed
//     without completing. A child not started yet runs inside the awaiter.
//   when_all(t1, t2, ...) -> task<std::tuple<...>>, when_all(vector of
//     task<T>) -> task<std::vector<T>> (std::monostate for void): spawns
//     each, awaits all, even after a failure; rethrows a spawn error, else
//     the first exception in argument order, once all ended. Cancelling the
//     awaiting task cancels the ones not joined. Inside a task only.
//   await_all(handles) / await_all(handles, out): one suspension for a
//     range of valid handles (an invalid one: std::logic_error), which must
//     stay alive until it returns. The first form never throws a child's
//     exception and leaves the handles to read; the second writes the
//     values to *out++ and rethrows the first failure, consuming the handles.
//   yield_now(): let other ready tasks of this worker run first.
//   wait_for_wake(): suspend until any wake of this task (wakes may be
//     spurious or stale: re-check your condition in a loop).
//   current_waker() -> waker: the running task's (coroutine, fiber or
//     callable); outside a task std::logic_error. waker::wake() from any
//     thread, a no-op after the task ended; a waker must not outlive its
//     executor.
//   wait_on(source) -> the source's result(): a wait of your own. A wait
//     source has bool ready() noexcept, bool arm(const waker&) (false: it
//     was already ready), void disarm() noexcept (once per arm that
//     returned true, also on cancel and shutdown), R result(); the full
//     rules are in docs/coroutines.md.
//   async_event: manual reset; co_await event (inside a task) waits for
//     set(); set() and reset() from any thread. It must outlive its waiters.
//   block_on(pool, task) -> T: spawn and wait, from a thread that is not a
//     worker of any executor; on a worker std::system_error
//     (errc::worker_thread, "would block it; co_await the task instead").
//   resume_on_host(): continue on the executor's host thread (the one
//     calling run_*; docs/embedding.md); inside a task only. With no host
//     the task runs at shutdown (drain) or is dropped there. A cancel of a
//     task queued for the host takes effect when a host next runs: it is
//     destroyed there, on the loop thread, and only then does its handle
//     report task_cancelled (with owned workers, get() waits for that run).
// Errors: spawn and try_spawn as on the executor. cancel() on a handle
// destroys a suspended task at once, releasing what its wait held
// (docs/coroutines.md, "Cancellation").
#pragma once

#include "detail/coroutine/coroutine.hpp"
#include "detail/coroutine/await_all.hpp"
#include "executor.hpp"
