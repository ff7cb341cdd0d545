// Awaitables that are not Canopy's, inside a canopy::task.
//
// A standard awaitable (another library's, or a hand-written one) gets a
// std::coroutine_handle<> in await_suspend and later calls resume() on it,
// often from its own thread. Resuming a task's coroutine there would run
// the task off its executor. So every co_await in a canopy::task goes
// through promise_base::await_transform (coroutine/promise_base.hpp):
// Canopy's own awaiters (those that declare `using canopy_awaiter = void;`)
// pass through untouched; any other awaitable is wrapped in a
// foreign_awaiter, which gives the awaitable a
// handle of its own — a tiny "resumer" coroutine — instead of the task's.
// Resuming the resumer, from any thread, fires a wait_link that wakes the
// task; the task's next run on a worker resumes the coroutine and calls the
// awaitable's await_resume there. So a foreign resumption becomes a wake.
//
// Supported: await_suspend(std::coroutine_handle<>) returning void, bool, or
// a coroutine handle (symmetric transfer); await_ready and await_resume as
// usual; the awaitable may resume the handle before await_suspend returns,
// from any thread, exactly once. Not supported (a compile-time error that
// says so): an awaitable whose await_suspend requires a particular promise
// type (Boost.Asio's awaitables, for example, only run inside
// asio::awaitable coroutines).
//
// If the task is cancelled or destroyed while a foreign awaitable still holds
// the resumer, the task's frame is kept until the awaitable resumes it (the
// wait_link is abandoned, wait/wait_link.hpp) and freed then, on the
// resuming thread; an awaitable that never resumes its handle keeps the
// frame (and whatever it holds) forever. The resumer frame frees itself
// after firing, so nothing on the task's side touches it after the wake.
#pragma once

#include <coroutine>
#include <exception>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include "../executor/block_pool.hpp"
#include "../wait/wait_link.hpp"
#include "promise_base.hpp"
#include "task_context.hpp"

namespace canopy::detail {

// The handle a foreign awaitable receives: a coroutine that, when resumed,
// fires `link` and frees itself.
class foreign_resumer {
 public:
  struct promise_type {
    foreign_resumer get_return_object() noexcept {
      return foreign_resumer(std::coroutine_handle<promise_type>::from_promise(*this));
    }
    std::suspend_always initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { std::terminate(); }  // fire() never throws
    static void* operator new(std::size_t size) { return allocate_block(size); }
    static void operator delete(void* block, std::size_t size) noexcept { free_block(block, size); }
  };

  explicit foreign_resumer(std::coroutine_handle<promise_type> handle) noexcept : handle_(handle) {}

  [[nodiscard]] std::coroutine_handle<promise_type> handle() const noexcept { return handle_; }

 private:
  std::coroutine_handle<promise_type> handle_;
};

inline foreign_resumer make_foreign_resumer(wait_link* link) {
  wait_link::fire(link);  // wakes the task; the link may be gone after this
  co_return;              // final_suspend never suspends: the frame frees itself
}

template <class A>
class foreign_awaiter {
  // An lvalue awaitable is used in place; an rvalue one is moved in.
  using stored_type = std::conditional_t<std::is_lvalue_reference_v<A>, A, std::remove_cvref_t<A>>;
  using got_type = decltype(get_awaiter(std::declval<stored_type&&>()));
  static constexpr bool inner_by_reference = std::is_reference_v<got_type>;
  using inner_type = std::remove_reference_t<got_type>;
  using suspend_result =
      decltype(std::declval<inner_type&>().await_suspend(std::declval<std::coroutine_handle<>>()));

  static_assert(std::is_void_v<suspend_result> || std::is_same_v<suspend_result, bool> ||
                    std::is_convertible_v<suspend_result, std::coroutine_handle<>>,
                "await_suspend must return void, bool or a coroutine handle");

 public:
  explicit foreign_awaiter(A&& awaitable) : stored_(std::forward<A>(awaitable)) {}
  foreign_awaiter(foreign_awaiter&& other) noexcept(
      std::is_nothrow_constructible_v<stored_type, stored_type&&>)
      : stored_(std::forward<stored_type>(other.stored_)) {}  // before await_ready only
  foreign_awaiter& operator=(foreign_awaiter&&) = delete;
  ~foreign_awaiter() = default;

  bool await_ready() {
    if constexpr (inner_by_reference) {
      auto&& awaiter = get_awaiter(static_cast<stored_type&&>(stored_));  // the stored object
      inner_ = std::addressof(awaiter);
    } else {
      inner_.emplace(
          from_call{[this] { return get_awaiter(static_cast<stored_type&&>(stored_)); }});
    }
    return static_cast<bool>(inner().await_ready());
  }

  template <class Promise>
  std::coroutine_handle<> await_suspend(std::coroutine_handle<Promise> self) {
    task_context& context = context_of(self);
    link_.arm_for_current_task();
    context.suspend_on(self, wait_kind::link, &link_);
    const std::coroutine_handle<> resumer = make_foreign_resumer(&link_).handle();
    try {
      if constexpr (std::is_void_v<suspend_result>) {
        inner().await_suspend(resumer);
        return std::noop_coroutine();  // the awaitable owns the resumer now
      } else if constexpr (std::is_same_v<suspend_result, bool>) {
        if (inner().await_suspend(resumer)) {
          return std::noop_coroutine();
        }
        context.clear_wait();  // did not suspend: go on at once
        resumer.destroy();     // never started, never handed over
        return self;
      } else {
        // Symmetric transfer to what the awaitable names (possibly the
        // resumer itself, which then wakes this task at once).
        return inner().await_suspend(resumer);
      }
    } catch (...) {
      context.clear_wait();
      resumer.destroy();
      throw;  // rethrown from the co_await, as the standard says
    }
  }

  decltype(auto) await_resume() { return inner().await_resume(); }

 private:
  // Constructs the inner awaiter in place from a call's prvalue result.
  template <class Fn>
  struct from_call {
    Fn fn;
    operator inner_type() { return fn(); }  // NOLINT(google-explicit-constructor)
  };

  inner_type& inner() noexcept { return *inner_; }  // a pointer or an optional: both deref

  stored_type stored_;
  std::conditional_t<inner_by_reference, inner_type*, std::optional<inner_type>> inner_{};
  wait_link link_;
};

}  // namespace canopy::detail
