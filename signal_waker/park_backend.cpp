#include "park_backend.hpp"

#include "../atomics/futex.hpp"

namespace canopy::detail {

// In the checking builds atomics/futex.hpp is the checker's futex (a parked
// logical thread; Relacy's emulation), so the checkers run this code too.
bool futex_park_backend::wait(sync::atomic<std::uint32_t>& word, std::uint32_t expected) noexcept {
  // The kernel compares the word with `expected` under its own lock, so a
  // wake() that changed the word first makes this return at once (EAGAIN).
  // EINTR and spurious returns are allowed by the contract; callers loop.
  sync::futex_wait(word, expected);
  return false;
}

void futex_park_backend::wake(sync::atomic<std::uint32_t>& word) noexcept {
  sync::futex_wake_one(word);
}

}  // namespace canopy::detail
