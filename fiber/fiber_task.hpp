// Stackful fibers on Boost.Context as executor tasks.
//
//   auto handle = canopy::spawn_fiber(pool, [] {
//     canopy::this_fiber::yield();
//     return canopy::this_fiber::await(canopy::spawn_fiber([] { return 41; })) + 1;
//   });
//   int value = handle.join();   // 42
//
// A fiber is a task whose body switches to a boost::context::fiber with its
// own stack (fiber/stack_pool.hpp: pooled, guard page below while the
// mapping budget lasts). Inside it, this_fiber::yield() and
// this_fiber::await(...) switch back to the worker with run_outcome::yielded
// / suspended: only the fiber waits, never the worker thread. The next run
// switches back in, on whichever worker runs it (thread-locals: see
// docs/coroutines.md — a fiber must not keep a thread_local's address, or
// assume the same thread, across a yield or an await).
//
// The fiber frame (this file's fiber_frame) sits at the top of the fiber's
// stack, with the callable just below it and the fiber's first frame below
// that; the slot body is two pointers. Switches use Boost.Context's
// fcontext layer (make_fcontext / jump_fcontext) directly: a fiber costs
// two jumps in its life (in, and out for good) plus two per suspension,
// where boost::context::fiber adds a round trip at creation to hand its
// record over (docs/performance.md, entry 7). Everything a pending wake may
// touch lives on the stack, so a fiber destroyed while a wait_link can
// still fire leaves its stack to that fire() (see coroutine/wait_link.hpp).
//
// Cancellation and shutdown unwind the fiber: it is resumed with a request
// to unwind, and its pending suspension point throws canopy::fiber_unwind,
// which runs the destructors on its stack. Do not swallow fiber_unwind
// (catch (...) must rethrow it); a fiber that does finishes early anyway and
// its result is discarded.
#pragma once

#include <boost/context/detail/fcontext.hpp>
#include <cstddef>
#include <exception>
#include <functional>
#include <system_error>
#include <type_traits>
#include <utility>

#include "coroutine/spawn.hpp"
#include "coroutine/task_handle.hpp"
#include "coroutine/wait_link.hpp"
#include "executor/errors.hpp"
#include "executor/executor.hpp"
#include "executor/executor_core.hpp"
#include "executor/join_state.hpp"
#include "executor/task_slot.hpp"
#include "fiber/sanitizer.hpp"
#include "fiber/stack_pool.hpp"

namespace canopy {

// Thrown at a fiber's suspension point to unwind a cancelled or dropped
// fiber. Not a std::exception, so `catch (const std::exception&)` lets it pass.
class fiber_unwind {};

namespace detail {

struct fiber_frame {
  boost::context::detail::fcontext_t context = nullptr;  // the suspended fiber (worker side)
  boost::context::detail::fcontext_t caller = nullptr;   // where to switch back to (fiber side)
  // Runs on the fiber, once: the callable (unless `unwinding` is already
  // set), then destroys it. Never throws.
  void (*body)(fiber_frame& frame) noexcept = nullptr;
  void* callable = nullptr;          // the stored callable, on this stack
  join_state_base* state = nullptr;  // where body() puts the result
  wait_link* armed = nullptr;        // the link a wake must have fired, or null
  run_outcome signal = run_outcome::suspended;
  join_state_base::outcome result = join_state_base::outcome::pending;
  bool unwinding = false;  // the next resume throws fiber_unwind
  fiber_stack stack;
#if defined(CANOPY_TSAN_FIBERS)
  void* tsan_fiber = nullptr;
  void* tsan_return = nullptr;
#endif
#if defined(CANOPY_ASAN_FIBERS)
  void* asan_fake_stack = nullptr;
  const void* caller_bottom = nullptr;
  std::size_t caller_size = 0;
#endif
};

// Stack + frame at its top, `callable_size` bytes (aligned to
// `callable_align`) reserved below the frame at frame->callable, and the
// fiber's context made below those, to start in frame->body. The caller
// constructs the callable and sets body and state before the first switch.
// Throws std::invalid_argument when the callable would take more than a
// quarter of the stack (it is stored on it), std::bad_alloc when the
// kernel refuses memory.
fiber_frame* make_fiber_frame(std::size_t stack_size, std::size_t callable_size,
                              std::size_t callable_align);
// Frame gone, stack back to the pool (the fiber must have ended).
void free_fiber_frame(fiber_frame* frame) noexcept;
// Worker side: run the fiber until it suspends, yields or ends.
void switch_into(fiber_frame& frame) noexcept;
// Fiber side: back to whoever switched in. Throws fiber_unwind if the
// fiber is being unwound when it is resumed.
void switch_out(fiber_frame& frame);
// Fiber side: its last switch, never returned from (the worker forgets
// the dead context: nothing on the stack is left to destroy, the callable
// was destroyed on the fiber).
[[noreturn]] void fiber_exit(fiber_frame& frame) noexcept;
// Unwind a fiber that is suspended or never started, then free it.
void unwind_and_free(fiber_frame* frame) noexcept;
// The fiber running on this thread, or null. Never inlined: a fiber may
// resume on another thread, and a cached thread-local address would lie.
[[gnu::noinline]] fiber_frame* current_fiber() noexcept;
fiber_frame& checked_current_fiber(const char* what);

spawn_status spawn_fiber_body(executor_core& core, fiber_frame* frame, join_state_base* state,
                              spawn_mode mode, task_id* spawned);

template <class R, class Fn>
void run_fiber_function(fiber_frame& frame, join_state<R>* state, Fn& fn) {
  // After a fiber_unwind was swallowed, the join state may already be
  // released (the task completed as cancelled): never touch it then.
  try {
    Fn local(std::move(fn));  // destroyed on the fiber, before it ends
    if constexpr (std::is_void_v<R>) {
      std::invoke(local);
      if (!frame.unwinding) {
        state->set_value();
        frame.result = join_state_base::outcome::value;
      }
    } else {
      R value = std::invoke(local);
      if (!frame.unwinding) {
        state->set_value(std::move(value));
        frame.result = join_state_base::outcome::value;
      }
    }
  } catch (const fiber_unwind&) {
    frame.result = join_state_base::outcome::cancelled;
  } catch (...) {
    if (!frame.unwinding) {
      state->set_error(std::current_exception());
      frame.result = join_state_base::outcome::error;
    }
  }
}

template <class Fn>
using fiber_result_t = std::invoke_result_t<std::decay_t<Fn>&>;

// frame.body for a callable of type Stored returning R.
template <class R, class Stored>
void run_and_destroy(fiber_frame& frame) noexcept {
  auto& stored = *static_cast<Stored*>(frame.callable);
  if (!frame.unwinding) {
    run_fiber_function<R>(frame, static_cast<pooled_join_state<R>*>(frame.state), stored);
  } else {
    frame.result = join_state_base::outcome::cancelled;
  }
  stored.~Stored();
}

template <class Fn>
spawn_status spawn_fiber_on(executor_core& core, Fn&& fn, std::size_t stack_size, spawn_mode mode,
                            task_handle<fiber_result_t<Fn>>& out) {
  using R = fiber_result_t<Fn>;
  using stored = std::decay_t<Fn>;
  fiber_frame* frame = make_fiber_frame(stack_size, sizeof(stored), alignof(stored));
  pooled_join_state<R>* state = nullptr;  // two references: the body's and the handle's
  try {
    state = new pooled_join_state<R>();
    ::new (frame->callable) stored(std::forward<Fn>(fn));
  } catch (...) {
    free_fiber_frame(frame);  // never entered: nothing on its stack yet
    delete state;
    throw;
  }
  frame->body = &run_and_destroy<R, stored>;
  frame->state = state;
  task_id id;
  if (const spawn_status status = spawn_fiber_body(core, frame, state, mode, &id);
      status != spawn_status::spawned) {
    unwind_and_free(frame);  // never started: it destroys the callable and ends at once
    delete state;
    return status;
  }
  state->set_task(&core, id);
  out = task_handle<R>(state, &core, id);
  return spawn_status::spawned;
}

}  // namespace detail

// Spawn fn() as a fiber with a `stack_size`-byte stack (rounded up to
// pages) on `pool`. From any thread. Returns its task_handle (a join_handle).
// fn is moved (or copied) onto the fiber's stack: a callable larger than a
// quarter of the stack is refused with std::invalid_argument. Also throws
// spawn_error (shut down), std::bad_alloc, or what fn's constructor throws.
template <class Fn>
  requires std::is_invocable_v<std::decay_t<Fn>&>
auto spawn_fiber(executor& pool, Fn&& fn,
                 std::size_t stack_size = stack_pool::default_stack_size)
    -> task_handle<detail::fiber_result_t<Fn>> {
  task_handle<detail::fiber_result_t<Fn>> handle;
  if (const spawn_status status = detail::spawn_fiber_on(pool.core(), std::forward<Fn>(fn),
                                                         stack_size, spawn_mode::block, handle);
      status != spawn_status::spawned) {
    throw spawn_error(status);
  }
  return handle;
}

// Inside a running task: spawn on the same executor (at capacity:
// spawn_error(errc::at_capacity) instead of blocking the worker).
template <class Fn>
  requires std::is_invocable_v<std::decay_t<Fn>&>
auto spawn_fiber(Fn&& fn, std::size_t stack_size = stack_pool::default_stack_size)
    -> task_handle<detail::fiber_result_t<Fn>> {
  task_handle<detail::fiber_result_t<Fn>> handle;
  if (const spawn_status status =
          detail::spawn_fiber_on(detail::current_core("canopy::spawn_fiber(fn)"),
                                 std::forward<Fn>(fn), stack_size, spawn_mode::block, handle);
      status != spawn_status::spawned) {
    throw spawn_error(status);
  }
  return handle;
}

}  // namespace canopy
