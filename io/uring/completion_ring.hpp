// completion_ring — the io_uring instance behind the reactor's io_uring
// backend (io/reactor.hpp): one ring per reactor, shared by every worker.
// Internal (canopy::io::detail); the reactor is its only user.
//
// Submission (any thread). queue() fills one SQE under the submission lock
// and leaves it in the submission queue; nothing enters the kernel. Queued
// entries go to the kernel in one io_uring_enter when someone calls
// submit() — a worker when it runs out of work or at its driver-poll
// interval, the poller as part of its blocking wait (wait()) — so the
// sends and receives of many tasks cost one system call. A thread that is
// not a worker submits at once (io/uring/completion_op.hpp).
//
// Two threads may enter at once: each publishes the queue tail under the
// lock (flush) and then enters without it, passing how many entries were
// unconsumed when it flushed; the kernel consumes entries in order under
// its own lock, so every published entry is submitted by one of them.
//
// Completion (the poller only: the idle driver's role, executor/
// idle_driver.hpp). reap() reads the completion queue from shared memory
// (no system call); wait() submits and blocks for at least one completion
// or the timeout in one io_uring_enter (IORING_ENTER_EXT_ARG).
//
// Cancellation (any thread): cancel() below; when it returns, the kernel
// has finished with the request, so memory it pointed at may be released.
//
// Threads. Only the executor's workers enter the kernel with submissions
// (submit(), wait()). The kernel completes a request through task work on
// the thread that submitted it, and when the ring closes it signals every
// thread that ever submitted to it (TWA_SIGNAL): a thread of the program
// would see its blocking calls with a timeout fail with EINTR. A worker is
// ours to interrupt. (A full queue is the exception: queue() submits it.)
// The ring asks for cooperative task work (IORING_SETUP_COOP_TASKRUN,
// open()): a running submitter runs it at its next kernel entry or tick
// instead of being interrupted; docs/io.md says what that costs.
//
// Not installed. In a build without io_uring (CANOPY_IO_URING 0) the
// class is an empty stand-in: no uring_backend is ever made there
// (io/uring/without_uring.cpp), so none is opened.
#pragma once

#ifndef CANOPY_IO_URING
#error "CANOPY_IO_URING is not defined (it comes with the canopy_io dependency)"
#endif

#include <cstdint>

#if CANOPY_IO_URING
#include <liburing.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>

#include "../../atomics/atomics.hpp"
#endif

namespace canopy::io::detail {

#if CANOPY_IO_URING
class completion_ring {
 public:
  // A ring of `entries` submission slots, or null with `why` saying what
  // the kernel refused (io_uring_setup failed: EPERM under a seccomp
  // profile, ENOSYS, io_uring_disabled; or a feature the backend needs is
  // missing: IORING_FEAT_EXT_ARG, IORING_FEAT_NODROP, synchronous cancel).
  static std::unique_ptr<completion_ring> open(unsigned entries, std::error_code& error,
                                               std::string& why) noexcept;
  ~completion_ring();
  completion_ring(const completion_ring&) = delete;
  completion_ring& operator=(const completion_ring&) = delete;

  // ---- submission (any thread) ----
  // Fill one SQE with prepare(sqe) under the submission lock. A full queue
  // is submitted first. Returns false only if the kernel refused that
  // submission (the request was not queued; `error` says why).
  template <class Prepare>
  bool queue(Prepare&& prepare, std::error_code& error, unsigned* position = nullptr) noexcept {
    const std::lock_guard guard(submit_lock_);
    io_uring_sqe* entry = io_uring_get_sqe(&ring_);
    if (entry == nullptr) {
      const int submitted = io_uring_submit(&ring_);
      entry = io_uring_get_sqe(&ring_);
      if (entry == nullptr) {
        error = std::error_code(submitted < 0 ? -submitted : EBUSY, std::system_category());
        return false;
      }
    }
    if (position != nullptr) {
      *position = ring_.sq.sqe_tail - 1;
    }
    prepare(entry);
    unsubmitted_.store(unsubmitted_.load(canopy::detail::atomics::relaxed) + 1,
                       canopy::detail::atomics::relaxed);
    return true;
  }
  // Whether entries wait in the submission queue (a hint: relaxed; a
  // worker that misses one submits it at its next poll or park).
  [[nodiscard]] bool has_unsubmitted() const noexcept {
    return unsubmitted_.load(canopy::detail::atomics::relaxed) != 0;
  }
  // Enter the kernel with what is queued (no wait). Returns entries submitted.
  unsigned submit() noexcept;

  // ---- completion (poller only) ----
  // Submit what is queued and block until a completion arrives or until
  // `deadline` (none: no limit), or EINTR. The caller looks at the queue
  // under its own reaping lock.
  void wait(std::optional<std::chrono::steady_clock::time_point> deadline) noexcept;
  // Call on_completion(user_data, res, flags) for each completion in the
  // queue, at most `limit`, and mark them seen. Returns how many.
  template <class OnCompletion>
  unsigned reap(unsigned limit, OnCompletion&& on_completion) noexcept {
    unsigned count = 0;
    unsigned head = 0;
    io_uring_cqe* entry = nullptr;
    io_uring_for_each_cqe(&ring_, head, entry) {
      if (count == limit) {
        break;
      }
      on_completion(entry->user_data, entry->res, entry->flags);
      ++count;
    }
    io_uring_cq_advance(&ring_, count);
    return count;
  }
  [[nodiscard]] bool has_completions() noexcept { return io_uring_cq_ready(&ring_) != 0; }
  // The completion queue's indexes in the memory shared with the kernel
  // (the kernel advances the tail, reap() the head), for a hint read
  // without the reaping lock (ext::idle_driver::completions_may_be_waiting).
  [[nodiscard]] const std::uint32_t* completion_head() const noexcept { return ring_.cq.khead; }
  [[nodiscard]] const std::uint32_t* completion_tail() const noexcept { return ring_.cq.ktail; }

  // ---- cancellation (any thread) ----
  // Make sure the kernel is done with the request carrying `user_data`,
  // queued at `position` (queue()'s). Still in the user-space queue: it
  // becomes a no-op whose completion carries user_data 0, and the kernel
  // never sees the request (returns true: no completion of it will come).
  // Handed to the kernel: once the kernel has taken it from the queue, it
  // is cancelled with IORING_REGISTER_SYNC_CANCEL, which returns when the
  // kernel has finished with it (returns false: its completion comes).
  // Never enters with submissions: see the thread rule above.
  bool cancel(std::uint64_t user_data, unsigned position) noexcept;
  // Cancel every request in the kernel at once (the executor's workers are
  // gone), returning when the kernel is done with all of them.
  void cancel_all() noexcept;

  [[nodiscard]] std::uint64_t enters() const noexcept {
    return enters_.load(canopy::detail::atomics::relaxed);
  }

 private:
  completion_ring() = default;
  // Publish the queued entries to the kernel (the submission lock held);
  // returns how many the kernel has not consumed yet.
  unsigned publish_locked() noexcept;

  io_uring ring_{};
  bool initialised_ = false;
  std::mutex submit_lock_;  // guards the submission queue's user-space side
  canopy::detail::atomics::atomic<std::uint32_t> unsubmitted_{0};
  canopy::detail::atomics::atomic<std::uint64_t> enters_{0};
};
#else
class completion_ring {
 public:
  completion_ring() = delete;
  [[nodiscard]] std::uint64_t enters() const noexcept { return 0; }
};
#endif

}  // namespace canopy::io::detail
