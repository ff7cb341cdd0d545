#include <array>
#include <canopy/task.hpp>
#include <cstdint>
#include <memory>

#include "harness/completion_signal.hpp"
#include "harness/result_check.hpp"
#include "harness/stopwatch.hpp"
#include "peers/canopy_executor.hpp"
#include "workloads/registry.hpp"
#include "workloads/skynet/parameters.hpp"

namespace canopy::bench {
namespace {

// The libfork program's shape on the public coroutine API: children
// 0 .. fan_out - 2 spawned as tasks (canopy::spawn), the last one run inline
// (co_await on a task<T>: no spawn), then the spawned ones awaited in one
// suspension (canopy::await_all), which holds no worker while they run.
canopy::task<std::uint64_t> skynet_node(std::uint64_t number, unsigned level) {
  if (level == skynet::depth) {
    co_return number;
  }
  const std::uint64_t stride = skynet::child_stride(level);
  std::array<canopy::join_handle<std::uint64_t>, skynet::fan_out - 1> spawned;
  for (unsigned index = 0; index + 1 < skynet::fan_out; ++index) {
    spawned[index] = canopy::spawn(skynet_node(number + stride * index, level + 1));
  }
  std::uint64_t sum = co_await skynet_node(number + stride * (skynet::fan_out - 1), level + 1);
  std::array<std::uint64_t, skynet::fan_out - 1> values;
  co_await canopy::await_all(spawned, values.begin());
  for (const std::uint64_t value : values) {
    sum += value;
  }
  co_return sum;
}

canopy::task<void> skynet_root(std::uint64_t& sum, completion_signal& computed) {
  sum = co_await skynet_node(0, 0);
  computed.notify();
}

class skynet_on_canopy final : public workload_instance {
 public:
  explicit skynet_on_canopy(unsigned worker_count) : executor_(worker_count) {}

  repetition_result run_once() override {
    std::uint64_t sum = 0;
    completion_signal computed;
    const stopwatch clock;
    executor_.submit_coroutine(skynet_root(sum, computed));
    computed.wait();
    const auto elapsed = clock.elapsed();
    expect_equal("skynet sum", static_cast<long long>(skynet::expected_sum),
                 static_cast<long long>(sum));
    return {milliseconds(elapsed)};
  }

 private:
  canopy_executor executor_;
};

std::unique_ptr<workload_instance> make_instance(unsigned worker_count) {
  return std::make_unique<skynet_on_canopy>(worker_count);
}

const implementation_registration registered{"skynet", peer::canopy, &make_instance};

}  // namespace
}  // namespace canopy::bench
