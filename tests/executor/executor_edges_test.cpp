// Edge cases of the executor's public API found by using it from outside,
// through the installed headers only: misuse that must give a clear error
// instead of a crash, and what a task holds released before anyone is told
// it ended.
#include <doctest/doctest.h>

#include <atomic>
#include <canopy/canopy.hpp>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <utility>

#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

using canopy::executor;
using canopy::task;
using canopy::testing::config_with;
using canopy::testing::watchdog;

namespace {

task<int> seven() { co_return 7; }

}  // namespace

TEST_CASE(
    "co_await of an empty task (default-made, moved from, already awaited) throws "
    "std::invalid_argument in the awaiting task instead of crashing") {
  const watchdog guard("co_await an empty task", 60);
  executor pool(config_with(2));
  CHECK_THROWS_AS(canopy::block_on(pool,
                                   []() -> task<int> {
                                     task<int> empty;
                                     co_return co_await std::move(empty);
                                   }()),
                  std::invalid_argument);
  CHECK_THROWS_AS(canopy::block_on(pool,
                                   []() -> task<int> {
                                     task<int> once = seven();
                                     const int first = co_await once;
                                     co_return first + co_await once;  // already awaited
                                   }()),
                  std::invalid_argument);
  // The awaiting task goes on after catching it.
  CHECK(canopy::block_on(pool, []() -> task<int> {
          task<int> once = seven();
          task<int> taken = std::move(once);
          int value = co_await std::move(taken);
          try {
            value += co_await std::move(once);  // moved from
          } catch (const std::invalid_argument&) {
            value += 100;
          }
          co_return value;
        }()) == 107);
}

namespace {

// A capture whose destructor takes a while and then says it ran: a joiner
// told of the task's end before the destructor finished sees `released`
// still false.
struct slow_release {
  std::atomic<bool>* released;
  explicit slow_release(std::atomic<bool>* flag) noexcept : released(flag) {}
  slow_release(slow_release&& other) noexcept : released(std::exchange(other.released, nullptr)) {}
  slow_release(const slow_release&) = delete;
  slow_release& operator=(const slow_release&) = delete;
  slow_release& operator=(slow_release&&) = delete;
  ~slow_release() {
    if (released != nullptr) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      released->store(true);
    }
  }
};

}  // namespace

TEST_CASE(
    "a callable task's captures are destroyed before its handle reports the end: value, "
    "exception, cancel before the start") {
  const watchdog guard("callable captures released before the end is reported", 60);
  executor pool(config_with(1));
  {
    std::atomic<bool> released{false};
    auto handle = pool.spawn([hold = slow_release(&released)] { return 5; });
    CHECK(handle.get() == 5);
    CHECK(released.load());
  }
  {
    std::atomic<bool> released{false};
    auto handle = pool.spawn(
        [hold = slow_release(&released)]() -> int { throw std::runtime_error("thrown"); });
    CHECK_THROWS_AS(handle.get(), std::runtime_error);
    CHECK(released.load());
  }
  {
    std::atomic<bool> released{false};
    auto handle = pool.spawn([hold = slow_release(&released)] {});
    CHECK(handle.wait_for(std::chrono::seconds(10)));
    CHECK(released.load());
  }
  {
    // Cancelled before it started: it never runs, and its capture is gone
    // when get() throws task_cancelled.
    std::atomic<bool> go{false};
    std::atomic<bool> blocking{false};
    auto blocker = pool.spawn([&go, &blocking] {
      blocking.store(true);
      while (!go.load()) {
        std::this_thread::yield();
      }
    });
    while (!blocking.load()) {  // the one worker is held: the next task cannot start
      std::this_thread::yield();
    }
    std::atomic<bool> released{false};
    std::atomic<bool> ran{false};
    auto handle = pool.spawn([hold = slow_release(&released), &ran] { ran.store(true); });
    CHECK(handle.cancel());
    go.store(true);
    blocker.get();
    CHECK_THROWS_AS(handle.get(), canopy::task_cancelled);
    CHECK(released.load());
    CHECK_FALSE(ran.load());
  }
  {
    // A coroutine awaiting the handle resumes after the capture is gone.
    std::atomic<bool> released{false};
    const bool seen =
        canopy::block_on(pool, [](executor& on, std::atomic<bool>& flag) -> task<bool> {
          auto handle = on.spawn([hold = slow_release(&flag)] { return 1; });
          const int value = co_await handle;
          co_return value == 1 && flag.load();
        }(pool, released));
    CHECK(seen);
  }
}

TEST_CASE(
    "a host-driven executor (worker_count = 0) at capacity: spawn from the loop thread runs "
    "tasks to free a slot instead of waiting for ever") {
  const watchdog guard("host-driven spawn at capacity", 60);
  canopy::executor_config config = config_with(0);
  config.max_leaves = 1;
  config.signals_per_leaf = 1;  // 64 tasks
  executor pool(config);
  std::atomic<int> ran{0};
  const std::size_t extra = 10;
  for (std::size_t index = 0; index < pool.capacity() + extra; ++index) {
    pool.spawn_detached([&ran] { ran.fetch_add(1); });  // past capacity: runs some of them first
  }
  auto last = pool.spawn([] { return 3; });
  CHECK(last.get() == 3);
  pool.run_until_idle();
  CHECK(ran.load() == static_cast<int>(pool.capacity() + extra));
  // Another thread as the host: the spawner waits for it to free a slot.
  std::atomic<bool> stop{false};
  std::thread host([&] {
    while (!stop.load()) {
      pool.run_for(std::chrono::milliseconds(1));
    }
  });
  for (std::size_t index = 0; index < 4 * pool.capacity(); ++index) {
    pool.spawn_detached([&ran] { ran.fetch_add(1); });
  }
  stop.store(true);
  host.join();
  pool.shutdown();  // drain: what is left runs
  CHECK(ran.load() == static_cast<int>(5 * pool.capacity() + extra));
}

TEST_CASE(
    "a host-driven executor's bounded runs (run_for, run_until, wait_for) return at their "
    "deadline while a task stays runnable") {
  const watchdog guard("host deadlines with a yielding task", 60);
  executor pool(config_with(0));
  std::atomic<bool> stop{false};
  pool.spawn_detached([](std::atomic<bool>& flag) -> task<void> {
    while (!flag.load()) {
      co_await canopy::yield_now();  // always runnable again
    }
  }(stop));
  canopy::async_event never;
  auto waiting = pool.spawn([](canopy::async_event& event) -> task<int> {
    co_await event;
    co_return 1;
  }(never));
  // Without the deadline check between tasks each call below ran until the
  // yielding task stopped: the releaser ends that after 5 s at the latest.
  std::thread releaser([&stop] {
    for (int tick = 0; tick < 500 && !stop.load(); ++tick) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    stop.store(true);
  });
  using clock = std::chrono::steady_clock;
  const auto bound = std::chrono::seconds(2);
  auto started = clock::now();
  CHECK(pool.run_for(std::chrono::milliseconds(20)) > 0);
  CHECK(clock::now() - started < bound);
  started = clock::now();
  CHECK(pool.run_until(clock::now() + std::chrono::milliseconds(20)) > 0);
  CHECK(clock::now() - started < bound);
  started = clock::now();
  CHECK_FALSE(waiting.wait_for(std::chrono::milliseconds(20)));
  CHECK(clock::now() - started < bound);
  started = clock::now();
  CHECK_FALSE(waiting.wait_until(clock::now() + std::chrono::milliseconds(20)));
  CHECK(clock::now() - started < bound);
  stop.store(true);
  releaser.join();
  never.set();
  CHECK(waiting.get() == 1);
}
