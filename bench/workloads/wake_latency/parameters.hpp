#pragma once

#include <chrono>
#include <cstddef>

// wake_latency: after the executor idled for idle_before (all workers
// asleep), sample_count samples are taken sample_interval apart. A sample is
// the time from just before submitting one task from outside to the moment
// that task starts running (both read from steady_clock). Result: p50 in us,
// and p99.
namespace canopy::bench::wake_latency {

inline constexpr std::chrono::milliseconds idle_before{50};
inline constexpr std::size_t sample_count = 1'000;
inline constexpr std::chrono::milliseconds sample_interval{2};

}  // namespace canopy::bench::wake_latency
