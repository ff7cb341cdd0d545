// executor_core at a join: a task about to wait for a pending task takes it
// back (claim_pending: its worker's offer deque, LIFO slot or tree bit) and
// runs it nested, adopts its body (fibers, coroutines), or retires it unrun
// (canopy::join's take-back past its deque); and the services fork-join's
// join_worker (executor/join_worker.cpp) runs on: requeue or run an
// offered task, count a steal, announce an offer.
#include <cstdint>
#include <cstring>

#include "core_inline.hpp"
#include "executor_core.hpp"
#include "pending_claim.hpp"

#if defined(__clang__)
#define CANOPY_NO_ICF
#else
#define CANOPY_NO_ICF [[gnu::no_icf]]
#endif

namespace canopy::detail {

// Out of line: LTO inlines it into the awaiting coroutine's body, which it
// makes larger and slower on the path where the child already ran.
// The face's join entries (scheduler.hpp) are the core's own code: `core`
// is this object.
[[gnu::noinline]] bool scheduler::run_pending_inline(task_id id) {
  executor_core& core = as_core(*this);
  executor_core::worker_state* const self = core.claim_pending(id, core.arena_.slot(id.slot));
  if (self == nullptr) {
    return false;
  }
  core.run_claimed_nested(*self, id.slot);
  return true;
}

// Two entry points with one caller each (fibers, coroutines), so that LTO
// may inline each where it is used: with two callers it keeps one shared
// copy out of line, a call on every fork.
// no_icf (GCC's): identical code folding would make them one function again.
CANOPY_NO_ICF scheduler::pending_run scheduler::run_or_adopt_pending(task_id id,
                                                                    const adoption& adopt) {
  return as_core(*this).run_or_adopt<false>(id, adopt);
}

CANOPY_NO_ICF scheduler::pending_run scheduler::take_over_pending(task_id id,
                                                                 const adoption& adopt) {
  return as_core(*this).run_or_adopt<true>(id, adopt);
}

template <bool KeepForSpawn>
[[gnu::always_inline]] inline executor_core::pending_run executor_core::run_or_adopt(
    task_id id, const adoption& adopt) {
  // Found once: the deque's pop between the claim's look at the slot and
  // the adoption is a call, across which the arena's lookup (an acquire
  // load) would be made again.
  task_slot& target = arena_.slot(id.slot);
  worker_state* const self = claim_pending(id, target);
  if (self == nullptr) {
    return pending_run::none;
  }
  if (target.vtable != adopt.kind || (adopt.accept != nullptr && !adopt.accept(target.storage)) ||
      self->trace != nullptr) {
    run_claimed_nested(*self, id.slot);  // traced: a run of its own, so the trace shows it
    return pending_run::ran;
  }
  if (adopt.body != nullptr) {
    std::memcpy(adopt.body, target.storage, adopt.body_size);
  }
  if constexpr (KeepForSpawn) {
    retire_taken_over(*self, target, id);
  } else {
    retire_unrun(*self, target, id);
  }
  return pending_run::adopted;
}

scheduler::pending_run scheduler::take_back_unrun(task_id id) {
  executor_core& core = as_core(*this);
  task_slot& target = core.arena_.slot(id.slot);
  executor_core::worker_state* const self = core.claim_pending(id, target);
  if (self == nullptr) {
    return pending_run::none;
  }
  if (self->trace != nullptr) [[unlikely]] {
    core.run_claimed_nested(*self, id.slot);  // a traced run, so the trace shows it
    return pending_run::ran;
  }
  core.retire_unrun(*self, target, id);
  return pending_run::adopted;
}

// Awaited out of spawn order (spawn a, spawn b, co_await a): the children
// spawned after the awaited one go to the LIFO slot and the tree, as every
// spawned task went before the deque (they are run there, or claimed back
// by their own awaits), and the awaited one is popped. Out of line: the
// fork-join shape awaits the newest child, and never comes here.
[[gnu::noinline]] bool executor_core::take_offered_from_below(worker_state& self,
                                                              task_id id) noexcept {
  const offer mine = offer::of_task(id.slot);
  const int above = self.joins.depth_of(mine, max_offered_flush);
  if (above <= 0 || task_slot::generation_of(arena_.slot(id.slot).state.load(atomics::relaxed)) !=
                        id.generation) {
    return false;
  }
  for (int index = 0; index < above; ++index) {
    const offer newer = self.joins.pop_task();
    if (!newer.is_task()) {
      return false;  // thieves emptied the deque up to here: they have the awaited one too
    }
    make_runnable_from(&self, newer.task_slot());
  }
  return self.joins.pop_offered_task(mine);
}

[[gnu::always_inline]] inline executor_core::worker_state* executor_core::claim_pending(
    task_id id, task_slot& target) {
  worker_context* worker = this_thread_worker;
  if (worker == nullptr || worker->core != this) {
    return nullptr;
  }
  worker_state& self = *workers_[worker->index];
  // First the newest entry of this worker's offer deque (canopy::spawn's
  // child, awaited by its spawner): its pop returns it or nothing if a
  // thief took it; the generation check tells the awaited task from a
  // later one in a reused slot (the awaited one ended elsewhere). Then its
  // LIFO slot and the tree.
  const bool offered = self.joins.has_offered_tasks();
  const offer mine = offer::of_task(id.slot);
  if (offered && self.joins.newest_is(mine)) {
    if (task_slot::generation_of(target.state.load(atomics::relaxed)) != id.generation) {
      return nullptr;
    }
    return self.joins.pop_offered_task(mine) ? &self : nullptr;
  }
  const auto position = [this](std::uint32_t slot) {
    return tree_position{arena_.leaf_of(slot), arena_.signal_of(slot), arena_.bit_of(slot)};
  };
  const pending_claim claim =
      claim_pending_task(target.state, id, self.lifo, tree_, position,
                         [this](std::uint32_t permits) { owe_wakes(permits); });
  if (claim == pending_claim::took_next_task) [[unlikely]] {
    signal_task(id.slot);  // not the awaited task: back into the tree, with its wakes
    return nullptr;
  }
  // We own a runnable task (invariant S: a set bit or a LIFO entry means
  // SCHEDULED, not EXECUTING).
  if (claim == pending_claim::from_lifo || claim == pending_claim::from_tree) {
    return &self;
  }
  // Runnable, but neither in the LIFO slot nor in the tree: deeper in this
  // worker's deque (awaited out of spawn order), or taken by a thief. The
  // deque is looked through only now: a child spawned after the deque
  // filled sits in the tree, and awaiting each such child (await_all's
  // newest-first order) would otherwise scan the deque every time.
  if (claim == pending_claim::lost && offered && take_offered_from_below(self, id)) {
    return &self;
  }
  return nullptr;
}

[[gnu::always_inline]] inline void executor_core::retire_unrun(worker_state& self,
                                                               task_slot& target,
                                                               task_id id) noexcept {
  target.vtable = nullptr;  // as after a completed run: the caller does the task's work
  // release: as at run_task's completion, a stale waker that reads the new
  // generation fails its CAS; SCHEDULED is dropped, nobody else holds the task.
  target.state.store(task_slot::make_state(id.generation + 1, 0), atomics::release);
  worker_counters::bump(self.counters.tasks_run);
  worker_counters::bump(self.counters.finished);
  release_slot(self, id.slot);
}

[[gnu::always_inline]] inline void executor_core::retire_taken_over(worker_state& self,
                                                                    task_slot& target,
                                                                    task_id id) noexcept {
  // seq_cst: as in release_slot; a capacity waiter needs the slot in the
  // arena, not held here (one that registers just after this load gets it
  // at the next give-back).
  if (self.kept_count == worker_state::max_kept_slots || self.is_host ||
      capacity_waiters_.load(atomics::seq_cst) != 0) [[unlikely]] {
    retire_unrun(self, target, id);
    return;
  }
  target.vtable = nullptr;  // as retire_unrun: a free slot has no vtable
  // release: as retire_unrun's (a stale waker that reads the new
  // generation gives up). The slot then stays this worker's: nobody else
  // takes it until it is spawned into again or goes back to the arena.
  target.state.store(task_slot::make_state(id.generation + 1, 0), atomics::release);
  worker_counters::bump(self.counters.tasks_run);
  worker_counters::bump(self.counters.finished);
  self.kept_slots[self.kept_count++] = {id.slot, &target, id.generation + 1};
}

[[gnu::always_inline]] inline void executor_core::run_claimed_nested(worker_state& self,
                                                                     std::uint32_t slot) {
  // Run it here, then restore what this worker was running: the waiting
  // task is still mid-run.
  const restore_running_on_exit saved(self.context);
  run_task(self, slot);
}

void executor_core::requeue_offered_task(std::size_t worker, std::uint32_t slot) noexcept {
  make_runnable_from(workers_[worker].get(), slot);
}

void executor_core::run_offered_task(std::size_t worker, std::uint32_t slot, bool nested) {
  worker_state& self = *workers_[worker];
  if (nested) {
    run_claimed_nested(self, slot);
  } else {
    run_task(self, slot);
  }
}

void executor_core::count_offer_steal(std::size_t worker) noexcept {
  worker_state& self = *workers_[worker];
  worker_counters::bump(self.counters.steals);
  if (self.trace != nullptr) [[unlikely]] {
    self.trace->steal(trace_buffer::no_partition);
  }
}

}  // namespace canopy::detail
