// timer_queue — the timers of one executor: a timing wheel behind a mutex,
// whose expiries wake tasks through their wakers.
//
// Who calls what:
//   * waits (io/timer/timer_wait.hpp: sleep_for, with_timeout) arm() and disarm()
//     entries from any thread, usually the worker running the waiting task;
//   * whoever drives the timers (the reactor's poller, or a timer_thread)
//     sleeps until next_deadline() and calls expire(now) when it wakes, and
//     from a busy pool's non-blocking polls. An arm() that makes the earliest
//     deadline earlier than the last next_deadline() answer calls the
//     earlier-deadline listener, so the sleeping driver recomputes its
//     timeout (the reactor writes its eventfd).
// Precision: deadlines are rounded up to the microsecond; a timer never
// fires before its deadline. O(1) arm and disarm (amortised: the wheel's
// slot arrays grow); a pending timer costs its entry, which lives in the
// waiter, and 16 bytes in the wheel.
//
// Entry lifetime: an armed entry is touched by the queue only under the
// mutex. expire() unlinks a due entry, sets its `fired` flag and copies its
// waker under the mutex, and wakes the copy after unlocking, so once
// disarm() returns (it takes the mutex) the queue never touches the entry
// again, whichever side won. A wake through the copy that arrives after the
// waiter moved on is a stale wake, which the waker contract makes harmless.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>

#include "../../executor/scheduler.hpp"
#include "../../executor/idle_driver.hpp"
#include "../../atomics/atomics.hpp"
#include "../../atomics/futex_mutex.hpp"
#include "../../wait/waker.hpp"
#include "timer_wheel.hpp"

namespace canopy::io::detail {

class timer_queue final : public ext::deadline_source {
 public:
  using clock = std::chrono::steady_clock;

  // One pending timer; lives in the waiter.
  struct entry : timer_node {
    waker target;
    // Set under the queue's mutex when the entry expires. acquire loads
    // (has_fired) pair with expire()'s release store.
    canopy::detail::atomics::atomic<bool> fired{false};

    [[nodiscard]] bool has_fired() const noexcept {
      return fired.load(canopy::detail::atomics::acquire);
    }
  };

  timer_queue() noexcept;
  ~timer_queue() override;
  timer_queue(const timer_queue&) = delete;
  timer_queue& operator=(const timer_queue&) = delete;

  // Register `item` to wake `target` at `deadline`; always true (the wait
  // sources' arm() shape), or throws std::bad_alloc (not armed then). A deadline that has already
  // passed is due at the next expire(): callers that can check first (timer_wait::ready) do, and
  // arm() reads no clock (a clock read costs more than the insert on a VM).
  // `item` must not be armed.
  [[nodiscard]] bool arm(entry& item, clock::time_point deadline, const waker& target);
  // Take an armed entry back (a no-op if it already expired). Any thread;
  // afterwards the queue no longer touches `item`.
  void disarm(entry& item) noexcept;

  // deadline_source (any thread here, though a driver calls them from its
  // poller only). The earliest pending deadline, or none. May be a little
  // early after a cancel (the driver then wakes, expires nothing and asks
  // again); never late.
  [[nodiscard]] std::optional<clock::time_point> next_deadline() noexcept override;
  // Fire every timer due at `now`; returns how many fired.
  std::size_t expire(clock::time_point now) noexcept override;

  // fn(arg) is called, outside the mutex, by an arm() that makes the
  // earliest deadline earlier than the last next_deadline() answer. Set it
  // before any arm() (it is read without synchronisation beyond the mutex).
  void set_earlier_deadline_listener(void (*fn)(void*) noexcept, void* arg) noexcept;

  [[nodiscard]] std::size_t pending() noexcept;

  // Time <-> ticks (µs since this queue was made). to_ticks rounds up so
  // that no timer fires early; now_ticks rounds down.
  [[nodiscard]] std::uint64_t deadline_ticks(clock::time_point deadline) const noexcept;
  [[nodiscard]] std::uint64_t now_ticks(clock::time_point now) const noexcept;
  [[nodiscard]] clock::time_point from_ticks(std::uint64_t ticks) const noexcept;
  // ticks -> the hint's unit (deadline_source::earliest_deadline_hint).
  [[nodiscard]] std::int64_t hint_of(std::uint64_t ticks) const noexcept;

  // The timer queue of an executor, for waits that run in its tasks: the
  // reactor (or a timer_thread) attaches its queue when it starts driving
  // the executor's timers and detaches it before it stops. At most one
  // queue per executor; attach throws std::logic_error on a second one or
  // when the table (64 executors) is full.
  static void attach(canopy::detail::scheduler& core, timer_queue& queue);
  static void detach(canopy::detail::scheduler& core) noexcept;
  // The queue of the executor running the calling task; throws
  // std::logic_error outside a task or when none is attached.
  static timer_queue& current();
  [[nodiscard]] static timer_queue* find(const canopy::detail::scheduler* core) noexcept;

 private:
  // A futex_mutex: every timed wait arms and disarms under it, and its
  // uncontended path is inline. Held only for wheel moves, never a call out.
  canopy::detail::atomics::futex_mutex mutex_;
  timer_wheel wheel_;        // guarded by mutex_
  std::uint64_t promised_;   // guarded: last next_deadline() answer, in ticks
  std::uint64_t hinted_;     // guarded: last earliest_deadline_hint() published, in ticks
  clock::time_point epoch_;  // written once
  void (*listener_)(void*) noexcept = nullptr;
  void* listener_arg_ = nullptr;
};

}  // namespace canopy::io::detail
