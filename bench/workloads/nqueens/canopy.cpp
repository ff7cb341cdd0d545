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

// The libfork program's shape on the public coroutine API: one child per
// safe column of the next row (the board copied into the child's frame),
// all forked by one co_await canopy::join_n (continuation stealing).
canopy::task<long long> count_solutions(nqueens::board placed, int row) {
  if (row == nqueens::size) {
    co_return 1;
  }
  std::array<int, nqueens::size> columns;
  std::size_t child_count = 0;
  for (int column = 0; column < nqueens::size; ++column) {
    if (nqueens::column_safe(placed, row, column)) {
      columns[child_count++] = column;
    }
  }
  std::array<long long, nqueens::size> counts;
  co_await canopy::join_n(
      child_count,
      [&placed, &columns, row](std::size_t index) {
        return canopy::call(count_solutions, nqueens::with_queen(placed, row, columns[index]),
                            row + 1);
      },
      counts.begin());
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
