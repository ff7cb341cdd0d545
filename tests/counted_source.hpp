// counted_source — a wait source (wait/wait_source.hpp) for the tests:
// ready once set() runs on any thread, which then wakes the registered
// waker; counts arm() and disarm() calls, so that a test can check the
// contract's "one disarm for every arm that returned true".
#pragma once

#include <atomic>
#include <mutex>

#include "wait/waker.hpp"

namespace canopy::testing {

struct counted_source {
  std::atomic<bool> flag{false};
  std::mutex mutex;
  canopy::waker target;  // guarded by mutex
  bool armed = false;    // guarded by mutex
  std::atomic<int> arms{0};
  std::atomic<int> disarms{0};

  bool ready() noexcept { return flag.load(std::memory_order_acquire); }
  bool arm(const canopy::waker& waker) {
    const std::lock_guard lock(mutex);
    if (flag.load(std::memory_order_relaxed)) {
      return false;
    }
    target = waker;
    armed = true;
    arms.fetch_add(1);
    return true;
  }
  void disarm() noexcept {
    const std::lock_guard lock(mutex);
    armed = false;
    disarms.fetch_add(1);
  }
  int result() const noexcept { return 7; }
  void set() {
    canopy::waker copy;
    {
      const std::lock_guard lock(mutex);
      // release: pairs with ready()'s acquire load.
      flag.store(true, std::memory_order_release);
      if (armed) {
        copy = target;
      }
    }
    copy.wake();
  }
};

}  // namespace canopy::testing
