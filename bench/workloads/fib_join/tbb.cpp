#include <oneapi/tbb/parallel_invoke.h>

#include <memory>

#include "harness/completion_signal.hpp"
#include "harness/result_check.hpp"
#include "harness/stopwatch.hpp"
#include "peers/tbb_executor.hpp"
#include "workloads/fib_join/parameters.hpp"
#include "workloads/registry.hpp"

namespace canopy::bench {
namespace {

// oneTBB's join of two callables: tbb::parallel_invoke runs one on this
// thread and spawns the other; the waiting thread runs other tasks
// meanwhile.
long long join_fib(int n) {
  if (n < 2) {
    return n;
  }
  long long first = 0;
  long long second = 0;
  tbb::parallel_invoke([&first, n] { first = join_fib(n - 1); },
                       [&second, n] { second = join_fib(n - 2); });
  return first + second;
}

class fib_join_on_tbb final : public workload_instance {
 public:
  explicit fib_join_on_tbb(unsigned worker_count) : executor_(worker_count) {}

  repetition_result run_once() override {
    long long value = 0;
    completion_signal computed;
    const stopwatch clock;
    executor_.submit([&value, &computed] {
      value = join_fib(fib_join::argument);
      computed.notify();
    });
    computed.wait();
    const auto elapsed = clock.elapsed();
    expect_equal("fib value", fib_join::expected_value, value);
    return {milliseconds(elapsed)};
  }

 private:
  tbb_executor executor_;
};

std::unique_ptr<workload_instance> make_instance(unsigned worker_count) {
  return std::make_unique<fib_join_on_tbb>(worker_count);
}

const implementation_registration registered{"fib_join", peer::tbb, &make_instance};

}  // namespace
}  // namespace canopy::bench
