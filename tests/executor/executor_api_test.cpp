// The README's promises, checked as a user would rely on them, through the
// public headers only: handles used twice or emptied, deadlines of zero,
// negative or maximal length, cancel's answer, every spawn verb after
// shutdown, empty tasks, and what a task holds (a mutex, a semaphore's
// permits) released whichever way it ends.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <canopy/canopy.hpp>
#include <canopy/channel.hpp>
#include <canopy/fiber.hpp>
#include <canopy/sync.hpp>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <type_traits>
#include <vector>

#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

using canopy::async_event;
using canopy::executor;
using canopy::task;
using canopy::testing::config_with;
using canopy::testing::eventually;
using canopy::testing::watchdog;
using namespace std::chrono_literals;

namespace {

task<int> wait_then(async_event& event, int value) {
  co_await event;
  co_return value;
}

task<int> forty_two() { co_return 42; }

// Sets `event` from another thread after a short delay, so that a wait that
// returned early can be told from one that waited for the task.
std::thread set_later(async_event& event) {
  return std::thread([&event] {
    std::this_thread::sleep_for(30ms);
    event.set();
  });
}

}  // namespace

TEST_CASE(
    "one handle type: a callable, a coroutine and a fiber each return a join_handle naming its "
    "task") {
  static_assert(std::is_same_v<canopy::task_handle<int>, canopy::join_handle<int>>);
  const watchdog guard("one handle type", 60);
  executor pool(config_with(2));
  canopy::join_handle<int> callable = pool.spawn([] { return 1; });
  canopy::join_handle<int> coroutine = pool.spawn(forty_two());
  canopy::join_handle<int> fiber = pool.spawn(canopy::fiber([] { return 3; }));
  CHECK(callable.core() == &pool.core());
  CHECK(coroutine.core() == &pool.core());
  CHECK(fiber.core() == &pool.core());
  // Three live tasks at once: three different slots.
  const auto slot_of = [](const canopy::join_handle<int>& handle) { return handle.id().slot; };
  CHECK(slot_of(callable) != slot_of(coroutine));
  CHECK(slot_of(callable) != slot_of(fiber));
  CHECK(slot_of(coroutine) != slot_of(fiber));
  CHECK(callable.get() == 1);
  CHECK(coroutine.get() == 42);
  CHECK(fiber.get() == 3);
  // Moved from: empty, and no longer names a runtime.
  canopy::join_handle<int> moved = pool.spawn([] { return 4; });
  canopy::join_handle<int> target = std::move(moved);
  CHECK_FALSE(moved.valid());      // NOLINT(bugprone-use-after-move): what a move leaves
  CHECK(moved.core() == nullptr);  // NOLINT(bugprone-use-after-move)
  CHECK(target.core() == &pool.core());
  CHECK(target.get() == 4);
}

TEST_CASE("a handle's get() twice, and every blocking call on an empty handle, is a logic_error") {
  watchdog guard("empty handles", 30);
  executor pool(config_with(2));
  auto handle = pool.spawn([] { return 7; });
  CHECK(handle.get() == 7);
  CHECK_FALSE(handle.valid());
  CHECK_THROWS_AS(handle.get(), std::logic_error);
  CHECK_THROWS_AS(handle.wait_for(1ms), std::logic_error);
  CHECK_THROWS_AS(handle.wait_until(std::chrono::steady_clock::now()), std::logic_error);
  CHECK_FALSE(handle.cancel());  // nothing to cancel: no crash, no error
  CHECK_FALSE(handle.ready());

  auto moved_from = pool.spawn(forty_two());
  auto owner = std::move(moved_from);
  CHECK_THROWS_AS(moved_from.get(), std::logic_error);
  CHECK(owner.get() == 42);

  // Awaited twice: the second await is a logic_error, in a task and a fiber.
  const bool task_twice = canopy::block_on(pool, []() -> task<bool> {
    auto child = canopy::spawn(forty_two());
    const int first = co_await child;
    try {
      (void)co_await child;
    } catch (const std::logic_error&) {
      co_return first == 42;
    }
    co_return false;
  }());
  CHECK(task_twice);
  auto fiber_twice = pool.spawn(canopy::fiber([&pool] {
    auto child = pool.spawn([] { return 3; });
    const int first = canopy::this_fiber::await(child);
    try {
      (void)canopy::this_fiber::await(child);
    } catch (const std::logic_error&) {
      return first == 3;
    }
    return false;
  }));
  CHECK(fiber_twice.get());
}

TEST_CASE("wait_for / wait_until: zero and negative deadlines poll; maximal ones wait") {
  watchdog guard("deadlines", 60);
  executor pool(config_with(2));
  async_event event;
  auto pending = pool.spawn(wait_then(event, 1));
  CHECK_FALSE(pending.wait_for(0ms));
  CHECK_FALSE(pending.wait_for(-5s));
  CHECK_FALSE(pending.wait_until(std::chrono::steady_clock::now() - 1h));
  CHECK_FALSE(pending.wait_until(std::chrono::system_clock::time_point::min()));

  // "No deadline" spelt as the largest duration or time point: the wait
  // lasts until the task ends, neither returning at once nor overflowing.
  SUBCASE("duration::max()") {
    std::thread setter = set_later(event);
    CHECK(pending.wait_for(std::chrono::nanoseconds::max()));
    setter.join();
  }
  SUBCASE("hours::max()") {
    std::thread setter = set_later(event);
    CHECK(pending.wait_for(std::chrono::hours::max()));
    setter.join();
  }
  SUBCASE("steady_clock::time_point::max()") {
    std::thread setter = set_later(event);
    CHECK(pending.wait_until(std::chrono::steady_clock::time_point::max()));
    setter.join();
  }
  SUBCASE("system_clock::time_point::max()") {
    std::thread setter = set_later(event);
    CHECK(pending.wait_until(std::chrono::system_clock::time_point::max()));
    setter.join();
  }
  CHECK(pending.ready());
  CHECK(pending.wait_for(0ms));
  CHECK(pending.wait_for(-1s));
  CHECK(pending.get() == 1);
}

TEST_CASE("cancel() answers whether it came before the end; a late cancel keeps the value") {
  watchdog guard("cancel's answer", 30);
  executor pool(config_with(2));
  auto done = pool.spawn([] { return 5; });
  REQUIRE(done.wait_for(10s));
  CHECK_FALSE(done.cancel());
  CHECK(done.get() == 5);

  async_event never;
  auto suspended = pool.spawn(wait_then(never, 1));
  CHECK(suspended.cancel());
  CHECK_THROWS_AS(suspended.get(), canopy::task_cancelled);

  auto fiber = pool.spawn(canopy::fiber([&never] {
    canopy::this_fiber::await(never);
    return 2;
  }));
  CHECK(fiber.cancel());
  CHECK_THROWS_AS(fiber.get(), canopy::task_cancelled);
}

TEST_CASE("after shutdown every spawn verb refuses with shut_down; shutdown is idempotent") {
  watchdog guard("spawn after shutdown", 30);
  executor pool(config_with(2));
  pool.shutdown();
  pool.shutdown();

  const auto is_shut_down = [](const canopy::spawn_error& error) {
    return error.code() == canopy::errc::shut_down;
  };
  const auto check_refused = [&](auto&& spawn) {
    try {
      spawn();
      FAIL("spawn after shutdown did not throw");
    } catch (const canopy::spawn_error& error) {
      CHECK(is_shut_down(error));
    }
  };
  check_refused([&] { (void)pool.spawn([] { return 1; }); });
  check_refused([&] { (void)pool.spawn(forty_two()); });
  check_refused([&] { (void)pool.spawn(canopy::fiber([] { return 1; })); });
  check_refused([&] { pool.spawn_detached([] {}); });
  check_refused([&] { pool.spawn_detached(forty_two()); });
  check_refused([&] { (void)canopy::block_on(pool, forty_two()); });
  check_refused([&] { pool.post([] {}); });

  auto attempt = pool.try_spawn([] { return 1; });
  CHECK(attempt.error == canopy::errc::shut_down);
  CHECK_FALSE(attempt.handle.valid());
  auto task_attempt = pool.try_spawn(forty_two());
  CHECK(task_attempt.error == canopy::errc::shut_down);
  auto fiber_attempt = pool.try_spawn(canopy::fiber([] { return 1; }));
  CHECK(fiber_attempt.error == canopy::errc::shut_down);
}

TEST_CASE("empty tasks and handles are bad input, named, not a crash") {
  watchdog guard("empty tasks", 30);
  executor pool(config_with(2));
  CHECK_THROWS_AS((void)pool.spawn(task<int>{}), std::invalid_argument);
  CHECK_THROWS_AS(pool.spawn_detached(task<void>{}), std::invalid_argument);
  CHECK_THROWS_AS((void)canopy::block_on(pool, task<int>{}), std::invalid_argument);
  CHECK_THROWS_AS((void)pool.spawn(canopy::fiber([] { return 1; }, 0)), std::invalid_argument);
  CHECK_THROWS_AS((void)pool.spawn(canopy::fiber([] { return 1; }, (std::size_t{1} << 30) + 1)),
                  std::invalid_argument);

  // await_all on a handle that was already taken: logic_error in the task.
  auto awaited = canopy::block_on(pool, [&]() -> task<bool> {
    std::vector<canopy::join_handle<int>> handles;
    handles.push_back(canopy::spawn(forty_two()));
    handles.push_back(canopy::spawn(forty_two()));
    co_await handles[0];  // taken: the handle is empty now
    try {
      co_await canopy::await_all(handles);
    } catch (const std::logic_error&) {
      co_return true;
    }
    co_return false;
  }());
  CHECK(awaited);
}

TEST_CASE("calls that need a task refuse outside one with logic_error") {
  CHECK_THROWS_AS((void)canopy::current_waker(), std::logic_error);
  CHECK_THROWS_AS((void)canopy::spawn(forty_two()), std::logic_error);
  CHECK_THROWS_AS(canopy::this_fiber::yield(), std::logic_error);
  async_event event;
  CHECK_THROWS_AS(canopy::this_fiber::await(event), std::logic_error);
}

TEST_CASE("a task holding a mutex or permits releases them however it ends") {
  watchdog guard("release on every end", 60);
  canopy::mutex lock;
  canopy::semaphore permits(2);
  async_event never;
  async_event holding;
  std::atomic<int> destroyed{0};

  const auto holder = [&]() -> task<int> {
    canopy::testing::destroy_flag flag(destroyed);
    auto guard = co_await lock.lock();
    co_await permits.acquire(2);
    struct give_back {
      canopy::semaphore* permits;
      ~give_back() { permits->release(2); }
    } give{&permits};
    holding.set();
    co_await never;
    co_return 0;
  };
  const auto released = [&] {
    if (!lock.try_lock()) {  // a guard: unlocks again at once
      return false;
    }
    if (!permits.try_acquire(2)) {
      return false;
    }
    permits.release(2);
    return true;
  };

  SUBCASE("cancelled") {
    executor pool(config_with(2));
    auto handle = pool.spawn(holder());
    REQUIRE(eventually([&] { return holding.is_set(); }));
    CHECK_FALSE(released());
    CHECK(handle.cancel());
    CHECK_THROWS_AS(handle.get(), canopy::task_cancelled);
    CHECK(released());
  }
  SUBCASE("destroyed at shutdown") {
    executor pool(config_with(2));
    auto handle = pool.spawn(holder());
    REQUIRE(eventually([&] { return holding.is_set(); }));
    CHECK_FALSE(released());
    pool.shutdown();
    CHECK_THROWS_AS(handle.get(), canopy::task_cancelled);
    CHECK(released());
  }
  SUBCASE("detached, then destroyed at shutdown") {
    {
      executor pool(config_with(1));
      pool.spawn_detached(holder());
      REQUIRE(eventually([&] { return holding.is_set(); }));
    }
    CHECK(released());
  }
  SUBCASE("a waiter for the same mutex, cancelled, loses its place and nothing else") {
    executor pool(config_with(2));
    auto handle = pool.spawn(holder());
    REQUIRE(eventually([&] { return holding.is_set(); }));
    // A named lambda: a temporary one's captures would die with the
    // full expression while its coroutine still waits.
    const auto lock_it = [&]() -> task<int> {
      auto guard = co_await lock.lock();
      co_return 1;
    };
    auto waiter = pool.spawn(lock_it());
    CHECK_FALSE(waiter.wait_for(20ms));
    CHECK(waiter.cancel());
    CHECK_THROWS_AS(waiter.get(), canopy::task_cancelled);
    CHECK(handle.cancel());
    CHECK_THROWS_AS(handle.get(), canopy::task_cancelled);
    CHECK(released());
  }
  CHECK(destroyed.load() == 1);
}

TEST_CASE("channel misuse: the documented errors") {
  canopy::channel<int> ch(1);
  auto sent = ch.try_send(1);
  REQUIRE(sent);
  CHECK_THROWS_AS((void)sent.value(), std::logic_error);
  auto full = ch.try_send(2);
  CHECK_FALSE(full);
  CHECK(full.error() == canopy::channel_errc::full);
  CHECK(full.value() == 2);
  REQUIRE(ch.try_recv());
  auto empty = ch.try_recv();
  CHECK_FALSE(empty);
  CHECK_THROWS_AS((void)empty.value(), std::system_error);
  ch.close();
  ch.close();
  auto closed = ch.try_send(3);
  CHECK(closed.error() == canopy::channel_errc::closed);
  CHECK(closed.value() == 3);
  CHECK_THROWS_AS(canopy::channel<int>(0), std::invalid_argument);
}

// A running task that ends before its next suspension point: cancel()
// answers true (asked before the end), get() throws task_cancelled as the
// README's table says, and an exception it then throws is never reported
// as a detached one.
TEST_CASE("cancel() of a running callable: true, and its exception is never reported") {
  watchdog guard("cancel a running callable", 30);
  std::atomic<int> detached_errors{0};
  canopy::executor_config config = config_with(2);
  config.on_detached_exception = [&detached_errors](std::exception_ptr) {
    detached_errors.fetch_add(1);
  };
  executor pool(config);
  std::atomic<bool> started{false};
  std::atomic<bool> finish{false};
  auto throwing = pool.spawn([&]() -> int {
    started.store(true);
    while (!finish.load()) {
      std::this_thread::yield();
    }
    throw std::runtime_error("after the cancel");
  });
  REQUIRE(eventually([&] { return started.load(); }));
  CHECK(throwing.cancel());
  finish.store(true);
  CHECK_THROWS_AS((void)throwing.get(), canopy::task_cancelled);
  CHECK_FALSE(throwing.cancel());  // the handle is empty now

  started.store(false);
  finish.store(false);
  pool.spawn([&]() -> int {
        started.store(true);
        while (!finish.load()) {
          std::this_thread::yield();
        }
        throw std::runtime_error("cancelled, then dropped");
      })
      .cancel();
  finish.store(true);
  pool.shutdown();
  CHECK(detached_errors.load() == 0);
}

// The same for a value: a callable, a coroutine task and a fiber that are
// running when cancel() is asked and then return without suspending again.
TEST_CASE("cancel() of a running task that then returns: get() throws task_cancelled") {
  watchdog guard("cancel a running task that returns", 30);
  executor pool(config_with(2));
  std::atomic<bool> started{false};
  std::atomic<bool> finish{false};
  const auto spin_until_finish = [&] {
    started.store(true);
    while (!finish.load()) {
      std::this_thread::yield();
    }
  };
  const auto cancel_while_running = [&](auto& handle) {
    REQUIRE(eventually([&] { return started.load(); }));
    CHECK(handle.cancel());
    finish.store(true);
    CHECK_THROWS_AS((void)handle.get(), canopy::task_cancelled);
    started.store(false);
    finish.store(false);
  };
  auto callable = pool.spawn([&]() -> int {
    spin_until_finish();
    return 9;
  });
  cancel_while_running(callable);
  auto body = [&]() -> task<int> {
    spin_until_finish();
    co_return 9;
  };
  auto coroutine = pool.spawn(body());
  cancel_while_running(coroutine);
  auto fiber = pool.spawn(canopy::fiber([&]() -> int {
    spin_until_finish();
    return 9;
  }));
  cancel_while_running(fiber);
  // A cancel after the end changes nothing.
  auto done = pool.spawn([] { return 9; });
  REQUIRE(eventually([&] { return done.ready(); }));
  CHECK_FALSE(done.cancel());
  CHECK(done.get() == 9);
}

TEST_CASE("when_all and await_all of nothing complete at once with nothing") {
  watchdog guard("empty joins", 30);
  executor pool(config_with(2));
  const bool fine = canopy::block_on(pool, []() -> task<bool> {
    std::vector<task<int>> none;
    std::vector<int> values = co_await canopy::when_all(std::move(none));
    std::vector<canopy::join_handle<int>> handles;
    co_await canopy::await_all(handles);
    std::vector<int> out;
    co_await canopy::await_all(handles, std::back_inserter(out));
    co_return values.empty() && out.empty();
  }());
  CHECK(fine);
}

TEST_CASE("blocking calls on a worker of another executor: worker_thread, not a deadlock") {
  watchdog guard("worker of another executor", 30);
  executor first(config_with(1));
  executor second(config_with(1));
  auto outcome = first.spawn([&]() -> std::error_code {
    try {
      (void)canopy::block_on(second, forty_two());
    } catch (const std::system_error& error) {
      return error.code();
    }
    return {};
  });
  CHECK(outcome.get() == canopy::errc::worker_thread);
  auto joined = first.spawn([&]() -> std::error_code {
    auto handle = second.spawn([] { return 1; });
    try {
      (void)handle.get();
    } catch (const std::system_error& error) {
      return error.code();
    }
    return {};
  });
  CHECK(joined.get() == canopy::errc::worker_thread);
}

TEST_CASE("host run functions: zero, negative and extreme deadlines return") {
  watchdog guard("host deadlines", 30);
  canopy::executor_config config;
  config.worker_count = 0;
  executor pool(config);
  CHECK(pool.run_for(0ms) == 0);
  CHECK(pool.run_for(-1s) == 0);
  CHECK(pool.run_until(std::chrono::system_clock::time_point::min()) == 0);
  CHECK(pool.run_until(std::chrono::steady_clock::now() - 1h) == 0);
  std::atomic<int> ran{0};
  pool.spawn_detached([&] { ran.fetch_add(1); });
  CHECK(pool.run_until(std::chrono::steady_clock::now() + 1ms) >= 1);
  CHECK(ran.load() == 1);
  // A host with no deadline runs until shutdown, from another thread.
  std::thread stopper([&] {
    std::this_thread::sleep_for(20ms);
    pool.shutdown();
  });
  (void)pool.run_for(std::chrono::hours::max());
  stopper.join();
  CHECK(pool.run_once() == 0);
}

TEST_CASE("spawns racing shutdown: each refused, run or destroyed; none lost or hung") {
  watchdog guard("spawn against shutdown", 60);
  const int rounds = static_cast<int>(std::max<long>(4, 40 / canopy::testing::stress_divisor()));
  for (int round = 0; round < rounds; ++round) {
    std::atomic<int> accepted{0};
    std::atomic<int> refused{0};
    std::atomic<int> ran{0};
    std::atomic<int> destroyed{0};
    std::vector<canopy::join_handle<void>> handles[2];
    {
      executor pool(config_with(2));
      std::atomic<bool> go{false};
      std::vector<std::thread> spawners;
      for (int which = 0; which < 2; ++which) {
        spawners.emplace_back([&, which] {
          while (!go.load()) {
            std::this_thread::yield();
          }
          for (int i = 0; i < 2000; ++i) {
            try {
              auto flag = std::make_shared<canopy::testing::destroy_flag>(destroyed);
              handles[which].push_back(pool.spawn([&ran, flag] { ran.fetch_add(1); }));
              accepted.fetch_add(1);
            } catch (const canopy::spawn_error& error) {
              CHECK(error.code() == canopy::errc::shut_down);
              refused.fetch_add(1);
              break;
            }
          }
        });
      }
      go.store(true);
      std::this_thread::sleep_for(std::chrono::microseconds(200 * (round % 5)));
      pool.shutdown();
      for (std::thread& spawner : spawners) {
        spawner.join();
      }
    }
    int joined = 0;
    int cancelled = 0;
    for (auto& list : handles) {
      for (auto& handle : list) {
        try {
          handle.get();
          ++joined;
        } catch (const canopy::task_cancelled&) {
          ++cancelled;
        }
      }
    }
    CHECK(joined == ran.load());
    CHECK(joined + cancelled == accepted.load());
    // Every callable destroyed once: the accepted ones' and the refused ones'.
    CHECK(destroyed.load() == accepted.load() + refused.load());
  }
}

TEST_CASE("block_on of a task that shutdown destroys throws task_cancelled (workers or host)") {
  watchdog guard("block_on against shutdown", 30);
  for (const std::size_t workers : {std::size_t{2}, std::size_t{0}}) {
    CAPTURE(workers);
    executor pool(config_with(workers));
    async_event never;
    std::atomic<bool> waiting{false};
    const auto wait_forever = [&]() -> task<int> {
      waiting.store(true);
      co_await never;
      co_return 1;
    };
    std::thread stopper([&] {
      // Bounded: the task marks itself waiting at its first run.
      (void)eventually([&] { return waiting.load(); });
      pool.shutdown();
    });
    CHECK_THROWS_AS((void)canopy::block_on(pool, wait_forever()), canopy::task_cancelled);
    stopper.join();
    CHECK(waiting.load());
  }
}
