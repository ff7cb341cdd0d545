// signal_waker — one per worker: its status bits, its partition summary and
// its one parking place.
//
// Status word (written only by the owning worker; read by anyone as a hint):
//   bit 0  yield_bit  the worker's local yield queue is non-empty
//   bit 1  task_bit   the last partition sync saw an active leaf
// Partition summary: one bit per leaf of the worker's partition (leaf at
// partition position p is bit p % 64 of word p / 64), refreshed from the
// tree's leaf words by sync_partition_summary() before the worker parks.
//
// Parking: the worker blocks on its sleep_latch word through a park_backend
// (the futex, or the poller backend for the one worker holding the poller
// role: use_backend()). A waker claims the latch (SLEEPING -> SET), records
// why it woke the worker, then calls unpark(); the claim is what makes
// exactly one waker responsible for each park. A poller backend that
// collected I/O readiness or reached a timer deadline makes the parked
// worker claim its own latch (wake_reason::io): then the worker, not a
// waker, owes the sleeper bookkeeping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "../summary_tree/summary_tree.hpp"
#include "../atomics/atomics.hpp"
#include "park_backend.hpp"
#include "sleep_latch.hpp"

namespace canopy::detail {

enum class wake_reason : std::uint32_t { none = 0, permit = 1, jec = 2, shutdown = 3, io = 4 };

class signal_waker {
 public:
  static constexpr std::uint64_t yield_bit = 1U << 0;
  static constexpr std::uint64_t task_bit = 1U << 1;

  // `max_partition_leaves`: the most leaves this worker's partition can hold.
  signal_waker(std::size_t max_partition_leaves, park_backend& backend);

  // ---- status bits (owner only) ----
  void mark_yield() noexcept { status_.fetch_or(yield_bit, atomics::relaxed); }
  void unmark_yield() noexcept { status_.fetch_and(~yield_bit, atomics::relaxed); }
  [[nodiscard]] std::uint64_t status() const noexcept { return status_.load(atomics::relaxed); }

  // Owner: re-sample the leaf words of this worker's partition into the
  // partition summary and the task bit. Returns whether any leaf is active.
  // Relaxed loads suffice: the result is a hint that only ever prevents a
  // park; the park itself is guarded by the seq_cst final check.
  bool sync_partition_summary(const summary_tree& tree, std::size_t worker,
                              std::size_t worker_count, std::size_t leaf_count) noexcept;

  [[nodiscard]] std::uint64_t partition_summary_word(std::size_t index) const noexcept {
    return partition_summary_[index].load(atomics::relaxed);
  }

  // ---- parking ----
  sleep_latch& latch() noexcept { return latch_; }

  // Owner, before its latch goes SLEEPY -> SLEEPING: which backend the next
  // park blocks on (null: the default one given at construction).
  void use_backend(park_backend* backend) noexcept {
    // relaxed: the owner's seq_cst fall_asleep() CAS follows, and a waker
    // reads this only after its claim CAS read SLEEPING from that CAS.
    active_backend_.store(backend == nullptr ? &backend_ : backend, atomics::relaxed);
  }
  // A hint for wakers choosing whom to wake: true while this worker's last
  // park went through a backend other than the default (the poller).
  [[nodiscard]] bool parks_on_other_backend() const noexcept {
    return active_backend_.load(atomics::relaxed) != &backend_;
  }

  // Owner: block until the latch leaves SLEEPING. Returns the number of
  // spurious returns from the backend (woken while still SLEEPING). If the
  // backend reported a reason of its own, the owner claims its latch itself
  // (SLEEPING -> SET, wake reason io) and sets *self_claimed: it then owes
  // the sleeper bookkeeping that a waker's claim would have done.
  std::uint32_t park(bool* self_claimed = nullptr) noexcept;

  // Waker: claim a parked worker (SLEEPING -> SET). On success the caller
  // owns the sleeper bookkeeping and must call unpark().
  [[nodiscard]] bool claim(wake_reason reason) noexcept;

  // Waker: wake the worker it claimed, or force-wake for shutdown.
  void unpark() noexcept { active_backend_.load(atomics::relaxed)->wake(latch_.word()); }
  // Any thread: set the latch whatever its state; unpark if it was parked.
  // Returns whether the worker was SLEEPING.
  bool force_wake(wake_reason reason) noexcept;

  // Owner, after park() returned: why it was woken (reset to none).
  wake_reason take_wake_reason() noexcept {
    return static_cast<wake_reason>(wake_reason_.exchange(0, atomics::relaxed));
  }

 private:
  alignas(atomics::cache_line) atomics::atomic<std::uint64_t> status_{0};
  alignas(atomics::cache_line) sleep_latch latch_;
  // Written by the claiming waker before its seq_cst claim; read by the owner
  // after observing the latch leave SLEEPING (acquire), so relaxed suffices.
  atomics::atomic<std::uint32_t> wake_reason_{0};
  park_backend& backend_;
  atomics::atomic<park_backend*> active_backend_;
  std::size_t summary_words_;
  std::unique_ptr<atomics::atomic<std::uint64_t>[]> partition_summary_;
};

}  // namespace canopy::detail
