// canopy::io UDP: send_to/receive_from and connected send/receive over IPv4
// and IPv6, in task and fiber forms; truncation of a datagram larger than
// the buffer; bad input (wrong family, unusable address, a closed socket, a
// close during a wait). Every case checks that no descriptor leaks.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <string>
#include <system_error>
#include <thread>

#include "coroutine/coroutine.hpp"
#include "io/fiber/fiber_io.hpp"
#include "io/io.hpp"
#include "tests/io_test_support.hpp"
#include "tests/watchdog.hpp"

using canopy::executor;
using canopy::task;
using canopy::io::datagram;
using canopy::io::endpoint;
using canopy::io::reactor;
using canopy::io::udp_socket;
using canopy::testing::io_config;
using canopy::testing::open_fd_count;

namespace {

std::span<const std::byte> bytes_of(const std::string& text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

std::string text_of(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

// A bound socket on the loopback of `family`; empty (with a message) where
// the machine has no IPv6 loopback.
udp_socket loopback_socket(reactor& owner, int family) {
  std::error_code error;
  udp_socket socket = udp_socket::bind(
      owner, family == AF_INET ? endpoint::loopback_v4(0) : endpoint::loopback_v6(0), error);
  if (error && family == AF_INET6) {
    MESSAGE("IPv6 loopback unavailable here: " << error.message());
    return {};
  }
  REQUIRE_FALSE(error);
  return socket;
}

}  // namespace

TEST_CASE("udp send_to and receive_from, task form, IPv4 and IPv6") {
  const canopy::testing::watchdog guard("udp task", 30);
  const std::size_t fds_before = open_fd_count();
  {
    executor pool(io_config(2));
    reactor& owner = reactor::of(pool);
    for (const int family : {AF_INET, AF_INET6}) {
      udp_socket server = loopback_socket(owner, family);
      udp_socket client = loopback_socket(owner, family);
      if (!server.is_open()) {
        continue;
      }
      const endpoint server_at = server.local_endpoint();
      const endpoint client_at = client.local_endpoint();
      CHECK(server_at.port() != 0);
      // The server echoes one datagram to whoever sent it.
      auto echo = pool.spawn([](udp_socket* socket) -> task<std::string> {
        std::array<std::byte, 256> buffer{};
        const datagram got = co_await socket->receive_from(buffer);
        co_await socket->send_to(std::span(buffer).first(got.size), got.from);
        co_return got.from.to_string();
      }(&server));
      auto ask = pool.spawn([](udp_socket* socket, endpoint to) -> task<std::string> {
        const std::size_t sent = co_await socket->send_to(bytes_of("ping"), to);
        CHECK(sent == 4);
        std::array<std::byte, 256> buffer{};
        const datagram got = co_await socket->receive_from(buffer);
        CHECK(got.from.to_string() == to.to_string());
        co_return text_of(std::span(buffer).first(got.size));
      }(&client, server_at));
      CHECK(ask.get() == "ping");
      CHECK(echo.get() == client_at.to_string());
    }
  }
  CHECK(open_fd_count() == fds_before);
}

TEST_CASE("udp connected send and receive, task form") {
  const canopy::testing::watchdog guard("udp connected", 30);
  const std::size_t fds_before = open_fd_count();
  {
    executor pool(io_config(2));
    reactor& owner = reactor::of(pool);
    udp_socket left = loopback_socket(owner, AF_INET);
    udp_socket right = loopback_socket(owner, AF_INET);
    udp_socket stranger = loopback_socket(owner, AF_INET);
    REQUIRE_FALSE(left.connect(right.local_endpoint()));
    REQUIRE_FALSE(right.connect(left.local_endpoint()));
    CHECK(left.remote_endpoint().to_string() == right.local_endpoint().to_string());
    auto exchange =
        pool.spawn([](udp_socket* from, udp_socket* to, udp_socket* other) -> task<std::string> {
          // A datagram from a third socket is filtered out by the connected receiver.
          co_await other->send_to(bytes_of("noise"), to->local_endpoint());
          CHECK(co_await from->send(bytes_of("first")) == 5);
          CHECK(co_await from->send(bytes_of("second")) == 6);
          std::array<std::byte, 64> buffer{};
          std::string both = text_of(std::span(buffer).first(co_await to->receive(buffer)));
          both += "+" + text_of(std::span(buffer).first(co_await to->receive(buffer)));
          co_return both;
        }(&left, &right, &stranger));
    CHECK(exchange.get() == "first+second");
  }
  CHECK(open_fd_count() == fds_before);
}

TEST_CASE("udp fiber forms: send_to, receive_from, connected send and receive") {
  const canopy::testing::watchdog guard("udp fiber", 30);
  const std::size_t fds_before = open_fd_count();
  {
    executor pool(io_config(2));
    reactor& owner = reactor::of(pool);
    for (const int family : {AF_INET, AF_INET6}) {
      udp_socket server = loopback_socket(owner, family);
      udp_socket client = loopback_socket(owner, family);
      if (!server.is_open()) {
        continue;
      }
      // The forms' earlier name, an alias kept for code written against it.
      namespace fio = canopy::io::this_fiber;
      auto echo = pool.spawn(canopy::fiber([&server] {
        std::array<std::byte, 64> buffer{};
        const datagram got = fio::receive_from(server, buffer);
        fio::send_to(server, std::span(buffer).first(got.size), got.from);
        REQUIRE_FALSE(server.connect(got.from));
        return text_of(std::span(buffer).first(fio::receive(server, buffer)));
      }));
      auto ask = pool.spawn(canopy::fiber([&client, to = server.local_endpoint()] {
        CHECK(fio::send_to(client, bytes_of("hello"), to) == 5);
        std::array<std::byte, 64> buffer{};
        const datagram got = fio::receive_from(client, buffer);
        REQUIRE_FALSE(client.connect(got.from));
        CHECK(fio::send(client, bytes_of("again")) == 5);
        return text_of(std::span(buffer).first(got.size));
      }));
      CHECK(ask.get() == "hello");
      CHECK(echo.get() == "again");
    }
  }
  CHECK(open_fd_count() == fds_before);
}

TEST_CASE("udp: a datagram larger than the buffer reports truncation (message_size)") {
  const canopy::testing::watchdog guard("udp truncation", 30);
  const std::size_t fds_before = open_fd_count();
  {
    executor pool(io_config(1));
    reactor& owner = reactor::of(pool);
    udp_socket receiver = loopback_socket(owner, AF_INET);
    udp_socket sender = loopback_socket(owner, AF_INET);
    const std::string big(100, 'x');
    auto outcome =
        pool.spawn([](udp_socket* in, udp_socket* out, std::string payload) -> task<bool> {
          co_await out->send_to(bytes_of(payload), in->local_endpoint());
          co_await out->send_to(bytes_of("next"), in->local_endpoint());
          co_await out->send_to(bytes_of(payload), in->local_endpoint());
          std::array<std::byte, 10> small{};
          std::error_code error;
          const datagram cut = co_await in->receive_from(small, error);
          CHECK(error == std::errc::message_size);
          CHECK(cut.size == small.size());
          CHECK(text_of(small) == std::string(10, 'x'));
          CHECK(cut.from.to_string() == out->local_endpoint().to_string());
          // The rest of the cut datagram is gone: the next receive gets the next one.
          const datagram next = co_await in->receive_from(small, error);
          CHECK_FALSE(error);
          CHECK(text_of(std::span(small).first(next.size)) == "next");
          // The throwing form throws the same code.
          try {
            (void)co_await in->receive_from(small);
            co_return false;
          } catch (const std::system_error& failure) {
            CHECK(failure.code() == std::errc::message_size);
          }
          co_return true;
        }(&receiver, &sender, big));
    CHECK(outcome.get());
    // The fiber form reports it the same way.
    auto fibered = pool.spawn(canopy::fiber([&] {
      namespace fio = canopy::this_fiber;
      fio::send_to(sender, bytes_of(big), receiver.local_endpoint());
      std::array<std::byte, 10> small{};
      std::error_code error;
      const datagram cut = fio::receive_from(receiver, small, error);
      return error == std::errc::message_size && cut.size == 10;
    }));
    CHECK(fibered.get());
  }
  CHECK(open_fd_count() == fds_before);
}

TEST_CASE("udp bad input: wrong family, unusable address, closed socket, close during a wait") {
  const canopy::testing::watchdog guard("udp bad input", 30);
  const std::size_t fds_before = open_fd_count();
  {
    executor pool(io_config(1));
    reactor& owner = reactor::of(pool);
    std::error_code error;
    udp_socket wrong = udp_socket::open(owner, AF_UNIX, error);
    CHECK(error == std::errc::address_family_not_supported);
    CHECK_FALSE(wrong.is_open());
    CHECK_THROWS_AS(udp_socket::open(owner, AF_UNIX), std::system_error);
    // A loopback port another socket holds (neither asks for SO_REUSEADDR).
    udp_socket holder = udp_socket::bind(owner, endpoint::loopback_v4(0));
    (void)udp_socket::bind(owner, holder.local_endpoint(), error);
    CHECK(error == std::errc::address_in_use);
    CHECK_THROWS_AS(udp_socket::bind(owner, holder.local_endpoint()), std::system_error);

    udp_socket unbound = udp_socket::open(owner, AF_INET);
    CHECK(unbound.is_open());
    std::array<std::byte, 16> buffer{};
    unbound.try_receive_from(buffer, error);
    CHECK(error == std::errc::resource_unavailable_try_again);

    udp_socket closed;
    CHECK(closed.connect(endpoint::loopback_v4(9)) == std::errc::bad_file_descriptor);
    closed.try_send_to(bytes_of("x"), endpoint::loopback_v4(9), error);
    CHECK(error == std::errc::bad_file_descriptor);
    auto on_closed = pool.spawn([](udp_socket* socket) -> task<std::error_code> {
      std::error_code failed;
      std::array<std::byte, 16> space{};
      (void)co_await socket->receive_from(space, failed);
      co_return failed;
    }(&closed));
    CHECK(on_closed.get() == std::errc::bad_file_descriptor);

    // A close from another thread ends a waiting receive with operation_canceled.
    udp_socket waiting = udp_socket::bind(owner, endpoint::loopback_v4(0));
    std::atomic<bool> started{false};
    auto waiter =
        pool.spawn([](udp_socket* socket, std::atomic<bool>* began) -> task<std::error_code> {
          std::error_code failed;
          std::array<std::byte, 16> space{};
          began->store(true);
          (void)co_await socket->receive_from(space, failed);
          co_return failed;
        }(&waiting, &started));
    for (int spin = 0; spin < 5000 && !started.load(); ++spin) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    waiting.close();
    CHECK(waiter.get() == std::errc::operation_canceled);
  }
  CHECK(open_fd_count() == fds_before);
}

TEST_CASE("endpoint: any_v4 and any_v6 are the wildcard addresses, loopback_* the loopback ones") {
  CHECK(canopy::io::endpoint::any_v4(8080).to_string() == "0.0.0.0:8080");
  CHECK(canopy::io::endpoint::any_v4(8080).family() == AF_INET);
  CHECK(canopy::io::endpoint::any_v6(443).family() == AF_INET6);
  CHECK(canopy::io::endpoint::any_v6(443).port() == 443);
  CHECK(canopy::io::endpoint::any_v6(443).to_string() ==
        canopy::io::endpoint::parse("::", 443).to_string());
  CHECK(canopy::io::endpoint::any_v4(1).to_string() != canopy::io::endpoint::loopback_v4(1).to_string());
  CHECK(canopy::io::endpoint::any_v6(1).to_string() != canopy::io::endpoint::loopback_v6(1).to_string());
}
