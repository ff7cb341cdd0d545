// wait_source — a custom wait: the one way to make something of your own
// awaitable by Canopy tasks and fibers (readiness of a descriptor, a timer,
// a queue).
//
// Write a *wait source* W — an object that lives in the waiting task (a
// local of the coroutine or of the fiber) — with four members:
//
//   bool ready() noexcept;          // the wait is over. Any thread may make it
//                                   // true; once true it stays true.
//   bool arm(const canopy::waker&); // register the waker. The source calls
//                                   // waker.wake() (from any thread) after it
//                                   // makes ready() true. Return false if
//                                   // ready() is already true: then nothing
//                                   // stays registered and the task goes on.
//   void disarm() noexcept;         // unregister. Called exactly once for each
//                                   // arm() that returned true, when the wait
//                                   // ends for any reason: it completed, or the
//                                   // task is cancelled or destroyed (shutdown).
//                                   // After it returns the source must not
//                                   // touch W (a wake through a copy of the
//                                   // waker is harmless: stale wakes are no-ops).
//   R result();                     // after ready() (and disarm()): the value of
//                                   // the wait; may throw.
//
// and wait with
//
//   R value = co_await canopy::wait_on(source);        // in a canopy::task
//   R value = canopy::this_fiber::wait_on(source);     // in a fiber
//
// Optionally, `static constexpr bool completion_kept = true;`: a completion
// that disarm() cannot undo (a channel send whose value a receiver took).
// A task cancelled while it waits on such a source first disarms it (so
// its disarm() must be idempotent: it is called again when the wait ends),
// then, if ready(), resumes with the result and is cancelled at its next
// suspension, so that the result is seen (race reports the send as done);
// without it the cancel destroys the task and disarm() gives back what it
// can (a promised value goes to the next receiver, a granted lock to the
// next waiter).
//
// A wake that finds ready() false resumes nothing (the task stays
// suspended), so wakes may be spurious or stale; a wake while the task still
// runs (the source completed during arm()) re-runs it once. ready() and
// disarm() are called by the worker running or destroying the task, never
// at the same time as arm(). Because the source holds only a waker — a
// value naming the task and its slot generation, never a pointer into the
// task — a source that outlives the wait, or fires late, cannot touch freed
// memory; the waker must not outlive its executor (wait/waker.hpp).
// docs/coroutines.md has a complete example. The coroutine form is in
// coroutine/custom_wait.hpp, the fiber form in fiber/this_fiber.hpp.
#pragma once

#include <concepts>

#include "waker.hpp"

namespace canopy {

template <class W>
concept wait_source = requires(W& source, const waker& wake) {
  { source.ready() }
  noexcept->std::convertible_to<bool>;
  { source.arm(wake) } -> std::convertible_to<bool>;
  { source.disarm() }
  noexcept;
  source.result();
};

// Whether W's completion is kept over a cancel (completion_kept above).
template <class W>
inline constexpr bool wait_completion_kept = requires { requires W::completion_kept; };

}  // namespace canopy
