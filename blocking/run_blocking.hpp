// run_blocking — run a blocking call on a blocking_pool thread and wait for
// it without holding a worker (blocking/blocking_pool.hpp has the pool's
// rules; the fiber form is in blocking/blocking_fiber.hpp).
//
// How: the call is a blocking_call<R>, shared (std::shared_ptr) by the pool
// and the waiting task, so a call that ends after its task was cancelled
// stores into memory that is still alive. The task waits on it through a
// wait source (coroutine/custom_wait.hpp): ready() reads `done_`, arm()
// registers the task's waker, disarm() unregisters it. The pool thread
// wakes the task under the call's mutex, and disarm takes the same mutex,
// so after disarm no wake is in flight: the waker never outlives the task
// (nor its executor, which destroys its suspended tasks before it goes).
// A disarm before the call ended means the task is gone: the call's
// std::stop_token is requested, and a call still queued never starts
// (blocking_job::may_start, which also refuses once a cancel was requested
// for the task, before its worker acts on it, or once the executor's
// shutdown began: blocking/blocking_pool.hpp).
#pragma once

#include <atomic>
#include <concepts>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

#include "../coroutine/await_all.hpp"
#include "../coroutine/coroutine.hpp"
#include "../executor/executor.hpp"
#include "blocking_pool.hpp"

namespace canopy {

namespace detail {

template <class F>
using blocking_result_t = typename std::conditional_t<std::is_invocable_v<F&, std::stop_token>,
                                                      std::invoke_result<F&, std::stop_token>,
                                                      std::invoke_result<F&>>::type;

template <class F>
inline constexpr bool blocking_callable =
    std::is_invocable_v<F&, std::stop_token> || std::is_invocable_v<F&>;

template <class F>
class blocking_call final : public blocking_job {
 public:
  using result_type = blocking_result_t<F>;
  using stored_type = std::conditional_t<std::is_void_v<result_type>, std::monostate, result_type>;

  blocking_call(F&& fn, std::shared_ptr<const detail::shutdown_flag> executor_shutdown,
                const detail::join_state_base* cancel_state)
      : blocking_job(std::move(executor_shutdown), cancel_state), fn_(std::move(fn)) {}

  void run() noexcept override {
    try {
      if constexpr (std::is_void_v<result_type>) {
        invoke();
        value_.emplace();
      } else {
        value_.emplace(invoke());
      }
    } catch (...) {
      error_ = std::current_exception();
    }
    finish();
  }

  void fail_shut_down() noexcept override {
    try {
      throw std::system_error(
          make_error_code(errc::shut_down),
          "canopy::run_blocking: the blocking pool shut down before the call ran");
    } catch (...) {
      error_ = std::current_exception();
    }
    stop_.request_stop();
    finish();
  }

  // The wait source's side (called by the waiting task's worker).
  [[nodiscard]] bool ready() const noexcept {
    // Pairs with the release store in finish(): value_ / error_ are written.
    return done_.load(std::memory_order_acquire);
  }
  bool arm(const waker& wake) {
    const std::lock_guard lock(mutex_);
    if (done_.load(std::memory_order_relaxed)) {  // written under this mutex
      return false;
    }
    waker_ = wake;
    return true;
  }
  void disarm() noexcept {
    const std::lock_guard lock(mutex_);
    waker_ = waker();
    if (!done_.load(std::memory_order_relaxed)) {  // written under this mutex
      abandon();
    }
  }
  // The task is gone before it armed (cancelled, or the wait never began).
  void abandon() noexcept {
    mark_abandoned();
    stop_.request_stop();
  }
  // Once, by the waiting task, after ready().
  result_type take() {
    if (error_) {
      // Moved out: the task then holds the exception's last reference, so
      // the pool thread, which may drop the call last, never frees the
      // exception while the task's handler still reads it (its reference
      // count lives in the uninstrumented C++ runtime, which
      // ThreadSanitizer cannot see), as join_state::take does.
      std::rethrow_exception(std::exchange(error_, nullptr));
    }
    if constexpr (!std::is_void_v<result_type>) {
      return std::move(*value_);
    }
  }

 private:
  decltype(auto) invoke() {
    if constexpr (std::is_invocable_v<F&, std::stop_token>) {
      return fn_(stop_.get_token());
    } else {
      return fn_();
    }
  }
  void finish() noexcept {
    const std::lock_guard lock(mutex_);
    // Pairs with the acquire load in ready(): the outcome above is visible.
    done_.store(true, std::memory_order_release);
    // Under the mutex: disarm() cannot return while this wake runs.
    waker_.wake();
    waker_ = waker();
  }

  F fn_;
  std::stop_source stop_;
  std::optional<stored_type> value_;
  std::exception_ptr error_;
  std::atomic<bool> done_{false};
  std::mutex mutex_;
  waker waker_;
};

// The wait source over one call (coroutine/custom_wait.hpp). It owns a
// reference to the call; if the wait never arms (the task is destroyed
// before it suspends), its destructor abandons the call.
template <class F>
class blocking_wait {
 public:
  explicit blocking_wait(std::shared_ptr<blocking_call<F>> call) noexcept
      : call_(std::move(call)) {}
  blocking_wait(blocking_wait&& other) noexcept = default;
  blocking_wait& operator=(blocking_wait&&) = delete;
  ~blocking_wait() {
    if (call_ != nullptr && !call_->ready()) {
      call_->abandon();
    }
  }

  [[nodiscard]] bool ready() const noexcept { return call_->ready(); }
  bool arm(const waker& wake) { return call_->arm(wake); }
  void disarm() noexcept { call_->disarm(); }
  decltype(auto) result() { return call_->take(); }

 private:
  std::shared_ptr<blocking_call<F>> call_;
};

// Checks the caller is in a task, then submits: the pool of that executor.
template <class F>
blocking_wait<F> submit_blocking(F&& fn, const char* what) {
  detail::worker_context* const worker = detail::current_worker();
  if (worker == nullptr || !worker->has_running) {
    throw std::logic_error(std::string(what) + " called outside a running canopy task");
  }
  if constexpr (std::is_constructible_v<bool, const F&>) {  // std::function, a pointer
    if (!static_cast<bool>(fn)) {
      throw std::invalid_argument(std::string(what) + ": an empty callable");
    }
  }
  auto call = std::make_shared<blocking_call<F>>(std::move(fn),
                                                 worker->core->shared_shutdown_flag(),
                                                 worker->core->running_cancel_state(*worker));
  blocking_pool::for_executor(*worker->core).submit(call);
  return blocking_wait<F>(std::move(call));
}

template <class F>
task<blocking_result_t<F>> run_blocking_task(blocking_wait<F> wait) {
  co_return co_await wait_on(wait);
}

}  // namespace detail

// co_await canopy::run_blocking(fn): run fn() — or fn(stop_token) if it
// takes a std::stop_token — on a thread of the executor's blocking pool;
// the task waits without holding its worker, then resumes on its executor
// with fn's value, or fn's exception rethrown. Only inside a running task of
// an executor (else std::logic_error, thrown by this call; an empty
// std::function or null pointer: std::invalid_argument). fn is submitted
// here, before the co_await; the pool's refusals (errc::shut_down, also
// once the executor's shutdown began; errc::at_capacity) are thrown here
// too. fn's stop_token is requested when the waiting task is destroyed or
// its cancel takes effect, or the pool shuts down. A queued fn never
// starts once its executor's shutdown began or its task's cancel took
// effect (include/canopy/blocking.hpp says when that is).
template <class F>
requires detail::blocking_callable<std::decay_t<F>>
[[nodiscard]] task<detail::blocking_result_t<std::decay_t<F>>> run_blocking(F&& fn) {
  return detail::run_blocking_task(
      detail::submit_blocking(std::decay_t<F>(std::forward<F>(fn)), "canopy::run_blocking"));
}

}  // namespace canopy
