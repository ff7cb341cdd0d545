#include <array>
#include <canopy/task.hpp>
#include <memory>
#include <span>

#include "harness/completion_signal.hpp"
#include "harness/result_check.hpp"
#include "harness/stopwatch.hpp"
#include "peers/canopy_executor.hpp"
#include "workloads/nqueens/parameters.hpp"
#include "workloads/registry.hpp"

namespace canopy::bench {
namespace {

// The libfork program's shape on the public coroutine API: one child task
// per safe column of the next row, every one forked (none run inline) (canopy::spawn, the board copied into
// the child's frame), then all of them awaited in one suspension
// (canopy::await_all), which holds no worker while they run.
canopy::task<long long> count_solutions(nqueens::board placed, int row) {
  if (row == nqueens::size) {
    co_return 1;
  }
  std::array<canopy::join_handle<long long>, nqueens::size> spawned;
  std::size_t child_count = 0;
  for (int column = 0; column < nqueens::size; ++column) {
    if (nqueens::column_safe(placed, row, column)) {
      spawned[child_count++] =
          canopy::spawn(count_solutions(nqueens::with_queen(placed, row, column), row + 1));
    }
  }
  std::array<long long, nqueens::size> counts;
  std::span<canopy::join_handle<long long>> children(spawned.data(), child_count);
  co_await canopy::await_all(children, counts.begin());
  long long solutions = 0;
  for (std::size_t index = 0; index < child_count; ++index) {
    solutions += counts[index];
  }
  co_return solutions;
}

canopy::task<void> nqueens_root(long long& solutions, completion_signal& computed) {
  solutions = co_await count_solutions(nqueens::board{}, 0);
  computed.notify();
}

class nqueens_on_canopy final : public workload_instance {
 public:
  explicit nqueens_on_canopy(unsigned worker_count) : executor_(worker_count) {}

  repetition_result run_once() override {
    long long solutions = 0;
    completion_signal computed;
    const stopwatch clock;
    executor_.submit_coroutine(nqueens_root(solutions, computed));
    computed.wait();
    const auto elapsed = clock.elapsed();
    expect_equal("nqueens solutions", nqueens::expected_solutions, solutions);
    return {milliseconds(elapsed)};
  }

 private:
  canopy_executor executor_;
};

std::unique_ptr<workload_instance> make_instance(unsigned worker_count) {
  return std::make_unique<nqueens_on_canopy>(worker_count);
}

const implementation_registration registered{"nqueens", peer::canopy, &make_instance};

}  // namespace
}  // namespace canopy::bench
