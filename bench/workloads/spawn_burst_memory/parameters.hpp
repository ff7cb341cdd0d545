#pragma once

#include <cstddef>

// spawn_burst_memory: with every worker held inside a blocker task,
// task_count tasks are submitted from outside, so all of them are pending at
// once; the growth of the resident set over that burst, divided by
// task_count, is the result in bytes/task. Then the workers are released and
// every task must run.
namespace canopy::bench::spawn_burst_memory {

inline constexpr std::size_t task_count = 1'000'000;

}  // namespace canopy::bench::spawn_burst_memory
