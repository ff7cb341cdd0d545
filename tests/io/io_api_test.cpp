// The README's I/O promises, checked as a user would rely on them, through
// the public headers: timers given zero, negative and maximal durations,
// bad addresses and ports in both error forms, and the HTTP server with
// request bodies (large, at and over the limit, cut off by the client) and
// `Expect: 100-continue`. Run once per backend (run.sh's io_ pattern).
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <canopy/fiber.hpp>
#include <canopy/io.hpp>
#include <canopy/io/fiber.hpp>
#include <canopy/io/http.hpp>
#include <canopy/sync.hpp>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "tests/http_test_support.hpp"
#include "tests/io_test_support.hpp"
#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

namespace io = canopy::io;
namespace http = canopy::io::http;
using canopy::async_event;
using canopy::task;
using canopy::testing::eventually;
using canopy::testing::watchdog;
using namespace std::chrono_literals;

namespace {

canopy::executor_config reactor_config(std::size_t workers) {
  canopy::executor_config config = io::with_reactor();
  config.worker_count = workers;
  return config;
}

task<int> forty_two() { co_return 42; }

task<int> never_ends(async_event& never) {
  co_await never;
  co_return 0;
}

}  // namespace

TEST_CASE("timers: zero, negative and passed deadlines do not wait; maximal ones do not overflow") {
  watchdog guard("timer extremes", 60);
  canopy::executor pool(reactor_config(2));
  io::reactor_timers timers(pool);
  async_event never;

  const bool short_ones = canopy::block_on(pool, [&]() -> task<bool> {
    co_await canopy::sleep_for(0ms);
    co_await canopy::sleep_for(-1s);
    co_await canopy::sleep_for(std::chrono::hours::min());
    co_await canopy::sleep_until(std::chrono::steady_clock::time_point::min());
    auto zero = co_await canopy::with_timeout(0ms, never_ends(never));
    auto negative = co_await canopy::with_timeout(-1s, never_ends(never));
    co_return !zero && zero.error() == io::errc::timed_out && !negative &&
        negative.error() == io::errc::timed_out;
  }());
  CHECK(short_ones);

  // "No limit" spelt as the largest duration: the work's value, not a
  // timeout at once from an overflowed deadline.
  const int value = canopy::block_on(pool, [&]() -> task<int> {
    auto got = co_await canopy::with_timeout(std::chrono::hours::max(), forty_two());
    auto also = co_await canopy::with_timeout(std::chrono::nanoseconds::max(), forty_two());
    co_return got&& also ? *got + *also - 42 : -1;
  }());
  CHECK(value == 42);

  // A sleep of hours::max() sleeps (until cancelled), in a task and a fiber.
  auto sleeper = pool.spawn([]() -> task<int> {
    co_await canopy::sleep_for(std::chrono::hours::max());
    co_return 1;
  }());
  auto fiber_sleeper = pool.spawn(canopy::fiber([] {
    canopy::this_fiber::sleep_for(std::chrono::seconds::max());
    return 1;
  }));
  auto fiber_short = pool.spawn(canopy::fiber([] {
    canopy::this_fiber::sleep_for(-5s);
    canopy::this_fiber::sleep_for(0ns);
    return 3;
  }));
  CHECK(fiber_short.get() == 3);
  CHECK_FALSE(sleeper.wait_for(50ms));
  CHECK_FALSE(fiber_sleeper.wait_for(1ms));
  CHECK(sleeper.cancel());
  CHECK(fiber_sleeper.cancel());
  CHECK_THROWS_AS(sleeper.get(), canopy::task_cancelled);
  CHECK_THROWS_AS(fiber_sleeper.get(), canopy::task_cancelled);
}

TEST_CASE("bad addresses and ports: clear errors in both forms, never a crash") {
  watchdog guard("bad addresses", 30);
  canopy::executor pool(reactor_config(1));
  io::reactor& reactor = io::reactor::of(pool);

  std::error_code error;
  (void)io::endpoint::parse("not an address", 80, error);
  CHECK(error == std::errc::invalid_argument);
  CHECK_THROWS_AS((void)io::endpoint::parse("127.0.0.256", 80), std::system_error);
  CHECK_THROWS_AS((void)io::endpoint::parse("", 80), std::system_error);

  // A port already listened on: address_in_use, reported or thrown.
  auto first = io::tcp_listener::bind(reactor, io::endpoint::loopback_v4(0));
  const io::endpoint taken = first.local_endpoint();
  error.clear();
  auto second = io::tcp_listener::bind(reactor, taken, error);
  CHECK(error == std::errc::address_in_use);
  try {
    (void)io::tcp_listener::bind(reactor, taken);
    FAIL("bind to a port in use did not throw");
  } catch (const std::system_error& thrown) {
    CHECK(thrown.code() == std::errc::address_in_use);
  }
  // An address of no interface of this machine (TEST-NET-1, RFC 5737).
  error.clear();
  (void)io::tcp_listener::bind(reactor, io::endpoint::parse("192.0.2.1", 0), error);
  CHECK(error == std::errc::address_not_available);

  // UDP: the same port twice.
  auto udp = io::udp_socket::bind(reactor, io::endpoint::loopback_v4(0));
  error.clear();
  (void)io::udp_socket::bind(reactor, udp.local_endpoint(), error);
  CHECK(error == std::errc::address_in_use);

  // Connecting to a port nobody listens on: connection_refused, in a task.
  first.close();
  const std::error_code refused = canopy::block_on(pool, [&]() -> task<std::error_code> {
    std::error_code failed;
    (void)co_await io::tcp_stream::connect(reactor, taken, failed);
    co_return failed;
  }());
  CHECK(refused == std::errc::connection_refused);
}

namespace {

// Answers every request with the size of its body and a checksum of it.
void body_summary(const http::request& req, std::string& out) {
  std::uint64_t sum = 0;
  for (const char byte : req.body) {
    sum += static_cast<unsigned char>(byte);
  }
  http::append_response(out, 200, "OK", "text/plain",
                        std::to_string(req.body.size()) + " " + std::to_string(sum),
                        !req.keep_alive);
}

constexpr std::size_t body_limit = 64 * 1024;

// body_summary on a free port of 127.0.0.1, bodies up to body_limit.
class body_server : public canopy::testing::http_test_server {
 public:
  body_server() : http_test_server(canopy::testing::with_body_limit(body_limit), &body_summary) {}
};

using canopy::testing::raw_client;

std::string post_head(std::size_t length, std::string_view extra = "") {
  return "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(length) + "\r\n" +
         std::string(extra) + "\r\n";
}

std::string pattern_body(std::size_t length) {
  std::string body(length, '\0');
  for (std::size_t i = 0; i < length; ++i) {
    body[i] = static_cast<char>('a' + i % 26);
  }
  return body;
}

std::string summary_of(std::string_view body) {
  std::uint64_t sum = 0;
  for (const char byte : body) {
    sum += static_cast<unsigned char>(byte);
  }
  return std::to_string(body.size()) + " " + std::to_string(sum);
}

}  // namespace

TEST_CASE("http server: request bodies in pieces, at the limit, over it, and cut off") {
  watchdog guard("http bodies", 60);
  body_server server;

  SUBCASE("a body sent in small pieces, then a GET on the same connection") {
    raw_client client(server.port());
    const std::string body = pattern_body(body_limit - 1);
    client.send(post_head(body.size()));
    for (std::size_t at = 0; at < body.size(); at += 1000) {
      client.send(std::string_view(body).substr(at, 1000));
    }
    client.send("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    REQUIRE(client.read_to_eof());
    CHECK(client.received.find("\r\n\r\n" + summary_of(body) + "HTTP/1.1 200 OK") !=
          std::string::npos);
    CHECK(client.received.find("\r\n\r\n0 0") != std::string::npos);
  }
  SUBCASE("exactly the limit is served; one byte more is 413 and a close") {
    raw_client at_limit(server.port());
    const std::string body = pattern_body(body_limit);
    at_limit.send(post_head(body.size()) + body);
    CHECK(at_limit.read_until("\r\n\r\n" + summary_of(body)));
    CHECK(at_limit.received.rfind("HTTP/1.1 200 OK", 0) == 0);

    raw_client over(server.port());
    over.send(post_head(body_limit + 1));
    CHECK(over.read_to_eof());
    CHECK(over.received.rfind("HTTP/1.1 413 Content Too Large\r\n", 0) == 0);
    CHECK(over.received.find("Connection: close") != std::string::npos);
  }
  SUBCASE("malformed lengths, and Transfer-Encoding with Content-Length: 400 and a close") {
    for (const std::string_view head :
         {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
          "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 12abc\r\n\r\n",
          "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n",
          "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
          "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n"
          "0\r\n\r\n"}) {
      CAPTURE(head);
      raw_client client(server.port());
      client.send(head);
      CHECK(client.read_to_eof());
      CHECK(client.received.rfind("HTTP/1.1 400 Bad Request", 0) == 0);
    }
  }
  SUBCASE("clients that close mid-head or mid-body do not disturb the next one") {
    for (int round = 0; round < 20; ++round) {
      raw_client quitter(server.port());
      quitter.send(round % 2 == 0 ? std::string("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Le")
                                  : post_head(1000) + "only ten b");
      quitter.close();
    }
    raw_client next(server.port());
    next.send(post_head(3) + "abc");
    CHECK(next.read_until("\r\n\r\n" + summary_of("abc")));
  }
}

TEST_CASE("http server: Expect: 100-continue gets 100 Continue before the body is sent") {
  watchdog guard("http 100-continue", 60);
  body_server server;
  // As curl does for a body over 1 MiB: the head, then a wait for the
  // interim answer before the body goes out (curl gives up waiting after
  // a second and sends anyway: every such upload a second late).
  raw_client client(server.port());
  const std::string body = pattern_body(4096);
  client.send(post_head(body.size(), "Expect: 100-continue\r\n"));
  REQUIRE(client.read_until("\r\n\r\n"));
  CHECK(client.received == "HTTP/1.1 100 Continue\r\n\r\n");
  client.send(body);
  CHECK(client.read_until("\r\n\r\n" + summary_of(body)));
  CHECK(client.received.find("HTTP/1.1 200 OK") != std::string::npos);

  // A body the server will refuse gets the refusal, not 100 Continue.
  raw_client too_big(server.port());
  too_big.send(post_head(body_limit + 1, "Expect: 100-continue\r\n"));
  CHECK(too_big.read_to_eof());
  CHECK(too_big.received.rfind("HTTP/1.1 413 Content Too Large", 0) == 0);
  CHECK(too_big.received.find("100 Continue") == std::string::npos);

  // The body sent at once with the head (the client did not wait): one
  // answer, the final one, and no stray 100 after it.
  raw_client eager(server.port());
  eager.send(post_head(3, "Expect: 100-continue\r\nConnection: close\r\n") + "xyz");
  CHECK(eager.read_to_eof());
  CHECK(eager.received.find("HTTP/1.1 200 OK") != std::string::npos);
  CHECK(eager.received.find("\r\n\r\n" + summary_of("xyz")) != std::string::npos);
  CHECK(eager.received.find("100 Continue", eager.received.find("200 OK")) == std::string::npos);
}

namespace {

std::atomic<int> handler_failures{0};

void throws_on_boom(const http::request& req, std::string& out) {
  if (req.target == "/boom") {
    throw std::runtime_error("handler failed");
  }
  http::append_response(out, 200, "OK", "text/plain", "fine", !req.keep_alive);
}

}  // namespace

TEST_CASE("http server: a handler that throws ends its connection, reported, others served") {
  watchdog guard("http handler exception", 60);
  handler_failures.store(0);
  canopy::executor_config config = reactor_config(2);
  config.on_detached_exception = [](std::exception_ptr) { handler_failures.fetch_add(1); };
  canopy::executor pool(config);
  io::reactor_timers timers(pool);
  auto listener = io::tcp_listener::bind(io::reactor::of(pool), io::endpoint::loopback_v4(0));
  auto server = pool.spawn(http::serve(listener, http::server_options{}, &throws_on_boom));

  raw_client boom(listener.local_endpoint().port());
  boom.send("GET /boom HTTP/1.1\r\nHost: x\r\n\r\n");
  CHECK(boom.read_to_eof());  // closed (or reset), not left hanging
  CHECK(boom.received.find("200 OK") == std::string::npos);
  CHECK(eventually([] { return handler_failures.load() == 1; }));

  raw_client fine(listener.local_endpoint().port());
  fine.send("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  CHECK(fine.read_to_eof());
  CHECK(fine.received.rfind("HTTP/1.1 200 OK", 0) == 0);
  server.cancel();
  pool.shutdown();
}

TEST_CASE("a task's sockets and locks are released however it ends: cancel, timeout, shutdown") {
  watchdog guard("release sockets", 60);
  const std::size_t before = canopy::testing::open_fd_count();
  canopy::mutex lock;
  std::atomic<int> waiting{0};
  {
    canopy::executor pool(reactor_config(2));
    io::reactor_timers timers(pool);
    io::reactor& reactor = io::reactor::of(pool);
    const std::size_t with_pool = canopy::testing::open_fd_count();
    // Holds a listener, a connected pair and the lock, and waits for ever.
    const auto holder = [&]() -> task<int> {
      auto held = co_await lock.lock();
      auto listener = io::tcp_listener::bind(reactor, io::endpoint::loopback_v4(0));
      auto client = co_await io::tcp_stream::connect(reactor, listener.local_endpoint());
      auto server = co_await listener.accept();
      waiting.fetch_add(1);
      std::byte byte{};
      co_return static_cast<int>(co_await server.read_some(std::span(&byte, 1)));
    };
    const auto no_lock = [&] {
      const canopy::mutex::guard taken = lock.try_lock();
      return !taken;
    };

    auto cancelled = pool.spawn(holder());
    REQUIRE(eventually([&] { return waiting.load() == 1; }));
    CHECK(no_lock());
    CHECK(cancelled.cancel());
    CHECK_THROWS_AS(cancelled.get(), canopy::task_cancelled);
    CHECK_FALSE(no_lock());
    CHECK(eventually([&] { return canopy::testing::open_fd_count() == with_pool; }));

    const bool timed_out = canopy::block_on(pool, [&]() -> task<bool> {
      auto outcome = co_await canopy::with_timeout(20ms, holder());
      co_return !outcome && outcome.error() == io::errc::timed_out;
    }());
    CHECK(timed_out);
    CHECK_FALSE(no_lock());
    CHECK(eventually([&] { return canopy::testing::open_fd_count() == with_pool; }));

    auto at_shutdown = pool.spawn(holder());
    REQUIRE(eventually([&] { return waiting.load() == 3; }));
    pool.shutdown();
    CHECK_THROWS_AS(at_shutdown.get(), canopy::task_cancelled);
    CHECK_FALSE(no_lock());
  }
  CHECK(canopy::testing::open_fd_count() == before);
}

TEST_CASE("udp: an empty datagram arrives as size 0; unix names with a NUL are refused") {
  watchdog guard("udp and unix edges", 30);
  canopy::executor pool(reactor_config(2));
  io::reactor& reactor = io::reactor::of(pool);
  auto receiver = io::udp_socket::bind(reactor, io::endpoint::loopback_v4(0));
  auto sender = io::udp_socket::bind(reactor, io::endpoint::loopback_v4(0));
  const io::endpoint to = receiver.local_endpoint();
  const io::endpoint from = sender.local_endpoint();

  const bool empty_then_full = canopy::block_on(pool, [&]() -> task<bool> {
    const std::size_t sent = co_await sender.send_to(std::span<const std::byte>(), to);
    std::byte payload[3] = {std::byte{1}, std::byte{2}, std::byte{3}};
    (void)co_await sender.send_to(payload, to);
    std::byte buffer[16];
    const io::datagram empty = co_await receiver.receive_from(buffer);
    const io::datagram full = co_await receiver.receive_from(buffer);
    co_return sent == 0 && empty.size == 0 && empty.from.port() == from.port() && full.size == 3 &&
        buffer[2] == std::byte{3};
  }());
  CHECK(empty_then_full);

  std::error_code error;
  (void)io::unix_endpoint::path(std::string_view("/tmp/a\0b", 8), error);
  CHECK(error == std::errc::invalid_argument);
  CHECK_THROWS_AS((void)io::unix_endpoint::path(""), std::system_error);
  CHECK_THROWS_AS((void)io::unix_endpoint::abstract(""), std::system_error);
  error.clear();
  (void)io::unix_endpoint::path(std::string(200, 'x'), error);
  CHECK(error == std::errc::filename_too_long);
}

TEST_CASE("http server: request and write timeouts of milliseconds::max() mean no limit") {
  watchdog guard("http timeouts without a limit", 60);
  canopy::executor pool(reactor_config(2));
  io::reactor_timers timers(pool);
  auto listener = io::tcp_listener::bind(io::reactor::of(pool), io::endpoint::loopback_v4(0));
  http::server_options options;
  options.request_timeout = std::chrono::milliseconds::max();
  options.write_timeout = std::chrono::milliseconds::max();
  auto server = pool.spawn(http::serve(listener, options, &body_summary));

  raw_client client(listener.local_endpoint().port());
  for (int i = 0; i < 3; ++i) {  // each answer restarts the request deadline
    client.send(post_head(3) + "abc");
    REQUIRE(client.read_until("\r\n\r\n" + summary_of("abc")));
    client.received.clear();
  }
  client.send("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  CHECK(client.read_to_eof());
  CHECK(client.received.rfind("HTTP/1.1 200 OK", 0) == 0);
  server.cancel();
  pool.shutdown();
}

TEST_CASE("http server: non-positive timeouts and a null handler are refused, named") {
  watchdog guard("http bad options", 30);
  canopy::executor pool(reactor_config(2));
  io::reactor_timers timers(pool);
  auto listener = io::tcp_listener::bind(io::reactor::of(pool), io::endpoint::loopback_v4(0));
  const auto refused = [&](http::server_options options, http::handler respond) {
    try {
      (void)pool.spawn(http::serve(listener, options, respond)).get();
    } catch (const std::invalid_argument& error) {
      return std::string(error.what());
    }
    return std::string("accepted");
  };
  http::server_options zero;
  zero.request_timeout = std::chrono::milliseconds(0);
  CHECK(refused(zero, &body_summary).find("request_timeout") != std::string::npos);
  http::server_options negative;
  negative.write_timeout = std::chrono::milliseconds(-5);
  CHECK(refused(negative, &body_summary).find("write_timeout") != std::string::npos);
  CHECK(refused(http::server_options{}, nullptr).find("handler") != std::string::npos);
  pool.shutdown();
}

TEST_CASE("resolve: a numeric port over 65535 is an error, not a port modulo 65536") {
  watchdog guard("resolve ports", 30);
  canopy::executor pool(reactor_config(2));
  const auto lookup = [&](std::string service) {
    return canopy::block_on(pool, [](std::string wanted) -> task<std::pair<std::error_code, int>> {
      std::error_code error;
      auto found = co_await io::resolve("127.0.0.1", std::move(wanted), error);
      co_return std::pair(error, found.empty() ? -1 : static_cast<int>(found.front().port()));
    }(std::move(service)));
  };
  CHECK(lookup("65535") == std::pair(std::error_code(), 65535));
  CHECK(lookup("0") == std::pair(std::error_code(), 0));
  CHECK(lookup("99999").first == io::resolve_errc::service_not_found);
  CHECK(lookup("65536").first == io::resolve_errc::service_not_found);
  CHECK(lookup("123456789012345678901234567890").first == io::resolve_errc::service_not_found);
  CHECK(lookup("-1").first == io::resolve_errc::service_not_found);
}
