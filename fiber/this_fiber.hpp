// this_fiber — what code running on a fiber can do. Each call switches back
// to the worker (the worker is free meanwhile) and returns when the fiber
// is resumed, possibly on another worker thread. Outside a fiber each
// throws std::logic_error.
//
// compile: skip a synopsis of the forms (T and R stand for types)
//   this_fiber::yield();                    // run again after other ready work
//   T v = this_fiber::await(handle);        // a join_handle: value or rethrow
//   this_fiber::await(event);               // an async_event
//   T v = this_fiber::await(some_task());   // a canopy::task<T>: spawned, then awaited
//   T v = this_fiber::await(awaitable);     // anything a canopy::task can co_await
//   this_fiber::wait_for_wake();            // until any wake (current_waker())
//   R r = this_fiber::wait_on(source);      // a custom wait (wait/wait_source.hpp)
// When the fiber is being cancelled or dropped, these throw fiber_unwind.
//
// Fibers include nothing of the coroutine tasks (both build on wait/). Awaiting a
// canopy::task or another awaitable from a fiber spawns a coroutine task,
// so those two forms name canopy::task<T> and canopy::spawn(task) only
// where they are used: a program that uses them includes the coroutine
// headers too (include/canopy/fiber.hpp does).
#pragma once

#include <type_traits>
#include <utility>

#include "../executor/join_handle.hpp"
#include "../wait/async_event.hpp"
#include "../wait/join_wait.hpp"
#include "../wait/wait_source.hpp"
#include "../wait/waker.hpp"
#include "fiber_task.hpp"

namespace canopy {

// The coroutine task type (task.hpp beside the coroutine tasks; see above).
template <class T>
class task;

}  // namespace canopy

namespace canopy::this_fiber {

namespace detail {

// Suspend on a wait (canopy::detail::join_wait, async_event::wait) until its
// link fires. `fires_here`: a task of this fiber's executor fires it.
template <class Wait>
void suspend_on(Wait& wait, const char* what, bool fires_here = false) {
  canopy::detail::fiber_frame& frame = canopy::detail::checked_current_fiber(what);
  if (wait.ready()) {
    return;
  }
  frame.armed = &wait.link();
  frame.armed_here = fires_here;
  if (!wait.arm()) {
    frame.armed = nullptr;  // became ready meanwhile
    return;
  }
  frame.signal = canopy::detail::run_outcome::suspended;
  canopy::detail::switch_out(frame);
}

template <class A>
concept has_member_co_await = requires(A& value) {
  value.operator co_await();
};

template <class A>
concept has_await_resume = requires(A& value) {
  value.await_resume();
};

template <class A>
concept member_awaitable = has_member_co_await<A> || has_await_resume<A>;

// The result of co_await on an A. No `type` for anything else, so that using
// it in a signature only removes that overload (clang 14 substitutes the
// return type before it checks the constraints).
template <class A>
struct await_result {};

template <has_member_co_await A>
struct await_result<A> {
  using type = decltype(std::declval<A&>().operator co_await().await_resume());
};

template <class A>
requires(!has_member_co_await<A> && has_await_resume<A>) struct await_result<A> {
  using type = decltype(std::declval<A&>().await_resume());
};

template <class A>
using await_result_t = typename await_result<A>::type;

}  // namespace detail

[[nodiscard]] inline bool inside() noexcept { return canopy::detail::current_fiber() != nullptr; }

inline void yield() {
  canopy::detail::fiber_frame& frame = canopy::detail::checked_current_fiber("this_fiber::yield()");
  frame.armed = nullptr;
  frame.signal = canopy::detail::run_outcome::yielded;
  canopy::detail::switch_out(frame);
}

// Continue this fiber on its executor's host thread (canopy::resume_on_host
// has the contract, a cancel's included: it unwinds the fiber when a host
// next runs; docs/embedding.md).
inline void resume_on_host() {
  canopy::detail::fiber_frame& frame =
      canopy::detail::checked_current_fiber("this_fiber::resume_on_host()");
  frame.armed = nullptr;
  frame.signal = canopy::detail::run_outcome::to_host;
  canopy::detail::switch_out(frame);
}

inline void wait_for_wake() {
  canopy::detail::fiber_frame& frame =
      canopy::detail::checked_current_fiber("this_fiber::wait_for_wake()");
  frame.armed = nullptr;
  frame.signal = canopy::detail::run_outcome::suspended;
  canopy::detail::switch_out(frame);
}

// Wait on a custom wait source (wait/wait_source.hpp has the
// contract): arm it with this fiber's waker, switch out until ready(),
// disarm, return result(). A cancelled or dropped fiber unwinds from here
// (fiber_unwind) after disarming the source.
template <class W>
requires wait_source<W>
decltype(auto) wait_on(W& source) {
  canopy::detail::checked_current_fiber("this_fiber::wait_on(source)");
  if (source.ready() || !source.arm(current_waker())) {
    return source.result();
  }
  struct disarm_on_exit {
    W* source;
    ~disarm_on_exit() {
      if (source != nullptr) {
        source->disarm();
      }
    }
  } guard{&source};
  while (!source.ready()) {
    wait_for_wake();  // spurious and stale wakes loop here
  }
  std::exchange(guard.source, nullptr)->disarm();
  return source.result();
}

template <class T>
T await(join_handle<T>& handle) {
  if (!handle.valid()) {
    throw std::logic_error("canopy::this_fiber::await() on an empty join handle");
  }
  canopy::detail::checked_current_fiber("this_fiber::await(handle)");
  // A child that has not started yet runs here instead of this fiber
  // switching out and being woken by the child's completion: a fiber child
  // as a plain call on this stack when its stack request fits in what is
  // left of it, any other task nested on this worker (on its own stack if
  // it is a fiber: switch_into saves and restores the current fiber and the
  // sanitizers' view of it).
  canopy::detail::scheduler* const here = canopy::detail::current_worker()->core;
  canopy::detail::join_state<T>* const state = handle.state();
  const bool child_here = state->has_task_on(here);
  if (child_here && !state->ready()) {
    canopy::detail::run_pending_child(*here, state->task());
  }
  canopy::detail::join_wait<T> wait(state);
  detail::suspend_on(wait, "this_fiber::await(handle)", child_here);
  return canopy::detail::take_and_detach(handle);
}

template <class T>
T await(join_handle<T>&& handle) {
  join_handle<T> owned(std::move(handle));
  return await(owned);
}

inline void await(async_event& event) {
  async_event::wait wait(event);
  detail::suspend_on(wait, "this_fiber::await(event)");
}

template <class T>
T await(task<T> work) {
  canopy::detail::checked_current_fiber("this_fiber::await(task)");
  // Unqualified: canopy::spawn(task<T>) (the coroutine tasks' spawn.hpp) is found by
  // argument-dependent lookup where this is instantiated.
  return await(spawn(std::move(work)));
}

// Any other awaitable a canopy::task can co_await: awaited by a small
// spawned coroutine task, which this fiber then awaits.
template <class Awaitable>
requires detail::member_awaitable<std::remove_cvref_t<Awaitable>>
auto await(Awaitable&& awaitable) -> detail::await_result_t<std::remove_cvref_t<Awaitable>> {
  canopy::detail::checked_current_fiber("this_fiber::await(awaitable)");
  using stored = std::remove_cvref_t<Awaitable>;
  using result = detail::await_result_t<stored>;
  auto bridge = [](stored inner) -> task<result> {
    if constexpr (std::is_void_v<result>) {
      co_await inner;
    } else {
      co_return co_await inner;
    }
  };
  return await(bridge(stored(std::forward<Awaitable>(awaitable))));
}

// The stack this fiber runs on: usable bytes (at least what it asked for;
// for a child run on its awaiter's stack, the awaiter's), and whether a
// guard page protects it.
[[nodiscard]] inline std::size_t stack_size() {
  return canopy::detail::checked_current_fiber("this_fiber::stack_size()").stack.size;
}
[[nodiscard]] inline bool stack_guarded() {
  return canopy::detail::checked_current_fiber("this_fiber::stack_guarded()").stack.guarded;
}

}  // namespace canopy::this_fiber
