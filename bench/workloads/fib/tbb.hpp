#pragma once

#include <memory>

#include "workloads/registry.hpp"

namespace canopy::bench {

// The oneTBB fib; fib_fiber reuses it, as oneTBB has no fibers.
[[nodiscard]] std::unique_ptr<workload_instance> make_fib_on_tbb(unsigned worker_count);

}  // namespace canopy::bench
