// canopy::io TLS cipher and group choices on loopback, on whichever
// backend CANOPY_IO_BACKEND names: a server pinned to one TLS 1.3 suite
// and one group, or to one TLS 1.2 cipher, and our client offering the
// defaults negotiate exactly that; a client pinned to a suite the server
// does not allow fails the handshake on both sides; strings OpenSSL
// rejects throw, naming the option.
#include <doctest/doctest.h>
#include <openssl/obj_mac.h>
#include <openssl/ssl.h>

#include <canopy/io/tls.hpp>
#include <stdexcept>
#include <string>
#include <system_error>

#include "tests/io_test_support.hpp"
#include "tests/test_support.hpp"
#include "tests/tls_test_support.hpp"
#include "tests/watchdog.hpp"

namespace canopy::testing {
namespace {

using io::tcp_listener;
using io::tcp_stream;
using io::tls_context;
using io::tls_version;
using tls = io::tls_stream<tcp_stream>;

struct outcome {
  std::error_code error;
  std::string cipher;
  int group = 0;
};

outcome observe(const tls& stream, std::error_code error) {
  outcome seen{error, {}, 0};
  if (!error) {
    auto* ssl = static_cast<SSL*>(stream.native_handle());
    seen.cipher = SSL_CIPHER_get_name(SSL_get_current_cipher(ssl));
    seen.group = SSL_get_negotiated_group(ssl);
  }
  return seen;
}

// One connection's server side: the handshake and what it negotiated.
task<outcome> serve_one(tcp_listener& listener, tls_context context) {
  tls stream(co_await listener.accept(), context);
  std::error_code error;
  co_await stream.handshake(error);
  outcome seen = observe(stream, error);
  if (!error) {
    co_await stream.shutdown(error);
  }
  co_return seen;
}

task<outcome> visit(io::endpoint address, tls_context context) {
  tls stream(co_await tcp_stream::connect(address), context, "localhost");
  std::error_code error;
  co_await stream.handshake(error);
  outcome seen = observe(stream, error);
  if (!error) {
    co_await stream.shutdown(error);
  }
  co_return seen;
}

io::tls_server_options server_options(const test_certificates& certs) {
  io::tls_server_options options;
  options.certificate_chain_file = certs.path("server.pem");
  options.private_key_file = certs.path("server.key");
  return options;
}

io::tls_client_options client_options(const test_certificates& certs) {
  io::tls_client_options options;
  options.ca_file = certs.path("ca.pem");
  return options;
}

// Both sides of one connection.
struct both {
  outcome server;
  outcome client;
};

both connect(const tls_context& server, const tls_context& client) {
  loopback net;
  auto served = net.pool.spawn(serve_one(net.listener, server));
  both seen;
  seen.client = run(net.pool, visit(net.address, client), "the client");
  REQUIRE(served.wait_for(std::chrono::seconds(static_cast<long>(10 * timeout_scale()))));
  seen.server = served.get();
  return seen;
}

TEST_CASE("tls ciphers: a server's TLS 1.3 suite and group are what a default client gets") {
  const watchdog guard("tls ciphers 1.3", 60 * timeout_scale());
  const test_certificates certs;
  io::tls_server_options server = server_options(certs);
  // Neither OpenSSL's first suite nor its first group: the defaults alone
  // would not land here.
  server.ciphersuites = "TLS_AES_128_GCM_SHA256";
  server.groups = "P-256";
  const both seen =
      connect(tls_context::server(server), tls_context::client(client_options(certs)));
  REQUIRE_FALSE(seen.client.error);
  REQUIRE_FALSE(seen.server.error);
  CHECK(seen.client.cipher == "TLS_AES_128_GCM_SHA256");
  CHECK(seen.server.cipher == "TLS_AES_128_GCM_SHA256");
  CHECK(seen.client.group == NID_X9_62_prime256v1);
  CHECK(seen.server.group == NID_X9_62_prime256v1);

  server.groups = "X25519";
  const both x25519 =
      connect(tls_context::server(server), tls_context::client(client_options(certs)));
  REQUIRE_FALSE(x25519.client.error);
  CHECK(x25519.client.cipher == "TLS_AES_128_GCM_SHA256");
  CHECK(x25519.client.group == NID_X25519);
}

TEST_CASE("tls ciphers: a server's TLS 1.2 cipher list is what a default client gets") {
  const watchdog guard("tls ciphers 1.2", 60 * timeout_scale());
  const test_certificates certs;
  io::tls_server_options server = server_options(certs);
  server.max_version = tls_version::v1_2;
  server.cipher_list = "ECDHE-ECDSA-CHACHA20-POLY1305";
  const both seen =
      connect(tls_context::server(server), tls_context::client(client_options(certs)));
  REQUIRE_FALSE(seen.client.error);
  CHECK(seen.client.cipher == "ECDHE-ECDSA-CHACHA20-POLY1305");
  CHECK(seen.server.cipher == "ECDHE-ECDSA-CHACHA20-POLY1305");
}

TEST_CASE("tls ciphers: a client pinned to a suite the server refuses fails the handshake") {
  const watchdog guard("tls ciphers refused", 60 * timeout_scale());
  const test_certificates certs;
  io::tls_server_options server = server_options(certs);
  server.min_version = tls_version::v1_3;
  server.ciphersuites = "TLS_AES_128_GCM_SHA256";
  io::tls_client_options client = client_options(certs);
  client.ciphersuites = "TLS_CHACHA20_POLY1305_SHA256";
  const both seen = connect(tls_context::server(server), tls_context::client(client));
  REQUIRE(seen.client.error);
  REQUIRE(seen.server.error);
  CHECK(seen.server.error.message().find("no shared cipher") != std::string::npos);
  CHECK(seen.client.error.message().find("handshake failure") != std::string::npos);

  // Groups alike: no group in common.
  server.ciphersuites.clear();
  server.groups = "P-384";
  client.ciphersuites.clear();
  client.groups = "X25519";
  const both groups = connect(tls_context::server(server), tls_context::client(client));
  CHECK(groups.client.error);
  CHECK(groups.server.error);
}

TEST_CASE("tls ciphers: strings OpenSSL rejects throw, naming the option and the string") {
  const test_certificates certs;
  const auto names = [](const std::invalid_argument& failure, const char* option,
                        const char* value) {
    const std::string what = failure.what();
    CHECK(what.find(option) != std::string::npos);
    CHECK(what.find(value) != std::string::npos);
  };
  io::tls_server_options server = server_options(certs);
  server.ciphersuites = "TLS_NO_SUCH_SUITE";
  try {
    (void)tls_context::server(server);
    FAIL("no throw");
  } catch (const std::invalid_argument& failure) {
    names(failure, "ciphersuites", "TLS_NO_SUCH_SUITE");
  }
  server.ciphersuites.clear();
  server.cipher_list = "NO-SUCH-CIPHER";
  try {
    (void)tls_context::server(server);
    FAIL("no throw");
  } catch (const std::invalid_argument& failure) {
    names(failure, "cipher_list", "NO-SUCH-CIPHER");
  }
  io::tls_client_options client = client_options(certs);
  client.groups = "X99999";
  try {
    (void)tls_context::client(client);
    FAIL("no throw");
  } catch (const std::invalid_argument& failure) {
    names(failure, "groups", "X99999");
  }
  client.groups.clear();
  client.ciphersuites = "bogus";
  CHECK_THROWS_AS((void)tls_context::client(client), std::invalid_argument);
}

}  // namespace
}  // namespace canopy::testing
