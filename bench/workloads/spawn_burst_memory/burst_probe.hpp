#pragma once

#include <cstddef>
#include <memory>

#include "harness/completion_counter.hpp"
#include "harness/process_usage.hpp"
#include "harness/result_check.hpp"
#include "workloads/registry.hpp"
#include "workloads/spawn_burst_memory/parameters.hpp"
#include "workloads/spawn_burst_memory/worker_gate.hpp"

namespace canopy::bench::spawn_burst_memory {

// The measurement every peer shares; `submit` hands one task to the peer's
// executor from this (non-worker) thread.
//
// The resident set is read while all tasks are pending, which is this
// burst's peak. ru_maxrss / VmHWM are not used: they never go down, so a
// burst smaller than an earlier peak of the process would show no growth.
// Memory that glibc malloc kept from earlier work is handed back first.
template <typename Submit>
repetition_result measure_burst_memory(unsigned worker_count, Submit submit) {
  const auto gate = std::make_shared<worker_gate>(worker_count);
  for (unsigned worker = 0; worker < worker_count; ++worker) {
    submit([gate] { gate->hold_here(); });
  }
  gate->wait_until_all_held();

  return_free_heap_pages();
  const std::size_t resident_before = resident_bytes();
  completion_counter finished(task_count);
  for (std::size_t task = 0; task < task_count; ++task) {
    submit([&finished] { finished.count_one(); });
  }
  const std::size_t resident_with_all_pending = resident_bytes();

  gate->open();
  finished.wait();
  expect_equal("tasks run", task_count, finished.count());

  const std::size_t growth =
      resident_with_all_pending > resident_before ? resident_with_all_pending - resident_before : 0;
  return {static_cast<double>(growth) / static_cast<double>(task_count)};
}

}  // namespace canopy::bench::spawn_burst_memory
