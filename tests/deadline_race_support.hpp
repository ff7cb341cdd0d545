// For the tests that race reads against deadlines of microseconds: a writer
// that holds back until the reader has counted a timeout, so that the race
// runs however the two tasks are scheduled (a slow reader on a loaded
// machine otherwise always finds data waiting and never times out).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "coroutine/coroutine.hpp"
#include "io/io.hpp"

namespace canopy::testing {

// Inside a task: returns once reader_timeouts has moved past its value at
// the call, or after ten seconds (the test's own check then reports it).
inline task<void> await_reader_timeout(const std::atomic<std::size_t>& reader_timeouts) {
  // relaxed: a count only; nothing is published through it.
  const std::size_t before = reader_timeouts.load(std::memory_order_relaxed);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (reader_timeouts.load(std::memory_order_relaxed) == before &&
         std::chrono::steady_clock::now() < give_up) {
    co_await canopy::sleep_for(std::chrono::microseconds(200));
  }
}

// Inside a task: writes the numbers 0..count-1 to `stream`, four bytes
// each, in writes of 1 to 7 numbers with a pause of some microseconds after
// every eighth (so that reads wait, and deadlines fire mid-wait). After
// every quarter of the numbers (1024 at most) it also holds back until the
// reader has counted a timeout (await_reader_timeout).
template <class Stream>
task<void> write_numbers_racing_deadlines(Stream& stream, std::size_t count,
                                          const std::atomic<std::size_t>& reader_timeouts) {
  std::vector<std::byte> out;
  const auto hold_every = static_cast<std::uint32_t>(std::clamp<std::size_t>(count / 4, 1, 1024));
  for (std::uint32_t next = 0; next < count;) {
    out.clear();
    const std::uint32_t first = next;
    for (std::uint32_t i = 0; i < 1 + next % 7 && next < count; ++i, ++next) {
      for (int shift = 0; shift < 32; shift += 8) {
        out.push_back(static_cast<std::byte>((next >> shift) & 0xFF));
      }
    }
    co_await stream.write_all(out);
    if (next % 8 == 0) {
      co_await canopy::sleep_for(std::chrono::microseconds(next % 50));
    }
    if (first / hold_every != next / hold_every) {
      co_await await_reader_timeout(reader_timeouts);
    }
  }
}

}  // namespace canopy::testing
