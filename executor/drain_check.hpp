// drain_check — shutdown step 2's test for quiescence under the drain
// policy (executor_core::is_quiescent; docs/architecture.md, "Shutdown").
//
// Quiescent: every worker parked (latch SLEEPING) across the whole check,
// without re-entering the park protocol (same park epoch), and no root bit
// set in between. A SLEEPING worker holds no task, and its LIFO slot and
// yield queue are empty (it parks only after a search that took from both
// failed, and only it fills them). So at the moment the root words were
// read, no task ran and none was runnable: a wake that lands later races
// shutdown, and its task is destroyed as a suspended one would be.
//
// Compiled against atomics/atomics.hpp only, so the model checker
// (tests/model/) runs this code, not a copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "../signal_waker/sleep_module.hpp"
#include "../summary_tree/summary_tree.hpp"
#include "../atomics/atomics.hpp"

namespace canopy::detail {

// `epochs`: scratch, one entry per worker (the first pass's park epochs).
[[nodiscard]] inline bool pool_is_quiescent(sleep_module& sleep, const summary_tree& tree,
                                            std::span<std::uint64_t> epochs) noexcept {
  // All reads seq_cst: they order against the workers' seq_cst latch
  // transitions and epoch stores (sleep_module::try_sleep) and the
  // producers' root RMWs.
  const std::size_t workers = epochs.size();
  for (std::size_t index = 0; index < workers; ++index) {
    epochs[index] = sleep.park_epoch(index);
    if (sleep.waker(index).latch().word().load(atomics::seq_cst) != sleep_latch::sleeping) {
      return false;
    }
  }
  if (tree.any_active()) {
    return false;
  }
  // The second pass: a worker that woke in between (and maybe ran a task
  // that was runnable when the first pass read its latch) is not SLEEPING,
  // or parked again through a new try_sleep that bumped its epoch.
  for (std::size_t index = 0; index < workers; ++index) {
    if (sleep.waker(index).latch().word().load(atomics::seq_cst) != sleep_latch::sleeping ||
        sleep.park_epoch(index) != epochs[index]) {
      return false;
    }
  }
  return true;
}

}  // namespace canopy::detail
