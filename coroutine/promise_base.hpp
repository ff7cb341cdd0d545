// promise_base — the part of every canopy::task promise that does not know
// the task's result type: how a co_await in a task treats an awaitable
// (Canopy's own awaiters as they are, any other through a foreign_awaiter,
// coroutine/foreign_await.hpp), the task context its coroutines report to,
// and context_of, which Canopy's awaiters use to find that context.
// Apart from coroutine/task.hpp so that foreign_await.hpp can include it
// without including task.hpp (which includes foreign_await.hpp).
#pragma once

#include <coroutine>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "task_context.hpp"

namespace canopy::detail {

// The awaiter a co_await expression on `awaitable` uses: its member
// operator co_await, else a free operator co_await found by lookup, else
// the awaitable itself (then a reference to it).
template <class A>
decltype(auto) get_awaiter(A&& awaitable) {
  if constexpr (requires { std::forward<A>(awaitable).operator co_await(); }) {
    return std::forward<A>(awaitable).operator co_await();
  } else if constexpr (requires { operator co_await(std::forward<A>(awaitable)); }) {
    return operator co_await(std::forward<A>(awaitable));
  } else {
    return std::forward<A>(awaitable);
  }
}

template <class A>
using awaiter_of_t = decltype(get_awaiter(std::declval<A>()));

// Canopy's own awaiters declare `using canopy_awaiter = void;`: they know the
// task context and suspend through it (never resuming the coroutine from
// another thread). A user's awaiter that only forwards to Canopy's awaiters
// declares it too (docs/coroutines.md, "Composing awaitables"). Everything
// else is foreign (coroutine/foreign_await.hpp).
template <class A>
concept canopy_native_awaitable = requires {
  typename std::remove_cvref_t<awaiter_of_t<A>>::canopy_awaiter;
};

// The awaiters a fork-join child may co_await (coroutine/fork_join_await.hpp):
// the fork-join verbs and a plain co_await of a task. They declare
// `using canopy_fork_join_awaiter = void;`.
template <class A>
concept fork_join_awaitable = requires {
  typename std::remove_cvref_t<awaiter_of_t<A>>::canopy_fork_join_awaiter;
};

// Awaiters that test for a region frame only when they are about to
// suspend it (context_to_suspend, below), not at every co_await: a wait
// that is ready at once (a channel with a message, a free mutex) costs a
// region frame nothing and is allowed. They declare
// `using canopy_region_check_at_suspend = void;`.
template <class A>
concept region_checked_at_suspend = requires {
  typename std::remove_cvref_t<awaiter_of_t<A>>::canopy_region_check_at_suspend;
};

// A fork-join child co_awaited something that would suspend it on anything
// but its own children (out of line: the throw is the rare path).
[[noreturn, gnu::noinline, gnu::cold]] inline void refuse_fork_join_await() {
  throw std::logic_error(
      "canopy: a fork-join child (a task run by co_await canopy::join(...)) can co_await only "
      "canopy::join, canopy::join_n and other tasks; spawn a task for anything that waits");
}

template <class A>
concept erased_handle_awaitable = requires(std::remove_reference_t<awaiter_of_t<A>>& awaiter,
                                           std::coroutine_handle<> handle) {
  awaiter.await_ready();
  awaiter.await_suspend(handle);
  awaiter.await_resume();
};

// Defined in coroutine/foreign_await.hpp, which task.hpp includes: an
// await_transform is instantiated only in a task's body.
template <class A>
class foreign_awaiter;

class promise_base {
 public:
  // Every co_await in a task: Canopy's awaiters as they are, any other
  // awaitable through a foreign_awaiter, whose resumption wakes the task
  // so that it continues on its executor.
  // A fork-join child (a region frame, below) may suspend only on its own
  // children: it runs under its region's task on whichever worker stole
  // its continuation. Awaiters that check at their suspension instead
  // (region_checked_at_suspend) pass untested here.
  template <class A>
  decltype(auto) await_transform(A&& awaitable) {
    if constexpr (!fork_join_awaitable<A> && !region_checked_at_suspend<A>) {
      if (in_region()) [[unlikely]] {
        refuse_fork_join_await();
      }
    }
    if constexpr (canopy_native_awaitable<A>) {
      return std::forward<A>(awaitable);
    } else {
      static_assert(erased_handle_awaitable<A>,
                    "canopy::task can co_await this awaitable only if its await_suspend accepts a "
                    "std::coroutine_handle<> (Canopy resumes the task through a wake on its "
                    "executor); this one requires a particular promise type or is not an "
                    "awaitable. Wrap the operation in a canopy::wait_on source "
                    "(coroutine/custom_wait.hpp) instead.");
      return foreign_awaiter<A>(std::forward<A>(awaitable));
    }
  }

  std::suspend_always initial_suspend() noexcept { return {}; }

  [[nodiscard]] task_context* context() const noexcept { return context_; }
  void set_context(task_context* context) noexcept { context_ = context; }

  // Whether this coroutine is a region frame: a child of a fork-join
  // (coroutine/fork_join_await.hpp), or a task awaited inline by one.
  [[nodiscard]] bool in_region() const noexcept {
    // NOLINTNEXTLINE(clang-analyzer-core.UndefinedBinaryOperatorResult): set by the constructor
    return (result_ & region_tag) != 0;
  }

 protected:
  // Where the result goes (coroutine/task.hpp, promise_of): a tagged
  // pointer. Tag bits: joined (a join state), region (a region frame; with
  // fork, a fork-join child whose slot holds its region_link).
  static constexpr std::uintptr_t joined_tag = 1;
  static constexpr std::uintptr_t region_tag = 2;
  static constexpr std::uintptr_t fork_tag = 4;
  static constexpr std::uintptr_t tag_mask = 7;

  task_context* context_ = nullptr;
  std::uintptr_t result_ = 0;
};

// Whether `Promise` is a canopy::task's; a compile error with the reason if
// not. Callers branch on it with `if constexpr`, so that the message is the
// only error (the promise's missing context() is never looked up).
template <class Promise>
constexpr bool is_task_promise() noexcept {
  static_assert(std::is_base_of_v<promise_base, Promise>,
                "canopy awaitables can only be co_awaited inside a canopy::task, with the "
                "task's own coroutine handle. If your own awaiter type wraps a Canopy "
                "awaitable and passes its handle on, declare `using canopy_awaiter = void;` "
                "in your awaiter, so that canopy::task gives it the task's handle instead of "
                "treating it as a foreign awaitable (docs/coroutines.md, 'Composing "
                "awaitables')");
  return std::is_base_of_v<promise_base, Promise>;
}

// The task context of the coroutine `self` runs in. A canopy awaitable used
// outside a spawned task (no context) is a programming error: terminate.
template <class Promise>
task_context& context_of(std::coroutine_handle<Promise> self) noexcept {
  if constexpr (!is_task_promise<Promise>()) {
    std::terminate();
  } else {
    task_context* context = self.promise().context();
    if (context == nullptr) {
      std::fputs("canopy: a canopy::task was resumed outside the executor\n", stderr);
      std::terminate();
    }
    return *context;
  }
}

// context_of for an awaiter about to suspend `self` that declares
// canopy_region_check_at_suspend: a region frame cannot suspend on it, and
// gets std::logic_error from the co_await instead (the awaiter's
// await_suspend throws before it did anything, so the coroutine resumes
// with the exception).
template <class Promise>
task_context& context_to_suspend(std::coroutine_handle<Promise> self) {
  if constexpr (is_task_promise<Promise>()) {
    if (self.promise().in_region()) [[unlikely]] {
      refuse_fork_join_await();
    }
  }
  return context_of(self);
}

}  // namespace canopy::detail
