#include <array>
#include <canopy/task.hpp>
#include <cstdint>
#include <memory>
#include <span>

#include "harness/completion_signal.hpp"
#include "harness/result_check.hpp"
#include "harness/stopwatch.hpp"
#include "peers/canopy_executor.hpp"
#include "workloads/irregular_tree/parameters.hpp"
#include "workloads/registry.hpp"

namespace canopy::bench {
namespace {

struct subtree {
  std::uint64_t total = 0;
  std::size_t nodes = 0;
};

// A node spawns children 1..c-1 as coroutine tasks, does its own busy
// loop, runs child 0 inline (co_await on a task<T>: no spawn), then awaits
// the spawned ones with one co_await canopy::await_all.
canopy::task<subtree> visit(std::uint64_t seed, unsigned depth) {
  const unsigned children = irregular_tree::child_count(seed, depth);
  std::array<canopy::join_handle<subtree>, irregular_tree::max_children> spawned;
  for (unsigned index = 1; index < children; ++index) {
    spawned[index - 1] = canopy::spawn(visit(irregular_tree::child_seed(seed, index), depth + 1));
  }
  subtree result{irregular_tree::node_work(seed), 1};
  if (children > 0) {
    const subtree first = co_await visit(irregular_tree::child_seed(seed, 0), depth + 1);
    result.total += first.total;
    result.nodes += first.nodes;
    std::span<canopy::join_handle<subtree>> others(spawned.data(), children - 1);
    std::array<subtree, irregular_tree::max_children> values;
    co_await canopy::await_all(others, values.begin());
    for (unsigned index = 0; index + 1 < children; ++index) {
      result.total += values[index].total;
      result.nodes += values[index].nodes;
    }
  }
  co_return result;
}

canopy::task<void> tree_root(subtree& out, completion_signal& computed) {
  out = co_await visit(irregular_tree::root_seed, 0);
  computed.notify();
}

class irregular_tree_on_canopy final : public workload_instance {
 public:
  explicit irregular_tree_on_canopy(unsigned worker_count) : executor_(worker_count) {}

  repetition_result run_once() override {
    subtree result;
    completion_signal computed;
    const stopwatch clock;
    executor_.submit_coroutine(tree_root(result, computed));
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
  canopy_executor executor_;
};

std::unique_ptr<workload_instance> make_instance(unsigned worker_count) {
  return std::make_unique<irregular_tree_on_canopy>(worker_count);
}

const implementation_registration registered{"irregular_tree", peer::canopy, &make_instance};

}  // namespace
}  // namespace canopy::bench
