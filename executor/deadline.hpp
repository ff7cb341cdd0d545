// deadline — the steady-clock deadline of a user's timeout, saturated.
//
// Every call that takes a duration or a time point (handle.wait_for and
// wait_until, run_for and run_until, sleep_for and with_timeout) turns it
// into a steady_clock::time_point here, so that the extremes a user writes
// for "no limit" and "already over" mean that:
//   * a duration too long for the clock (duration::max(), hours::max(), or
//     a time point past the clock's range) gives time_point::max(): the
//     wait has no deadline;
//   * a zero or negative duration, or a time point already passed
//     (time_point::min() included), gives now: the wait only polls.
// Plain `now + ceil<ns>(d)` overflows the 64-bit nanosecond count for such
// values (undefined behaviour; in practice a deadline in the past, so a
// wait meant to last for ever returned at once, or one in the past that
// waited for ever).
#pragma once

#include <chrono>
#include <type_traits>

namespace canopy::detail {

// now + duration, saturating at time_point::max(); now for duration <= 0.
template <class Rep, class Period>
[[nodiscard]] std::chrono::steady_clock::time_point steady_deadline_after(
    std::chrono::duration<Rep, Period> duration) {
  using steady = std::chrono::steady_clock;
  const steady::time_point now = steady::now();
  if (!(duration > duration.zero())) {  // also a NaN of a floating duration
    return now;
  }
  // Compared in floating point, which cannot overflow; a duration within
  // the double's rounding (about a microsecond) of the limit saturates too.
  if (std::chrono::duration<double>(duration) >=
      std::chrono::duration<double>(steady::time_point::max() - now)) {
    return steady::time_point::max();
  }
  return now + std::chrono::ceil<steady::duration>(duration);
}

// A time point of any clock as a steady_clock deadline (read once: a
// system_clock deadline the wall clock then jumps past is not followed, as
// std::condition_variable's waits).
template <class Clock, class Duration>
[[nodiscard]] std::chrono::steady_clock::time_point steady_deadline_at(
    const std::chrono::time_point<Clock, Duration>& deadline) {
  using steady = std::chrono::steady_clock;
  if constexpr (std::is_same_v<Clock, steady> && std::is_same_v<Duration, steady::duration>) {
    return deadline;  // already one: max() stays "no deadline", min() "passed"
  } else {
    // Floating point again: `deadline - Clock::now()` overflows for
    // time_point::min() and for coarse durations near their max().
    using span = std::chrono::duration<double, std::nano>;
    const span remaining =
        span(deadline.time_since_epoch()) - span(Clock::now().time_since_epoch());
    return steady_deadline_after(remaining);
  }
}

}  // namespace canopy::detail
