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
// What is here: canopy::task<T>; spawning one (pool.spawn(task) from any
// thread, canopy::spawn / try_spawn / spawn_detached inside a task);
// co_await on a task (inline) or on a join handle (waits without holding a
// worker); when_all (spawn several, await all) and await_all (await many
// handles in one suspension); yield_now; current_waker() and canopy::waker;
// wait_on(source) for your own waits (the wait-source contract is in
// detail/wait/wait_source.hpp); async_event; block_on; resume_on_host.
// Canopy's awaitables are for canopy::task only; another library's standard
// awaitable may be co_awaited too (its resumption becomes a wake). A user
// awaiter that wraps one of Canopy's declares `using canopy_awaiter = void;`
// (docs/coroutines.md, "Composing awaitables").
// Errors: spawn and try_spawn as on the executor; outside a task the free
// canopy::spawn throws std::logic_error; block_on on a worker thread throws
// errc::worker_thread. cancel() on a handle destroys a suspended task at
// once, releasing what its wait held (docs/coroutines.md, "Cancellation").
#pragma once

#include "detail/coroutine/coroutine.hpp"
#include "detail/coroutine/await_all.hpp"
#include "executor.hpp"
