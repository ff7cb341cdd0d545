// callable_task — the task body for a plain callable (a lambda, a function).
//
// The callable is stored in the slot's inline storage when it fits (48
// bytes, alignment <= 16) and in one heap box otherwise. If a join state is
// attached the result or exception goes there; a detached task's exception
// goes to the executor's on_detached_exception handler.
//
// The join state completes only after the callable (and what it captured)
// was destroyed, as a coroutine's frame is before its state completes: a
// joiner told that the task ended (get(), wait_for(), ready(), an awaiting
// coroutine) finds what the task held released (a file it wrote closed, a
// shared_ptr's count down, a lock's guard gone). run() leaves the result
// or exception in the state; body_vtable::destroy destroys the body, then
// publishes (callable_body::publish_end).
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

#include "scheduler.hpp"
#include "join_state.hpp"
#include "task_slot.hpp"

namespace canopy::detail {

template <class Fn, class Result>
struct callable_body {
  Fn fn;
  join_state<Result>* state;  // null when detached

  run_outcome run() {
    if (state != nullptr && state->cancel_requested()) {
      // Not run; publish_end's complete() finds the cancel bit and makes
      // the outcome "cancelled".
      return run_outcome::completed;
    }
    std::exception_ptr failure;
    try {
      if constexpr (std::is_void_v<Result>) {
        std::invoke(fn);
      } else if (state != nullptr) {
        state->set_value(std::invoke(fn));
      } else {
        static_cast<void>(std::invoke(fn));
      }
    } catch (...) {
      failure = std::current_exception();
    }
    // Stored after the handler ended: the catch's own reference to the
    // exception is gone by then, so the thread that joins holds the last one
    // and frees the exception itself. (Stored inside the handler, the
    // worker's end of the catch could free it after the joiner had read it;
    // libstdc++'s reference count is invisible to ThreadSanitizer, which then
    // reports a race on the exception object.)
    if (failure) [[unlikely]] {
      keep_failure(std::move(failure));
    }
    return run_outcome::completed;
  }

  // Out of line and cold: inline, it grew run() enough that GCC stopped
  // inlining the callable into it, on the path every callable task takes.
  [[gnu::cold, gnu::noinline]] void keep_failure(std::exception_ptr failure) {
    if (state != nullptr) {
      state->set_error(std::move(failure));  // published by publish_end
    } else {
      current_worker()->core->report_detached_exception(failure);
    }
  }

  // After the body (the callable) was destroyed: publish how the task
  // ended, then drop the task's reference to the state.
  static void publish_end(join_state<Result>* state, task_end end) noexcept {
    if (state == nullptr) {
      return;
    }
    if (end == task_end::dropped) {
      state->complete(join_state_base::outcome::cancelled);
    } else if (state->failed()) [[unlikely]] {
      // A completed end is on the thread that ran the task (a worker, or a
      // host thread acting as one).
      state->complete_with_error(*current_worker()->core);
    } else {
      state->complete(join_state_base::outcome::value);  // "cancelled" if asked before
    }
    state->release_ref();
  }
};

template <class Body>
constexpr bool fits_inline = sizeof(Body) <= task_slot::storage_size && alignof(Body) <= 16;

// Stores Body in the slot if it fits, else a pointer to a heap Body.
template <class Body>
struct body_storage {
  static Body& get(void* storage) noexcept {
    if constexpr (fits_inline<Body>) {
      return *std::launder(static_cast<Body*>(storage));
    } else {
      return **std::launder(static_cast<Body**>(storage));
    }
  }
  static void construct(void* storage, Body&& body) {
    if constexpr (fits_inline<Body>) {
      ::new (storage) Body(std::move(body));
    } else {
      ::new (storage) Body*(new Body(std::move(body)));
    }
  }
  static void destroy(void* storage) noexcept {
    if constexpr (fits_inline<Body>) {
      std::launder(static_cast<Body*>(storage))->~Body();
    } else {
      delete *std::launder(static_cast<Body**>(storage));
    }
  }
};

template <class Body>
struct body_vtable {
  static run_outcome run(void* storage) { return body_storage<Body>::get(storage).run(); }
  static void destroy(void* storage, task_end end) noexcept {
    // The callable first, so that its end is published with what it held
    // already released (the top of this file).
    auto* const state = body_storage<Body>::get(storage).state;
    body_storage<Body>::destroy(storage);
    Body::publish_end(state, end);
  }
  static constexpr task_vtable table{&run, &destroy};
};

}  // namespace canopy::detail
