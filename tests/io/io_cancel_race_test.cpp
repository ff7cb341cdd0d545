// Cancel against fire for the waits that need a reactor: a timer (a
// coroutine's and a fiber's sleep, with_timeout's child and deadline) and
// readiness, each with a cancel that lands as the wait completes. Whichever
// side wins, the task ends exactly once (its value, or task_cancelled), its
// destructors run, and what its wait held is released before its memory
// goes: no timer left in the wheel, no registration or pipe left open.
// AddressSanitizer turns a frame freed with its wait still registered into
// a report; in a plain build the timer wheel would keep a freed node and its
// poller would spin. Run on each I/O backend; the waits without a reactor
// race in tests/wait/cancel_race_test.cpp, once.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

#include "coroutine/coroutine.hpp"
#include "fiber/fiber.hpp"
#include "io/fiber/fiber_io.hpp"
#include "io/fiber/timer_fiber.hpp"
#include "io/io.hpp"
#include "tests/io_test_support.hpp"
#include "tests/test_support.hpp"
#include "tests/wait/cancel_race_support.hpp"

using canopy::executor;
using canopy::task;
using canopy::testing::end_counter;
using canopy::testing::outcome_of;
using canopy::testing::race_counts;
using canopy::testing::race_round_count;
using canopy::testing::race_rounds;
using canopy::testing::racer;
using canopy::testing::reached;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

canopy::executor_config reactor_config(std::size_t workers) {
  return canopy::io::with_reactor(canopy::testing::config_with(workers));
}

// Cancel `handles[i]` at started[i] + offset(i): a spread of moments around
// each task's deadline, so that some cancels land after the deadline passed
// and before the timer queue fired the timer.
template <class Handle>
void cancel_around(std::vector<Handle>& handles, const std::vector<clock_type::time_point>& at) {
  for (std::size_t i = 0; i < handles.size(); ++i) {
    while (clock_type::now() < at[i]) {
    }
    handles[i].cancel();
  }
}

}  // namespace

// ---- timers ----

TEST_CASE("timer: a coroutine cancelled at its sleep's deadline takes its timer back") {
  canopy::testing::watchdog guard("timer cancel race (coroutine)", 240);
  executor pool(reactor_config(2));
  canopy::io::reactor_timers timers(pool);
  constexpr std::size_t batch = 64;
  const long total = race_round_count(50000);
  std::atomic<int> destroyed{0};
  int finished = 0;
  int cancelled = 0;
  for (long done = 0; done < total; done += batch) {
    std::vector<canopy::join_handle<int>> handles;
    std::vector<clock_type::time_point> cancel_at;
    for (std::size_t i = 0; i < batch; ++i) {
      const auto start = clock_type::now();
      handles.push_back(pool.spawn([]([[maybe_unused]] end_counter counted) -> task<int> {
        co_await canopy::sleep_for(200us);
        co_return 7;
      }(end_counter(destroyed))));
      // From 20 µs before the deadline to 60 µs after it.
      cancel_at.push_back(start + 180us + std::chrono::microseconds((i * 7) % 80));
    }
    cancel_around(handles, cancel_at);
    for (auto& handle : handles) {
      const int ended = outcome_of(handle, 7);
      finished += ended;
      cancelled += 1 - ended;
    }
  }
  const long spawned = (total + batch - 1) / batch * batch;
  CHECK(finished + cancelled == spawned);
  CHECK(destroyed.load() == spawned);
  CHECK(canopy::testing::eventually([&] { return timers.queue().pending() == 0; }));
  // The queue still works: a sleep after the storm ends on time.
  const auto start = clock_type::now();
  canopy::block_on(pool, []() -> task<void> { co_await canopy::sleep_for(1ms); }());
  CHECK(clock_type::now() - start >= 1ms);
  MESSAGE("finished " << finished << ", cancelled " << cancelled);
  pool.shutdown();
}

TEST_CASE("timer: a fiber cancelled at its sleep's deadline takes its timer back") {
  canopy::testing::watchdog guard("timer cancel race (fiber)", 240);
  executor pool(reactor_config(2));
  canopy::io::reactor_timers timers(pool);
  constexpr std::size_t batch = 32;
  const long total = race_round_count(10000);
  std::atomic<int> destroyed{0};
  int finished = 0;
  for (long done = 0; done < total; done += batch) {
    std::vector<canopy::join_handle<int>> handles;
    std::vector<clock_type::time_point> cancel_at;
    for (std::size_t i = 0; i < batch; ++i) {
      const auto start = clock_type::now();
      handles.push_back(pool.spawn(canopy::fiber([counted = end_counter(destroyed)] {
        canopy::this_fiber::sleep_for(200us);
        return 7;
      })));
      cancel_at.push_back(start + 180us + std::chrono::microseconds((i * 7) % 80));
    }
    cancel_around(handles, cancel_at);
    for (auto& handle : handles) {
      finished += outcome_of(handle, 7);
    }
  }
  const long spawned = (total + batch - 1) / batch * batch;
  CHECK(destroyed.load() == spawned);
  CHECK(canopy::testing::eventually([&] { return timers.queue().pending() == 0; }));
  MESSAGE("finished " << finished << " of " << spawned);
  pool.shutdown();
}

// ---- with_timeout ----

namespace {

task<int> sleepy_child(std::chrono::microseconds duration) {
  co_await canopy::sleep_for(duration);
  co_return 1;
}

}  // namespace

TEST_CASE("with_timeout: a child sleeping as long as the timeout, many times in one task") {
  canopy::testing::watchdog guard("with_timeout race", 240);
  executor pool(reactor_config(2));
  canopy::io::reactor_timers timers(pool);
  const long total = race_round_count(20000);
  const auto [values, timeouts] =
      canopy::block_on(pool, [](long count) -> task<std::pair<long, long>> {
        long got_value = 0;
        long got_timeout = 0;
        for (long i = 0; i < count; ++i) {
          auto got = co_await canopy::with_timeout(100us, sleepy_child(100us));
          if (got) {
            CHECK(*got == 1);
            ++got_value;
          } else {
            CHECK(got.error() == canopy::io::errc::timed_out);
            ++got_timeout;
          }
        }
        co_return std::pair{got_value, got_timeout};
      }(total));
  CHECK(values + timeouts == total);
  CHECK(canopy::testing::eventually([&] { return timers.queue().pending() == 0; }));
  MESSAGE("values " << values << ", timeouts " << timeouts);
  pool.shutdown();
}

TEST_CASE(
    "with_timeout: on timeout the child is destroyed before the result, its error dropped, its "
    "value kept") {
  canopy::testing::watchdog guard("with_timeout child", 60);
  std::atomic<int> reported{0};
  canopy::executor_config config = reactor_config(2);
  config.on_detached_exception = [&reported](std::exception_ptr) { reported.fetch_add(1); };
  executor pool(config);
  canopy::io::reactor_timers timers(pool);

  SUBCASE("a suspended child: its sleep is taken back when with_timeout returns") {
    std::atomic<int> destroyed{0};
    const bool ok = canopy::block_on(pool, [](std::atomic<int>& count) -> task<bool> {
      auto got = co_await canopy::with_timeout(2ms, [](std::atomic<int>& c) -> task<int> {
        const canopy::testing::destroy_flag flag(c);
        co_await canopy::sleep_for(1h);
        co_return 1;
      }(count));
      co_return !got && count.load() == 1;
    }(destroyed));
    CHECK(ok);
    CHECK(timers.queue().pending() == 0);
  }
  SUBCASE("a running child that throws after the timeout: no detached exception") {
    // The child spins 30 ms past a 1 ms timeout. On a loaded machine the
    // awaiting task may not run before the child has thrown: then both are
    // ready, the child's end wins and its exception is rethrown, as
    // documented. That round says nothing about this case: try again.
    int timed_out_rounds = 0;
    for (int round = 0; round < 10 && timed_out_rounds == 0; ++round) {
      std::atomic<int> destroyed{0};
      try {
        const bool ok = canopy::block_on(pool, [](std::atomic<int>& count) -> task<bool> {
          auto got = co_await canopy::with_timeout(1ms, [](std::atomic<int>& c) -> task<int> {
            const canopy::testing::destroy_flag flag(c);
            co_await canopy::yield_now();  // started: runs on until its next suspension
            const auto until = clock_type::now() + 30ms;
            while (clock_type::now() < until) {
            }
            throw std::runtime_error("thrown while being cancelled");
            co_return 1;
          }(count));
          co_return !got && got.error() == canopy::io::errc::timed_out && count.load() == 1;
        }(destroyed));
        CHECK(ok);
        ++timed_out_rounds;
      } catch (const std::runtime_error& error) {
        CHECK(std::string_view(error.what()) == "thrown while being cancelled");
        MESSAGE("round " << round << ": the child ended before the timeout was seen");
      }
    }
    CHECK(timed_out_rounds == 1);
    pool.shutdown();  // whatever is left ran or was dropped: reports are in
    CHECK(reported.load() == 0);
  }
  SUBCASE("a running child that returns after the timeout: its value, not timed_out") {
    // The child spins 30 ms past a 1 ms timeout and returns: the cancel
    // lands while it runs, and what it returned is its completed result.
    std::atomic<int> destroyed{0};
    const int got = canopy::block_on(pool, [](std::atomic<int>& count) -> task<int> {
      auto result = co_await canopy::with_timeout(1ms, [](std::atomic<int>& c) -> task<int> {
        const canopy::testing::destroy_flag flag(c);
        co_await canopy::yield_now();  // started: runs on until its next suspension
        const auto until = clock_type::now() + 30ms;
        while (clock_type::now() < until) {
        }
        co_return 7;
      }(count));
      co_return result ? *result : -1;
    }(destroyed));
    CHECK(got == 7);
    CHECK(destroyed.load() == 1);
  }
  SUBCASE("a cancelled parent cancels the child it waits for") {
    std::atomic<int> destroyed{0};
    std::atomic<bool> waiting{false};
    auto parent = pool.spawn([](std::atomic<int>& count, std::atomic<bool>& flag) -> task<int> {
      flag.store(true, std::memory_order_release);
      auto got = co_await canopy::with_timeout(1h, [](std::atomic<int>& c) -> task<int> {
        const canopy::testing::destroy_flag inner(c);
        co_await canopy::sleep_for(1h);
        co_return 1;
      }(count));
      co_return got ? *got : -1;
    }(destroyed, waiting));
    REQUIRE(reached(waiting));
    REQUIRE(canopy::testing::eventually([&] { return timers.queue().pending() == 2; }));
    parent.cancel();
    CHECK_THROWS_AS(parent.get(), canopy::task_cancelled);
    CHECK(canopy::testing::eventually([&] { return destroyed.load() == 1; }));
    CHECK(canopy::testing::eventually([&] { return timers.queue().pending() == 0; }));
  }
  pool.shutdown();
  CHECK(reported.load() == 0);
}

// ---- readiness ----

TEST_CASE("readiness: cancel against the descriptor becoming readable") {
  canopy::testing::watchdog guard("readiness race", 240);
  executor pool(reactor_config(2));
  canopy::io::reactor& owner = canopy::io::reactor::of(pool);
  racer other;
  const std::size_t descriptors_before = canopy::testing::open_fd_count();
  const long total = race_round_count(3000);
  std::atomic<int> destroyed{0};
  int ends[2] = {-1, -1};
  std::unique_ptr<canopy::io::registration> reg;
  // A fresh pipe and registration each round: no readiness carries over.
  const auto open_pipe = [&] {
    reg.reset();
    if (ends[0] >= 0) {
      ::close(ends[0]);
      ::close(ends[1]);
    }
    REQUIRE(::pipe2(ends, O_NONBLOCK | O_CLOEXEC) == 0);
    std::error_code error;
    reg = std::make_unique<canopy::io::registration>(owner, ends[0], canopy::io::interest::readable,
                                                     error, false);
    REQUIRE_FALSE(error);
  };
  const auto fire = [&] {
    const char byte = 'x';
    CHECK(::write(ends[1], &byte, 1) == 1);
  };
  const auto after = [] {};
  race_counts counts;
  SUBCASE("coroutine") {
    counts = race_rounds(
        other, total, destroyed,
        [&](std::atomic<bool>& waiting) {
          open_pipe();
          return pool.spawn([](const canopy::io::registration& r, std::atomic<bool>& w,
                               std::atomic<int>& d) -> task<int> {
            const canopy::testing::destroy_flag flag(d);
            w.store(true, std::memory_order_release);
            const std::error_code error = co_await canopy::io::readable(r);
            co_return error ? -1 : 7;
          }(*reg, waiting, destroyed));
        },
        fire, after);
  }
  SUBCASE("fiber") {
    counts = race_rounds(
        other, total, destroyed,
        [&](std::atomic<bool>& waiting) {
          open_pipe();
          const canopy::io::registration* const r = reg.get();
          return pool.spawn(canopy::fiber([r, &waiting, &destroyed] {
            const canopy::testing::destroy_flag flag(destroyed);
            waiting.store(true, std::memory_order_release);
            return canopy::this_fiber::readable(*r) ? -1 : 7;
          }));
        },
        fire, after);
  }
  reg.reset();
  ::close(ends[0]);
  ::close(ends[1]);
  CHECK(canopy::testing::open_fd_count() == descriptors_before);  // every round's pipe closed
  CHECK(counts.finished + counts.cancelled == total);
  MESSAGE("finished " << counts.finished << ", cancelled " << counts.cancelled);
  pool.shutdown();
}
