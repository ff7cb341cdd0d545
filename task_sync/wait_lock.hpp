// wait_lock — the small lock that guards a task_sync primitive's waiter
// queue (and a channel's ring). Held only for a few pointer moves, never
// across a wake or a user callback, so contention is short; a thread that
// still finds it taken sleeps on the word (futex) instead of spinning.
//
// Word: 0 free, 1 taken, 2 taken and someone may sleep on it (Drepper,
// "Futexes Are Tricky", mutex 3). Built on atomics/atomics.hpp and
// atomics/futex.hpp so that the model checker (tests/model/) runs this very
// code with its own atomics and parking.
#pragma once

#include <cstdint>
#include <utility>

#include "../atomics/atomics.hpp"
#include "../atomics/futex.hpp"

namespace canopy::detail {

class wait_lock {
 public:
  void lock() noexcept {
    std::uint32_t expected = 0;
    // acquire: pairs with unlock()'s release; the previous holder's writes
    // to the guarded queue are visible to us.
    if (word_.compare_exchange_strong(expected, 1, atomics::acquire, atomics::relaxed)) {
      return;
    }
    // acquire: same pairing as above, for the contended path.
    while (word_.exchange(2, atomics::acquire) != 0) {
      atomics::futex_wait(word_, 2);
    }
  }

  void unlock() noexcept {
    // release: pairs with lock()'s acquire (the CAS or the exchange).
    if (word_.exchange(0, atomics::release) == 2) {
      atomics::futex_wake_one(word_);
    }
  }

 private:
  atomics::atomic<std::uint32_t> word_{0};
};

// Scoped holder (std::lock_guard needs only lock/unlock, but an explicit
// type keeps the checker build free of <mutex>).
class wait_lock_guard {
 public:
  explicit wait_lock_guard(wait_lock& lock) noexcept : lock_(&lock) { lock_->lock(); }
  wait_lock_guard(const wait_lock_guard&) = delete;
  wait_lock_guard& operator=(const wait_lock_guard&) = delete;
  ~wait_lock_guard() {
    if (lock_ != nullptr) {
      lock_->unlock();
    }
  }
  void unlock() noexcept { std::exchange(lock_, nullptr)->unlock(); }

 private:
  wait_lock* lock_;
};

}  // namespace canopy::detail
