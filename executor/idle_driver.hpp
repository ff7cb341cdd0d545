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
#include <optional>

namespace canopy {

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
};

}  // namespace canopy
