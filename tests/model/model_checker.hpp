// A small stateless model checker for Canopy's protocol code.
//
// The protocol sources are compiled with CANOPY_MODEL_CHECK, which turns
// every atomics::atomic operation into a schedule point (atomics/model_atomic.hpp).
// Each logical thread runs on a Boost.Context fiber; at every schedule point
// the checker decides which thread runs next. It explores the choices
// depth-first, re-running the scenario from scratch for each schedule, with
// a bound on preemptions (switching away from a thread that could go on) —
// the usual way to keep the search finite while covering the interleavings
// that find most concurrency bugs. Interleavings are sequentially
// consistent: the checker tests the protocol's logic (lost wakeups, double
// claims, counts), not its memory orderings.
//
// Partial-order reduction (reduction::sleep_sets, opt-in): two steps of
// different threads commute when they touch different words or only read a
// common one, and running them in either order reaches the same state. Each
// step's footprint is recorded as it runs (every schedule point names its
// word, peek() and park/unpark name theirs). After exploring thread t from a
// state, the checker explores t's siblings with t "asleep": t is not picked
// again until some step that does not commute with t's step has run, since
// every schedule that picks t earlier is a reordering of one already
// explored (Godefroid's sleep sets). Soundness needs every shared access of
// a step to be visible: a scenario whose threads share plain variables must
// note them (note_access), or leave the reduction off. Under a preemption
// bound the reduction is not complete: the explored reordering of a pruned
// schedule may need more preemptions than the bound allows (Coons,
// Musuvathi, McKinley, "Bounded partial-order reduction", OOPSLA 2013), so
// reduced cases state their bound and the mutant table checks they still
// catch each removed step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "atomics/model_atomic.hpp"

namespace canopy::detail::model {

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

enum class reduction : std::uint8_t { none, sleep_sets };

struct exploration_result {
  std::uint64_t executions = 0;  // complete ones and those cut short by sleep sets
  // Executions abandoned because every runnable thread was asleep (each is
  // a reordering of an explored one); counted in `executions` too.
  std::uint64_t sleep_set_blocked = 0;
  bool complete = false;         // every schedule within the bound was explored
  std::string failure;           // first failing execution's message (empty: none)
  std::string failing_schedule;  // thread chosen at each schedule point
};

// Explore `make()`'s scenario: `make` is called afresh for every execution.
exploration_result explore(const std::function<scenario()>& make, int preemption_bound,
                           std::uint64_t max_executions, std::size_t max_steps = 20000,
                           reduction mode = reduction::none);

// The index (in scenario::threads) of the logical thread that runs now: what
// a scenario's per-thread state (a worker's deque, a thread_local of the
// protocol's) is looked up by, since every logical thread is a fiber of one
// OS thread. 0 outside an execution.
std::size_t current_thread() noexcept;

// schedule_point, note_access, park_on and unpark_on: atomics/model_atomic.hpp.

}  // namespace canopy::detail::model
