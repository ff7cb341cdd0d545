// A stream read into an empty buffer (tcp_stream, unix_stream: read_some,
// read_some_until, try_read_some, this_fiber::read_some) ends at once with 0 and no error:
// nothing was read, and the stream is not at EOF. Such a read used to wait
// for the socket to become readable (for ever on an idle connection), then
// return 0 as if at EOF. Runs on the backend CANOPY_IO_BACKEND names (run.sh
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

#include "coroutine/coroutine.hpp"
#include "io/fiber/fiber_io.hpp"
#include "io/io.hpp"
#include "tests/io_test_support.hpp"
#include "tests/watchdog.hpp"

using canopy::executor;
using canopy::task;
using canopy::io::endpoint;
using canopy::io::reactor;
using canopy::io::tcp_listener;
using canopy::io::tcp_stream;
using canopy::testing::io_config;
using canopy::testing::open_fd_count;

namespace {

std::span<const std::byte> bytes_of(const std::string& text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

}  // namespace

namespace {

// Reads into an empty buffer on `idle`, which has nothing to read: each
// ends at once with 0 and no error (nothing read; not EOF), and the
// stream then reads what `peer` sends. Before, such a read waited for
// bytes it could not take (for ever on an idle connection), then said 0
// as if at EOF.
template <class Stream>
task<std::size_t> empty_reads(Stream* idle, Stream* peer) {
  std::error_code error = std::make_error_code(std::errc::io_error);
  CHECK(co_await idle->read_some(std::span<std::byte>(), error) == 0);
  CHECK_FALSE(error);
  error = std::make_error_code(std::errc::io_error);
  const auto far = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  CHECK(co_await idle->read_some_until(std::span<std::byte>(), far, error) == 0);
  CHECK_FALSE(error);
  // Without waiting, the same: 0 and no error, not "try again".
  error = std::make_error_code(std::errc::io_error);
  CHECK(idle->try_read_some(std::span<std::byte>(), error) == 0);
  CHECK_FALSE(error);
  Stream closed;  // never open: the error of any read there
  CHECK(co_await closed.read_some(std::span<std::byte>(), error) == 0);
  CHECK(error == std::errc::bad_file_descriptor);
  error.clear();
  CHECK(closed.try_read_some(std::span<std::byte>(), error) == 0);
  CHECK(error == std::errc::bad_file_descriptor);
  co_await peer->write_all(bytes_of("x"));
  std::array<std::byte, 4> buffer{};
  co_return co_await idle->read_some(buffer);
}

}  // namespace

TEST_CASE("a read into an empty buffer ends at once with 0, on an idle stream too") {
  const canopy::testing::watchdog guard("empty reads", 60);
  const std::size_t fds_before = open_fd_count();
  {
    executor pool(io_config(2));
    reactor& owner = reactor::of(pool);
    canopy::io::reactor_timers timers(pool);  // for read_some_until
    tcp_listener listener = tcp_listener::bind(owner, endpoint::loopback_v4(0));
    const endpoint server = listener.local_endpoint();
    // The streams live in the tasks' frames, so that a read that waits
    // (the bug) is destroyed with its stream when the executor shuts down.
    auto tcp = pool.spawn(
        [](reactor* owner, tcp_listener* listener, endpoint server) -> task<std::size_t> {
          tcp_stream client = co_await tcp_stream::connect(*owner, server);
          tcp_stream accepted = co_await listener->accept();
          co_return co_await empty_reads(&accepted, &client);
        }(&owner, &listener, server));
    REQUIRE(tcp.wait_for(std::chrono::seconds(5)));
    CHECK(tcp.get() == 1);

    int ends[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, ends) == 0);
    auto unix_pair = pool.spawn([](reactor* owner, int idle_fd, int peer_fd) -> task<std::size_t> {
      std::error_code error;
      canopy::io::unix_stream idle(*owner, idle_fd, error);
      canopy::io::unix_stream peer(*owner, peer_fd, error);
      co_return co_await empty_reads(&idle, &peer);
    }(&owner, ends[0], ends[1]));
    REQUIRE(unix_pair.wait_for(std::chrono::seconds(5)));
    CHECK(unix_pair.get() == 1);

    // The fiber forms, on an idle TCP stream and an idle Unix stream.
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, ends) == 0);
    auto fiber = pool.spawn(canopy::fiber([&owner, &listener, server, ends] {
      std::error_code error;
      const tcp_stream client = canopy::this_fiber::connect(owner, server);
      tcp_stream accepted = canopy::this_fiber::accept(listener);
      canopy::io::unix_stream idle(owner, ends[0], error);
      const canopy::io::unix_stream peer(owner, ends[1], error);
      error = std::make_error_code(std::errc::io_error);
      const std::size_t from_tcp = canopy::this_fiber::read_some(accepted, {}, error);
      const bool tcp_ok = from_tcp == 0 && !error;
      error = std::make_error_code(std::errc::io_error);
      const std::size_t from_unix = canopy::this_fiber::read_some(idle, {}, error);
      return tcp_ok && from_unix == 0 && !error;
    }));
    REQUIRE(fiber.wait_for(std::chrono::seconds(5)));
    CHECK(fiber.get());
  }
  CHECK(open_fd_count() == fds_before);
}
