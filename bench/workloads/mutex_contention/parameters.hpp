#pragma once

#include <cstddef>

// mutex_contention: task_count tasks each take one async mutex
// locks_per_task times; the critical section increments a plain counter the
// mutex guards. Result: wall time from the first spawn to the last task's end
// / acquisitions, in ns/acquisition (acquisitions/s = 1e9 / value). The
// counter is checked.
namespace canopy::bench::mutex_contention {

inline constexpr std::size_t task_count = 64;
inline constexpr std::size_t locks_per_task = 10'000;
inline constexpr std::size_t acquisitions = task_count * locks_per_task;

}  // namespace canopy::bench::mutex_contention
