// scheduler — the narrow face of the executor that every kind of task
// (plain callables, C++20 coroutines, Boost.Context fibers, fork-join's
// branches) and the I/O drivers build on; the runtime behind it,
// executor_core (executor_core.hpp), is private to executor/:
//   spawn_body()      allocate a slot, construct a type-erased body, schedule it
//   schedule()        make a task runnable (what a waker's wake() calls)
//   current_worker()  the worker (and the task) running on this thread
//   run_pending_inline() and its kin: take a pending child back at a join
// plus the host role's entries for executor.hpp and the few facts a task
// kind asks of its executor (worker count, driver, shutdown flag).
//
// Every scheduler is an executor_core: the class holds no data and is
// executor_core's first base, so a scheduler& is the core's own address
// and each entry is executor_core's own code, not a forwarding call (the
// entries on the spawn, wake and join paths are defined with the core's
// code, in spawn_path.cpp, run_at_join.cpp and executor_core.cpp; the rest
// forward, in scheduler.cpp). Users normally see only executor.hpp.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>

#include "../atomics/atomics.hpp"
#include "block_pool.hpp"
#include "config.hpp"
#include "errors.hpp"
#include "stats.hpp"
#include "task_slot.hpp"

namespace canopy::ext {
class idle_driver;
}  // namespace canopy::ext

namespace canopy::detail {

class scheduler;
class join_worker;
class join_state_base;
struct host_budget;

// Per worker thread: who am I, and what am I running.
struct worker_context {
  worker_context() = default;
  worker_context(const worker_context&) = delete;
  worker_context& operator=(const worker_context&) = delete;
  ~worker_context() {
    if (kept_join_state != nullptr) {
      free_block(kept_join_state, kept_join_state_size);
    }
  }

  scheduler* core = nullptr;
  std::size_t index = 0;
  task_id running{};
  bool has_running = false;
  // A task of this worker gave way to the others because its sockets kept
  // it busy (io/coop_budget.hpp): the worker then polls its driver after
  // that run, as it would at the end of its poll interval, so that the
  // readiness of other sockets is not left waiting behind the busy ones.
  // Owner thread only.
  bool driver_poll_wanted = false;
  // A join state's block that a coroutine's take-over of its unstarted
  // child gave up, kept for this worker's next coroutine spawn of that
  // size (coroutine/lazy_child.hpp, discard_unstarted and make_join_state): in
  // a fork the next spawn follows the take-over, and this skips the block
  // pool's two calls. Touched only by the thread this context is current
  // on; freed with the worker.
  void* kept_join_state = nullptr;
  std::size_t kept_join_state_size = 0;
  // This worker's fork-join state (its offer deque: canopy::join,
  // canopy::spawn), owned by the core with the worker; set once, before
  // the worker runs anything.
  join_worker* joins = nullptr;
};

// A nested run (run-at-join, a stolen join callable) changes which task the
// worker names as running; this puts the running task back when it ends.
// Only those fields change: core and index are the worker's.
class restore_running_on_exit {
 public:
  explicit restore_running_on_exit(worker_context& context) noexcept
      : context_(context), running_(context.running), has_running_(context.has_running) {}
  restore_running_on_exit(const restore_running_on_exit&) = delete;
  restore_running_on_exit& operator=(const restore_running_on_exit&) = delete;
  ~restore_running_on_exit() {
    context_.running = running_;
    context_.has_running = has_running_;
  }

 private:
  worker_context& context_;
  task_id running_;
  bool has_running_;
};

// The calling thread's worker context, or nullptr on a non-worker thread.
worker_context* current_worker() noexcept;
// The calling thread's worker-context pointer itself: the host role binds
// it while a host thread runs tasks (executor/host/host_runner.cpp).
worker_context*& current_worker_slot() noexcept;

// How spawn_body() behaves when every slot is taken.
enum class spawn_mode {
  block,  // wait for a slot (non-worker threads); at_capacity on a worker
  fail,   // return spawn_status::at_capacity at once
};

// Where spawn_body() puts the new task.
enum class spawn_placement {
  anywhere,  // the spawning worker's LIFO slot, or the summary tree
  host,      // the host channel: only the host thread runs it (executor::post)
  // A child its spawner will most likely await (canopy::spawn): the spawning
  // worker's offer deque, where the await takes it back (run_pending_inline
  // and its kin) and idle workers steal it; where there is none (a thread
  // that is not a worker, the host role, tracing on, a full deque), as
  // `anywhere`.
  offered,
};

// Whether an executor's shutdown began (its step 1), for work it handed to
// threads it does not own (a blocking call queued in a blocking pool): such
// work holds a reference, so it may read the flag after the executor is
// gone. Written once, by shutdown(); see there for the ordering.
struct shutdown_flag {
  atomics::atomic<bool> begun{false};
};

// What scheduler::run_host_until did.
enum class host_drive : std::uint8_t {
  ran,             // took the host role and ran tasks (until ready, the deadline or shutdown)
  not_needed,      // owned workers run the tasks, the caller is a worker, or shutdown began
  held_by_host,    // a run function holds the role: that thread runs the tasks
  held_by_joiner,  // another joiner drives the executor until its own wait ends: try again soon
};

class scheduler {
 public:
  scheduler(const scheduler&) = delete;
  scheduler& operator=(const scheduler&) = delete;

  // Builds a body into a fresh slot with construct(storage, context) and
  // schedules it. On failure (spawn_status::shut_down / at_capacity)
  // returns it and constructs nothing. `construct` may throw; then the slot
  // is released and the exception propagates (strong guarantee).
  spawn_status spawn_body(const task_vtable* vtable,
                          void (*construct)(void* storage, void* context), void* context,
                          spawn_mode mode, task_id* spawned,
                          spawn_placement placement = spawn_placement::anywhere);
  // spawn_body with spawn_placement::offered (canopy::spawn's entry point).
  spawn_status spawn_offered(const task_vtable* vtable,
                             void (*construct)(void* storage, void* context), void* context,
                             spawn_mode mode, task_id* spawned);
  // canopy::spawn's child on a worker of this executor: a body that is one
  // pointer (`body`, stored as it is: coroutine/lazy_child.hpp's lazy_child,
  // which builds its full body only if it runs as a task of its own),
  // offered like spawn_offered's. Written out for that body so that the
  // fork's spawn makes no indirect call; elsewhere it is spawn_offered.
  spawn_status spawn_child(const task_vtable* vtable, void* body, spawn_mode mode,
                           task_id* spawned);

  // Make task `id` runnable. A stale id (the task finished) is a no-op and
  // returns false. Any thread; from a thread that is not one of this
  // executor's, the executor must not have been destroyed before the call
  // (the destructor waits for calls already inside).
  bool schedule(task_id id) noexcept;

  // A cancel's wake (join_state_base::cancel_and_wake): schedule(id), except
  // on the thread that is destroying this executor's leftover tasks
  // (shutdown's step 5), where nothing will run the task again: there it
  // is destroyed at once, before the cancel returns. So a task destroyed
  // at shutdown that cancels what it owns (a task_group's children, the
  // child it awaits, with_timeout's child) sees them gone, their stacks
  // unwound and destructors run, before its own frame goes.
  void wake_cancelled(task_id id) noexcept;

  // The join state whose cancel ends the task running on `worker` (one of
  // this executor's, on its own thread; null: none, e.g. detached). Alive
  // as long as that task's body is (task_vtable::cancel_state).
  [[nodiscard]] const join_state_base* running_cancel_state(
      const worker_context& worker) const noexcept;

  // Called by a task running on one of this executor's workers that is about
  // to wait for task `id`: if `id` is runnable but not started — in this
  // worker's LIFO slot or with its bit set in the tree — take it and run it
  // now, nested on this worker (oneTBB's "run the child at the join").
  // Returns whether a run happened; the caller then re-checks readiness. On
  // any other thread, or if someone else took the task first, returns false.
  bool run_pending_inline(task_id id);

  // Taking a pending task's body out of its slot, for a waiting task that
  // then runs that body itself, as a plain call, as part of its own run
  // (fiber/fiber_task: a never-started fiber run on the waiting fiber's
  // stack). Only a body of vtable `kind` (a trivially copyable body type),
  // and only if `accept(storage)` agrees (null: any such body).
  struct adoption {
    const task_vtable* kind = nullptr;
    bool (*accept)(const void* storage) noexcept = nullptr;
    void* body = nullptr;  // where the body is copied to (null: not copied)
    std::size_t body_size = 0;
  };
  enum class pending_run : std::uint8_t { none, ran, adopted };
  // As run_pending_inline, but a task that `adopt` accepts is not run: its
  // body is copied to adopt.body and its slot retired as if the task had
  // completed (its id turns stale). The caller then owns the body: it must
  // run it to its end and call kind->destroy(body, task_end::completed)
  // (or do what that call would: coroutine/join_await.hpp needs no copy).
  // A task it does not accept runs nested as in run_pending_inline, and so
  // does every task while tracing is on, so that the trace shows the run.
  pending_run run_or_adopt_pending(task_id id, const adoption& adopt);
  // The same, for a coroutine awaiting a join handle (coroutine/join_await.hpp).
  pending_run take_over_pending(task_id id, const adoption& adopt);
  // canopy::join's take-back (fork_join/join.hpp): claims task `id` as
  // run_pending_inline does and, when this thread got it, retires its slot
  // as if the task had completed without running or destroying its body
  // (pending_run::adopted): the caller then does the task's work itself, so
  // the body must need no destroy call after a completed run. With tracing
  // on it runs the task nested instead (pending_run::ran), so the trace
  // shows the run. pending_run::none: another worker has it, or it ended.
  pending_run take_back_unrun(task_id id);

  // get()/wait_for() on a handle of this executor, or canopy::join, from a
  // thread that is not one of its workers: with no owned workers nobody
  // else would run the tasks, so the joiner takes the host role and runs
  // tasks until ready(context) holds, the deadline passes (steady-clock ns,
  // negative: none) or shutdown begins. Otherwise it runs nothing and says
  // why (host_drive); on held_by_joiner the caller waits a little
  // (host_role_retry) and calls again, since the other joiner hands the
  // role back when its own wait ends, whatever is left to run.
  host_drive run_host_until(bool (*ready)(const void* context) noexcept, const void* context,
                            std::int64_t steady_deadline_ns) noexcept;
  static constexpr std::chrono::microseconds host_role_retry{500};
  // The host role's run functions (executor::run_once/.../run document
  // each; executor/host/host_runner.hpp) and its notify descriptor.
  std::size_t run_as_host(const host_budget& budget);
  [[nodiscard]] int host_notify_fd() const noexcept;

  // Stop accepting tasks, finish according to the policy, join the workers,
  // destroy what is left. Idempotent. Not from a worker thread
  // (std::system_error with errc::worker_thread).
  void shutdown();
  // This executor's shutdown_flag (a reference; any thread).
  [[nodiscard]] std::shared_ptr<const shutdown_flag> shared_shutdown_flag() const;

  [[nodiscard]] executor_stats stats() const;

  // Deliver an exception thrown by a task nobody joins (config's handler,
  // or a line on stderr). Called on the worker thread that ran the task.
  void report_detached_exception(const std::exception_ptr& error) const noexcept;
  [[nodiscard]] std::size_t worker_count() const noexcept;
  // The most tasks that can be alive at once.
  [[nodiscard]] std::size_t capacity() const noexcept;
  [[nodiscard]] const executor_config& config() const noexcept;
  [[nodiscard]] bool is_worker_thread() const noexcept;

  // The driver the poller worker waits on (executor_config::driver), or null.
  [[nodiscard]] ext::idle_driver* driver() const noexcept;

 protected:
  // Only executor_core is a scheduler (make_scheduler below builds one).
  scheduler() = default;
  ~scheduler() = default;
};

// An executor's runtime, and its end (the core's destructor runs
// shutdown()): executor.hpp owns one through owned_scheduler.
struct scheduler_deleter {
  void operator()(scheduler* core) const noexcept;
};
using owned_scheduler = std::unique_ptr<scheduler, scheduler_deleter>;
[[nodiscard]] owned_scheduler make_scheduler(executor_config config);

}  // namespace canopy::detail
