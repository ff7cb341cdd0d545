#include "config.hpp"

#include <bit>
#include <stdexcept>
#include <string>

namespace canopy {

namespace {
[[noreturn]] void reject(const std::string& field, std::size_t value, const std::string& rule) {
  throw std::invalid_argument("canopy::executor_config: " + field + " = " + std::to_string(value) +
                              " is invalid: " + rule);
}
}  // namespace

void executor_config::validate() const {
  if (worker_count > max_worker_count) {
    reject("worker_count", worker_count,
           "must be in 0.." + std::to_string(max_worker_count) +
               " (0: the host thread runs every task, executor::run_once and friends)");
  }
  if (worker_count == 0 && driver != nullptr) {
    reject("worker_count", worker_count,
           "must be at least 1 with an idle driver (an I/O reactor): a parked worker is its "
           "poller");
  }
  if (signals_per_leaf == 0 || signals_per_leaf > 64 || !std::has_single_bit(signals_per_leaf)) {
    reject("signals_per_leaf", signals_per_leaf, "must be a power of two in 1..64");
  }
  if (max_leaves == 0 || max_leaves > max_leaf_limit) {
    reject("max_leaves", max_leaves, "must be in 1.." + std::to_string(max_leaf_limit));
  }
  if (max_leaves < worker_count) {  // every owned worker owns a partition
    reject("max_leaves", max_leaves,
           "must be at least worker_count (" + std::to_string(worker_count) +
               ") so that every worker owns a leaf");
  }
  if (initial_leaves > max_leaves) {
    reject("initial_leaves", initial_leaves,
           "must not exceed max_leaves (" + std::to_string(max_leaves) + ")");
  }
  if (idle_yield_rounds > 100000) {
    reject("idle_yield_rounds", idle_yield_rounds, "must be in 0..100000");
  }
  if (on_shutdown != shutdown_policy::drain && on_shutdown != shutdown_policy::cancel_pending) {
    reject("on_shutdown", static_cast<std::size_t>(on_shutdown),
           "is not a shutdown_policy (drain or cancel_pending)");
  }
  if (trace_events_per_worker < min_trace_events || trace_events_per_worker > max_trace_events) {
    reject(
        "trace_events_per_worker", trace_events_per_worker,
        "must be in " + std::to_string(min_trace_events) + ".." + std::to_string(max_trace_events));
  }
  if (!worker_cpus.empty() && !pin_workers) {
    throw std::invalid_argument(
        "canopy::executor_config: worker_cpus is set but pin_workers is false (set pin_workers "
        "to pin the workers to those CPUs)");
  }
  if (driver_poll_interval == 0 || driver_poll_interval > 1000000) {
    reject("driver_poll_interval", driver_poll_interval, "must be in 1..1000000");
  }
}

}  // namespace canopy
