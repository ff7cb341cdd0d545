// explored_bound — the preemption bound a model-check case explores in this
// build (the rule of model_check_test.cpp's cases, for the cases of
// model_executor_test.cpp). Sanitizer builds (CANOPY_STRESS_DIVISOR > 1)
// explore one preemption fewer, and at most two: the checker runs on one OS
// thread, so a sanitizer adds little beyond the plain build's exploration,
// and fibers are slow there (the one-worker drain case at bound 3 took 17 s
// under ASan). ThreadSanitizer builds explore at most one preemption, and
// none with four threads or more: TSan keeps about a megabyte for each
// execution's fiber switches. A negative bound is used as given (a case
// that must find something).
#pragma once

#include <algorithm>

#include "tests/model/protocol_steps.hpp"
#include "tests/watchdog.hpp"

namespace canopy::detail::model {

inline int explored_bound(int preemption_bound, int threads) {
  if (preemption_bound < 0) {
    return -preemption_bound;
  }
  if (under_thread_sanitizer) {
    return threads >= 4 ? 0 : std::min(preemption_bound, 1);
  }
  if (canopy::testing::stress_divisor() > 1 && preemption_bound > 1) {
    return std::min(preemption_bound - 1, 2);
  }
  return preemption_bound;
}

}  // namespace canopy::detail::model
