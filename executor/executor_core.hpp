// executor_core — the runtime behind canopy::executor: arena, summary tree,
// sleep module, workers, and the one scheduling path. Private to
// executor/ (not installed): task kinds, fork-join and the I/O drivers see
// it through its face, scheduler (scheduler.hpp), which it derives from;
// tests reach it through core_access.hpp.
//
// The class is written in four files by concern: executor_core.cpp
// (construction, shutdown, statistics), spawn_path.cpp (spawning, slot
// allocation, scheduling), worker_loop.cpp (the worker loop, work search,
// task runs, the sleep probe) and run_at_join.cpp (a pending task taken
// back at its join; fork-join's services); core_inline.hpp holds the steps
// more than one of them inlines, and scheduler.cpp the face's entries that
// forward here. Each worker_state holds a
// join_worker (join_worker.hpp), the owner of the worker's offer
// deque; fork-join (fork_join/) sits above it. The host role is
// host/host_runner.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "../signal_waker/sleep_module.hpp"
#include "../summary_tree/summary_tree.hpp"
#include "../atomics/atomics.hpp"
#include "block_pool.hpp"
#include "config.hpp"
#include "errors.hpp"
#include "idle_driver.hpp"
#include "join_worker.hpp"
#include "lifo_slot.hpp"
#include "scheduler.hpp"
#include "stats.hpp"
#include "task_arena.hpp"
#include "task_slot.hpp"
#include "trace.hpp"
#include "yield_queue.hpp"

namespace canopy::detail {

class host_runner;

class executor_core final : public scheduler, private sleep_probe {
 public:
  explicit executor_core(executor_config config);
  ~executor_core() override;
  executor_core(const executor_core&) = delete;
  executor_core& operator=(const executor_core&) = delete;

  // Fork-join's services (executor/join_worker.cpp), for the worker
  // `worker` (an index of worker_state: the owned workers, then the host).
  // Its fork-join state:
  join_worker& joins_of(std::size_t worker) noexcept { return workers_[worker]->joins; }
  [[nodiscard]] std::size_t thread_states() const noexcept { return workers_.size(); }
  worker_context& context_of(std::size_t worker) noexcept { return workers_[worker]->context; }
  // A task taken out of the worker's deque made runnable (its LIFO slot,
  // the tree), or run there (nested: on top of a waiting joiner).
  void requeue_offered_task(std::size_t worker, std::uint32_t slot) noexcept;
  void run_offered_task(std::size_t worker, std::uint32_t slot, bool nested);
  // A steal from another thread's deque, for stats and the trace.
  void count_offer_steal(std::size_t worker) noexcept;
  // A hint for sleepers that an offer waits in a deque. Inline: a fork
  // pays one load when nobody sleeps (sleep_module::new_offer).
  void announce_offer() noexcept { sleep_.new_offer(); }

  // The host role (executor/host/host_runner.hpp): the face's
  // run_as_host, host_notify_fd and run_host_until go there.
  [[nodiscard]] host_runner& host() noexcept { return *host_; }
  [[nodiscard]] const host_runner& host() const noexcept { return *host_; }
  // The face's entries of these names (scheduler.hpp documents them) come
  // here; the inline ones are what the core's own code reads.
  host_drive run_host_until(bool (*ready)(const void* context) noexcept, const void* context,
                            std::int64_t steady_deadline_ns) noexcept;
  void shutdown();
  [[nodiscard]] std::shared_ptr<const shutdown_flag> shared_shutdown_flag() const {
    return shutdown_flag_;
  }
  [[nodiscard]] executor_stats stats() const;
  void report_detached_exception(const std::exception_ptr& error) const noexcept;
  [[nodiscard]] std::size_t worker_count() const noexcept { return config_.worker_count; }
  [[nodiscard]] std::size_t capacity() const noexcept {
    return config_.max_leaves * config_.tasks_per_leaf();
  }
  [[nodiscard]] const executor_config& config() const noexcept { return config_; }
  [[nodiscard]] ext::idle_driver* driver() const noexcept { return config_.driver.get(); }

  // Internal, for tests: the protocol objects.
  summary_tree& tree() noexcept { return tree_; }
  sleep_module& sleep() noexcept { return sleep_; }
  task_arena& arena() noexcept { return arena_; }

 private:
  // The host role runs tasks with the worker loop's own steps (find_task,
  // run_task, the LIFO slot and yield queue of its worker_state).
  friend class host_runner;
  // The face's entries on the spawn, wake and join paths are the core's
  // own code (scheduler.hpp).
  friend class scheduler;

  struct worker_state {
    explicit worker_state(std::size_t root_words) : own_mask(root_words, 0) {}
    worker_context context;
    bool is_host = false;  // the host role's state: no thread of its own
    yield_queue yields;
    bool last_from_yield = false;         // fairness: a yielded task lets the tree go first
    std::vector<std::uint64_t> own_mask;  // per root word: leaves this worker owns
    std::size_t cursor_leaf = 0;          // where the last own-partition task was found
    std::size_t steal_leaf = no_leaf;     // where the last steal succeeded (no_leaf: none)
    std::uint64_t random = 0;             // xorshift state for steal start points
    task_arena::reservation spawn_slots;  // slots for this worker's spawns
    // Slots retired by coroutine take-overs of unstarted children
    // (retire_taken_over), kept for this worker's next canopy::spawns
    // (spawn_child), newest last: a fork then reuses the slot a join just
    // freed without the reservation's bit, the arena's lookup or a read of
    // the state word. Nested forks retire their children innermost first,
    // so a few entries catch almost every fork. Each is free as any free
    // slot is (state (generation, 0), vtable null) and stays marked
    // occupied in the arena, as a reserved slot does; they go back with the
    // reservation (give_back_worker_slots). Owner only.
    // The index and generation are not adjacent: side by side, GCC loads
    // them as one vector and then builds the reservation path's id in a
    // vector register too, extra work on every other spawn.
    struct kept_slot {
      std::uint32_t index;
      task_slot* target;
      std::uint32_t generation;  // the next task's
    };
    static constexpr std::uint32_t max_kept_slots = 4;
    kept_slot kept_slots[max_kept_slots] = {};
    std::uint32_t kept_count = 0;
    std::uint32_t lifo_streak = 0;        // tasks run from the LIFO slot in a row
    trace_buffer* trace = nullptr;        // this worker's trace events; null: tracing off
    std::uint32_t since_driver_poll = 0;  // tasks run since this worker last polled the driver
    // The LIFO slot: the task this worker spawned or woke last, run next
    // without touching the summary tree. Other workers may steal it
    // (exchange), so it lives on its own cache line.
    alignas(atomics::cache_line) lifo_slot lifo;
    join_worker joins;  // its offer deque (canopy::join, canopy::spawn)
    worker_counters counters;
    std::thread thread;
  };

  // Slot reservations for threads that are not workers, picked by a hash of
  // the thread id. `busy` makes one thread at a time the owner.
  struct alignas(atomics::cache_line) external_spawn_cache {
    atomics::atomic<std::uint32_t> busy{0};
    task_arena::reservation slots;
    std::size_t next_partition = 0;
  };
  static constexpr std::size_t external_cache_count = 16;

  template <spawn_placement Placement>
  spawn_status spawn_into(const task_vtable* vtable,
                          void (*construct)(void* storage, void* context), void* context,
                          spawn_mode mode, task_id* spawned);
  void worker_main(std::size_t index);
  // One search in the documented order; returns a claimed slot index.
  bool find_task(worker_state& self, std::uint32_t& slot);
  bool take_yielded(worker_state& self, std::uint32_t& slot);
  // Hands the yield queue's tasks to the tree (before a task from elsewhere runs).
  void publish_yielded(worker_state& self) noexcept;
  bool claim_in_leaf(std::size_t leaf, std::uint32_t& slot);
  bool claim_from_roots(worker_state& self, bool own_partition, std::uint32_t& slot);
  void run_task(worker_state& self, std::uint32_t slot);
  // run_task's body; run_task_traced records the run around it (tracing on).
  run_outcome run_and_retire(worker_state& self, std::uint32_t slot);
  void run_task_traced(worker_state& self, std::uint32_t slot);
  void signal_task(std::uint32_t slot) noexcept;
  // Make a SCHEDULED task runnable: into this worker's LIFO slot when called
  // on a worker of this executor (the slot's previous task goes to the tree),
  // else into the tree.
  void make_runnable(std::uint32_t slot) noexcept;
  // The same, for a caller that already knows its worker (null: not one).
  void make_runnable_from(worker_state* self, std::uint32_t slot) noexcept;
  bool steal_lifo(worker_state& self, std::uint32_t& slot) noexcept;
  // Whether some thread's deque holds an offered callable (a parker's probe).
  [[nodiscard]] bool any_offer_waiting() const noexcept;
  // claim_pending for task `id` lying below newer task entries in self's
  // deque (at most max_offered_flush of them): those go to the LIFO slot
  // and the tree, and `id` is popped. True if this thread got it.
  bool take_offered_from_below(worker_state& self, task_id id) noexcept;
  static constexpr int max_offered_flush = 64;
  static constexpr std::uint32_t no_task = lifo_slot::empty;
  static constexpr std::size_t no_leaf = ~std::size_t{0};
  static constexpr std::uint32_t max_lifo_streak = 16;
  void owe_wakes(std::uint32_t permits_granted) noexcept;
  std::size_t place_external(std::size_t after) noexcept;
  // A free slot for a spawn: from `self`'s reservation when the caller is
  // that worker (null: a thread outside, through the external caches).
  spawn_status allocate(worker_state* self, spawn_mode mode, std::uint32_t& slot);
  // A spawner at capacity on a host-driven executor: take the host role if
  // it is free and run a task (true), else run nothing (false).
  bool run_tasks_for_a_slot();
  bool reserve_anywhere(std::size_t first_partition, task_arena::reservation& into);
  bool allocate_unreserved(std::size_t first_partition, std::uint32_t& slot);
  void flush_external_caches() noexcept;
  void give_back_worker_slots(worker_state& self) noexcept;
  // A finished task's slot: into self's reservation when it can, else to
  // the arena (waking capacity waiters).
  void release_slot(worker_state& self, std::uint32_t slot) noexcept;
  // run_pending_inline's claim: the worker that took task `id` back (from
  // its LIFO slot or the tree), or null.
  // `target` is task `id`'s slot (arena_.slot(id.slot)).
  worker_state* claim_pending(task_id id, task_slot& target);
  // KeepForSpawn: an adopted task's slot may be kept for self's next
  // spawn (kept_slots: the coroutine take-over, whose awaiter most likely
  // forks again next).
  template <bool KeepForSpawn>
  pending_run run_or_adopt(task_id id, const adoption& adopt);
  // Run a task claimed by claim_pending nested in the running one.
  void run_claimed_nested(worker_state& self, std::uint32_t slot);
  // A claimed task retired unrun, as after a completed run (adoption).
  void retire_unrun(worker_state& self, task_slot& target, task_id id) noexcept;
  // retire_unrun for a coroutine child taken over by its awaiter: its slot
  // is kept for self's next canopy::spawn when there is room and nobody
  // waits for capacity, else it is released as retire_unrun's.
  void retire_taken_over(worker_state& self, task_slot& target, task_id id) noexcept;
  // The kept slots back to the arena (the worker ran out of work).
  void release_kept_slots(worker_state& self) noexcept;
  void notify_capacity_waiters() noexcept;
  // stats().live_tasks: one more spawned (per worker, or shared for threads
  // that are not workers).
  void count_spawn(worker_state* self) noexcept;  // self: null off the workers
  bool is_quiescent() noexcept;
  void destroy_leftovers();
  // destroy_leftovers' step for one slot; also wake_cancelled's during it.
  void destroy_leftover(std::uint32_t slot) noexcept;

  // schedule()'s two halves: the wake itself, and the counted wake from a
  // thread that is not this executor's (foreign_wakes_).
  bool schedule_task(task_id id) noexcept;
  bool schedule_from_outside(task_id id) noexcept;

  // The poller role's driver calls (executor/idle_driver.hpp). After each
  // task: the test of the backend stays inline (one load and branch per
  // task when no driver is set); the count and deadline check are not.
  void poll_driver_if_due(worker_state& self) noexcept {
    if (poller_backend_ != nullptr) {
      count_towards_driver_poll(self);
    }
  }
  void count_towards_driver_poll(worker_state& self) noexcept;
  void dispatch_as_poller() noexcept;

  // sleep_probe
  bool must_stay_awake(std::size_t worker) noexcept override;
  void about_to_block(std::size_t worker) noexcept override;

  executor_config config_;
  // Partitions of the arena and the tree: one per owned worker; one (the
  // host's) when the executor has none.
  std::size_t partitions_;
  // No owned workers: the host runs every task, and each ready task
  // notifies the host channel (signal_task).
  bool host_runs_everything_;
  summary_tree tree_;
  task_arena arena_;
  sleep_module sleep_;
  // Adapts config_.driver to the park_backend the poller parks on (null
  // without a driver). Declared before workers_; the workers are joined in
  // shutdown(), before any member is destroyed.
  std::unique_ptr<park_backend> poller_backend_;
  // The owned workers, then the host role's state (index worker_count).
  std::vector<std::unique_ptr<worker_state>> workers_;
  // The host role, with the last of workers_ as its worker_state. Declared
  // after workers_, so destroyed before them.
  std::unique_ptr<host_runner> host_;
  // The CPU of each owned worker when config_.pin_workers (cpu_pinning.hpp).
  std::vector<int> worker_cpus_;
  // Wakes from threads that are not this executor's, now inside schedule()
  // (schedule_from_outside); the destructor waits for zero.
  atomics::atomic<std::uint32_t> foreign_wakes_{0};
  // The trace of worker activity (executor/trace.hpp); null when off.
  std::unique_ptr<trace_recorder> trace_;
  std::unique_ptr<external_spawn_cache[]> external_caches_;

  // Shutdown flags, each written once (seq_cst; see shutdown()).
  atomics::atomic<bool> accepting_{true};
  atomics::atomic<bool> draining_{false};
  atomics::atomic<bool> stopping_{false};
  std::once_flag shutdown_once_;
  const std::shared_ptr<shutdown_flag> shutdown_flag_ = std::make_shared<shutdown_flag>();
  std::mutex drain_mutex_;
  std::condition_variable drain_cv_;

  // Spawners blocked at capacity.
  atomics::atomic<std::uint32_t> capacity_waiters_{0};
  std::mutex capacity_mutex_;
  std::condition_variable capacity_cv_;
  std::uint64_t capacity_epoch_ = 0;  // guarded by capacity_mutex_

  // External spawns between their shutdown check and their signal
  // (shutdown step 1 waits for zero).
  atomics::atomic<std::uint64_t> in_flight_{0};

  atomics::atomic<std::uint64_t> dropped_tasks_{0};
  atomics::atomic<std::uint64_t> external_spawns_{0};  // spawns from non-worker threads
};

// The core behind its face: every scheduler is an executor_core, at the
// same address (scheduler holds no data), so this is no instruction.
inline executor_core& as_core(scheduler& face) noexcept {
  return static_cast<executor_core&>(face);
}
inline const executor_core& as_core(const scheduler& face) noexcept {
  return static_cast<const executor_core&>(face);
}

}  // namespace canopy::detail
