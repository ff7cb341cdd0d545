// pending_claim — run-at-join's claim (executor_core::claim_pending;
// docs/architecture.md, "Running a child at the join"): a task about to wait
// for task `id` takes it back if it is runnable but not started, from the
// waiting worker's own LIFO slot or from its bit in the summary tree.
//
// Races: a thief's steal of the LIFO slot (lifo_slot::steal) or its claim of
// the bit (summary_tree::claim_in_leaf), and the task's own worker, which
// may already have run it. Exactly one claim wins, since both places are
// emptied by one RMW (the LIFO word's exchange or CAS, the signal word's
// fetch_and); the loser runs nothing. The state check comes first: a task
// that finished may have left its slot to a new task (another generation)
// whose bit must not be taken for the awaited one. The check and the tree
// claim are two steps, so a thief can claim the task, run it to completion
// and the slot be reused by a new task whose bit is set again in between:
// after a tree claim the state is read again, and a task of another
// generation is reported as took_next_task, for the caller to hand back to
// the tree. (The LIFO path is safe: only the caller puts tasks into its own
// LIFO slot.)
//
// Compiled against atomics/atomics.hpp only, so the model checker
// (tests/model/) runs this code, not a copy.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../summary_tree/summary_tree.hpp"
#include "../atomics/atomics.hpp"
#include "lifo_slot.hpp"
#include "task_slot.hpp"

namespace canopy::detail {

// Where a task's bit sits in the summary tree.
struct tree_position {
  std::size_t leaf;
  std::size_t signal;
  unsigned bit;
};

enum class pending_claim : std::uint8_t {
  not_pending,     // finished, running, or not runnable: nothing to take
  from_lifo,       // taken from the waiting worker's own LIFO slot
  from_tree,       // its bit claimed in the tree
  lost,            // runnable, but someone else took it first
  took_next_task,  // the tree claim took the slot's next task (another
                   // generation): the caller owns it, SCHEDULED, and must
                   // make it runnable again (its bit is clear now)
};

// `state` is task id's slot's state word, `own` the calling worker's LIFO slot;
// `position(slot)` gives the task's tree position (computed only when the
// LIFO slot does not hold it); `owe_wakes(n)` gets the permits the tree's
// claim granted (its clear-then-recheck may re-activate a leaf), to be
// delivered as wakes. A taken task is SCHEDULED and not EXECUTING
// (invariant S): the caller runs it as an ordinary run.
template <class Position, class OweWakes>
[[nodiscard, gnu::always_inline]] inline pending_claim claim_pending_task(
    const atomics::atomic<std::uint64_t>& state, task_id id, lifo_slot& own, summary_tree& tree,
    Position position, OweWakes owe_wakes) noexcept {
  // relaxed: a filter, not a guard; the RMW below decides who has the task.
  const std::uint64_t seen = state.load(atomics::relaxed);
  if (task_slot::generation_of(seen) != id.generation ||
      (seen & task_slot::flag_mask) != task_slot::scheduled) {
    return pending_claim::not_pending;
  }
  if (own.take_if_is(id.slot)) {
    return pending_claim::from_lifo;
  }
  const tree_position where = position(id.slot);
  summary_tree::activation upward;
  const bool taken = tree.claim_given_bit(where.leaf, where.signal, where.bit, upward);
  owe_wakes(upward.wakes_owed);
  if (!taken) {
    return pending_claim::lost;
  }
  // relaxed: the claim's seq_cst fetch_and read the bit that the owner of
  // the slot's current task set (a release RMW) after writing its state, so
  // this load sees that task's generation.
  if (task_slot::generation_of(state.load(atomics::relaxed)) != id.generation) {
    return pending_claim::took_next_task;
  }
  return pending_claim::from_tree;
}

}  // namespace canopy::detail
