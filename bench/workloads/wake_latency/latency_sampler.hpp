#pragma once

#include <chrono>
#include <thread>
#include <vector>

#include "harness/completion_signal.hpp"
#include "harness/statistics.hpp"
#include "harness/stopwatch.hpp"
#include "workloads/registry.hpp"
#include "workloads/wake_latency/parameters.hpp"

namespace canopy::bench::wake_latency {

// The sampling loop every peer shares; `submit` hands one task to the peer's
// executor from this (non-worker) thread. The thread sleeps through each
// interval and reads the task's timestamp afterwards (waiting on a condition
// variable in the unlikely case the task has not run yet): it never spins.
template <typename Submit>
repetition_result sample_wake_latency(Submit submit) {
  using clock = std::chrono::steady_clock;
  std::this_thread::sleep_for(idle_before);

  std::vector<double> latencies_us;
  latencies_us.reserve(sample_count);
  for (std::size_t sample = 0; sample < sample_count; ++sample) {
    clock::time_point task_started;
    completion_signal task_ran;
    const clock::time_point submitted = clock::now();
    submit([&task_started, &task_ran] {
      task_started = clock::now();
      task_ran.notify();
    });
    std::this_thread::sleep_for(sample_interval);
    task_ran.wait();
    latencies_us.push_back(microseconds(task_started - submitted));
  }
  return {percentile(latencies_us, 0.50), percentile(latencies_us, 0.99)};
}

}  // namespace canopy::bench::wake_latency
