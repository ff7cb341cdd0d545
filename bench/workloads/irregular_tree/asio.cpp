#include <atomic>
#include <cstdint>
#include <memory>

#include "harness/completion_signal.hpp"
#include "harness/result_check.hpp"
#include "harness/stopwatch.hpp"
#include "peers/asio_executor.hpp"
#include "workloads/irregular_tree/parameters.hpp"
#include "workloads/registry.hpp"

namespace canopy::bench {
namespace {

struct subtree {
  std::uint64_t total = 0;
  std::size_t nodes = 0;
};

// Continuation passing, as Asio's fib: a node with children is a heap frame
// holding its own value, its children's results and a countdown; children
// 1..c-1 are posted, child 0 is visited on this thread, and whichever child
// finishes last adds the results up and delivers them to its own parent.
struct node_frame {
  node_frame* parent;  // nullptr for the root
  unsigned slot_in_parent;
  std::atomic<unsigned> pending;
  subtree own;
  subtree child_results[irregular_tree::max_children];
};

struct tree_run {
  explicit tree_run(asio_executor& pool) : executor(pool) {}

  asio_executor& executor;
  subtree result;
  completion_signal computed;
};

void deliver(tree_run& run, node_frame* parent, unsigned slot, subtree result) {
  while (parent != nullptr) {
    parent->child_results[slot] = result;
    // acq_rel: release publishes this child's result to the sibling that
    // decrements last; its acquire lets it read every sibling's result.
    if (parent->pending.fetch_sub(1, std::memory_order_acq_rel) != 1) {
      return;
    }
    result = parent->own;
    // Slots of children the node does not have stay zero.
    for (unsigned index = 0; index < irregular_tree::max_children; ++index) {
      result.total += parent->child_results[index].total;
      result.nodes += parent->child_results[index].nodes;
    }
    slot = parent->slot_in_parent;
    node_frame* const finished = parent;
    parent = parent->parent;
    delete finished;
  }
  run.result = result;
  run.computed.notify();
}

void visit(tree_run& run, std::uint64_t seed, unsigned depth, node_frame* parent, unsigned slot) {
  const unsigned children = irregular_tree::child_count(seed, depth);
  const subtree own{irregular_tree::node_work(seed), 1};
  if (children == 0) {
    deliver(run, parent, slot, own);
    return;
  }
  auto* const frame = new node_frame{parent, slot, {children}, own, {}};
  for (unsigned index = 1; index < children; ++index) {
    run.executor.submit([&run, seed, depth, frame, index] {
      visit(run, irregular_tree::child_seed(seed, index), depth + 1, frame, index);
    });
  }
  visit(run, irregular_tree::child_seed(seed, 0), depth + 1, frame, 0);
}

class irregular_tree_on_asio final : public workload_instance {
 public:
  explicit irregular_tree_on_asio(unsigned worker_count) : executor_(worker_count) {}

  repetition_result run_once() override {
    tree_run run{executor_};
    const stopwatch clock;
    executor_.submit([&run] { visit(run, irregular_tree::root_seed, 0, nullptr, 0); });
    run.computed.wait();
    const auto elapsed = clock.elapsed();
    // Compared as long long: a modular conversion in C++20, so exact for
    // 64-bit sums (a mismatch above 2^63 prints negative).
    expect_equal("irregular_tree nodes", static_cast<long long>(irregular_tree::expected_nodes),
                 static_cast<long long>(run.result.nodes));
    expect_equal("irregular_tree total", static_cast<long long>(irregular_tree::expected_total),
                 static_cast<long long>(run.result.total));
    return {milliseconds(elapsed)};
  }

 private:
  asio_executor executor_;
};

std::unique_ptr<workload_instance> make_instance(unsigned worker_count) {
  return std::make_unique<irregular_tree_on_asio>(worker_count);
}

const implementation_registration registered{"irregular_tree", peer::asio, &make_instance};

}  // namespace
}  // namespace canopy::bench
