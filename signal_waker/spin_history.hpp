// spin_history — whether a worker that runs out of work spins before it
// parks, learned from how its recent idle periods ended.
//
// Spinning (the idle rounds of sleep_module) pays when work comes back
// within microseconds: a chain of spawns restarted from outside, a burst.
// It costs when work comes back much later: the CPU time burnt while
// spinning counts against the worker in the kernel's scheduler, and a
// worker woken from a park after spinning is slower to run than one that
// parked at once.
//
// So a worker keeps a small score. An idle period that ends without a park
// (work was found while searching), or a park that ends within
// `short_park`, sets the score to its maximum: work comes back quickly, keep
// spinning. A park longer than `idle_park` sets it to zero: the executor
// was really idle. Each park in between takes one point off. At zero the
// worker skips the spin rounds and goes straight to announcing itself
// sleepy, until a short park shows that work is coming back quickly again.
// (A park between the two is what a worker sees while another one runs a
// chain of spawns for tens of microseconds; it should not stop the spinning
// that catches the next chain.)
//
// Owned by one worker thread (it lives in that worker's idle_state); no
// atomics. It only chooses how many rounds to spin: every round count is
// safe for the wake protocol, which begins at "announce sleepy".
#pragma once

#include <chrono>
#include <cstdint>

namespace canopy::detail {

class spin_history {
 public:
  // A park shorter than this means spinning would likely have caught the work.
  static constexpr std::chrono::microseconds short_park{50};
  // A park longer than this means the executor was idle: stop spinning now.
  static constexpr std::chrono::microseconds idle_park{1000};
  // Long parks in a row before a worker stops spinning.
  static constexpr std::uint32_t max_score = 4;

  // Spin rounds for the next idle period: all of `configured`, or none.
  [[nodiscard]] std::uint32_t rounds_to_spin(std::uint32_t configured) const noexcept {
    return score_ > 0 ? configured : 0;
  }

  // The idle period ended with work found, without parking.
  void found_work_without_parking() noexcept { score_ = max_score; }

  // The worker parked for `parked_for` and was woken.
  void parked(std::chrono::steady_clock::duration parked_for) noexcept {
    if (parked_for < short_park) {
      score_ = max_score;
    } else if (parked_for >= idle_park) {
      score_ = 0;
    } else if (score_ > 0) {
      --score_;
    }
  }

 private:
  std::uint32_t score_ = max_score;
};

}  // namespace canopy::detail
