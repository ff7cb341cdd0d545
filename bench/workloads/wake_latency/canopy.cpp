#include <memory>
#include <utility>

#include "peers/canopy_executor.hpp"
#include "workloads/registry.hpp"
#include "workloads/wake_latency/latency_sampler.hpp"

namespace canopy::bench {
namespace {

class wake_latency_on_canopy final : public workload_instance {
 public:
  explicit wake_latency_on_canopy(unsigned worker_count) : executor_(worker_count) {}

  repetition_result run_once() override {
    return wake_latency::sample_wake_latency(
        [this](auto task) { executor_.submit(std::move(task)); });
  }

 private:
  canopy_executor executor_;
};

std::unique_ptr<workload_instance> make_instance(unsigned worker_count) {
  return std::make_unique<wake_latency_on_canopy>(worker_count);
}

const implementation_registration registered{"wake_latency", peer::canopy, &make_instance};

}  // namespace
}  // namespace canopy::bench
