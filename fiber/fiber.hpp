// Everything for Boost.Context fibers (docs/coroutines.md).
#pragma once

#include "fiber/fiber_task.hpp"
#include "fiber/stack_pool.hpp"
#include "fiber/this_fiber.hpp"
