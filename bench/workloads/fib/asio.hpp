#pragma once

#include <memory>

#include "workloads/registry.hpp"

namespace canopy::bench {

// The Boost.Asio fib; fib_fiber reuses it, as Asio has no fibers.
[[nodiscard]] std::unique_ptr<workload_instance> make_fib_on_asio(unsigned worker_count);

}  // namespace canopy::bench
