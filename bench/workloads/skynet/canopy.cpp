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

// The libfork program's shape on the public coroutine API: the ten
// children forked by one co_await canopy::join_n (continuation stealing:
// each child runs at once, the rest of the join waits on the deque for a
// thief), their sums written into an array.
canopy::task<std::uint64_t> skynet_node(std::uint64_t number, unsigned level) {
  if (level == skynet::depth) {
    co_return number;
  }
  const std::uint64_t stride = skynet::child_stride(level);
  std::array<std::uint64_t, skynet::fan_out> values;
  co_await canopy::join_n(
      skynet::fan_out,
      [number, stride, level](std::size_t index) {
        return canopy::call(skynet_node, number + stride * index, level + 1);
      },
      values.begin());
  std::uint64_t sum = 0;
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
