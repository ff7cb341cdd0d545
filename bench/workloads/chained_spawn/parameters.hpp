#pragma once

#include <cstddef>

// chained_spawn: a chain is chain_length tasks, each spawning the next; the
// first is submitted from outside and the last wakes the waiting thread.
// chain_count chains run one after another.
// Result: wall time / (chain_count * chain_length), in ns/spawn.
namespace canopy::bench::chained_spawn {

inline constexpr std::size_t chain_length = 1'000;
inline constexpr std::size_t chain_count = 100;
inline constexpr std::size_t total_spawns = chain_length * chain_count;

}  // namespace canopy::bench::chained_spawn
