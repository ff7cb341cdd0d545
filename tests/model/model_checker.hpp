// A small stateless model checker for Canopy's protocol code.
//
// The protocol sources are compiled with CANOPY_MODEL_CHECK, which turns
// every sync::atomic operation into a schedule point (sync/model_atomic.hpp).
// Each logical thread runs on a Boost.Context fiber; at every schedule point
// the checker decides which thread runs next. It explores the choices
// depth-first, re-running the scenario from scratch for each schedule, with
// a bound on preemptions (switching away from a thread that could go on) —
// the usual way to keep the search finite while covering the interleavings
// that find most concurrency bugs. Interleavings are sequentially
// consistent: the checker tests the protocol's logic (lost wakeups, double
// claims, counts), not its memory orderings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace canopy::model {

// One execution of a scenario: the logical threads to run and the check to
// make when every thread has finished or is parked.
struct scenario {
  std::vector<std::function<void()>> threads;
  // Called at the end of each execution; `parked` says which threads ended
  // parked. Return an empty string if the execution is correct, else why not.
  std::function<std::string(const std::vector<bool>& parked)> check;
  // Called after `check` with no schedule points: must make every thread
  // able to finish (e.g. set a stop flag and force-wake parked workers).
  // The checker then runs the unfinished threads to their end, so that
  // their stacks unwind normally.
  std::function<void()> teardown;
};

struct exploration_result {
  std::uint64_t executions = 0;
  bool complete = false;         // every schedule within the bound was explored
  std::string failure;           // first failing execution's message (empty: none)
  std::string failing_schedule;  // thread chosen at each schedule point
};

// Explore `make()`'s scenario: `make` is called afresh for every execution.
exploration_result explore(const std::function<scenario()>& make, int preemption_bound,
                           std::uint64_t max_executions, std::size_t max_steps = 20000);

}  // namespace canopy::model
