#pragma once

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>

#include <utility>

namespace canopy::bench {

// The oneTBB peer: one task_arena with exactly `worker_count` worker threads.
//
// How work gets in, and why:
// - From a thread outside the arena, submit() uses task_arena::enqueue. It
//   hands the task over without the caller joining the arena. The
//   alternative, arena.execute() + task_group::run, makes the benchmark thread
//   a worker (it runs tasks while it waits, so N+1 threads would work) and
//   pays an arena entry per call.
// - Inside a task, workloads spawn with tbb::task_group::run: it pushes onto
//   the running worker's own deque (LIFO, stolen by idle workers), the
//   cheapest spawn oneTBB has.
// - To yield, a task re-enqueues itself with task_arena::enqueue, which goes
//   to the back of the arena's shared FIFO lanes, so other ready tasks run
//   first (task_group::run would push LIFO and run the same task next).
class tbb_executor {
 public:
  // oneTBB keeps hardware_concurrency - 1 workers unless told otherwise, and
  // max_allowed_parallelism counts one external thread, hence + 1.
  // reserved_for_masters = 0: no slot is held back for external threads,
  // since none joins the arena.
  explicit tbb_executor(unsigned worker_count)
      : parallelism_(tbb::global_control::max_allowed_parallelism, worker_count + 1),
        arena_(static_cast<int>(worker_count), 0) {
    arena_.initialize();
  }

  template <typename Task>
  void submit(Task&& task) {
    arena_.enqueue(std::forward<Task>(task));
  }

  [[nodiscard]] tbb::task_arena& arena() { return arena_; }

 private:
  tbb::global_control parallelism_;
  tbb::task_arena arena_;
};

}  // namespace canopy::bench
