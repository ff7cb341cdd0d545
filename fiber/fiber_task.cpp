#include "fiber_task.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <string>

#include "../executor/block_pool.hpp"

namespace canopy::detail {

namespace {

thread_local fiber_frame* this_thread_fiber = nullptr;

void check_canary(const fiber_frame& frame) noexcept {
  if (!frame.stack.guarded && !fiber_stacks::canary_intact(frame.stack)) {
    std::fprintf(stderr,
                 "canopy: fiber stack overflow detected (unguarded %zu-byte stack at %p); "
                 "give the fiber a larger stack\n",
                 frame.stack.size, frame.stack.base);
    std::abort();
  }
}

// The slot body: two pointers, inline in the slot.
struct fiber_body {
  fiber_frame* frame;
  detail::join_state_base* state;

  [[nodiscard]] bool cancel_requested() const noexcept { return state->cancel_requested(); }

  detail::run_outcome run() {
    fiber_frame& current = *frame;
    if (current.armed != nullptr) {
      if (!current.armed->has_fired()) {
        if (!cancel_requested()) {
          return detail::run_outcome::suspended;  // woken, but not by what it waits for
        }
        return cancel_waiting(current);
      }
      current.armed = nullptr;
    }
    if (cancel_requested()) {
      return cancel_now();
    }
    if (current.context == nullptr && !start(current)) {
      return finish();
    }
    current.signal = detail::run_outcome::suspended;
    switch_into(current);
    check_canary(current);
    if (current.signal != detail::run_outcome::completed) {
      return current.signal;
    }
    return finish();
  }

  // The fiber ended: its destructors ran; the result is in the state.
  detail::run_outcome finish() noexcept {
    const detail::join_state_base::outcome result = frame->result;
    free_fiber_frame(std::exchange(frame, nullptr));
    if (result == detail::join_state_base::outcome::error) {
      state->complete_with_error(*detail::current_worker()->core);
    } else {
      state->complete(result);
    }
    return detail::run_outcome::completed;
  }

  // First run: a stack for the fiber. Without one the fiber never starts:
  // body() destroys the callable and reports the error to the joiner.
  static bool start(fiber_frame& current) noexcept {
    try {
      give_stack(current);
      return true;
    } catch (...) {
      current.start_error = std::current_exception();
      current.body(current);
      return false;
    }
  }

  // Cancelled while waiting on a link that has not fired. The fiber ends
  // only once its stack has unwound, and the join state completes only
  // then, so whoever waits for this fiber's end never sees it ended while
  // its destructors are still to run. A source that can take the
  // registration back (an async_event) does so, and the fiber unwinds now.
  // One that cannot (a join state) cancels what it waits for instead
  // (join_wait::disarm); the fiber stays suspended until the link fires,
  // then unwinds here, on a worker of its own executor.
  detail::run_outcome cancel_waiting(fiber_frame& current) noexcept {
    wait_link& link = *current.armed;
    if (!current.cancel_forwarded) {
      current.cancel_forwarded = true;
      if (link.disarm != nullptr && link.disarm(link)) {
        current.armed = nullptr;  // unregistered: no fire() will come
        return cancel_now();
      }
    }
    return detail::run_outcome::suspended;  // until the link fires (spurious wakes land here too)
  }

  // Unwind the fiber (it waits on no link), then complete "cancelled".
  detail::run_outcome cancel_now() noexcept {
    unwind_and_free(std::exchange(frame, nullptr));
    state->complete(detail::join_state_base::outcome::cancelled);
    return detail::run_outcome::completed;
  }

  // Dropped (shutdown): the fiber is unwound and its join state completed
  // as "cancelled", in that order. True if that is done; false if both are
  // left to the fire() of the link it waits on (which then also releases
  // the body's reference on the state): a link that cannot be taken back,
  // fired by a task of this executor, which the same shutdown ends.
  // A link fired from another executor may fire after this one is gone:
  // the state completes now (a joiner may use this executor's core while
  // the state is pending), and that fire() unwinds the stack later.
  bool release_dropped() noexcept {
    fiber_frame* const current = std::exchange(frame, nullptr);
    wait_link* const link = std::exchange(current->armed, nullptr);
    if (link == nullptr || link->has_fired()) {
      unwind_and_free(current);
      return true;
    }
    if (current->armed_here) {
      if (!link->abandon(&unwind_then_complete, current)) {
        return false;  // deferred: unwind_then_complete ends the task
      }
    } else if (!link->abandon(
                   [](void* owner) noexcept { unwind_and_free(static_cast<fiber_frame*>(owner)); },
                   current)) {
      return true;  // deferred: fire() unwinds and frees it
    }
    unwind_and_free(current);
    return true;
  }

  // A dropped fiber's deferred end (release_dropped), from the link's fire().
  static void unwind_then_complete(void* owner) noexcept {
    auto* const current = static_cast<fiber_frame*>(owner);
    detail::join_state_base* const ended = current->state;
    unwind_and_free(current);
    ended->complete(detail::join_state_base::outcome::cancelled);
    ended->release_ref();  // the body's reference, handed over by release_dropped
  }

  static detail::run_outcome run_entry(void* storage) {
    return static_cast<fiber_body*>(storage)->run();
  }
  static void destroy_entry(void* storage, detail::task_end end) noexcept {
    auto* body = static_cast<fiber_body*>(storage);
    if (end == detail::task_end::dropped) {
      if (body->frame != nullptr && !body->release_dropped()) {
        return;  // the state and the body's reference on it now belong to the link's fire()
      }
      body->state->complete(detail::join_state_base::outcome::cancelled);
    }
    body->state->release_ref();
  }
  static const detail::join_state_base* cancel_state_entry(const void* storage) noexcept {
    return static_cast<const fiber_body*>(storage)->state;
  }
  static constexpr detail::task_vtable table{&run_entry, &destroy_entry, &cancel_state_entry};
};

static_assert(sizeof(fiber_body) <= detail::task_slot::storage_size);

// What a nested child may need besides its own stack request: the frames
// of this_fiber::await, run_pending_child and the body's entry.
constexpr std::size_t nesting_margin = 2048;

// Usable bytes a fiber asking for `request` gets: the page-rounded request
// again as headroom (at most 1 MiB), so that a fiber run on its own stack
// can run the never-started children it awaits on it (run_pending_child)
// while what is left is still at least their own request.
std::size_t physical_stack_size(std::size_t request) noexcept {
  const std::size_t rounded = fiber_stacks::usable_size(request);
  return rounded + std::min(rounded, std::size_t{1} << 20);
}

// run_or_adopt_pending's test: a fiber that never started and is not being
// cancelled, whose stack request (rounded up to pages, as stack_pool
// would) plus the nesting margin fits below the current stack pointer of
// the running fiber.
bool fits_on_this_stack(const void* storage) noexcept {
  const auto& child = *static_cast<const fiber_body*>(storage);
  const fiber_frame* const running = current_fiber();
  if (child.frame->context != nullptr || child.state->cancel_requested() || running == nullptr) {
    return false;
  }
  const auto here = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
  const auto bottom = reinterpret_cast<std::uintptr_t>(running->stack.base);
  const std::size_t needed = fiber_stacks::usable_size(child.frame->stack_request) + nesting_margin;
  return here > bottom && here - bottom >= needed;
}

// The fiber's first instructions: a plain function, so that the stack
// holds nothing of Boost's above the frames the callable makes.
void fiber_main(boost::context::detail::transfer_t from) noexcept {
  auto* const frame = static_cast<fiber_frame*>(from.data);
  frame->caller = from.fctx;
#if defined(CANOPY_ASAN_FIBERS)
  __sanitizer_finish_switch_fiber(nullptr, &frame->caller_bottom, &frame->caller_size);
#endif
  frame->body(*frame);
  fiber_exit(*frame);
}

}  // namespace

void throw_bad_stack_size(std::size_t stack_size) {
  throw std::invalid_argument("canopy::fiber: a stack of " + std::to_string(stack_size) +
                              " bytes was asked for; it must be between 1 byte and " +
                              std::to_string(max_fiber_stack) + " bytes");
}

void give_stack(fiber_frame& frame) {
  const fiber_stack stack = fiber_stacks::acquire(physical_stack_size(frame.stack_request));
  frame.stack = stack;
  // The fiber's first frame at the stack's top (the ABI wants 16 bytes at
  // a call; make_fcontext aligns too).
  auto* const top = static_cast<std::byte*>(stack.base) + stack.size;
  frame.context = boost::context::detail::make_fcontext(top, stack.size, &fiber_main);
#if defined(CANOPY_TSAN_FIBERS)
  frame.tsan_fiber = __tsan_create_fiber(0);
#endif
}

void free_fiber_frame(fiber_frame* frame) noexcept {
  const fiber_stack stack = frame->stack;
  const std::size_t block_size = frame->block_size;
#if defined(CANOPY_TSAN_FIBERS)
  if (frame->tsan_fiber != nullptr) {
    __tsan_destroy_fiber(frame->tsan_fiber);
  }
#endif
  frame->~fiber_frame();
  free_block(frame, block_size);
  if (stack.base != nullptr) {
    fiber_stacks::release(stack);
  }
}

void switch_into(fiber_frame& frame) noexcept {
  fiber_frame* const previous = this_thread_fiber;
  this_thread_fiber = &frame;
#if defined(CANOPY_TSAN_FIBERS)
  frame.tsan_return = __tsan_get_current_fiber();
  __tsan_switch_to_fiber(frame.tsan_fiber, 0);
#endif
#if defined(CANOPY_ASAN_FIBERS)
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(&fake_stack, frame.stack.base, frame.stack.size);
#endif
  // The fiber jumps back with its own context when it suspends (or a dead
  // one when it ended, which is never jumped to).
  frame.context = boost::context::detail::jump_fcontext(frame.context, &frame).fctx;
#if defined(CANOPY_ASAN_FIBERS)
  __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#endif
  this_thread_fiber = previous;
}

void switch_out(fiber_frame& frame) {
  if (frame.unwinding) {
    // A fiber that caught fiber_unwind and tries to suspend again: it is
    // being destroyed, so the suspension point throws again at once (no
    // switch) until the fiber returns.
    throw fiber_unwind();
  }
#if defined(CANOPY_TSAN_FIBERS)
  __tsan_switch_to_fiber(frame.tsan_return, 0);
#endif
#if defined(CANOPY_ASAN_FIBERS)
  __sanitizer_start_switch_fiber(&frame.asan_fake_stack, frame.caller_bottom, frame.caller_size);
#endif
  frame.caller = boost::context::detail::jump_fcontext(frame.caller, nullptr).fctx;
#if defined(CANOPY_ASAN_FIBERS)
  __sanitizer_finish_switch_fiber(frame.asan_fake_stack, &frame.caller_bottom, &frame.caller_size);
#endif
  if (frame.unwinding) {
    throw fiber_unwind();
  }
}

void fiber_exit(fiber_frame& frame) noexcept {
  frame.signal = detail::run_outcome::completed;
#if defined(CANOPY_TSAN_FIBERS)
  __tsan_switch_to_fiber(frame.tsan_return, 0);
#endif
#if defined(CANOPY_ASAN_FIBERS)
  __sanitizer_start_switch_fiber(nullptr, frame.caller_bottom, frame.caller_size);  // dies
#endif
  boost::context::detail::jump_fcontext(frame.caller, nullptr);
  std::fputs("canopy: a finished fiber was resumed\n", stderr);
  std::abort();
}

void unwind_and_free(fiber_frame* frame) noexcept {
  frame->unwinding = true;
  if (frame->context == nullptr) {
    frame->body(*frame);  // never started: destroy the callable here, no stack needed
    free_fiber_frame(frame);
    return;
  }
  switch_into(*frame);
  if (frame->signal != detail::run_outcome::completed) {
    std::fputs("canopy: a fiber suspended again while being unwound\n", stderr);
    std::abort();
  }
  free_fiber_frame(frame);
}

fiber_frame* current_fiber() noexcept {
  fiber_frame* const frame = this_thread_fiber;
  asm volatile("" ::: "memory");
  return frame;
}

fiber_frame& checked_current_fiber(const char* what) {
  fiber_frame* const frame = current_fiber();
  if (frame == nullptr) {
    throw std::logic_error(std::string(what) + " called outside a fiber");
  }
  return *frame;
}

void run_pending_child(detail::scheduler& core, detail::task_id id) {
  fiber_body child{};
  const detail::scheduler::adoption adopt{&fiber_body::table, &fits_on_this_stack, &child,
                                              sizeof child};
  if (core.run_or_adopt_pending(id, adopt) != detail::scheduler::pending_run::adopted) {
    return;
  }
  // The child is now part of the running fiber: its body runs here, and a
  // this_fiber call inside it suspends (or unwinds) the running fiber.
  fiber_frame& frame = *child.frame;
  frame.body(frame);
  child.finish();
  fiber_body::destroy_entry(&child, detail::task_end::completed);
  if (checked_current_fiber("this_fiber::await").unwinding) {
    throw fiber_unwind();  // the child saw the unwind first; pass it on to this fiber
  }
}

detail::spawn_status spawn_fiber_body(detail::scheduler& core, fiber_frame* frame,
                                      detail::join_state_base* state, detail::spawn_mode mode,
                                      detail::task_id* spawned) {
  fiber_body body{frame, state};
  return core.spawn_body(
      &fiber_body::table,
      [](void* storage, void* context) {
        ::new (storage) fiber_body(*static_cast<fiber_body*>(context));
      },
      &body, mode, spawned);
}

}  // namespace canopy::detail
