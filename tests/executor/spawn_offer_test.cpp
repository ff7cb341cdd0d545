// canopy::spawn's offered children (executor/offer_deque.hpp) and the
// take-over of a never-started child by the coroutine that awaits it
// (coroutine/join_await.hpp): what a user can observe of both.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "coroutine/await_all.hpp"
#include "coroutine/coroutine.hpp"
#include "fork_join/join.hpp"
#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

using canopy::async_event;
using canopy::executor;
using canopy::task;
using canopy::testing::config_with;
using canopy::testing::destroy_flag;
using canopy::testing::eventually;

namespace {

task<int> value_of(int value) { co_return value; }

task<canopy::waker> waker_inside() { co_return canopy::current_waker(); }

task<int> fails() {
  throw std::runtime_error("child failed");
  co_return 0;  // NOLINT(clang-diagnostic-unreachable-code)
}

}  // namespace

TEST_CASE("an awaited child that has not started runs inside its awaiter") {
  canopy::testing::watchdog guard("take-over", 60);
  executor pool(config_with(1));  // one worker: nobody steals the child first

  auto parent = []() -> task<bool> {
    const canopy::waker mine = canopy::current_waker();
    auto child = canopy::spawn(waker_inside());
    const canopy::waker inside = co_await child;
    co_return inside == mine && !child.valid();
  };
  CHECK(canopy::block_on(pool, parent()));

  // Awaited out of spawn order: the older child is still taken over (the
  // newer one goes to the LIFO slot first), and so is the newer one after.
  auto out_of_order = []() -> task<bool> {
    const canopy::waker mine = canopy::current_waker();
    auto older = canopy::spawn(waker_inside());
    auto newer = canopy::spawn(waker_inside());
    const canopy::waker first = co_await older;
    const canopy::waker second = co_await newer;
    co_return first == mine&& second == mine;
  };
  CHECK(canopy::block_on(pool, out_of_order()));

  // A handle whose id was asked for keeps its task: its id stays the one a
  // waker made from it wakes.
  auto identified = []() -> task<bool> {
    auto child = canopy::spawn(waker_inside());
    const canopy::detail::task_id id = child.id();
    const canopy::waker inside = co_await child;
    co_return inside.id().slot == id.slot&& inside.id().generation == id.generation;
  };
  CHECK(canopy::block_on(pool, identified()));

  // Values and exceptions, through many levels.
  auto sum = [](auto& self, int n) -> task<long> {
    if (n < 2) {
      co_return n;
    }
    auto left = canopy::spawn(self(self, n - 1));
    const long right = co_await self(self, n - 2);
    co_return co_await left + right;
  };
  CHECK(canopy::block_on(pool, sum(sum, 20)) == 6765);
  auto catcher = []() -> task<int> {
    try {
      co_return co_await canopy::spawn(fails());
    } catch (const std::runtime_error&) {
      co_return -1;
    }
  };
  CHECK(canopy::block_on(pool, catcher()) == -1);

  // A child cancelled before it started never runs, taken over or not.
  std::atomic<int> started{0};
  auto cancelled = [&]() -> task<bool> {
    auto child = canopy::spawn([](std::atomic<int>& count) -> task<int> {
      count.fetch_add(1);
      co_return 1;
    }(started));
    CHECK(child.cancel());
    try {
      co_await child;
    } catch (const canopy::task_cancelled&) {
      co_return true;
    }
    co_return false;
  };
  CHECK(canopy::block_on(pool, cancelled()));
  CHECK(started.load() == 0);

  pool.shutdown();
  const canopy::executor_stats stats = pool.stats();
  CHECK(stats.live_tasks == 0);
  CHECK(stats.dropped_tasks == 0);
  // Every child counts as spawned and ended (a taken-over one when it was
  // taken over), and so do the six roots block_on spawned from outside.
  CHECK(stats.total().finished == stats.total().spawned + 6);
}

TEST_CASE("a taken-over child that suspends resumes its awaiter; destroyed with it") {
  canopy::testing::watchdog guard("take-over suspend", 60);
  executor pool(config_with(1));

  // It suspends inside the awaiting task and is resumed by an event set
  // from outside the pool.
  async_event ready;
  std::atomic<bool> waiting{false};
  auto waits = [&]() -> task<int> {
    waiting.store(true);
    co_await ready;
    co_return 5;
  };
  auto parent = [&]() -> task<int> { co_return 1 + co_await canopy::spawn(waits()); };
  auto handle = pool.spawn(parent());
  REQUIRE(eventually([&] { return waiting.load(); }));
  ready.set();
  CHECK(handle.get() == 6);

  // The awaiting task is cancelled while the child is suspended inside it:
  // both frames go, and their destructors run (ASan checks the blocks).
  std::atomic<int> destroyed{0};
  std::atomic<bool> child_waiting{false};
  async_event never;
  auto stuck = [&]() -> task<int> {
    destroy_flag flag(destroyed);
    child_waiting.store(true);
    co_await never;
    co_return 0;
  };
  auto outer = [&]() -> task<int> {
    destroy_flag flag(destroyed);
    co_return co_await canopy::spawn(stuck());
  };
  auto cancelled = pool.spawn(outer());
  REQUIRE(eventually([&] { return child_waiting.load(); }));
  CHECK(cancelled.cancel());
  CHECK_THROWS_AS(cancelled.get(), canopy::task_cancelled);
  CHECK(destroyed.load() == 2);
}

TEST_CASE("offered children run however they are awaited, or if they are not") {
  canopy::testing::watchdog guard("offered children", 120);
  for (const std::size_t workers : {1, 2}) {
    CAPTURE(workers);
    executor pool(config_with(workers));

    // Not awaited: the handles are dropped, the children still run (on one
    // worker, when the spawner's worker next looks for work).
    std::atomic<int> ran{0};
    auto detaching = [&]() -> task<void> {
      for (int index = 0; index < 10; ++index) {
        static_cast<void>(canopy::spawn([](std::atomic<int>& count) -> task<void> {
          count.fetch_add(1);
          co_return;
        }(ran)));
      }
      co_return;
    };
    canopy::block_on(pool, detaching());
    CHECK(eventually([&] { return ran.load() == 10; }));

    // Awaited oldest first, more than the deque holds (the rest go to the
    // LIFO slot and the tree): only the newest can be taken back, the
    // others are run by the worker or a thief while the parent waits.
    auto in_order = []() -> task<long> {
      std::vector<canopy::join_handle<int>> children;
      const int count = static_cast<int>(canopy::detail::offer_deque::capacity) + 44;
      children.reserve(static_cast<std::size_t>(count));
      for (int index = 0; index < count; ++index) {
        children.push_back(canopy::spawn(value_of(index)));
      }
      long total = 0;
      for (auto& child : children) {
        total += co_await child;
      }
      co_return total;
    };
    const long count = static_cast<long>(canopy::detail::offer_deque::capacity) + 44;
    CHECK(canopy::block_on(pool, in_order()) == count * (count - 1) / 2);

    // Spawned inside a join's callable and not awaited there: they sit above
    // the join's offered callable, and the join still takes its own back.
    std::atomic<int> inside_ran{0};
    auto joins = [&]() -> task<int> {
      const auto [first, second] = canopy::join(
          [&] {
            static_cast<void>(canopy::spawn([](std::atomic<int>& count) -> task<void> {
              count.fetch_add(1);
              co_return;
            }(inside_ran)));
            return 1;
          },
          [] { return 2; });
      co_return first + second;
    };
    CHECK(canopy::block_on(pool, joins()) == 3);
    CHECK(eventually([&] { return inside_ran.load() == 1; }));

    pool.shutdown();
    CHECK(pool.stats().live_tasks == 0);
    CHECK(pool.stats().dropped_tasks == 0);
  }
}

TEST_CASE("a child awaited before newer ones runs inside its awaiter; the newer ones still run") {
  canopy::testing::watchdog guard("awaited below newer", 60);
  // One worker, so nobody steals: the awaited child is taken from below the
  // newer ones in the spawner's deque and runs nested, before them; had the
  // await suspended instead, the worker would run the newest first. Then
  // children in the tree (past the deque's capacity) with a deque still
  // full, awaited newest first, as await_all does.
  executor pool(config_with(1));
  auto out_of_order = []() -> task<std::vector<int>> {
    std::vector<int> order;
    auto record = [](std::vector<int>& into, int value) -> task<int> {
      into.push_back(value);
      co_return value;
    };
    auto first = canopy::spawn(record(order, 1));
    auto second = canopy::spawn(record(order, 2));
    auto third = canopy::spawn(record(order, 3));
    CHECK(co_await first == 1);
    CHECK(order == std::vector<int>{1});
    CHECK(co_await third == 3);
    CHECK(co_await second == 2);
    co_return order;
  };
  CHECK(canopy::block_on(pool, out_of_order()) == std::vector<int>{1, 3, 2});

  auto past_the_deque = []() -> task<long> {
    std::vector<canopy::join_handle<int>> children;
    const int count = static_cast<int>(canopy::detail::offer_deque::capacity) * 3;
    for (int index = 0; index < count; ++index) {
      children.push_back(canopy::spawn(value_of(index)));
    }
    std::vector<int> values(children.size());
    co_await canopy::await_all(children, values.begin());
    long total = 0;
    for (std::size_t index = 0; index < values.size(); ++index) {
      CHECK(values[index] == static_cast<int>(index));
      total += values[index];
    }
    co_return total;
  };
  const long count = static_cast<long>(canopy::detail::offer_deque::capacity) * 3;
  CHECK(canopy::block_on(pool, past_the_deque()) == count * (count - 1) / 2);
  pool.shutdown();
  CHECK(pool.stats().live_tasks == 0);
  CHECK(pool.stats().dropped_tasks == 0);
}

TEST_CASE("an idle worker steals an offered child while its spawner runs") {
  // The parent waits (bounded, without suspending) until its child ran,
  // which only a thief can make happen. The wake for an offered child is a
  // hint (docs/architecture.md, "Offered callables"): an attempt whose wake
  // was missed ends with the parent awaiting, and the child running inside
  // it, so the case retries, and asserts that a steal happened at least
  // once and was right each time.
  canopy::testing::watchdog guard("offer steal", 120);
  executor pool(config_with(2));
  int stolen_attempts = 0;
  for (int attempt = 0; attempt < 50 && stolen_attempts == 0; ++attempt) {
    auto parent = []() -> task<std::pair<bool, bool>> {
      std::atomic<bool> child_ran{false};
      const std::thread::id parent_thread = std::this_thread::get_id();
      auto child = canopy::spawn([](std::atomic<bool>& ran) -> task<std::thread::id> {
        ran.store(true);
        co_return std::this_thread::get_id();
      }(child_ran));
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
      while (!child_ran.load() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::yield();
      }
      const bool stolen = child_ran.load();
      const std::thread::id child_thread = co_await child;
      co_return std::pair{stolen, !stolen || child_thread != parent_thread};
    };
    const auto [stolen, right] = canopy::block_on(pool, parent());
    CHECK(right);
    stolen_attempts += stolen ? 1 : 0;
  }
  CHECK(stolen_attempts > 0);
  CHECK(pool.stats().total().steals > 0);
}

TEST_CASE("a long run of awaits that never suspend leaves the stack as it was") {
  // Each await below ends without this task suspending: a taken-over child,
  // a callable child run nested, an inline task<T>. Where the compiler
  // cannot make a coroutine's transfer a tail call (ThreadSanitizer's
  // instrumentation), a transfer per await would grow the stack until the
  // task next suspends: 100000 of them would overflow a worker's stack.
  canopy::testing::watchdog guard("await run", 300);
  const int rounds = 100000;
  executor pool(config_with(1));
  auto loop = [&pool]() -> task<long> {
    long total = 0;
    for (int index = 0; index < rounds; ++index) {
      total += co_await canopy::spawn(value_of(1));
      total += co_await pool.spawn([] { return 2; });
      total += co_await value_of(3);
    }
    co_return total;
  };
  CHECK(canopy::block_on(pool, loop()) == 6L * rounds);
}

namespace {
// Counts its destruction once, by whichever object owns it last.
struct owned_flag {
  std::atomic<int>* count;
  explicit owned_flag(std::atomic<int>& target) : count(&target) {}
  owned_flag(owned_flag&& other) noexcept : count(std::exchange(other.count, nullptr)) {}
  owned_flag& operator=(owned_flag&&) = delete;
  ~owned_flag() {
    if (count != nullptr) {
      count->fetch_add(1);
    }
  }
};
}  // namespace

TEST_CASE("a child cancelled before its awaiter takes it over never runs its body") {
  // canopy::spawn's child has no body of its own until it runs as a task
  // (coroutine/lazy_child.hpp): cancelled while it waits in the
  // deque, its awaiter does not take it over but runs it as a task, whose
  // body destroys the frame (its parameters' destructors run) unrun.
  canopy::testing::watchdog guard("cancelled lazy child", 60);
  executor pool(config_with(1));  // one worker: nobody steals the child first
  std::atomic<int> destroyed{0};
  std::atomic<int> ran{0};
  auto parent = [&]() -> task<bool> {
    auto child = canopy::spawn([](owned_flag flag, std::atomic<int>& count) -> task<int> {
      static_cast<void>(flag);
      count.fetch_add(1);
      co_return 1;
    }(owned_flag(destroyed), ran));
    const bool asked = child.cancel();
    bool cancelled = false;
    try {
      static_cast<void>(co_await child);
    } catch (const canopy::task_cancelled&) {
      cancelled = true;
    }
    co_return asked&& cancelled;
  };
  CHECK(canopy::block_on(pool, parent()));
  CHECK(ran.load() == 0);
  CHECK(destroyed.load() == 1);  // the parameter's copy in the frame
  pool.shutdown();
  CHECK(pool.stats().live_tasks == 0);
}

namespace {

task<void> wait_on_event(async_event& event) { co_await event; }

// Nested forks, every child taken over by its awaiter: the worker keeps
// the slots those take-overs retire for its next spawns.
task<long> forks(int n) {
  if (n < 2) {
    co_return n;
  }
  auto left = canopy::spawn(forks(n - 1));
  const long right = co_await forks(n - 2);
  co_return co_await left + right;
}

// One worker, one leaf of one signal word: 64 slots.
canopy::executor_config tiny_capacity() {
  canopy::executor_config config = config_with(1);
  config.signals_per_leaf = 1;
  config.max_leaves = 1;
  return config;
}

}  // namespace

TEST_CASE("slots kept from taken-over children serve any spawn and go back when idle") {
  canopy::testing::watchdog guard("kept slots", 60);
  async_event release;
  executor pool(tiny_capacity());
  REQUIRE(pool.capacity() == 64);

  // Inside a task, after forks left slots kept: spawns that are not
  // canopy::spawn (pool.try_spawn from a worker) reach every free slot,
  // the kept ones too, before at_capacity: all 64 but the parent's own.
  auto fill = [&]() -> task<int> {
    CHECK(co_await forks(12) == 144);
    std::vector<canopy::join_handle<void>> waiting;
    int spawned = 0;
    for (int attempt = 0; attempt < 100; ++attempt) {
      auto next = pool.try_spawn(wait_on_event(release));
      if (!next) {
        CHECK(next.error == canopy::errc::at_capacity);
        break;
      }
      waiting.push_back(std::move(next.handle));
      ++spawned;
    }
    release.set();
    for (auto& handle : waiting) {
      co_await handle;
    }
    co_return spawned;
  };
  CHECK(canopy::block_on(pool, fill()) == 63);

  // From outside, once the worker has gone idle after more forks: the
  // slots it kept went back with its reservation, so all 64 are free.
  release.reset();
  CHECK(canopy::block_on(pool, forks(12)) == 144);
  REQUIRE(eventually([&] { return pool.stats().sleeping_workers == 1; }));
  std::vector<canopy::join_handle<void>> outside;
  for (int index = 0; index < 64; ++index) {
    auto next = pool.try_spawn(wait_on_event(release));
    REQUIRE(next);
    outside.push_back(std::move(next.handle));
  }
  CHECK(pool.try_spawn(wait_on_event(release)).error == canopy::errc::at_capacity);
  release.set();
  for (auto& handle : outside) {
    handle.get();
  }
  pool.shutdown();
  const canopy::executor_stats stats = pool.stats();
  CHECK(stats.live_tasks == 0);
  CHECK(stats.dropped_tasks == 0);
}
