#include <oneapi/tbb/task_group.h>

#include <array>
#include <cstdint>
#include <memory>

#include "harness/completion_signal.hpp"
#include "harness/result_check.hpp"
#include "harness/stopwatch.hpp"
#include "peers/tbb_executor.hpp"
#include "workloads/irregular_tree/parameters.hpp"
#include "workloads/registry.hpp"

namespace canopy::bench {
namespace {

struct subtree {
  std::uint64_t total = 0;
  std::size_t nodes = 0;
};

// A node runs children 1..c-1 in a tbb::task_group, does its own busy
// loop and child 0 on this thread, then wait()s (running tasks meanwhile).
subtree visit(std::uint64_t seed, unsigned depth) {
  const unsigned children = irregular_tree::child_count(seed, depth);
  std::array<subtree, irregular_tree::max_children> values;
  tbb::task_group group;
  for (unsigned index = 1; index < children; ++index) {
    group.run([&values, seed, depth, index] {
      values[index] = visit(irregular_tree::child_seed(seed, index), depth + 1);
    });
  }
  subtree result{irregular_tree::node_work(seed), 1};
  if (children > 0) {
    values[0] = visit(irregular_tree::child_seed(seed, 0), depth + 1);
  }
  group.wait();
  for (unsigned index = 0; index < children; ++index) {
    result.total += values[index].total;
    result.nodes += values[index].nodes;
  }
  return result;
}

class irregular_tree_on_tbb final : public workload_instance {
 public:
  explicit irregular_tree_on_tbb(unsigned worker_count) : executor_(worker_count) {}

  repetition_result run_once() override {
    subtree result;
    completion_signal computed;
    const stopwatch clock;
    executor_.submit([&result, &computed] {
      result = visit(irregular_tree::root_seed, 0);
      computed.notify();
    });
    computed.wait();
    const auto elapsed = clock.elapsed();
    // Compared as long long: a modular conversion in C++20, so exact for
    // 64-bit sums (a mismatch above 2^63 prints negative).
    expect_equal("irregular_tree nodes", static_cast<long long>(irregular_tree::expected_nodes),
                 static_cast<long long>(result.nodes));
    expect_equal("irregular_tree total", static_cast<long long>(irregular_tree::expected_total),
                 static_cast<long long>(result.total));
    return {milliseconds(elapsed)};
  }

 private:
  tbb_executor executor_;
};

std::unique_ptr<workload_instance> make_instance(unsigned worker_count) {
  return std::make_unique<irregular_tree_on_tbb>(worker_count);
}

const implementation_registration registered{"irregular_tree", peer::tbb, &make_instance};

}  // namespace
}  // namespace canopy::bench
