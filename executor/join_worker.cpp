// join_worker's take-back, helping and stealing (join_worker.hpp says who
// calls what). Built on executor_core's fork-join services: requeue a task,
// run a task, count a steal, announce an offer.
#include "join_worker.hpp"

#include <pthread.h>

#include <cstdio>
#include <cstdlib>

#include "executor_core.hpp"

namespace canopy::detail {

bool join_worker::offer_job(scheduler& core, offered_job& job) noexcept {
  if (!offers_.push(offer::of_job(job))) {
    return false;
  }
  // A wake for a sleeper only if nobody is awake to steal it: a hint (no
  // RMW orders the push before this read), since the joiner runs the job
  // itself at its join if nobody took it (offer_deque.hpp).
  as_core(core).announce_offer();
  return true;
}

bool join_worker::take_back_job(const offered_job& job) noexcept {
  // Joins nest on a thread, so the newest callable is this join's, unless a
  // thief took it, and then every older entry too (thieves take the oldest
  // first). Tasks spawned inside the join's callables and not awaited there
  // may lie above it: they go to the LIFO slot and the tree, as any
  // runnable task, so pop() then returns `job` or nothing.
  const offer expected = offer::of_job(job);
  const offer taken = offers_.pop();
  if (taken == expected) [[likely]] {
    return true;
  }
  return take_back_below(expected, taken);
}

bool join_worker::take_back_below(offer expected, offer taken) noexcept {
  while (taken.is_task()) {
    --offered_tasks_;
    core_->requeue_offered_task(index_, taken.task_slot());
    taken = offers_.pop();
  }
  if (!taken.empty() && taken != expected) [[unlikely]] {
    fail_join_nesting();
  }
  return taken == expected;
}

void join_worker::announce_offer() noexcept { core_->announce_offer(); }

// Another join's callable on top of this join's: the joins on this thread
// did not nest. Only a fiber suspended inside a join's first callable and
// resumed on the same thread gets here (join.hpp catches the resume on
// another thread); that callable would be lost, so stop with the reason.
[[noreturn]] void join_worker::fail_join_nesting() noexcept {
  std::fputs(
      "canopy::join / parallel_invoke: a join found another join's callable above its own: the "
      "calling fiber was suspended inside the first callable while another join ran on its "
      "thread; the callables of a join must not suspend the fiber that joins "
      "(this_fiber::await, yield, wait_on)\n",
      stderr);
  std::abort();
}

std::uintptr_t join_worker::stack_middle_here() noexcept {
  pthread_attr_t attributes;
  if (pthread_getattr_np(pthread_self(), &attributes) != 0) {
    return 0;
  }
  void* lowest = nullptr;
  std::size_t size = 0;
  std::uintptr_t middle = 0;
  if (pthread_attr_getstack(&attributes, &lowest, &size) == 0) {
    middle = reinterpret_cast<std::uintptr_t>(lowest) + size / 2;
  }
  pthread_attr_destroy(&attributes);
  return middle;
}

void join_worker::record_help_stack() noexcept {
  const std::uintptr_t middle = stack_middle_here();
  if (middle == 0) {
    return;  // unknown: this worker does not help while it waits
  }
  help_stack_low_ = middle;
  help_stack_high_ = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
}

bool join_worker::help() noexcept {
  // Only on the worker thread's own stack, with at least half of it left
  // below this frame: a fiber's stack is small, and each helping level
  // nests a stolen callable's recursion under this one.
  const auto here = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
  if (here < help_stack_low_ || here > help_stack_high_) {
    return false;
  }
  const offer taken = steal_from_others();
  if (taken.empty()) {
    return false;
  }
  run_offer(taken, true);
  return true;
}

offer join_worker::steal_from_others() noexcept {
  const std::size_t count = core_->thread_states();
  for (std::size_t step = 1; step < count; ++step) {
    join_worker& victim = core_->joins_of((index_ + step) % count);
    if (victim.offers_.looks_empty()) {
      continue;
    }
    if (const offer taken = victim.offers_.steal(); !taken.empty()) {
      core_->count_offer_steal(index_);
      return taken;
    }
  }
  return {};
}

void join_worker::run_offer(offer taken, bool nested) {
  if (taken.is_task()) {
    // A stolen task is SCHEDULED and not EXECUTING (invariant S): an
    // ordinary run (nested: on top of the joiner that helps).
    core_->run_offered_task(index_, taken.task_slot(), nested);
    return;
  }
  // A callable: under the joiner's task, as if the joiner ran it
  // (current_waker()).
  worker_context& context = core_->context_of(index_);
  const restore_running_on_exit saved(context);
  offered_job& job = *taken.job();
  context.running = job.joiner_task;
  context.has_running = job.joiner_has_task;
  job.execute(job);  // the job is gone after this: its joiner may have returned
}

}  // namespace canopy::detail
