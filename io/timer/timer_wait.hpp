// Timed waits for C++20 coroutine tasks:
//
//   co_await canopy::sleep_for(5ms);
//   co_await canopy::sleep_until(deadline);
//   auto got = co_await canopy::with_timeout(100ms, work());    // a task<T>
//   if (!got) { /* got.error() == canopy::io::errc::timed_out */ } else use(*got);
//
// The executor running the task must have a timer queue attached (the
// reactor attaches one; io/timer/timer_thread.hpp is a stand-alone driver).
// Outside a task, or with no queue, these throw std::logic_error.
//
// A sleep is a wait source (io/timer/timer_queue.hpp's entry inside the awaiting
// frame): arming links the entry into the executor's timing wheel, the
// queue's driver wakes the task at the deadline, and a task cancelled or
// destroyed while it sleeps takes its entry back (disarm) on the way out,
// so a pending timer never outlives its waiter.
//
// with_timeout(d, x):
//   * x a wait source (ready/arm/disarm/result, as timer_wait): both are
//     armed with the task's waker; whichever is ready first wins, the other
//     is disarmed. No allocation.
//   * x anything else a canopy::task can co_await (a task<T>, a join
//     handle, an async_event, a channel's recv()): x is awaited by a
//     spawned child task (an lvalue where it is, an rvalue moved into the
//     child), raced against the
//     deadline (canopy::race); on timeout the child is
//     cancelled (a suspended child is destroyed, a running one at its next
//     suspension) and with_timeout returns once the child's frame is gone.
//     A child that returned a value meanwhile won the race: that value is
//     returned, never dropped. Any other outcome (task_cancelled, an
//     exception thrown after the deadline) is dropped: errc::timed_out.
// The result is io::timeout_result<T>: the value, or the error
// errc::timed_out. An exception from x is rethrown.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <system_error>
#include <type_traits>
#include <utility>

#include "../../coroutine/custom_wait.hpp"
#include "../../coroutine/race.hpp"
#include "../../coroutine/spawn.hpp"
#include "../../coroutine/task.hpp"
#include "../../executor/deadline.hpp"
#include "../../wait/task_handle.hpp"
#include "../../wait/waker.hpp"
#include "timer_error.hpp"
#include "timer_queue.hpp"

namespace canopy {

namespace io {

namespace detail {

// The wait source of one deadline on one timer queue. Must not move while
// armed (it lives in the awaiting frame or fiber stack).
class timer_wait {
 public:
  using clock = timer_queue::clock;

  timer_wait(timer_queue& queue, clock::time_point deadline) noexcept
      : queue_(&queue), deadline_(deadline) {}
  explicit timer_wait(clock::time_point deadline) : timer_wait(timer_queue::current(), deadline) {}
  // Moving is for handing an unarmed wait to canopy::wait_on (the entry is
  // not copied: it is only ever linked once armed, in its final place).
  timer_wait(timer_wait&& other) noexcept : queue_(other.queue_), deadline_(other.deadline_) {}
  timer_wait& operator=(timer_wait&&) = delete;

  [[nodiscard]] bool ready() const noexcept {
    return entry_.has_fired() || clock::now() >= deadline_;
  }
  // Registers the timer (wait_on asked ready() first, so the deadline had
  // not passed then; if it has since, the next expiry fires it at once).
  [[nodiscard]] bool arm(const waker& target) { return queue_->arm(entry_, deadline_, target); }
  void disarm() noexcept { queue_->disarm(entry_); }
  void result() const noexcept {}

  [[nodiscard]] clock::time_point deadline() const noexcept { return deadline_; }

 private:
  timer_queue* queue_;
  clock::time_point deadline_;
  timer_queue::entry entry_;
};

}  // namespace detail

// The value of an awaitable, or errc::timed_out.
template <class T>
class [[nodiscard]] timeout_result {
 public:
  timeout_result(T value) : value_(std::move(value)) {}  // NOLINT: implicit, as optional
  [[nodiscard]] static timeout_result timed_out() { return timeout_result(); }

  [[nodiscard]] bool has_value() const noexcept { return value_.has_value(); }
  explicit operator bool() const noexcept { return has_value(); }
  // errc::timed_out after a timeout, else no error.
  [[nodiscard]] std::error_code error() const noexcept {
    return value_ ? std::error_code() : make_error_code(errc::timed_out);
  }
  T& operator*() & noexcept { return *value_; }
  const T& operator*() const& noexcept { return *value_; }
  T&& operator*() && noexcept { return std::move(*value_); }
  T* operator->() noexcept { return &*value_; }
  const T* operator->() const noexcept { return &*value_; }
  // The value; throws std::system_error(errc::timed_out) after a timeout.
  T& value() & {
    if (!value_) {
      throw std::system_error(make_error_code(errc::timed_out), "canopy::with_timeout");
    }
    return *value_;
  }

 private:
  timeout_result() = default;
  std::optional<T> value_;
};

template <>
class [[nodiscard]] timeout_result<void> {
 public:
  timeout_result() noexcept = default;
  [[nodiscard]] static timeout_result timed_out() noexcept {
    timeout_result result;
    result.timed_out_ = true;
    return result;
  }

  [[nodiscard]] bool has_value() const noexcept { return !timed_out_; }
  explicit operator bool() const noexcept { return has_value(); }
  [[nodiscard]] std::error_code error() const noexcept {
    return timed_out_ ? make_error_code(errc::timed_out) : std::error_code();
  }
  void value() const {
    if (timed_out_) {
      throw std::system_error(make_error_code(errc::timed_out), "canopy::with_timeout");
    }
  }

 private:
  bool timed_out_ = false;
};

namespace detail {

// A deadline raced against another wait source.
template <canopy::wait_source W>
class timed_source {
 public:
  using value_type = decltype(std::declval<W&>().result());

  timed_source(W& inner, timer_queue::clock::time_point deadline)
      : inner_(&inner), timer_(deadline) {}
  timed_source(timed_source&& other) noexcept = default;  // before arming (wait_on)
  timed_source& operator=(timed_source&&) = delete;

  [[nodiscard]] bool ready() const noexcept { return inner_->ready() || timer_.ready(); }
  [[nodiscard]] bool arm(const waker& target) {
    inner_armed_ = inner_->arm(target);
    if (!inner_armed_) {
      return false;  // the inner source is ready
    }
    timer_armed_ = timer_.arm(target);
    if (!timer_armed_) {
      inner_->disarm();  // the deadline passed: ready() is true
      inner_armed_ = false;
      return false;
    }
    return true;
  }
  void disarm() noexcept {
    if (inner_armed_) {
      inner_->disarm();
      inner_armed_ = false;
    }
    if (timer_armed_) {
      timer_.disarm();
      timer_armed_ = false;
    }
  }
  timeout_result<value_type> result() {
    if (inner_->ready()) {
      if constexpr (std::is_void_v<value_type>) {
        inner_->result();
        return {};
      } else {
        return timeout_result<value_type>(inner_->result());
      }
    }
    return timeout_result<value_type>::timed_out();
  }

 private:
  W* inner_;
  timer_wait timer_;
  bool inner_armed_ = false;
  bool timer_armed_ = false;
};

// The timer's contender in the general with_timeout's race.
inline task<void> sleep_contender(timer_queue::clock::time_point deadline);

}  // namespace detail

}  // namespace io

// Suspend the calling task until `deadline` (not at all if it has passed).
[[nodiscard]] inline auto sleep_until(io::detail::timer_queue::clock::time_point deadline) {
  return canopy::wait_on(io::detail::timer_wait(deadline));
}

template <class Rep, class Period>
[[nodiscard]] auto sleep_for(std::chrono::duration<Rep, Period> duration) {
  return sleep_until(canopy::detail::steady_deadline_after(duration));
}

// with_timeout on a wait source (an lvalue that outlives the await): the
// source's result, or errc::timed_out.
template <class Rep, class Period, canopy::wait_source W>
[[nodiscard]] auto with_timeout(std::chrono::duration<Rep, Period> duration, W& source) {
  return canopy::wait_on(
      io::detail::timed_source<W>(source, canopy::detail::steady_deadline_after(duration)));
}

// with_deadline: with_timeout with an absolute deadline.
template <canopy::wait_source W>
[[nodiscard]] auto with_deadline(io::detail::timer_queue::clock::time_point deadline, W& source) {
  return canopy::wait_on(io::detail::timed_source<W>(source, deadline));
}

// A temporary wait source would be gone while the timed wait still uses it:
// a compile error that says so, rather than a failed reference binding.
template <class Rep, class Period, canopy::wait_source W>
  requires(!std::is_lvalue_reference_v<W>)
auto with_timeout(std::chrono::duration<Rep, Period> /*duration*/, W&& /*source*/) {
  static_assert(std::is_lvalue_reference_v<W>,
                "canopy::with_timeout(duration, source): the wait source must be a named "
                "object that outlives the await (e.g. `canopy::io::readiness_wait "
                "readable(...); co_await canopy::with_timeout(5ms, readable);`); for a task, "
                "pass the task itself: with_timeout(5ms, work())");
}
template <canopy::wait_source W>
  requires(!std::is_lvalue_reference_v<W>)
auto with_deadline(io::detail::timer_queue::clock::time_point /*deadline*/, W&& /*source*/) {
  static_assert(std::is_lvalue_reference_v<W>,
                "canopy::with_deadline(deadline, source): the wait source must be a named "
                "object that outlives the await (e.g. `canopy::io::readiness_wait "
                "readable(...); co_await canopy::with_deadline(when, readable);`)");
}

// with_timeout on a task: `work` runs as a child task, raced against the
// deadline (canopy::race, <canopy/race.hpp>). Within the time: its value,
// or its exception rethrown. When the time is up the child is cancelled, as
// tokio's timeout drops its future: a suspended child is destroyed at once
// (its wait released, its destructors run), a running one at its next
// suspension; with_timeout returns only after the child's frame is gone.
// The child's completed result is never dropped: a child that returned a
// value before the cancel landed (it was already running when the deadline
// passed) gives that value, not errc::timed_out, so a read raced against
// the deadline never loses the bytes it took. Otherwise the result is
// errc::timed_out, and whatever else the child ended with is dropped (an
// exception thrown meanwhile goes nowhere, not to on_detached_exception).
// A task awaiting with_timeout that is cancelled or destroyed cancels the
// child too, and ends only after the child has ended, so the child may
// borrow from the awaiting task's frame.
template <class Rep, class Period, class T>
task<io::timeout_result<T>> with_timeout(std::chrono::duration<Rep, Period> duration,
                                         task<T> work) {
  const auto deadline = canopy::detail::steady_deadline_after(duration);
  auto ended = co_await canopy::race(std::move(work), io::detail::sleep_contender(deadline));
  if (!ended.template has_value<0>()) {
    co_return io::timeout_result<T>::timed_out();
  }
  if constexpr (std::is_void_v<T>) {
    co_return io::timeout_result<void>{};
  } else {
    co_return io::timeout_result<T>(std::move(ended.template get<0>()));
  }
}

namespace io::detail {

// What co_await of an A gives in a task, as a value (a reference result is
// copied out: the awaiter it refers into is gone when the child ends).
template <class A>
using awaited_value_t = std::remove_cvref_t<
    decltype(std::declval<std::remove_reference_t<canopy::detail::awaiter_of_t<A>>&>()
                 .await_resume())>;

// Any other awaitable a task may co_await (a join handle, an async_event, a
// channel's recv(), a mutex's lock()): not a task, not a wait source.
template <class A>
concept timed_awaitable =
    !canopy::detail::is_task<std::remove_cvref_t<A>>::value &&
    !canopy::wait_source<std::remove_cvref_t<A>> &&
    requires { typename awaited_value_t<A>; };

// The child task that awaits `awaitable`: an lvalue is awaited where it is
// (it outlives the await: the caller's object, e.g. a handle it keeps), an
// rvalue is moved into the child's frame.
template <class A>
task<awaited_value_t<A>> await_as_child(A awaitable) {
  if constexpr (std::is_lvalue_reference_v<A>) {
    co_return co_await awaitable;
  } else {
    co_return co_await std::move(awaitable);
  }
}

}  // namespace io::detail

// with_timeout on any other awaitable (a join handle, an async_event, a
// channel's recv(), ...): `co_await awaitable` runs as a child task raced
// against the deadline, as for a task above. At the deadline that child is
// cancelled: its wait is released. A join handle is consumed, as co_await
// consumes it (an lvalue one too), and its task is cancelled with the
// child, which ends only after that task ended (as a task's would).
template <class Rep, class Period, class A>
  requires io::detail::timed_awaitable<A>
task<io::timeout_result<io::detail::awaited_value_t<A>>> with_timeout(
    std::chrono::duration<Rep, Period> duration, A&& awaitable) {
  co_return co_await with_timeout(duration,
                                  io::detail::await_as_child<A>(std::forward<A>(awaitable)));
}

namespace io::detail {
inline task<void> sleep_contender(timer_queue::clock::time_point deadline) {
  co_await canopy::sleep_until(deadline);
}
}  // namespace io::detail

}  // namespace canopy
