#pragma once

#include <condition_variable>
#include <mutex>

namespace canopy::bench {

// One-shot "it is done" from a task to the thread that waits for it.
// The waiter blocks on a condition variable; it never spins.
class completion_signal {
 public:
  void notify() {
    // notify_one runs under the lock: the waiter cannot return from wait()
    // (and destroy this object) until the notifier has stopped touching it.
    const std::lock_guard lock(mutex_);
    done_ = true;
    wakeup_.notify_one();
  }

  void wait() {
    std::unique_lock lock(mutex_);
    wakeup_.wait(lock, [this] { return done_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable wakeup_;
  bool done_ = false;
};

}  // namespace canopy::bench
