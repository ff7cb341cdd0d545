#include <memory>

#include "harness/completion_counter.hpp"
#include "harness/result_check.hpp"
#include "harness/stopwatch.hpp"
#include "peers/asio_executor.hpp"
#include "workloads/registry.hpp"
#include "workloads/spawn_local/parameters.hpp"

namespace canopy::bench {
namespace {

class spawn_local_on_asio final : public workload_instance {
 public:
  explicit spawn_local_on_asio(unsigned worker_count) : executor_(worker_count) {}

  repetition_result run_once() override {
    completion_counter finished(spawn_local::task_count);
    const stopwatch clock;
    executor_.submit([this, &finished] {
      for (std::size_t task = 0; task < spawn_local::task_count; ++task) {
        executor_.submit([&finished] { finished.count_one(); });
      }
    });
    finished.wait();
    const auto elapsed = clock.elapsed();
    expect_equal("tasks run", spawn_local::task_count, finished.count());
    return {nanoseconds_per(elapsed, spawn_local::task_count)};
  }

 private:
  asio_executor executor_;
};

std::unique_ptr<workload_instance> make_instance(unsigned worker_count) {
  return std::make_unique<spawn_local_on_asio>(worker_count);
}

const implementation_registration registered{"spawn_local", peer::asio, &make_instance};

}  // namespace
}  // namespace canopy::bench
