// canopy::this_fiber::run_blocking(fn) — the fiber form of run_blocking
// (blocking/run_blocking.hpp has the rules): the fiber switches out while fn
// runs on a blocking-pool thread, and its worker runs other tasks.
#pragma once

#include <type_traits>
#include <utility>

#include "../fiber/fiber.hpp"
#include "run_blocking.hpp"

namespace canopy::this_fiber {

// Returns fn's value or rethrows its exception. Only inside a fiber
// (std::logic_error otherwise); the pool's refusals as run_blocking. A
// cancelled fiber unwinds from here (fiber_unwind), fn's stop_token
// requested, once fn returned if it had started (fn may use the fiber's
// stack): the fiber waits on the call's link, as run_blocking's task does.
template <class F>
requires canopy::detail::blocking_callable<std::decay_t<F>>
    canopy::detail::blocking_result_t<std::decay_t<F>> run_blocking(F&& fn) {
  canopy::detail::checked_current_fiber("this_fiber::run_blocking(fn)");
  auto wait = canopy::detail::submit_blocking(std::decay_t<F>(std::forward<F>(fn)),
                                              "canopy::this_fiber::run_blocking");
  // Fired by a pool thread, never by a task of this executor.
  detail::suspend_on(wait, "this_fiber::run_blocking(fn)", false);
  return wait.result();
}

}  // namespace canopy::this_fiber
