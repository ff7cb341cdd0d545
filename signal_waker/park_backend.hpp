// park_backend — how a parked worker blocks and how it is woken.
//
// The SignalWaker decides *whether* a worker sleeps (its latch); a park
// backend is only *how*. The default blocks on the latch word with a futex.
// The executor's poller backend (executor/idle_driver.hpp) waits in
// epoll_wait on an epoll set that also watches an eventfd, and its wake()
// writes that eventfd, so that the one parked worker that holds the poller
// role waits for I/O, timers and tasks at once.
//
// Contract: wait(word, expected) returns at the latest after a wake(word)
// that follows a change of `word` away from `expected`; it may return early
// (spuriously). Both are called concurrently from different threads.
// wait() returns true when the backend itself has a reason for the parked
// worker to wake (I/O readiness or a timer deadline collected by a poller);
// the worker then claims its own latch (signal_waker::park). The futex
// backend never does.
#pragma once

#include <cstdint>

#include "../atomics/atomics.hpp"

namespace canopy::detail {

class park_backend {
 public:
  park_backend() = default;
  park_backend(const park_backend&) = delete;
  park_backend& operator=(const park_backend&) = delete;
  virtual ~park_backend() = default;

  virtual bool wait(atomics::atomic<std::uint32_t>& word, std::uint32_t expected) noexcept = 0;
  virtual void wake(atomics::atomic<std::uint32_t>& word) noexcept = 0;
};

// Blocks on the word itself with FUTEX_WAIT_PRIVATE / FUTEX_WAKE_PRIVATE.
class futex_park_backend final : public park_backend {
 public:
  bool wait(atomics::atomic<std::uint32_t>& word, std::uint32_t expected) noexcept override;
  void wake(atomics::atomic<std::uint32_t>& word) noexcept override;
};

}  // namespace canopy::detail
