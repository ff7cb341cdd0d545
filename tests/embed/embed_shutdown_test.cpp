// Embedding after shutdown: the notify descriptor a host loop polls is not
// left readable once the executor has shut down (its run functions return
// 0 for good, so a loop woken by it would spin), however it became readable
// (a spawn no host ran, a post, shutdown's own wake of a host in run()).
#include <doctest/doctest.h>
#include <poll.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "coroutine/coroutine.hpp"
#include "tests/watchdog.hpp"

using canopy::executor;
using canopy::executor_config;
using canopy::testing::watchdog;
using namespace std::chrono_literals;

namespace {

executor_config pool_of(std::size_t workers) {
  executor_config config;
  config.worker_count = workers;
  return config;
}

bool readable(int fd) {
  pollfd entry{fd, POLLIN, 0};
  return ::poll(&entry, 1, 0) == 1 && (entry.revents & POLLIN) != 0;
}

}  // namespace

TEST_CASE("zero workers: a spawn no host ran, then shutdown from another thread: not readable") {
  watchdog guard("descriptor after shutdown", 30);
  for (const auto policy :
       {canopy::shutdown_policy::drain, canopy::shutdown_policy::cancel_pending}) {
    executor_config config = pool_of(0);
    config.on_shutdown = policy;
    executor pool(config);
    std::atomic<int> ran{0};
    pool.spawn_detached([&] { ran.fetch_add(1); });
    REQUIRE(readable(pool.notify_fd()));  // the host has work
    std::thread([&] { pool.shutdown(); }).join();
    CHECK(ran.load() == (policy == canopy::shutdown_policy::drain ? 1 : 0));
    CHECK_FALSE(readable(pool.notify_fd()));
    CHECK(pool.run_until_idle() == 0);
    CHECK(pool.run_for(1ms) == 0);
    CHECK_FALSE(readable(pool.notify_fd()));
  }
}

TEST_CASE("owned workers: a post no host ran, then shutdown: not readable") {
  watchdog guard("descriptor after shutdown, owned workers", 30);
  executor pool(pool_of(1));
  std::atomic<int> ran{0};
  pool.post([&] { ran.fetch_add(1); });
  REQUIRE(readable(pool.notify_fd()));
  pool.shutdown();
  CHECK(ran.load() == 1);  // drained by shutdown
  CHECK_FALSE(readable(pool.notify_fd()));
  CHECK(pool.run_once() == 0);
  CHECK_FALSE(readable(pool.notify_fd()));
}

TEST_CASE("a level-triggered epoll loop around run_until_idle sleeps once the executor shut down") {
  watchdog guard("epoll loop after shutdown", 30);
  executor pool(pool_of(0));
  const int loop = ::epoll_create1(EPOLL_CLOEXEC);
  REQUIRE(loop >= 0);
  epoll_event interest{};
  interest.events = EPOLLIN;
  interest.data.fd = pool.notify_fd();
  REQUIRE(::epoll_ctl(loop, EPOLL_CTL_ADD, pool.notify_fd(), &interest) == 0);
  std::atomic<bool> stop{false};
  std::atomic<bool> shut{false};
  std::atomic<int> wakes_after_shutdown{0};
  std::thread host([&] {
    while (!stop.load()) {
      epoll_event events[4];
      if (::epoll_wait(loop, events, 4, 5) > 0) {
        if (shut.load()) {
          wakes_after_shutdown.fetch_add(1);
        }
        pool.run_until_idle();
      }
    }
  });
  for (int index = 0; index < 100; ++index) {
    pool.spawn_detached([] {});
  }
  pool.shutdown();
  shut.store(true);
  std::this_thread::sleep_for(50ms);
  stop.store(true);
  host.join();
  ::close(loop);
  // At most the wake that was already on its way when shutdown ended; a
  // descriptor left readable wakes the loop thousands of times.
  CHECK(wakes_after_shutdown.load() <= 1);
}
