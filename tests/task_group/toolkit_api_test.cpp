// The README's toolkit promises, checked as a user would rely on them,
// through the public headers only: task_group's failure and cancel rules,
// the blocking pool's limits and errors, channels closed under waiters, the
// semaphore's bad arguments, async_event's manual reset, and fibers' stacks,
// exceptions and unwinding (the executor's own promises: executor_api_test
// and executor_config_test).
#include <doctest/doctest.h>

#include <atomic>
#include <canopy/blocking.hpp>
#include <canopy/canopy.hpp>
#include <canopy/channel.hpp>
#include <canopy/fiber.hpp>
#include <canopy/sync.hpp>
#include <canopy/task_group.hpp>
#include <chrono>
#include <functional>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>
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

// Counts destructor runs, to see a cancelled task's frame or stack unwound.
struct counted {
  std::atomic<int>* count;
  explicit counted(std::atomic<int>& c) : count(&c) {}
  counted(const counted&) = delete;
  ~counted() { count->fetch_add(1, std::memory_order_relaxed); }
};

task<int> wait_and_count(async_event& event, std::atomic<int>& destroyed, int value,
                         std::atomic<int>& started) {
  counted guard(destroyed);
  // Pairs with until_started's acquire load: what the child's maker wrote
  // before it started (a stop_token kept by the test) is visible there.
  started.fetch_add(1, std::memory_order_release);
  co_await event;
  co_return value;
}

// Yields until `count` children started (a child cancelled before it
// started has no locals whose destructors could run), for at most 10 s.
task<void> until_started(std::atomic<int>& started, int count) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  // Acquire: pairs with wait_and_count's release increment.
  while (started.load(std::memory_order_acquire) < count &&
         std::chrono::steady_clock::now() < deadline) {
    co_await canopy::yield_now();
  }
  CHECK(started.load(std::memory_order_acquire) == count);  // as above
}

task<int> value_of(int value) { co_return value; }

task<int> fail_with(const char* message) {
  throw std::runtime_error(message);
  co_return 0;
}

}  // namespace

TEST_CASE("task_group: a failing child, with and without cancel_on_failure") {
  watchdog dog("task_group failures", 60);
  executor pool(config_with(2));
  async_event never;
  std::atomic<int> destroyed{0};
  std::atomic<int> started{0};

  SUBCASE("without: the others run on, next() hands over the exception once") {
    auto body = [&]() -> task<int> {
      canopy::task_group<int> group;
      group.spawn(fail_with("child failed"));
      group.spawn(value_of(5));
      int values = 0, failures = 0;
      for (int i = 0; i < 2; ++i) {
        try {
          std::optional<int> next = co_await group.next();
          if (next) values += *next;
        } catch (const std::runtime_error&) {
          ++failures;
        }
      }
      CHECK_FALSE(group.stop_token().stop_requested());
      CHECK_FALSE(co_await group.next());
      co_await group.close();
      CHECK(group.failures().empty());  // next() reported it: not again
      co_return values * 10 + failures;
    };
    CHECK(canopy::block_on(pool, body()) == 51);
  }
  SUBCASE("with: the first failure cancels the rest and requests stop") {
    auto body = [&]() -> task<int> {
      canopy::task_group<int> group({.cancel_on_failure = true});
      for (int i = 0; i < 3; ++i) group.spawn(wait_and_count(never, destroyed, i, started));
      co_await until_started(started, 3);
      group.spawn(fail_with("first"));
      bool rethrown = false;
      try {
        (void)co_await group.wait_all();
      } catch (const std::runtime_error& error) {
        rethrown = std::string(error.what()) == "first";
      }
      CHECK(rethrown);
      CHECK(group.stop_token().stop_requested());
      co_await group.close();
      CHECK(group.cancelled() == 3);
      CHECK(group.failures().empty());
      co_return destroyed.load();
    };
    CHECK(canopy::block_on(pool, body()) == 3);
  }
}

TEST_CASE("task_group: close() while children wait cancels them; the destructor too") {
  watchdog dog("task_group close", 60);
  executor pool(config_with(2));
  async_event never;
  std::atomic<int> destroyed{0};
  std::atomic<int> started{0};
  SUBCASE("close() cancels, waits, runs their destructors; later spawn is a logic_error") {
    auto body = [&]() -> task<int> {
      canopy::task_group<int> group;
      for (int i = 0; i < 4; ++i) group.spawn(wait_and_count(never, destroyed, i, started));
      std::stop_token seen;  // the group's, handed to a callable child
      group.spawn([&](std::stop_token token) {
        seen = token;
        return wait_and_count(never, destroyed, 4, started);
      });
      co_await until_started(started, 5);
      CHECK_FALSE(seen.stop_requested());
      co_await group.close();
      CHECK(seen.stop_requested());
      CHECK(group.stop_token().stop_requested());
      CHECK(group.running() == 0);
      CHECK_THROWS_AS(group.spawn(value_of(1)), std::logic_error);
      co_return destroyed.load();
    };
    CHECK(canopy::block_on(pool, body()) == 5);
  }
  SUBCASE("a group destroyed with children running cancels them, nothing leaks") {
    auto body = [&]() -> task<int> {
      {
        canopy::task_group<int> group;
        for (int i = 0; i < 4; ++i) group.spawn(wait_and_count(never, destroyed, i, started));
        co_await until_started(started, 4);
      }
      co_return 0;
    };
    (void)canopy::block_on(pool, body());
    CHECK(eventually([&] { return destroyed.load() == 4; }));
  }
  SUBCASE("an empty task, a null std::function or function pointer is refused at spawn") {
    // Before, a null callable was spawned and failed later with
    // bad_function_call (or a null call), or vanished if close() cancelled it.
    auto body = [&]() -> task<int> {
      canopy::task_group<int> group;
      int refused = 0;
      const auto refuse = [&](auto&& child) {
        try {
          group.spawn(std::forward<decltype(child)>(child));
        } catch (const std::invalid_argument& error) {
          refused += std::string(error.what()).find("empty") != std::string::npos ? 1 : 0;
        }
      };
      refuse(task<int>{});
      refuse(std::function<task<int>()>{});
      refuse(std::function<task<int>(std::stop_token)>{});
      refuse(static_cast<task<int> (*)()>(nullptr));
      group.spawn(std::function<task<int>()>([] { return value_of(4); }));
      const std::optional<int> four = co_await group.next();
      co_await group.close();
      co_return refused * 10 + four.value_or(0);
    };
    CHECK(canopy::block_on(pool, body()) == 44);
  }
}

TEST_CASE("blocking pool: bad config, queue limit, exceptions, a second pool, shutdown") {
  watchdog dog("blocking pool", 60);
  SUBCASE("config fields out of range are named") {
    executor pool(config_with(1));
    struct bad {
      canopy::blocking_pool_config config;
      const char* field;
    };
    for (const bad& each :
         {bad{{.max_threads = 0}, "max_threads"}, bad{{.max_threads = 65537}, "max_threads"},
          bad{{.idle_timeout = 0ms}, "idle_timeout"}, bad{{.idle_timeout = 25h}, "idle_timeout"}}) {
      INFO(each.field);
      bool named = false;
      try {
        canopy::blocking_pool blocking(pool, each.config);
      } catch (const std::invalid_argument& error) {
        named = std::string(error.what()).find(each.field) != std::string::npos;
      }
      CHECK(named);
    }
  }
  SUBCASE("a second pool on one executor is a logic_error") {
    executor pool(config_with(1));
    canopy::blocking_pool first(pool);
    CHECK_THROWS_AS(canopy::blocking_pool{pool}, std::logic_error);
  }
  SUBCASE("outside a task: logic_error; fn's exception at the co_await") {
    executor pool(config_with(1));
    canopy::blocking_pool blocking(pool);
    CHECK_THROWS_AS((void)canopy::run_blocking([] { return 1; }), std::logic_error);
    auto body = []() -> task<int> {
      co_return co_await canopy::run_blocking([]() -> int { throw std::out_of_range("fn"); });
    };
    CHECK_THROWS_AS(canopy::block_on(pool, body()), std::out_of_range);
  }
  SUBCASE("max_queued: the call past it is refused with at_capacity") {
    executor pool(config_with(1));
    canopy::blocking_pool blocking(pool, {.max_threads = 1, .max_queued = 1});
    std::atomic<bool> release{false};
    auto hold = [&]() -> task<int> {
      co_return co_await canopy::run_blocking([&] {
        while (!release.load()) std::this_thread::sleep_for(1ms);
        return 1;
      });
    };
    auto first = pool.spawn(hold());
    REQUIRE(eventually([&] { return blocking.stats().running == 1; }));
    auto second = pool.spawn(hold());
    REQUIRE(eventually([&] { return blocking.stats().queued == 1; }));
    auto third = pool.spawn(hold());
    bool at_capacity = false;
    try {
      (void)third.get();
    } catch (const std::system_error& error) {
      at_capacity = error.code() == canopy::errc::at_capacity;
    }
    CHECK(at_capacity);
    release = true;
    CHECK(first.get() == 1);
    CHECK(second.get() == 1);
  }
  SUBCASE("executor shutdown with calls running and queued: task_cancelled, queued never run") {
    executor pool(config_with(1));
    canopy::blocking_pool blocking(pool, {.max_threads = 1});
    std::atomic<bool> stop_seen{false};
    std::atomic<int> ran{0};
    // The running call returns as soon as its stop is requested, freeing
    // the pool's only thread while the shutdown may not have destroyed the
    // queued call's task yet: the queued call still never runs.
    auto hold = [&]() -> task<int> {
      co_return co_await canopy::run_blocking([&](std::stop_token stop) {
        ran.fetch_add(1);
        while (!stop.stop_requested()) std::this_thread::sleep_for(1ms);
        stop_seen.store(true);
        return 1;
      });
    };
    auto running = pool.spawn(hold());
    REQUIRE(eventually([&] { return blocking.stats().running == 1; }));
    auto queued = pool.spawn(hold());
    REQUIRE(eventually([&] { return blocking.stats().queued == 1; }));
    pool.shutdown();
    CHECK_THROWS_AS((void)running.get(), canopy::task_cancelled);
    CHECK_THROWS_AS((void)queued.get(), canopy::task_cancelled);
    blocking.shutdown();
    CHECK(ran.load() == 1);   // the queued call never ran
    CHECK(stop_seen.load());  // the destroyed task asked its running call to stop
  }
}

TEST_CASE("channel: close with waiting senders and receivers; drain after close; try_*") {
  watchdog dog("channel close", 60);
  executor pool(config_with(2));
  SUBCASE("waiting senders get their value back with closed; receivers drain, then end") {
    canopy::channel<int> full(1);
    REQUIRE(full.try_send(1));
    auto sender = [&](int value) -> task<int> {
      canopy::send_result<int> sent = co_await full.send(value);
      CHECK_FALSE(sent);
      CHECK(sent.error() == canopy::channel_errc::closed);
      co_return sent.value();
    };
    auto a = pool.spawn(sender(2));
    auto b = pool.spawn(sender(3));
    std::this_thread::sleep_for(20ms);  // let them wait (the result holds either way)
    full.close();
    CHECK(a.get() + b.get() == 5);
    auto drain = [&]() -> task<int> {
      std::optional<int> first = co_await full.recv();
      std::optional<int> end = co_await full.recv();
      co_return first.value_or(-1) * 10 + (end ? 1 : 0);
    };
    CHECK(canopy::block_on(pool, drain()) == 10);
    canopy::send_result<int> late = full.try_send(4);
    CHECK(late.error() == canopy::channel_errc::closed);
    CHECK(late.value() == 4);
    CHECK(full.try_recv().error() == canopy::channel_errc::closed);
  }
  SUBCASE("waiting receivers end with nullopt at close") {
    canopy::channel<int> empty(4);
    CHECK(empty.try_recv().error() == canopy::channel_errc::empty);
    auto receiver = [&]() -> task<bool> { co_return (co_await empty.recv()).has_value(); };
    auto a = pool.spawn(receiver());
    auto b = pool.spawn(receiver());
    std::this_thread::sleep_for(20ms);
    empty.close();
    empty.close();  // idempotent
    CHECK_FALSE(a.get());
    CHECK_FALSE(b.get());
  }
  SUBCASE("try_send on a full channel: full, value handed back") {
    canopy::channel<std::string> one(1);
    CHECK(one.try_send("a"));
    canopy::send_result<std::string> refused = one.try_send("b");
    CHECK(refused.error() == canopy::channel_errc::full);
    CHECK(refused.value() == "b");
    CHECK(one.size() == 1);
  }
}

TEST_CASE("semaphore: bad arguments are named errors; try_acquire never overtakes a waiter") {
  watchdog dog("semaphore", 60);
  CHECK_THROWS_AS(canopy::semaphore(5, 3), std::invalid_argument);
  CHECK_THROWS_AS(canopy::semaphore(0, 0), std::invalid_argument);
  canopy::semaphore bounded(1, 3);
  CHECK_THROWS_AS(bounded.release(4), std::logic_error);
  bounded.release(2);                                     // back to 3 free: allowed
  CHECK_THROWS_AS(bounded.release(1), std::logic_error);  // 4 > max_permits
  executor pool(config_with(2));
  auto too_many = [&]() -> task<void> { co_await bounded.acquire(4); };
  CHECK_THROWS_AS(canopy::block_on(pool, too_many()), std::invalid_argument);
  REQUIRE(bounded.try_acquire(3));
  auto wait_two = [&]() -> task<int> {
    co_await bounded.acquire(2);
    co_return 2;
  };
  auto waiter = pool.spawn(wait_two());
  std::this_thread::sleep_for(20ms);
  bounded.release(1);
  CHECK_FALSE(bounded.try_acquire(1));  // the waiter asked first
  bounded.release(1);
  CHECK(waiter.get() == 2);
  bounded.release(3);  // the one still held here and the waiter's two
  CHECK(bounded.try_acquire(3));
}

TEST_CASE("async_event: manual reset; set() before a wait lets it through; reset() re-arms") {
  watchdog dog("async_event", 60);
  executor pool(config_with(2));
  async_event event;
  event.set();
  auto pass = [&]() -> task<int> {
    co_await event;
    co_return 1;
  };
  CHECK(canopy::block_on(pool, pass()) == 1);
  CHECK(canopy::block_on(pool, pass()) == 1);  // still set: manual reset
  event.reset();
  std::vector<canopy::join_handle<int>> waiters;
  for (int i = 0; i < 3; ++i) waiters.push_back(pool.spawn(pass()));
  CHECK_FALSE(waiters[0].wait_for(30ms));
  event.set();
  int passed = 0;
  for (auto& each : waiters) passed += each.get();
  CHECK(passed == 3);
}

TEST_CASE("fibers: stack sizes, exceptions, awaiting coroutine handles and back, unwinding") {
  watchdog dog("fibers", 60);
  executor pool(config_with(2));
  SUBCASE("a stack of 0 or over 1 GiB is refused; a tiny one is rounded up") {
    CHECK_THROWS_AS(pool.spawn(canopy::fiber([] { return 1; }, 0)), std::invalid_argument);
    CHECK_THROWS_AS(pool.spawn(canopy::fiber([] { return 1; }, (std::size_t{1} << 30) + 1)),
                    std::invalid_argument);
    CHECK(pool.spawn(canopy::fiber([] { return 3; }, 1)).get() == 3);
  }
  SUBCASE("a fiber's exception reaches get() and an awaiting coroutine") {
    auto throwing = [] { return canopy::fiber([]() -> int { throw std::domain_error("fiber"); }); };
    CHECK_THROWS_AS(pool.spawn(throwing()).get(), std::domain_error);
    auto awaiting = [&]() -> task<int> { co_return co_await canopy::spawn(throwing()); };
    CHECK_THROWS_AS(canopy::block_on(pool, awaiting()), std::domain_error);
  }
  SUBCASE("a fiber awaits a coroutine task's handle, a coroutine awaits a fiber's") {
    auto fiber_side = pool.spawn(
        canopy::fiber([] { return canopy::this_fiber::await(canopy::spawn(value_of(20))) + 1; }));
    CHECK(fiber_side.get() == 21);
    auto coroutine_side = [&]() -> task<int> {
      co_return co_await canopy::spawn(canopy::fiber([] {
        canopy::this_fiber::yield();
        return 30;
      })) +
          1;
    };
    CHECK(canopy::block_on(pool, coroutine_side()) == 31);
  }
  SUBCASE("cancel of a suspended fiber unwinds its stack: its destructors run") {
    async_event never;
    std::atomic<int> destroyed{0};
    std::atomic<bool> waiting{false};
    auto handle = pool.spawn(canopy::fiber([&] {
      counted outer(destroyed);
      {
        counted inner(destroyed);
        waiting = true;
        canopy::this_fiber::await(never);
      }
      return 1;
    }));
    REQUIRE(eventually([&] { return waiting.load(); }));
    CHECK(handle.cancel());
    CHECK_THROWS_AS((void)handle.get(), canopy::task_cancelled);
    CHECK(destroyed.load() == 2);
  }
}
