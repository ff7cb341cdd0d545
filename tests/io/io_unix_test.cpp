// canopy::io Unix-domain streams: round trips on a path and an abstract
// address in task and fiber forms, EOF, the stale socket file rule, the
// listener removing its file, and bad input (names too long or empty, a
// missing or refused peer). Every case checks that no descriptor leaks.
#include <doctest/doctest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <cstddef>
#include <cstdio>
#include <string>
#include <system_error>
#include <vector>

#include "coroutine/coroutine.hpp"
#include "io/fiber/fiber_io.hpp"
#include "io/io.hpp"
#include "tests/io_test_support.hpp"
#include "tests/watchdog.hpp"

using canopy::executor;
using canopy::task;
using canopy::io::reactor;
using canopy::io::unix_endpoint;
using canopy::io::unix_listener;
using canopy::io::unix_stream;
using canopy::testing::io_config;
using canopy::testing::open_fd_count;

namespace {

std::span<const std::byte> bytes_of(const std::string& text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

// A fresh path in /tmp for this process.
std::string temp_path(const char* tag) {
  return "/tmp/canopy_unix_test_" + std::to_string(::getpid()) + "_" + tag + ".sock";
}

bool exists(const std::string& path) {
  struct stat status {};
  return ::lstat(path.c_str(), &status) == 0;
}

// Accept one connection, echo until EOF; returns the bytes echoed.
task<std::size_t> echo_one(unix_listener* listener) {
  unix_stream peer = co_await listener->accept();
  std::array<std::byte, 256> buffer{};
  std::size_t total = 0;
  for (;;) {
    const std::size_t got = co_await peer.read_some(buffer);
    if (got == 0) {
      break;
    }
    co_await peer.write_all(std::span(buffer).first(got));
    total += got;
  }
  co_return total;
}

task<std::string> ask(reactor* owner, unix_endpoint where, std::string message) {
  unix_stream stream = co_await unix_stream::connect(*owner, where);
  co_await stream.write_all(bytes_of(message));
  CHECK_FALSE(stream.shutdown(SHUT_WR));
  std::string answer;
  std::array<std::byte, 64> buffer{};
  for (;;) {
    const std::size_t got = co_await stream.read_some(buffer);
    if (got == 0) {
      break;  // the server saw our EOF and closed
    }
    answer.append(reinterpret_cast<const char*>(buffer.data()), got);
  }
  co_return answer;
}

}  // namespace

TEST_CASE("unix stream echo on a path and on an abstract address, task form") {
  const canopy::testing::watchdog guard("unix task", 30);
  const std::size_t fds_before = open_fd_count();
  const std::string path = temp_path("task");
  ::unlink(path.c_str());
  {
    executor pool(io_config(2));
    reactor& owner = reactor::of(pool);
    const std::string abstract_name = "canopy_unix_test_" + std::to_string(::getpid());
    for (const unix_endpoint& where :
         {unix_endpoint::path(path), unix_endpoint::abstract(abstract_name)}) {
      unix_listener listener = unix_listener::bind(owner, where);
      CHECK(listener.local_endpoint().to_string() == where.to_string());
      CHECK(exists(path) == !where.is_abstract());
      auto served = pool.spawn(echo_one(&listener));
      auto answer = pool.spawn(ask(&owner, where, "over a unix socket"));
      CHECK(answer.get() == "over a unix socket");
      CHECK(served.get() == 18);
      listener.close();
      CHECK_FALSE(exists(path));  // the listener removes its own file
    }
    CHECK(unix_endpoint::abstract("x").to_string() == "@x");
  }
  CHECK(open_fd_count() == fds_before);
}

TEST_CASE("unix stream fiber forms: accept, connect, read_some, write_all") {
  const canopy::testing::watchdog guard("unix fiber", 30);
  const std::size_t fds_before = open_fd_count();
  const std::string path = temp_path("fiber");
  ::unlink(path.c_str());
  {
    executor pool(io_config(2));
    reactor& owner = reactor::of(pool);
    const unix_endpoint where = unix_endpoint::path(path);
    unix_listener listener = unix_listener::bind(owner, where);
    namespace fio = canopy::this_fiber;
    auto served = pool.spawn(canopy::fiber([&listener] {
      unix_stream peer = fio::accept(listener);
      std::array<std::byte, 64> buffer{};
      const std::size_t got = fio::read_some(peer, buffer);
      fio::write_all(peer, std::span(buffer).first(got));
      return got;
    }));
    auto client = pool.spawn(canopy::fiber([&owner, where] {
      unix_stream stream = fio::connect(owner, where);
      fio::write_all(stream, bytes_of("fiber"));
      std::array<std::byte, 64> buffer{};
      std::string answer;
      while (answer.size() < 5) {
        const std::size_t got = fio::read_some(stream, buffer);
        if (got == 0) {
          break;
        }
        answer.append(reinterpret_cast<const char*>(buffer.data()), got);
      }
      // The server closed after its echo: EOF.
      CHECK(fio::read_some(stream, buffer) == 0);
      return answer;
    }));
    CHECK(client.get() == "fiber");
    CHECK(served.get() == 5);
  }
  CHECK_FALSE(exists(path));
  CHECK(open_fd_count() == fds_before);
}

TEST_CASE("unix listener: the stale socket file rule") {
  const canopy::testing::watchdog guard("unix stale", 30);
  const std::size_t fds_before = open_fd_count();
  const std::string path = temp_path("stale");
  ::unlink(path.c_str());
  {
    executor pool(io_config(1));
    reactor& owner = reactor::of(pool);
    const unix_endpoint where = unix_endpoint::path(path);
    // A socket file left behind by a server that is gone (bound, closed, not removed).
    {
      const int left = ::socket(AF_UNIX, SOCK_STREAM, 0);
      REQUIRE(left >= 0);
      REQUIRE(::bind(left, where.data(), where.size()) == 0);
      ::close(left);
    }
    REQUIRE(exists(path));
    std::error_code error;
    auto refused = pool.spawn([](reactor* on, unix_endpoint to) -> task<std::error_code> {
      std::error_code failed;
      (void)co_await unix_stream::connect(*on, to, failed);
      co_return failed;
    }(&owner, where));
    CHECK(refused.get() == std::errc::connection_refused);
    unix_listener first = unix_listener::bind(owner, where, error);
    CHECK_FALSE(error);  // the stale file was removed
    // A live listener is never taken over.
    unix_listener second = unix_listener::bind(owner, where, error);
    CHECK(error == std::errc::address_in_use);
    CHECK_FALSE(second.is_open());
    CHECK_THROWS_AS(unix_listener::bind(owner, where), std::system_error);
    first.close();
    CHECK_FALSE(exists(path));
    // A file that is not a socket is never removed.
    std::FILE* plain = std::fopen(path.c_str(), "w");
    REQUIRE(plain != nullptr);
    std::fclose(plain);
    unix_listener third = unix_listener::bind(owner, where, error);
    CHECK(error == std::errc::address_in_use);
    CHECK(exists(path));
    ::unlink(path.c_str());
  }
  CHECK(open_fd_count() == fds_before);
}

TEST_CASE("unix listener: a live server with a full backlog is address_in_use at once") {
  // bind() asks the existing file whether a server accepts on it; that
  // server's backlog being full must not make the question wait for it.
  const canopy::testing::watchdog guard("unix full backlog", 30);
  const std::size_t fds_before = open_fd_count();
  const std::string path = temp_path("full");
  ::unlink(path.c_str());
  {
    executor pool(io_config(1));
    reactor& owner = reactor::of(pool);
    const unix_endpoint where = unix_endpoint::path(path);
    unix_listener live = unix_listener::bind(owner, where, 1);  // never accepts
    std::vector<int> queued;
    for (int index = 0; index < 64; ++index) {  // fill its queue: connects then fail with EAGAIN
      const int client = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
      REQUIRE(client >= 0);
      const bool went = ::connect(client, where.data(), where.size()) == 0;
      queued.push_back(client);
      if (!went) {
        break;
      }
    }
    std::error_code error;
    unix_listener second = unix_listener::bind(owner, where, error);
    CHECK(error == std::errc::address_in_use);
    CHECK_FALSE(second.is_open());
    for (const int client : queued) {
      ::close(client);
    }
  }
  CHECK_FALSE(exists(path));
  CHECK(open_fd_count() == fds_before);
}

TEST_CASE("unix listener: close() removes its own file, not another server's at the same path") {
  const canopy::testing::watchdog guard("unix own file", 30);
  const std::string path = temp_path("own");
  ::unlink(path.c_str());
  executor pool(io_config(1));
  reactor& owner = reactor::of(pool);
  const unix_endpoint where = unix_endpoint::path(path);
  unix_listener first = unix_listener::bind(owner, where);
  REQUIRE(::unlink(path.c_str()) == 0);  // removed from outside while it runs
  unix_listener second = unix_listener::bind(owner, where);
  first.close();
  CHECK(exists(path));  // the second server's file stays
  auto answered = pool.spawn(echo_one(&second));
  CHECK(canopy::block_on(pool, ask(&owner, where, "still here")) == "still here");
  CHECK(answered.get() == 10);
  second.close();
  CHECK_FALSE(exists(path));
}

TEST_CASE("unix bad input: names too long or empty, a missing peer, a closed stream") {
  const canopy::testing::watchdog guard("unix bad input", 30);
  const std::size_t fds_before = open_fd_count();
  {
    executor pool(io_config(1));
    reactor& owner = reactor::of(pool);
    std::error_code error;
    (void)unix_endpoint::path(std::string(200, 'p'), error);
    CHECK(error == std::errc::filename_too_long);
    (void)unix_endpoint::abstract(std::string(sizeof(sockaddr_un::sun_path), 'a'), error);
    CHECK(error == std::errc::filename_too_long);
    (void)unix_endpoint::path("", error);
    CHECK(error == std::errc::invalid_argument);
    (void)unix_endpoint::path(std::string("a\0b", 3), error);
    CHECK(error == std::errc::invalid_argument);
    CHECK_THROWS_AS(unix_endpoint::path(std::string(200, 'p')), std::system_error);
    CHECK_THROWS_AS(unix_endpoint::abstract(""), std::system_error);
    (void)unix_listener::bind(owner, unix_endpoint{}, error);
    CHECK(error == std::errc::invalid_argument);

    auto missing = pool.spawn([](reactor* on) -> task<std::error_code> {
      std::error_code failed;
      unix_stream stream = co_await unix_stream::connect(
          *on, unix_endpoint::path("/tmp/canopy_unix_test_no_such_socket"), failed);
      CHECK_FALSE(stream.is_open());
      co_return failed;
    }(&owner));
    CHECK(missing.get() == std::errc::no_such_file_or_directory);

    unix_stream closed;
    std::array<std::byte, 8> buffer{};
    closed.try_read_some(buffer, error);
    CHECK(error == std::errc::bad_file_descriptor);
    CHECK(closed.shutdown(SHUT_RDWR) == std::errc::bad_file_descriptor);
    auto on_closed = pool.spawn([](unix_stream* stream) -> task<bool> {
      try {
        std::array<std::byte, 8> space{};
        (void)co_await stream->read_some(space);
      } catch (const std::system_error& failure) {
        co_return failure.code() == std::errc::bad_file_descriptor;
      }
      co_return false;
    }(&closed));
    CHECK(on_closed.get());
  }
  CHECK(open_fd_count() == fds_before);
}
