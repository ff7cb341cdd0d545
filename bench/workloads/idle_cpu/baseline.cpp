#include <memory>
#include <utility>

#include "workloads/idle_cpu/idle_probe.hpp"
#include "workloads/registry.hpp"

namespace canopy::bench {
namespace {

// idle_cpu with no executor in the process: the task runs inline on the
// measuring thread, which then sleeps as on every peer. What this reads is
// the cost of the measurement itself (the sleep, the wake-up, getrusage and
// the kernel's accounting), the floor below which no peer can go.
class idle_cpu_baseline final : public workload_instance {
 public:
  repetition_result run_once() override {
    return idle_cpu::measure_idle_cpu([](auto task) { std::move(task)(); });
  }
};

std::unique_ptr<workload_instance> make_instance(unsigned /*worker_count*/) {
  return std::make_unique<idle_cpu_baseline>();
}

const implementation_registration registered{"idle_cpu", peer::baseline, &make_instance};

}  // namespace
}  // namespace canopy::bench
