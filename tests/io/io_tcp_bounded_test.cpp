// The stream sockets' bounded forms, read_some_until and write_all_within
// (tcp_stream and unix_stream), on whichever backend CANOPY_IO_BACKEND
// names: a read that times out takes nothing and leaves the stream usable;
// reads raced against deadlines of a few microseconds lose no byte and
// reorder none; a write to a peer that never reads ends with timed_out once
// the socket stalls, and one to a slow but steady reader is served; a read
// whose deadline has passed returns the bytes the socket holds. No case
// leaves a descriptor open.
#include <doctest/doctest.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "coroutine/coroutine.hpp"
#include "io/io.hpp"
#include "io/unix.hpp"
#include "tests/deadline_race_support.hpp"
#include "tests/io_test_support.hpp"
#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

namespace canopy::testing {
namespace {

using namespace std::chrono_literals;
using io::tcp_listener;
using io::tcp_stream;
using io::unix_endpoint;
using io::unix_listener;
using io::unix_stream;
using steady = std::chrono::steady_clock;

std::span<const std::byte> bytes_of(std::string_view text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

// Fails the test if the case leaves a descriptor open; made before the
// case's pool, so that it checks after the pool and listener closed.
struct descriptor_check {
  std::size_t before = open_fd_count();
  descriptor_check() = default;
  descriptor_check(const descriptor_check&) = delete;
  descriptor_check& operator=(const descriptor_check&) = delete;
  ~descriptor_check() { CHECK(open_fd_count() == before); }
};

// A pool with a reactor (timers included) and a listener on 127.0.0.1.
struct loopback {
  executor pool{io_config(2)};
  tcp_listener listener = tcp_listener::bind(io::reactor::of(pool), io::endpoint::loopback_v4(0));
  io::endpoint address = listener.local_endpoint();
  loopback() = default;
  loopback(const loopback&) = delete;
  loopback& operator=(const loopback&) = delete;
  ~loopback() {
    pool.shutdown();
    listener.close();
  }
};

// Runs `work` on `pool` and returns its value; fails the test if it has not
// finished in 30 s (scaled).
template <class T>
T run(executor& pool, task<T> work, const char* what) {
  auto handle = pool.spawn(std::move(work));
  REQUIRE_MESSAGE(
      handle.wait_for(std::chrono::milliseconds(static_cast<long>(30'000 * timeout_scale()))), what,
      " did not finish in time");
  return handle.get();
}

struct timed_read {
  std::error_code first_error;
  std::size_t first_count = 1;
  std::chrono::nanoseconds waited{};
  std::string rest;
  std::error_code rest_error;
};

// The client's side of the timed-out read: a bounded read with nothing
// sent (it must time out), then "go", then everything until EOF.
template <class Stream>
task<timed_read> read_after_timeout(Stream stream) {
  timed_read result;
  std::vector<std::byte> buffer(64);
  const auto start = steady::now();
  result.first_count = co_await stream.read_some_until(buffer, start + 50ms, result.first_error);
  result.waited = steady::now() - start;
  co_await stream.write_all(bytes_of("go"));
  for (;;) {
    const std::size_t got =
        co_await stream.read_some_until(buffer, steady::now() + 10s, result.rest_error);
    if (got == 0 || result.rest_error) {
      break;
    }
    result.rest.append(reinterpret_cast<const char*>(buffer.data()), got);
  }
  co_return result;
}

// The server's side: nothing until the client's first message, then one
// line and the close.
template <class Stream>
task<void> answer_after_message(Stream stream) {
  std::vector<std::byte> buffer(64);
  const std::size_t got = co_await stream.read_some(buffer);
  REQUIRE(got > 0);
  co_await stream.write_all(bytes_of("after the timeout"));
  stream.shutdown(SHUT_WR);
}

void check_timed_read(const timed_read& seen) {
  CHECK(seen.first_error == std::errc::timed_out);
  CHECK(seen.first_count == 0);
  CHECK(seen.waited >= 50ms);
  CHECK_FALSE(seen.rest_error);
  CHECK(seen.rest == "after the timeout");
}

struct stalled_write {
  std::error_code error;
  std::chrono::nanoseconds took{};
};

// A write of more than the sockets hold, to a peer that reads nothing.
template <class Stream>
task<stalled_write> write_to_stalled(Stream stream) {
  stalled_write result;
  const std::vector<std::byte> payload(64 << 20, std::byte{'x'});
  const auto start = steady::now();
  co_await stream.write_all_within(payload, 200ms, result.error);
  result.took = steady::now() - start;
  co_return result;
}

// Byte `i` of the slow reader's payload: the numbers 0, 1, 2... of four
// bytes each, so that a byte lost, repeated or moved shows.
std::byte payload_byte(std::size_t i) { return static_cast<std::byte>((i / 4) >> (8 * (i % 4))); }

// A reader that takes 16 KiB every 5 ms for `slow_for` (about 3 MB/s,
// never enough at once for the writer's writability edge, which comes only
// once a good part of the send buffer drained), then the rest at once;
// how many bytes it took up to the writer's close, 0 if one was wrong.
template <class Stream>
task<std::size_t> read_slowly_then_drain(Stream stream, steady::duration slow_for) {
  std::vector<std::byte> chunk(16 << 10);
  const auto slow_until = steady::now() + slow_for;
  std::size_t total = 0;
  for (;;) {
    if (steady::now() < slow_until) {
      co_await sleep_for(5ms);
    }
    std::error_code error;
    const std::size_t got = co_await stream.read_some(chunk, error);
    if (got == 0 || error) {
      co_return total;
    }
    for (std::size_t i = 0; i < got; ++i) {
      if (chunk[i] != payload_byte(total + i)) {
        co_return 0;
      }
    }
    total += got;
  }
}

// More than the sockets hold (a few MB each way on loopback) plus what the
// slow reader takes in its second, so the writer waits all that time.
constexpr std::size_t slow_reader_payload = 32 << 20;

template <class Stream>
task<stalled_write> write_to_slow_reader(Stream stream) {
  stalled_write result;
  std::vector<std::byte> payload(slow_reader_payload);
  for (std::size_t i = 0; i < payload.size(); ++i) {
    payload[i] = payload_byte(i);
  }
  const auto start = steady::now();
  co_await stream.write_all_within(payload, 200ms, result.error);
  result.took = steady::now() - start;
  co_return result;  // closes: a reader still waiting sees the end
}

// Bounded reads whose deadline has passed, with bytes waiting in the
// socket: they return them, on either backend. First two bytes a read_some
// of one byte left (on epoll the socket stays marked ready: the read filled
// its buffer), then two that arrived after the socket was drained (the
// poller may not have seen their edge yet).
template <class Stream>
task<void> read_ready_bytes_past_deadline(Stream& reader, Stream& writer, steady::duration past) {
  co_await writer.write_all(bytes_of("abc"));
  std::vector<std::byte> buffer(8);
  const std::size_t first = co_await reader.read_some(std::span(buffer).first(1));
  REQUIRE(first == 1);
  std::error_code error;
  std::size_t got = co_await reader.read_some_until(buffer, steady::now() - past, error);
  CHECK_MESSAGE(got == 2, error.message());
  co_await writer.write_all(bytes_of("de"));
  int waiting = 0;
  while (::ioctl(reader.native_handle(), FIONREAD, &waiting) == 0 && waiting < 2) {
    co_await sleep_for(1ms);
  }
  got = co_await reader.read_some_until(buffer, steady::now() - past, error);
  CHECK_MESSAGE(got == 2, error.message());
}

TEST_CASE("tcp bounded: a read that times out takes nothing; the stream stays usable") {
  const watchdog guard("tcp read_some_until", 60 * timeout_scale());
  const descriptor_check descriptors;
  loopback net;
  auto server = net.pool.spawn([](tcp_listener& listener) -> task<void> {
    co_await answer_after_message(co_await listener.accept());
  }(net.listener));
  const timed_read seen = run(
      net.pool,
      [](io::endpoint address) -> task<timed_read> {
        co_return co_await read_after_timeout(co_await tcp_stream::connect(address));
      }(net.address),
      "the client");
  check_timed_read(seen);
  CHECK(server.wait_for(10s));
  server.get();
}

TEST_CASE("tcp bounded: reads raced against deadlines of microseconds lose and reorder nothing") {
  const watchdog guard("tcp read_some_until race", 120 * timeout_scale());
  const descriptor_check descriptors;
  loopback net;
  std::atomic<std::size_t> client_timeouts{0};
  const std::size_t messages = static_cast<std::size_t>(40000 / stress_divisor());
  // The server writes the numbers 0..messages-1 racing the client's
  // deadlines (write_numbers_racing_deadlines), then closes.
  auto server = net.pool.spawn([](tcp_listener& listener, std::size_t count,
                                  std::atomic<std::size_t>& client_timeouts) -> task<void> {
    tcp_stream stream = co_await listener.accept();
    co_await write_numbers_racing_deadlines(stream, count, client_timeouts);
    stream.shutdown(SHUT_WR);
  }(net.listener, messages, client_timeouts));

  struct outcome {
    std::size_t numbers = 0;
    std::size_t out_of_order = 0;
    std::size_t timeouts = 0;
    std::error_code error;
  };
  const outcome seen = run(
      net.pool,
      [](io::endpoint address, std::atomic<std::size_t>& client_timeouts) -> task<outcome> {
        tcp_stream stream = co_await tcp_stream::connect(address);
        outcome result;
        std::vector<std::byte> buffer(13);  // not a multiple of 4: numbers split across reads
        std::vector<std::byte> partial;
        std::uint32_t expected = 0;
        for (std::uint64_t round = 0;; ++round) {
          std::error_code error;
          const auto limit = std::chrono::microseconds(round % 41);
          const std::size_t got =
              co_await stream.read_some_until(buffer, steady::now() + limit, error);
          if (error == std::errc::timed_out) {
            CHECK(got == 0);
            ++result.timeouts;
            client_timeouts.fetch_add(1, std::memory_order_relaxed);  // a count only
            continue;
          }
          if (error || got == 0) {
            result.error = error;
            break;
          }
          partial.insert(partial.end(), buffer.begin(), buffer.begin() + static_cast<long>(got));
          std::size_t used = 0;
          for (; used + 4 <= partial.size(); used += 4) {
            std::uint32_t value = 0;
            for (std::size_t k = 0; k < 4; ++k) {
              value |= std::to_integer<std::uint32_t>(partial[used + k]) << (8 * k);
            }
            result.out_of_order += value != expected ? 1 : 0;
            expected = value + 1;
            ++result.numbers;
          }
          partial.erase(partial.begin(), partial.begin() + static_cast<long>(used));
        }
        co_return result;
      }(net.address, client_timeouts),
      "the client");
  INFO("timeouts: ", seen.timeouts);
  CHECK(seen.timeouts > 0);  // the race was run
  CHECK_FALSE(seen.error);
  CHECK(seen.numbers == messages);
  CHECK(seen.out_of_order == 0);
  CHECK(server.wait_for(10s));
  server.get();
}

TEST_CASE("tcp bounded: a write to a peer that never reads ends with timed_out") {
  const watchdog guard("tcp write_all_within", 60 * timeout_scale());
  const descriptor_check descriptors;
  loopback net;
  // The server accepts and then reads nothing, until the client is done.
  auto accepted = net.pool.spawn([](tcp_listener& listener) -> task<tcp_stream> {
    co_return co_await listener.accept();
  }(net.listener));
  const stalled_write seen = run(
      net.pool,
      [](io::endpoint address) -> task<stalled_write> {
        co_return co_await write_to_stalled(co_await tcp_stream::connect(address));
      }(net.address),
      "the client");
  CHECK(seen.error == std::errc::timed_out);
  CHECK(seen.took >= 200ms);
  CHECK(accepted.wait_for(10s));
}

TEST_CASE("tcp bounded: a slow but steady reader is served, not timed out") {
  const watchdog guard("tcp write_all_within slow reader", 60 * timeout_scale());
  const descriptor_check descriptors;
  loopback net;
  auto reader = net.pool.spawn([](tcp_listener& listener) -> task<std::size_t> {
    co_return co_await read_slowly_then_drain(co_await listener.accept(), 1s);
  }(net.listener));
  const stalled_write seen = run(
      net.pool,
      [](io::endpoint address) -> task<stalled_write> {
        co_return co_await write_to_slow_reader(co_await tcp_stream::connect(address));
      }(net.address),
      "the writer");
  INFO("error: ", seen.error.message(), " after ", seen.took.count() / 1'000'000, " ms");
  CHECK_FALSE(seen.error);
  REQUIRE(reader.wait_for(10s));
  CHECK(reader.get() == slow_reader_payload);
}

TEST_CASE("tcp bounded: a read whose deadline has passed returns the bytes waiting") {
  const watchdog guard("tcp read_some_until past deadline", 60 * timeout_scale());
  const descriptor_check descriptors;
  loopback net;
  run(
      net.pool,
      [](tcp_listener& listener) -> task<void> {
        auto connecting = spawn(tcp_stream::connect(listener.local_endpoint()));
        tcp_stream reader = co_await listener.accept();
        tcp_stream writer = co_await connecting;
        for (const auto past : {1ms, 0ms, 1ms, 0ms}) {
          co_await read_ready_bytes_past_deadline(reader, writer, past);
        }
      }(net.listener),
      "the reads");
}

// A pool with a reactor and a Unix-domain listener on an abstract address.
struct unix_loopback {
  executor pool{io_config(2)};
  unix_endpoint address =
      unix_endpoint::abstract("canopy_bounded_test_" + std::to_string(::getpid()));
  unix_listener listener = unix_listener::bind(io::reactor::of(pool), address);
  unix_loopback() = default;
  unix_loopback(const unix_loopback&) = delete;
  unix_loopback& operator=(const unix_loopback&) = delete;
  ~unix_loopback() {
    pool.shutdown();
    listener.close();
  }
};

TEST_CASE("unix bounded: a timed-out read takes nothing; a stalled write ends with timed_out") {
  const watchdog guard("unix bounded forms", 60 * timeout_scale());
  const descriptor_check descriptors;
  {
    unix_loopback net;
    auto server = net.pool.spawn([](unix_listener& listener) -> task<void> {
      co_await answer_after_message(co_await listener.accept());
    }(net.listener));
    const timed_read seen = run(
        net.pool,
        [](unix_endpoint address) -> task<timed_read> {
          co_return co_await read_after_timeout(co_await unix_stream::connect(address));
        }(net.address),
        "the unix client");
    check_timed_read(seen);
    CHECK(server.wait_for(10s));
    server.get();
  }
  {
    unix_loopback net;
    auto accepted = net.pool.spawn([](unix_listener& listener) -> task<unix_stream> {
      co_return co_await listener.accept();
    }(net.listener));
    const stalled_write seen = run(
        net.pool,
        [](unix_endpoint address) -> task<stalled_write> {
          co_return co_await write_to_stalled(co_await unix_stream::connect(address));
        }(net.address),
        "the unix writer");
    CHECK(seen.error == std::errc::timed_out);
    CHECK(seen.took >= 200ms);
    CHECK(accepted.wait_for(10s));
  }
}

TEST_CASE("unix bounded: a slow reader is served; a read past its deadline takes waiting bytes") {
  const watchdog guard("unix bounded forms, ready peers", 60 * timeout_scale());
  const descriptor_check descriptors;
  {
    unix_loopback net;
    auto reader = net.pool.spawn([](unix_listener& listener) -> task<std::size_t> {
      co_return co_await read_slowly_then_drain(co_await listener.accept(), 1s);
    }(net.listener));
    const stalled_write seen = run(
        net.pool,
        [](unix_endpoint address) -> task<stalled_write> {
          co_return co_await write_to_slow_reader(co_await unix_stream::connect(address));
        }(net.address),
        "the unix writer");
    INFO("error: ", seen.error.message(), " after ", seen.took.count() / 1'000'000, " ms");
    CHECK_FALSE(seen.error);
    REQUIRE(reader.wait_for(10s));
    CHECK(reader.get() == slow_reader_payload);
  }
  {
    unix_loopback net;
    run(
        net.pool,
        [](unix_listener& listener) -> task<void> {
          auto connecting = spawn(unix_stream::connect(listener.local_endpoint()));
          unix_stream reader = co_await listener.accept();
          unix_stream writer = co_await connecting;
          for (const auto past : {1ms, 0ms}) {
            co_await read_ready_bytes_past_deadline(reader, writer, past);
          }
        }(net.listener),
        "the unix reads");
  }
}

}  // namespace
}  // namespace canopy::testing
