#include <canopy/task.hpp>
#include <cstdint>
#include <memory>
#include <vector>

#include "harness/completion_signal.hpp"
#include "harness/result_check.hpp"
#include "harness/stopwatch.hpp"
#include "peers/canopy_executor.hpp"
#include "workloads/fan_out/parameters.hpp"
#include "workloads/registry.hpp"

namespace canopy::bench {
namespace {

canopy::task<std::uint64_t> child(std::uint64_t index) { co_return fan_out::child_value(index); }

// The root: each round spawns its children with canopy::spawn (a slot and
// a pooled frame each), then awaits all of them with one co_await
// canopy::await_all, which first runs the children no other worker has
// started, nested here, and suspends at most once for the rest. The
// handles and values vectors are reused across rounds.
canopy::task<void> fan_out_root(std::uint64_t& sum, completion_signal& computed) {
  std::vector<canopy::join_handle<std::uint64_t>> children;
  children.reserve(fan_out::children_per_round);
  std::vector<std::uint64_t> values(fan_out::children_per_round);
  std::uint64_t total = 0;
  for (std::size_t round = 0; round < fan_out::rounds; ++round) {
    children.clear();
    const std::uint64_t first = round * fan_out::children_per_round;
    for (std::size_t index = 0; index < fan_out::children_per_round; ++index) {
      children.push_back(canopy::spawn(child(first + index)));
    }
    co_await canopy::await_all(children, values.begin());
    for (const std::uint64_t value : values) {
      total += value;
    }
  }
  sum = total;
  computed.notify();
}

class fan_out_on_canopy final : public workload_instance {
 public:
  explicit fan_out_on_canopy(unsigned worker_count) : executor_(worker_count) {}

  repetition_result run_once() override {
    std::uint64_t sum = 0;
    completion_signal computed;
    const stopwatch clock;
    executor_.submit_coroutine(fan_out_root(sum, computed));
    computed.wait();
    const auto elapsed = clock.elapsed();
    // Compared as long long: a modular conversion in C++20, so exact for
    // 64-bit sums (a mismatch above 2^63 prints negative).
    expect_equal("fan_out sum", static_cast<long long>(fan_out::expected_sum),
                 static_cast<long long>(sum));
    return {nanoseconds_per(elapsed, fan_out::child_count)};
  }

 private:
  canopy_executor executor_;
};

std::unique_ptr<workload_instance> make_instance(unsigned worker_count) {
  return std::make_unique<fan_out_on_canopy>(worker_count);
}

const implementation_registration registered{"fan_out", peer::canopy, &make_instance};

}  // namespace
}  // namespace canopy::bench
