#include <canopy/task.hpp>
#include <memory>

#include "harness/completion_signal.hpp"
#include "harness/result_check.hpp"
#include "harness/stopwatch.hpp"
#include "peers/canopy_executor.hpp"
#include "workloads/fib/parameters.hpp"
#include "workloads/registry.hpp"

namespace canopy::bench {
namespace {

// Fork/join with C++20 coroutine tasks: fib(n - 1) is spawned as its own
// task, fib(n - 2) runs inline in this task (co_await on a task<T> resumes
// it by symmetric transfer, no spawn), then the child is joined with
// co_await on its handle, which suspends this task without holding a worker
// if the child has not finished yet.
canopy::task<long long> fork_join_fib(int n) {
  if (n < 2) {
    co_return n;
  }
  auto child = canopy::spawn(fork_join_fib(n - 1));
  const long long second = co_await fork_join_fib(n - 2);
  const long long first = co_await child;
  co_return first + second;
}

// The root task: computes inline, then wakes the measuring thread.
canopy::task<void> compute_root(long long& value, completion_signal& computed) {
  value = co_await fork_join_fib(fib::argument);
  computed.notify();
}

class fib_on_canopy final : public workload_instance {
 public:
  explicit fib_on_canopy(unsigned worker_count) : executor_(worker_count) {}

  repetition_result run_once() override {
    long long value = 0;
    completion_signal computed;
    const stopwatch clock;
    executor_.submit_coroutine(compute_root(value, computed));
    computed.wait();
    const auto elapsed = clock.elapsed();
    expect_equal("fib value", fib::expected_value, value);
    return {milliseconds(elapsed)};
  }

 private:
  canopy_executor executor_;
};

std::unique_ptr<workload_instance> make_instance(unsigned worker_count) {
  return std::make_unique<fib_on_canopy>(worker_count);
}

const implementation_registration registered{"fib", peer::canopy, &make_instance};

}  // namespace
}  // namespace canopy::bench
