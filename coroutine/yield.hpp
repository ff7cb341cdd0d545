// yield_now() and wait_for_wake(): the two suspension points that do not
// wait on a particular source.
//
//   co_await canopy::yield_now();     // let other ready tasks run first
//   co_await canopy::wait_for_wake(); // suspend until any wake of this task
//
// yield_now ends the run with run_outcome::yielded: the worker puts the task
// on its local yield queue and resumes it after other ready work. Only that
// worker takes from its yield queue: if it then runs a long task, the
// yielded task waits for it even while other workers are idle
// (docs/correctness.md, "Known problems").
//
// wait_for_wake ends the run with run_outcome::suspended and no wait_link,
// so *any* wake resumes it: a waker.wake() from any thread, including one
// that arrived while the task was still running (the core re-runs a task
// woken during its run once). It is the building block for custom waits:
// publish current_waker() somewhere, then wait in a loop on your condition:
//
//   while (!ready.load()) co_await canopy::wait_for_wake();
//
// Wakes are not counted and stale ones are possible (a wake meant for an
// earlier wait), so always re-check the condition.
#pragma once

#include <coroutine>

#include "../executor/task_slot.hpp"
#include "task.hpp"

namespace canopy {

namespace detail {

template <detail::run_outcome Outcome>
struct bare_suspend {
  using canopy_awaiter = void;
  using canopy_region_check_at_suspend = void;
  bool await_ready() const noexcept { return false; }
  template <class Promise>
  void await_suspend(std::coroutine_handle<Promise> self) {
    task_context& context = context_to_suspend(self);
    context.suspend_on(self, wait_kind::none, nullptr);
    context.signal = Outcome;
  }
  void await_resume() const noexcept {}
};

}  // namespace detail

[[nodiscard]] inline detail::bare_suspend<detail::run_outcome::yielded> yield_now() noexcept {
  return {};
}
[[nodiscard]] inline detail::bare_suspend<detail::run_outcome::suspended> wait_for_wake() noexcept {
  return {};
}

}  // namespace canopy
