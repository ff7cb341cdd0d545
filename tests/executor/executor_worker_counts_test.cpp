// The core behaviours on every executor configuration: 0 workers (host
// driven: join() drives the executor on the joining thread, run_until_idle
// elsewhere), 1 worker, and several (2 and 4). Each TEST_CASE_TEMPLATE runs
// once per size:
//   spawn and join   callables, coroutines (with children), fibers
//   wake             a coroutine woken through current_waker() from a thread
//                    of its own
//   shutdown         suspended coroutines and fibers are destroyed (their
//                    destructors run), their handles throw task_cancelled
//   cancel           a suspended coroutine or fiber is destroyed at once
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <vector>

#include "coroutine/coroutine.hpp"
#include "fiber/fiber.hpp"
#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

using canopy::async_event;
using canopy::executor;
using canopy::task;
using canopy::testing::config_with;
using canopy::testing::destroy_flag;
using canopy::testing::eventually;
using canopy::testing::watchdog;

// 0: host-driven (worker_count = 0); then 1, 2 and 4 owned workers.
#define CANOPY_POOL_SIZES                                                         \
  std::integral_constant<std::size_t, 0>, std::integral_constant<std::size_t, 1>, \
      std::integral_constant<std::size_t, 2>, std::integral_constant<std::size_t, 4>

namespace {

// Bounded wait for `predicate`; on a host-driven executor the waiting thread
// runs what is ready between checks (nothing else would run it).
template <class Predicate>
bool settles(executor& pool, Predicate predicate) {
  return eventually([&] {
    if (pool.worker_count() == 0) {
      pool.run_until_idle();
    }
    return predicate();
  });
}

task<long> fib(int n) {
  if (n < 2) {
    co_return n;
  }
  auto left = canopy::spawn(fib(n - 1));
  auto right = canopy::spawn(fib(n - 2));
  co_return co_await left + co_await right;
}

}  // namespace

TEST_CASE_TEMPLATE("spawn and join: callables, coroutines and their children, fibers", workers_t,
                   CANOPY_POOL_SIZES) {
  watchdog guard("core spawn/join", 60);
  executor pool(config_with(workers_t::value));
  CHECK(pool.worker_count() == workers_t::value);
  std::vector<canopy::join_handle<int>> callables;
  for (int index = 0; index < 200; ++index) {
    callables.push_back(pool.spawn([index] { return index; }));
  }
  long sum = 0;
  for (auto& handle : callables) {
    sum += handle.get();
  }
  CHECK(sum == 199L * 200L / 2);
  CHECK_THROWS_WITH_AS(
      pool.spawn([]() -> int { throw std::runtime_error("callable failed"); }).get(),
      "callable failed", std::runtime_error);

  // A coroutine that spawns children and awaits them.
  CHECK(pool.spawn(fib(12)).get() == 144);
  auto failing = [&]() -> task<int> {
    co_await canopy::yield_now();
    throw std::runtime_error("coroutine failed");
  };
  CHECK_THROWS_WITH_AS(pool.spawn(failing()).get(), "coroutine failed", std::runtime_error);

  auto fiber = pool.spawn(canopy::fiber([] {
    canopy::this_fiber::yield();
    return 5;
  }));
  CHECK(fiber.get() == 5);

  if (workers_t::value == 0) {
    // Host-driven: the joiner ran them, on this thread.
    const auto here = std::this_thread::get_id();
    CHECK(pool.spawn([] { return std::this_thread::get_id(); }).get() == here);
    CHECK(pool.stats().host.tasks_run > 0);
  }
  CHECK(settles(pool, [&] { return pool.stats().live_tasks == 0; }));
}

TEST_CASE_TEMPLATE("a coroutine woken through current_waker() from another thread", workers_t,
                   CANOPY_POOL_SIZES) {
  watchdog guard("core wake", 60);
  executor pool(config_with(workers_t::value));
  std::atomic<bool> flag{false};
  std::atomic<bool> published{false};
  canopy::waker stored;
  auto parker = [&]() -> task<int> {
    stored = canopy::current_waker();
    published.store(true);
    int resumes = 0;
    while (!flag.load()) {
      co_await canopy::wait_for_wake();
      ++resumes;
    }
    co_return resumes;
  };
  auto handle = pool.spawn(parker());
  std::atomic<bool> woke{false};
  // With 0 workers the task first runs inside get() below: the waker's
  // thread waits for it (bounded) and wakes it while the joiner waits.
  std::thread waker_thread([&] {
    const bool seen = eventually([&] { return published.load(); });
    flag.store(true);
    woke.store(seen && stored.wake());
  });
  CHECK(handle.get() >= 1);
  waker_thread.join();
  CHECK(woke.load());
  // The task is over: its waker goes stale (at once, or once the worker has
  // retired the slot).
  CHECK(settles(pool, [&] { return !stored.wake(); }));
}

TEST_CASE_TEMPLATE("shutdown destroys suspended coroutines and fibers; handles say cancelled",
                   workers_t, CANOPY_POOL_SIZES) {
  watchdog guard("core shutdown", 60);
  executor pool(config_with(workers_t::value));
  async_event never;
  constexpr int coroutines = 8;
  constexpr int fibers = 2;
  std::atomic<int> started{0};
  std::atomic<int> destroyed{0};
  auto waiter = [&]() -> task<void> {
    destroy_flag flag(destroyed);
    started.fetch_add(1);
    co_await never;
  };
  std::vector<canopy::join_handle<void>> handles;
  for (int index = 0; index < coroutines; ++index) {
    handles.push_back(pool.spawn(waiter()));
  }
  for (int index = 0; index < fibers; ++index) {
    handles.push_back(pool.spawn(canopy::fiber([&] {
      destroy_flag flag(destroyed);
      started.fetch_add(1);
      canopy::this_fiber::await(never);
    })));
  }
  REQUIRE(settles(pool, [&] { return started.load() == coroutines + fibers; }));
  CHECK(destroyed.load() == 0);
  pool.shutdown();
  CHECK(destroyed.load() == coroutines + fibers);
  for (auto& handle : handles) {
    CHECK_THROWS_AS(handle.get(), canopy::task_cancelled);
  }
  CHECK(pool.stats().dropped_tasks == coroutines + fibers);
  CHECK(pool.stats().live_tasks == 0);
  CHECK_THROWS_AS(pool.spawn([] { return 1; }), canopy::spawn_error);
}

TEST_CASE_TEMPLATE("cancel destroys a suspended coroutine or fiber at once", workers_t,
                   CANOPY_POOL_SIZES) {
  watchdog guard("core cancel", 60);
  executor pool(config_with(workers_t::value));
  async_event never;
  std::atomic<int> started{0};
  std::atomic<int> destroyed{0};
  auto waiter = [&]() -> task<int> {
    destroy_flag flag(destroyed);
    started.fetch_add(1);
    co_await never;
    co_return 1;
  };
  auto coroutine = pool.spawn(waiter());
  auto fiber = pool.spawn(canopy::fiber([&] {
    destroy_flag flag(destroyed);
    started.fetch_add(1);
    canopy::this_fiber::await(never);
    return 2;
  }));
  REQUIRE(settles(pool, [&] { return started.load() == 2; }));
  CHECK(coroutine.cancel());
  CHECK(fiber.cancel());
  CHECK_THROWS_AS(coroutine.get(), canopy::task_cancelled);
  CHECK_THROWS_AS(fiber.get(), canopy::task_cancelled);
  CHECK(settles(pool, [&] { return destroyed.load() == 2; }));
  CHECK(settles(pool, [&] { return pool.stats().live_tasks == 0; }));
  CHECK_FALSE(never.is_set());  // nothing but the cancel ended them
  // The executor goes on: a new task runs and joins.
  CHECK(pool.spawn([] { return 3; }).get() == 3);
}
