// Timers come with the reactor: sleep_for and with_timeout work on an
// executor built with_reactor() and nothing else; reactor_options::timers =
// false leaves them out, and the error then says what is missing; a
// reactor_timers on a reactor with timers is a handle to them; a reactor
// drives one executor at a time.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>

#include "coroutine/coroutine.hpp"
#include "io/io.hpp"
#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

using canopy::executor;
using canopy::executor_config;
using canopy::task;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

executor_config two_workers() {
  executor_config config;
  config.worker_count = 2;
  return config;
}

// The message of the logic_error a sleep in a task of `pool` throws, or "".
std::string sleep_error(executor& pool) {
  auto handle = pool.spawn([]() -> task<void> { co_await canopy::sleep_for(1ms); }());
  try {
    handle.get();
  } catch (const std::logic_error& error) {
    return error.what();
  }
  return "";
}

}  // namespace

TEST_CASE("an executor with a reactor has timers with nothing else created") {
  const canopy::testing::watchdog guard("default timers", 60);
  executor pool(canopy::io::with_reactor(two_workers()));
  const bool slept_long_enough = canopy::block_on(pool, []() -> task<bool> {
    const auto start = clock_type::now();
    co_await canopy::sleep_for(2ms);
    co_return clock_type::now() - start >= 2ms;
  }());
  CHECK(slept_long_enough);
  const bool timed_out = canopy::block_on(pool, []() -> task<bool> {
    auto forever = []() -> task<int> {
      co_await canopy::sleep_for(1h);
      co_return 1;
    };
    auto result = co_await canopy::with_timeout(2ms, forever());
    co_return !result.has_value();
  }());
  CHECK(timed_out);
  canopy::io::detail::timer_queue* const own = canopy::io::reactor::of(pool).own_timers();
  REQUIRE(own != nullptr);
  CHECK(own->pending() == 0);
  // A reactor_timers made by older code is a handle to the reactor's queue.
  canopy::io::reactor_timers handle(pool);
  CHECK(&handle.queue() == own);
}

TEST_CASE("reactor_options::timers = false leaves timers out, and the error names the option") {
  executor pool(canopy::io::with_reactor(two_workers(), {.timers = false}));
  CHECK(canopy::io::reactor::of(pool).own_timers() == nullptr);
  const std::string message = sleep_error(pool);
  CHECK(message.find("reactor_options::timers") != std::string::npos);
  CHECK(message.find("reactor_timers") != std::string::npos);
  // Adding them later still works.
  canopy::io::reactor_timers timers(pool);
  CHECK(sleep_error(pool).empty());
  CHECK(timers.queue().pending() == 0);
}

TEST_CASE("an executor without a reactor: the error names with_reactor and timer_thread") {
  executor pool(two_workers());
  const std::string message = sleep_error(pool);
  CHECK(message.find("with_reactor") != std::string::npos);
  CHECK(message.find("timer_thread") != std::string::npos);
}

TEST_CASE("a reactor drives one executor at a time; its timers follow it to the next") {
  const canopy::testing::watchdog guard("reactor reuse", 60);
  auto shared = std::make_shared<canopy::io::reactor>();
  executor_config config = two_workers();
  config.driver = shared;
  {
    executor first(config);
    CHECK(shared->own_timers() != nullptr);
    CHECK_THROWS_AS(executor{config}, std::logic_error);
    CHECK(sleep_error(first).empty());
  }
  CHECK(shared->own_timers() == nullptr);  // unbound when the executor shut down
  executor second(config);
  CHECK(shared->own_timers() != nullptr);
  CHECK(sleep_error(second).empty());
}

TEST_CASE("tasks still sleeping at shutdown are destroyed before the reactor's timers go") {
  const canopy::testing::watchdog guard("timers at shutdown", 60);
  std::atomic<int> destroyed{0};
  const int sleepers = 20;
  {
    executor pool(canopy::io::with_reactor(two_workers()));
    for (int index = 0; index < sleepers; ++index) {
      pool.spawn_detached([](std::atomic<int>& count) -> task<void> {
        const canopy::testing::destroy_flag flag(count);
        co_await canopy::sleep_for(1h);
      }(destroyed));
    }
    canopy::io::detail::timer_queue* const own = canopy::io::reactor::of(pool).own_timers();
    REQUIRE(own != nullptr);
    REQUIRE(canopy::testing::eventually([&] { return own->pending() == sleepers; }));
  }  // ~executor: the sleepers disarm their timers while the queue lives
  CHECK(destroyed.load() == sleepers);
}

TEST_CASE("with_timeout on a join handle (moved in or an lvalue) and on an async_event") {
  const canopy::testing::watchdog guard("with_timeout awaitables", 60);
  executor pool(canopy::io::with_reactor(two_workers()));
  // A handle moved in whose task ends within the time: its value.
  const int quick = canopy::block_on(pool, []() -> task<int> {
    auto handle = canopy::spawn([]() -> task<int> { co_return 5; }());
    auto result = co_await canopy::with_timeout(10s, std::move(handle));
    co_return result.has_value() ? *result : -1;
  }());
  CHECK(quick == 5);
  // An lvalue handle is consumed, as by co_await; at the deadline its task
  // is cancelled, and with_timeout returns after that task's frame is gone.
  struct on_destroy {
    std::atomic<bool>* flag;
    ~on_destroy() { flag->store(true); }
  };
  std::atomic<bool> destroyed{false};
  canopy::async_event never;
  const bool timed_out = canopy::block_on(
      pool, [](std::atomic<bool>* gone, canopy::async_event* gate) -> task<bool> {
        auto handle = canopy::spawn([](std::atomic<bool>* flag, canopy::async_event* wait) -> task<int> {
          const on_destroy guard{flag};
          co_await *wait;
          co_return 7;
        }(gone, gate));
        auto result = co_await canopy::with_timeout(5ms, handle);
        co_return !result.has_value() && result.error() == canopy::io::errc::timed_out &&
            !handle.valid() && gone->load();
      }(&destroyed, &never));
  CHECK(timed_out);
  // The same with a task that has surely started (running elsewhere, so
  // the await is a join wait, not a take-over of an unstarted task): the
  // borrowed handle is consumed when the cancelled await is destroyed.
  for (int round = 0; round < 20; ++round) {
    std::atomic<bool> ended{false};
    canopy::async_event started;
    canopy::async_event blocked;
    const bool consumed = canopy::block_on(
        pool,
        [](std::atomic<bool>* gone, canopy::async_event* running,
           canopy::async_event* wait) -> task<bool> {
          auto handle = canopy::spawn(
              [](std::atomic<bool>* flag, canopy::async_event* run,
                 canopy::async_event* gate) -> task<int> {
                const on_destroy guard{flag};
                run->set();
                co_await *gate;
                co_return 7;
              }(gone, running, wait));
          co_await *running;
          auto result = co_await canopy::with_timeout(2ms, handle);
          co_return !result.has_value() && !handle.valid() && gone->load();
        }(&ended, &started, &blocked));
    CHECK(consumed);
  }
  // An async_event: timed out while unset, at once once set.
  canopy::async_event event;
  const bool unset_timed_out = canopy::block_on(pool, [](canopy::async_event* waited) -> task<bool> {
    auto result = co_await canopy::with_timeout(5ms, *waited);
    co_return !result.has_value();
  }(&event));
  CHECK(unset_timed_out);
  event.set();
  const bool set_ready = canopy::block_on(pool, [](canopy::async_event* waited) -> task<bool> {
    auto result = co_await canopy::with_timeout(10s, *waited);
    co_return result.has_value();
  }(&event));
  CHECK(set_ready);
}
