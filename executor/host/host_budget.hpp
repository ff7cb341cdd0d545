// host_budget — how long one call of the host role's run keeps the calling
// thread (executor::run_once/run_for/run_until_idle/run build one; the
// host role, executor/host/host_runner.hpp, runs within it).
#pragma once

#include <chrono>
#include <cstddef>

namespace canopy::detail {

// How long one call of host_runner::run() keeps the calling thread.
struct host_budget {
  std::size_t max_tasks = ~std::size_t{0};
  bool wait_for_work = false;    // block (until the deadline) when nothing is ready
  bool until_shutdown = false;   // run(): ignore the deadline, return when shutdown begins
  bool stop_at_shutdown = true;  // false only for shutdown's own drain
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  // When set: return as soon as ready(ready_context) holds (a join on a
  // host-driven executor, run_until).
  bool (*ready)(const void* ready_context) noexcept = nullptr;
  const void* ready_context = nullptr;
};

}  // namespace canopy::detail
