// canopy::channel<T> and canopy::oneshot<T> (<canopy/channel.hpp>): the
// non-waiting forms, close semantics (drain, then end; senders get their
// value back), coroutine and fiber forms, many producers and consumers over
// 1, 2 and 4 workers (every value exactly once, FIFO per producer),
// cancellation of waiters (nothing in the channel lost), no allocation per
// message, and the bad-input errors.
#include <doctest/doctest.h>

#include <atomic>
#include <canopy/channel.hpp>
#include <canopy/fiber.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tests/allocation_counter.hpp"
#include "tests/owned_lambda.hpp"
#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"
#include "tests/worker_gate.hpp"

using canopy::channel;
using canopy::channel_errc;
using canopy::executor;
using canopy::task;
using canopy::testing::config_with;
using canopy::testing::eventually;
using canopy::testing::owned;
using canopy::testing::watchdog;
using canopy::testing::worker_gate;
using namespace std::chrono_literals;

TEST_CASE("try_send / try_recv: FIFO, full, empty, closed with the value handed back") {
  channel<std::unique_ptr<int>> ch(2);
  CHECK(ch.capacity() == 2);
  CHECK(ch.try_send(std::make_unique<int>(1)));
  CHECK(ch.try_send(std::make_unique<int>(2)));
  canopy::send_result<std::unique_ptr<int>> full = ch.try_send(std::make_unique<int>(3));
  CHECK_FALSE(full);
  CHECK(full.error() == channel_errc::full);
  CHECK(*full.value() == 3);
  auto first = ch.try_recv();
  REQUIRE(first);
  CHECK(**first == 1);
  ch.close();
  CHECK(ch.is_closed());
  auto refused = ch.try_send(std::make_unique<int>(4));
  CHECK(refused.error() == channel_errc::closed);
  CHECK(*refused.value() == 4);
  CHECK(refused.error().message() == "the channel is closed");
  auto second = ch.try_recv();  // drained after close
  REQUIRE(second);
  CHECK(**second == 2);
  auto end = ch.try_recv();
  CHECK_FALSE(end);
  CHECK(end.error() == channel_errc::closed);
  CHECK_THROWS_AS(static_cast<void>(end.value()), std::system_error);
  CHECK_THROWS_AS(static_cast<void>(end->get()), std::system_error);

  channel<std::string> words(1);
  CHECK(words.try_send(std::string("hello")));
  const auto word = words.try_recv();
  REQUIRE(word);
  CHECK(word->size() == 5);  // operator-> on a const result
  CHECK(*word == "hello");

  channel<int> empty(1);
  auto nothing = empty.try_recv();
  CHECK(nothing.error() == channel_errc::empty);
  canopy::send_result<int> ok = empty.try_send(5);
  CHECK(ok);
  CHECK_THROWS_AS(static_cast<void>(ok.value()), std::logic_error);
}

TEST_CASE("bad input: a capacity of 0 is refused") {
  CHECK_THROWS_WITH_AS(channel<int>(0), doctest::Contains("capacity must be at least 1"),
                       std::invalid_argument);
}

TEST_CASE("close wakes waiting senders (value back) and receivers (end); receivers drain first") {
  watchdog guard("channel close", 30);
  executor pool(config_with(2));
  channel<std::string> full(1);
  REQUIRE(full.try_send("kept"));
  auto sender = pool.spawn(owned([&]() -> task<std::string> {
    canopy::send_result<std::string> sent = co_await full.send("returned");
    CHECK(sent.error() == channel_errc::closed);
    co_return sent.value();
  }));
  auto fiber_sender = pool.spawn(canopy::fiber([&] {
    canopy::send_result<std::string> sent = canopy::this_fiber::await(full.send("fiber"));
    CHECK_FALSE(sent);
    return sent.value();
  }));
  REQUIRE(eventually([&] { return full.waiting_senders() == 2; }));
  full.close();
  CHECK(sender.get() == "returned");
  CHECK(fiber_sender.get() == "fiber");
  auto drained = pool.spawn(owned([&]() -> task<int> {
    std::optional<std::string> value = co_await full.recv();
    CHECK(value == "kept");
    std::optional<std::string> end = co_await full.recv();
    co_return end.has_value() ? 1 : 0;
  }));
  CHECK(drained.get() == 0);

  channel<int> empty(4);
  auto receiver =
      pool.spawn(owned([&]() -> task<bool> { co_return (co_await empty.recv()).has_value(); }));
  auto fiber_receiver = pool.spawn(
      canopy::fiber([&] { return canopy::this_fiber::await(empty.recv()).has_value(); }));
  REQUIRE(eventually([&] { return empty.waiting_receivers() == 2; }));
  empty.close();
  empty.close();  // idempotent
  CHECK_FALSE(receiver.get());
  CHECK_FALSE(fiber_receiver.get());
  auto late = pool.spawn(owned([&]() -> task<bool> { co_return bool(co_await empty.send(1)); }));
  CHECK_FALSE(late.get());
}

TEST_CASE("many producers and consumers: every value once, FIFO per producer, 1/2/4 workers") {
  watchdog guard("channel mpmc", 120);
  for (std::size_t workers : {1, 2, 4}) {
    CAPTURE(workers);
    executor pool(config_with(workers));
    constexpr int producers = 6;  // half tasks, half fibers
    constexpr int consumers = 4;  // half tasks, half fibers
    constexpr int per_producer = 2000;
    channel<std::pair<int, int>> ch(8);
    std::vector<std::vector<std::pair<int, int>>> received(consumers);
    std::vector<canopy::join_handle<void>> producing;
    for (int p = 0; p < producers; ++p) {
      if (p % 2 == 0) {
        producing.push_back(pool.spawn(owned([&, p]() -> task<void> {
          for (int i = 0; i < per_producer; ++i) {
            CHECK(co_await ch.send({p, i}));
          }
        })));
      } else {
        producing.push_back(pool.spawn(canopy::fiber([&, p] {
          for (int i = 0; i < per_producer; ++i) {
            CHECK(canopy::this_fiber::await(ch.send({p, i})));
          }
        })));
      }
    }
    std::vector<canopy::join_handle<void>> consuming;
    for (int c = 0; c < consumers; ++c) {
      auto& mine = received[c];
      if (c % 2 == 0) {
        consuming.push_back(pool.spawn(owned([&]() -> task<void> {
          while (std::optional<std::pair<int, int>> value = co_await ch.recv()) {
            mine.push_back(*value);
          }
        })));
      } else {
        consuming.push_back(pool.spawn(canopy::fiber([&] {
          while (std::optional<std::pair<int, int>> value = canopy::this_fiber::await(ch.recv())) {
            mine.push_back(*value);
          }
        })));
      }
    }
    for (auto& handle : producing) {
      handle.get();
    }
    ch.close();
    for (auto& handle : consuming) {
      handle.get();
    }
    std::vector<std::vector<int>> seen(producers, std::vector<int>(per_producer, 0));
    std::size_t total = 0;
    bool in_order = true;
    for (const auto& mine : received) {
      std::vector<int> last(producers, -1);
      for (auto [p, i] : mine) {
        ++seen[p][i];
        in_order = in_order && i > last[p];
        last[p] = i;
        ++total;
      }
    }
    CHECK(total == static_cast<std::size_t>(producers) * per_producer);
    CHECK(in_order);
    bool each_once = true;
    for (const auto& counts : seen) {
      for (int count : counts) {
        each_once = each_once && count == 1;
      }
    }
    CHECK(each_once);
    CHECK(ch.size() == 0);
  }
}

TEST_CASE("cancelled waiters: a queued one leaves; one woken for a value passes it on") {
  watchdog guard("channel cancel", 30);
  executor pool(config_with(1));
  channel<int> ch(1);
  std::atomic<int> sum{0};
  auto receiver = [&]() -> task<void> {
    std::optional<int> value = co_await ch.recv();
    sum.fetch_add(value.value_or(1000));
  };
  // Queued receiver cancelled: the next value goes to the one behind.
  auto first = pool.spawn(receiver());
  REQUIRE(eventually([&] { return ch.waiting_receivers() == 1; }));
  auto second = pool.spawn(receiver());
  REQUIRE(eventually([&] { return ch.waiting_receivers() == 2; }));
  CHECK(first.cancel());
  CHECK_THROWS_AS(first.get(), canopy::task_cancelled);
  CHECK(ch.waiting_receivers() == 1);
  REQUIRE(ch.try_send(7));
  second.get();
  CHECK(sum.load() == 7);

  // Woken with a value promised, cancelled before running: it passes on.
  auto promised = pool.spawn(receiver());
  REQUIRE(eventually([&] { return ch.waiting_receivers() == 1; }));
  auto behind = pool.spawn(receiver());
  REQUIRE(eventually([&] { return ch.waiting_receivers() == 2; }));
  worker_gate blocker(pool, 1);
  REQUIRE(ch.try_send(11));  // promised to `promised`, which cannot run yet
  CHECK(ch.waiting_receivers() == 1);
  CHECK(promised.cancel());
  blocker.open();
  CHECK_THROWS_AS(promised.get(), canopy::task_cancelled);
  behind.get();
  CHECK(sum.load() == 18);
  CHECK(ch.size() == 0);

  // A queued sender cancelled: its value goes with it, the channel is intact.
  REQUIRE(ch.try_send(1));
  auto sender = pool.spawn(owned([&]() -> task<void> { co_await ch.send(2); }));
  REQUIRE(eventually([&] { return ch.waiting_senders() == 1; }));
  CHECK(sender.cancel());
  CHECK_THROWS_AS(sender.get(), canopy::task_cancelled);
  CHECK(ch.waiting_senders() == 0);
  auto only = ch.try_recv();
  REQUIRE(only);
  CHECK(*only == 1);
  CHECK(ch.try_recv().error() == channel_errc::empty);
}

TEST_CASE("a sender woken for room, a receiver woken for a value: ping-pong through capacity 1") {
  watchdog guard("channel ping-pong", 30);
  for (std::size_t workers : {1, 2, 4}) {
    CAPTURE(workers);
    executor pool(config_with(workers));
    channel<int> ping(1);
    channel<int> pong(1);
    constexpr int rounds = 3000;
    auto echo = pool.spawn(canopy::fiber([&] {
      while (std::optional<int> value = canopy::this_fiber::await(ping.recv())) {
        REQUIRE(canopy::this_fiber::await(pong.send(*value + 1)));
      }
    }));
    auto driver = pool.spawn(owned([&]() -> task<long> {
      long total = 0;
      for (int i = 0; i < rounds; ++i) {
        CHECK(co_await ping.send(i));
        total += (co_await pong.recv()).value_or(-1000000);
      }
      ping.close();
      co_return total;
    }));
    CHECK(driver.get() == static_cast<long>(rounds) * (rounds + 1) / 2);
    echo.get();
  }
}

TEST_CASE("oneshot: one value; a sender dropped unsent ends the wait; a dropped receiver refuses") {
  watchdog guard("oneshot", 30);
  executor pool(config_with(2));
  auto [tx, rx] = canopy::oneshot<std::string>();
  auto waiting = pool.spawn(
      owned([&rx = rx]() -> task<std::optional<std::string>> { co_return co_await rx.recv(); }));
  CHECK_FALSE(waiting.wait_for(10ms));
  CHECK(tx.send("answer"));
  CHECK(waiting.get() == "answer");
  auto again = tx.send("twice");
  CHECK(again.error() == channel_errc::closed);
  CHECK(again.value() == "twice");

  auto pair = canopy::oneshot<int>();
  { canopy::oneshot_sender<int> dropped = std::move(pair.sender); }
  auto ended = pool.spawn(canopy::fiber(
      [&rx = pair.receiver] { return canopy::this_fiber::await(rx.recv()).has_value(); }));
  CHECK_FALSE(ended.get());

  auto other = canopy::oneshot<int>();
  { canopy::oneshot_receiver<int> dropped = std::move(other.receiver); }
  auto refused = other.sender.send(3);
  CHECK(refused.error() == channel_errc::closed);
  CHECK(refused.value() == 3);
  CHECK_THROWS_AS(static_cast<void>(other.receiver.recv()), std::logic_error);
}

TEST_CASE("oneshot: a receiver or sender assigned over is gone, as a destroyed one") {
  // Assigning over an end lets go of its channel: the other end must see
  // it gone (a send refused with the value handed back, a wait ended), not
  // a send reported done whose value nobody can ever receive.
  auto first = canopy::oneshot<int>();
  auto second = canopy::oneshot<int>();
  first.receiver = std::move(second.receiver);
  auto refused = first.sender.send(7);
  CHECK(refused.error() == channel_errc::closed);
  CHECK(refused.value() == 7);
  CHECK(second.sender.send(8));
  CHECK(first.receiver.try_recv().value() == 8);

  auto third = canopy::oneshot<int>();
  auto fourth = canopy::oneshot<int>();
  third.sender = std::move(fourth.sender);
  CHECK(third.receiver.try_recv().error() == channel_errc::closed);
  CHECK(third.sender.send(9));
  CHECK(fourth.receiver.try_recv().value() == 9);
}

TEST_CASE("no allocation per message: try forms, and waiting tasks on one worker") {
  watchdog guard("channel allocations", 30);
  channel<long> ch(4);
  canopy::testing::count_allocations(true);
  long total = 0;
  for (long i = 0; i < 1000; ++i) {
    CHECK(ch.try_send(i));
    total += *ch.try_recv();
  }
  canopy::testing::count_allocations(false);
  CHECK(canopy::testing::allocations_counted() == 0);
  CHECK(total == 999L * 1000 / 2);

  executor pool(config_with(1));  // one thread: the count sees both tasks
  channel<long> ping(1);
  channel<long> pong(1);
  auto echo = pool.spawn(owned([&]() -> task<void> {
    while (std::optional<long> value = co_await ping.recv()) {
      co_await pong.send(*value);
    }
  }));
  auto driver = pool.spawn(owned([&]() -> task<long> {
    co_await ping.send(0);  // warm-up: first suspensions
    static_cast<void>(co_await pong.recv());
    canopy::testing::count_allocations(true);
    for (long i = 0; i < 1000; ++i) {
      co_await ping.send(i);
      static_cast<void>(co_await pong.recv());
    }
    canopy::testing::count_allocations(false);
    ping.close();
    co_return canopy::testing::allocations_counted();
  }));
  CHECK(driver.get() == 0);
  echo.get();
}
