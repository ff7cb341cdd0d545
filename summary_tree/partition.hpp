// partition_owner — the one mapping from leaves to the workers that own them.
//
// Leaves are dealt to workers round-robin: worker w owns leaves w, w+W,
// w+2W, ... This keeps every partition the same size as the arena grows by
// whole leaves, and lets a worker's partition summary index its leaves as
// leaf / W. Producers (spawn placement), workers (search order) and the
// SignalWaker (partition summary) all call these functions; nothing else may
// compute ownership.
#pragma once

#include <cstddef>

namespace canopy::detail {

[[nodiscard]] constexpr std::size_t partition_owner(std::size_t leaf,
                                                    std::size_t worker_count) noexcept {
  return leaf % worker_count;
}

// Position of `leaf` inside its owner's partition (0, 1, 2, ...).
[[nodiscard]] constexpr std::size_t partition_slot(std::size_t leaf,
                                                   std::size_t worker_count) noexcept {
  return leaf / worker_count;
}

// The leaf at position `slot` of `worker`'s partition.
[[nodiscard]] constexpr std::size_t partition_leaf(std::size_t worker, std::size_t slot,
                                                   std::size_t worker_count) noexcept {
  return slot * worker_count + worker;
}

// How many of the first `leaf_count` leaves belong to `worker`.
[[nodiscard]] constexpr std::size_t partition_size(std::size_t worker, std::size_t leaf_count,
                                                   std::size_t worker_count) noexcept {
  return worker < leaf_count ? (leaf_count - worker + worker_count - 1) / worker_count : 0;
}

}  // namespace canopy::detail
