// park_backend — how a parked worker blocks and how it is woken.
//
// The SignalWaker decides *whether* a worker sleeps (its latch); a park
// backend is only *how*. The default blocks on the latch word with a futex.
// The I/O reactor will provide a backend whose wait() is epoll_wait on an
// epoll set that also watches an eventfd, and whose wake() writes that
// eventfd, so that a parked worker can wait for I/O and for tasks at once.
//
// Contract: wait(word, expected) returns at the latest after a wake(word)
// that follows a change of `word` away from `expected`; it may return early
// (spuriously). Both are called concurrently from different threads.
#pragma once

#include <cstdint>

#include "../sync/atomics.hpp"

namespace canopy {

class park_backend {
 public:
  park_backend() = default;
  park_backend(const park_backend&) = delete;
  park_backend& operator=(const park_backend&) = delete;
  virtual ~park_backend() = default;

  virtual void wait(sync::atomic<std::uint32_t>& word, std::uint32_t expected) noexcept = 0;
  virtual void wake(sync::atomic<std::uint32_t>& word) noexcept = 0;
};

// Blocks on the word itself with FUTEX_WAIT_PRIVATE / FUTEX_WAKE_PRIVATE.
class futex_park_backend final : public park_backend {
 public:
  void wait(sync::atomic<std::uint32_t>& word, std::uint32_t expected) noexcept override;
  void wake(sync::atomic<std::uint32_t>& word) noexcept override;
};

}  // namespace canopy
