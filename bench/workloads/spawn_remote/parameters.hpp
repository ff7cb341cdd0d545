#pragma once

#include <cstddef>

// spawn_remote: a thread that is not a worker submits task_count tasks; each
// increments one shared counter and the last one wakes the submitting thread.
// Result: wall time / task_count, in ns/task.
namespace canopy::bench::spawn_remote {

inline constexpr std::size_t task_count = 1'000'000;

}  // namespace canopy::bench::spawn_remote
