// canopy::io TLS session resumption on loopback, on whichever backend
// CANOPY_IO_BACKEND names: our client resumes against our server (TLS 1.2
// and 1.3: resumed() false on the first connection, true on the next; a
// server with session_resumption off never resumes); `openssl s_client
// -sess_out`, then `-sess_in`, against our server reports "Reused"; a
// client that resets its connections mid-handshake leaves no descriptor
// behind and the server serving. Fails, not skips,
// without openssl: ./run.sh installs it.
#include <doctest/doctest.h>

#include <canopy/io/tls.hpp>
#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

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

}  // namespace
}  // namespace canopy::testing
