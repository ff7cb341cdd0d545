// <canopy/blocking.hpp> — run blocking calls without blocking a worker.
//
//   canopy::task<std::string> read_config() {
//     co_return co_await canopy::run_blocking([] { return slurp("/etc/app.conf"); });
//   }
//   // in a fiber (declared by <canopy/fiber.hpp>): canopy::this_fiber::run_blocking(fn)
//
// What is here: canopy::run_blocking(fn) (co_await it in a canopy::task);
// canopy::blocking_pool, blocking_pool_config, blocking_pool_stats. fn
// runs on a separate, growable pool of threads (at most
// config.max_threads; a thread idle for config.idle_timeout exits; at the
// maximum calls queue, up to config.max_queued if set) and the task resumes
// on its executor with fn's value or its exception. fn may take a
// std::stop_token: it is requested when the waiting task is cancelled or
// destroyed, or the pool shuts down.
// Which pool: `canopy::blocking_pool blocking(pool, config);`, declared
// after the executor, attaches a pool to it; otherwise the process-wide
// default pool (default config) serves every executor.
// Who may call: run_blocking only inside a running task of an executor (a
// coroutine task; a fiber uses this_fiber::run_blocking), from its worker.
// blocking_pool's members from any thread; its shutdown and destructor not
// from one of its own threads nor a worker of its attached executor.
// Errors: outside a task std::logic_error; std::system_error with
// errc::at_capacity when max_queued calls already wait (a queued call of
// a cancelled or destroyed task waits for nothing: not counted), errc::shut_down
// after the pool shut down or once the executor's shutdown began (thrown by
// run_blocking itself, or at the co_await for a queued call the pool's
// shutdown dropped); fn's exception is rethrown at the co_await.
// blocking_pool_config errors: std::invalid_argument naming the field; a
// second pool attached to one executor: std::logic_error.
// When a queued call starts: a pool thread starts a queued call only if its
// waiting task is still waiting and its executor's shutdown has not begun;
// otherwise the call never starts (stats().dropped counts it). So once an
// executor's shutdown begins (executor::shutdown, its destructor, or an
// attached pool's shutdown), no queued call of its tasks starts, in its
// attached pool or in the default pool; a call already running runs to its
// end. The shutdown then destroys the tasks waiting on blocking calls
// (their handles report task_cancelled), which requests stop on their
// running calls and drops their results. A task cancelled while its call is
// queued (its handle's cancel(), a group's cancel() or close(), with_timeout,
// race, a cancelled parent): from the moment the cancel is requested the
// call never starts, even before a worker has run the task to act on the
// cancel. A call that already started runs to its end with its stop_token
// requested once the cancel takes effect, its result dropped; fn may use
// the task's locals, so the task ends (its handle reports task_cancelled)
// only after fn returned. A task that
// was spawned detached has no cancel request; its queued call is dropped
// only when the task is destroyed.
// The pool's shutdown (shutdown(), an attached pool's destructor, which
// shuts its executor down first; the default pool at process exit), in
// order: new calls are refused (errc::shut_down); queued calls fail with
// that error at their co_await (or are dropped if their task is gone);
// running calls get their stop_token requested and are waited for (a
// thread cannot be interrupted); then every thread is joined.
//
// Reference (namespace canopy):
//   run_blocking(fn) -> task<R>, R fn's result (co_await it in a task; fn
//     may take a std::stop_token). fn is submitted at the call, before the
//     co_await; an empty std::function or null pointer:
//     std::invalid_argument.
//   blocking_pool(executor& pool, blocking_pool_config config = {}):
//     attaches to `pool` (one per executor); declare it after the executor.
//     shutdown() (the steps above; the destructor calls it), stats() ->
//     blocking_pool_stats, config(). Not copyable.
//   blocking_pool_config: max_threads (512; 1..65536), max_queued (0: no
//     limit), idle_timeout (10 s; 1 ms..1 day); validated at the pool's
//     construction.
//   blocking_pool_stats: threads, idle, running, queued (now); started,
//     exited, completed, dropped (since construction).
// Link canopy (the canopy_blocking library is part of the package).
#pragma once

#include "detail/blocking/blocking_pool.hpp"
#include "detail/blocking/run_blocking.hpp"
#include "task.hpp"
