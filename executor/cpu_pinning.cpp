#include "cpu_pinning.hpp"

#include <sched.h>

#include <cerrno>
#include <stdexcept>
#include <string>
#include <system_error>

namespace canopy::detail {

std::vector<int> plan_worker_cpus(const executor_config& config) {
  std::vector<int> plan;
  // With no owned worker (worker_count = 0) nothing is pinned, but a
  // worker_cpus list is still checked: a CPU the process may not use is
  // refused whatever the worker count (config.hpp's promise).
  if (!config.pin_workers || (config.worker_count == 0 && config.worker_cpus.empty())) {
    return plan;
  }
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
    throw std::system_error(errno, std::system_category(),
                            "canopy::executor_config: pin_workers: sched_getaffinity failed");
  }
  std::vector<int> choices;
  if (config.worker_cpus.empty()) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &allowed)) {
        choices.push_back(cpu);
      }
    }
  } else {
    for (const int cpu : config.worker_cpus) {
      if (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &allowed)) {
        throw std::invalid_argument("canopy::executor_config: worker_cpus contains CPU " +
                                    std::to_string(cpu) +
                                    ", which this process may not run on (see sched_getaffinity, "
                                    "taskset)");
      }
      choices.push_back(cpu);
    }
  }
  if (choices.empty()) {
    throw std::invalid_argument("canopy::executor_config: pin_workers: no CPU to pin to");
  }
  if (config.worker_count == 0) {
    return plan;
  }
  plan.reserve(config.worker_count);
  for (std::size_t worker = 0; worker < config.worker_count; ++worker) {
    plan.push_back(choices[worker % choices.size()]);
  }
  return plan;
}

bool pin_this_thread(int cpu) noexcept {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  return ::sched_setaffinity(0, sizeof one, &one) == 0;
}

}  // namespace canopy::detail
