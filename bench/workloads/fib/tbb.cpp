#include "workloads/fib/tbb.hpp"

#include <oneapi/tbb/task_group.h>

#include "harness/completion_signal.hpp"
#include "harness/result_check.hpp"
#include "harness/stopwatch.hpp"
#include "peers/tbb_executor.hpp"
#include "workloads/fib/parameters.hpp"

namespace canopy::bench {
namespace {

// Fork/join as oneTBB intends it: a task may wait for its task_group, and the
// waiting thread runs other tasks meanwhile.
long long fork_join_fib(int n) {
  if (n < 2) {
    return n;
  }
  long long first = 0;
  tbb::task_group child;
  child.run([&first, n] { first = fork_join_fib(n - 1); });
  const long long second = fork_join_fib(n - 2);
  child.wait();
  return first + second;
}

class fib_on_tbb final : public workload_instance {
 public:
  explicit fib_on_tbb(unsigned worker_count) : executor_(worker_count) {}

  repetition_result run_once() override {
    long long value = 0;
    completion_signal computed;
    const stopwatch clock;
    executor_.submit([&value, &computed] {
      value = fork_join_fib(fib::argument);
      computed.notify();
    });
    computed.wait();
    const auto elapsed = clock.elapsed();
    expect_equal("fib value", fib::expected_value, value);
    return {milliseconds(elapsed)};
  }

 private:
  tbb_executor executor_;
};

const implementation_registration registered{"fib", peer::tbb, &make_fib_on_tbb};

}  // namespace

std::unique_ptr<workload_instance> make_fib_on_tbb(unsigned worker_count) {
  return std::make_unique<fib_on_tbb>(worker_count);
}

}  // namespace canopy::bench
