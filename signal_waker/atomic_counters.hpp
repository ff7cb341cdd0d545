// atomic_counters — the packed sleep-protocol state shared by all workers.
//
// compile: skip a diagram, not code
//   bits  0..15  sleeping   workers registered as parked on their SignalWaker
//   bits 16..31  inactive   workers not running a task (searching, sleepy or parked)
//   bits 32..63  JEC        jobs event counter: even = sleepy, odd = active
//
// awake_but_idle = inactive - sleeping: workers still searching, which will
// find newly posted work without being woken.
//
// The JEC has two toggles (rayon's protocol, not the Blitz documents' single
// toggle): a worker announcing sleepiness moves it active -> sleepy (odd ->
// even) and snapshots the value *after* its own toggle; a poster moves it
// sleepy -> active (even -> odd). A sleepy worker that later reads a JEC
// different from its snapshot knows work was posted (or another worker
// re-announced) since it got sleepy, and searches again instead of parking.
// The counter wraps at 2^32, which keeps parity; a false "unchanged" needs
// exactly 2^32 toggles inside one worker's sleepy window.
//
// The sleeping count is incremented by the sleeper and decremented by
// whoever moves the sleeper's latch out of SLEEPING — normally the waker.
// All read-modify-writes are seq_cst: they order against the tree words in
// the park handshake (docs/architecture.md, "Why no wakeup is lost").
#pragma once

#include <cstdint>

#include "../atomics/atomics.hpp"

namespace canopy::detail {

class atomic_counters {
 public:
  struct counters {
    std::uint64_t raw = 0;
    [[nodiscard]] std::uint32_t sleeping() const noexcept {
      return static_cast<std::uint32_t>(raw & 0xffffU);
    }
    [[nodiscard]] std::uint32_t inactive() const noexcept {
      return static_cast<std::uint32_t>((raw >> 16) & 0xffffU);
    }
    [[nodiscard]] std::uint32_t jec() const noexcept {
      return static_cast<std::uint32_t>(raw >> 32);
    }
    [[nodiscard]] static bool jec_is_sleepy(std::uint32_t jec) noexcept { return (jec & 1U) == 0; }
    [[nodiscard]] std::uint32_t awake_but_idle() const noexcept {
      return inactive() > sleeping() ? inactive() - sleeping() : 0;
    }
  };

  static constexpr std::uint32_t max_threads = 0xffffU;

  [[nodiscard]] counters load() const noexcept { return {value_.load(atomics::seq_cst)}; }

  // A worker starts searching after running out of work.
  void add_inactive() noexcept { value_.fetch_add(one_inactive, atomics::seq_cst); }

  // A searching worker found work; returns the counters after the change.
  counters sub_inactive() noexcept {
    return {value_.fetch_sub(one_inactive, atomics::seq_cst) - one_inactive};
  }

  // Sleepy toggle: active (odd) -> sleepy (even). Returns the JEC after the
  // toggle, which the worker keeps as its snapshot.
  std::uint32_t announce_sleepy() noexcept { return increment_jec_if(false).jec(); }

  // Poster toggle: sleepy (even) -> active (odd). Returns the counters after.
  counters announce_new_jobs() noexcept { return increment_jec_if(true); }

  // The sleeper registers itself, but only if the JEC still equals its
  // snapshot (read in `seen`). Fails if the counters changed since `seen`.
  [[nodiscard]] bool try_add_sleeping(counters seen) noexcept {
    std::uint64_t expected = seen.raw;
    return value_.compare_exchange_strong(expected, seen.raw + one_sleeping, atomics::seq_cst,
                                          atomics::seq_cst);
  }

  // Called by whoever moves a parked worker's latch out of SLEEPING.
  void sub_sleeping() noexcept { value_.fetch_sub(one_sleeping, atomics::seq_cst); }

 private:
  static constexpr std::uint64_t one_sleeping = 1;
  static constexpr std::uint64_t one_inactive = std::uint64_t{1} << 16;
  static constexpr std::uint64_t one_jec = std::uint64_t{1} << 32;

  // Increments the JEC if its sleepy-ness equals `when_sleepy`; returns the
  // final counters, for which the condition no longer holds. The fast path
  // (condition already false) is one seq_cst load; the slow path's seq_cst
  // CAS orders it in the counters word's modification order against the
  // sleeper's CAS in try_sleep, which compares the JEC with its snapshot.
  counters increment_jec_if(bool when_sleepy) noexcept {
    std::uint64_t word = value_.load(atomics::seq_cst);
    while (counters::jec_is_sleepy(counters{word}.jec()) == when_sleepy) {
      if (value_.compare_exchange_weak(word, word + one_jec, atomics::seq_cst, atomics::seq_cst)) {
        return {word + one_jec};
      }
    }
    return {word};
  }

  alignas(atomics::cache_line) atomics::atomic<std::uint64_t> value_{0};
};

}  // namespace canopy::detail
