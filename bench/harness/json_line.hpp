#pragma once

#include <optional>
#include <string>

namespace canopy::bench {

// Everything one canopy_bench invocation reports.
struct result_record {
  std::string peer;
  std::string workload;
  double value;  // median over the measured repetitions
  std::string unit;
  unsigned threads;
  unsigned reps;
  double min;
  double max;
  std::optional<double> p99;            // median over repetitions of each repetition's p99
  std::optional<double> other_threads;  // mean over repetitions (idle_cpu)
};

// The record as one line of JSON, without the trailing newline.
[[nodiscard]] std::string to_json_line(const result_record& record);

}  // namespace canopy::bench
