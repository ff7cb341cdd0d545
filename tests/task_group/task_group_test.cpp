// task_group (include/canopy/task_group.hpp): children taken as they finish
// (next) or all at once (wait_all), fiber children and a fiber owner,
// every child's exception reported once, cancel-on-first-failure, close()
// cancelling and waiting, the destructor's safety net, the stop token seen
// by a blocking call, use after close and an empty task; over executors of
// 1 and 2 workers.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <canopy/blocking.hpp>
#include <canopy/fiber.hpp>
#include <canopy/task_group.hpp>
#include <chrono>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

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

// Suspended until cancelled (nobody sets the event); counts its start and
// its destruction (a child cancelled before it started has neither).
std::atomic<int> forever_started{0};
task<int> wait_forever(canopy::async_event& never, std::atomic<int>& destroyed) {
  forever_started.fetch_add(1);
  destroy_flag flag(destroyed);
  co_await never;
  co_return -1;
}

// A child whose blocking call polls the group's stop token.
task<int> poll_token_blocking(std::stop_token token, std::atomic<bool>& started,
                              std::atomic<bool>& saw_stop) {
  // A named callable, not a temporary inside the co_await expression: GCC 12
  // destroys such a temporary's captures twice.
  auto poll = [token, &started, &saw_stop] {
    started = true;
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (!token.stop_requested() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(1ms);
    }
    saw_stop = token.stop_requested();
    return 0;
  };
  co_return co_await canopy::run_blocking(std::move(poll));
}

}  // namespace

TEST_CASE("next() yields every child's value, then nullopt; wait_all the rest") {
  watchdog dog("task_group next", 30);
  for (std::size_t workers : {1, 2}) {
    CAPTURE(workers);
    executor pool(config_with(workers));
    auto owner = []() -> task<int> {
      task_group<int> group;
      for (int i = 1; i <= 10; ++i) {
        group.spawn(value_after_yields(i, i % 3));
      }
      int sum = 0;
      for (int taken = 0; taken < 4; ++taken) {
        auto value = co_await group.next();
        REQUIRE(value.has_value());
        sum += *value;
      }
      const std::vector<int> rest = co_await group.wait_all();
      CHECK(rest.size() == 6);
      for (int value : rest) {
        sum += value;
      }
      CHECK_FALSE((co_await group.next()).has_value());
      co_await group.close();
      co_return sum;
    };
    CHECK(pool.spawn(owner()).get() == 55);
  }
}

TEST_CASE("fiber children, callables, and a fiber owning a group") {
  watchdog dog("task_group fibers", 30);
  for (std::size_t workers : {1, 2}) {
    CAPTURE(workers);
    executor pool(config_with(workers));
    auto owner = []() -> task<int> {
      task_group<int> group;
      group.spawn(canopy::fiber([] {
        canopy::this_fiber::yield();
        return 40;
      }));
      group.spawn([] { return value_after_yields(2, 1); });
      const std::vector<int> values = co_await group.wait_all();
      co_await group.close();
      co_return values.size() == 2 ? values[0] + values[1] : -1;
    };
    CHECK(pool.spawn(owner()).get() == 42);
    auto fiber_owner = pool.spawn(canopy::fiber([] {
      task_group<void> group;
      std::atomic<int> ran{0};
      for (int i = 0; i < 5; ++i) {
        group.spawn([&ran]() -> task<void> {
          ran.fetch_add(1);
          co_return;
        });
      }
      int finished = 0;
      while (canopy::this_fiber::await(group.next())) {
        ++finished;
      }
      canopy::this_fiber::await(group.close());
      return finished * 10 + ran.load();
    }));
    CHECK(fiber_owner.get() == 55);
  }
}

TEST_CASE("no child's exception is lost: one rethrown, the others in failures()") {
  watchdog dog("task_group failures", 30);
  for (std::size_t workers : {1, 2}) {
    CAPTURE(workers);
    executor pool(config_with(workers));
    auto owner = []() -> task<std::set<std::string>> {
      task_group<int> group;
      for (int i = 0; i < 3; ++i) {
        group.spawn(fail_with("failure " + std::to_string(i)));
        group.spawn(value_after_yields(i, 2));
      }
      std::set<std::string> seen;
      try {
        (void)co_await group.wait_all();
        FAIL("wait_all did not rethrow");
      } catch (const std::runtime_error& error) {
        seen.insert(error.what());
      }
      for (const std::exception_ptr& other : group.failures()) {
        try {
          std::rethrow_exception(other);
        } catch (const std::runtime_error& error) {
          seen.insert(error.what());
        }
      }
      CHECK(group.running() == 0);
      CHECK(group.cancelled() == 0);
      co_await group.close();  // nothing left to rethrow
      co_return seen;
    };
    const auto seen = pool.spawn(owner()).get();
    CHECK(seen == std::set<std::string>{"failure 0", "failure 1", "failure 2"});
  }
}

TEST_CASE("cancel_on_failure: the first failure cancels the others, and the token") {
  watchdog dog("task_group first failure", 30);
  for (std::size_t workers : {1, 2}) {
    CAPTURE(workers);
    executor pool(config_with(workers));
    canopy::async_event never;
    std::atomic<int> destroyed{0};
    forever_started = 0;
    auto owner = [&]() -> task<bool> {
      task_group<int> group({.cancel_on_failure = true});
      for (int i = 0; i < 4; ++i) {
        group.spawn(wait_forever(never, destroyed));
      }
      group.spawn(fail_with("first"));
      bool rethrown = false;
      try {
        (void)co_await group.wait_all();
      } catch (const std::runtime_error& error) {
        rethrown = std::string(error.what()) == "first";
      }
      CHECK(group.cancelled() == 4);
      CHECK(group.stop_token().stop_requested());
      CHECK(group.failures().empty());
      co_await group.close();
      co_return rethrown;
    };
    CHECK(pool.spawn(owner()).get());
    CHECK(destroyed == forever_started);
  }
}

TEST_CASE("close() cancels the running children and waits for them") {
  watchdog dog("task_group close", 30);
  for (std::size_t workers : {1, 2}) {
    CAPTURE(workers);
    executor pool(config_with(workers));
    canopy::async_event never;
    std::atomic<int> destroyed{0};
    forever_started = 0;
    auto owner = [&]() -> task<int> {
      task_group<int> group;
      for (int i = 0; i < 6; ++i) {
        group.spawn(wait_forever(never, destroyed));
      }
      group.spawn(value_after_yields(1, 0));
      CHECK(co_await group.next() == 1);
      co_await group.close();
      CHECK(destroyed == forever_started);  // all gone before close() returned
      CHECK(group.running() == 0);
      co_return static_cast<int>(group.cancelled());
    };
    CHECK(pool.spawn(owner()).get() == 6);
  }
}

TEST_CASE("the destructor cancels children it cannot wait for") {
  watchdog dog("task_group destructor", 30);
  executor pool(config_with(2));
  canopy::async_event never;
  std::atomic<int> destroyed{0};
  forever_started = 0;
  auto owner = [&]() -> task<void> {
    task_group<int> group;
    for (int i = 0; i < 5; ++i) {
      group.spawn(wait_forever(never, destroyed));
    }
    co_await canopy::yield_now();
  };
  pool.spawn(owner()).get();
  // Those that started are destroyed; the others never run.
  CHECK(eventually([&] { return pool.stats().live_tasks == 0; }));
  CHECK(destroyed == forever_started);
}

TEST_CASE("a child's stop token reaches its blocking call when the group cancels") {
  watchdog dog("task_group stop token", 30);
  for (std::size_t workers : {1, 2}) {
    CAPTURE(workers);
    executor pool(config_with(workers));
    canopy::blocking_pool blocking(pool);
    std::atomic<bool> started{false};
    std::atomic<bool> saw_group_stop{false};
    auto owner = [&]() -> task<std::size_t> {
      task_group<int> group;
      group.spawn([&](std::stop_token token) {
        return poll_token_blocking(std::move(token), started, saw_group_stop);
      });
      co_await canopy::run_blocking([&] { eventually([&] { return started.load(); }); });
      co_await group.close();
      co_return group.cancelled();
    };
    CHECK(pool.spawn(owner()).get() == 1);
    CHECK(eventually([&] { return saw_group_stop.load(); }));
  }
}

TEST_CASE("bad input: used after close, an empty task, spawn outside a task") {
  watchdog dog("task_group bad input", 30);
  executor pool(config_with(1));
  auto owner = []() -> task<int> {
    task_group<int> group;
    int errors = 0;
    try {
      group.spawn(task<int>{});
    } catch (const std::invalid_argument&) {
      ++errors;
    }
    co_await group.close();
    try {
      group.spawn(value_after_yields(1, 0));
    } catch (const std::logic_error&) {
      ++errors;
    }
    try {
      (void)co_await group.next();
    } catch (const std::logic_error&) {
      ++errors;
    }
    try {
      (void)co_await group.wait_all();
    } catch (const std::logic_error&) {
      ++errors;
    }
    co_await group.close();  // a second close returns at once
    co_return errors;
  };
  CHECK(pool.spawn(owner()).get() == 4);
  task_group<int> outside;
  CHECK_THROWS_AS(outside.spawn(value_after_yields(1, 0)), std::logic_error);
  CHECK(outside.running() == 0);
}

namespace {

// A child that sees the group's stop late: it spins between its suspension
// points, and once it reads the stop request it throws (counted in
// `thrown` first). A cancel that finds it suspended destroys it instead.
struct late_failure : std::runtime_error {
  late_failure() : std::runtime_error("saw the stop late") {}
};
void spin_a_little() {
  const auto until = std::chrono::steady_clock::now() + 5us;
  while (std::chrono::steady_clock::now() < until) {
  }
}
task<int> late_task(std::stop_token token, std::atomic<int>& thrown) {
  for (int step = 0;; ++step) {
    if (token.stop_requested()) {
      thrown.fetch_add(1);
      throw late_failure();
    }
    if (step % 8 == 0) {
      co_await canopy::yield_now();
    }
    spin_a_little();
  }
}
auto late_fiber(std::stop_token token, std::atomic<int>& thrown) {
  return canopy::fiber([token, &thrown]() -> int {
    for (int step = 0;; ++step) {
      if (token.stop_requested()) {
        thrown.fetch_add(1);
        throw late_failure();
      }
      if (step % 8 == 0) {
        canopy::this_fiber::yield();
      }
      spin_a_little();
    }
  });
}

}  // namespace

TEST_CASE("cancel() from another thread: no child spawned after it returned starts") {
  // cancel() cancels the children whose handles the group holds; one
  // spawned after it must not start either, even when a worker takes it
  // before launch() has stored its handle.
  watchdog dog("task_group spawn after cancel", 120);
  const int spawns = std::max(200, 4000 / static_cast<int>(canopy::testing::stress_divisor()));
  executor pool(config_with(2));
  std::atomic<int> started_after{0};
  std::atomic<bool> cancel_returned{false};
  std::atomic<task_group<int>*> shared{nullptr};
  auto owner = pool.spawn([](int count, std::atomic<int>& started, std::atomic<bool>& returned,
                             std::atomic<task_group<int>*>& out) -> task<std::size_t> {
    task_group<int> group;
    out.store(&group);
    while (!returned.load()) {
      co_await canopy::yield_now();
    }
    for (int index = 0; index < count; ++index) {
      if (index % 2 == 0) {
        group.spawn([](std::atomic<int>& body) -> task<int> {
          body.fetch_add(1);
          co_return 1;
        }(started));
      } else {
        group.spawn(canopy::fiber([&started] {
          started.fetch_add(1);
          return 1;
        }));
      }
    }
    co_await group.close();
    co_return group.cancelled();
  }(spawns, started_after, cancel_returned, shared));
  while (shared.load() == nullptr) {
    std::this_thread::yield();
  }
  shared.load()->cancel();
  cancel_returned.store(true);
  CHECK(owner.get() == static_cast<std::size_t>(spawns));
  CHECK(started_after.load() == 0);
}

TEST_CASE("storm: a child that throws after the stop was requested is reported, every kind") {
  watchdog dog("task_group late failures", 120);
  const long rounds = std::max(1L, 200 / canopy::testing::stress_divisor());
  for (std::size_t workers : {1, 2, 4}) {
    CAPTURE(workers);
    executor pool(config_with(workers));
    std::atomic<int> thrown{0};
    const int reported =
        pool.spawn([](long count, std::atomic<int>& thrown) -> task<int> {
              int reported = 0;
              for (long round = 0; round < count; ++round) {
                task_group<int> group;
                // A task, a callable making a task, a callable
                // making a fiber, a fiber.
                group.spawn(late_task(group.stop_token(), thrown));
                group.spawn([&thrown](std::stop_token token) { return late_task(token, thrown); });
                group.spawn([&thrown](std::stop_token token) { return late_fiber(token, thrown); });
                group.spawn(late_fiber(group.stop_token(), thrown));
                for (long yields = round % 5; yields > 0; --yields) {
                  co_await canopy::yield_now();
                }
                try {
                  co_await group.close();
                } catch (const late_failure&) {
                  ++reported;
                }
                reported += static_cast<int>(group.failures().size());
                CHECK(group.running() == 0);
                CHECK(group.cancelled() + group.failures().size() <= 4);
              }
              co_return reported;
            }(rounds, thrown))
            .get();
    CHECK(reported == thrown.load());
  }
}

namespace {

// A capture whose destructor takes a while, then marks it done: a group
// that reported its child ended before this ran would let the owner see
// `done` still false (and, in a real program, free what the capture uses).
struct slow_capture {
  std::atomic<int>* done;
  explicit slow_capture(std::atomic<int>& target) : done(&target) {}
  slow_capture(slow_capture&& other) noexcept : done(std::exchange(other.done, nullptr)) {}
  slow_capture(const slow_capture&) = delete;
  slow_capture& operator=(const slow_capture&) = delete;
  ~slow_capture() {
    if (done != nullptr) {
      std::this_thread::sleep_for(20ms);
      done->fetch_add(1);
    }
  }
};

}  // namespace

TEST_CASE("a child given as a callable: its captures are gone before the group says it ended") {
  // The wrapper's parameters are destroyed in an order the compiler
  // chooses (clang: the last first), so the callable must not outlive the
  // report of the child's end.
  watchdog dog("task_group callable captures", 60);
  executor pool(config_with(2));
  for (int round = 0; round < 6; ++round) {
    CAPTURE(round);
    std::atomic<int> done{0};
    const int seen = pool.spawn([](int mode, std::atomic<int>& done) -> task<int> {
                           task_group<int> group;
                           if (mode == 0) {
                             group.spawn([capture = slow_capture(done)]() -> task<int> { co_return 1; });
                           } else if (mode == 1) {
                             group.spawn([capture = slow_capture(done)](std::stop_token) -> task<int> {
                               co_return 1;
                             });
                           } else {
                             group.spawn([capture = slow_capture(done)] {
                               return canopy::fiber([] { return 1; });
                             });
                           }
                           co_await group.wait_all();
                           const int now = done.load();
                           co_await group.close();
                           co_return now;
                         }(round % 3, done))
                         .get();
    CHECK(seen == 1);
  }
}
