#include <atomic>
#include <memory>

#include "harness/completion_signal.hpp"
#include "harness/result_check.hpp"
#include "harness/stopwatch.hpp"
#include "peers/canopy_executor.hpp"
#include "workloads/chained_spawn/parameters.hpp"
#include "workloads/registry.hpp"

namespace canopy::bench {
namespace {

// Lives on the measuring thread's stack for one chain.
struct chain_progress {
  std::atomic<std::size_t> tasks_run{0};
  completion_signal last_task_ran;
};

// Task number `position` (1-based) of a chain: spawns the next one detached,
// or wakes the measuring thread if it is the last.
void run_link(canopy_executor& executor, chain_progress& progress, std::size_t position) {
  // Relaxed: the measuring thread reads the count only after the last
  // link's notify, which every increment happens before.
  progress.tasks_run.fetch_add(1, std::memory_order_relaxed);
  if (position == chained_spawn::chain_length) {
    progress.last_task_ran.notify();
    return;
  }
  executor.submit([&executor, &progress, position] { run_link(executor, progress, position + 1); });
}

class chained_spawn_on_canopy final : public workload_instance {
 public:
  explicit chained_spawn_on_canopy(unsigned worker_count) : executor_(worker_count) {}

  repetition_result run_once() override {
    const stopwatch clock;
    for (std::size_t chain = 0; chain < chained_spawn::chain_count; ++chain) {
      chain_progress progress;
      executor_.submit([this, &progress] { run_link(executor_, progress, 1); });
      progress.last_task_ran.wait();
      expect_equal("tasks in chain", chained_spawn::chain_length,
                   static_cast<long long>(progress.tasks_run.load(std::memory_order_relaxed)));
    }
    return {nanoseconds_per(clock.elapsed(), chained_spawn::total_spawns)};
  }

 private:
  canopy_executor executor_;
};

std::unique_ptr<workload_instance> make_instance(unsigned worker_count) {
  return std::make_unique<chained_spawn_on_canopy>(worker_count);
}

const implementation_registration registered{"chained_spawn", peer::canopy, &make_instance};

}  // namespace
}  // namespace canopy::bench
