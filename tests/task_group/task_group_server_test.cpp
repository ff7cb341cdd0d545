// task_group as a server's set of connections (include/canopy/task_group.hpp):
// spawn_detached children whose values are dropped as they end (the group
// keeps nothing per success: kept() stays 0 over many children), their
// exceptions still reported; try_next() taking what has finished without
// waiting; the drain with a deadline (all_ended() under with_timeout, then
// cancel() and wait_all()): children that ended in time keep their values,
// the others are cancelled and gone before wait_all() returns.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <canopy/io.hpp>
#include <canopy/task_group.hpp>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/io_test_support.hpp"
#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

using canopy::executor;
using canopy::task;
using canopy::task_group;
using canopy::testing::config_with;
using canopy::testing::destroy_flag;
using canopy::testing::eventually;
using canopy::testing::watchdog;
using namespace std::chrono_literals;

namespace {

task<int> value_after_yields(int value, int yields) {
  for (int i = 0; i < yields; ++i) {
    co_await canopy::yield_now();
  }
  co_return value;
}

task<int> fail_with(std::string message) {
  co_await canopy::yield_now();
  throw std::runtime_error(message);
}

task<std::shared_ptr<int>> share_after_yield(std::shared_ptr<int> value) {
  co_await canopy::yield_now();
  co_return value;
}

task<int> wait_forever(canopy::async_event& never, std::atomic<int>& destroyed) {
  destroy_flag flag(destroyed);
  co_await never;
  co_return -1;
}

// Yield until `done()` or a bounded number of rounds; whether it came.
template <class Done>
task<bool> yield_until(Done done) {
  for (int round = 0; round < 1'000'000; ++round) {
    if (done()) {
      co_return true;
    }
    co_await canopy::yield_now();
  }
  co_return done();
}

// A server's concurrent connections, in the case below.
constexpr std::size_t open_at_most = 64;

}  // namespace

TEST_CASE("spawn_detached: many short children in a long-lived group keep nothing") {
  watchdog dog("task_group detached memory", 60);
  executor pool(config_with(2));
  const long rounds = 1'000'000 / canopy::testing::stress_divisor();
  auto owner = [rounds]() -> task<void> {
    task_group<int> group;
    std::size_t most_kept = 0;
    std::size_t most_running = 0;
    for (long i = 0; i < rounds; ++i) {
      group.spawn_detached(value_after_yields(static_cast<int>(i), static_cast<int>(i % 3)));
      most_kept = std::max(most_kept, group.kept());
      most_running = std::max(most_running, group.running());
      while (group.running() >= open_at_most) {
        co_await canopy::yield_now();
      }
    }
    CHECK(co_await group.wait_all() == std::vector<int>{});
    CHECK(most_kept == 0);  // no outcome kept at any point, however many children
    CHECK(most_running <= open_at_most);
    CHECK(group.kept() == 0);
    CHECK(group.cancelled() == 0);  // a dropped value is a success, not a cancel
    CHECK_FALSE(co_await group.next());

    // The same children through spawn(): each outcome stays until taken,
    // which is what grew a server's memory with every connection.
    constexpr int kept_children = 1000;
    for (int i = 0; i < kept_children; ++i) {
      group.spawn(value_after_yields(i, 0));
    }
    CHECK(co_await yield_until([&] { return group.running() == 0; }));
    CHECK(group.kept() == kept_children);
    CHECK((co_await group.wait_all()).size() == kept_children);
    CHECK(group.kept() == 0);
    co_await group.close();
  };
  pool.spawn(owner()).get();
}

TEST_CASE("spawn_detached: the value is dropped as the child ends; an exception is reported") {
  watchdog dog("task_group detached outcomes", 30);
  for (std::size_t workers : {1, 2}) {
    CAPTURE(workers);
    executor pool(config_with(workers));
    auto owner = []() -> task<void> {
      task_group<std::shared_ptr<int>> group;
      auto shared = std::make_shared<int>(7);
      const std::weak_ptr<int> watched = shared;
      group.spawn_detached(share_after_yield(std::move(shared)));
      CHECK(co_await yield_until([&] { return group.running() == 0; }));
      CHECK(watched.expired());  // destroyed without anyone taking it
      CHECK(group.kept() == 0);
      CHECK_FALSE(group.try_next().has_value());
      CHECK_FALSE((co_await group.next()).has_value());
      co_await group.close();
    };
    pool.spawn(owner()).get();

    auto failing = []() -> task<void> {
      task_group<int> group;
      group.spawn_detached(fail_with("first"));
      CHECK(co_await yield_until([&] { return group.running() == 0; }));
      CHECK(group.kept() == 1);  // an exception is kept until reported
      CHECK_THROWS_WITH_AS(group.try_next(), "first", std::runtime_error);
      CHECK(group.kept() == 0);
      // Rethrown by wait_all() (and close()) as any child's: the first, the
      // others in failures().
      group.spawn_detached(fail_with("second"));
      group.spawn_detached(fail_with("third"));
      group.spawn_detached(value_after_yields(1, 1));
      bool rethrown = false;
      try {
        (void)co_await group.wait_all();
      } catch (const std::runtime_error&) {
        rethrown = true;
      }
      CHECK(rethrown);
      CHECK(group.failures().size() == 1);
      co_await group.close();
    };
    pool.spawn(failing()).get();
  }
}

TEST_CASE("try_next() takes a finished outcome without waiting, never what still runs") {
  watchdog dog("task_group try_next", 30);
  for (std::size_t workers : {1, 2}) {
    CAPTURE(workers);
    executor pool(config_with(workers));
    canopy::async_event never;
    std::atomic<int> destroyed{0};
    auto owner = [&]() -> task<void> {
      task_group<int> group;
      CHECK_FALSE(group.try_next().has_value());  // empty group
      group.spawn(wait_forever(never, destroyed));
      group.spawn(value_after_yields(5, 2));
      group.spawn(fail_with("failed"));
      CHECK(co_await yield_until([&] { return group.kept() == 2; }));
      int values = 0;
      int failures = 0;
      for (int take = 0; take < 2; ++take) {
        try {
          const std::optional<int> got = group.try_next();
          REQUIRE(got.has_value());
          CHECK(*got == 5);
          ++values;
        } catch (const std::runtime_error& failure) {
          CHECK(std::string(failure.what()) == "failed");
          ++failures;
        }
      }
      CHECK(values == 1);
      CHECK(failures == 1);
      // One child still runs: nothing to take, and try_next() returned at once.
      CHECK_FALSE(group.try_next().has_value());
      CHECK(group.running() == 1);
      co_await group.close();
      CHECK(destroyed == 1);
      CHECK_THROWS_AS(group.try_next(), std::logic_error);
    };
    pool.spawn(owner()).get();

    auto void_owner = []() -> task<void> {
      task_group<void> group;
      CHECK_FALSE(group.try_next());
      group.spawn([]() -> task<void> { co_return; });
      CHECK(co_await yield_until([&] { return group.kept() == 1; }));
      CHECK(group.try_next());
      CHECK_FALSE(group.try_next());
      co_await group.close();
    };
    pool.spawn(void_owner()).get();
  }
}

TEST_CASE("drain with a deadline: in-time values kept, the rest cancelled and gone") {
  watchdog dog("task_group drain deadline", 30);
  executor pool(canopy::testing::io_config(2));
  canopy::io::reactor_timers timers(pool);
  canopy::async_event never;
  std::atomic<int> destroyed{0};
  auto owner = [&]() -> task<void> {
    task_group<int> group;
    for (int i = 1; i <= 3; ++i) {
      group.spawn(value_after_yields(i, i));
    }
    for (int i = 0; i < 4; ++i) {
      group.spawn(wait_forever(never, destroyed));
    }
    group.spawn_detached(value_after_yields(100, 1));  // dropped, as its contract says
    // The three end well before the deadline: wait for them so that the
    // case does not depend on how fast a loaded machine runs them.
    CHECK(co_await yield_until([&] { return group.kept() == 3 && group.running() == 4; }));

    auto ended = group.all_ended();
    const auto started = std::chrono::steady_clock::now();
    const canopy::io::timeout_result<void> drained = co_await canopy::with_timeout(50ms, ended);
    CHECK_FALSE(drained);  // four still run at the deadline
    CHECK(std::chrono::steady_clock::now() - started >= 50ms);
    group.cancel();
    std::vector<int> values = co_await group.wait_all();
    CHECK(destroyed == 4);  // the cancelled ones ended before wait_all() returned
    CHECK(group.running() == 0);
    CHECK(group.cancelled() == 4);
    std::sort(values.begin(), values.end());
    CHECK(values == std::vector<int>{1, 2, 3});

    co_await group.close();

    // Everything ends in time: the drain returns at once, nothing cancelled.
    // (A new group: cancel() is for good, and cancels later children too.)
    task_group<int> quick;
    for (int i = 1; i <= 3; ++i) {
      quick.spawn(value_after_yields(10 * i, i));
    }
    auto again = quick.all_ended();
    CHECK(co_await canopy::with_timeout(10s, again));
    CHECK(quick.running() == 0);
    values = co_await quick.wait_all();
    std::sort(values.begin(), values.end());
    CHECK(values == std::vector<int>{10, 20, 30});
    CHECK(quick.cancelled() == 0);
    co_await quick.close();
  };
  pool.spawn(owner()).get();
}
