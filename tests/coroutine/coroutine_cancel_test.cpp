// Cancelling a suspended coroutine task (join_handle::cancel): through the
// plain join_handle base it still wakes the task so that it is destroyed
// at once, and a parent's cancel reaches the child it awaits, even a child
// suspended on an event. (coroutine_test.cpp has cancel before the start and
// on a join_handle; cancel_race_test.cpp and io_cancel_race_test.cpp race
// cancels against completions.)
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <utility>
#include <vector>

#include "coroutine/coroutine.hpp"
#include "coroutine/race.hpp"
#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

using canopy::async_event;
using canopy::executor;
using canopy::task;
using canopy::testing::config_with;
using canopy::testing::destroy_flag;
using canopy::testing::eventually;
using canopy::testing::watchdog;
using namespace std::chrono_literals;

TEST_CASE("cancel() through the join_handle base wakes a suspended coroutine, which is destroyed") {
  watchdog guard("cancel through base", 30);
  executor pool(config_with(1));
  async_event never;
  std::atomic<int> destroyed{0};
  std::atomic<bool> started{false};
  auto body = [&]() -> task<void> {
    destroy_flag flag(destroyed);
    started = true;
    co_await never;
  };
  canopy::join_handle<void> as_base = pool.spawn(body());
  // Cancel a task that has started (one cancelled before its first run is
  // dropped unrun, and its body's flag never exists): a fixed sleep alone
  // raced the worker's first run on a loaded machine.
  REQUIRE(eventually([&] { return started.load(); }));
  std::this_thread::sleep_for(20ms);  // most likely suspended by now (running is covered too)
  CHECK(as_base.cancel());
  // Before issue 19: only a flag, the task stayed suspended until shutdown.
  CHECK(eventually([&] { return destroyed.load() == 1; }));
  CHECK_THROWS_AS(as_base.get(), canopy::task_cancelled);
}

TEST_CASE("cancelling a parent cancels the child it awaits, even one waiting on an event") {
  watchdog guard("cancel propagates", 30);
  executor pool(config_with(2));
  async_event never;
  std::atomic<int> destroyed{0};
  std::atomic<bool> child_waiting{false};
  auto child = [&]() -> task<void> {
    destroy_flag flag(destroyed);
    child_waiting = true;
    co_await never;
  };
  auto parent = [&]() -> task<void> {
    destroy_flag flag(destroyed);
    co_await canopy::spawn(child());
  };
  auto handle = pool.spawn(parent());
  REQUIRE(eventually([&] { return child_waiting.load(); }));
  std::this_thread::sleep_for(10ms);
  CHECK(handle.cancel());
  CHECK_THROWS_AS(handle.get(), canopy::task_cancelled);
  // Before issue 19: the child stayed suspended, holding its slot, until shutdown.
  CHECK(eventually([&] { return destroyed.load() == 2; }));
  CHECK(eventually([&] { return pool.stats().live_tasks == 0; }));
}

TEST_CASE("a task cancelled in when_all ends only after every child ended (they borrow its locals)") {
  // The children hold a pointer to a local of the awaiting task and look at
  // it in their destructors: a child still running once the cancelled
  // task's get() returned, or one destroyed after the local, is the bug.
  watchdog guard("when_all cancel", 60);
  executor pool(config_with(2));
  struct borrowed {
    std::atomic<int> alive{1};
    ~borrowed() { alive.store(0); }
  };
  struct child_guard {
    const borrowed* local;
    std::atomic<int>* running;
    std::atomic<int>* late;
    ~child_guard() {
      if (local->alive.load() != 1) {
        late->fetch_add(1);
      }
      running->fetch_sub(1);
    }
  };
  async_event never;
  std::atomic<int> running{0};
  std::atomic<int> late{0};
  auto child = [&](const borrowed* local) -> task<int> {
    running.fetch_add(1);
    const child_guard guard{local, &running, &late};
    co_await never;
    co_return 1;
  };
  const int rounds = 30;
  int outlived = 0;
  for (int round = 0; round < rounds; ++round) {
    auto parent = [&](bool as_vector) -> task<void> {
      borrowed local;
      if (as_vector) {
        std::vector<task<int>> children;
        children.push_back(child(&local));
        children.push_back(child(&local));
        children.push_back(child(&local));
        static_cast<void>(co_await canopy::when_all(std::move(children)));
      } else {
        static_cast<void>(co_await canopy::when_all(child(&local), child(&local), child(&local)));
      }
    };
    auto handle = pool.spawn(parent(round % 2 == 0));
    REQUIRE(eventually([&] { return running.load() == 3; }));
    std::this_thread::sleep_for(std::chrono::microseconds(200 * (round % 5)));
    handle.cancel();
    CHECK_THROWS_AS(handle.get(), canopy::task_cancelled);
    outlived += running.load() != 0 ? 1 : 0;
    REQUIRE(eventually([&] { return running.load() == 0; }));
  }
  CHECK(outlived == 0);
  CHECK(late.load() == 0);
}

namespace {

// Counts its destructions, so a frame destroyed twice shows (the copy a
// never-started frame holds is destroyed with the frame).
struct count_destroyed {
  std::atomic<int>* count;
  explicit count_destroyed(std::atomic<int>& target) : count(&target) {}
  count_destroyed(count_destroyed&& other) noexcept : count(std::exchange(other.count, nullptr)) {}
  count_destroyed(const count_destroyed&) = delete;
  count_destroyed& operator=(const count_destroyed&) = delete;
  ~count_destroyed() {
    if (count != nullptr) {
      count->fetch_add(1);
    }
  }
};

task<int> never_started(async_event& never, count_destroyed /*guard*/) {
  co_await never;
  co_return 1;
}

task<int> quick() { co_return 0; }

std::atomic<bool> racing{false};

// Awaits `earlier` first (taken over inline: their slots stay with this
// worker and the race's children reuse them, below this task's own slot),
// then races two children that never run before the shutdown.
task<int> race_unstarted(std::vector<canopy::join_handle<int>> earlier, async_event& never,
                         std::atomic<int>& destroyed) {
  for (auto& each : earlier) {
    co_await each;
  }
  racing = true;
  auto won = co_await canopy::race(never_started(never, count_destroyed(destroyed)),
                                   never_started(never, count_destroyed(destroyed)));
  co_return static_cast<int>(won.index());
}

// Spawns `earlier_count` quick tasks, then the racing task, from inside a
// task, so that they share the host's slots.
task<void> start_race(int earlier_count, async_event& never, std::atomic<int>& destroyed,
                      canopy::join_handle<int>& owner) {
  std::vector<canopy::join_handle<int>> earlier;
  for (int index = 0; index < earlier_count; ++index) {
    earlier.push_back(canopy::spawn(quick()));
  }
  owner = canopy::spawn(race_unstarted(std::move(earlier), never, destroyed));
  co_return;
}

}  // namespace

TEST_CASE("shutdown destroys each never-started child once, also one a nested cancel destroyed first") {
  // Shutdown's last step walks the task slots; destroying one task may
  // destroy others at once (race cancels the losers as the first child
  // ends). A child that never ran builds its body when destroyed; that
  // must not make its slot look live again to the walk, which would
  // destroy it a second time (a double free, a join state released twice).
  watchdog guard("never-started children at shutdown", 30);
  for (int earlier_count = 0; earlier_count <= 3; ++earlier_count) {
    CAPTURE(earlier_count);
    async_event never;
    std::atomic<int> destroyed{0};
    racing = false;
    canopy::join_handle<int> owner;
    canopy::join_handle<void> starter;
    std::uint64_t dropped = 0;
    {
      canopy::executor_config config;
      config.worker_count = 0;
      config.on_shutdown = canopy::shutdown_policy::cancel_pending;
      executor pool(config);
      starter = pool.spawn(start_race(earlier_count, never, destroyed, owner));
      for (int runs = 0; !racing.load() && runs < 100; ++runs) {
        pool.run_once();
      }
      REQUIRE(racing.load());
      pool.shutdown();
      dropped = pool.stats().dropped_tasks;
    }
    CHECK(destroyed.load() == 2);
    CHECK(dropped == 3);  // the owner and its two children, once each
    CHECK_NOTHROW(starter.get());
    CHECK_THROWS_AS(owner.get(), canopy::task_cancelled);
  }
}
