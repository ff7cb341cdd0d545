#include <oneapi/tbb/task_group.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "harness/completion_signal.hpp"
#include "harness/result_check.hpp"
#include "harness/stopwatch.hpp"
#include "peers/tbb_executor.hpp"
#include "workloads/fan_out/parameters.hpp"
#include "workloads/registry.hpp"

namespace canopy::bench {
namespace {

// Each round runs its children in one tbb::task_group (pushed onto this
// worker's deque, stolen by the others) and wait()s for the group, running
// children itself meanwhile. Each child writes its value to its own slot.
std::uint64_t fan_out_rounds() {
  std::vector<std::uint64_t> values(fan_out::children_per_round);
  std::uint64_t total = 0;
  for (std::size_t round = 0; round < fan_out::rounds; ++round) {
    const std::uint64_t first = round * fan_out::children_per_round;
    tbb::task_group children;
    for (std::size_t index = 0; index < fan_out::children_per_round; ++index) {
      children.run(
          [&values, first, index] { values[index] = fan_out::child_value(first + index); });
    }
    children.wait();
    for (const std::uint64_t value : values) {
      total += value;
    }
  }
  return total;
}

class fan_out_on_tbb final : public workload_instance {
 public:
  explicit fan_out_on_tbb(unsigned worker_count) : executor_(worker_count) {}

  repetition_result run_once() override {
    std::uint64_t sum = 0;
    completion_signal computed;
    const stopwatch clock;
    executor_.submit([&sum, &computed] {
      sum = fan_out_rounds();
      computed.notify();
    });
    computed.wait();
    const auto elapsed = clock.elapsed();
    // Compared as long long: a modular conversion in C++20, so exact for
    // 64-bit sums (a mismatch above 2^63 prints negative).
    expect_equal("fan_out sum", static_cast<long long>(fan_out::expected_sum),
                 static_cast<long long>(sum));
    return {nanoseconds_per(elapsed, fan_out::child_count)};
  }

 private:
  tbb_executor executor_;
};

std::unique_ptr<workload_instance> make_instance(unsigned worker_count) {
  return std::make_unique<fan_out_on_tbb>(worker_count);
}

const implementation_registration registered{"fan_out", peer::tbb, &make_instance};

}  // namespace
}  // namespace canopy::bench
