// host_runner — the host role: a thread the executor does not own (a
// server's event loop, a GUI thread, main()) runs the executor's tasks
// (executor::run_once, run_for, run_until_idle, run; docs/embedding.md,
// docs/architecture.md "The host thread").
//
// One per executor_core, which owns it. It holds what the role needs:
//   * who holds the role (holder_): a run function, a joiner that borrowed
//     it (run_until), or shutdown from its step 2 on;
//   * the host's worker_state — the last entry of the core's workers, so
//     that idle workers steal its LIFO task as any worker's, and a task on
//     the host spawns, waits and wakes as on a worker;
//   * the host channel (host_channel.hpp): the queue of tasks pinned to the
//     host and the notify descriptor behind executor::notify_fd().
// The core reaches it through three things only: channel() on the spawn
// and wake paths (push a pinned task, notify after a task bit), and
// hold_for_shutdown()/drain() in shutdown's step 2.
//
// Whenever the host stops running it hands what only it could see — its
// LIFO task, its yielded tasks — to the summary tree, so nothing waits for
// a host that may not come back soon.
//
// Threads: run() and run_until() from any thread that is not running a task
// of this executor (one holder at a time, the others are told why);
// notify_fd() and channel()'s push/notify from any thread; the rest only by
// the core's shutdown.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "../../atomics/atomics.hpp"
#include "../executor_core.hpp"
#include "host_budget.hpp"
#include "host_channel.hpp"

namespace canopy::detail {

class host_runner {
 public:
  using worker_state = executor_core::worker_state;

  // `state` is the host's worker_state, owned by `core` (the last of its
  // workers); both outlive this object.
  host_runner(executor_core& core, worker_state& state) noexcept;
  host_runner(const host_runner&) = delete;
  host_runner& operator=(const host_runner&) = delete;

  // The calling thread takes the host role and runs tasks within `budget`
  // (executor.hpp's run_once/run_for/run_until_idle/run document each);
  // returns how many task runs it made. Throws std::system_error with
  // errc::worker_thread from a task of this executor and errc::host_busy
  // while another thread's run function holds the role; returns 0 once
  // shutdown began. While a joiner holds it (run_until), run_once and
  // run_until_idle return 0 (the joiner runs what is ready) and the waiting
  // run functions wait, within their budget, for it to hand the role back.
  std::size_t run(const host_budget& budget);
  // A joiner on a thread that is not one of the workers
  // (executor_core::run_host_until documents it).
  host_drive run_until(bool (*ready)(const void* context) noexcept, const void* context,
                       std::int64_t steady_deadline_ns) noexcept;
  // Readable while the host has work (host_channel.hpp). Any thread.
  [[nodiscard]] int notify_fd() const noexcept { return channel_.fd(); }

  // For the core's spawn and wake paths: push() a pinned task, notify()
  // after a task bit when the host runs everything; clear() at shutdown.
  [[nodiscard]] host_channel& channel() noexcept { return channel_; }
  // Shutdown step 2: take the role for good, waiting for a holder to leave.
  void hold_for_shutdown() noexcept;
  // Shutdown step 2, drain policy, with the role held: run the pinned tasks
  // (and, with no owned workers, every task) until nothing is runnable.
  void drain();
  // Shutdown's last step: no work for the host is left, so the descriptor
  // must not stay readable (a host loop polling it would spin, its run
  // functions returning 0 for good); from now on a run function that finds
  // it readable (a late write) reads it away too.
  void settle_after_shutdown() noexcept;

 private:
  // Who holds the host role (holder_).
  enum class holder : std::uint8_t { none, run_function, joiner, shutdown };
  enum class role { taken, held_by_run_function, held_by_joiner, shut_down };
  role take_role(holder as) noexcept;
  // A run function that found the role held by a joiner: false if its budget
  // does not wait (run_once, run_until_idle) or its deadline passed, else
  // true after a short sleep (executor_core::host_role_retry), to try again.
  static bool wait_for_joiner_to_leave(const host_budget& budget);
  // With the role taken: run within `budget`, then hand the role back.
  std::size_t run_as_host(const host_budget& budget) noexcept;
  // Runs tasks as the host until the budget ends or nothing is ready.
  std::size_t loop(const host_budget& budget, bool pinned_only);
  // A pinned task, else (unless pinned_only) what the core's find_task finds.
  bool find_task(std::uint32_t& slot, bool pinned_only);
  // Hand the host's LIFO task and yielded tasks to the tree (and wake a
  // worker for them); release_work also returns its spawn slots: done
  // whenever the host stops running.
  void hand_over_local_work() noexcept;
  void release_work() noexcept;
  // Work the host must come back for: a pinned task, or with no owned
  // workers any ready task (seq_cst reads: the re-check after arming).
  [[nodiscard]] bool has_work() const noexcept;

  executor_core& core_;
  worker_state& state_;
  // No owned workers: the host runs every task.
  const bool runs_everything_;
  host_channel channel_;
  // Who holds the role: a thread in run() or run_until(), or shutdown from
  // step 2 on (a holder). acquire/release: hands state_ and channel_'s
  // host-only members from one holder to the next.
  atomics::atomic<std::uint8_t> holder_{0};
  // Set by settle_after_shutdown: nobody waits on the descriptor any more
  // (a joiner's or shutdown's own wait), so reading it loses no wake.
  atomics::atomic<bool> settled_{false};
};

}  // namespace canopy::detail
