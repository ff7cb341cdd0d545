#pragma once

#include <condition_variable>
#include <mutex>

namespace canopy::bench::spawn_burst_memory {

// Holds every worker of an executor inside one blocker task each until the
// gate opens, so that tasks submitted meanwhile stay pending. Blocker tasks
// share ownership of the gate (std::shared_ptr), because a blocker may still
// be leaving hold_here() after the measuring thread has finished with it.
class worker_gate {
 public:
  explicit worker_gate(unsigned worker_count) : workers_(worker_count) {}

  // Called by each blocker task.
  void hold_here() {
    std::unique_lock lock(mutex_);
    if (++held_ == workers_) {
      all_held_.notify_one();
    }
    opened_.wait(lock, [this] { return open_; });
  }

  void wait_until_all_held() {
    std::unique_lock lock(mutex_);
    all_held_.wait(lock, [this] { return held_ == workers_; });
  }

  void open() {
    const std::lock_guard lock(mutex_);
    open_ = true;
    opened_.notify_all();
  }

 private:
  const unsigned workers_;
  std::mutex mutex_;
  std::condition_variable all_held_;
  std::condition_variable opened_;
  unsigned held_ = 0;
  bool open_ = false;
};

}  // namespace canopy::bench::spawn_burst_memory
