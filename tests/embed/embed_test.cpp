// Embedding (issue 16): the host thread runs tasks (run_once, run_for,
// run_until_idle, run), the notify descriptor, post() and resume_on_host(),
// and Canopy inside a plain epoll server loop.
#include <dirent.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <vector>

#include "coroutine/coroutine.hpp"
#include "fiber/fiber.hpp"
#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

using canopy::executor;
using canopy::executor_config;
using canopy::task;
using canopy::testing::eventually;
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

std::size_t open_descriptors() {
  std::size_t count = 0;
  if (DIR* listing = ::opendir("/proc/self/fd")) {
    while (::readdir(listing) != nullptr) {
      ++count;
    }
    ::closedir(listing);
  }
  return count;
}

// The calling thread's id, by a system call: inside a coroutine, clang may
// reuse a std::this_thread::get_id() (pthread_self, declared const) read
// before a co_await after the coroutine moved to another thread.
long thread_id() { return ::syscall(SYS_gettid); }

task<void> offload_then_return(long host, std::atomic<int>& on_worker,
                               std::atomic<int>& back_on_host) {
  if (thread_id() != host) {
    on_worker.fetch_add(1);
  }
  co_await canopy::resume_on_host();
  if (thread_id() == host) {
    back_on_host.fetch_add(1);
  }
}

}  // namespace

TEST_CASE("zero workers: run_once runs one ready task at a time, on the calling thread") {
  watchdog guard("zero workers run_once", 30);
  executor pool(pool_of(0));
  CHECK(pool.worker_count() == 0);
  CHECK_FALSE(readable(pool.notify_fd()));
  CHECK(pool.run_once() == 0);

  const std::thread::id host = std::this_thread::get_id();
  std::atomic<int> ran{0};
  std::atomic<int> elsewhere{0};
  constexpr int tasks = 100;
  for (int index = 0; index < tasks; ++index) {
    pool.spawn_detached([&] {
      ran.fetch_add(1);
      if (std::this_thread::get_id() != host) {
        elsewhere.fetch_add(1);
      }
    });
  }
  CHECK(ran.load() == 0);  // nothing runs until the host runs it
  CHECK(readable(pool.notify_fd()));
  for (int index = 1; index <= tasks; ++index) {
    REQUIRE(pool.run_once() == 1);
    CHECK(ran.load() == index);
    // Work left: the descriptor stays readable; none left: it is cleared.
    CHECK(readable(pool.notify_fd()) == (index < tasks));
  }
  CHECK(pool.run_once() == 0);
  CHECK(elsewhere.load() == 0);
  CHECK(pool.stats().host.tasks_run == tasks);
  CHECK(pool.stats().live_tasks == 0);
}

TEST_CASE("zero workers: a task spawned by a task, and a coroutine's wake, all run on the host") {
  watchdog guard("zero workers nested", 30);
  executor pool(pool_of(0));
  canopy::async_event event;
  std::atomic<int> steps{0};
  auto waiter = [&]() -> task<int> {
    steps.fetch_add(1);
    co_await event;
    steps.fetch_add(1);
    auto child = canopy::spawn([]() -> task<int> { co_return 20; }());
    co_return 1 + co_await child;
  };
  auto handle = pool.spawn(waiter());
  CHECK(pool.run_until_idle() >= 1);
  CHECK(steps.load() == 1);
  CHECK_FALSE(readable(pool.notify_fd()));
  std::thread setter([&] { event.set(); });  // a wake from a thread the executor does not know
  setter.join();
  CHECK(readable(pool.notify_fd()));
  CHECK(pool.run_until_idle() >= 1);  // the child runs at the join, nested in its parent
  REQUIRE(handle.ready());
  CHECK(handle.get() == 21);
}

TEST_CASE("zero workers: run_for sleeps on the descriptor until another thread spawns") {
  watchdog guard("zero workers run_for", 30);
  executor pool(pool_of(0));
  std::atomic<bool> ran{false};
  std::thread spawner([&] {
    std::this_thread::sleep_for(20ms);
    pool.spawn_detached([&] { ran.store(true); });
  });
  std::size_t runs = 0;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!ran.load() && std::chrono::steady_clock::now() < deadline) {
    runs += pool.run_for(50ms);
  }
  spawner.join();
  CHECK(ran.load());
  CHECK(runs == 1);
  // And run_for with nothing to do returns after its time, having run nothing.
  const auto started = std::chrono::steady_clock::now();
  CHECK(pool.run_for(30ms) == 0);
  CHECK(std::chrono::steady_clock::now() - started >= 30ms);
  CHECK(pool.run_until(std::chrono::steady_clock::time_point::min()) == 0);
  // A deadline beyond the clock's range waits without a limit (no
  // overflow): the task runs, and shutdown() ends the wait.
  std::atomic<bool> late{false};
  std::thread other([&] {
    std::this_thread::sleep_for(20ms);
    pool.spawn_detached([&] { late.store(true); });
    while (!late.load()) {
      std::this_thread::sleep_for(1ms);
    }
    pool.shutdown();
  });
  CHECK(pool.run_for(std::chrono::nanoseconds::max()) == 1);
  other.join();
  CHECK(late.load());
}

TEST_CASE("zero workers: join() and wait_for() run the executor on the joining thread") {
  watchdog guard("zero workers join", 30);
  executor pool(pool_of(0));
  const long host = thread_id();
  // A task that spawns and awaits a child: get() must run both here.
  auto parent = [&]() -> task<long> {
    auto child = canopy::spawn([]() -> task<long> { co_return thread_id(); }());
    co_return co_await child;
  };
  auto handle = pool.spawn(parent());
  CHECK(handle.get() == host);
  CHECK(pool.stats().host.tasks_run >= 2);

  // wait_for on a task that waits for an event nobody sets: runs what is
  // ready, then gives up at the deadline instead of hanging.
  canopy::async_event never;
  std::atomic<bool> started{false};
  auto sleeper_body = [&]() -> task<void> {
    started.store(true);
    co_await never;
  };
  auto sleeper = pool.spawn(sleeper_body());
  CHECK_FALSE(sleeper.wait_for(std::chrono::milliseconds(20)));
  CHECK(started.load());
  // A wake from another thread reaches the joiner blocked on the descriptor.
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    never.set();
  });
  sleeper.get();
  setter.join();

  // Another thread drives the executor at the same time: whichever holds
  // the host role runs the task, and get() returns either way.
  auto plain = pool.spawn([] { return 7; });
  std::atomic<bool> host_done{false};
  std::thread other_host([&] {
    while (!host_done.load()) {
      pool.run_for(std::chrono::milliseconds(1));
    }
  });
  CHECK(plain.get() == 7);
  host_done.store(true);
  other_host.join();
}

TEST_CASE("zero workers: a run function waits while join() on another thread drives the executor") {
  // The joiner borrows the host role (it runs every task until its own is
  // ready). The loop thread's run functions do not fail for that: run_once
  // and run_until_idle return 0, run_for waits for the role within its time.
  watchdog guard("host borrowed by a joiner", 60);
  executor pool(pool_of(0));
  canopy::async_event go;
  std::atomic<bool> started{false};
  std::atomic<pid_t> ran_on{0};
  auto body = [&]() -> task<int> {
    ran_on.store(static_cast<pid_t>(::syscall(SYS_gettid)));
    started.store(true);
    co_await go;
    co_return 5;
  };
  auto handle = pool.spawn(body());
  std::size_t once = 1;
  std::size_t idle = 1;
  std::size_t timed = 1;
  bool threw = false;
  std::thread loop([&] {
    const bool joiner_hosts = eventually([&] { return started.load(); });  // it holds the role
    CHECK(joiner_hosts);
    try {
      once = pool.run_once();
      idle = pool.run_until_idle();
      const auto before = std::chrono::steady_clock::now();
      timed = pool.run_for(30ms);
      CHECK(std::chrono::steady_clock::now() - before >= 30ms);
    } catch (const std::system_error&) {
      threw = true;
    }
    go.set();
  });
  CHECK(handle.get() == 5);
  loop.join();
  CHECK_FALSE(threw);
  CHECK(once == 0);
  CHECK(idle == 0);
  CHECK(timed == 0);
  CHECK(ran_on.load() == static_cast<pid_t>(::syscall(SYS_gettid)));  // the joining thread
  // The role is free again: the loop thread's run functions run tasks.
  std::atomic<int> runs{0};
  pool.spawn_detached([&] { runs.fetch_add(1); });
  std::thread later([&] { CHECK(pool.run_until_idle() == 1); });
  later.join();
  CHECK(runs.load() == 1);
}

TEST_CASE("zero workers: a joiner whose task is left when another joiner stops driving runs it") {
  // A joins a and drives the executor; B joins b meanwhile. a ends first and
  // A hands the role back with b still waiting: B must take the role and
  // run b, not sleep until something else drives the executor.
  watchdog guard("two joiners", 60);
  executor pool(pool_of(0));
  canopy::async_event a_go;
  canopy::async_event b_go;
  std::atomic<int> started{0};
  auto waiter = [&](canopy::async_event& event, int value) -> task<int> {
    started.fetch_add(1);
    co_await event;
    co_return value;
  };
  auto a = pool.spawn(waiter(a_go, 1));
  auto b = pool.spawn(waiter(b_go, 2));
  std::atomic<bool> a_joined{false};
  std::thread joiner_a([&] {
    CHECK(a.get() == 1);
    a_joined.store(true);
  });
  REQUIRE(eventually([&] { return started.load() == 2; }));  // A drives: it ran both
  std::atomic<int> b_value{0};
  std::thread joiner_b([&] { b_value.store(b.get()); });
  std::this_thread::sleep_for(5ms);  // B is in join() (it waits with the role held by A)
  a_go.set();
  REQUIRE(eventually([&] { return a_joined.load(); }));
  joiner_a.join();
  b_go.set();  // b is ready again; only B can run it now
  CHECK(eventually([&] { return b_value.load() == 2; }));
  joiner_b.join();
}

TEST_CASE("notify descriptor in an epoll set: a spawn from another thread wakes epoll_wait") {
  watchdog guard("notify fd epoll", 60);
  executor pool(pool_of(0));
  const int poller = ::epoll_create1(EPOLL_CLOEXEC);
  REQUIRE(poller >= 0);
  epoll_event interest{};
  interest.events = EPOLLIN;
  interest.data.fd = pool.notify_fd();
  REQUIRE(::epoll_ctl(poller, EPOLL_CTL_ADD, pool.notify_fd(), &interest) == 0);
  const int rounds = static_cast<int>(20000 / canopy::testing::stress_divisor());
  std::atomic<int> done{0};
  std::atomic<int> spawned{0};
  std::thread spawner([&] {
    // One task at a time, each spawned just as the host may be deciding to
    // block: every one must make the descriptor readable.
    for (int round = 0; round < rounds; ++round) {
      while (done.load() != round) {
        std::this_thread::yield();
      }
      pool.spawn_detached([&] { done.fetch_add(1); });
      spawned.fetch_add(1);
    }
  });
  int wakeups = 0;
  while (done.load() < rounds) {
    epoll_event event{};
    const int ready = ::epoll_wait(poller, &event, 1, 10000);
    REQUIRE(ready == 1);  // a lost wake-up would time out here
    ++wakeups;
    pool.run_until_idle();
  }
  spawner.join();
  ::close(poller);
  CHECK(done.load() == rounds);
  CHECK(wakeups <= rounds + 1);
}

TEST_CASE("owned workers: post() and resume_on_host() continue on the loop thread") {
  watchdog guard("post and resume_on_host", 60);
  executor pool(pool_of(2));
  const std::thread::id host = std::this_thread::get_id();
  const long host_tid = thread_id();
  std::atomic<int> on_worker{0};
  std::atomic<int> back_on_host{0};
  std::atomic<int> posted_on_host{0};
  std::atomic<int> fibers_back{0};
  const int tasks = static_cast<int>(2000 / canopy::testing::stress_divisor()) + 10;
  for (int index = 0; index < tasks; ++index) {
    pool.spawn_detached(offload_then_return(host_tid, on_worker, back_on_host));
    pool.spawn_detached([&] {
      pool.post([&] {
        if (std::this_thread::get_id() == host) {
          posted_on_host.fetch_add(1);
        }
      });
    });
  }
  for (int index = 0; index < 10; ++index) {
    pool.spawn_detached(canopy::fiber([&] {
      canopy::this_fiber::resume_on_host();
      if (std::this_thread::get_id() == host) {
        fibers_back.fetch_add(1);
      }
    }));
  }
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (
      (back_on_host.load() < tasks || posted_on_host.load() < tasks || fibers_back.load() < 10) &&
      std::chrono::steady_clock::now() < deadline) {
    pool.run_for(5ms);
  }
  CHECK(back_on_host.load() == tasks);
  CHECK(posted_on_host.load() == tasks);
  CHECK(fibers_back.load() == 10);
  CHECK(on_worker.load() == tasks);  // run_for runs only what is pinned to the host
  CHECK(pool.stats().host.tasks_run >= static_cast<std::uint64_t>(2 * tasks + 10));
}

TEST_CASE("a task spawned on the host is not stranded when the host stops running") {
  watchdog guard("host LIFO handed over", 30);
  executor pool(pool_of(1));
  std::atomic<bool> child_ran{false};
  pool.post([&] { pool.spawn_detached([&] { child_ran.store(true); }); });
  // The child lands in the host's LIFO slot; run_once returns right after
  // the parent, and the worker must get the child without the host.
  CHECK(pool.run_once() == 1);
  CHECK(eventually([&] { return child_ran.load(); }));
}

TEST_CASE("run functions: errors name the problem") {
  watchdog guard("host errors", 30);
  SUBCASE("from a task of the same executor") {
    executor pool(pool_of(1));
    auto code = pool.spawn([&] {
      try {
        pool.run_once();
      } catch (const std::system_error& error) {
        return error.code();
      }
      return std::error_code();
    });
    CHECK(code.get() == canopy::errc::worker_thread);
  }
  SUBCASE("while another thread is the host") {
    executor pool(pool_of(0));
    std::atomic<bool> inside{false};
    std::atomic<bool> release{false};
    pool.spawn_detached([&] {
      inside.store(true);
      while (!release.load()) {
        std::this_thread::yield();
      }
    });
    std::thread host([&] { pool.run_once(); });
    REQUIRE(eventually([&] { return inside.load(); }));
    std::error_code seen;
    try {
      pool.run_until_idle();
    } catch (const std::system_error& error) {
      seen = error.code();
      CHECK(std::string(error.what()).find("host") != std::string::npos);
    }
    release.store(true);
    host.join();
    CHECK(seen == canopy::errc::host_busy);
  }
  SUBCASE("after shutdown") {
    executor pool(pool_of(0));
    pool.shutdown();
    CHECK(pool.run_once() == 0);
    CHECK(pool.run_for(1ms) == 0);
    CHECK_THROWS_AS(pool.post([] {}), canopy::spawn_error);
  }
  SUBCASE("worker_count 0 with an idle driver") {
    struct never_driver final : canopy::ext::idle_driver {
      bool wait() noexcept override { return false; }
      void notify() noexcept override {}
      std::size_t dispatch() noexcept override { return 0; }
    };
    executor_config config = pool_of(0);
    config.driver = std::make_shared<never_driver>();
    CHECK_THROWS_WITH_AS(executor{config}, doctest::Contains("worker_count"),
                         std::invalid_argument);
  }
}

TEST_CASE("run() makes the host a worker until shutdown; shutdown runs what is pinned") {
  watchdog guard("run until shutdown", 60);
  std::atomic<int> on_host{0};
  std::atomic<int> drained{0};
  const std::size_t descriptors = open_descriptors();
  {
    executor pool(pool_of(1));
    std::atomic<std::size_t> host_runs{0};
    std::thread host([&] { host_runs.store(pool.run()); });
    for (int index = 0; index < 100; ++index) {
      pool.post([&] { on_host.fetch_add(1); });
    }
    REQUIRE(eventually([&] { return on_host.load() == 100; }));
    pool.shutdown();  // run() returns once shutdown begins
    host.join();
    CHECK(host_runs.load() >= 100);
    // Posted after the host left and before the executor is gone: refused.
    CHECK_THROWS_AS(pool.post([&] { drained.fetch_add(1); }), canopy::spawn_error);
  }
  {
    // The loop thread ended first: shutdown runs the posted tasks itself.
    executor pool(pool_of(1));
    for (int index = 0; index < 50; ++index) {
      pool.post([&] { drained.fetch_add(1); });
    }
  }
  CHECK(drained.load() == 50);
  {
    // cancel_pending: posted tasks nobody ran are dropped, destructors run.
    executor_config config = pool_of(1);
    config.on_shutdown = canopy::shutdown_policy::cancel_pending;
    std::atomic<int> destroyed{0};
    std::atomic<int> ran{0};
    executor pool(config);
    for (int index = 0; index < 20; ++index) {
      pool.post([&ran, flag = std::make_shared<canopy::testing::destroy_flag>(destroyed)] {
        ran.fetch_add(1);
      });
    }
    pool.shutdown();
    CHECK(ran.load() == 0);
    CHECK(destroyed.load() == 20);
    CHECK(pool.stats().dropped_tasks == 20);
  }
  CHECK(open_descriptors() == descriptors);  // every notify descriptor closed
}

// ------------------------------------------------- an epoll server loop

namespace {

void write_all(int fd, const void* data, std::size_t size) {
  const auto* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t written = ::send(fd, bytes, size, MSG_NOSIGNAL);
    if (written < 0 && errno == EINTR) {
      continue;
    }
    REQUIRE(written > 0);
    bytes += written;
    size -= static_cast<std::size_t>(written);
  }
}

bool read_all(int fd, void* data, std::size_t size) {
  auto* bytes = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t got = ::recv(fd, bytes, size, 0);
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got <= 0) {
      return false;
    }
    bytes += got;
    size -= static_cast<std::size_t>(got);
  }
  return true;
}

}  // namespace

TEST_CASE("Canopy embedded in a plain epoll server loop: every hand-off comes back") {
  watchdog guard("epoll server loop", 240);
  executor pool(pool_of(2));
  const long requests = 100000 / canopy::testing::stress_divisor();

  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(listener >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  socklen_t length = sizeof address;
  REQUIRE(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) == 0);
  REQUIRE(::listen(listener, 4) == 0);

  std::atomic<long> wrong_replies{0};
  std::thread client([&] {
    const int connection = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(::connect(connection, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    const int on = 1;
    ::setsockopt(connection, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    for (std::uint64_t request = 0; request < static_cast<std::uint64_t>(requests); ++request) {
      write_all(connection, &request, sizeof request);
      std::uint64_t reply = 0;
      if (!read_all(connection, &reply, sizeof reply)) {
        wrong_replies.fetch_add(1);
        break;
      }
      if (reply != request * 3 + 1) {
        wrong_replies.fetch_add(1);
      }
    }
    ::close(connection);
  });

  // The loop: accept, read requests, hand each to Canopy's workers, write
  // the replies on this thread when Canopy posts them back.
  const std::thread::id loop_thread = std::this_thread::get_id();
  const int poller = ::epoll_create1(EPOLL_CLOEXEC);
  auto watch = [&](int fd) {
    epoll_event interest{};
    interest.events = EPOLLIN;
    interest.data.fd = fd;
    REQUIRE(::epoll_ctl(poller, EPOLL_CTL_ADD, fd, &interest) == 0);
  };
  watch(listener);
  watch(pool.notify_fd());
  int connection = -1;
  long replies_written = 0;
  long off_loop_writes = 0;
  long on_worker = 0;
  std::atomic<long> computed_on_worker{0};
  bool client_closed = false;
  while (!client_closed) {
    epoll_event events[4];
    const int ready = ::epoll_wait(poller, events, 4, 20000);
    REQUIRE(ready > 0);  // a lost hand-off would leave the client and us both waiting
    for (int index = 0; index < ready; ++index) {
      const int fd = events[index].data.fd;
      if (fd == listener) {
        connection = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
        REQUIRE(connection >= 0);
        const int on = 1;
        ::setsockopt(connection, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
        watch(connection);
      } else if (fd == pool.notify_fd()) {
        pool.run_until_idle();
      } else {
        std::uint64_t request = 0;
        if (!read_all(connection, &request, sizeof request)) {
          client_closed = true;
          continue;
        }
        pool.spawn_detached([&, request] {
          if (canopy::detail::current_worker() != nullptr) {
            computed_on_worker.fetch_add(1);
          }
          const std::uint64_t reply = request * 3 + 1;
          pool.post([&, reply] {
            if (std::this_thread::get_id() != loop_thread) {
              ++off_loop_writes;
            }
            write_all(connection, &reply, sizeof reply);
            ++replies_written;
          });
        });
      }
    }
  }
  client.join();
  on_worker = computed_on_worker.load();
  ::close(connection);
  ::close(listener);
  ::close(poller);
  CHECK(wrong_replies.load() == 0);
  CHECK(replies_written == requests);
  CHECK(off_loop_writes == 0);
  CHECK(on_worker == requests);
  MESSAGE("epoll loop: " << requests << " hand-offs, host runs " << pool.stats().host.tasks_run);
}
