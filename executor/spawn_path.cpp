// executor_core's spawn path: a spawn (spawn_body, one copy per placement),
// the slot it takes (the spawning worker's reservation, the external
// caches of threads that are not workers, the arena, waiting at capacity),
// and schedule(), which makes a task runnable (its LIFO slot or its bit in
// the summary tree, and the wake that goes with it).
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

#include "core_inline.hpp"
#include "executor_core.hpp"
#include "host/host_runner.hpp"

namespace canopy::detail {

namespace {

// Which external spawn cache this thread uses: a hash of its id, computed
// once (std::hash of a thread id runs a byte hash on every call).
std::size_t this_thread_hash() noexcept {
  thread_local const std::size_t hash = std::hash<std::thread::id>{}(std::this_thread::get_id());
  return hash;
}

}  // namespace

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
    if (stopping_.load(atomics::acquire)) {
      return spawn_status::shut_down;
    }
  } else {
    in_flight_.fetch_add(1, atomics::seq_cst);
    // seq_cst: pairs with shutdown step 1 (store accepting_ = false, then
    // wait for in_flight_ == 0): either we see the store, or it sees us.
    if (!accepting_.load(atomics::seq_cst)) {
      in_flight_.fetch_sub(1, atomics::release);
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
        core->in_flight_.fetch_sub(1, atomics::release);
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
  const std::uint32_t generation = task_slot::generation_of(target.state.load(atomics::relaxed));
  // relaxed: the slot is ours alone until its bit is set; set_task_bit's
  // seq_cst RMW publishes the body, vtable and state to the claiming worker.
  target.state.store(task_slot::make_state(generation, task_slot::scheduled), atomics::relaxed);
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

// The face's spawn entries (scheduler.hpp) are the core's own code: `core`
// is this object.
spawn_status scheduler::spawn_body(const task_vtable* vtable,
                                   void (*construct)(void* storage, void* context), void* context,
                                   spawn_mode mode, task_id* spawned, spawn_placement placement) {
  executor_core& core = as_core(*this);
  switch (placement) {
    case spawn_placement::host:
      return core.spawn_into<spawn_placement::host>(vtable, construct, context, mode, spawned);
    case spawn_placement::offered:
      return spawn_offered(vtable, construct, context, mode, spawned);
    case spawn_placement::anywhere:
      break;
  }
  return core.spawn_into<spawn_placement::anywhere>(vtable, construct, context, mode, spawned);
}

spawn_status scheduler::spawn_offered(const task_vtable* vtable,
                                      void (*construct)(void* storage, void* context),
                                      void* context, spawn_mode mode, task_id* spawned) {
  return as_core(*this).spawn_into<spawn_placement::offered>(vtable, construct, context, mode,
                                                             spawned);
}

namespace {
void store_pointer_body(void* storage, void* body) { ::new (storage) void*(body); }
}  // namespace

spawn_status scheduler::spawn_child(const task_vtable* vtable, void* body, spawn_mode mode,
                                    task_id* spawned) {
  executor_core& core = as_core(*this);
  worker_context* const worker = this_thread_worker;
  if (worker != nullptr && worker->core == this) [[likely]] {
    executor_core::worker_state& self = *core.workers_[worker->index];
    // As spawn_into's offered path, with the body a plain store: a worker
    // only needs the stop flag (see there), a free slot at hand, no host
    // role and no trace; anything else takes the general path. The slot:
    // a kept one (a take-over retired it; the host keeps none), else one
    // of the warm reservation.
    if (self.trace == nullptr && !core.stopping_.load(atomics::acquire) &&
        (self.kept_count != 0 || (self.spawn_slots.free != 0 && !self.is_host))) [[likely]] {
      task_slot* target = nullptr;
      std::uint32_t slot = 0;
      std::uint32_t generation = 0;
      if (self.kept_count != 0) {
        const executor_core::worker_state::kept_slot& kept = self.kept_slots[--self.kept_count];
        target = kept.target;
        slot = kept.index;
        generation = kept.generation;
      } else {
        slot = task_arena::take(self.spawn_slots);
        target = &core.arena_.slot(slot);
        generation = task_slot::generation_of(target->state.load(atomics::relaxed));
      }
      store_pointer_body(target->storage, body);
      target->vtable = vtable;
      // relaxed: the slot is ours alone until the deque's release push (or
      // the task bit's seq_cst RMW) publishes the body, vtable and state.
      target->state.store(task_slot::make_state(generation, task_slot::scheduled),
                          atomics::relaxed);
      *spawned = {slot, generation};
      worker_counters::bump(self.counters.spawned);
      if (self.joins.offer_task(slot)) {
        core.sleep_.new_jobs(1);  // a hint, as in spawn_into
      } else {
        core.make_runnable_from(&self, slot);
      }
      return spawn_status::spawned;
    }
  }
  return spawn_offered(vtable, &store_pointer_body, body, mode, spawned);
}

void executor_core::count_spawn(worker_state* self) noexcept {
  if (self != nullptr) {
    worker_counters::bump(self->counters.spawned);
  } else {
    external_spawns_.fetch_add(1, atomics::relaxed);  // a statistic: no ordering
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
    if (self->kept_count != 0 && self->spawn_slots.free == 0) {
      // A kept slot before a new reservation: a spawn at capacity must not
      // fail while this worker holds a free slot.
      slot = self->kept_slots[--self->kept_count].index;
      return spawn_status::spawned;
    }
    if (self->spawn_slots.free != 0 || reserve_anywhere(self->context.index, self->spawn_slots)) {
      slot = task_arena::take(self->spawn_slots);
      return spawn_status::spawned;
    }
  } else {
    const std::size_t hash = this_thread_hash();
    external_spawn_cache& cache = external_caches_[hash % external_cache_count];
    // acquire/release on `busy`: hands the reservation from one owner to the next.
    if (cache.busy.exchange(1, atomics::acquire) == 0) {
      bool reserved = cache.slots.free != 0;
      if (!reserved) {
        cache.next_partition = place_external(cache.next_partition);
        reserved = reserve_anywhere(cache.next_partition, cache.slots);
      }
      if (reserved) {
        slot = task_arena::take(cache.slots);
      }
      cache.busy.store(0, atomics::release);
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
  // A host-driven executor (worker_count = 0) frees a slot only where a
  // thread runs its tasks: a spawner that only waited would wait for ever
  // when it is itself the thread that runs them (the loop thread, before
  // its next run_* call). So it does what a joiner does there
  // (join_state::wait_blocking_until): it borrows the host role when it is
  // free and runs tasks until one ended, then tries again; while another
  // thread holds the role, it waits for that thread to free a slot, taking
  // the role again every host_role_retry in case that thread stopped.
  // Not on a thread running another executor's tasks (a worker, or a host
  // in a task), which blocks here as before rather than nest this
  // executor's tasks inside its own.
  const bool drive_host = config_.worker_count == 0 && this_thread_worker == nullptr;
  std::unique_lock lock(capacity_mutex_);
  // seq_cst: pairs with notify_capacity_waiters(): a worker frees a slot
  // (seq_cst RMW) then reads this count; we add ourselves, then retry.
  capacity_waiters_.fetch_add(1, atomics::seq_cst);
  spawn_status result = spawn_status::spawned;
  for (;;) {
    if (!accepting_.load(atomics::seq_cst)) {
      result = spawn_status::shut_down;
      break;
    }
    flush_external_caches();
    if (allocate_unreserved(0, slot)) {
      break;
    }
    const std::uint64_t seen = capacity_epoch_;
    const auto slot_freed = [&] {
      return capacity_epoch_ != seen || !accepting_.load(atomics::seq_cst);
    };
    if (drive_host) {
      lock.unlock();  // the tasks run here free slots under this mutex
      const bool ran = run_tasks_for_a_slot();
      lock.lock();
      if (!ran) {
        capacity_cv_.wait_for(lock, host_role_retry, slot_freed);
      }
      continue;
    }
    capacity_cv_.wait(lock, slot_freed);
  }
  capacity_waiters_.fetch_sub(1, atomics::relaxed);
  return result;
}

bool executor_core::run_tasks_for_a_slot() {
  // The host loop asks ready() before each task: false the first time, so
  // that one task runs, true after it (the role is then handed back, and
  // the slots the host kept with it).
  int asked = 0;
  const host_drive drive = host_->run_until(
      [](const void* context) noexcept {
        // const_cast: `asked` below is not const; run_until passes it as
        // an opaque read-only context.
        return ++*static_cast<int*>(const_cast<void*>(context)) > 1;
      },
      &asked, -1);
  return drive == host_drive::ran;
}

void executor_core::flush_external_caches() noexcept {
  for (std::size_t index = 0; index < external_cache_count; ++index) {
    external_spawn_cache& cache = external_caches_[index];
    if (cache.busy.exchange(1, atomics::acquire) == 0) {
      arena_.give_back(cache.slots);
      cache.busy.store(0, atomics::release);
    }
  }
}

void executor_core::release_kept_slots(worker_state& self) noexcept {
  if (self.kept_count != 0) {
    while (self.kept_count != 0) {
      arena_.release(self.kept_slots[--self.kept_count].index);
    }
    notify_capacity_waiters();
  }
}

void executor_core::give_back_worker_slots(worker_state& self) noexcept {
  release_kept_slots(self);
  if (self.spawn_slots.free != 0) {
    arena_.give_back(self.spawn_slots);
    notify_capacity_waiters();
  }
}

void executor_core::notify_capacity_waiters() noexcept {
  // seq_cst: second half of the handshake in allocate().
  if (capacity_waiters_.load(atomics::seq_cst) != 0) {
    const std::lock_guard lock(capacity_mutex_);
    ++capacity_epoch_;
    capacity_cv_.notify_all();
  }
}

bool scheduler::schedule(task_id id) noexcept {
  executor_core& core = as_core(*this);
  if (is_worker_thread()) [[likely]] {
    return core.schedule_task(id);
  }
  return core.schedule_from_outside(id);
}

// A wake from a thread that is not one of this executor's (another
// executor's worker completing a task this one awaits, a timer thread, a
// user's thread): counted, so that the destructor waits for it to leave.
[[gnu::noinline]] bool executor_core::schedule_from_outside(task_id id) noexcept {
  // seq_cst: before any access of the wake to the executor; the destructor
  // reads the count only after the woken task's wait is over.
  foreign_wakes_.fetch_add(1, atomics::seq_cst);
  const bool scheduled = schedule_task(id);
  // release: pairs with the destructor's acquire read (step 7).
  foreign_wakes_.fetch_sub(1, atomics::release);
  return scheduled;
}

bool executor_core::schedule_task(task_id id) noexcept {
  task_slot& target = arena_.slot(id.slot);
  std::uint64_t state = target.state.load(atomics::relaxed);
  for (;;) {
    if (task_slot::generation_of(state) != id.generation) {
      return false;  // the task finished; its slot may hold another task now
    }
    if ((state & task_slot::scheduled) != 0) {
      return true;  // already runnable; this wake is absorbed
    }
    // acq_rel: release publishes what the waker wrote before wake() to the
    // next run (through the task bit, or through end-of-run's fetch_and).
    if (target.state.compare_exchange_weak(state, state | task_slot::scheduled, atomics::acq_rel,
                                           atomics::relaxed)) {
      break;
    }
  }
  if ((state & task_slot::executing) == 0) {
    make_runnable(id.slot);
  }
  return true;
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

}  // namespace canopy::detail
