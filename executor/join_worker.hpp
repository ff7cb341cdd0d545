// join_worker — the owner of one worker thread's offer deque (as rayon's
// WorkerThread owns its deque, and rayon's join/ sits on top of it): the
// deque (offer_deque.hpp), the count of spawned tasks in it, and where on
// the thread's stack a waiting joiner may help. The executor's worker_state
// holds one; fork_join/ (canopy::join) builds on it.
//
// Who calls what:
//   * The executor, on the owning thread: offer_task (canopy::spawn's
//     child), take_own_task (the worker loop's search), newest_is,
//     pop_offered_task, depth_of and pop_task (run-at-join's claim),
//     record_help_stack (at the thread's start), and, when the worker finds
//     nothing else, steal_from_others then run_offer. looks_empty from any
//     thread (a parker's probe).
//   * canopy::join (join.hpp), on the joining thread: offer_job,
//     take_back_job, help while it waits.
// The take-back, helping and stealing code lives in join_worker.cpp, built
// on executor_core's few fork-join services (requeue_offered_task,
// run_offered_task, count_offer_steal, announce_offer).
#pragma once

#include <cstddef>
#include <cstdint>

#include "../atomics/atomics.hpp"
#include "fork_stack.hpp"
#include "offer_deque.hpp"
#include "task_slot.hpp"

namespace canopy::detail {

class executor_core;
class scheduler;
struct worker_context;

class join_worker {
 public:
  // The executor this state belongs to and its worker index; set once,
  // before the worker's thread starts.
  void attach(executor_core& core, std::size_t index) noexcept {
    core_ = &core;
    index_ = index;
  }

  // ---------------------------------------------- the executor's side

  // canopy::spawn's child, offered on this worker's deque (the spawner
  // takes it back at its await; idle workers steal it). False when full.
  [[nodiscard]] bool offer_task(std::uint32_t slot) noexcept {
    if (!offers_.push(offer::of_task(slot))) {
      return false;
    }
    ++offered_tasks_;
    return true;
  }

  // The newest offer in this worker's deque, if it is a task (find_task).
  [[nodiscard]] bool take_own_task(std::uint32_t& slot) noexcept {
    if (offered_tasks_ == 0) {
      return false;
    }
    // A plain look first: only this thread pushes, so a newest entry that is
    // not a task (or none) stays so while it looks. A task the look saw is
    // this pop's, or a thief's (then the pop returns empty). No callable lies
    // above a task here: a join's callable is in the deque only while its
    // joiner is on this thread's stack, and find_task never runs above one.
    if (!offers_.newest().is_task()) {
      offered_tasks_ = 0;  // thieves took the rest
      return false;
    }
    --offered_tasks_;
    const offer taken = offers_.pop();
    if (!taken.is_task()) {
      return false;
    }
    slot = taken.task_slot();
    return true;
  }

  // Run-at-join's first place to look for task `id` (canopy::spawn's child,
  // awaited by its spawner): this worker's deque (executor_core's
  // claim_pending). Only this thread pushes, so a look at the newest entry
  // is stable; the caller checks the task's generation between the look and
  // the pop (the awaited task may have ended elsewhere and its slot been
  // reused), so these are three inline steps rather than one call: the
  // slot's address costs loads that most awaits do not need.
  [[nodiscard]] bool has_offered_tasks() const noexcept { return offered_tasks_ != 0; }
  [[nodiscard]] bool newest_is(offer entry) const noexcept { return offers_.newest() == entry; }
  // Pops the newest entry: true if it was `entry`, false if a thief took it.
  [[nodiscard, gnu::always_inline]] bool pop_offered_task(offer entry) noexcept {
    --offered_tasks_;
    return offers_.pop_inline() == entry;
  }
  // For a task awaited out of spawn order (executor_core's
  // take_offered_from_below): how many task entries lie above `entry` (at
  // most max_above; -1: not found that way), and a pop of the newest entry
  // that counts it when it is a task.
  [[nodiscard]] int depth_of(offer entry, int max_above) const noexcept {
    return offers_.depth_of(entry, max_above);
  }
  [[nodiscard]] offer pop_task() noexcept {
    const offer taken = offers_.pop();
    if (taken.is_task()) {
      --offered_tasks_;
    }
    return taken;
  }

  // Whether the deque looked empty (a hint for thieves and parkers; any
  // thread).
  [[nodiscard]] bool looks_empty() const noexcept { return offers_.looks_empty(); }

  // An idle worker's last resort: an offer (a join's callable or a spawned
  // task) stolen from another thread's deque (empty: none).
  [[nodiscard]] offer steal_from_others() noexcept;
  // Runs a stolen offer on this worker; nested: on top of a waiting joiner.
  void run_offer(offer taken, bool nested);
  // Records where on this worker thread's stack help() may run stolen
  // offers. On the worker thread, at its start.
  void record_help_stack() noexcept;
  // The middle of the calling thread's stack (its lowest address plus
  // half its size), or 0 when the thread's stack is unknown.
  static std::uintptr_t stack_middle_here() noexcept;
  // How low on this worker thread's stack fork-join children may run
  // nested (fork_region.hpp): the half help() keeps free; 0 when unknown.
  [[nodiscard]] std::uintptr_t nesting_floor() const noexcept { return help_stack_low_; }

  // ------------------------------------------- canopy::join's side

  // Pushes `job` onto this thread's deque, where idle workers may steal it;
  // false (nothing offered) when the deque is full. `core` is the calling
  // thread's executor (the joiner has it at hand, so the wake hint needs no
  // load of core_). The job must stay valid until it was taken back or it
  // ended. Its joiner fields name the calling thread's running task (as
  // worker_context::running and has_running say): a thief runs it under
  // that task, so that current_waker() inside names the joining task
  // either way.
  bool offer_job(scheduler& core, offered_job& job) noexcept;
  // Takes the newest offered job back: true if it was `job` (the caller then
  // runs it), false if a thief took it (the caller waits for its end).
  bool take_back_job(const offered_job& job) noexcept;
  // A joiner whose callable another thread runs helps meanwhile: steals one
  // offer from another thread's deque and runs it here. True if one ran.
  bool help() noexcept;
  [[noreturn]] static void fail_join_nesting() noexcept;

  // ------------------------------ co_await canopy::join(...) of tasks' side

  // The rest of a coroutine join (coroutine/fork_region.hpp's record),
  // offered as offer_job offers a callable, inline (once a fork): the record
  // names its joining task itself, and the wake hint goes only with a push
  // onto an empty deque. While a recursion keeps the deque non-empty, a
  // thief that found work wakes the next (the chain wake), so the hint
  // would only repeat itself; it is a hint in any case (offer_deque.hpp).
  [[gnu::always_inline]] bool offer_record(offered_job& record) noexcept {
    const auto pushed = offers_.push_noting_empty(offer::of_job(record));
    if (pushed == offer_deque::push_result::onto_empty) {
      announce_offer();
    }
    return pushed != offer_deque::push_result::full;
  }
  // The empty stacklets this worker keeps for its fork-join frames
  // (fork_stack.hpp); the owning thread's only.
  [[nodiscard]] stacklet_cache& stack_cache() noexcept { return stacks_; }
  // take_back_job, with the common case (the record is the newest entry)
  // inline.
  [[gnu::always_inline]] bool take_back_record(const offered_job& record) noexcept {
    const offer expected = offer::of_job(record);
    const offer taken = offers_.pop_inline();
    if (taken == expected) [[likely]] {
      return true;
    }
    return take_back_below(expected, taken);
  }

 private:
  // take_back_job after a pop that did not return `expected` but `taken`.
  bool take_back_below(offer expected, offer taken) noexcept;
  void announce_offer() noexcept;

  executor_core* core_ = nullptr;
  std::size_t index_ = 0;
  offer_deque offers_;  // canopy::join's callables (offer_job), canopy::spawn's children
  // At least the number of tasks in `offers_` (pushes less this worker's
  // own pops; a thief's steal does not lower it): 0 lets find_task and the
  // await's claim skip the deque without touching it. Reset when the deque
  // shows no task on top. Only this worker reads or writes it.
  std::uint32_t offered_tasks_ = 0;
  // Where a waiting joiner may help (help()): frames between these
  // addresses lie on the worker thread's own stack (not a fiber's) with at
  // least half of it free below. Both 0 for the host role: no help.
  std::uintptr_t help_stack_low_ = 0;
  std::uintptr_t help_stack_high_ = 0;
  stacklet_cache stacks_;
};

}  // namespace canopy::detail
