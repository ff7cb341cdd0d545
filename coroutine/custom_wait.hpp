// Custom waits: the one way to make something of your own awaitable by
// Canopy tasks and fibers (readiness of a descriptor, a timer, a queue).
//
// Write a *wait source* W — an object that lives in the waiting task (a
// local of the coroutine or of the fiber) — with four members:
//
//   bool ready() noexcept;          // the wait is over. Any thread may make it
//                                   // true; once true it stays true.
//   bool arm(const canopy::waker&); // register the waker. The source calls
//                                   // waker.wake() (from any thread) after it
//                                   // makes ready() true. Return false if
//                                   // ready() is already true: then nothing
//                                   // stays registered and the task goes on.
//   void disarm() noexcept;         // unregister. Called exactly once for each
//                                   // arm() that returned true, when the wait
//                                   // ends for any reason: it completed, or the
//                                   // task is cancelled or destroyed (shutdown).
//                                   // After it returns the source must not
//                                   // touch W (a wake through a copy of the
//                                   // waker is harmless: stale wakes are no-ops).
//   R result();                     // after ready() (and disarm()): the value of
//                                   // the wait; may throw.
//
// and wait with
//
//   R value = co_await canopy::wait_on(source);        // in a canopy::task
//   R value = canopy::this_fiber::wait_on(source);     // in a fiber
//
// A wake that finds ready() false resumes nothing (the task stays
// suspended), so wakes may be spurious or stale; a wake while the task still
// runs (the source completed during arm()) re-runs it once. ready() and
// disarm() are called by the worker running or destroying the task, never
// at the same time as arm(). Because the source holds only a waker — a
// value naming the task and its slot generation, never a pointer into the
// task — a source that outlives the wait, or fires late, cannot touch freed
// memory; the waker must not outlive its executor (coroutine/waker.hpp).
// docs/coroutines.md has a complete example.
#pragma once

#include <concepts>
#include <coroutine>
#include <type_traits>
#include <utility>

#include "task.hpp"
#include "waker.hpp"

namespace canopy {

template <class W>
concept wait_source = requires(W& source, const waker& wake) {
  { source.ready() }
  noexcept->std::convertible_to<bool>;
  { source.arm(wake) } -> std::convertible_to<bool>;
  { source.disarm() }
  noexcept;
  source.result();
};

namespace detail {

// Source is W& (wait_on on an lvalue: the caller's object) or W (an rvalue,
// moved into the awaiter, which lives in the coroutine frame).
template <class Source>
class wait_on_awaiter {
  using source_type = std::remove_reference_t<Source>;

 public:
  using canopy_awaiter = void;

  explicit wait_on_awaiter(Source&& source) : source_(std::forward<Source>(source)) {}

  bool await_ready() noexcept { return source_.ready(); }

  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> self) {
    task_context& context = context_of(self);
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
  static constexpr custom_wait_ops ops{&ready_entry, &disarm_entry};

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
