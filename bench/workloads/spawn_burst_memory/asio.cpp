#include <memory>
#include <utility>

#include "peers/asio_executor.hpp"
#include "workloads/registry.hpp"
#include "workloads/spawn_burst_memory/burst_probe.hpp"

namespace canopy::bench {
namespace {

class spawn_burst_memory_on_asio final : public workload_instance {
 public:
  explicit spawn_burst_memory_on_asio(unsigned worker_count)
      : worker_count_(worker_count), executor_(worker_count) {}

  repetition_result run_once() override {
    return spawn_burst_memory::measure_burst_memory(
        worker_count_, [this](auto task) { executor_.submit(std::move(task)); });
  }

 private:
  unsigned worker_count_;
  asio_executor executor_;
};

std::unique_ptr<workload_instance> make_instance(unsigned worker_count) {
  return std::make_unique<spawn_burst_memory_on_asio>(worker_count);
}

const implementation_registration registered{"spawn_burst_memory", peer::asio, &make_instance};

}  // namespace
}  // namespace canopy::bench
