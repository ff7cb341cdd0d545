// task_group: the owning task cancelled while it waits on its group
// (next(), wait_all(), close(); a coroutine owner and a fiber owner). The
// children may borrow the owner's frame, so the owner must end only after
// every child ended: its handle reports the cancel once their destructors
// ran, and no child's destructor runs after the owner's frame is gone.
#include <doctest/doctest.h>

#include <atomic>
#include <canopy/fiber.hpp>
#include <canopy/task_group.hpp>
#include <chrono>
#include <thread>

#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

using canopy::async_event;
using canopy::executor;
using canopy::task;
using canopy::task_group;
using canopy::testing::config_with;
using canopy::testing::eventually;
using canopy::testing::watchdog;
using namespace std::chrono_literals;

namespace {

// Lives in a child and reads the owner's frame when destroyed: `owner_alive`
// is a flag in the owner's frame that the owner's frame clears as it goes.
struct borrows_owner {
  const int* owner_alive;
  std::atomic<int>* ended;
  std::atomic<int>* after_owner;
  ~borrows_owner() {
    std::this_thread::sleep_for(1ms);  // let a premature owner's end show
    if (*owner_alive != 1) {
      after_owner->fetch_add(1);
    }
    ended->fetch_add(1);
  }
};

struct counters {
  std::atomic<int> ended{0};
  std::atomic<int> after_owner{0};
  std::atomic<bool> waiting{false};
};

task<int> borrowing_child(const int* alive, counters* seen, async_event* never) {
  borrows_owner guard{alive, &seen->ended, &seen->after_owner};
  co_await *never;
  co_return 1;
}

constexpr int children = 6;

// mode 0: waits in next(); 1: in wait_all().
task<int> owner(int mode, counters* seen, async_event* never) {
  struct alive_flag {
    int value = 1;
    ~alive_flag() { value = 0; }
  } alive;
  task_group<int> group;
  for (int index = 0; index < children / 2; ++index) {
    group.spawn(borrowing_child(&alive.value, seen, never));
    group.spawn(canopy::fiber([&alive, seen, never] {
      borrows_owner guard{&alive.value, &seen->ended, &seen->after_owner};
      canopy::this_fiber::await(*never);
      return 1;
    }));
  }
  seen->waiting = true;
  if (mode == 0) {
    while (co_await group.next()) {
    }
  } else {
    co_await group.wait_all();
  }
  co_await group.close();
  co_return 0;
}

}  // namespace

TEST_CASE("an owner cancelled while it waits on its group ends after its children") {
  watchdog dog("task_group owner cancelled", 120);
  for (std::size_t workers : {1, 2}) {
    executor pool(config_with(workers));
    for (int round = 0; round < 6; ++round) {
      CAPTURE(workers);
      CAPTURE(round);
      async_event never;
      counters seen;
      auto handle = pool.spawn(owner(round % 2, &seen, &never));
      REQUIRE(eventually([&] { return seen.waiting.load(); }));
      std::this_thread::sleep_for(5ms);  // most likely suspended in the wait
      CHECK(handle.cancel());
      CHECK_THROWS_AS(handle.get(), canopy::task_cancelled);
      CHECK(seen.ended.load() == children);  // every child ended first
      CHECK(eventually([&] { return seen.ended.load() == children; }));
      CHECK(seen.after_owner.load() == 0);
    }
  }
}

TEST_CASE("a fiber owner cancelled while it waits on its group ends after its children") {
  watchdog dog("task_group fiber owner cancelled", 120);
  executor pool(config_with(2));
  for (int round = 0; round < 4; ++round) {
    CAPTURE(round);
    async_event never;
    counters seen;
    auto handle = pool.spawn(canopy::fiber([&seen, &never, round] {
      int alive = 1;
      struct clear_on_exit {
        int* flag;
        ~clear_on_exit() { *flag = 0; }
      } clear{&alive};
      task_group<int> group;
      for (int index = 0; index < children; ++index) {
        group.spawn(borrowing_child(&alive, &seen, &never));
      }
      seen.waiting = true;
      if (round % 2 == 0) {
        while (canopy::this_fiber::await(group.next())) {
        }
      } else {
        canopy::this_fiber::await(group.wait_all());
      }
      canopy::this_fiber::await(group.close());
      return 0;
    }));
    REQUIRE(eventually([&] { return seen.waiting.load(); }));
    std::this_thread::sleep_for(5ms);
    CHECK(handle.cancel());
    CHECK_THROWS_AS(handle.get(), canopy::task_cancelled);
    CHECK(seen.ended.load() == children);
    CHECK(seen.after_owner.load() == 0);
  }
}

namespace {

// The owner woken from next() by one child's end while others still run,
// and cancelled before it resumes: it must still wait for those others.
struct race_seen {
  std::atomic<int> owner_gone{0};   // set as the owner's frame goes
  std::atomic<int> ended{0};        // children destroyed
  std::atomic<int> after_owner{0};  // of those, destroyed after the owner's frame went
  std::atomic<bool> waiting{false};
};

struct owner_check {
  race_seen* seen;
  ~owner_check() {
    if (seen->owner_gone.load() != 0) {
      seen->after_owner.fetch_add(1);
    }
    seen->ended.fetch_add(1);
  }
};

task<int> child_until(async_event* go, race_seen* seen) {
  owner_check check{seen};
  co_await *go;
  co_return 1;
}

constexpr int others = 3;

task<int> next_owner(race_seen* seen, async_event* first, async_event* never) {
  struct gone_flag {
    race_seen* seen;
    ~gone_flag() { seen->owner_gone = 1; }
  } gone{seen};
  task_group<int> group;
  group.spawn(child_until(first, seen));
  for (int index = 0; index < others; ++index) {
    group.spawn(child_until(never, seen));
  }
  seen->waiting = true;
  while (co_await group.next()) {
  }
  co_await group.close();
  co_return 0;
}

}  // namespace

TEST_CASE("next() woken by a child's end, then cancelled: the owner waits for the others") {
  // Host-driven: the first child's end (which takes the owner's wait and
  // wakes it) and the cancel land in that order before the owner runs.
  watchdog dog("task_group owner cancelled after next() was woken", 30);
  for (int round = 0; round < 4; ++round) {
    CAPTURE(round);
    race_seen seen;
    async_event first;
    async_event never;
    canopy::executor_config config;
    config.worker_count = 0;
    executor pool(config);
    auto handle = pool.spawn(next_owner(&seen, &first, &never));
    pool.run_until_idle();
    REQUIRE(seen.waiting.load());
    first.set();
    REQUIRE(pool.run_once() == 1);  // the first child ends; the owner is woken
    REQUIRE(seen.ended.load() == 1);
    REQUIRE_FALSE(handle.ready());
    CHECK(handle.cancel());
    pool.run_until_idle();
    REQUIRE(handle.ready());
    CHECK_THROWS_AS(handle.get(), canopy::task_cancelled);
    CHECK(seen.ended.load() == 1 + others);
    CHECK(seen.after_owner.load() == 0);
  }
}

TEST_CASE("next() cancelled as a child's end wakes it: the owner waits for the others, workers") {
  watchdog dog("task_group owner cancel racing a child's end", 120);
  executor pool(config_with(2));
  const int rounds = static_cast<int>(400 / canopy::testing::stress_divisor());
  const auto stop_at = std::chrono::steady_clock::now() + 10s;
  for (int round = 0; round < rounds && std::chrono::steady_clock::now() < stop_at; ++round) {
    CAPTURE(round);
    race_seen seen;
    async_event first;
    async_event never;
    auto handle = pool.spawn(next_owner(&seen, &first, &never));
    REQUIRE(eventually([&] { return seen.waiting.load(); }));
    first.set();
    // Spread the cancel around the first child's end.
    [[maybe_unused]] volatile int sink = 0;
    for (int spin = 0; spin < (round % 40) * 50; ++spin) {
      sink = spin;
    }
    handle.cancel();
    CHECK_THROWS_AS(handle.get(), canopy::task_cancelled);
    CHECK(seen.ended.load() == 1 + others);
    CHECK(seen.after_owner.load() == 0);
  }
}

TEST_CASE("a fiber owner woken from next() by a child's end, then cancelled, waits for the others") {
  // As the host-driven case above, with the owner a fiber.
  watchdog dog("task_group fiber owner cancelled after next() was woken", 30);
  for (int round = 0; round < 4; ++round) {
    CAPTURE(round);
    race_seen seen;
    async_event first;
    async_event never;
    canopy::executor_config config;
    config.worker_count = 0;
    executor pool(config);
    auto handle = pool.spawn(canopy::fiber([&seen, &first, &never] {
      struct gone_flag {
        race_seen* seen;
        ~gone_flag() { seen->owner_gone = 1; }
      } gone{&seen};
      task_group<int> group;
      group.spawn(child_until(&first, &seen));
      for (int index = 0; index < others; ++index) {
        group.spawn(child_until(&never, &seen));
      }
      seen.waiting = true;
      while (canopy::this_fiber::await(group.next())) {
      }
      canopy::this_fiber::await(group.close());
      return 0;
    }));
    pool.run_until_idle();
    REQUIRE(seen.waiting.load());
    first.set();
    REQUIRE(pool.run_once() == 1);  // the first child ends; the owner is woken
    REQUIRE(seen.ended.load() == 1);
    REQUIRE_FALSE(handle.ready());
    CHECK(handle.cancel());
    pool.run_until_idle();
    REQUIRE(handle.ready());
    CHECK_THROWS_AS(handle.get(), canopy::task_cancelled);
    CHECK(seen.ended.load() == 1 + others);
    CHECK(seen.after_owner.load() == 0);
  }
}
