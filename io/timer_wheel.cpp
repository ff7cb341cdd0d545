#include "timer_wheel.hpp"

#include <bit>

namespace canopy::io {

timer_wheel::timer_wheel() noexcept { earliest_.fill(never); }

void timer_wheel::insert(timer_node& node, std::uint64_t deadline) noexcept {
  node.deadline = deadline;
  ++size_;
  place(node);
}

void timer_wheel::place(timer_node& node) noexcept {
  // Already due: elapsed_'s own level-0 slot.
  const std::uint64_t where = node.deadline < elapsed_ ? elapsed_ : node.deadline;
  // The highest 6-bit group where `where` and elapsed_ differ (group 0 when
  // they are equal).
  const std::uint64_t differing = (where ^ elapsed_) | (slots_per_level - 1);
  const unsigned level = (63U - static_cast<unsigned>(std::countl_zero(differing))) / slot_bits;
  const unsigned index =
      static_cast<unsigned>(where >> (slot_bits * level)) & (slots_per_level - 1);
  const std::size_t slot = std::size_t{level} * slots_per_level + index;

  node.slot = static_cast<std::uint16_t>(slot);
  node.prev = nullptr;
  node.next = heads_[slot];
  if (node.next != nullptr) {
    node.next->prev = &node;
  }
  heads_[slot] = &node;
  occupied_[level] |= std::uint64_t{1} << index;
  if (node.deadline < earliest_[slot]) {
    earliest_[slot] = node.deadline;
  }
}

void timer_wheel::remove(timer_node& node) noexcept {
  const std::size_t slot = node.slot;
  if (node.prev != nullptr) {
    node.prev->next = node.next;
  } else {
    heads_[slot] = node.next;
  }
  if (node.next != nullptr) {
    node.next->prev = node.prev;
  }
  if (heads_[slot] == nullptr) {
    occupied_[slot / slots_per_level] &= ~(std::uint64_t{1} << (slot % slots_per_level));
    earliest_[slot] = never;
  }
  node.slot = timer_node::unlinked;
  node.prev = nullptr;
  node.next = nullptr;
  --size_;
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
  return earliest_[level * slots_per_level + index];
}

timer_node* timer_wheel::take_slot(unsigned level, unsigned index) noexcept {
  const std::size_t slot = std::size_t{level} * slots_per_level + index;
  timer_node* const head = heads_[slot];
  heads_[slot] = nullptr;
  earliest_[slot] = never;
  occupied_[level] &= ~(std::uint64_t{1} << index);
  for (timer_node* node = head; node != nullptr; node = node->next) {
    node->slot = timer_node::unlinked;
  }
  return head;
}

}  // namespace canopy::io
