#include "task_arena.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <memory>
#include <new>

#include "../summary_tree/partition.hpp"
#include "sanitizers.hpp"

#if defined(CANOPY_ADDRESS_SANITIZER)
#include <sanitizer/lsan_interface.h>
#endif

namespace canopy::detail {

namespace {

// A leaf's slots come straight from mmap: from operator new, a 64-byte
// aligned array of a leaf's size (256 KiB by default) is a glibc mmap chunk
// whose header moves the array 64 bytes into one more page, a byte per
// slot. Leaves are a whole number of 4 KiB pages (64 slots of 64 bytes).
task_slot* map_slots(std::size_t count) {
  void* const pages = ::mmap(nullptr, count * sizeof(task_slot), PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (pages == MAP_FAILED) {
    throw std::bad_alloc();
  }
#if defined(CANOPY_ADDRESS_SANITIZER)
  // The leak checker scans heap blocks, not mappings: a pending task's
  // frame or boxed callable is reachable only from its slot.
  __lsan_register_root_region(pages, count * sizeof(task_slot));
#endif
  auto* const slots = static_cast<task_slot*>(pages);
  std::uninitialized_value_construct_n(slots, count);  // cannot throw
  return slots;
}

}  // namespace

void task_arena::slot_pages::operator()(task_slot* slots) const noexcept {
  std::destroy_n(slots, count);
#if defined(CANOPY_ADDRESS_SANITIZER)
  __lsan_unregister_root_region(slots, count * sizeof(task_slot));
#endif
  ::munmap(slots, count * sizeof(task_slot));
}

task_arena::leaf_block::leaf_block(std::size_t signals, std::size_t tasks)
    : slots(map_slots(tasks), slot_pages{tasks}),
      occupancy(std::make_unique<atomics::atomic<std::uint64_t>[]>(signals)),
      free_words(signals >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << signals) - 1) {}

task_arena::task_arena(std::size_t signals_per_leaf, std::size_t initial_leaves,
                       std::size_t max_leaves, std::size_t partition_count)
    : signals_per_leaf_(signals_per_leaf),
      tasks_per_leaf_(signals_per_leaf * 64),
      leaf_shift_(static_cast<unsigned>(std::countr_zero(signals_per_leaf * 64))),
      leaf_mask_(static_cast<std::uint32_t>(signals_per_leaf * 64 - 1)),
      max_leaves_(max_leaves),
      partition_count_(partition_count),
      leaves_(std::make_unique<atomics::atomic<leaf_block*>[]>(max_leaves)),
      partitions_(std::make_unique<partition_state[]>(partition_count)) {
  for (std::size_t leaf = 0; leaf < initial_leaves; ++leaf) {
    grow(partition_owner(leaf, partition_count_));
  }
}

task_arena::~task_arena() {
  for (std::size_t leaf = 0; leaf < max_leaves_; ++leaf) {
    delete leaves_[leaf].load(atomics::relaxed);
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
  const std::size_t words = state.leaves.load(atomics::acquire) * signals_per_leaf_;
  if (words == 0) {
    return std::nullopt;
  }
  const std::size_t start = state.cursor.load(atomics::relaxed) % words;
  for (std::size_t step = 0; step < words; ++step) {
    const std::size_t word = (start + step) % words;
    const std::size_t leaf = partition_leaf(partition, word / signals_per_leaf_, partition_count_);
    const std::size_t signal = word % signals_per_leaf_;
    atomics::atomic<std::uint64_t>& occupancy =
        leaves_[leaf].load(atomics::acquire)->occupancy[signal];
    std::uint64_t occupied = occupancy.load(atomics::relaxed);
    while (occupied != ~std::uint64_t{0}) {
      const auto bit = static_cast<unsigned>(std::countr_one(occupied));
      const std::uint64_t mask = std::uint64_t{1} << bit;
      // seq_cst: acquire pairs with release() so the previous task's teardown
      // is visible before we reuse the slot; the total order pairs with the
      // capacity waiters' handshake in executor_core (release, then waiter read).
      const std::uint64_t previous = occupancy.fetch_or(mask, atomics::seq_cst);
      if ((previous & mask) == 0) {
        if (step != 0) {
          state.cursor.store(static_cast<std::uint32_t>(word), atomics::relaxed);
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
    if (try_reserve_in(partition, into, half_word)) {
      return true;
    }
    if (!grow(partition)) {
      return try_reserve_in(partition, into, 1);
    }
  }
}

bool task_arena::try_reserve_in(std::size_t partition, reservation& into, int min_free) noexcept {
  if (reserve_hinted(partition, into)) {
    return true;
  }
  // No empty word is hinted: every word is read, and one with at least
  // `min_free` free slots is taken. Before growing that is half a word, so
  // a partition grows only while each of its words is over half in use (it
  // stays within twice its live tasks); at its maximum size it is any free
  // slot. (A hint can miss an empty word only between clear_empty_hint's
  // clear and re-read; this scan does not use the hints.)
  // acquire: pairs with grow()'s release increment, so the leaf is published.
  const std::size_t words =
      partitions_[partition].leaves.load(atomics::acquire) * signals_per_leaf_;
  for (std::size_t word = 0; word < words; ++word) {
    const std::size_t leaf = partition_leaf(partition, word / signals_per_leaf_, partition_count_);
    const std::size_t signal = word % signals_per_leaf_;
    // relaxed: a pre-check; reserve_word's fetch_or decides.
    const std::uint64_t occupied =
        leaves_[leaf].load(atomics::acquire)->occupancy[signal].load(atomics::relaxed);
    // (A full word, the common case when the partition must grow, is
    // passed over without the popcount, a libgcc call on baseline x86-64.)
    if (occupied != ~std::uint64_t{0} && std::popcount(~occupied) >= min_free &&
        reserve_word(leaf, signal, word, partition, into)) {
      return true;
    }
  }
  return false;
}

bool task_arena::reserve_hinted(std::size_t partition, reservation& into) noexcept {
  partition_state& state = partitions_[partition];
  // acquire: pairs with grow()'s release increment, so the leaf is published.
  const std::size_t leaves = state.leaves.load(atomics::acquire);
  if (leaves == 0) {
    return false;
  }
  const std::size_t words = leaves * signals_per_leaf_;
  const std::size_t start = state.cursor.load(atomics::relaxed) % words;
  const std::size_t start_leaf = start / signals_per_leaf_;
  const std::size_t start_signal = start % signals_per_leaf_;
  const auto leaf_at = [&](std::size_t position) {
    return partition_leaf(partition, position, partition_count_);
  };
  // 1. The cursor word, the last one reserved: its slots are likely still
  //    in this core's cache, so it is taken again once half of it is free
  //    (below half it would hand out a few bits at a time from a word that
  //    workers are still emptying; it is tried again last).
  {
    leaf_block& block = *leaves_[leaf_at(start_leaf)].load(atomics::acquire);
    const std::uint64_t occupied = block.occupancy[start_signal].load(atomics::relaxed);
    if ((words == 1 || std::popcount(~occupied) >= half_word) &&
        reserve_word(leaf_at(start_leaf), start_signal, start, partition, into)) {
      return true;
    }
  }
  // 2. Every leaf from the cursor's on, through its free-word hint: after
  //    the cursor word in the first leaf, whole leaves, then the words
  //    before the cursor in the first leaf, and the cursor word last.
  for (std::size_t step = 0; step <= leaves; ++step) {
    const std::size_t position = (start_leaf + step) % leaves;
    const std::size_t leaf = leaf_at(position);
    leaf_block& block = *leaves_[leaf].load(atomics::acquire);
    // relaxed: a hint; reserve_word's fetch_or decides.
    std::uint64_t candidates = block.free_words.load(atomics::relaxed);
    if (step == 0) {
      candidates &= start_signal + 1 >= 64 ? 0 : ~std::uint64_t{0} << (start_signal + 1);
    } else if (step == leaves) {
      candidates &= (std::uint64_t{2} << start_signal) - 1;
    }
    while (candidates != 0) {
      const auto signal = static_cast<std::size_t>(std::countr_zero(candidates));
      if (reserve_word(leaf, signal, position * signals_per_leaf_ + signal, partition, into)) {
        return true;
      }
      candidates &= candidates - 1;
    }
  }
  return false;
}

bool task_arena::reserve_word(std::size_t leaf, std::size_t signal, std::size_t partition_word,
                              std::size_t partition, reservation& into) noexcept {
  leaf_block& block = *leaves_[leaf].load(atomics::acquire);
  atomics::atomic<std::uint64_t>& occupancy = block.occupancy[signal];
  std::uint64_t occupied = occupancy.load(atomics::relaxed);
  while (occupied != ~std::uint64_t{0}) {
    const std::uint64_t wanted = ~occupied;
    // seq_cst: as in try_claim_in — acquire pairs with release(), and the
    // total order pairs with the capacity waiters' handshake.
    const std::uint64_t previous = occupancy.fetch_or(wanted, atomics::seq_cst);
    const std::uint64_t got = wanted & ~previous;
    if (got != 0) {
      partitions_[partition].cursor.store(static_cast<std::uint32_t>(partition_word),
                                          atomics::relaxed);
      into.first_slot = index_of(leaf, signal, 0);
      into.free = got;
      clear_empty_hint(block, signal);  // the word is not empty now
      return true;
    }
    occupied = previous;
  }
  clear_empty_hint(block, signal);
  return false;
}

void task_arena::clear_empty_hint(leaf_block& block, std::size_t signal) noexcept {
  const std::uint64_t bit = std::uint64_t{1} << signal;
  // relaxed: skipping the clear is always safe (a hint left set costs one
  // probe later), and a scan of a full partition then writes nothing.
  if ((block.free_words.load(atomics::relaxed) & bit) == 0) {
    return;
  }
  // seq_cst clear, then seq_cst re-read of the word: pairs with
  // hint_if_emptied, which runs after the seq_cst clear of the word's last
  // occupancy bit. Either the re-read sees the word empty, or that fetch_or
  // comes after this fetch_and in the total order; both leave the hint set
  // on an empty word.
  block.free_words.fetch_and(~bit, atomics::seq_cst);
  if (block.occupancy[signal].load(atomics::seq_cst) == 0) {
    block.free_words.fetch_or(bit, atomics::seq_cst);
  }
}

void task_arena::hint_if_emptied(leaf_block& block, std::size_t signal, std::uint64_t previous,
                                 std::uint64_t cleared) noexcept {
  if (previous != 0 && (previous & ~cleared) == 0) {
    // The clear emptied the word. seq_cst: pairs with clear_empty_hint's
    // clear and re-read (above).
    block.free_words.fetch_or(std::uint64_t{1} << signal, atomics::seq_cst);
  }
}

void task_arena::give_back(reservation& from) noexcept {
  if (from.free == 0) {
    return;
  }
  leaf_block& block = *leaves_[leaf_of(from.first_slot)].load(atomics::acquire);
  const std::size_t signal = signal_of(from.first_slot);
  // seq_cst: same as release().
  hint_if_emptied(block, signal, block.occupancy[signal].fetch_and(~from.free, atomics::seq_cst),
                  from.free);
  from.free = 0;
}

bool task_arena::grow(std::size_t partition) {
  const std::lock_guard lock(growth_mutex_);
  partition_state& state = partitions_[partition];
  const std::size_t owned = state.leaves.load(atomics::relaxed);
  const std::size_t leaf = partition_leaf(partition, owned, partition_count_);
  if (leaf >= max_leaves_) {
    return false;
  }
  auto block = std::make_unique<leaf_block>(signals_per_leaf_, tasks_per_leaf_);
  // release: publishes the zeroed slots and occupancy words to every reader
  // that loads this pointer with acquire: slot(), and every leaves_[i] load
  // in this file (the reservation paths, release, give_back, the counts).
  leaves_[leaf].store(block.release(), atomics::release);
  if (leaf + 1 > leaf_limit_.load(atomics::relaxed)) {
    leaf_limit_.store(leaf + 1, atomics::release);
  }
  state.cursor.store(static_cast<std::uint32_t>(owned * signals_per_leaf_), atomics::relaxed);
  // release: pairs with try_claim_in's acquire load of the leaf count.
  state.leaves.store(static_cast<std::uint32_t>(owned + 1), atomics::release);
  return true;
}

void task_arena::release(std::uint32_t index) noexcept {
  leaf_block& block = *leaves_[leaf_of(index)].load(atomics::acquire);
  const std::size_t signal = signal_of(index);
  // seq_cst: release half of the slot hand-over (pairs with try_claim_in's
  // fetch_or) and first half of the capacity-waiter handshake.
  const std::uint64_t mask = std::uint64_t{1} << bit_of(index);
  hint_if_emptied(block, signal, block.occupancy[signal].fetch_and(~mask, atomics::seq_cst), mask);
}

std::size_t task_arena::live_count() const noexcept {
  std::size_t live = 0;
  const std::size_t limit = leaf_limit();
  for (std::size_t leaf = 0; leaf < limit; ++leaf) {
    leaf_block* block = leaves_[leaf].load(atomics::acquire);
    if (block == nullptr) {
      continue;
    }
    for (std::size_t signal = 0; signal < signals_per_leaf_; ++signal) {
      live +=
          static_cast<std::size_t>(std::popcount(block->occupancy[signal].load(atomics::acquire)));
    }
  }
  return live;
}

}  // namespace canopy::detail
