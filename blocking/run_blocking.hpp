// run_blocking — run a blocking call on a blocking_pool thread and wait for
// it without holding a worker (blocking/blocking_pool.hpp has the pool's
// rules; the fiber form is in blocking/blocking_fiber.hpp).
//
// How: the call is a blocking_call<R>, shared (std::shared_ptr) by the pool
// and the waiting task, so a call that ends after its task was cancelled
// stores into memory that is still alive. The task (a coroutine or a
// fiber) waits on it through a wait_link (wait/wait_link.hpp) that the
// call's end fires. The call may use the task's memory (fn borrows from
// its frame or its fiber's stack), so a task cancelled or destroyed while
// it waits leaves only as the link allows: its disarm (withdraw) requests
// the call's std::stop_token and takes the link back only if the call has
// not started (blocking_job::abandon_unstarted: then it never starts);
// once it started, the task stays until the call ends and fires the link
// (a cancelled task then ends on its worker; one destroyed at shutdown is
// freed by that fire, the frame handed over as for any link that cannot be
// taken back). So the task's handle reports the cancel only after fn
// returned. A call still queued also never starts once a cancel was
// requested for its task, before its worker acts on it, or once the
// executor's shutdown began (blocking_job::try_start,
// blocking/blocking_pool.hpp).
#pragma once

#include <atomic>
#include <concepts>
#include <coroutine>
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
#include "../wait/wait_link.hpp"
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

  // The waiting task's side (its worker).
  [[nodiscard]] bool ready() const noexcept {
    // Pairs with the release store in finish(): value_ / error_ are written.
    return done_.load(std::memory_order_acquire);
  }
  // Registers the task's armed link; false if the call ended first (then
  // nothing is registered and the task must not suspend).
  bool register_link(wait_link& link) noexcept {
    const std::lock_guard lock(mutex_);
    if (done_.load(std::memory_order_relaxed)) {  // written under this mutex
      return false;
    }
    link_ = &link;
    return true;
  }
  // The link's disarm: the task is cancelled or destroyed while it waits.
  // True (the link taken back, no fire() comes) only if the call never
  // started and now never starts; false if finish() took the link (its
  // fire() is coming) or the call is running (it fires at its end).
  static bool withdraw(wait_link& link) noexcept {
    auto& self = *static_cast<blocking_call*>(link.source);
    const std::lock_guard lock(self.mutex_);
    if (self.link_ != &link) {
      return false;
    }
    self.stop_.request_stop();
    if (!self.abandon_unstarted()) {
      return false;
    }
    self.link_ = nullptr;
    return true;
  }
  // The task is gone before it waited (its wait never began).
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
    wait_link* waiting = nullptr;
    {
      const std::lock_guard lock(mutex_);
      // Pairs with the acquire load in ready(): the outcome above is visible.
      done_.store(true, std::memory_order_release);
      waiting = std::exchange(link_, nullptr);
    }
    // Outside the mutex: the fire may free the task's frame (a task
    // destroyed while this ran), whose wait holds a reference to this call;
    // the pool thread holds another until run() returns.
    if (waiting != nullptr) {
      wait_link::fire(waiting);
    }
  }

  F fn_;
  std::stop_source stop_;
  std::optional<stored_type> value_;
  std::exception_ptr error_;
  std::atomic<bool> done_{false};
  std::mutex mutex_;
  wait_link* link_ = nullptr;  // the waiting task's, until finish() or withdraw()
};

// The wait on one call, shared by coroutines and fibers (as join_wait is):
// ready(), link(), arm() (false: ended first), result(). It owns a
// reference to the call; if the task is destroyed before it waited, its
// destructor abandons the call.
template <class F>
class blocking_wait {
 public:
  explicit blocking_wait(std::shared_ptr<blocking_call<F>> call) noexcept
      : call_(std::move(call)) {
    link_.disarm = &blocking_call<F>::withdraw;
    link_.source = call_.get();
  }
  // g++ may move an awaiter before it suspends; nothing in the link is live.
  blocking_wait(blocking_wait&& other) noexcept : blocking_wait(std::move(other.call_)) {}
  blocking_wait& operator=(blocking_wait&&) = delete;
  ~blocking_wait() {
    if (call_ != nullptr && !call_->ready()) {
      call_->abandon();
    }
  }

  [[nodiscard]] bool ready() const noexcept { return call_->ready(); }
  [[nodiscard]] wait_link& link() noexcept { return link_; }
  [[nodiscard]] bool arm() noexcept {
    link_.arm_for_current_task();
    return call_->register_link(link_);
  }
  decltype(auto) result() { return call_->take(); }

 private:
  std::shared_ptr<blocking_call<F>> call_;
  wait_link link_;
};

// co_await of a blocking_wait in a coroutine task: a link wait, as
// coroutine/event_await.hpp's.
template <class F>
class blocking_await {
 public:
  using canopy_awaiter = void;

  explicit blocking_await(blocking_wait<F>& wait) noexcept : wait_(&wait) {}

  [[nodiscard]] bool await_ready() const noexcept { return wait_->ready(); }
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> self) {
    task_context& context = context_to_suspend(self);
    context.suspend_on(self, wait_kind::link, &wait_->link());
    if (!wait_->arm()) {
      context.clear_wait();
      return false;
    }
    return true;
  }
  decltype(auto) await_resume() { return wait_->result(); }

 private:
  blocking_wait<F>* wait_;
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
  co_return co_await blocking_await<F>(wait);
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
// effect (include/canopy/blocking.hpp says when that is); a started fn may
// use the task's memory: a cancelled task ends only after fn returned.
template <class F>
requires detail::blocking_callable<std::decay_t<F>>
[[nodiscard]] task<detail::blocking_result_t<std::decay_t<F>>> run_blocking(F&& fn) {
  return detail::run_blocking_task(
      detail::submit_blocking(std::decay_t<F>(std::forward<F>(fn)), "canopy::run_blocking"));
}

}  // namespace canopy
