// idle_driver — what a parked worker may wait on besides its futex: the
// extension point through which io/ (the epoll reactor) plugs into the
// executor without the executor including io/.
//
// An executor built with executor_config::driver set gives one worker at a
// time the poller role (signal_waker/sleep_module.hpp): when that worker
// parks, it blocks in wait() instead of on its futex, and a waker that
// claims it calls notify() instead of FUTEX_WAKE. Whatever wait() collected
// is delivered by dispatch() once the worker is awake again. While every
// worker is busy, a worker calls dispatch() without blocking every
// executor_config::driver_poll_interval tasks when no worker holds the
// poller role, so readiness is never starved by CPU work.
//
// Threads: wait() and dispatch() are called only by the worker holding the
// poller role (one at a time; the role's hand-over is a release/acquire
// pair, so the driver's buffers need no lock of their own). notify() is
// called from any thread, concurrently with wait().
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>

#include "../atomics/atomics.hpp"

namespace canopy::detail {
class scheduler;
}  // namespace canopy::detail

// canopy::ext: the extension points, the interfaces through which a part the
// executor does not know (a reactor, its timers, a task kind) plugs in:
// idle_driver and deadline_source here, task_spawner in executor/executor.hpp.
// They are public in that an extension implements them, not part of the
// everyday API (docs/io.md, docs/architecture.md "Namespaces").
namespace canopy::ext {

class deadline_source;

class idle_driver {
 public:
  idle_driver() = default;
  idle_driver(const idle_driver&) = delete;
  idle_driver& operator=(const idle_driver&) = delete;
  virtual ~idle_driver() = default;

  // Poller only. Block until notify(), readiness, or the driver's next
  // deadline. Returns true if something was collected for dispatch() (the
  // worker then wakes itself); false after a notify() or a spurious return.
  // A notify() that happened before the call makes it return at once.
  virtual bool wait() noexcept = 0;

  // Any thread: make a wait() in progress, or the next one, return.
  virtual void notify() noexcept = 0;

  // Poller only, awake: deliver what wait() collected, poll once more
  // without blocking, expire due deadlines; this wakes the waiting tasks
  // (waker::wake). Returns how many events and deadlines it delivered.
  virtual std::size_t dispatch() noexcept = 0;

  // Any worker: hand what the driver queued for the kernel to it now. A
  // completion backend (io_uring) queues the requests of many tasks and
  // submits them in one system call; a worker calls this when it runs out
  // of work and at each driver-poll interval, and the poller's wait()
  // submits too. Must be cheap when nothing is queued. Default: nothing.
  virtual void submit() noexcept {}

  // The executor's shutdown, once, after it joined its workers and before
  // it destroys the tasks left (executor_core::shutdown, step 5): a
  // completion backend ends every request in flight here, in one step,
  // rather than one cancel per destroyed task. Default: nothing.
  virtual void workers_stopped() noexcept {}
  // The executor this driver serves, from its constructor before any of its
  // workers starts: a driver that brings services of its own (the reactor's
  // timers) attaches them here. May throw; the executor's construction then
  // fails. A driver serves one executor at a time. Default: nothing.
  virtual void bind(detail::scheduler& core) { static_cast<void>(core); }
  // That executor's shutdown is over: its tasks were destroyed (step 5), so
  // nothing can use the services bind() attached. Also called when the
  // executor's construction fails after bind(). Default: nothing.
  virtual void unbind(detail::scheduler& core) noexcept { static_cast<void>(core); }

  // What the trace calls this driver (the reactor: its I/O backend).
  [[nodiscard]] virtual const char* name() const noexcept { return "idle driver"; }

  // Any thread, wait-free: whether the earliest deadline of the driver's
  // deadline source may have passed (its hint, deadline_source below).
  // A yes can be early (a cancelled timer); the poll that follows then
  // fires nothing and refreshes the hint.
  [[nodiscard]] bool deadline_may_be_due() const noexcept;

  // Any thread, wait-free: whether completions may wait in the driver's
  // completion queue for dispatch() (set_completion_queue_view below; false
  // for a driver without one). A busy worker then polls the driver before
  // its interval is up, so that a completion is not left waiting for up
  // to driver_poll_interval tasks. A no can be stale (relaxed: the entry
  // is then seen at the next task or the next poll); a yes means a poll
  // finds something, unless another poller reaps it first.
  [[nodiscard]] bool completions_may_be_waiting() const noexcept {
    return completion_tail_ != nullptr &&
           detail::atomics::load_shared_relaxed(completion_tail_) !=
               detail::atomics::load_shared_relaxed(completion_head_);
  }

 protected:
  // A driver whose completions arrive in a queue in shared memory (an
  // io_uring completion queue: the kernel advances `tail`, dispatch()
  // advances `head`) shows its two indexes here, from its constructor,
  // before an executor is given it; both words outlive the driver's use.
  void set_completion_queue_view(const std::uint32_t* head, const std::uint32_t* tail) noexcept {
    completion_head_ = head;
    completion_tail_ = tail;
  }

  // The driver's deadline source (null: none). Whoever replaces it keeps the
  // old one alive until no worker can be asking deadline_may_be_due() (the
  // executor's workers are joined first).
  void set_deadline_source_pointer(deadline_source* source) noexcept {
    // release: pairs with the acquire loads of deadline_source_pointer() and
    // deadline_may_be_due(): the source's construction happens-before its use.
    deadlines_.store(source, detail::atomics::release);
  }
  [[nodiscard]] deadline_source* deadline_source_pointer() const noexcept {
    // acquire: pairs with set_deadline_source_pointer().
    return deadlines_.load(detail::atomics::acquire);
  }

 private:
  detail::atomics::atomic<deadline_source*> deadlines_{nullptr};
  // Written once, before any worker of the executor exists (its threads
  // start after the driver is built): plain.
  const std::uint32_t* completion_head_ = nullptr;
  const std::uint32_t* completion_tail_ = nullptr;
};

// A source of deadlines for a driver (io/ timers): the driver sleeps at most
// until next_deadline() and calls expire() when it is due. Both are called
// only by the poller (wait() and dispatch()). The source calls the driver's
// notify() when a deadline earlier than the one the poller may be sleeping
// towards appears, so that wait() recomputes its timeout.
class deadline_source {
 public:
  deadline_source() = default;
  deadline_source(const deadline_source&) = delete;
  deadline_source& operator=(const deadline_source&) = delete;
  virtual ~deadline_source() = default;

  virtual std::optional<std::chrono::steady_clock::time_point> next_deadline() noexcept = 0;
  // Fire every deadline at or before `now`; returns how many fired.
  virtual std::size_t expire(std::chrono::steady_clock::time_point now) noexcept = 0;

  // Any thread, wait-free: a hint of the earliest pending deadline, in
  // steady_clock nanoseconds since its epoch (no_deadline_hint: none). It is
  // never later than the earliest deadline armed before the read (relaxed:
  // a read that misses a concurrent arm delays that timer to the next poll,
  // at most driver_poll_interval tasks, as without the hint); it may be
  // earlier (a cancelled timer) until the next expire() refreshes it.
  [[nodiscard]] std::int64_t earliest_deadline_hint() const noexcept {
    return earliest_hint_.load(detail::atomics::relaxed);
  }
  static constexpr std::int64_t no_deadline_hint = std::numeric_limits<std::int64_t>::max();

 protected:
  // The source, whenever its earliest deadline may have changed (an arm
  // that is earlier than the hint, an expiry, a next_deadline() answer).
  void publish_earliest_deadline(std::int64_t nanoseconds_since_epoch) noexcept {
    earliest_hint_.store(nanoseconds_since_epoch, detail::atomics::relaxed);
  }

 private:
  detail::atomics::atomic<std::int64_t> earliest_hint_{no_deadline_hint};
};

inline bool idle_driver::deadline_may_be_due() const noexcept {
  const deadline_source* const source = deadline_source_pointer();
  if (source == nullptr) {
    return false;
  }
  const std::int64_t earliest = source->earliest_deadline_hint();
  if (earliest == deadline_source::no_deadline_hint) {
    return false;
  }
  const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::steady_clock::now().time_since_epoch());
  return now.count() >= earliest;
}

}  // namespace canopy::ext
