// co_await canopy::wait_on(source): a coroutine task waits on a custom wait
// source. The contract a source keeps (ready, arm, disarm, result) is in
// wait/wait_source.hpp; the fiber form is this_fiber::wait_on, beside
// the fibers.
#pragma once

#include <coroutine>
#include <type_traits>
#include <utility>

#include "../wait/wait_source.hpp"
#include "../wait/waker.hpp"
#include "promise_base.hpp"
#include "task_context.hpp"

namespace canopy {

namespace detail {

// Source is W& (wait_on on an lvalue: the caller's object) or W (an rvalue,
// moved into the awaiter, which lives in the coroutine frame).
template <class Source>
class wait_on_awaiter {
  using source_type = std::remove_reference_t<Source>;

 public:
  using canopy_awaiter = void;
  using canopy_region_check_at_suspend = void;

  explicit wait_on_awaiter(Source&& source) : source_(std::forward<Source>(source)) {}

  bool await_ready() noexcept { return source_.ready(); }

  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> self) {
    task_context& context = context_to_suspend(self);
    // Recorded before arm(): a wake from arm() (or from another thread right
    // after it) re-runs the task, and the body then checks ready().
    context.suspend_on(self, wait_kind::custom, &source_, &ops);
    if (!source_.arm(current_waker())) {
      context.clear_wait();
      return false;
    }
    armed_ = true;
    return true;
  }

  decltype(auto) await_resume() {
    if (armed_) {
      armed_ = false;
      source_.disarm();
    }
    return source_.result();
  }

 private:
  static bool ready_entry(void* source) noexcept {
    return static_cast<source_type*>(source)->ready();
  }
  static void disarm_entry(void* source) noexcept { static_cast<source_type*>(source)->disarm(); }
  static constexpr custom_wait_ops ops{&ready_entry, &disarm_entry,
                                       wait_completion_kept<source_type>};

  Source source_;
  bool armed_ = false;
};

}  // namespace detail

// co_await canopy::wait_on(source): suspend the running task until
// source.ready(); returns source.result(). Only inside a canopy::task (a
// fiber uses canopy::this_fiber::wait_on).
template <class W>
requires wait_source<std::remove_reference_t<W>>
[[nodiscard]] detail::wait_on_awaiter<W> wait_on(W&& source) {
  return detail::wait_on_awaiter<W>(std::forward<W>(source));
}

}  // namespace canopy
