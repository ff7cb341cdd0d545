// join_handle<T> — the caller's end of a spawned task.
//
// Contract:
//   * join() blocks the calling thread until the task ends, then returns its
//     value, rethrows its exception, or throws canopy::task_cancelled if it
//     was destroyed without completing. Call it from a thread that is not a
//     worker of the same executor (on a worker it throws std::system_error
//     with errc::worker_thread instead of risking a deadlock).
//   * ready() never blocks. cancel() asks that the task not start: a task
//     cancelled before it starts never runs and join() throws task_cancelled;
//     a task already running finishes normally.
//   * Dropping (destroying) a handle detaches the task: it still runs; its
//     result is discarded.
// A handle is move-only and used by one thread at a time.
#pragma once

#include <system_error>
#include <utility>

#include "errors.hpp"
#include "executor_core.hpp"
#include "join_state.hpp"

namespace canopy {

template <class T>
class join_handle {
 public:
  join_handle() noexcept = default;
  explicit join_handle(join_state<T>* state) noexcept : state_(state) {}
  join_handle(join_handle&& other) noexcept : state_(std::exchange(other.state_, nullptr)) {}
  join_handle& operator=(join_handle&& other) noexcept {
    if (this != &other) {
      detach();
      state_ = std::exchange(other.state_, nullptr);
    }
    return *this;
  }
  join_handle(const join_handle&) = delete;
  join_handle& operator=(const join_handle&) = delete;
  ~join_handle() { detach(); }

  [[nodiscard]] bool valid() const noexcept { return state_ != nullptr; }
  [[nodiscard]] bool ready() const noexcept { return state_ != nullptr && state_->ready(); }

  T join() {
    if (state_ == nullptr) {
      throw std::logic_error("canopy::join_handle::join() on an empty handle");
    }
    if (worker_context* worker = current_worker(); worker != nullptr) {
      throw std::system_error(make_error_code(errc::worker_thread),
                              "canopy::join_handle::join() would block a worker thread; "
                              "co_await the handle inside a coroutine task instead");
    }
    state_->wait_blocking();
    join_state<T>* state = std::exchange(state_, nullptr);
    struct release_on_exit {
      join_state<T>* state;
      ~release_on_exit() { state->release_ref(); }
    } release{state};
    return state->take();
  }

  bool cancel() noexcept { return state_ != nullptr && state_->request_cancel(); }

  void detach() noexcept {
    if (state_ != nullptr) {
      std::exchange(state_, nullptr)->release_ref();
    }
  }

  // For awaiters (coroutine tasks): the shared completion record.
  [[nodiscard]] join_state<T>* state() const noexcept { return state_; }

 private:
  join_state<T>* state_ = nullptr;
};

}  // namespace canopy
