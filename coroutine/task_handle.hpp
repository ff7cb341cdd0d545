// task_handle<T> — the join handle of a spawned coroutine task or fiber.
//
// It *is* a canopy::join_handle<T> (public base: join(), wait_for(),
// ready(), cancel(), detach(), co_await and this_fiber::await all work on
// it, and it converts to a plain join_handle<T> by move, with no change of
// behaviour: cancel() wakes the task through either type). It adds the
// task's identity (id(), core()).
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

  [[nodiscard]] task_id id() const noexcept { return id_; }
  [[nodiscard]] executor_core* core() const noexcept { return core_; }

 private:
  executor_core* core_ = nullptr;
  task_id id_{};
};

}  // namespace canopy
