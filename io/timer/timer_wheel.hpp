// timer_wheel — a hierarchical timing wheel: O(1) insert and cancel, and
// the earliest deadline in O(levels). Single-threaded: timer_queue puts a
// lock around it and turns expiries into wakes.
//
// Time is in ticks (io/timer/timer_queue.hpp uses microseconds since the queue's
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
//   * a slot that expire() left partly processed (its limit or its move
//     budget ran out) is elapsed's own slot at its level, the one place at
//     levels >= 1 where nothing is inserted; its remaining deadlines lie in
//     elapsed's span at that level, as do those of every lower level, so
//     they may be earlier than the first slot's: next_deadline() and
//     expire() also look at elapsed's own slot of each level above the
//     first slot's (one bit test a level).
// Each slot keeps a lower bound of its deadlines (`earliest`), exact after
// inserts and stale-low after a cancel, so the poller can sleep until a
// timer's exact deadline, not the start of a coarse slot: a slot is
// processed when its lower bound is due, its due nodes fire and the others
// move down a level (at most levels - 1 moves in a node's life).
//
// A slot is an array of (deadline, node) pairs, not a list through the
// nodes: moving a slot down a level reads the deadlines from one contiguous
// array and writes each node's new place, instead of chasing a pointer
// through every node (each in its own coroutine frame: a cache and TLB
// miss apiece). A coarse slot can hold a large share of all pending timers
// and is moved under the queue's mutex, so a walk through its nodes kept
// every arm and cancel waiting behind it (docs/io.md, "Timer storms", has
// the measurements).
// A cancel leaves a hole (a pair with no node) and touches no other node;
// holes at the back are dropped at once, and a slot whose holes outnumber
// its timers is compacted (each timer's position rewritten: amortised, at
// most one node written per cancel, and those writes not each behind the
// queue's mutex). The cost: an allocation when a slot's array grows (insert
// may throw std::bad_alloc, and the same failure while expire() moves a node
// down terminates: expire cannot give a timer back), and 16 bytes per
// pending timer in the arrays (32 at most with the holes).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace canopy::io::detail {

// The intrusive part of a timer. Lives in the waiter (a coroutine frame, a
// fiber stack); the wheel only links it.
struct timer_node {
  static constexpr std::uint16_t unlinked = 0xFFFF;

  std::uint64_t deadline = 0;     // ticks
  std::uint32_t position = 0;     // index in its slot's array while linked
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
  // before elapsed() is due at the next expire(). Throws std::bad_alloc if
  // the slot's array cannot grow (the node is then not linked).
  void insert(timer_node& node, std::uint64_t deadline);
  // Unlink a linked node. O(1).
  void remove(timer_node& node) noexcept;

  // A lower bound of the earliest pending deadline (exact unless the node
  // that set it was removed), or `never` when empty.
  [[nodiscard]] std::uint64_t next_deadline() const noexcept;

  // Unlink the nodes whose deadline is <= now, at most `limit` of them,
  // and call fire(node) for each (the node is unlinked when fire runs; fire
  // may not touch the wheel, and may end the node's life: expire does not
  // touch a node after firing it). Returns how many fired; fewer than
  // `limit` means none is left due.
  // At most `move_budget` nodes not yet due are moved down a level per
  // call: a caller that holds a lock around the wheel can let go of it
  // between calls while a big slot is spread over the levels below (due()
  // tells whether anything is left to do).
  template <class Fire>
  std::size_t expire(std::uint64_t now, std::size_t limit, Fire&& fire,
                     std::size_t move_budget = std::numeric_limits<std::size_t>::max()) noexcept;
  // Whether an expire(now) would find something to do (a due timer, or a
  // slot whose lower bound is due).
  [[nodiscard]] bool due(std::uint64_t now) const noexcept { return next_deadline() <= now; }

  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] std::uint64_t elapsed() const noexcept { return elapsed_; }

 private:
  static constexpr std::size_t slot_count = std::size_t{levels} * slots_per_level;
  // A slot array emptied with more room than this gives its memory back.
  static constexpr std::size_t kept_capacity = 1024;

  struct slot_entry {
    std::uint64_t deadline;
    timer_node* node;  // null: the hole of a cancelled timer
  };

  // The first occupied slot of the lowest occupied level, or false.
  bool first_slot(unsigned& level, unsigned& index) const noexcept;
  // A slot whose lower bound is at or before `now`: the first slot, else a
  // partly processed one (below); false if none.
  bool due_slot(std::uint64_t now, std::size_t& slot) const noexcept;
  // Link `node` where `deadline` belongs (may throw std::bad_alloc).
  void place(timer_node& node, std::uint64_t deadline);
  void mark_empty(std::size_t slot) noexcept;
  // Rewrite a slot's array without its holes.
  void compact(std::size_t slot) noexcept;
  // Reorder a slot's pairs so that those due before `soon` are last (each
  // pair swapped writes its node's position).
  static void move_urgent_to_back(std::vector<slot_entry>& pairs, std::uint64_t soon) noexcept;
  // A slot entered with more pairs than this is reordered first; spreading
  // it is reckoned at pairs_per_tick pairs a microsecond, slower than it
  // runs, so that every pair due before the spread ends is moved to the
  // back (docs/performance.md, "Timers", has the measured rate).
  static constexpr std::size_t urgent_threshold = 256;
  static constexpr std::size_t pairs_per_tick = 8;
  // A slot is compacted when its array is longer than twice its timers
  // plus this many.
  static constexpr std::size_t compact_slack = 32;

  std::uint64_t elapsed_ = 0;
  std::size_t size_ = 0;
  std::array<std::uint64_t, levels> occupied_{};
  std::array<std::uint64_t, slot_count> earliest_{};
  std::array<std::vector<slot_entry>, slot_count> slots_;
  // Pairs with a node in each slot (the rest of its array are holes).
  std::array<std::uint32_t, slot_count> live_{};
};

template <class Fire>
std::size_t timer_wheel::expire(std::uint64_t now, std::size_t limit, Fire&& fire,
                                std::size_t move_budget) noexcept {
  // How many pairs ahead a node is prefetched: placing or firing it writes
  // to it, and the nodes lie in scattered frames.
  constexpr std::size_t prefetch_distance = 32;
  std::size_t fired = 0;
  std::size_t moved = 0;
  std::size_t slot = 0;
  while (fired < limit && moved < move_budget && due_slot(now, slot)) {
    // The slot's start. At level 0 it may be before elapsed_ (a node
    // inserted already due sits in elapsed_'s own slot), and a slot left
    // partly processed starts before it; elapsed_ never moves back.
    const unsigned level = static_cast<unsigned>(slot / slots_per_level);
    const unsigned shift = slot_bits * level;
    const std::uint64_t above_mask =
        level + 1 >= levels ? 0 : ~((std::uint64_t{1} << (shift + slot_bits)) - 1);
    const std::uint64_t start =
        (elapsed_ & above_mask) | (std::uint64_t{slot % slots_per_level} << shift);
    std::vector<slot_entry>& pairs = slots_[slot];
    if (start > elapsed_) {
      elapsed_ = start;
      // A slot entered now: the pairs due within about the time it takes to
      // spread the slot go first, so that they are placed (and fire) on
      // time instead of waiting somewhere in the slot's array.
      if (level > 0 && pairs.size() > urgent_threshold) {
        move_urgent_to_back(pairs, now + pairs.size() / pairs_per_tick);
      }
    }
    // From the back: the pairs left behind keep their positions, so a slot
    // can be left partly processed (limit, budget) with every node in it
    // still linked where its position says. No pair goes back into this
    // slot: at level 0 every pair of a due slot is due, and from a level
    // above, a pair not due belongs to a lower level now that elapsed_ is in
    // this slot's span.
    while (!pairs.empty() && fired < limit && moved < move_budget) {
      const std::size_t last = pairs.size() - 1;
      if (last >= prefetch_distance) {
        __builtin_prefetch(pairs[last - prefetch_distance].node, 1);
      }
      const slot_entry pair = pairs[last];
      pairs.pop_back();
      if (pair.node == nullptr) {
        continue;  // a cancelled timer's hole
      }
      --live_[slot];
      if (pair.deadline <= now) {
        pair.node->slot = timer_node::unlinked;
        --size_;
        ++fired;
        fire(*pair.node);  // may end the node's life: not touched again
      } else {
        place(*pair.node, pair.deadline);  // std::bad_alloc here terminates (noexcept)
        ++moved;
      }
    }
    if (pairs.empty()) {
      mark_empty(slot);
    }
  }
  if (size_ == 0 && now > elapsed_) {
    elapsed_ = now;  // nothing placed relative to the old value
  }
  return fired;
}

}  // namespace canopy::io::detail
