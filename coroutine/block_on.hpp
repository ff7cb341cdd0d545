// block_on — run a task on an executor and wait for it from a thread that
// is not one of the executor's workers (main(), a test, a foreign thread).
//
//   int result = canopy::block_on(pool, compute());
//
// On any worker thread it throws std::system_error with
// canopy::errc::worker_thread instead of blocking (which could deadlock the
// pool): inside a task, co_await the task (or its handle) instead.
#pragma once

#include <system_error>
#include <utility>

#include "../executor/errors.hpp"
#include "../executor/executor.hpp"
#include "spawn.hpp"
#include "task.hpp"

namespace canopy {

template <class T>
T block_on(executor& pool, task<T> work) {
  if (detail::current_worker() != nullptr) {
    throw std::system_error(make_error_code(errc::worker_thread),
                            "canopy::block_on() on a worker thread would block it; "
                            "co_await the task instead");
  }
  return pool.spawn(std::move(work)).get();
}

}  // namespace canopy
