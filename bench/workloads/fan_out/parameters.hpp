#pragma once

#include <cstddef>
#include <cstdint>

// fan_out: one task forks many children and joins all of them at once.
//
// One repetition submits a single root task from outside. The root runs
// `rounds` rounds one after another; in round r it spawns
// `children_per_round` children, child i computing
//   child_value(r * children_per_round + i)
// (a few multiplications: the child's cost is the fork and the join), then
// waits for all of that round's children and adds their values to a
// wrapping 64-bit sum. After the last round the sum is checked against
// expected_sum. Result: wall time / (rounds * children_per_round), in
// ns/child.
//
// How each peer joins the round: Canopy spawns canopy::task<uint64_t>
// children and awaits them in one suspension with co_await
// canopy::await_all(handles); oneTBB runs them in a tbb::task_group and
// wait()s; Asio posts them and the last child to finish (an atomic
// countdown) posts the next round.
namespace canopy::bench::fan_out {

inline constexpr std::size_t rounds = 64;
inline constexpr std::size_t children_per_round = 10'000;
inline constexpr std::size_t child_count = rounds * children_per_round;

// The splitmix64 finalizer: what one child computes from its index.
[[nodiscard]] constexpr std::uint64_t child_value(std::uint64_t index) noexcept {
  std::uint64_t x = index + 0x9e37'79b9'7f4a'7c15ULL;
  x = (x ^ (x >> 30U)) * 0xbf58'476d'1ce4'e5b9ULL;
  x = (x ^ (x >> 27U)) * 0x94d0'49bb'1331'11ebULL;
  return x ^ (x >> 31U);
}

// The wrapping sum of child_value(i) for i in [0, child_count).
inline constexpr std::uint64_t expected_sum = 4'774'663'504'979'896'789ULL;

}  // namespace canopy::bench::fan_out
