// Capacity (executor_config::max_leaves * signals_per_leaf * 64 live tasks):
// try_spawn for every task kind at capacity and after shutdown, a spawner
// blocked at capacity released by shutdown, and when_all when one of its
// spawns finds the executor full.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <system_error>
#include <thread>
#include <vector>

#include "coroutine/coroutine.hpp"
#include "fiber/fiber.hpp"
#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

using canopy::async_event;
using canopy::executor;
using canopy::executor_config;
using canopy::task;
using canopy::testing::eventually;
using canopy::testing::watchdog;
using namespace std::chrono_literals;

namespace {

// One worker, one leaf of one signal word: 64 slots.
executor_config tiny_capacity() {
  executor_config config = canopy::testing::config_with(1);
  config.signals_per_leaf = 1;
  config.max_leaves = 1;
  return config;
}

task<void> wait_on_event(async_event& event) { co_await event; }

}  // namespace

TEST_CASE("shutdown releases an outside spawner blocked at capacity with shut_down") {
  watchdog guard("shutdown with a blocked spawner", 30);
  async_event never;
  executor pool(tiny_capacity());
  std::atomic<int> spawned{0};
  std::error_code spawner_error;
  std::thread spawner([&] {
    try {
      for (;;) {
        pool.spawn(wait_on_event(never)).detach();
        spawned.fetch_add(1);
      }
    } catch (const canopy::spawn_error& error) {
      spawner_error = error.code();
    }
  });
  REQUIRE(eventually([&] { return spawned.load() == 64; }));
  // Most likely the spawner is blocked at capacity now; if not yet, its next
  // spawn meets the shutdown instead, with the same error.
  std::this_thread::sleep_for(50ms);
  pool.shutdown();  // hung here while the spawner was blocked (issue 19)
  spawner.join();
  CHECK(spawner_error == canopy::errc::shut_down);
  CHECK(pool.stats().dropped_tasks == 64);
}

TEST_CASE("try_spawn never blocks, for every task kind: at_capacity, shut_down; live tasks") {
  watchdog guard("try_spawn", 30);
  async_event release;
  executor pool(tiny_capacity());
  CHECK(pool.capacity() == 64);
  CHECK(pool.stats().capacity == 64);
  std::vector<canopy::join_handle<void>> waiting;
  for (int index = 0; index < 64; ++index) {
    auto attempt = pool.try_spawn(wait_on_event(release));
    REQUIRE(attempt);
    waiting.push_back(std::move(attempt.handle));
  }
  CHECK(pool.stats().live_tasks == 64);
  auto full_coroutine = pool.try_spawn(wait_on_event(release));
  CHECK(full_coroutine.error == canopy::errc::at_capacity);
  CHECK_FALSE(full_coroutine.handle.valid());
  auto full_fiber = pool.try_spawn(canopy::fiber([] { return 1; }));
  CHECK(full_fiber.error == canopy::errc::at_capacity);
  auto full_callable = pool.try_spawn([] { return 1; });
  CHECK(full_callable.error == canopy::errc::at_capacity);
  release.set();
  for (auto& handle : waiting) {
    handle.get();
  }
  CHECK(eventually([&] { return pool.stats().live_tasks == 0; }));

  auto inside = [&]() -> task<bool> {
    auto attempt = canopy::try_spawn([]() -> task<int> { co_return 8; }());
    // Not `attempt && co_await ...`: GCC 12 destroys the awaited
    // temporary of a co_await on the right of && even when the left side is
    // false (a double free).
    if (!attempt) {
      co_return false;
    }
    const int got = co_await std::move(attempt.handle);
    co_return got == 8;
  };
  CHECK(canopy::block_on(pool, inside()));
  auto fiber = pool.try_spawn(canopy::fiber([] { return 9; }));
  REQUIRE(fiber);
  CHECK(fiber.handle.get() == 9);
  pool.shutdown();
  CHECK(pool.try_spawn(wait_on_event(release)).error == canopy::errc::shut_down);
  CHECK(pool.try_spawn(canopy::fiber([] { return 1; })).error == canopy::errc::shut_down);
}

TEST_CASE("when_all at capacity awaits the tasks it spawned before it throws at_capacity") {
  watchdog guard("when_all at capacity", 60);
  executor pool(tiny_capacity());
  std::atomic<int> finished{0};
  std::atomic<int> finished_when_thrown{-1};
  auto body = [&]() -> task<int> {
    int results[100] = {};
    std::vector<task<void>> work;
    for (int index = 0; index < 100; ++index) {
      work.push_back([](int* slot, std::atomic<int>* done, int value) -> task<void> {
        std::this_thread::sleep_for(2ms);
        *slot = value;  // into the awaiting frame: a use-after-free if it is gone
        done->fetch_add(1);
        co_return;
      }(&results[index], &finished, index + 1));
    }
    try {
      co_await canopy::when_all(std::move(work));
    } catch (const canopy::spawn_error& error) {
      finished_when_thrown = finished.load();
      CHECK(error.code() == canopy::errc::at_capacity);
    }
    int sum = 0;
    for (const int value : results) {
      sum += value;
    }
    co_return sum;
  };
  const int sum = canopy::block_on(pool, body());
  // 63 slots were free besides the caller's: those tasks ran before when_all
  // threw, and wrote 1 + 2 + ... + 63.
  CHECK(finished_when_thrown.load() == 63);
  CHECK(sum == 63 * 64 / 2);
}
