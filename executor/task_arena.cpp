#include "executor/task_arena.hpp"

#include <algorithm>
#include <bit>

#include "summary_tree/partition.hpp"

namespace canopy {

task_arena::leaf_block::leaf_block(std::size_t signals, std::size_t tasks)
    : slots(std::make_unique<task_slot[]>(tasks)),
      occupancy(std::make_unique<sync::atomic<std::uint64_t>[]>(signals)) {}

task_arena::task_arena(std::size_t signals_per_leaf, std::size_t initial_leaves,
                       std::size_t max_leaves, std::size_t partition_count)
    : signals_per_leaf_(signals_per_leaf),
      tasks_per_leaf_(signals_per_leaf * 64),
      leaf_shift_(static_cast<unsigned>(std::countr_zero(signals_per_leaf * 64))),
      leaf_mask_(static_cast<std::uint32_t>(signals_per_leaf * 64 - 1)),
      max_leaves_(max_leaves),
      partition_count_(partition_count),
      leaves_(std::make_unique<sync::atomic<leaf_block*>[]>(max_leaves)),
      partitions_(std::make_unique<partition_state[]>(partition_count)) {
  for (std::size_t leaf = 0; leaf < initial_leaves; ++leaf) {
    grow(partition_owner(leaf, partition_count_));
  }
}

task_arena::~task_arena() {
  for (std::size_t leaf = 0; leaf < max_leaves_; ++leaf) {
    delete leaves_[leaf].load(sync::relaxed);
  }
}

std::optional<std::uint32_t> task_arena::allocate(std::size_t partition) {
  for (;;) {
    if (auto index = try_claim_in(partition)) {
      return index;
    }
    if (!grow(partition)) {
      // Full and at its maximum size; one last look, since a slot may have
      // been released while we tried to grow.
      return try_claim_in(partition);
    }
  }
}

std::optional<std::uint32_t> task_arena::try_claim_in(std::size_t partition) noexcept {
  partition_state& state = partitions_[partition];
  // acquire: pairs with grow()'s release increment, so the leaf is published.
  const std::size_t words = state.leaves.load(sync::acquire) * signals_per_leaf_;
  if (words == 0) {
    return std::nullopt;
  }
  const std::size_t start = state.cursor.load(sync::relaxed) % words;
  for (std::size_t step = 0; step < words; ++step) {
    const std::size_t word = (start + step) % words;
    const std::size_t leaf = partition_leaf(partition, word / signals_per_leaf_, partition_count_);
    const std::size_t signal = word % signals_per_leaf_;
    sync::atomic<std::uint64_t>& occupancy = leaves_[leaf].load(sync::acquire)->occupancy[signal];
    std::uint64_t occupied = occupancy.load(sync::relaxed);
    while (occupied != ~std::uint64_t{0}) {
      const auto bit = static_cast<unsigned>(std::countr_one(occupied));
      const std::uint64_t mask = std::uint64_t{1} << bit;
      // seq_cst: acquire pairs with release() so the previous task's teardown
      // is visible before we reuse the slot; the total order pairs with the
      // capacity waiters' handshake in executor_core (release, then waiter read).
      const std::uint64_t previous = occupancy.fetch_or(mask, sync::seq_cst);
      if ((previous & mask) == 0) {
        if (step != 0) {
          state.cursor.store(static_cast<std::uint32_t>(word), sync::relaxed);
        }
        return index_of(leaf, signal, bit);
      }
      occupied = previous | mask;
    }
  }
  return std::nullopt;
}

bool task_arena::reserve(std::size_t partition, reservation& into) {
  for (;;) {
    if (try_reserve_in(partition, into)) {
      return true;
    }
    if (!grow(partition)) {
      return try_reserve_in(partition, into);
    }
  }
}

bool task_arena::try_reserve_in(std::size_t partition, reservation& into) noexcept {
  partition_state& state = partitions_[partition];
  // acquire: pairs with grow()'s release increment, so the leaf is published.
  const std::size_t words = state.leaves.load(sync::acquire) * signals_per_leaf_;
  if (words == 0) {
    return false;
  }
  // The cursor names the word the partition's last reservation came from.
  // Its slots were written moments ago and, once their tasks have ended,
  // are likely still in this core's cache, where a fresh word's are not (a
  // leaf's slots span 256 KiB): so it is tried first, and kept while at
  // least half of it is free again. A word with fewer free bits is passed
  // over (and tried again last), so that a spawner does not take a few bits
  // at a time from a word that workers are still emptying.
  const std::size_t start = state.cursor.load(sync::relaxed) % words;
  for (std::size_t step = 0; step <= words; ++step) {
    const std::size_t word = (start + step) % words;
    const std::size_t leaf = partition_leaf(partition, word / signals_per_leaf_, partition_count_);
    const std::size_t signal = word % signals_per_leaf_;
    sync::atomic<std::uint64_t>& occupancy = leaves_[leaf].load(sync::acquire)->occupancy[signal];
    std::uint64_t occupied = occupancy.load(sync::relaxed);
    if (step == 0 && words > 1 && std::popcount(~occupied) < 32) {
      continue;
    }
    while (occupied != ~std::uint64_t{0}) {
      const std::uint64_t wanted = ~occupied;
      // seq_cst: as in try_claim_in — acquire pairs with release(), and the
      // total order pairs with the capacity waiters' handshake.
      const std::uint64_t previous = occupancy.fetch_or(wanted, sync::seq_cst);
      const std::uint64_t got = wanted & ~previous;
      if (got != 0) {
        state.cursor.store(static_cast<std::uint32_t>(word), sync::relaxed);
        into.first_slot = index_of(leaf, signal, 0);
        into.free = got;
        return true;
      }
      occupied = previous;
    }
  }
  return false;
}

void task_arena::give_back(reservation& from) noexcept {
  if (from.free == 0) {
    return;
  }
  sync::atomic<std::uint64_t>& occupancy =
      leaves_[leaf_of(from.first_slot)].load(sync::acquire)->occupancy[signal_of(from.first_slot)];
  // seq_cst: same as release().
  occupancy.fetch_and(~from.free, sync::seq_cst);
  from.free = 0;
}

bool task_arena::grow(std::size_t partition) {
  const std::lock_guard lock(growth_mutex_);
  partition_state& state = partitions_[partition];
  const std::size_t owned = state.leaves.load(sync::relaxed);
  const std::size_t leaf = partition_leaf(partition, owned, partition_count_);
  if (leaf >= max_leaves_) {
    return false;
  }
  auto block = std::make_unique<leaf_block>(signals_per_leaf_, tasks_per_leaf_);
  // release: publishes the zeroed slots and occupancy words to every reader
  // that loads this pointer (slot(), try_claim_in) with acquire.
  leaves_[leaf].store(block.release(), sync::release);
  if (leaf + 1 > leaf_limit_.load(sync::relaxed)) {
    leaf_limit_.store(leaf + 1, sync::release);
  }
  state.cursor.store(static_cast<std::uint32_t>(owned * signals_per_leaf_), sync::relaxed);
  // release: pairs with try_claim_in's acquire load of the leaf count.
  state.leaves.store(static_cast<std::uint32_t>(owned + 1), sync::release);
  return true;
}

void task_arena::release(std::uint32_t index) noexcept {
  sync::atomic<std::uint64_t>& occupancy =
      leaves_[leaf_of(index)].load(sync::acquire)->occupancy[signal_of(index)];
  // seq_cst: release half of the slot hand-over (pairs with try_claim_in's
  // fetch_or) and first half of the capacity-waiter handshake.
  occupancy.fetch_and(~(std::uint64_t{1} << bit_of(index)), sync::seq_cst);
}

std::size_t task_arena::live_count() const noexcept {
  std::size_t live = 0;
  const std::size_t limit = leaf_limit();
  for (std::size_t leaf = 0; leaf < limit; ++leaf) {
    leaf_block* block = leaves_[leaf].load(sync::acquire);
    if (block == nullptr) {
      continue;
    }
    for (std::size_t signal = 0; signal < signals_per_leaf_; ++signal) {
      live += static_cast<std::size_t>(std::popcount(block->occupancy[signal].load(sync::acquire)));
    }
  }
  return live;
}

}  // namespace canopy
