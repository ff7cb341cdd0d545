#include "harness/statistics.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace canopy::bench {

namespace {

std::vector<double> sorted_copy(std::span<const double> values) {
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  return sorted;
}

}  // namespace

spread summarize(std::span<const double> values) {
  const std::vector<double> sorted = sorted_copy(values);
  const std::size_t middle = sorted.size() / 2;
  const double median =
      sorted.size() % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2.0;
  return {median, sorted.front(), sorted.back()};
}

double percentile(std::span<const double> values, double fraction) {
  const std::vector<double> sorted = sorted_copy(values);
  const auto rank =
      static_cast<std::size_t>(std::ceil(fraction * static_cast<double>(sorted.size())));
  return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}

}  // namespace canopy::bench
