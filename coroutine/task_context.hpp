// task_context — what a spawned coroutine task's next run resumes and what
// it waits for. One per spawned task, in its slot (coroutine/coroutine_body.hpp);
// every coroutine of the task points at it, and every Canopy awaiter
// records its suspension here (suspend_on). coroutine/task.hpp explains how
// a spawned coroutine runs.
#pragma once

#include <coroutine>
#include <cstdint>

#include "../executor/task_slot.hpp"

namespace canopy::detail {

// What a suspended task waits for, as recorded in its task_context. The
// body's run() checks it before resuming (a wake that finds the wait not
// over is spurious and leaves the task suspended), and destroying the task
// releases it (coroutine/coroutine_body.hpp).
enum class wait_kind : std::uint8_t {
  none,    // any wake resumes (wait_for_wake, yield_now)
  link,    // a wait_link that must have fired (async_event, foreign awaitables)
  join,    // a join state of this executor that must be ready()
  custom,  // a wait source (wait/wait_source.hpp): custom_ops->ready()
  // A fork-join region this task opened (coroutine/fork_region.hpp) that
  // must have finished; its frames read the region through waiting_on.
  fork_region,
};

// How the body tests and releases a custom wait that lives in the frame.
struct custom_wait_ops {
  bool (*ready)(void* wait) noexcept;
  void (*disarm)(void* wait) noexcept;
  // A completion disarm cannot undo (wait_source.hpp, completion_kept).
  bool completion_kept;
};

// Per spawned task, in its slot: what the next run resumes and what the
// current one ended with. Touched only by the thread running the task (or
// by the thread destroying it, which then owns it).
struct task_context {
  // Spawning writes only what a first run reads: waiting_on and custom_ops
  // are written by suspend_on before any kind that reads them.
  explicit task_context(std::coroutine_handle<> start) noexcept : resume_point(start) {}

  std::coroutine_handle<> resume_point;  // innermost suspended coroutine
  void* waiting_on;                      // the wait_link, join state or custom wait
  const custom_wait_ops* custom_ops;     // when kind == custom
  wait_kind kind = wait_kind::none;
  detail::run_outcome signal = detail::run_outcome::suspended;
  // Set by an inline-awaited task that ran to its end (its frame freed
  // itself), with resume_point naming its awaiter: the body resumes that
  // next (coroutine/coroutine_body.hpp), in place of a symmetric transfer.
  bool resume_awaiter = false;
  // Set by the body's first run. A joiner may take over a task that never
  // ran (coroutine/join_await.hpp), never one that did: its coroutines
  // point at this context.
  bool started = false;
  // A cancel found the task waiting for another task's end and asked that
  // one to stop: the task now waits for that end (coroutine/coroutine_body.hpp).
  bool cancel_forwarded = false;

  // An awaiter about to suspend `self` records what the wait is; every
  // suspension comes through here (it sets `signal`, which the body does
  // not reset before resuming). waiting_on and custom_ops are read only
  // under the kind that wrote them, so a wait that does not use them leaves
  // them as they are (the stores would cost every yield and every join).
  void suspend_on(std::coroutine_handle<> self, wait_kind what, void* on,
                  const custom_wait_ops* ops = nullptr) noexcept {
    resume_point = self;
    if (what != wait_kind::none) {
      waiting_on = on;
    }
    if (what == wait_kind::custom) {
      custom_ops = ops;
    }
    kind = what;
    signal = detail::run_outcome::suspended;
  }
  // The wait ended (it was over when the task ran, or the source was ready
  // before the task suspended).
  void clear_wait() noexcept { kind = wait_kind::none; }
};

}  // namespace canopy::detail
