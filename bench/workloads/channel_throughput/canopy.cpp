#include <atomic>
#include <canopy/channel.hpp>
#include <canopy/executor.hpp>
#include <canopy/task.hpp>
#include <cstdint>
#include <memory>

#include "harness/completion_counter.hpp"
#include "harness/result_check.hpp"
#include "harness/stopwatch.hpp"
#include "peers/canopy_executor.hpp"
#include "workloads/channel_throughput/parameters.hpp"
#include "workloads/registry.hpp"

namespace canopy::bench {
namespace {

// One repetition's shared state, on the measuring thread's stack. It
// outlives every task: each task's last touch of it is its count_one(), and
// the measuring thread waits for all producer_count + 1 of them (the consumer
// can see the end of the channel while the closing producer is still inside
// close()).
struct throughput_run {
  canopy::channel<std::uint64_t> messages{channel_throughput::capacity};
  // The last producer to finish closes the channel, as tokio's channel
  // closes when its last Sender is dropped.
  std::atomic<std::size_t> producers_left{channel_throughput::producer_count};
  // Written by the consumer before its count_one(); read after wait(), which
  // the counter's acquire-release increments order after the write.
  std::size_t received = 0;
  std::uint64_t sum = 0;
  completion_counter finished{channel_throughput::producer_count + 1};
};

canopy::task<void> produce(throughput_run& run, std::uint64_t producer) {
  const std::uint64_t first = producer * channel_throughput::messages_per_producer;
  for (std::uint64_t value = first; value < first + channel_throughput::messages_per_producer;
       ++value) {
    if (!co_await run.messages.send(value)) {
      break;  // closed early: cannot happen here, and the count check would say so
    }
  }
  // acq_rel: the decrements form one chain, so exactly one producer sees 1
  // and closes; close() itself orders the sends before the consumer's end.
  if (run.producers_left.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    run.messages.close();
  }
  run.finished.count_one();
}

canopy::task<void> consume(throughput_run& run) {
  std::size_t received = 0;
  std::uint64_t sum = 0;
  while (const std::optional<std::uint64_t> value = co_await run.messages.recv()) {
    ++received;
    sum += *value;
  }
  run.received = received;
  run.sum = sum;
  run.finished.count_one();
}

class channel_throughput_on_canopy final : public workload_instance {
 public:
  explicit channel_throughput_on_canopy(unsigned worker_count) : executor_(worker_count) {}

  repetition_result run_once() override {
    throughput_run run;
    const stopwatch clock;
    for (std::uint64_t producer = 0; producer < channel_throughput::producer_count; ++producer) {
      executor_.submit_coroutine(produce(run, producer));
    }
    executor_.submit_coroutine(consume(run));
    run.finished.wait();
    const auto elapsed = clock.elapsed();
    expect_equal("messages received", channel_throughput::message_count, run.received);
    expect_equal("sum of the messages", static_cast<long long>(channel_throughput::expected_sum),
                 static_cast<long long>(run.sum));
    return {nanoseconds_per(elapsed, channel_throughput::message_count)};
  }

 private:
  canopy_executor executor_;
};

std::unique_ptr<workload_instance> make_instance(unsigned worker_count) {
  return std::make_unique<channel_throughput_on_canopy>(worker_count);
}

const implementation_registration registered{"channel_throughput", peer::canopy, &make_instance};

}  // namespace
}  // namespace canopy::bench
