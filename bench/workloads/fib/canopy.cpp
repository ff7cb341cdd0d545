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

// Fork/join with C++20 coroutine tasks, by continuation stealing
// (co_await canopy::join of two calls): fib(n - 1) runs at once on this
// worker, the rest of the join (launching fib(n - 2)) waits on its deque
// for an idle worker to steal; when nobody did, this worker launches it
// itself, with no atomic read-modify-write beyond the deque's pop.
canopy::task<long long> fork_join_fib(int n) {
  if (n < 2) {
    co_return n;
  }
  auto [first, second] =
      co_await canopy::join(canopy::call(fork_join_fib, n - 1), canopy::call(fork_join_fib, n - 2));
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
