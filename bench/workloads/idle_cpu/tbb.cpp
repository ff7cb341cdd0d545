#include <memory>
#include <utility>

#include "peers/tbb_executor.hpp"
#include "workloads/idle_cpu/idle_probe.hpp"
#include "workloads/registry.hpp"

namespace canopy::bench {
namespace {

class idle_cpu_on_tbb final : public workload_instance {
 public:
  explicit idle_cpu_on_tbb(unsigned worker_count) : executor_(worker_count) {}

  repetition_result run_once() override {
    return idle_cpu::measure_idle_cpu([this](auto task) { executor_.submit(std::move(task)); });
  }

 private:
  tbb_executor executor_;
};

std::unique_ptr<workload_instance> make_instance(unsigned worker_count) {
  return std::make_unique<idle_cpu_on_tbb>(worker_count);
}

const implementation_registration registered{"idle_cpu", peer::tbb, &make_instance};

}  // namespace
}  // namespace canopy::bench
