#include "fiber/fiber_task.hpp"

#include <cstdio>
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <string>

namespace canopy::detail {

namespace {

thread_local fiber_frame* this_thread_fiber = nullptr;

void check_canary(const fiber_frame& frame) noexcept {
  if (!frame.stack.guarded && !stack_pool::canary_intact(frame.stack)) {
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
  join_state_base* state;

  [[nodiscard]] bool cancel_requested() const noexcept { return state->cancel_requested(); }

  run_outcome run() {
    fiber_frame& current = *frame;
    if (current.armed != nullptr) {
      if (!current.armed->has_fired()) {
        if (!cancel_requested()) {
          return run_outcome::suspended;  // woken, but not by what it waits for
        }
        return cancel_now();
      }
      current.armed = nullptr;
    }
    if (cancel_requested()) {
      return cancel_now();
    }
    current.signal = run_outcome::suspended;
    switch_into(current);
    check_canary(current);
    if (current.signal != run_outcome::completed) {
      return current.signal;
    }
    // The fiber ended: its destructors ran on it; the result is in the state.
    const join_state_base::outcome result = current.result;
    free_fiber_frame(std::exchange(frame, nullptr));
    state->complete(result);
    return run_outcome::completed;
  }

  run_outcome cancel_now() noexcept {
    release_fiber();
    state->complete(join_state_base::outcome::cancelled);
    return run_outcome::completed;
  }

  // Unwind the fiber now, or leave it to the link that may still fire.
  void release_fiber() noexcept {
    fiber_frame* const current = std::exchange(frame, nullptr);
    if (current == nullptr) {
      return;
    }
    wait_link* const link = std::exchange(current->armed, nullptr);
    if (link != nullptr &&
        !link->abandon(
            [](void* owner) noexcept { unwind_and_free(static_cast<fiber_frame*>(owner)); },
            current)) {
      return;  // deferred: fire() unwinds and frees it
    }
    unwind_and_free(current);
  }

  static run_outcome run_entry(void* storage) { return static_cast<fiber_body*>(storage)->run(); }
  static void destroy_entry(void* storage, task_end end) noexcept {
    auto* body = static_cast<fiber_body*>(storage);
    if (end == task_end::dropped) {
      body->release_fiber();
      body->state->complete(join_state_base::outcome::cancelled);
    }
    body->state->release_ref();
  }
  static constexpr task_vtable table{&run_entry, &destroy_entry};
};

static_assert(sizeof(fiber_body) <= task_slot::storage_size);

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

fiber_frame* make_fiber_frame(std::size_t stack_size, std::size_t callable_size,
                              std::size_t callable_align) {
  const fiber_stack stack = stack_pool::acquire(stack_size);
  if (callable_size > stack.size / 4) {
    stack_pool::release(stack);
    throw std::invalid_argument(
        "canopy::spawn_fiber: the callable is " + std::to_string(callable_size) +
        " bytes, more than a quarter of the fiber's " + std::to_string(stack.size) +
        "-byte stack it is stored on; give the fiber a larger stack, or move large "
        "captures to the heap");
  }
  auto* const base = static_cast<std::byte*>(stack.base);
  const auto base_address = reinterpret_cast<std::uintptr_t>(base);
  // Offsets from the stack's base, each rounded down to its alignment: the
  // frame at the top on its own cache line, the callable below it, and the
  // fiber's first frame below that (the ABI wants 16 bytes at a call;
  // make_fcontext aligns too).
  const auto align_down = [base_address](std::size_t offset, std::size_t alignment) {
    return offset - ((base_address + offset) & (alignment - 1));
  };
  const std::size_t frame_offset = align_down(stack.size - sizeof(fiber_frame), 64);
  const std::size_t callable_offset = align_down(frame_offset - callable_size, callable_align);
  const std::size_t first_frame_top = align_down(callable_offset, 16);
  // Default-initialised (every member has an initialiser): no zero-fill first.
  auto* frame = ::new (base + frame_offset) fiber_frame;
  frame->stack = stack;
  frame->callable = base + callable_offset;
  frame->context =
      boost::context::detail::make_fcontext(base + first_frame_top, first_frame_top, &fiber_main);
#if defined(CANOPY_TSAN_FIBERS)
  frame->tsan_fiber = __tsan_create_fiber(0);
#endif
  return frame;
}

void free_fiber_frame(fiber_frame* frame) noexcept {
  const fiber_stack stack = frame->stack;
#if defined(CANOPY_TSAN_FIBERS)
  __tsan_destroy_fiber(frame->tsan_fiber);
#endif
  frame->~fiber_frame();
  stack_pool::release(stack);
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
  frame.signal = run_outcome::completed;
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
  switch_into(*frame);
  if (frame->signal != run_outcome::completed) {
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

spawn_status spawn_fiber_body(executor_core& core, fiber_frame* frame, join_state_base* state,
                              spawn_mode mode, task_id* spawned) {
  fiber_body body{frame, state};
  return core.spawn_body(
      &fiber_body::table,
      [](void* storage, void* context) {
        ::new (storage) fiber_body(*static_cast<fiber_body*>(context));
      },
      &body, mode, spawned);
}

}  // namespace canopy::detail
