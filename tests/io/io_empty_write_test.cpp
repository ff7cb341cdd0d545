// A stream write of nothing (tcp_stream, unix_stream: write_all of one
// buffer or gathered, write_all_within, this_fiber::write_all) ends at
// once: without error on an open stream, even one whose send buffer is
// full, and with bad_file_descriptor on a stream that is not open, as a
// write of bytes there does. write_all_within of an empty buffer used to
// report success on a closed stream, where write_all said
// bad_file_descriptor. Runs on the backend CANOPY_IO_BACKEND names (run.sh
// runs it once per backend); no descriptor leaks.
#include <doctest/doctest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include "coroutine/coroutine.hpp"
#include "io/fiber/fiber_io.hpp"
#include "io/io.hpp"
#include "io/unix.hpp"
#include "tests/io_test_support.hpp"
#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

using canopy::executor;
using canopy::task;
using canopy::io::endpoint;
using canopy::io::reactor;
using canopy::io::tcp_listener;
using canopy::io::tcp_stream;
using canopy::io::unix_stream;
using canopy::testing::io_config;
using canopy::testing::open_fd_count;
using namespace std::chrono_literals;

namespace {

using buffers = std::span<const std::span<const std::byte>>;

// Every empty write form on `stream`; each error is compared with
// `expected` (empty: none). A failed check names the form.
template <class Stream>
task<void> empty_writes(Stream* stream, std::error_code expected) {
  const std::array<std::span<const std::byte>, 2> empties{};
  std::error_code error = std::make_error_code(std::errc::io_error);
  co_await stream->write_all(std::span<const std::byte>(), error);
  CHECK_MESSAGE(error == expected, "write_all: ", error.message());
  error = std::make_error_code(std::errc::io_error);
  co_await stream->write_all(buffers(), error);
  CHECK_MESSAGE(error == expected, "gathered write_all of no buffers: ", error.message());
  error = std::make_error_code(std::errc::io_error);
  co_await stream->write_all(buffers(empties), error);
  CHECK_MESSAGE(error == expected, "gathered write_all of empty buffers: ", error.message());
  for (const std::chrono::milliseconds limit :
       {std::chrono::milliseconds::max(), std::chrono::milliseconds(1000), 0ms, -5ms}) {
    error = std::make_error_code(std::errc::io_error);
    co_await stream->write_all_within(std::span<const std::byte>(), limit, error);
    CHECK_MESSAGE(error == expected, "write_all_within, limit ", limit.count(),
                  " ms: ", error.message());
  }
  bool threw = false;
  try {
    co_await stream->write_all(std::span<const std::byte>());
  } catch (const std::system_error& failure) {
    threw = true;
    CHECK(failure.code() == expected);
  }
  CHECK(threw == static_cast<bool>(expected));
}

// Fills `stream`'s send buffer (and the peer's receive buffer, which
// nobody reads) until a send would block; bounded in rounds.
template <class Stream>
void fill_send_buffer(Stream& stream) {
  const std::vector<std::byte> chunk(64 * 1024);
  std::error_code error;
  for (int round = 0; round < 10'000; ++round) {
    stream.try_write_some(chunk, error);
    if (error) {
      break;
    }
  }
  REQUIRE(error == std::errc::resource_unavailable_try_again);
}

template <class T>
T finished(canopy::join_handle<T>& handle, const std::string& what) {
  REQUIRE_MESSAGE(handle.wait_for(std::chrono::milliseconds(
                      static_cast<long>(10'000 * canopy::testing::timeout_scale()))),
                  what, " did not end");
  return handle.get();
}

}  // namespace

TEST_CASE("an empty write on a stream that is not open says bad_file_descriptor, every form") {
  const canopy::testing::watchdog guard("empty writes, closed", 60);
  const std::size_t fds_before = open_fd_count();
  const std::error_code bad_fd = std::make_error_code(std::errc::bad_file_descriptor);
  {
    executor pool(io_config(2));
    reactor& owner = reactor::of(pool);
    canopy::io::reactor_timers timers(pool);  // for write_all_within's limits
    tcp_listener listener = tcp_listener::bind(owner, endpoint::loopback_v4(0));
    const endpoint server = listener.local_endpoint();
    auto tcp = pool.spawn([](reactor* owner, tcp_listener* listener, endpoint server,
                             std::error_code bad_fd) -> task<void> {
      tcp_stream never_open;
      co_await empty_writes(&never_open, bad_fd);
      tcp_stream client = co_await tcp_stream::connect(*owner, server);
      tcp_stream accepted = co_await listener->accept();
      client.close();
      co_await empty_writes(&client, bad_fd);
    }(&owner, &listener, server, bad_fd));
    finished(tcp, "the TCP writes");

    int ends[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, ends) == 0);
    auto unix_pair =
        pool.spawn([](reactor* owner, int fd, int peer_fd, std::error_code bad_fd) -> task<void> {
          std::error_code error;
          unix_stream never_open;
          co_await empty_writes(&never_open, bad_fd);
          unix_stream stream(*owner, fd, error);
          const unix_stream peer(*owner, peer_fd, error);
          stream.close();
          co_await empty_writes(&stream, bad_fd);
        }(&owner, ends[0], ends[1], bad_fd));
    finished(unix_pair, "the Unix-domain writes");

    auto fiber = pool.spawn(canopy::fiber([bad_fd] {
      const std::array<std::span<const std::byte>, 2> empties{};
      tcp_stream tcp;
      unix_stream unix_side;
      std::error_code error;
      canopy::this_fiber::write_all(tcp, std::span<const std::byte>(), error);
      CHECK(error == bad_fd);
      canopy::this_fiber::write_all(tcp, buffers(empties), error);
      CHECK(error == bad_fd);
      canopy::this_fiber::write_all(unix_side, std::span<const std::byte>(), error);
      CHECK(error == bad_fd);
      canopy::this_fiber::write_all(unix_side, buffers(), error);
      CHECK(error == bad_fd);
    }));
    finished(fiber, "the fiber writes");
  }
  CHECK(open_fd_count() == fds_before);
}

TEST_CASE("an empty write on an open stream whose send buffer is full ends at once") {
  const canopy::testing::watchdog guard("empty writes, full", 60);
  const std::size_t fds_before = open_fd_count();
  {
    executor pool(io_config(2));
    reactor& owner = reactor::of(pool);
    canopy::io::reactor_timers timers(pool);
    tcp_listener listener = tcp_listener::bind(owner, endpoint::loopback_v4(0));
    const endpoint server = listener.local_endpoint();
    auto tcp =
        pool.spawn([](reactor* owner, tcp_listener* listener, endpoint server) -> task<void> {
          tcp_stream client = co_await tcp_stream::connect(*owner, server);
          tcp_stream accepted = co_await listener->accept();
          fill_send_buffer(client);
          co_await empty_writes(&client, std::error_code());
        }(&owner, &listener, server));
    finished(tcp, "the TCP writes");

    int ends[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, ends) == 0);
    auto unix_pair = pool.spawn([](reactor* owner, int fd, int peer_fd) -> task<void> {
      std::error_code error;
      unix_stream stream(*owner, fd, error);
      const unix_stream peer(*owner, peer_fd, error);
      fill_send_buffer(stream);
      co_await empty_writes(&stream, std::error_code());
    }(&owner, ends[0], ends[1]));
    finished(unix_pair, "the Unix-domain writes");

    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, ends) == 0);
    auto fiber = pool.spawn(canopy::fiber([&owner, &listener, server, ends] {
      const std::array<std::span<const std::byte>, 2> empties{};
      std::error_code error;
      tcp_stream client = canopy::this_fiber::connect(owner, server);
      const tcp_stream accepted = canopy::this_fiber::accept(listener);
      unix_stream stream(owner, ends[0], error);
      const unix_stream peer(owner, ends[1], error);
      fill_send_buffer(client);
      fill_send_buffer(stream);
      error = std::make_error_code(std::errc::io_error);
      canopy::this_fiber::write_all(client, std::span<const std::byte>(), error);
      CHECK_FALSE(error);
      error = std::make_error_code(std::errc::io_error);
      canopy::this_fiber::write_all(client, buffers(empties), error);
      CHECK_FALSE(error);
      error = std::make_error_code(std::errc::io_error);
      canopy::this_fiber::write_all(stream, std::span<const std::byte>(), error);
      CHECK_FALSE(error);
      error = std::make_error_code(std::errc::io_error);
      canopy::this_fiber::write_all(stream, buffers(), error);
      CHECK_FALSE(error);
    }));
    finished(fiber, "the fiber writes");
  }
  CHECK(open_fd_count() == fds_before);
}
