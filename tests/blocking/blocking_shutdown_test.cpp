// Storms of blocking-pool shutdowns and cancels racing the pool's threads
// (include/canopy/blocking.hpp): with every thread of a pool busy and calls
// queued behind them, the executor's shutdown (through an attached pool's
// destructor, or the executor's own with the process-default pool) and
// cancelling the tasks whose calls wait must never let a queued call start,
// even though the running calls end, and free their threads, as soon as
// their stop is requested. Its own binary: the default-pool storm fills the
// process-wide pool's threads.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <canopy/blocking.hpp>
#include <canopy/fiber.hpp>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <stop_token>
#include <thread>
#include <vector>

#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

using canopy::blocking_pool;
using canopy::blocking_pool_config;
using canopy::executor;
using canopy::task;
using canopy::join_handle;
using canopy::testing::config_with;
using canopy::testing::eventually;
using canopy::testing::stress_divisor;
using canopy::testing::watchdog;

namespace {

constexpr int running_calls = 2;
constexpr int queued_calls = 38;

// eventually(), polling without sleeping: a storm waits thousands of times
// for steps that take microseconds.
template <class Predicate>
bool soon(Predicate predicate) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration<double>(10 * canopy::testing::timeout_scale());
  while (!predicate()) {
    if (std::chrono::steady_clock::now() > deadline) {
      return predicate();
    }
    std::this_thread::yield();
  }
  return true;
}

long storm_rounds() { return std::max(1000 / stress_divisor(), 20L); }

struct storm_counts {
  std::atomic<int> running_started{0};
  std::atomic<int> queued_started{0};
};

// Holds its pool thread until its stop is requested (its task destroyed or
// cancelled), then frees the thread at once: the moment a freed thread could
// take a queued call.
int hold_until_stop(std::stop_token stop) {
  std::mutex mutex;
  std::condition_variable_any stopped;
  std::unique_lock lock(mutex);
  stopped.wait(lock, stop, [] { return false; });
  return 1;
}

task<int> held_call(storm_counts& counts) {
  co_return co_await canopy::run_blocking([&counts](std::stop_token stop) {
    counts.running_started.fetch_add(1);
    return hold_until_stop(std::move(stop));
  });
}

task<int> queued_call(storm_counts& counts) {
  co_return co_await canopy::run_blocking([&counts] {
    counts.queued_started.fetch_add(1);
    return 2;
  });
}

// The queued calls: every fourth from a fiber, the rest from coroutine tasks.
void spawn_queued(executor& pool, storm_counts& counts, std::vector<join_handle<int>>& handles) {
  for (int index = 0; index < queued_calls; ++index) {
    if (index % 4 == 3) {
      handles.push_back(pool.spawn(canopy::fiber([&counts] {
        return canopy::this_fiber::run_blocking([&counts] {
          counts.queued_started.fetch_add(1);
          return 2;
        });
      })));
    } else {
      handles.push_back(pool.spawn(queued_call(counts)));
    }
  }
}

int count_cancelled(std::vector<join_handle<int>>& handles) {
  int cancelled = 0;
  for (auto& handle : handles) {
    try {
      (void)handle.get();
    } catch (const canopy::task_cancelled&) {
      ++cancelled;
    }
  }
  return cancelled;
}

// The default-pool storm's long calls: they count themselves in and wait
// (without polling: hundreds of them) until the gate opens. Shared with the
// calls, so that a failed REQUIRE, which opens it on the way out, leaves
// them nothing freed to read.
struct gate {
  std::atomic<int> holding{0};
  std::atomic<bool> open{false};
  void release() {
    open.store(true);
    open.notify_all();
  }
};

struct release_on_exit {
  std::shared_ptr<gate> target;
  ~release_on_exit() { target->release(); }
};

task<int> held_until_open(std::shared_ptr<gate> release) {
  auto call = [release] {
    release->holding.fetch_add(1);
    release->open.wait(false);
    return 0;
  };
  co_return co_await canopy::run_blocking(std::move(call));
}

blocking_pool_config two_threads() {
  blocking_pool_config config;
  config.max_threads = running_calls;
  return config;
}

}  // namespace

TEST_CASE("an attached pool destroyed with calls running and queued: no queued call starts") {
  watchdog dog("blocking attached-pool shutdown storm", 120);
  const long rounds = storm_rounds();
  int queued_started = 0;
  int cancelled = 0;
  int rounds_with_leftovers = 0;
  for (long round = 0; round < rounds; ++round) {
    executor pool(config_with(2));
    auto blocking = std::make_unique<blocking_pool>(pool, two_threads());
    storm_counts counts;
    std::vector<join_handle<int>> handles;
    for (int index = 0; index < running_calls; ++index) {
      handles.push_back(pool.spawn(held_call(counts)));
    }
    REQUIRE(soon([&] { return counts.running_started.load() == running_calls; }));
    spawn_queued(pool, counts, handles);
    REQUIRE(soon([&] { return blocking->stats().queued == queued_calls; }));
    blocking->shutdown();  // the executor's shutdown first, then the pool's
    const auto stats = blocking->stats();
    if (stats.completed != running_calls || stats.dropped != queued_calls || stats.threads != 0) {
      ++rounds_with_leftovers;
    }
    blocking.reset();
    queued_started += counts.queued_started.load();
    cancelled += count_cancelled(handles);
  }
  MESSAGE(rounds << " shutdowns: " << queued_started << " queued bodies started");
  CHECK(queued_started == 0);
  CHECK(cancelled == rounds * (running_calls + queued_calls));
  CHECK(rounds_with_leftovers == 0);
}

TEST_CASE("an executor shut down with calls queued in the default pool: none starts") {
  watchdog dog("blocking default-pool shutdown storm", 120);
  blocking_pool& shared = blocking_pool::process_default();
  // Fill all but two of the default pool's threads for the whole storm, from
  // an executor that is not shut down: each round's executor then has two
  // threads to itself, and its further calls queue behind them.
  const auto holders = static_cast<int>(shared.config().max_threads) - running_calls;
  executor holder_pool(config_with(1));
  const auto release = std::make_shared<gate>();
  const release_on_exit open_at_exit{release};
  std::vector<join_handle<int>> holder_handles;
  for (int index = 0; index < holders; ++index) {
    holder_handles.push_back(holder_pool.spawn(held_until_open(release)));
  }
  REQUIRE(eventually([&] { return release->holding.load() == holders; }, 60));

  const long rounds = storm_rounds();
  int queued_started = 0;
  int cancelled = 0;
  for (long round = 0; round < rounds; ++round) {
    storm_counts counts;
    std::vector<join_handle<int>> handles;
    {
      executor pool(config_with(2));
      for (int index = 0; index < running_calls; ++index) {
        handles.push_back(pool.spawn(held_call(counts)));
      }
      REQUIRE(soon([&] { return counts.running_started.load() == running_calls; }));
      spawn_queued(pool, counts, handles);
      REQUIRE(soon([&] { return shared.stats().queued == queued_calls; }));
      pool.shutdown();
    }
    // The freed threads go through this round's queued calls (dropping
    // them) before the next round fills the queue again.
    REQUIRE(soon([&] {
      const auto stats = shared.stats();
      return stats.queued == 0 && stats.running == static_cast<std::size_t>(holders);
    }));
    queued_started += counts.queued_started.load();
    cancelled += count_cancelled(handles);
  }
  MESSAGE(rounds << " shutdowns: " << queued_started << " queued bodies started");
  CHECK(queued_started == 0);
  CHECK(cancelled == rounds * (running_calls + queued_calls));

  release->release();
  for (auto& handle : holder_handles) {
    CHECK(handle.get() == 0);
  }
}

TEST_CASE("tasks cancelled while their calls are queued: no queued call starts") {
  watchdog dog("blocking cancel storm", 120);
  executor pool(config_with(2));
  blocking_pool blocking(pool, two_threads());
  const long rounds = storm_rounds();
  int queued_started = 0;
  int cancelled = 0;
  for (long round = 0; round < rounds; ++round) {
    storm_counts counts;
    std::vector<join_handle<int>> held;
    std::vector<join_handle<int>> queued;
    for (int index = 0; index < running_calls; ++index) {
      held.push_back(pool.spawn(held_call(counts)));
    }
    REQUIRE(soon([&] { return counts.running_started.load() == running_calls; }));
    spawn_queued(pool, counts, queued);
    REQUIRE(soon([&] { return blocking.stats().queued == queued_calls; }));
    for (auto& handle : queued) {
      CHECK(handle.cancel());
    }
    // Their cancels took effect (the tasks are destroyed); now free the
    // threads: each cancel requests its call's stop, which ends it at once.
    cancelled += count_cancelled(queued);
    for (auto& handle : held) {
      CHECK(handle.cancel());
    }
    cancelled += count_cancelled(held);
    REQUIRE(soon([&] {
      const auto stats = blocking.stats();
      return stats.queued == 0 && stats.running == 0;
    }));
    queued_started += counts.queued_started.load();
  }
  MESSAGE(rounds << " rounds: " << queued_started << " queued bodies started");
  CHECK(queued_started == 0);
  CHECK(cancelled == rounds * (running_calls + queued_calls));
  const auto stats = blocking.stats();
  CHECK(stats.completed == static_cast<std::uint64_t>(rounds * running_calls));
  CHECK(stats.dropped == static_cast<std::uint64_t>(rounds * queued_calls));
}

TEST_CASE("run_blocking in a task still running once its executor's shutdown began: shut_down") {
  watchdog dog("blocking refused at shutdown", 60);
  for (const auto policy :
       {canopy::shutdown_policy::drain, canopy::shutdown_policy::cancel_pending}) {
    CAPTURE(static_cast<int>(policy));
    auto config = config_with(1);
    config.on_shutdown = policy;
    executor pool(config);
    blocking_pool blocking(pool, two_threads());
    std::atomic<bool> go{false};
    std::atomic<bool> spinning{false};
    std::atomic<int> ran{0};
    auto late = [&]() -> task<int> {
      spinning = true;
      // Still in its first run when the shutdown begins (a run ends only
      // when the task suspends or returns).
      while (!go.load()) {
        std::this_thread::yield();
      }
      try {
        co_await canopy::run_blocking([&] { ran.fetch_add(1); });
      } catch (const std::system_error& error) {
        co_return error.code() == canopy::errc::shut_down ? 1 : 2;
      }
      co_return 0;
    };
    auto handle = pool.spawn(late());
    REQUIRE(soon([&] { return spinning.load(); }));
    // Lets the task go on once a spawn is refused: the shutdown began.
    std::thread opener([&] {
      soon([&] {
        try {
          pool.spawn([] {});
          return false;
        } catch (const canopy::spawn_error&) {
          return true;
        }
      });
      go = true;
    });
    pool.shutdown();
    opener.join();
    CHECK(handle.get() == 1);
    CHECK(ran.load() == 0);
  }
}
