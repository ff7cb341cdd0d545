// futex_mutex — a mutex for short critical sections on hot paths: the
// uncontended lock is one compare-and-swap and the unlock one exchange,
// both inline, where std::mutex goes through pthread_mutex_lock/unlock
// calls. A thread that finds it taken spins a bounded number of times
// (the holder usually leaves within a few hundred cycles) and then sleeps
// on the word (futex), so a holder that makes a system call under the
// lock (the reactor's epoll_ctl) or is preempted costs the waiters a sleep,
// not a spin.
//
// Word: 0 free, 1 taken, 2 taken and a thread may sleep on it (Drepper,
// "Futexes Are Tricky", mutex 3). unlock() makes a system call only when it
// finds 2. A thread that took the lock on the sleeping path leaves 2
// behind, so its unlock wakes once even when nobody sleeps: the price of
// not counting the sleepers.
//
// Not recursive, not fair. Any thread may lock; only the holder unlocks.
// Meets Lockable (std::lock_guard, std::unique_lock). Built on
// atomics/atomics.hpp and atomics/futex.hpp, so the model checker (tests/model/)
// runs this very code with its own atomics and parking.
#pragma once

#include <cstdint>

#include "atomics.hpp"
#include "futex.hpp"

namespace canopy::detail::atomics {

class futex_mutex {
 public:
  futex_mutex() noexcept = default;
  futex_mutex(const futex_mutex&) = delete;
  futex_mutex& operator=(const futex_mutex&) = delete;

  void lock() noexcept {
    std::uint32_t expected = free;
    // acquire: pairs with unlock()'s release exchange; the previous
    // holder's writes to the guarded state are visible to us.
    if (word_.compare_exchange_strong(expected, taken, acquire, relaxed)) [[likely]] {
      return;
    }
    lock_contended();
  }

  [[nodiscard]] bool try_lock() noexcept {
    std::uint32_t expected = free;
    // acquire: as lock()'s.
    return word_.compare_exchange_strong(expected, taken, acquire, relaxed);
  }

  void unlock() noexcept {
    // release: pairs with the acquire of lock()'s and try_lock()'s CAS and
    // of lock_contended()'s CAS and exchange; our writes to the guarded
    // state happen before the next holder's reads.
    if (word_.exchange(free, release) == sleepers) [[unlikely]] {
      futex_wake_one(word_);
    }
  }

 private:
  static constexpr std::uint32_t free = 0;
  static constexpr std::uint32_t taken = 1;
  static constexpr std::uint32_t sleepers = 2;
  // Spins before sleeping. The checkers see every iteration as the same
  // step, so two cover both ways a spin ends (it found the word free, or
  // it gave up) without multiplying their schedules.
#if defined(CANOPY_MODEL_CHECK) || defined(CANOPY_RELACY)
  static constexpr int spin_limit = 2;
#else
  static constexpr int spin_limit = 100;
#endif

  [[gnu::noinline]] void lock_contended() noexcept {
    for (int spin = 0; spin < spin_limit; ++spin) {
      const std::uint32_t seen = word_.load(relaxed);
      if (seen == sleepers) {
        break;  // a thread already sleeps: queue behind it, do not race it
      }
      if (seen == free) {
        std::uint32_t expected = free;
        // acquire: as lock()'s.
        if (word_.compare_exchange_strong(expected, taken, acquire, relaxed)) {
          return;
        }
      }
      spin_pause();
    }
    // acquire: as lock()'s. Storing 2 (not 1) is what makes the holder's
    // unlock wake us: we may sleep below, and we cannot tell whether
    // another thread sleeps too, so when we take the lock here we keep 2.
    while (word_.exchange(sleepers, acquire) != free) {
      // Sleeps only while the word is still 2: an unlock between our
      // exchange and this call makes it return at once.
      futex_wait(word_, sleepers);
    }
  }

  atomic<std::uint32_t> word_{free};
};

}  // namespace canopy::detail::atomics
