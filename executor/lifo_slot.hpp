// lifo_slot — a worker's LIFO slot: the task it spawned or woke last, run
// next without touching the summary tree (docs/architecture.md, "The LIFO
// slot").
//
// One word holding a task's slot index, or `empty`. Who does what:
//   put          the owner only (a task spawned or woken on its thread);
//                returns the task it evicted, which the caller hands to the
//                tree with signal_task (a set bit, and a wake per the protocol)
//   take         the owner, when its current task ends
//   steal        an idle worker that found no tree work
//   take_if_is   the owner, from inside a run (run-at-join: claim_pending)
// Every way out of the slot is an RMW that leaves it empty, so each task put
// in is taken exactly once: by one exchange (owner or thief) or the owner's
// CAS, or it is evicted by the owner's next put (invariant S).
//
// Compiled against atomics/atomics.hpp only, so the model checker
// (tests/model/) runs this code, not a copy.
#pragma once

#include <cstdint>

#include "../atomics/atomics.hpp"

namespace canopy::detail {

class lifo_slot {
 public:
  static constexpr std::uint32_t empty = ~std::uint32_t{0};

  // Owner: `slot` becomes the LIFO task; returns the task that was there
  // (empty if none), which the caller must hand to the tree. Always inline:
  // it is on every spawn's path, and LTO's unit-growth limit otherwise
  // decides for it by the size of unrelated code (every task frame's
  // allocation inlines fork_stack.hpp's mark check).
  [[nodiscard, gnu::always_inline]] std::uint32_t put(std::uint32_t slot) noexcept {
    // Only the owner writes a task in; thieves only exchange one out. So a
    // slot the owner reads empty stays empty until the owner's own store,
    // and the store needs no locked instruction (a thief's exchange either
    // precedes it and takes nothing, or follows it and takes `slot`).
    if (word_.load(atomics::relaxed) == empty) {
      // release: publishes the task's body and state to whoever takes it
      // (owner or thief, both exchange with acquire).
      word_.store(slot, atomics::release);
      return empty;
    }
    // acq_rel: release publishes the task's body and state to whoever takes
    // it (owner or thief, both exchange with acquire); acquire pairs with the
    // release of the task we evict, which goes to the tree.
    return word_.exchange(slot, atomics::acq_rel);
  }

  // Owner: take the LIFO task, if any (empty if none).
  [[nodiscard]] std::uint32_t take() noexcept {
    if (word_.load(atomics::relaxed) == empty) {
      return empty;  // a hint: skips the locked RMW when the slot is empty
    }
    // acquire: pairs with put's exchange (the body is visible).
    return word_.exchange(empty, atomics::acquire);
  }

  // Thief (another worker, idle): take the LIFO task, if any. The exchange
  // against the owner's take, put or take_if_is decides who has it.
  [[nodiscard]] std::uint32_t steal() noexcept {
    if (word_.load(atomics::relaxed) == empty) {
      return empty;  // a hint, as in take()
    }
    // acquire: pairs with put's exchange (the body is visible).
    return word_.exchange(empty, atomics::acquire);
  }

  // Owner: take the LIFO task only if it is `slot`. Only the owner puts
  // tasks in, so a plain read that does not show `slot` means it is not
  // there and cannot arrive: the locked CAS is skipped (in fork-join code
  // it mostly fails: the child was evicted by the parent's later spawns).
  [[nodiscard]] bool take_if_is(std::uint32_t slot) noexcept {
    std::uint32_t expected = slot;
    // acquire: pairs with put's exchange, as when the owner takes its LIFO
    // task in take().
    return word_.load(atomics::relaxed) == slot &&
           word_.compare_exchange_strong(expected, empty, atomics::acquire, atomics::relaxed);
  }

 private:
  atomics::atomic<std::uint32_t> word_{empty};
};

}  // namespace canopy::detail
