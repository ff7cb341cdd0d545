#pragma once

#include <cstddef>

// fib_join: the fib workload written with plain callables and a join of two
// closures instead of tasks and handles (rayon's join, oneTBB's
// parallel_invoke). fib(n) for n >= 2 is
//   join([&] { a = fib(n - 1); }, [&] { b = fib(n - 2); }); return a + b;
// where join runs its first closure on the calling thread and offers the
// second to other threads (Canopy: canopy::join; oneTBB:
// tbb::parallel_invoke; Asio, which has no join, runs the continuation-
// passing fib of the fib workload). No sequential cut-off: every call with
// n >= 2 forks, fork_count forks in all. Checked against expected_value.
// Result: wall time in ms.
namespace canopy::bench::fib_join {

inline constexpr int argument = 30;
inline constexpr long long expected_value = 832'040;
inline constexpr std::size_t fork_count = 1'346'268;

}  // namespace canopy::bench::fib_join
