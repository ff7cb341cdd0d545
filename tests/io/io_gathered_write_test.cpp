// The gathered write_all of tcp_stream and unix_stream (sendmsg with an
// iovec array; io/tcp.hpp): buffers arrive in order, more buffers than one
// call takes, partial sends across buffers while a slow reader makes the
// writer wait, empty buffers, a reset peer (EPIPE/ECONNRESET, no SIGPIPE),
// close() from another task while the write waits, the fiber forms and
// write_frame. On each backend (or the one CANOPY_IO_BACKEND names), TCP on
// 127.0.0.1 and a Unix socketpair; every case checks for descriptor leaks.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "coroutine/coroutine.hpp"
#include "fiber/fiber.hpp"
#include "io/fiber/buffered_fiber.hpp"
#include "io/fiber/fiber_io.hpp"
#include "io/io.hpp"
#include "io/stream_writes.hpp"
#include "tests/io_test_support.hpp"
#include "tests/io_uring_support.hpp"
#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

using canopy::executor;
using canopy::task;
using canopy::io::reactor;
using canopy::io::tcp_stream;
using canopy::io::unix_stream;
using namespace std::chrono_literals;

namespace {

using byte_span = std::span<const std::byte>;
using buffer_list = std::vector<byte_span>;

byte_span bytes_of(std::string_view text) { return std::as_bytes(std::span(text)); }

// A stream on the reactor and the other end as a blocking socket of the
// test thread's (reads time out after 20 s rather than hang).
template <class Stream>
struct connected {
  Stream stream;
  int peer = -1;

  connected(Stream opened, int other) : stream(std::move(opened)), peer(other) {
    const timeval limit{20, 0};
    ::setsockopt(peer, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  }
  connected(connected&& other) noexcept
      : stream(std::move(other.stream)), peer(std::exchange(other.peer, -1)) {}
  connected(const connected&) = delete;
  connected& operator=(const connected&) = delete;
  connected& operator=(connected&&) = delete;
  ~connected() {
    if (peer >= 0) {
      ::close(peer);
    }
  }
  void close_peer() { ::close(std::exchange(peer, -1)); }
};

connected<tcp_stream> tcp_pair(executor& pool, canopy::io::tcp_listener& listener) {
  const int peer = canopy::testing::connect_raw(listener.local_endpoint());
  return {canopy::block_on(pool, listener.accept()), peer};
}

connected<unix_stream> unix_pair(reactor& owner) {
  std::array<int, 2> fds{};
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds.data()) == 0);
  REQUIRE(::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK) == 0);
  std::error_code error;
  unix_stream stream(owner, fds[0], error);
  REQUIRE(!error);
  return {std::move(stream), fds[1]};
}

// Run `check(pool, make)` on each backend under test, once with TCP pairs
// and once with Unix ones (`make()` returns a fresh connected pair).
template <class Check>
void on_each_stream(const Check& check) {
  const std::size_t fds_before = canopy::testing::open_fd_count();
  for (const canopy::io::io_backend backend : canopy::testing::backends_under_test()) {
    const auto config = canopy::testing::config_for(backend, 2);
    if (!config) {
      continue;
    }
    CAPTURE(canopy::io::to_string(backend));
    executor pool(*config);
    reactor& owner = reactor::of(pool);
    auto listener = canopy::io::tcp_listener::bind(owner, canopy::io::endpoint::loopback_v4(0));
    {
      INFO("TCP");
      check(pool, [&] { return tcp_pair(pool, listener); });
    }
    {
      INFO("Unix");
      check(pool, [&] { return unix_pair(owner); });
    }
  }
  CHECK(canopy::testing::open_fd_count() == fds_before);
}

// Exactly `count` bytes from `fd` (fewer at EOF, an error or the timeout).
std::string read_exactly(int fd, std::size_t count, std::size_t chunk = 65536,
                         std::chrono::microseconds pause = 0us) {
  std::string got;
  std::vector<char> buffer(chunk);
  while (got.size() < count) {
    const ssize_t n = ::recv(fd, buffer.data(), std::min(chunk, count - got.size()), 0);
    if (n <= 0) {
      break;
    }
    got.append(buffer.data(), static_cast<std::size_t>(n));
    if (pause > 0us) {
      std::this_thread::sleep_for(pause);
    }
  }
  return got;
}

template <class Stream>
task<std::error_code> write_gathered(Stream* stream, buffer_list parts) {
  std::error_code error;
  co_await stream->write_all(parts, error);
  co_return error;
}

// Bytes 0, 1, ... 250, 0, ...: a shift or a swap of two buffers shows.
std::string pattern(std::size_t size) {
  std::string text(size, '\0');
  for (std::size_t index = 0; index < size; ++index) {
    text[index] = static_cast<char>(index % 251);
  }
  return text;
}

std::atomic<int> sigpipes{0};
extern "C" void count_sigpipe(int /*unused*/) { sigpipes.fetch_add(1); }

}  // namespace

TEST_CASE("gathered write: a header and a body arrive in order, in one call") {
  const canopy::testing::watchdog guard("gathered order", 60);
  on_each_stream([](executor& pool, auto make) {
    auto pair = make();
    const std::string header = "HEADER 11\r\n";
    const std::string body = "the body.\r\n";
    CHECK(!pool.spawn(write_gathered(&pair.stream, {bytes_of(header), bytes_of(body)})).get());
    CHECK(read_exactly(pair.peer, header.size() + body.size()) == header + body);
    // The throwing form, from a vector as it is.
    const buffer_list again{bytes_of(body), bytes_of(header)};
    canopy::block_on(pool, pair.stream.write_all(again));
    CHECK(read_exactly(pair.peer, header.size() + body.size()) == body + header);
  });
}

TEST_CASE("gathered write: more buffers than IOV_MAX, some empty, arrive whole and in order") {
  const canopy::testing::watchdog guard("gathered many", 60);
  on_each_stream([](executor& pool, auto make) {
    auto pair = make();
    constexpr std::size_t buffers = 3 * IOV_MAX + 5;
    std::size_t total = 0;
    for (std::size_t index = 0; index < buffers; ++index) {
      total += index % 7;  // every seventh is empty
    }
    const std::string all = pattern(total);
    buffer_list parts;
    std::size_t at = 0;
    for (std::size_t index = 0; index < buffers; ++index) {
      parts.push_back(bytes_of(std::string_view(all).substr(at, index % 7)));
      at += index % 7;
    }
    CHECK(!pool.spawn(write_gathered(&pair.stream, parts)).get());
    CHECK(read_exactly(pair.peer, total) == all);
  });
}

TEST_CASE("gathered write: only empty buffers, or none, send nothing") {
  const canopy::testing::watchdog guard("gathered empty", 60);
  on_each_stream([](executor& pool, auto make) {
    auto pair = make();
    const std::string text = "abcd!";
    const std::string_view view(text);
    CHECK(!pool.spawn(write_gathered(&pair.stream,
                                     {byte_span{}, bytes_of(view.substr(0, 2)), byte_span{},
                                      byte_span{}, bytes_of(view.substr(2, 2)), byte_span{}}))
               .get());
    CHECK(!pool.spawn(write_gathered(&pair.stream, {byte_span{}, byte_span{}})).get());
    CHECK(!pool.spawn(write_gathered(&pair.stream, {})).get());
    CHECK(!pool.spawn(write_gathered(&pair.stream, {bytes_of(view.substr(4))})).get());
    CHECK(read_exactly(pair.peer, text.size()) == text);
  });
}

TEST_CASE("gathered write: a large body waits for a slow reader and goes on mid-buffer") {
  const canopy::testing::watchdog guard("gathered partial", 120);
  on_each_stream([](executor& pool, auto make) {
    auto pair = make();
    // Small socket buffers: the write cannot finish before the reader reads.
    const int small = 16 * 1024;
    ::setsockopt(pair.stream.native_handle(), SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    ::setsockopt(pair.peer, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    constexpr std::size_t total = 4 * 1024 * 1024 + 17;
    const std::string all = pattern(total);
    const std::string_view view(all);
    const buffer_list parts{bytes_of(view.substr(0, 7)), bytes_of(view.substr(7, 1024 * 1024 + 3)),
                            byte_span{}, bytes_of(view.substr(7 + 1024 * 1024 + 3, 5)),
                            bytes_of(view.substr(7 + 1024 * 1024 + 8))};
    auto writer = pool.spawn(write_gathered(&pair.stream, parts));
    std::this_thread::sleep_for(50ms);
    CHECK(!writer.ready());  // it waits for room (EAGAIN, or a request in flight)
    const bool whole = read_exactly(pair.peer, total, 64 * 1024, 200us) == all;
    CHECK(whole);
    if (!whole) {
      pair.close_peer();  // a writer that sends too much fails rather than waits
    }
    CHECK(!writer.get());
  });
}

TEST_CASE("gathered write to a reset peer: EPIPE or ECONNRESET, and no SIGPIPE") {
  const canopy::testing::watchdog guard("gathered reset", 60);
  struct sigaction counting {};
  counting.sa_handler = count_sigpipe;
  struct sigaction previous {};
  REQUIRE(::sigaction(SIGPIPE, &counting, &previous) == 0);
  sigpipes.store(0);
  on_each_stream([](executor& pool, auto make) {
    auto pair = make();
    const linger abort_on_close{1, 0};
    ::setsockopt(pair.peer, SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof abort_on_close);
    pair.close_peer();  // TCP: a reset; Unix: the peer is gone
    const std::vector<std::byte> block(64 * 1024);
    std::error_code error;
    for (int attempt = 0; attempt < 64 && !error; ++attempt) {
      error = pool.spawn(write_gathered(&pair.stream, {block, bytes_of("x"), block})).get();
    }
    CHECK((error == std::errc::broken_pipe || error == std::errc::connection_reset));
    const buffer_list parts{block};
    CHECK_THROWS_AS(canopy::block_on(pool, pair.stream.write_all(parts)), std::system_error);
  });
  CHECK(sigpipes.load() == 0);
  ::sigaction(SIGPIPE, &previous, nullptr);
}

TEST_CASE("gathered write: close() from another task while it waits ends it, operation_canceled") {
  const canopy::testing::watchdog guard("gathered close", 60);
  on_each_stream([](executor& pool, auto make) {
    const std::string all = pattern(4 * 1024 * 1024);
    const std::string_view view(all);
    for (const bool fiber : {false, true}) {
      CAPTURE(fiber);
      auto pair = make();  // a peer that never reads
      const int small = 16 * 1024;
      ::setsockopt(pair.stream.native_handle(), SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
      ::setsockopt(pair.peer, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
      const buffer_list parts{bytes_of(view.substr(0, 100)), bytes_of(view.substr(100))};
      auto* stream = &pair.stream;
      canopy::join_handle<std::error_code> writer =
          fiber ? pool.spawn(canopy::fiber([stream, &parts] {
            std::error_code error;
            canopy::this_fiber::write_all(*stream, parts, error);
            return error;
          }))
                : pool.spawn(write_gathered(stream, parts));
      std::this_thread::sleep_for(50ms);
      CHECK(!writer.ready());
      pool.spawn([](decltype(stream) target) -> task<void> {
            target->close();
            co_return;
          }(stream))
          .get();
      CHECK(writer.get() == std::errc::operation_canceled);
    }
  });
}

TEST_CASE("gathered write: fiber forms, and write_frame's header and payload in one write") {
  const canopy::testing::watchdog guard("gathered fiber and frame", 60);
  on_each_stream([](executor& pool, auto make) {
    auto pair = make();
    auto* stream = &pair.stream;
    pool.spawn(canopy::fiber([stream] {
          const buffer_list parts{bytes_of("fib"), byte_span{}, bytes_of("er\n")};
          canopy::this_fiber::write_all(*stream, parts);
          canopy::this_fiber::write_frame(*stream, std::string_view("fiber frame"));
        }))
        .get();
    const std::string fiber_frame = std::string("\0\0\0\x0b", 4) + "fiber frame";
    CHECK(read_exactly(pair.peer, 6 + fiber_frame.size()) == "fiber\n" + fiber_frame);
    canopy::block_on(pool, canopy::io::write_frame(*stream, std::string_view("task")));
    CHECK(read_exactly(pair.peer, 8) == std::string("\0\0\0\x04task", 8));
    std::error_code error;
    canopy::block_on(pool, canopy::io::write_frame(*stream, std::string_view("long"), error, 3));
    CHECK(error == std::errc::message_size);
  });
}
