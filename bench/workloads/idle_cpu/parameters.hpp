#pragma once

#include <chrono>

// idle_cpu: run one task, then sleep for idle_period; the result is the CPU
// time (user + system, all threads of the process) spent during that period,
// in ms per idle second. Workers that spin instead of sleeping show up here.
namespace canopy::bench::idle_cpu {

inline constexpr std::chrono::seconds idle_period{1};

}  // namespace canopy::bench::idle_cpu
