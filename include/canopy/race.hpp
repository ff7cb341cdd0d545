// <canopy/race.hpp> — wait for the first of several tasks (tokio's select!),
// and for a std::stop_token's stop.
//
//   std::stop_source stop;   // stop.request_stop() from any thread
//   auto got = co_await canopy::race(stream.read_some(buffer), canopy::stopped(stop.get_token()));
//   if (got.has_value<0>()) use(buffer, got.get<0>());  // the read's byte count
//   if (got.index() == 1) { /* stopped: the read was cancelled, its wait released */ }
//
// (has_value<0>(), not index() == 0: a read that returned at the moment the
// stop won keeps its bytes in the result, see below.)
//
// race(task<Ts>... contenders) -> task<race_result<Ts...>>, co_awaited inside
// a canopy::task (a fiber: this_fiber::await(race(...))). A contender may
// also be a Canopy awaiter, which then runs inside a task of its own, and
// its co_await result is its value: a channel's recv() (std::optional<T>),
// a mutex's lock() (mutex::guard), a semaphore's acquire() (void: has_value
// means a permit is held), sleep_for/sleep_until, any wait_on(source). So
// every wait observes a stop token the same way:
//   auto got = co_await canopy::race(jobs.recv(), canopy::stopped(token));
//   if (got.has_value<0>()) run(*got.get<0>());   // a value is never lost
//   auto held = co_await canopy::race(room.lock(), canopy::stopped(token));
//   if (held.has_value<0>()) { /* held.get<0>() owns the lock */ }
// Rules for every contender:
//   * every contender runs as a child task of the current executor
//     (canopy::spawn; its errors, errc::at_capacity or errc::shut_down, are
//     rethrown by race after the contenders already started have ended);
//     an empty task among them: std::invalid_argument before any runs;
//   * the first contender to end wins, whether it returned or threw. Every
//     other one is cancelled as a cancelled task is (a suspended one is
//     destroyed at once: its wait released, its destructors run; a running
//     one at its next suspension), and race returns only after each of them
//     has ended (frame destroyed, destructors run): contenders may borrow
//     from the awaiting task's frame;
//   * the winner threw: race rethrows that exception (what else the others
//     ended with is dropped);
//   * the winner returned: race_result holds its index (in argument order,
//     index()) and value (get<I>(); value() when every contender has the
//     same type); task<void> gives std::monostate. No value is lost: a
//     contender that returned at about the same moment on another worker,
//     before its cancel landed, keeps its value too (has_value<I>() and
//     get<I>() for it). Exceptions of the losers are dropped, never sent to
//     on_detached_exception;
//   * a racing task that is itself cancelled (or dropped at shutdown) while
//     it waits cancels every contender and ends only after all of them did.
//     If one of them returned a value before its cancel landed (a channel's
//     recv() that took a value), the cancelled task resumes with race's
//     result, so that the value is not dropped, and is cancelled at its
//     next suspension (at shutdown it is destroyed with the rest); that
//     contender is then the winner (index()), even if one the cancel
//     stopped ended first;
// Cancel-safety follows the contenders': a read_some that loses a race
// keeps the bytes it took for the stream's next read (docs/io.md).
// A fiber (or any join handle) races inside a task that awaits it; that
// task, cancelled, cancels the fiber and ends once the fiber's stack is
// unwound:
// compile: fragment
//   auto join = [](canopy::join_handle<int> h) -> canopy::task<int> { co_return co_await h; };
//   auto fiber = canopy::spawn(canopy::fiber([] { return 42; }));   // its join_handle<int>
//   co_await canopy::race(join(std::move(fiber)), canopy::stopped(token));
//
// stopped(std::stop_token token) -> task<void>: ends when stop is requested
// on the token's source (at once if it already was); a token without a
// source (stop_possible() false) never ends it. Usable in race and wherever
// a task<void> is (co_await; this_fiber::await). A cancel releases its
// registration (the std::stop_callback is destroyed); request_stop() on
// any thread only wakes the task. task_group's stop_token() works here.
// Errors: outside a task, std::logic_error (from spawn or current_waker).
#pragma once

#include "detail/coroutine/race.hpp"
#include "detail/coroutine/stop_wait.hpp"
#include "task.hpp"
