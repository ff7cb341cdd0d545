// canopy::io TLS's fiber forms (io/fiber/tls_fiber.hpp) on loopback, on
// whichever backend CANOPY_IO_BACKEND names: a fiber client against a
// coroutine server and a coroutine client against a fiber server, each
// moving bytes both ways at once and ending with close_notify; both sides
// fibers over a Unix-domain stream; a refused certificate in a fiber; a
// call outside a fiber; a write of nothing (task and fiber forms, bounded
// too) ends at once, without error while the stream is open and with
// bad_file_descriptor once it is closed, as a write of bytes there (those
// empty writes used to succeed on a closed stream), and so does a fiber's
// read into an empty buffer (which used to wait for a byte).
#include <doctest/doctest.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "coroutine/coroutine.hpp"
#include "fiber/fiber.hpp"
#include "io/fiber/fiber_io.hpp"
#include "io/fiber/tls_fiber.hpp"
#include "io/io.hpp"
#include "io/tls/tls_stream.hpp"
#include "tests/io_test_support.hpp"
#include "tests/test_support.hpp"
#include "tests/tls_test_support.hpp"
#include "tests/watchdog.hpp"

namespace canopy::testing {
namespace {

using namespace std::chrono_literals;
using io::endpoint;
using io::tcp_listener;
using io::tcp_stream;
using io::tls_context;
using tls = io::tls_stream<tcp_stream>;
namespace fiber_io = canopy::this_fiber;

// OpenSSL's handshake runs on the fiber's stack.
constexpr std::size_t tls_fiber_stack = 256 * 1024;

tls_context server_context(const test_certificates& certs) {
  io::tls_server_options options;
  options.certificate_chain_file = certs.path("server.pem");
  options.private_key_file = certs.path("server.key");
  options.alpn = {"x-canopy"};
  return tls_context::server(options);
}

tls_context client_context(const test_certificates& certs) {
  io::tls_client_options options;
  options.ca_file = certs.path("ca.pem");
  options.alpn = {"x-canopy"};
  return tls_context::client(options);
}

std::string make_payload() {
  std::string payload(256 * 1024, '\0');
  for (std::size_t i = 0; i < payload.size(); ++i) {
    payload[i] = static_cast<char>('a' + (i * 7 + i / 4096) % 26);
  }
  return payload;
}

// A coroutine echo server: every byte back until the client's
// close_notify, then its own.
task<std::string> echo_task(tcp_listener& listener, tls_context context) {
  tls stream(co_await listener.accept(), context);
  co_await stream.handshake();
  std::vector<std::byte> buffer(7000);
  for (;;) {
    const std::size_t got = co_await stream.read_some(buffer);
    if (got == 0) {
      break;
    }
    co_await stream.write_all(std::span(buffer).first(got));
  }
  co_await stream.shutdown();
  co_return std::string(stream.alpn());
}

TEST_CASE("tls fibers: a fiber client against a coroutine server, both ways at once") {
  const watchdog guard("tls fiber client", 60 * timeout_scale());
  const test_certificates certs;
  loopback net;
  const std::string payload = make_payload();
  auto server = net.pool.spawn(echo_task(net.listener, server_context(certs)));
  io::reactor& owner = io::reactor::of(net.pool);
  auto client = net.pool.spawn(canopy::fiber(
      [&owner, &net, &payload, context = client_context(certs)] {
        tls stream(fiber_io::connect(owner, net.address), context, "localhost");
        fiber_io::handshake(stream);
        CHECK(stream.alpn() == "x-canopy");
        // Another fiber writes while this one reads.
        auto writer = canopy::spawn(canopy::fiber(
            [&stream, &payload] {
              for (std::size_t at = 0; at < payload.size(); at += 50'000) {
                fiber_io::write_all(stream, bytes_of(std::string_view(payload).substr(at, 50'000)));
              }
              fiber_io::shutdown(stream);
            },
            tls_fiber_stack));
        std::string echoed;
        std::vector<std::byte> buffer(5000);
        while (const std::size_t got = fiber_io::read_some(stream, buffer)) {
          echoed.append(reinterpret_cast<const char*>(buffer.data()), got);
        }
        canopy::this_fiber::await(writer);
        return echoed;
      },
      tls_fiber_stack));
  REQUIRE(client.wait_for(std::chrono::milliseconds(static_cast<long>(30'000 * timeout_scale()))));
  const std::string echoed = client.get();
  CHECK(echoed.size() == payload.size());
  CHECK(echoed == payload);
  REQUIRE(server.wait_for(10s));
  CHECK(server.get() == "x-canopy");
}

TEST_CASE("tls fibers: a coroutine client against a fiber server, both ways at once") {
  const watchdog guard("tls fiber server", 60 * timeout_scale());
  const test_certificates certs;
  loopback net;
  const std::string payload = make_payload();
  auto server = net.pool.spawn(canopy::fiber(
      [&net, context = server_context(certs)] {
        tls stream(fiber_io::accept(net.listener), context);
        fiber_io::handshake(stream);
        std::vector<std::byte> buffer(7000);
        std::size_t total = 0;
        while (const std::size_t got = fiber_io::read_some(stream, buffer)) {
          fiber_io::write_all(stream, std::span(buffer).first(got));
          total += got;
        }
        fiber_io::shutdown(stream);
        return total;
      },
      tls_fiber_stack));
  auto client = [](endpoint address, tls_context context,
                   const std::string* payload) -> task<std::string> {
    tls stream(co_await tcp_stream::connect(address), context, "localhost");
    co_await stream.handshake();
    auto writer = canopy::spawn([](tls* to, const std::string* data) -> task<void> {
      for (std::size_t at = 0; at < data->size(); at += 50'000) {
        co_await to->write_all(bytes_of(std::string_view(*data).substr(at, 50'000)));
      }
      co_await to->shutdown();
    }(&stream, payload));
    std::string echoed;
    std::vector<std::byte> buffer(5000);
    while (const std::size_t got = co_await stream.read_some(buffer)) {
      echoed.append(reinterpret_cast<const char*>(buffer.data()), got);
    }
    co_await std::move(writer);
    co_return echoed;
  };
  const std::string echoed =
      run(net.pool, client(net.address, client_context(certs), &payload), "the client");
  CHECK(echoed == payload);
  REQUIRE(server.wait_for(10s));
  CHECK(server.get() == payload.size());
}

TEST_CASE("tls fibers: a fiber server and a fiber client over a Unix-domain stream") {
  const watchdog guard("tls fiber unix", 60 * timeout_scale());
  const test_certificates certs;
  executor pool(io_config(2));
  io::reactor& owner = io::reactor::of(pool);
  const io::unix_endpoint name =
      io::unix_endpoint::abstract("canopy-tls-fiber-" + std::to_string(::getpid()));
  io::unix_listener listener = io::unix_listener::bind(owner, name);
  using unix_tls = io::tls_stream<io::unix_stream>;
  auto server = pool.spawn(canopy::fiber(
      [&listener, context = server_context(certs)] {
        unix_tls stream(fiber_io::accept(listener), context);
        fiber_io::handshake(stream);
        std::byte buffer[16];
        const std::size_t got = fiber_io::read_some(stream, buffer);
        fiber_io::write_all(stream, std::span(buffer).first(got));
        fiber_io::shutdown(stream);
        return got;
      },
      tls_fiber_stack));
  auto client = pool.spawn(canopy::fiber(
      [&owner, &name, context = client_context(certs)] {
        unix_tls stream(fiber_io::connect(owner, name), context, "localhost");
        fiber_io::handshake(stream);
        fiber_io::write_all(stream, bytes_of("ping"));
        // An empty read returns 0 at once and takes nothing.
        CHECK(fiber_io::read_some(stream, std::span<std::byte>()) == 0);
        std::string answer;
        std::byte buffer[16];
        while (const std::size_t got = fiber_io::read_some(stream, buffer)) {
          answer.append(reinterpret_cast<const char*>(buffer), got);
        }
        return answer;
      },
      tls_fiber_stack));
  REQUIRE(client.wait_for(std::chrono::milliseconds(static_cast<long>(30'000 * timeout_scale()))));
  CHECK(client.get() == "ping");
  REQUIRE(server.wait_for(10s));
  CHECK(server.get() == 4);
  pool.shutdown();
}

TEST_CASE("tls fibers: a refused certificate in a fiber; a call outside a fiber") {
  const watchdog guard("tls fiber errors", 60 * timeout_scale());
  const test_certificates certs;
  loopback net;
  auto server = net.pool.spawn([](tcp_listener& listener, tls_context context) -> task<bool> {
    tls stream(co_await listener.accept(), context);
    std::error_code error;
    co_await stream.handshake(error);
    co_return static_cast<bool>(error);
  }(net.listener, server_context(certs)));
  io::reactor& owner = io::reactor::of(net.pool);
  io::tls_client_options options;  // trusts only the system's CAs: ours is unknown
  auto client = net.pool.spawn(canopy::fiber(
      [&owner, &net, context = tls_context::client(options)] {
        tls stream(fiber_io::connect(owner, net.address), context, "localhost");
        std::error_code error;
        fiber_io::handshake(stream, error);
        CHECK(!stream.usable());
        return error;
      },
      tls_fiber_stack));
  REQUIRE(client.wait_for(std::chrono::milliseconds(static_cast<long>(30'000 * timeout_scale()))));
  const std::error_code error = client.get();
  CHECK(io::is_certificate_error(error));
  CHECK(error.message().find("certificate verify failed") != std::string::npos);
  REQUIRE(server.wait_for(10s));
  CHECK(server.get());  // the client's alert

  // Outside a fiber: std::logic_error, and the stream is untouched.
  tls idle(tcp_stream(), client_context(certs), "localhost");
  CHECK_THROWS_AS(fiber_io::handshake(idle), std::logic_error);
  CHECK(idle.usable());
}

// Every empty write form on `stream`: each error compared with `expected`.
task<void> empty_writes(tls* stream, std::error_code expected) {
  std::error_code error = std::make_error_code(std::errc::io_error);
  co_await stream->write_all(std::span<const std::byte>(), error);
  CHECK_MESSAGE(error == expected, "write_all: ", error.message());
  for (const std::chrono::milliseconds limit : {std::chrono::milliseconds::max(), 1000ms, 0ms}) {
    error = std::make_error_code(std::errc::io_error);
    co_await stream->write_all_within(std::span<const std::byte>(), limit, error);
    CHECK_MESSAGE(error == expected, "write_all_within, limit ", limit.count(),
                  " ms: ", error.message());
  }
  CHECK(stream->usable());
}

TEST_CASE("tls: a write of nothing ends at once; on a closed stream bad_file_descriptor") {
  const watchdog guard("tls empty writes", 60 * timeout_scale());
  const test_certificates certs;
  loopback net;
  const std::error_code bad_fd = std::make_error_code(std::errc::bad_file_descriptor);
  // Two connections, each served until the client goes (its bytes then
  // end without close_notify: the server's read fails, as expected here).
  auto server = net.pool.spawn([](tcp_listener& listener, tls_context context) -> task<int> {
    int served = 0;
    for (int i = 0; i < 2; ++i) {
      tls stream(co_await listener.accept(), context);
      std::error_code error;
      co_await stream.handshake(error);
      std::byte buffer[16];
      (void)co_await stream.read_some(buffer, error);
      served += error ? 1 : 0;
    }
    co_return served;
  }(net.listener, server_context(certs)));

  run(
      net.pool,
      [](endpoint address, tls_context context, std::error_code bad_fd) -> task<void> {
        tls stream(co_await tcp_stream::connect(address), context, "localhost");
        co_await stream.handshake();
        co_await empty_writes(&stream, std::error_code());
        stream.close();
        co_await empty_writes(&stream, bad_fd);
        bool threw = false;
        try {
          co_await stream.write_all(std::span<const std::byte>());
        } catch (const std::system_error& failure) {
          threw = failure.code() == bad_fd;
        }
        CHECK(threw);
      }(net.address, client_context(certs), bad_fd),
      "the task client");

  io::reactor& owner = io::reactor::of(net.pool);
  auto client = net.pool.spawn(canopy::fiber(
      [&owner, &net, bad_fd, context = client_context(certs)] {
        tls stream(fiber_io::connect(owner, net.address), context, "localhost");
        fiber_io::handshake(stream);
        std::error_code open_error = std::make_error_code(std::errc::io_error);
        fiber_io::write_all(stream, std::span<const std::byte>(), open_error);
        // An empty read on this idle stream: 0 at once, as the task form's.
        std::error_code read_error = std::make_error_code(std::errc::io_error);
        const std::size_t read = fiber_io::read_some(stream, std::span<std::byte>(), read_error);
        stream.close();
        std::error_code closed_error;
        fiber_io::write_all(stream, std::span<const std::byte>(), closed_error);
        std::error_code closed_read_error;
        (void)fiber_io::read_some(stream, std::span<std::byte>(), closed_read_error);
        return !open_error && read == 0 && !read_error && closed_error == bad_fd &&
               closed_read_error == bad_fd && stream.usable();
      },
      tls_fiber_stack));
  REQUIRE(client.wait_for(std::chrono::milliseconds(static_cast<long>(30'000 * timeout_scale()))));
  CHECK(client.get());
  REQUIRE(server.wait_for(10s));
  CHECK(server.get() == 2);
}

}  // namespace
}  // namespace canopy::testing
