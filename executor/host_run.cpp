// The host role: a thread the executor does not own runs its tasks
// (executor::run_once, run_for, run_until_idle, run; docs/embedding.md).
//
// The host runs with a worker_state of its own (the last entry of
// workers_), so a task on the host spawns into the host's LIFO slot, which
// idle workers may steal, and its waits and wakes work as on a worker. Its
// queue of pinned tasks and its notify descriptor are the host_channel.
// Whenever the host stops running it hands what only it could see — its
// LIFO task, its yielded tasks — to the summary tree, so nothing waits for
// a host that may not come back soon.
#include <algorithm>
#include <chrono>
#include <system_error>
#include <thread>

#include "executor_core.hpp"
#include "join_state.hpp"

namespace canopy {

namespace {

// Restores the thread's worker context when the host stops running: the
// host thread may be a worker of another executor, running this one's
// tasks from inside its own task.
class host_binding {
 public:
  host_binding(worker_context* host, worker_context*& slot) noexcept
      : slot_(slot), previous_(slot) {
    slot_ = host;
  }
  ~host_binding() { slot_ = previous_; }
  host_binding(const host_binding&) = delete;
  host_binding& operator=(const host_binding&) = delete;

 private:
  worker_context*& slot_;
  worker_context* previous_;
};

}  // namespace

std::size_t executor_core::run_host(const host_budget& budget) {
  if (is_worker_thread()) {
    throw std::system_error(make_error_code(errc::worker_thread),
                            "canopy::executor: run_once/run_for/run_until_idle/run called from a "
                            "task of the same executor");
  }
  for (;;) {
    switch (take_host_role(host_holder::run_function)) {
      case host_role::shut_down:
        return 0;
      case host_role::held_by_run_function:
        throw std::system_error(make_error_code(errc::host_busy),
                                "canopy::executor: run_once/run_for/run_until_idle/run called "
                                "while another thread runs this executor as its host");
      case host_role::held_by_joiner:
        // A join() on another thread borrowed the role (run_host_until): it
        // runs what is ready and hands the role back when its task ends.
        if (!wait_for_joiner_to_leave(budget)) {
          return 0;
        }
        continue;
      case host_role::taken:
        return run_as_host(budget);
    }
  }
}

bool executor_core::wait_for_joiner_to_leave(const host_budget& budget) {
  if (!budget.wait_for_work) {
    return false;
  }
  const auto now = std::chrono::steady_clock::now();
  if (!budget.until_shutdown && now >= budget.deadline) {
    return false;
  }
  const auto left =
      budget.until_shutdown ? std::chrono::steady_clock::duration::max() : budget.deadline - now;
  std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(left, host_role_retry));
  return true;
}

host_drive executor_core::run_host_until(bool (*ready)(const void* context) noexcept,
                                         const void* context,
                                         std::int64_t steady_deadline_ns) noexcept {
  if (!host_runs_everything_ || is_worker_thread()) {
    return host_drive::not_needed;
  }
  switch (take_host_role(host_holder::joiner)) {
    case host_role::shut_down:
      return host_drive::not_needed;
    case host_role::held_by_run_function:
      return host_drive::held_by_host;
    case host_role::held_by_joiner:
      return host_drive::held_by_joiner;
    case host_role::taken:
      break;
  }
  host_budget budget;
  budget.wait_for_work = true;
  budget.ready = ready;
  budget.ready_context = context;
  if (steady_deadline_ns >= 0) {
    budget.deadline = std::chrono::steady_clock::time_point(
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::nanoseconds(steady_deadline_ns)));
  }
  run_as_host(budget);
  return host_drive::ran;
}

executor_core::host_role executor_core::take_host_role(host_holder as) noexcept {
  // seq_cst: pairs with shutdown step 1's store; after it, the run functions
  // return at once (shutdown holds the host role from step 2 on).
  if (!accepting_.load(sync::seq_cst)) {
    return host_role::shut_down;
  }
  auto holder = static_cast<std::uint8_t>(host_holder::none);
  // acquire: pairs with the previous holder's release in run_as_host, so
  // its writes to the host's worker_state and channel are visible.
  if (host_holder_.compare_exchange_strong(holder, static_cast<std::uint8_t>(as), sync::acquire,
                                           sync::relaxed)) {
    return host_role::taken;
  }
  if (!accepting_.load(sync::seq_cst) ||
      holder == static_cast<std::uint8_t>(host_holder::shutdown)) {
    return host_role::shut_down;
  }
  return holder == static_cast<std::uint8_t>(host_holder::joiner) ? host_role::held_by_joiner
                                                                  : host_role::held_by_run_function;
}

std::size_t executor_core::run_as_host(const host_budget& budget) noexcept {
  worker_state& host = host_state();
  std::size_t ran = 0;
  {
    const host_binding binding(&host.context, current_worker_slot());
    host_.disarm();
    // With owned workers the loop thread runs what is pinned to it and
    // leaves the pool's work to the pool — except in run(), where it joins
    // the pool as one more worker.
    ran = host_loop(host, budget, !host_runs_everything_ && !budget.until_shutdown);
    release_host_work(host);
  }
  // Leave either armed with nothing for the host to do, or with the
  // descriptor readable: a host loop that sleeps on it comes back.
  if (!host_.arm_and_recheck([this] { return host_has_work(); })) {
    host_.leave_readable();
  }
  // release: hands the host's state to the next holder (acquire in
  // take_host_role, or shutdown step 2).
  host_holder_.store(static_cast<std::uint8_t>(host_holder::none), sync::release);
  return ran;
}

std::size_t executor_core::host_loop(worker_state& host, const host_budget& budget,
                                     bool pinned_only) {
  std::size_t ran = 0;
  std::uint32_t slot = 0;
  while (ran < budget.max_tasks) {
    // relaxed: a hint to stop early; run_host re-reads it seq_cst on entry,
    // and the blocking path below re-checks after arming.
    if (budget.stop_at_shutdown && !accepting_.load(sync::relaxed)) {
      break;
    }
    if (budget.ready != nullptr && budget.ready(budget.ready_context)) {
      break;
    }
    if (find_host_task(host, slot, pinned_only)) {
      run_task(host, slot);
      ++ran;
      if (pinned_only) {
        hand_over_local_work(host);  // what the task spawned or yielded is the pool's
      }
      poll_driver_if_due(host);
      continue;
    }
    if (!budget.wait_for_work) {
      break;
    }
    const auto now = std::chrono::steady_clock::now();
    if (!budget.until_shutdown && now >= budget.deadline) {
      break;
    }
    // Nothing ready: sleep on the notify descriptor until work for the
    // host arrives (the handshake in host_channel.hpp), shutdown begins,
    // or the deadline passes.
    give_back_worker_slots(host);
    // seq_cst reads after arming: see the pinned queue, the tree (no owned
    // workers) and shutdown's accepting_ store, or their posters see the
    // channel armed and write the descriptor.
    if (host_.arm_and_recheck([this, &budget] {
          return host_has_work() || (budget.stop_at_shutdown && !accepting_.load(sync::seq_cst));
        })) {
      host_.wait_readable(budget.until_shutdown ? std::chrono::nanoseconds(-1)
                                                : std::chrono::nanoseconds(budget.deadline - now));
      host_.disarm();
    }
  }
  return ran;
}

bool executor_core::find_host_task(worker_state& host, std::uint32_t& slot, bool pinned_only) {
  if (const auto pinned = host_.pop()) {
    slot = *pinned;
    return true;
  }
  return !pinned_only && find_task(host, slot);
}

void executor_core::hand_over_local_work(worker_state& host) noexcept {
  if (const std::uint32_t lifo = host.lifo.take(); lifo != no_task) {
    signal_task(lifo);
  }
  while (const auto yielded = host.yields.pop()) {
    signal_task(*yielded);  // SCHEDULED already: from the yield queue to the tree (invariant S)
  }
  host.last_from_yield = false;
  host.lifo_streak = 0;
}

void executor_core::release_host_work(worker_state& host) noexcept {
  hand_over_local_work(host);
  give_back_worker_slots(host);
}

bool executor_core::host_has_work() const noexcept {
  return host_.has_queued() || (host_runs_everything_ && tree_.any_active());
}

void executor_core::drain_as_host() {
  worker_state& host = host_state();
  const host_binding binding(&host.context, current_worker_slot());
  host_.disarm();
  host_budget budget;
  budget.stop_at_shutdown = false;
  for (;;) {
    // With owned workers the pool drains itself: the host runs only what is
    // pinned to it. Without, it runs everything.
    host_loop(host, budget, !host_runs_everything_);
    release_host_work(host);
    if (host_runs_everything_) {
      if (!host_has_work()) {
        return;  // nothing runnable: what is left is suspended
      }
      continue;
    }
    std::unique_lock lock(drain_mutex_);
    // A pinned task pushed by a worker does not notify the cv: look again
    // after a short wait.
    if (drain_cv_.wait_for(lock, std::chrono::milliseconds(1),
                           [this] { return is_quiescent() && !host_.has_queued(); })) {
      return;
    }
  }
}

}  // namespace canopy
