#include <canopy/fork_join.hpp>
#include <memory>

#include "harness/completion_signal.hpp"
#include "harness/result_check.hpp"
#include "harness/stopwatch.hpp"
#include "peers/canopy_executor.hpp"
#include "workloads/fib_join/parameters.hpp"
#include "workloads/registry.hpp"

namespace canopy::bench {
namespace {

// Fork/join with plain callables: canopy::join runs fib(n - 1) on this
// worker and offers fib(n - 2) as a task (a 32-byte body in a slot), then
// takes it back and runs it here unless an idle worker took it first; the
// results live on this stack frame. No coroutine frame, no join state.
long long join_fib(int n) {
  if (n < 2) {
    return n;
  }
  const auto [first, second] =
      canopy::join([n] { return join_fib(n - 1); }, [n] { return join_fib(n - 2); });
  return first + second;
}

class fib_join_on_canopy final : public workload_instance {
 public:
  explicit fib_join_on_canopy(unsigned worker_count) : executor_(worker_count) {}

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
  canopy_executor executor_;
};

std::unique_ptr<workload_instance> make_instance(unsigned worker_count) {
  return std::make_unique<fib_join_on_canopy>(worker_count);
}

const implementation_registration registered{"fib_join", peer::canopy, &make_instance};

}  // namespace
}  // namespace canopy::bench
