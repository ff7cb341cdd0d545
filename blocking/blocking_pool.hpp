// blocking_pool — a growable, bounded pool of threads for calls that block
// (a blocking library function, a file read, getaddrinfo), so that they never
// block a worker of an executor. run_blocking (blocking/run_blocking.hpp)
// submits to it; a task then waits without holding its worker.
//
// Threads: started on demand, one per call while fewer than
// config.max_threads exist and none is idle; a thread idle for
// config.idle_timeout exits. At the maximum, calls queue (FIFO); with
// config.max_queued set, a call that finds that many already queued is
// refused with std::system_error(errc::at_capacity).
//
// Which pool: a blocking_pool built with an executor attaches itself to it
// (at most one per executor; a second throws std::logic_error), and
// run_blocking in that executor's tasks uses it; other executors use the
// process-wide default pool, made on first use with a default config and
// shut down at process exit (process_default()).
//
// Starting a call: a thread takes the oldest queued call and starts it only
// if blocking_job::try_start() holds (under the pool's mutex): its waiting
// task is still waiting (not destroyed, and no cancel requested for it,
// even one that its worker has not acted on yet) and the
// shutdown of the executor whose task submitted it has not begun (a flag the
// executor sets at its shutdown's first step, before it destroys any task:
// executor_core::shutdown). Otherwise the call is dropped unrun (counted in
// stats().dropped) and its task is left to the shutdown or the cancel that
// destroys it. A call whose executor's shutdown began is also refused when
// submitted (errc::shut_down). This holds for an attached pool and for the
// default pool, which serves many executors.
//
// Shutdown (shutdown(), the destructor; the default pool at exit), in order:
//   1. new calls are refused (std::system_error, errc::shut_down);
//   2. calls still queued are failed: their waiting tasks resume with that
//      same error (or, if the task is gone, they are dropped);
//   3. running calls are waited for (a thread cannot be interrupted; their
//      std::stop_token is requested), then every thread is joined.
// An attached pool shuts its executor down first (executor::shutdown is
// idempotent): from its first step no queued call starts (above); the tasks
// waiting on its calls are destroyed as any suspended task at shutdown
// (their handles report task_cancelled), which requests stop on their
// running calls; then steps 1-3. Declared after the executor, as
// reactor_timers is, its destructor does all of this. Destroy or shut it
// down from a thread that is not a worker of its executor.
//
// Thread safety: every member may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <stop_token>
#include <thread>
#include <utility>
#include <vector>

namespace canopy {

class executor;
namespace detail {
class scheduler;
class join_state_base;
struct shutdown_flag;  // executor/scheduler.hpp
}  // namespace detail

struct blocking_pool_config {
  // Threads at most (tokio: 512). 1..65536.
  std::size_t max_threads = 512;
  // Calls waiting for a thread at most; 0: unbounded.
  std::size_t max_queued = 0;
  // How long an idle thread waits for a call before it exits (tokio: 10 s).
  // 1 ms..1 day.
  std::chrono::milliseconds idle_timeout{10'000};

  // Throws std::invalid_argument naming the first invalid field.
  void validate() const;
};

// A snapshot. A call is counted as completed (and stops counting as
// running) just after its task is woken, so a snapshot taken at once after
// the co_await may not include it yet.
struct blocking_pool_stats {
  std::size_t threads = 0;      // alive now
  std::size_t idle = 0;         // alive and waiting for a call
  std::size_t running = 0;      // calls running now
  std::size_t queued = 0;       // calls waiting for a thread
  std::uint64_t started = 0;    // threads started since construction
  std::uint64_t exited = 0;     // threads that exited (idle timeout or shutdown)
  std::uint64_t completed = 0;  // calls that ran (value or exception)
  std::uint64_t dropped = 0;    // calls never run: their task was gone, or the pool shut down
};

namespace detail {

// One submitted call, shared by the pool (until it ran or was dropped) and
// the waiting task (until its wait ended): whichever lets go last frees it.
class blocking_job {
 public:
  // `executor_shutdown`: the shutdown flag of the executor whose task
  // submits the call.
  // `cancel_state`: the join state whose cancel ends the submitting task
  // (scheduler::running_cancel_state; null: none). Read only while the
  // task has not abandoned the call, which it does before its body lets
  // go of that state.
  blocking_job(std::shared_ptr<const detail::shutdown_flag> executor_shutdown,
               const detail::join_state_base* cancel_state) noexcept
      : executor_shutdown_(std::move(executor_shutdown)), cancel_state_(cancel_state) {}
  blocking_job(const blocking_job&) = delete;
  blocking_job& operator=(const blocking_job&) = delete;
  virtual ~blocking_job() = default;
  // Runs the call on a pool thread; the job finishes by itself (stores the
  // outcome, wakes the task if it still waits).
  virtual void run() noexcept = 0;
  // Never run: the pool shut down first. Fails the waiting task.
  virtual void fail_shut_down() noexcept = 0;

  // Whether a pool thread may start the call, and if so the call counts as
  // started from here on: false once the waiting task is gone (its wait
  // ended unfinished: it was destroyed, or its cancel took effect), a
  // cancel was requested for it (its worker may not have acted on it yet),
  // or its executor's shutdown began (which will destroy the task). The one
  // decision every pool thread makes, under the pool's mutex, before it
  // starts a call; a call refused here is dropped unrun.
  [[nodiscard]] bool try_start() noexcept;
  // Whether try_start() would refuse now, and will forever: the waiting
  // task is gone, its cancel was requested, or its executor's shutdown
  // began (each only ever becomes true). Marks nothing.
  [[nodiscard]] bool never_starts() const noexcept;
  // Whether the submitting executor's shutdown began (submit refuses then).
  [[nodiscard]] bool executor_shutting_down() const noexcept;

 protected:
  // The task is gone: a call that has not started never starts.
  void mark_abandoned() noexcept;
  // The task leaves (cancelled, destroyed): true if the call had not
  // started, and now never starts; false if it started (the task must
  // stay until it ends: the call may use the task's memory).
  bool abandon_unstarted() noexcept;

 private:
  // Guards abandoned_ and started_, and with them the life of
  // *cancel_state_: try_start() reads the state only before
  // mark_abandoned() or abandon_unstarted(), which the task passes before
  // its state can be freed.
  mutable std::mutex guard_;
  bool abandoned_ = false;
  bool started_ = false;
  std::shared_ptr<const detail::shutdown_flag> executor_shutdown_;
  const detail::join_state_base* cancel_state_;
};

}  // namespace detail

class blocking_pool {
 public:
  // Attached to `pool`: run_blocking in its tasks uses this pool.
  explicit blocking_pool(executor& pool, blocking_pool_config config = {});
  ~blocking_pool();
  blocking_pool(const blocking_pool&) = delete;
  blocking_pool& operator=(const blocking_pool&) = delete;

  // Steps 1-3 above (and the executor's shutdown first when attached).
  // Idempotent. Not from one of this pool's own threads (std::logic_error).
  void shutdown();

  [[nodiscard]] blocking_pool_stats stats() const;
  [[nodiscard]] const blocking_pool_config& config() const noexcept { return config_; }

  // The pool run_blocking uses in `core`'s tasks: the attached one, or the
  // process default.
  static blocking_pool& for_executor(detail::scheduler& core);
  // The process-wide pool, made on first use (default config).
  static blocking_pool& process_default();

  // Queue a call (run_blocking's step). Throws std::system_error:
  // errc::shut_down after this pool's or the job's executor's shutdown
  // began, errc::at_capacity when max_queued calls already wait.
  void submit(std::shared_ptr<detail::blocking_job> job);

 private:
  explicit blocking_pool(blocking_pool_config config);  // the process default
  void thread_main(std::list<std::thread>::iterator self);
  // Under mutex_: moves the queued calls that will never start into
  // `dropped` (released by the caller outside the lock) and counts them.
  void drop_never_starting(std::vector<std::shared_ptr<detail::blocking_job>>& dropped);
  static void reap(std::vector<std::thread>& finished);

  blocking_pool_config config_;
  detail::scheduler* attached_ = nullptr;

  mutable std::mutex mutex_;
  std::condition_variable work_;  // a call queued, or shutdown
  std::condition_variable all_exited_;
  std::deque<std::shared_ptr<detail::blocking_job>> queue_;
  std::list<std::thread> threads_;   // alive (each erases itself as it exits)
  std::vector<std::thread> exited_;  // exited, not joined yet
  bool shut_down_ = false;
  blocking_pool_stats stats_;
};

}  // namespace canopy
