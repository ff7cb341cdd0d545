#pragma once

#include <chrono>
#include <cstddef>

namespace canopy::bench {

// Wall-clock time since construction, on the monotonic steady_clock.
class stopwatch {
 public:
  [[nodiscard]] std::chrono::nanoseconds elapsed() const {
    return std::chrono::steady_clock::now() - started_;
  }

 private:
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

[[nodiscard]] inline double nanoseconds_per(std::chrono::nanoseconds elapsed,
                                            std::size_t operations) {
  return static_cast<double>(elapsed.count()) / static_cast<double>(operations);
}

[[nodiscard]] inline double milliseconds(std::chrono::nanoseconds duration) {
  return std::chrono::duration<double, std::milli>(duration).count();
}

[[nodiscard]] inline double microseconds(std::chrono::nanoseconds duration) {
  return std::chrono::duration<double, std::micro>(duration).count();
}

}  // namespace canopy::bench
