#pragma once

#include <cstddef>

// fib: fib(argument) where every call with n >= 2 forks: fib(n - 1) is
// spawned as a task, fib(n - 2) computed inline, then both are joined.
// That is fork_count forks. Result: wall time in ms.
namespace canopy::bench::fib {

inline constexpr int argument = 30;
inline constexpr long long expected_value = 832'040;
inline constexpr std::size_t fork_count = 1'346'268;

}  // namespace canopy::bench::fib
