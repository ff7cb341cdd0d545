// canopy::io TLS session resumption on loopback, on whichever backend
// CANOPY_IO_BACKEND names: our client resumes against our server (TLS 1.2
// and 1.3: resumed() false on the first connection, true on the next; a
// server with session_resumption off never resumes); `openssl s_client
// -sess_out`, then `-sess_in`, against our server reports "Reused"; a
// client that resets its connections mid-handshake leaves no descriptor
// behind and the server serving. Fails, not skips,
// without openssl: ./run.sh installs it.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <canopy/io/tls.hpp>
#include <chrono>
#include <cstddef>
#include <filesystem>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "io/tls/tls_engine.hpp"
#include "tests/child_process.hpp"
#include "tests/io_test_support.hpp"
#include "tests/test_support.hpp"
#include "tests/tls_test_support.hpp"
#include "tests/watchdog.hpp"

namespace canopy::testing {
namespace {

using io::endpoint;
using io::tcp_listener;
using io::tcp_stream;
using io::tls_context;
using io::tls_session;
using io::tls_version;
using tls = io::tls_stream<tcp_stream>;

tls_context server_context(const test_certificates& certs, tls_version version,
                           bool resumption = true) {
  io::tls_server_options options;
  options.certificate_chain_file = certs.path("server.pem");
  options.private_key_file = certs.path("server.key");
  options.min_version = version;
  options.max_version = version;
  options.session_resumption = resumption;
  return tls_context::server(options);
}

// One connection's server side: handshake, "hello\n", then (unless
// `close_first`) read to the client's end, then close_notify; whether the
// handshake resumed a session.
task<bool> greet(tls stream, bool close_first = false) {
  std::error_code error;
  co_await stream.handshake(error);
  if (error) {
    co_return false;
  }
  const bool resumed = stream.resumed();
  co_await stream.write_all(bytes_of("hello\n"), error);
  // No co_await in a short-circuited operand: GCC 12 destroys the
  // unevaluated operand's task temporary all the same.
  std::byte buffer[256];
  while (!error && !close_first) {
    if (co_await stream.read_some(buffer, error) == 0) {
      break;
    }
  }
  co_await stream.shutdown(error);
  co_return resumed;
}

// Serves `count` connections one after another; how many resumed.
task<int> serve_resumed(tcp_listener& listener, tls_context context, int count,
                        bool close_first = false) {
  int resumed = 0;
  for (int i = 0; i < count; ++i) {
    resumed += co_await greet(tls(co_await listener.accept(), context), close_first) ? 1 : 0;
  }
  co_return resumed;
}

struct client_view {
  bool resumed = false;
  bool session_before_read = false;
  tls_session session;
};

// One client connection offering `offer`: what it saw.
task<client_view> visit(endpoint address, tls_context context, tls_session offer) {
  tls stream(co_await tcp_stream::connect(address), context, "localhost");
  stream.offer_session(offer);
  co_await stream.handshake();
  client_view view;
  view.resumed = stream.resumed();
  view.session_before_read = stream.session().valid();
  std::byte buffer[16];
  std::size_t got = 0;
  while (got < 6) {
    got += co_await stream.read_some(std::span(buffer).subspan(got));
  }
  view.session = stream.session();
  co_await stream.shutdown();
  co_return view;
}

TEST_CASE("tls resume: our client resumes against our server on TLS 1.2 and 1.3") {
  const watchdog guard("tls resume", 60 * timeout_scale());
  const test_certificates certs;
  io::tls_client_options client_options;
  client_options.ca_file = certs.path("ca.pem");
  const tls_context client = tls_context::client(client_options);
  for (const tls_version version : {tls_version::v1_2, tls_version::v1_3}) {
    const bool v13 = version == tls_version::v1_3;
    CAPTURE(v13);
    loopback net;
    auto server = net.pool.spawn(serve_resumed(net.listener, server_context(certs, version), 3));
    const client_view first = run(net.pool, visit(net.address, client, {}), "the first client");
    CHECK_FALSE(first.resumed);
    // TLS 1.3's ticket comes after the handshake, 1.2's within it.
    CHECK(first.session_before_read == !v13);
    REQUIRE(first.session.valid());
    const client_view second =
        run(net.pool, visit(net.address, client, first.session), "the second client");
    CHECK(second.resumed);
    REQUIRE(second.session.valid());
    const client_view third =
        run(net.pool, visit(net.address, client, second.session), "the third client");
    CHECK(third.resumed);
    REQUIRE(server.wait_for(std::chrono::seconds(static_cast<long>(10 * timeout_scale()))));
    CHECK(server.get() == 2);  // the server saw the same
  }
}

TEST_CASE("tls resume: a server with session_resumption off never resumes") {
  const watchdog guard("tls resume off", 60 * timeout_scale());
  const test_certificates certs;
  io::tls_client_options client_options;
  client_options.ca_file = certs.path("ca.pem");
  const tls_context client = tls_context::client(client_options);
  for (const tls_version version : {tls_version::v1_2, tls_version::v1_3}) {
    CAPTURE(version == tls_version::v1_3);
    loopback net;
    // A session from a server that does resume, offered to one that does not.
    tls_session offered;
    {
      loopback other;
      auto giver =
          other.pool.spawn(serve_resumed(other.listener, server_context(certs, version), 1));
      offered = run(other.pool, visit(other.address, client, {}), "the giving client").session;
      REQUIRE(giver.wait_for(std::chrono::seconds(static_cast<long>(10 * timeout_scale()))));
    }
    REQUIRE(offered.valid());
    auto server =
        net.pool.spawn(serve_resumed(net.listener, server_context(certs, version, false), 2));
    const client_view first = run(net.pool, visit(net.address, client, offered), "a client");
    CHECK_FALSE(first.resumed);
    // No ticket and no cache: nothing the client could offer next time.
    CHECK_FALSE(first.session.valid());
    const client_view second = run(net.pool, visit(net.address, client, offered), "a client");
    CHECK_FALSE(second.resumed);
    REQUIRE(server.wait_for(std::chrono::seconds(static_cast<long>(10 * timeout_scale()))));
    CHECK(server.get() == 0);
  }
}

TEST_CASE("tls resume: offer_session only on a client stream before its handshake") {
  const watchdog guard("tls offer", 60 * timeout_scale());
  const test_certificates certs;
  loopback net;
  const tls_context server_side = server_context(certs, tls_version::v1_3);
  auto server = net.pool.spawn([](tcp_listener& listener, tls_context context) -> task<bool> {
    tls stream(co_await listener.accept(), context);
    bool refused = false;
    try {
      stream.offer_session({});
    } catch (const std::logic_error&) {
      refused = true;
    }
    co_await greet(std::move(stream));
    co_return refused;
  }(net.listener, server_side));
  io::tls_client_options client_options;
  client_options.ca_file = certs.path("ca.pem");
  const bool late_refused = run(
      net.pool,
      [](endpoint address, tls_context context) -> task<bool> {
        tls stream(co_await tcp_stream::connect(address), context, "localhost");
        CHECK_FALSE(stream.session().valid());  // no handshake yet
        co_await stream.handshake();
        bool refused = false;
        try {
          stream.offer_session({});
        } catch (const std::logic_error&) {
          refused = true;
        }
        co_await stream.shutdown();
        co_return refused;
      }(net.address, tls_context::client(client_options)),
      "the client");
  CHECK(late_refused);
  REQUIRE(server.wait_for(std::chrono::seconds(static_cast<long>(10 * timeout_scale()))));
  CHECK(server.get());
}

TEST_CASE("tls resume: openssl s_client -sess_out, then -sess_in against our server: Reused") {
  const watchdog guard("tls s_client sess_in", 120 * timeout_scale());
  const test_certificates certs;
  const std::string saved = certs.path("session.pem");
  for (const tls_version version : {tls_version::v1_2, tls_version::v1_3}) {
    const bool v13 = version == tls_version::v1_3;
    CAPTURE(v13);
    loopback net;
    // The server closes first (close_notify): s_client, ignoring its empty
    // stdin, reads to the end, so a TLS 1.3 ticket is in before it saves.
    auto server =
        net.pool.spawn(serve_resumed(net.listener, server_context(certs, version), 2, true));
    const auto s_client = [&](const char* option) {
      child_process client({"openssl", "s_client", "-connect",
                            "127.0.0.1:" + std::to_string(net.address.port()), "-CAfile",
                            certs.path("ca.pem"), "-verify_return_error", "-ign_eof",
                            v13 ? "-tls1_3" : "-tls1_2", option, saved});
      CHECK(client.wait(30) == 0);
      return client.output();
    };
    const std::string first = s_client("-sess_out");
    INFO("first s_client said:\n", first);
    CHECK(first.find(v13 ? "New, TLSv1.3" : "New, TLSv1.2") != std::string::npos);
    const std::string second = s_client("-sess_in");
    INFO("second s_client said:\n", second);
    CHECK(second.find(v13 ? "Reused, TLSv1.3" : "Reused, TLSv1.2") != std::string::npos);
    REQUIRE(server.wait_for(std::chrono::seconds(static_cast<long>(10 * timeout_scale()))));
    CHECK(server.get() == 1);  // the second connection, as the server saw it
  }
}

// The process's open descriptors.
std::size_t open_descriptors() {
  std::size_t count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)entry;
    ++count;
  }
  return count;
}

// A real ClientHello, made by a client engine that is never answered.
std::string client_hello(const tls_context& client) {
  io::detail::tls_engine engine(client, true, "localhost");
  std::error_code error;
  REQUIRE(engine.handshake(error) == io::detail::tls_step::want_read);
  REQUIRE(engine.claim_output());
  std::vector<std::byte> out;
  REQUIRE(engine.take_output(out));
  engine.release_output();
  return {reinterpret_cast<const char*>(out.data()), out.size()};
}

// A blocking socket connected to 127.0.0.1:port.
int connect_to(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
  return fd;
}

// Closes with a reset (RST), not a FIN: SO_LINGER with a zero timeout.
void reset(int fd) {
  const linger abrupt{1, 0};
  CHECK(::setsockopt(fd, SOL_SOCKET, SO_LINGER, &abrupt, sizeof abrupt) == 0);
  ::close(fd);
}

TEST_CASE("tls: clients that reset mid-handshake leave no descriptor behind; the server serves") {
  const watchdog guard("tls abrupt handshakes", 120 * timeout_scale());
  const test_certificates certs;
  io::tls_client_options client_options;
  client_options.ca_file = certs.path("ca.pem");
  const tls_context client = tls_context::client(client_options);
  const std::string hello = client_hello(client);
  REQUIRE(hello.size() > 40);
  loopback net;
  std::stop_source stop;
  io::http::server_options options;
  options.request_timeout = std::chrono::milliseconds(static_cast<long>(5000 * timeout_scale()));
  auto server = net.pool.spawn(io::http::serve(
      net.listener, server_context(certs, tls_version::v1_3), options,
      [](const io::http::request&) { return std::string("served"); }, stop.get_token()));
  // The count once the server's start has settled (a descriptor the pool
  // or the serve task still holds while starting would otherwise be
  // counted in `before` and be missing later, which is no leak).
  std::size_t before = open_descriptors();
  for (int settle = 0; settle < 40; ++settle) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const std::size_t now = open_descriptors();
    if (now == before) {
      break;
    }
    before = now;
  }
  const long total = 10'000 / stress_divisor();
  constexpr int batch = 16;
  long answered = 0;  // connections the server had answered (a ServerHello) before the reset
  for (long done = 0; done < total; done += batch) {
    // A batch open at once, each cut at a different point: right after
    // the connect, after part of a ClientHello, after the whole of one
    // and the server's first answer (the server then waits for the
    // client's Finished).
    int sockets[batch];
    for (int i = 0; i < batch; ++i) {
      sockets[i] = connect_to(net.address.port());
      const int kind = static_cast<int>((done + i) % 3);
      if (kind != 0) {
        const std::size_t length = kind == 1 ? hello.size() / 2 : hello.size();
        REQUIRE(::send(sockets[i], hello.data(), length, MSG_NOSIGNAL) ==
                static_cast<ssize_t>(length));
      }
    }
    for (int i = 0; i < batch; ++i) {
      if ((done + i) % 3 == 2) {
        pollfd ready{sockets[i], POLLIN, 0};
        char first = 0;
        if (::poll(&ready, 1, static_cast<int>(5000 * timeout_scale())) == 1 &&
            ::recv(sockets[i], &first, 1, 0) == 1 && first == 0x16) {  // a handshake record
          ++answered;
        }
      }
      reset(sockets[i]);
    }
  }
  CHECK(answered >= total / 3 - 1);
  // Every connection the server took is closed again.
  std::size_t after = 0;
  // No descriptor left behind: none more than before (fewer means one the
  // pool held at the start was closed since, not a leak).
  CHECK(eventually([&] { return (after = open_descriptors()) <= before; }, 20));
  CHECK(after <= before);
  // And a whole handshake and request still work.
  const std::string page = run(
      net.pool,
      [](endpoint address, tls_context context) -> task<std::string> {
        tls stream(co_await tcp_stream::connect(address), context, "localhost");
        co_await stream.handshake();
        co_await stream.write_all(
            bytes_of("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
        std::string page;
        std::byte buffer[1024];
        std::error_code error;
        for (;;) {
          const std::size_t got = co_await stream.read_some(buffer, error);
          if (got == 0) {
            break;
          }
          page.append(reinterpret_cast<const char*>(buffer), got);
        }
        co_return page;
      }(net.address, client),
      "the last client");
  INFO("page:\n", page);
  CHECK(page.starts_with("HTTP/1.1 200"));
  CHECK(page.find("served") != std::string::npos);
  stop.request_stop();
  REQUIRE(server.wait_for(std::chrono::seconds(static_cast<long>(10 * timeout_scale()))));
  CHECK_FALSE(server.get());
}

}  // namespace
}  // namespace canopy::testing
