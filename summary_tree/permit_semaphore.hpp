// permit_semaphore — decides how many parked workers a newly active leaf wakes.
//
// One 64-bit word packs two counts so that both change in one atomic step:
//
//   bits  0..31  permits   permits granted and not yet consumed
//   bits 32..63  sleepers  workers registered as parked (or committing to park)
//
// Invariant (written once, kept by every operation below):
//   permits <= sleepers.
// A permit is a promise that one parked worker will be woken to look at a
// leaf that just became active, so a permit without a sleeper to use it is
// never created (permits cannot pile up while every worker is busy).
//
// Who calls what:
//   * release(n)          — the summary tree, only when a root bit goes 0 -> 1.
//                           Returns how many sleepers the caller must wake.
//   * try_acquire()       — a worker about to park takes an outstanding permit
//                           instead of parking. Lock-free.
//   * add_sleeper()       — a worker committing to park.
//   * remove_sleeper()    — whoever moves that worker's latch out of SLEEPING
//                           (the waker, or the worker itself when it aborts).
//   * remove_sleeper_woken_by_permit()
//                         — a waker that claimed that worker for a permit: the
//                           wake is what the permit promised, so one permit
//                           goes with the sleeper.
// The semaphore never blocks or wakes anyone itself: the SignalWaker is the
// only parking place (docs/architecture.md, "One parking place").
#pragma once

#include <cstdint>

#include "../atomics/atomics.hpp"

namespace canopy::detail {

class permit_semaphore {
 public:
  struct snapshot {
    std::uint32_t permits;
    std::uint32_t sleepers;
  };

  permit_semaphore() noexcept = default;
  permit_semaphore(const permit_semaphore&) = delete;
  permit_semaphore& operator=(const permit_semaphore&) = delete;

  // Grants min(n, sleepers - permits) new permits and returns that count: the
  // number of parked workers the caller must now wake.
  [[nodiscard]] std::uint32_t release(std::uint32_t n) noexcept;

  // Takes one permit if any is outstanding.
  [[nodiscard]] bool try_acquire() noexcept;

  // Registers the calling worker as a sleeper.
  void add_sleeper() noexcept;

  // Unregisters one sleeper. If a permit was outstanding for it (permits would
  // exceed sleepers) that permit is consumed too; returns whether it was.
  bool remove_sleeper() noexcept;

  // Unregisters one sleeper that a permit wake claimed, and consumes one
  // outstanding permit with it (none if a worker still committing to park
  // took it meanwhile: then two workers are awake, which is safe). Without
  // this the permit outlived its wake, and the next worker about to park
  // took it and searched once more for nothing. Returns whether a permit
  // was consumed.
  bool remove_sleeper_woken_by_permit() noexcept;

  [[nodiscard]] snapshot load() const noexcept;

 private:
  static constexpr std::uint64_t one_permit = 1;
  static constexpr std::uint64_t one_sleeper = std::uint64_t{1} << 32;
  static std::uint32_t permits_of(std::uint64_t word) noexcept {
    return static_cast<std::uint32_t>(word);
  }
  static std::uint32_t sleepers_of(std::uint64_t word) noexcept {
    return static_cast<std::uint32_t>(word >> 32);
  }

  alignas(atomics::cache_line) atomics::atomic<std::uint64_t> word_{0};
};

}  // namespace canopy::detail
