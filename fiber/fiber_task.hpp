// Stackful fibers on Boost.Context as executor tasks.
//
//   auto handle = pool.spawn(canopy::fiber([] {
//     canopy::this_fiber::yield();
//     return canopy::this_fiber::await(canopy::spawn(canopy::fiber([] { return 41; }))) + 1;
//   }));
//   int value = handle.get();   // 42
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
// A fiber's control block (this file's fiber_frame) and its stored callable
// share one small block from the block pool; the stack is taken from the
// pool only when the fiber first runs, so a pending fiber costs no stack.
// The slot body is two pointers. Switches use Boost.Context's fcontext
// layer (make_fcontext / jump_fcontext) directly: a fiber costs two jumps
// in its life (in, and out for good) plus two per suspension, where
// boost::context::fiber adds a round trip at creation to hand its record
// over. A fiber destroyed while a wait_link
// can still fire leaves its frame and stack to that fire() (see
// wait/wait_link.hpp).
//
// A never-started child awaited with this_fiber::await runs on the awaiting
// fiber's stack as a plain call when its stack request fits in what is
// left there (run_pending_child); for that room, a fiber on a stack of its
// own gets twice its page-rounded request (the extra capped at 1 MiB).
//
// Cancellation and shutdown unwind the fiber: it is resumed with a request
// to unwind, and its pending suspension point throws canopy::fiber_unwind,
// which runs the destructors on its stack. A cancelled fiber counts as
// ended only once its stack has unwound: its join state (get(), co_await,
// this_fiber::await, a group's wait) completes after every destructor on
// the stack ran. A fiber cancelled while it awaits a task's handle cancels
// that task and unwinds once that task ended. Dropped at shutdown while it
// awaits a task of its own executor, it unwinds, and its handle completes,
// when that task is destroyed by the same shutdown; awaiting another
// executor's task, its handle completes at once and its stack unwinds when
// that task ends (on the thread that ends it). Do not swallow fiber_unwind
// (catch (...) must rethrow it); a fiber that does is not resumed again:
// every later suspension point (yield, await, wait_on, sleeping) throws
// fiber_unwind at once, and whatever the fiber returns is discarded (its
// handle reports task_cancelled). A suspension point inside a destructor
// that runs during the unwind therefore throws from that destructor
// (std::terminate): do not wait in destructors.
#pragma once

#include <boost/context/detail/fcontext.hpp>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <new>
#include <system_error>
#include <type_traits>
#include <utility>

#include "../executor/block_pool.hpp"
#include "../executor/errors.hpp"
#include "../executor/executor.hpp"
#include "../executor/scheduler.hpp"
#include "../executor/join_state.hpp"
#include "../executor/task_slot.hpp"
#include "../wait/current_task.hpp"
#include "../wait/task_handle.hpp"
#include "../wait/wait_link.hpp"
#include "sanitizer.hpp"
#include "stack_pool.hpp"

namespace canopy {

// Thrown at a fiber's suspension point to unwind a cancelled or dropped
// fiber. Not a std::exception, so `catch (const std::exception&)` lets it pass.
class fiber_unwind {};

namespace detail {

struct fiber_frame {
  // The suspended fiber (worker side); null until the fiber first runs.
  boost::context::detail::fcontext_t context = nullptr;
  boost::context::detail::fcontext_t caller = nullptr;  // where to switch back to (fiber side)
  // Runs once, on the fiber: the callable (unless `unwinding` is already
  // set), then destroys it. Never throws. For a fiber that never started,
  // unwind_and_free calls it directly with `unwinding` set.
  void (*body)(fiber_frame& frame) noexcept = nullptr;
  void* callable = nullptr;          // the stored callable, in this frame's block
  canopy::detail::join_state_base* state = nullptr;  // where body() puts the result
  wait_link* armed = nullptr;        // the link a wake must have fired, or null
  std::exception_ptr start_error;    // set when no stack could be had: body() reports it
  std::size_t stack_request = 0;     // usable stack bytes asked for at spawn
  std::size_t block_size = 0;        // this frame's block, for free_block
  canopy::detail::run_outcome signal = canopy::detail::run_outcome::suspended;
  canopy::detail::join_state_base::outcome result =
      canopy::detail::join_state_base::outcome::pending;
  bool unwinding = false;  // the next resume throws fiber_unwind
  // A cancel found the fiber waiting on `armed` and handed the cancel on
  // to what it waits for (wait_link::disarm): it now waits for the link to
  // fire, then unwinds (fiber_task.cpp, cancel_waiting).
  bool cancel_forwarded = false;
  // `armed` fires from a task of this fiber's executor (this_fiber::await
  // on a handle of it), so its fire() comes before that executor's
  // shutdown ends: a fiber dropped while waiting there ends from that fire().
  bool armed_here = false;
  fiber_stack stack;       // empty until the fiber first runs
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

// The largest stack a fiber may ask for.
inline constexpr std::size_t max_fiber_stack = std::size_t{1} << 30;

// A frame in a pooled block with `callable_size` bytes (aligned to
// `callable_align`) at frame->callable; no stack yet. The caller constructs
// the callable and sets body and state. Throws std::invalid_argument when
// `stack_size` is 0 or above max_fiber_stack, std::bad_alloc when memory
// runs out. Inline, as is every spawn path: the stack size comes from a
// fiber description in memory, not a constant argument, and out of line
// the size arithmetic and the range check become a call on every fiber
// spawn; the throw stays out of line.
[[noreturn, gnu::cold, gnu::noinline]] void throw_bad_stack_size(std::size_t stack_size);
[[gnu::always_inline]] inline fiber_frame* make_fiber_frame(std::size_t stack_size,
                                                            std::size_t callable_size,
                                                            std::size_t callable_align) {
  if (stack_size == 0 || stack_size > max_fiber_stack) [[unlikely]] {
    throw_bad_stack_size(stack_size);
  }
  // [frame][padding][callable]: the block pool aligns blocks to 16 bytes,
  // so an over-aligned callable gets room to slide up to its alignment.
  constexpr std::size_t block_alignment = 16;
  const std::size_t header = (sizeof(fiber_frame) + block_alignment - 1) & ~(block_alignment - 1);
  const std::size_t slack = callable_align > block_alignment ? callable_align : 0;
  const std::size_t block_size = header + callable_size + slack;
  auto* const block = static_cast<std::byte*>(allocate_block(block_size));
  const auto callable_address =
      (reinterpret_cast<std::uintptr_t>(block + header) + callable_align - 1) &
      ~(std::uintptr_t{callable_align} - 1);
  // Default-initialised (every member has an initialiser): no zero-fill first.
  auto* const frame = ::new (block) fiber_frame;
  frame->callable = block + (callable_address - reinterpret_cast<std::uintptr_t>(block));
  frame->stack_request = stack_size;
  frame->block_size = block_size;
  return frame;
}
// Frame gone, stack (if it had one) back to the pool. The fiber must have
// ended, or never started with its callable already destroyed.
void free_fiber_frame(fiber_frame* frame) noexcept;
// Worker side, first run: take a stack from the pool and make the fiber's
// context on it. Throws std::bad_alloc when the kernel refuses memory.
void give_stack(fiber_frame& frame);
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

// Fiber side, about to wait for task `id` of `core`: if it is pending and
// can be taken back, run it now. A fiber that never started, whose stack
// request fits in what is left of the running fiber's stack, runs right
// here as a plain call, as part of the running fiber (no stack, no switch:
// its this_fiber calls suspend the running fiber, and its wakers wake it);
// any other task runs nested on this worker as usual. Throws fiber_unwind
// when the running fiber was unwound while the child ran in it.
void run_pending_child(canopy::detail::scheduler& core, canopy::detail::task_id id);

canopy::detail::spawn_status spawn_fiber_body(canopy::detail::scheduler& core,
                                              fiber_frame* frame,
                                              canopy::detail::join_state_base* state,
                                              canopy::detail::spawn_mode mode,
                                              canopy::detail::task_id* spawned);

template <class R, class Fn>
void run_fiber_function(fiber_frame& frame, canopy::detail::join_state<R>* state, Fn& fn) {
  // After a fiber_unwind was swallowed, the join state may already be
  // released (the task completed as cancelled): never touch it then.
  try {
    if constexpr (std::is_void_v<R>) {
      std::invoke(fn);
      if (!frame.unwinding) {
        state->set_value();
        frame.result = canopy::detail::join_state_base::outcome::value;
      }
    } else {
      R value = std::invoke(fn);
      if (!frame.unwinding) {
        state->set_value(std::move(value));
        frame.result = canopy::detail::join_state_base::outcome::value;
      }
    }
  } catch (const fiber_unwind&) {
    frame.result = canopy::detail::join_state_base::outcome::cancelled;
  } catch (...) {
    if (!frame.unwinding) {
      state->set_error(std::current_exception());
      frame.result = canopy::detail::join_state_base::outcome::error;
    }
  }
}

template <class Fn>
using fiber_result_t = std::invoke_result_t<std::decay_t<Fn>&>;

// frame.body for a callable of type Stored returning R.
template <class R, class Stored>
void run_and_destroy(fiber_frame& frame) noexcept {
  auto& stored = *static_cast<Stored*>(frame.callable);
  auto* const state = static_cast<canopy::detail::pooled_join_state<R>*>(frame.state);
  if (frame.start_error) {
    state->set_error(frame.start_error);
    frame.result = canopy::detail::join_state_base::outcome::error;
  } else if (!frame.unwinding) {
    run_fiber_function<R>(frame, state, stored);
  } else {
    frame.result = canopy::detail::join_state_base::outcome::cancelled;
  }
  stored.~Stored();
}

template <class Fn>
canopy::detail::spawn_status spawn_fiber_on(canopy::detail::scheduler& core, Fn&& fn,
                                            std::size_t stack_size, canopy::detail::spawn_mode mode,
                                            join_handle<fiber_result_t<Fn>>& out) {
  using R = fiber_result_t<Fn>;
  using stored = std::decay_t<Fn>;
  fiber_frame* frame = make_fiber_frame(stack_size, sizeof(stored), alignof(stored));
  canopy::detail::pooled_join_state<R>* state =
      nullptr;  // two references: the body's and the handle's
  try {
    state = new canopy::detail::pooled_join_state<R>();
    ::new (frame->callable) stored(std::forward<Fn>(fn));
  } catch (...) {
    free_fiber_frame(frame);  // no callable constructed, no stack
    delete state;
    throw;
  }
  frame->body = &run_and_destroy<R, stored>;
  frame->state = state;
  canopy::detail::task_id id;
  if (const canopy::detail::spawn_status status = spawn_fiber_body(core, frame, state, mode, &id);
      status != canopy::detail::spawn_status::spawned) {
    unwind_and_free(frame);  // never started: destroys the callable, takes no stack
    delete state;
    return status;
  }
  state->set_task(&core, id);
  out = join_handle<R>(state, &core, id);
  return canopy::detail::spawn_status::spawned;
}

}  // namespace detail

// A fiber to spawn: fn() on a stack of its own of at least `stack_size`
// bytes (rounded up to pages; taken when the fiber first runs). Made by
// canopy::fiber(fn, stack_size) and handed to any spawn verb:
//   pool.spawn / try_spawn / spawn_detached(canopy::fiber(fn))    from any thread
//   canopy::spawn / try_spawn / spawn_detached(canopy::fiber(fn)) inside a running task
// It only describes the fiber (the callable, stored by value, and the stack
// size); the spawn creates it.
namespace detail {
template <class Fn>
struct fiber_spec {
  Fn fn;
  std::size_t stack_size = stack_pool::default_stack_size;
};
}  // namespace detail

// fn is moved (or copied) into the description, and from there into the
// fiber's control block when it is spawned. A null function pointer or an
// empty std::function: std::invalid_argument.
template <class Fn>
requires std::is_invocable_v < std::decay_t<Fn>
& > detail::fiber_spec<std::decay_t<Fn>> fiber(
        Fn&& fn, std::size_t stack_size = stack_pool::default_stack_size) {
  detail::refuse_empty_callable(fn, "canopy::fiber");
  return detail::fiber_spec<std::decay_t<Fn>>{std::forward<Fn>(fn), stack_size};
}

// Spawning a fiber (executor::spawn / try_spawn / spawn_detached; the free
// forms below). Returns its join_handle. Throws
// std::invalid_argument (stack_size 0 or above 1 GiB), std::bad_alloc, or
// what fn's constructor throws; spawn errors as for every task kind. If no
// stack can be had when the fiber first runs, get() rethrows
// std::bad_alloc. A detached fiber's exception, if any, goes to the
// executor's on_detached_exception handler (as for every task detached
// before it ends).
template <class Fn>
struct ext::task_spawner<detail::fiber_spec<Fn>> {
  using handle_type = join_handle<detail::fiber_result_t<Fn>>;
  template <class Spec>
  static std::error_code spawn(canopy::detail::scheduler& core, Spec&& spec,
                               canopy::detail::spawn_mode mode, handle_type& out) {
    return to_error_code(
        detail::spawn_fiber_on(core, std::forward<Spec>(spec).fn, spec.stack_size, mode, out));
  }
  template <class Spec>
  static std::error_code spawn_detached(canopy::detail::scheduler& core, Spec&& spec,
                                        canopy::detail::spawn_mode mode) {
    handle_type handle;
    const std::error_code error = spawn(core, std::forward<Spec>(spec), mode, handle);
    if (!error) {
      handle.detach();
    }
    return error;
  }
};

namespace detail {

template <class T>
inline constexpr bool is_fiber_spec = false;
template <class Fn>
inline constexpr bool is_fiber_spec<detail::fiber_spec<Fn>> = true;

template <class Spec>
concept fiber_description = is_fiber_spec<std::remove_cvref_t<Spec>>;

template <class Spec>
using fiber_handle_t = typename ext::task_spawner<std::remove_cvref_t<Spec>>::handle_type;

}  // namespace detail

// Inside a running task (coroutine, fiber or callable): spawn the fiber on
// the same executor. At capacity this throws spawn_error(errc::at_capacity)
// rather than block the worker; after shutdown began, errc::shut_down.
// Outside a task it throws std::logic_error.
template <detail::fiber_description Spec>
auto spawn(Spec&& spec) -> detail::fiber_handle_t<Spec> {
  detail::fiber_handle_t<Spec> handle;
  if (const std::error_code error = ext::task_spawner<std::remove_cvref_t<Spec>>::spawn(
          detail::current_core("canopy::spawn(fiber)"), std::forward<Spec>(spec),
          canopy::detail::spawn_mode::block, handle)) {
    throw spawn_error(static_cast<errc>(error.value()));
  }
  return handle;
}

// The same without blocking: at capacity, or after shutdown began, the
// result carries errc::at_capacity / errc::shut_down instead of a handle.
template <detail::fiber_description Spec>
auto try_spawn(Spec&& spec) -> spawn_attempt<detail::fiber_handle_t<Spec>> {
  spawn_attempt<detail::fiber_handle_t<Spec>> attempt;
  attempt.error = ext::task_spawner<std::remove_cvref_t<Spec>>::spawn(
      detail::current_core("canopy::try_spawn(fiber)"), std::forward<Spec>(spec),
      canopy::detail::spawn_mode::fail, attempt.handle);
  return attempt;
}

// The same without a join handle; an exception goes to the executor's
// on_detached_exception handler.
template <detail::fiber_description Spec>
void spawn_detached(Spec&& spec) {
  if (const std::error_code error = ext::task_spawner<std::remove_cvref_t<Spec>>::spawn_detached(
          detail::current_core("canopy::spawn_detached(fiber)"), std::forward<Spec>(spec),
          canopy::detail::spawn_mode::block)) {
    throw spawn_error(static_cast<errc>(error.value()));
  }
}

}  // namespace canopy
