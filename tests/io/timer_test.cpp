// Timers: the timing wheel alone (against a reference model), the timer
// queue's wakes, and sleep_for / sleep_until / with_timeout in coroutine
// tasks and fibers on an executor driven by io::timer_thread.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "coroutine/coroutine.hpp"
#include "fiber/fiber.hpp"
#include "io/fiber/fiber_io.hpp"
#include "io/fiber/timer_fiber.hpp"
#include "io/registration.hpp"
#include "io/timer/timer_binding.hpp"
#include "io/timer/timer_thread.hpp"
#include "io/timer/timer_wait.hpp"
#include "io/timer/timer_wheel.hpp"
#include "tests/counted_source.hpp"
#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

using canopy::executor;
using canopy::executor_config;
using canopy::task;
using canopy::io::detail::timer_node;
using canopy::io::detail::timer_wheel;
using namespace std::chrono_literals;
using canopy::testing::counted_source;
using clock_type = std::chrono::steady_clock;

namespace {

long scaled(long count) { return std::max(1L, count / canopy::testing::stress_divisor()); }

executor_config config_with(std::size_t workers) {
  executor_config config;
  config.worker_count = workers;
  return config;
}

// Random inserts, removes and expiries against a multimap of deadlines:
// every fired node is due and was pending, nothing due stays behind, and
// next_deadline() is never later than the true earliest deadline.
void check_against_model(std::uint64_t seed, std::uint64_t max_distance, int steps) {
  std::mt19937_64 random(seed);
  timer_wheel wheel;
  std::vector<std::unique_ptr<timer_node>> nodes;
  std::set<timer_node*> pending;
  std::uint64_t now = 0;
  for (int step = 0; step < steps; ++step) {
    const std::uint64_t action = random() % 10;
    if (action < 5) {
      nodes.push_back(std::make_unique<timer_node>());
      // Some deadlines in the past (due at once), most in the future.
      const std::uint64_t distance = random() % (max_distance + 1);
      const std::uint64_t deadline = (random() % 8 == 0 && now > 5) ? now - 5 : now + distance;
      wheel.insert(*nodes.back(), deadline);
      pending.insert(nodes.back().get());
    } else if (action < 7 && !pending.empty()) {
      auto it = pending.begin();
      std::advance(it, static_cast<long>(random() % pending.size()));
      REQUIRE((*it)->linked());
      wheel.remove(**it);
      CHECK_FALSE((*it)->linked());
      pending.erase(it);
    } else {
      now += random() % (max_distance / 4 + 2);
      std::uint64_t true_earliest = timer_wheel::never;
      for (timer_node* node : pending) {
        true_earliest = std::min(true_earliest, node->deadline);
      }
      REQUIRE(wheel.next_deadline() <= true_earliest);
      const std::size_t fired = wheel.expire(now, pending.size() + 1, [&](timer_node& node) {
        REQUIRE(node.deadline <= now);
        REQUIRE_FALSE(node.linked());
        REQUIRE(pending.erase(&node) == 1);
      });
      (void)fired;
      for (timer_node* node : pending) {
        REQUIRE(node->deadline > now);  // nothing due left behind
        REQUIRE(node->linked());
      }
    }
    REQUIRE(wheel.size() == pending.size());
  }
}

// As check_against_model, but each expiry is a run of expire() calls with a
// tiny limit and move budget (a slot left partly processed between them, as
// timer_queue does between holds of its mutex), with inserts and removes in
// between: next_deadline() stays a lower bound throughout, and once due()
// is false nothing due is left.
void check_partial_expiry_against_model(std::uint64_t seed, std::uint64_t max_distance, int steps) {
  std::mt19937_64 random(seed);
  timer_wheel wheel;
  std::vector<std::unique_ptr<timer_node>> nodes;
  std::set<timer_node*> pending;
  std::uint64_t now = 0;
  auto true_earliest = [&] {
    std::uint64_t earliest = timer_wheel::never;
    for (timer_node* node : pending) {
      earliest = std::min(earliest, node->deadline);
    }
    return earliest;
  };
  auto insert_one = [&] {
    nodes.push_back(std::make_unique<timer_node>());
    const std::uint64_t distance = random() % (max_distance + 1);
    const std::uint64_t deadline = (random() % 8 == 0 && now > 5) ? now - 5 : now + distance;
    wheel.insert(*nodes.back(), deadline);
    pending.insert(nodes.back().get());
  };
  auto remove_one = [&] {
    if (pending.empty()) {
      return;
    }
    auto it = pending.begin();
    std::advance(it, static_cast<long>(random() % pending.size()));
    REQUIRE((*it)->linked());
    wheel.remove(**it);
    pending.erase(it);
  };
  for (int step = 0; step < steps; ++step) {
    const std::uint64_t action = random() % 10;
    if (action < 6) {
      insert_one();
    } else if (action < 7) {
      remove_one();
    } else {
      now += random() % (max_distance / 4 + 2);
      while (wheel.due(now)) {
        REQUIRE(wheel.next_deadline() <= true_earliest());
        const std::size_t limit = 1 + random() % 4;
        const std::size_t budget = 1 + random() % 4;
        const std::size_t fired = wheel.expire(
            now, limit,
            [&](timer_node& node) {
              REQUIRE(node.deadline <= now);
              REQUIRE_FALSE(node.linked());
              REQUIRE(pending.erase(&node) == 1);
            },
            budget);
        REQUIRE(fired <= limit);
        REQUIRE(wheel.size() == pending.size());
        // Between two holds: others arm (already due, or later) and cancel.
        if (random() % 3 == 0) {
          insert_one();
        }
        if (random() % 3 == 0) {
          remove_one();
        }
      }
      REQUIRE(wheel.next_deadline() <= true_earliest());
      for (timer_node* node : pending) {
        REQUIRE(node->deadline > now);  // nothing due left behind
        REQUIRE(node->linked());
      }
    }
    REQUIRE(wheel.size() == pending.size());
  }
}

}  // namespace

TEST_CASE("timer_wheel: fires exactly the due timers (model check over several spans)") {
  for (const std::uint64_t span : {std::uint64_t{10}, std::uint64_t{100}, std::uint64_t{5000},
                                   std::uint64_t{1} << 20, std::uint64_t{1} << 40}) {
    for (std::uint64_t seed = 1; seed <= 4; ++seed) {
      CAPTURE(span);
      CAPTURE(seed);
      check_against_model(seed * 7919 + span, span, static_cast<int>(scaled(4000)));
    }
  }
}

TEST_CASE("timer_wheel: next_deadline is exact after inserts, and far deadlines work") {
  timer_wheel wheel;
  CHECK(wheel.next_deadline() == timer_wheel::never);
  timer_node near;
  timer_node far;
  timer_node farthest;
  wheel.insert(far, 1'000'000);
  wheel.insert(near, 1'000);
  wheel.insert(farthest, timer_wheel::never - 1);
  CHECK(wheel.next_deadline() == 1'000);
  std::vector<std::uint64_t> fired;
  auto record = [&](timer_node& node) { fired.push_back(node.deadline); };
  CHECK(wheel.expire(999, 10, record) == 0);
  CHECK(wheel.expire(1'000, 10, record) == 1);
  CHECK(wheel.next_deadline() == 1'000'000);  // exact, not the start of a coarse slot
  CHECK(wheel.expire(999'999, 10, record) == 0);
  CHECK(wheel.expire(1'000'000, 10, record) == 1);
  CHECK(wheel.next_deadline() == timer_wheel::never - 1);
  wheel.remove(farthest);
  CHECK(wheel.empty());
  CHECK(wheel.next_deadline() == timer_wheel::never);
  CHECK(fired == std::vector<std::uint64_t>{1'000, 1'000'000});
}

TEST_CASE("timer_wheel: expire stops at its limit and resumes where it left") {
  timer_wheel wheel;
  std::vector<timer_node> nodes(100);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    wheel.insert(nodes[i], 500 + i % 3);
  }
  std::size_t total = 0;
  auto count = [&](timer_node&) { ++total; };
  CHECK(wheel.expire(600, 30, count) == 30);
  CHECK(wheel.size() == 70);
  CHECK(wheel.expire(600, 30, count) == 30);
  CHECK(wheel.expire(600, 100, count) == 40);
  CHECK(total == 100);
  CHECK(wheel.empty());
}

TEST_CASE("timer_wheel: a million timers inserted and cancelled leave it empty") {
  timer_wheel wheel;
  const std::size_t count = static_cast<std::size_t>(scaled(1'000'000));
  std::vector<timer_node> nodes(count);
  std::mt19937_64 random(42);
  for (timer_node& node : nodes) {
    wheel.insert(node, random() % 10'000'000);
  }
  CHECK(wheel.size() == count);
  for (timer_node& node : nodes) {
    wheel.remove(node);
  }
  CHECK(wheel.empty());
  CHECK(wheel.next_deadline() == timer_wheel::never);
}

TEST_CASE("timer_wheel: expiry spread over calls (limit and move budget) misses nothing") {
  for (const std::uint64_t span :
       {std::uint64_t{100}, std::uint64_t{5000}, std::uint64_t{1} << 20, std::uint64_t{1} << 30}) {
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
      CAPTURE(span);
      CAPTURE(seed);
      check_partial_expiry_against_model(seed * 104729 + span, span,
                                         static_cast<int>(scaled(3000)));
    }
  }
}

TEST_CASE("timer_wheel: a coarse slot of many timers is spread down a budget at a time") {
  // 20,000 deadlines in one level-3 slot (262,144 ticks wide), all later than
  // the earliest: its expiry moves them down at most 100 per call, fires only
  // the due one, and every other fires later, each exactly once.
  timer_wheel wheel;
  std::vector<timer_node> nodes(20'000);
  const std::uint64_t base = std::uint64_t{1} << 19;
  std::mt19937_64 random(7);
  std::uint64_t earliest_rest = timer_wheel::never;
  for (timer_node& node : nodes) {
    wheel.insert(node, base + 1 + random() % 200'000);
    earliest_rest = std::min(earliest_rest, node.deadline);
  }
  timer_node first;
  wheel.insert(first, base);
  std::vector<std::uint64_t> fired;
  std::set<timer_node*> seen;
  auto record = [&](timer_node& node) {
    fired.push_back(node.deadline);
    CHECK(seen.insert(&node).second);
  };
  std::size_t calls = 0;
  while (wheel.due(base)) {
    wheel.expire(base, 64, record, 100);
    ++calls;
    REQUIRE(wheel.next_deadline() <= earliest_rest);  // a lower bound throughout
  }
  CHECK(fired == std::vector<std::uint64_t>{base});
  CHECK(calls >= 20'000 / 100);
  CHECK(wheel.size() == nodes.size());
  std::uint64_t now = base;
  while (!wheel.empty()) {
    now += 997;
    while (wheel.due(now)) {
      wheel.expire(
          now, 64,
          [&](timer_node& node) {
            CHECK(node.deadline <= now);
            record(node);
          },
          100);
    }
  }
  CHECK(fired.size() == nodes.size() + 1);
}

TEST_CASE("timer_wheel: cancels leave holes; compaction keeps the rest linked where they are") {
  // 2,000 timers in one slot, 1,900 cancelled in a random order (holes,
  // dropped at the back or compacted away): the 100 left fire exactly once
  // each, no cancelled one fires, and every remove finds its pair.
  timer_wheel wheel;
  std::vector<timer_node> nodes(2'000);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    wheel.insert(nodes[i], 300'000 + i % 50);
  }
  std::vector<std::size_t> order(nodes.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    order[i] = i;
  }
  std::shuffle(order.begin(), order.end(), std::mt19937_64(5));
  std::set<timer_node*> cancelled;
  for (std::size_t k = 0; k < 1'900; ++k) {
    timer_node& node = nodes[order[k]];
    REQUIRE(node.linked());
    wheel.remove(node);
    CHECK_FALSE(node.linked());
    cancelled.insert(&node);
    REQUIRE(wheel.size() == nodes.size() - k - 1);
  }
  std::set<timer_node*> fired;
  while (wheel.due(400'000)) {
    wheel.expire(400'000, 7, [&](timer_node& node) {
      CHECK(cancelled.count(&node) == 0);
      CHECK(fired.insert(&node).second);
    });
  }
  CHECK(fired.size() == 100);
  CHECK(wheel.empty());
  CHECK(wheel.next_deadline() == timer_wheel::never);
}

TEST_CASE("timer_queue: a storm expired while other threads arm and cancel") {
  // One thread expires (as the poller does) while two arm timers spread over
  // 0..20 ms and cancel every other one: an entry fires at most once, never
  // before its deadline, one cancelled before firing never fires, and every
  // other one fires.
  canopy::testing::watchdog guard("timer_queue storm", 60);
  canopy::io::detail::timer_queue queue;
  const std::size_t per_thread = static_cast<std::size_t>(scaled(20'000));
  struct armed {
    canopy::io::detail::timer_queue::entry entry;
    clock_type::time_point deadline;
    bool cancelled = false;
  };
  std::vector<std::unique_ptr<armed[]>> lists;
  for (int t = 0; t < 2; ++t) {
    lists.push_back(std::make_unique<armed[]>(per_thread));
  }
  std::atomic<int> arming{2};
  std::atomic<bool> early{false};
  std::thread expirer([&] {
    while (arming.load() != 0 || queue.pending() != 0) {
      queue.expire(clock_type::now());
    }
  });
  std::vector<std::thread> armers;
  for (int t = 0; t < 2; ++t) {
    armers.emplace_back([&, t] {
      std::mt19937_64 random(static_cast<std::uint64_t>(t) + 11);
      armed* const list = lists[static_cast<std::size_t>(t)].get();
      for (std::size_t i = 0; i < per_thread; ++i) {
        list[i].deadline = clock_type::now() + std::chrono::microseconds(random() % 20'000);
        (void)queue.arm(list[i].entry, list[i].deadline, canopy::waker{});
        if (i % 2 == 1) {
          queue.disarm(list[i - 1].entry);
          list[i - 1].cancelled = !list[i - 1].entry.has_fired();
        }
        if (i >= 64 && list[i - 64].entry.has_fired() &&
            clock_type::now() < list[i - 64].deadline) {
          early.store(true);
        }
      }
      arming.fetch_sub(1);
    });
  }
  for (std::thread& armer : armers) {
    armer.join();
  }
  expirer.join();
  CHECK_FALSE(early.load());
  std::size_t fired = 0;
  for (auto& list : lists) {
    for (std::size_t i = 0; i < per_thread; ++i) {
      CHECK(list[i].entry.has_fired() != list[i].cancelled);
      CHECK_FALSE(list[i].entry.linked());
      fired += list[i].entry.has_fired() ? 1 : 0;
    }
  }
  CHECK(fired >= per_thread);  // the odd ones, at least
}

TEST_CASE("timer_queue: arm, fire, disarm; a passed deadline is due at once") {
  canopy::io::detail::timer_queue queue;
  canopy::io::detail::timer_queue::entry passed;
  REQUIRE(queue.arm(passed, clock_type::now() - 1ms, canopy::waker{}));
  CHECK(queue.pending() == 1);
  CHECK(queue.expire(clock_type::now()) == 1);
  CHECK(passed.has_fired());
  CHECK(queue.pending() == 0);
  canopy::io::detail::timer_queue::entry item;
  const auto deadline = clock_type::now() + 2ms;
  REQUIRE(queue.arm(item, deadline, canopy::waker{}));
  CHECK(queue.pending() == 1);
  const auto next = queue.next_deadline();
  REQUIRE(next.has_value());
  CHECK(*next >= deadline);
  CHECK(*next - deadline < 1us);  // rounded up to the microsecond, never early
  CHECK(queue.expire(deadline - 1us) == 0);
  CHECK_FALSE(item.has_fired());
  CHECK(queue.expire(*next) == 1);
  CHECK(item.has_fired());
  CHECK(queue.pending() == 0);
  CHECK_FALSE(queue.next_deadline().has_value());

  canopy::io::detail::timer_queue::entry other;
  REQUIRE(queue.arm(other, clock_type::now() + 1h, canopy::waker{}));
  queue.disarm(other);
  CHECK(queue.pending() == 0);
  CHECK(queue.expire(clock_type::now() + 2h) == 0);
  CHECK_FALSE(other.has_fired());
}

TEST_CASE("timer_queue: an earlier deadline notifies the driver once") {
  canopy::io::detail::timer_queue queue;
  std::atomic<int> notified{0};
  queue.set_earlier_deadline_listener(
      [](void* counter) noexcept { static_cast<std::atomic<int>*>(counter)->fetch_add(1); },
      &notified);
  canopy::io::detail::timer_queue::entry a;
  canopy::io::detail::timer_queue::entry b;
  canopy::io::detail::timer_queue::entry c;
  REQUIRE(queue.arm(a, clock_type::now() + 1h, canopy::waker{}));
  CHECK(notified.load() == 1);
  CHECK(queue.next_deadline().has_value());  // the driver now sleeps towards a
  REQUIRE(queue.arm(b, clock_type::now() + 2h, canopy::waker{}));
  CHECK(notified.load() == 1);  // later: no notification
  REQUIRE(queue.arm(c, clock_type::now() + 1min, canopy::waker{}));
  CHECK(notified.load() == 2);  // earlier: the driver must recompute
  queue.disarm(a);
  queue.disarm(b);
  queue.disarm(c);
}

TEST_CASE("sleep_for in coroutine tasks: wakes after the duration, never before") {
  canopy::testing::watchdog guard("sleep_for", 30);
  executor pool(config_with(2));
  canopy::io::timer_thread timers(pool);
  const int sleepers = static_cast<int>(scaled(200));
  std::atomic<int> early{0};
  std::vector<canopy::join_handle<void>> handles;
  for (int i = 0; i < sleepers; ++i) {
    handles.push_back(pool.spawn([](int index, std::atomic<int>& too_early) -> task<void> {
      const auto duration = std::chrono::microseconds(200 + (index % 20) * 100);
      const auto start = clock_type::now();
      co_await canopy::sleep_for(duration);
      if (clock_type::now() - start < duration) {
        too_early.fetch_add(1);
      }
      co_await canopy::sleep_until(clock_type::now() - 1ms);  // passed: no suspension
    }(i, early)));
  }
  for (auto& handle : handles) {
    handle.get();
  }
  CHECK(early.load() == 0);
  CHECK(timers.queue().pending() == 0);
  pool.shutdown();
}

TEST_CASE("sleep_for outside a task or without a timer queue throws logic_error") {
  executor pool(config_with(1));
  auto handle = pool.spawn([]() -> task<void> { co_await canopy::sleep_for(1ms); }());
  CHECK_THROWS_AS(handle.get(), std::logic_error);
  CHECK_THROWS_AS(canopy::io::detail::timer_queue::current(), std::logic_error);
  pool.shutdown();
}

TEST_CASE("cancelling or shutting down a sleeping task removes its timer") {
  canopy::testing::watchdog guard("sleep cancel", 30);
  executor pool(config_with(2));
  canopy::io::timer_thread timers(pool);
  std::atomic<int> started{0};
  std::vector<canopy::join_handle<void>> handles;
  for (int i = 0; i < 50; ++i) {
    handles.push_back(pool.spawn([](std::atomic<int>& count) -> task<void> {
      count.fetch_add(1);
      co_await canopy::sleep_for(1h);
    }(started)));
  }
  REQUIRE(canopy::testing::eventually([&] { return timers.queue().pending() == 50; }));
  for (std::size_t i = 0; i < 25; ++i) {
    handles[i].cancel();
  }
  for (std::size_t i = 0; i < 25; ++i) {
    CHECK_THROWS_AS(handles[i].get(), canopy::task_cancelled);
  }
  CHECK(timers.queue().pending() == 25);
  pool.shutdown();  // destroys the 25 still sleeping
  CHECK(timers.queue().pending() == 0);
  for (std::size_t i = 25; i < handles.size(); ++i) {
    CHECK_THROWS_AS(handles[i].get(), canopy::task_cancelled);
  }
}

namespace {

task<int> slow_value(std::chrono::milliseconds delay, int value) {
  co_await canopy::sleep_for(delay);
  co_return value;
}

}  // namespace

TEST_CASE("with_timeout: the value, or errc::timed_out") {
  canopy::testing::watchdog guard("with_timeout", 30);
  executor pool(config_with(2));
  canopy::io::timer_thread timers(pool);

  SUBCASE("a wait source that never becomes ready times out and is disarmed") {
    counted_source source;
    auto result = canopy::block_on(pool, [](counted_source& s) -> task<bool> {
      const auto start = clock_type::now();
      auto got = co_await canopy::with_timeout(3ms, s);
      co_return !got && got.error() == canopy::io::errc::timed_out &&
          clock_type::now() - start >= 3ms;
    }(source));
    CHECK(result);
    CHECK(source.arms.load() == source.disarms.load());
    CHECK(timers.queue().pending() == 0);
  }
  SUBCASE("a wait source ready in time gives its value and the timer is removed") {
    counted_source source;
    auto handle = pool.spawn([](counted_source& s) -> task<int> {
      auto got = co_await canopy::with_timeout(1h, s);
      co_return got ? *got : -1;
    }(source));
    REQUIRE(canopy::testing::eventually([&] { return timers.queue().pending() == 1; }));
    source.set();
    CHECK(handle.get() == 7);
    CHECK(timers.queue().pending() == 0);
    CHECK(source.arms.load() == source.disarms.load());
  }
  SUBCASE("a task: value in time, timed_out (and the child cancelled) otherwise") {
    auto fast = canopy::block_on(pool, []() -> task<int> {
      auto got = co_await canopy::with_timeout(1h, slow_value(1ms, 5));
      co_return got ? *got : -1;
    }());
    CHECK(fast == 5);
    auto slow = canopy::block_on(pool, []() -> task<bool> {
      auto got = co_await canopy::with_timeout(2ms, slow_value(1h, 5));
      co_return !got && got.error() == canopy::io::errc::timed_out;
    }());
    CHECK(slow);
    // The cancelled child's hour-long sleep is taken back.
    CHECK(canopy::testing::eventually([&] { return timers.queue().pending() == 0; }));
  }
  SUBCASE("an exception from the task is rethrown") {
    auto handle = pool.spawn([]() -> task<void> {
      auto got = co_await canopy::with_timeout(1h, []() -> task<int> {
        throw std::runtime_error("inner");
        co_return 1;
      }());
      (void)got;
    }());
    CHECK_THROWS_AS(handle.get(), std::runtime_error);
  }
  pool.shutdown();
}

TEST_CASE("this_fiber::sleep_for suspends only the fiber, and a cancel removes the timer") {
  canopy::testing::watchdog guard("fiber sleep", 30);
  executor pool(config_with(2));
  canopy::io::timer_thread timers(pool);
  auto handle = pool.spawn(canopy::fiber([] {
    const auto start = clock_type::now();
    canopy::this_fiber::sleep_for(2ms);
    canopy::this_fiber::sleep_until(clock_type::now() + 1ms);
    return clock_type::now() - start >= 3ms;
  }));
  CHECK(handle.get());
  auto sleeper = pool.spawn(canopy::fiber([] { canopy::this_fiber::sleep_for(1h); }));
  REQUIRE(canopy::testing::eventually([&] { return timers.queue().pending() == 1; }));
  sleeper.cancel();
  CHECK_THROWS_AS(sleeper.get(), canopy::task_cancelled);
  CHECK(timers.queue().pending() == 0);
  pool.shutdown();
}

TEST_CASE("timers driven by the reactor's poller: sleeps end on time, with_timeout on readiness") {
  canopy::testing::watchdog guard("reactor timers", 30);
  executor pool(canopy::io::with_reactor(config_with(2)));
  canopy::io::reactor_timers timers(pool);
  const int sleepers = static_cast<int>(scaled(100));
  std::atomic<int> early{0};
  std::vector<canopy::join_handle<void>> handles;
  for (int i = 0; i < sleepers; ++i) {
    handles.push_back(pool.spawn([](int index, std::atomic<int>& too_early) -> task<void> {
      for (int round = 0; round < 5; ++round) {
        const auto duration = std::chrono::microseconds(100 + (index % 10) * 150);
        const auto start = clock_type::now();
        co_await canopy::sleep_for(duration);
        if (clock_type::now() - start < duration) {
          too_early.fetch_add(1);
        }
      }
    }(i, early)));
  }
  for (auto& handle : handles) {
    handle.get();
  }
  CHECK(early.load() == 0);
  CHECK(timers.queue().pending() == 0);

  // A readiness wait that never completes, bounded by a deadline.
  int pipe_ends[2];
  REQUIRE(::pipe2(pipe_ends, O_NONBLOCK | O_CLOEXEC) == 0);
  {
    std::error_code error;
    // Not assumed ready: the pipe is empty, so the wait really waits.
    canopy::io::registration reg(canopy::io::reactor::of(pool), pipe_ends[0],
                                 canopy::io::interest::readable, error, false);
    REQUIRE_FALSE(error);
    auto timed_out = canopy::block_on(pool, [](const canopy::io::registration& r) -> task<bool> {
      canopy::io::readiness_wait readable(r, canopy::io::direction::read);
      const auto start = clock_type::now();
      auto got = co_await canopy::with_timeout(5ms, readable);
      co_return !got && clock_type::now() - start >= 5ms;
    }(reg));
    CHECK(timed_out);
  }
  ::close(pipe_ends[0]);
  ::close(pipe_ends[1]);
  pool.shutdown();
}

TEST_CASE("reactor_timers declared after its executor: scope exit with tasks still sleeping") {
  canopy::testing::watchdog guard("timers scope exit", 30);
  std::atomic<int> destroyed{0};
  {
    executor pool(canopy::io::with_reactor(config_with(2)));
    canopy::io::reactor_timers timers(pool);
    for (int i = 0; i < 10; ++i) {
      pool.spawn_detached([](std::atomic<int>& count) -> task<void> {
        canopy::testing::destroy_flag flag(count);
        co_await canopy::sleep_for(1h);
      }(destroyed));
    }
    REQUIRE(canopy::testing::eventually([&] { return timers.queue().pending() == 10; }));
  }  // ~reactor_timers, then ~executor: the sleepers must not touch a freed queue
  CHECK(destroyed.load() == 10);
}

TEST_CASE("a due timer fires while every worker is busy, long before driver_poll_interval tasks") {
  canopy::testing::watchdog guard("busy timers", 60);
  executor_config config = config_with(1);
  config.driver_poll_interval = 1000000;  // the task-count poll alone would need 10^6 tasks
  executor pool(canopy::io::with_reactor(config));
  canopy::io::reactor_timers timers(pool);
  std::atomic<bool> slept{false};
  // The only worker never runs out of work while `spinner` yields, so it
  // never parks in epoll_wait: only its polls between tasks can fire timers.
  auto spinner = pool.spawn([](std::atomic<bool>& stop) -> task<long> {
    long rounds = 0;
    while (!stop.load()) {
      co_await canopy::yield_now();
      ++rounds;
    }
    co_return rounds;
  }(slept));
  auto sleeper = pool.spawn([](std::atomic<bool>& done) -> task<bool> {
    const auto start = clock_type::now();
    co_await canopy::sleep_for(2ms);
    const bool on_time = clock_type::now() - start >= 2ms;
    done.store(true);
    co_return on_time;
  }(slept));
  CHECK(sleeper.get());
  const long rounds = spinner.get();
  MESSAGE("spinner rounds until the 2 ms sleep ended: " << rounds);
  CHECK(rounds > 0);
  CHECK(rounds < static_cast<long>(config.driver_poll_interval) / 2);
  CHECK(timers.queue().pending() == 0);
}

namespace {

// Records, as it is destroyed, how many sleepers had ended by then.
struct ended_probe {
  const std::atomic<int>* ended;
  int* seen;
  ~ended_probe() { *seen = ended->load(); }
};

}  // namespace

TEST_CASE("a timer_thread destroyed before its executor ends the sleeping tasks first") {
  // The natural order: the executor, then its timer_thread, both left by
  // scope; the timer_thread goes first. Tasks still sleeping are destroyed
  // (their timers disarmed) before the queue goes, not after (a
  // use-after-free of the queue).
  canopy::testing::watchdog guard("timer_thread destroyed first", 30);
  std::atomic<int> ended{0};
  std::atomic<int> armed{0};
  int seen_after_timers = -1;
  canopy::join_handle<void> sleeper;
  canopy::join_handle<int> fiber_sleeper;
  {
    executor pool(config_with(2));
    const ended_probe probe{&ended, &seen_after_timers};
    canopy::io::timer_thread timers(pool);
    struct count_end {
      std::atomic<int>* ended;
      ~count_end() { ended->fetch_add(1); }
    };
    sleeper = pool.spawn([](std::atomic<int>* ended, std::atomic<int>* armed) -> task<void> {
      const count_end guard{ended};
      armed->fetch_add(1);
      co_await canopy::sleep_for(1h);
    }(&ended, &armed));
    fiber_sleeper = pool.spawn(canopy::fiber([&ended, &armed] {
      const count_end guard{&ended};
      armed.fetch_add(1);
      canopy::this_fiber::sleep_for(1h);
      return 1;
    }));
    REQUIRE(canopy::testing::eventually([&] { return timers.queue().pending() == 2; }));
    REQUIRE(armed.load() == 2);
  }
  CHECK(seen_after_timers == 2);
  CHECK_THROWS_AS(sleeper.get(), canopy::task_cancelled);
  CHECK_THROWS_AS(fiber_sleeper.get(), canopy::task_cancelled);
}
