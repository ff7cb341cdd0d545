#pragma once

#include <thread>

#include "harness/completion_signal.hpp"
#include "harness/process_usage.hpp"
#include "harness/stopwatch.hpp"
#include "workloads/idle_cpu/parameters.hpp"
#include "workloads/registry.hpp"

namespace canopy::bench::idle_cpu {

// The measurement every peer shares; `submit` hands one task to the peer's
// executor from this (non-worker) thread.
template <typename Submit>
repetition_result measure_idle_cpu(Submit submit) {
  completion_signal task_ran;
  submit([&task_ran] { task_ran.notify(); });
  task_ran.wait();

  // The other threads' window encloses the process's: reading /proc costs
  // the measuring thread tens of microseconds, so it stays outside.
  const auto others_before = other_threads_cpu_time();
  const auto cpu_before = process_cpu_time();
  std::this_thread::sleep_for(idle_period);
  const auto cpu_spent = process_cpu_time() - cpu_before;
  const auto others_spent = other_threads_cpu_time() - others_before;
  const double idle_seconds = std::chrono::duration<double>(idle_period).count();
  return {.value = milliseconds(cpu_spent) / idle_seconds,
          .other_threads = milliseconds(others_spent) / idle_seconds};
}

}  // namespace canopy::bench::idle_cpu
