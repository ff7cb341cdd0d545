#include <canopy/fiber.hpp>
#include <memory>

#include "harness/completion_signal.hpp"
#include "harness/result_check.hpp"
#include "harness/stopwatch.hpp"
#include "peers/canopy_executor.hpp"
#include "workloads/fib/parameters.hpp"
#include "workloads/registry.hpp"

namespace canopy::bench {
namespace {

// Fork/join on Boost.Context fibers, written as plain recursion:
// fib(n - 1) is spawned as its own fiber, fib(n - 2) is an ordinary call on
// this fiber's stack, then this_fiber::await joins the child, suspending
// only this fiber (its worker runs other tasks meanwhile). Fibers get the
// default stack size (stack_pool::default_stack_size); a child that has not
// started by the join runs on its parent's stack, which has room for it
// (docs/coroutines.md, "A child that runs on its awaiter's stack").
long long fork_join_fib(int n) {
  if (n < 2) {
    return n;
  }
  auto child = canopy::spawn(canopy::fiber([n] { return fork_join_fib(n - 1); }));
  const long long second = fork_join_fib(n - 2);
  const long long first = canopy::this_fiber::await(child);
  return first + second;
}

class fib_fiber_on_canopy final : public workload_instance {
 public:
  explicit fib_fiber_on_canopy(unsigned worker_count) : executor_(worker_count) {}

  repetition_result run_once() override {
    long long value = 0;
    completion_signal computed;
    const stopwatch clock;
    // The root fiber is detached: the measuring thread waits on the
    // completion signal like every peer.
    executor_.pool().spawn_detached(canopy::fiber([&value, &computed] {
      value = fork_join_fib(fib::argument);
      computed.notify();
    }));
    computed.wait();
    const auto elapsed = clock.elapsed();
    expect_equal("fib value", fib::expected_value, value);
    return {milliseconds(elapsed)};
  }

 private:
  canopy_executor executor_;
};

std::unique_ptr<workload_instance> make_instance(unsigned worker_count) {
  return std::make_unique<fib_fiber_on_canopy>(worker_count);
}

const implementation_registration registered{"fib_fiber", peer::canopy, &make_instance};

}  // namespace
}  // namespace canopy::bench
