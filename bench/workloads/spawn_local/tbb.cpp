#include <oneapi/tbb/task_group.h>

#include <memory>

#include "harness/completion_counter.hpp"
#include "harness/result_check.hpp"
#include "harness/stopwatch.hpp"
#include "peers/tbb_executor.hpp"
#include "workloads/registry.hpp"
#include "workloads/spawn_local/parameters.hpp"

namespace canopy::bench {
namespace {

class spawn_local_on_tbb final : public workload_instance {
 public:
  explicit spawn_local_on_tbb(unsigned worker_count) : executor_(worker_count) {}

  repetition_result run_once() override {
    completion_counter finished(spawn_local::task_count);
    const stopwatch clock;
    executor_.submit([&finished] {
      // The spawning task must wait for its task_group before it ends;
      // while it waits it runs children itself. The measuring thread
      // still learns of the end from the last child, like every peer.
      tbb::task_group children;
      for (std::size_t task = 0; task < spawn_local::task_count; ++task) {
        children.run([&finished] { finished.count_one(); });
      }
      children.wait();
    });
    finished.wait();
    const auto elapsed = clock.elapsed();
    expect_equal("tasks run", spawn_local::task_count, finished.count());
    return {nanoseconds_per(elapsed, spawn_local::task_count)};
  }

 private:
  tbb_executor executor_;
};

std::unique_ptr<workload_instance> make_instance(unsigned worker_count) {
  return std::make_unique<spawn_local_on_tbb>(worker_count);
}

const implementation_registration registered{"spawn_local", peer::tbb, &make_instance};

}  // namespace
}  // namespace canopy::bench
