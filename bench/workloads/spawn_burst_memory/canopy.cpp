#include <canopy/task.hpp>
#include <cstdlib>
#include <memory>
#include <string_view>
#include <utility>

#include "peers/canopy_executor.hpp"
#include "workloads/registry.hpp"
#include "workloads/spawn_burst_memory/burst_probe.hpp"

namespace canopy::bench {
namespace {

// By default every task of the burst, the worker blockers included, is a
// C++20 coroutine task: the callable is moved into the coroutine frame, so a
// pending task costs its slot plus its (not yet started) frame block.
// CANOPY_BENCH_BURST=callable spawns the plain callables themselves (the
// peers' shape): a small lambda lives in its slot, so a pending task costs
// the slot alone.
template <typename Body>
canopy::task<void> run_as_coroutine(Body body) {
  body();
  co_return;
}

bool callable_burst() {
  const char* kind = std::getenv("CANOPY_BENCH_BURST");
  return kind != nullptr && std::string_view(kind) == "callable";
}

class spawn_burst_memory_on_canopy final : public workload_instance {
 public:
  explicit spawn_burst_memory_on_canopy(unsigned worker_count)
      : worker_count_(worker_count), executor_(worker_count) {}

  repetition_result run_once() override {
    if (callable_) {
      return spawn_burst_memory::measure_burst_memory(
          worker_count_, [this](auto task) { executor_.submit(std::move(task)); });
    }
    return spawn_burst_memory::measure_burst_memory(worker_count_, [this](auto task) {
      executor_.submit_coroutine(run_as_coroutine(std::move(task)));
    });
  }

 private:
  unsigned worker_count_;
  bool callable_ = callable_burst();
  canopy_executor executor_;
};

std::unique_ptr<workload_instance> make_instance(unsigned worker_count) {
  return std::make_unique<spawn_burst_memory_on_canopy>(worker_count);
}

const implementation_registration registered{"spawn_burst_memory", peer::canopy, &make_instance};

}  // namespace
}  // namespace canopy::bench
