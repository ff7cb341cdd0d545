#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "harness/completion_signal.hpp"
#include "harness/result_check.hpp"
#include "harness/stopwatch.hpp"
#include "peers/asio_executor.hpp"
#include "workloads/fan_out/parameters.hpp"
#include "workloads/registry.hpp"

namespace canopy::bench {
namespace {

// A handler cannot wait for the handlers it posts (asio_executor.hpp), so
// the join is a countdown: each child writes its value to its own slot and
// decrements the round's count; the child that takes it to zero adds the
// round's values up and posts the next round's children from its handler.
struct fan_out_run {
  explicit fan_out_run(asio_executor& pool) : executor(pool) {}

  asio_executor& executor;
  std::vector<std::uint64_t> values = std::vector<std::uint64_t>(fan_out::children_per_round);
  std::atomic<std::size_t> pending{0};
  std::size_t round = 0;
  std::uint64_t total = 0;
  completion_signal computed;
};

void start_round(fan_out_run& run);

void finish_child(fan_out_run& run, std::size_t index) {
  run.values[index] = fan_out::child_value(run.round * fan_out::children_per_round + index);
  // acq_rel: release publishes this child's value to the last child; the
  // last one's acquire makes every value (and the round number written
  // before the posts) readable before it sums them.
  if (run.pending.fetch_sub(1, std::memory_order_acq_rel) != 1) {
    return;
  }
  for (const std::uint64_t value : run.values) {
    run.total += value;
  }
  if (++run.round == fan_out::rounds) {
    run.computed.notify();
    return;
  }
  start_round(run);
}

void start_round(fan_out_run& run) {
  run.pending.store(fan_out::children_per_round, std::memory_order_relaxed);
  for (std::size_t index = 0; index < fan_out::children_per_round; ++index) {
    run.executor.submit([&run, index] { finish_child(run, index); });
  }
}

class fan_out_on_asio final : public workload_instance {
 public:
  explicit fan_out_on_asio(unsigned worker_count) : executor_(worker_count) {}

  repetition_result run_once() override {
    fan_out_run run{executor_};
    const stopwatch clock;
    executor_.submit([&run] { start_round(run); });
    run.computed.wait();
    const auto elapsed = clock.elapsed();
    // Compared as long long: a modular conversion in C++20, so exact for
    // 64-bit sums (a mismatch above 2^63 prints negative).
    expect_equal("fan_out sum", static_cast<long long>(fan_out::expected_sum),
                 static_cast<long long>(run.total));
    return {nanoseconds_per(elapsed, fan_out::child_count)};
  }

 private:
  asio_executor executor_;
};

std::unique_ptr<workload_instance> make_instance(unsigned worker_count) {
  return std::make_unique<fan_out_on_asio>(worker_count);
}

const implementation_registration registered{"fan_out", peer::asio, &make_instance};

}  // namespace
}  // namespace canopy::bench
