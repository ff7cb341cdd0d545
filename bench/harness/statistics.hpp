#pragma once

#include <span>

namespace canopy::bench {

struct spread {
  double median;
  double min;
  double max;
};

// Median (mean of the two middle values for an even count), min and max.
// Precondition: values is not empty.
[[nodiscard]] spread summarize(std::span<const double> values);

// Nearest-rank percentile: the smallest value with at least `fraction` of all
// values at or below it. Precondition: values is not empty, 0 < fraction <= 1.
[[nodiscard]] double percentile(std::span<const double> values, double fraction);

}  // namespace canopy::bench
