// expect_clean — what every model-check case that must pass asserts: no
// failure, the whole bounded search explored, and more than a handful of
// executions (a case that explores next to nothing checks nothing). Prints
// the count, which docs/correctness.md's case tables quote.
#pragma once

#include <doctest/doctest.h>

#include "tests/model/model_checker.hpp"

namespace canopy::detail::model {

inline void expect_clean(const exploration_result& result) {
  INFO("failure: " << result.failure << " schedule: " << result.failing_schedule);
  CHECK(result.failure.empty());
  CHECK(result.complete);
  CHECK(result.executions > 10);
  MESSAGE("executions explored: " << result.executions << " (" << result.sleep_set_blocked
                                  << " cut short by sleep sets)");
}

}  // namespace canopy::detail::model
