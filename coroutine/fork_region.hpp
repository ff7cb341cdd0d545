// fork_region — the protocol under co_await canopy::join(...) of tasks
// (coroutine/fork_join_await.hpp): continuation stealing, after libfork.
// docs/fork_join_design.md gives the design, docs/fork_join.md the contract.
//
// A join of children c0..c(n-1) keeps one fork_record in its awaiter (in
// the joining coroutine's frame). Launching child i (i < n-1) pushes the
// record on the worker's offer deque, where it stands for the rest of the
// join, then runs the child at once. When the child ends, its worker pops:
//   * the record came back (nobody stole it): launch the next child. No
//     atomic read-modify-write beyond the deque's pop.
//   * it is gone: a thief took the rest of the join (and ran the next
//     child on its own deque). This worker counts its child's end on the
//     record's `joins` and goes back to what it was doing.
// The last child is launched without a push; at its end the join
// subtracts what is left (k_max less the steals) from `joins`, and
// whichever subtraction reaches 0 continues the joining coroutine. With
// no steal the counter is never touched.
//
// Nesting. A child runs inside its launch: its frame is made and resumed
// at once, nested in the C++ frame of the launcher (the joining frame's
// await_suspend, a thief's steal, or drive() below; run_fork_child in
// fork_join_await.hpp). When the resumption returns, the child either
// ended (its end left its link, child_ended_here) and the launcher pops
// and goes on, or it waits in a join whose rest another thread holds (or
// that was deferred, below). The launcher then returns without touching
// its record, which a thief holds too (a deque gives its oldest entry
// first), was never offered (a last child), or waits on this thread's
// deque for the child's end to pop it. A join that completes where it was
// opened continues its coroutine without a suspension: when nothing is
// stolen, a fork costs one entry into each frame. Below a floor of the
// thread's stack a join is not run nested: it is left to the run's driver
// (drive), which runs it from the bottom of the run, and each level above
// returns as if its child waited elsewhere; the child's end comes through
// its link.
//
// Region. The outermost join, awaited by an ordinary task H, opens a
// region: its children and everything they join are region frames, which
// run under H (current_waker() names it) on whichever worker runs them,
// and may await only their own children (promise_base::await_transform).
// H waits on wait_kind::fork_region while the region runs. The opening
// worker runs the region from the join's await_suspend (run_rest, drive);
// when that returns, the region either ended (H goes on at once) or
// another worker still runs part of it, and then H suspends: the worker
// that ends the region schedules H. `state` decides which of the two
// happened, with one exchange on each side.
//
// Memory orders (the full argument: docs/fork_join_design.md, 3.4):
//   * the deque's push (release of bottom) and steal (seq_cst load of
//     bottom) publish the record's fields to the thief; the pop's seq_cst
//     exchange against the steal's seq_cst loads and CAS give each push of
//     the record to exactly one of owner and thief (offer_deque.hpp);
//   * every write to a result slot happens before its writer's fetch_sub
//     on `joins` (release), and the subtraction that reaches 0 reads them
//     after (acquire): acq_rel on every subtraction;
//   * `next` and `steals` are plain: only the thread that holds the record
//     (popped it back or stole it) writes them, and it passes on through
//     the two edges above.
//
// Frames (executor/fork_stack.hpp). A child made by a call is bump-allocated
// on the launching thread's stack. After a child's frame is freed, its
// thread's stack holds exactly the frames below that child, or nothing; so
// at a join whose rest was stolen: a pop that gets the record back goes on
// with the same stack; a loser (its subtraction did not reach 0) gives its
// stack away when it holds frames (they are the joining frame's and its
// ancestors', which the winner will run and pop); a winner whose stack is
// not the one recorded when the join opened adopts that one (its own is
// empty then: it began from an empty stack when it stole, and everything
// it launched has ended). The hand-over needs no ordering of its own: the
// loser's last writes to the stack (its pops) come before its subtraction
// (release) and the winner's adoption after the subtraction that reaches 0
// (acquire); the loser decides before its subtraction, and touches neither
// the record nor the stack after it.
#pragma once

#include <coroutine>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "../atomics/atomics.hpp"
#include "../executor/fork_stack.hpp"
#include "../executor/join_state.hpp"
#include "../executor/join_worker.hpp"
#include "../executor/offer_deque.hpp"
#include "../executor/scheduler.hpp"
#include "../executor/task_slot.hpp"
#include "region_run.hpp"
#include "task.hpp"

namespace canopy::detail {

// The calling thread's side of fork-join: offer a record on its deque
// (false: not offered, a full deque or not a worker), take it back (false:
// a thief has it), wake the task that opened a region. The model check
// (tests/model/) and the Relacy check (tests/relacy/) supply their own, per
// simulated thread. The deque is the one drive() found
// (region_state().joins): every region frame runs inside a drive() on its
// thread.
#if !defined(CANOPY_MODEL_CHECK) && !defined(CANOPY_RELACY)
[[gnu::always_inline]] inline bool offer_to_thieves(offered_job& record) noexcept {
  join_worker* const joins = region_state().joins;
  return joins != nullptr && joins->offer_record(record);
}
[[gnu::always_inline]] inline bool take_back_from_thieves(const offered_job& record) noexcept {
  return region_state().joins->take_back_record(record);
}
inline void wake_region_task(scheduler& core, task_id task) noexcept {
  static_cast<void>(core.schedule(task));
}
// The calling thread's deque (null: not a worker, or the host role of an
// executor without one), once per drive().
inline join_worker* joins_here() noexcept {
  worker_context* const self = current_worker();
  return self != nullptr ? self->joins : nullptr;
}
// The join state whose cancel ends the task this worker runs (null: none,
// a detached task), when that task opens a region.
inline const join_state_base* running_task_cancel_state() noexcept {
  worker_context* const self = current_worker();
  return self->core->running_cancel_state(*self);
}
#else
bool offer_to_thieves(offered_job& record) noexcept;
bool take_back_from_thieves(const offered_job& record) noexcept;
void wake_region_task(scheduler& core, task_id task) noexcept;
join_worker* joins_here() noexcept;
const join_state_base* running_task_cancel_state() noexcept;
#endif

// One per outermost join of a task H (in that join's awaiter): what the
// region's end needs to continue H.
class fork_region {
 public:
  // `cancel_state`: the opening task's join state (null: none), whose
  // cancel request counts as cancel() from the moment it is made, on any
  // thread: the opening task cannot run its cancel while its own worker
  // drives the region.
  fork_region(scheduler* core, task_id task, const join_state_base* cancel_state = nullptr) noexcept
      : core_(core),
        task_(task),
        cancel_word_(cancel_state != nullptr ? &cancel_state->cancel_word() : &cancelled_) {}

  // The region's root join completed (on any thread). If the opening
  // worker already left (H suspended on the region), H is woken; else that
  // worker sees `done` in leave() and H goes on there.
  void finish() noexcept {
    // acq_rel: the release half publishes every child's result (this
    // thread holds them through the join's acquire) to the thread that
    // continues H: the opener's exchange in leave(), or H's run after the
    // schedule (whose own release orders it too). The acquire half is the
    // opener's `opener_left` store, so that schedule() follows it.
    // What the wake needs is read first: once the exchange says done, a
    // wake H did not wait for (a cancel's) may run H and free this object
    // with its frame. A schedule() of a task that ended is a no-op (its
    // generation is stale).
    scheduler& core = *core_;
    const task_id task = task_;
    if (state_.exchange(done, atomics::acq_rel) == opener_left) {
#ifdef CANOPY_MODEL_CHECK
      model::schedule_point();  // where another thread may run H and free this region
#endif
      wake_region_task(core, task);
    }
  }
  // The opening worker's run of the region returned: true if the region
  // ended meanwhile (H goes on now), false if H must suspend until
  // finish() wakes it.
  [[nodiscard]] bool leave() noexcept {
    // acq_rel: acquire pairs with finish()'s release (the results); release
    // orders H's recorded wait (suspend_on, before the region started)
    // before a finish() that then schedules H.
    return state_.exchange(opener_left, atomics::acq_rel) == done;
  }
  // The task that opened the region (a thief runs region frames under it).
  [[nodiscard]] task_id task() const noexcept { return task_; }
  // Whether the region ended (H's body, before resuming it).
  [[nodiscard]] bool finished() const noexcept {
    return state_.load(atomics::acquire) == done;  // pairs with finish()'s release
  }

  // A cancel of H: children not yet launched are not launched (their
  // slots hold task_cancelled); running ones finish.
  // (With a join state, its cancel bit was set before: H's run cancels
  // the region only for that bit, which fork_record::cancelled reads.)
  void cancel() noexcept { cancelled_.store(cancel_bit, atomics::relaxed); }
  // The word whose cancel_bit says the region was cancelled (each
  // fork_record keeps it at hand).
  [[nodiscard]] const atomics::atomic<std::uint32_t>* cancel_word() const noexcept {
    return cancel_word_;
  }
  // The bit of that word that says cancelled: the join state's, so that
  // cancelled_ can stand in for it.
  static constexpr std::uint32_t cancel_bit = join_state_base::cancel_request_bit;

 private:
  static constexpr std::uint8_t running = 0;
  static constexpr std::uint8_t opener_left = 1;
  static constexpr std::uint8_t done = 2;

  scheduler* core_;
  task_id task_;
  atomics::atomic<std::uint8_t> state_{running};
  atomics::atomic<std::uint32_t> cancelled_{0};
  // The cancel word: the join state's, or cancelled_.
  const atomics::atomic<std::uint32_t>* cancel_word_;
};

// A join's record: the rest of the join, as one offered_job on a deque.
class fork_record : public offered_job {
 public:
  // The typed part (fork_join_await.hpp): launches child `index` (after
  // prepare_launch) and runs it on this thread. Never throws; a child that
  // could not be made has its error in its slot and counts as ended.
  using start_fn = child_run (*)(fork_record& record, std::uint32_t index) noexcept;

  template <start_fn Start>
  struct typed_start {};

  template <start_fn Start>
  fork_record(typed_start<Start> /*start*/, std::uint32_t count) noexcept : count_(count) {
    execute = &run_stolen_with<Start>;
  }
  fork_record(fork_record&&) = delete;
  fork_record(const fork_record&) = delete;
  fork_record& operator=(const fork_record&) = delete;
  fork_record& operator=(fork_record&&) = delete;
  ~fork_record() = default;

  // Before the first launch. `parent`: the joining region frame, resumed
  // when the join completes; null for a region's root join, whose end
  // finishes `region` instead.
  void open(std::coroutine_handle<> parent, fork_region* region) noexcept {
    parent_ = parent;
    region_ = region;
    cancel_word_ = region->cancel_word();
    stack_ = stack_in_use();
  }

  // A thief runs the rest of the join (offer_deque's steal gave it the
  // record): one more steal, then the next children, on this thread.
  template <start_fn Start>
  static void run_stolen_with(offered_job& job) noexcept {
    auto& record = static_cast<fork_record&>(job);
    ++record.steals_;  // plain: the steal made this thread the record's holder
    const region_scope scope(joins_here());
    drive(record.run_rest<Start>());
  }

  // How many children the join has.
  [[nodiscard]] std::uint32_t children() const noexcept { return count_; }

  // Region frames resume the region's children: a cancelled one is not
  // launched. (The typed part asks.)
  // relaxed: it only decides whether a child not yet launched runs.
  [[nodiscard]] bool cancelled() const noexcept {
    return (cancel_word_->load(atomics::relaxed) & fork_region::cancel_bit) != 0;
  }

  // The typed part, before it runs child `next_ - 1`: the child's link
  // names this record and how its end continues the join, and the rest of
  // the join is offered to thieves when there is a rest. Returns whether
  // it was offered.
  template <start_fn Start>
  [[gnu::always_inline]] bool prepare_launch(region_link& link) noexcept {
    link.record = this;
    if (next_ < count_) {
      link.ended = &child_ended_with<Start>;
      link.offered = offer_rest();
      return link.offered;
    }
    // The last child: its end only joins.
    link.ended = &last_child_ended;
    link.offered = false;
    return false;
  }

 private:
  static constexpr std::uint32_t k_max = std::uint32_t{1} << 31;

  // Offer the rest of the join on this worker's deque; false when it could
  // not be (a full deque, a thread that is not a worker): then this thread
  // keeps the record and launches the next child itself.
  [[gnu::always_inline]] bool offer_rest() noexcept { return offer_to_thieves(*this); }

 protected:
  // The thread that holds the record launches every child not launched
  // yet, each run nested here, and joins. Returns the coroutine to run next
  // when the join completed here (the parent; null for a root join, whose
  // region it finished), or null when another thread holds the join now.
  template <start_fn Start, bool NestingChecked = false>
  [[gnu::always_inline]] std::coroutine_handle<> run_rest() noexcept {
    if constexpr (!NestingChecked) {
      // Each join nests its children one level deeper in this thread's C++
      // stack. Below the run's floor the join goes to the bottom of the
      // run instead: drive() calls the rest, and this thread keeps the
      // record (its frames stay on this thread's stack). Every level above
      // returns as if its child were waiting on another thread, without
      // touching its record; its child's end comes through its link.
      region_thread& here = region_state();
      if (stack_position() < here.nesting_floor) [[unlikely]] {
        here.deferred = this;
        here.deferred_rest = &deferred_rest<Start>;
        return {};
      }
    }
    while (next_ < count_) {
      const std::uint32_t index = next_++;
      const child_run run = Start(*this, index);
      if (run == child_run::suspended) {
        return {};  // the join is another thread's: only locals now
      }
      if (run == child_run::ended_offered && !take_back_from_thieves(*this)) {
        return count_end_elsewhere();
      }
    }
    return join();
  }

 private:
  // A child ended (its frame is gone) in a run that is not its launch's:
  // continue the join if this thread holds the record, else count the end.
  template <start_fn Start>
  static std::coroutine_handle<> child_ended_with(region_link& link) noexcept {
    auto& record = *static_cast<fork_record*>(link.record);
    if (link.offered && !take_back_from_thieves(record)) {
      return record.count_end_elsewhere();
    }
    return record.run_rest<Start>();
  }

  // A deferred join's rest, from the bottom of the run (drive).
  template <start_fn Start>
  static std::coroutine_handle<> deferred_rest(void* record) noexcept {
    return static_cast<fork_record*>(record)->run_rest<Start, true>();
  }

  // A thief holds the record: this child's end is counted on it.
  std::coroutine_handle<> count_end_elsewhere() noexcept {
    // acq_rel: this child's result and everything this thread did happen
    // before the subtraction that reaches 0, which reads them (release);
    // if that is this one, it reads the others' (acquire). The stack
    // hand-over rides on the same edges (top of this file).
    const bool holds_frames = stack_in_use() != nullptr;
    if (joins_.fetch_sub(1, atomics::acq_rel) == 1) {
      adopt_joining_stack();
      return complete();
    }
    if (holds_frames) {
      release_stack();  // the winner adopts it
    }
    return {};  // the record's holder or another child's end goes on
  }

  // The last child launched ended: it was not offered (nothing was left to
  // offer), so this thread holds the record.
  static std::coroutine_handle<> last_child_ended(region_link& link) noexcept {
    return static_cast<fork_record*>(link.record)->join();
  }

  // Every child was launched and the last one ended, on this thread, which
  // holds the record.
  std::coroutine_handle<> join() noexcept {
    if (steals_ == 0) {
      return complete();  // nobody else ran a child: no atomic
    }
    const std::uint32_t mine = k_max - steals_;
    const bool holds_frames = stack_in_use() != nullptr;
    // acq_rel: as in count_end_elsewhere; the stolen children's ends each
    // subtract 1, this the rest, so exactly one subtraction reaches 0.
    if (joins_.fetch_sub(mine, atomics::acq_rel) == mine) {
      adopt_joining_stack();
      return complete();
    }
    if (holds_frames) {
      release_stack();  // the winner adopts it
    }
    return {};
  }

  // The winner of a stolen join goes on with the stack the join opened on
  // (the joining frame's), if it held frames.
  void adopt_joining_stack() noexcept {
    if (stack_ != nullptr) {
      adopt_stack(stack_);
    }
  }

  // The join completed: its coroutine goes on (a nested join), or the
  // region ends (the root join).
  std::coroutine_handle<> complete() noexcept {
    if (parent_) {
      return parent_;
    }
    region_->finish();
    return {};
  }

  std::coroutine_handle<> parent_;
  fork_region* region_ = nullptr;
  const atomics::atomic<std::uint32_t>* cancel_word_ = nullptr;  // the region's
  stacklet* stack_ = nullptr;  // the joining thread's stack at open, if it held frames
  std::uint32_t count_;
  std::uint32_t next_ = 0;
  std::uint32_t steals_ = 0;
  atomics::atomic<std::uint32_t> joins_{k_max};
};

}  // namespace canopy::detail
