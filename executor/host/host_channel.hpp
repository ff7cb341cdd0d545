// host_channel — how tasks reach the host thread, and how a host that is
// not running learns that they did (docs/embedding.md, docs/architecture.md
// "The host thread").
//
// The host is a thread the executor does not own — a server's event loop, a
// GUI thread, main() — that runs tasks when it calls executor::run_once(),
// run_for(), run_until_idle() or run(). Two things wait for it:
//   * pinned tasks: a task that must continue on the host (resume_on_host(),
//     executor::post()) sits in this channel's queue, SCHEDULED, until the
//     host runs it. Only the host pops them; nobody steals them.
//   * with no owned workers, every ready task: the executor tells the
//     channel after it sets a task bit in the summary tree.
// The notify descriptor (an eventfd) turns "the host has work" into
// readability, so a host loop sleeps in its own epoll/poll.
//
// The no-lost-wakeup handshake (a Dekker pair, both sides seq_cst):
//   poster: make the work visible (queue push, or the task bit's seq_cst
//           RMW); then notify(): if `armed_`, exchange it to false and, if
//           that exchange won, write the eventfd once.
//   host:   before it stops running: arm_and_recheck(): store
//           `armed_ = true`, then look for work once more (has_queued(),
//           the tree). Work found: disarm and keep running (or leave the
//           descriptor readable).
// Either the poster's load sees armed_ == true (it writes), or the host's
// re-check sees the work. A won exchange always writes exactly once; the host
// counts the writes it expects (a poster's win is seen as `armed_` already
// false when it disarms) so that it reads the eventfd only while a count is
// there or on its way, and never leaves it readable for nothing.
//
// Threads: push(), notify(), has_queued() and fd() from any thread; every
// other member only by the thread holding the executor's host role (one at a
// time; the role's hand-over is an acquire/release pair in host_runner).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>

#include "../../atomics/atomics.hpp"
#include "notify_descriptor.hpp"

namespace canopy::detail {

class host_channel {
 public:
  // Creates the eventfd; throws std::system_error if the kernel refuses.
  host_channel() = default;

  // The descriptor a host loop polls for readability. Owned by the channel.
  [[nodiscard]] int fd() const noexcept { return descriptor_.fd(); }

  // Any thread: queue a SCHEDULED task for the host, then notify().
  void push(std::uint32_t slot);
  // Any thread: whether a pinned task waits (seq_cst: the host's re-check
  // after arm(), paired with push's seq_cst increment).
  [[nodiscard]] bool has_queued() const noexcept { return queued_.load(atomics::seq_cst) != 0; }
  // Any thread: new work is visible; make the descriptor readable if the
  // host is armed.
  void notify() noexcept;

  // Host: the next pinned task, if any.
  std::optional<std::uint32_t> pop();
  // Host: every queued slot, for shutdown (the tasks are destroyed there).
  void clear() noexcept;
  // After shutdown, when nobody waits on the descriptor any more: read away
  // whatever was written, so that it is not readable (any thread).
  void discard_readable() noexcept { static_cast<void>(descriptor_.take()); }

  // Host: about to stop running. Reads away counts already written, arms,
  // then calls `has_work()` (whose reads must be seq_cst: they are the
  // second half of the Dekker pair). Returns true when the host may block
  // (armed, nothing found); false when work was found (then disarmed).
  template <class HasWork>
  bool arm_and_recheck(HasWork&& has_work) noexcept {
    arm();
    if (has_work()) {
      disarm();
      return false;
    }
    return true;
  }
  // Host: running again (or staying awake after a re-check found work).
  void disarm() noexcept;
  // Host, disarmed: leave the descriptor readable (work is left that the
  // host loop should come back for). At most one write in flight.
  void leave_readable() noexcept;
  // Host, armed: block in ppoll() until the descriptor is readable or
  // `timeout` passes (negative: no limit). Returns at once if readable.
  void wait_readable(std::chrono::nanoseconds timeout) noexcept;

#ifdef CANOPY_MODEL_CHECK
  // For the model check's verdict: the descriptor is readable although the
  // host neither expects a write nor will count one at its next disarm() (a
  // poster took the armed flag) — it would stay readable for good, and a
  // host loop polling it would spin.
  [[nodiscard]] bool readable_for_nothing() const noexcept {
    const bool poster_took_the_flag = host_armed_ && !armed_.peek();
    return descriptor_.peek_count() != 0 && expected_writes_ == 0 && !poster_took_the_flag;
  }
  void wake_for_teardown() noexcept { descriptor_.wake_for_teardown(); }
#endif

 private:
  void arm() noexcept;
  void read_counts() noexcept;

  notify_descriptor descriptor_;
  // True while the host is not running and wants a write when work appears.
  alignas(atomics::cache_line) atomics::atomic<bool> armed_{true};
  // Pinned tasks waiting for the host, and their number (read without the lock).
  alignas(atomics::cache_line) atomics::atomic<std::size_t> queued_{0};
  std::mutex queue_mutex_;
  std::deque<std::uint32_t> queue_;
  // Host only: whether this host armed the channel last, and how many
  // writes to the eventfd it has not read yet (its own, and posters' that
  // won the exchange).
  bool host_armed_ = true;
  std::uint64_t expected_writes_ = 0;
};

}  // namespace canopy::detail
