// For the tests that race reads against deadlines of microseconds: a writer
// that holds back until the reader has counted a timeout, so that the race
// runs however the two tasks are scheduled (a slow reader on a loaded
// machine otherwise always finds data waiting and never times out).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>

#include "coroutine/coroutine.hpp"
#include "io/io.hpp"

namespace canopy::testing {

// Inside a task: returns once reader_timeouts has moved past its value at
// the call, or after ten seconds (the test's own check then reports it).
inline task<void> await_reader_timeout(const std::atomic<std::size_t>& reader_timeouts) {
  const std::size_t before = reader_timeouts.load();
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (reader_timeouts.load() == before && std::chrono::steady_clock::now() < give_up) {
    co_await canopy::sleep_for(std::chrono::microseconds(200));
  }
}

}  // namespace canopy::testing
