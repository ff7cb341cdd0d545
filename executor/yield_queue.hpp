// yield_queue — a worker's local FIFO of tasks that yielded.
//
// Owned by one worker thread: only it pushes and pops, so it needs no
// atomics. Its non-emptiness is mirrored in the SignalWaker's yield bit.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>

namespace canopy {

class yield_queue {
 public:
  // Returns true if the queue was empty before the push.
  bool push(std::uint32_t slot) {
    const bool was_empty = slots_.empty();
    slots_.push_back(slot);
    return was_empty;
  }

  std::optional<std::uint32_t> pop() noexcept {
    if (slots_.empty()) {
      return std::nullopt;
    }
    const std::uint32_t slot = slots_.front();
    slots_.pop_front();
    return slot;
  }

  [[nodiscard]] bool empty() const noexcept { return slots_.empty(); }
  [[nodiscard]] std::size_t size() const noexcept { return slots_.size(); }

 private:
  std::deque<std::uint32_t> slots_;
};

}  // namespace canopy
