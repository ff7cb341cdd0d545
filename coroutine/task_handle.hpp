// task_handle<T> — the join handle of a spawned coroutine task or fiber.
//
// It *is* a canopy::join_handle<T> (public base: join(), ready(), detach(),
// co_await, this_fiber::await all work on it, and it converts to a plain
// join_handle<T> by move). It adds the task's identity, so that cancel()
// can wake a task that is suspended:
//   * cancel() before the task starts: it never runs; join() throws
//     task_cancelled.
//   * cancel() while it is suspended: the next run destroys it instead of
//     resuming it — a coroutine's frame is destroyed (its destructors run),
//     a fiber's stack is unwound — and join() throws task_cancelled. If it
//     waits on another task's join handle, that task is asked to cancel too,
//     a coroutine's frame is destroyed at once (only its task id is
//     registered there), a fiber's stack when that task has ended (the
//     wait_link inside the stack cannot be taken back earlier).
//   * cancel() while it runs: it is destroyed at its next suspension point.
// join_handle<T>::cancel() on the base (or after converting) only sets the
// request; a suspended task then notices at its next wake.
#pragma once

#include <utility>

#include "../executor/executor_core.hpp"
#include "../executor/join_handle.hpp"
#include "../executor/task_slot.hpp"

namespace canopy {

template <class T>
class task_handle : public join_handle<T> {
 public:
  task_handle() noexcept = default;
  task_handle(join_state<T>* state, executor_core* core, task_id id) noexcept
      : join_handle<T>(state), core_(core), id_(id) {}

  // Request cancellation and wake the task so that it sees the request.
  // True if the request was registered before the task completed.
  bool cancel() noexcept {
    const bool registered = join_handle<T>::cancel();
    if (registered && core_ != nullptr) {
      core_->schedule(id_);  // stale (already finished) is a no-op
    }
    return registered;
  }

  [[nodiscard]] task_id id() const noexcept { return id_; }
  [[nodiscard]] executor_core* core() const noexcept { return core_; }

 private:
  executor_core* core_ = nullptr;
  task_id id_{};
};

}  // namespace canopy
