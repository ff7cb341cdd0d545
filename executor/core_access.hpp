// core_access — for tests and the soak program only: the executor_core
// behind a canopy::executor, to read the protocol objects (its summary
// tree, sleep module, arena) below the public API. Not installed; the
// library's own headers reach the core through its face (scheduler.hpp).
#pragma once

#include "executor.hpp"
#include "executor_core.hpp"

namespace canopy::detail {

inline executor_core& core_of(executor& pool) noexcept { return as_core(pool.core()); }

}  // namespace canopy::detail
