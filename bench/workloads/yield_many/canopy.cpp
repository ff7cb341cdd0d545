#include <canopy/task.hpp>
#include <memory>

#include "harness/completion_counter.hpp"
#include "harness/result_check.hpp"
#include "harness/stopwatch.hpp"
#include "peers/canopy_executor.hpp"
#include "workloads/registry.hpp"
#include "workloads/yield_many/parameters.hpp"

namespace canopy::bench {
namespace {

// A C++20 coroutine task with a real yield: co_await canopy::yield_now()
// ends the run, the worker queues the task behind the other ready tasks and
// resumes the same frame later. `finished` outlives the task's last access
// to it: the measuring thread waits for the last count_one().
canopy::task<void> yielding_task(completion_counter& finished) {
  for (std::size_t yield = 0; yield < yield_many::yields_per_task; ++yield) {
    co_await canopy::yield_now();
  }
  finished.count_one();
}

class yield_many_on_canopy final : public workload_instance {
 public:
  explicit yield_many_on_canopy(unsigned worker_count) : executor_(worker_count) {}

  repetition_result run_once() override {
    completion_counter finished(yield_many::task_count);
    const stopwatch clock;
    for (std::size_t task = 0; task < yield_many::task_count; ++task) {
      executor_.submit_coroutine(yielding_task(finished));
    }
    finished.wait();
    const auto elapsed = clock.elapsed();
    expect_equal("tasks finished", yield_many::task_count, finished.count());
    return {nanoseconds_per(elapsed, yield_many::total_yields)};
  }

 private:
  canopy_executor executor_;
};

std::unique_ptr<workload_instance> make_instance(unsigned worker_count) {
  return std::make_unique<yield_many_on_canopy>(worker_count);
}

const implementation_registration registered{"yield_many", peer::canopy, &make_instance};

}  // namespace
}  // namespace canopy::bench
