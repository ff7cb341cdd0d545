#include "park_backend.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace canopy {

#ifdef CANOPY_MODEL_CHECK
// Model-checking build: parking is a state of the checker's logical thread.
bool futex_park_backend::wait(sync::atomic<std::uint32_t>& word, std::uint32_t expected) noexcept {
  model::park_on(&word, expected, word.peek());
  return false;
}
void futex_park_backend::wake(sync::atomic<std::uint32_t>& word) noexcept {
  model::unpark_on(&word);
}
#elif defined(CANOPY_RELACY)
// Weak-memory checking build: Relacy's futex emulation on the latch word.
bool futex_park_backend::wait(sync::atomic<std::uint32_t>& word, std::uint32_t expected) noexcept {
  word.futex_wait(expected);
  return false;
}
void futex_park_backend::wake(sync::atomic<std::uint32_t>& word) noexcept { word.futex_wake(); }
#else
namespace {
long futex(sync::atomic<std::uint32_t>& word, int operation, std::uint32_t value) noexcept {
  static_assert(sizeof(sync::atomic<std::uint32_t>) == sizeof(std::uint32_t));
  return syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), operation, value, nullptr,
                 nullptr, 0);
}
}  // namespace

bool futex_park_backend::wait(sync::atomic<std::uint32_t>& word, std::uint32_t expected) noexcept {
  // The kernel compares the word with `expected` under its own lock, so a
  // wake() that changed the word first makes this return at once (EAGAIN).
  // EINTR and spurious returns are allowed by the contract; callers loop.
  futex(word, FUTEX_WAIT_PRIVATE, expected);
  return false;
}

void futex_park_backend::wake(sync::atomic<std::uint32_t>& word) noexcept {
  futex(word, FUTEX_WAKE_PRIVATE, 1);
}

#endif

}  // namespace canopy
