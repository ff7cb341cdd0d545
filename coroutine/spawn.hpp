// Spawning a canopy::task<T>: the coroutine task body, and the spawn APIs.
//
//   auto handle = pool.spawn(work());   // from any thread: task_handle<T>
//   auto child  = canopy::spawn(work()); // inside a running task: same executor
//
// The body (16 + 24 bytes, inline in the slot) is the root coroutine handle,
// the join state (null when detached) and the task_context its coroutines
// report to. run():
//   1. armed link not fired yet  -> a spurious wake: stay suspended (or, if
//      cancellation was requested, destroy the task);
//   2. cancellation requested    -> destroy the frame, complete "cancelled";
//   3. otherwise resume `resume_point` and return what the coroutine left in
//      `signal`: suspended (waits for a wake), yielded (the worker queues
//      it), or completed (the root reached final_suspend: the result moves
//      into the join state, the frame is destroyed, then the join state
//      completes — so a joiner sees the frame's destructors already done).
// destroy(dropped) (shutdown, or a failed spawn) destroys the frame the same
// way as a cancel; a frame whose link may still fire is handed to the link
// (wait_link::abandon) and destroyed by its fire().
#pragma once

#include <coroutine>
#include <exception>
#include <stdexcept>
#include <system_error>
#include <type_traits>
#include <utility>

#include "coroutine/task.hpp"
#include "coroutine/task_handle.hpp"
#include "coroutine/wait_link.hpp"
#include "executor/errors.hpp"
#include "executor/executor.hpp"
#include "executor/executor_core.hpp"
#include "executor/join_state.hpp"
#include "executor/task_slot.hpp"

namespace canopy {

namespace detail {

inline void destroy_frame(void* address) noexcept {
  std::coroutine_handle<>::from_address(address).destroy();
}

template <class T>
struct coroutine_body {
  using handle_type = std::coroutine_handle<task_promise<T>>;

  task_context context;
  handle_type root;
  join_state<T>* state;  // null when detached

  [[nodiscard]] bool cancel_requested() const noexcept {
    return state != nullptr && state->cancel_requested();
  }

  run_outcome run() {
    if (context.armed != nullptr) {
      if (!context.armed->has_fired()) {
        if (!cancel_requested()) {
          return run_outcome::suspended;  // woken, but not by what it waits for
        }
        return cancel_now();
      }
      context.armed = nullptr;
    }
    if (cancel_requested()) {
      return cancel_now();
    }
    context.signal = run_outcome::suspended;
    context.resume_point.resume();
    if (context.signal != run_outcome::completed) {
      return context.signal;
    }
    deliver();
    return run_outcome::completed;
  }

  // The root finished: result into the join state, frame gone, then complete.
  void deliver() noexcept {
    task_promise<T>& promise = root.promise();
    std::exception_ptr error = promise.error();
    if (state == nullptr) {
      std::exchange(root, {}).destroy();
      if (error) {
        current_worker()->core->report_detached_exception(std::move(error));
      }
      return;
    }
    if (!error) {
      if constexpr (std::is_void_v<T>) {
        state->set_value();
      } else {
        try {
          state->set_value(std::move(*promise.value()));
        } catch (...) {
          error = std::current_exception();  // T's move constructor threw
        }
      }
    }
    const bool failed = static_cast<bool>(error);
    if (failed) {
      state->set_error(std::move(error));
    }
    std::exchange(root, {}).destroy();
    state->complete(failed ? join_state_base::outcome::error : join_state_base::outcome::value);
  }

  run_outcome cancel_now() noexcept {
    release_frame();
    state->complete(join_state_base::outcome::cancelled);
    return run_outcome::completed;
  }

  // Destroy the (suspended or never started) frame, or hand it to the link
  // that may still fire.
  void release_frame() noexcept {
    if (!root) {
      return;
    }
    void* const frame = std::exchange(root, {}).address();
    wait_link* const link = std::exchange(context.armed, nullptr);
    if (link != nullptr && !link->abandon(&destroy_frame, frame)) {
      return;  // deferred: the link's fire() destroys the frame
    }
    destroy_frame(frame);
  }

  void finish(task_end end) noexcept {
    if (end == task_end::dropped) {
      release_frame();
      if (state != nullptr) {
        state->complete(join_state_base::outcome::cancelled);
      }
    }
    if (state != nullptr) {
      state->release_ref();
    }
  }

  static run_outcome run_entry(void* storage) {
    return static_cast<coroutine_body*>(storage)->run();
  }
  static void destroy_entry(void* storage, task_end end) noexcept {
    auto* body = static_cast<coroutine_body*>(storage);
    body->finish(end);
    body->~coroutine_body();
  }
  static constexpr task_vtable table{&run_entry, &destroy_entry};
};

static_assert(sizeof(coroutine_body<int>) <= task_slot::storage_size);

// Spawn `work` on `core`; `state` may be null (detached).
template <class T>
std::error_code spawn_coroutine(executor_core& core, task<T>&& work, join_state<T>* state,
                                spawn_mode mode, task_id* spawned) {
  if (!work.valid()) {
    throw std::invalid_argument("canopy: spawning an empty canopy::task");
  }
  using body = coroutine_body<T>;
  struct construct_context {
    typename body::handle_type root;
    join_state<T>* state;
  } context{work.release(), state};
  const std::error_code error = core.spawn_body(
      &body::table,
      [](void* storage, void* raw) {
        auto* from = static_cast<construct_context*>(raw);
        auto* made = ::new (storage) body{task_context{from->root, nullptr, run_outcome::suspended},
                                          from->root, from->state};
        from->root.promise().set_context(&made->context);
      },
      &context, mode, spawned);
  if (error) {
    context.root.destroy();  // not spawned: the frame never ran
  }
  return error;
}

template <class T>
std::error_code spawn_joined(executor_core& core, task<T>&& work, spawn_mode mode,
                             task_handle<T>& out) {
  auto* state = new join_state<T>();  // two references: the body's and the handle's
  task_id id;
  std::error_code error;
  try {
    error = spawn_coroutine(core, std::move(work), state, mode, &id);
  } catch (...) {
    delete state;
    throw;
  }
  if (error) {
    delete state;
    return error;
  }
  out = task_handle<T>(state, &core, id);
  return {};
}

inline executor_core& current_core(const char* what) {
  worker_context* worker = current_worker();
  if (worker == nullptr) {
    throw std::logic_error(std::string(what) +
                           " outside a running task: use executor::spawn from other threads");
  }
  return *worker->core;
}

}  // namespace detail

template <class T>
struct task_spawner<task<T>> {
  using handle_type = task_handle<T>;
  static std::error_code spawn(executor_core& core, task<T>&& work, spawn_mode mode,
                               handle_type& out) {
    return detail::spawn_joined(core, std::move(work), mode, out);
  }
};

// Inside a running task (coroutine, fiber or callable): spawn `work` on the
// same executor. At capacity this throws spawn_error(errc::at_capacity)
// rather than block the worker; after shutdown began, errc::shut_down.
template <class T>
task_handle<T> spawn(task<T> work) {
  task_handle<T> handle;
  if (const std::error_code error = detail::spawn_joined(
          detail::current_core("canopy::spawn(task)"), std::move(work), spawn_mode::block, handle)) {
    throw spawn_error(static_cast<errc>(error.value()));
  }
  return handle;
}

// The same without a join handle; an exception goes to the executor's
// on_detached_exception handler.
template <class T>
void spawn_detached(executor& pool, task<T> work) {
  if (const std::error_code error = detail::spawn_coroutine<T>(pool.core(), std::move(work), nullptr,
                                                               spawn_mode::block, nullptr)) {
    throw spawn_error(static_cast<errc>(error.value()));
  }
}

template <class T>
void spawn_detached(task<T> work) {
  if (const std::error_code error =
          detail::spawn_coroutine<T>(detail::current_core("canopy::spawn_detached(task)"),
                                     std::move(work), nullptr, spawn_mode::block, nullptr)) {
    throw spawn_error(static_cast<errc>(error.value()));
  }
}

}  // namespace canopy
