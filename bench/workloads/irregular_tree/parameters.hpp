#pragma once

#include <cstddef>
#include <cstdint>

// irregular_tree: a recursive computation over a tree whose shape and
// per-node work are uneven, so that neither the fan-out nor the cost of a
// task is the same everywhere (unlike fib).
//
// A node is named by a 64-bit seed; the root's seed is root_seed at depth 0.
// A node at depth d
//   * does node_work(seed): a busy loop of spin_iterations(seed) steps
//     (min_spin .. min_spin + spin_range - 1 steps of a few ns each), whose
//     result is the node's value;
//   * has child_count(seed, d) children (always 4 at the root, 0 at
//     max_depth, otherwise mix(seed) % 5: 0 to 4, 2 on average), child i
//     with seed child_seed(seed, i) at depth d + 1;
//   * returns its value plus its children's results (wrapping 64-bit sum)
//     and counts itself.
// Every peer processes a node's children in parallel: it forks all but one
// child, runs that one on its own thread, then joins the others (Canopy:
// canopy::task children, co_await canopy::await_all; oneTBB: task_group;
// Asio: continuation passing with an atomic countdown per node). The total
// and the node count are checked against expected_total / expected_nodes.
// Result: wall time in ms.
namespace canopy::bench::irregular_tree {

inline constexpr std::uint64_t root_seed = 2026;
inline constexpr unsigned max_depth = 16;
inline constexpr unsigned max_children = 4;
inline constexpr std::uint32_t min_spin = 16;
inline constexpr std::uint32_t spin_range = 256;

// The splitmix64 finalizer.
[[nodiscard]] constexpr std::uint64_t mix(std::uint64_t x) noexcept {
  x += 0x9e37'79b9'7f4a'7c15ULL;
  x = (x ^ (x >> 30U)) * 0xbf58'476d'1ce4'e5b9ULL;
  x = (x ^ (x >> 27U)) * 0x94d0'49bb'1331'11ebULL;
  return x ^ (x >> 31U);
}

[[nodiscard]] constexpr unsigned child_count(std::uint64_t seed, unsigned depth) noexcept {
  if (depth == 0) {
    return max_children;
  }
  if (depth >= max_depth) {
    return 0;
  }
  return static_cast<unsigned>(mix(seed) % (max_children + 1));
}

[[nodiscard]] constexpr std::uint64_t child_seed(std::uint64_t seed, unsigned index) noexcept {
  return mix(seed ^ (0x5851'f42d'4c95'7f2dULL * (index + 1U)));
}

[[nodiscard]] constexpr std::uint32_t spin_iterations(std::uint64_t seed) noexcept {
  return min_spin + static_cast<std::uint32_t>((mix(seed) >> 32U) % spin_range);
}

// The node's busy loop: an xorshift-multiply chain the compiler cannot
// shorten; its result is the node's value.
[[nodiscard]] constexpr std::uint64_t node_work(std::uint64_t seed) noexcept {
  std::uint64_t x = seed | 1U;
  const std::uint32_t steps = spin_iterations(seed);
  for (std::uint32_t step = 0; step < steps; ++step) {
    x ^= x >> 12U;
    x ^= x << 25U;
    x ^= x >> 27U;
    x *= 0x2545'f491'4f6c'dd1dULL;
  }
  return x;
}

// 182,337 nodes; about 73 ms on one core of this machine (g++ 12 -O2).
inline constexpr std::uint64_t expected_total = 9'258'311'009'717'634'824ULL;
inline constexpr std::size_t expected_nodes = 182'337;

}  // namespace canopy::bench::irregular_tree
