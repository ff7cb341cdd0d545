// Everything for Boost.Context fibers (docs/coroutines.md).
#pragma once

#include "fiber_task.hpp"
#include "stack_pool.hpp"
#include "this_fiber.hpp"
