// Timed waits for C++20 coroutine tasks:
//
//   co_await canopy::sleep_for(5ms);
//   co_await canopy::sleep_until(deadline);
//   auto got = co_await canopy::with_timeout(100ms, some_awaitable);
//   if (!got) { /* got.error() == canopy::io::errc::timed_out */ } else use(*got);
//
// The executor running the task must have a timer queue attached (the
// reactor attaches one; io/timer_thread.hpp is a stand-alone driver).
// Outside a task, or with no queue, these throw std::logic_error.
//
// A sleep is a wait source (io/timer_queue.hpp's entry inside the awaiting
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
//     handle): x is awaited by a spawned child task; on timeout the child is
//     cancelled (a suspended child is destroyed, a running one at its next
//     suspension) and its result dropped.
// The result is io::timeout_result<T>: the value, or the error
// errc::timed_out. An exception from x is rethrown.
#pragma once

#include <chrono>
#include <optional>
#include <system_error>
#include <type_traits>
#include <utility>

#include "../coroutine/spawn.hpp"
#include "../coroutine/task.hpp"
#include "../coroutine/task_handle.hpp"
#include "../coroutine/waker.hpp"
#include "../coroutine/yield.hpp"
#include "timer_error.hpp"
#include "timer_queue.hpp"

namespace canopy {

namespace io {

// The wait source of one deadline on one timer queue. Must not move while
// armed (it lives in the awaiting frame or fiber stack).
class timer_wait {
 public:
  using clock = timer_queue::clock;

  timer_wait(timer_queue& queue, clock::time_point deadline) noexcept
      : queue_(&queue), deadline_(deadline) {}
  explicit timer_wait(clock::time_point deadline) : timer_wait(timer_queue::current(), deadline) {}
  timer_wait(const timer_wait&) = delete;
  timer_wait& operator=(const timer_wait&) = delete;

  [[nodiscard]] bool ready() const noexcept {
    return entry_.has_fired() || clock::now() >= deadline_;
  }
  // False (nothing registered) when the deadline has passed.
  [[nodiscard]] bool arm(const waker& target) { return queue_->arm(entry_, deadline_, target); }
  void disarm() noexcept { queue_->disarm(entry_); }
  void result() const noexcept {}

  [[nodiscard]] clock::time_point deadline() const noexcept { return deadline_; }

 private:
  timer_queue* queue_;
  clock::time_point deadline_;
  timer_queue::entry entry_;
};

// The value of an awaitable, or errc::timed_out.
template <class T>
class [[nodiscard]] timeout_result {
 public:
  timeout_result(T value) : value_(std::move(value)) {}     // NOLINT: implicit, as optional
  timeout_result(std::error_code error) : error_(error) {}  // NOLINT

  [[nodiscard]] bool has_value() const noexcept { return value_.has_value(); }
  explicit operator bool() const noexcept { return has_value(); }
  [[nodiscard]] std::error_code error() const noexcept { return error_; }
  T& operator*() & noexcept { return *value_; }
  T&& operator*() && noexcept { return std::move(*value_); }
  T* operator->() noexcept { return &*value_; }
  // The value; throws std::system_error(errc::timed_out) after a timeout.
  T& value() & {
    if (!value_) {
      throw std::system_error(error_, "canopy::with_timeout");
    }
    return *value_;
  }

 private:
  std::optional<T> value_;
  std::error_code error_;
};

template <>
class [[nodiscard]] timeout_result<void> {
 public:
  timeout_result() noexcept = default;
  timeout_result(std::error_code error) : error_(error) {}  // NOLINT

  [[nodiscard]] bool has_value() const noexcept { return !error_; }
  explicit operator bool() const noexcept { return has_value(); }
  [[nodiscard]] std::error_code error() const noexcept { return error_; }
  void value() const {
    if (error_) {
      throw std::system_error(error_, "canopy::with_timeout");
    }
  }

 private:
  std::error_code error_;
};

namespace detail {

template <class W>
concept wait_source = requires(W& source, const waker& target) {
  { source.ready() } -> std::convertible_to<bool>;
  { source.arm(target) } -> std::convertible_to<bool>;
  source.disarm();
  source.result();
};

// Disarms a wait source when the waiting frame ends, however it ends.
template <class W>
struct disarm_guard {
  explicit disarm_guard(W* armed) noexcept : source(armed) {}
  disarm_guard(const disarm_guard&) = delete;
  disarm_guard& operator=(const disarm_guard&) = delete;
  ~disarm_guard() {
    if (source != nullptr) {
      source->disarm();
    }
  }
  W* source;
};

// Waits on a wait source in a coroutine task: arm with the task's waker,
// then suspend until a wake finds it ready (wakes may be stale: re-check).
template <wait_source W>
task<decltype(std::declval<W&>().result())> wait_on_source(W& source) {
  if (!source.ready() && source.arm(current_waker())) {
    const disarm_guard<W> guard(&source);
    while (!source.ready()) {
      co_await wait_for_wake();
    }
  }
  co_return source.result();
}

// A deadline raced against another wait source.
template <wait_source W>
class timed_source {
 public:
  using value_type = decltype(std::declval<W&>().result());

  timed_source(W& inner, timer_queue::clock::time_point deadline)
      : inner_(&inner), timer_(deadline) {}

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
    return timeout_result<value_type>(make_error_code(io::errc::timed_out));
  }

 private:
  W* inner_;
  timer_wait timer_;
  bool inner_armed_ = false;
  bool timer_armed_ = false;
};

// The child that awaits a task for the general with_timeout; it wakes the
// parent when it ends, however it ends (a wake after the parent moved on is
// a stale wake, harmless).
template <class T>
task<T> await_and_wake(task<T> work, waker parent) {
  struct wake_on_exit {
    explicit wake_on_exit(const waker& parent) noexcept : target(parent) {}
    waker target;
    wake_on_exit(const wake_on_exit&) = delete;
    wake_on_exit& operator=(const wake_on_exit&) = delete;
    ~wake_on_exit() { target.wake(); }
  } const on_exit(parent);
  co_return co_await std::move(work);
}

// Ready when a spawned child has ended. The child itself wakes the waiter,
// so arming registers nothing.
template <class T>
struct child_done_source {
  task_handle<T>* handle;
  [[nodiscard]] bool ready() const noexcept { return handle->ready(); }
  [[nodiscard]] bool arm(const waker& /*target*/) const noexcept { return !handle->ready(); }
  void disarm() const noexcept {}
  void result() const noexcept {}
};

}  // namespace detail

}  // namespace io

// Suspend the calling task until `deadline` (at once if it has passed).
inline task<void> sleep_until(io::timer_queue::clock::time_point deadline) {
  io::timer_wait wait(deadline);
  co_await io::detail::wait_on_source(wait);
}

template <class Rep, class Period>
task<void> sleep_for(std::chrono::duration<Rep, Period> duration) {
  return sleep_until(io::timer_queue::clock::now() +
                     std::chrono::ceil<io::timer_queue::clock::duration>(duration));
}

// with_timeout on a wait source: the source's result, or errc::timed_out.
template <class Rep, class Period, io::detail::wait_source W>
task<io::timeout_result<decltype(std::declval<W&>().result())>> with_timeout(
    std::chrono::duration<Rep, Period> duration, W& source) {
  io::detail::timed_source<W> timed(
      source, io::timer_queue::clock::now() +
                  std::chrono::ceil<io::timer_queue::clock::duration>(duration));
  co_return co_await io::detail::wait_on_source(timed);
}

// with_timeout on a task: awaited by a child task, cancelled on timeout (a
// suspended child is destroyed at once, a running one at its next
// suspension point).
template <class Rep, class Period, class T>
task<io::timeout_result<T>> with_timeout(std::chrono::duration<Rep, Period> duration,
                                         task<T> work) {
  const auto deadline =
      io::timer_queue::clock::now() + std::chrono::ceil<io::timer_queue::clock::duration>(duration);
  task_handle<T> child =
      canopy::spawn(io::detail::await_and_wake(std::move(work), current_waker()));
  io::detail::child_done_source<T> done{&child};
  io::detail::timed_source<io::detail::child_done_source<T>> timed(done, deadline);
  const io::timeout_result<void> finished = co_await io::detail::wait_on_source(timed);
  if (!finished) {
    child.cancel();  // dropped with the handle: detached
    co_return finished.error();
  }
  if constexpr (std::is_void_v<T>) {
    co_await child;
    co_return io::timeout_result<void>();
  } else {
    co_return co_await child;
  }
}

}  // namespace canopy
