// Small helpers shared by the test suites.
#pragma once

#include <atomic>
#include <chrono>
#include <thread>

#include "executor/config.hpp"
#include "tests/watchdog.hpp"

namespace canopy::testing {

// A pool of `workers` workers that spins little before parking, so that the
// suites' many short pools do not keep the CPU busy between their tasks.
inline executor_config config_with(std::size_t workers) {
  executor_config config;
  config.worker_count = workers;
  config.idle_yield_rounds = 4;
  return config;
}

// Wait (bounded, polling every millisecond) until predicate() holds; returns
// whether it did. Tests REQUIRE/CHECK the result, so a condition that never
// comes fails the test instead of hanging it.
// The time limit stretches by CANOPY_TIMEOUT_SCALE, as the watchdogs do.
template <class Predicate>
bool eventually(Predicate predicate, double seconds = 10) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration<double>(seconds * timeout_scale());
  while (std::chrono::steady_clock::now() < deadline) {
    if (predicate()) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return predicate();
}

// Counts its own destruction: proves that a task's frame or stack was
// unwound and its destructors ran.
struct destroy_flag {
  std::atomic<int>* count;
  explicit destroy_flag(std::atomic<int>& target) : count(&target) {}
  destroy_flag(const destroy_flag&) = delete;
  destroy_flag& operator=(const destroy_flag&) = delete;
  ~destroy_flag() { count->fetch_add(1); }
};

}  // namespace canopy::testing
