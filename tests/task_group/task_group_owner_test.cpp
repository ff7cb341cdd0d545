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
