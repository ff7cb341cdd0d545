#include "host_channel.hpp"

namespace canopy::detail {

void host_channel::push(std::uint32_t slot) {
  {
    const std::lock_guard lock(queue_mutex_);
    queue_.push_back(slot);
  }
  // seq_cst: the poster's half of the handshake (host_channel.hpp): this
  // increment, then notify()'s load of armed_; the host stores armed_, then
  // reads this count.
  queued_.fetch_add(1, atomics::seq_cst);
  notify();
}

std::optional<std::uint32_t> host_channel::pop() {
  if (queued_.load(atomics::relaxed) == 0) {
    return std::nullopt;
  }
  std::uint32_t slot = 0;
  {
    const std::lock_guard lock(queue_mutex_);
    if (queue_.empty()) {
      return std::nullopt;  // pushed, not yet counted: the push's notify() covers it
    }
    slot = queue_.front();
    queue_.pop_front();
  }
  // relaxed: the count is only a hint for the handshake; the slot itself
  // travelled under the mutex.
  queued_.fetch_sub(1, atomics::relaxed);
  return slot;
}

void host_channel::clear() noexcept {
  const std::lock_guard lock(queue_mutex_);
  queued_.fetch_sub(queue_.size(), atomics::relaxed);
  queue_.clear();
}

void host_channel::notify() noexcept {
  // seq_cst load and exchange: pair with arm()'s seq_cst store (the Dekker
  // handshake in the header). The plain load first keeps a running host's
  // posters off the line with a locked instruction.
  if (armed_.load(atomics::seq_cst) && armed_.exchange(false, atomics::seq_cst)) {
    descriptor_.signal();
  }
}

void host_channel::read_counts() noexcept {
  if (expected_writes_ == 0) {
    return;
  }
  const std::uint64_t count = descriptor_.take();
  expected_writes_ = count >= expected_writes_ ? 0 : expected_writes_ - count;
  // EAGAIN: a poster won the exchange and has not written yet; its write
  // makes the descriptor readable and the next arm() reads it.
}

void host_channel::arm() noexcept {
  read_counts();
  // seq_cst: the host's half of the handshake; the caller's re-check (the
  // queue count, the tree's root words) follows, all seq_cst.
  armed_.store(true, atomics::seq_cst);
  host_armed_ = true;
}

void host_channel::disarm() noexcept {
  if (!host_armed_) {
    return;
  }
  host_armed_ = false;
  // A poster that found us armed took the flag and writes once: count it.
  if (!armed_.exchange(false, atomics::seq_cst)) {
    ++expected_writes_;
  }
}

void host_channel::leave_readable() noexcept {
  if (expected_writes_ != 0) {
    return;  // a count is there, or a poster's is on its way
  }
  descriptor_.signal();
  ++expected_writes_;
}

void host_channel::wait_readable(std::chrono::nanoseconds timeout) noexcept {
  descriptor_.wait_readable(timeout);
}

}  // namespace canopy::detail
