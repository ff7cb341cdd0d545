// cpu_pinning — which CPU each owned worker is pinned to, when
// executor_config::pin_workers asks for it (as oneTBB's and TooManyCooks'
// hwloc-based pinning do, without hwloc: Linux sched_setaffinity).
//
// The plan is made once, on the constructing thread, so that a bad CPU list
// is reported there (std::invalid_argument); each worker then pins itself as
// its thread starts.
#pragma once

#include <cstddef>
#include <vector>

#include "config.hpp"

namespace canopy::detail {

// One CPU per owned worker, or an empty plan when pinning is off. Worker i
// gets config.worker_cpus[i % size] when that list is given, else the i-th
// CPU of the process's allowed set (sched_getaffinity), wrapping around
// when there are more workers than CPUs. Throws std::invalid_argument when a
// listed CPU is not in the allowed set (or out of range), std::system_error
// when the allowed set cannot be read.
std::vector<int> plan_worker_cpus(const executor_config& config);

// Pin the calling thread to `cpu`. False (errno set) if the kernel refused,
// e.g. because the CPU went offline after the plan was made.
bool pin_this_thread(int cpu) noexcept;

}  // namespace canopy::detail
