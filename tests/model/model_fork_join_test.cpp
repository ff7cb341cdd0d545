// Model checking of strict fork-join of coroutine tasks (coroutine/
// fork_region.hpp's fork_record and fork_region, driven by the real
// awaiters of coroutine/fork_join_await.hpp and the real canopy::task
// promise, compiled with CANOPY_MODEL_CHECK), on the real
// basic_offer_deque, under every interleaving within the preemption bound.
//
// The world: 2 or 3 model threads, each a worker with its own deque of
// capacity 4 and its own region_thread slot (the protocol's four thread-local
// steps, declared only under CANOPY_MODEL_CHECK, are defined below for the
// model thread that runs). Thread 0 opens the region: it runs the task H,
// whose body co_awaits canopy::join of the case's children; if H suspends
// on the region it steals as an idle worker would, then waits for the wake
// (wake_region_task) and resumes H as the spawn body does once the region
// finished. The other threads are thieves: a bounded number of steal
// rounds over the other deques, each stolen record run (execute) to its
// end. Frames come from allocate_block below, which never reuses an
// address within an execution, so "this child's frame is gone" is a
// lookup.
//
// Checked in every execution (docs/fork_join_design.md, section 4): each
// child is made and runs exactly once (or, cancelled, never); a join goes
// on exactly once, and only after its children's frames are gone; H goes
// on exactly once, in its run (no wake) or after exactly one wake, never
// both; H sees the results, or the first failure in argument order; each
// record offered is taken back by exactly one pop or one steal; at the end
// every deque is empty, every frame freed and every region_thread slot
// clear. Each case also asserts that its exploration reached the
// outcomes it is about (a steal, H suspended and woken, ...), so that a
// change that makes it vacuous fails.
#include <doctest/doctest.h>

#include <algorithm>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "coroutine/fork_join_await.hpp"
#include "coroutine/fork_join_n_await.hpp"
#include "tests/model/expect_clean.hpp"
#include "tests/model/explored_bound.hpp"
#include "tests/model/model_checker.hpp"

namespace {

namespace model = canopy::detail::model;
using canopy::detail::basic_offer_deque;
using canopy::detail::offer;
using canopy::detail::offered_job;

// A child of a join: a leaf (returns `value`, or throws, or cancels the
// region first) or a nested join of the children `left` and `right`.
struct child_spec {
  int value = 0;
  bool throws = false;
  bool make_throws = false;  // the call that makes it throws: never runs
  bool cancels = false;      // calls the region's cancel, as H's cancel does
  int left = -1;             // >= 0: a nested join
  int right = -1;
  bool helps = false;  // a leaf that, while it runs, helps as a waiting callable join does
};

struct fork_case {
  std::vector<child_spec> children;  // by id
  std::vector<int> root;             // H's join: 2 or 3 ids
  std::size_t thieves = 1;
  int thief_rounds = 1;   // steal rounds per thief
  int opener_rounds = 0;  // steal rounds of thread 0 while H waits
  // Every join is left to its run's driver, as below a nesting floor
  // (fork_record::run_rest): each thread's floor is the top of memory.
  bool defer_joins = false;
};

// Outcomes seen across a case's executions.
struct coverage {
  std::uint64_t steals = 0;
  std::uint64_t opener_left = 0;         // H suspended on the region, then woken
  std::uint64_t in_run = 0;              // H went on in its run
  std::uint64_t taken_back = 0;          // a child's end popped its record back
  std::uint64_t counted_ends = 0;        // a child's end found its record stolen
  std::uint64_t cancelled = 0;           // a child not launched after the cancel
  std::uint64_t launched_after = 0;      // a cancel that came after every launch
  std::uint64_t thrown_on_thief = 0;     // a throwing child run by a thief
  std::uint64_t cancelled_on_thief = 0;  // a cancelling child run by a thief
  std::uint64_t nested_stolen = 0;       // a nested join's record stolen
  std::uint64_t refused = 0;             // an offer refused by a full deque
  std::uint64_t adopted = 0;             // a join's winner adopted the loser's stack
  std::uint64_t adopted_by_opener = 0;   // ... and the winner was the opener
  std::uint64_t helped_over_frames = 0;  // help() ran a stolen record while its stack held frames
  std::uint64_t adopted_in_help = 0;     // a join's winner adopted a stack inside help()
};

struct worker_state {
  basic_offer_deque<4> deque;
  canopy::detail::region_thread region;
  canopy::detail::fork_stack_thread stack;
  canopy::detail::worker_context context;
};

// A model of one fork stack (executor/fork_stack.hpp): a real stacklet
// header, which the protocol's inline steps read (empty()), and the frames
// pushed on it, which come from the execution's allocator (no address
// reused), with the model thread that owns it.
struct model_stack {
  static constexpr std::size_t room = 16 * 64;
  alignas(64) std::byte memory[canopy::detail::stacklet::header + room];
  std::vector<void*> frames;
  std::size_t owner = 0;

  model_stack() {
    auto& head = this->head();
    head.sp = head.lo();
    head.hi = head.lo() + room;
    head.prev = nullptr;
    head.next = nullptr;
    head.bytes = sizeof(memory);
  }
  canopy::detail::stacklet& head() { return *reinterpret_cast<canopy::detail::stacklet*>(memory); }
};

class fork_world;
fork_world* active_world = nullptr;  // the execution in progress (one at a time)

canopy::task<int> make_child(fork_world* world, int id);
canopy::task<std::string> make_opener(fork_world* world, const std::vector<int>& root);

class fork_world {
 public:
  fork_world(const fork_case& setup, coverage& seen)
      : setup_(setup), seen_(seen), children_(setup.children.size()) {
    for (std::size_t index = 0; index <= setup.thieves; ++index) {
      workers_.push_back(std::make_unique<worker_state>());
      workers_.back()->context.core = fake_core();
      workers_.back()->context.running = opener_task;
      if (setup.defer_joins) {
        workers_.back()->region.nesting_floor = ~std::uintptr_t{0};
      }
    }
  }
  fork_world(const fork_world&) = delete;
  fork_world& operator=(const fork_world&) = delete;
  ~fork_world() {
    for (void* block : blocks_) {
      std::free(block);
    }
  }

  static constexpr canopy::detail::task_id opener_task{7, 3};

  // --- the protocol's thread-local steps, for the running model thread ---
  worker_state& here() { return *workers_[model::current_thread()]; }
  bool offer_record(offered_job& record) {
    if (!here().deque.push(offer::of_job(record))) {
      ++seen_.refused;
      return false;
    }
    if (root_record_ == nullptr) {
      root_record_ = &record;  // the first offer is the root join's
    }
    offered_.push_back(&record);  // same step as the push's last store
    return true;
  }
  bool take_back_record(const offered_job& record) {
    const canopy::detail::offer got = here().deque.pop();
    if (got.empty()) {
      ++seen_.counted_ends;
      return false;
    }
    if (got != offer::of_job(record)) {
      fail("a child's end popped another entry than its record");
      return false;
    }
    taken(&record, "popped back");
    ++seen_.taken_back;
    return true;
  }
  void wake(canopy::detail::scheduler& core, canopy::detail::task_id task) {
    if (&core != fake_core() || task.slot != opener_task.slot ||
        task.generation != opener_task.generation) {
      fail("the region woke another task than its opener");
    }
    ++wakes_;
    model::unpark_on(&wakes_);
  }

  // --- the frames ---
  void* allocate(std::size_t size) {
    void* block = std::malloc(size);
    if (block == nullptr) {
      throw std::bad_alloc();
    }
    blocks_.push_back(block);
    live_.push_back(block);
    if (framing_ >= 0) {
      children_[static_cast<std::size_t>(std::exchange(framing_, -1))].frame = block;
    }
    return block;
  }
  void free(void* block, std::size_t size) {
    const auto found = std::find(live_.begin(), live_.end(), block);
    if (found == live_.end()) {
      fail("a frame freed twice (or never allocated)");
      return;
    }
    live_.erase(found);
    // The block stays allocated (no address is reused), filled with a
    // pattern: a record or region read from a freed frame reads garbage,
    // which the checks see (a wake of another task, a wrong count).
    std::memset(block, 0xa5, size);
  }
  // --- the fork stacks: frames pushed and popped by their owner only ---
  void* push_stack_frame(std::size_t size) {
    canopy::detail::fork_stack_thread& stack = here().stack;
    if (stack.top == nullptr) {
      stacks_.push_back(std::make_unique<model_stack>());
      stacks_.back()->owner = model::current_thread();
      stack.top = &stacks_.back()->head();
    }
    model_stack& top = stack_of(stack.top);
    if (top.owner != model::current_thread()) {
      fail("a thread pushed a frame on a stack it does not own");
    }
    void* const frame = allocate(size);
    top.frames.push_back(frame);
    stack.top->sp += 16;
    stack_frames_.push_back(frame);
    return frame;
  }
  [[nodiscard]] bool on_stack(void* frame) const {
    return std::find(stack_frames_.begin(), stack_frames_.end(), frame) != stack_frames_.end();
  }
  void pop_stack_frame(void* frame) {
    canopy::detail::stacklet* const top = here().stack.top;
    if (top == nullptr) {
      fail("a stack frame freed by a thread that has no stack");
      return;
    }
    model_stack& stack = stack_of(top);
    if (stack.owner != model::current_thread() || stack.frames.empty() ||
        stack.frames.back() != frame) {
      fail("a stack frame freed by a thread whose stack it is not on top of");
      return;
    }
    stack.frames.pop_back();
    top->sp -= 16;
  }
  void adopt(canopy::detail::stacklet* adopted) {
    canopy::detail::fork_stack_thread& mine = here().stack;
    if (mine.top == adopted) {
      return;
    }
    if (mine.top != nullptr && !stack_of(mine.top).frames.empty()) {
      fail("a stack adopted over one that holds frames");
    }
    for (std::size_t thread = 0; thread < workers_.size(); ++thread) {
      if (thread != model::current_thread() && workers_[thread]->stack.top == adopted) {
        fail("a stack adopted while another thread still runs on it (the loser kept it)");
      }
    }
    ++seen_.adopted;
    seen_.adopted_by_opener += model::current_thread() == 0 ? 1 : 0;
    seen_.adopted_in_help += helping_[model::current_thread()] ? 1 : 0;
    stack_of(adopted).owner = model::current_thread();
    mine.top = adopted;
  }
  void leave_run() {
    canopy::detail::fork_stack_thread& mine = here().stack;
    if (!stack_of(mine.top).frames.empty()) {
      fail("a run of region frames ended with frames on its stack");
    }
    mine.top = nullptr;
  }

  [[nodiscard]] bool gone(int id) const {
    return std::find(live_.begin(), live_.end(), children_[static_cast<std::size_t>(id)].frame) ==
           live_.end();
  }

  // --- the children's bodies ---
  const child_spec& spec(int id) const { return setup_.children[static_cast<std::size_t>(id)]; }
  void made(int id) {  // the call in run_fork_child, after start_one's cancel check
    auto& child = children_[static_cast<std::size_t>(id)];
    if (cancel_requested_) {
      fail("child " + std::to_string(id) + " was launched after the cancel");
    }
    if (++child.made > 1) {
      fail("child " + std::to_string(id) + " was made twice");
    }
  }
  // The next frame allocated is child `id`'s (its call makes it; a call's
  // task starts at once, so later frames are its own children's).
  void framing(int id) { framing_ = id; }
  void started(int id) {
    if (++children_[static_cast<std::size_t>(id)].ran > 1) {
      fail("child " + std::to_string(id) + " ran twice");
    }
    const bool on_thief = model::current_thread() != 0;
    seen_.thrown_on_thief += on_thief && spec(id).throws ? 1 : 0;
    seen_.cancelled_on_thief += on_thief && spec(id).cancels ? 1 : 0;
    if (spec(id).cancels) {
      // What H's cancel does while its region runs (coroutine/coroutine_body.hpp).
      static_cast<canopy::detail::fork_region*>(context_->waiting_on)->cancel();
      cancel_requested_ = true;  // same step as the cancel's store
    }
  }
  void ended(int id) { children_[static_cast<std::size_t>(id)].ended = true; }
  void join_went_on(int id) {  // a nested join's coroutine, after its join
    const child_spec& nested = spec(id);
    if (!gone(nested.left) || !gone(nested.right)) {
      fail("a nested join went on before its children's frames were gone");
    }
  }
  void root_went_on(const std::string& outcome) {
    if (++root_continued_ > 1) {
      fail("the opening task H went on twice");
    }
    for (const int id : setup_.root) {
      if (children_[static_cast<std::size_t>(id)].made != 0 && !gone(id)) {
        fail("the opening task H went on before child " + std::to_string(id) + "'s frame was gone");
      }
    }
    if (live_.size() != 1) {
      fail("the opening task H went on while a region frame lived");
    }
    outcome_ = outcome;
  }

  // --- the threads ---
  void open_region() {
    const auto handle = make_opener(this, setup_.root).release();
    context_.emplace(handle);
    handle.promise().set_context(&*context_);
    handle.resume();  // the spawn body's run: H opens the region
    if (root_continued_ == 1) {
      ++seen_.in_run;
      return;
    }
    opener_left_ = true;
    steal_rounds(setup_.opener_rounds);
    // A wake H did not wait for (its cancel's, a stale waker's) may run it
    // as soon as the region finished, before the finisher's own wake: the
    // spawn body finds the wait over and H goes on, and its frame (the
    // region with it) is freed while the finisher may still be in finish().
    if (static_cast<canopy::detail::fork_region*>(context_->waiting_on)->finished()) {
      context_->resume_point.resume();
      return;
    }
    while (wakes_ == 0 && !stop_) {
      model::park_on(&wakes_, 0, wakes_);
    }
    if (stop_) {
      return;
    }
    // The spawn body's run after the wake: the wait must be over.
    if (context_->kind != canopy::detail::wait_kind::fork_region ||
        !static_cast<canopy::detail::fork_region*>(context_->waiting_on)->finished()) {
      fail("the opening task H was woken before its region finished");
      return;
    }
    ++seen_.opener_left;
    context_->resume_point.resume();
  }
  // A callable join's help() while a region frame runs (executor/
  // join_worker.cpp: one steal from the other deques, the stolen record run
  // nested in this thread's run, on top of the frames of the run it
  // interrupts). The nested run must start on an empty stack and put this
  // run's stack back at its end.
  void help() {
    const std::size_t self = model::current_thread();
    canopy::detail::stacklet* const outer = here().stack.top;
    const bool holds_frames = outer != nullptr && !stack_of(outer).frames.empty();
    const std::uint64_t steals_before = seen_.steals;
    const bool was_helping = helping_[self];
    helping_[self] = true;
    steal_rounds(1);
    helping_[self] = was_helping;
    if (seen_.steals != steals_before && holds_frames) {
      ++seen_.helped_over_frames;
    }
    if (here().stack.top != outer) {
      fail("a run nested by help() did not put the outer run's stack back");
    }
  }
  void steal_rounds(int rounds) {
    const std::size_t self = model::current_thread();
    for (int round = 0; round < rounds; ++round) {
      for (std::size_t victim = 0; victim < workers_.size(); ++victim) {
        if (victim == self) {
          continue;
        }
        const canopy::detail::offer got = workers_[victim]->deque.steal();
        if (got.empty()) {
          continue;
        }
        taken(got.job(), "stolen");
        ++seen_.steals;
        seen_.nested_stolen += got.job() != root_record_ ? 1 : 0;
        got.job()->execute(*got.job());
      }
    }
  }

  std::string check(const std::vector<bool>& parked) {
    if (!failure_.empty()) {
      return failure_;
    }
    if (parked[0]) {
      return "the opening task H waits on a region that never finished or never woke it";
    }
    if (root_continued_ != 1) {
      return "the opening task H did not go on";
    }
    if (wakes_ != (opener_left_ ? 1U : 0U)) {
      return opener_left_ ? "the opening task H left its run and was woken " +
                                std::to_string(wakes_) + " times"
                          : "the opening task H went on in its run and was woken too";
    }
    for (std::size_t id = 0; id < children_.size(); ++id) {
      const auto& child = children_[id];
      const int runs = spec(static_cast<int>(id)).make_throws ? 0 : child.made;
      if (child.ran != runs || (child.ran != 0 && !child.ended)) {
        return "child " + std::to_string(id) + " was made but did not run to its end once";
      }
      if (child.made == 0 && !cancel_requested_) {
        return "child " + std::to_string(id) + " was never launched";
      }
    }
    if (outcome_ != expected_outcome()) {
      return "the opening task H saw '" + outcome_ + "', not '" + expected_outcome() + "'";
    }
    if (!offered_.empty()) {
      return "a record was offered and never taken";
    }
    for (const auto& worker : workers_) {
      if (!worker->deque.looks_empty() || worker->region.next || worker->region.ended != nullptr) {
        return "a deque or a region_thread slot was left non-empty";
      }
      if (worker->stack.top != nullptr || worker->stack.mark != 0) {
        return "a thread's fork stack was left current after its runs";
      }
    }
    for (const auto& stack : stacks_) {
      if (!stack->frames.empty()) {
        return "a fork stack was left holding frames";
      }
    }
    if (!live_.empty()) {
      return std::to_string(live_.size()) + " frames were never freed";
    }
    const bool any_cancelled =
        std::any_of(children_.begin(), children_.end(),
                    [](const child_state& child) { return child.made == 0; });
    if (any_cancelled) {
      ++seen_.cancelled;
    } else if (cancel_requested_) {
      ++seen_.launched_after;
    }
    return {};
  }
  void teardown() {
    stop_ = true;
    model::unpark_on(&wakes_);
  }

 private:
  model_stack& stack_of(canopy::detail::stacklet* head) {
    for (const auto& stack : stacks_) {
      if (&stack->head() == head) {
        return *stack;
      }
    }
    fail("a stack that no model stack is");
    return *stacks_.front();
  }

  struct child_state {
    int made = 0;
    int ran = 0;
    bool ended = false;
    void* frame = nullptr;
  };

  static canopy::detail::scheduler* fake_core() {
    // Only its address is used: the region passes it back to wake().
    alignas(64) static std::byte storage[64];
    return reinterpret_cast<canopy::detail::scheduler*>(&storage);
  }
  void fail(const std::string& why) {
    if (failure_.empty()) {
      failure_ = why;
    }
  }
  void taken(const offered_job* record, const char* how) {
    const auto found = std::find(offered_.begin(), offered_.end(), record);
    if (found == offered_.end()) {
      fail(std::string("a record was ") + how + " that was not on offer");
      return;
    }
    offered_.erase(found);
  }
  // What H must see: the root children's values summed, or the first
  // failure in argument order (a throw, or a child not launched).
  [[nodiscard]] std::string expected_outcome() const {
    int sum = 0;
    for (const int id : setup_.root) {
      if (children_[static_cast<std::size_t>(id)].made == 0) {
        return "cancelled";
      }
      if (spec(id).throws || spec(id).make_throws) {
        return "threw " + std::to_string(id);
      }
      sum += value_of(id);
    }
    return "sum " + std::to_string(sum);
  }
  [[nodiscard]] int value_of(int id) const {
    const child_spec& child = spec(id);
    return child.left >= 0 ? value_of(child.left) + value_of(child.right) : child.value;
  }

  const fork_case& setup_;
  coverage& seen_;
  std::vector<std::unique_ptr<worker_state>> workers_;
  std::vector<child_state> children_;
  std::optional<canopy::detail::task_context> context_;  // H's
  std::vector<const offered_job*> offered_;              // records on some deque
  const offered_job* root_record_ = nullptr;
  std::vector<void*> blocks_;
  std::vector<void*> live_;
  std::vector<std::unique_ptr<model_stack>> stacks_;
  std::vector<bool> helping_ = std::vector<bool>(4, false);  // by model thread: inside help()
  std::vector<void*> stack_frames_;  // every frame pushed on a stack in this execution
  int framing_ = -1;  // the child whose frame the next allocation is
  std::uint32_t wakes_ = 0;
  int root_continued_ = 0;
  bool opener_left_ = false;
  bool cancel_requested_ = false;
  bool stop_ = false;
  std::string outcome_;
  std::string failure_;
};

canopy::task<int> leaf_child(fork_world* world, int id) {
  world->started(id);
  // The child's work: other threads may act while it runs (without this
  // step a leaf would run and end within its launcher's step).
  model::schedule_point();
  if (world->spec(id).helps) {
    world->help();
  }
  world->ended(id);
  if (world->spec(id).throws) {
    throw std::runtime_error(std::to_string(id));
  }
  co_return world->spec(id).value;
}

canopy::task<int> nested_child(fork_world* world, int id) {
  world->started(id);
  const child_spec& nested = world->spec(id);
  auto [left, right] = co_await canopy::join(canopy::call(&make_child, world, nested.left),
                                             canopy::call(&make_child, world, nested.right));
  world->join_went_on(id);
  world->ended(id);
  co_return left + right;
}

// What canopy::call runs when the join launches child `id`.
canopy::task<int> make_child(fork_world* world, int id) {
  world->made(id);
  if (world->spec(id).make_throws) {
    throw std::runtime_error(std::to_string(id));
  }
  world->framing(id);
  return world->spec(id).left >= 0 ? nested_child(world, id) : leaf_child(world, id);
}

// H: the task that opens the region.
template <int Count>
canopy::task<std::string> opener(fork_world* world, int first, int second, int third) {
  std::string outcome;
  try {
    if constexpr (Count == 2) {
      auto [a, b] = co_await canopy::join(canopy::call(&make_child, world, first),
                                          canopy::call(&make_child, world, second));
      outcome = "sum " + std::to_string(a + b);
    } else {
      auto [a, b, c] = co_await canopy::join(canopy::call(&make_child, world, first),
                                             canopy::call(&make_child, world, second),
                                             canopy::call(&make_child, world, third));
      outcome = "sum " + std::to_string(a + b + c);
    }
  } catch (const canopy::task_cancelled&) {
    outcome = "cancelled";
  } catch (const std::runtime_error& error) {
    outcome = std::string("threw ") + error.what();
  }
  world->root_went_on(outcome);
  co_return outcome;
}

canopy::task<std::string> make_opener(fork_world* world, const std::vector<int>& root) {
  return root.size() == 2 ? opener<2>(world, root[0], root[1], -1)
                          : opener<3>(world, root[0], root[1], root[2]);
}

struct case_result {
  model::exploration_result explored;
  coverage seen;
  // Explored at a lower bound than the case asks (sanitizer builds,
  // explored_bound): some outcomes need the case's bound.
  bool lowered = false;
};

case_result check_fork_case(const fork_case& setup, int preemption_bound) {
  case_result result;
  const int threads = static_cast<int>(setup.thieves) + 1;
  const int bound = model::explored_bound(preemption_bound, threads);
  result.lowered = bound != preemption_bound;
  std::shared_ptr<fork_world> current;
  result.explored = model::explore(
      [&] {
        active_world = nullptr;
        current = std::make_shared<fork_world>(setup, result.seen);
        active_world = current.get();
        model::scenario run;
        run.threads.emplace_back([world = current] { world->open_region(); });
        for (std::size_t thief = 0; thief < setup.thieves; ++thief) {
          run.threads.emplace_back(
              [world = current, rounds = setup.thief_rounds] { world->steal_rounds(rounds); });
        }
        run.check = [world = current](const std::vector<bool>& parked) {
          return world->check(parked);
        };
        run.teardown = [world = current] { world->teardown(); };
        return run;
      },
      bound, 2000000);
  active_world = nullptr;
  return result;
}

// Checked at the case's own bound only.
void expect_reached(const case_result& result, const char* what, std::uint64_t count) {
  if (result.lowered) {
    return;
  }
  INFO("no execution reached: " << std::string(what));
  CHECK(count > 0);
}

}  // namespace

// The protocol's thread-local steps (coroutine/fork_region.hpp, task.hpp),
// declared only under CANOPY_MODEL_CHECK: the running model thread's. The
// frames' allocator (executor/block_pool.hpp, not in this build): the
// execution's, else malloc. current_worker (executor/scheduler.hpp): the
// running model thread's worker, which names H as its running task.
// report_detached_exception_here (executor/join_state.hpp): H catches what
// its join throws, so nothing reaches it.
namespace canopy::detail {

bool offer_to_thieves(offered_job& record) noexcept { return active_world->offer_record(record); }
bool take_back_from_thieves(const offered_job& record) noexcept {
  return active_world->take_back_record(record);
}
void wake_region_task(scheduler& core, task_id task) noexcept { active_world->wake(core, task); }
region_thread& region_state() noexcept { return active_world->here().region; }
fork_stack_thread& fork_stack_state() noexcept { return active_world->here().stack; }
join_worker* joins_here() noexcept { return nullptr; }
worker_context* current_worker() noexcept { return &active_world->here().context; }
// H has no join state here: its cancel is the region's cancel() (the
// `cancels` cases).
const join_state_base* running_task_cancel_state() noexcept { return nullptr; }
void report_detached_exception_here(const std::exception_ptr& /*error*/) noexcept {
  std::fputs("model fork-join: an exception left H\n", stderr);
  std::abort();
}

// The fork stacks (executor/fork_stack.hpp, not in this build): the model
// stacks above. Every address counts as a stack's for operator delete, which
// then tells the frames pushed on a stack from the others.
constinit stacklet_range fork_stack_range{0, ~std::uintptr_t{0}};
void* allocate_task_frame(std::size_t size) {
  if (active_world == nullptr || fork_stack_state().mark != want_stack_frame) {
    return allocate_block(size);
  }
  void* const frame = active_world->push_stack_frame(size);
  fork_stack_state().mark = reinterpret_cast<std::uintptr_t>(frame);
  return frame;
}
void free_stack_frame(void* frame, std::size_t size) noexcept {
  if (active_world != nullptr && active_world->on_stack(frame)) {
    active_world->pop_stack_frame(frame);
  }
  free_block(frame, size);
}
void stack_frame_not_kept(std::uintptr_t consumed) noexcept {
  if (consumed != 0 && consumed != want_stack_frame) {
    std::fputs("model fork-join: make() kept a task frame it made on the stack\n", stderr);
    std::abort();
  }
}
void started_frame_not_returned() noexcept {
  std::fputs("model fork-join: make() did not return the child it started\n", stderr);
  std::abort();
}
void stack_frame_dropped(void* frame, const void* type, bool children_start) noexcept {
  const fork_stack_thread& here = fork_stack_state();
  if (active_world != nullptr && active_world->on_stack(frame) &&
      ((children_start && here.launch_result == 0) ||
       (here.mark == reinterpret_cast<std::uintptr_t>(frame) && here.launch_type == type))) {
    started_frame_not_returned();
  }
}
void adopt_stack(stacklet* stack) noexcept { active_world->adopt(stack); }
void leave_stack_run_slow(fork_stack_thread& /*here*/) noexcept { active_world->leave_run(); }

void* allocate_block(std::size_t size) {
  if (active_world == nullptr) {
    void* block = std::malloc(size);
    if (block == nullptr) {
      throw std::bad_alloc();
    }
    return block;
  }
  return active_world->allocate(size);
}
void free_block(void* block, std::size_t size) noexcept {
  if (active_world == nullptr) {
    std::free(block);
  } else {
    active_world->free(block, size);
  }
}
// Named by inline code of the task headers that no case here runs (a
// wait link's fire): an unoptimised build emits it, so the link needs it.
// Reaching it is a broken case.
bool scheduler::schedule(task_id /*id*/) noexcept { std::abort(); }

}  // namespace canopy::detail

TEST_CASE("fork-join: a thief steals the root continuation while the opener runs child 0") {
  // H joins two leaves. The opener runs child 0 with the rest of the join
  // on its deque; the thief may steal it and run child 1 while child 0
  // runs, before or after the opener left its run: the root join is won by
  // either side, and H goes on in its run (no wake) or exactly once after
  // one wake. The opener, once it left, steals back from the thief.
  fork_case setup;
  setup.children = {{.value = 1}, {.value = 2}};
  setup.root = {0, 1};
  setup.thief_rounds = 2;
  setup.opener_rounds = 1;
  const case_result result = check_fork_case(setup, 4);
  model::expect_clean(result.explored);
  expect_reached(result, "a steal", result.seen.steals);
  expect_reached(result, "H woken after it left its run", result.seen.opener_left);
  expect_reached(result, "H going on in its run", result.seen.in_run);
  expect_reached(result, "a record popped back", result.seen.taken_back);
  expect_reached(result, "a child's end counted on a stolen record", result.seen.counted_ends);
}

TEST_CASE("fork-join: a nested join's record is stolen while the root's is too") {
  // H joins (a, 3) where a joins the leaves 1 and 2: the opener's deque
  // holds the root record under a's. The thief steals the oldest (the
  // root's: it runs leaf 3) and, in a second round, a's; the opener, once
  // it left, steals from the thief. Each join goes on once, after its
  // children's frames are gone; a's coroutine goes on wherever its join is
  // won and its end reaches the root join.
  fork_case setup;
  setup.children = {{.left = 1, .right = 2}, {.value = 1}, {.value = 2}, {.value = 4}};
  setup.root = {0, 3};
  setup.thief_rounds = 2;
  setup.opener_rounds = 1;
  const case_result result = check_fork_case(setup, 4);
  model::expect_clean(result.explored);
  expect_reached(result, "a steal", result.seen.steals);
  expect_reached(result, "a nested record stolen", result.seen.nested_stolen);
  expect_reached(result, "H woken after it left its run", result.seen.opener_left);
  expect_reached(result, "H going on in its run", result.seen.in_run);
}

TEST_CASE("fork-join: joins left to the run's driver, with steals, still each go on once") {
  // The nested case above with every join deferred (as when a thread's C++
  // stack reached its nesting floor): each run_rest leaves its join to the
  // driver of its run and returns as if its child waited elsewhere; a's
  // join runs from the opener's drive() (or a thief's), and a's end comes
  // through its link to the root join, whose record may have been stolen
  // meanwhile.
  fork_case setup;
  setup.children = {{.left = 1, .right = 2}, {.value = 1}, {.value = 2}, {.value = 4}};
  setup.root = {0, 3};
  setup.thief_rounds = 2;
  setup.opener_rounds = 1;
  setup.defer_joins = true;
  const case_result result = check_fork_case(setup, 4);
  model::expect_clean(result.explored);
  expect_reached(result, "a steal", result.seen.steals);
  expect_reached(result, "a nested record stolen", result.seen.nested_stolen);
  expect_reached(result, "a record popped back", result.seen.taken_back);
  expect_reached(result, "H woken after it left its run", result.seen.opener_left);
  expect_reached(result, "H going on in its run", result.seen.in_run);
}

TEST_CASE("fork-join: two thieves race the owner's pop for the last record") {
  // H joins two leaves; two thieves each try once to steal the one record
  // while child 0's end pops it back: exactly one of the three gets it.
  fork_case setup;
  setup.children = {{.value = 1}, {.value = 2}};
  setup.root = {0, 1};
  setup.thieves = 2;
  const case_result result = check_fork_case(setup, 4);
  model::expect_clean(result.explored);
  expect_reached(result, "a steal", result.seen.steals);
  expect_reached(result, "a record popped back", result.seen.taken_back);
  expect_reached(result, "a child's end counted on a stolen record", result.seen.counted_ends);
  expect_reached(result, "H woken after it left its run", result.seen.opener_left);
}

TEST_CASE("fork-join: a child throws while its sibling was stolen") {
  // H joins (1, throws, throws): every child runs to its end whichever
  // thread runs it, and H sees the first failure in argument order (child
  // 1's), whichever ended first.
  fork_case setup;
  setup.children = {{.value = 1}, {.throws = true}, {.throws = true}};
  setup.root = {0, 1, 2};
  setup.thief_rounds = 2;
  setup.opener_rounds = 1;
  const case_result result = check_fork_case(setup, 4);
  model::expect_clean(result.explored);
  expect_reached(result, "a throwing child run by a thief", result.seen.thrown_on_thief);
  expect_reached(result, "H woken after it left its run", result.seen.opener_left);
}

TEST_CASE("fork-join: H cancelled while a stolen child runs") {
  // H joins (1, 2, 4); child 1 cancels H's region while it runs (as H's
  // cancel does, coroutine/coroutine_body.hpp). A child not launched by then is
  // never launched (H sees task_cancelled); one launched before runs; the
  // region finishes once and H goes on once.
  fork_case setup;
  setup.children = {{.value = 1}, {.value = 2, .cancels = true}, {.value = 4}};
  setup.root = {0, 1, 2};
  setup.thief_rounds = 2;
  setup.opener_rounds = 1;
  const case_result result = check_fork_case(setup, 4);
  model::expect_clean(result.explored);
  expect_reached(result, "the cancel run by a thief", result.seen.cancelled_on_thief);
  expect_reached(result, "a child not launched after the cancel", result.seen.cancelled);
  expect_reached(result, "a child launched before the cancel", result.seen.launched_after);
}

TEST_CASE("fork-join: two thieves share a nested region") {
  // The nested region above with two thieves, one round each: the root's
  // record and a's may go to different thieves, and a's join is then won
  // on a thief while the root's waits for it.
  fork_case setup;
  setup.children = {{.left = 1, .right = 2}, {.value = 1}, {.value = 2}, {.value = 4}};
  setup.root = {0, 3};
  setup.thieves = 2;
  const case_result result = check_fork_case(setup, 3);
  model::expect_clean(result.explored);
  expect_reached(result, "a nested record stolen", result.seen.nested_stolen);
  expect_reached(result, "H woken after it left its run", result.seen.opener_left);
}

TEST_CASE("fork-join: a join nested deeper than the deque keeps its record") {
  // H joins (0, 9); 0 = join(1, 2), 1 = join(3, 4), 3 = join(5, 6),
  // 5 = join(7, 8): the opener's deque (capacity 4) holds the records of
  // H's join and of 0, 1 and 3 when 5's is offered, which is refused: 5's
  // children run one after the other on the opener, with no pop and no
  // count. The thief steals the oldest records meanwhile.
  fork_case setup;
  setup.children = {{.left = 1, .right = 2},
                    {.left = 3, .right = 4},
                    {.value = 1},
                    {.left = 5, .right = 6},
                    {.value = 2},
                    {.left = 7, .right = 8},
                    {.value = 4},
                    {.value = 8},
                    {.value = 16},
                    {.value = 32}};
  setup.root = {0, 9};
  setup.thief_rounds = 2;
  setup.opener_rounds = 1;
  const case_result result = check_fork_case(setup, 4);
  model::expect_clean(result.explored);
  expect_reached(result, "an offer refused by the full deque", result.seen.refused);
  expect_reached(result, "a nested record stolen", result.seen.nested_stolen);
  expect_reached(result, "H woken after it left its run", result.seen.opener_left);
}

TEST_CASE("fork-join: a child that cannot be made is skipped by whoever holds the record") {
  // H joins (1, make throws, throws): child 1's call throws when it is
  // launched, on the opener or on the thief that stole the record; the
  // launch goes on to child 2 (the last: not offered). H sees child 1's
  // failure; child 2 still runs.
  fork_case setup;
  setup.children = {{.value = 1}, {.make_throws = true}, {.throws = true}};
  setup.root = {0, 1, 2};
  setup.thief_rounds = 2;
  setup.opener_rounds = 1;
  const case_result result = check_fork_case(setup, 4);
  model::expect_clean(result.explored);
  expect_reached(result, "a throwing child run by a thief", result.seen.thrown_on_thief);
  expect_reached(result, "H woken after it left its run", result.seen.opener_left);
}

TEST_CASE("fork-join: a nested join's winner adopts the stack its loser gave away") {
  // H joins (a, 3) where a joins the leaves 1 and 2. a's frame is on the
  // opener's stack; the thief steals the root's record, then a's, and runs
  // leaf 2. When the thief's end of a's join comes last, the opener (leaf
  // 1's end found a's record gone) gave its stack, with a on it, away, and
  // the thief adopts it: a goes on there and its frame is popped by the
  // thief. Checked in every execution: frames pushed and popped only by
  // their stack's owner at its top, no stack adopted while another thread
  // still runs on it, none adopted over frames, every stack empty at the end.
  fork_case setup;
  setup.children = {{.left = 1, .right = 2}, {.value = 1}, {.value = 2}, {.value = 4}};
  setup.root = {0, 3};
  setup.thief_rounds = 2;
  const case_result result = check_fork_case(setup, 4);
  model::expect_clean(result.explored);
  expect_reached(result, "a nested record stolen", result.seen.nested_stolen);
  expect_reached(result, "a stack adopted by a join's winner", result.seen.adopted);
}

TEST_CASE("fork-join: the opener adopts the stack a thief gave away") {
  // H joins (3, a): the thief steals the root's record and runs a (a's frame
  // on the thief's stack), which joins the leaves 1 and 2 and offers its
  // record on the thief's deque. The opener, once it left its run, steals
  // that record and runs leaf 2; when its end is the last, the thief (leaf
  // 1's end found a's record gone) gave its stack away and the opener adopts
  // it, goes on with a and pops a's frame.
  fork_case setup;
  setup.children = {{.left = 1, .right = 2}, {.value = 1}, {.value = 2}, {.value = 4}};
  setup.root = {3, 0};
  setup.thief_rounds = 1;
  setup.opener_rounds = 1;
  const case_result result = check_fork_case(setup, 4);
  model::expect_clean(result.explored);
  expect_reached(result, "a nested record stolen", result.seen.nested_stolen);
  expect_reached(result, "a stack adopted by the opener", result.seen.adopted_by_opener);
}

TEST_CASE("fork-join: a nested steal from help swaps in an empty stack") {
  // H joins (a, h): a joins the leaves 1 and 2 on the opener, h is a leaf
  // that helps while it runs, as a callable join waiting in a region frame
  // does. The thief steals the root's record and runs h, its frame on the
  // thief's stack; h's help steals a's record and runs leaf 2 nested, on
  // an empty stack swapped in over h's frame. When leaf 2's end is a's
  // last, the thief adopts the opener's stack (a on it) inside the help,
  // pops a, and at the nested run's end h's stack is current again; never
  // a frame pushed over h's, nor a stack with h on it given away.
  fork_case setup;
  setup.children = {
      {.left = 1, .right = 2}, {.value = 1}, {.value = 2}, {.value = 4, .helps = true}};
  setup.root = {0, 3};
  setup.thief_rounds = 1;
  const case_result result = check_fork_case(setup, 4);
  model::expect_clean(result.explored);
  expect_reached(result, "help() running a stolen record over frames",
                 result.seen.helped_over_frames);
  expect_reached(result, "a stack adopted inside help()", result.seen.adopted_in_help);
}
