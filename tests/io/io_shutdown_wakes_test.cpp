// shutdown(SHUT_RD) or close() of a TCP or Unix stream from another task
// while a read waits on it (the contract in io/tcp.hpp and io/unix.hpp): the
// waiting read returns 0 (EOF) after shutdown(SHUT_RD), and ends with
// errc::operation_canceled after close(); on each backend (or the one
// CANOPY_IO_BACKEND names), for the coroutine and the fiber form.
#include <doctest/doctest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <system_error>
#include <thread>

#include "coroutine/coroutine.hpp"
#include "fiber/fiber.hpp"
#include "io/fiber/fiber_io.hpp"
#include "io/io.hpp"
#include "io/unix.hpp"
#include "tests/io_test_support.hpp"
#include "tests/io_uring_support.hpp"
#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

using canopy::executor;
using canopy::task;
using namespace std::chrono_literals;

namespace {

enum class ending { shutdown_read, close };
enum class waiter { coroutine, fiber };

struct read_outcome {
  std::size_t got = 99;
  std::error_code error;
};

template <class Stream>
task<read_outcome> read_once(Stream& stream, std::atomic<bool>& reading) {
  std::array<std::byte, 16> buffer{};
  read_outcome outcome;
  reading.store(true);
  outcome.got = co_await stream.read_some(buffer, outcome.error);
  co_return outcome;
}

// A read waits on `stream` (no byte ever comes: the peer stays open and
// silent); another task shuts the stream down or closes it.
template <class Stream>
read_outcome end_a_waiting_read(executor& pool, Stream& stream, ending how, waiter form) {
  std::atomic<bool> reading{false};
  canopy::join_handle<read_outcome> reader =
      form == waiter::coroutine
          ? pool.spawn(read_once(stream, reading))
          : pool.spawn(canopy::fiber([&stream, &reading] {
              std::array<std::byte, 16> buffer{};
              read_outcome outcome;
              reading.store(true);
              outcome.got = canopy::this_fiber::read_some(stream, buffer, outcome.error);
              return outcome;
            }));
  REQUIRE(canopy::testing::eventually([&] { return reading.load(); }));
  std::this_thread::sleep_for(5ms);  // the read is suspended by now
  CHECK(!reader.ready());
  pool.spawn([&stream, how]() -> task<void> {
        if (how == ending::shutdown_read) {
          CHECK(!stream.shutdown(SHUT_RD));
        } else {
          stream.close();
        }
        co_return;
      }())
      .get();
  return reader.get();
}

void check(const read_outcome& outcome, ending how) {
  if (how == ending::shutdown_read) {
    CHECK(!outcome.error);
    CHECK(outcome.got == 0);
  } else {
    CHECK(outcome.error == std::errc::operation_canceled);
    CHECK(outcome.got == 0);
  }
}

}  // namespace

TEST_CASE("shutdown(SHUT_RD) or close() from another task ends a waiting read") {
  const canopy::testing::watchdog guard("shutdown wakes", 60);
  const std::size_t fds_before = canopy::testing::open_fd_count();
  for (const canopy::io::io_backend backend : canopy::testing::backends_under_test()) {
    const auto config = canopy::testing::config_for(backend, 2);
    if (!config) {
      continue;
    }
    executor pool(*config);
    canopy::io::reactor& owner = canopy::io::reactor::of(pool);
    auto listener = canopy::io::tcp_listener::bind(owner, canopy::io::endpoint::loopback_v4(0));
    for (const ending how : {ending::shutdown_read, ending::close}) {
      for (const waiter form : {waiter::coroutine, waiter::fiber}) {
        CAPTURE(static_cast<int>(backend));
        CAPTURE(static_cast<int>(how));
        CAPTURE(static_cast<int>(form));
        const int client = canopy::testing::connect_raw(listener.local_endpoint());
        canopy::io::tcp_stream tcp = canopy::block_on(pool, listener.accept());
        check(end_a_waiting_read(pool, tcp, how, form), how);
        ::close(client);

        std::array<int, 2> fds{};
        REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds.data()) ==
                0);
        std::error_code error;
        canopy::io::unix_stream unix_side(owner, fds[0], error);
        REQUIRE(!error);
        check(end_a_waiting_read(pool, unix_side, how, form), how);
        ::close(fds[1]);
      }
    }
  }
  CHECK(canopy::testing::open_fd_count() == fds_before);
}
