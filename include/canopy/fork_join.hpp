// <canopy/fork_join.hpp> — fork-join for plain callables, as rayon's join
// and oneTBB's parallel_invoke.
//
//   auto [left, right] = canopy::join([&] { return sum(lo, mid); },
//                                     [&] { return sum(mid, hi); });
//   auto [a, b, c] = canopy::parallel_invoke(f, g, h);
//   auto [x, y] = canopy::join(pool, f, g);   // from a thread outside `pool`
//
// Inside a task: f runs here, g is offered to idle workers and taken back
// and run here if none stole it; no heap allocation. From outside the pool
// (the `pool` forms): every callable runs as a task and the caller blocks
// until all ended. Results come back in argument order (std::monostate for
// void); the first exception (in argument order) is rethrown after every
// callable ended. The full contract is at the top of
// detail/fork_join/join.hpp; docs/fork_join.md explains the design.
#pragma once

#include "detail/fork_join/join.hpp"
#include "executor.hpp"
