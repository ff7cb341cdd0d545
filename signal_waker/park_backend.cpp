#include "park_backend.hpp"

#include "../atomics/futex.hpp"

namespace canopy::detail {

// In the checking builds atomics/futex.hpp is the checker's futex (a parked
// logical thread; Relacy's emulation), so the checkers run this code too.
bool futex_park_backend::wait(atomics::atomic<std::uint32_t>& word,
                              std::uint32_t expected) noexcept {
  // The kernel compares the word with `expected` under its own lock, so a
  // wake() that changed the word first makes this return at once (EAGAIN).
  // EINTR and spurious returns are allowed by the contract; callers loop.
  atomics::futex_wait(word, expected);
  return false;
}

void futex_park_backend::wake(atomics::atomic<std::uint32_t>& word) noexcept {
  atomics::futex_wake_one(word);
}

}  // namespace canopy::detail
