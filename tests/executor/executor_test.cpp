// executor: spawning, joining, errors, shutdown policies, capacity, stats.
#include "executor/executor.hpp"

#include <doctest/doctest.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <latch>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "executor/core_access.hpp"
#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"
#include "tests/worker_gate.hpp"

using canopy::executor;
using canopy::executor_config;

namespace {

executor_config small_config(std::size_t workers) {
  executor_config config;
  config.worker_count = workers;
  config.idle_yield_rounds = 4;
  return config;
}

// Blocks until `count` arrivals; tasks use it to prove they ran.
class countdown {
 public:
  explicit countdown(long count) : remaining_(count) {}
  void arrive() {
    const std::lock_guard lock(mutex_);
    if (--remaining_ == 0) {
      cv_.notify_all();
    }
  }
  void wait() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [this] { return remaining_ <= 0; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  long remaining_;
};

}  // namespace

TEST_CASE_TEMPLATE_DEFINE("spawn and join return values on every pool size", workers_t,
                          spawn_join_sizes) {
  canopy::testing::watchdog guard("spawn and join", 60);
  executor pool(small_config(workers_t::value));
  std::vector<canopy::join_handle<int>> handles;
  for (int index = 0; index < 1000; ++index) {
    handles.push_back(pool.spawn([index] { return index * 2; }));
  }
  long sum = 0;
  for (auto& handle : handles) {
    sum += handle.get();
  }
  CHECK(sum == 999L * 1000L);
}
TEST_CASE_TEMPLATE_INVOKE(spawn_join_sizes, std::integral_constant<std::size_t, 1>,
                          std::integral_constant<std::size_t, 2>,
                          std::integral_constant<std::size_t, 4>);

TEST_CASE("join rethrows the task's exception") {
  canopy::testing::watchdog guard("join rethrows", 30);
  executor pool(small_config(2));
  auto handle = pool.spawn([]() -> int { throw std::runtime_error("task failed on purpose"); });
  CHECK_THROWS_WITH_AS(handle.get(), "task failed on purpose", std::runtime_error);
}

TEST_CASE("void tasks and detached tasks run") {
  canopy::testing::watchdog guard("void and detached", 30);
  executor pool(small_config(2));
  std::atomic<int> ran{0};
  auto handle = pool.spawn([&] { ran.fetch_add(1); });
  handle.get();
  countdown done(100);
  for (int index = 0; index < 100; ++index) {
    pool.spawn_detached([&] {
      ran.fetch_add(1);
      done.arrive();
    });
  }
  done.wait();
  CHECK(ran.load() == 101);
}

TEST_CASE("tasks spawned from inside tasks run, on the spawning worker's partition") {
  canopy::testing::watchdog guard("nested spawn", 30);
  executor pool(small_config(2));
  std::atomic<int> children{0};
  countdown done(1000);
  pool.spawn_detached([&] {
    for (int index = 0; index < 1000; ++index) {
      pool.spawn_detached([&] {
        children.fetch_add(1);
        done.arrive();
      });
    }
  });
  done.wait();
  CHECK(children.load() == 1000);
}

TEST_CASE("spawn after shutdown is a clear error") {
  executor pool(small_config(2));
  pool.shutdown();
  CHECK_THROWS_AS(pool.spawn([] { return 1; }), canopy::spawn_error);
  try {
    pool.spawn_detached([] {});
    FAIL("spawn after shutdown did not throw");
  } catch (const canopy::spawn_error& error) {
    CHECK(error.code() == canopy::errc::shut_down);
    CHECK(std::string(error.what()).find("shut down") != std::string::npos);
  }
  auto attempt = pool.try_spawn([] { return 1; });
  CHECK_FALSE(attempt);
  CHECK(attempt.error == canopy::errc::shut_down);
  pool.shutdown();  // idempotent
}

TEST_CASE("invalid configurations are rejected at construction with a named field") {
  const auto rejects = [](executor_config config, const std::string& field) {
    try {
      executor pool(std::move(config));
      FAIL("configuration was accepted");
    } catch (const std::invalid_argument& error) {
      CHECK(std::string(error.what()).find(field) != std::string::npos);
    }
  };
  executor_config config;
  config.worker_count = static_cast<std::size_t>(-1);  // "negative" after conversion
  rejects(config, "worker_count");
  config = executor_config{};
  config.worker_count = 2;
  config.max_leaves = 0;
  rejects(config, "max_leaves");
  config.max_leaves = std::size_t{1} << 40;
  rejects(config, "max_leaves");
  config.max_leaves = 1;  // fewer leaves than workers
  rejects(config, "max_leaves");
  config = executor_config{};
  config.worker_count = 2;
  config.signals_per_leaf = 3;
  rejects(config, "signals_per_leaf");
  config.signals_per_leaf = 128;
  rejects(config, "signals_per_leaf");
  config = executor_config{};
  config.worker_count = 2;
  config.initial_leaves = 5000;
  rejects(config, "initial_leaves");
}

TEST_CASE("an unknown shutdown policy is rejected at construction, naming on_shutdown") {
  executor_config config = small_config(1);
  config.on_shutdown = static_cast<canopy::shutdown_policy>(7);
  CHECK_THROWS_WITH_AS(executor{config}, doctest::Contains("on_shutdown"), std::invalid_argument);
}

TEST_CASE("a throwing copy of the callable reaches the spawner and leaks nothing") {
  struct throws_on_copy {
    throws_on_copy() = default;
    throws_on_copy(const throws_on_copy& /*other*/) { throw std::runtime_error("copy failed"); }
    int operator()() const { return 1; }
  };
  executor pool(small_config(1));
  const throws_on_copy callable;
  for (int attempt = 0; attempt < 10; ++attempt) {
    // LeakSanitizer found 72 B per spawn before issue 19's fix.
    CHECK_THROWS_WITH(pool.spawn(callable), "copy failed");
    CHECK_THROWS_WITH(static_cast<void>(pool.try_spawn(callable)), "copy failed");
  }
  CHECK(pool.stats().live_tasks == 0);
}

TEST_CASE("try_spawn at capacity returns at_capacity; spawn blocks until a slot frees") {
  canopy::testing::watchdog guard("capacity", 60);
  executor_config config = small_config(1);
  config.signals_per_leaf = 1;  // 64 tasks a leaf
  config.max_leaves = 1;        // capacity: 64 tasks
  executor pool(config);
  std::mutex gate_mutex;
  std::condition_variable gate_cv;
  bool open = false;
  std::atomic<int> ran{0};
  auto blocked_task = [&] {
    std::unique_lock lock(gate_mutex);
    gate_cv.wait(lock, [&] { return open; });
    ran.fetch_add(1);
  };
  std::vector<canopy::join_handle<void>> handles;
  for (int index = 0; index < 64; ++index) {
    auto attempt = pool.try_spawn(blocked_task);
    REQUIRE(attempt);
    handles.push_back(std::move(attempt.handle));
  }
  auto full = pool.try_spawn(blocked_task);
  CHECK_FALSE(full);
  CHECK(full.error == canopy::errc::at_capacity);

  // A blocking spawn waits; it completes once the gate opens and slots free.
  std::atomic<bool> spawned{false};
  std::thread spawner([&] {
    pool.spawn([&] { ran.fetch_add(1); }).get();
    spawned.store(true);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK_FALSE(spawned.load());
  {
    const std::lock_guard lock(gate_mutex);
    open = true;
  }
  gate_cv.notify_all();
  spawner.join();
  for (auto& handle : handles) {
    handle.get();
  }
  CHECK(spawned.load());
  CHECK(ran.load() == 65);
}

TEST_CASE("cancel before start: the task never runs and join reports cancelled") {
  canopy::testing::watchdog guard("cancel", 30);
  executor pool(small_config(1));
  canopy::testing::worker_gate busy(pool, 1);  // the only worker is now busy
  std::atomic<bool> ran{false};
  auto victim = pool.spawn([&] { ran.store(true); });
  CHECK(victim.cancel());
  busy.open();
  CHECK_THROWS_AS(victim.get(), canopy::task_cancelled);
  CHECK_FALSE(ran.load());
}

TEST_CASE("shutdown(drain) runs pending tasks and the tasks they spawn") {
  canopy::testing::watchdog guard("drain", 60);
  std::atomic<int> ran{0};
  {
    executor pool(small_config(2));
    for (int index = 0; index < 200; ++index) {
      pool.spawn_detached([&] {
        ran.fetch_add(1);
        pool.spawn_detached([&] { ran.fetch_add(1); });
      });
    }
    pool.shutdown();
    CHECK(pool.stats().dropped_tasks == 0);
  }
  CHECK(ran.load() == 400);
}

TEST_CASE("shutdown(cancel_pending) destroys unstarted tasks and runs their destructors") {
  canopy::testing::watchdog guard("cancel_pending", 60);
  struct tracked {
    std::atomic<int>* destroyed;
    std::atomic<int>* ran;
    bool owner = true;
    tracked(std::atomic<int>* d, std::atomic<int>* r) : destroyed(d), ran(r) {}
    tracked(tracked&& other) noexcept
        : destroyed(other.destroyed), ran(other.ran), owner(std::exchange(other.owner, false)) {}
    ~tracked() {
      if (owner) {
        destroyed->fetch_add(1);
      }
    }
    void operator()() const { ran->fetch_add(1); }
  };
  std::atomic<int> destroyed{0};
  std::atomic<int> ran{0};
  std::vector<canopy::join_handle<void>> handles;
  std::uint64_t dropped = 0;
  {
    executor_config config = small_config(1);
    config.on_shutdown = canopy::shutdown_policy::cancel_pending;
    executor pool(config);
    std::mutex gate_mutex;
    std::condition_variable gate_cv;
    bool open = false;
    std::latch started(1);
    pool.spawn_detached([&] {
      started.count_down();
      std::unique_lock lock(gate_mutex);
      gate_cv.wait(lock, [&] { return open; });
    });
    started.wait();
    for (int index = 0; index < 50; ++index) {
      handles.push_back(pool.spawn(tracked(&destroyed, &ran)));
    }
    std::thread opener([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      const std::lock_guard lock(gate_mutex);
      open = true;
      gate_cv.notify_all();
    });
    pool.shutdown();
    opener.join();
    dropped = pool.stats().dropped_tasks;
  }
  int cancelled = 0;
  for (auto& handle : handles) {
    try {
      handle.get();
    } catch (const canopy::task_cancelled&) {
      ++cancelled;
    }
  }
  CHECK(destroyed.load() == 50);        // every body's destructor ran
  CHECK(ran.load() + cancelled == 50);  // each either ran or was reported dropped
  CHECK(static_cast<int>(dropped) == cancelled);
  CHECK(cancelled > 0);
}

TEST_CASE("join from a worker thread is an error, not a deadlock") {
  canopy::testing::watchdog guard("join on worker", 30);
  executor pool(small_config(1));
  auto inner_error = pool.spawn([&]() -> std::string {
    auto inner = pool.spawn([] { return 1; });
    try {
      inner.get();
      return "no error";
    } catch (const std::system_error& error) {
      return error.code() == canopy::errc::worker_thread ? "worker_thread" : "other";
    }
  });
  CHECK(inner_error.get() == "worker_thread");
}

TEST_CASE("shutdown from a worker thread is an error") {
  canopy::testing::watchdog guard("shutdown on worker", 30);
  executor pool(small_config(2));
  auto result = pool.spawn([&]() -> bool {
    try {
      pool.shutdown();
      return false;
    } catch (const std::system_error& error) {
      return error.code() == canopy::errc::worker_thread;
    }
  });
  CHECK(result.get());
}

TEST_CASE("work spreads over all workers and they are asleep afterwards") {
  canopy::testing::watchdog guard("spread", 60);
  executor pool(small_config(4));
  countdown done(4000);
  for (int index = 0; index < 4000; ++index) {
    pool.spawn_detached([&] {
      const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
      while (std::chrono::steady_clock::now() < until) {
      }
      done.arrive();
    });
  }
  done.wait();
  // Idle workers park: wait (bounded) until all four are asleep. Only then
  // read the run counts: a worker counts a run after the task returns, so
  // right after the last task signalled, its run may not be counted yet;
  // once it has parked (a seq_cst step after the count) it is.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (pool.stats().sleeping_workers != 4 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const auto stats = pool.stats();
  CHECK(stats.sleeping_workers == 4);
  std::uint64_t total = 0;
  for (const auto& worker : stats.workers) {
    CHECK(worker.tasks_run > 0);
    total += worker.tasks_run;
  }
  CHECK(total == 4000);
}

TEST_CASE("slots recycled into a worker's reservation all come back to the arena") {
  canopy::testing::watchdog guard("slot recycling", 60);
  executor_config config = small_config(1);
  config.signals_per_leaf = 1;  // 64 tasks a leaf
  config.max_leaves = 1;        // capacity: 64 tasks
  executor pool(config);
  // A chain of 10,000 spawns, each from the task before: every finished
  // slot lies in the word the worker spawns from, so it is recycled.
  std::atomic<int> links{0};
  std::latch chain_done(1);
  std::function<void(int)> link = [&](int left) {
    links.fetch_add(1);
    if (left == 0) {
      chain_done.count_down();
      return;
    }
    pool.spawn_detached([&link, left] { link(left - 1); });
  };
  pool.spawn_detached([&link] { link(10000); });
  chain_done.wait();
  CHECK(links.load() == 10001);
  // Once the worker is out of work, its reservation is given back: all 64
  // slots can be taken from outside at once.
  REQUIRE(canopy::testing::eventually([&] { return pool.stats().sleeping_workers == 1; }));
  canopy::testing::worker_gate busy(pool, 1);
  std::vector<canopy::join_handle<void>> handles;
  for (int index = 0; index < 63; ++index) {  // the gate's task holds one slot
    auto attempt = pool.try_spawn([] {});
    REQUIRE(attempt);
    handles.push_back(std::move(attempt.handle));
  }
  CHECK_FALSE(pool.try_spawn([] {}));
  busy.open();
  for (auto& handle : handles) {
    handle.get();
  }
}

namespace {
// Takes every slot of a reservation, in order.
std::vector<std::uint32_t> take_all(canopy::detail::task_arena::reservation& from) {
  std::vector<std::uint32_t> slots;
  while (from.free != 0) {
    slots.push_back(canopy::detail::task_arena::take(from));
  }
  return slots;
}
}  // namespace

TEST_CASE("task_arena: empty words by hint, half-free words next, fragments only at full size") {
  using canopy::detail::task_arena;
  task_arena arena(2, 1, 2, 1);  // one partition, leaves of 2 words (128 slots), at most 2 leaves
  task_arena::reservation run;
  REQUIRE(arena.reserve(0, run));
  const std::vector<std::uint32_t> first = take_all(run);
  REQUIRE(arena.reserve(0, run));
  const std::vector<std::uint32_t> second = take_all(run);
  REQUIRE(first.size() == 64);
  REQUIRE(second.size() == 64);
  CHECK(arena.leaf_limit() == 1);

  // The first word empties completely: the next reservation finds it
  // through its hint although the cursor is on the second word.
  for (const std::uint32_t slot : first) {
    arena.release(slot);
  }
  REQUIRE(arena.reserve(0, run));
  CHECK(run.first_slot == first.front());
  CHECK(std::popcount(run.free) == 64);
  const std::vector<std::uint32_t> again = take_all(run);

  // 40 slots of the other word end (it is not the cursor's word): it is
  // over half free, so it is reserved again before the partition grows.
  for (std::size_t index = 0; index < 40; ++index) {
    arena.release(second[index]);
  }
  REQUIRE(arena.reserve(0, run));
  CHECK(arena.leaf_limit() == 1);
  CHECK(run.first_slot == second.front());
  CHECK(std::popcount(run.free) == 40);
  const std::vector<std::uint32_t> refilled = take_all(run);

  // Only fragments free now (10 slots of each word): the partition grows
  // instead of handing them out a few at a time.
  for (std::size_t index = 0; index < 10; ++index) {
    arena.release(again[index]);
    arena.release(refilled[index]);
  }
  for (int word = 0; word < 2; ++word) {  // both words of the new leaf, whole
    REQUIRE(arena.reserve(0, run));
    CHECK(arena.leaf_limit() == 2);
    CHECK(std::popcount(run.free) == 64);
    static_cast<void>(take_all(run));
  }

  // At its maximum size the fragments are still found, then it is full.
  for (int word = 0; word < 2; ++word) {
    REQUIRE(arena.reserve(0, run));
    CHECK(std::popcount(run.free) == 10);
    static_cast<void>(take_all(run));
  }
  CHECK_FALSE(arena.reserve(0, run));
  CHECK(arena.live_count() == 256);
}

TEST_CASE("task_arena: a reservation returns to the last word once half of it is free") {
  using canopy::detail::task_arena;
  task_arena arena(4, 1, 1, 1);  // one partition, one leaf of 4 words (256 slots)
  task_arena::reservation run;
  REQUIRE(arena.reserve(0, run));
  const std::uint32_t first_word = run.first_slot;
  std::vector<std::uint32_t> used = take_all(run);
  REQUIRE(used.size() == 64);

  // 40 of its tasks ended: the next reservation reuses those (warm) slots.
  for (std::size_t index = 0; index < 40; ++index) {
    arena.release(used[index]);
  }
  REQUIRE(arena.reserve(0, run));
  CHECK(run.first_slot == first_word);
  CHECK(std::popcount(run.free) == 40);
  used = take_all(run);

  // Only 10 free again: below half, so a fresh word is taken instead.
  for (std::size_t index = 0; index < 10; ++index) {
    arena.release(used[index]);
  }
  REQUIRE(arena.reserve(0, run));
  CHECK(run.first_slot != first_word);
  CHECK(std::popcount(run.free) == 64);
  static_cast<void>(take_all(run));

  // Every other word full: the few free bits of the first are still found.
  task_arena::reservation rest;
  for (int word = 0; word < 2; ++word) {
    REQUIRE(arena.reserve(0, rest));
    CHECK(rest.first_slot != first_word);
    static_cast<void>(take_all(rest));
  }
  REQUIRE(arena.reserve(0, run));
  CHECK(run.first_slot == first_word);
  CHECK(std::popcount(run.free) == 10);
  static_cast<void>(take_all(run));
  CHECK_FALSE(arena.reserve(0, run));  // full at its maximum size
  CHECK(arena.live_count() == 256);
}

TEST_CASE("the arena grows by whole leaves up to max_leaves") {
  canopy::testing::watchdog guard("arena growth", 60);
  executor_config config = small_config(2);
  config.signals_per_leaf = 1;  // 64 tasks a leaf
  config.initial_leaves = 2;
  config.max_leaves = 8;  // capacity 512
  executor pool(config);
  CHECK(canopy::detail::core_of(pool).arena().leaf_limit() == 2);
  std::mutex gate_mutex;
  std::condition_variable gate_cv;
  bool open = false;
  std::atomic<int> ran{0};
  std::vector<canopy::join_handle<void>> handles;
  for (int index = 0; index < 300; ++index) {
    auto attempt = pool.try_spawn([&] {
      std::unique_lock lock(gate_mutex);
      gate_cv.wait(lock, [&] { return open; });
      ran.fetch_add(1);
    });
    REQUIRE(attempt);
    handles.push_back(std::move(attempt.handle));
  }
  // 300 live tasks need at least 5 leaves of 64.
  CHECK(canopy::detail::core_of(pool).arena().leaf_limit() >= 5);
  CHECK(canopy::detail::core_of(pool).arena().leaf_limit() <= 8);
  {
    const std::lock_guard lock(gate_mutex);
    open = true;
  }
  gate_cv.notify_all();
  for (auto& handle : handles) {
    handle.get();
  }
  CHECK(ran.load() == 300);
}

TEST_CASE("pin_workers: each worker runs on exactly its planned CPU") {
  canopy::testing::watchdog guard("pin_workers", 60);
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  REQUIRE(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &allowed)) {
      cpus.push_back(cpu);
    }
  }
  REQUIRE_FALSE(cpus.empty());
  executor_config config;
  config.worker_count = 3;  // more workers than CPUs on a 2-CPU machine: they wrap around
  config.pin_workers = true;
  executor pool(config);
  // Block every worker in one task at once, so that each records its own mask.
  std::latch all_in(3);
  std::mutex lock;
  std::vector<std::vector<int>> masks;
  for (int task = 0; task < 3; ++task) {
    pool.spawn_detached([&] {
      cpu_set_t mine;
      CPU_ZERO(&mine);
      std::vector<int> mask;
      if (sched_getaffinity(0, sizeof mine, &mine) == 0) {
        for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
          if (CPU_ISSET(cpu, &mine)) {
            mask.push_back(cpu);
          }
        }
      }
      {
        const std::lock_guard hold(lock);
        masks.push_back(mask);
      }
      all_in.arrive_and_wait();
    });
  }
  pool.shutdown();
  REQUIRE(masks.size() == 3);
  std::vector<int> pinned_to;
  for (const auto& mask : masks) {
    REQUIRE(mask.size() == 1);  // one CPU each
    pinned_to.push_back(mask.front());
  }
  std::sort(pinned_to.begin(), pinned_to.end());
  std::vector<int> expected = {cpus[0], cpus[1 % cpus.size()], cpus[2 % cpus.size()]};
  std::sort(expected.begin(), expected.end());
  CHECK(pinned_to == expected);
}

TEST_CASE("pin_workers: an explicit CPU list, and the errors") {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  REQUIRE(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
  int first = 0;
  while (!CPU_ISSET(first, &allowed)) {
    ++first;
  }
  executor_config config;
  config.worker_count = 2;
  config.pin_workers = true;
  config.worker_cpus = {first};  // both workers on one CPU
  {
    executor pool(config);
    auto where = pool.spawn([] { return sched_getcpu(); });
    CHECK(where.get() == first);
  }
  config.worker_cpus = {CPU_SETSIZE + 5};
  CHECK_THROWS_WITH_AS(executor{config}, doctest::Contains("worker_cpus contains CPU"),
                       std::invalid_argument);
  config.worker_cpus = {-1};
  CHECK_THROWS_AS(executor{config}, std::invalid_argument);
  config.pin_workers = false;
  config.worker_cpus = {first};
  CHECK_THROWS_WITH_AS(executor{config}, doctest::Contains("pin_workers is false"),
                       std::invalid_argument);
}
