#include "timer_wheel.hpp"

#include <algorithm>
#include <bit>
#include <utility>

namespace canopy::io {

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
  const std::uint32_t position = node.position;
  if (position + 1 != pairs.size()) {
    pairs[position] = pairs.back();
    pairs[position].node->position = position;
  }
  pairs.pop_back();
  if (pairs.empty()) {
    mark_empty(slot);
  }
  node.slot = timer_node::unlinked;
  --size_;
}

void timer_wheel::move_urgent_to_back(std::vector<slot_entry>& pairs, std::uint64_t soon) noexcept {
  // A partition from the back: [back, size) holds the urgent pairs seen so
  // far, [i + 1, back) the others. Reading the deadlines touches no node.
  std::size_t back = pairs.size();
  for (std::size_t i = pairs.size(); i-- > 0;) {
    if (pairs[i].deadline < soon) {
      --back;
      if (i != back) {
        std::swap(pairs[i], pairs[back]);
        pairs[i].node->position = static_cast<std::uint32_t>(i);
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

}  // namespace canopy::io
