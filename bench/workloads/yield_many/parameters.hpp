#pragma once

#include <cstddef>

// yield_many: task_count tasks each yield yields_per_task times, letting other
// ready tasks run in between; the last task to finish wakes the waiting
// thread. Result: wall time / (task_count * yields_per_task), in ns/yield.
namespace canopy::bench::yield_many {

inline constexpr std::size_t task_count = 200;
inline constexpr std::size_t yields_per_task = 1'000;
inline constexpr std::size_t total_yields = task_count * yields_per_task;

}  // namespace canopy::bench::yield_many
