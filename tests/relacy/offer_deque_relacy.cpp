// Weak-memory check of the offer deque (executor/offer_deque.hpp): the real
// basic_offer_deque, with a capacity of 4 so that schedules wrap around,
// under Relacy's simulation of the C++ memory model. The owner pushes and
// pops as nested joins and awaited spawns do (callables and task entries
// mixed), thieves steal; every entry pushed must be taken exactly once, and
// whoever takes it must see what the owner wrote before the push (a Relacy
// variable: reading it without a happens-before edge is reported as a data
// race). The owner's newest() must name what its next pop() returns, unless
// a thief took it.
#include <doctest/doctest.h>

#include <array>
#include <cstdlib>
#include <optional>

#include "executor/offer_deque.hpp"
#include "atomics/atomics.hpp"  // first: Relacy, then its allocation macros taken back

namespace {

constexpr int job_count = 7;

struct payload_job : canopy::detail::offered_job {
  rl::var<int> payload;
};

// Odd entries are tasks (a slot index, as canopy::spawn offers), even ones
// callables; a task's "body" is task_payload[index].
struct world {
  canopy::detail::basic_offer_deque<4> deque;
  std::array<payload_job, job_count> jobs;
  std::array<rl::var<int>, job_count> task_payload;
  std::array<canopy::detail::atomics::atomic<int>, job_count> taken{};
  std::array<bool, job_count> pushed{};

  void take(canopy::detail::offer entry) {
    if (entry.empty()) {
      return;
    }
    int index = 0;
    if (entry.is_task()) {
      index = static_cast<int>(entry.task_slot());
      RL_ASSERT(index >= 0 && index < job_count && index % 2 == 1);
      RL_ASSERT(task_payload[static_cast<std::size_t>(index)]($) == index + 1);
    } else {
      auto* const mine = static_cast<payload_job*>(entry.job());
      index = static_cast<int>(mine - jobs.data());
      RL_ASSERT(index >= 0 && index < job_count && index % 2 == 0);
      RL_ASSERT(mine->payload($) == index + 1);  // the owner's write, ordered by the push
    }
    taken[static_cast<std::size_t>(index)].fetch_add(1, canopy::detail::atomics::relaxed);
  }

  void push(int index) {
    const auto at = static_cast<std::size_t>(index);
    if (index % 2 == 1) {
      task_payload[at]($) = index + 1;
      pushed[at] = deque.push(canopy::detail::offer::of_task(static_cast<std::uint32_t>(index)));
    } else {
      jobs[at].payload($) = index + 1;
      pushed[at] = deque.push(canopy::detail::offer::of_job(jobs[at]));
    }
  }

  // The owner's take-back at an await: what newest() showed, or nothing.
  void pop_newest() {
    const canopy::detail::offer seen = deque.newest();
    const canopy::detail::offer got = deque.pop();
    RL_ASSERT(got.empty() || got == seen);
    take(got);
  }

  // The owner: nested joins (push, push, pop, ...), one push past the
  // capacity, then pops until the deque is empty.
  void own() {
    push(0);
    push(1);
    pop_newest();
    push(2);
    push(3);
    push(4);
    push(5);  // full unless a thief took some: then push() says false
    pop_newest();
    push(6);
    for (int round = 0; round < job_count; ++round) {
      pop_newest();
    }
  }

  void steal(int attempts) {
    for (int attempt = 0; attempt < attempts; ++attempt) {
      take(deque.steal());
    }
  }

  void check() const {
    for (std::size_t index = 0; index < job_count; ++index) {
      RL_ASSERT(taken[index].load(canopy::detail::atomics::relaxed) == (pushed[index] ? 1 : 0));
    }
  }
};

template <std::size_t Thieves>
struct deque_suite : rl::test_suite<deque_suite<Thieves>, 1 + Thieves> {
  std::optional<world> state;

  void before() { state.emplace(); }
  void thread(unsigned index) {
    if (index == 0) {
      state->own();
    } else {
      state->steal(3);
    }
  }
  void after() {
    state->check();
    state.reset();
  }
};

int iterations() {
  const char* text = std::getenv("CANOPY_RELACY_ITERATIONS");  // NOLINT(concurrency-mt-unsafe)
  const int count = text != nullptr ? std::atoi(text) : 0;
  return count > 0 ? count : 100000;
}

template <std::size_t Thieves>
bool check() {
  rl::test_params params;
  params.output_history = false;
  params.iteration_count = iterations();
  MESSAGE("relacy: offer_deque, owner and " << Thieves << " thieves (" << params.iteration_count
                                            << " random schedules)");
  return rl::simulate<deque_suite<Thieves>>(params);
}

}  // namespace

TEST_CASE("relacy: offer_deque, the owner against one thief") { CHECK(check<1>()); }

TEST_CASE("relacy: offer_deque, the owner against two thieves") { CHECK(check<2>()); }
