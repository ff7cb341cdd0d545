#include "signal_waker.hpp"

#include "../summary_tree/partition.hpp"

namespace canopy::detail {

signal_waker::signal_waker(std::size_t max_partition_leaves, park_backend& backend)
    : backend_(backend),
      active_backend_(&backend),
      summary_words_((max_partition_leaves + summary_tree::bits_per_word - 1) /
                     summary_tree::bits_per_word),
      partition_summary_(std::make_unique<atomics::atomic<std::uint64_t>[]>(
          summary_words_ == 0 ? 1 : summary_words_)) {}

bool signal_waker::sync_partition_summary(const summary_tree& tree, std::size_t worker,
                                          std::size_t worker_count,
                                          std::size_t leaf_count) noexcept {
  const std::size_t leaves = partition_size(worker, leaf_count, worker_count);
  bool any = false;
  for (std::size_t word = 0; word * summary_tree::bits_per_word < leaves; ++word) {
    std::uint64_t summary = 0;
    const std::size_t first = word * summary_tree::bits_per_word;
    for (std::size_t bit = 0; bit < summary_tree::bits_per_word && first + bit < leaves; ++bit) {
      if (tree.leaf_word(partition_leaf(worker, first + bit, worker_count)) != 0) {
        summary |= std::uint64_t{1} << bit;
      }
    }
    partition_summary_[word].store(summary, atomics::relaxed);
    any = any || summary != 0;
  }
  if (any) {
    status_.fetch_or(task_bit, atomics::relaxed);
  } else {
    status_.fetch_and(~task_bit, atomics::relaxed);
  }
  return any;
}

std::uint32_t signal_waker::park(bool* self_claimed) noexcept {
  std::uint32_t spurious = 0;
  if (self_claimed != nullptr) {
    *self_claimed = false;
  }
  park_backend& backend = *active_backend_.load(atomics::relaxed);
  for (;;) {
    const bool own_reason = backend.wait(latch_.word(), sleep_latch::sleeping);
    if (latch_.load() != sleep_latch::sleeping) {
      return spurious;
    }
    if (own_reason) {
      // The same claim a waker makes; whoever wins owes the bookkeeping.
      // wake_reason_ is only a statistic, so a losing waker's store is fine.
      if (latch_.claim_sleeper()) {
        wake_reason_.store(static_cast<std::uint32_t>(wake_reason::io), atomics::relaxed);
        if (self_claimed != nullptr) {
          *self_claimed = true;
        }
      }
      return spurious;
    }
    ++spurious;
  }
}

bool signal_waker::claim(wake_reason reason) noexcept {
  // seq_cst read: a waker that sees SLEEPY here (and so does not claim) is
  // ordered before the sleeper's seq_cst SLEEPY -> SLEEPING CAS, after
  // which the sleeper's seq_cst probe re-checks for the work it posted.
  if (latch_.word().load(atomics::seq_cst) != sleep_latch::sleeping) {
    return false;
  }
  wake_reason_.store(static_cast<std::uint32_t>(reason), atomics::relaxed);
  return latch_.claim_sleeper();
}

bool signal_waker::force_wake(wake_reason reason) noexcept {
  wake_reason_.store(static_cast<std::uint32_t>(reason), atomics::relaxed);
  const bool was_sleeping = latch_.set() == sleep_latch::sleeping;
  if (was_sleeping) {
    unpark();
  }
  return was_sleeping;
}

}  // namespace canopy::detail
