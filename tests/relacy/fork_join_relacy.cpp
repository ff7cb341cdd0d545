// Weak-memory check of fork-join's join counter and stack hand-over
// (coroutine/fork_region.hpp, executor/fork_stack.hpp): the real
// fork_record and fork_region on the real basic_offer_deque, under
// Relacy's simulation of the C++ memory model. A join of two children: the
// owner launches child 0 with the record offered on its deque, a thief may
// steal the record and launch child 1; each child writes its result into a
// Relacy variable, and whichever subtraction on the record's counter
// reaches 0 (or the pop-back path, with no steal) continues the join, which
// reads both results. Reading a result without a happens-before edge from
// its writer is reported as a data race: that is what the acq_rel on each
// subtraction is for. The record's plain fields (next_, steals_), written
// by whoever holds the record, are stood in for by a Relacy variable the
// start function writes, so that their hand-over through the deque's push
// and steal is checked too.
//
// The children and the joining coroutine are small coroutines of this file
// whose end does what coroutine/task.hpp's promise does for a region
// frame: leave the child's region_link (leave_region_frame), then free the
// frame. Each child runs nested in its launch, as run_fork_child runs it,
// and its launcher sees its end (child_ended_here); a driver follows the
// link of a frame it resumed. Two shapes: a nested join (the joining
// coroutine goes on in its own run when the join completes there, else
// the join's winner resumes it; it reads the results) and the
// region's root join (the winner finishes the region; the results are read
// by the opener if leave() saw the end, else by the wake of the opening
// task, on the finishing thread).
//
// The stacklet hand-over (executor/fork_stack.hpp, docs/fork_join_design.md
// 3.4): the nested join again, with its frames on fork stacks as a call's
// children are. The joining frame and child 0 go on the owner's stack,
// child 1 on the thief's; each frame's allocation pushes it on the calling
// thread's stack and its free pops it (promise_of's operator new and
// delete). When the thief wins, the owner (the loser, whose stack holds the
// joining frame) gives its stack away (release_stack) and the thief adopts
// it (adopt_stack) and runs and pops the joining frame; when the owner
// wins it goes on with its own. The protocol's steps are the real ones:
// fork_record's open, run_rest, count_end_elsewhere and join,
// stack_in_use, release_stack, and region_scope's enter_stack_run and
// leave_stack_run. Two are the
// test's, with the same effect on the thread's state: adopt_stack and
// leave_stack_run_slow live in executor/fork_stack.cpp with the shared
// pool (its mutex, its mmap'd reservation, and the block pool behind it),
// which would take the test's stacklets into the process's pool; they
// check what the real ones abort on (an adoption over a stack with
// frames, a run that ends with frames on its stack). A stacklet's words
// are plain memory, which Relacy does not follow: each test stack has a
// Relacy variable standing for its `sp`, written by every push and pop and
// read by each pop and by stack_in_use (its hook under CANOPY_RELACY,
// stack_words_read). The loser's last write (child 0's pop) comes before
// its subtraction and the winner's accesses (the joining frame's pop)
// after its own, so the acq_rel subtractions must order them; a read of
// the loser's stack after its subtraction is a data race with the
// winner's pop.
#include <doctest/doctest.h>

#include <array>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>

#include "atomics/atomics.hpp"  // first: Relacy, then its allocation macros taken back
#include "coroutine/fork_region.hpp"

namespace {

using canopy::detail::fork_record;
using canopy::detail::region_link;

// A region frame: starts suspended; its end leaves its link for the driver
// and frees the frame (coroutine/task.hpp, promise_of::final_suspend).
struct region_frame {
  struct promise_type {
    region_link* link = nullptr;  // a child's; null for the joining coroutine

    // On the calling thread's fork stack in the hand-over case (as
    // promise_of's operator new and delete put a call's child there).
    static void* operator new(std::size_t size);
    static void operator delete(void* frame) noexcept;

    region_frame get_return_object() noexcept {
      return {std::coroutine_handle<promise_type>::from_promise(*this)};
    }
    std::suspend_always initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept {
      canopy::detail::leave_region_frame(link, {});
      return {};
    }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { std::terminate(); }
  };
  std::coroutine_handle<promise_type> handle;
};

struct join_world;
join_world* world = nullptr;  // the iteration in progress

// Outcomes seen across a check's schedules: the check fails if one never
// happened (a change that made the case vacuous).
struct outcomes {
  int stolen = 0;        // the thief took the record
  int won_by_thief = 0;  // the results read on the thief (it won the join)
  int won_by_owner = 0;  // read on the owner after a steal
  int adopted = 0;       // the thief adopted the owner's stack (the hand-over)
};
outcomes seen;

class two_children : public fork_record {
 public:
  explicit two_children(join_world& owner)
      : fork_record(typed_start<&start>{}, 2), owner_(owner) {}

  // The joining thread's first run of the join (a joining frame's
  // await_suspend, or the region's opener): the coroutine to run next, or
  // null when another thread holds the join.
  std::coroutine_handle<> run_children() noexcept { return run_rest<&start>(); }

 private:
  static canopy::detail::child_run start(fork_record& record, std::uint32_t index) noexcept;
  join_world& owner_;
};

// Only its address is used: the region passes it to wake_region_task.
canopy::detail::scheduler* fake_core() {
  alignas(64) static std::byte storage[64];
  return reinterpret_cast<canopy::detail::scheduler*>(&storage);
}

// One fork stack of the hand-over case: a real stacklet header, which
// stack_in_use reads (empty()), with room for the frames pushed on it (16
// bytes each: only their addresses matter), which come from the heap.
struct test_stack {
  static constexpr std::size_t frame_bytes = 16;
  static constexpr std::size_t room = 4 * frame_bytes;
  alignas(64) std::array<std::byte, canopy::detail::stacklet::header + room> memory{};
  rl::var<std::size_t> sp{0};  // the header's sp, for Relacy: how many frames
  std::array<void*, 4> frames{};
  std::size_t depth = 0;
  std::size_t owner = 0;
  bool taken = false;  // by its thread's first push (fork_stack.cpp's grow)
  bool given = false;  // given back, emptied (leave_stack_run_slow, adopt_stack)

  test_stack() {
    canopy::detail::stacklet& top = head();
    top.sp = top.lo();
    top.hi = top.lo() + room;
    top.prev = nullptr;
    top.next = nullptr;
    top.bytes = memory.size();
  }
  canopy::detail::stacklet& head() {
    return *reinterpret_cast<canopy::detail::stacklet*>(memory.data());
  }
};

struct join_world {
  std::array<canopy::detail::basic_offer_deque<4>, 2> deques;
  std::array<canopy::detail::region_thread, 2> threads{};
  std::array<canopy::detail::fork_stack_thread, 2> stacks{};
  bool frames_on_stacks = false;          // the hand-over case; else no frame goes on a stack
  std::array<test_stack, 2> fork_stacks;  // thread i's, taken at its first push
  std::array<region_link, 2> links{};
  std::array<rl::var<int>, 2> results;
  rl::var<int> holder;  // the record's plain fields, written by its holder
  canopy::detail::fork_region region{fake_core(), {}};
  two_children record{*this};
  int offered = 0;
  int taken = 0;
  int results_read = 0;
  int wakes = 0;
  bool stolen = false;

  static std::size_t self() { return rl::ctx().current_thread(); }

  void read_results() {
    RL_ASSERT(results[0]($) == 1);
    RL_ASSERT(results[1]($) == 2);
    ++results_read;
    if (stolen) {
      ++(self() == 1 ? seen.won_by_thief : seen.won_by_owner);
    }
  }

  // --- the fork stacks (executor/fork_stack.cpp's steps, on test stacks) ---
  test_stack& stack_of(const canopy::detail::stacklet* top) {
    test_stack* found = nullptr;
    for (test_stack& stack : fork_stacks) {
      found = &stack.head() == top ? &stack : found;
    }
    RL_ASSERT(found != nullptr);
    return *found;
  }
  // The owner reads the stack's words (stack_in_use, a pop, an emptiness
  // check): a data race unless the last write happens before.
  void read_words(test_stack& stack) {
    const std::size_t frames = stack.sp($);
    RL_ASSERT(frames == stack.depth);
    RL_ASSERT(stack.owner == self());
  }
  void push_frame(void* frame) {
    canopy::detail::fork_stack_thread& here = stacks[self()];
    if (here.top == nullptr) {
      test_stack& fresh = fork_stacks[self()];
      RL_ASSERT(!fresh.taken);
      fresh.taken = true;
      fresh.owner = self();
      here.top = &fresh.head();
    }
    test_stack& stack = stack_of(here.top);
    read_words(stack);
    RL_ASSERT(stack.depth < stack.frames.size());
    stack.frames[stack.depth++] = frame;
    here.top->sp += test_stack::frame_bytes;
    stack.sp($) = stack.depth;
  }
  // free_stack_frame: the frame must be the top one of this thread's stack.
  void pop_frame(void* frame) {
    canopy::detail::fork_stack_thread& here = stacks[self()];
    RL_ASSERT(here.top != nullptr);
    test_stack& stack = stack_of(here.top);
    read_words(stack);
    RL_ASSERT(stack.depth > 0 && stack.frames[stack.depth - 1] == frame);
    --stack.depth;
    here.top->sp -= test_stack::frame_bytes;
    stack.sp($) = stack.depth;
  }
  // adopt_stack: the calling thread's own stack must be empty; it is given
  // back, and `adopted` is this thread's to run and pop.
  void adopt(canopy::detail::stacklet* adopted) {
    canopy::detail::fork_stack_thread& here = stacks[self()];
    if (here.top == adopted) {
      return;
    }
    if (here.top != nullptr) {
      test_stack& mine = stack_of(here.top);
      read_words(mine);
      RL_ASSERT(mine.depth == 0);  // "a stack adopted over one that still holds frames"
      RL_ASSERT(!mine.given);
      mine.given = true;
    }
    stack_of(adopted).owner = self();
    here.top = adopted;
    seen.adopted += self() == 1 ? 1 : 0;
  }
  // leave_stack_run_slow: the run's stack must be empty; it is given back.
  void leave_run() {
    canopy::detail::fork_stack_thread& here = stacks[self()];
    test_stack& stack = stack_of(here.top);
    read_words(stack);
    RL_ASSERT(stack.depth == 0);  // "a run of region frames ended with frames left on its stack"
    RL_ASSERT(!stack.given);
    stack.given = true;
    here.top = nullptr;
  }
};

void* region_frame::promise_type::operator new(std::size_t size) {
  void* const frame = ::operator new(size);
  if (world->frames_on_stacks) {
    world->push_frame(frame);
  }
  return frame;
}

void region_frame::promise_type::operator delete(void* frame) noexcept {
  if (world->frames_on_stacks) {
    world->pop_frame(frame);
  }
  ::operator delete(frame);
}

region_frame child(join_world& owner, std::uint32_t index) {
  owner.results[index]($) = static_cast<int>(index) + 1;
  co_return;
}

// Launches child `index` and runs it here, nested, as run_fork_child
// does (fork_join_await.hpp): its link first, then the child.
canopy::detail::child_run two_children::start(fork_record& record, std::uint32_t index) noexcept {
  auto& self = static_cast<two_children&>(record);
  join_world& owner = self.owner_;
  owner.holder($) = static_cast<int>(index);
  region_link& link = owner.links[index];
  const bool offered = self.prepare_launch<&start>(link);
  const auto frame = child(owner, index).handle;
  frame.promise().link = &link;
  frame.resume();
  if (!canopy::detail::child_ended_here()) {
    return canopy::detail::child_run::suspended;
  }
  return offered ? canopy::detail::child_run::ended_offered : canopy::detail::child_run::ended;
}

// The joining coroutine of a nested join: goes on in its await_suspend's
// run when the join completes there, else is resumed by the join's winner.
struct nested_join {
  join_world& owner;
  [[nodiscard]] bool await_ready() const noexcept { return false; }
  [[nodiscard]] bool await_suspend(std::coroutine_handle<> self) const noexcept {
    owner.record.open(self, &owner.region);
    return !owner.record.run_children();
  }
  void await_resume() const noexcept {}
};

region_frame joining(join_world& owner) {
  co_await nested_join{owner};
  owner.read_results();
}

// The three cases: the nested join, the root join, and the nested join
// with its frames on fork stacks (the hand-over).
enum class join_shape { nested, root, nested_on_stacks };

template <join_shape Shape>
struct counter_suite : rl::test_suite<counter_suite<Shape>, 2> {
  std::optional<join_world> state;

  void before() {
    state.emplace();
    world = &*state;
    state->frames_on_stacks = Shape == join_shape::nested_on_stacks;
  }
  void thread(unsigned index) {
    join_world& owner = *state;
    if (index == 1) {
      for (int attempt = 0; attempt < 2; ++attempt) {
        const canopy::detail::offer got = owner.deques[0].steal();
        if (!got.empty()) {
          ++owner.taken;
          owner.stolen = true;
          ++seen.stolen;
          got.job()->execute(*got.job());
        }
      }
      return;
    }
    if constexpr (Shape == join_shape::root) {
      owner.record.open({}, &owner.region);
      canopy::detail::drive(owner.record.run_children());
      if (owner.region.leave()) {
        owner.read_results();  // H goes on in the opener's run
      }
    } else if constexpr (Shape == join_shape::nested_on_stacks) {
      // A run of region frames, as a task's body or a steal begins one: on
      // an empty stack, which the joining frame's allocation takes.
      const canopy::detail::region_scope scope(nullptr);
      canopy::detail::drive(joining(owner).handle);
    } else {
      canopy::detail::drive(joining(owner).handle);
    }
  }
  void after() {
    join_world& owner = *state;
    RL_ASSERT(owner.results_read == 1);
    RL_ASSERT(owner.offered == owner.taken);
    RL_ASSERT(owner.deques[0].looks_empty() && owner.deques[1].looks_empty());
    RL_ASSERT(!owner.threads[0].next && !owner.threads[1].next &&
              owner.threads[0].ended == nullptr && owner.threads[1].ended == nullptr);
    // Every stack taken was emptied and given back once, and no thread
    // still names one.
    RL_ASSERT(owner.stacks[0].top == nullptr && owner.stacks[1].top == nullptr);
    for (test_stack& stack : owner.fork_stacks) {
      RL_ASSERT(stack.given == stack.taken && stack.depth == 0 &&
                stack.head().sp == stack.head().lo());
    }
    world = nullptr;
    state.reset();
  }
};

int iterations() {
  const char* text = std::getenv("CANOPY_RELACY_ITERATIONS");  // NOLINT(concurrency-mt-unsafe)
  const int count = text != nullptr ? std::atoi(text) : 0;
  return count > 0 ? count : 100000;
}

template <join_shape Shape>
bool check() {
  rl::test_params params;
  params.output_history = false;
  params.iteration_count = iterations();
  const char* const name = Shape == join_shape::root     ? "counter, root join"
                           : Shape == join_shape::nested ? "counter, nested join"
                                                         : "stacklet hand-over, nested join";
  MESSAGE("relacy: fork-join " << std::string(name) << " (" << params.iteration_count
                               << " random schedules)");
  seen = {};
  const bool clean = rl::simulate<counter_suite<Shape>>(params);
  INFO("steals " << seen.stolen << ", won by the thief " << seen.won_by_thief
                 << ", by the owner after a steal " << seen.won_by_owner
                 << ", stacks adopted by the thief " << seen.adopted);
  CHECK(seen.won_by_thief > 0);
  CHECK(seen.won_by_owner > 0);
  if (Shape == join_shape::nested_on_stacks) {
    CHECK(seen.adopted == seen.won_by_thief);  // every thief's win took the owner's stack
  } else {
    CHECK(seen.adopted == 0);
  }
  return clean;
}

}  // namespace

// The protocol's thread-local steps (coroutine/fork_region.hpp, task.hpp),
// declared only under CANOPY_RELACY: the simulated thread's. Thread 0 owns
// deque 0; a record is offered only there.
namespace canopy::detail {

bool offer_to_thieves(offered_job& record) noexcept {
  if (!world->deques[join_world::self()].push(offer::of_job(record))) {
    return false;
  }
  ++world->offered;
  return true;
}
bool take_back_from_thieves(const offered_job& record) noexcept {
  const offer got = world->deques[join_world::self()].pop();
  RL_ASSERT(got.empty() || got == offer::of_job(record));
  world->taken += got.empty() ? 0 : 1;
  return !got.empty();
}
void wake_region_task(scheduler& /*core*/, task_id /*task*/) noexcept {
  // The opening task's run after the wake, here on the finishing thread.
  ++world->wakes;
  world->read_results();
}
region_thread& region_state() noexcept { return world->threads[join_world::self()]; }
fork_stack_thread& fork_stack_state() noexcept { return world->stacks[join_world::self()]; }
// The steps of executor/fork_stack.cpp the protocol calls, on the test's
// stacks (the counter cases put no frame on a stack: neither is reached
// there), and stack_in_use's hook.
void adopt_stack(stacklet* stack) noexcept { world->adopt(stack); }
void leave_stack_run_slow(fork_stack_thread& /*here*/) noexcept { world->leave_run(); }
void stack_words_read(const stacklet& stack) noexcept {
  world->read_words(world->stack_of(&stack));
}
join_worker* joins_here() noexcept { return nullptr; }
// Named by inline code of the task headers that this check never runs (a
// foreign awaitable's frame, a wait link's fire): an unoptimised build
// emits that code, so the link needs them. Reaching one is a broken check.
void free_block(void* /*block*/, std::size_t /*size*/) noexcept { std::abort(); }
bool scheduler::schedule(task_id /*id*/) noexcept { std::abort(); }

}  // namespace canopy::detail

TEST_CASE("relacy: fork-join counter, the winner of a nested join reads both results") {
  CHECK(check<join_shape::nested>());
}

TEST_CASE("relacy: fork-join counter, the root join's end reaches the opener with the results") {
  CHECK(check<join_shape::root>());
}

TEST_CASE("relacy: fork-join stacklet hand-over, the winner pops the loser's stack after it") {
  CHECK(check<join_shape::nested_on_stacks>());
}
