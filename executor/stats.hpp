// Executor statistics: per-worker counters and the snapshot stats() returns.
#pragma once

#include <cstdint>
#include <vector>

#include "../atomics/atomics.hpp"

namespace canopy {

struct worker_stats {
  std::uint64_t tasks_run = 0;  // task runs (a yielded task counts once per run)
  // Tasks claimed from another worker's partition or LIFO slot, and
  // canopy::join callables taken from another thread's deque (which are
  // not tasks: they count in no other field).
  std::uint64_t steals = 0;
  std::uint64_t yields = 0;             // runs that ended by yielding
  std::uint64_t parks = 0;              // times the worker blocked on its SignalWaker
  std::uint64_t wakes_by_permit = 0;    // parks ended by a permit (a leaf became active)
  std::uint64_t wakes_by_jec = 0;       // parks ended by the JEC path
  std::uint64_t wakes_by_shutdown = 0;  // parks ended by shutdown
  std::uint64_t spurious_wakeups = 0;   // returns from the park backend while still SLEEPING
  std::uint64_t spawned = 0;            // tasks spawned by tasks running on this worker
  // Tasks that ended on this worker: with a value, an exception, or
  // destroyed there after a cancel (shutdown's leftovers: dropped_tasks).
  std::uint64_t finished = 0;
};

struct executor_stats {
  std::vector<worker_stats> workers;  // the owned workers
  worker_stats host;                  // runs made by host threads (executor::run_once and friends)
  // Tasks shutdown destroyed before they ended (a cancelled task counts in
  // the finished of the worker that destroyed it).
  std::uint64_t dropped_tasks = 0;
  std::uint32_t sleeping_workers = 0;  // workers parked when the snapshot was taken
  // Tasks spawned and not yet ended (completed or dropped). Exact when the
  // executor is quiescent; while tasks run, a snapshot of counters read one
  // after another, so it may be off by the tasks that ended meanwhile.
  std::uint64_t live_tasks = 0;
  std::uint64_t capacity = 0;  // the most tasks alive at once (max_leaves * tasks per leaf)

  // Every worker's counters and the host's, summed.
  [[nodiscard]] worker_stats total() const noexcept {
    worker_stats sum = host;
    for (const worker_stats& one : workers) {
      sum.tasks_run += one.tasks_run;
      sum.steals += one.steals;
      sum.yields += one.yields;
      sum.parks += one.parks;
      sum.wakes_by_permit += one.wakes_by_permit;
      sum.wakes_by_jec += one.wakes_by_jec;
      sum.wakes_by_shutdown += one.wakes_by_shutdown;
      sum.spurious_wakeups += one.spurious_wakeups;
      sum.spawned += one.spawned;
      sum.finished += one.finished;
    }
    return sum;
  }
};

namespace detail {

// The live counters of one worker. Written only by that worker (relaxed
// load + store, no RMW), read by stats() from any thread.
struct alignas(atomics::cache_line) worker_counters {
  atomics::atomic<std::uint64_t> tasks_run{0};
  atomics::atomic<std::uint64_t> steals{0};
  atomics::atomic<std::uint64_t> yields{0};
  atomics::atomic<std::uint64_t> parks{0};
  atomics::atomic<std::uint64_t> wakes_by_permit{0};
  atomics::atomic<std::uint64_t> wakes_by_jec{0};
  atomics::atomic<std::uint64_t> wakes_by_shutdown{0};
  atomics::atomic<std::uint64_t> spurious_wakeups{0};
  atomics::atomic<std::uint64_t> spawned{0};
  atomics::atomic<std::uint64_t> finished{0};

  // Always inlined: a load and a store, which LTO otherwise left as a call in
  // large callers (canopy::join's take-back).
  [[gnu::always_inline]] static void bump(atomics::atomic<std::uint64_t>& counter,
                                          std::uint64_t by = 1) noexcept {
    counter.store(counter.load(atomics::relaxed) + by, atomics::relaxed);
  }

  [[nodiscard]] worker_stats snapshot() const noexcept {
    return {tasks_run.load(atomics::relaxed),
            steals.load(atomics::relaxed),
            yields.load(atomics::relaxed),
            parks.load(atomics::relaxed),
            wakes_by_permit.load(atomics::relaxed),
            wakes_by_jec.load(atomics::relaxed),
            wakes_by_shutdown.load(atomics::relaxed),
            spurious_wakeups.load(atomics::relaxed),
            spawned.load(atomics::relaxed),
            finished.load(atomics::relaxed)};
  }
};

}  // namespace detail

}  // namespace canopy
