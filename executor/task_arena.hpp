// task_arena — storage for task slots, grown by whole leaves.
//
// Slot index = leaf * tasks_per_leaf + signal * 64 + bit: the same
// coordinates as the task's bit in the summary tree. Each leaf has one
// occupancy word per signal word (bit set = slot holds a live task).
//
// Allocation is per partition (partition_owner(leaf) == partition): a
// partition scans its leaves' occupancy words from a moving cursor and
// claims a clear bit with fetch_or. A spawner reserves whole words: the
// last one again once half of it is free, else an empty one, found through
// each leaf's free-word hint (one load per leaf, not one per word), else any
// word at least half free. Only when there is none does the partition grow
// (so it stays within twice its live tasks); only at its maximum size are
// words less than half free handed out. When every slot of the partition is
// taken it grows by one leaf (leaf index partition + k * workers) until
// max_leaves; then allocation in that partition fails and the caller tries
// another partition, or reports "at capacity". A task is never dropped or
// overwritten to make room.
//
// Thread-safety: allocate()/release()/slot() from any thread; growth is
// serialised by a mutex. A slot is released only after the worker that ran
// it is completely done with it (its body destroyed, generation bumped).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

#include "../atomics/atomics.hpp"
#include "task_slot.hpp"

namespace canopy::detail {

class task_arena {
 public:
  task_arena(std::size_t signals_per_leaf, std::size_t initial_leaves, std::size_t max_leaves,
             std::size_t partition_count);
  ~task_arena();
  task_arena(const task_arena&) = delete;
  task_arena& operator=(const task_arena&) = delete;

  [[nodiscard]] std::size_t tasks_per_leaf() const noexcept { return tasks_per_leaf_; }
  [[nodiscard]] std::size_t max_leaves() const noexcept { return max_leaves_; }
  [[nodiscard]] std::size_t capacity() const noexcept { return max_leaves_ * tasks_per_leaf_; }

  // One past the highest leaf index allocated so far.
  [[nodiscard]] std::size_t leaf_limit() const noexcept {
    return leaf_limit_.load(atomics::acquire);
  }

  // Claim a free slot in `partition`, growing it if full. Returns the slot
  // index, or nothing if the partition is at its maximum size. May throw
  // std::bad_alloc when growing.
  [[nodiscard]] std::optional<std::uint32_t> allocate(std::size_t partition);

  // Return a slot to the free set. Its body must already be destroyed.
  void release(std::uint32_t index) noexcept;

  // A spawner's private run of free slots: bits of one occupancy word that
  // are already marked occupied but hold no task yet. A spawning thread
  // takes slots from it without touching shared words, so the occupancy
  // word's cache line moves once per run instead of once per spawn. Owned by
  // one thread at a time; reserved slots have no vtable (shutdown skips them).
  struct reservation {
    std::uint32_t first_slot = 0;  // slot index of bit 0 of the word
    std::uint64_t free = 0;        // reserved bits not yet used
  };

  // Reserve every free slot of one occupancy word of `partition`, growing the
  // partition when no word is at least half free. False when it is full at
  // its maximum size. May throw std::bad_alloc when growing.
  [[nodiscard]] bool reserve(std::size_t partition, reservation& into);

  // Take one reserved slot; `from.free` must be non-zero.
  [[nodiscard]] static std::uint32_t take(reservation& from) noexcept {
    const unsigned bit = static_cast<unsigned>(__builtin_ctzll(from.free));
    from.free &= from.free - 1;
    return from.first_slot + bit;
  }

  // Return the unused slots of a reservation to the free set.
  void give_back(reservation& from) noexcept;

  // Always inlined: GCC's LTO leaves it out of line in canopy::join's
  // take-back, a call on every fork.
  [[nodiscard, gnu::always_inline]] task_slot& slot(std::uint32_t index) const noexcept {
    // acquire: pairs with the release store that published the leaf.
    return leaves_[index >> leaf_shift_].load(atomics::acquire)->slots[index & leaf_mask_];
  }

  [[nodiscard]] std::size_t leaf_of(std::uint32_t index) const noexcept {
    return index >> leaf_shift_;
  }
  [[nodiscard]] std::size_t signal_of(std::uint32_t index) const noexcept {
    return (index & leaf_mask_) >> 6;
  }
  [[nodiscard]] unsigned bit_of(std::uint32_t index) const noexcept { return index & 63U; }
  [[nodiscard]] std::uint32_t index_of(std::size_t leaf, std::size_t signal,
                                       unsigned bit) const noexcept {
    return static_cast<std::uint32_t>((leaf << leaf_shift_) | (signal << 6) | bit);
  }

  // Live (occupied) slots right now; exact only when no thread allocates or
  // releases concurrently.
  [[nodiscard]] std::size_t live_count() const noexcept;

  // Shutdown only (no concurrent allocation or release): call fn(index) for
  // every occupied slot.
  template <class Fn>
  void for_each_live(Fn&& fn) const {
    const std::size_t limit = leaf_limit();
    for (std::size_t leaf = 0; leaf < limit; ++leaf) {
      leaf_block* block = leaves_[leaf].load(atomics::acquire);
      if (block == nullptr) {
        continue;
      }
      for (std::size_t signal = 0; signal < signals_per_leaf_; ++signal) {
        std::uint64_t occupied = block->occupancy[signal].load(atomics::acquire);
        while (occupied != 0) {
          const unsigned bit = static_cast<unsigned>(__builtin_ctzll(occupied));
          occupied &= occupied - 1;
          fn(index_of(leaf, signal, bit));
        }
      }
    }
  }

 private:
  // A leaf's slots live in pages mapped for them alone (task_arena.cpp
  // says why); this unmaps them.
  struct slot_pages {
    std::size_t count = 0;
    void operator()(task_slot* slots) const noexcept;
  };
  struct leaf_block {
    explicit leaf_block(std::size_t signals, std::size_t tasks);
    std::unique_ptr<task_slot[], slot_pages> slots;
    std::unique_ptr<atomics::atomic<std::uint64_t>[]> occupancy;
    // Bit s: occupancy[s] may be empty. Never clear on an empty word, except
    // between clear_empty_hint's clear and its re-read.
    alignas(atomics::cache_line) atomics::atomic<std::uint64_t> free_words{0};
  };
  struct alignas(atomics::cache_line) partition_state {
    atomics::atomic<std::uint32_t> leaves{0};  // leaves this partition owns
    atomics::atomic<std::uint32_t> cursor{0};  // occupancy word to try first (hint)
  };

  std::optional<std::uint32_t> try_claim_in(std::size_t partition) noexcept;
  // Reserve a hinted empty word, else any word with `min_free` free slots.
  bool try_reserve_in(std::size_t partition, reservation& into, int min_free) noexcept;
  static constexpr int half_word = 32;
  bool reserve_hinted(std::size_t partition, reservation& into) noexcept;
  bool reserve_word(std::size_t leaf, std::size_t signal, std::size_t partition_word,
                    std::size_t partition, reservation& into) noexcept;
  // Word `signal` was just reserved from or found in use: clear its hint,
  // then re-read the word and set the hint again if it is empty.
  static void clear_empty_hint(leaf_block& block, std::size_t signal) noexcept;
  // After clearing `cleared` from a word that held `previous`: hint the word
  // if that emptied it.
  static void hint_if_emptied(leaf_block& block, std::size_t signal, std::uint64_t previous,
                              std::uint64_t cleared) noexcept;
  bool grow(std::size_t partition);

  std::size_t signals_per_leaf_;
  std::size_t tasks_per_leaf_;
  unsigned leaf_shift_;
  std::uint32_t leaf_mask_;
  std::size_t max_leaves_;
  std::size_t partition_count_;
  std::unique_ptr<atomics::atomic<leaf_block*>[]> leaves_;
  std::unique_ptr<partition_state[]> partitions_;
  atomics::atomic<std::size_t> leaf_limit_{0};
  std::mutex growth_mutex_;
};

}  // namespace canopy::detail
