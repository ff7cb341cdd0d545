#include <memory>

#include "harness/completion_counter.hpp"
#include "harness/result_check.hpp"
#include "harness/stopwatch.hpp"
#include "peers/tbb_executor.hpp"
#include "workloads/registry.hpp"
#include "workloads/yield_many/parameters.hpp"

namespace canopy::bench {
namespace {

// oneTBB has no yield for a running task. Here "yield" means: the task ends
// and re-enqueues its continuation (itself, with one yield fewer to go) with
// task_arena::enqueue, onto the back of the arena's FIFO lanes, so the other
// ready tasks get to run before it does again.
class yielding_task {
 public:
  yielding_task(tbb_executor& executor, completion_counter& finished)
      : executor_(&executor), finished_(&finished) {}

  void operator()() const {
    if (yields_left_ == 0) {
      finished_->count_one();
      return;
    }
    yielding_task continuation = *this;
    --continuation.yields_left_;
    executor_->submit(continuation);
  }

 private:
  tbb_executor* executor_;
  completion_counter* finished_;
  std::size_t yields_left_ = yield_many::yields_per_task;
};

class yield_many_on_tbb final : public workload_instance {
 public:
  explicit yield_many_on_tbb(unsigned worker_count) : executor_(worker_count) {}

  repetition_result run_once() override {
    completion_counter finished(yield_many::task_count);
    const stopwatch clock;
    for (std::size_t task = 0; task < yield_many::task_count; ++task) {
      executor_.submit(yielding_task(executor_, finished));
    }
    finished.wait();
    const auto elapsed = clock.elapsed();
    expect_equal("tasks finished", yield_many::task_count, finished.count());
    return {nanoseconds_per(elapsed, yield_many::total_yields)};
  }

 private:
  tbb_executor executor_;
};

std::unique_ptr<workload_instance> make_instance(unsigned worker_count) {
  return std::make_unique<yield_many_on_tbb>(worker_count);
}

const implementation_registration registered{"yield_many", peer::tbb, &make_instance};

}  // namespace
}  // namespace canopy::bench
