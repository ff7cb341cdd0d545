#include "timer_wheel.hpp"

#include <algorithm>
#include <bit>
#include <utility>

namespace canopy::io::detail {

timer_wheel::timer_wheel() noexcept { earliest_.fill(never); }

void timer_wheel::insert(timer_node& node, std::uint64_t deadline) {
  node.deadline = deadline;
  place(node, deadline);
  ++size_;
}

void timer_wheel::place(timer_node& node, std::uint64_t deadline) {
  // Already due: elapsed_'s own level-0 slot.
  const std::uint64_t where = deadline < elapsed_ ? elapsed_ : deadline;
  // The highest 6-bit group where `where` and elapsed_ differ (group 0 when
  // they are equal).
  const std::uint64_t differing = (where ^ elapsed_) | (slots_per_level - 1);
  const unsigned level = (63U - static_cast<unsigned>(std::countl_zero(differing))) / slot_bits;
  const unsigned index =
      static_cast<unsigned>(where >> (slot_bits * level)) & (slots_per_level - 1);
  const std::size_t slot = std::size_t{level} * slots_per_level + index;

  std::vector<slot_entry>& pairs = slots_[slot];
  pairs.push_back(slot_entry{deadline, &node});  // the only step that may throw
  node.slot = static_cast<std::uint16_t>(slot);
  node.position = static_cast<std::uint32_t>(pairs.size() - 1);
  ++live_[slot];
  occupied_[level] |= std::uint64_t{1} << index;
  if (deadline < earliest_[slot]) {
    earliest_[slot] = deadline;
  }
}

void timer_wheel::mark_empty(std::size_t slot) noexcept {
  occupied_[slot / slots_per_level] &= ~(std::uint64_t{1} << (slot % slots_per_level));
  earliest_[slot] = never;
  if (slots_[slot].capacity() > kept_capacity) {
    std::vector<slot_entry>().swap(slots_[slot]);  // a storm's arrays do not stay
  }
}

void timer_wheel::remove(timer_node& node) noexcept {
  const std::size_t slot = node.slot;
  std::vector<slot_entry>& pairs = slots_[slot];
  pairs[node.position].node = nullptr;  // a hole: no other node is touched
  node.slot = timer_node::unlinked;
  --size_;
  if (--live_[slot] == 0) {
    pairs.clear();
    mark_empty(slot);
    return;
  }
  while (pairs.back().node == nullptr) {  // a live pair remains: the loop stops
    pairs.pop_back();
  }
  if (pairs.size() > 2 * std::size_t{live_[slot]} + compact_slack) {
    compact(slot);
  }
}

void timer_wheel::compact(std::size_t slot) noexcept {
  std::vector<slot_entry>& pairs = slots_[slot];
  std::size_t kept = 0;
  for (const slot_entry& pair : pairs) {
    if (pair.node != nullptr) {
      pair.node->position = static_cast<std::uint32_t>(kept);
      pairs[kept++] = pair;
    }
  }
  pairs.resize(kept);
}

void timer_wheel::move_urgent_to_back(std::vector<slot_entry>& pairs, std::uint64_t soon) noexcept {
  // A partition from the back: [back, size) holds the urgent pairs seen so
  // far, [i + 1, back) the others. Reading the deadlines touches no node.
  std::size_t back = pairs.size();
  for (std::size_t i = pairs.size(); i-- > 0;) {
    if (pairs[i].node != nullptr && pairs[i].deadline < soon) {
      --back;
      if (i != back) {
        std::swap(pairs[i], pairs[back]);
        if (pairs[i].node != nullptr) {
          pairs[i].node->position = static_cast<std::uint32_t>(i);
        }
        pairs[back].node->position = static_cast<std::uint32_t>(back);
      }
    }
  }
}

bool timer_wheel::first_slot(unsigned& level, unsigned& index) const noexcept {
  for (unsigned l = 0; l < levels; ++l) {
    if (occupied_[l] != 0) {
      level = l;
      index = static_cast<unsigned>(std::countr_zero(occupied_[l]));
      return true;
    }
  }
  return false;
}

std::uint64_t timer_wheel::next_deadline() const noexcept {
  unsigned level = 0;
  unsigned index = 0;
  if (!first_slot(level, index)) {
    return never;
  }
  std::uint64_t earliest = earliest_[level * slots_per_level + index];
  // Partly processed slots above (elapsed's own slot of a higher level).
  for (unsigned l = level + 1; l < levels; ++l) {
    const unsigned own = static_cast<unsigned>(elapsed_ >> (slot_bits * l)) & (slots_per_level - 1);
    if ((occupied_[l] >> own & 1U) != 0) {
      earliest = std::min(earliest, earliest_[l * slots_per_level + own]);
    }
  }
  return earliest;
}

bool timer_wheel::due_slot(std::uint64_t now, std::size_t& slot) const noexcept {
  unsigned level = 0;
  unsigned index = 0;
  if (!first_slot(level, index)) {
    return false;
  }
  // The first slot goes first: its due timers fire before a partly
  // processed slot above is spread further.
  slot = std::size_t{level} * slots_per_level + index;
  if (earliest_[slot] <= now) {
    return true;
  }
  for (unsigned l = level + 1; l < levels; ++l) {
    const unsigned own = static_cast<unsigned>(elapsed_ >> (slot_bits * l)) & (slots_per_level - 1);
    if ((occupied_[l] >> own & 1U) != 0 && earliest_[l * slots_per_level + own] <= now) {
      slot = std::size_t{l} * slots_per_level + own;
      return true;
    }
  }
  return false;
}

}  // namespace canopy::io::detail
