#pragma once

#include <memory>
#include <optional>
#include <string_view>

#include "workloads/peer.hpp"

namespace canopy::bench {

// What one repetition of a workload measured, in the workload's unit.
struct repetition_result {
  double value;
  std::optional<double> p99 = std::nullopt;  // wake_latency only
  // idle_cpu only: the part of `value` spent by threads other than the
  // measuring one (the executor's workers), read from the kernel's precise
  // per-thread run times rather than getrusage's totals.
  std::optional<double> other_threads = std::nullopt;
};

// One workload bound to one peer's executor. The factory creates the
// executor (once per process, before the warm-up); run_once() is then called
// for the warm-up and for every measured repetition (workload_catalog says
// which workloads skip the warm-up or cap the repetitions).
class workload_instance {
 public:
  virtual ~workload_instance() = default;

  // Runs the workload once and checks its result: throws result_mismatch
  // (harness/result_check.hpp) when a count or value is wrong.
  virtual repetition_result run_once() = 0;
};

using instance_factory = std::unique_ptr<workload_instance> (*)(unsigned worker_count);

// A peer implementation file registers itself with one namespace-scope object:
//
//   const implementation_registration registered{"fib", peer::canopy, &make_instance};
//
// The workload name must be in workload_catalog and each (workload, peer)
// pair may be registered once; a violation terminates at start-up.
class implementation_registration {
 public:
  implementation_registration(std::string_view workload, peer executor, instance_factory factory);
};

// The factory registered for (workload, executor), or nullptr when that
// implementation was not built into this binary.
[[nodiscard]] instance_factory find_implementation(std::string_view workload, peer executor);

}  // namespace canopy::bench
