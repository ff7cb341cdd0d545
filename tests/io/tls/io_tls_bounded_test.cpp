// tls_stream's bounded forms, read_some_until and write_all_within, on
// whichever backend CANOPY_IO_BACKEND names: a read that times out takes
// nothing and leaves the stream usable; reads raced against deadlines of a
// few microseconds lose no byte and reorder none; a write to a peer that
// never reads ends with timed_out once the socket stalls, and the stream
// is then unusable; one to a slow but steady reader is served; a read whose
// deadline has passed returns a record the socket holds.
#include <doctest/doctest.h>
#include <sys/ioctl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <system_error>
#include <vector>

#include "coroutine/coroutine.hpp"
#include "io/io.hpp"
#include "io/tls/tls_stream.hpp"
#include "tests/deadline_race_support.hpp"
#include "tests/io_test_support.hpp"
#include "tests/test_support.hpp"
#include "tests/tls_test_support.hpp"
#include "tests/watchdog.hpp"

namespace canopy::testing {
namespace {

using namespace std::chrono_literals;
using io::tcp_listener;
using io::tcp_stream;
using io::tls_context;
using tls = io::tls_stream<tcp_stream>;
using steady = std::chrono::steady_clock;

tls_context server_context(const test_certificates& certs) {
  io::tls_server_options options;
  options.certificate_chain_file = certs.path("server.pem");
  options.private_key_file = certs.path("server.key");
  return tls_context::server(options);
}

tls_context client_context(const test_certificates& certs) {
  io::tls_client_options options;
  options.ca_file = certs.path("ca.pem");
  return tls_context::client(options);
}

// Fails the test if the case leaves a descriptor open; made before the
// case's loopback, so that it checks after the pool and listener closed.
struct descriptor_check {
  std::size_t before = open_fd_count();
  descriptor_check() = default;
  descriptor_check(const descriptor_check&) = delete;
  descriptor_check& operator=(const descriptor_check&) = delete;
  ~descriptor_check() { CHECK(open_fd_count() == before); }
};

TEST_CASE("tls bounded: a read that times out takes nothing; the stream stays usable") {
  const watchdog guard("tls read_some_until", 60 * timeout_scale());
  const test_certificates certs;
  const descriptor_check descriptors;
  loopback net;
  // The server sends nothing until the client's first message, then one
  // line: so the client's first bounded read must time out.
  auto server = net.pool.spawn([](tcp_listener& listener, tls_context context) -> task<void> {
    tls stream(co_await listener.accept(), context);
    co_await stream.handshake();
    std::vector<std::byte> buffer(64);
    const std::size_t got = co_await stream.read_some(buffer);
    REQUIRE(got > 0);
    co_await stream.write_all(bytes_of("after the timeout"));
    co_await stream.shutdown();
  }(net.listener, server_context(certs)));

  struct outcome {
    std::error_code first_error;
    std::size_t first_count = 1;
    std::chrono::nanoseconds waited{};
    bool usable_after = false;
    std::string rest;
  };
  const outcome seen = run(
      net.pool,
      [](io::endpoint address, tls_context context) -> task<outcome> {
        tls stream(co_await tcp_stream::connect(address), context, "localhost");
        co_await stream.handshake();
        outcome result;
        std::vector<std::byte> buffer(64);
        const auto start = steady::now();
        result.first_count =
            co_await stream.read_some_until(buffer, start + 50ms, result.first_error);
        result.waited = steady::now() - start;
        result.usable_after = stream.usable();
        co_await stream.write_all(bytes_of("go"));
        std::error_code error;
        for (;;) {
          const std::size_t got =
              co_await stream.read_some_until(buffer, steady::now() + 10s, error);
          if (got == 0 || error) {
            break;
          }
          result.rest.append(reinterpret_cast<const char*>(buffer.data()), got);
        }
        CHECK_FALSE(error);
        co_return result;
      }(net.address, client_context(certs)),
      "the client");
  CHECK(seen.first_error == std::errc::timed_out);
  CHECK(seen.first_count == 0);
  CHECK(seen.waited >= 50ms);
  CHECK(seen.usable_after);
  CHECK(seen.rest == "after the timeout");
  CHECK(server.wait_for(10s));
  server.get();
}

TEST_CASE("tls bounded: reads raced against deadlines of microseconds lose and reorder nothing") {
  const watchdog guard("tls read_some_until race", 120 * timeout_scale());
  const test_certificates certs;
  const descriptor_check descriptors;
  loopback net;
  std::atomic<std::size_t> client_timeouts{0};
  const std::size_t messages = static_cast<std::size_t>(20000 / stress_divisor());
  // The server writes the numbers 0..messages-1 racing the client's
  // deadlines (write_numbers_racing_deadlines), then sends close_notify.
  auto server = net.pool.spawn([](tcp_listener& listener, tls_context context, std::size_t count,
                                  std::atomic<std::size_t>& client_timeouts) -> task<void> {
    tls stream(co_await listener.accept(), context);
    co_await stream.handshake();
    co_await write_numbers_racing_deadlines(stream, count, client_timeouts);
    co_await stream.shutdown();
  }(net.listener, server_context(certs), messages, client_timeouts));

  struct outcome {
    std::size_t numbers = 0;
    std::size_t out_of_order = 0;
    std::size_t timeouts = 0;
    std::error_code error;
  };
  const outcome seen = run(
      net.pool,
      [](io::endpoint address, tls_context context,
         std::atomic<std::size_t>& client_timeouts) -> task<outcome> {
        tls stream(co_await tcp_stream::connect(address), context, "localhost");
        co_await stream.handshake();
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
            for (int k = 0; k < 4; ++k) {
              value |= std::to_integer<std::uint32_t>(partial[used + k]) << (8 * k);
            }
            result.out_of_order += value != expected ? 1 : 0;
            expected = value + 1;
            ++result.numbers;
          }
          partial.erase(partial.begin(), partial.begin() + static_cast<long>(used));
        }
        co_return result;
      }(net.address, client_context(certs), client_timeouts),
      "the client");
  INFO("timeouts: ", seen.timeouts);
  CHECK(seen.timeouts > 0);  // the race was run
  CHECK_FALSE(seen.error);
  CHECK(seen.numbers == messages);
  CHECK(seen.out_of_order == 0);
  CHECK(server.wait_for(10s));
  server.get();
}

TEST_CASE("tls bounded: a write to a peer that never reads ends with timed_out; then unusable") {
  const watchdog guard("tls write_all_within", 60 * timeout_scale());
  const test_certificates certs;
  const descriptor_check descriptors;
  loopback net;
  // The server finishes the handshake and then reads nothing, until the
  // client is done.
  auto accepted = net.pool.spawn([](tcp_listener& listener, tls_context context) -> task<tls> {
    tls stream(co_await listener.accept(), context);
    co_await stream.handshake();
    co_return stream;
  }(net.listener, server_context(certs)));

  struct outcome {
    std::error_code error;
    std::chrono::nanoseconds took{};
    bool usable_after = true;
    std::error_code next_error;
  };
  const outcome seen = run(
      net.pool,
      [](io::endpoint address, tls_context context) -> task<outcome> {
        tls stream(co_await tcp_stream::connect(address), context, "localhost");
        co_await stream.handshake();
        outcome result;
        const std::vector<std::byte> payload(64 << 20,
                                             std::byte{'x'});  // more than the sockets hold
        const auto start = steady::now();
        co_await stream.write_all_within(payload, 200ms, result.error);
        result.took = steady::now() - start;
        result.usable_after = stream.usable();
        co_await stream.write_all_within(bytes_of("more"), 200ms, result.next_error);
        co_return result;
      }(net.address, client_context(certs)),
      "the client");
  CHECK(seen.error == std::errc::timed_out);
  CHECK(seen.took >= 200ms);
  CHECK_FALSE(seen.usable_after);
  CHECK(seen.next_error == io::tls_errc::unusable);
  CHECK(accepted.wait_for(10s));
}

TEST_CASE("tls bounded: a slow but steady reader is served, not timed out") {
  const watchdog guard("tls write_all_within slow reader", 60 * timeout_scale());
  const test_certificates certs;
  const descriptor_check descriptors;
  loopback net;
  // More than the sockets hold plus what the reader takes in its slow
  // second (16 KiB every 5 ms, never enough at once for the writer's
  // writability edge), then it drains the rest at once.
  constexpr std::size_t payload_size = 32 << 20;
  auto reader =
      net.pool.spawn([](tcp_listener& listener, tls_context context) -> task<std::size_t> {
        tls stream(co_await listener.accept(), context);
        co_await stream.handshake();
        std::vector<std::byte> chunk(16 << 10);
        const auto slow_until = steady::now() + 1s;
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
          total += got;
        }
      }(net.listener, server_context(certs)));

  struct outcome {
    std::error_code error;
    std::chrono::nanoseconds took{};
  };
  const outcome seen = run(
      net.pool,
      [](io::endpoint address, tls_context context) -> task<outcome> {
        tls stream(co_await tcp_stream::connect(address), context, "localhost");
        co_await stream.handshake();
        outcome result;
        const std::vector<std::byte> payload(payload_size, std::byte{'x'});
        const auto start = steady::now();
        co_await stream.write_all_within(payload, 200ms, result.error);
        result.took = steady::now() - start;
        if (!result.error) {
          co_await stream.shutdown(result.error);
        }
        // Then wait for the reader's close: closing now, with the session
        // tickets it sent unread, would reset the connection and could cut
        // off the reader's last bytes.
        std::vector<std::byte> sink(256);
        std::error_code ignored;
        while (co_await stream.read_some(sink, ignored) > 0) {
        }
        co_return result;
      }(net.address, client_context(certs)),
      "the writer");
  INFO("error: ", seen.error.message(), " after ", seen.took.count() / 1'000'000, " ms");
  CHECK_FALSE(seen.error);
  REQUIRE(reader.wait_for(10s));
  CHECK(reader.get() == payload_size);
}

TEST_CASE("tls bounded: a read whose deadline has passed returns a record waiting in the socket") {
  const watchdog guard("tls read_some_until past deadline", 60 * timeout_scale());
  const test_certificates certs;
  const descriptor_check descriptors;
  loopback net;
  run(
      net.pool,
      [](tcp_listener& listener, tls_context server_side, tls_context client_side) -> task<void> {
        auto connecting = spawn([](io::endpoint address, tls_context context) -> task<tls> {
          tls stream(co_await tcp_stream::connect(address), context, "localhost");
          co_await stream.handshake();
          co_return stream;
        }(listener.local_endpoint(), std::move(client_side)));
        tls writer(co_await listener.accept(), server_side);
        co_await writer.handshake();
        tls reader = co_await connecting;
        std::vector<std::byte> buffer(8);
        for (const auto past : {1ms, 0ms, 1ms, 0ms}) {
          // The record reaches the client's socket, unread: the engine holds
          // nothing, so only the socket's bytes can answer the read.
          co_await writer.write_all(bytes_of("ab"));
          int waiting = 0;
          while (::ioctl(reader.next_layer().native_handle(), FIONREAD, &waiting) == 0 &&
                 waiting == 0) {
            co_await sleep_for(1ms);
          }
          std::error_code error;
          const std::size_t got =
              co_await reader.read_some_until(buffer, steady::now() - past, error);
          INFO("error: ", error.message());
          CHECK_FALSE(error);
          CHECK(got == 2);
        }
      }(net.listener, server_context(certs), client_context(certs)),
      "the reads");
}

}  // namespace
}  // namespace canopy::testing
