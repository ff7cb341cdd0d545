// canopy::io mutual TLS through SNI, on whichever backend
// CANOPY_IO_BACKEND names: a context chosen by the client's server name
// brings its own client verification (whether a certificate is asked
// for and required, and which CA it must lead to), whatever the
// listener's context says, and a session made on another context does not
// let a client skip it. The certificates are made at run time beside
// the shared test certificates (tests/tls_test_support.hpp).
#include <doctest/doctest.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "coroutine/coroutine.hpp"
#include "io/io.hpp"
#include "io/tls/tls_stream.hpp"
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
using io::tls_version;
using tls = io::tls_stream<tcp_stream>;

// Adds to `certs`' folder a second CA for clients (clients-ca.pem), a
// client it signed (member.pem/key, CN=canopy-member) and a client the
// server CA signed (stranger.pem/key, CN=canopy-stranger).
void make_client_certificates(const test_certificates& certs) {
  const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes ";
  const std::string script =
      "set -e; cd '" + certs.path("") + "'\nopenssl req -x509" + ec +
      "-keyout clients-ca.key -out clients-ca.pem -days 2 -subj /CN=canopy-clients-ca\n"
      "openssl req -new" +
      ec +
      "-keyout member.key -out member.csr -subj /CN=canopy-member\n"
      "openssl x509 -req -in member.csr -CA clients-ca.pem -CAkey clients-ca.key"
      " -CAcreateserial -out member.pem -days 2\n"
      "openssl req -new" +
      ec +
      "-keyout stranger.key -out stranger.csr -subj /CN=canopy-stranger\n"
      "openssl x509 -req -in stranger.csr -CA ca.pem -CAkey ca.key -CAcreateserial"
      " -out stranger.pem -days 2\n";
  child_process make({"sh", "-c", script});
  const int status = make.wait(60);
  INFO("openssl said:\n", make.output());
  REQUIRE(status == 0);
}

// A server context for `certificate` (and server.key); `client_ca`
// non-empty: verify_client with that CA file.
tls_context server_context(const test_certificates& certs, const std::string& certificate,
                           const std::string& client_ca, tls_version max) {
  io::tls_server_options options;
  options.certificate_chain_file = certs.path(certificate);
  options.private_key_file = certs.path("server.key");
  options.max_version = max;
  options.verify_client = !client_ca.empty();
  if (!client_ca.empty()) {
    options.client_ca_file = certs.path(client_ca);
  }
  return tls_context::server(options);
}

// The listener's context (server.pem, `listener_ca` as above) with
// "other.example" served by other.pem with `chosen_ca`.
tls_context listener_context(const test_certificates& certs, const std::string& listener_ca,
                             const std::string& chosen_ca, tls_version max) {
  tls_context listener = server_context(certs, "server.pem", listener_ca, max);
  listener.add_server_name("other.example", server_context(certs, "other.pem", chosen_ca, max));
  return listener;
}

// `who`: the client's certificate and key of that name, or "" (none).
tls_context client_context(const test_certificates& certs, const std::string& who) {
  io::tls_client_options options;
  options.ca_file = certs.path("ca.pem");
  if (!who.empty()) {
    options.certificate_chain_file = certs.path(who + ".pem");
    options.private_key_file = certs.path(who + ".key");
  }
  return tls_context::client(options);
}

struct side {
  std::error_code error;  // the handshake's, else the first read's
  bool verified = false;
  std::string subject;
  std::string text;
  std::string server_name;  // the server's: the name it served
};

// The server: handshake; then what it learnt of the client, "hi", close_notify.
task<side> serve_one(tcp_listener& listener, tls_context context) {
  tls stream(co_await listener.accept(), context);
  side seen;
  co_await stream.handshake(seen.error);
  seen.verified = stream.peer_verified();
  seen.subject = stream.peer_subject();
  seen.server_name = std::string(stream.server_name());
  if (!seen.error) {
    co_await stream.write_all(bytes_of("hi"), seen.error);
    co_await stream.shutdown(seen.error);
  }
  co_return seen;
}

// The client, asking for "other.example": handshake, then read to the end
// (under TLS 1.3 a refusal arrives after the client's handshake finished).
task<side> connect_one(endpoint address, tls_context context) {
  tls stream(co_await tcp_stream::connect(address), context, "other.example");
  side seen;
  co_await stream.handshake(seen.error);
  std::byte buffer[16];
  while (!seen.error) {
    const std::size_t got = co_await stream.read_some(buffer, seen.error);
    if (got == 0) {
      break;
    }
    seen.text.append(reinterpret_cast<const char*>(buffer), got);
  }
  co_return seen;
}

std::pair<side, side> connect_pair(tls_context server_side, tls_context client_side) {
  loopback net;
  auto server = net.pool.spawn(serve_one(net.listener, std::move(server_side)));
  const side client = run(net.pool, connect_one(net.address, std::move(client_side)), "the client");
  REQUIRE(server.wait_for(std::chrono::milliseconds(static_cast<long>(10'000 * timeout_scale()))));
  return {server.get(), client};
}

constexpr tls_version versions[] = {tls_version::v1_2, tls_version::v1_3};

TEST_CASE("tls sni: a context chosen by SNI with verify_client refuses a client without one") {
  const watchdog guard("sni mutual refused", 60 * timeout_scale());
  const test_certificates certs;
  make_client_certificates(certs);
  for (const tls_version max : versions) {
    CAPTURE(static_cast<int>(max));
    const auto [server, client] =
        connect_pair(listener_context(certs, "", "clients-ca.pem", max), client_context(certs, ""));
    INFO("server: ", server.error.message(), "; client: ", client.error.message());
    CHECK(server.error.category() == io::tls_category());
    CHECK(server.error.message().find("did not return a certificate") != std::string::npos);
    CHECK_FALSE(server.verified);
    CHECK(client.error.category() == io::tls_category());
    CHECK(client.text.empty());
  }
}

TEST_CASE("tls sni: a context chosen by SNI verifies a client against its own CA") {
  const watchdog guard("sni mutual accepted", 60 * timeout_scale());
  const test_certificates certs;
  make_client_certificates(certs);
  for (const tls_version max : versions) {
    CAPTURE(static_cast<int>(max));
    // The listener's context verifies nobody: its store holds no CA, so
    // only the chosen context's store can verify the member.
    const auto [server, client] = connect_pair(listener_context(certs, "", "clients-ca.pem", max),
                                               client_context(certs, "member"));
    INFO("server: ", server.error.message(), "; client: ", client.error.message());
    CHECK(!server.error);
    CHECK(server.verified);
    CHECK(server.subject == "CN=canopy-member");
    CHECK(!client.error);
    CHECK(client.text == "hi");
  }
}

TEST_CASE("tls sni: a client certificate from the listener's CA, not the chosen one, is refused") {
  const watchdog guard("sni mutual other CA", 60 * timeout_scale());
  const test_certificates certs;
  make_client_certificates(certs);
  for (const tls_version max : versions) {
    CAPTURE(static_cast<int>(max));
    // The listener's context would accept the stranger (ca.pem signed it);
    // the chosen context trusts only clients-ca.pem.
    const auto [server, client] =
        connect_pair(listener_context(certs, "ca.pem", "clients-ca.pem", max),
                     client_context(certs, "stranger"));
    INFO("server: ", server.error.message(), "; client: ", client.error.message());
    CHECK(io::is_certificate_error(server.error));
    CHECK_FALSE(server.verified);
    CHECK(client.error.category() == io::tls_category());
    CHECK(client.text.empty());
  }
}

TEST_CASE("tls sni: a context chosen by SNI without verify_client asks for no certificate") {
  const watchdog guard("sni mutual off", 60 * timeout_scale());
  const test_certificates certs;
  make_client_certificates(certs);
  for (const tls_version max : versions) {
    CAPTURE(static_cast<int>(max));
    // The listener's context would require one; the chosen one does not,
    // so neither a client without one nor one with a certificate is asked.
    for (const char* who : {"", "member"}) {
      CAPTURE(who);
      const auto [server, client] = connect_pair(listener_context(certs, "clients-ca.pem", "", max),
                                                 client_context(certs, who));
      INFO("server: ", server.error.message(), "; client: ", client.error.message());
      CHECK(!server.error);
      CHECK_FALSE(server.verified);
      CHECK(server.subject.empty());  // not asked: no certificate sent
      CHECK(!client.error);
      CHECK(client.text == "hi");
    }
  }
}

// Serves `count` connections one after another: what it saw of each.
task<std::vector<side>> serve_some(tcp_listener& listener, tls_context context, int count) {
  std::vector<side> seen;
  for (int i = 0; i < count; ++i) {
    seen.push_back(co_await serve_one(listener, context));
  }
  co_return seen;
}

TEST_CASE("tls sni: a session made on another context does not skip the chosen one's check") {
  const watchdog guard("sni mutual resumption", 120 * timeout_scale());
  const test_certificates certs;
  make_client_certificates(certs);
  const std::string saved = certs.path("session.pem");
  for (const bool v13 : {false, true}) {
    CAPTURE(v13);
    loopback net;
    auto server = net.pool.spawn(serve_some(
        net.listener, listener_context(certs, "", "clients-ca.pem", tls_version::v1_3), 4));
    // openssl s_client as a client that offers any session it has, to any name.
    const auto s_client = [&](const char* name, const char* who, const char* option) {
      std::vector<std::string> argv{
          "openssl",     "s_client",
          "-connect",    "127.0.0.1:" + std::to_string(net.address.port()),
          "-servername", name,
          "-CAfile",     certs.path("ca.pem"),
          "-ign_eof",    v13 ? "-tls1_3" : "-tls1_2",
          option,        saved};
      if (*who != '\0') {
        argv.insert(argv.end(), {"-cert", certs.path(std::string(who) + ".pem"), "-key",
                                 certs.path(std::string(who) + ".key")});
      }
      child_process client(argv);
      client.wait(30);
      return client.output();
    };
    // A session from the listener's own context (no client certificate),
    // offered for the name whose context verifies clients.
    (void)s_client("localhost", "", "-sess_out");
    const std::string crossed = s_client("other.example", "", "-sess_in");
    INFO("crossing s_client said:\n", crossed);
    // And a member's session on the verifying context, offered there again.
    (void)s_client("other.example", "member", "-sess_out");
    const std::string again = s_client("other.example", "member", "-sess_in");
    INFO("returning s_client said:\n", again);
    REQUIRE(server.wait_for(std::chrono::seconds(static_cast<long>(10 * timeout_scale()))));
    const std::vector<side> seen = server.get();
    REQUIRE(seen.size() == 4);
    if (v13) {
      // TLS 1.3 resumes with the name the client asks for now: refused.
      CHECK(seen[1].error.category() == io::tls_category());
      CHECK(crossed.find("alert handshake failure") != std::string::npos);
    } else {
      // TLS 1.2 resumes with the session's own name: served as the
      // listener's context, which asks for no certificate.
      CHECK(!seen[1].error);
      CHECK(seen[1].server_name == "localhost");
    }
    CHECK_FALSE(seen[1].verified);
    CHECK(!seen[3].error);
    CHECK(again.find("Reused") != std::string::npos);
    CHECK(seen[3].verified);
    CHECK(seen[3].subject == "CN=canopy-member");
  }
}

}  // namespace
}  // namespace canopy::testing
