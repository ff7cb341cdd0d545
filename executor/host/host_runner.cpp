// The host role (host_runner.hpp): taking and handing back the role, the
// host's run loop, and shutdown's drain on the host's behalf.
#include "host_runner.hpp"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <system_error>
#include <thread>

namespace canopy::detail {

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

host_runner::host_runner(executor_core& core, worker_state& state) noexcept
    : core_(core), state_(state), runs_everything_(core.config().worker_count == 0) {}

std::size_t host_runner::run(const host_budget& budget) {
  if (core_.is_worker_thread()) {
    throw std::system_error(make_error_code(errc::worker_thread),
                            "canopy::executor: run_once/run_for/run_until_idle/run called from a "
                            "task of the same executor");
  }
  for (;;) {
    switch (take_role(holder::run_function)) {
      case role::shut_down:
        // acquire: pairs with settle_after_shutdown's release; before it, a
        // joiner or shutdown's own drain may still sleep on the descriptor,
        // and reading it away could take the write meant to wake them.
        if (settled_.load(atomics::acquire)) {
          channel_.discard_readable();
        }
        return 0;
      case role::held_by_run_function:
        throw std::system_error(make_error_code(errc::host_busy),
                                "canopy::executor: run_once/run_for/run_until_idle/run called "
                                "while another thread runs this executor as its host");
      case role::held_by_joiner:
        // A join() on another thread borrowed the role (run_until): it
        // runs what is ready and hands the role back when its task ends.
        if (!wait_for_joiner_to_leave(budget)) {
          return 0;
        }
        continue;
      case role::taken:
        return run_as_host(budget);
    }
  }
}

bool host_runner::wait_for_joiner_to_leave(const host_budget& budget) {
  if (!budget.wait_for_work) {
    return false;
  }
  const auto now = std::chrono::steady_clock::now();
  if (!budget.until_shutdown && now >= budget.deadline) {
    return false;
  }
  const auto left =
      budget.until_shutdown ? std::chrono::steady_clock::duration::max() : budget.deadline - now;
  std::this_thread::sleep_for(
      std::min<std::chrono::steady_clock::duration>(left, executor_core::host_role_retry));
  return true;
}

host_drive host_runner::run_until(bool (*ready)(const void* context) noexcept, const void* context,
                                  std::int64_t steady_deadline_ns) noexcept {
  if (!runs_everything_ || core_.is_worker_thread()) {
    return host_drive::not_needed;
  }
  switch (take_role(holder::joiner)) {
    case role::shut_down:
      return host_drive::not_needed;
    case role::held_by_run_function:
      return host_drive::held_by_host;
    case role::held_by_joiner:
      return host_drive::held_by_joiner;
    case role::taken:
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

host_runner::role host_runner::take_role(holder as) noexcept {
  // seq_cst: pairs with shutdown step 1's store; after it, the run functions
  // return at once (shutdown holds the host role from step 2 on).
  if (!core_.accepting_.load(atomics::seq_cst)) {
    return role::shut_down;
  }
  auto current = static_cast<std::uint8_t>(holder::none);
  // acquire: pairs with the previous holder's release in run_as_host, so
  // its writes to the host's worker_state and channel are visible.
  if (holder_.compare_exchange_strong(current, static_cast<std::uint8_t>(as), atomics::acquire,
                                      atomics::relaxed)) {
    return role::taken;
  }
  if (!core_.accepting_.load(atomics::seq_cst) ||
      current == static_cast<std::uint8_t>(holder::shutdown)) {
    return role::shut_down;
  }
  return current == static_cast<std::uint8_t>(holder::joiner) ? role::held_by_joiner
                                                              : role::held_by_run_function;
}

std::size_t host_runner::run_as_host(const host_budget& budget) noexcept {
  std::size_t ran = 0;
  {
    const host_binding binding(&state_.context, current_worker_slot());
    channel_.disarm();
    // With owned workers the loop thread runs what is pinned to it and
    // leaves the pool's work to the pool — except in run(), where it joins
    // the pool as one more worker.
    ran = loop(budget, !runs_everything_ && !budget.until_shutdown);
    release_work();
  }
  // Leave either armed with nothing for the host to do, or with the
  // descriptor readable: a host loop that sleeps on it comes back.
  if (!channel_.arm_and_recheck([this] { return has_work(); })) {
    channel_.leave_readable();
  }
  // release: hands the host's state to the next holder (acquire in
  // take_role, or hold_for_shutdown).
  holder_.store(static_cast<std::uint8_t>(holder::none), atomics::release);
  return ran;
}

std::size_t host_runner::loop(const host_budget& budget, bool pinned_only) {
  // Locals: the compiler would reload a reference member after each call.
  executor_core& core = core_;
  worker_state& state = state_;
  std::size_t ran = 0;
  std::uint32_t slot = 0;
  while (ran < budget.max_tasks) {
    // relaxed: a hint to stop early; run() re-reads it seq_cst on entry,
    // and the blocking path below re-checks after arming.
    if (budget.stop_at_shutdown && !core.accepting_.load(atomics::relaxed)) {
      break;
    }
    if (budget.ready != nullptr && budget.ready(budget.ready_context)) {
      break;
    }
    if (find_task(slot, pinned_only)) {
      core.run_task(state, slot);
      ++ran;
      if (pinned_only) {
        hand_over_local_work();  // what the task spawned or yielded is the pool's
      }
      core.poll_driver_if_due(state);
      // A bounded run (run_for, run_until, a joiner's wait_for) ends at its
      // deadline even while tasks stay ready (a task that yields is ready
      // again at once): checked after each task, so that a run whose
      // deadline has passed still makes one. Unbounded runs skip the clock.
      if (budget.deadline != std::chrono::steady_clock::time_point::max() &&
          !budget.until_shutdown && std::chrono::steady_clock::now() >= budget.deadline) {
        break;
      }
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
    core.give_back_worker_slots(state);
    // seq_cst reads after arming: see the pinned queue, the tree (no owned
    // workers) and shutdown's accepting_ store, or their posters see the
    // channel armed and write the descriptor.
    if (channel_.arm_and_recheck([this, &budget] {
          return has_work() ||
                 (budget.stop_at_shutdown && !core_.accepting_.load(atomics::seq_cst));
        })) {
      channel_.wait_readable(budget.until_shutdown
                                 ? std::chrono::nanoseconds(-1)
                                 : std::chrono::nanoseconds(budget.deadline - now));
      channel_.disarm();
    }
  }
  return ran;
}

bool host_runner::find_task(std::uint32_t& slot, bool pinned_only) {
  if (const auto pinned = channel_.pop()) {
    slot = *pinned;
    return true;
  }
  return !pinned_only && core_.find_task(state_, slot);
}

void host_runner::hand_over_local_work() noexcept {
  // Locals: the compiler would reload a reference member after each call.
  executor_core& core = core_;
  worker_state& state = state_;
  if (const std::uint32_t lifo = state.lifo.take(); lifo != executor_core::no_task) {
    core.signal_task(lifo);
  }
  core.publish_yielded(state);  // the worker loop's own step (yield queue to tree)
  state.lifo_streak = 0;
}

void host_runner::release_work() noexcept {
  hand_over_local_work();
  core_.give_back_worker_slots(state_);
}

bool host_runner::has_work() const noexcept {
  return channel_.has_queued() || (runs_everything_ && core_.tree_.any_active());
}

void host_runner::hold_for_shutdown() noexcept {
  for (auto current = static_cast<std::uint8_t>(holder::none);
       // acquire: pairs with the last holder's release in run_as_host.
       !holder_.compare_exchange_weak(current, static_cast<std::uint8_t>(holder::shutdown),
                                      atomics::acquire, atomics::relaxed);
       current = static_cast<std::uint8_t>(holder::none)) {
    atomics::yield_thread();
  }
}

void host_runner::settle_after_shutdown() noexcept {
  channel_.discard_readable();
  // release: pairs with run()'s acquire load; the shutdown is done with the
  // channel, and only then may run functions read the descriptor.
  settled_.store(true, atomics::release);
}

void host_runner::drain() {
  const host_binding binding(&state_.context, current_worker_slot());
  channel_.disarm();
  host_budget budget;
  budget.stop_at_shutdown = false;
  for (;;) {
    // With owned workers the pool drains itself: the host runs only what is
    // pinned to it. Without, it runs everything.
    loop(budget, !runs_everything_);
    release_work();
    if (runs_everything_) {
      if (!has_work()) {
        return;  // nothing runnable: what is left is suspended
      }
      continue;
    }
    std::unique_lock lock(core_.drain_mutex_);
    // A pinned task pushed by a worker does not notify the cv: look again
    // after a short wait.
    if (core_.drain_cv_.wait_for(lock, std::chrono::milliseconds(1), [this] {
          return core_.is_quiescent() && !channel_.has_queued();
        })) {
      return;
    }
  }
}

}  // namespace canopy::detail
