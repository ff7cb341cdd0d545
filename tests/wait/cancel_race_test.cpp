// Cancel against fire for the waits that need no reactor: a custom wait
// source, an async_event link, the join of a child, when_all, and the host
// hand-off, for every task kind that can wait on them (coroutine, fiber),
// with a cancel that lands as the wait completes. Whichever side wins, the
// task ends exactly once (its value, or task_cancelled), its destructors
// run, and what its wait held is released before its memory goes: every
// arm() of a wait source matched by one disarm(). No executor here has a
// reactor, so the I/O backend plays no part and the test runs once; the
// timer and readiness races are tests/io/io_cancel_race_test.cpp, run on
// each backend.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "coroutine/coroutine.hpp"
#include "fiber/fiber.hpp"
#include "tests/counted_source.hpp"
#include "tests/test_support.hpp"
#include "tests/wait/cancel_race_support.hpp"

using canopy::executor;
using canopy::task;
using canopy::testing::counted_source;
using canopy::testing::end_counter;
using canopy::testing::outcome_of;
using canopy::testing::race_counts;
using canopy::testing::race_round_count;
using canopy::testing::race_rounds;
using canopy::testing::racer;
using canopy::testing::reached;
using namespace std::chrono_literals;

// ---- custom wait sources, async_event links, joins ----

TEST_CASE("custom wait source: cancel against set(): one disarm for every arm") {
  canopy::testing::watchdog guard("custom source race", 240);
  executor pool(canopy::testing::config_with(2));
  racer other;
  const long total = race_round_count(5000);
  std::atomic<int> destroyed{0};
  std::unique_ptr<counted_source> source;
  int unmatched = 0;
  const auto fire = [&] { source->set(); };
  const auto after = [&] {
    // The task ended and was joined: its wait must be fully released.
    unmatched += source->arms.load() != source->disarms.load() ? 1 : 0;
  };
  race_counts counts;
  SUBCASE("coroutine") {
    counts = race_rounds(
        other, total, destroyed,
        [&](std::atomic<bool>& waiting) {
          source = std::make_unique<counted_source>();
          return pool.spawn(
              [](counted_source& s, std::atomic<bool>& w, std::atomic<int>& d) -> task<int> {
                const canopy::testing::destroy_flag flag(d);
                w.store(true, std::memory_order_release);
                co_return co_await canopy::wait_on(s);
              }(*source, waiting, destroyed));
        },
        fire, after);
  }
  SUBCASE("fiber") {
    counts = race_rounds(
        other, total, destroyed,
        [&](std::atomic<bool>& waiting) {
          source = std::make_unique<counted_source>();
          counted_source* const s = source.get();
          return pool.spawn(canopy::fiber([s, &waiting, &destroyed] {
            const canopy::testing::destroy_flag flag(destroyed);
            waiting.store(true, std::memory_order_release);
            return canopy::this_fiber::wait_on(*s);
          }));
        },
        fire, after);
  }
  CHECK(unmatched == 0);
  CHECK(counts.finished + counts.cancelled == total);
  MESSAGE("finished " << counts.finished << ", cancelled " << counts.cancelled);
  pool.shutdown();
}

TEST_CASE("async_event: cancel against set()") {
  canopy::testing::watchdog guard("event race", 240);
  executor pool(canopy::testing::config_with(2));
  racer other;
  const long total = race_round_count(5000);
  std::atomic<int> destroyed{0};
  std::unique_ptr<canopy::async_event> event;
  const auto fire = [&] { event->set(); };
  const auto after = [] {};
  race_counts counts;
  SUBCASE("coroutine") {
    counts = race_rounds(
        other, total, destroyed,
        [&](std::atomic<bool>& waiting) {
          event = std::make_unique<canopy::async_event>();
          return pool.spawn(
              [](canopy::async_event& e, std::atomic<bool>& w, std::atomic<int>& d) -> task<int> {
                const canopy::testing::destroy_flag flag(d);
                w.store(true, std::memory_order_release);
                co_await e;
                co_return 7;
              }(*event, waiting, destroyed));
        },
        fire, after);
  }
  SUBCASE("fiber") {
    counts = race_rounds(
        other, total, destroyed,
        [&](std::atomic<bool>& waiting) {
          event = std::make_unique<canopy::async_event>();
          canopy::async_event* const e = event.get();
          return pool.spawn(canopy::fiber([e, &waiting, &destroyed] {
            const canopy::testing::destroy_flag flag(destroyed);
            waiting.store(true, std::memory_order_release);
            canopy::this_fiber::await(*e);
            return 7;
          }));
        },
        fire, after);
  }
  CHECK(counts.finished + counts.cancelled == total);
  MESSAGE("finished " << counts.finished << ", cancelled " << counts.cancelled);
  pool.shutdown();
}

TEST_CASE("join: cancel a parent against its awaited child finishing") {
  canopy::testing::watchdog guard("join race", 240);
  executor pool(canopy::testing::config_with(2));
  racer other;
  const long total = race_round_count(5000);
  std::atomic<int> destroyed{0};  // parents
  std::atomic<int> children{0};
  // Every round's gate lives to the end: a cancelled parent's child may
  // still be on its way out (unlinking from its gate) after the round.
  std::vector<std::unique_ptr<canopy::async_event>> gates;
  canopy::async_event* gate = nullptr;
  const auto next_gate = [&] {
    gates.push_back(std::make_unique<canopy::async_event>());
    gate = gates.back().get();
  };
  const auto fire = [&] { gate->set(); };
  const auto after = [] {};
  const auto child = [](canopy::async_event& g, [[maybe_unused]] end_counter counted) -> task<int> {
    co_await g;
    co_return 7;
  };
  race_counts counts;
  SUBCASE("coroutine parent") {
    counts = race_rounds(
        other, total, destroyed,
        [&](std::atomic<bool>& waiting) {
          next_gate();
          return pool.spawn([](auto make_child, canopy::async_event& g, std::atomic<bool>& w,
                               std::atomic<int>& d, std::atomic<int>& c) -> task<int> {
            const canopy::testing::destroy_flag flag(d);
            auto handle = canopy::spawn(make_child(g, end_counter(c)));
            static_cast<void>(handle.id());  // a task of its own: a real join wait
            w.store(true, std::memory_order_release);
            co_return co_await handle;
          }(child, *gate, waiting, destroyed, children));
        },
        fire, after);
  }
  SUBCASE("fiber parent") {
    counts = race_rounds(
        other, total, destroyed,
        [&](std::atomic<bool>& waiting) {
          next_gate();
          canopy::async_event* const g = gate;
          return pool.spawn(canopy::fiber([&child, g, &waiting, &destroyed, &children] {
            const canopy::testing::destroy_flag flag(destroyed);
            auto handle = canopy::spawn(child(*g, end_counter(children)));
            static_cast<void>(handle.id());
            waiting.store(true, std::memory_order_release);
            return canopy::this_fiber::await(handle);
          }));
        },
        fire, after);
  }
  // Every child ended too (ran, or was cancelled with its parent).
  CHECK(canopy::testing::eventually([&] { return children.load() == total; }));
  CHECK(counts.finished + counts.cancelled == total);
  MESSAGE("finished " << counts.finished << ", cancelled " << counts.cancelled);
  pool.shutdown();
  gates.clear();
}

TEST_CASE("a cancelled task awaiting when_all cancels every child not joined yet") {
  canopy::testing::watchdog guard("when_all cancel", 60);
  executor pool(canopy::testing::config_with(2));
  canopy::async_event never;  // no child's wait ends by itself
  std::atomic<int> children{0};
  std::atomic<bool> waiting{false};
  const auto child = [](canopy::async_event& gate, end_counter counted) -> task<int> {
    static_cast<void>(counted);
    co_await gate;
    co_return 1;
  };
  SUBCASE("tuple form") {
    auto parent = pool.spawn([](auto make, canopy::async_event& gate, std::atomic<int>& count,
                                std::atomic<bool>& flag) -> task<int> {
      flag.store(true, std::memory_order_release);
      auto [a, b, c] =
          co_await canopy::when_all(make(gate, end_counter(count)), make(gate, end_counter(count)),
                                    make(gate, end_counter(count)));
      co_return a + b + c;
    }(child, never, children, waiting));
    REQUIRE(reached(waiting));
    std::this_thread::sleep_for(2ms);  // let the children reach their waits (not required)
    parent.cancel();
    CHECK_THROWS_AS(parent.get(), canopy::task_cancelled);
  }
  SUBCASE("vector form") {
    auto parent = pool.spawn([](auto make, canopy::async_event& gate, std::atomic<int>& count,
                                std::atomic<bool>& flag) -> task<int> {
      std::vector<task<int>> tasks;
      for (int i = 0; i < 3; ++i) {
        tasks.push_back(make(gate, end_counter(count)));
      }
      flag.store(true, std::memory_order_release);
      const std::vector<int> values = co_await canopy::when_all(std::move(tasks));
      co_return static_cast<int>(values.size());
    }(child, never, children, waiting));
    REQUIRE(reached(waiting));
    std::this_thread::sleep_for(2ms);
    parent.cancel();
    CHECK_THROWS_AS(parent.get(), canopy::task_cancelled);
  }
  CHECK(canopy::testing::eventually([&] { return children.load() == 3; }));
  pool.shutdown();
}

TEST_CASE("host hand-off: cancel against the host thread running the task") {
  canopy::testing::watchdog guard("host race", 240);
  executor pool(canopy::testing::config_with(1));
  const long total = race_round_count(3000);
  std::atomic<int> destroyed{0};
  std::atomic<bool> stop{false};
  std::thread host([&] {
    while (!stop.load(std::memory_order_acquire)) {
      pool.run_for(1ms);
    }
  });
  int finished = 0;
  int cancelled = 0;
  for (long round = 0; round < total; ++round) {
    std::atomic<bool> waiting{false};
    auto handle = round % 2 == 0
                      ? pool.spawn([](std::atomic<bool>& w, std::atomic<int>& d) -> task<int> {
                          const canopy::testing::destroy_flag flag(d);
                          w.store(true, std::memory_order_release);
                          co_await canopy::resume_on_host();
                          co_return 7;
                        }(waiting, destroyed))
                      : pool.spawn(canopy::fiber([&waiting, &destroyed] {
                          const canopy::testing::destroy_flag flag(destroyed);
                          waiting.store(true, std::memory_order_release);
                          canopy::this_fiber::resume_on_host();
                          return 7;
                        }));
    REQUIRE(reached(waiting));
    handle.cancel();
    const int ended = outcome_of(handle, 7);
    finished += ended;
    cancelled += 1 - ended;
  }
  stop.store(true, std::memory_order_release);
  host.join();
  CHECK(destroyed.load() == total);
  CHECK(finished + cancelled == total);
  MESSAGE("finished " << finished << ", cancelled " << cancelled);
  pool.shutdown();
}
