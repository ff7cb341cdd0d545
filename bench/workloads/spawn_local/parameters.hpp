#pragma once

#include <cstddef>

// spawn_local: one task submitted from outside spawns task_count tasks from
// inside the executor; each increments one shared counter and the last one
// wakes the waiting thread. Result: wall time / task_count, in ns/task.
namespace canopy::bench::spawn_local {

inline constexpr std::size_t task_count = 1'000'000;

}  // namespace canopy::bench::spawn_local
