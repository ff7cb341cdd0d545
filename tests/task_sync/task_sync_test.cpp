// canopy::mutex, canopy::semaphore and canopy::async_event (<canopy/sync.hpp>):
// coroutine and fiber forms, fairness and mutual exclusion under
// contention over 1, 2 and 4 workers, cancellation of waiters (no permit or
// lock lost, whether the waiter was still queued or had been handed the
// lock already), and the bad-input errors.
#include <doctest/doctest.h>

#include <atomic>
#include <canopy/fiber.hpp>
#include <canopy/sync.hpp>
#include <chrono>
#include <functional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "task_sync/semaphore_core.hpp"
#include "tests/owned_lambda.hpp"
#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"
#include "tests/worker_gate.hpp"

using canopy::executor;
using canopy::task;
using canopy::testing::config_with;
using canopy::testing::eventually;
using canopy::testing::owned;
using canopy::testing::watchdog;
using canopy::testing::worker_gate;
using namespace std::chrono_literals;

TEST_CASE("mutex: mutual exclusion among 64 tasks and fibers over 1, 2 and 4 workers") {
  watchdog guard("mutex contention", 60);
  for (std::size_t workers : {1, 2, 4}) {
    CAPTURE(workers);
    executor pool(config_with(workers));
    canopy::mutex lock;
    long counter = 0;  // guarded by lock
    std::atomic<int> inside{0};
    std::atomic<int> overlaps{0};
    constexpr int rounds = 50;
    auto body = [&]() {
      if (inside.fetch_add(1) != 0) {
        overlaps.fetch_add(1);
      }
      ++counter;
      inside.fetch_sub(1);
    };
    auto worker = [&]() -> task<void> {
      for (int i = 0; i < rounds; ++i) {
        canopy::mutex::guard held = co_await lock.lock();
        CHECK(held.owns_lock());
        body();
        co_await canopy::yield_now();  // hold the lock across a suspension
        body();
      }
    };
    std::vector<canopy::join_handle<void>> handles;
    for (int i = 0; i < 48; ++i) {
      handles.push_back(pool.spawn(worker()));
    }
    for (int i = 0; i < 16; ++i) {
      handles.push_back(pool.spawn(canopy::fiber([&] {
        for (int round = 0; round < rounds; ++round) {
          canopy::mutex::guard held = canopy::this_fiber::await(lock.lock());
          body();
          canopy::this_fiber::yield();
          body();
        }
      })));
    }
    for (auto& handle : handles) {
      handle.get();
    }
    CHECK(counter == 64L * rounds * 2);
    CHECK(overlaps.load() == 0);
    CHECK_FALSE(lock.is_locked());
    CHECK(lock.waiting() == 0);
  }
}

TEST_CASE("mutex: FIFO order among waiters; try_lock fails while held or while others wait") {
  watchdog guard("mutex fifo", 30);
  executor pool(config_with(2));
  canopy::mutex lock;
  canopy::mutex::guard held = lock.try_lock();
  REQUIRE(held.owns_lock());
  CHECK_FALSE(lock.try_lock().owns_lock());
  std::vector<int> order;  // guarded by lock
  std::vector<canopy::join_handle<void>> handles;
  for (int i = 0; i < 5; ++i) {
    handles.push_back(pool.spawn(owned([&, i]() -> task<void> {
      canopy::mutex::guard mine = co_await lock.lock();
      order.push_back(i);
    })));
    REQUIRE(eventually([&] { return lock.waiting() == static_cast<std::size_t>(i + 1); }));
  }
  held.unlock();
  for (auto& handle : handles) {
    handle.get();
  }
  CHECK(order == std::vector<int>{0, 1, 2, 3, 4});
  CHECK_FALSE(lock.is_locked());
}

TEST_CASE("semaphore: at most N holders; acquire n is FIFO; fiber form") {
  watchdog guard("semaphore", 60);
  for (std::size_t workers : {1, 2, 4}) {
    CAPTURE(workers);
    executor pool(config_with(workers));
    canopy::semaphore slots(3, 3);
    std::atomic<int> holders{0};
    std::atomic<int> most{0};
    std::atomic<long> done{0};
    auto hold = [&] {
      const int now = holders.fetch_add(1) + 1;
      int seen = most.load();
      while (now > seen && !most.compare_exchange_weak(seen, now)) {
      }
      holders.fetch_sub(1);
      done.fetch_add(1);
    };
    std::vector<canopy::join_handle<void>> handles;
    for (int i = 0; i < 24; ++i) {
      handles.push_back(pool.spawn(owned([&]() -> task<void> {
        for (int round = 0; round < 40; ++round) {
          co_await slots.acquire();
          hold();
          co_await canopy::yield_now();
          slots.release();
        }
      })));
      handles.push_back(pool.spawn(canopy::fiber([&] {
        for (int round = 0; round < 40; ++round) {
          canopy::this_fiber::await(slots.acquire(2));
          hold();
          canopy::this_fiber::yield();
          slots.release(2);
        }
      })));
    }
    for (auto& handle : handles) {
      handle.get();
    }
    CHECK(done.load() == 48L * 40);
    CHECK(most.load() <= 3);
    CHECK(slots.available() == 3);
    CHECK(slots.waiting() == 0);
  }

  // A request for 3 at the head is not overtaken by later requests for 1.
  executor pool(config_with(2));
  canopy::semaphore permits(0, 10);
  std::vector<int> order;
  std::atomic<int> order_guard{0};
  auto take = [&](std::size_t n, int tag) -> task<void> {
    co_await permits.acquire(n);
    while (order_guard.exchange(1) != 0) {
    }
    order.push_back(tag);
    order_guard.store(0);
  };
  auto big = pool.spawn(take(3, 3));
  REQUIRE(eventually([&] { return permits.waiting() == 1; }));
  auto small = pool.spawn(take(1, 1));
  REQUIRE(eventually([&] { return permits.waiting() == 2; }));
  permits.release(1);
  permits.release(1);
  CHECK_FALSE(small.wait_for(30ms));  // two permits are held for the head
  CHECK_FALSE(permits.try_acquire(1));
  permits.release(1);  // the head has all three now; the one behind waits
  big.get();
  CHECK(permits.waiting() == 1);
  CHECK_FALSE(small.wait_for(10ms));
  permits.release(1);
  small.get();
  CHECK(order == std::vector<int>{3, 1});
  CHECK(permits.available() == 0);
}

TEST_CASE(
    "cancelling a queued waiter loses no permit; a cancelled waiter handed the lock passes it on") {
  watchdog guard("sync cancel", 30);
  executor pool(config_with(1));
  canopy::mutex lock;
  std::atomic<int> got_lock{0};
  auto waiter = [&]() -> task<void> {
    canopy::mutex::guard held = co_await lock.lock();
    got_lock.fetch_add(1);
  };

  // Still queued when cancelled.
  canopy::mutex::guard held = lock.try_lock();
  auto first = pool.spawn(waiter());
  REQUIRE(eventually([&] { return lock.waiting() == 1; }));
  auto second = pool.spawn(waiter());
  REQUIRE(eventually([&] { return lock.waiting() == 2; }));
  CHECK(first.cancel());
  CHECK_THROWS_AS(first.get(), canopy::task_cancelled);
  CHECK(lock.waiting() == 1);
  held.unlock();
  second.get();
  CHECK(got_lock.load() == 1);
  CHECK_FALSE(lock.is_locked());

  // Handed the lock (woken, not yet run) when cancelled: the lock goes on.
  held = lock.try_lock();
  REQUIRE(held.owns_lock());
  auto handed = pool.spawn(waiter());
  REQUIRE(eventually([&] { return lock.waiting() == 1; }));
  auto next = pool.spawn(waiter());
  REQUIRE(eventually([&] { return lock.waiting() == 2; }));
  worker_gate blocker(pool, 1);
  held.unlock();  // grants `handed`, which cannot run: the worker is busy
  CHECK(lock.is_locked());
  CHECK(lock.waiting() == 1);
  CHECK(handed.cancel());
  blocker.open();
  CHECK_THROWS_AS(handed.get(), canopy::task_cancelled);
  next.get();
  CHECK(got_lock.load() == 2);  // `next` got it, `handed` never ran on
  CHECK_FALSE(lock.is_locked());

  // The same for semaphore permits, in a fiber.
  canopy::semaphore permits(0, 4);
  std::atomic<int> acquired{0};
  auto fiber_waiter = [&] {
    canopy::this_fiber::await(permits.acquire(2));
    acquired.fetch_add(1);
    permits.release(2);
  };
  auto granted = pool.spawn(canopy::fiber(fiber_waiter));
  REQUIRE(eventually([&] { return permits.waiting() == 1; }));
  auto behind = pool.spawn(canopy::fiber(fiber_waiter));
  REQUIRE(eventually([&] { return permits.waiting() == 2; }));
  worker_gate again(pool, 1);
  permits.release(2);
  CHECK(granted.cancel());
  again.open();
  CHECK_THROWS_AS(granted.get(), canopy::task_cancelled);
  behind.get();
  CHECK(acquired.load() == 1);
  CHECK(permits.available() == 2);
}

TEST_CASE("async_event: many tasks and fibers wait, set() wakes all, a cancelled waiter leaves") {
  watchdog guard("event", 30);
  executor pool(config_with(2));
  canopy::async_event started;
  std::atomic<int> woken{0};
  std::vector<canopy::join_handle<void>> handles;
  for (int i = 0; i < 8; ++i) {
    handles.push_back(pool.spawn(owned([&]() -> task<void> {
      co_await started;
      woken.fetch_add(1);
    })));
    handles.push_back(pool.spawn(canopy::fiber([&] {
      canopy::this_fiber::await(started);
      woken.fetch_add(1);
    })));
  }
  auto cancelled = pool.spawn(owned([&]() -> task<void> {
    co_await started;
    woken.fetch_add(100);
  }));
  CHECK_FALSE(cancelled.wait_for(20ms));
  CHECK(cancelled.cancel());
  CHECK_THROWS_AS(cancelled.get(), canopy::task_cancelled);
  CHECK(woken.load() == 0);
  started.set();
  for (auto& handle : handles) {
    handle.get();
  }
  CHECK(woken.load() == 16);
}

TEST_CASE("bad input: guard misuse, unlock of an unlocked mutex, too many permits released") {
  canopy::mutex lock;
  CHECK_THROWS_AS(lock.unlock(), std::logic_error);
  canopy::mutex::guard empty;
  CHECK_THROWS_AS(empty.unlock(), std::logic_error);
  canopy::mutex::guard held = lock.try_lock();
  REQUIRE(held);
  held.unlock();
  CHECK_THROWS_WITH_AS(held.unlock(), doctest::Contains("does not hold"), std::logic_error);
  CHECK_THROWS_AS(lock.unlock(), std::logic_error);
  held = lock.try_lock();
  canopy::mutex* owner = held.release();
  CHECK(owner == &lock);
  CHECK(lock.is_locked());
  lock.unlock();
  CHECK_FALSE(lock.is_locked());

  canopy::semaphore permits(2, 2);
  CHECK_THROWS_WITH_AS(permits.release(), doctest::Contains("more permits released"),
                       std::logic_error);
  CHECK(permits.try_acquire(2));
  permits.release(2);
  CHECK_THROWS_AS(permits.release(3), std::logic_error);
  CHECK(permits.available() == 2);
  CHECK_THROWS_AS(static_cast<void>(permits.acquire(3)), std::invalid_argument);
  CHECK_THROWS_AS(canopy::semaphore(3, 2), std::invalid_argument);
  CHECK_THROWS_AS(canopy::semaphore(0, 0), std::invalid_argument);
}

namespace {
// A waker that runs a hook on its first wake: what another thread does
// while a release wakes a full batch with the semaphore's lock dropped.
struct hook_waker {
  std::function<void()>* hook = nullptr;
  void wake() const noexcept {
    if (hook != nullptr && *hook) {
      std::exchange(*hook, nullptr)();
    }
  }
};
}  // namespace

TEST_CASE("semaphore: a release that wakes a full batch keeps permits released meanwhile") {
  using core = canopy::detail::basic_semaphore<hook_waker>;
  core permits(0, 100);
  std::function<void()> hook;
  std::vector<core::waiter> nodes(10);
  for (auto& node : nodes) {
    node.needed = 1;
    REQUIRE(permits.arm(node, hook_waker{&hook}));
  }
  // While release(9) wakes its first batch of 8 (lock dropped), the last
  // two waiters leave (the queue empties) and another thread releases 1
  // permit by the fast path.
  hook = [&] {
    permits.disarm(nodes[8]);
    permits.disarm(nodes[9]);
    permits.release(1);
  };
  permits.release(9);
  for (std::size_t index = 0; index < 8; ++index) {
    CHECK(nodes[index].observed() == canopy::detail::waiter_done);
  }
  CHECK(permits.waiting() == 0);
  CHECK(permits.available() == 2);  // release(9)'s ninth and the other release's one
}
