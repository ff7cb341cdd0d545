// sleep_latch — the 4-state per-worker latch of the sleep protocol.
//
// compile: skip a diagram, not code
//   UNSET ──get_sleepy──> SLEEPY ──fall_asleep──> SLEEPING
//     ^                     │                        │
//     └──────── reset ──────┴──── (any) ── set ──> SET
//
// Only the owning worker moves UNSET -> SLEEPY -> SLEEPING and SET -> UNSET
// (reset, once it is awake). Any thread may set(): a waker that finds
// SLEEPING owes the worker an unpark. The latch word is also the word the
// worker parks on (futex), so "is it asleep?" and "wake it" are one atomic.
#pragma once

#include <cstdint>

#include "../atomics/atomics.hpp"

namespace canopy::detail {

class sleep_latch {
 public:
  enum state : std::uint32_t { unset = 0, sleepy = 1, sleeping = 2, set_ = 3 };

  // Owner: UNSET -> SLEEPY. False if a waker already set the latch.
  [[nodiscard]] bool get_sleepy() noexcept { return transition(unset, sleepy); }

  // Owner: SLEEPY -> SLEEPING. False if a waker set the latch meanwhile.
  [[nodiscard]] bool fall_asleep() noexcept { return transition(sleepy, sleeping); }

  // Owner, aborting a park it committed to: SLEEPING -> UNSET. False if a
  // waker claimed the latch first (it then owns the sleeper bookkeeping).
  [[nodiscard]] bool abort_sleep() noexcept { return transition(sleeping, unset); }

  // Waker: SLEEPING -> SET, only if the worker is parked (or committed to).
  // True means the caller claimed the sleeper and must unpark it.
  [[nodiscard]] bool claim_sleeper() noexcept { return transition(sleeping, set_); }

  // Any thread: force SET; returns the previous state.
  state set() noexcept {
    // seq_cst exchange: pairs with the owner's transitions and the parked
    // worker's load in park(); shutdown relies on it being a total order.
    return static_cast<state>(word_.exchange(set_, atomics::seq_cst));
  }

  // Owner, once awake: back to UNSET (from SET or SLEEPY).
  void reset() noexcept {
    // release: publishes nothing new but orders the owner's later sleepy
    // announcement after everything it did while awake.
    word_.store(unset, atomics::release);
  }

  [[nodiscard]] state load() const noexcept {
    // acquire: pairs with set()/claim_sleeper(), so what the waker wrote
    // before waking us (wake reason, shutdown flag) is visible.
    return static_cast<state>(word_.load(atomics::acquire));
  }

  // The word the parker blocks on.
  atomics::atomic<std::uint32_t>& word() noexcept { return word_; }

 private:
  bool transition(state from, state to) noexcept {
    std::uint32_t expected = from;
    // seq_cst: latch transitions are part of the park handshake's total
    // order (a waker's claim and a sleeper's abort must agree on who owns
    // the sleeper's bookkeeping).
    return word_.compare_exchange_strong(expected, to, atomics::seq_cst, atomics::seq_cst);
  }

  atomics::atomic<std::uint32_t> word_{unset};
};

}  // namespace canopy::detail
