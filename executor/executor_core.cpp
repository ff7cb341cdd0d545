// executor_core's life: construction (the workers' states and threads),
// destruction, shutdown (its numbered steps), leftover tasks, statistics
// and detached exceptions. The other parts of the class: spawn_path.cpp
// (spawning, slot allocation, scheduling), worker_loop.cpp (the worker
// loop, work search, task runs, the sleep probe), run_at_join.cpp (running
// or adopting a pending task at its join, and fork-join's services).
#include "executor_core.hpp"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <system_error>
#include <utility>

#include "../summary_tree/partition.hpp"
#include "core_inline.hpp"
#include "cpu_pinning.hpp"
#include "drain_check.hpp"
#include "driver_park_backend.hpp"
#include "host/host_runner.hpp"

namespace canopy::detail {

constinit thread_local worker_context* this_thread_worker = nullptr;

namespace {

executor_config validated(executor_config config) {
  config.validate();
  if (config.initial_leaves == 0) {
    config.initial_leaves = std::max<std::size_t>(config.worker_count, 1);
  }
  return config;
}

}  // namespace

worker_context* current_worker() noexcept { return this_thread_worker; }

worker_context*& current_worker_slot() noexcept { return this_thread_worker; }

executor_core::executor_core(executor_config config)
    : config_(validated(std::move(config))),
      partitions_(std::max<std::size_t>(config_.worker_count, 1)),
      host_runs_everything_(config_.worker_count == 0),
      tree_(config_.max_leaves, config_.signals_per_leaf),
      arena_(config_.signals_per_leaf, config_.initial_leaves, config_.max_leaves, partitions_),
      sleep_(config_.worker_count, (config_.max_leaves + partitions_ - 1) / partitions_,
             config_.idle_yield_rounds, tree_.permits()),
      external_caches_(std::make_unique<external_spawn_cache[]>(external_cache_count)) {
  for (std::size_t index = 0; index < external_cache_count; ++index) {
    external_caches_[index].next_partition = index % partitions_;
  }
  if (config_.driver != nullptr) {
    poller_backend_ = std::make_unique<driver_park_backend>(*config_.driver);
    sleep_.set_poller_backend(poller_backend_.get());
  }
  // The owned workers, then the host role's state. With owned workers the
  // host owns no partition (it steals); without, it owns the only one.
  const std::size_t workers = config_.worker_count;
  workers_.reserve(workers + 1);
  for (std::size_t index = 0; index <= workers; ++index) {
    auto state = std::make_unique<worker_state>(tree_.root_word_count());
    state->context.core = this;
    state->context.index = index;
    state->is_host = index == workers;
    state->joins.attach(*this, index);
    state->context.joins = &state->joins;
    for (std::size_t leaf = 0; leaf < config_.max_leaves; ++leaf) {
      if (partition_owner(leaf, partitions_) == index) {
        state->own_mask[leaf / 64] |= std::uint64_t{1} << (leaf % 64);
      }
    }
    state->random = 0x9E3779B97F4A7C15ULL * (index + 1);
    workers_.push_back(std::move(state));
  }
  host_ = std::make_unique<host_runner>(*this, *workers_[workers]);
  // Tracing (executor/trace.hpp): on only if configured; then every worker
  // records into its own buffer and posters report the wakes they deliver.
  trace_ = trace_recorder::from_config(config_);
  if (trace_ != nullptr && config_.driver != nullptr) {
    trace_->set_driver_name(config_.driver->name());
  }
  if (trace_ != nullptr) {
    for (std::size_t index = 0; index < workers; ++index) {
      workers_[index]->trace = &trace_->worker(index);
    }
    sleep_.set_wake_observer(trace_.get());
  }
  worker_cpus_ = plan_worker_cpus(config_);  // throws before any thread exists
  if (config_.driver != nullptr) {
    config_.driver->bind(*this);
  }
  try {
    for (std::size_t index = 0; index < workers; ++index) {
      workers_[index]->thread = std::thread([this, index] { worker_main(index); });
    }
  } catch (...) {
    stopping_.store(true, atomics::seq_cst);
    sleep_.wake_all_for_shutdown();
    for (auto& worker : workers_) {
      if (worker->thread.joinable()) {
        worker->thread.join();
      }
    }
    if (config_.driver != nullptr) {
      config_.driver->unbind(*this);
    }
    throw;
  }
}

executor_core::~executor_core() {
  if (is_worker_thread()) {
    std::fputs("canopy: an executor was destroyed from one of its own worker threads\n", stderr);
    std::terminate();
  }
  shutdown();
  // 7. (After shutdown, before the memory goes.) Wait for wakes from
  //    threads that are not this executor's (schedule_from_outside): one
  //    may still be in the tail of signal_task after the task it woke ran
  //    to its end and its joiner moved on to destroy the executor.
  //    acquire: pairs with each such wake's release decrement, so all its
  //    accesses to this executor happen before the members are destroyed.
  while (foreign_wakes_.load(atomics::acquire) != 0) {
    atomics::yield_thread();
  }
}

bool scheduler::is_worker_thread() const noexcept {
  return this_thread_worker != nullptr && this_thread_worker->core == this;
}

host_drive executor_core::run_host_until(bool (*ready)(const void* context) noexcept,
                                         const void* context,
                                         std::int64_t steady_deadline_ns) noexcept {
  return host_->run_until(ready, context, steady_deadline_ns);
}

void executor_core::shutdown() {
  if (is_worker_thread()) {
    throw std::system_error(make_error_code(errc::worker_thread),
                            "canopy::executor::shutdown() called from one of its worker threads");
  }
  std::call_once(shutdown_once_, [this] {
    // 1. Refuse new external spawns; release spawners blocked at capacity
    //    (they get errc::shut_down); wait for spawns already past the check.
    //    The release comes first: a blocked spawner is itself in flight,
    //    and leaves only when notified. One that blocks after the notify
    //    reads accepting_ == false under capacity_mutex_ and never waits.
    //    A host thread in run() is woken: every run function returns once
    //    it sees accepting_ == false.
    //    First the shared flag: work handed to other threads that has not
    //    started must not start now (a queued blocking call). Relaxed: it
    //    publishes nothing, and what needs it is ordered after it by other
    //    means: it is sequenced before step 5, which destroys the tasks and
    //    so requests stop on their running blocking calls, so a pool thread
    //    freed by such a request (a release/acquire pair on the stop state)
    //    reads true; and before the accepting_ store, so whoever sees a
    //    spawn refused sees it too. A read that misses it is earlier than
    //    the shutdown in the flag's order (the call started first).
    shutdown_flag_->begun.store(true, atomics::relaxed);
    accepting_.store(false, atomics::seq_cst);
    {
      const std::lock_guard lock(capacity_mutex_);
      ++capacity_epoch_;
      capacity_cv_.notify_all();
    }
    host_->channel().notify();
    while (in_flight_.load(atomics::acquire) != 0) {
      atomics::yield_thread();
    }
    // 2. Take the host role for good (wait for a host thread to return).
    //    Drain policy: run the host's pinned tasks here — and, with no owned
    //    workers, every task — until every worker is parked with nothing
    //    runnable and no pinned task waits.
    host_->hold_for_shutdown();
    if (config_.on_shutdown == shutdown_policy::drain) {
      draining_.store(true, atomics::seq_cst);
      host_->drain();
    }
    // 3. Stop: workers leave their loops after the current task.
    stopping_.store(true, atomics::seq_cst);
    sleep_.wake_all_for_shutdown();
    // 4. Join every worker.
    for (auto& worker : workers_) {
      if (worker->thread.joinable()) {
        worker->thread.join();
      }
    }
    // The workers are joined: nothing records any more. Write the trace.
    if (trace_ != nullptr) {
      std::string message;
      if (trace_->write_files(message)) {
        std::fprintf(stderr, "%s\n", message.c_str());
      }
    }
    // 5. Destroy every task still alive (suspended, or pending under
    //    cancel_pending, or pinned for a host that never ran it): its
    //    destructor runs, its join handle says cancelled. A task that
    //    cancels another while it is destroyed (a group's children, the
    //    child it awaits) destroys that one at once (wake_cancelled), so
    //    what a task owns goes before its frame. The driver ends its
    //    requests in flight first (idle_driver::workers_stopped).
    if (config_.driver != nullptr) {
      config_.driver->workers_stopped();
    }
    host_->channel().clear();
    destroy_leftovers();
    // 6. Release the driver's services (the reactor's timers): no task is
    //    left to use them.
    if (config_.driver != nullptr) {
      config_.driver->unbind(*this);
    }
    // 7. The host has no work left: the notify descriptor, made readable
    //    by step 1 or by a spawn no host ran, must not stay so (a loop
    //    polling it would spin while every run function returns 0).
    host_->settle_after_shutdown();
  });
}

namespace {
// The executor whose leftover tasks this thread is destroying (shutdown's
// step 5), or null: wake_cancelled destroys at once only there.
thread_local executor_core* destroying_leftovers_of = nullptr;
}  // namespace

void executor_core::destroy_leftovers() {
  destroying_leftovers_of = this;
  arena_.for_each_live([this](std::uint32_t slot) { destroy_leftover(slot); });
  destroying_leftovers_of = nullptr;
}

void executor_core::destroy_leftover(std::uint32_t slot) noexcept {
  task_slot& target = arena_.slot(slot);
  // Taken before the destroy runs: a cancel of this task from inside its
  // own destruction (wake_cancelled) finds it gone, as does the iteration
  // when it reaches a slot a nested cancel destroyed first.
  const task_vtable* const vtable = std::exchange(target.vtable, nullptr);
  if (vtable == nullptr) {
    return;
  }
  const std::uint32_t generation = task_slot::generation_of(target.state.load(atomics::relaxed));
  target.state.store(task_slot::make_state(generation + 1, 0), atomics::release);
  vtable->destroy(target.storage, task_end::dropped);
  arena_.release(slot);
  dropped_tasks_.fetch_add(1, atomics::relaxed);
}

// The face's cancel entries (scheduler.hpp) are the core's own code:
// `core` is this object.
void scheduler::wake_cancelled(task_id id) noexcept {
  executor_core& core = as_core(*this);
  if (destroying_leftovers_of != &core) [[likely]] {
    schedule(id);
    return;
  }
  // The workers are joined and this thread alone touches the slots: a
  // relaxed read of the generation is enough to tell a live task from a
  // stale id.
  task_slot& target = core.arena_.slot(id.slot);
  if (target.vtable != nullptr &&
      task_slot::generation_of(target.state.load(atomics::relaxed)) == id.generation) {
    core.destroy_leftover(id.slot);
  }
}

const join_state_base* scheduler::running_cancel_state(
    const worker_context& worker) const noexcept {
  if (!worker.has_running) {
    return nullptr;
  }
  // The running task's own thread: its slot's vtable and body are stable
  // while it runs.
  const task_slot& target = as_core(*this).arena_.slot(worker.running.slot);
  const task_vtable* const kind = target.vtable;
  if (kind == nullptr || kind->cancel_state == nullptr) {
    return nullptr;
  }
  return kind->cancel_state(target.storage);
}

bool executor_core::is_quiescent() noexcept {
  std::vector<std::uint64_t> epochs(config_.worker_count);
  return pool_is_quiescent(sleep_, tree_, epochs);
}

executor_stats executor_core::stats() const {
  executor_stats result;
  result.workers.reserve(config_.worker_count);
  for (std::size_t index = 0; index < config_.worker_count; ++index) {
    result.workers.push_back(workers_[index]->counters.snapshot());
  }
  result.host = workers_[config_.worker_count]->counters.snapshot();
  result.dropped_tasks = dropped_tasks_.load(atomics::relaxed);
  // Ended counts (in the snapshot above) are read before spawned counts: a
  // task counted as ended was spawned before, so the difference is never
  // negative in a quiet moment; while tasks run it is clamped at 0.
  std::uint64_t ended = result.dropped_tasks + result.host.finished;
  for (const worker_stats& one : result.workers) {
    ended += one.finished;
  }
  std::uint64_t started = external_spawns_.load(atomics::relaxed);
  for (const auto& worker : workers_) {
    started += worker->counters.spawned.load(atomics::relaxed);
  }
  result.live_tasks = started > ended ? started - ended : 0;
  result.capacity = capacity();
  result.sleeping_workers = sleep_.counters().sleeping();
  return result;
}

void executor_core::report_detached_exception(const std::exception_ptr& error) const noexcept {
  if (config_.on_detached_exception) {
    try {
      config_.on_detached_exception(error);
      return;
    } catch (...) {
      std::fputs("canopy: on_detached_exception handler threw; exception lost\n", stderr);
      return;
    }
  }
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& failure) {
    std::fprintf(stderr, "canopy: a detached task threw: %s\n", failure.what());
  } catch (...) {
    std::fputs("canopy: a detached task threw a non-std::exception\n", stderr);
  }
}

}  // namespace canopy::detail
