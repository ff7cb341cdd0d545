// waker — a copyable, thread-safe handle that makes one task runnable.
//
// A waker is (scheduler*, task_id); wake() is scheduler::schedule(id):
//   * from any thread, including threads the executor does not own;
//   * after the task finished, a no-op that returns false (the slot's
//     generation moved on, so a recycled slot's new task is never woken).
//     The worker retires the slot just after the task publishes its result,
//     so a wake racing a join that has only just returned may still return
//     true: that wake is absorbed, and a finished task never runs again;
//   * while the task runs, the task runs once more after this run ends
//     (several wakes during one run still give one extra run);
//   * while the task is already runnable, absorbed.
// A waker must not outlive its executor (the core's arena is where the
// generation check happens).
//
// Waking a task that waits on something else (a join handle, an event) is
// harmless: its body sees its wait_link still armed (or the join state it
// awaits not ready) and does not resume it.
#pragma once

#include <stdexcept>

#include "../executor/scheduler.hpp"
#include "../executor/task_slot.hpp"

namespace canopy {

class waker {
 public:
  waker() noexcept = default;
  waker(detail::scheduler& core, detail::task_id id) noexcept : core_(&core), id_(id) {}

  // True if the task still existed (it is, or will be, run again).
  bool wake() const noexcept { return core_ != nullptr && core_->schedule(id_); }

  [[nodiscard]] bool valid() const noexcept { return core_ != nullptr; }
  [[nodiscard]] detail::task_id id() const noexcept { return id_; }
  [[nodiscard]] detail::scheduler* core() const noexcept { return core_; }

  friend bool operator==(const waker& a, const waker& b) noexcept {
    return a.core_ == b.core_ && a.id_.slot == b.id_.slot && a.id_.generation == b.id_.generation;
  }

 private:
  detail::scheduler* core_ = nullptr;
  detail::task_id id_{};
};

// The waker of the task running on this thread (a callable, a coroutine, a
// fiber). Throws std::logic_error outside a task.
inline waker current_waker() {
  detail::worker_context* worker = detail::current_worker();
  if (worker == nullptr || !worker->has_running) {
    throw std::logic_error("canopy::current_waker() called outside a running task");
  }
  return waker(*worker->core, worker->running);
}

}  // namespace canopy
