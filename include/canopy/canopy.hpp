// <canopy/canopy.hpp> — Canopy without fibers: the executor
// (<canopy/executor.hpp>), coroutine tasks (<canopy/task.hpp>), race and
// stop tokens (<canopy/race.hpp>) and fork-join of callables
// (<canopy/fork_join.hpp>). Link canopy (pkg-config canopy,
// CMake canopy::canopy, meson dependency('canopy')); no Boost is needed.
//
// Fibers are <canopy/fiber.hpp> (Boost.Context: canopy-fiber), I/O and
// timers <canopy/io.hpp>, the Boost.Asio adapter <canopy/embed/asio.hpp>.
// Each of these headers states its own contract at its top; every other
// header lives under canopy/detail/ and may change without notice.
#pragma once

#include "executor.hpp"
#include "fork_join.hpp"
#include "race.hpp"
#include "task.hpp"
