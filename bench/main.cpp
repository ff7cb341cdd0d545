// canopy_bench: runs one workload on one peer executor and prints the median
// of the measured repetitions as one JSON line. See command_line.hpp.

#include <algorithm>
#include <cstdio>
#include <exception>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "command_line.hpp"
#include "harness/json_line.hpp"
#include "harness/result_check.hpp"
#include "harness/statistics.hpp"
#include "workloads/catalog.hpp"
#include "workloads/registry.hpp"

namespace canopy::bench {
namespace {

constexpr int exit_run_failed = 1;
constexpr int exit_usage = 2;

unsigned measured_reps(const workload_descriptor& workload, unsigned requested) {
  return workload.max_reps == 0 ? requested : std::min(requested, workload.max_reps);
}

result_record measure(const command_line& options, const workload_descriptor& workload,
                      instance_factory factory) {
  const unsigned reps = measured_reps(workload, options.reps);
  const std::unique_ptr<workload_instance> instance = factory(options.threads);
  if (workload.warm_up) {
    static_cast<void>(instance->run_once());  // checked, not measured
  }

  std::vector<double> values;
  std::vector<double> p99s;
  std::vector<double> other_threads;
  for (unsigned rep = 0; rep < reps; ++rep) {
    const repetition_result result = instance->run_once();
    values.push_back(result.value);
    if (result.p99) {
      p99s.push_back(*result.p99);
    }
    if (result.other_threads) {
      other_threads.push_back(*result.other_threads);
    }
  }

  const spread value_spread = summarize(values);
  result_record record{std::string(peer_name(options.executor)),
                       options.workload,
                       value_spread.median,
                       std::string(workload.unit),
                       options.threads,
                       reps,
                       value_spread.min,
                       value_spread.max,
                       std::nullopt,
                       std::nullopt};
  if (!p99s.empty()) {
    record.p99 = summarize(p99s).median;
  }
  if (!other_threads.empty()) {
    // The mean: most idle seconds read 0 here, and a median would hide the
    // odd one in which a worker was still on its way to sleep.
    record.other_threads = std::accumulate(other_threads.begin(), other_threads.end(), 0.0) /
                           static_cast<double>(other_threads.size());
  }
  return record;
}

int run(int argc, const char* const* argv) {
  std::string error;
  const std::optional<command_line> options = parse_command_line(argc, argv, error);
  if (!options) {
    std::fprintf(stderr, "canopy_bench: %s\n%s", error.c_str(), usage_text().c_str());
    return exit_usage;
  }
  if (options->list_workloads) {
    for (const workload_descriptor& workload : workload_catalog) {
      std::printf("%.*s\n", static_cast<int>(workload.name.size()), workload.name.data());
    }
    return 0;
  }

  const workload_descriptor& workload = *find_workload(options->workload);
  const instance_factory factory = find_implementation(workload.name, options->executor);
  if (factory == nullptr) {
    std::fprintf(stderr, "canopy_bench: no %s implementation of %s in this binary\n",
                 std::string(peer_name(options->executor)).c_str(), options->workload.c_str());
    return exit_usage;
  }

  try {
    const result_record record = measure(*options, workload, factory);
    std::printf("%s\n", to_json_line(record).c_str());
    return 0;
  } catch (const result_mismatch& mismatch) {
    std::fprintf(stderr, "canopy_bench: %s on %s gave a wrong result: %s\n",
                 options->workload.c_str(), std::string(peer_name(options->executor)).c_str(),
                 mismatch.what());
    return exit_run_failed;
  } catch (const std::exception& failure) {
    std::fprintf(stderr, "canopy_bench: %s on %s failed: %s\n", options->workload.c_str(),
                 std::string(peer_name(options->executor)).c_str(), failure.what());
    return exit_run_failed;
  }
}

}  // namespace
}  // namespace canopy::bench

int main(int argc, char** argv) { return canopy::bench::run(argc, argv); }
