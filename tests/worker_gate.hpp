// worker_gate — keeps every worker of a pool busy until open(), so that
// tasks spawned meanwhile stay unstarted (for cancel-before-start, yield
// order, and the like). Construct and open from the test's thread.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <latch>
#include <mutex>
#include <vector>

#include "executor/executor.hpp"

namespace canopy::testing {

class worker_gate {
 public:
  // Returns once `workers` tasks are running on `pool`, each holding one
  // worker.
  worker_gate(executor& pool, std::size_t workers) : started_(static_cast<std::ptrdiff_t>(workers)) {
    for (std::size_t index = 0; index < workers; ++index) {
      handles_.push_back(pool.spawn([this] {
        started_.count_down();
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [this] { return open_; });
      }));
    }
    started_.wait();
  }
  worker_gate(const worker_gate&) = delete;
  worker_gate& operator=(const worker_gate&) = delete;

  // Lets the workers go and waits until the gate's tasks have ended.
  void open() {
    {
      const std::lock_guard lock(mutex_);
      open_ = true;
    }
    cv_.notify_all();
    for (auto& handle : handles_) {
      handle.get();
    }
    handles_.clear();
  }
  ~worker_gate() {
    if (!handles_.empty()) {
      open();
    }
  }

 private:
  std::latch started_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool open_ = false;
  std::vector<canopy::join_handle<void>> handles_;
};

}  // namespace canopy::testing
