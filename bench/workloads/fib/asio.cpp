#include "workloads/fib/asio.hpp"

#include <atomic>

#include "harness/completion_signal.hpp"
#include "harness/result_check.hpp"
#include "harness/stopwatch.hpp"
#include "peers/asio_executor.hpp"
#include "workloads/fib/parameters.hpp"

namespace canopy::bench {
namespace {

// A handler on an Asio thread_pool cannot block until its child finishes
// (see asio_executor.hpp), so fib here uses continuation passing: each call
// with n >= 2 is a heap frame holding its two children's results and a count
// of the children still pending. Whichever child finishes last adds the
// results and delivers the sum to its own parent, so the join runs on the
// thread that completed the last child, with no thread waiting.
struct fib_frame {
  fib_frame* parent;  // nullptr for the root call
  int slot_in_parent;
  std::atomic<int> pending_children{2};
  long long child_results[2] = {0, 0};
};

struct fib_run {
  explicit fib_run(asio_executor& pool) : executor(pool) {}

  asio_executor& executor;
  long long value = 0;
  completion_signal computed;
};

void deliver(fib_run& run, fib_frame* parent, int slot, long long result) {
  while (parent != nullptr) {
    parent->child_results[slot] = result;
    // acq_rel: the release publishes this child's result to the sibling
    // that decrements last; the acquire lets the last one read the
    // sibling's result. A relaxed decrement would let the sum read a
    // stale slot.
    if (parent->pending_children.fetch_sub(1, std::memory_order_acq_rel) != 1) {
      return;
    }
    result = parent->child_results[0] + parent->child_results[1];
    slot = parent->slot_in_parent;
    fib_frame* const finished = parent;
    parent = parent->parent;
    delete finished;
  }
  run.value = result;
  run.computed.notify();
}

void continuation_fib(fib_run& run, int n, fib_frame* parent, int slot) {
  if (n < 2) {
    deliver(run, parent, slot, n);
    return;
  }
  auto* const frame = new fib_frame{parent, slot};
  run.executor.submit([&run, n, frame] { continuation_fib(run, n - 1, frame, 0); });
  continuation_fib(run, n - 2, frame, 1);
}

class fib_on_asio final : public workload_instance {
 public:
  explicit fib_on_asio(unsigned worker_count) : executor_(worker_count) {}

  repetition_result run_once() override {
    fib_run run{executor_};
    const stopwatch clock;
    executor_.submit([&run] { continuation_fib(run, fib::argument, nullptr, 0); });
    run.computed.wait();
    const auto elapsed = clock.elapsed();
    expect_equal("fib value", fib::expected_value, run.value);
    return {milliseconds(elapsed)};
  }

 private:
  asio_executor executor_;
};

const implementation_registration registered{"fib", peer::asio, &make_fib_on_asio};

}  // namespace

std::unique_ptr<workload_instance> make_fib_on_asio(unsigned worker_count) {
  return std::make_unique<fib_on_asio>(worker_count);
}

}  // namespace canopy::bench
