#include <oneapi/tbb/task_group.h>

#include <array>
#include <cstdint>
#include <memory>

#include "harness/completion_signal.hpp"
#include "harness/result_check.hpp"
#include "harness/stopwatch.hpp"
#include "peers/tbb_executor.hpp"
#include "workloads/registry.hpp"
#include "workloads/skynet/parameters.hpp"

namespace canopy::bench {
namespace {

// Children 0 .. fan_out - 2 run in a tbb::task_group, the last one on this
// thread, then wait() (running tasks meanwhile), as the fib peer forks.
std::uint64_t skynet_node(std::uint64_t number, unsigned level) {
  if (level == skynet::depth) {
    return number;
  }
  const std::uint64_t stride = skynet::child_stride(level);
  std::array<std::uint64_t, skynet::fan_out> values;
  tbb::task_group group;
  for (unsigned index = 0; index + 1 < skynet::fan_out; ++index) {
    group.run([&values, number, stride, level, index] {
      values[index] = skynet_node(number + stride * index, level + 1);
    });
  }
  values[skynet::fan_out - 1] = skynet_node(number + stride * (skynet::fan_out - 1), level + 1);
  group.wait();
  std::uint64_t sum = 0;
  for (const std::uint64_t value : values) {
    sum += value;
  }
  return sum;
}

class skynet_on_tbb final : public workload_instance {
 public:
  explicit skynet_on_tbb(unsigned worker_count) : executor_(worker_count) {}

  repetition_result run_once() override {
    std::uint64_t sum = 0;
    completion_signal computed;
    const stopwatch clock;
    executor_.submit([&sum, &computed] {
      sum = skynet_node(0, 0);
      computed.notify();
    });
    computed.wait();
    const auto elapsed = clock.elapsed();
    expect_equal("skynet sum", static_cast<long long>(skynet::expected_sum),
                 static_cast<long long>(sum));
    return {milliseconds(elapsed)};
  }

 private:
  tbb_executor executor_;
};

std::unique_ptr<workload_instance> make_instance(unsigned worker_count) {
  return std::make_unique<skynet_on_tbb>(worker_count);
}

const implementation_registration registered{"skynet", peer::tbb, &make_instance};

}  // namespace
}  // namespace canopy::bench
