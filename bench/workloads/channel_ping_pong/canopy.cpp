#include <canopy/channel.hpp>
#include <canopy/executor.hpp>
#include <canopy/task.hpp>
#include <cstdint>
#include <memory>

#include "harness/completion_counter.hpp"
#include "harness/result_check.hpp"
#include "harness/stopwatch.hpp"
#include "peers/canopy_executor.hpp"
#include "workloads/channel_ping_pong/parameters.hpp"
#include "workloads/registry.hpp"

namespace canopy::bench {
namespace {

// Written only by the driver and echo tasks, each field by one of them,
// before its count_one(); read by the measuring thread after wait(), which
// the counter's acquire-release increments order after those writes.
struct ping_pong_outcome {
  std::uint64_t echoed_sum = 0;
  std::size_t echoes = 0;
};

// Coroutine tasks spawned from outside with spawn_detached; each waits in
// co_await send/recv on a capacity-1 channel, holding no worker while it
// waits. The channels and the outcome outlive both tasks: the measuring
// thread destroys them only after both count_one() calls.
canopy::task<void> drive(canopy::channel<std::uint64_t>& ping, canopy::channel<std::uint64_t>& pong,
                         ping_pong_outcome& outcome, completion_counter& finished) {
  std::uint64_t sum = 0;
  for (std::uint64_t value = 0; value < channel_ping_pong::round_trips; ++value) {
    if (!co_await ping.send(value)) {
      break;  // closed: cannot happen here, and the sum check would say so
    }
    const std::optional<std::uint64_t> echo = co_await pong.recv();
    if (!echo) {
      break;
    }
    sum += *echo;
  }
  ping.close();  // ends the echo task's loop
  outcome.echoed_sum = sum;
  finished.count_one();
}

canopy::task<void> echo(canopy::channel<std::uint64_t>& ping, canopy::channel<std::uint64_t>& pong,
                        ping_pong_outcome& outcome, completion_counter& finished) {
  std::size_t echoes = 0;
  while (const std::optional<std::uint64_t> value = co_await ping.recv()) {
    if (!co_await pong.send(*value)) {
      break;
    }
    ++echoes;
  }
  outcome.echoes = echoes;
  finished.count_one();
}

class channel_ping_pong_on_canopy final : public workload_instance {
 public:
  explicit channel_ping_pong_on_canopy(unsigned worker_count) : executor_(worker_count) {}

  repetition_result run_once() override {
    canopy::channel<std::uint64_t> ping(1);
    canopy::channel<std::uint64_t> pong(1);
    ping_pong_outcome outcome;
    completion_counter finished(2);
    const stopwatch clock;
    executor_.submit_coroutine(echo(ping, pong, outcome, finished));
    executor_.submit_coroutine(drive(ping, pong, outcome, finished));
    finished.wait();
    const auto elapsed = clock.elapsed();
    expect_equal("round trips echoed", channel_ping_pong::round_trips, outcome.echoes);
    expect_equal("sum of the echoes", static_cast<long long>(channel_ping_pong::expected_sum),
                 static_cast<long long>(outcome.echoed_sum));
    return {nanoseconds_per(elapsed, channel_ping_pong::round_trips)};
  }

 private:
  canopy_executor executor_;
};

std::unique_ptr<workload_instance> make_instance(unsigned worker_count) {
  return std::make_unique<channel_ping_pong_on_canopy>(worker_count);
}

const implementation_registration registered{"channel_ping_pong", peer::canopy, &make_instance};

}  // namespace
}  // namespace canopy::bench
