#pragma once

#include <canopy/executor.hpp>
#include <canopy/task.hpp>
#include <cstddef>
#include <cstdlib>
#include <string_view>
#include <utility>

namespace canopy::bench {

// The Canopy peer: one canopy::executor with `worker_count` workers and
// every other setting at its default. The default capacity, max_leaves 1024
// x 4096 slots per leaf = 4,194,304 tasks alive at once, covers the largest
// workload: fib has at most 1,346,269 tasks alive, spawn_remote, spawn_local
// and spawn_burst_memory at most 1,000,000 pending (+ the blockers).
//
// How work gets in, and why:
// - submit() is executor::spawn_detached, from outside the executor and from
//   inside a task alike: the cheapest spawn, no join state is allocated.
//   From outside it blocks at capacity (never reached here); on a worker it
//   would throw spawn_error(at_capacity) instead.
// - submit_coroutine() spawns a canopy::task<void> detached, from outside.
//   Inside a coroutine task, workloads spawn with canopy::spawn(task) and
//   join by co_await on the returned handle: the waiting task is suspended
//   and holds no worker. Fibers spawn with canopy::spawn(canopy::fiber(fn))
//   and join with this_fiber::await, which suspends only the fiber.
// - To yield, a coroutine task does co_await canopy::yield_now(): the worker
//   puts it on its local FIFO yield queue and runs other ready tasks first.
//   (The peers have no yield and re-enqueue a continuation instead.)
// - The measuring thread learns of the end from a completion_signal or
//   completion_counter, like every peer, rather than join_handle::join():
//   join() waits with std::atomic::wait, which in libstdc++ 12 spins
//   (12 pauses, then 4 sched_yield calls) before it blocks on a futex, and
//   the waiting thread must not spin.
class canopy_executor {
 public:
  explicit canopy_executor(unsigned worker_count) : executor_(make_config(worker_count)) {}

  template <typename Task>
  void submit(Task&& task) {
    executor_.spawn_detached(std::forward<Task>(task));
  }

  void submit_coroutine(canopy::task<void> work) { executor_.spawn_detached(std::move(work)); }

  [[nodiscard]] canopy::executor& pool() { return executor_; }

 private:
  // CANOPY_BENCH_PIN=1 pins the workers (executor_config::pin_workers), to
  // measure what pinning changes; off by default, as in the library.
  static executor_config make_config(unsigned worker_count) {
    executor_config config;
    config.worker_count = worker_count;
    const char* pin = std::getenv("CANOPY_BENCH_PIN");
    config.pin_workers = pin != nullptr && std::string_view(pin) == "1";
    return config;
  }

  canopy::executor executor_;
};

}  // namespace canopy::bench
