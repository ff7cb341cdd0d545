// core_inline — executor_core's always-inlined steps that more than one of
// its source files uses, and the calling thread's worker context.
// Internal to the executor's .cpp files (spawn_path.cpp, worker_loop.cpp,
// run_at_join.cpp, executor_core.cpp); not installed. These stay in a
// header, always inlined: each runs on every task, and out of line (LTO
// keeps a function with several callers out of line) each would be a call
// and a spill on every spawn, wake or task end.
#pragma once

#include <cstdint>

#include "executor_core.hpp"

namespace canopy::detail {

// The calling thread's worker context (current_worker()), defined in
// executor_core.cpp. constinit: a read from another file then needs no
// call to a thread-local initialization wrapper.
extern constinit thread_local worker_context* this_thread_worker;

// Always inlined, as are claim_pending and run_claimed_nested: each has two
// callers, and LTO would keep such a function out of line, a call on every
// task's end.
[[gnu::always_inline]] inline void executor_core::release_slot(worker_state& self,
                                                               std::uint32_t slot) noexcept {
  // A slot in the occupancy word this worker is spawning from goes back into
  // its reservation: the shared word still marks it occupied, so nobody
  // else can take it, and the worker's next spawn reuses it warm without the
  // arena's seq_cst RMW. Only while the reservation is live (it is given
  // back when the worker runs out of work) and nobody waits for capacity;
  // otherwise, and for any other slot, it goes back to the arena.
  task_arena::reservation& mine = self.spawn_slots;
  const std::uint32_t offset = slot - mine.first_slot;  // wraps around when below
  // seq_cst: as in notify_capacity_waiters(); a waiter that registered
  // before this load gets this slot through the arena. One that registers
  // just after is notified by the next release or give-back.
  if (mine.free != 0 && offset < 64 && capacity_waiters_.load(atomics::seq_cst) == 0) {
    mine.free |= std::uint64_t{1} << offset;
    return;
  }
  arena_.release(slot);
  notify_capacity_waiters();
}

// Inlined into spawn_body, schedule and find_task: every task passes here,
// and out of line it is a call and a spill on each.
[[gnu::always_inline]] inline void executor_core::make_runnable(std::uint32_t slot) noexcept {
  worker_context* const worker = this_thread_worker;
  make_runnable_from(
      worker != nullptr && worker->core == this ? workers_[worker->index].get() : nullptr, slot);
}

[[gnu::always_inline]] inline void executor_core::make_runnable_from(worker_state* self,
                                                                     std::uint32_t slot) noexcept {
  if (self != nullptr) {
    const std::uint32_t evicted = self->lifo.put(slot);
    if (evicted != no_task) {
      signal_task(evicted);
    }
    // No wake here: this worker is awake (it is running a task) and takes
    // the LIFO task as soon as the current one ends; awake idle workers may
    // steal it meanwhile. Sleepers are woken for the evicted task.
    return;
  }
  signal_task(slot);
}

}  // namespace canopy::detail
