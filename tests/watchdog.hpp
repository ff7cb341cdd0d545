// watchdog — fail a concurrent test case by timeout instead of hanging CI.
//
// Construct one at the top of a test case; if the case has not finished
// within `seconds`, the process prints which case hung and exits with
// status 3 (the test runner counts that binary as failed).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

namespace canopy::testing {

// Scales timeouts for sanitizer builds (set by run.sh: CANOPY_TIMEOUT_SCALE).
inline double timeout_scale() {
  const char* scale = std::getenv("CANOPY_TIMEOUT_SCALE");
  return scale == nullptr ? 1.0 : std::atof(scale);
}

// Iteration counts shrink under sanitizers (CANOPY_STRESS_DIVISOR).
inline long stress_divisor() {
  const char* divisor = std::getenv("CANOPY_STRESS_DIVISOR");
  const long value = divisor == nullptr ? 1 : std::atol(divisor);
  return value < 1 ? 1 : value;
}

class watchdog {
 public:
  watchdog(std::string name, double seconds)
      : name_(std::move(name)), thread_([this, seconds] { watch(seconds * timeout_scale()); }) {}
  watchdog(const watchdog&) = delete;
  watchdog& operator=(const watchdog&) = delete;
  ~watchdog() {
    {
      const std::lock_guard lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  void watch(double seconds) {
    std::unique_lock lock(mutex_);
    if (!cv_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return done_; })) {
      // Flush what the test framework has buffered first: a failed REQUIRE
      // just before the hang says more than the hang itself.
      std::fflush(stdout);
      std::fprintf(stderr, "WATCHDOG: test '%s' did not finish within %.0f s (hang)\n",
                   name_.c_str(), seconds);
      std::fflush(stderr);
      std::_Exit(3);
    }
  }

  std::string name_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace canopy::testing
