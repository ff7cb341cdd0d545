// <canopy/canopy.hpp> — everything a program needs from Canopy's core: the
// executor (executor/executor.hpp), fork-join of plain callables
// (executor/join.hpp: canopy::join, canopy::parallel_invoke), C++20 coroutine
// tasks (coroutine/coroutine.hpp; co_await canopy::join_all in
// coroutine/join_all.hpp) and Boost.Context fibers (fiber/fiber.hpp).
//
// Installed, this file is <includedir>/canopy/canopy.hpp; in the source tree
// include/canopy is a link to this folder, so with include/ on the include
// path the same #include <canopy/canopy.hpp> works in and out of the tree.
// Link every Canopy library (pkg-config canopy, CMake canopy::canopy, meson
// dependency('canopy')); each header states its own contract.
#pragma once

#include "coroutine/coroutine.hpp"
#include "coroutine/join_all.hpp"
#include "executor/executor.hpp"
#include "executor/join.hpp"
#include "fiber/fiber.hpp"
