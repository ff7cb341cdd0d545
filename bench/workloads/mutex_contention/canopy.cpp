#include <canopy/executor.hpp>
#include <canopy/sync.hpp>
#include <canopy/task.hpp>
#include <cstdint>
#include <memory>

#include "harness/completion_counter.hpp"
#include "harness/result_check.hpp"
#include "harness/stopwatch.hpp"
#include "peers/canopy_executor.hpp"
#include "workloads/mutex_contention/parameters.hpp"
#include "workloads/registry.hpp"

namespace canopy::bench {
namespace {

// One repetition's shared state, on the measuring thread's stack; each
// task's last touch of it is its count_one(), and the measuring thread
// waits for all of them.
struct contention_run {
  canopy::mutex lock;
  // Guarded by `lock`; read by the measuring thread after wait().
  std::uint64_t counter = 0;
  completion_counter finished{mutex_contention::task_count};
};

// A coroutine task spawned from outside; co_await lock() suspends it (no
// worker held) while another task holds the mutex, and the guard unlocks at
// the end of each iteration, handing the lock to the first waiter.
canopy::task<void> contend(contention_run& run) {
  for (std::size_t round = 0; round < mutex_contention::locks_per_task; ++round) {
    const canopy::mutex::guard held = co_await run.lock.lock();
    ++run.counter;
  }
  run.finished.count_one();
}

class mutex_contention_on_canopy final : public workload_instance {
 public:
  explicit mutex_contention_on_canopy(unsigned worker_count) : executor_(worker_count) {}

  repetition_result run_once() override {
    contention_run run;
    const stopwatch clock;
    for (std::size_t task = 0; task < mutex_contention::task_count; ++task) {
      executor_.submit_coroutine(contend(run));
    }
    run.finished.wait();
    const auto elapsed = clock.elapsed();
    expect_equal("acquisitions", mutex_contention::acquisitions,
                 static_cast<long long>(run.counter));
    return {nanoseconds_per(elapsed, mutex_contention::acquisitions)};
  }

 private:
  canopy_executor executor_;
};

std::unique_ptr<workload_instance> make_instance(unsigned worker_count) {
  return std::make_unique<mutex_contention_on_canopy>(worker_count);
}

const implementation_registration registered{"mutex_contention", peer::canopy, &make_instance};

}  // namespace
}  // namespace canopy::bench
