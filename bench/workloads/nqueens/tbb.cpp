#include <oneapi/tbb/task_group.h>

#include <array>
#include <memory>

#include "harness/completion_signal.hpp"
#include "harness/result_check.hpp"
#include "harness/stopwatch.hpp"
#include "peers/tbb_executor.hpp"
#include "workloads/nqueens/parameters.hpp"
#include "workloads/registry.hpp"

namespace canopy::bench {
namespace {

// One tbb::task_group task per safe column of the next row (every one
// forked, none run inline), then wait() (running tasks meanwhile), as the
// suite's libfork program forks.
long long count_solutions(const nqueens::board& placed, int row) {
  if (row == nqueens::size) {
    return 1;
  }
  std::array<nqueens::board, nqueens::size> boards;
  std::array<long long, nqueens::size> counts{};
  tbb::task_group group;
  for (int column = 0; column < nqueens::size; ++column) {
    if (nqueens::column_safe(placed, row, column)) {
      boards[column] = nqueens::with_queen(placed, row, column);
      group.run([&boards, &counts, column, row] {
        counts[column] = count_solutions(boards[column], row + 1);
      });
    }
  }
  group.wait();
  long long solutions = 0;
  for (const long long count : counts) {
    solutions += count;
  }
  return solutions;
}

class nqueens_on_tbb final : public workload_instance {
 public:
  explicit nqueens_on_tbb(unsigned worker_count) : executor_(worker_count) {}

  repetition_result run_once() override {
    long long solutions = 0;
    completion_signal computed;
    const stopwatch clock;
    executor_.submit([&solutions, &computed] {
      solutions = count_solutions(nqueens::board{}, 0);
      computed.notify();
    });
    computed.wait();
    const auto elapsed = clock.elapsed();
    expect_equal("nqueens solutions", nqueens::expected_solutions, solutions);
    return {milliseconds(elapsed)};
  }

 private:
  tbb_executor executor_;
};

std::unique_ptr<workload_instance> make_instance(unsigned worker_count) {
  return std::make_unique<nqueens_on_tbb>(worker_count);
}

const implementation_registration registered{"nqueens", peer::tbb, &make_instance};

}  // namespace
}  // namespace canopy::bench
