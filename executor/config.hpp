// executor_config — everything an executor is built with, validated once at
// construction. Invalid values throw std::invalid_argument naming the field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "idle_driver.hpp"

namespace canopy {

// What shutdown() does with tasks that have not finished (docs/architecture.md):
enum class shutdown_policy {
  // Run every runnable task, and the tasks they spawn, until nothing is
  // runnable; then destroy the tasks still suspended (their join handles
  // report "cancelled").
  drain,
  // Let running tasks finish their current run; destroy every other task
  // without running it (join handles report "cancelled").
  cancel_pending,
};

struct executor_config {
  static constexpr std::size_t max_worker_count = 1024;
  static constexpr std::size_t max_leaf_limit = std::size_t{1} << 16;

  // Worker threads the executor owns. Default: one per hardware thread.
  // 0..1024; 0 makes a host-driven executor: tasks run only on the thread
  // that calls run_once()/run_for()/run_until_idle()/run() (docs/embedding.md).
  std::size_t worker_count = default_worker_count();
  // Signal words per leaf (64 tasks each): a power of two in 1..64.
  std::size_t signals_per_leaf = 64;
  // Leaves allocated up front (0: one per worker, capped by max_leaves).
  std::size_t initial_leaves = 0;
  // Capacity limit in leaves: at most max_leaves * signals_per_leaf * 64
  // tasks alive at once. 1..65536 and at least worker_count.
  std::size_t max_leaves = 1024;
  // Progressive sleep: failed searches (each followed by a short pause; every
  // fourth by a sched_yield) before a worker announces itself sleepy and
  // parks. More rounds: fewer futex wakes in bursty loads; fewer rounds:
  // less CPU burnt when the pool goes idle. A worker whose recent parks were
  // all long skips these rounds (signal_waker/spin_history.hpp). 0..100000.
  std::uint32_t idle_yield_rounds = 4;
  // Pin each owned worker to one CPU (off by default; the kernel then
  // places and migrates workers itself). Worker i runs on worker_cpus[i %
  // size] when that list is given, else on the i-th CPU the process may use
  // (sched_getaffinity), wrapping when there are more workers than CPUs.
  // A listed CPU the process may not use: std::invalid_argument from the
  // executor's constructor. Off by default: on a machine shared with other
  // processes a pinned worker waits for its CPU instead of moving
  // (docs/performance.md, "Knobs").
  bool pin_workers = false;
  std::vector<int> worker_cpus;
  shutdown_policy on_shutdown = shutdown_policy::drain;
  // Receives exceptions thrown by tasks spawned without a join handle.
  // Default: print the message to stderr. Called on the worker thread.
  std::function<void(std::exception_ptr)> on_detached_exception;

  // What the poller worker waits on besides its futex (executor/idle_driver.hpp),
  // e.g. a canopy::io::reactor. Null: no poller, every worker parks on its futex.
  // Shared so that it outlives every task the executor destroys at shutdown.
  std::shared_ptr<ext::idle_driver> driver;
  // While no worker is parked as the poller, a busy worker polls the driver
  // without blocking once per this many tasks (tokio: 61), and sooner when
  // the driver says a deadline is due or completions wait. 1..1000000.
  std::uint32_t driver_poll_interval = 61;

  // Trace of worker activity (executor/trace.hpp, docs/tracing.md): when
  // set, each worker records what it does, and shutdown() writes this file
  // (Chrome trace-event JSON) and an SVG timeline beside it. Empty: the
  // environment variable CANOPY_TRACE, if set, names the file; else off.
  std::string trace_path;
  // Events kept per worker (a ring: the newest are kept; rounded up to a
  // power of two). 1024..16777216.
  std::size_t trace_events_per_worker = std::size_t{1} << 16;
  static constexpr std::size_t min_trace_events = 1024;
  static constexpr std::size_t max_trace_events = std::size_t{1} << 24;

  // Throws std::invalid_argument describing the first invalid field.
  void validate() const;

  [[nodiscard]] std::size_t tasks_per_leaf() const noexcept { return signals_per_leaf * 64; }

  static std::size_t default_worker_count() noexcept {
    const unsigned hardware = std::thread::hardware_concurrency();
    return hardware == 0 ? 1 : hardware;
  }
};

}  // namespace canopy
