// Weak-memory check of fork-join's join counter (coroutine/fork_region.hpp):
// the real fork_record and fork_region on the real basic_offer_deque, under
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
// frame: leave the child's region_link for the driver (leave_region_frame),
// then free the frame; the driver follows the link. Two shapes: a nested join (the join's
// winner resumes the joining coroutine, which reads the results) and the
// region's root join (the winner finishes the region; the results are read
// by the opener if leave() saw the end, else by the wake of the opening
// task, on the finishing thread).
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
};
outcomes seen;

class two_children : public fork_record {
 public:
  explicit two_children(join_world& owner) : fork_record(&start, 2), owner_(owner) {}

 private:
  static std::coroutine_handle<> start(fork_record& record, std::uint32_t index,
                                       region_link*& link) noexcept;
  join_world& owner_;
};

// Only its address is used: the region passes it to wake_region_task.
canopy::detail::scheduler* fake_core() {
  alignas(64) static std::byte storage[64];
  return reinterpret_cast<canopy::detail::scheduler*>(&storage);
}

struct join_world {
  std::array<canopy::detail::basic_offer_deque<4>, 2> deques;
  std::array<canopy::detail::region_thread, 2> threads{};
  std::array<canopy::detail::fork_stack_thread, 2> stacks{};  // empty: no frame goes on them
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
};

region_frame child(join_world& owner, std::uint32_t index) {
  owner.results[index]($) = static_cast<int>(index) + 1;
  co_return;
}

std::coroutine_handle<> two_children::start(fork_record& record, std::uint32_t index,
                                            region_link*& link) noexcept {
  join_world& owner = static_cast<two_children&>(record).owner_;
  owner.holder($) = static_cast<int>(index);
  link = &owner.links[index];
  const auto frame = child(owner, index).handle;
  frame.promise().link = link;
  return frame;
}

// The joining coroutine of a nested join: resumed by the join's winner.
struct nested_join {
  join_world& owner;
  [[nodiscard]] bool await_ready() const noexcept { return false; }
  std::coroutine_handle<> await_suspend(std::coroutine_handle<> self) const noexcept {
    owner.record.open(self, &owner.region);
    const std::coroutine_handle<> first = owner.record.launch_next();
    return first ? first : std::noop_coroutine();
  }
  void await_resume() const noexcept {}
};

region_frame joining(join_world& owner) {
  co_await nested_join{owner};
  owner.read_results();
}

template <bool Root>
struct counter_suite : rl::test_suite<counter_suite<Root>, 2> {
  std::optional<join_world> state;

  void before() {
    state.emplace();
    world = &*state;
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
    if constexpr (Root) {
      owner.record.open({}, &owner.region);
      canopy::detail::drive(owner.record.launch_next());
      if (owner.region.leave()) {
        owner.read_results();  // H goes on in the opener's run
      }
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
    world = nullptr;
    state.reset();
  }
};

int iterations() {
  const char* text = std::getenv("CANOPY_RELACY_ITERATIONS");  // NOLINT(concurrency-mt-unsafe)
  const int count = text != nullptr ? std::atoi(text) : 0;
  return count > 0 ? count : 100000;
}

template <bool Root>
bool check() {
  rl::test_params params;
  params.output_history = false;
  params.iteration_count = iterations();
  MESSAGE("relacy: fork-join counter, " << std::string(Root ? "root" : "nested") << " join ("
                                        << params.iteration_count << " random schedules)");
  seen = {};
  const bool clean = rl::simulate<counter_suite<Root>>(params);
  INFO("steals " << seen.stolen << ", won by the thief " << seen.won_by_thief
                 << ", by the owner after a steal " << seen.won_by_owner);
  CHECK(seen.won_by_thief > 0);
  CHECK(seen.won_by_owner > 0);
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
// The frames here are not tasks: no stack ever holds one, so a join records
// none and no run ends with one. The two steps only a stack with frames
// reaches:
void adopt_stack(stacklet* /*stack*/) noexcept { std::abort(); }
void leave_stack_run_slow(fork_stack_thread& /*here*/) noexcept { std::abort(); }
join_worker* joins_here() noexcept { return nullptr; }

}  // namespace canopy::detail

TEST_CASE("relacy: fork-join counter, the winner of a nested join reads both results") {
  CHECK(check<false>());
}

TEST_CASE("relacy: fork-join counter, the root join's end reaches the opener with the results") {
  CHECK(check<true>());
}
