// Weak-memory check of the wake protocol: the real summary_tree,
// permit_semaphore, signal_waker and sleep_module sources, compiled with
// CANOPY_RELACY so that every atomics::atomic is a Relacy atomic with the
// memory order the code names (atomics/relacy_atomic.hpp), run under Relacy's
// simulation of the C++ memory model. The model check (tests/model/)
// explores sequentially consistent interleavings; here a relaxed or acquire
// load may read an older store, so a fence or seq_cst order the protocol
// argument relies on is needed for real: without it, some schedule leaves
// a task runnable while every worker is parked, which Relacy reports as a
// deadlock (the futex emulation allows no spurious wake-up).
//
// Built with -fno-sized-deallocation: Relacy replaces the global new and
// delete, but not the sized delete C++14 code calls.
//
// Each case explores CANOPY_RELACY_ITERATIONS random schedules (default
// 100,000), with Relacy's random scheduler.
// (Its context-bound search reports a livelock for any worker that keeps
// searching while the producer is never scheduled again, so it is not used.)
//
// Each case runs its workers and producers to the end: the worker that
// claims the last task wakes the others, so an execution in which every
// thread blocks is a lost wake-up.
#include <doctest/doctest.h>

#include <cstdlib>
#include <optional>
#include <vector>

#include "signal_waker/sleep_module.hpp"
#include "summary_tree/summary_tree.hpp"
#include "atomics/atomics.hpp"  // first: Relacy, then its allocation macros taken back
#include "tests/model/protocol_steps.hpp"

namespace {

using canopy::detail::summary_tree;

struct task_position {
  std::size_t leaf;
  std::size_t signal;
  unsigned bit;
};

struct wake_case {
  const char* name;
  std::size_t workers;
  std::size_t leaves;
  std::vector<std::vector<task_position>> producers;
};

// The objects of one execution, built afresh for each (Relacy's atomics
// exist only inside a simulation).
class world final : public canopy::detail::sleep_probe {
 public:
  world(const wake_case& setup)
      : setup_(setup),
        tree_(setup.leaves, 2),
        sleep_(setup.workers, setup.leaves, /*yield_rounds=*/0, tree_.permits()) {
    for (const auto& tasks : setup.producers) {
      total_ += static_cast<int>(tasks.size());
    }
  }

  void produce_all(const std::vector<task_position>& tasks) {
    for (const task_position& task : tasks) {
      canopy::detail::model::post_task(tree_, sleep_, task.leaf, task.signal, task.bit);
    }
  }

  // A worker: claim (own leaves first), else go through the idle protocol
  // and park. Ends when every task is claimed.
  void work(std::size_t worker) {
    canopy::detail::model::search_steps search;
    while (!stop_) {
      if (claim_one(worker)) {
        search.found_work(tree_, sleep_);
        continue;
      }
      static_cast<void>(search.found_none(sleep_, worker, *this));
    }
  }

 private:
  bool must_stay_awake(std::size_t worker) noexcept override {
    return stop_ ||
           sleep_.waker(worker).sync_partition_summary(tree_, worker, setup_.workers,
                                                       setup_.leaves) ||
           tree_.any_active();
  }
  void about_to_block(std::size_t /*worker*/) noexcept override {}

  bool claim_one(std::size_t worker) {
    if (!canopy::detail::model::claim_any_task(tree_, sleep_, worker, setup_.leaves)) {
      return false;
    }
    if (++claimed_ == total_) {
      stop_ = true;  // the harness's own flag: plain, as Relacy runs one thread at a time
      sleep_.wake_all_for_shutdown();
    }
    return true;
  }

  const wake_case& setup_;
  summary_tree tree_;
  canopy::detail::sleep_module sleep_;
  int total_ = 0;
  int claimed_ = 0;
  bool stop_ = false;
};

const wake_case* current_case = nullptr;

template <std::size_t Threads>
struct wake_suite : rl::test_suite<wake_suite<Threads>, Threads> {
  std::optional<world> state;

  void before() { state.emplace(*current_case); }
  void thread(unsigned index) {
    if (index < current_case->workers) {
      state->work(index);
    } else {
      state->produce_all(current_case->producers[index - current_case->workers]);
    }
  }
  void after() { state.reset(); }
};

int iterations() {
  const char* text = std::getenv("CANOPY_RELACY_ITERATIONS");
  const int count = text != nullptr ? std::atoi(text) : 0;
  return count > 0 ? count : 100000;
}

template <std::size_t Threads>
bool check(const wake_case& setup) {
  REQUIRE(setup.workers + setup.producers.size() == Threads);
  current_case = &setup;
  rl::test_params params;
  params.output_history = false;
  params.iteration_count = iterations();
  MESSAGE("relacy: " << setup.name << " (" << params.iteration_count << " random schedules)");
  return rl::simulate<wake_suite<Threads>>(params);
}

}  // namespace

TEST_CASE("relacy: one worker parks, one outside producer posts a task") {
  const wake_case setup{"one worker, one producer", 1, 1, {{{0, 0, 3}}}};
  CHECK(check<2>(setup));
}

TEST_CASE("relacy: two workers, a task posted into the other worker's partition") {
  const wake_case setup{"two workers, other partition", 2, 2, {{{1, 0, 0}}}};
  CHECK(check<3>(setup));
}

TEST_CASE("relacy: two producers race into one leaf (permit path and JEC path)") {
  const wake_case setup{"one worker, two producers", 1, 1, {{{0, 0, 1}}, {{0, 1, 2}}}};
  CHECK(check<3>(setup));
}

TEST_CASE("relacy: three workers, two producers, three leaves") {
  const wake_case setup{
      "three workers, two producers", 3, 3, {{{2, 0, 0}, {0, 1, 4}}, {{1, 0, 2}}}};
  CHECK(check<5>(setup));
}
