// timer_wheel — a hierarchical timing wheel: O(1) insert and cancel, and
// the earliest deadline in O(levels). Single-threaded: timer_queue puts a
// lock around it and turns expiries into wakes.
//
// Time is in ticks (io/timer_queue.hpp uses microseconds since the queue's
// epoch). The wheel has 11 levels of 64 slots; level L's slots span 64^L
// ticks each, so the levels cover every 64-bit deadline and nothing is ever
// clamped. A node's level follows from its distance (a 10 s timer in µs
// sits at level 3), so the top levels stay empty and cost one bitmap test.
//
// Placement (as tokio's wheel): a node belongs to the level of the highest
// 6-bit group in which its deadline differs from `elapsed` (the wheel's own
// "now", which moves only when a slot is processed), in the slot given by
// that group of the deadline. Consequences, which the code relies on:
//   * at every level, occupied slots are at or after elapsed's slot for
//     that level, in the same epoch of the level above: the first occupied
//     slot is the lowest set bit of the level's bitmap (no wrap-around);
//   * every deadline at level L is earlier than every slot of level L+1, so
//     the earliest deadline lies in the first occupied slot of the lowest
//     occupied level.
// Each slot keeps a lower bound of its deadlines (`earliest`), exact after
// inserts and stale-low after a cancel, so the poller can sleep until a
// timer's exact deadline, not the start of a coarse slot: a slot is
// processed when its lower bound is due, its due nodes fire and the others
// move down a level (at most levels - 1 moves in a node's life).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace canopy::io {

// The intrusive part of a timer. Lives in the waiter (a coroutine frame, a
// fiber stack); the wheel only links it.
struct timer_node {
  static constexpr std::uint16_t unlinked = 0xFFFF;

  std::uint64_t deadline = 0;  // ticks
  timer_node* prev = nullptr;
  timer_node* next = nullptr;
  std::uint16_t slot = unlinked;  // level * 64 + index while linked

  [[nodiscard]] bool linked() const noexcept { return slot != unlinked; }
};

class timer_wheel {
 public:
  static constexpr unsigned slot_bits = 6;
  static constexpr unsigned slots_per_level = 1U << slot_bits;
  static constexpr unsigned levels = 11;  // 6 * 11 >= 64 bits
  static constexpr std::uint64_t never = std::numeric_limits<std::uint64_t>::max();

  timer_wheel() noexcept;
  timer_wheel(const timer_wheel&) = delete;
  timer_wheel& operator=(const timer_wheel&) = delete;

  // Link `node` (not linked) with the given deadline. A deadline at or
  // before elapsed() is due at the next expire().
  void insert(timer_node& node, std::uint64_t deadline) noexcept;
  // Unlink a linked node. O(1).
  void remove(timer_node& node) noexcept;

  // A lower bound of the earliest pending deadline (exact unless the node
  // that set it was removed), or `never` when empty.
  [[nodiscard]] std::uint64_t next_deadline() const noexcept;

  // Unlink the nodes whose deadline is <= now, at most `limit` of them,
  // and call fire(node) for each (the node is unlinked when fire runs; fire
  // may not touch the wheel). Returns how many fired; fewer than `limit`
  // means none is left due.
  template <class Fire>
  std::size_t expire(std::uint64_t now, std::size_t limit, Fire&& fire) noexcept;

  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] std::uint64_t elapsed() const noexcept { return elapsed_; }

 private:
  static constexpr std::size_t slot_count = std::size_t{levels} * slots_per_level;

  // The first occupied slot of the lowest occupied level, or false.
  bool first_slot(unsigned& level, unsigned& index) const noexcept;
  // Unlink the whole list of one slot.
  timer_node* take_slot(unsigned level, unsigned index) noexcept;
  void place(timer_node& node) noexcept;

  std::uint64_t elapsed_ = 0;
  std::size_t size_ = 0;
  std::array<std::uint64_t, levels> occupied_{};
  std::array<timer_node*, slot_count> heads_{};
  std::array<std::uint64_t, slot_count> earliest_{};
};

template <class Fire>
std::size_t timer_wheel::expire(std::uint64_t now, std::size_t limit, Fire&& fire) noexcept {
  std::size_t fired = 0;
  unsigned level = 0;
  unsigned index = 0;
  while (fired < limit && first_slot(level, index)) {
    if (earliest_[level * slots_per_level + index] > now) {
      break;
    }
    // The slot's start. At level 0 it may be before elapsed_ (a node
    // inserted already due sits in elapsed_'s own slot); elapsed_ never
    // moves back.
    const unsigned shift = slot_bits * level;
    const std::uint64_t above_mask =
        level + 1 >= levels ? 0 : ~((std::uint64_t{1} << (shift + slot_bits)) - 1);
    const std::uint64_t start = (elapsed_ & above_mask) | (std::uint64_t{index} << shift);
    if (start > elapsed_) {
      elapsed_ = start;
    }
    timer_node* node = take_slot(level, index);
    while (node != nullptr) {
      timer_node* const next = node->next;  // fire() may end the node's life
      if (node->deadline <= now && fired < limit) {
        --size_;
        ++fired;
        fire(*node);
      } else {
        place(*node);  // due later in this slot's span (a lower level), or over the limit
      }
      node = next;
    }
  }
  if (size_ == 0 && now > elapsed_) {
    elapsed_ = now;  // nothing placed relative to the old value
  }
  return fired;
}

}  // namespace canopy::io
