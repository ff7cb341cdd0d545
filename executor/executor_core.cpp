#include "executor_core.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <system_error>

#include "../embed/host_runner.hpp"
#include "../summary_tree/partition.hpp"
#include "cpu_pinning.hpp"
#include "drain_check.hpp"
#include "driver_park_backend.hpp"
#include "pending_claim.hpp"

#if defined(__clang__)
#define CANOPY_NO_ICF
#else
#define CANOPY_NO_ICF [[gnu::no_icf]]
#endif

namespace canopy {

namespace {

thread_local worker_context* this_thread_worker = nullptr;

// Which external spawn cache this thread uses: a hash of its id, computed
// once (std::hash of a thread id runs a byte hash on every call, 2 % of an
// outside thread's spawn + join loop).
std::size_t this_thread_hash() noexcept {
  thread_local const std::size_t hash = std::hash<std::thread::id>{}(std::this_thread::get_id());
  return hash;
}

executor_config validated(executor_config config) {
  config.validate();
  if (config.initial_leaves == 0) {
    config.initial_leaves = std::max<std::size_t>(config.worker_count, 1);
  }
  return config;
}

std::uint64_t next_random(std::uint64_t& state) noexcept {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
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
    for (std::size_t leaf = 0; leaf < config_.max_leaves; ++leaf) {
      if (partition_owner(leaf, partitions_) == index) {
        state->own_mask[leaf / 64] |= std::uint64_t{1} << (leaf % 64);
      }
    }
    state->random = 0x9E3779B97F4A7C15ULL * (index + 1);
    workers_.push_back(std::move(state));
  }
  host_ = std::make_unique<detail::host_runner>(*this, *workers_[workers]);
  // Tracing (executor/trace.hpp): on only if configured; then every worker
  // records into its own buffer and posters report the wakes they deliver.
  trace_ = trace_recorder::from_config(config_);
  if (trace_ != nullptr) {
    for (std::size_t index = 0; index < workers; ++index) {
      workers_[index]->trace = &trace_->worker(index);
    }
    sleep_.set_wake_observer(trace_.get());
  }
  worker_cpus_ = plan_worker_cpus(config_);  // throws before any thread exists
  try {
    for (std::size_t index = 0; index < workers; ++index) {
      workers_[index]->thread = std::thread([this, index] { worker_main(index); });
    }
  } catch (...) {
    stopping_.store(true, sync::seq_cst);
    sleep_.wake_all_for_shutdown();
    for (auto& worker : workers_) {
      if (worker->thread.joinable()) {
        worker->thread.join();
      }
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
  // 6. (After shutdown, before the memory goes.) Wait for wakes from
  //    threads that are not this executor's (schedule_from_outside): one
  //    may still be in the tail of signal_task after the task it woke ran
  //    to its end and its joiner moved on to destroy the executor.
  //    acquire: pairs with each such wake's release decrement, so all its
  //    accesses to this executor happen before the members are destroyed.
  while (foreign_wakes_.load(sync::acquire) != 0) {
    sync::yield_thread();
  }
}

bool executor_core::is_worker_thread() const noexcept {
  return this_thread_worker != nullptr && this_thread_worker->core == this;
}

host_drive executor_core::run_host_until(bool (*ready)(const void* context) noexcept,
                                         const void* context,
                                         std::int64_t steady_deadline_ns) noexcept {
  return host_->run_until(ready, context, steady_deadline_ns);
}

// ---------------------------------------------------------------- spawning

// One copy per placement, each inlined into its entry point below: a
// placement tested at run time would cost every spawn_body call the
// constant propagation LTO gives it.
template <spawn_placement Placement>
[[gnu::always_inline]] inline spawn_status executor_core::spawn_into(
    const task_vtable* vtable, void (*construct)(void* storage, void* context), void* context,
    spawn_mode mode, task_id* spawned) {
  // Read once: the thread-local pointer would otherwise be re-read after
  // the body's construction (an opaque call) by the count and the LIFO put.
  worker_context* const worker = this_thread_worker;
  worker_state* const self =
      worker != nullptr && worker->core == this ? workers_[worker->index].get() : nullptr;
  const bool on_worker = self != nullptr;
  if (on_worker) {
    // Worker threads are joined before leftovers are destroyed, so a spawn
    // from a task only needs the stop flag.
    if (stopping_.load(sync::acquire)) {
      return spawn_status::shut_down;
    }
  } else {
    in_flight_.fetch_add(1, sync::seq_cst);
    // seq_cst: pairs with shutdown step 1 (store accepting_ = false, then
    // wait for in_flight_ == 0): either we see the store, or it sees us.
    if (!accepting_.load(sync::seq_cst)) {
      in_flight_.fetch_sub(1, sync::release);
      return spawn_status::shut_down;
    }
    if (trace_ != nullptr) [[unlikely]] {
      trace_->outside_spawn();
    }
  }
  struct in_flight_guard {
    executor_core* core;
    bool active;
    ~in_flight_guard() {
      if (active) {
        // release: shutdown's acquire read of 0 sees our signal.
        core->in_flight_.fetch_sub(1, sync::release);
      }
    }
  } guard{this, !on_worker};

  std::uint32_t slot = 0;
  if (on_worker && self->spawn_slots.free != 0) [[likely]] {
    // The warm reservation, inline: a call to allocate() on every fork is
    // the cost fork-join cannot afford.
    slot = task_arena::take(self->spawn_slots);
  } else if (const spawn_status status = allocate(self, on_worker ? spawn_mode::fail : mode, slot);
             status != spawn_status::spawned) {
    return status;
  }
  task_slot& target = arena_.slot(slot);
  try {
    construct(target.storage, context);
  } catch (...) {
    arena_.release(slot);
    notify_capacity_waiters();
    throw;
  }
  target.vtable = vtable;
  const std::uint32_t generation = task_slot::generation_of(target.state.load(sync::relaxed));
  // relaxed: the slot is ours alone until its bit is set; set_task_bit's
  // seq_cst RMW publishes the body, vtable and state to the claiming worker.
  target.state.store(task_slot::make_state(generation, task_slot::scheduled), sync::relaxed);
  if (spawned != nullptr) {
    *spawned = {slot, generation};
  }
  count_spawn(self);
  if constexpr (Placement == spawn_placement::host) {
    host_->channel().push(slot);  // its lock publishes the body to the host, as a task bit would
  } else if (Placement == spawn_placement::offered && on_worker && !self->is_host &&
             self->trace == nullptr && self->joins.offer_task(slot)) {
    // A hint for sleepers, as for a join's callable (offer_job): the spawner
    // takes the child back at its await, or finds it when it next looks for
    // work, whoever else wakes.
    sleep_.new_jobs(1);
  } else {
    make_runnable_from(self, slot);
  }
  return spawn_status::spawned;
}

spawn_status executor_core::spawn_body(const task_vtable* vtable,
                                       void (*construct)(void* storage, void* context),
                                       void* context, spawn_mode mode, task_id* spawned,
                                       spawn_placement placement) {
  switch (placement) {
    case spawn_placement::host:
      return spawn_into<spawn_placement::host>(vtable, construct, context, mode, spawned);
    case spawn_placement::offered:
      return spawn_offered(vtable, construct, context, mode, spawned);
    case spawn_placement::anywhere:
      break;
  }
  return spawn_into<spawn_placement::anywhere>(vtable, construct, context, mode, spawned);
}

spawn_status executor_core::spawn_offered(const task_vtable* vtable,
                                          void (*construct)(void* storage, void* context),
                                          void* context, spawn_mode mode, task_id* spawned) {
  return spawn_into<spawn_placement::offered>(vtable, construct, context, mode, spawned);
}

void executor_core::count_spawn(worker_state* self) noexcept {
  if (self != nullptr) {
    worker_counters::bump(self->counters.spawned);
  } else {
    external_spawns_.fetch_add(1, sync::relaxed);  // a statistic: no ordering
  }
}

std::size_t executor_core::place_external(std::size_t after) noexcept {
  // Prefer a partition whose owner is sleepy or parked: its work will be
  // picked up by the owner that the permit wakes.
  const std::size_t workers = config_.worker_count;
  if (workers <= 1) {
    return 0;
  }
  for (std::size_t step = 1; step <= workers; ++step) {
    const std::size_t candidate = (after + step) % workers;
    if (sleep_.waker(candidate).latch().load() != sleep_latch::unset) {
      return candidate;
    }
  }
  return (after + 1) % workers;
}

bool executor_core::reserve_anywhere(std::size_t first_partition, task_arena::reservation& into) {
  const std::size_t workers = partitions_;
  for (std::size_t step = 0; step < workers; ++step) {
    if (arena_.reserve((first_partition + step) % workers, into)) {
      return true;
    }
  }
  return false;
}

bool executor_core::allocate_unreserved(std::size_t first_partition, std::uint32_t& slot) {
  const std::size_t workers = partitions_;
  for (std::size_t step = 0; step < workers; ++step) {
    if (auto index = arena_.allocate((first_partition + step) % workers)) {
      slot = *index;
      return true;
    }
  }
  return false;
}

spawn_status executor_core::allocate(worker_state* self, spawn_mode mode, std::uint32_t& slot) {
  if (self != nullptr) {
    if (self->spawn_slots.free != 0 || reserve_anywhere(self->context.index, self->spawn_slots)) {
      slot = task_arena::take(self->spawn_slots);
      return spawn_status::spawned;
    }
  } else {
    const std::size_t hash = this_thread_hash();
    external_spawn_cache& cache = external_caches_[hash % external_cache_count];
    // acquire/release on `busy`: hands the reservation from one owner to the next.
    if (cache.busy.exchange(1, sync::acquire) == 0) {
      bool reserved = cache.slots.free != 0;
      if (!reserved) {
        cache.next_partition = place_external(cache.next_partition);
        reserved = reserve_anywhere(cache.next_partition, cache.slots);
      }
      if (reserved) {
        slot = task_arena::take(cache.slots);
      }
      cache.busy.store(0, sync::release);
      if (reserved) {
        return spawn_status::spawned;
      }
    } else if (allocate_unreserved(hash % partitions_, slot)) {
      return spawn_status::spawned;
    }
  }
  // Every partition is full: free slots may sit in idle spawn caches.
  flush_external_caches();
  if (allocate_unreserved(0, slot)) {
    return spawn_status::spawned;
  }
  if (mode == spawn_mode::fail) {
    return spawn_status::at_capacity;
  }
  std::unique_lock lock(capacity_mutex_);
  // seq_cst: pairs with notify_capacity_waiters(): a worker frees a slot
  // (seq_cst RMW) then reads this count; we add ourselves, then retry.
  capacity_waiters_.fetch_add(1, sync::seq_cst);
  spawn_status result = spawn_status::spawned;
  for (;;) {
    if (!accepting_.load(sync::seq_cst)) {
      result = spawn_status::shut_down;
      break;
    }
    flush_external_caches();
    if (allocate_unreserved(0, slot)) {
      break;
    }
    const std::uint64_t seen = capacity_epoch_;
    capacity_cv_.wait(lock,
                      [&] { return capacity_epoch_ != seen || !accepting_.load(sync::seq_cst); });
  }
  capacity_waiters_.fetch_sub(1, sync::relaxed);
  return result;
}

void executor_core::flush_external_caches() noexcept {
  for (std::size_t index = 0; index < external_cache_count; ++index) {
    external_spawn_cache& cache = external_caches_[index];
    if (cache.busy.exchange(1, sync::acquire) == 0) {
      arena_.give_back(cache.slots);
      cache.busy.store(0, sync::release);
    }
  }
}

void executor_core::give_back_worker_slots(worker_state& self) noexcept {
  if (self.spawn_slots.free != 0) {
    arena_.give_back(self.spawn_slots);
    notify_capacity_waiters();
  }
}

// Always inlined, as are claim_pending and run_claimed_nested: each has two
// callers, and LTO would keep such a function out of line, a call on every
// task's end.
[[gnu::always_inline]] inline void executor_core::release_slot(worker_state& self,
                                                               std::uint32_t slot) noexcept {
  // A slot in the occupancy word this worker is spawning from goes back into
  // its reservation: the shared word still marks it occupied, so nobody
  // else can take it, and the worker's next spawn reuses it warm without the
  // arena's seq_cst RMW. Only while the reservation is live (it is given
  // back when the worker runs out of work) and nobody waits for capacity;
  // otherwise, and for any other slot, it goes back to the arena.
  task_arena::reservation& mine = self.spawn_slots;
  const std::uint32_t offset = slot - mine.first_slot;  // wraps around when below
  // seq_cst: as in notify_capacity_waiters(); a waiter that registered
  // before this load gets this slot through the arena. One that registers
  // just after is notified by the next release or give-back.
  if (mine.free != 0 && offset < 64 && capacity_waiters_.load(sync::seq_cst) == 0) {
    mine.free |= std::uint64_t{1} << offset;
    return;
  }
  arena_.release(slot);
  notify_capacity_waiters();
}

void executor_core::notify_capacity_waiters() noexcept {
  // seq_cst: second half of the handshake in allocate().
  if (capacity_waiters_.load(sync::seq_cst) != 0) {
    const std::lock_guard lock(capacity_mutex_);
    ++capacity_epoch_;
    capacity_cv_.notify_all();
  }
}

// -------------------------------------------------------------- scheduling

bool executor_core::schedule(task_id id) noexcept {
  if (is_worker_thread()) [[likely]] {
    return schedule_task(id);
  }
  return schedule_from_outside(id);
}

// A wake from a thread that is not one of this executor's (another
// executor's worker completing a task this one awaits, a timer thread, a
// user's thread): counted, so that the destructor waits for it to leave.
[[gnu::noinline]] bool executor_core::schedule_from_outside(task_id id) noexcept {
  // seq_cst: before any access of the wake to the executor; the destructor
  // reads the count only after the woken task's wait is over.
  foreign_wakes_.fetch_add(1, sync::seq_cst);
  const bool scheduled = schedule_task(id);
  // release: pairs with the destructor's acquire read (step 6).
  foreign_wakes_.fetch_sub(1, sync::release);
  return scheduled;
}

bool executor_core::schedule_task(task_id id) noexcept {
  task_slot& target = arena_.slot(id.slot);
  std::uint64_t state = target.state.load(sync::relaxed);
  for (;;) {
    if (task_slot::generation_of(state) != id.generation) {
      return false;  // the task finished; its slot may hold another task now
    }
    if ((state & task_slot::scheduled) != 0) {
      return true;  // already runnable; this wake is absorbed
    }
    // acq_rel: release publishes what the waker wrote before wake() to the
    // next run (through the task bit, or through end-of-run's fetch_and).
    if (target.state.compare_exchange_weak(state, state | task_slot::scheduled, sync::acq_rel,
                                           sync::relaxed)) {
      break;
    }
  }
  if ((state & task_slot::executing) == 0) {
    make_runnable(id.slot);
  }
  return true;
}

// Out of line: LTO inlines it into the awaiting coroutine's body, which it
// makes larger and slower on the path where the child already ran.
[[gnu::noinline]] bool executor_core::run_pending_inline(task_id id) {
  worker_state* const self = claim_pending(id);
  if (self == nullptr) {
    return false;
  }
  run_claimed_nested(*self, id.slot);
  return true;
}

// Two entry points with one caller each (fibers, coroutines), so that LTO
// may inline each where it is used: with two callers it keeps one shared
// copy out of line, a call on every fork.
// no_icf (GCC's): identical code folding would make them one function again.
CANOPY_NO_ICF executor_core::pending_run executor_core::run_or_adopt_pending(
    task_id id, const adoption& adopt) {
  return run_or_adopt(id, adopt);
}

CANOPY_NO_ICF executor_core::pending_run executor_core::take_over_pending(task_id id,
                                                                          const adoption& adopt) {
  return run_or_adopt(id, adopt);
}

[[gnu::always_inline]] inline executor_core::pending_run executor_core::run_or_adopt(
    task_id id, const adoption& adopt) {
  worker_state* const self = claim_pending(id);
  if (self == nullptr) {
    return pending_run::none;
  }
  task_slot& target = arena_.slot(id.slot);
  if (target.vtable != adopt.kind || !adopt.accept(target.storage) || self->trace != nullptr) {
    run_claimed_nested(*self, id.slot);  // traced: a run of its own, so the trace shows it
    return pending_run::ran;
  }
  if (adopt.body != nullptr) {
    std::memcpy(adopt.body, target.storage, adopt.body_size);
  }
  retire_unrun(*self, id);
  return pending_run::adopted;
}

executor_core::pending_run executor_core::take_back_unrun(task_id id) {
  worker_state* const self = claim_pending(id);
  if (self == nullptr) {
    return pending_run::none;
  }
  if (self->trace != nullptr) [[unlikely]] {
    run_claimed_nested(*self, id.slot);  // a traced run, so the trace shows it
    return pending_run::ran;
  }
  retire_unrun(*self, id);
  return pending_run::adopted;
}

void executor_core::requeue_offered_task(std::size_t worker, std::uint32_t slot) noexcept {
  make_runnable_from(workers_[worker].get(), slot);
}

void executor_core::run_offered_task(std::size_t worker, std::uint32_t slot, bool nested) {
  worker_state& self = *workers_[worker];
  if (nested) {
    run_claimed_nested(self, slot);
  } else {
    run_task(self, slot);
  }
}

void executor_core::count_offer_steal(std::size_t worker) noexcept {
  worker_state& self = *workers_[worker];
  worker_counters::bump(self.counters.steals);
  if (self.trace != nullptr) [[unlikely]] {
    self.trace->steal(trace_buffer::no_partition);
  }
}

void executor_core::announce_offer() noexcept { sleep_.new_jobs(1); }


[[gnu::always_inline]] inline void executor_core::retire_unrun(worker_state& self,
                                                               task_id id) noexcept {
  task_slot& target = arena_.slot(id.slot);
  target.vtable = nullptr;  // as after a completed run: the caller does the task's work
  // release: as at run_task's completion, a stale waker that reads the new
  // generation fails its CAS; SCHEDULED is dropped, nobody else holds the task.
  target.state.store(task_slot::make_state(id.generation + 1, 0), sync::release);
  worker_counters::bump(self.counters.tasks_run);
  worker_counters::bump(self.counters.finished);
  release_slot(self, id.slot);
}

[[gnu::always_inline]] inline executor_core::worker_state* executor_core::claim_pending(
    task_id id) {
  worker_context* worker = this_thread_worker;
  if (worker == nullptr || worker->core != this) {
    return nullptr;
  }
  worker_state& self = *workers_[worker->index];
  // First this worker's offer deque (canopy::spawn's child, awaited by its
  // spawner), then its LIFO slot and the tree.
  switch (self.joins.take_offered_task(
      id, arena_.slot(id.slot).state,
      [this, &self](std::uint32_t newer) { make_runnable_from(&self, newer); })) {
    case detail::join_worker::offered_claim::taken:
      return &self;
    case detail::join_worker::offered_claim::gone:
      return nullptr;
    case detail::join_worker::offered_claim::not_offered:
      break;
  }
  const auto position = [this](std::uint32_t slot) {
    return tree_position{arena_.leaf_of(slot), arena_.signal_of(slot), arena_.bit_of(slot)};
  };
  const pending_claim claim =
      claim_pending_task(arena_.slot(id.slot).state, id, self.lifo, tree_, position,
                         [this](std::uint32_t permits) { owe_wakes(permits); });
  if (claim == pending_claim::took_next_task) [[unlikely]] {
    signal_task(id.slot);  // not the awaited task: back into the tree, with its wakes
    return nullptr;
  }
  // We own a runnable task (invariant S: a set bit or a LIFO entry means
  // SCHEDULED, not EXECUTING).
  return claim == pending_claim::from_lifo || claim == pending_claim::from_tree ? &self : nullptr;
}

[[gnu::always_inline]] inline void executor_core::run_claimed_nested(worker_state& self,
                                                                     std::uint32_t slot) {
  // Run it here, then restore what this worker was running: the waiting
  // task is still mid-run.
  const restore_running_on_exit saved(self.context);
  run_task(self, slot);
}

// Inlined into spawn_body, schedule and find_task: every task passes here,
// and out of line it is a call and a spill on each.
[[gnu::always_inline]] inline void executor_core::make_runnable(std::uint32_t slot) noexcept {
  worker_context* const worker = this_thread_worker;
  make_runnable_from(
      worker != nullptr && worker->core == this ? workers_[worker->index].get() : nullptr, slot);
}

[[gnu::always_inline]] inline void executor_core::make_runnable_from(worker_state* self,
                                                                     std::uint32_t slot) noexcept {
  if (self != nullptr) {
    const std::uint32_t evicted = self->lifo.put(slot);
    if (evicted != no_task) {
      signal_task(evicted);
    }
    // No wake here: this worker is awake (it is running a task) and takes
    // the LIFO task as soon as the current one ends; awake idle workers may
    // steal it meanwhile. Sleepers are woken for the evicted task.
    return;
  }
  signal_task(slot);
}

bool executor_core::steal_lifo(worker_state& self, std::uint32_t& slot) noexcept {
  const std::size_t workers = workers_.size();
  for (std::size_t step = 1; step < workers; ++step) {
    worker_state& victim = *workers_[(self.context.index + step) % workers];
    const std::uint32_t taken = victim.lifo.steal();
    if (taken != no_task) {
      slot = taken;
      return true;
    }
  }
  return false;
}

void executor_core::signal_task(std::uint32_t slot) noexcept {
  const summary_tree::set_outcome outcome =
      tree_.set_task_bit(arena_.leaf_of(slot), arena_.signal_of(slot), arena_.bit_of(slot));
  if (outcome.upward.wakes_owed != 0) {
    sleep_.wake_for_permits(outcome.upward.wakes_owed);
  } else {
    sleep_.new_jobs(1);
  }
  if (host_runs_everything_) {
    // After the bit's seq_cst RMW: the poster's half of the host handshake.
    host_->channel().notify();
  }
}

void executor_core::owe_wakes(std::uint32_t permits_granted) noexcept {
  if (permits_granted != 0) {
    sleep_.wake_for_permits(permits_granted);
  }
}

// ----------------------------------------------------------------- workers

void executor_core::worker_main(std::size_t index) {
  worker_state& self = *workers_[index];
  if (!worker_cpus_.empty() && !pin_this_thread(worker_cpus_[index])) {
    std::fprintf(stderr, "canopy::executor: worker %zu could not be pinned to CPU %d: %s\n", index,
                 worker_cpus_[index], std::strerror(errno));
  }
  this_thread_worker = &self.context;
  self.joins.record_help_stack();
  trace_recorder::bind_this_thread(self.trace);
  idle_state idle;
  std::uint32_t slot = 0;
  while (!stopping_.load(sync::acquire)) {
    if (find_task(self, slot)) {
      run_task(self, slot);
      poll_driver_if_due(self);
      continue;
    }
    if (const offer taken = self.joins.steal_from_others(); !taken.empty()) {
      self.joins.run_offer(taken, false);
      continue;
    }
    // Out of work: return reserved spawn slots so that a spawner blocked at
    // capacity is not kept waiting by slots nobody will use soon.
    give_back_worker_slots(self);
    sleep_.start_looking(idle);
    if (self.trace != nullptr) {
      self.trace->search_started();
    }
    bool found = false;
    while (!stopping_.load(sync::acquire)) {
      offer stolen;
      const bool from_tree = find_task(self, slot);
      if (from_tree || !(stolen = self.joins.steal_from_others()).empty()) {
        sleep_.work_found([this] { return tree_.any_active(); });
        found = true;
        if (self.trace != nullptr) {
          self.trace->search_ended();
        }
        if (from_tree) {
          run_task(self, slot);
        } else {
          self.joins.run_offer(stolen, false);
        }
        break;
      }
      const idle_report report = sleep_.no_work_found(index, idle, *this);
      if (report.holds_poller) {
        dispatch_as_poller();
      }
      if (report.parked) {
        if (self.trace != nullptr) {
          self.trace->park_ended(report.reason);
        }
        worker_counters::bump(self.counters.spurious_wakeups, report.spurious_wakeups);
        switch (report.reason) {
          case wake_reason::permit:
            worker_counters::bump(self.counters.wakes_by_permit);
            break;
          case wake_reason::jec:
            worker_counters::bump(self.counters.wakes_by_jec);
            break;
          case wake_reason::shutdown:
            worker_counters::bump(self.counters.wakes_by_shutdown);
            break;
          case wake_reason::io:  // the poller woke itself: counted in the reactor's stats
          case wake_reason::none:
            break;
        }
      }
    }
    if (!found) {
      if (self.trace != nullptr) {
        self.trace->search_ended();
      }
      sleep_.stop_looking();
    }
  }
  this_thread_worker = nullptr;
}

void executor_core::count_towards_driver_poll(worker_state& self) noexcept {
  // Every driver_poll_interval tasks for readiness (tokio's 61), and as soon
  // as a timer is due, so that a busy pool fires timers within one task's run.
  if (++self.since_driver_poll < config_.driver_poll_interval &&
      !config_.driver->deadline_may_be_due()) {
    return;
  }
  self.since_driver_poll = 0;
  // Only while no worker holds the poller role: a parked poller is woken by
  // readiness itself, and one dispatching is about to poll anyway.
  if (sleep_.try_take_poller()) {
    dispatch_as_poller();
  }
}

void executor_core::dispatch_as_poller() noexcept {
  trace_buffer* const trace = trace_ != nullptr ? trace_recorder::this_thread() : nullptr;
  const std::uint64_t trace_start = trace != nullptr ? trace->now() : 0;
  const std::size_t delivered = config_.driver->dispatch();
  if (trace != nullptr) {
    trace->reactor_poll(trace_start, static_cast<std::uint32_t>(delivered));
  }
  sleep_.release_poller();
}

bool executor_core::take_yielded(worker_state& self, std::uint32_t& slot) {
  const auto yielded = self.yields.pop();
  if (!yielded) {
    return false;
  }
  slot = *yielded;
  self.last_from_yield = true;
  if (self.yields.empty() && !self.is_host) {
    sleep_.waker(self.context.index).unmark_yield();
  }
  return true;
}

bool executor_core::find_task(worker_state& self, std::uint32_t& slot) {
  // 0. The LIFO slot — the task this worker spawned or woke last — unless it
  //    has been taken too many times in a row: then the others go first once,
  //    so that a chain of spawns cannot starve the rest of the queue.
  //    After it, the newest child this worker offered (canopy::spawn) that
  //    its spawner did not take back: the same streak bounds both.
  if (self.lifo_streak < max_lifo_streak || self.yields.empty()) {
    std::uint32_t taken = self.lifo.take();
    if (taken != no_task || self.joins.take_own_task(taken)) {
      slot = taken;
      if (self.lifo_streak < max_lifo_streak) {
        ++self.lifo_streak;
        return true;
      }
      // Streak exhausted but nothing else is queued locally: fall through
      // to the tree first; keep the task if the tree has nothing.
      self.lifo_streak = 0;
      std::uint32_t other = 0;
      if (claim_from_roots(self, true, other)) {
        make_runnable(slot);  // back into the LIFO slot (evicts nothing: it is empty)
        slot = other;
      }
      return true;
    }
  }
  self.lifo_streak = 0;
  // 1. Local yield queue — unless the last task came from it, in which case
  //    the tree goes first so that yielding lets other ready tasks run.
  //    The empty test is inline: a call per search would cost every task
  //    that came from the tree.
  if (!self.last_from_yield && !self.yields.empty()) {
    if (take_yielded(self, slot)) {
      return true;
    }
  }
  // 2. Own partition.
  if (claim_from_roots(self, true, slot)) {
    self.last_from_yield = false;
    return true;
  }
  if (!self.yields.empty() && take_yielded(self, slot)) {
    return true;
  }
  // 3. Steal from other partitions, starting at a random leaf, then from
  //    other workers' LIFO slots.
  if (workers_.size() > 1 && (claim_from_roots(self, false, slot) || steal_lifo(self, slot))) {
    worker_counters::bump(self.counters.steals);
    if (self.trace != nullptr) [[unlikely]] {
      self.trace->steal(self.steal_leaf == no_leaf ? trace_buffer::no_partition
                                                   : partition_owner(self.steal_leaf, partitions_));
    }
    self.last_from_yield = false;
    return true;
  }
  return false;
}

bool executor_core::claim_from_roots(worker_state& self, bool own_partition, std::uint32_t& slot) {
  const std::size_t words = (arena_.leaf_limit() + 63) / 64;
  if (words == 0) {
    return false;
  }
  // A thief starts where its last steal succeeded, so that it empties one
  // leaf's words in order instead of taking one task from each of many: a
  // word it empties is one the spawner can reserve whole again. It starts at
  // a random leaf when it has none, which spreads thieves over victims.
  std::size_t start_leaf = self.cursor_leaf;
  if (!own_partition) {
    start_leaf =
        self.steal_leaf != no_leaf ? self.steal_leaf : next_random(self.random) % (words * 64);
  }
  std::size_t word = start_leaf / 64;
  if (word >= words) {
    word %= words;
  }
  const auto start_bit = static_cast<unsigned>(start_leaf % 64);
  // Own partition: the leaves of own_mask; stealing: the others.
  const std::uint64_t flip = own_partition ? 0 : ~std::uint64_t{0};
  // The start word is visited twice: bits at/after start_bit first, the
  // rest at the end, so every active leaf is tried once. The word index
  // wraps by a compare, not a division, and the two partial words are
  // masked outside the loop (a failed search is most of yield_many's).
  std::uint64_t active =
      tree_.root_word(word) & (self.own_mask[word] ^ flip) & (~std::uint64_t{0} << start_bit);
  for (std::size_t step = 0;;) {
    while (active != 0) {
      const std::size_t leaf = word * 64 + static_cast<std::size_t>(std::countr_zero(active));
      if (claim_in_leaf(leaf, slot)) {
        (own_partition ? self.cursor_leaf : self.steal_leaf) = leaf;
        return true;
      }
      active &= active - 1;
    }
    if (++step > words) {
      break;
    }
    word = word + 1 == words ? 0 : word + 1;
    active = tree_.root_word(word) & (self.own_mask[word] ^ flip);
    if (step == words) {
      active &= ~(~std::uint64_t{0} << start_bit);
    }
  }
  if (!own_partition) {
    self.steal_leaf = no_leaf;
  }
  return false;
}

bool executor_core::claim_in_leaf(std::size_t leaf, std::uint32_t& slot) {
  summary_tree::activation upward;
  const int index = tree_.claim_in_leaf(leaf, upward);
  owe_wakes(upward.wakes_owed);
  if (index < 0) {
    return false;
  }
  const auto within = static_cast<std::size_t>(index);
  slot = arena_.index_of(leaf, within / summary_tree::bits_per_word,
                         static_cast<unsigned>(within % summary_tree::bits_per_word));
  return true;
}

void executor_core::run_task(worker_state& self, std::uint32_t slot) {
  // One test of a pointer in the worker's own state when tracing is off
  // (docs/tracing.md has the instruction counts); the traced run is out of line.
  if (self.trace != nullptr) [[unlikely]] {
    run_task_traced(self, slot);
    return;
  }
  static_cast<void>(run_and_retire(self, slot));
}

[[gnu::noinline]] void executor_core::run_task_traced(worker_state& self, std::uint32_t slot) {
  const std::uint64_t started = self.trace->run_started();
  const run_outcome outcome = run_and_retire(self, slot);
  self.trace->run_ended(started, slot, outcome);
}

[[gnu::always_inline]] inline run_outcome executor_core::run_and_retire(worker_state& self,
                                                                        std::uint32_t slot) {
  task_slot& target = arena_.slot(slot);
  const std::uint32_t generation = task_slot::generation_of(target.state.load(sync::relaxed));
  // relaxed: while SCHEDULED the claiming worker is the state's only writer
  // (schedulers find SCHEDULED and leave it); the claim RMW on the task bit
  // (or the yield queue, same thread) already ordered the body's writes.
  target.state.store(task_slot::make_state(generation, task_slot::executing), sync::relaxed);
  self.context.running = {slot, generation};
  self.context.has_running = true;
  const run_outcome outcome = target.vtable->run(target.storage);
  self.context.has_running = false;
  worker_counters::bump(self.counters.tasks_run);
  switch (outcome) {
    case run_outcome::completed:
      target.vtable->destroy(target.storage, task_end::completed);
      target.vtable = nullptr;  // a reserved-but-unused slot has no vtable
      // release: a stale waker that reads the new generation fails its CAS;
      // the slot's teardown is published by arena_.release() below.
      target.state.store(task_slot::make_state(generation + 1, 0), sync::release);
      worker_counters::bump(self.counters.finished);
      release_slot(self, slot);
      break;
    case run_outcome::suspended: {
      // acq_rel: acquire pairs with a waker's CAS that set SCHEDULED while
      // we ran (its writes are visible to the re-run); release pairs with
      // the next schedule() that finds IDLE.
      const std::uint64_t previous = target.state.fetch_and(~task_slot::executing, sync::acq_rel);
      if ((previous & task_slot::scheduled) != 0) {
        signal_task(slot);  // woken while running: runnable once more
      }
      break;
    }
    case run_outcome::yielded:
      // SCHEDULED first, so a concurrent wake is absorbed instead of setting
      // the task bit while the task also sits in the yield queue (invariant S).
      target.state.fetch_or(task_slot::scheduled, sync::acq_rel);
      target.state.fetch_and(~task_slot::executing, sync::acq_rel);
      worker_counters::bump(self.counters.yields);
      if (self.yields.push(slot) && !self.is_host) {
        sleep_.waker(self.context.index).mark_yield();
      }
      break;
    case run_outcome::to_host:
      // As for a yield: SCHEDULED first (a concurrent wake is absorbed),
      // then the host channel's queue holds the task (invariant S).
      target.state.fetch_or(task_slot::scheduled, sync::acq_rel);
      target.state.fetch_and(~task_slot::executing, sync::acq_rel);
      host_->channel().push(slot);
      break;
  }
  return outcome;
}

// ---------------------------------------------------------------- sleeping

bool executor_core::must_stay_awake(std::size_t worker) noexcept {
  if (stopping_.load(sync::seq_cst)) {
    return true;
  }
  if (sleep_.waker(worker).sync_partition_summary(tree_, worker, config_.worker_count,
                                                  arena_.leaf_limit())) {
    return true;
  }
  return tree_.any_active() || any_offer_waiting();
}

bool executor_core::any_offer_waiting() const noexcept {
  // Not part of the no-lost-wakeup argument (a push orders nothing before
  // its wake's read: architecture.md, "Offered callables"). Read after this
  // parker's seq_cst counter and latch RMWs, it narrows the window in which
  // a parker misses an offered callable to the pusher's store reaching
  // memory, instead of the whole way from its last search to its park.
  for (const auto& worker : workers_) {
    if (!worker->joins.looks_empty()) {
      return true;
    }
  }
  return false;
}

void executor_core::about_to_block(std::size_t worker) noexcept {
  worker_counters::bump(workers_[worker]->counters.parks);
  if (trace_ != nullptr) {
    workers_[worker]->trace->park_started();
  }
  // seq_cst: pairs with shutdown step 2's store; see is_quiescent().
  if (draining_.load(sync::seq_cst)) {
    const std::lock_guard lock(drain_mutex_);
    drain_cv_.notify_all();
  }
}

bool executor_core::is_quiescent() noexcept {
  std::vector<std::uint64_t> epochs(config_.worker_count);
  return pool_is_quiescent(sleep_, tree_, epochs);
}

// ---------------------------------------------------------------- shutdown

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
    accepting_.store(false, sync::seq_cst);
    {
      const std::lock_guard lock(capacity_mutex_);
      ++capacity_epoch_;
      capacity_cv_.notify_all();
    }
    host_->channel().notify();
    while (in_flight_.load(sync::acquire) != 0) {
      sync::yield_thread();
    }
    // 2. Take the host role for good (wait for a host thread to return).
    //    Drain policy: run the host's pinned tasks here — and, with no owned
    //    workers, every task — until every worker is parked with nothing
    //    runnable and no pinned task waits.
    host_->hold_for_shutdown();
    if (config_.on_shutdown == shutdown_policy::drain) {
      draining_.store(true, sync::seq_cst);
      host_->drain();
    }
    // 3. Stop: workers leave their loops after the current task.
    stopping_.store(true, sync::seq_cst);
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
    //    destructor runs, its join handle says cancelled.
    host_->channel().clear();
    destroy_leftovers();
  });
}

void executor_core::destroy_leftovers() {
  arena_.for_each_live([this](std::uint32_t slot) {
    task_slot& target = arena_.slot(slot);
    if (target.vtable == nullptr) {
      return;
    }
    const std::uint32_t generation = task_slot::generation_of(target.state.load(sync::relaxed));
    target.state.store(task_slot::make_state(generation + 1, 0), sync::release);
    target.vtable->destroy(target.storage, task_end::dropped);
    target.vtable = nullptr;
    arena_.release(slot);
    dropped_tasks_.fetch_add(1, sync::relaxed);
  });
}

executor_stats executor_core::stats() const {
  executor_stats result;
  result.workers.reserve(config_.worker_count);
  for (std::size_t index = 0; index < config_.worker_count; ++index) {
    result.workers.push_back(workers_[index]->counters.snapshot());
  }
  result.host = workers_[config_.worker_count]->counters.snapshot();
  result.dropped_tasks = dropped_tasks_.load(sync::relaxed);
  // Ended counts (in the snapshot above) are read before spawned counts: a
  // task counted as ended was spawned before, so the difference is never
  // negative in a quiet moment; while tasks run it is clamped at 0.
  std::uint64_t ended = result.dropped_tasks + result.host.finished;
  for (const worker_stats& one : result.workers) {
    ended += one.finished;
  }
  std::uint64_t started = external_spawns_.load(sync::relaxed);
  for (const auto& worker : workers_) {
    started += worker->counters.spawned.load(sync::relaxed);
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

}  // namespace canopy
