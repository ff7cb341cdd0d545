// Stress tests that would catch a lost wakeup or a task running twice.
//
// * park -> wake cycles: every worker asleep, one task scheduled from a
//   thread the executor does not own; it must run. A lost wakeup shows up as
//   a watchdog timeout, never as a hang.
// * schedule vs. finish: one task woken 10^6 times while it runs must never
//   run concurrently with itself, must run at most once per wake (+1), and
//   the last wake must be followed by a run that sees it.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "executor/core_access.hpp"
#include "executor/executor.hpp"
#include "tests/watchdog.hpp"

using canopy::executor;
using canopy::executor_config;

namespace {

executor_config stress_config(std::size_t workers, std::uint32_t yield_rounds) {
  executor_config config;
  config.worker_count = workers;
  config.idle_yield_rounds = yield_rounds;
  return config;
}

void wait_until_all_asleep(executor& pool) {
  const auto workers = static_cast<std::uint32_t>(pool.worker_count());
  while (canopy::detail::core_of(pool).sleep().counters().sleeping() != workers) {
    std::this_thread::yield();
  }
}

// Waits until every worker is counted asleep and at least one more worker
// has reached the point of blocking (its park is counted just before the
// futex wait) since `parks_seen`; returns the new park count.
std::uint64_t wait_until_parked_again(executor& pool, std::uint64_t parks_seen) {
  const auto workers = static_cast<std::uint32_t>(pool.worker_count());
  for (;;) {
    if (canopy::detail::core_of(pool).sleep().counters().sleeping() == workers) {
      const std::uint64_t parks = pool.stats().total().parks;
      if (parks > parks_seen) {
        return parks;
      }
    }
    std::this_thread::yield();
  }
}

// Runs `cycles` park->wake cycles on `pool`; returns the parks it observed.
std::uint64_t park_wake_cycles(executor& pool, long cycles) {
  std::atomic<std::uint32_t> done{0};
  std::uint64_t parks_seen = 0;
  for (long cycle = 0; cycle < cycles; ++cycle) {
    parks_seen = wait_until_parked_again(pool, parks_seen);
    done.store(0, std::memory_order_relaxed);
    pool.spawn_detached([&done] {
      done.store(1, std::memory_order_release);
      done.notify_one();
    });
    done.wait(0, std::memory_order_acquire);
  }
  pool.shutdown();  // joins the workers, so every park they made is counted
  return pool.stats().total().parks;
}

// A task body for the schedule-vs-finish race: counts runs, detects
// overlapping runs, and records the newest wake it has seen.
struct race_body {
  std::atomic<int>* in_run;
  std::atomic<long>* runs;
  std::atomic<long>* overlaps;
  std::atomic<long>* published;
  std::atomic<long>* observed;
  std::atomic<bool>* finish;

  static canopy::detail::run_outcome run(void* storage) {
    auto& self = *static_cast<race_body*>(storage);
    if (self.in_run->exchange(1, std::memory_order_acq_rel) != 0) {
      self.overlaps->fetch_add(1);
    }
    self.runs->fetch_add(1, std::memory_order_relaxed);
    // Stay in the run a little, so that many wakes land while EXECUTING.
    for (int spin = 0; spin < 64; ++spin) {
      canopy::detail::atomics::spin_pause();
    }
    const long seen = self.published->load(std::memory_order_acquire);
    if (seen > self.observed->load(std::memory_order_relaxed)) {
      self.observed->store(seen, std::memory_order_release);
    }
    const bool last = self.finish->load(std::memory_order_acquire);
    self.in_run->store(0, std::memory_order_release);
    return last ? canopy::detail::run_outcome::completed : canopy::detail::run_outcome::suspended;
  }
  static void destroy(void* /*storage*/, canopy::detail::task_end /*end*/) noexcept {}
  static constexpr canopy::detail::task_vtable table{&run, &destroy};
};

}  // namespace

TEST_CASE("park -> wake cycles: a task scheduled while every worker sleeps always runs") {
  canopy::testing::watchdog guard("park/wake cycles", 600);
  // 10^6 cycles in total across the pools below in the plain build; two pools
  // run concurrently so both cores are used.
  const long total_cycles = 1000000 / canopy::testing::stress_divisor();
  const std::size_t pool_sizes[] = {1, 2};
  std::vector<std::thread> drivers;
  std::atomic<std::uint64_t> parks{0};
  for (const std::size_t workers : pool_sizes) {
    drivers.emplace_back([&, workers] {
      executor pool(stress_config(workers, 0));
      parks.fetch_add(park_wake_cycles(pool, total_cycles / 2));
    });
  }
  for (auto& driver : drivers) {
    driver.join();
  }
  // Every cycle parked at least one worker (all were asleep before the spawn).
  CHECK(parks.load() >= static_cast<std::uint64_t>(total_cycles));
  MESSAGE("park->wake cycles: " << total_cycles << ", parks observed: " << parks.load());
}

TEST_CASE("park -> wake with progressive-sleep rounds and several outside threads") {
  canopy::testing::watchdog guard("outside spawners", 300);
  executor pool(stress_config(3, 32));
  const long per_thread = 20000 / canopy::testing::stress_divisor();
  std::atomic<long> ran{0};
  std::vector<std::thread> spawners;
  for (int thread = 0; thread < 3; ++thread) {
    spawners.emplace_back([&] {
      for (long index = 0; index < per_thread; ++index) {
        auto handle = pool.spawn([&] { ran.fetch_add(1); });
        if (index % 64 == 0) {
          handle.get();  // sometimes wait, so the pool goes idle in between
        }
      }
    });
  }
  for (auto& spawner : spawners) {
    spawner.join();
  }
  pool.shutdown();  // drain: every detached-by-drop task still runs
  CHECK(ran.load() == 3 * per_thread);
  CHECK(pool.stats().dropped_tasks == 0);
}

TEST_CASE("schedule vs. finish: a task woken while running runs once more, never twice at once") {
  canopy::testing::watchdog guard("schedule vs finish", 600);
  executor pool(stress_config(2, 8));
  std::atomic<int> in_run{0};
  std::atomic<long> runs{0};
  std::atomic<long> overlaps{0};
  std::atomic<long> published{0};
  std::atomic<long> observed{0};
  std::atomic<bool> finish{false};
  race_body body{&in_run, &runs, &overlaps, &published, &observed, &finish};
  canopy::detail::task_id id;
  const canopy::detail::spawn_status status = pool.core().spawn_body(
      &race_body::table,
      [](void* storage, void* context) {
        new (storage) race_body(*static_cast<race_body*>(context));
      },
      &body, canopy::detail::spawn_mode::fail, &id);
  REQUIRE(status == canopy::detail::spawn_status::spawned);

  const long wakes_per_thread = 500000 / canopy::testing::stress_divisor();
  std::vector<std::thread> wakers;
  for (int thread = 0; thread < 2; ++thread) {
    wakers.emplace_back([&] {
      for (long wake = 0; wake < wakes_per_thread; ++wake) {
        published.fetch_add(1, std::memory_order_release);
        pool.core().schedule(id);
      }
    });
  }
  for (auto& waker : wakers) {
    waker.join();
  }
  const long total_wakes = 2 * wakes_per_thread;
  // The last wake happened after the last publish: some run must see it.
  while (observed.load(std::memory_order_acquire) != total_wakes) {
    std::this_thread::yield();
  }
  CHECK(overlaps.load() == 0);
  CHECK(runs.load() >= 1);
  CHECK(runs.load() <= total_wakes + 1);
  MESSAGE("wakes: " << total_wakes << ", runs: " << runs.load());

  // Finish it: the run that sees `finish` completes and frees the slot; a
  // wake after that is a harmless no-op thanks to the generation.
  const long runs_before = runs.load();
  finish.store(true, std::memory_order_release);
  CHECK(pool.core().schedule(id));
  while (runs.load() == runs_before) {
    std::this_thread::yield();
  }
  wait_until_all_asleep(pool);
  CHECK_FALSE(pool.core().schedule(id));  // stale: the task completed
  const long final_runs = runs.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(runs.load() == final_runs);
  CHECK(overlaps.load() == 0);
}

TEST_CASE("permits do not pile up while every worker is busy") {
  canopy::testing::watchdog guard("permit pile-up", 60);
  executor pool(stress_config(2, 4));
  std::atomic<bool> release{false};
  std::atomic<int> started{0};
  for (int index = 0; index < 2; ++index) {
    pool.spawn_detached([&] {
      started.fetch_add(1);
      while (!release.load()) {
        std::this_thread::yield();
      }
    });
  }
  while (started.load() != 2) {
    std::this_thread::yield();
  }
  // Both workers are busy; spawn into many leaves (each leaf activation is a
  // root 0 -> 1 transition) — no permit may be created for nobody.
  std::atomic<int> ran{0};
  for (int index = 0; index < 20000; ++index) {
    pool.spawn_detached([&] { ran.fetch_add(1); });
  }
  const auto permits = canopy::detail::core_of(pool).tree().permits().load();
  CHECK(permits.permits <= permits.sleepers);
  CHECK(permits.permits == 0);
  release.store(true);
  pool.shutdown();
  CHECK(ran.load() == 20000);
}
