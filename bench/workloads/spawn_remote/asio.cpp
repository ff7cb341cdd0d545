#include <memory>

#include "harness/completion_counter.hpp"
#include "harness/result_check.hpp"
#include "harness/stopwatch.hpp"
#include "peers/asio_executor.hpp"
#include "workloads/registry.hpp"
#include "workloads/spawn_remote/parameters.hpp"

namespace canopy::bench {
namespace {

class spawn_remote_on_asio final : public workload_instance {
 public:
  explicit spawn_remote_on_asio(unsigned worker_count) : executor_(worker_count) {}

  repetition_result run_once() override {
    completion_counter finished(spawn_remote::task_count);
    const stopwatch clock;
    for (std::size_t task = 0; task < spawn_remote::task_count; ++task) {
      executor_.submit([&finished] { finished.count_one(); });
    }
    finished.wait();
    const auto elapsed = clock.elapsed();
    expect_equal("tasks run", spawn_remote::task_count, finished.count());
    return {nanoseconds_per(elapsed, spawn_remote::task_count)};
  }

 private:
  asio_executor executor_;
};

std::unique_ptr<workload_instance> make_instance(unsigned worker_count) {
  return std::make_unique<spawn_remote_on_asio>(worker_count);
}

const implementation_registration registered{"spawn_remote", peer::asio, &make_instance};

}  // namespace
}  // namespace canopy::bench
