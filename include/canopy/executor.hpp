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
// The full contract is at the top of detail/executor/executor.hpp and
// detail/executor/join_handle.hpp; docs/embedding.md covers the host role.
#pragma once

#include "detail/executor/config.hpp"
#include "detail/executor/errors.hpp"
#include "detail/executor/executor.hpp"
#include "detail/executor/join_handle.hpp"
#include "detail/executor/stats.hpp"
