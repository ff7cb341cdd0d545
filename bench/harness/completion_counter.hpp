#pragma once

#include <atomic>
#include <cstddef>

#include "harness/completion_signal.hpp"

namespace canopy::bench {

// Counts finished tasks on one shared atomic; the task whose increment reaches
// the expected count notifies the waiting thread.
class completion_counter {
 public:
  explicit completion_counter(std::size_t expected) : expected_(expected) {}

  void count_one() {
    // Read before the increment: once this task has incremented, the
    // count may reach expected_ and the waiter destroy this object.
    const std::size_t expected = expected_;
    // acq_rel: the read-modify-writes are totally ordered on count_, so
    // exactly one task sees expected - 1. Release on every increment and
    // acquire on the last one make all increments happen before the
    // notify, so once wait() returns no task still touches count_ (a
    // relaxed increment could still be "in flight" to a destroyed
    // counter). On x86 this is the same lock xadd as relaxed.
    if (count_.fetch_add(1, std::memory_order_acq_rel) + 1 == expected) {
      all_done_.notify();
    }
  }

  void wait() { all_done_.wait(); }

  // Valid after wait() returned.
  [[nodiscard]] std::size_t count() const { return count_.load(std::memory_order_relaxed); }

 private:
  const std::size_t expected_;
  std::atomic<std::size_t> count_{0};
  completion_signal all_done_;
};

}  // namespace canopy::bench
