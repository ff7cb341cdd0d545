// <canopy/fork_join.hpp> — fork-join for plain callables, as rayon's join
// and oneTBB's parallel_invoke.
//
//   auto [left, right] = canopy::join([&] { return sum(lo, mid); },
//                                     [&] { return sum(mid, hi); });
//   auto [a, b, c] = canopy::parallel_invoke(f, g, h);
//   auto [x, y] = canopy::join(pool, f, g);   // from a thread outside `pool`
//
// Reference (namespace canopy):
//   join(f, g) -> std::pair<R1, R2>; parallel_invoke(f1, ..., fn) ->
//     std::tuple<R1, ..., Rn>: inside a running task of an executor (a
//     callable, a coroutine, a fiber, or a task the host runs). f runs here
//     at once; the others are offered to idle workers and taken back and
//     run here, in order, if none stole them; no heap allocation. On a
//     thread running no task: std::logic_error (use the pool form).
//   join(pool, f, g), parallel_invoke(pool, f1, ...): from a thread that is
//     not a worker of any executor; every callable runs as a task of `pool`
//     and the caller blocks until all ended (with worker_count = 0 it runs
//     the executor's tasks meanwhile, unless another thread is the host).
//     From a task of `pool` itself: as the first form. On a worker of
//     another executor: std::system_error(errc::worker_thread).
// Both: results in argument order (std::monostate for void). The callables
// are invoked as lvalues and may capture the caller's locals by reference:
// the call returns only after every one of them ended.
// Errors:
//   * an empty callable (null function pointer, empty std::function):
//     std::invalid_argument naming the call, before anything runs;
//   * callables that throw: all still run to their end, then the first
//     exception in argument order is rethrown, the others dropped;
//   * capacity: on a worker a callable that cannot become a task runs here
//     (the join never fails for lack of capacity); from outside the spawn
//     blocks at capacity as executor::spawn does, and after shutdown began
//     the join throws spawn_error(errc::shut_down) once the callables
//     already spawned ended; a callable that shutdown (cancel_pending)
//     destroyed unrun: task_cancelled;
//   * in a fiber the callables must not suspend it (this_fiber::await,
//     yield, wait_on): a suspension that moved it is detected when the
//     callable returns and aborts the process with a message on stderr.
// While a stolen callable runs, the joiner helps run others' offered
// callables, then sleeps; docs/fork_join.md explains the design. Link
// canopy.
#pragma once

#include "detail/fork_join/join.hpp"
#include "executor.hpp"
