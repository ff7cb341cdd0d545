// <canopy/task_group.hpp> — own a set of child tasks (tokio's JoinSet).
//
//   canopy::task<int> sum_all() {
//     canopy::task_group<int> group({.cancel_on_failure = true});
//     for (int i = 0; i < 8; ++i) group.spawn(work(i));
//     int sum = 0;
//     while (auto value = co_await group.next()) sum += *value;   // as they finish
//     co_await group.close();   // always, before leaving the scope
//     co_return sum;
//   }
//
// What is here: canopy::task_group<T> and task_group_options. Children are
// canopy::task<T>, fibers (canopy::fiber(fn), <canopy/fiber.hpp>) or a
// callable making one, called with the group's std::stop_token if it takes
// one; each runs as a task of the current executor.
//   spawn(x)     start a child;
//   spawn_detached(x) start a child whose value is not kept: destroyed as
//                the child ends, nothing of the child left in the group
//                (its bookkeeping is reused); an exception it throws is
//                kept and reported as any child's. For a group that lives
//                as long as a server (its connections);
//   next()       co_await: the next child to finish, its value or its
//                exception; std::nullopt (false for void) when none is left;
//   try_next()   next() without waiting: a finished child's outcome not
//                taken yet, else std::nullopt (false for void) at once;
//   kept()       how many outcomes the group holds, not taken yet;
//   all_ended()  a wait source, ready once no child runs. The drain with a
//                deadline, in the owning task:
//                compile: fragment
//                  auto ended = group.all_ended();
//                  if (!co_await canopy::with_timeout(2s, ended)) group.cancel();
//                  auto values = co_await group.wait_all();
//                wait_all() returns once the cancelled children have ended
//                (destructors run), with the values of those that ended in
//                time. with_timeout on the wait source waits in the owner
//                itself; with_timeout(d, group.wait_all()) would run
//                wait_all in another task, outside the owner rule. cancel()
//                is for good: children spawned after it are cancelled too;
//   wait_all()   co_await: wait for every child; the values not taken yet;
//                the first failure rethrown, the others in failures();
//   cancel()     cancel the running children, without waiting;
//   close()      co_await: cancel the running children and wait until all
//                ended; rethrow the first failure not taken yet (the others
//                in failures()). Destructors cannot await: co_await close()
//                before the group leaves its scope. The destructor is the
//                safety net: it cancels the children still running and does
//                not wait; their outcomes are discarded. An owner cancelled
//                (or dropped at shutdown) while it waits in next(),
//                wait_all() or close() does wait: it cancels the children
//                and ends only after every one of them ended, so they may
//                borrow its frame (a wait on all_ended() does not: cancel()
//                the group and co_await close() before the owner can be
//                cancelled there). Any cancelled wait of next(), wait_all()
//                or close() does so, also one run in another task against
//                the owner rule (race(group.next(), stopped(t)) cancels the
//                group when the stop wins);
//   stop_token() requested by cancel(), close(), the destructor and, with
//                cancel_on_failure, the first child that throws.
// Cancellation: a child suspended in any await is destroyed at once (its
// destructors run), one running code is destroyed at its next suspension; a
// plain loop or a blocking call sees it only by reading stop_token() (or a
// token passed to it). A child counts as ended (close(), wait_all() and
// next() see it so) only once it is gone: a coroutine's frame destroyed, a
// fiber's stack unwound, every destructor run. Cancelled children are
// counted by cancelled(), never reported as failures; every exception a
// child throws is reported once, also one thrown after the stop was
// requested (a child that saw the token late): by next() or try_next(), or
// rethrown by wait_all()/close(), or kept in failures(). Memory: a spawn()
// child's outcome stays in the group until taken; a spawn_detached() child
// leaves only an exception (until taken), so such a group stays flat. At the executor's shutdown an
// owner destroyed with its group still running destroys the children first
// (the group's destructor cancels them, and a cancel at shutdown destroys
// at once), so their destructors run while the owner's frame is alive;
// their outcomes are discarded.
// Who may call: spawn, spawn_detached, next, try_next, wait_all, close and
// waits on all_ended() only from the task that owns the group (a coroutine
// task: co_await; a fiber: this_fiber::await(...)), one call at a time;
// cancel, stop_token, running, cancelled, kept from any thread.
// Errors: outside a task std::logic_error (spawn, spawn_detached); spawn
// errors as canopy::spawn; after close() spawn/spawn_detached/next/
// try_next/wait_all throw std::logic_error;
// spawn of an empty task, a null function pointer or an empty std::function
// throws std::invalid_argument.
#pragma once

#include "detail/task_group/task_group.hpp"
#include "task.hpp"
