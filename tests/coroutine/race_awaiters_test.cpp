// race(...) over awaiters (<canopy/race.hpp>): a channel's recv(), a mutex's
// lock(), a semaphore's acquire() and sleep_for race against
// stopped(token) like tasks do. Whatever side wins, nothing is lost: every
// value sent is received once (by the race or left in the channel), a lock
// granted as the stop won is in the result and unlocks with it, permits
// are conserved, and the losing wait is released.
#include <doctest/doctest.h>

#include <atomic>
#include <canopy/channel.hpp>
#include <canopy/io.hpp>
#include <canopy/race.hpp>
#include <canopy/sync.hpp>
#include <chrono>
#include <cstddef>
#include <optional>
#include <random>
#include <stop_token>
#include <thread>
#include <vector>

#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

using canopy::executor;
using canopy::task;
using namespace std::chrono_literals;

namespace {

long scaled(long count) { return std::max(1L, count / canopy::testing::stress_divisor()); }

executor make_pool() {
  canopy::executor_config config;
  config.worker_count = 2;
  return executor(canopy::io::with_reactor(config));
}

// Spins for a random few microseconds, so that stops land at every moment
// of a wait's life.
void spin_a_little(std::mt19937& random) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(random() % 40);
  while (std::chrono::steady_clock::now() < until) {
  }
}

}  // namespace

TEST_CASE("race over a channel's recv() and stopped(token): every value received exactly once") {
  const canopy::testing::watchdog guard("race recv", 120);
  executor pool = make_pool();
  constexpr int per_round = 16;
  std::mt19937 random(7);
  const long rounds = scaled(2000);
  long stops_won = 0;
  for (long round = 0; round < rounds; ++round) {
    canopy::channel<int> values(per_round);
    std::stop_source stop;
    std::vector<int> received;
    auto consumer = [&]() -> task<void> {
      for (;;) {
        auto got = co_await canopy::race(values.recv(), canopy::stopped(stop.get_token()));
        if (got.has_value<0>()) {
          std::optional<int> value = std::move(got.get<0>());
          REQUIRE(value.has_value());
          received.push_back(*value);
        }
        if (got.index() == 1) {
          co_return;
        }
      }
    };
    auto producer = [&]() -> task<void> {
      for (int value = 0; value < per_round; ++value) {
        CHECK(co_await values.send(value));
        co_await canopy::yield_now();
      }
    };
    auto consuming = pool.spawn(consumer());
    auto producing = pool.spawn(producer());
    spin_a_little(random);
    stop.request_stop();
    producing.get();
    consuming.get();
    stops_won += received.size() < per_round ? 1 : 0;
    while (auto left = values.try_recv()) {
      received.push_back(*left);
    }
    REQUIRE(received.size() == per_round);
    for (int value = 0; value < per_round; ++value) {
      REQUIRE(received[static_cast<std::size_t>(value)] == value);  // FIFO, none twice
    }
  }
  MESSAGE("rounds " << rounds << ", stopped before the last value: " << stops_won);
}

TEST_CASE("race over a channel's send() and a short sleep, retried: every value sent exactly once") {
  // A receiver takes a waiting sender's value itself, so a send can end
  // (its value in the channel) before the sending task runs again. A
  // cancel that lands then must not hide that: race reports the send as
  // done, and a sender that retries only what did not go never sends a
  // value twice.
  const canopy::testing::watchdog guard("race send", 120);
  executor pool = make_pool();
  const int count = static_cast<int>(scaled(20000));
  canopy::channel<int> values(1);
  std::vector<int> seen(static_cast<std::size_t>(count), 0);
  auto producer = [](canopy::channel<int>& out, int total) -> task<long> {
    long retries = 0;
    for (int value = 0; value < total; ++value) {
      for (;;) {
        auto sent = co_await canopy::race(out.send(value),
                                          canopy::sleep_for(std::chrono::microseconds(value % 30)));
        if (sent.has_value<0>()) {
          CHECK(bool(sent.get<0>()));
          break;
        }
        ++retries;
      }
    }
    out.close();
    co_return retries;
  };
  auto consumer = [](canopy::channel<int>& in, std::vector<int>& counts) -> task<void> {
    int taken = 0;
    while (std::optional<int> value = co_await in.recv()) {
      ++counts[static_cast<std::size_t>(*value)];
      if (++taken % 7 == 0) {
        co_await canopy::sleep_for(std::chrono::microseconds(20));
      }
    }
  };
  auto consuming = pool.spawn(consumer(values, seen));
  const long retries = pool.spawn(producer(values, count)).get();
  consuming.get();
  int lost = 0;
  int repeated = 0;
  for (const int times : seen) {
    lost += times == 0 ? 1 : 0;
    repeated += times > 1 ? 1 : 0;
  }
  CHECK(lost == 0);
  CHECK(repeated == 0);
  MESSAGE("values " << count << ", sends retried after a lost race: " << retries);
}

TEST_CASE("race over a mutex's lock() and stopped(token): a granted lock is never leaked") {
  const canopy::testing::watchdog guard("race lock", 120);
  executor pool = make_pool();
  canopy::mutex room;
  std::mt19937 random(11);
  const long rounds = scaled(2000);
  long locks_won = 0;
  for (long round = 0; round < rounds; ++round) {
    std::stop_source stop;
    std::atomic<bool> holding{false};
    std::atomic<bool> let_go{false};
    auto holder = [&]() -> task<void> {
      canopy::mutex::guard held = co_await room.lock();
      holding = true;
      while (!let_go.load()) {
        co_await canopy::yield_now();
      }
    };
    auto waiter = [&]() -> task<bool> {
      auto got = co_await canopy::race(room.lock(), canopy::stopped(stop.get_token()));
      const bool locked = got.has_value<0>() && got.get<0>().owns_lock();
      co_return locked;  // the guard in `got` unlocks here
    };
    auto holding_task = pool.spawn(holder());
    while (!holding.load()) {
      std::this_thread::yield();
    }
    auto waiting = pool.spawn(waiter());
    // Unlock and stop at about the same moment: either side may win.
    let_go = true;
    spin_a_little(random);
    stop.request_stop();
    holding_task.get();
    locks_won += waiting.get() ? 1 : 0;
    canopy::mutex::guard after = room.try_lock();
    REQUIRE(after.owns_lock());  // nobody kept it
  }
  MESSAGE("rounds " << rounds << ", lock won: " << locks_won);
}

TEST_CASE("race over a semaphore's acquire() and stopped(token): permits are conserved") {
  const canopy::testing::watchdog guard("race acquire", 120);
  executor pool = make_pool();
  canopy::semaphore permits(0);
  std::mt19937 random(13);
  const long rounds = scaled(2000);
  long acquired = 0;
  for (long round = 0; round < rounds; ++round) {
    std::stop_source stop;
    auto waiter = [&]() -> task<bool> {
      auto got = co_await canopy::race(permits.acquire(), canopy::stopped(stop.get_token()));
      co_return got.has_value<0>();  // true: this task holds one permit
    };
    auto waiting = pool.spawn(waiter());
    permits.release(1);
    spin_a_little(random);
    stop.request_stop();
    if (waiting.get()) {
      ++acquired;  // consumed the released permit
    } else {
      REQUIRE(permits.try_acquire(1));  // still there: take it back
    }
    REQUIRE_FALSE(permits.try_acquire(1));  // no permit made or lost
  }
  MESSAGE("rounds " << rounds << ", acquire won: " << acquired);
}

TEST_CASE("race over sleep_for and stopped(token): the sleep's timer is released") {
  const canopy::testing::watchdog guard("race sleep", 60);
  executor pool = make_pool();
  std::stop_source stop;
  auto sleeper = [&]() -> task<std::size_t> {
    auto got = co_await canopy::race(canopy::sleep_for(1h), canopy::stopped(stop.get_token()));
    co_return got.index();
  };
  auto sleeping = pool.spawn(sleeper());
  std::this_thread::sleep_for(5ms);
  CHECK_FALSE(sleeping.ready());
  stop.request_stop();
  CHECK(sleeping.get() == 1);
  auto short_sleep = [&]() -> task<std::size_t> {
    std::stop_source never;
    auto got = co_await canopy::race(canopy::sleep_for(1ms), canopy::stopped(never.get_token()));
    co_return got.index();
  };
  CHECK(pool.spawn(short_sleep()).get() == 0);
}

namespace {
// What a channel accepts: nothrow move-constructible, not assignable.
struct unassignable {
  explicit unassignable(int value) : value(value) {}
  unassignable(unassignable&&) noexcept = default;
  unassignable& operator=(unassignable&&) = delete;
  int value;
};
}  // namespace

TEST_CASE("race over values that cannot be assigned: a channel's recv() and a task") {
  const canopy::testing::watchdog guard("race unassignable", 60);
  executor pool = make_pool();
  canopy::channel<unassignable> values(1);
  REQUIRE(values.try_send(unassignable(7)));
  std::stop_source never;
  auto receiver = [&]() -> task<int> {
    auto got = co_await canopy::race(values.recv(), canopy::stopped(never.get_token()));
    co_return got.get<0>()->value;
  };
  CHECK(pool.spawn(receiver()).get() == 7);
  auto make = [](int value) -> task<unassignable> { co_return unassignable(value); };
  auto both = [&]() -> task<int> {
    auto got = co_await canopy::race(make(1), make(2));
    co_return got.value().value;
  };
  const int winner = pool.spawn(both()).get();
  CHECK((winner == 1 || winner == 2));
}

TEST_CASE("a task cancelled while it races a channel's recv() loses no value the recv took") {
  const canopy::testing::watchdog guard("race recv cancelled", 120);
  executor pool = make_pool();
  canopy::channel<int> values(1);
  std::stop_source never;
  std::mt19937 random(29);
  std::atomic<int> received{0};
  // Races in a loop; a value it got is counted before it waits again.
  auto receiver = [&]() -> task<void> {
    for (;;) {
      auto got = co_await canopy::race(values.recv(), canopy::stopped(never.get_token()));
      if (got.has_value<0>() && got.get<0>()) {
        received.fetch_add(1);
      }
    }
  };
  const long rounds = scaled(2000);
  long lost = 0;
  for (long round = 0; round < rounds; ++round) {
    received.store(0);
    auto racing = pool.spawn(receiver());
    while (values.waiting_receivers() == 0) {
      std::this_thread::yield();
    }
    REQUIRE(values.try_send(1));
    spin_a_little(random);
    racing.cancel();
    CHECK_THROWS_AS(racing.get(), canopy::task_cancelled);
    const int left = values.try_recv() ? 1 : 0;
    if (received.load() + left != 1) {
      ++lost;  // taken by the recv, then destroyed with race's frame
    }
  }
  CHECK(lost == 0);
}
