#pragma once

#include <cstddef>
#include <cstdint>

// skynet: the fork structure of the libfork program in the
// tzcnt/runtime-benchmarks suite. A node at depth d < depth forks
// fan_out - 1 children and runs the last one inline, then joins them; child
// i of a node numbered `base` is numbered base + i * 10^(depth - d - 1). The
// leaves (depth == depth) return their number, so the root computes the sum
// of 0 .. leaf_count - 1. fork_count forks (fan_out - 1 per inner node).
// Result: wall time in ms.
namespace canopy::bench::skynet {

inline constexpr unsigned fan_out = 10;
inline constexpr unsigned depth = 6;
inline constexpr std::uint64_t leaf_count = 1'000'000;
inline constexpr std::uint64_t expected_sum = leaf_count * (leaf_count - 1) / 2;  // 499999500000
inline constexpr std::size_t fork_count = 999'999;

// The distance between the numbers of two sibling children of a node at
// `level`: 10^(depth - level - 1).
[[nodiscard]] constexpr std::uint64_t child_stride(unsigned level) {
  std::uint64_t stride = 1;
  for (unsigned step = level + 1; step < depth; ++step) {
    stride *= fan_out;
  }
  return stride;
}

static_assert(child_stride(0) * fan_out == leaf_count);

}  // namespace canopy::bench::skynet
