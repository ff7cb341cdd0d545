#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace canopy::bench {

// Thrown when a workload computed the wrong result; main reports it and
// exits non-zero.
class result_mismatch : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline void expect_equal(std::string_view what, long long expected, long long actual) {
  if (expected != actual) {
    throw result_mismatch(std::string(what) + ": expected " + std::to_string(expected) + ", got " +
                          std::to_string(actual));
  }
}

}  // namespace canopy::bench
