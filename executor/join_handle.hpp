// join_handle<T> — the caller's end of a spawned task: what pool.spawn,
// canopy::spawn and try_spawn return for a callable, a coroutine or a fiber
// alike (join_handle<T> is another name for it, wait/task_handle.hpp).
//
// Contract:
//   * get() blocks the calling thread until the task ends, then returns its
//     value, rethrows its exception, or throws canopy::task_cancelled if it
//     was destroyed without completing. Call it from a thread that is not a
//     worker of any canopy executor: on a worker thread it throws
//     std::system_error with errc::worker_thread instead of blocking that
//     worker (inside a task, co_await the handle or this_fiber::await it).
//   * wait_for(duration) / wait_until(time_point) block like get() but at
//     most until the deadline, and return whether the task has ended (then
//     get() returns at once). Same thread rule as get(). A zero or negative
//     duration, or a passed time point (time_point::min() too), only
//     polls; duration::max() or time_point::max() waits without a limit.
//   * On an executor with no owned workers (worker_count = 0), get() and
//     wait_*() run the executor's tasks on the calling thread while they
//     wait, as run_for() would (unless another thread is running it then:
//     they just wait for that one).
//   * ready() never blocks.
//   * cancel() asks the task to stop and wakes it if it is suspended, so it
//     is destroyed promptly: a task cancelled before it starts never runs; a
//     suspended coroutine's frame is destroyed (its destructors run), a
//     suspended fiber's stack is unwound; a running task is destroyed at its
//     next suspension point (a plain callable that already started runs to
//     its end), and so is a coroutine whose wait completed in a way that
//     cannot be undone before the cancel landed (a receiver took the value
//     it sent: wait_source.hpp, completion_kept): it resumes with that. get() then throws task_cancelled, also when a running task
//     reached its end after the request (what it returned or threw is
//     discarded). Returns true if the request came before the task
//     completed; false leaves the outcome as it was.
//   * id() and core() name the task, for a waker (canopy::waker(*core(),
//     id())); a handle whose id was asked for keeps its task a task of its
//     own when a coroutine awaits it before it started (otherwise the
//     awaiter may run it inside itself and retire the id:
//     coroutine/join_await.hpp). An empty handle's core() is null.
//   * Dropping (destroying) a handle, or detach(), detaches the task: it still
//     runs; its result is discarded. If it then ends with an exception, the
//     exception goes to executor_config::on_detached_exception, as for any
//     detached task, unless the task was cancelled (cancel() gave its outcome
//     up). (A handle dropped after the task ended discards what it holds,
//     exception included.)
// A handle is move-only and used by one thread at a time. It may outlive its
// executor: after the executor's shutdown every task has ended, so get()
// returns or throws at once.
#pragma once

#include <chrono>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

#include "deadline.hpp"
#include "errors.hpp"
#include "join_state.hpp"
#include "scheduler.hpp"
#include "task_slot.hpp"

namespace canopy {

namespace detail {
template <class T, class Handle>
class join_awaiter;
}  // namespace detail

template <class T>
class join_handle {
 public:
  join_handle() noexcept = default;
  join_handle(detail::join_state<T>* state, detail::scheduler* core, detail::task_id id) noexcept
      : state_(state), core_(core), id_(id) {}
  join_handle(join_handle&& other) noexcept
      : state_(std::exchange(other.state_, nullptr)),
        core_(std::exchange(other.core_, nullptr)),
        id_(other.id_) {}
  join_handle& operator=(join_handle&& other) noexcept {
    if (this != &other) {
      detach();
      state_ = std::exchange(other.state_, nullptr);
      core_ = std::exchange(other.core_, nullptr);
      id_ = other.id_;
    }
    return *this;
  }
  join_handle(const join_handle&) = delete;
  join_handle& operator=(const join_handle&) = delete;
  ~join_handle() { detach(); }

  [[nodiscard]] bool valid() const noexcept { return state_ != nullptr; }
  [[nodiscard]] bool ready() const noexcept { return state_ != nullptr && state_->ready(); }

  T get() {
    check_blocking_allowed("get()");
    state_->wait_blocking();
    detail::join_state<T>* state = std::exchange(state_, nullptr);
    struct release_on_exit {
      detail::join_state<T>* state;
      ~release_on_exit() { state->release_ref(); }
    } release{state};
    return state->take();
  }

  // Wait until the task ends or the deadline passes; true if it ended.
  template <class Clock, class Duration>
  bool wait_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    check_blocking_allowed("wait_until()");
    if (state_->ready()) {
      return true;
    }
    // Converted to the steady clock once, saturated (deadline.hpp):
    // time_point::max() waits without a limit, a passed one only polls.
    return wait_steady(detail::steady_deadline_at(deadline));
  }
  template <class Rep, class Period>
  bool wait_for(const std::chrono::duration<Rep, Period>& timeout) {
    check_blocking_allowed("wait_for()");
    if (state_->ready()) {
      return true;
    }
    return wait_steady(detail::steady_deadline_after(timeout));
  }

  bool cancel() noexcept { return state_ != nullptr && state_->cancel_and_wake(); }

  [[nodiscard]] detail::task_id id() const noexcept {
    if (state_ != nullptr) {
      state_->share_identity();
    }
    return id_;
  }
  [[nodiscard]] detail::scheduler* core() const noexcept { return core_; }

  void detach() noexcept {
    if (state_ != nullptr) {
      std::exchange(state_, nullptr)->detach_and_release();
    }
  }

  // For awaiters (coroutine tasks): the shared completion record.
  [[nodiscard]] detail::join_state<T>* state() const noexcept { return state_; }

 private:
  void check_blocking_allowed(const char* what) const {
    if (state_ == nullptr) {
      throw std::logic_error(std::string("canopy::join_handle::") + what + " on an empty handle");
    }
    if (detail::current_worker() != nullptr) {
      throw std::system_error(
          make_error_code(errc::worker_thread),
          std::string("canopy::join_handle::") + what +
              " called on a worker thread of a canopy executor would block that worker; "
              "co_await the handle (or this_fiber::await it) inside a task instead");
    }
  }
  bool wait_steady(std::chrono::steady_clock::time_point deadline) noexcept {
    const auto since_epoch =
        std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch()).count();
    return state_->wait_blocking_until(since_epoch < 0 ? 0 : since_epoch);
  }

  // A coroutine awaiting the handle that took the task over before it
  // started (coroutine/join_await.hpp) owns the record from then on: the
  // handle lets go of it without releasing its reference.
  template <class, class>
  friend class detail::join_awaiter;
  [[nodiscard]] detail::join_state<T>* let_go() noexcept { return std::exchange(state_, nullptr); }

  detail::join_state<T>* state_ = nullptr;
  detail::scheduler* core_ = nullptr;
  detail::task_id id_{};
};

}  // namespace canopy
