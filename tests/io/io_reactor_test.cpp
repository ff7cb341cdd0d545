// canopy::io reactor: registration errors, readiness waits for tasks and
// fibers, removal during a wait, generations, callbacks, and the poller
// (a parked worker in epoll_wait; polling while every worker is busy).
// Every case checks that no descriptor leaks (/proc/self/fd).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <system_error>
#include <thread>

#include "coroutine/coroutine.hpp"
#include "fiber/fiber.hpp"
#include "io/fiber/fiber_io.hpp"
#include "executor/core_access.hpp"
#include "io/io.hpp"
#include "tests/io_test_support.hpp"
#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

using canopy::executor;
using canopy::task;
using canopy::io::interest;
using canopy::io::reactor;
using canopy::io::registration;
using canopy::testing::eventually;
using canopy::testing::io_config;
using canopy::testing::open_fd_count;

namespace {

struct pipe_pair {
  int read_end = -1;
  int write_end = -1;
  pipe_pair() {
    int fds[2];
    REQUIRE(::pipe2(fds, O_NONBLOCK | O_CLOEXEC) == 0);
    read_end = fds[0];
    write_end = fds[1];
  }
  pipe_pair(const pipe_pair&) = delete;
  pipe_pair& operator=(const pipe_pair&) = delete;
  ~pipe_pair() {
    if (read_end >= 0) {
      ::close(read_end);
    }
    if (write_end >= 0) {
      ::close(write_end);
    }
  }
  void put(char byte = 'x') const { REQUIRE(::write(write_end, &byte, 1) == 1); }
  std::size_t drain() const {
    std::size_t total = 0;
    char buffer[256];
    for (;;) {
      const ssize_t got = ::read(read_end, buffer, sizeof buffer);
      if (got <= 0) {
        return total;
      }
      total += static_cast<std::size_t>(got);
    }
  }
};

double process_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
}

}  // namespace

TEST_CASE("registering an invalid, closed or already registered descriptor gives a clear error") {
  const std::size_t fds_before = open_fd_count();
  {
    reactor owner;
    std::error_code error;
    owner.add(-1, interest::readable, error);
    CHECK(error == std::errc::bad_file_descriptor);

    int closed = -1;
    {
      pipe_pair pipe;
      closed = pipe.read_end;
    }
    owner.add(closed, interest::readable, error);
    CHECK(error == std::errc::bad_file_descriptor);

    pipe_pair pipe;
    registration first(owner, pipe.read_end, interest::readable, error);
    REQUIRE_FALSE(error);
    CHECK(first.valid());
    registration second(owner, pipe.read_end, interest::readable, error);
    CHECK(error == std::errc::file_exists);
    CHECK_FALSE(second.valid());
    // The throwing form names the descriptor.
    try {
      registration third(owner, pipe.read_end, interest::both);
      FAIL("a second registration of the same descriptor must throw");
    } catch (const std::system_error& failure) {
      CHECK(failure.code() == std::errc::file_exists);
      CHECK(std::string(failure.what()).find(std::to_string(pipe.read_end)) != std::string::npos);
    }

    // epoll cannot watch a regular file.
    std::FILE* file = std::tmpfile();
    REQUIRE(file != nullptr);
    owner.add(fileno(file), interest::readable, error);
    CHECK(error == std::errc::operation_not_permitted);
    std::fclose(file);
  }
  CHECK(open_fd_count() == fds_before);
}

TEST_CASE("readiness waits: one-shot and registered, in tasks and in fibers") {
  const canopy::testing::watchdog guard("readiness waits", 60);
  const std::size_t fds_before = open_fd_count();
  {
    executor pool(io_config(2));
    pipe_pair pipe;
    std::atomic<bool> waiting{false};
    auto one_shot = pool.spawn([](int fd, std::atomic<bool>* waiting) -> task<std::error_code> {
      waiting->store(true);
      co_return co_await canopy::io::readable(fd);
    }(pipe.read_end, &waiting));
    REQUIRE(eventually([&] { return waiting.load(); }));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    CHECK_FALSE(one_shot.ready());
    pipe.put();
    CHECK_FALSE(one_shot.get());
    CHECK(pipe.drain() == 1);

    // A registered descriptor: the wait source on a registration.
    registration reg(reactor::of(pool), pipe.read_end, interest::readable);
    auto registered = pool.spawn([](registration* reg, pipe_pair* pipe) -> task<std::size_t> {
      std::size_t total = 0;
      while (total < 3) {
        const std::uint64_t tick = reg->tick(canopy::io::direction::read);
        const std::size_t got = pipe->drain();
        if (got == 0) {
          reg->clear_ready(canopy::io::direction::read, tick);
          const std::error_code error = co_await canopy::io::readable(*reg);
          REQUIRE_FALSE(error);
        }
        total += got;
      }
      co_return total;
    }(&reg, &pipe));
    for (int index = 0; index < 3; ++index) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      pipe.put();
    }
    CHECK(registered.get() == 3);
    reg.reset();

    // Fibers: the same waits as blocking calls.
    auto fiber = pool.spawn(canopy::fiber([&pipe] {
      const std::error_code error = canopy::this_fiber::readable(pipe.read_end);
      return !error && pipe.drain() == 1;
    }));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    pipe.put();
    CHECK(fiber.get());

    // One-shot on a descriptor that is already registered: a clear error.
    registration again(reactor::of(pool), pipe.read_end, interest::readable);
    auto twice = pool.spawn([](int fd) -> task<std::error_code> {
      co_return co_await canopy::io::readable(fd);
    }(pipe.read_end));
    CHECK(twice.get() == std::errc::file_exists);
  }
  CHECK(open_fd_count() == fds_before);
}

TEST_CASE("removing a registration while a task waits ends the wait with operation_canceled") {
  const canopy::testing::watchdog guard("remove while waiting", 60);
  const std::size_t fds_before = open_fd_count();
  {
    executor pool(io_config(2));
    pipe_pair pipe;
    registration reg(reactor::of(pool), pipe.read_end, interest::readable);
    reg.clear_ready(canopy::io::direction::read, reg.tick(canopy::io::direction::read));
    std::atomic<bool> waiting{false};
    auto waiter =
        pool.spawn([](registration* reg, std::atomic<bool>* waiting) -> task<std::error_code> {
          waiting->store(true);
          co_return co_await canopy::io::readable(*reg);
        }(&reg, &waiting));
    REQUIRE(eventually([&] { return waiting.load(); }));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    reg.reset();
    CHECK(waiter.get() == std::errc::operation_canceled);

    // The slot is reused with a new generation: the old id is stale.
    reactor& owner = reactor::of(pool);
    std::error_code error;
    const reactor::registration_id first = owner.add(pipe.read_end, interest::readable, error);
    REQUIRE_FALSE(error);
    owner.remove(first);
    const reactor::registration_id second =
        owner.add(pipe.read_end, interest::readable, error, false);
    REQUIRE_FALSE(error);
    CHECK(second.slot == first.slot);
    CHECK(second.generation != first.generation);
    pipe.put();
    CHECK(eventually([&] {
      return owner.peek(second, canopy::io::direction::read) ==
             canopy::io::detail::wait_status::ready;
    }));
    CHECK(owner.peek(first, canopy::io::direction::read) ==
          canopy::io::detail::wait_status::closed);
    owner.remove(first);  // stale: a no-op that leaves `second` registered
    CHECK(owner.peek(second, canopy::io::direction::read) ==
          canopy::io::detail::wait_status::ready);
    owner.remove(second);
  }
  CHECK(open_fd_count() == fds_before);
}

TEST_CASE("callbacks: run on readiness edges, never two at once, never after close") {
  const canopy::testing::watchdog guard("callbacks", 60);
  const std::size_t fds_before = open_fd_count();
  {
    executor pool(io_config(3));
    pipe_pair pipe;
    std::atomic<int> inside{0};
    std::atomic<int> overlaps{0};
    std::atomic<int> runs{0};
    std::atomic<std::size_t> bytes{0};
    canopy::io::callback_registration watch(
        pool, pipe.read_end, interest::readable, [&](std::uint32_t events) {
          if (inside.fetch_add(1) != 0) {
            overlaps.fetch_add(1);
          }
          CHECK((events & EPOLLIN) != 0);
          runs.fetch_add(1);
          std::this_thread::sleep_for(std::chrono::microseconds(200));
          bytes.fetch_add(pipe.drain());
          inside.fetch_sub(1);
        });
    const int writes = 200;
    std::thread writer([&] {
      for (int index = 0; index < writes; ++index) {
        pipe.put();
        if (index % 8 == 0) {
          std::this_thread::sleep_for(std::chrono::microseconds(300));
        }
      }
    });
    writer.join();
    CHECK(eventually([&] { return bytes.load() == static_cast<std::size_t>(writes); }));
    CHECK(overlaps.load() == 0);
    CHECK(runs.load() >= 1);
    CHECK(runs.load() <= writes);
    watch.close();
    const int runs_at_close = runs.load();
    pipe.put();
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    CHECK(runs.load() == runs_at_close);
    CHECK(pipe.drain() == 1);
  }
  CHECK(open_fd_count() == fds_before);
}

TEST_CASE("readiness is delivered while every worker is busy (polled every 61 tasks)") {
  const canopy::testing::watchdog guard("busy poll", 60);
  const std::size_t fds_before = open_fd_count();
  {
    executor pool(io_config(1));
    pipe_pair pipe;
    std::atomic<bool> done{false};
    std::atomic<bool> waiting{false};
    // The only worker never runs out of work while `spinner` yields.
    auto spinner = pool.spawn([](std::atomic<bool>* done) -> task<long> {
      long rounds = 0;
      while (!done->load()) {
        co_await canopy::yield_now();
        ++rounds;
      }
      co_return rounds;
    }(&done));
    auto reader = pool.spawn(
        [](int fd, std::atomic<bool>* done, std::atomic<bool>* waiting) -> task<std::error_code> {
          waiting->store(true);
          const std::error_code error = co_await canopy::io::readable(fd);
          done->store(true);
          co_return error;
        }(pipe.read_end, &done, &waiting));
    REQUIRE(eventually([&] { return waiting.load(); }));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    // No count of polls is asserted: epoll's counter moves as a poll
    // starts, so the poll that sees the byte may have been counted before
    // the put, and io_uring reaps its ring without a counted poll.
    pipe.put();
    // Delivered while the only worker never ran out of work: the spinner
    // stops only once the reader has its readiness.
    CHECK_FALSE(reader.get());
    CHECK(spinner.get() > 0);
  }
  CHECK(open_fd_count() == fds_before);
}

TEST_CASE("an idle executor with a reactor parks its poller in epoll_wait and burns no CPU") {
  const canopy::testing::watchdog guard("idle poller", 60);
  {
    executor pool(io_config(4));
    reactor& owner = reactor::of(pool);
    // Let the workers finish spinning and park.
    CHECK(eventually([&] { return canopy::detail::core_of(pool).sleep().counters().sleeping() == 4; }));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const double cpu_before = process_cpu_seconds();
    const auto waits_before = owner.stats().blocking_waits;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const double cpu_used = process_cpu_seconds() - cpu_before;
    // No spinning: the poller sits in one epoll_wait, the others on futexes.
    CHECK(owner.stats().blocking_waits - waits_before <= 1);
    CHECK(cpu_used < 0.05 * canopy::testing::timeout_scale());
  }
  {
    // One worker: it is the poller, so a spawn from outside must wake it
    // through the eventfd.
    executor pool(io_config(1));
    reactor& owner = reactor::of(pool);
    CHECK(eventually([&] { return canopy::detail::core_of(pool).sleep().counters().sleeping() == 1; }));
    const auto notifies_before = owner.stats().notifies;
    for (int round = 0; round < 20; ++round) {
      CHECK(pool.spawn([round] { return round; }).get() == round);
    }
    CHECK(owner.stats().notifies > notifies_before);
  }
}
