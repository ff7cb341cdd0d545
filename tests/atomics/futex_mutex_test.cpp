// atomics::futex_mutex on real threads (atomics/futex_mutex.hpp). The model check
// and Relacy cases (tests/model/, tests/relacy/) explore two and three
// lockers exhaustively or at random; these run more threads than cores,
// so the spin gives up and lockers sleep on the futex, and a holder that
// sleeps under the lock (as reactor::add does across epoll_ctl) sends every
// other locker to the futex. A lost wake-up shows as the watchdog's
// timeout, a broken exclusion as a wrong count.
#include "atomics/futex_mutex.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "tests/watchdog.hpp"

namespace {

// Plain counters guarded by the mutex: two holders at once lose updates
// (and ThreadSanitizer reports the race).
struct guarded {
  canopy::detail::atomics::futex_mutex mutex;
  long count = 0;
  long inside = 0;
  long overlaps = 0;
};

void hold(guarded& shared, bool sleep_inside) {
  const std::lock_guard lock(shared.mutex);
  shared.overlaps += shared.inside++ != 0 ? 1 : 0;
  if (sleep_inside) {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  ++shared.count;
  --shared.inside;
}

}  // namespace

TEST_CASE("futex_mutex: six threads on two cores, every increment kept, no two holders") {
  canopy::testing::watchdog guard("futex_mutex contention", 120);
  guarded shared;
  const long per_thread = 100000 / canopy::testing::stress_divisor();
  constexpr int threads = 6;
  std::vector<std::thread> lockers;
  std::atomic<bool> go{false};
  for (int i = 0; i < threads; ++i) {
    lockers.emplace_back([&shared, &go, per_thread, i] {
      while (!go.load(std::memory_order_acquire)) {
        std::this_thread::yield();
      }
      for (long round = 0; round < per_thread; ++round) {
        // Every 500th hold sleeps, in each thread and at different
        // rounds: the others spin out and reach the futex all along.
        hold(shared, (round + i * 83) % 500 == 0);
      }
    });
  }
  go.store(true, std::memory_order_release);
  for (std::thread& one : lockers) {
    one.join();
  }
  CHECK(shared.overlaps == 0);
  CHECK(shared.count == threads * per_thread);
  CHECK(shared.mutex.try_lock());
  shared.mutex.unlock();
}

TEST_CASE("futex_mutex: try_lock fails while held and succeeds after unlock") {
  canopy::detail::atomics::futex_mutex mutex;
  mutex.lock();
  bool taken_elsewhere = true;
  std::thread other([&] { taken_elsewhere = mutex.try_lock(); });
  other.join();
  CHECK_FALSE(taken_elsewhere);
  mutex.unlock();
  CHECK(mutex.try_lock());
  mutex.unlock();
}
