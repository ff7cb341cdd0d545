// yield_queue — a worker's local FIFO of tasks that yielded.
//
// Owned by one worker thread: only it pushes and pops, so it needs no
// atomics. Its non-emptiness is mirrored in the SignalWaker's yield bit.
// No other worker reads it: its owner hands its tasks to the summary tree
// (hand_over) before it runs a task that did not come from it, so a yielded
// task waits for at most one other task run of its worker before any worker
// may take it (docs/architecture.md, "The LIFO slot").
#pragma once

#include <cstdint>
#include <deque>
#include <optional>

namespace canopy::detail {

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

  // Every queued task to `signal` (executor_core::signal_task: its tree bit,
  // then a wake per the protocol), oldest first, and the queue emptied; each
  // task is SCHEDULED already, so its bit is set once and it leaves the
  // queue once (invariant S). Returns whether any task was handed over (the
  // owner then clears its yield bit). Shared with the model check.
  template <class Signal>
  bool hand_over(Signal&& signal) {
    if (slots_.empty()) {
      return false;
    }
    for (const std::uint32_t slot : slots_) {
      signal(slot);
    }
    slots_.clear();
    return true;
  }

  [[nodiscard]] bool empty() const noexcept { return slots_.empty(); }
  [[nodiscard]] std::size_t size() const noexcept { return slots_.size(); }

 private:
  std::deque<std::uint32_t> slots_;
};

}  // namespace canopy::detail
