// join_state — the completion record a task shares with its join handle.
//
// Word layout (32 bits):
//   bits 0..1  outcome: pending (0), value (1), error (2), cancelled (3)
//   bit  2     a continuation is registered (an awaiting coroutine)
//   bit  3     a thread is blocked in wait_blocking()
//   bit  4     cancellation was requested before the task started
//   bit  5     the handle was dropped (detached) before completion: nobody
//              will read the result, so an exception goes to the
//              executor's on_detached_exception handler instead
// The outcome is written exactly once, by complete(). The result (value or
// exception) is written before complete() and read after observing a
// non-pending outcome with acquire.
//
// Lifetime: intrusive reference count, one reference for the task body and
// one for the join handle; the last release calls destroy_self(), which
// deletes the state (a pooled_join_state, below, for every kind of task).
#pragma once

#include <cstdint>
#include <exception>
#include <optional>
#include <type_traits>
#include <utility>

#include "../atomics/atomics.hpp"
#include "block_pool.hpp"
#include "errors.hpp"
#include "task_slot.hpp"

namespace canopy::detail {

class scheduler;

// Code to run once when a task completes, registered by an awaiter.
struct continuation {
  void (*resume)(void* context) noexcept = nullptr;
  void* context = nullptr;
};

class join_state_base {
 public:
  enum class outcome : std::uint32_t { pending = 0, value = 1, error = 2, cancelled = 3 };

  join_state_base() = default;
  join_state_base(const join_state_base&) = delete;
  join_state_base& operator=(const join_state_base&) = delete;

  void add_ref() noexcept { refs_.fetch_add(1, atomics::relaxed); }
  void release_ref() noexcept {
    // acquire: reading 1 means the other owner already released (its
    // acq_rel fetch_sub, which this pairs with) and nobody can add a
    // reference without holding one: destroy without a locked RMW.
    // acq_rel otherwise: the last owner must see every write the other
    // owner made before dropping its reference (the usual shared_ptr
    // reasoning).
    if (refs_.load(atomics::acquire) == 1 || refs_.fetch_sub(1, atomics::acq_rel) == 1) {
      destroy_self();
    }
  }

  [[nodiscard]] outcome status() const noexcept {
    // acquire: pairs with complete(); the result is readable after this.
    return static_cast<outcome>(word_.load(atomics::acquire) & outcome_mask);
  }
  [[nodiscard]] bool ready() const noexcept { return status() != outcome::pending; }

  // Task side, exactly once: publish the outcome, then run the continuation
  // and wake blocked joiners if there are any. Returns true if the handle
  // was detached before this (nobody will observe the outcome: the caller
  // reports an error outcome to the executor's detached-exception handler).
  bool complete(outcome result) noexcept;

  // Handle side, when the handle is dropped without joining: mark the task
  // detached (so complete() reports an exception), then release the ref.
  void detach_and_release() noexcept;

  // Awaiter side: register `next` to run at completion. False if the task
  // already completed (then nothing is registered; do not suspend).
  [[nodiscard]] bool set_continuation(continuation next) noexcept;

  // Awaiter side, the same with "schedule task `waiter`" as the
  // continuation (a coroutine task awaiting a join handle), where `waiter`
  // runs on the executor this state's task was spawned on (has_task_on
  // holds for it; complete() schedules it there). complete() reads the id
  // from this state, which its task-side reference keeps alive, so the
  // awaiting task needs no link of its own: its readiness is ready(), a
  // stale schedule is a no-op, and it may be destroyed while registered.
  [[nodiscard]] bool set_waiting_task(task_id waiter) noexcept;

  // Joiner side: block the calling thread until the outcome is set.
  void wait_blocking() noexcept;
  // The same with a deadline on std::chrono::steady_clock (nanoseconds
  // since its epoch). True if the outcome was set before the deadline.
  bool wait_blocking_until(std::int64_t steady_deadline_ns) noexcept;

  // The task this record belongs to, recorded by the spawner after the
  // spawn and read by the thread that holds the handle (a plain field),
  // and by complete() after set_waiting_task's release (so the write is
  // visible there). Lets an awaiter run a child that
  // has not started yet inline (scheduler::run_pending_inline).
  // The id is only meaningful on `core` (slot indices are per executor).
  void set_task(scheduler* core, task_id task) noexcept {
    task_core_ = core;
    task_ = task;
  }
  // True if the task was spawned on `core`, so task() names one of its slots.
  [[nodiscard]] bool has_task_on(const scheduler* core) const noexcept {
    return task_core_ != nullptr && task_core_ == core;
  }
  [[nodiscard]] task_id task() const noexcept { return task_; }
  // The handle gave the task's id out (join_handle::id()): someone may wake
  // the task by it, so an awaiter must not take the task over and retire
  // its id (coroutine/join_await.hpp). Same caller rules as set_task.
  void share_identity() noexcept { identity_shared_ = true; }
  [[nodiscard]] bool identity_shared() const noexcept { return identity_shared_; }

  // Ask that the task not start. True if the request was registered before
  // completion (a task that already started runs to its end regardless).
  bool request_cancel() noexcept;
  // request_cancel(), and if it was registered, wake the task (when the
  // spawner recorded it with set_task) so that a suspended task sees the
  // request now and is destroyed. Same caller rules as set_task's readers.
  bool cancel_and_wake() noexcept;
  [[nodiscard]] bool cancel_requested() const noexcept {
    return (word_.load(atomics::acquire) & cancel_bit) != 0;
  }
  // The word request_cancel() sets `cancel_request_bit` in, for a reader
  // that polls it where a call per poll costs too much (a fork-join
  // region, once per child it launches).
  [[nodiscard]] const atomics::atomic<std::uint32_t>& cancel_word() const noexcept { return word_; }
  static constexpr std::uint32_t cancel_request_bit = 1U << 4;

  void set_error(std::exception_ptr error) noexcept { error_ = std::move(error); }
  // Task side, before complete(): whether set_error() was called.
  [[nodiscard]] bool failed() const noexcept { return static_cast<bool>(error_); }
  // Task side: complete(outcome::error) and, if the handle was detached
  // before, hand the exception (nobody will join it) to `core`'s
  // on_detached_exception handler. Call after set_error().
  void complete_with_error(const scheduler& core) noexcept;

 protected:
  virtual ~join_state_base() = default;
  std::exception_ptr error_;

 private:
  // The blocking wait itself: until the outcome is set (true) or the
  // deadline passes (false; steady-clock ns, negative: none).
  bool wait_outcome_until(std::int64_t steady_deadline_ns) noexcept;

  // Called by the last release_ref(): the virtual destructor finds the
  // most derived class's operator delete (the block pool's, for
  // pooled_join_state).
  void destroy_self() noexcept { delete this; }

  static constexpr std::uint32_t outcome_mask = 3;
  static constexpr std::uint32_t continuation_bit = 1U << 2;
  static constexpr std::uint32_t blocked_bit = 1U << 3;
  static constexpr std::uint32_t cancel_bit = cancel_request_bit;
  static constexpr std::uint32_t detached_bit = 1U << 5;

  atomics::atomic<std::uint32_t> word_{0};
  atomics::atomic<std::uint32_t> refs_{2};
  // resume == nullptr: schedule the task whose id set_waiting_task stored
  // in `context` on task_core_ (one field less in every join state).
  continuation continuation_{};
  task_id task_{};
  scheduler* task_core_ = nullptr;
  bool identity_shared_ = false;
};

// The result slot for a task returning T.
template <class T>
class join_state : public join_state_base {
 public:
  template <class... Args>
  void set_value(Args&&... args) {
    value_.emplace(std::forward<Args>(args)...);
  }

  // Joiner side, after ready(): the value, or rethrow the task's exception,
  // or throw task_cancelled.
  T take() {
    switch (status()) {
      case outcome::value:
        return std::move(*value_);
      case outcome::error:
        // Move the exception out first: the joiner then holds the last
        // reference the record had, so the exception object is never freed
        // by the task's thread while the joiner's handler still uses it
        // (its reference count lives in the uninstrumented C++ runtime,
        // which ThreadSanitizer cannot see).
        std::rethrow_exception(std::exchange(error_, nullptr));
      default:
        throw task_cancelled();
    }
  }

 protected:
  std::optional<T> value_;
};

template <>
class join_state<void> : public join_state_base {
 public:
  void set_value() noexcept {}
  void take() {
    switch (status()) {
      case outcome::value:
        return;
      case outcome::error:
        // Move the exception out first: the joiner then holds the last
        // reference the record had, so the exception object is never freed
        // by the task's thread while the joiner's handler still uses it
        // (its reference count lives in the uninstrumented C++ runtime,
        // which ThreadSanitizer cannot see).
        std::rethrow_exception(std::exchange(error_, nullptr));
      default:
        throw task_cancelled();
    }
  }
};

// A join state whose memory comes from the per-thread block pool
// (executor/block_pool.hpp) instead of malloc: a task's state is usually
// allocated by its spawner and freed by the worker that finished it (or by
// the joiner), and glibc's cross-thread free is what the pool avoids.
// Every kind of task uses it.
template <class T>
class pooled_join_state final : public join_state<T> {
 public:
  static void* operator new(std::size_t size) { return allocate_block(size); }
  static void operator delete(void* block, std::size_t size) noexcept { free_block(block, size); }

  // A state in `block`, a block the pool gave for a pooled_join_state<T>
  // (one a worker kept: worker_context::kept_join_state).
  static pooled_join_state* make_in(void* block) noexcept {
    return ::new (block) pooled_join_state();
  }
};

// Hands `error` to the on_detached_exception handler of the executor whose
// worker calls this (a detached coroutine task's body, which always runs on
// a worker or a host thread acting as one).
void report_detached_exception_here(const std::exception_ptr& error) noexcept;

}  // namespace canopy::detail
